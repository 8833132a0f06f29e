/* optimizer.c: AdamW over a model's parameter tensors, with warm-up and cosine learning-rate
 * schedule and global gradient-norm clipping. Called once per optimizer step by the trainer. */
#include "pp_kernels.h"
#include "pp_kops.h"
#include "pp_runtime.h"

#include <math.h>

void pp_adamw_config_default(pp_adamw_config *c)
{
    c->lr = 3e-3f;
    c->beta1 = 0.9f;
    c->beta2 = 0.95f;
    c->eps = 1e-8f;
    c->weight_decay = 0.1f;
    c->grad_clip = 1.0f;
    c->warmup_steps = 20;
    c->cosine = 1;
    c->lr_min_ratio = 0.1f;
}

pp_status pp_adamw_config_validate(const pp_adamw_config *c)
{
    if (!(c->lr > 0.0f && c->lr <= 10.0f))
        return PP_ERR(PP_ERR_INVALID, "learning rate %g must be in (0, 10]", (double)c->lr);
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f) || !(c->beta2 >= 0.0f && c->beta2 < 1.0f))
        return PP_ERR(PP_ERR_INVALID, "AdamW betas (%g, %g) must be in [0, 1)", (double)c->beta1,
                      (double)c->beta2);
    if (!(c->eps > 0.0f))
        return PP_ERR(PP_ERR_INVALID, "AdamW eps %g must be > 0", (double)c->eps);
    if (!(c->weight_decay >= 0.0f && c->weight_decay <= 10.0f))
        return PP_ERR(PP_ERR_INVALID, "weight decay %g must be in [0, 10]",
                      (double)c->weight_decay);
    if (!(c->grad_clip >= 0.0f && isfinite(c->grad_clip)))
        return PP_ERR(PP_ERR_INVALID, "gradient clip %g must be >= 0 (0 disables)",
                      (double)c->grad_clip);
    if (c->warmup_steps < 0)
        return PP_ERR(PP_ERR_INVALID, "warm-up steps %d must be >= 0", c->warmup_steps);
    if (!(c->lr_min_ratio >= 0.0f && c->lr_min_ratio <= 1.0f))
        return PP_ERR(PP_ERR_INVALID, "minimum learning-rate ratio %g must be in [0, 1]",
                      (double)c->lr_min_ratio);
    return PP_OK;
}

float pp_adamw_lr_at(const pp_adamw_config *c, int64_t t, int64_t total_steps)
{
    if (c->warmup_steps > 0 && t <= c->warmup_steps)
        return c->lr * (float)t / (float)c->warmup_steps;
    if (!c->cosine || total_steps <= c->warmup_steps)
        return c->lr;
    double progress = (double)(t - c->warmup_steps) / (double)(total_steps - c->warmup_steps);
    if (progress > 1.0)
        progress = 1.0;
    double min_lr = (double)c->lr * c->lr_min_ratio;
    return (float)(min_lr + 0.5 * ((double)c->lr - min_lr) * (1.0 + cos(3.14159265358979323846 * progress)));
}

pp_status pp_optimizer_create(const pp_adamw_config *cfg, const pp_model *model,
                              pp_optimizer **out)
{
    pp_status st = pp_adamw_config_validate(cfg);
    if (st != PP_OK)
        return st;
    pp_optimizer *o = pp_alloc(sizeof *o);
    if (!o)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the optimizer");
    o->cfg = *cfg;
    o->n = model->n_params;
    o->m = pp_alloc(o->n * sizeof(float));
    o->v = pp_alloc(o->n * sizeof(float));
    if (!o->m || !o->v) {
        pp_optimizer_destroy(o);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for AdamW moments (%zu parameters)",
                      model->n_params);
    }
    *out = o;
    return PP_OK;
}

void pp_optimizer_destroy(pp_optimizer *o)
{
    if (!o)
        return;
    pp_free(o->m);
    pp_free(o->v);
    pp_free(o);
}

void pp_optimizer_step_k(pp_optimizer *o, const pp_model *model, float *params,
                         const float *grads, float *m, float *v, const pp_kops *k, float lr,
                         float grad_scale)
{
    o->t++;
    size_t base = 0;
    for (int i = 0; i < model->n_layers; i++) {
        const pp_layer *L = &model->layers[i];
        for (int j = 0; j < L->n_tensors; j++) {
            const pp_tensor_desc *d = &L->tensors[j];
            size_t off = base + d->offset;
            k->adamw_update(k->ctx, params + off, grads + off, m + off, v + off, d->size, lr,
                            o->cfg.beta1, o->cfg.beta2, o->cfg.eps,
                            d->decay ? o->cfg.weight_decay : 0.0f, grad_scale, o->t);
        }
        base += L->n_params;
    }
}

void pp_optimizer_step(pp_optimizer *o, pp_model *model, float lr, float grad_scale)
{
    pp_optimizer_step_k(o, model, model->params, model->grads, o->m, o->v, &pp_kops_cpu, lr,
                        grad_scale);
}

float pp_grad_clip_scale(float grad_clip, double grad_norm)
{
    if (grad_clip <= 0.0f || !(grad_norm > grad_clip))
        return 1.0f;
    return (float)(grad_clip / grad_norm);
}
