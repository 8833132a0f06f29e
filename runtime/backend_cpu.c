/* backend_cpu.c: the compute stage backends, cpu and cuda. A stage holds the layers of its
 * chunks (one contiguous slice of the layer list per chunk, each with its own parameters and
 * AdamW state) and a pool of activation slots per chunk, one per micro-batch it may hold at
 * once. The math is the layer code of the single-stage trainer (runtime/layers.c) run through a
 * kernel table (kernels/pp_kops.h): the CPU kernels on host memory, so a pipeline reproduces the
 * single-stage trainer's results, or (PP_HAVE_CUDA) CUDA kernels on the stage's own stream with
 * every tensor in device memory. On a device every op is only enqueued; the host waits for the
 * stream once per step, when the executor asks for the gradient statistics. */
#include "pp_backend.h"
#include "pp_nvtx.h"

#ifdef PP_HAVE_CUDA
#include "pp_cuda.h"
#endif

#include <stdint.h>
#include <string.h>

/* Activation recomputation (pp_recompute): a recomputed layer has no activation set per slot.
 * Its slot keeps only the layer's input ("kept" tensors, plus the chunk's output and input
 * gradient when the layer is at an end of the chunk, for the sends that follow); its forward and
 * its backward run in one of the chunk's workspaces, a full activation set of every recomputed
 * layer, which the forward holds while it runs and the backward from its input half (which runs
 * the forward again first) to its weight half. The same kernels in the same order on the same
 * inputs: the results are bit-identical to a run without recomputation. */
#define NO_OFF SIZE_MAX

typedef struct cpu_chunk {
    int piece;
    pp_model *model;     /* host: configuration, layer list, initial parameters */
    pp_optimizer *opt;   /* host: step count (and moments for the cpu table) */
    pp_layer *layers;    /* the layers the kernels run: the model's, or device copies */
    float *params, *grads, *m, *v; /* in the table's memory space */
    pp_layer_acts **acts; /* [n_slots * model->n_layers]; NULL for recomputed layers */
    uint8_t *rc;          /* [n_layers]: 1 = recomputed */
    int any_rc;
    float **kept;         /* [n_slots]: each slot's kept tensors, in the table's memory */
    size_t *kin_off;      /* [n_layers]: a recomputed layer's input in kept (NO_OFF: none) */
    size_t kout_off, kdin_off; /* the chunk's output / input gradient in kept (NO_OFF: none) */
    size_t kept_floats;
    pp_layer_acts **ws;   /* [n_sets * n_layers]: the workspaces (recomputed layers only) */
    int *ws_slot;         /* [n_sets]: the slot holding each, -1 free */
    int n_sets;
    int64_t mb_bytes;     /* activation bytes a micro-batch in flight holds in its slot */
    int64_t set_bytes;    /* bytes of one workspace */
} cpu_chunk;

typedef struct cpu_backend {
    pp_stage_backend base;
    const pp_kops *k;
    pp_kops *owned; /* a device table this backend created (NULL for cpu) */
    pp_model_config cfg;
    int S, P, mb_B;
    cpu_chunk *chunks;
    const pp_step_data *d;
    const pp_microbatch *mbs; /* the step's micro-batches as the kernels see them */
    int64_t step;
    double loss_sum;
    size_t io_bytes; /* [mb_B, T, C] float32 */
    /* device tables: the step's tokens and targets, staged through pinned memory */
    int max_M;
    pp_microbatch *dmbs;  /* [max_M] pointing into dtok */
    int32_t *dtok;        /* device: max_M x (tokens, targets) of mb_B x T each */
    int32_t *htok;        /* pinned host staging of the same */
    float *dloss, *hloss; /* device loss accumulator and its pinned host copy */
} cpu_backend;

static pp_layer_acts *acts_of(cpu_chunk *c, int slot, int li)
{
    return c->acts[(size_t)slot * c->model->n_layers + li];
}

/* Layer li's activations for this op: the slot's own, or workspace `set`'s when recomputed. */
static pp_layer_acts *layer_acts(cpu_chunk *c, int slot, int set, int li)
{
    return c->rc[li] ? c->ws[(size_t)set * c->model->n_layers + li] : acts_of(c, slot, li);
}

static float *kept_at(cpu_chunk *c, int slot, size_t off)
{
    return off == NO_OFF ? NULL : c->kept[slot] + off;
}

