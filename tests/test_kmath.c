/* test_kmath.c: the CUDA kernels' arithmetic, checked on the CPU (no GPU needed): the element
 * and row functions of kernels/cuda/pp_kmath.h against the CPU kernels, and the GEMM plans (how
 * every row-major product maps onto column-major strided-batched GEMMs, cuBLAS's convention) run
 * through a plain column-major GEMM with the device's row kernels in between, against the CPU
 * linear and attention kernels. What stays for a GPU (tests/test_cuda.c): thread indexing,
 * warp reductions, cuBLAS itself. */
#include "pp_kernels.h"
#include "pp_kmath.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

TestSuite(kmath);

static uint64_t g_rng = 88172645463325252ull;
static float frand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static float *rand_buf(size_t n, float scale)
{
    float *p = malloc(n * sizeof *p);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = frand() * scale;
    return p;
}

static float *zeros(size_t n)
{
    float *p = calloc(n, sizeof *p);
    cr_assert_not_null(p);
    return p;
}

/* Largest |a - b| / max(1, |b|) over n elements. */
static double max_rel(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        worst = d > worst ? d : worst;
    }
    return worst;
}

/* Column-major strided-batched GEMM with cuBLAS's argument convention, in double. */
static void host_gemm(void *u, int ta, int tb, int m, int n, int k, float alpha, const float *A,
                      int lda, long long sA, const float *B, int ldb, long long sB, float beta,
                      float *C, int ldc, long long sC, int batch)
{
    (void)u;
    for (int b = 0; b < batch; b++) {
        const float *a = A + b * sA, *bb = B + b * sB;
        float *c = C + b * sC;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double s = 0.0;
                for (int p = 0; p < k; p++) {
                    double x = ta ? a[p + (size_t)i * lda] : a[i + (size_t)p * lda];
                    double y = tb ? bb[j + (size_t)p * ldb] : bb[p + (size_t)j * ldb];
                    s += x * y;
                }
                float *dst = &c[i + (size_t)j * ldc];
                *dst = (float)(alpha * s + (beta != 0.0f ? beta * (double)*dst : 0.0));
            }
    }
}

Test(kmath, gelu_and_its_gradient_are_the_cpu_kernels_bit_for_bit)
{
    enum { N = 4001 };
    float x[N], out[N], d[N], one[N];
    for (int i = 0; i < N; i++) {
        x[i] = -10.0f + 20.0f * (float)i / (N - 1);
        one[i] = 1.0f;
        d[i] = 0.0f;
    }
    pp_gelu_forward(out, x, N);
    pp_gelu_backward(d, one, x, N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(pp_km_gelu(x[i]), out[i], "gelu(%g)", (double)x[i]);
        cr_assert_eq(pp_km_gelu_grad(x[i]), d[i], "gelu'(%g)", (double)x[i]);
    }
}

Test(kmath, adamw_element_is_the_cpu_kernel_bit_for_bit)
{
    enum { N = 513 };
    float *p = rand_buf(N, 1.0f), *g = rand_buf(N, 0.1f), *m = rand_buf(N, 0.01f);
    float *v = zeros(N), *p2 = malloc(N * sizeof(float)), *m2 = malloc(N * sizeof(float));
    float *v2 = zeros(N);
    for (int i = 0; i < N; i++)
        v[i] = v2[i] = fabsf(frand()) * 1e-4f;
    memcpy(p2, p, N * sizeof(float));
    memcpy(m2, m, N * sizeof(float));
    for (int64_t t = 1; t <= 3; t++) {
        pp_adamw_update(p, g, m, v, N, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, t);
        /* as the device table computes them: in double from the float betas */
        float c1 = (float)(1.0 - pow((double)0.9f, (double)t));
        float c2 = (float)(1.0 - pow((double)0.95f, (double)t));
        for (int i = 0; i < N; i++)
            pp_km_adamw(&p2[i], g[i], &m2[i], &v2[i], 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, c1,
                        c2);
    }
    cr_assert_eq(memcmp(p, p2, N * sizeof(float)), 0);
    cr_assert_eq(memcmp(m, m2, N * sizeof(float)), 0);
    cr_assert_eq(memcmp(v, v2, N * sizeof(float)), 0);
    free(p), free(g), free(m), free(v), free(p2), free(m2), free(v2);
}

