/* pp_kernels.h: float32 layer kernels of the GPT-style model, forward and backward, called by the
 * runtime's layers (runtime/model.c). This header is the CPU reference (kernels/cpu/, GEMMs
 * through CBLAS); the CUDA kernels (kernels/cuda/) mirror these signatures with device pointers.
 *
 * Conventions (B batch, T sequence length, C channels, NH heads, V vocabulary, N = B*T rows):
 * - all tensors are dense row-major float32; [B, T, C] means index (b*T + t)*C + c;
 * - every backward ACCUMULATES (+=) into its gradient outputs, input gradients included, so
 *   residual branches and micro-batch gradient accumulation need no extra buffers; the caller
 *   zeroes gradients when it starts a new accumulation;
 * - backward passes with weights also come split into an input part (_backward_input: gradient
 *   w.r.t. the layer's input) and a weight part (_backward_weight: gradient w.r.t. its
 *   parameters), which the zero-bubble schedules run at different times;
 * - sizes are validated by the caller (the runtime); kernels do not allocate and do not fail.
 * Thread-safety: every kernel is reentrant; concurrent calls on disjoint outputs are safe. */
#ifndef PP_KERNELS_H
#define PP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- embedding: out[b,t,:] = wte[tokens[b,t], :] + wpe[t, :]  (wte [V,C], wpe [T,C]) ---- */
void pp_embed_forward(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B,
                      int T, int C);
void pp_embed_backward(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B,
                       int T, int C);

/* ---- linear: out[N,OC] = inp[N,IC] @ w^T + bias, w is [OC, IC], bias [OC] or NULL ---- */
void pp_linear_forward(float *out, const float *inp, const float *w, const float *bias, int N,
                       int IC, int OC);
/* dinp[N,IC] += dout[N,OC] @ w */
void pp_linear_backward_input(float *dinp, const float *dout, const float *w, int N, int IC,
                              int OC);
/* dw[OC,IC] += dout^T @ inp; dbias[OC] += column sums of dout (dbias may be NULL) */
void pp_linear_backward_weight(float *dw, float *dbias, const float *dout, const float *inp, int N,
                               int IC, int OC);

/* ---- layernorm over the last dimension, eps = 1e-5 ----
 * out = (inp - mean) * rstd * w + b; mean[N] and rstd[N] are saved for the backward pass. */
void pp_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, const float *w,
                          const float *b, int N, int C);
void pp_layernorm_backward_input(float *dinp, const float *dout, const float *inp, const float *w,
                                 const float *mean, const float *rstd, int N, int C);
void pp_layernorm_backward_weight(float *dw, float *db, const float *dout, const float *inp,
                                  const float *mean, const float *rstd, int N, int C);

/* ---- causal multi-head self-attention core ----
 * qkv [B,T,3C] holds q, k, v side by side (q = qkv[...,0:C], k = [C:2C], v = [2C:3C]); head h
 * uses channels h*hs .. h*hs+hs-1 of each, hs = C/NH. att [B,NH,T,T] receives the softmax
 * probabilities of (q k^T) / sqrt(hs) with key positions > query position masked out (their
 * probabilities are exactly 0). out [B,T,C] = att @ v, heads concatenated. */
void pp_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH);
/* dqkv [B,T,3C] += gradient of the attention core; scratch must hold at least T*T floats. */
void pp_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                           const float *att, int B, int T, int C, int NH);

/* ---- GELU, tanh approximation as in GPT-2:
 * gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) ---- */
void pp_gelu_forward(float *out, const float *inp, size_t n);
void pp_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n);

/* ---- residual: out = a + b ---- */
void pp_residual_forward(float *out, const float *a, const float *b, size_t n);
void pp_residual_backward(float *da, float *db, const float *dout, size_t n);

/* ---- softmax cross-entropy over V classes ----
 * probs [N,V] = softmax(logits) (numerically stable), losses[N] = -log probs[n, targets[n]]. */
void pp_xent_forward(float *losses, float *probs, const float *logits, const int32_t *targets,
                     int N, int V);
/* dlogits [N,V] += scale * (probs - onehot(targets)): the gradient of scale * sum(losses). */
void pp_xent_backward(float *dlogits, const float *probs, const int32_t *targets, float scale,
                      int N, int V);

/* ---- AdamW (Loshchilov & Hutter), bias-corrected, decoupled weight decay ----
 * t is the 1-based step count. For each i:
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mhat = m / (1-b1^t);  vhat = v / (1-b2^t)
 *   p -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * p)
 * grad_scale multiplies every gradient first (used for gradient-norm clipping). */
void pp_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                     float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                     int64_t t);

/* Sum of squares, accumulated in double (for gradient norms). */
double pp_sumsq(const float *x, size_t n);

/* ---- GEMM accounting for benchmarks: when enabled, every CBLAS GEMM issued by the kernels adds
 * its wall time and FLOP count here (atomic counters, safe from any thread). ---- */
typedef struct pp_kernel_stats {
    uint64_t gemm_ns;
    uint64_t gemm_flops;
    uint64_t gemm_calls;
} pp_kernel_stats;

void pp_kernels_stats_enable(int on);
/* Threads the BLAS library may use per GEMM call (process-wide). */
void pp_kernels_set_blas_threads(int n);
int pp_kernels_blas_threads(void);
void pp_kernels_stats_reset(void);
pp_kernel_stats pp_kernels_stats_get(void);

#ifdef __cplusplus
}
#endif
#endif /* PP_KERNELS_H */
