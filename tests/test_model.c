/* test_model.c: model configuration (presets, JSON files, validation), the layer list the
 * pipeline cuts into stages, per-stage initialisation, and an end-to-end gradient check of the
 * whole model through its layers. */
#include "pp_runtime.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64];

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/pp_model_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(model, .init = setup, .fini = teardown);

static const char *write_json(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

Test(model, presets_have_the_documented_shapes)
{
    pp_model_config c;
    cr_assert_eq(pp_model_config_preset("tiny", &c), PP_OK);
    cr_assert(c.vocab_size == 256 && c.seq_len == 64 && c.d_model == 64 && c.n_heads == 4 &&
              c.n_layers == 4);
    cr_assert_eq(pp_model_config_preset("small", &c), PP_OK);
    cr_assert(c.vocab_size == 4096 && c.seq_len == 256 && c.d_model == 256 && c.n_heads == 8 &&
              c.n_layers == 8);
    cr_assert_eq(pp_model_config_preset("huge", &c), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "huge") != NULL);
    cr_assert(strstr(pp_error_message(), "tiny") != NULL);
}

Test(model, json_config_overrides_and_validates)
{
    pp_model_config c;
    pp_model_config_preset("tiny", &c);
    const char *p = write_json("ok.json", "{\"preset\": \"small\", \"n_layers\": 2, \"seq_len\": 32}");
    cr_assert_eq(pp_model_config_load_json(p, &c), PP_OK, "%s", pp_error_message());
    cr_assert(c.vocab_size == 4096 && c.n_layers == 2 && c.seq_len == 32 && c.d_model == 256);
}

typedef struct bad_config {
    const char *json;
    const char *phrase;
} bad_config;

static const bad_config k_bad_configs[] = {
    {"{\"n_layer\": 2}", "unknown key \"n_layer\""},
    {"{\"d_model\": \"64\"}", "\"d_model\" must be an integer"},
    {"{\"d_model\": 64.5}", "\"d_model\" must be an integer"},
    {"{\"d_model\": 66, \"n_heads\": 4}", "not divisible by n_heads"},
    {"{\"vocab_size\": 1}", "vocab_size 1 is out of range"},
    {"{\"n_layers\": 0}", "n_layers 0 is out of range"},
    {"{\"preset\": \"medium\"}", "unknown model preset 'medium'"},
    {"[1, 2]", "must be a JSON object (got an array)"},
    {"{\"seq_len\": 64,", "invalid JSON at line 1"},
    /* cJSON keeps the first of two equal keys: the file would say 2 layers and train 8 */
    {"{\"n_layers\": 8, \"n_layers\": 2}", "duplicate key \"n_layers\""},
    {"{\"preset\": \"tiny\", \"preset\": \"small\"}", "duplicate key \"preset\""},
    {"{\"n_layers\": 2} {\"n_layers\": 3}", "invalid JSON"},
    {"{\"preset\": 3}", "\"preset\" must be a string"},
};

Test(model, bad_json_configs_are_rejected_by_name)
{
    for (size_t i = 0; i < sizeof k_bad_configs / sizeof k_bad_configs[0]; i++) {
        pp_model_config c;
        pp_model_config_preset("tiny", &c);
        pp_model_config before = c;
        const char *p = write_json("bad.json", k_bad_configs[i].json);
        cr_assert_eq(pp_model_config_load_json(p, &c), PP_ERR_INVALID, "case %zu", i);
        cr_assert(strstr(pp_error_message(), k_bad_configs[i].phrase) != NULL,
                  "case %zu: message '%s' lacks '%s'", i, pp_error_message(),
                  k_bad_configs[i].phrase);
        cr_assert(strstr(pp_error_message(), "bad.json") != NULL, "message names the file");
        cr_assert_eq(memcmp(&c, &before, sizeof c), 0, "config changed on error");
    }
    pp_model_config c;
    cr_assert_eq(pp_model_config_load_json("/tmp/pp_no_such_config.json", &c), PP_ERR_IO);
}

