// Triad swept R times: with small N the stream stays in L1 (the simulator's best case).
double a[N], b[N], c[N], d[N];

for (int r = 0; r < R; ++r)
    for (int i = 0; i < N; ++i)
        a[i] = b[i] + c[i] * d[i];