/* The device's layernorm row (two passes in double, then the element formulas) against the CPU
 * kernel, forward and input gradient; a large mean checks the two-pass variance. */
Test(kmath, layernorm_rows_match_the_cpu_kernel)
{
    enum { N = 7, C = 96 };
    float *x = rand_buf(N * C, 3.0f), *w = rand_buf(C, 1.0f), *b = rand_buf(C, 0.5f);
    float *d = rand_buf(N * C, 1.0f);
    for (int i = 0; i < C; i++)
        x[i] += 1000.0f;
    float *out = zeros(N * C), *mean = zeros(N), *rstd = zeros(N), *dx = zeros(N * C);
    pp_layernorm_forward(out, mean, rstd, x, w, b, N, C);
    pp_layernorm_backward_input(dx, d, x, w, mean, rstd, N, C);
    for (int n = 0; n < N; n++) {
        const float *r = x + n * C, *dr = d + n * C;
        double s = 0.0, sq = 0.0;
        for (int c = 0; c < C; c++)
            s += r[c];
        double m = pp_km_ln_mean(s, C);
        for (int c = 0; c < C; c++)
            sq += (r[c] - m) * (r[c] - m);
        float rs = pp_km_ln_rstd(sq, C), mf = (float)m;
        cr_assert_eq(mf, mean[n]);
        cr_assert_eq(rs, rstd[n]);
        float gm = 0.0f, gxm = 0.0f;
        for (int c = 0; c < C; c++) {
            cr_assert_eq((r[c] - mf) * rs * w[c] + b[c], out[n * C + c]);
            float g = dr[c] * w[c];
            gm += g;
            gxm += g * (r[c] - mf) * rs;
        }
        gm /= (float)C;
        gxm /= (float)C;
        for (int c = 0; c < C; c++)
            cr_assert_eq(pp_km_ln_dx(dr[c], w[c], r[c], mf, rs, gm, gxm), dx[n * C + c]);
    }
    free(x), free(w), free(b), free(d), free(out), free(mean), free(rstd), free(dx);
}

Test(kmath, cross_entropy_row_matches_the_cpu_kernel)
{
    enum { N = 5, V = 301 };
    float *l = rand_buf(N * V, 8.0f), *probs = zeros(N * V), *loss = zeros(N);
    int32_t t[N] = {0, 300, 17, 150, 299};
    pp_xent_forward(loss, probs, l, t, N, V);
    for (int n = 0; n < N; n++) {
        const float *r = l + n * V;
        float mx = r[0];
        for (int i = 1; i < V; i++)
            mx = r[i] > mx ? r[i] : mx;
        double s = 0.0;
        for (int i = 0; i < V; i++)
            s += expf(r[i] - mx);
        cr_assert_eq(pp_km_xent_loss(s, r[t[n]], mx), loss[n]);
    }
    free(l), free(probs), free(loss);
}

/* The linear layer's three GEMM plans, with bias added as the device does (rows seeded, then
 * beta = 1), against the CPU kernels: float32 sums in another order, within 1e-5. */
Test(kmath, linear_gemm_plans_match_the_cpu_kernels)
{
    enum { N = 13, IC = 24, OC = 40 };
    float *inp = rand_buf(N * IC, 1.0f), *w = rand_buf(OC * IC, 0.3f), *bias = rand_buf(OC, 0.1f);
    float *dout = rand_buf(N * OC, 1.0f);
    float *o1 = zeros(N * OC), *o2 = zeros(N * OC);
    pp_linear_forward(o1, inp, w, bias, N, IC, OC);
    for (int n = 0; n < N; n++)
        memcpy(o2 + n * OC, bias, OC * sizeof(float));
    pp_km_plan_linear_forward(host_gemm, NULL, o2, inp, w, N, IC, OC, 1.0f);
    cr_assert_leq(max_rel(o2, o1, N * OC), 1e-5);
    float *d1 = rand_buf(N * IC, 1.0f), *d2 = malloc(N * IC * sizeof(float));
    memcpy(d2, d1, N * IC * sizeof(float)); /* both accumulate onto the same start */
    pp_linear_backward_input(d1, dout, w, N, IC, OC);
    pp_km_plan_linear_backward_input(host_gemm, NULL, d2, dout, w, N, IC, OC);
    cr_assert_leq(max_rel(d2, d1, N * IC), 1e-5);
    float *w1 = rand_buf(OC * IC, 1.0f), *w2 = malloc(OC * IC * sizeof(float));
    memcpy(w2, w1, OC * IC * sizeof(float));
    pp_linear_backward_weight(w1, NULL, dout, inp, N, IC, OC);
    pp_km_plan_linear_backward_weight(host_gemm, NULL, w2, dout, inp, N, IC, OC);
    cr_assert_leq(max_rel(w2, w1, OC * IC), 1e-5);
    free(inp), free(w), free(bias), free(dout), free(o1), free(o2), free(d1), free(d2);
    free(w1), free(w2);
}

