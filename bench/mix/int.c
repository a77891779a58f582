/* Integer-heavy: FNV-1a and xorshift hashing, bit counting, on an L1-resident array,
 * repeated REPS times (argv[1]). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define N 2048

static uint32_t data[N];

static uint64_t fnv(void) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < N; i++) {
        h ^= data[i];
        h *= 1099511628211ull;
    }
    return h;
}

static uint64_t xorshift_bits(void) {
    uint64_t s = 88172645463325252ull, bits = 0;
    for (int i = 0; i < N; i++) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        uint64_t v = s & data[i];
        v = v - ((v >> 1) & 0x5555555555555555ull);
        v = (v & 0x3333333333333333ull) + ((v >> 2) & 0x3333333333333333ull);
        bits += (((v + (v >> 4)) & 0x0f0f0f0f0f0f0f0full) * 0x0101010101010101ull) >> 56;
    }
    return bits;
}

int main(int argc, char **argv) {
    long reps = argc > 1 ? atol(argv[1]) : 1;
    for (int i = 0; i < N; i++)
        data[i] = (uint32_t)i * 2654435761u;
    uint64_t acc = 0;
    for (long r = 0; r < reps; r++)
        acc += fnv() ^ xorshift_bits();
    printf("%llu\n", (unsigned long long)acc);
    return 0;
}
