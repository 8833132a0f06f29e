/* embed.c: token + position embedding, the first layer of the model (runtime/layers.c). */
#include "pp_kernels.h"

void pp_embed_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B,
                      int T, int C)
{
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            float *o = out + ((size_t)b * T + t) * C;
            const float *te = wte + (size_t)tokens[(size_t)b * T + t] * C;
            const float *pe = wpe + (size_t)t * C;
            for (int c = 0; c < C; c++)
                o[c] = te[c] + pe[c];
        }
    }
}

/* Serial on purpose: the same token can occur many times in a batch, so rows of dwte are
 * scattered-to from several (b, t) and a parallel loop would race on them. */
void pp_embed_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B,
                       int T, int C)
{
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            float *dte = dwte + (size_t)tokens[(size_t)b * T + t] * C;
            float *dpe = dwpe + (size_t)t * C;
            for (int c = 0; c < C; c++) {
                dte[c] += d[c];
                dpe[c] += d[c];
            }
        }
    }
}
