/* Mixed: a floating-point kernel, an integer kernel, a byte copy and a branchy scan in one
 * program, repeated REPS times (argv[1]). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 2048

static double v[N], w[N];
static uint32_t keys[N];
static char src[N], dst[N];

static double saxpy_norm(double a) {
    double s = 0.0;
    for (int i = 0; i < N; i++) {
        w[i] = a * v[i] + w[i] * 0.5;
        s += w[i] * v[i];
    }
    return s;
}

static uint32_t mix_keys(void) {
    uint32_t h = 2166136261u;
    for (int i = 0; i < N; i++) {
        h = (h ^ keys[i]) * 16777619u;
        h ^= h >> 15;
    }
    return h;
}

static void copy_bytes(void) {
    for (int i = 0; i < N; i++)
        dst[i] = src[i] ^ (char)i;
}

static int scan(void) {
    int count = 0;
    for (int i = 0; i < N; i++) {
        if (keys[i] & 4)
            count += dst[i] > 0;
        else if (keys[i] & 8)
            count--;
    }
    return count;
}

int main(int argc, char **argv) {
    long reps = argc > 1 ? atol(argv[1]) : 1;
    for (int i = 0; i < N; i++) {
        v[i] = i * 0.001;
        w[i] = 1.0;
        keys[i] = (uint32_t)i * 2654435761u;
        src[i] = (char)(i * 7);
    }
    double f = 0.0;
    long n = 0;
    for (long r = 0; r < reps; r++) {
        f += saxpy_norm(0.5);
        n += mix_keys();
        copy_bytes();
        n += scan();
    }
    printf("%g %ld\n", f, n);
    return 0;
}
