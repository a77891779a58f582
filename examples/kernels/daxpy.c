double x[N], y[N];
double alpha;

for(int i=0; i<N; ++i)
    y[i] = y[i] + alpha * x[i];