/* The workspace `slot` holds, or a free one it takes now (-1: none free; -1 too without
 * recomputed layers, where no workspace is used). */
static int ws_take(cpu_backend *cb, cpu_chunk *c, int slot)
{
    if (!c->any_rc)
        return -1;
    for (int i = 0; i < c->n_sets; i++)
        if (c->ws_slot[i] == slot)
            return i;
    for (int i = 0; i < c->n_sets; i++)
        if (c->ws_slot[i] < 0) {
            c->ws_slot[i] = slot;
            pp_stage_mem_add(&cb->base.memory, PP_STAGE_MEM_ACTIVATIONS, c->set_bytes);
            return i;
        }
    return -1;
}

static void ws_give(cpu_backend *cb, cpu_chunk *c, int set)
{
    if (set < 0)
        return;
    c->ws_slot[set] = -1;
    pp_stage_mem_add(&cb->base.memory, PP_STAGE_MEM_ACTIVATIONS, -c->set_bytes);
}

static pp_status ws_exhausted(cpu_backend *cb, cpu_chunk *c)
{
    return PP_ERR(PP_ERR_RUNTIME, "stage %d: all %d recompute workspaces of piece %d are held",
                  cb->base.stage, c->n_sets, c->piece);
}

/* The first error of the device table since the last check (PP_OK on the cpu). */
static pp_status device_status(cpu_backend *cb)
{
#ifdef PP_HAVE_CUDA
    if (cb->owned)
        return pp_cuda_kops_error(cb->owned);
#endif
    (void)cb;
    return PP_OK;
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
    const pp_kops *k = cb->k;
    if (!d || !d->mbs)
        return PP_ERR(PP_ERR_RUNTIME, "%s backend needs the step's micro-batches", k->name);
    cb->d = d;
    cb->mbs = d->mbs;
    cb->step = step;
    cb->loss_sum = 0.0;
    for (int c = 0; c < b->n_chunks; c++)
        k->zero(k->ctx, cb->chunks[c].grads, cb->chunks[c].model->n_params * sizeof(float));
#ifdef PP_HAVE_CUDA
    if (cb->owned) {
        if (d->M > cb->max_M)
            return PP_ERR(PP_ERR_RUNTIME, "cuda backend: %d micro-batches, set up for %d", d->M,
                          cb->max_M);
        /* The previous step's copies are done (the host waited in grad_stats), so the
         * staging buffer is free to overwrite. */
        size_t per = (size_t)cb->mb_B * cb->cfg.seq_len;
        for (int m = 0; m < d->M; m++) {
            if (d->mbs[m].B != cb->mb_B)
                return PP_ERR(PP_ERR_RUNTIME, "cuda backend: micro-batch of %d sequences, set "
                                              "up for %d", d->mbs[m].B, cb->mb_B);
            memcpy(cb->htok + 2 * m * per, d->mbs[m].tokens, per * sizeof(int32_t));
            memcpy(cb->htok + (2 * m + 1) * per, d->mbs[m].targets, per * sizeof(int32_t));
        }
        pp_cuda_h2d(cb->owned, cb->dtok, cb->htok, 2 * (size_t)d->M * per * sizeof(int32_t));
        k->zero(k->ctx, cb->dloss, sizeof(float));
        cb->mbs = cb->dmbs;
    }
#endif
    return device_status(cb);
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
    const pp_microbatch *m = &cb->mbs[mb];
    const pp_kops *k = cb->k;
    int nl = c->model->n_layers;
    pp_stage_mem_add(&cb->base.memory, PP_STAGE_MEM_ACTIVATIONS, c->mb_bytes);
    int set = ws_take(cb, c, slot);
    if (c->any_rc && set < 0)
        return ws_exhausted(cb, c);
    const float *x = in;
    for (int li = 0; li < nl; li++) {
        pp_layer *L = &c->layers[li];
        pp_nvtx_info info = layer_info(cb, chunk, mb, L->index);
        pp_nvtx_push(PP_NVTX_LAYER_FWD, &info);
        float *keep = c->rc[li] ? kept_at(c, slot, c->kin_off[li]) : NULL;
        if (keep)
            k->copy(k->ctx, keep, x, cb->io_bytes);
        pp_layer_acts *a = layer_acts(c, slot, set, li);
        pp_layer_forward(L, a, m, x);
        x = pp_layer_acts_output(a);
        pp_nvtx_pop();
    }
    if (c->rc[nl - 1] && c->kout_off != NO_OFF) {
        /* the send reads the output after the workspace is given back */
        float *o = kept_at(c, slot, c->kout_off);
        k->copy(k->ctx, o, x, cb->io_bytes);
        x = o;
    }
    if (c->piece == cb->P - 1) {
        /* each micro-batch's mean loss weighted by its share of the batch */
        pp_layer_acts *head = layer_acts(c, slot, set, nl - 1);
#ifdef PP_HAVE_CUDA
        if (cb->owned)
            pp_cuda_accumulate(cb->owned, cb->dloss, pp_layer_acts_loss_mean(head),
                               1.0f / (float)cb->d->M);
        else
#endif
            cb->loss_sum += (double)pp_layer_acts_loss(head) / cb->d->M;
        *out = NULL;
    } else {
        *out = x;
    }
    ws_give(cb, c, set);
    *t_ns = pp_now_ns();
    return device_status(cb);
}

