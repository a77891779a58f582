double a[N][N], x[N], y[N];

for(int i=0; i<N; ++i)
    for(int j=0; j<N; ++j)
        y[i] += a[i][j] * x[j];