Test(model, json_config_with_a_nul_byte_is_refused_naming_the_offset)
{
    /* cJSON would stop at the NUL and read {"n_layers": 2}, ignoring what follows */
    static const char text[] = "{\"n_layers\": 2}\0{\"n_layers\": 3}";
    char path[256];
    snprintf(path, sizeof path, "%s/nul.json", g_dir);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(text, 1, sizeof text - 1, f), sizeof text - 1);
    fclose(f);
    pp_model_config c;
    pp_model_config_preset("tiny", &c);
    cr_assert_eq(pp_model_config_load_json(path, &c), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "NUL byte at offset 15") != NULL, "%s",
              pp_error_message());
    cr_assert(strstr(pp_error_message(), "nul.json") != NULL, "%s", pp_error_message());
    cr_assert_eq(c.n_layers, 4, "config changed on error");
}

Test(model, layer_list_is_embedding_blocks_head)
{
    pp_model_config c;
    pp_model_config_preset("tiny", &c);
    pp_model *m = NULL;
    int L = pp_model_config_num_layers(&c);
    cr_assert_eq(L, 6);
    cr_assert_eq(pp_model_create(&c, 0, L, &m), PP_OK);
    cr_assert_eq(m->layers[0].kind, PP_LAYER_EMBED);
    cr_assert_str_eq(m->layers[0].name, "embedding");
    for (int i = 1; i < L - 1; i++) {
        cr_assert_eq(m->layers[i].kind, PP_LAYER_BLOCK);
        char name[16];
        snprintf(name, sizeof name, "block%d", i - 1);
        cr_assert_str_eq(m->layers[i].name, name);
    }
    cr_assert_eq(m->layers[L - 1].kind, PP_LAYER_HEAD);
    cr_assert_eq(m->n_params, pp_model_config_num_params(&c));
    size_t sum = 0;
    for (int i = 0; i < L; i++)
        sum += m->layers[i].n_params;
    cr_assert_eq(sum, m->n_params);
    pp_model_destroy(m);
    cr_assert_eq(pp_model_create(&c, 3, 3, &m), PP_ERR_INVALID);
    cr_assert_eq(pp_model_create(&c, 0, L + 1, &m), PP_ERR_INVALID);
    pp_model_destroy(NULL);
}

Test(model, a_stage_initialises_exactly_like_the_whole_model)
{
    pp_model_config c;
    pp_model_config_preset("tiny", &c);
    int L = pp_model_config_num_layers(&c);
    pp_model *whole = NULL, *stage = NULL;
    cr_assert_eq(pp_model_create(&c, 0, L, &whole), PP_OK);
    cr_assert_eq(pp_model_create(&c, 2, 5, &stage), PP_OK);
    pp_model_init_params(whole, 99);
    pp_model_init_params(stage, 99);
    size_t off = 0;
    for (int i = 0; i < 2; i++)
        off += whole->layers[i].n_params;
    cr_assert_eq(memcmp(whole->params + off, stage->params, stage->n_params * sizeof(float)), 0);
    /* GPT-2 init: layernorm gains 1, biases 0, weights small. */
    const pp_layer *blk = &stage->layers[0];
    cr_assert_eq(blk->params[blk->tensors[0].offset], 1.0f);
    cr_assert_eq(blk->params[blk->tensors[1].offset], 0.0f);
    pp_model_destroy(whole);
    pp_model_destroy(stage);
}

/* Loss of the whole model on one micro-batch, summed over tokens (a sum keeps float32 finite
 * differences well above rounding). */
static double model_loss_sum(pp_model *m, pp_layer_acts **acts, const pp_microbatch *mb)
{
    const float *x = NULL;
    for (int i = 0; i < m->n_layers; i++) {
        pp_layer_forward(&m->layers[i], acts[i], mb, x);
        x = pp_layer_acts_output(acts[i]);
    }
    return (double)pp_layer_acts_loss(acts[m->n_layers - 1]) * mb->B * m->cfg.seq_len;
}

