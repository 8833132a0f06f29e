/* config.c: model configuration: built-in presets, JSON config files, validation. Called by
 * pptrain (--model/--config and the shape flags) and by checkpoints. */
#include "pp_json.h"
#include "pp_runtime.h"

#include <cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct preset {
    const char *name;
    pp_model_config cfg;
} preset;

static const preset k_presets[] = {
    /* tiny: trains in seconds on a laptop core; the default of every demo and test. */
    {"tiny", {.vocab_size = 256, .seq_len = 64, .d_model = 64, .n_heads = 4, .n_layers = 4}},
    /* small: big enough that GEMMs dominate, the CPU benchmark's model. */
    {"small", {.vocab_size = 4096, .seq_len = 256, .d_model = 256, .n_heads = 8, .n_layers = 8}},
    /* gpt2: the shape of GPT-2 small (124M parameters there; 163M here, the LM head not being
     * tied to the embedding); for GPUs (benchmarks/gpu), far too slow for the CPU backend. */
    {"gpt2", {.vocab_size = 50257, .seq_len = 1024, .d_model = 768, .n_heads = 12, .n_layers = 12}},
};
static const char *const k_preset_names[] = {"tiny", "small", "gpt2", NULL};

const char *const *pp_model_config_preset_names(void) { return k_preset_names; }

pp_status pp_model_config_preset(const char *name, pp_model_config *cfg)
{
    for (size_t i = 0; i < sizeof k_presets / sizeof k_presets[0]; i++) {
        if (name && strcmp(name, k_presets[i].name) == 0) {
            *cfg = k_presets[i].cfg;
            return PP_OK;
        }
    }
    return PP_ERR(PP_ERR_INVALID, "unknown model preset '%s' (known: tiny, small, gpt2)",
                  name ? name : "(null)");
}

pp_status pp_model_config_validate(const pp_model_config *c)
{
    if (c->vocab_size < 2 || c->vocab_size > PP_MAX_VOCAB)
        return PP_ERR(PP_ERR_INVALID, "vocab_size %d is out of range [2, %d]", c->vocab_size,
                      PP_MAX_VOCAB);
    if (c->seq_len < 1 || c->seq_len > PP_MAX_SEQ)
        return PP_ERR(PP_ERR_INVALID, "seq_len %d is out of range [1, %d]", c->seq_len,
                      PP_MAX_SEQ);
    if (c->d_model < 1 || c->d_model > PP_MAX_DMODEL)
        return PP_ERR(PP_ERR_INVALID, "d_model %d is out of range [1, %d]", c->d_model,
                      PP_MAX_DMODEL);
    if (c->n_heads < 1 || c->n_heads > PP_MAX_HEADS)
        return PP_ERR(PP_ERR_INVALID, "n_heads %d is out of range [1, %d]", c->n_heads,
                      PP_MAX_HEADS);
    if (c->d_model % c->n_heads != 0)
        return PP_ERR(PP_ERR_INVALID, "d_model %d is not divisible by n_heads %d", c->d_model,
                      c->n_heads);
    if (c->n_layers < 1 || c->n_layers > PP_MAX_LAYERS)
        return PP_ERR(PP_ERR_INVALID, "n_layers %d is out of range [1, %d]", c->n_layers,
                      PP_MAX_LAYERS);
    /* Keep every tensor index within int: B*T*4C and B*NH*T*T are computed in size_t, but the
     * kernels take int dimensions and the per-sequence sizes must stay well inside them. */
    if ((double)c->seq_len * c->d_model * 4.0 > 1e9 || (double)c->vocab_size * c->d_model > 2e9)
        return PP_ERR(PP_ERR_INVALID, "model too large: seq_len*d_model or vocab_size*d_model "
                                      "exceeds what one tensor can index");
    return PP_OK;
}

int pp_model_config_num_layers(const pp_model_config *c) { return c->n_layers + 2; }

size_t pp_model_config_layer_params(const pp_model_config *c, int layer)
{
    size_t V = (size_t)c->vocab_size, T = (size_t)c->seq_len, C = (size_t)c->d_model;
    if (layer == 0)
        return V * C + T * C; /* token and position embeddings */
    if (layer == c->n_layers + 1)
        return 2 * C + V * C; /* final layernorm, LM head */
    /* ln1, qkv, projection, ln2, MLP up, MLP down, with biases */
    return 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C;
}

size_t pp_model_config_num_params(const pp_model_config *c)
{
    size_t n = 0;
    for (int i = 0; i < pp_model_config_num_layers(c); i++)
        n += pp_model_config_layer_params(c, i);
    return n;
}

double pp_model_config_train_flops_per_token(const pp_model_config *c)
{
    double V = c->vocab_size, T = c->seq_len, C = c->d_model, L = c->n_layers;
    /* docs/metrics.md, "Model FLOPs": 6 per weight of every matrix product (2 forward, 4
     * backward), plus the attention products q k^T and att v, 2 T C each per token and layer
     * forward (the full T x T, as computed), times 3 for training */
    double matmul_weights = L * 12.0 * C * C + V * C;
    return 6.0 * matmul_weights + 12.0 * L * T * C;
}

/* The config file's keys: "preset" first, then the five shape integers in field_of's order. */
static const char *const k_keys[] = {"preset", "vocab_size", "seq_len", "d_model", "n_heads",
                                     "n_layers"};
enum { K_PRESET, N_KEYS = 6 };

static int *field_of(pp_model_config *c, int i)
{
    switch (i) {
    case 1: return &c->vocab_size;
    case 2: return &c->seq_len;
    case 3: return &c->d_model;
    case 4: return &c->n_heads;
    default: return &c->n_layers;
    }
}

/* Read strictly, as the cost and plan files are (pp_json.h): a NUL byte, text after the object,
 * an unknown or a repeated key is refused rather than guessed at (with a repeated key, cJSON
 * would silently keep the first one). */
pp_status pp_model_config_load_json(const char *path, pp_model_config *cfg)
{
    char *text = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    pp_status st = pp_read_file(path, &text, &len);
    if (st != PP_OK)
        return st;
    char ctx[300];
    snprintf(ctx, sizeof ctx, "config '%s'", path);
    pp_model_config c = *cfg;
    const cJSON *f[N_KEYS];
    if (strlen(text) != len) {
        st = PP_ERR(PP_ERR_INVALID, "%s: contains a NUL byte at offset %zu", ctx, strlen(text));
        goto done;
    }
    if ((st = pp_json_parse_object(text, ctx, k_keys, N_KEYS, f, &root)) != PP_OK)
        goto done;
    if (f[K_PRESET]) {
        if (!cJSON_IsString(f[K_PRESET])) {
            st = PP_ERR(PP_ERR_INVALID, "%s: \"preset\" must be a string (got %s)", ctx,
                        pp_json_type_name(f[K_PRESET]));
            goto done;
        }
        st = pp_model_config_preset(f[K_PRESET]->valuestring, &c);
        if (st != PP_OK) {
            st = pp_error_wrap(st, "%s", ctx);
            goto done;
        }
    }
    for (int k = K_PRESET + 1; k < N_KEYS; k++) {
        if (!f[k])
            continue;
        double v = 0;
        if ((st = pp_json_get_int(f[k], ctx, k_keys[k], -2147483648.0, 2147483647.0, &v)) != PP_OK)
            goto done;
        *field_of(&c, k) = (int)v;
    }
    st = pp_model_config_validate(&c);
    if (st != PP_OK) {
        st = pp_error_wrap(st, "%s", ctx);
        goto done;
    }
    *cfg = c;
done:
    cJSON_Delete(root);
    free(text);
    return st;
}