static pp_status cpu_backward_input(pp_stage_backend *b, int chunk, int mb, int slot,
                                    const void *dout, const void **din, uint64_t *t_ns)
{
    cpu_backend *cb = (cpu_backend *)b;
    cpu_chunk *c = &cb->chunks[chunk];
    const pp_microbatch *m = &cb->mbs[mb];
    const pp_kops *k = cb->k;
    int set = ws_take(cb, c, slot);
    if (c->any_rc && set < 0)
        return ws_exhausted(cb, c);
    const float *dx = dout;
    for (int li = c->model->n_layers - 1; li >= 0; li--) {
        pp_layer *L = &c->layers[li];
        pp_nvtx_info info = layer_info(cb, chunk, mb, L->index);
        pp_nvtx_push(PP_NVTX_LAYER_BWD, &info);
        pp_layer_acts *a = layer_acts(c, slot, set, li);
        if (c->rc[li]) /* the layer's forward again, from its kept input (none: the tokens) */
            pp_layer_forward(L, a, m, kept_at(c, slot, c->kin_off[li]));
        pp_layer_backward_input(L, a, m, dx, cb->d->loss_scale);
        dx = pp_layer_acts_dinput(a);
        pp_nvtx_pop();
    }
    if (c->rc[0] && c->kdin_off != NO_OFF) {
        /* the send may follow the weight half, which gives the workspace back */
        float *g = kept_at(c, slot, c->kdin_off);
        k->copy(k->ctx, g, dx, cb->io_bytes);
        dx = g;
    }
    *din = c->piece == 0 ? NULL : dx;
    *t_ns = pp_now_ns();
    return device_status(cb);
}

static pp_status cpu_backward_weight(pp_stage_backend *b, int chunk, int mb, int slot,
                                     uint64_t *t_ns)
{
    cpu_backend *cb = (cpu_backend *)b;
    cpu_chunk *c = &cb->chunks[chunk];
    const pp_microbatch *m = &cb->mbs[mb];
    int set = ws_take(cb, c, slot); /* the one its input half holds */
    if (c->any_rc && set < 0)
        return ws_exhausted(cb, c);
    for (int li = c->model->n_layers - 1; li >= 0; li--) {
        pp_layer *L = &c->layers[li];
        pp_nvtx_info info = layer_info(cb, chunk, mb, L->index);
        pp_nvtx_push(PP_NVTX_LAYER_BWD_WEIGHT, &info);
        pp_layer_backward_weight(L, layer_acts(c, slot, set, li), m);
        pp_nvtx_pop();
    }
    ws_give(cb, c, set);
    /* the micro-batch's backward is done: its activations are released */
    pp_stage_mem_add(&cb->base.memory, PP_STAGE_MEM_ACTIVATIONS, -c->mb_bytes);
    *t_ns = pp_now_ns();
    return device_status(cb);
}

static pp_status cpu_grad_stats(pp_stage_backend *b, double *sumsq, double *loss_sum)
{
    cpu_backend *cb = (cpu_backend *)b;
    const pp_kops *k = cb->k;
    double s = 0.0;
    for (int c = 0; c < b->n_chunks; c++)
        s += k->sumsq(k->ctx, cb->chunks[c].grads, cb->chunks[c].model->n_params);
    *sumsq = s;
    *loss_sum = cb->loss_sum;
#ifdef PP_HAVE_CUDA
    if (cb->owned)
        pp_cuda_d2h(cb->owned, cb->hloss, cb->dloss, sizeof(float));
#endif
    /* The step's one wait for a device table: a fault of any kernel or copy enqueued since the
     * last check comes back here (the table clears it, so it is returned or lost). */
    pp_status st = k->sync ? k->sync(k->ctx) : PP_OK;
    if (st != PP_OK)
        return st;
#ifdef PP_HAVE_CUDA
    if (cb->owned)
        *loss_sum = *cb->hloss;
#endif
    return PP_OK;
}

