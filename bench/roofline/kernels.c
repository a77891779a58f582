/* Kernels for bench/roofline.py: the paper's base test (a[i] = a[i]*c[i] + z, K chained
 * multiply-adds, 24 bytes and 2K FLOPs per iteration) and its mixed memory+L2 test (Fig. 5:
 * a(i,j,k) = c(i,j-1,k)*c(i,j,k) + c(i,j+1,k), widened by ±R rows and extra multiply-adds).
 *
 * usage: kernels base K N          (N doubles per array)
 *        kernels mixed R EXTRA     (rows of 2016 doubles; 3 memory and 2R L2 references,
 *                                   2R + 2·EXTRA FLOPs per iteration)
 * prints: median GFLOP/s over 5 timed runs of at least 0.1 s each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static volatile double sink;

/* Eight independent AVX2 chains hide the FMA latency (what the paper's compiler did by
 * software pipelining): blocks of B = 32 doubles, n a multiple of B. */
enum { B = 32, V = 8 };
typedef double v4 __attribute__((vector_size(32), aligned(8)));

#define LOAD(p) (*(const v4 *)(p))
#define STORE(p, x) (*(v4 *)(p) = (x))

#define BASE(K)                                                                   \
    static void base##K(double *restrict a, const double *restrict c, long n, double z) { \
        for (long i = 0; i < n; i += B) {                                         \
            v4 x[V];                                                              \
            for (int l = 0; l < V; l++) x[l] = LOAD(a + i + 4 * l);               \
            for (int t = 0; t < K; t++)                                           \
                for (int l = 0; l < V; l++) x[l] = x[l] * LOAD(c + i + 4 * l) + z; \
            for (int l = 0; l < V; l++) STORE(a + i + 4 * l, x[l]);               \
        }                                                                         \
    }
BASE(1) BASE(2) BASE(4) BASE(8) BASE(32)

typedef void (*base_fn)(double *restrict, const double *restrict, long, double);

static base_fn base_kernel(int k) {
    switch (k) {
    case 1: return base1;
    case 2: return base2;
    case 4: return base4;
    case 8: return base8;
    case 32: return base32;
    default: return NULL;
    }
}

enum { N1 = 2016, N2 = 64, N3 = 64 }; /* N1 is a multiple of B */

/* One plane sweep of the mixed kernel with R row pairs and EXTRA multiply-adds on c(j). */
#define MIXED(R, EXTRA)                                                           \
    static void mixed_##R##_##EXTRA(double *restrict a, const double *restrict c) { \
        for (long k = 0; k < N3; k++)                                             \
            for (long j = R; j < N2 - R; j++) {                                   \
                const double *cj = c + (k * N2 + j) * N1;                         \
                double *aj = a + (k * N2 + j) * N1;                               \
                for (long i = 0; i < N1; i += B) {                                \
                    v4 x[V];                                                      \
                    for (int l = 0; l < V; l++) {                                 \
                        const double *p = cj + i + 4 * l;                         \
                        x[l] = LOAD(p - N1) * LOAD(p) + LOAD(p + N1);             \
                    }                                                             \
                    for (int r = 2; r <= R; r++)                                  \
                        for (int l = 0; l < V; l++) {                             \
                            const double *p = cj + i + 4 * l;                     \
                            x[l] = x[l] * LOAD(p + r * N1) + LOAD(p - r * N1);    \
                        }                                                         \
                    for (int e = 0; e < EXTRA; e++)                               \
                        for (int l = 0; l < V; l++)                               \
                            x[l] = x[l] * LOAD(cj + i + 4 * l) + 0.25;            \
                    for (int l = 0; l < V; l++) STORE(aj + i + 4 * l, x[l]);      \
                }                                                                 \
            }                                                                     \
    }
MIXED(1, 0) MIXED(3, 0) MIXED(5, 0) MIXED(5, 15)

static int cmp(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: kernels base K N | kernels mixed R EXTRA\n");
        return 2;
    }
    double rates[5];
    if (strcmp(argv[1], "base") == 0) {
        int k = atoi(argv[2]);
        long n = atol(argv[3]);
        base_fn f = base_kernel(k);
        if (!f || n <= 0 || n % B) return 2;
        double *a = aligned_alloc(64, n * sizeof(double)), *c = aligned_alloc(64, n * sizeof(double));
        for (long i = 0; i < n; i++) a[i] = 1.0, c[i] = 0.5;
        f(a, c, n, 1.0);
        for (int run = 0; run < 5; run++) {
            long reps = 0;
            double t0 = now(), t;
            do { f(a, c, n, 1.0); reps++; } while ((t = now() - t0) < 0.1);
            rates[run] = 2.0 * k * n * reps / t / 1e9;
        }
        sink = a[n / 2];
    } else if (strcmp(argv[1], "mixed") == 0) {
        int r = atoi(argv[2]), extra = atoi(argv[3]);
        void (*f)(double *restrict, const double *restrict) =
            r == 1 && extra == 0 ? mixed_1_0 : r == 3 && extra == 0 ? mixed_3_0
            : r == 5 && extra == 0 ? mixed_5_0 : r == 5 && extra == 15 ? mixed_5_15 : NULL;
        if (!f) return 2;
        size_t n = (size_t)N1 * N2 * N3;
        double *a = aligned_alloc(64, n * sizeof(double)), *c = aligned_alloc(64, n * sizeof(double));
        for (size_t i = 0; i < n; i++) a[i] = 0.0, c[i] = 0.5;
        double iterations = (double)N3 * (N2 - 2 * r) * N1, flops = 2.0 * r + 2.0 * extra;
        f(a, c);
        for (int run = 0; run < 5; run++) {
            long reps = 0;
            double t0 = now(), t;
            do { f(a, c); reps++; } while ((t = now() - t0) < 0.1);
            rates[run] = flops * iterations * reps / t / 1e9;
        }
        sink = a[n / 2];
    } else {
        return 2;
    }
    qsort(rates, 5, sizeof(double), cmp);
    printf("%.4f\n", rates[2]);
    return 0;
}
