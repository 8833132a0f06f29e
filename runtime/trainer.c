/* trainer.c: the single-stage trainer: each optimizer step reads one batch, runs its M
 * micro-batches through every layer one after another, accumulates gradients, clips and takes an
 * AdamW step. pptrain's default path; the pipeline executor must reproduce its results. */
#include "pp_kernels.h"
#include "pp_runtime.h"
#include "trainer_internal.h"

#include <math.h>
#include <string.h>

pp_status pp_train_config_validate(const pp_train_config *c)
{
    pp_status st = pp_model_config_validate(&c->model);
    if (st != PP_OK)
        return st;
    st = pp_adamw_config_validate(&c->opt);
    if (st != PP_OK)
        return st;
    if (c->batch < 1 || c->batch > 1 << 20)
        return PP_ERR(PP_ERR_INVALID, "batch %d must be in [1, %d]", c->batch, 1 << 20);
    if (c->microbatches < 1 || c->microbatches > c->batch)
        return PP_ERR(PP_ERR_INVALID, "microbatches %d must be in [1, batch = %d]",
                      c->microbatches, c->batch);
    if (c->batch % c->microbatches != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "batch %d is not divisible by microbatches %d (each micro-batch must hold "
                      "the same number of sequences)",
                      c->batch, c->microbatches);
    if (c->steps < 0)
        return PP_ERR(PP_ERR_INVALID, "steps %lld must be >= 0", (long long)c->steps);
    return PP_OK;
}

pp_status pp_trainer_create(const pp_train_config *c, pp_data *data, pp_trainer **out)
{
    pp_status st = pp_train_config_validate(c);
    if (st != PP_OK) {
        pp_data_destroy(data);
        return st;
    }
    pp_trainer *t = pp_alloc(sizeof *t);
    if (!t) {
        pp_data_destroy(data);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the trainer");
    }
    t->cfg = *c;
    t->data = data;
    int L = pp_model_config_num_layers(&c->model);
    st = pp_model_create(&c->model, 0, L, &t->model);
    if (st != PP_OK)
        goto fail;
    pp_model_init_params(t->model, c->seed);
    st = pp_optimizer_create(&c->opt, t->model, &t->opt);
    if (st != PP_OK)
        goto fail;
    t->acts = pp_alloc(sizeof(pp_layer_acts *) * (size_t)L);
    size_t ntok = (size_t)c->batch * (size_t)c->model.seq_len;
    t->inputs = pp_alloc(ntok * sizeof(int32_t));
    t->targets = pp_alloc(ntok * sizeof(int32_t));
    if (!t->acts || !t->inputs || !t->targets) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory for the batch buffers");
        goto fail;
    }
    int mb_B = c->batch / c->microbatches;
    for (int i = 0; i < L; i++) {
        st = pp_layer_acts_create(&t->model->layers[i], mb_B, &t->acts[i]);
        if (st != PP_OK)
            goto fail;
    }
    *out = t;
    return PP_OK;
fail:
    pp_trainer_destroy(t);
    return st;
}

void pp_trainer_destroy(pp_trainer *t)
{
    if (!t)
        return;
    if (t->acts && t->model)
        for (int i = 0; i < t->model->n_layers; i++)
            pp_layer_acts_destroy(t->acts[i]);
    pp_free(t->acts);
    pp_free(t->inputs);
    pp_free(t->targets);
    pp_optimizer_destroy(t->opt);
    pp_model_destroy(t->model);
    pp_data_destroy(t->data);
    pp_free(t);
}

int64_t pp_trainer_steps_done(const pp_trainer *t) { return t->opt->t; }
pp_model *pp_trainer_model(pp_trainer *t) { return t->model; }
pp_data *pp_trainer_data(pp_trainer *t) { return t->data; }

pp_status pp_trainer_step(pp_trainer *t, pp_step_stats *st)
{
    uint64_t t0 = pp_now_ns();
    const pp_train_config *c = &t->cfg;
    int T = c->model.seq_len, M = c->microbatches, mb_B = c->batch / M;
    int L = t->model->n_layers;
    /* The whole batch is read first, so how it is cut into micro-batches never changes which
     * tokens a step trains on. */
    pp_data_next_batch(t->data, c->batch, T, t->inputs, t->targets);
    pp_model_zero_grads(t->model);
    /* Each micro-batch's mean loss is scaled by its share of the batch: the accumulated gradient
     * is then exactly the gradient of the batch's mean loss. */
    const float loss_scale = 1.0f / ((float)c->batch * (float)T);
    double loss_sum = 0.0;
    for (int m = 0; m < M; m++) {
        pp_microbatch mb = {.B = mb_B,
                            .tokens = t->inputs + (size_t)m * mb_B * T,
                            .targets = t->targets + (size_t)m * mb_B * T};
        const float *x = NULL;
        for (int i = 0; i < L; i++) {
            pp_layer_forward(&t->model->layers[i], t->acts[i], &mb, x);
            x = pp_layer_acts_output(t->acts[i]);
        }
        loss_sum += (double)pp_layer_acts_loss(t->acts[L - 1]) * mb_B;
        const float *dx = NULL;
        for (int i = L - 1; i >= 0; i--) {
            pp_layer_backward(&t->model->layers[i], t->acts[i], &mb, dx, loss_scale);
            dx = pp_layer_acts_dinput(t->acts[i]);
        }
    }
    float loss = (float)(loss_sum / c->batch);
    double gnorm = sqrt(pp_model_grad_sumsq(t->model));
    int64_t step = t->opt->t + 1;
    if (!isfinite(loss) || !isfinite(gnorm))
        return PP_ERR(PP_ERR_RUNTIME,
                      "training diverged at step %lld (loss %g, gradient norm %g); try a lower "
                      "--lr",
                      (long long)step, (double)loss, gnorm);
    float lr = pp_adamw_lr_at(&c->opt, step, c->steps);
    pp_optimizer_step(t->opt, t->model, lr, pp_grad_clip_scale(c->opt.grad_clip, gnorm));
    double secs = (double)(pp_now_ns() - t0) * 1e-9;
    if (st) {
        st->step = step;
        st->loss = loss;
        st->lr = lr;
        st->grad_norm = gnorm;
        st->step_ms = secs * 1e3;
        st->tokens_per_s = secs > 0 ? (double)c->batch * T / secs : 0.0;
    }
    return PP_OK;
}
