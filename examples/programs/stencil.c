/*
 * A small Himeno-shaped program: Jacobi sweeps of a 19-point stencil over a 3D grid (the
 * pressure Poisson equation in general coordinates: six face neighbours, twelve edge
 * neighbours through the mixed derivatives), the residual summed in the same nest, then the
 * new values copied back. `loopscope demo` profiles it; it is also a small example to try
 * `record`, `report` and `mix` on.
 *
 *   stencil [I J K [SWEEPS [-q]]]  grid points per axis (boundaries included; default
 *                                  33 33 65), Jacobi sweeps (default 40), -q: print nothing
 *
 * Prints the grid, the sweeps and the residual of the last sweep (unless -q).
 */
#include <stdio.h>
#include <stdlib.h>

static int ni = 33, nj = 33, nk = 65;
static float *p, *a, *b, *c, *wrk1, *wrk2, *bnd;

#define AT(i, j, k) (((size_t)(i) * nj + (size_t)(j)) * nk + (size_t)(k))

/* External linkage, so the compiler keeps them as functions and a profile shows them. */
void set_up(void);
float jacobi(int sweeps);
void copy_back(void);

static float *grid(size_t points, size_t fields)
{
    float *q = calloc(points * fields, sizeof(float));
    if (!q) {
        fprintf(stderr, "stencil: out of memory for %zu points\n", points);
        exit(1);
    }
    return q;
}

void set_up(void)
{
    for (int i = 0; i < ni; i++)
        for (int j = 0; j < nj; j++)
            for (int k = 0; k < nk; k++) {
                size_t at = AT(i, j, k);
                p[at] = (float)(i * i) / (float)((ni - 1) * (ni - 1));
                a[4 * at] = a[4 * at + 1] = a[4 * at + 2] = 1.0f;
                a[4 * at + 3] = 1.0f / 6.0f;
                b[3 * at] = b[3 * at + 1] = b[3 * at + 2] = 0.0f;
                c[3 * at] = c[3 * at + 1] = c[3 * at + 2] = 1.0f;
                bnd[at] = 1.0f;
                wrk1[at] = 0.0f;
            }
}

void copy_back(void)
{
    for (int i = 1; i < ni - 1; i++)
        for (int j = 1; j < nj - 1; j++)
            for (int k = 1; k < nk - 1; k++)
                p[AT(i, j, k)] = wrk2[AT(i, j, k)];
}

float jacobi(int sweeps)
{
    const float omega = 0.8f;
    float gosa = 0.0f;
    for (int n = 0; n < sweeps; n++) {
        gosa = 0.0f;
        for (int i = 1; i < ni - 1; i++)
            for (int j = 1; j < nj - 1; j++)
                for (int k = 1; k < nk - 1; k++) {
                    size_t at = AT(i, j, k);
                    float s0 = a[4 * at] * p[AT(i + 1, j, k)]
                             + a[4 * at + 1] * p[AT(i, j + 1, k)]
                             + a[4 * at + 2] * p[AT(i, j, k + 1)]
                             + b[3 * at] * (p[AT(i + 1, j + 1, k)] - p[AT(i + 1, j - 1, k)]
                                          - p[AT(i - 1, j + 1, k)] + p[AT(i - 1, j - 1, k)])
                             + b[3 * at + 1] * (p[AT(i, j + 1, k + 1)] - p[AT(i, j - 1, k + 1)]
                                              - p[AT(i, j + 1, k - 1)] + p[AT(i, j - 1, k - 1)])
                             + b[3 * at + 2] * (p[AT(i + 1, j, k + 1)] - p[AT(i - 1, j, k + 1)]
                                              - p[AT(i + 1, j, k - 1)] + p[AT(i - 1, j, k - 1)])
                             + c[3 * at] * p[AT(i - 1, j, k)]
                             + c[3 * at + 1] * p[AT(i, j - 1, k)]
                             + c[3 * at + 2] * p[AT(i, j, k - 1)]
                             + wrk1[at];
                    float ss = (s0 * a[4 * at + 3] - p[at]) * bnd[at];
                    gosa += ss * ss;
                    wrk2[at] = p[at] + omega * ss;
                }
        copy_back();
    }
    return gosa;
}

int main(int argc, char **argv)
{
    int sweeps = 40, quiet = argc >= 6 && argv[5][0] == '-' && argv[5][1] == 'q';
    if (argc >= 4) {
        ni = atoi(argv[1]);
        nj = atoi(argv[2]);
        nk = atoi(argv[3]);
    }
    if (argc >= 5)
        sweeps = atoi(argv[4]);
    if (ni < 3 || nj < 3 || nk < 3 || sweeps < 1 || ni > 1024 || nj > 1024 || nk > 1024) {
        fprintf(stderr, "usage: stencil [I J K [SWEEPS]] (each axis 3 to 1024, sweeps 1 or more)\n");
        return 2;
    }
    size_t points = (size_t)ni * nj * nk;
    p = grid(points, 1);
    a = grid(points, 4);
    b = grid(points, 3);
    c = grid(points, 3);
    wrk1 = grid(points, 1);
    wrk2 = grid(points, 1);
    bnd = grid(points, 1);
    set_up();
    float gosa = jacobi(sweeps);
    if (!quiet)
        printf("grid %dx%dx%d, %d sweeps, residual %.6e\n", ni, nj, nk, sweeps, gosa);
    return 0;
}
