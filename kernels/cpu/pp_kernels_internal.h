/* pp_kernels_internal.h: private helpers of the CPU kernels (kernels/cpu/ only). Every GEMM of
 * the kernels goes through pp_kernels_gemm so that the accounting in stats.c sees all of them. */
#ifndef PP_KERNELS_INTERNAL_H
#define PP_KERNELS_INTERNAL_H

#include <cblas.h>

/* Row-major C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C, exactly cblas_sgemm's contract
 * with the layout fixed to row-major (every tensor of the model is row-major). When stats are
 * enabled it also adds the call's wall time, 2*M*N*K FLOPs and one call to the counters. */
void pp_kernels_gemm(enum CBLAS_TRANSPOSE ta, enum CBLAS_TRANSPOSE tb, int M, int N, int K,
                     float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                     float *Cm, int ldc);

#endif /* PP_KERNELS_INTERNAL_H */
