/* test_kernels.c: unit tests of the CPU kernels (kernels/pp_kernels.h). Each float32 kernel is
 * checked against a float64 reference forward written here with plain loops: the forward values
 * directly, the backward against central finite differences of that reference. Hand-computed
 * cases pin the conventions (mask, eps, accumulation) that a gradient check cannot see. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pp_kernels.h"
#include "pp_kops.h"

/* Gradient checks: the analytic gradient is float32 (relative rounding ~1e-7 per operation, a
 * few dozen operations deep), the numeric one is a central difference of the float64 reference
 * with step 1e-6 (truncation ~h^2 = 1e-12, cancellation ~1e-16 / h = 1e-10). Both errors sit
 * orders of magnitude below 1e-3, while a wrong or missing term in a formula is an O(1) error. */
#define GRAD_TOL 1e-3
#define FD_STEP 1e-6

/* Forward checks, as max |f - r| / (1 + |r|): inputs are O(1) and every reduction has at most a
 * few dozen terms, so float32 lands within ~1e-6 of the float64 reference; 1e-5 is a 10x margin
 * that still catches any formula mistake (those are >= 1e-2 at these sizes). */
#define FWD_TOL 1e-5

/* Accumulation checks compare g0 + 2 g against two calls on g0: the only difference is float
 * rounding of a few additions (and GEMM's fused beta = 1), ~1e-7 relative; 1e-5 is the margin. */
#define ACC_TOL 1e-5

/* Small shapes for the gradient checks: big enough to have several heads, repeated tokens and a
 * causal window longer than one, small enough that O(n^2) finite differences stay fast. */
static const struct shape {
    int B, T, C, NH, V;
} k_shapes[] = {
    {2, 5, 8, 2, 7},
    {1, 3, 4, 1, 3},
    {3, 4, 12, 3, 11},
};
#define N_SHAPES (sizeof k_shapes / sizeof k_shapes[0])

/* ---- helpers ---- */

/* splitmix64: a fixed-seed generator so every run tests the same numbers. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static float rng_uniform(uint64_t *s, float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)(rng_next(s) >> 40) / (double)(1u << 24));
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    cr_assert(p != NULL, "out of memory");
    return p;
}

/* The same values in float32 (for the kernel) and float64 (for the reference). */
typedef struct buf {
    float *f;
    double *d;
    size_t n;
} buf;

static buf buf_zero(size_t n)
{
    buf b = {xcalloc(n, sizeof(float)), xcalloc(n, sizeof(double)), n};
    return b;
}

static buf buf_rand(size_t n, uint64_t *rng, float lo, float hi)
{
    buf b = buf_zero(n);
    for (size_t i = 0; i < n; i++) {
        b.f[i] = rng_uniform(rng, lo, hi);
        b.d[i] = b.f[i];
    }
    return b;
}

static void buf_free(buf *b)
{
    free(b->f);
    free(b->d);
    b->f = NULL;
    b->d = NULL;
}

static int32_t *rand_tokens(size_t n, int V, uint64_t *rng)
{
    int32_t *t = xcalloc(n, sizeof(int32_t));
    for (size_t i = 0; i < n; i++)
        t[i] = (int32_t)(rng_next(rng) % (uint64_t)V);
    return t;
}

static double dot_d(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Central differences of obj(ctx) with respect to each x[i]; x lives inside ctx. */
static void numgrad(double *g, double *x, size_t n, double (*obj)(void *), void *ctx)
{
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + FD_STEP;
        double lp = obj(ctx);
        x[i] = x0 - FD_STEP;
        double lm = obj(ctx);
        x[i] = x0;
        g[i] = (lp - lm) / (2.0 * FD_STEP);
    }
}

static void expect_grad(const char *what, const float *analytic, const double *numeric, size_t n)
{
    double diff = 0.0, na = 0.0, nn = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = analytic[i] - numeric[i];
        diff += d * d;
        na += (double)analytic[i] * analytic[i];
        nn += numeric[i] * numeric[i];
    }
    double den = fmax(fmax(sqrt(na), sqrt(nn)), 1e-30);
    double rel = sqrt(diff) / den;
    cr_log_info("gradcheck %-22s rel err %.3e", what, rel);
    cr_expect(nn > 0.0, "%s: numeric gradient is all zero, the check is vacuous", what);
    cr_expect(rel <= GRAD_TOL, "%s: relative error %.3e > %.0e", what, rel, GRAD_TOL);
}

static void expect_forward(const char *what, const float *f, const double *r, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs(f[i] - r[i]) / (1.0 + fabs(r[i])));
    cr_log_info("forward  %-22s max err %.3e", what, worst);
    cr_expect(worst <= FWD_TOL, "%s: forward error %.3e > %.0e", what, worst, FWD_TOL);
}

/* got must equal g0 + 2 * once, elementwise. */
static void expect_accumulated(const char *what, const float *got, const float *g0,
                               const float *once, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double want = (double)g0[i] + 2.0 * once[i];
        if (fabs(got[i] - want) > ACC_TOL * (1.0 + fabs(want))) {
            cr_expect_fail("%s[%zu]: %g after two calls on %g, want %g", what, i, got[i], g0[i],
                           want);
            return;
        }
    }
}

/* ---- float64 reference forwards: straight loops, no shared code with the kernels ---- */

static void ref_embed(double *out, const int32_t *tok, const double *wte, const double *wpe, int B,
                      int T, int C)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                out[(b * T + t) * C + c] = wte[tok[b * T + t] * C + c] + wpe[t * C + c];
}

static void ref_linear(double *out, const double *inp, const double *w, const double *bias, int N,
                       int IC, int OC)
{
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0.0;
            for (int i = 0; i < IC; i++)
                s += inp[n * IC + i] * w[o * IC + i];
            out[n * OC + o] = s;
        }
}

static void ref_layernorm(double *out, const double *inp, const double *w, const double *b, int N,
                          int C)
{
    for (int n = 0; n < N; n++) {
        const double *x = inp + n * C;
        double m = 0.0, v = 0.0;
        for (int c = 0; c < C; c++)
            m += x[c] / C;
        for (int c = 0; c < C; c++)
            v += (x[c] - m) * (x[c] - m) / C;
        for (int c = 0; c < C; c++)
            out[n * C + c] = (x[c] - m) / sqrt(v + 1e-5) * w[c] + b[c];
    }
}

