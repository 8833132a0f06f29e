/* kops_cpu.c: the CPU kernels as a pp_kops table (host memory; the context is unused). */
#include "pp_common.h"
#include "pp_kernels.h"
#include "pp_kops.h"

#include <string.h>

static void *c_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return pp_alloc(bytes);
}
static void c_free(void *ctx, void *p)
{
    (void)ctx;
    pp_free(p);
}
static void c_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memcpy(dst, src, bytes);
}
static void c_zero(void *ctx, void *dst, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memset(dst, 0, bytes);
}
static void c_embed_forward(void *ctx, float *out, const int32_t *tokens, const float *wte,
                            const float *wpe, int B, int T, int C)
{
    (void)ctx;
    pp_embed_forward(out, tokens, wte, wpe, B, T, C);
}
static void c_embed_backward(void *ctx, float *dwte, float *dwpe, const float *dout,
                             const int32_t *tokens, int B, int T, int C)
{
    (void)ctx;
    pp_embed_backward(dwte, dwpe, dout, tokens, B, T, C);
}
static void c_linear_forward(void *ctx, float *out, const float *inp, const float *w,
                             const float *bias, int N, int IC, int OC)
{
    (void)ctx;
    pp_linear_forward(out, inp, w, bias, N, IC, OC);
}
static void c_linear_backward_input(void *ctx, float *dinp, const float *dout, const float *w,
                                    int N, int IC, int OC)
{
    (void)ctx;
    pp_linear_backward_input(dinp, dout, w, N, IC, OC);
}
static void c_linear_backward_weight(void *ctx, float *dw, float *dbias, const float *dout,
                                     const float *inp, int N, int IC, int OC)
{
    (void)ctx;
    pp_linear_backward_weight(dw, dbias, dout, inp, N, IC, OC);
}
static void c_layernorm_forward(void *ctx, float *out, float *mean, float *rstd, const float *inp,
                                const float *w, const float *b, int N, int C)
{
    (void)ctx;
    pp_layernorm_forward(out, mean, rstd, inp, w, b, N, C);
}
static void c_layernorm_backward_input(void *ctx, float *dinp, const float *dout,
                                       const float *inp, const float *w, const float *mean,
                                       const float *rstd, int N, int C)
{
    (void)ctx;
    pp_layernorm_backward_input(dinp, dout, inp, w, mean, rstd, N, C);
}
static void c_layernorm_backward_weight(void *ctx, float *dw, float *db, const float *dout,
                                        const float *inp, const float *mean, const float *rstd,
                                        int N, int C)
{
    (void)ctx;
    pp_layernorm_backward_weight(dw, db, dout, inp, mean, rstd, N, C);
}
static void c_attention_forward(void *ctx, float *out, float *att, const float *qkv, int B, int T,
                                int C, int NH)
{
    (void)ctx;
    pp_attention_forward(out, att, qkv, B, T, C, NH);
}
static void c_attention_backward(void *ctx, float *dqkv, float *scratch, const float *dout,
                                 const float *qkv, const float *att, int B, int T, int C, int NH)
{
    (void)ctx;
    pp_attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
}
static size_t c_attention_scratch(int B, int T, int NH)
{
    (void)B;
    (void)NH;
    return (size_t)T * T;
}
static void c_gelu_forward(void *ctx, float *out, const float *inp, size_t n)
{
    (void)ctx;
    pp_gelu_forward(out, inp, n);
}
static void c_gelu_backward(void *ctx, float *dinp, const float *dout, const float *inp, size_t n)
{
    (void)ctx;
    pp_gelu_backward(dinp, dout, inp, n);
}
static void c_residual_forward(void *ctx, float *out, const float *a, const float *b, size_t n)
{
    (void)ctx;
    pp_residual_forward(out, a, b, n);
}
static void c_xent_forward(void *ctx, float *losses, float *probs, const float *logits,
                           const int32_t *targets, int N, int V)
{
    (void)ctx;
    pp_xent_forward(losses, probs, logits, targets, N, V);
}
static void c_xent_backward(void *ctx, float *dlogits, const float *probs, const int32_t *targets,
                            float scale, int N, int V)
{
    (void)ctx;
    pp_xent_backward(dlogits, probs, targets, scale, N, V);
}
static void c_loss_mean(void *ctx, float *mean, const float *losses, int N)
{
    (void)ctx;
    double sum = 0.0;
    for (int i = 0; i < N; i++)
        sum += losses[i];
    *mean = (float)(sum / N);
}
static void c_adamw_update(void *ctx, float *params, const float *grads, float *m, float *v,
                           size_t n, float lr, float beta1, float beta2, float eps,
                           float weight_decay, float grad_scale, int64_t t)
{
    (void)ctx;
    pp_adamw_update(params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t);
}
static double c_sumsq(void *ctx, const float *x, size_t n)
{
    (void)ctx;
    return pp_sumsq(x, n);
}

const pp_kops pp_kops_cpu = {
    .name = "cpu",
    .on_device = 0,
    .ctx = NULL,
    .alloc = c_alloc,
    .free = c_free,
    .copy = c_copy,
    .zero = c_zero,
    .embed_forward = c_embed_forward,
    .embed_backward = c_embed_backward,
    .linear_forward = c_linear_forward,
    .linear_backward_input = c_linear_backward_input,
    .linear_backward_weight = c_linear_backward_weight,
    .layernorm_forward = c_layernorm_forward,
    .layernorm_backward_input = c_layernorm_backward_input,
    .layernorm_backward_weight = c_layernorm_backward_weight,
    .attention_forward = c_attention_forward,
    .attention_backward = c_attention_backward,
    .attention_scratch_floats = c_attention_scratch,
    .gelu_forward = c_gelu_forward,
    .gelu_backward = c_gelu_backward,
    .residual_forward = c_residual_forward,
    .xent_forward = c_xent_forward,
    .xent_backward = c_xent_backward,
    .loss_mean = c_loss_mean,
    .adamw_update = c_adamw_update,
    .sumsq = c_sumsq,
};

const char *pp_cuda_precision_name(pp_cuda_precision p)
{
    switch (p) {
    case PP_CUDA_FP32: return "fp32";
    case PP_CUDA_TF32: return "tf32";
    case PP_CUDA_BF16: return "bf16";
    }
    return "?";
}

int pp_cuda_precision_parse(const char *s)
{
    for (int p = PP_CUDA_FP32; s && p <= PP_CUDA_BF16; p++)
        if (strcmp(s, pp_cuda_precision_name((pp_cuda_precision)p)) == 0)
            return p;
    return -1;
}
