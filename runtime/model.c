/* model.c: the model as an ordered list of layers (embedding, n_layers blocks, head) holding a
 * contiguous range [first, last) of that list with its own parameters and gradients. The
 * single-stage trainer holds the whole list; each pipeline stage holds its slice. */
#include "pp_runtime.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void add_tensor(pp_layer *L, const char *name, size_t size, int decay)
{
    pp_tensor_desc *t = &L->tensors[L->n_tensors++];
    t->name = name;
    t->offset = L->n_params;
    t->size = size;
    t->decay = decay;
    L->n_params += size;
}

/* Fills kind, name and the tensor table of layer `index` (no memory yet). */
static void describe_layer(const pp_model_config *cfg, int index, pp_layer *L)
{
    size_t V = (size_t)cfg->vocab_size, T = (size_t)cfg->seq_len, C = (size_t)cfg->d_model;
    memset(L, 0, sizeof *L);
    L->index = index;
    L->cfg = *cfg;
    if (index == 0) {
        L->kind = PP_LAYER_EMBED;
        snprintf(L->name, sizeof L->name, "embedding");
        add_tensor(L, "wte", V * C, 1);
        add_tensor(L, "wpe", T * C, 1);
    } else if (index == pp_model_config_num_layers(cfg) - 1) {
        L->kind = PP_LAYER_HEAD;
        snprintf(L->name, sizeof L->name, "head");
        add_tensor(L, "lnf_w", C, 0);
        add_tensor(L, "lnf_b", C, 0);
        add_tensor(L, "lm_w", V * C, 1);
    } else {
        L->kind = PP_LAYER_BLOCK;
        snprintf(L->name, sizeof L->name, "block%d", index - 1);
        add_tensor(L, "ln1_w", C, 0);
        add_tensor(L, "ln1_b", C, 0);
        add_tensor(L, "qkv_w", 3 * C * C, 1);
        add_tensor(L, "qkv_b", 3 * C, 0);
        add_tensor(L, "proj_w", C * C, 1);
        add_tensor(L, "proj_b", C, 0);
        add_tensor(L, "ln2_w", C, 0);
        add_tensor(L, "ln2_b", C, 0);
        add_tensor(L, "fc_w", 4 * C * C, 1);
        add_tensor(L, "fc_b", 4 * C, 0);
        add_tensor(L, "fcproj_w", C * 4 * C, 1);
        add_tensor(L, "fcproj_b", C, 0);
    }
}

pp_status pp_model_create(const pp_model_config *cfg, int first, int last, pp_model **out)
{
    pp_status st = pp_model_config_validate(cfg);
    if (st != PP_OK)
        return st;
    int total = pp_model_config_num_layers(cfg);
    if (first < 0 || last > total || first >= last)
        return PP_ERR(PP_ERR_INVALID, "layer range [%d, %d) is not inside the model's %d layers",
                      first, last, total);
    pp_model *m = pp_alloc(sizeof *m);
    if (!m)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the model");
    m->cfg = *cfg;
    m->first_layer = first;
    m->last_layer = last;
    m->n_layers = last - first;
    m->layers = pp_alloc(sizeof(pp_layer) * (size_t)m->n_layers);
    if (!m->layers) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory for the layer list");
        goto fail;
    }
    for (int i = 0; i < m->n_layers; i++) {
        describe_layer(cfg, first + i, &m->layers[i]);
        m->n_params += m->layers[i].n_params;
    }
    m->params = pp_alloc(m->n_params * sizeof(float));
    m->grads = pp_alloc(m->n_params * sizeof(float));
    if (!m->params || !m->grads) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory: %zu parameters need %.1f MiB", m->n_params,
                    2.0 * (double)m->n_params * sizeof(float) / 1048576.0);
        goto fail;
    }
    size_t off = 0;
    for (int i = 0; i < m->n_layers; i++) {
        m->layers[i].params = m->params + off;
        m->layers[i].grads = m->grads + off;
        off += m->layers[i].n_params;
    }
    *out = m;
    return PP_OK;
fail:
    pp_model_destroy(m);
    return st;
}

void pp_model_destroy(pp_model *m)
{
    if (!m)
        return;
    pp_free(m->params);
    pp_free(m->grads);
    pp_free(m->layers);
    pp_free(m);
}

void pp_model_init_params(pp_model *m, uint64_t seed)
{
    const float std = 0.02f;
    /* GPT-2 scales the projections that write into the residual stream by 1/sqrt(2 n_layers)
     * so the stream's variance does not grow with depth. */
    const float std_resid = std / sqrtf(2.0f * (float)m->cfg.n_layers);
    for (int i = 0; i < m->n_layers; i++) {
        pp_layer *L = &m->layers[i];
        pp_rng rng;
        pp_rng_seed(&rng, seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(L->index + 1)));
        for (int t = 0; t < L->n_tensors; t++) {
            const pp_tensor_desc *d = &L->tensors[t];
            float *p = L->params + d->offset;
            const char *n = d->name;
            size_t len = strlen(n);
            int is_gain = strcmp(n, "ln1_w") == 0 || strcmp(n, "ln2_w") == 0 ||
                          strcmp(n, "lnf_w") == 0;
            int is_bias = len >= 2 && strcmp(n + len - 2, "_b") == 0;
            if (is_gain) {
                for (size_t k = 0; k < d->size; k++)
                    p[k] = 1.0f;
            } else if (is_bias) {
                memset(p, 0, d->size * sizeof(float));
            } else {
                float s = (strcmp(n, "proj_w") == 0 || strcmp(n, "fcproj_w") == 0) ? std_resid
                                                                                     : std;
                for (size_t k = 0; k < d->size; k++)
                    p[k] = s * (float)pp_rng_normal(&rng);
            }
        }
    }
}

void pp_model_zero_grads(pp_model *m) { memset(m->grads, 0, m->n_params * sizeof(float)); }

double pp_model_grad_sumsq(const pp_model *m)
{
    double s = 0.0;
    for (size_t i = 0; i < m->n_params; i++)
        s += (double)m->grads[i] * (double)m->grads[i];
    return s;
}