static void ref_attention(double *out, double *att, const double *qkv, int B, int T, int C, int NH)
{
    int hs = C / NH;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++)
            for (int t = 0; t < T; t++) {
                double *a = att + ((b * NH + h) * T + t) * T;
                const double *q = qkv + (b * T + t) * 3 * C + h * hs;
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j < T; j++) {
                    a[j] = 0.0;
                    if (j > t)
                        continue;
                    const double *k = qkv + (b * T + j) * 3 * C + C + h * hs;
                    double s = 0.0;
                    for (int i = 0; i < hs; i++)
                        s += q[i] * k[i];
                    a[j] = s / sqrt((double)hs);
                    mx = fmax(mx, a[j]);
                }
                for (int j = 0; j <= t; j++) {
                    a[j] = exp(a[j] - mx);
                    sum += a[j];
                }
                for (int j = 0; j <= t; j++)
                    a[j] /= sum;
                for (int i = 0; i < hs; i++) {
                    double s = 0.0;
                    for (int j = 0; j <= t; j++)
                        s += a[j] * qkv[(b * T + j) * 3 * C + 2 * C + h * hs + i];
                    out[(b * T + t) * C + h * hs + i] = s;
                }
            }
}

static double ref_gelu1(double x)
{
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}

static void ref_xent(double *losses, const double *logits, const int32_t *targets, int N, int V)
{
    for (int n = 0; n < N; n++) {
        double sum = 0.0;
        for (int i = 0; i < V; i++)
            sum += exp(logits[n * V + i]);
        losses[n] = -log(exp(logits[n * V + targets[n]]) / sum);
    }
}

/* ---- embedding ---- */

struct embed_ctx {
    int B, T, C;
    const int32_t *tok;
    double *wte, *wpe, *out;
    const double *R;
};

static double embed_obj(void *p)
{
    struct embed_ctx *c = p;
    ref_embed(c->out, c->tok, c->wte, c->wpe, c->B, c->T, c->C);
    return dot_d(c->out, c->R, (size_t)c->B * c->T * c->C);
}

Test(embed, gradient_matches_finite_differences)
{
    uint64_t rng = 1;
    for (size_t s = 0; s < N_SHAPES; s++) {
        int B = k_shapes[s].B, T = k_shapes[s].T, C = k_shapes[s].C, V = k_shapes[s].V;
        size_t n = (size_t)B * T * C;
        int32_t *tok = rand_tokens((size_t)B * T, V, &rng);
        buf wte = buf_rand((size_t)V * C, &rng, -1, 1), wpe = buf_rand((size_t)T * C, &rng, -1, 1);
        buf R = buf_rand(n, &rng, -1, 1), out = buf_zero(n);
        buf dwte = buf_zero(wte.n), dwpe = buf_zero(wpe.n);

        pp_embed_forward(out.f, tok, wte.f, wpe.f, B, T, C);
        ref_embed(out.d, tok, wte.d, wpe.d, B, T, C);
        expect_forward("embed", out.f, out.d, n);

        pp_embed_backward(dwte.f, dwpe.f, R.f, tok, B, T, C);
        struct embed_ctx ctx = {B, T, C, tok, wte.d, wpe.d, out.d, R.d};
        numgrad(dwte.d, wte.d, wte.n, embed_obj, &ctx);
        numgrad(dwpe.d, wpe.d, wpe.n, embed_obj, &ctx);
        expect_grad("embed dwte", dwte.f, dwte.d, wte.n);
        expect_grad("embed dwpe", dwpe.f, dwpe.d, wpe.n);

        buf_free(&wte), buf_free(&wpe), buf_free(&R), buf_free(&out);
        buf_free(&dwte), buf_free(&dwpe), free(tok);
    }
}

Test(embed, repeated_token_accumulates_rows)
{
    /* Two positions with the same token: its wte row must receive both upstream rows. */
    const int32_t tok[2] = {1, 1};
    const float dout[4] = {1, 2, 10, 20};
    float dwte[6] = {0}, dwpe[4] = {0};
    pp_embed_backward(dwte, dwpe, dout, tok, 1, 2, 2);
    cr_expect(dwte[0] == 0 && dwte[1] == 0 && dwte[4] == 0 && dwte[5] == 0);
    cr_expect(dwte[2] == 11 && dwte[3] == 22, "got %g %g", dwte[2], dwte[3]);
    cr_expect(dwpe[0] == 1 && dwpe[1] == 2 && dwpe[2] == 10 && dwpe[3] == 20);
}

/* ---- linear ---- */

struct linear_ctx {
    int N, IC, OC;
    double *inp, *w, *bias, *out;
    const double *R;
};

static double linear_obj(void *p)
{
    struct linear_ctx *c = p;
    ref_linear(c->out, c->inp, c->w, c->bias, c->N, c->IC, c->OC);
    return dot_d(c->out, c->R, (size_t)c->N * c->OC);
}

Test(linear, gradient_matches_finite_differences)
{
    uint64_t rng = 2;
    for (size_t s = 0; s < N_SHAPES; s++) {
        /* IC = C and OC = 3C as in the QKV projection, N = B*T rows. */
        int N = k_shapes[s].B * k_shapes[s].T, IC = k_shapes[s].C, OC = 3 * k_shapes[s].C;
        buf inp = buf_rand((size_t)N * IC, &rng, -1, 1), w = buf_rand((size_t)OC * IC, &rng, -1, 1);
        buf bias = buf_rand((size_t)OC, &rng, -1, 1), R = buf_rand((size_t)N * OC, &rng, -1, 1);
        buf out = buf_zero(R.n), dinp = buf_zero(inp.n), dw = buf_zero(w.n), db = buf_zero(bias.n);

        pp_linear_forward(out.f, inp.f, w.f, bias.f, N, IC, OC);
        ref_linear(out.d, inp.d, w.d, bias.d, N, IC, OC);
        expect_forward("linear", out.f, out.d, out.n);

        pp_linear_backward_input(dinp.f, R.f, w.f, N, IC, OC);
        pp_linear_backward_weight(dw.f, db.f, R.f, inp.f, N, IC, OC);
        struct linear_ctx ctx = {N, IC, OC, inp.d, w.d, bias.d, out.d, R.d};
        numgrad(dinp.d, inp.d, inp.n, linear_obj, &ctx);
        numgrad(dw.d, w.d, w.n, linear_obj, &ctx);
        numgrad(db.d, bias.d, bias.n, linear_obj, &ctx);
        expect_grad("linear dinp", dinp.f, dinp.d, inp.n);
        expect_grad("linear dw", dw.f, dw.d, w.n);
        expect_grad("linear dbias", db.f, db.d, bias.n);

        buf_free(&inp), buf_free(&w), buf_free(&bias), buf_free(&R), buf_free(&out);
        buf_free(&dinp), buf_free(&dw), buf_free(&db);
    }
}

