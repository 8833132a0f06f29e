/* backend_cpu.c: the CPU stage backend. A stage holds the layers of its chunks (one contiguous
 * slice of the layer list per chunk, each with its own parameters and AdamW state) and a pool of
 * activation slots per chunk, one per micro-batch it may hold at once. The math is the same
 * layer code the single-stage trainer runs, so a pipeline reproduces its results. */
#include "pp_exec.h"
#include "pp_nvtx.h"

#include <string.h>

typedef struct cpu_chunk {
    int piece;
    pp_model *model;
    pp_optimizer *opt;
    pp_layer_acts **acts; /* [n_slots * model->n_layers] */
} cpu_chunk;

typedef struct cpu_backend {
    pp_stage_backend base;
    pp_model_config cfg;
    int S, P, mb_B;
    cpu_chunk *chunks;
    const pp_step_data *d;
    int64_t step;
    double loss_sum;
    size_t io_bytes; /* [mb_B, T, C] float32 */
} cpu_backend;

static pp_layer_acts *acts_of(cpu_chunk *c, int slot, int li)
{
    return c->acts[(size_t)slot * c->model->n_layers + li];
}

static size_t cpu_act_bytes(pp_stage_backend *b, int chunk)
{
    cpu_backend *cb = (cpu_backend *)b;
    return cb->chunks[chunk].piece == cb->P - 1 ? 0 : cb->io_bytes;
}

static size_t cpu_grad_bytes(pp_stage_backend *b, int chunk)
{
    cpu_backend *cb = (cpu_backend *)b;
    return cb->chunks[chunk].piece == 0 ? 0 : cb->io_bytes;
}

static pp_status cpu_begin_step(pp_stage_backend *b, int64_t step, const pp_step_data *d)
{
    cpu_backend *cb = (cpu_backend *)b;
    if (!d || !d->mbs)
        return PP_ERR(PP_ERR_RUNTIME, "cpu backend needs the step's micro-batches");
    cb->d = d;
    cb->step = step;
    cb->loss_sum = 0.0;
    for (int c = 0; c < b->n_chunks; c++)
        pp_model_zero_grads(cb->chunks[c].model);
    return PP_OK;
}

static pp_nvtx_info layer_info(cpu_backend *cb, int chunk, int mb, int layer)
{
    pp_nvtx_info i = pp_nvtx_info_none();
    i.step = cb->step;
    i.stage = cb->base.stage;
    i.mb = mb;
    i.chunk = chunk;
    i.layer = layer;
    return i;
}

static pp_status cpu_forward(pp_stage_backend *b, int chunk, int mb, int slot, const void *in,
                             const void **out, uint64_t *t_ns)
{
    cpu_backend *cb = (cpu_backend *)b;
    cpu_chunk *c = &cb->chunks[chunk];
    const pp_microbatch *m = &cb->d->mbs[mb];
    const float *x = in;
    for (int li = 0; li < c->model->n_layers; li++) {
        pp_layer *L = &c->model->layers[li];
        pp_nvtx_info info = layer_info(cb, chunk, mb, L->index);
        pp_nvtx_push(PP_NVTX_LAYER_FWD, &info);
        pp_layer_forward(L, acts_of(c, slot, li), m, x);
        x = pp_layer_acts_output(acts_of(c, slot, li));
        pp_nvtx_pop();
    }
    if (c->piece == cb->P - 1) {
        /* each micro-batch's mean loss weighted by its share of the batch */
        pp_layer_acts *head = acts_of(c, slot, c->model->n_layers - 1);
        cb->loss_sum += (double)pp_layer_acts_loss(head) / cb->d->M;
        *out = NULL;
    } else {
        *out = x;
    }
    *t_ns = pp_now_ns();
    return PP_OK;
}

static pp_status cpu_backward_input(pp_stage_backend *b, int chunk, int mb, int slot,
                                    const void *dout, const void **din, uint64_t *t_ns)
{
    cpu_backend *cb = (cpu_backend *)b;
    cpu_chunk *c = &cb->chunks[chunk];
    const pp_microbatch *m = &cb->d->mbs[mb];
    const float *dx = dout;
    for (int li = c->model->n_layers - 1; li >= 0; li--) {
        pp_layer *L = &c->model->layers[li];
        pp_nvtx_info info = layer_info(cb, chunk, mb, L->index);
        pp_nvtx_push(PP_NVTX_LAYER_BWD, &info);
        pp_layer_backward_input(L, acts_of(c, slot, li), m, dx, cb->d->loss_scale);
        dx = pp_layer_acts_dinput(acts_of(c, slot, li));
        pp_nvtx_pop();
    }
    *din = c->piece == 0 ? NULL : dx;
    *t_ns = pp_now_ns();
    return PP_OK;
}

static pp_status cpu_backward_weight(pp_stage_backend *b, int chunk, int mb, int slot,
                                     uint64_t *t_ns)
{
    cpu_backend *cb = (cpu_backend *)b;
    cpu_chunk *c = &cb->chunks[chunk];
    const pp_microbatch *m = &cb->d->mbs[mb];
    for (int li = c->model->n_layers - 1; li >= 0; li--) {
        pp_layer *L = &c->model->layers[li];
        pp_nvtx_info info = layer_info(cb, chunk, mb, L->index);
        pp_nvtx_push(PP_NVTX_LAYER_BWD_WEIGHT, &info);
        pp_layer_backward_weight(L, acts_of(c, slot, li), m);
        pp_nvtx_pop();
    }
    *t_ns = pp_now_ns();
    return PP_OK;
}