Test(model, whole_model_gradient_matches_finite_differences)
{
    /* Small enough that float32 differences of the summed loss resolve every tensor's gradient. */
    pp_model_config c = {.vocab_size = 11, .seq_len = 5, .d_model = 8, .n_heads = 2,
                         .n_layers = 2};
    int L = pp_model_config_num_layers(&c);
    pp_model *m = NULL;
    cr_assert_eq(pp_model_create(&c, 0, L, &m), PP_OK);
    pp_model_init_params(m, 5);
    /* Larger weights than GPT-2's 0.02 so every path carries a visible gradient, yet small
     * enough that attention stays smooth at the step size below (at 10x, curvature needs
     * h < 1e-3 to converge). */
    for (size_t i = 0; i < m->n_params; i++)
        m->params[i] *= 3.0f;
    pp_layer_acts *acts[8];
    for (int i = 0; i < L; i++)
        cr_assert_eq(pp_layer_acts_create(&m->layers[i], 2, &acts[i]), PP_OK);
    int32_t tok[10], tgt[10];
    for (int i = 0; i < 10; i++) {
        tok[i] = (i * 7 + 3) % 11;
        tgt[i] = (i * 5 + 1) % 11;
    }
    pp_microbatch mb = {.B = 2, .tokens = tok, .targets = tgt};
    pp_model_zero_grads(m);
    model_loss_sum(m, acts, &mb);
    const float *dx = NULL;
    for (int i = L - 1; i >= 0; i--) {
        pp_layer_backward(&m->layers[i], acts[i], &mb, dx, 1.0f);
        dx = pp_layer_acts_dinput(acts[i]);
    }
    /* Every tensor of every layer: up to 6 entries each, central differences with h = 3e-3
     * (the float32 summed loss of ~20 rounds at ~2e-6; over 2h that is ~3e-4, well below the
     * gradients of ~0.1-1). Norm-wise relative error per tensor <= 2e-2 covers that rounding
     * plus the O(h^2) curvature term; a wiring error gives errors of order 1. */
    for (int li = 0; li < L; li++) {
        pp_layer *Ly = &m->layers[li];
        for (int t = 0; t < Ly->n_tensors; t++) {
            const pp_tensor_desc *d = &Ly->tensors[t];
            double num2 = 0, diff2 = 0, an2 = 0;
            for (int k = 0; k < 6 && (size_t)k < d->size; k++) {
                size_t idx = d->offset + ((size_t)k * 7919u) % d->size;
                float *p = Ly->params + idx;
                float orig = *p;
                const float h = 3e-3f;
                *p = orig + h;
                double lp = model_loss_sum(m, acts, &mb);
                *p = orig - h;
                double lm = model_loss_sum(m, acts, &mb);
                *p = orig;
                double g_num = (lp - lm) / (2.0 * h);
                double g_an = Ly->grads[idx];
                num2 += g_num * g_num;
                an2 += g_an * g_an;
                diff2 += (g_num - g_an) * (g_num - g_an);
            }
            double denom = fmax(sqrt(fmax(num2, an2)), 1e-6);
            cr_assert_leq(sqrt(diff2) / denom, 2e-2, "layer %s tensor %s: relative error %g",
                          Ly->name, d->name, sqrt(diff2) / denom);
        }
    }
    for (int i = 0; i < L; i++)
        pp_layer_acts_destroy(acts[i]);
    pp_model_destroy(m);
}

/* docs/metrics.md "Model FLOPs and MFU", for the gpt2 preset worked by hand:
 * W = 12 x 12 x 768^2 + 50257 x 768 = 123,532,032; F = 6 W + 12 x 12 x 1024 x 768. */
Test(model, train_flops_per_token_follow_the_documented_formula)
{
    pp_model_config c;
    cr_assert_eq(pp_model_config_preset("gpt2", &c), PP_OK);
    cr_assert_eq(pp_model_config_train_flops_per_token(&c), 854438400.0);
    cr_assert_eq(pp_model_config_num_params(&c), 163037184u);
}

/* The per-layer counts the pipeline uses for other processes' pieces and the layer marks are
 * the allocated layers' sizes, and add up to the model's. */
Test(model, layer_parameter_counts_match_the_allocated_layers)
{
    pp_model_config c;
    cr_assert_eq(pp_model_config_preset("tiny", &c), PP_OK);
    size_t sum = 0;
    for (int i = 0; i < pp_model_config_num_layers(&c); i++) {
        pp_model *m = NULL;
        cr_assert_eq(pp_model_create(&c, i, i + 1, &m), PP_OK);
        cr_assert_eq(pp_model_config_layer_params(&c, i), m->n_params, "layer %d", i);
        sum += m->n_params;
        pp_model_destroy(m);
    }
    cr_assert_eq(sum, pp_model_config_num_params(&c));
}
