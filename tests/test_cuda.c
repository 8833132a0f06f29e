/* test_cuda.c: the CUDA kernel table against the CPU one, kernel by kernel and for whole layers,
 * in fp32, tf32 and bf16 (CTest label `gpu`). Without a device the binary says why and exits
 * 77, which CTest reports as skipped.
 *
 * Tolerances, as |gpu - cpu| / max(1, |cpu|), and why:
 * - elementwise and row kernels (embedding, GELU, residual, layernorm, softmax rows,
 *   cross-entropy, AdamW): 1e-5. Same formulas (pp_kmath.h); only the order of float sums in
 *   the warp reductions and the device's expf differ, a few ulp;
 * - GEMM-based kernels in fp32: 1e-4. cuBLAS sums K products in another order (and with FMA):
 *   about sqrt(K) ulp for K up to a few hundred;
 * - tf32: 5e-3. Operands keep 10 mantissa bits (relative rounding 2^-11 ~ 4.9e-4 each), errors
 *   of K products partly cancel;
 * - bf16: 3e-2. Operands keep 7 mantissa bits (2^-8 ~ 3.9e-3 each), accumulation in fp32. */
#include "pp_cuda.h"
#include "pp_exec.h"
#include "pp_kernels.h"
#include "pp_kops.h"
#include "pp_runtime.h"
#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <criterion/options.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pp_kops *g_k[3]; /* one table per precision */

static void setup(void)
{
    for (int p = 0; p < 3; p++)
        cr_assert_eq(pp_cuda_kops_create(0, (pp_cuda_precision)p, &g_k[p]), PP_OK, "%s",
                     pp_error_message());
}

static void teardown(void)
{
    for (int p = 0; p < 3; p++)
        pp_cuda_kops_destroy(g_k[p]);
}

TestSuite(cuda, .init = setup, .fini = teardown, .timeout = 300);

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static float *host_rand(size_t n, float scale)
{
    float *p = malloc(n * sizeof *p + 4);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = frand() * scale;
    return p;
}

static void *to_dev(pp_kops *k, const void *h, size_t bytes)
{
    void *d = k->alloc(k->ctx, bytes);
    cr_assert_not_null(d, "device allocation of %zu bytes", bytes);
    pp_cuda_h2d(k, d, h, bytes);
    return d;
}

/* The device buffer's contents, on the host (waits for the stream). */
static float *from_dev(pp_kops *k, const void *d, size_t n)
{
    float *h = malloc(n * sizeof *h + 4);
    cr_assert_not_null(h);
    pp_cuda_d2h(k, h, d, n * sizeof *h);
    cr_assert_eq(pp_cuda_kops_sync(k), PP_OK, "%s", pp_error_message());
    return h;
}

