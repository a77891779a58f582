double a[N][N], b[N][N];

for(int i=0; i<N; ++i)
    for(int j=0; j<N; ++j)
        b[j][i] = a[i][j];
