/* pp_kmath.h: the per-element and per-row arithmetic of the CUDA kernels, written once for
 * both sides: nvcc compiles it into the device kernels (kernels/cuda/kernels.cu), and a C
 * compiler into the host-side tests (tests/test_kmath.c), which check it against the CPU
 * kernels on machines without a GPU. What the tests cannot check here is the parallel part:
 * the thread indexing and the reductions of kernels.cu, tested on a GPU by tests/test_cuda.c.
 *
 * The row functions are the sequential form of a row; the device kernels split the same
 * arithmetic over a warp's lanes and combine partial sums with shuffles. */
#ifndef PP_KMATH_H
#define PP_KMATH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define PP_KM __host__ __device__ static inline
#else
#define PP_KM static inline
#endif

#define PP_KM_LN_EPS 1e-5
#define PP_KM_GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define PP_KM_GELU_A 0.044715f

/* GELU (tanh approximation, as GPT-2) and its derivative; tanh through one expf as the CPU
 * kernel does (kernels/cpu/elementwise.c), so both sides round alike. */
PP_KM float pp_km_tanh(float u) { return 1.0f - 2.0f / (1.0f + expf(2.0f * u)); }

PP_KM float pp_km_gelu(float x)
{
    return 0.5f * x * (1.0f + pp_km_tanh(PP_KM_GELU_K * (x + PP_KM_GELU_A * x * x * x)));
}

PP_KM float pp_km_gelu_grad(float x)
{
    float th = pp_km_tanh(PP_KM_GELU_K * (x + PP_KM_GELU_A * x * x * x));
    float du = PP_KM_GELU_K * (1.0f + 3.0f * PP_KM_GELU_A * x * x);
    return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

/* One AdamW element (kernels/pp_kernels.h); corr1 = 1 - beta1^t and corr2 = 1 - beta2^t are
 * computed once per call on the host in double. */
PP_KM void pp_km_adamw(float *p, float g, float *m, float *v, float lr, float beta1, float beta2,
                       float eps, float wd, float grad_scale, float corr1, float corr2)
{
    g *= grad_scale;
    float mi = beta1 * *m + (1.0f - beta1) * g;
    float vi = beta2 * *v + (1.0f - beta2) * g * g;
    *m = mi;
    *v = vi;
    float mhat = mi / corr1, vhat = vi / corr2;
    *p -= lr * (mhat / (sqrtf(vhat) + eps) + wd * *p);
}

/* Layernorm of one row's statistics from lane partial sums: mean and rstd from the row's sum
 * and (second pass) sum of squared deviations, in double as the CPU kernel. */
PP_KM double pp_km_ln_mean(double sum, int C) { return sum / C; }
PP_KM float pp_km_ln_rstd(double sq_dev_sum, int C)
{
    return (float)(1.0 / sqrt(sq_dev_sum / C + PP_KM_LN_EPS));
}

/* Layernorm input gradient of one element, given the row's means of g = dout * w and of
 * g * xhat (pp_kernels.h). */
PP_KM float pp_km_ln_dx(float d, float w, float x, float mu, float s, float g_mean,
                        float gx_mean)
{
    float xhat = (x - mu) * s;
    return s * (d * w - g_mean - xhat * gx_mean);
}

/* Causal softmax of row i of a [T, T] score matrix (already scaled): probabilities for
 * j <= i, exactly 0 beyond. Host form of the device row kernel: max, then sum of exp (float, as
 * the CPU kernel), then normalise. */
PP_KM void pp_km_causal_softmax_row(float *row, int i, int T)
{
    float mx = row[0];
    for (int j = 1; j <= i; j++)
        mx = row[j] > mx ? row[j] : mx;
    float sum = 0.0f;
    for (int j = 0; j <= i; j++) {
        float e = expf(row[j] - mx);
        row[j] = e;
        sum += e;
    }
    float inv = 1.0f / sum;
    for (int j = 0; j <= i; j++)
        row[j] *= inv;
    for (int j = i + 1; j < T; j++)
        row[j] = 0.0f;
}

/* Softmax backward of one causal row: dpre[j] = att[j] * (datt[j] - sum_k att[k] datt[k]) *
 * scale for j <= i, 0 beyond; in place over datt. */
PP_KM void pp_km_softmax_backward_row(float *datt, const float *att, int i, int T, float scale)
{
    float dot = 0.0f;
    for (int j = 0; j <= i; j++)
        dot += att[j] * datt[j];
    for (int j = 0; j <= i; j++)
        datt[j] = att[j] * (datt[j] - dot) * scale;
    for (int j = i + 1; j < T; j++)
        datt[j] = 0.0f;
}

/* Cross-entropy of one row from its max, its sum of exp (double) and its target's logit: the
 * log-sum-exp form of the CPU kernel. */
PP_KM float pp_km_xent_loss(double sum, float target_logit, float mx)
{
    return (float)(log(sum) - ((double)target_logit - mx));
}

/* bf16 round-to-nearest-even of a float, as cuBLAS's inputs see it (for the host-side error
 * model of the bf16 GEMMs; the device uses __float2bfloat16). */
PP_KM float pp_km_bf16_round(float x)
{
    union {
        float f;
        uint32_t u;
    } v;
    v.f = x;
    if ((v.u & 0x7f800000u) == 0x7f800000u)
        return x; /* inf and nan unchanged */
    uint32_t lsb = (v.u >> 16) & 1u;
    v.u = (v.u + 0x7fffu + lsb) & 0xffff0000u;
    return v.f;
}

/* ---- GEMM plans ------------------------------------------------------------------------------
 * How each row-major operation of pp_kernels.h maps onto column-major strided-batched GEMMs
 * (cuBLAS's convention): C (m x n) = alpha op(A) op(B) + beta C for each of `batch` matrices,
 * A, B, C advancing by sA, sB, sC elements. The CUDA table passes cuBLAS; the host tests pass a
 * plain column-major GEMM, so the argument mapping is checked against the CPU kernels without a
 * GPU. Host code only. */
typedef void (*pp_km_gemm_fn)(void *u, int ta, int tb, int m, int n, int k, float alpha,
                              const float *A, int lda, long long sA, const float *B, int ldb,
                              long long sB, float beta, float *C, int ldc, long long sC,
                              int batch);

/* out[N,OC] = inp[N,IC] @ w[OC,IC]^T (+ beta out): column-major out^T = w(stored)^T inp^T. */
static inline void pp_km_plan_linear_forward(pp_km_gemm_fn g, void *u, float *out,
                                             const float *inp, const float *w, int N, int IC,
                                             int OC, float beta)
{
    g(u, 1, 0, OC, N, IC, 1.0f, w, IC, 0, inp, IC, 0, beta, out, OC, 0, 1);
}

/* dinp[N,IC] += dout[N,OC] @ w[OC,IC]: column-major dinp^T = w(stored) dout^T. */
static inline void pp_km_plan_linear_backward_input(pp_km_gemm_fn g, void *u, float *dinp,
                                                    const float *dout, const float *w, int N,
                                                    int IC, int OC)
{
    g(u, 0, 0, IC, N, OC, 1.0f, w, IC, 0, dout, OC, 0, 1.0f, dinp, IC, 0, 1);
}

/* dw[OC,IC] += dout^T @ inp: column-major dw^T (IC x OC) = inp^T (IC x N) dout (N x OC). */
static inline void pp_km_plan_linear_backward_weight(pp_km_gemm_fn g, void *u, float *dw,
                                                     const float *dout, const float *inp, int N,
                                                     int IC, int OC)
{
    g(u, 0, 1, IC, OC, N, 1.0f, inp, IC, 0, dout, OC, 0, 1.0f, dw, IC, 0, 1);
}

/* Attention, per batch b with the NH heads as one strided batch (head h at column h*hs):
 * scores att[b,h] = scale q k^T; column-major S^T = k(stored)^T q(stored). */
static inline void pp_km_plan_attention_scores(pp_km_gemm_fn g, void *u, float *att,
                                               const float *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C;
        g(u, 1, 0, T, T, hs, scale, k, C3, hs, q, C3, hs, 0.0f, att + (size_t)b * NH * TT, T,
          TT, NH);
    }
}