static pp_status cpu_optimizer_step(pp_stage_backend *b, float lr, float grad_scale,
                                    uint64_t *t_ns)
{
    cpu_backend *cb = (cpu_backend *)b;
    for (int c = 0; c < b->n_chunks; c++) {
        cpu_chunk *ch = &cb->chunks[c];
        pp_optimizer_step_k(ch->opt, ch->model, ch->params, ch->grads, ch->m, ch->v, cb->k, lr,
                            grad_scale);
    }
    *t_ns = pp_now_ns();
    return device_status(cb);
}

static void cpu_grads(pp_stage_backend *b, int chunk, float **g, size_t *n, uint64_t *bytes)
{
    cpu_chunk *c = &((cpu_backend *)b)->chunks[chunk];
    *g = c->grads;
    *n = c->model->n_params;
    *bytes = (uint64_t)c->model->n_params * sizeof(float);
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
    const pp_kops *k = cb->k;
    if (cb->chunks) {
        for (int c = 0; c < b->n_chunks; c++) {
            cpu_chunk *ch = &cb->chunks[c];
            if (ch->acts && ch->model)
                for (int i = 0; i < b->n_slots * ch->model->n_layers; i++)
                    pp_layer_acts_destroy(ch->acts[i]);
            pp_free(ch->acts);
            if (ch->ws && ch->model)
                for (int i = 0; i < ch->n_sets * ch->model->n_layers; i++)
                    pp_layer_acts_destroy(ch->ws[i]);
            pp_free(ch->ws);
            if (ch->kept)
                for (int i = 0; i < b->n_slots; i++)
                    if (ch->kept[i])
                        k->free(k->ctx, ch->kept[i]);
            pp_free(ch->kept);
            pp_free(ch->kin_off);
            pp_free(ch->ws_slot);
            pp_free(ch->rc);
            if (cb->owned) {
                float *dev[] = {ch->params, ch->grads, ch->m, ch->v};
                for (int i = 0; i < 4; i++)
                    if (dev[i])
                        k->free(k->ctx, dev[i]);
                pp_free(ch->layers);
            }
            pp_optimizer_destroy(ch->opt);
            pp_model_destroy(ch->model);
        }
    }
    pp_free(cb->chunks);
#ifdef PP_HAVE_CUDA
    if (cb->owned) {
        if (cb->dtok)
            k->free(k->ctx, cb->dtok);
        if (cb->dloss)
            k->free(k->ctx, cb->dloss);
        pp_cuda_host_free(cb->htok);
        pp_cuda_host_free(cb->hloss);
        pp_free(cb->dmbs);
        pp_cuda_kops_destroy(cb->owned);
    }
#endif
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

/* Device copies of a chunk: parameters, zeroed gradients and moments, and layers pointing at
 * them. */
static pp_status chunk_to_device(cpu_backend *cb, cpu_chunk *ch)
{
#ifdef PP_HAVE_CUDA
    const pp_kops *k = cb->k;
    size_t bytes = ch->model->n_params * sizeof(float);
    ch->params = k->alloc(k->ctx, bytes);
    ch->grads = k->alloc(k->ctx, bytes);
    ch->m = k->alloc(k->ctx, bytes);
    ch->v = k->alloc(k->ctx, bytes);
    ch->layers = pp_alloc(sizeof(pp_layer) * (size_t)ch->model->n_layers);
    if (!ch->params || !ch->grads || !ch->m || !ch->v || !ch->layers)
        return PP_ERR(PP_ERR_NOMEM, "out of device memory for stage %d's %zu parameters",
                      cb->base.stage, ch->model->n_params);
    pp_cuda_h2d(cb->owned, ch->params, ch->model->params, bytes);
    for (int li = 0; li < ch->model->n_layers; li++) {
        const pp_layer *L = &ch->model->layers[li];
        ch->layers[li] = *L;
        ch->layers[li].params = ch->params + (L->params - ch->model->params);
        ch->layers[li].grads = ch->grads + (L->grads - ch->model->grads);
    }
    return pp_cuda_kops_sync(cb->owned); /* the host parameters may change after this */
#else
    (void)ch;
    return PP_ERR(PP_ERR_INVALID, "stage %d: this build has no CUDA", cb->base.stage);
#endif
}

/* The arguments compute_create checks before it allocates anything. */
static pp_status check_create_args(const pp_model_config *cfg, const pp_partition *part,
                                   int stage, int mb_B, int n_slots, const pp_kops *host,
                                   const char *name)
{
    if (host && host->on_device)
        return PP_ERR(PP_ERR_INVALID, "cpu backend: the %s kernel table is not a host table",
                      host->name);
    if (part->L != pp_model_config_num_layers(cfg))
        return PP_ERR(PP_ERR_INVALID, "partition of %d layers does not fit the model's %d",
                      part->L, pp_model_config_num_layers(cfg));
    if (stage < 0 || stage >= part->S || n_slots < 1 || mb_B < 1)
        return PP_ERR(PP_ERR_INVALID, "%s backend: bad stage %d, slots %d or batch %d", name,
                      stage, n_slots, mb_B);
    return PP_OK;
}

/* One chunk: its model slice with initial parameters, its optimizer, the tensors in the
 * table's memory, and n_slots activation sets of mb_B sequences per layer. */
/* Where a chunk's recomputed layers keep their inputs (and the chunk's output and input
 * gradient, when a recomputed layer is at that end) in each slot, and its n_sets workspaces. */
static pp_status chunk_recompute_create(cpu_backend *cb, cpu_chunk *ch, const pp_recompute *rc,
                                        int n_slots)
{
    int stage = cb->base.stage, nl = ch->model->n_layers;
    size_t io = cb->io_bytes / sizeof(float), rounded = (io + 15) & ~(size_t)15;
    ch->rc = pp_alloc((size_t)nl);
    ch->kin_off = pp_alloc(sizeof(size_t) * (size_t)nl);
    if (!ch->rc || !ch->kin_off)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for stage %d's recompute state", stage);
    ch->kout_off = ch->kdin_off = NO_OFF;
    ch->kept_floats = 0;
    for (int li = 0; li < nl; li++) {
        const pp_layer *L = &ch->model->layers[li];
        ch->rc[li] = rc && rc->layers && rc->layers[L->index] ? 1 : 0;
        ch->any_rc |= ch->rc[li];
        ch->kin_off[li] = NO_OFF;
        if (ch->rc[li] && L->kind != PP_LAYER_EMBED) { /* the embedding's input: the tokens */
            ch->kin_off[li] = ch->kept_floats;
            ch->kept_floats += rounded;
        }
    }
    if (ch->rc[nl - 1] && ch->model->layers[nl - 1].kind != PP_LAYER_HEAD) {
        ch->kout_off = ch->kept_floats;
        ch->kept_floats += rounded;
    }
    if (ch->rc[0] && ch->model->layers[0].kind != PP_LAYER_EMBED) {
        ch->kdin_off = ch->kept_floats;
        ch->kept_floats += rounded;
    }
    if (!ch->any_rc)
        return PP_OK;
    const pp_kops *k = cb->k;
    ch->n_sets = rc->n_sets > 0 ? rc->n_sets : 1;
    ch->kept = pp_alloc(sizeof(float *) * (size_t)n_slots);
    ch->ws = pp_alloc(sizeof(pp_layer_acts *) * (size_t)ch->n_sets * nl);
    ch->ws_slot = pp_alloc(sizeof(int) * (size_t)ch->n_sets);
    if (!ch->kept || !ch->ws || !ch->ws_slot)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for stage %d's recompute state", stage);
    for (int sl = 0; sl < n_slots && ch->kept_floats; sl++)
        if (!(ch->kept[sl] = k->alloc(k->ctx, ch->kept_floats * sizeof(float))))
            return PP_ERR(PP_ERR_NOMEM, "out of %s memory for stage %d's kept inputs", k->name,
                          stage);
    ch->set_bytes = 0;
    for (int i = 0; i < ch->n_sets; i++) {
        ch->ws_slot[i] = -1;
        for (int li = 0; li < nl; li++) {
            if (!ch->rc[li])
                continue;
            pp_layer_acts **a = &ch->ws[(size_t)i * nl + li];
            pp_status st = pp_layer_acts_create_k(&ch->layers[li], cb->mb_B, k, a);
            if (st != PP_OK)
                return st;
            if (i == 0)
                ch->set_bytes += (int64_t)pp_layer_acts_bytes(*a);
        }
    }
    return PP_OK;
}

static pp_status chunk_create(cpu_backend *cb, cpu_chunk *ch, const pp_partition *part,
                              const pp_adamw_config *opt, uint64_t seed, int n_slots,
                              const pp_recompute *rc)
{
    int stage = cb->base.stage;
    pp_status st = pp_model_create(&cb->cfg, part->bounds[ch->piece],
                                   part->bounds[ch->piece + 1], &ch->model);
    if (st != PP_OK)
        return st;
    pp_model_init_params(ch->model, seed);
    if ((st = pp_optimizer_create(opt, ch->model, &ch->opt)) != PP_OK)
        return st;
    if (cb->owned) {
        if ((st = chunk_to_device(cb, ch)) != PP_OK)
            return st;
    } else {
        ch->layers = ch->model->layers;
        ch->params = ch->model->params;
        ch->grads = ch->model->grads;
        ch->m = ch->opt->m;
        ch->v = ch->opt->v;
    }
    int nl = ch->model->n_layers;
    if ((st = chunk_recompute_create(cb, ch, rc, n_slots)) != PP_OK)
        return st;
    ch->acts = pp_alloc(sizeof(pp_layer_acts *) * (size_t)n_slots * nl);
    if (!ch->acts)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for stage %d's activations", stage);
    ch->mb_bytes = (int64_t)(ch->kept_floats * sizeof(float));
    for (int sl = 0; sl < n_slots; sl++)
        for (int li = 0; li < nl; li++) {
            if (ch->rc[li])
                continue;
            st = pp_layer_acts_create_k(&ch->layers[li], cb->mb_B, cb->k,
                                        &ch->acts[(size_t)sl * nl + li]);
            if (st != PP_OK)
                return st;
            if (sl == 0)
                ch->mb_bytes += (int64_t)pp_layer_acts_bytes(ch->acts[li]);
        }
    /* the static purposes: what the chunk allocated for them */
    int64_t pbytes = (int64_t)(ch->model->n_params * sizeof(float));
    pp_stage_mem *mem = &cb->base.memory;
    pp_stage_mem_add(mem, PP_STAGE_MEM_PARAMS, pbytes);
    pp_stage_mem_add(mem, PP_STAGE_MEM_GRADS, pbytes);
    pp_stage_mem_add(mem, PP_STAGE_MEM_OPTIMIZER, 2 * pbytes);
    return PP_OK;
}

/* A device table's token staging: max_M micro-batches of tokens and targets on the device,
 * their pinned host copy, and the loss accumulator. */
static pp_status device_buffers_create(cpu_backend *cb, int max_M)
{
#ifdef PP_HAVE_CUDA
    size_t per = (size_t)cb->mb_B * cb->cfg.seq_len;
    cb->max_M = max_M;
    cb->dtok = cb->k->alloc(cb->k->ctx, 2 * (size_t)max_M * per * sizeof(int32_t));
    cb->htok = pp_cuda_host_alloc(2 * (size_t)max_M * per * sizeof(int32_t));
    cb->dloss = cb->k->alloc(cb->k->ctx, sizeof(float));
    cb->hloss = pp_cuda_host_alloc(sizeof(float));
    cb->dmbs = pp_alloc(sizeof(pp_microbatch) * (size_t)max_M);
    if (!cb->dtok || !cb->htok || !cb->dloss || !cb->hloss || !cb->dmbs)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for stage %d's token buffers",
                      cb->base.stage);
    for (int m = 0; m < max_M; m++)
        cb->dmbs[m] = (pp_microbatch){.B = cb->mb_B, .tokens = cb->dtok + 2 * m * per,
                                      .targets = cb->dtok + (2 * m + 1) * per};
    /* the device's share: the step's tokens and the loss accumulator */
    pp_stage_mem_add(&cb->base.memory, PP_STAGE_MEM_WORKSPACE,
                     (int64_t)(2 * (size_t)max_M * per * sizeof(int32_t) + sizeof(float)));
    return PP_OK;
#else
    (void)max_M;
    return PP_ERR(PP_ERR_INVALID, "stage %d: this build has no CUDA", cb->base.stage);
#endif
}

