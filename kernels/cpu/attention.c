/* attention.c: causal multi-head self-attention core between the QKV and output projections.
 * Each (batch, head) pair is a handful of strided GEMMs on views into qkv: q, k and v of one head
 * are T rows of hs floats with a row stride of 3C, so no head is ever copied out. */
#include <math.h>

#include "pp_kernels.h"
#include "pp_kernels_internal.h"

/* Softmax of one row over the causal window j <= t, in place. Entries past t are written as
 * exactly 0 so that att @ v ignores them and callers can rely on the mask bit for bit. */
static void softmax_causal_row(float *row, int t, int T)
{
    float mx = row[0];
    for (int j = 1; j <= t; j++)
        mx = row[j] > mx ? row[j] : mx;
    float sum = 0.0f;
    for (int j = 0; j <= t; j++) {
        row[j] = expf(row[j] - mx);
        sum += row[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j <= t; j++)
        row[j] *= inv;
    for (int j = t + 1; j < T; j++)
        row[j] = 0.0f;
}

/* Head h of batch b, numbered bh = b * NH + h (the order of the loops: batch, then head). q, k
 * and v are T rows of hs floats with a row stride of 3C; dqkv has qkv's layout, dout out's. */
typedef struct attn_head {
    const float *q, *k, *v;
    size_t qkv; /* offset of q in qkv (and of dq in dqkv) */
    size_t out; /* of the head's T rows of hs floats in out (and dout), row stride C */
    size_t att; /* of its T x T probabilities in att */
} attn_head;

static attn_head attn_head_at(const float *qkv, int bh, int T, int C, int NH)
{
    int b = bh / NH, h = bh % NH, hs = C / NH;
    attn_head x;
    x.qkv = (size_t)b * T * 3 * C + (size_t)h * hs;
    x.out = (size_t)b * T * C + (size_t)h * hs;
    x.att = (size_t)bh * T * T;
    x.q = qkv + x.qkv;
    x.k = x.q + C;
    x.v = x.q + 2 * C;
    return x;
}

void pp_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int bh = 0; bh < B * NH; bh++) {
        attn_head x = attn_head_at(qkv, bh, T, C, NH);
        float *a = att + x.att;
        /* The full T x T product costs twice the causal half, but one BLAS call on it beats T
         * small ones; the upper triangle is overwritten by the mask. */
        pp_kernels_gemm(CblasNoTrans, CblasTrans, T, T, hs, scale, x.q, C3, x.k, C3, 0.0f, a, T);
        for (int t = 0; t < T; t++)
            softmax_causal_row(a + (size_t)t * T, t, T);
        pp_kernels_gemm(CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, x.v, C3, 0.0f,
                        out + x.out, C);
    }
}

void pp_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                           const float *att, int B, int T, int C, int NH)
{
    int hs = C / NH, C3 = 3 * C;
    float scale = 1.0f / sqrtf((float)hs);
    for (int bh = 0; bh < B * NH; bh++) {
        attn_head x = attn_head_at(qkv, bh, T, C, NH);
        float *dq = dqkv + x.qkv, *dk = dq + C, *dv = dq + 2 * C;
        const float *a = att + x.att, *d = dout + x.out;

        /* datt = dout_h @ v^T, then dv += att^T @ dout_h. */
        pp_kernels_gemm(CblasNoTrans, CblasTrans, T, T, hs, 1.0f, d, C, x.v, C3, 0.0f, scratch, T);
        pp_kernels_gemm(CblasTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, d, C, 1.0f, dv, C3);

        /* Softmax backward in place: dpre = att * (datt - sum_j att*datt), folded with the
         * 1/sqrt(hs) of the forward. Masked entries have att == 0, so they come out 0 and the
         * GEMMs below need no mask. */
        for (int t = 0; t < T; t++) {
            float *row = scratch + (size_t)t * T;
            const float *arow = a + (size_t)t * T;
            float dot = 0.0f;
            for (int j = 0; j <= t; j++)
                dot += arow[j] * row[j];
            for (int j = 0; j <= t; j++)
                row[j] = arow[j] * (row[j] - dot) * scale;
            for (int j = t + 1; j < T; j++)
                row[j] = 0.0f;
        }

        /* dq += dpre @ k; dk += dpre^T @ q. */
        pp_kernels_gemm(CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, scratch, T, x.k, C3, 1.0f,
                        dq, C3);
        pp_kernels_gemm(CblasTrans, CblasNoTrans, T, hs, T, 1.0f, scratch, T, x.q, C3, 1.0f, dk,
                        C3);
    }
}
