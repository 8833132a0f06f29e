/* xent.c: softmax cross-entropy over the vocabulary, the loss of the last pipeline stage. */
#include <math.h>

#include "pp_kernels.h"

void pp_xent_forward(float *losses, float *probs, const float *logits, const int32_t *targets,
                     int N, int V)
{
    for (int n = 0; n < N; n++) {
        const float *l = logits + (size_t)n * V;
        float *p = probs + (size_t)n * V;
        float mx = l[0];
        for (int i = 1; i < V; i++)
            mx = l[i] > mx ? l[i] : mx;
        /* Double sum: V is ~50k terms, enough for a float sum to lose several digits. */
        double sum = 0.0;
        for (int i = 0; i < V; i++) {
            float e = expf(l[i] - mx);
            p[i] = e;
            sum += e;
        }
        float inv = (float)(1.0 / sum);
        for (int i = 0; i < V; i++)
            p[i] *= inv;
        /* log-sum-exp form rather than -log(p[target]): a tiny p underflows to 0 in float and
         * would turn the loss into inf, while this stays finite. */
        losses[n] = (float)(log(sum) - ((double)l[targets[n]] - mx));
    }
}

void pp_xent_backward(float *dlogits, const float *probs, const int32_t *targets, float scale,
                      int N, int V)
{
    for (int n = 0; n < N; n++) {
        const float *p = probs + (size_t)n * V;
        float *d = dlogits + (size_t)n * V;
        for (int i = 0; i < V; i++)
            d[i] += scale * p[i];
        d[targets[n]] -= scale;
    }
}