Test(linear, null_bias_means_no_bias)
{
    uint64_t rng = 3;
    int N = 6, IC = 5, OC = 4;
    buf inp = buf_rand((size_t)N * IC, &rng, -1, 1), w = buf_rand((size_t)OC * IC, &rng, -1, 1);
    buf out = buf_rand((size_t)N * OC, &rng, -1, 1); /* garbage that must be overwritten */
    buf dout = buf_rand(out.n, &rng, -1, 1), dw = buf_zero(w.n), dw2 = buf_zero(w.n);
    pp_linear_forward(out.f, inp.f, w.f, NULL, N, IC, OC);
    ref_linear(out.d, inp.d, w.d, NULL, N, IC, OC);
    expect_forward("linear no bias", out.f, out.d, out.n);
    /* A NULL dbias skips the bias gradient and leaves dw as with a bias. */
    float dbias[4] = {0};
    pp_linear_backward_weight(dw.f, NULL, dout.f, inp.f, N, IC, OC);
    pp_linear_backward_weight(dw2.f, dbias, dout.f, inp.f, N, IC, OC);
    cr_expect(memcmp(dw.f, dw2.f, w.n * sizeof(float)) == 0);
    buf_free(&inp), buf_free(&w), buf_free(&out), buf_free(&dout), buf_free(&dw), buf_free(&dw2);
}

