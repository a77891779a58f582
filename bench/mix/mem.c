/* Memory-bound: a dependent random walk over 64 MiB (each step's address depends on the
 * value loaded before) and a strided sum over the same array, STEPS each per repetition,
 * repeated REPS times (argv[1]). The array is filled by memset (in libc). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORDS (8u << 20) /* 64 MiB of uint64_t */
#define STEPS 4096

static uint64_t walk(const uint64_t *a, uint64_t i) {
    for (int s = 0; s < STEPS; s++)
        i = (i * 6364136223846793005ull + 1442695040888963407ull + a[i]) & (WORDS - 1);
    return i;
}

static uint64_t strided(const uint64_t *a, uint64_t start) {
    uint64_t sum = 0;
    for (int s = 0; s < STEPS; s++)
        sum += a[(start + (uint64_t)s * 16) & (WORDS - 1)];
    return sum;
}

int main(int argc, char **argv) {
    long reps = argc > 1 ? atol(argv[1]) : 1;
    uint64_t *a = malloc(WORDS * sizeof *a);
    if (!a)
        return 1;
    memset(a, 1, WORDS * sizeof *a);
    uint64_t i = 1, acc = 0;
    for (long r = 0; r < reps; r++) {
        i = walk(a, i);
        acc += strided(a, (uint64_t)r * STEPS * 16);
    }
    printf("%llu %llu\n", (unsigned long long)i, (unsigned long long)acc);
    return 0;
}
