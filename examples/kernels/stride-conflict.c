// Columns of a row-major array whose rows are a power of two long: every access of a column
// maps to the same few sets, the case that layer conditions (kerncraft) cannot see.
double a[N][M], s[M];

for(int j=0; j<M; ++j)
    for(int i=0; i<N; ++i)
        s[j] += a[i][j];
