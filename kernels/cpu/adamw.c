/* adamw.c: the AdamW parameter update, run by the runtime's optimizer once per step and stage. */
#include <math.h>

#include "pp_kernels.h"

void pp_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                     float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                     int64_t t)
{
    /* pow in double: in early steps beta2^t is close to 1, and 1 - beta2^t would magnify the
     * rounding error of a float power by ~1000x. */
    float corr1 = (float)(1.0 - pow((double)beta1, (double)t));
    float corr2 = (float)(1.0 - pow((double)beta2, (double)t));
    for (size_t i = 0; i < n; i++) {
        float g = grads[i] * grad_scale;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / corr1;
        float vhat = vi / corr2;
        /* Decoupled decay: it scales the parameter directly instead of entering m and v. */
        params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * params[i]);
    }
}
