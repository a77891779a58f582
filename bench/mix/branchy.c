/* Branchy: data-dependent decisions on pseudo-random bytes (a histogram by thresholds, a
 * run-length count) and binary searches, repeated REPS times (argv[1]). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 4096

static uint8_t bytes[N];
static int sorted[N];

static long classify(void) {
    long low = 0, mid = 0, high = 0, runs = 0;
    for (int i = 0; i < N; i++) {
        uint8_t b = bytes[i];
        if (b < 64)
            low++;
        else if (b < 160)
            mid += b & 3;
        else
            high ^= b;
        if (i > 0 && (b & 1) != (bytes[i - 1] & 1))
            runs++;
    }
    return low + mid + high + runs;
}

static long searches(void) {
    long found = 0;
    for (int k = 0; k < 512; k++) {
        int key = (int)bytes[k] * 37, lo = 0, hi = N - 1;
        while (lo <= hi) {
            int m = (lo + hi) / 2;
            if (sorted[m] == key) {
                found++;
                break;
            }
            if (sorted[m] < key)
                lo = m + 1;
            else
                hi = m - 1;
        }
    }
    return found;
}

int main(int argc, char **argv) {
    long reps = argc > 1 ? atol(argv[1]) : 1;
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        bytes[i] = (uint8_t)(s >> 24);
        sorted[i] = 3 * i;
    }
    long acc = 0;
    for (long r = 0; r < reps; r++)
        acc += classify() + searches();
    printf("%ld\n", acc);
    return 0;
}
