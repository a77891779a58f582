// Spec 000's worked example (Fujitsu JP2017-224038A, Fig. 2 as reconstructed):
// loopscope simulate spec000.c -D X=10 -D Y=10 -D Z=10 --cache L1=256:2:32 \
//     --base A=0,B=800,C=1600 --per-ref
double A[100], B[100], C[100];

for (int i = 0; i <= X-1; i++)  A[i] = 0;
for (int j = 0; j <= Y-1; j++)  B[j] = 0;
for (int k = 0; k <= Z-1; k++)  C[k] = A[k];