/* The cpu backend (device NULL, on host or the cpu table) or the cuda backend (device: the
 * stage's table, owned from here on even on failure). */
static pp_status compute_create(const pp_model_config *cfg, const pp_partition *part, int stage,
                                const pp_adamw_config *opt, uint64_t seed, int mb_B, int n_slots,
                                pp_kops *device, const pp_kops *host, int max_M,
                                const pp_recompute *rc, pp_stage_backend **out)
{
    pp_status st =
        check_create_args(cfg, part, stage, mb_B, n_slots, host, device ? "cuda" : "cpu");
    cpu_backend *cb = st == PP_OK ? pp_alloc(sizeof *cb) : NULL;
    if (!cb) {
#ifdef PP_HAVE_CUDA
        pp_cuda_kops_destroy(device);
#endif
        return st != PP_OK ? st : PP_ERR(PP_ERR_NOMEM, "out of memory for stage %d", stage);
    }
    cb->base = (pp_stage_backend){.ops = &k_cpu_ops, .stage = stage, .n_chunks = part->v,
                                  .n_slots = n_slots, .carries_data = 1, .mem = device,
                                  .memory = {.stage = stage}};
    cb->owned = device;
    cb->k = device ? device : host ? host : &pp_kops_cpu;
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
    for (int c = 0; c < part->v && st == PP_OK; c++) {
        cb->chunks[c].piece = c * part->S + stage;
        st = chunk_create(cb, &cb->chunks[c], part, opt, seed, n_slots, rc);
    }
    if (st == PP_OK && device)
        st = device_buffers_create(cb, max_M);
    if (st != PP_OK)
        goto fail;
    *out = &cb->base;
    return PP_OK;
fail:
    cpu_destroy(&cb->base);
    return st;
}

