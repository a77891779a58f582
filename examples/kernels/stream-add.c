double a[N], b[N], c[N];

for(int i=0; i<N; ++i)
    c[i] = a[i] + b[i];
