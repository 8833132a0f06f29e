/* linear.c: fully connected layer (attention projections, MLP, LM head), GEMMs through CBLAS. */
#include "pp_kernels.h"
#include "pp_kernels_internal.h"

void pp_linear_forward(float *out, const float *inp, const float *w, const float *bias, int N,
                       int IC, int OC)
{
    /* Seeding out with the bias rows and letting the GEMM accumulate (beta = 1) adds the bias
     * without a second pass over the output. */
    float beta = 0.0f;
    if (bias) {
        for (int n = 0; n < N; n++) {
            float *o = out + (size_t)n * OC;
            for (int oc = 0; oc < OC; oc++)
                o[oc] = bias[oc];
        }
        beta = 1.0f;
    }
    pp_kernels_gemm(CblasNoTrans, CblasTrans, N, OC, IC, 1.0f, inp, IC, w, IC, beta, out, OC);
}

void pp_linear_backward_input(float *dinp, const float *dout, const float *w, int N, int IC,
                              int OC)
{
    pp_kernels_gemm(CblasNoTrans, CblasNoTrans, N, IC, OC, 1.0f, dout, OC, w, IC, 1.0f, dinp, IC);
}

void pp_linear_backward_weight(float *dw, float *dbias, const float *dout, const float *inp, int N,
                               int IC, int OC)
{
    pp_kernels_gemm(CblasTrans, CblasNoTrans, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dw, IC);
    if (dbias) {
        /* Row by row rather than column by column: dout is [N, OC] row-major, so this walks it
         * contiguously even when OC is the vocabulary size. */
        for (int n = 0; n < N; n++) {
            const float *d = dout + (size_t)n * OC;
            for (int oc = 0; oc < OC; oc++)
                dbias[oc] += d[oc];
        }
    }
}