/* out_h = att v_h: column-major out_h^T (hs x T) = v(stored) att(stored). */
static inline void pp_km_plan_attention_values(pp_km_gemm_fn g, void *u, float *out,
                                               const float *att, const float *qkv, int B, int T,
                                               int C, int NH)
{
    int hs = C / NH, C3 = 3 * C;
    long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * C3 + 2 * C;
        g(u, 0, 0, hs, T, T, 1.0f, v, C3, hs, att + (size_t)b * NH * TT, T, TT, 0.0f,
          out + (size_t)b * T * C, C, hs, NH);
    }
}

/* Backward, first half: datt = dout_h v_h^T into scratch [B,NH,T,T] (column-major datt^T =
 * v(stored)^T dout(stored)), and dv += att^T dout_h (dv^T = dout(stored) att(stored)^T). */
static inline void pp_km_plan_attention_backward_values(pp_km_gemm_fn g, void *u, float *scratch,
                                                        float *dqkv, const float *dout,
                                                        const float *qkv, const float *att,
                                                        int B, int T, int C, int NH)
{
    int hs = C / NH, C3 = 3 * C;
    long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *v = qkv + (size_t)b * T * C3 + 2 * C;
        const float *d = dout + (size_t)b * T * C;
        float *dv = dqkv + (size_t)b * T * C3 + 2 * C;
        float *s = scratch + (size_t)b * NH * TT;
        g(u, 1, 0, T, T, hs, 1.0f, v, C3, hs, d, C, hs, 0.0f, s, T, TT, NH);
        g(u, 0, 1, hs, T, T, 1.0f, d, C, hs, att + (size_t)b * NH * TT, T, TT, 1.0f, dv, C3, hs,
          NH);
    }
}

/* Backward, second half (scratch now holds the pre-softmax gradient dpre): dq += dpre k
 * (dq^T = k(stored) dpre(stored)) and dk += dpre^T q (dk^T = q(stored) dpre(stored)^T). */
static inline void pp_km_plan_attention_backward_qk(pp_km_gemm_fn g, void *u, float *dqkv,
                                                    const float *scratch, const float *qkv,
                                                    int B, int T, int C, int NH)
{
    int hs = C / NH, C3 = 3 * C;
    long long TT = (long long)T * T;
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (size_t)b * T * C3, *k = q + C;
        float *dq = dqkv + (size_t)b * T * C3, *dk = dq + C;
        const float *s = scratch + (size_t)b * NH * TT;
        g(u, 0, 0, hs, T, T, 1.0f, k, C3, hs, s, T, TT, 1.0f, dq, C3, hs, NH);
        g(u, 0, 1, hs, T, T, 1.0f, q, C3, hs, s, T, TT, 1.0f, dk, C3, hs, NH);
    }
}

#endif /* PP_KMATH_H */