/* Attention as the device runs it: score GEMMs, the causal softmax row, value GEMMs; backward:
 * value GEMMs, the softmax-backward row, q/k GEMMs. Against the CPU kernel, forward and
 * backward, with B = 2 and 3 heads so that batch and head strides are both exercised. */
Test(kmath, attention_gemm_plans_and_rows_match_the_cpu_kernel)
{
    enum { B = 2, T = 9, C = 12, NH = 3 };
    size_t nqkv = (size_t)B * T * 3 * C, natt = (size_t)B * NH * T * T, nout = (size_t)B * T * C;
    float *qkv = rand_buf(nqkv, 1.0f), *dout = rand_buf(nout, 1.0f);
    float *out1 = zeros(nout), *att1 = zeros(natt), *out2 = zeros(nout), *att2 = zeros(natt);
    pp_attention_forward(out1, att1, qkv, B, T, C, NH);
    pp_km_plan_attention_scores(host_gemm, NULL, att2, qkv, B, T, C, NH);
    for (size_t r = 0; r < (size_t)B * NH * T; r++)
        pp_km_causal_softmax_row(att2 + r * T, (int)(r % T), T);
    pp_km_plan_attention_values(host_gemm, NULL, out2, att2, qkv, B, T, C, NH);
    cr_assert_leq(max_rel(att2, att1, natt), 1e-5, "attention probabilities");
    cr_assert_leq(max_rel(out2, out1, nout), 1e-5, "attention output");
    for (size_t r = 0; r < (size_t)B * NH * T; r++)
        for (int j = (int)(r % T) + 1; j < T; j++)
            cr_assert_eq(att2[r * T + j], 0.0f, "masked entries are exactly 0");

    float *dq1 = zeros(nqkv), *dq2 = zeros(nqkv), *scr1 = zeros((size_t)T * T),
          *scr2 = zeros(natt);
    pp_attention_backward(dq1, scr1, dout, qkv, att1, B, T, C, NH);
    float scale = 1.0f / sqrtf((float)(C / NH));
    pp_km_plan_attention_backward_values(host_gemm, NULL, scr2, dq2, dout, qkv, att1, B, T, C,
                                         NH);
    for (size_t r = 0; r < (size_t)B * NH * T; r++)
        pp_km_softmax_backward_row(scr2 + r * T, att1 + r * T, (int)(r % T), T, scale);
    pp_km_plan_attention_backward_qk(host_gemm, NULL, dq2, scr2, qkv, B, T, C, NH);
    cr_assert_leq(max_rel(dq2, dq1, nqkv), 1e-5, "dqkv");
    free(qkv), free(dout), free(out1), free(att1), free(out2), free(att2);
    free(dq1), free(dq2), free(scr1), free(scr2);
}

Test(kmath, bf16_rounding_is_round_to_nearest_even)
{
    cr_assert_eq(pp_km_bf16_round(1.0f), 1.0f);
    /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa, 1 */
    cr_assert_eq(pp_km_bf16_round(1.0f + 1.0f / 256.0f), 1.0f);
    cr_assert_eq(pp_km_bf16_round(1.0f + 3.0f / 256.0f), 1.0f + 4.0f / 256.0f);
    /* 8 significant bits: half a unit in the last place is at most 2^-8 of the value */
    for (int i = 0; i < 10000; i++) {
        float x = frand() * 1000.0f;
        cr_assert_leq(fabsf(pp_km_bf16_round(x) - x), fabsf(x) / 256.0f + 1e-30f);
    }
    cr_assert(isinf(pp_km_bf16_round(INFINITY)));
}