Test(linear, backward_accumulates)
{
    uint64_t rng = 4;
    int N = 7, IC = 6, OC = 5;
    buf inp = buf_rand((size_t)N * IC, &rng, -1, 1), w = buf_rand((size_t)OC * IC, &rng, -1, 1);
    buf dout = buf_rand((size_t)N * OC, &rng, -1, 1);
    buf once_in = buf_zero(inp.n), once_w = buf_zero(w.n), once_b = buf_zero((size_t)OC);
    buf g0_in = buf_rand(inp.n, &rng, -1, 1), g0_w = buf_rand(w.n, &rng, -1, 1);
    buf g0_b = buf_rand((size_t)OC, &rng, -1, 1);
    buf got_in = buf_zero(inp.n), got_w = buf_zero(w.n), got_b = buf_zero((size_t)OC);
    memcpy(got_in.f, g0_in.f, inp.n * sizeof(float));
    memcpy(got_w.f, g0_w.f, w.n * sizeof(float));
    memcpy(got_b.f, g0_b.f, (size_t)OC * sizeof(float));

    pp_linear_backward_input(once_in.f, dout.f, w.f, N, IC, OC);
    pp_linear_backward_weight(once_w.f, once_b.f, dout.f, inp.f, N, IC, OC);
    for (int k = 0; k < 2; k++) {
        pp_linear_backward_input(got_in.f, dout.f, w.f, N, IC, OC);
        pp_linear_backward_weight(got_w.f, got_b.f, dout.f, inp.f, N, IC, OC);
    }
    expect_accumulated("linear dinp", got_in.f, g0_in.f, once_in.f, inp.n);
    expect_accumulated("linear dw", got_w.f, g0_w.f, once_w.f, w.n);
    expect_accumulated("linear dbias", got_b.f, g0_b.f, once_b.f, (size_t)OC);

    buf *all[] = {&inp, &w, &dout, &once_in, &once_w, &once_b, &g0_in, &g0_w, &g0_b,
                  &got_in, &got_w, &got_b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* ---- layernorm ---- */

struct ln_ctx {
    int N, C;
    double *inp, *w, *b, *out;
    const double *R;
};

static double ln_obj(void *p)
{
    struct ln_ctx *c = p;
    ref_layernorm(c->out, c->inp, c->w, c->b, c->N, c->C);
    return dot_d(c->out, c->R, (size_t)c->N * c->C);
}

Test(layernorm, gradient_matches_finite_differences)
{
    uint64_t rng = 5;
    for (size_t s = 0; s < N_SHAPES; s++) {
        int N = k_shapes[s].B * k_shapes[s].T, C = k_shapes[s].C;
        size_t n = (size_t)N * C;
        /* An offset on the input: the residual stream is not zero-mean, and the mean term of the
         * backward only matters when it is not. */
        buf inp = buf_rand(n, &rng, 0.5f, 2.5f), w = buf_rand((size_t)C, &rng, 0.5f, 1.5f);
        buf b = buf_rand((size_t)C, &rng, -1, 1), R = buf_rand(n, &rng, -1, 1);
        buf out = buf_zero(n), dinp = buf_zero(n), dw = buf_zero(w.n), db = buf_zero(b.n);
        float *mean = xcalloc((size_t)N, sizeof(float)), *rstd = xcalloc((size_t)N, sizeof(float));

        pp_layernorm_forward(out.f, mean, rstd, inp.f, w.f, b.f, N, C);
        ref_layernorm(out.d, inp.d, w.d, b.d, N, C);
        expect_forward("layernorm", out.f, out.d, n);

        pp_layernorm_backward_input(dinp.f, R.f, inp.f, w.f, mean, rstd, N, C);
        pp_layernorm_backward_weight(dw.f, db.f, R.f, inp.f, mean, rstd, N, C);
        struct ln_ctx ctx = {N, C, inp.d, w.d, b.d, out.d, R.d};
        numgrad(dinp.d, inp.d, n, ln_obj, &ctx);
        numgrad(dw.d, w.d, w.n, ln_obj, &ctx);
        numgrad(db.d, b.d, b.n, ln_obj, &ctx);
        expect_grad("layernorm dinp", dinp.f, dinp.d, n);
        expect_grad("layernorm dw", dw.f, dw.d, w.n);
        expect_grad("layernorm db", db.f, db.d, b.n);

        buf_free(&inp), buf_free(&w), buf_free(&b), buf_free(&R), buf_free(&out);
        buf_free(&dinp), buf_free(&dw), buf_free(&db), free(mean), free(rstd);
    }
}

Test(layernorm, normalises_one_two_three)
{
    /* mean 2, biased variance 2/3, rstd = 1/sqrt(2/3 + 1e-5) = 1.2247357 (eps included). */
    const float x[3] = {1, 2, 3}, w[3] = {1, 1, 1}, b[3] = {0, 0, 0};
    float out[3], mean, rstd;
    pp_layernorm_forward(out, &mean, &rstd, x, w, b, 1, 3);
    /* 1e-6: one float32 rounding of values near 1 is 6e-8; a few operations deep. */
    cr_expect(fabsf(mean - 2.0f) <= 1e-6f, "mean %g", mean);
    cr_expect(fabsf(rstd - 1.2247357f) <= 1e-6f, "rstd %.8g", rstd);
    cr_expect(fabsf(out[0] + 1.2247357f) <= 1e-6f, "out[0] %.8g", out[0]);
    cr_expect(fabsf(out[1]) <= 1e-6f, "out[1] %.8g", out[1]);
    cr_expect(fabsf(out[2] - 1.2247357f) <= 1e-6f, "out[2] %.8g", out[2]);
}

Test(layernorm, backward_accumulates)
{
    uint64_t rng = 6;
    int N = 5, C = 8;
    size_t n = (size_t)N * C;
    buf inp = buf_rand(n, &rng, -1, 1), w = buf_rand((size_t)C, &rng, -1, 1);
    buf b = buf_rand((size_t)C, &rng, -1, 1), dout = buf_rand(n, &rng, -1, 1), out = buf_zero(n);
    float mean[5], rstd[5];
    pp_layernorm_forward(out.f, mean, rstd, inp.f, w.f, b.f, N, C);

    buf once_in = buf_zero(n), once_w = buf_zero(w.n), once_b = buf_zero(b.n);
    buf g0_in = buf_rand(n, &rng, -1, 1), g0_w = buf_rand(w.n, &rng, -1, 1);
    buf g0_b = buf_rand(b.n, &rng, -1, 1);
    buf got_in = buf_zero(n), got_w = buf_zero(w.n), got_b = buf_zero(b.n);
    memcpy(got_in.f, g0_in.f, n * sizeof(float));
    memcpy(got_w.f, g0_w.f, w.n * sizeof(float));
    memcpy(got_b.f, g0_b.f, b.n * sizeof(float));

    pp_layernorm_backward_input(once_in.f, dout.f, inp.f, w.f, mean, rstd, N, C);
    pp_layernorm_backward_weight(once_w.f, once_b.f, dout.f, inp.f, mean, rstd, N, C);
    for (int k = 0; k < 2; k++) {
        pp_layernorm_backward_input(got_in.f, dout.f, inp.f, w.f, mean, rstd, N, C);
        pp_layernorm_backward_weight(got_w.f, got_b.f, dout.f, inp.f, mean, rstd, N, C);
    }
    expect_accumulated("layernorm dinp", got_in.f, g0_in.f, once_in.f, n);
    expect_accumulated("layernorm dw", got_w.f, g0_w.f, once_w.f, w.n);
    expect_accumulated("layernorm db", got_b.f, g0_b.f, once_b.f, b.n);

    buf *all[] = {&inp, &w, &b, &dout, &out, &once_in, &once_w, &once_b,
                  &g0_in, &g0_w, &g0_b, &got_in, &got_w, &got_b};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        buf_free(all[i]);
}

/* ---- attention ---- */

struct att_ctx {
    int B, T, C, NH;
    double *qkv, *out, *att;
    const double *R;
};

static double att_obj(void *p)
{
    struct att_ctx *c = p;
    ref_attention(c->out, c->att, c->qkv, c->B, c->T, c->C, c->NH);
    return dot_d(c->out, c->R, (size_t)c->B * c->T * c->C);
}

Test(attention, gradient_matches_finite_differences)
{
    uint64_t rng = 7;
    for (size_t s = 0; s < N_SHAPES; s++) {
        int B = k_shapes[s].B, T = k_shapes[s].T, C = k_shapes[s].C, NH = k_shapes[s].NH;
        size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
        /* Inputs up to +-2 give scores up to ~4 * sqrt(hs): peaked softmax rows, not near-uniform
         * ones where the softmax backward is hard to get wrong. */
        buf qkv = buf_rand(3 * n, &rng, -2, 2), R = buf_rand(n, &rng, -1, 1);
        buf out = buf_zero(n), att = buf_zero(na), dqkv = buf_zero(3 * n);
        float *scratch = xcalloc((size_t)T * T, sizeof(float));

        pp_attention_forward(out.f, att.f, qkv.f, B, T, C, NH);
        ref_attention(out.d, att.d, qkv.d, B, T, C, NH);
        expect_forward("attention out", out.f, out.d, n);
        expect_forward("attention probs", att.f, att.d, na);

        pp_attention_backward(dqkv.f, scratch, R.f, qkv.f, att.f, B, T, C, NH);
        struct att_ctx ctx = {B, T, C, NH, qkv.d, out.d, att.d, R.d};
        numgrad(dqkv.d, qkv.d, qkv.n, att_obj, &ctx);
        expect_grad("attention dqkv", dqkv.f, dqkv.d, qkv.n);

        buf_free(&qkv), buf_free(&R), buf_free(&out), buf_free(&att), buf_free(&dqkv);
        free(scratch);
    }
}

Test(attention, single_position_returns_v)
{
    /* T = 1: the only probability is exactly 1, so out is v bit for bit. */
    uint64_t rng = 8;
    int B = 2, T = 1, C = 6, NH = 3;
    buf qkv = buf_rand((size_t)B * T * 3 * C, &rng, -3, 3);
    float out[12], att[6];
    pp_attention_forward(out, att, qkv.f, B, T, C, NH);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++)
            cr_expect(out[b * C + c] == qkv.f[b * 3 * C + 2 * C + c], "b %d c %d: %g vs %g", b, c,
                      out[b * C + c], qkv.f[b * 3 * C + 2 * C + c]);
    for (int i = 0; i < B * NH; i++)
        cr_expect(att[i] == 1.0f);
    buf_free(&qkv);
}

Test(attention, future_positions_are_masked)
{
    uint64_t rng = 9;
    int B = 2, T = 6, C = 8, NH = 2;
    size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    buf qkv = buf_rand(3 * n, &rng, -2, 2);
    float *out1 = xcalloc(n, sizeof(float)), *out2 = xcalloc(n, sizeof(float));
    float *att1 = xcalloc(na, sizeof(float)), *att2 = xcalloc(na, sizeof(float));
    pp_attention_forward(out1, att1, qkv.f, B, T, C, NH);

    /* Masked probabilities are exactly 0 and each causal row sums to 1 (1e-6: T float32
     * additions of values <= 1). */
    for (int bh = 0; bh < B * NH; bh++)
        for (int t = 0; t < T; t++) {
            const float *row = att1 + ((size_t)bh * T + t) * T;
            double sum = 0.0;
            for (int j = 0; j < T; j++) {
                if (j > t)
                    cr_expect(row[j] == 0.0f, "att[%d][%d][%d] = %g", bh, t, j, row[j]);
                sum += row[j];
            }
            cr_expect(fabs(sum - 1.0) <= 1e-6, "row sum %.9g", sum);
        }

    /* Rewriting the last position's q, k and v must leave every earlier output and probability
     * bit for bit unchanged: the mask is exact, not a large negative number. */
    for (int b = 0; b < B; b++)
        for (int c = 0; c < 3 * C; c++)
            qkv.f[((size_t)b * T + T - 1) * 3 * C + c] = 100.0f + (float)c;
    pp_attention_forward(out2, att2, qkv.f, B, T, C, NH);
    for (int b = 0; b < B; b++)
        cr_expect(memcmp(out1 + (size_t)b * T * C, out2 + (size_t)b * T * C,
                         (size_t)(T - 1) * C * sizeof(float)) == 0,
                  "batch %d: earlier outputs changed", b);
    for (int bh = 0; bh < B * NH; bh++)
        cr_expect(memcmp(att1 + (size_t)bh * T * T, att2 + (size_t)bh * T * T,
                         (size_t)(T - 1) * T * sizeof(float)) == 0,
                  "head %d: earlier probabilities changed", bh);
    buf_free(&qkv), free(out1), free(out2), free(att1), free(att2);
}

Test(attention, backward_accumulates)
{
    uint64_t rng = 10;
    int B = 2, T = 4, C = 6, NH = 2;
    size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    buf qkv = buf_rand(3 * n, &rng, -1, 1), dout = buf_rand(n, &rng, -1, 1);
    buf once = buf_zero(3 * n), g0 = buf_rand(3 * n, &rng, -1, 1), got = buf_zero(3 * n);
    float *out = xcalloc(n, sizeof(float)), *att = xcalloc(na, sizeof(float));
    float *scratch = xcalloc((size_t)T * T, sizeof(float));
    pp_attention_forward(out, att, qkv.f, B, T, C, NH);
    memcpy(got.f, g0.f, 3 * n * sizeof(float));
    pp_attention_backward(once.f, scratch, dout.f, qkv.f, att, B, T, C, NH);
    for (int k = 0; k < 2; k++)
        pp_attention_backward(got.f, scratch, dout.f, qkv.f, att, B, T, C, NH);
    expect_accumulated("attention dqkv", got.f, g0.f, once.f, 3 * n);
    buf_free(&qkv), buf_free(&dout), buf_free(&once), buf_free(&g0), buf_free(&got);
    free(out), free(att), free(scratch);
}

/* ---- GELU ---- */

struct gelu_ctx {
    size_t n;
    double *inp, *out;
    const double *R;
};

static double gelu_obj(void *p)
{
    struct gelu_ctx *c = p;
    for (size_t i = 0; i < c->n; i++)
        c->out[i] = ref_gelu1(c->inp[i]);
    return dot_d(c->out, c->R, c->n);
}

Test(gelu, gradient_matches_finite_differences)
{
    uint64_t rng = 11;
    size_t n = 64;
    /* +-5 reaches both tails, where the tanh saturates and the derivative's second term
     * matters. */
    buf inp = buf_rand(n, &rng, -5, 5), R = buf_rand(n, &rng, -1, 1);
    buf out = buf_zero(n), dinp = buf_zero(n);
    pp_gelu_forward(out.f, inp.f, n);
    struct gelu_ctx ctx = {n, inp.d, out.d, R.d};
    gelu_obj(&ctx);
    expect_forward("gelu", out.f, out.d, n);
    pp_gelu_backward(dinp.f, R.f, inp.f, n);
    numgrad(dinp.d, inp.d, n, gelu_obj, &ctx);
    expect_grad("gelu dinp", dinp.f, dinp.d, n);
    buf_free(&inp), buf_free(&R), buf_free(&out), buf_free(&dinp);
}

/* Values of the tanh approximation computed by hand (in double, rounded); 1e-6 is a few float32
 * roundings of numbers up to 10 in magnitude. */
static const struct {
    float x, y;
} k_gelu_cases[] = {
    {0.0f, 0.0f},   {1.0f, 0.84119199f},   {-1.0f, -0.15880801f},
    {2.0f, 1.9545977f}, {-3.0f, -0.0036373921f}, {10.0f, 10.0f}, {-10.0f, 0.0f},
};

Test(gelu, known_values)
{
    for (size_t i = 0; i < sizeof k_gelu_cases / sizeof k_gelu_cases[0]; i++) {
        float y;
        pp_gelu_forward(&y, &k_gelu_cases[i].x, 1);
        cr_expect(fabsf(y - k_gelu_cases[i].y) <= 1e-6f * (1.0f + fabsf(k_gelu_cases[i].y)),
                  "gelu(%g) = %.9g, want %.9g", k_gelu_cases[i].x, y, k_gelu_cases[i].y);
    }
}

Test(gelu, backward_accumulates)
{
    const float x[2] = {0.0f, 0.0f}, dout[2] = {1.0f, 2.0f};
    float dinp[2] = {5.0f, 5.0f};
    /* gelu'(0) = 0.5 exactly: 5 + 0.5*1 and 5 + 0.5*2. */
    pp_gelu_backward(dinp, dout, x, 2);
    cr_expect(dinp[0] == 5.5f && dinp[1] == 6.0f, "got %g %g", dinp[0], dinp[1]);
}

/* ---- residual ---- */

struct res_ctx {
    size_t n;
    double *a, *b, *out;
    const double *R;
};

static double res_obj(void *p)
{
    struct res_ctx *c = p;
    for (size_t i = 0; i < c->n; i++)
        c->out[i] = c->a[i] + c->b[i];
    return dot_d(c->out, c->R, c->n);
}

Test(residual, gradient_matches_finite_differences)
{
    uint64_t rng = 12;
    size_t n = 40;
    buf a = buf_rand(n, &rng, -1, 1), b = buf_rand(n, &rng, -1, 1), R = buf_rand(n, &rng, -1, 1);
    buf out = buf_zero(n), da = buf_zero(n), db = buf_zero(n);
    pp_residual_forward(out.f, a.f, b.f, n);
    struct res_ctx ctx = {n, a.d, b.d, out.d, R.d};
    res_obj(&ctx);
    expect_forward("residual", out.f, out.d, n);
    pp_residual_backward(da.f, db.f, R.f, n);
    numgrad(da.d, a.d, n, res_obj, &ctx);
    numgrad(db.d, b.d, n, res_obj, &ctx);
    expect_grad("residual da", da.f, da.d, n);
    expect_grad("residual db", db.f, db.d, n);
    buf_free(&a), buf_free(&b), buf_free(&R), buf_free(&out), buf_free(&da), buf_free(&db);
}

Test(residual, backward_adds_to_both_branches)
{
    const float dout[2] = {1.0f, -2.0f};
    float da[2] = {10.0f, 10.0f}, db[2] = {0.5f, 0.5f};
    pp_residual_backward(da, db, dout, 2);
    cr_expect(da[0] == 11.0f && da[1] == 8.0f && db[0] == 1.5f && db[1] == -1.5f);
}

/* ---- cross-entropy ---- */

struct xent_ctx {
    int N, V;
    double scale;
    double *logits, *losses;
    const int32_t *targets;
};

static double xent_obj(void *p)
{
    struct xent_ctx *c = p;
    ref_xent(c->losses, c->logits, c->targets, c->N, c->V);
    double s = 0.0;
    for (int n = 0; n < c->N; n++)
        s += c->losses[n];
    return c->scale * s;
}

Test(xent, gradient_matches_finite_differences)
{
    uint64_t rng = 13;
    for (size_t s = 0; s < N_SHAPES; s++) {
        int N = k_shapes[s].B * k_shapes[s].T, V = k_shapes[s].V;
        /* 1/N as the trainer uses for the mean loss. */
        float scale = 1.0f / (float)N;
        buf logits = buf_rand((size_t)N * V, &rng, -3, 3), losses = buf_zero((size_t)N);
        buf probs = buf_zero(logits.n), dl = buf_zero(logits.n);
        int32_t *targets = rand_tokens((size_t)N, V, &rng);

        pp_xent_forward(losses.f, probs.f, logits.f, targets, N, V);
        ref_xent(losses.d, logits.d, targets, N, V);
        expect_forward("xent losses", losses.f, losses.d, (size_t)N);

        pp_xent_backward(dl.f, probs.f, targets, scale, N, V);
        struct xent_ctx ctx = {N, V, scale, logits.d, losses.d, targets};
        numgrad(dl.d, logits.d, logits.n, xent_obj, &ctx);
        expect_grad("xent dlogits", dl.f, dl.d, logits.n);

        buf_free(&logits), buf_free(&losses), buf_free(&probs), buf_free(&dl), free(targets);
    }
}

Test(xent, uniform_logits_give_log_v)
{
    enum { V = 7 };
    float logits[2 * V], probs[2 * V], losses[2];
    const int32_t targets[2] = {0, 6};
    for (int i = 0; i < 2 * V; i++)
        logits[i] = i < V ? 0.0f : 3.5f; /* any constant row is uniform */
    pp_xent_forward(losses, probs, logits, targets, 2, V);
    /* ln 7 = 1.9459101; 1e-6 is a few float32 roundings at this magnitude. */
    for (int n = 0; n < 2; n++)
        cr_expect(fabsf(losses[n] - 1.9459101f) <= 1e-6f, "loss %.9g", losses[n]);
    for (int i = 0; i < 2 * V; i++)
        cr_expect(fabsf(probs[i] - 1.0f / V) <= 1e-7f, "p %.9g", probs[i]);
}

Test(xent, extreme_logits_stay_finite)
{
    /* exp(1000) overflows and exp(-2000) underflows in float: the stable form must give loss 0
     * for the dominant class and 2000 (not inf) for the vanished one. */
    const float logits[6] = {1000.0f, 0.0f, -1000.0f, 1000.0f, 0.0f, -1000.0f};
    const int32_t targets[2] = {0, 2};
    float probs[6], losses[2];
    pp_xent_forward(losses, probs, logits, targets, 2, 3);
    cr_expect(losses[0] == 0.0f, "loss %g", losses[0]);
    cr_expect(isfinite(losses[1]) && fabsf(losses[1] - 2000.0f) <= 1e-3f, "loss %g", losses[1]);
    cr_expect(probs[0] == 1.0f && probs[2] == 0.0f);
}

Test(xent, backward_accumulates_scaled)
{
    const float probs[3] = {0.25f, 0.5f, 0.25f};
    const int32_t target = 1;
    float d[3] = {1.0f, 1.0f, 1.0f};
    /* 1 + 2 * (p - onehot), all exact in binary. */
    pp_xent_backward(d, probs, &target, 2.0f, 1, 3);
    cr_expect(d[0] == 1.5f && d[1] == 0.0f && d[2] == 1.5f, "got %g %g %g", d[0], d[1], d[2]);
}

/* ---- AdamW ---- */

/* Tolerance for AdamW values of magnitude <= 2: a handful of float32 operations, ~1e-7 each. */
#define ADAM_TOL 1e-6f

Test(adamw, first_step_matches_hand_computation)
{
    /* At t = 1 the bias corrections undo (1 - beta): mhat = g', vhat = g'^2, so the Adam part of
     * the update is g' / (|g'| + eps), about sign(g'), where g' = grad_scale * g. With lr 0.01,
     * wd 0.1 and grad_scale 0.5:
     *   p =  1,   g =  0.1: p - 0.01 * ( 1 + 0.1 *  1)   =  0.989
     *   p = -2,   g = -0.3: p - 0.01 * (-1 + 0.1 * -2)   = -1.988
     *   p =  0.5, g =  0:   p - 0.01 * ( 0 + 0.1 *  0.5) =  0.4995  (decay alone)
     *   p =  0,   g =  2:   p - 0.01 * ( 1 + 0)          = -0.01                           */
    float p[4] = {1.0f, -2.0f, 0.5f, 0.0f};
    const float g[4] = {0.1f, -0.3f, 0.0f, 2.0f};
    float m[4] = {0}, v[4] = {0};
    pp_adamw_update(p, g, m, v, 4, 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, 0.5f, 1);
    const float want_p[4] = {0.989f, -1.988f, 0.4995f, -0.01f};
    for (int i = 0; i < 4; i++) {
        float gs = 0.5f * g[i];
        cr_expect(fabsf(p[i] - want_p[i]) <= ADAM_TOL, "p[%d] = %.9g, want %.9g", i, p[i],
                  want_p[i]);
        /* The moments hold the scaled gradient: m = (1 - b1) g', v = (1 - b2) g'^2. The betas
         * are written as float expressions because 0.999f is not 0.999: 1 - 0.999f is 1.3e-5
         * relative away from 0.001, more than the rounding this checks for (1e-6 relative). */
        float want_m = (1.0f - 0.9f) * gs, want_v = (1.0f - 0.999f) * gs * gs;
        cr_expect(fabsf(m[i] - want_m) <= 1e-6f * fabsf(want_m), "m[%d] = %g", i, m[i]);
        cr_expect(fabsf(v[i] - want_v) <= 1e-6f * fabsf(want_v), "v[%d] = %g", i, v[i]);
    }
}

Test(adamw, weight_decay_is_decoupled)
{
    /* A zero gradient leaves the moments at 0: decay must not pass through m and v (that would be
     * L2 regularisation, which Adam rescales), it scales p by exactly (1 - lr * wd). */
    float p[2] = {3.0f, -4.0f}, m[2] = {0}, v[2] = {0};
    const float g[2] = {0.0f, 0.0f};
    pp_adamw_update(p, g, m, v, 2, 0.1f, 0.9f, 0.999f, 1e-8f, 0.5f, 1.0f, 1);
    cr_expect(m[0] == 0.0f && m[1] == 0.0f && v[0] == 0.0f && v[1] == 0.0f);
    cr_expect(fabsf(p[0] - 3.0f * 0.95f) <= ADAM_TOL && fabsf(p[1] + 4.0f * 0.95f) <= ADAM_TOL,
              "p = %.9g %.9g", p[0], p[1]);
}

Test(adamw, several_steps_match_double_reference)
{
    uint64_t rng = 14;
    enum { N = 16, STEPS = 5 };
    const double lr = 3e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, gs = 0.7;
    float p[N], m[N] = {0}, v[N] = {0}, g[N];
    double pd[N], md[N] = {0}, vd[N] = {0};
    for (int i = 0; i < N; i++)
        pd[i] = p[i] = rng_uniform(&rng, -1, 1);
    for (int64_t t = 1; t <= STEPS; t++) {
        for (int i = 0; i < N; i++)
            g[i] = rng_uniform(&rng, -1, 1);
        pp_adamw_update(p, g, m, v, N, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd,
                        (float)gs, t);
        for (int i = 0; i < N; i++) {
            double gg = gs * g[i];
            md[i] = b1 * md[i] + (1 - b1) * gg;
            vd[i] = b2 * vd[i] + (1 - b2) * gg * gg;
            double mh = md[i] / (1 - pow(b1, (double)t)), vh = vd[i] / (1 - pow(b2, (double)t));
            pd[i] -= lr * (mh / (sqrt(vh) + eps) + wd * pd[i]);
        }
    }
    /* The update per step is ~lr = 3e-3; float32 noise in mhat / sqrt(vhat) (~1e-6 relative,
     * betas are not exact in float) moves it by ~1e-8 a step, so 1e-6 after 5 steps is loose. */
    for (int i = 0; i < N; i++)
        cr_expect(fabs(p[i] - pd[i]) <= 1e-6, "p[%d] = %.9g, want %.9g", i, p[i], pd[i]);
}

/* ---- sum of squares ---- */

Test(sumsq, small_and_wide_ranges)
{
    const float x[3] = {1.0f, 2.0f, -3.0f};
    cr_expect(pp_sumsq(x, 3) == 14.0);
    /* 1e8 + 1000 * 1: a float accumulator stays at 1e8 (its spacing there is 8), double keeps
     * every unit. */
    enum { N = 1001 };
    float *y = xcalloc(N, sizeof(float));
    y[0] = 1e4f;
    for (int i = 1; i < N; i++)
        y[i] = 1.0f;
    cr_expect(pp_sumsq(y, N) == 1e8 + 1000.0, "got %.17g", pp_sumsq(y, N));
    free(y);
}

/* ---- GEMM accounting ---- */

Test(stats, counts_linear_forward)
{
    int N = 4, IC = 3, OC = 5;
    float inp[12] = {0}, w[15] = {0}, bias[5] = {0}, out[20];
    pp_kernels_stats_reset();
    pp_kernels_stats_enable(1);
    pp_linear_forward(out, inp, w, bias, N, IC, OC);
    pp_kernel_stats st = pp_kernels_stats_get();
    cr_expect(st.gemm_calls == 1, "calls %llu", (unsigned long long)st.gemm_calls);
    cr_expect(st.gemm_flops == 2u * 4 * 5 * 3, "flops %llu", (unsigned long long)st.gemm_flops);
}

Test(stats, counts_attention_gemms)
{
    /* Two GEMMs per (batch, head) forward, T x T x hs and T x hs x T: 4 pairs * 2 * 36 FLOPs. */
    int B = 2, T = 3, C = 4, NH = 2;
    float qkv[2 * 3 * 12] = {0}, out[2 * 3 * 4], att[2 * 2 * 9];
    pp_kernels_stats_reset();
    pp_kernels_stats_enable(1);
    pp_attention_forward(out, att, qkv, B, T, C, NH);
    pp_kernel_stats st = pp_kernels_stats_get();
    cr_expect(st.gemm_calls == 8, "calls %llu", (unsigned long long)st.gemm_calls);
    cr_expect(st.gemm_flops == 288, "flops %llu", (unsigned long long)st.gemm_flops);
}

Test(stats, measures_time)
{
    /* 256^3 GEMM: ~3e7 FLOPs, microseconds at least, so a nanosecond clock cannot read 0. */
    enum { S = 256 };
    float *a = xcalloc((size_t)S * S, sizeof(float)), *o = xcalloc((size_t)S * S, sizeof(float));
    pp_kernels_stats_reset();
    pp_kernels_stats_enable(1);
    pp_linear_forward(o, a, a, NULL, S, S, S);
    pp_kernel_stats st = pp_kernels_stats_get();
    cr_expect(st.gemm_ns > 0);
    cr_expect(st.gemm_flops == 2ull * S * S * S);
    free(a), free(o);
}

Test(stats, disabled_leaves_counters_unchanged)
{
    float inp[6] = {0}, w[6] = {0}, out[4];
    pp_kernels_stats_reset();
    pp_kernels_stats_enable(1);
    pp_linear_forward(out, inp, w, NULL, 2, 3, 2);
    pp_kernels_stats_enable(0);
    pp_kernel_stats before = pp_kernels_stats_get();
    pp_linear_forward(out, inp, w, NULL, 2, 3, 2);
    pp_linear_backward_input(inp, out, w, 2, 3, 2);
    pp_kernel_stats after = pp_kernels_stats_get();
    cr_expect(before.gemm_calls == 1 && after.gemm_calls == 1);
    cr_expect(after.gemm_flops == before.gemm_flops && after.gemm_ns == before.gemm_ns);
    pp_kernels_stats_reset();
    pp_kernel_stats zero = pp_kernels_stats_get();
    cr_expect(zero.gemm_calls == 0 && zero.gemm_flops == 0 && zero.gemm_ns == 0);
}

/* The peak behind MFU (docs/metrics.md "Model FLOPs and MFU"): datasheet dense figures for the
 * products NVIDIA publishes, told apart by compute capability, SMs and name; the clock formula
 * only for other devices of a known architecture; nothing for unknown ones. */
typedef struct peak_case {
    const char *name;
    int major, minor, sms, clock_khz;
    pp_cuda_precision p;
    double tflops;
    const char *source;
} peak_case;

Test(gpu_peak, datasheet_figures_per_product_and_clock_only_for_unknown_ones)
{
    static const peak_case cases[] = {
        {"NVIDIA H100 80GB HBM3", 9, 0, 132, 1980000, PP_CUDA_BF16, 989.4, "datasheet"},
        {"NVIDIA H100 80GB HBM3", 9, 0, 132, 1980000, PP_CUDA_TF32, 494.7, "datasheet"},
        {"NVIDIA H100 80GB HBM3", 9, 0, 132, 1980000, PP_CUDA_FP32, 67.0, "datasheet"},
        {"NVIDIA H200", 9, 0, 132, 1980000, PP_CUDA_BF16, 989.4, "datasheet"},
        {"NVIDIA GH200 480GB", 9, 0, 132, 1980000, PP_CUDA_TF32, 494.7, "datasheet"},
        {"NVIDIA H100 NVL", 9, 0, 132, 1785000, PP_CUDA_BF16, 835.5, "datasheet"},
        {"NVIDIA H200 NVL", 9, 0, 132, 1785000, PP_CUDA_FP32, 60.0, "datasheet"},
        {"NVIDIA H100 PCIe", 9, 0, 114, 1755000, PP_CUDA_BF16, 756.0, "datasheet"},
        {"NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410000, PP_CUDA_BF16, 312.0, "datasheet"},
        {"NVIDIA A100-SXM4-40GB", 8, 0, 108, 1410000, PP_CUDA_TF32, 156.0, "datasheet"},
        {"NVIDIA A100 80GB PCIe", 8, 0, 108, 1410000, PP_CUDA_FP32, 19.5, "datasheet"},
        {"NVIDIA A30", 8, 0, 56, 1440000, PP_CUDA_BF16, 165.0, "datasheet"},
        /* a MIG slice of an H100: 60 SMs at the reported clock, 4096 FLOP/SM/clock in bf16 */
        {"NVIDIA H100 80GB HBM3 MIG 3g.40gb", 9, 0, 60, 1980000, PP_CUDA_BF16,
         4096.0 * 60 * 1.98e9 * 1e-12, "clock"},
        /* an sm_80 part that is not an A100 or A30 */
        {"NVIDIA A800 40GB Active", 8, 0, 84, 1500000, PP_CUDA_FP32, 128.0 * 84 * 1.5e9 * 1e-12,
         "clock"},
        {"NVIDIA RTX A6000", 8, 6, 84, 1800000, PP_CUDA_BF16, 0.0, "unknown"},
        {"NVIDIA H100 80GB HBM3", 9, 0, 132, 0, 99, 0.0, "unknown"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const peak_case *c = &cases[i];
        pp_gpu_peak g = pp_gpu_peak_lookup(c->name, c->major, c->minor, c->sms, c->clock_khz,
                                           c->p);
        cr_assert_str_eq(g.source, c->source, "%s precision %d", c->name, (int)c->p);
        cr_assert(fabs(g.flops * 1e-12 - c->tflops) < 1e-6 * (c->tflops + 1), "%s: %.4f vs %.4f",
                  c->name, g.flops * 1e-12, c->tflops);
    }
    /* the boost-clock formula overstates an H100 SXM's dense bf16 peak by about 8% */
    double clock = 4096.0 * 132 * 1.98e9;
    pp_gpu_peak h = pp_gpu_peak_lookup("NVIDIA H100 80GB HBM3", 9, 0, 132, 1980000, PP_CUDA_BF16);
    cr_assert(clock / h.flops > 1.07 && clock / h.flops < 1.09, "%.4f", clock / h.flops);
}
