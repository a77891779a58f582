double a[N], b[N];
double s;

for(int i=0; i<N; ++i)
    b[i] = s * a[i];
