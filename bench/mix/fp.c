/* FP-heavy: a 3-point filter, a dot product and Horner's rule on an L1-resident array,
 * repeated REPS times (argv[1]). */
#include <stdio.h>
#include <stdlib.h>

#define N 2048

static double x[N], y[N];

static double filter(void) {
    double s = 0.0;
    for (int i = 1; i < N - 1; i++) {
        y[i] = 0.25 * x[i - 1] + 0.5 * x[i] + 0.25 * x[i + 1];
        s += y[i] * y[i];
    }
    return s;
}

static double horner(double t) {
    double p = 0.0;
    for (int i = 0; i < N; i++)
        p = p * t + x[i];
    return p;
}

int main(int argc, char **argv) {
    long reps = argc > 1 ? atol(argv[1]) : 1;
    for (int i = 0; i < N; i++)
        x[i] = 1.0 / (i + 1.0);
    double sum = 0.0;
    for (long r = 0; r < reps; r++)
        sum += filter() + horner(0.999);
    printf("%g\n", sum);
    return 0;
}
