double a[N][N], x[N], y[N];

for(int i=0; i<N; ++i)
    for(int j=0; j<=i; ++j)
        y[i] += a[i][j] * x[j];