pp_status pp_backend_cpu_create(const pp_model_config *cfg, const pp_partition *part, int stage,
                                const pp_adamw_config *opt, uint64_t seed, int mb_B,
                                int n_slots, pp_stage_backend **out)
{
    return compute_create(cfg, part, stage, opt, seed, mb_B, n_slots, NULL, NULL, 0, NULL, out);
}

pp_status pp_backend_cpu_create_rc(const pp_model_config *cfg, const pp_partition *part,
                                   int stage, const pp_adamw_config *opt, uint64_t seed,
                                   int mb_B, int n_slots, const pp_recompute *rc,
                                   pp_stage_backend **out)
{
    return compute_create(cfg, part, stage, opt, seed, mb_B, n_slots, NULL, NULL, 0, rc, out);
}

pp_status pp_backend_cpu_create_kops(const pp_model_config *cfg, const pp_partition *part,
                                     int stage, const pp_adamw_config *opt, uint64_t seed,
                                     int mb_B, int n_slots, const pp_kops *k,
                                     pp_stage_backend **out)
{
    return compute_create(cfg, part, stage, opt, seed, mb_B, n_slots, NULL, k, 0, NULL, out);
}

pp_status pp_backend_cuda_create(const pp_model_config *cfg, const pp_partition *part, int stage,
                                 const pp_adamw_config *opt, uint64_t seed, int mb_B, int n_slots,
                                 int device, int precision, int max_M, const pp_recompute *rc,
                                 pp_stage_backend **out)
{
#ifdef PP_HAVE_CUDA
    pp_kops *k = NULL;
    pp_status st = pp_cuda_kops_create(device, (pp_cuda_precision)precision, &k);
    if (st != PP_OK)
        return pp_error_wrap(st, "stage %d on GPU %d", stage, device);
    return compute_create(cfg, part, stage, opt, seed, mb_B, n_slots, k, NULL, max_M, rc, out);
#else
    (void)cfg, (void)part, (void)stage, (void)opt, (void)seed, (void)mb_B, (void)n_slots;
    (void)device, (void)precision, (void)max_M, (void)rc, (void)out;
    return PP_ERR(PP_ERR_INVALID, "--backend cuda: this build has no CUDA (the CUDA toolkit was "
                                  "not found at configure time)");
#endif
}

pp_model *pp_backend_cpu_model(pp_stage_backend *b, int chunk)
{
    return ((cpu_backend *)b)->chunks[chunk].model;
}

pp_optimizer *pp_backend_cpu_optimizer(pp_stage_backend *b, int chunk)
{
    return ((cpu_backend *)b)->chunks[chunk].opt;
}
