/*
 * A Himeno-shaped benchmark: Jacobi iteration of the pressure Poisson equation in general
 * curvilinear coordinates, a 19-point stencil over a 3D grid, with statically allocated
 * arrays (the shape of the sequential, static-allocation C benchmark the loop-profiling
 * paper measures; spec 004 §4). Written for loopscope's profiling benchmark
 * (bench/profile_overhead.sh); not RIKEN's code.
 *
 *   himeno [SIZE [ITERATIONS]]
 *     SIZE        XS (33x33x65), S (65x65x129), M (129x129x257, default) or IxJxK
 *                 (grid points per axis, boundaries included; each axis 3..M's extent)
 *     ITERATIONS  Jacobi sweeps (default 24)
 *
 * Prints the grid, the sweeps, the seconds of the timed sweeps, MFLOPS (34 floating-point
 * operations per interior point and sweep, the count Himeno figures are conventionally
 * reported with, so figures stay comparable; the sweep itself does 37) and the residual
 * gosa of the last sweep.
 *
 * The unknown p lives on an I x J x K grid, k varying fastest. For each interior point the
 * discretised operator couples p to its six face neighbours (coefficients a0..a2 forward,
 * c0..c2 backward) and to the twelve edge neighbours through the three mixed second
 * derivatives d2p/didj, d2p/djdk, d2p/didk (coefficients b0..b2). a3 is the inverse of the
 * diagonal, wrk1 the source term, bnd masks boundary cells. One sweep computes the Jacobi
 * update into wrk2, sums the squared update as the residual, then copies wrk2 into p.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The largest grid the static arrays hold: size M. */
#define MAX_I 129
#define MAX_J 129
#define MAX_K 257
#define MAX_POINTS ((size_t)MAX_I * MAX_J * MAX_K)

static float p[MAX_POINTS];
static float a[4][MAX_POINTS];
static float b[3][MAX_POINTS];
static float c[3][MAX_POINTS];
static float bnd[MAX_POINTS];
static float wrk1[MAX_POINTS];
static float wrk2[MAX_POINTS];

static int ni, nj, nk; /* grid extents in use */
static size_t stride_i, stride_j; /* k is contiguous */

/* set_up and jacobi have external linkage, as in a program split over files, so the
 * compiler keeps them as functions and a profile shows them as such. */
void set_up(void);
float jacobi(int sweeps);

#define AT(i, j, k) ((size_t)(i) * stride_i + (size_t)(j) * stride_j + (size_t)(k))

static const float relaxation = 0.8f;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int parse_size(const char *text)
{
    static const struct { const char *name; int i, j, k; } named[] = {
        { "XS", 33, 33, 65 }, { "S", 65, 65, 129 }, { "M", 129, 129, 257 },
    };
    for (size_t n = 0; n < sizeof named / sizeof named[0]; n++) {
        if (strcmp(text, named[n].name) == 0) {
            ni = named[n].i;
            nj = named[n].j;
            nk = named[n].k;
            return 1;
        }
    }
    char tail;
    if (sscanf(text, "%dx%dx%d%c", &ni, &nj, &nk, &tail) != 3)
        return 0;
    return ni >= 3 && nj >= 3 && nk >= 3 && ni <= MAX_I && nj <= MAX_J && nk <= MAX_K;
}

/* Unit coefficients of the Laplacian on a uniform grid, no cross terms, a start field that
 * grows quadratically along i: the standard test problem, whose residual shrinks slowly. */
void set_up(void)
{
    stride_j = (size_t)nk;
    stride_i = (size_t)nj * nk;
    float last = (float)(ni - 1);
    for (int i = 0; i < ni; i++) {
        float start = (float)i * (float)i / (last * last);
        for (int j = 0; j < nj; j++) {
            for (int k = 0; k < nk; k++) {
                size_t at = AT(i, j, k);
                for (int d = 0; d < 3; d++) {
                    a[d][at] = 1.0f;
                    b[d][at] = 0.0f;
                    c[d][at] = 1.0f;
                }
                a[3][at] = 1.0f / 6.0f;
                p[at] = start;
                bnd[at] = 1.0f;
                wrk1[at] = 0.0f;
                wrk2[at] = 0.0f;
            }
        }
    }
}

/* The 19-point operator applied at one interior point, before scaling by a3. */
static inline float stencil(size_t at)
{
    const size_t di = stride_i, dj = stride_j, dk = 1;
    float faces = a[0][at] * p[at + di] + a[1][at] * p[at + dj] + a[2][at] * p[at + dk]
        + c[0][at] * p[at - di] + c[1][at] * p[at - dj] + c[2][at] * p[at - dk];
    float cross_ij = p[at + di + dj] - p[at + di - dj] - p[at - di + dj] + p[at - di - dj];
    float cross_jk = p[at + dj + dk] - p[at - dj + dk] - p[at + dj - dk] + p[at - dj - dk];
    float cross_ik = p[at + di + dk] - p[at - di + dk] - p[at + di - dk] + p[at - di - dk];
    return faces + b[0][at] * cross_ij + b[1][at] * cross_jk + b[2][at] * cross_ik + wrk1[at];
}

/* One Jacobi sweep; returns the sum of squared updates (gosa). */
static float jacobi_sweep(void)
{
    float gosa = 0.0f;
    for (int i = 1; i < ni - 1; i++) {
        for (int j = 1; j < nj - 1; j++) {
            for (int k = 1; k < nk - 1; k++) {
                size_t at = AT(i, j, k);
                float update = (stencil(at) * a[3][at] - p[at]) * bnd[at];
                gosa += update * update;
                wrk2[at] = p[at] + relaxation * update;
            }
        }
    }
    for (int i = 1; i < ni - 1; i++)
        for (int j = 1; j < nj - 1; j++)
            memcpy(&p[AT(i, j, 1)], &wrk2[AT(i, j, 1)], (size_t)(nk - 2) * sizeof(float));
    return gosa;
}

float jacobi(int sweeps)
{
    float gosa = 0.0f;
    for (int n = 0; n < sweeps; n++)
        gosa = jacobi_sweep();
    return gosa;
}

int main(int argc, char **argv)
{
    ni = MAX_I;
    nj = MAX_J;
    nk = MAX_K;
    int sweeps = 24;
    if (argc > 3 || (argc > 1 && !parse_size(argv[1]))) {
        fprintf(stderr, "usage: %s [XS|S|M|IxJxK (each 3..%dx%dx%d) [ITERATIONS]]\n", argv[0],
                MAX_I, MAX_J, MAX_K);
        return 2;
    }
    if (argc > 2) {
        char *end;
        long n = strtol(argv[2], &end, 10);
        if (*end != '\0' || n < 1 || n > 1000000) {
            fprintf(stderr, "%s: ITERATIONS must be an integer in 1..1000000, not '%s'\n",
                    argv[0], argv[2]);
            return 2;
        }
        sweeps = (int)n;
    }
    set_up();
    double start = now_s();
    float gosa = jacobi(sweeps);
    double seconds = now_s() - start;
    double interior = (double)(ni - 2) * (nj - 2) * (nk - 2);
    double mflops = 34.0 * interior * sweeps / seconds * 1e-6;
    printf("grid      %d x %d x %d\n", ni, nj, nk);
    printf("sweeps    %d\n", sweeps);
    printf("seconds   %.6f\n", seconds);
    printf("MFLOPS    %.1f\n", mflops);
    printf("gosa      %.9e\n", gosa);
    return 0;
}