static double max_rel(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        if (!(d <= worst))
            worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

static const double k_gemm_tol[3] = {1e-4, 5e-3, 3e-2};
#define ELEM_TOL 1e-5

static void check(const char *what, pp_kops *k, const float *dev, const float *ref, size_t n,
                  double tol)
{
    float *h = from_dev(k, dev, n);
    double e = max_rel(h, ref, n);
    cr_log_info("%-28s %s: max error %.3g (tolerance %.0e)", what, k->name, e, tol);
    cr_expect_leq(e, tol, "%s: error %.3g over %.0e", what, e, tol);
    free(h);
}

Test(cuda, elementwise_and_row_kernels_match_the_cpu)
{
    pp_kops *k = g_k[PP_CUDA_FP32];
    enum { B = 2, T = 16, C = 64, V = 97, N = B * T };
    /* embedding */
    int32_t tok[N];
    for (int i = 0; i < N; i++)
        tok[i] = (int32_t)(i * 7 % V);
    float *wte = host_rand((size_t)V * C, 1), *wpe = host_rand((size_t)T * C, 1);
    float *out = calloc((size_t)N * C, 4);
    pp_embed_forward(out, tok, wte, wpe, B, T, C);
    int32_t *dtok = to_dev(k, tok, sizeof tok);
    float *dwte = to_dev(k, wte, (size_t)V * C * 4), *dwpe = to_dev(k, wpe, (size_t)T * C * 4);
    float *dout = k->alloc(k->ctx, (size_t)N * C * 4);
    k->embed_forward(k->ctx, dout, dtok, dwte, dwpe, B, T, C);
    check("embedding forward", k, dout, out, (size_t)N * C, ELEM_TOL);
    float *g = host_rand((size_t)N * C, 1), *gwte = calloc((size_t)V * C, 4),
          *gwpe = calloc((size_t)T * C, 4);
    pp_embed_backward(gwte, gwpe, g, tok, B, T, C);
    float *dg = to_dev(k, g, (size_t)N * C * 4);
    k->zero(k->ctx, dwte, (size_t)V * C * 4);
    k->zero(k->ctx, dwpe, (size_t)T * C * 4);
    k->embed_backward(k->ctx, dwte, dwpe, dg, dtok, B, T, C);
    check("embedding backward (wte)", k, dwte, gwte, (size_t)V * C, ELEM_TOL);
    check("embedding backward (wpe)", k, dwpe, gwpe, (size_t)T * C, ELEM_TOL);
    /* gelu, residual */
    size_t n = (size_t)N * C;
    float *x = host_rand(n, 4), *y = calloc(n, 4), *dx = calloc(n, 4);
    pp_gelu_forward(y, x, n);
    pp_gelu_backward(dx, g, x, n);
    float *d_x = to_dev(k, x, n * 4), *d_y = k->alloc(k->ctx, n * 4), *d_dx = k->alloc(k->ctx, n * 4);
    k->gelu_forward(k->ctx, d_y, d_x, n);
    k->gelu_backward(k->ctx, d_dx, dg, d_x, n);
    check("gelu forward", k, d_y, y, n, ELEM_TOL);
    check("gelu backward", k, d_dx, dx, n, ELEM_TOL);
    pp_residual_forward(y, x, g, n);
    k->residual_forward(k->ctx, d_y, d_x, dg, n);
    check("residual", k, d_y, y, n, ELEM_TOL);
    /* layernorm, forward and both backward halves */
    float *w = host_rand(C, 1), *bb = host_rand(C, 1), *mean = calloc(N, 4), *rstd = calloc(N, 4);
    float *lw = calloc(C, 4), *lb = calloc(C, 4);
    memset(dx, 0, n * 4);
    pp_layernorm_forward(y, mean, rstd, x, w, bb, N, C);
    pp_layernorm_backward_input(dx, g, x, w, mean, rstd, N, C);
    pp_layernorm_backward_weight(lw, lb, g, x, mean, rstd, N, C);
    float *d_w = to_dev(k, w, C * 4), *d_b = to_dev(k, bb, C * 4);
    float *d_m = k->alloc(k->ctx, N * 4), *d_r = k->alloc(k->ctx, N * 4);
    float *d_lw = k->alloc(k->ctx, C * 4), *d_lb = k->alloc(k->ctx, C * 4);
    k->zero(k->ctx, d_dx, n * 4);
    k->layernorm_forward(k->ctx, d_y, d_m, d_r, d_x, d_w, d_b, N, C);
    k->layernorm_backward_input(k->ctx, d_dx, dg, d_x, d_w, d_m, d_r, N, C);
    k->layernorm_backward_weight(k->ctx, d_lw, d_lb, dg, d_x, d_m, d_r, N, C);
    check("layernorm forward", k, d_y, y, n, ELEM_TOL);
    check("layernorm backward (input)", k, d_dx, dx, n, ELEM_TOL);
    check("layernorm backward (weight)", k, d_lw, lw, C, 1e-4); /* sums over N rows */
    check("layernorm backward (bias)", k, d_lb, lb, C, 1e-4);
    /* cross-entropy and the loss mean */
    float *logits = host_rand((size_t)N * V, 6), *probs = calloc((size_t)N * V, 4),
          *losses = calloc(N, 4), *dl = calloc((size_t)N * V, 4);
    pp_xent_forward(losses, probs, logits, tok, N, V);
    pp_xent_backward(dl, probs, tok, 0.25f, N, V);
    float *d_lg = to_dev(k, logits, (size_t)N * V * 4), *d_p = k->alloc(k->ctx, (size_t)N * V * 4);
    float *d_ls = k->alloc(k->ctx, N * 4), *d_dl = k->alloc(k->ctx, (size_t)N * V * 4);
    float *d_mean = k->alloc(k->ctx, 4);
    k->xent_forward(k->ctx, d_ls, d_p, d_lg, dtok, N, V);
    k->xent_backward(k->ctx, d_dl, d_p, dtok, 0.25f, N, V);
    k->loss_mean(k->ctx, d_mean, d_ls, N);
    check("cross-entropy probabilities", k, d_p, probs, (size_t)N * V, ELEM_TOL);
    check("cross-entropy losses", k, d_ls, losses, N, ELEM_TOL);
    check("cross-entropy backward", k, d_dl, dl, (size_t)N * V, ELEM_TOL);
    float mean_ref;
    pp_kops_cpu.loss_mean(NULL, &mean_ref, losses, N);
    check("loss mean", k, d_mean, &mean_ref, 1, ELEM_TOL);
    /* AdamW, three steps */
    float *p = host_rand(n, 1), *m = calloc(n, 4), *v = calloc(n, 4);
    float *d_p2 = to_dev(k, p, n * 4), *d_m2 = k->alloc(k->ctx, n * 4), *d_v2 = k->alloc(k->ctx, n * 4);
    for (int t = 1; t <= 3; t++) {
        pp_adamw_update(p, g, m, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f, t);
        k->adamw_update(k->ctx, d_p2, dg, d_m2, d_v2, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.7f,
                        t);
    }
    check("AdamW", k, d_p2, p, n, ELEM_TOL);
    /* sum of squares */
    double s_ref = pp_sumsq(g, n), s = k->sumsq(k->ctx, dg, n);
    cr_expect_leq(fabs(s - s_ref), 1e-9 * s_ref, "sumsq %.17g vs %.17g", s, s_ref);
    void *bufs[] = {dtok, dwte, dwpe, dout, dg, d_x, d_y, d_dx, d_w, d_b, d_m, d_r, d_lw, d_lb,
                    d_lg, d_p, d_ls, d_dl, d_mean, d_p2, d_m2, d_v2};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        k->free(k->ctx, bufs[i]);
    free(wte), free(wpe), free(out), free(g), free(gwte), free(gwpe), free(x), free(y), free(dx);
    free(w), free(bb), free(mean), free(rstd), free(lw), free(lb), free(logits), free(probs);
    free(losses), free(dl), free(p), free(m), free(v);
}

static void gemm_kernels(pp_cuda_precision prec)
{
    pp_kops *k = g_k[prec];
    double tol = k_gemm_tol[prec];
    enum { B = 2, T = 32, C = 96, NH = 4, N = B * T, OC = 3 * C };
    float *inp = host_rand((size_t)N * C, 1), *w = host_rand((size_t)OC * C, 0.2f);
    float *bias = host_rand(OC, 0.1f), *out = calloc((size_t)N * OC, 4);
    float *gout = host_rand((size_t)N * OC, 1), *dinp = calloc((size_t)N * C, 4);
    float *dw = calloc((size_t)OC * C, 4), *db = calloc(OC, 4);
    pp_linear_forward(out, inp, w, bias, N, C, OC);
    pp_linear_backward_input(dinp, gout, w, N, C, OC);
    pp_linear_backward_weight(dw, db, gout, inp, N, C, OC);
    float *d_in = to_dev(k, inp, (size_t)N * C * 4), *d_w = to_dev(k, w, (size_t)OC * C * 4);
    float *d_bias = to_dev(k, bias, OC * 4), *d_out = k->alloc(k->ctx, (size_t)N * OC * 4);
    float *d_g = to_dev(k, gout, (size_t)N * OC * 4), *d_din = k->alloc(k->ctx, (size_t)N * C * 4);
    float *d_dw = k->alloc(k->ctx, (size_t)OC * C * 4), *d_db = k->alloc(k->ctx, OC * 4);
    k->linear_forward(k->ctx, d_out, d_in, d_w, d_bias, N, C, OC);
    k->linear_backward_input(k->ctx, d_din, d_g, d_w, N, C, OC);
    k->linear_backward_weight(k->ctx, d_dw, d_db, d_g, d_in, N, C, OC);
    check("linear forward", k, d_out, out, (size_t)N * OC, tol);
    check("linear backward (input)", k, d_din, dinp, (size_t)N * C, tol);
    check("linear backward (weight)", k, d_dw, dw, (size_t)OC * C, tol);
    check("linear backward (bias)", k, d_db, db, OC, 1e-4);
    /* attention over the linear output as qkv */
    size_t natt = (size_t)B * NH * T * T, nqkv = (size_t)N * OC;
    float *att = calloc(natt, 4), *y = calloc((size_t)N * C, 4), *dqkv = calloc(nqkv, 4);
    float *scratch = calloc((size_t)T * T, 4), *dy = host_rand((size_t)N * C, 1);
    pp_attention_forward(y, att, out, B, T, C, NH);
    pp_attention_backward(dqkv, scratch, dy, out, att, B, T, C, NH);
    float *d_att = k->alloc(k->ctx, natt * 4), *d_y = k->alloc(k->ctx, (size_t)N * C * 4);
    float *d_dqkv = k->alloc(k->ctx, nqkv * 4);
    float *d_s = k->alloc(k->ctx, k->attention_scratch_floats(B, T, NH) * 4);
    float *d_dy = to_dev(k, dy, (size_t)N * C * 4), *d_qkv = to_dev(k, out, nqkv * 4);
    k->attention_forward(k->ctx, d_y, d_att, d_qkv, B, T, C, NH);
    k->attention_backward(k->ctx, d_dqkv, d_s, d_dy, d_qkv, d_att, B, T, C, NH);
    check("attention probabilities", k, d_att, att, natt, tol);
    check("attention forward", k, d_y, y, (size_t)N * C, tol);
    check("attention backward", k, d_dqkv, dqkv, nqkv, 2 * tol);
    cr_assert_eq(pp_cuda_kops_error(k), PP_OK, "%s", pp_error_message());
    void *bufs[] = {d_in, d_w, d_bias, d_out, d_g, d_din, d_dw, d_db, d_att, d_y, d_dqkv, d_s,
                    d_dy, d_qkv};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        k->free(k->ctx, bufs[i]);
    free(inp), free(w), free(bias), free(out), free(gout), free(dinp), free(dw), free(db);
    free(att), free(y), free(dqkv), free(scratch), free(dy);
}

Test(cuda, gemm_kernels_fp32) { gemm_kernels(PP_CUDA_FP32); }
Test(cuda, gemm_kernels_tf32) { gemm_kernels(PP_CUDA_TF32); }
Test(cuda, gemm_kernels_bf16) { gemm_kernels(PP_CUDA_BF16); }

/* A whole transformer block through runtime/layers.c on both tables: forward output, input
 * gradient and every parameter gradient (fp32). */
Test(cuda, a_block_layer_matches_the_cpu)
{
    pp_kops *k = g_k[PP_CUDA_FP32];
    pp_model_config cfg;
    pp_model_config_preset("tiny", &cfg);
    pp_model *m = NULL;
    cr_assert_eq(pp_model_create(&cfg, 1, 2, &m), PP_OK);
    pp_model_init_params(m, 7);
    pp_layer *L = &m->layers[0];
    int B = 2, N = B * cfg.seq_len, C = cfg.d_model;
    int32_t *tok = calloc((size_t)N, 4);
    pp_microbatch mb = {.B = B, .tokens = tok, .targets = tok};
    float *in = host_rand((size_t)N * C, 1), *dout = host_rand((size_t)N * C, 1);
    pp_layer_acts *a = NULL, *da = NULL;
    cr_assert_eq(pp_layer_acts_create(L, B, &a), PP_OK);
    pp_layer_forward(L, a, &mb, in);
    pp_layer_backward(L, a, &mb, dout, 1.0f);
    /* the same layer with device parameters */
    pp_layer dl = *L;
    dl.params = to_dev(k, L->params, L->n_params * 4);
    dl.grads = k->alloc(k->ctx, L->n_params * 4);
    cr_assert_eq(pp_layer_acts_create_k(&dl, B, k, &da), PP_OK);
    float *d_in = to_dev(k, in, (size_t)N * C * 4), *d_dout = to_dev(k, dout, (size_t)N * C * 4);
    pp_layer_forward(&dl, da, &mb, d_in);
    pp_layer_backward(&dl, da, &mb, d_dout, 1.0f);
    check("block forward", k, pp_layer_acts_output(da), pp_layer_acts_output(a), (size_t)N * C,
          1e-4);
    check("block input gradient", k, pp_layer_acts_dinput(da), pp_layer_acts_dinput(a),
          (size_t)N * C, 1e-4);
    check("block parameter gradients", k, dl.grads, L->grads, L->n_params, 1e-4);
    pp_layer_acts_destroy(a);
    pp_layer_acts_destroy(da);
    k->free(k->ctx, dl.params);
    k->free(k->ctx, dl.grads);
    k->free(k->ctx, d_in);
    k->free(k->ctx, d_dout);
    pp_model_destroy(m);
    free(tok), free(in), free(dout);
}

/* pptrain --backend cuda against --backend cpu, every schedule, 4 stages on one GPU (one
 * stream each): the same losses and gradient norms within float32 tolerance (1e-4 relative:
 * cuBLAS's summation order, compounded over 3 optimizer steps). */
#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"

static int read_losses(const char *path, const char *key, double *out, int cap)
{
    char *text = tk_slurp(path, NULL);
    cr_assert_not_null(text, "no log %s", path);
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    int n = 0;
    for (char *p = strstr(text, pat); p && n < cap; p = strstr(p + 1, pat))
        out[n++] = strtod(p + strlen(pat), NULL);
    free(text);
    return n;
}

static void same_as_cpu(const char *schedule, const char *v)
{
    tk_dir_create("pp_test_cuda");
    const char *logs[2] = {tk_path("cpu.jsonl"), tk_path("cuda.jsonl")};
    const char *backends[2] = {"cpu", "cuda"};
    for (int i = 0; i < 2; i++) {
        const char *args[] = {PPTRAIN, "--backend", backends[i], "--stages", "4", "--schedule",
                              schedule, "--virtual-stages", v, "--layers", "6", "--batch", "8",
                              "--microbatches", "8", "--steps", "3", "-q", "--log-json", logs[i],
                              NULL};
        tk_result r = tk_runv(args, NULL);
        cr_assert_eq(r.code, 0, "%s %s: %s", backends[i], schedule, r.err);
        tk_result_free(&r);
    }
    const char *keys[] = {"loss", "grad_norm"};
    for (int k = 0; k < 2; k++) {
        double a[8], b[8];
        cr_assert_eq(read_losses(logs[0], keys[k], a, 8), 3);
        cr_assert_eq(read_losses(logs[1], keys[k], b, 8), 3);
        for (int i = 0; i < 3; i++) {
            cr_log_info("%s step %d %s: cpu %.7g cuda %.7g", schedule, i + 1, keys[k], a[i],
                        b[i]);
            cr_expect_leq(fabs(a[i] - b[i]), 1e-4 * fabs(a[i]), "%s step %d %s: %.7g vs %.7g",
                          schedule, i + 1, keys[k], a[i], b[i]);
        }
    }
    tk_dir_remove();
}

Test(cuda, pipeline_gpipe_matches_cpu) { same_as_cpu("gpipe", "1"); }
Test(cuda, pipeline_1f1b_matches_cpu) { same_as_cpu("1f1b", "1"); }
Test(cuda, pipeline_interleaved_matches_cpu) { same_as_cpu("interleaved", "2"); }
Test(cuda, pipeline_zbh1_matches_cpu) { same_as_cpu("zb-h1", "1"); }

/* --recompute on the cuda backend: the same kernels on the same inputs as without it, so the
 * same losses and gradient norms (the 1e-4 of the cpu comparison, should a kernel's atomics
 * order sums differently from run to run), and a smaller activation peak on the stages that
 * hold several micro-batches. */
static void recompute_same_as_none(const char *schedule, const char *v)
{
    tk_dir_create("pp_test_cuda");
    const char *logs[2] = {tk_path("none.jsonl"), tk_path("full.jsonl")};
    const char *rc[2] = {"none", "full"};
    for (int i = 0; i < 2; i++) {
        const char *args[] = {PPTRAIN, "--backend", "cuda", "--stages", "4", "--schedule",
                              schedule, "--virtual-stages", v, "--layers", "6", "--batch", "8",
                              "--microbatches", "8", "--steps", "3", "-q", "--log-json", logs[i],
                              "--recompute", rc[i], NULL};
        tk_result r = tk_runv(args, NULL);
        cr_assert_eq(r.code, 0, "--recompute %s %s: %s", rc[i], schedule, r.err);
        cr_assert_not_null(strstr(r.out, "memory: peak MiB per stage"), "%s", r.out);
        tk_result_free(&r);
    }
    const char *keys[] = {"loss", "grad_norm"};
    for (int k = 0; k < 2; k++) {
        double a[8], b[8];
        cr_assert_eq(read_losses(logs[0], keys[k], a, 8), 3);
        cr_assert_eq(read_losses(logs[1], keys[k], b, 8), 3);
        for (int i = 0; i < 3; i++)
            cr_expect_leq(fabs(a[i] - b[i]), 1e-4 * fabs(a[i]), "%s step %d %s: %.9g vs %.9g",
                          schedule, i + 1, keys[k], a[i], b[i]);
    }
    tk_dir_remove();
}

Test(cuda, recompute_1f1b_trains_as_without) { recompute_same_as_none("1f1b", "1"); }
Test(cuda, recompute_zbh1_trains_as_without) { recompute_same_as_none("zb-h1", "1"); }

#ifdef PP_HAVE_NCCL
/* NCCL on one GPU: a one-rank communicator sending 64 MiB to itself. */
Test(cuda, nccl_self_send_receive)
{
    double gbps = 0;
    cr_assert_eq(pp_nccl_selftest(0, 64u << 20, &gbps), PP_OK, "%s", pp_error_message());
    cr_log_info("NCCL self send/receive of 64 MiB: %.1f GB/s", gbps);
}
#endif

int main(int argc, char *argv[])
{
    char why[256] = "";
    if (pp_cuda_device_count(why, sizeof why) < 1) {
        printf("SKIPPED: %s\n", why);
        return 77; /* CTest's SKIP_RETURN_CODE */
    }
    struct criterion_test_set *tests = criterion_initialize();
    int rc = 0;
    if (criterion_handle_args(argc, argv, true))
        rc = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return rc;
}
