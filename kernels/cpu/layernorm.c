/* layernorm.c: layer normalisation over channels (pre-attention, pre-MLP and final norms). */
#include <math.h>

#include "pp_kernels.h"

#define PP_LN_EPS 1e-5

void pp_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                          const float *b, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        /* Two passes in double: the one-pass E[x^2] - E[x]^2 cancels badly when |mean| >> std,
         * which happens on the residual stream of a trained model. */
        double m = 0.0;
        for (int c = 0; c < C; c++)
            m += x[c];
        m /= C;
        double var = 0.0;
        for (int c = 0; c < C; c++) {
            double d = x[c] - m;
            var += d * d;
        }
        var /= C;
        float mf = (float)m;
        float s = (float)(1.0 / sqrt(var + PP_LN_EPS));
        float *o = out + (size_t)n * C;
        for (int c = 0; c < C; c++)
            o[c] = (x[c] - mf) * s * w[c] + b[c];
        mean[n] = mf;
        rstd[n] = s;
    }
}

/* With xhat = (x - mean) * rstd and g = dout * w, the input gradient is
 * rstd * (g - mean(g) - xhat * mean(g * xhat)); the two means are the only row reductions. */
void pp_layernorm_backward_input(float *dinp, const float *dout, const float *inp, const float *w,
                                 const float *mean, const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float *dx = dinp + (size_t)n * C;
        float mu = mean[n];
        float s = rstd[n];
        float g_mean = 0.0f;
        float gx_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            float g = d[c] * w[c];
            g_mean += g;
            gx_mean += g * (x[c] - mu) * s;
        }
        g_mean /= (float)C;
        gx_mean /= (float)C;
        for (int c = 0; c < C; c++) {
            float xhat = (x[c] - mu) * s;
            float g = d[c] * w[c];
            dx[c] += s * (g - g_mean - xhat * gx_mean);
        }
    }
}

void pp_layernorm_backward_weight(float *dw, float *db, const float *dout, const float *inp,
                                  const float *mean, const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        const float *d = dout + (size_t)n * C;
        float mu = mean[n];
        float s = rstd[n];
        for (int c = 0; c < C; c++) {
            dw[c] += d[c] * (x[c] - mu) * s;
            db[c] += d[c];
        }
    }
}