static void cpu_grad_stats(pp_stage_backend *b, double *sumsq, double *loss_sum)
{
    cpu_backend *cb = (cpu_backend *)b;
    double s = 0.0;
    for (int c = 0; c < b->n_chunks; c++)
        s += pp_model_grad_sumsq(cb->chunks[c].model);
    *sumsq = s;
    *loss_sum = cb->loss_sum;
}

static pp_status cpu_optimizer_step(pp_stage_backend *b, float lr, float grad_scale,
                                    uint64_t *t_ns)
{
    cpu_backend *cb = (cpu_backend *)b;
    for (int c = 0; c < b->n_chunks; c++)
        pp_optimizer_step(cb->chunks[c].opt, cb->chunks[c].model, lr, grad_scale);
    *t_ns = pp_now_ns();
    return PP_OK;
}

static void cpu_grads(pp_stage_backend *b, int chunk, float **g, size_t *n, uint64_t *bytes)
{
    pp_model *m = ((cpu_backend *)b)->chunks[chunk].model;
    *g = m->grads;
    *n = m->n_params;
    *bytes = (uint64_t)m->n_params * sizeof(float);
}

static uint64_t cpu_transfer_ns(pp_stage_backend *b, size_t bytes)
{
    (void)b;
    (void)bytes;
    return 0; /* real copies take real time */
}

static void cpu_destroy(pp_stage_backend *b)
{
    cpu_backend *cb = (cpu_backend *)b;
    if (!cb)
        return;
    if (cb->chunks) {
        for (int c = 0; c < b->n_chunks; c++) {
            cpu_chunk *ch = &cb->chunks[c];
            if (ch->acts && ch->model)
                for (int i = 0; i < b->n_slots * ch->model->n_layers; i++)
                    pp_layer_acts_destroy(ch->acts[i]);
            pp_free(ch->acts);
            pp_optimizer_destroy(ch->opt);
            pp_model_destroy(ch->model);
        }
    }
    pp_free(cb->chunks);
    pp_free(cb);
}

static const pp_backend_ops k_cpu_ops = {
    .name = "cpu",
    .act_bytes = cpu_act_bytes,
    .grad_bytes = cpu_grad_bytes,
    .begin_step = cpu_begin_step,
    .forward = cpu_forward,
    .backward_input = cpu_backward_input,
    .backward_weight = cpu_backward_weight,
    .grad_stats = cpu_grad_stats,
    .optimizer_step = cpu_optimizer_step,
    .grads = cpu_grads,
    .transfer_ns = cpu_transfer_ns,
    .destroy = cpu_destroy,
};

pp_status pp_backend_cpu_create(const pp_model_config *cfg, const pp_partition *part, int stage,
                                const pp_adamw_config *opt, uint64_t seed, int mb_B,
                                int n_slots, pp_stage_backend **out)
{
    pp_status st = PP_OK;
    if (part->L != pp_model_config_num_layers(cfg))
        return PP_ERR(PP_ERR_INVALID, "partition of %d layers does not fit the model's %d",
                      part->L, pp_model_config_num_layers(cfg));
    if (stage < 0 || stage >= part->S || n_slots < 1 || mb_B < 1)
        return PP_ERR(PP_ERR_INVALID, "cpu backend: bad stage %d, slots %d or batch %d", stage,
                      n_slots, mb_B);
    cpu_backend *cb = pp_alloc(sizeof *cb);
    if (!cb)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for stage %d", stage);
    cb->base.ops = &k_cpu_ops;
    cb->base.stage = stage;
    cb->base.n_chunks = part->v;
    cb->base.n_slots = n_slots;
    cb->base.carries_data = 1;
    cb->cfg = *cfg;
    cb->S = part->S;
    cb->P = part->P;
    cb->mb_B = mb_B;
    cb->io_bytes = (size_t)mb_B * cfg->seq_len * cfg->d_model * sizeof(float);
    cb->chunks = pp_alloc(sizeof(cpu_chunk) * (size_t)part->v);
    if (!cb->chunks) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory for stage %d", stage);
        goto fail;
    }
    for (int c = 0; c < part->v; c++) {
        cpu_chunk *ch = &cb->chunks[c];
        ch->piece = c * part->S + stage;
        st = pp_model_create(cfg, part->bounds[ch->piece], part->bounds[ch->piece + 1],
                             &ch->model);
        if (st != PP_OK)
            goto fail;
        pp_model_init_params(ch->model, seed);
        if ((st = pp_optimizer_create(opt, ch->model, &ch->opt)) != PP_OK)
            goto fail;
        size_t n = (size_t)n_slots * ch->model->n_layers;
        ch->acts = pp_alloc(sizeof(pp_layer_acts *) * n);
        if (!ch->acts) {
            st = PP_ERR(PP_ERR_NOMEM, "out of memory for stage %d's activations", stage);
            goto fail;
        }
        for (int sl = 0; sl < n_slots; sl++)
            for (int li = 0; li < ch->model->n_layers; li++) {
                st = pp_layer_acts_create(&ch->model->layers[li], mb_B,
                                          &ch->acts[(size_t)sl * ch->model->n_layers + li]);
                if (st != PP_OK)
                    goto fail;
            }
    }
    *out = &cb->base;
    return PP_OK;
fail:
    cpu_destroy(&cb->base);
    return st;
}

pp_model *pp_backend_cpu_model(pp_stage_backend *b, int chunk)
{
    return ((cpu_backend *)b)->chunks[chunk].model;
}

pp_optimizer *pp_backend_cpu_optimizer(pp_stage_backend *b, int chunk)
{
    return ((cpu_backend *)b)->chunks[chunk].opt;
}
