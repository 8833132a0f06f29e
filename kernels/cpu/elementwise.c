/* elementwise.c: GELU, residual add and the sum of squares used for gradient-norm clipping. */
#include <math.h>

#include "pp_kernels.h"

#define PP_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define PP_GELU_A 0.044715f

/* tanh through one expf: glibc's tanhf costs about three expf, and GELU's tanh is the largest
 * non-GEMM cost of a training step (two per MLP element per step). For u -> +inf, expf
 * overflows to inf and the result is exactly 1; for u -> -inf it is exactly -1. Near 0 the
 * subtraction loses relative precision but keeps ~1e-7 absolute error, which is what GELU's
 * 0.5 x (1 + tanh) needs. */
static inline float fast_tanhf(float u) { return 1.0f - 2.0f / (1.0f + expf(2.0f * u)); }

void pp_gelu_forward(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + fast_tanhf(PP_GELU_K * (x + PP_GELU_A * x * x * x)));
    }
}

/* d/dx of 0.5 x (1 + tanh(u)), u = k (x + a x^3):
 * 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) k (1 + 3 a x^2). The input is recomputed from inp rather
 * than saved, which keeps the activation memory of the MLP to one tensor. */
void pp_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float th = fast_tanhf(PP_GELU_K * (x + PP_GELU_A * x * x * x));
        float du = PP_GELU_K * (1.0f + 3.0f * PP_GELU_A * x * x);
        float grad = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
        dinp[i] += grad * dout[i];
    }
}

void pp_residual_forward(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void pp_residual_backward(float *da, float *db, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

/* Double accumulator: a gradient norm sums 10^8 squares spanning many magnitudes, where a float
 * sum stops growing once it is 2^24 times the next term. */
double pp_sumsq(const float *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * (double)x[i];
    return s;
}
