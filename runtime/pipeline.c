/* pipeline.c: the pipeline trainer behind pptrain. It turns a configuration (model or cost file,
 * partition, schedule, micro-batches, backend) into a validated schedule, a transport sized by
 * the validator's bounds, one backend per stage and an executor, then runs optimizer steps and
 * saves or restores checkpoints in the single-stage format. */
#include "pp_exec.h"
#include "pp_kops.h"
#include "pp_nvtx.h"
#include "trainer_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pp_pipe_trainer {
    pp_pipe_config cfg;
    pp_partition part; /* own copy */
    pp_schedule *sched;
    pp_schedule_report rep;
    int have_rep;
    pp_transport *tp;
    pp_exec *exec;
    pp_data *data;
    int32_t *inputs, *targets;
    pp_microbatch *mbs;
    int64_t steps_done;
    int first_local, n_local; /* the stages this process runs (the transport says) */
    int dp, replica;          /* data-parallel replicas and the one this process runs */
    int mb_B;                 /* sequences per micro-batch of this replica (cpu, cuda) */
    uint8_t *rc;              /* [L]: --recompute resolved, 1 = recomputed */
};

/* Backends that train a model on data (cpu, cuda), as opposed to sim. */
static int computes(pp_backend_kind k) { return k == PP_BACKEND_CPU || k == PP_BACKEND_CUDA; }

/* What --backend takes, in pp_backend_kind order. */
static const char *const k_backend_names[] = {"cpu", "sim", "cuda"};

const char *pp_backend_kind_name(pp_backend_kind k)
{
    int n = (int)(sizeof k_backend_names / sizeof *k_backend_names);
    return (int)k >= 0 && (int)k < n ? k_backend_names[k] : "sim";
}

pp_status pp_backend_kind_parse(const char *name, pp_backend_kind *out)
{
    for (int k = 0; k < (int)(sizeof k_backend_names / sizeof *k_backend_names); k++)
        if (strcmp(name, k_backend_names[k]) == 0) {
            *out = (pp_backend_kind)k;
            return PP_OK;
        }
    return PP_ERR(PP_ERR_INVALID, "--backend must be 'cpu', 'sim' or 'cuda'");
}

static pp_status copy_partition(const pp_partition *src, pp_partition *dst)
{
    return pp_partition_from_bounds(src->bounds, src->P + 1, src->L, src->S, src->v, dst);
}

void pp_pipe_trainer_destroy(pp_pipe_trainer *t)
{
    if (!t)
        return;
    pp_exec_destroy(t->exec);
    pp_transport_destroy(t->tp);
    if (t->have_rep)
        pp_schedule_report_free(&t->rep);
    pp_schedule_destroy(t->sched);
    pp_partition_free(&t->part);
    pp_data_destroy(t->data);
    pp_free(t->inputs);
    pp_free(t->targets);
    pp_free(t->mbs);
    pp_free(t->rc);
    pp_free(t);
}

/* What the backend needs: a model, its layer count and data (cpu, cuda) or a cost file of the
 * partition's layers (sim). */
static pp_status check_model(const pp_pipe_config *c, const pp_data *data)
{
    pp_status st;
    if (c->partition.v != c->v)
        return PP_ERR(PP_ERR_INVALID, "partition has %d chunks per stage, schedule wants %d",
                      c->partition.v, c->v);
    if (!computes(c->backend)) {
        if (!c->costs)
            return PP_ERR(PP_ERR_INVALID, "the sim backend needs a cost file (--costs FILE)");
        if (c->partition.L != c->costs->n_layers)
            return PP_ERR(PP_ERR_INVALID,
                          "the partition covers %d layers but the cost file has %d",
                          c->partition.L, c->costs->n_layers);
        if (c->train.microbatches < 1)
            return PP_ERR(PP_ERR_INVALID, "microbatches %d must be >= 1", c->train.microbatches);
        return PP_OK;
    }
    if ((st = pp_train_config_validate(&c->train)) != PP_OK)
        return st;
    int L = pp_model_config_num_layers(&c->train.model);
    if (c->partition.L != L)
        return PP_ERR(PP_ERR_INVALID,
                      "the partition covers %d layers but the model has %d (embedding, %d "
                      "blocks, head)",
                      c->partition.L, L, c->train.model.n_layers);
    if (!data)
        return PP_ERR(PP_ERR_INVALID, "the cpu backend needs training data");
    return PP_OK;
}

/* What the transport of the table needs of the job: one process per stage for replicas, the
 * backend whose memory it moves, the batch split over replicas. */
static pp_status check_transport(const pp_pipe_config *c, const pp_transport_entry *e, int dp)
{
    int M = c->train.microbatches;
    if (dp > 1 && !e->one_stage_per_process)
        return PP_ERR(PP_ERR_INVALID, "--dp %d: data-parallel replicas need --transport mpi or "
                                      "nccl (one process per stage and replica)", dp);
    if (dp > 1 && computes(c->backend) &&
        (c->train.batch % dp != 0 || (c->train.batch / dp) % M != 0))
        return PP_ERR(PP_ERR_INVALID,
                      "--batch %d must split into %d replicas of %d micro-batches each (a "
                      "multiple of %d)",
                      c->train.batch, dp, M, dp * M);
    return PP_OK;
}

/* The checks that need the schedule: in-order transports want FIFO links; device gradients of
 * replicas are summed only by a transport that moves device memory. */
static pp_status check_transport_fits(const pp_pipe_trainer *t, const pp_transport_entry *e)
{
    const pp_pipe_config *c = &t->cfg;
    if (e->device_only && c->backend != PP_BACKEND_CUDA)
        return PP_ERR(PP_ERR_INVALID, "--transport %s moves GPU memory: it needs --backend cuda",
                      e->name);
    char why[256] = "";
    if (e->in_order && !pp_schedule_links_fifo(t->sched, why, sizeof why))
        return PP_ERR(PP_ERR_INVALID,
                      "--transport %s: the %s schedule receives out of send order (%s); %s "
                      "matches messages in order: use --transport mpi or another schedule",
                      e->name, pp_schedule_kind_name(c->schedule), why, e->name);
    if (c->backend == PP_BACKEND_CUDA && t->dp > 1 && !e->device_only)
        return PP_ERR(PP_ERR_INVALID, "--dp with --backend cuda: the gradients live on the GPUs, "
                                      "their all-reduce needs --transport nccl");
    return PP_OK;
}

static pp_status make_schedule(pp_pipe_trainer *t)
{
    const pp_pipe_config *c = &t->cfg;
    pp_status st = pp_schedule_create(c->schedule, t->part.S, c->train.microbatches, c->v,
                                      &t->sched);
    if (st != PP_OK)
        return st;
    if ((st = pp_schedule_validate(t->sched, &t->rep)) != PP_OK)
        return pp_error_wrap(st, "internal error: the %s schedule failed validation",
                             pp_schedule_kind_name(c->schedule));
    t->have_rep = 1;
    return PP_OK;
}

/* The transport of the table, sized by the validator's bounds: a mailbox must hold every
 * message its link can have queued at once, so a send never blocks and the schedule's deadlock
 * freedom carries over to the bounded transport. It says which stages this process runs. */
static pp_status make_transport(pp_pipe_trainer *t)
{
    const pp_pipe_config *c = &t->cfg;
    int S = t->part.S, capacity = 1;
    for (int s = 0; s < S; s++) {
        int need = t->rep.peak_queued_act[s] + t->rep.peak_queued_grad[s];
        capacity = need > capacity ? need : capacity;
    }
    size_t max_bytes =
        computes(c->backend)
            ? (size_t)t->mb_B * c->train.model.seq_len * c->train.model.d_model * sizeof(float)
            : 0;
    pp_transport_params p = {.S = S, .dp = t->dp, .P = t->part.P, .M = c->train.microbatches,
                             .capacity = capacity, .max_bytes = max_bytes,
                             .device_memory = c->backend == PP_BACKEND_CUDA};
    pp_status st = pp_transport_create(c->transport, &p, &t->tp);
    if (st != PP_OK)
        return st;
    t->first_local = t->tp->first_local;
    t->n_local = t->tp->n_local;
    t->replica = t->tp->replica;
    return PP_OK;
}

/* Stage s's backend of the configured kind. */
static pp_status backend_create(const pp_pipe_trainer *t, int s, pp_stage_backend **out)
{
    const pp_pipe_config *c = &t->cfg;
    int M = c->train.microbatches;
    /* One activation slot per micro-batch-chunk the schedule can hold, plus one for a
     * receive that lands before its forward runs. */
    int slots = t->rep.peak_inflight[s] + 1;
    if (slots > M)
        slots = M;
    int split = pp_schedule_splits_backward(c->schedule);
    pp_recompute rc = {.layers = t->rc, .n_sets = pp_recompute_sets(t->sched, s)};
    switch (c->backend) {
    case PP_BACKEND_CPU:
        return pp_backend_cpu_create_rc(&c->train.model, &t->part, s, &c->train.opt,
                                        c->train.seed, t->mb_B, slots, &rc, out);
    case PP_BACKEND_CUDA:
        return pp_backend_cuda_create(&c->train.model, &t->part, s, &c->train.opt,
                                      c->train.seed, t->mb_B, slots, c->cuda_device,
                                      c->cuda_precision, M, &rc, out);
    default:
        return pp_backend_sim_create_rc(c->costs, &t->part, s,
                                        s == c->slow_stage ? c->slow_factor : 1.0, split, slots,
                                        c->sim_jitter, t->replica, &rc, out);
    }
}

/* The local stages' backends, then the transport attached to where they keep their tensors.
 * On failure every backend made is destroyed. */
static pp_status make_backends(pp_pipe_trainer *t, pp_stage_backend **backends)
{
    pp_status st = PP_OK;
    int n = t->n_local;
    for (int i = 0; i < n && st == PP_OK; i++)
        st = backend_create(t, t->first_local + i, &backends[i]);
    if (st == PP_OK && t->tp->ops->attach) {
        pp_kops **mem = pp_alloc(sizeof(pp_kops *) * (size_t)n);
        if (!mem)
            st = PP_ERR(PP_ERR_NOMEM, "out of memory for the stages' kernel tables");
        for (int i = 0; mem && i < n; i++)
            mem[i] = backends[i]->mem;
        if (mem)
            st = t->tp->ops->attach(t->tp, t->sched, mem, n);
        pp_free(mem);
    }
    if (st != PP_OK)
        for (int i = 0; i < n; i++)
            if (backends[i])
                backends[i]->ops->destroy(backends[i]);
    return st;
}

/* The names of the layers as the model or cost file gives them; blk holds the block names. */
static void layer_names(const pp_pipe_config *c, int L, const char **names, char (*blk)[24])
{
    for (int i = 0; i < L; i++) {
        if (c->backend == PP_BACKEND_SIM)
            names[i] = c->costs->layers[i].name;
        else if (i == 0)
            names[i] = "embedding";
        else if (i == L - 1)
            names[i] = "head";
        else {
            snprintf(blk[i], 24, "block%d", i - 1);
            names[i] = blk[i];
        }
    }
}

/* What the analyzer cannot see in the ranges: schedule and batch size. */
static void mark_config(const pp_pipe_trainer *t)
{
    const pp_pipe_config *c = &t->cfg;
    char cfg[640]; /* with a --recompute text of up to 255 characters */
    /* the sim backend's batch is nominal (--batch), but the tuner's micro-batch advice
     * needs it all the same */
    double samples = c->train.batch;
    double tokens = samples * (computes(c->backend) ? c->train.model.seq_len : 0);
    /* every schedule pptrain runs, for the tuner (docs/nvtx-convention.md); the sim
     * backend halves bwd_us where a cost file gives no split (pp_costs_layer_us) */
    char kinds[64];
    pp_schedule_kind_list(kinds, sizeof kinds);
    pp_nvtx_config_info ci = {.schedule = pp_schedule_kind_name(c->schedule),
                              .S = t->part.S,
                              .M = c->train.microbatches,
                              .v = c->v,
                              .layers = t->part.L,
                              .samples_per_step = samples,
                              .tokens_per_step = tokens,
                              .backend = pp_backend_kind_name(c->backend),
                              .dp = t->dp,
                              .replica = t->replica,
                              .schedules = kinds,
                              .recompute = c->recompute ? c->recompute : "none"};
    pp_nvtx_config_mark_format(cfg, sizeof cfg, &ci);
    pp_nvtx_mark_config(cfg);
}

/* And what each layer weighs, for the tuner's memory model and cost file. */
static void mark_layers(const pp_pipe_trainer *t, const char **names)
{
    const pp_pipe_config *c = &t->cfg;
    int L = t->part.L;
    char cfg[320];
    size_t io = computes(c->backend) ? (size_t)t->mb_B * c->train.model.seq_len *
                                           c->train.model.d_model * sizeof(float)
                                     : 0;
    /* a recomputed layer keeps its input, rounded as the backend's kept buffer is */
    size_t io_kept = (io / sizeof(float) + 15) / 16 * 16 * sizeof(float);
    for (int i = 0; i < L; i++) {
        unsigned long long params = 0, acts = 0, kept = 0, input = 0;
        int with_memory = 1;
        if (c->backend == PP_BACKEND_SIM) {
            const pp_layer_cost *lc = &c->costs->layers[i];
            params = lc->param_bytes;
            acts = lc->activation_bytes;
            with_memory = lc->has_kept;
            kept = lc->kept_bytes;
            input = lc->input_bytes;
        } else {
            params = pp_model_config_layer_params(&c->train.model, i) * sizeof(float);
            acts = i == L - 1 ? 0 : io;
            /* the host table's layout (a device's attention scratch may differ a little) */
            kept = pp_layer_acts_size(&c->train.model, i, t->mb_B, &pp_kops_cpu);
            input = i == 0 ? 0 : io_kept;
        }
        pp_nvtx_layer_mark_format(cfg, sizeof cfg, i, names[i], params, acts, with_memory, kept,
                                  input);
        pp_nvtx_mark_config(cfg);
    }
}

/* The NVTX set-up and configuration marks; the messages name the layers as the model or cost
 * file does. Nothing is marked when memory for the names is short (profiling never fails a
 * run). */
static void announce(const pp_pipe_trainer *t)
{
    int L = t->part.L;
    const char **names = pp_alloc(sizeof(char *) * (size_t)L);
    char(*blk)[24] = pp_alloc(24 * (size_t)L);
    if (names && blk) {
        layer_names(&t->cfg, L, names, blk);
        pp_nvtx_setup(t->part.S, t->cfg.train.microbatches, t->cfg.v, L, names);
        mark_config(t);
        mark_layers(t, names);
    }
    pp_free(names);
    pp_free(blk);
}

/* The batch buffers and this replica's micro-batches: samples [replica, replica + 1) x B / dp
 * of the global batch. */
static pp_status make_batch(pp_pipe_trainer *t)
{
    const pp_pipe_config *c = &t->cfg;
    int M = c->train.microbatches;
    size_t T = (size_t)c->train.model.seq_len;
    size_t ntok = (size_t)c->train.batch * T;
    t->inputs = pp_alloc(ntok * sizeof(int32_t));
    t->targets = pp_alloc(ntok * sizeof(int32_t));
    t->mbs = pp_alloc(sizeof(pp_microbatch) * (size_t)M);
    if (!t->inputs || !t->targets || !t->mbs)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the batch");
    for (int m = 0; m < M; m++) {
        size_t off = ((size_t)t->replica * M + (size_t)m) * t->mb_B * T;
        t->mbs[m] = (pp_microbatch){.B = t->mb_B, .tokens = t->inputs + off,
                                    .targets = t->targets + off};
    }
    return PP_OK;
}

/* Validate, schedule, transport, backends (attached to the transport), executor, batch. */
static pp_status trainer_build(pp_pipe_trainer *t)
{
    const pp_pipe_config *c = &t->cfg;
    const pp_transport_entry *e = pp_transport_entry_of(c->transport);
    pp_status st;
    if (!e)
        return PP_ERR(PP_ERR_INVALID, "transport kind %d is not in the table", (int)c->transport);
    t->dp = c->dp > 1 ? c->dp : 1;
    if ((st = check_model(c, t->data)) != PP_OK || (st = check_transport(c, e, t->dp)) != PP_OK)
        return st;
    if (computes(c->backend))
        t->mb_B = c->train.batch / t->dp / c->train.microbatches;
    if ((t->rc = pp_alloc((size_t)t->part.L)) == NULL)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the recompute choice");
    if ((st = pp_recompute_parse(c->recompute, &t->part, t->rc)) != PP_OK)
        return st;
    if ((st = make_schedule(t)) != PP_OK || (st = check_transport_fits(t, e)) != PP_OK ||
        (st = make_transport(t)) != PP_OK)
        return st;
    pp_stage_backend **backends = pp_alloc(sizeof(*backends) * (size_t)t->n_local);
    if (!backends)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the stage backends");
    if ((st = make_backends(t, backends)) == PP_OK) {
        announce(t);
        /* owns the backends now */
        st = pp_exec_create(t->sched, t->tp, t->first_local, t->n_local, backends, &t->exec);
    }
    pp_free(backends);
    if (st == PP_OK && computes(c->backend))
        st = make_batch(t);
    return st;
}

pp_status pp_pipe_trainer_create(const pp_pipe_config *c, pp_data *data, pp_pipe_trainer **out)
{
    pp_pipe_trainer *t = pp_alloc(sizeof *t);
    if (!t) {
        pp_data_destroy(data);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the pipeline trainer");
    }
    t->cfg = *c;
    t->data = data;
    pp_status st = copy_partition(&c->partition, &t->part);
    if (st == PP_OK) {
        t->cfg.partition = t->part;
        st = trainer_build(t);
    }
    if (st != PP_OK) {
        pp_pipe_trainer_destroy(t);
        return st;
    }
    *out = t;
    return PP_OK;
}

pp_status pp_pipe_trainer_step(pp_pipe_trainer *t, pp_step_stats *st, pp_exec_result *res)
{
    const pp_pipe_config *c = &t->cfg;
    int64_t step = t->steps_done + 1;
    pp_step_data d = {.M = c->train.microbatches, .mbs = NULL, .loss_scale = 0.0f};
    float lr = 0.0f;
    int T = c->train.model.seq_len;
    if (computes(c->backend)) {
        /* Same batch, same split and same loss scaling as the single-stage trainer. */
        pp_data_next_batch(t->data, c->train.batch, T, t->inputs, t->targets);
        d.mbs = t->mbs;
        d.loss_scale = 1.0f / ((float)c->train.batch * (float)T);
        lr = pp_adamw_lr_at(&c->train.opt, step, c->train.steps);
    }
    pp_exec_result r;
    pp_status s = pp_exec_step(t->exec, step, &d, lr, c->train.opt.grad_clip, &r);
    if (s != PP_OK)
        return s;
    if (computes(c->backend) && (!isfinite(r.loss) || !isfinite(r.grad_norm)))
        return PP_ERR(PP_ERR_RUNTIME,
                      "training diverged at step %lld (loss %g, gradient norm %g); try a lower "
                      "--lr",
                      (long long)step, r.loss, r.grad_norm);
    t->steps_done = step;
    if (st) {
        st->step = step;
        st->loss = (float)r.loss;
        st->lr = lr;
        st->grad_norm = r.grad_norm;
        st->step_ms = r.step_ms;
        st->tokens_per_s = computes(c->backend) && r.step_ms > 0
                               ? (double)c->train.batch * T / (r.step_ms * 1e-3)
                               : 0.0;
    }
    if (res)
        *res = r;
    return PP_OK;
}

int64_t pp_pipe_trainer_steps_done(const pp_pipe_trainer *t) { return t->steps_done; }
pp_status pp_pipe_trainer_memory(pp_pipe_trainer *t, int s, pp_stage_mem *out)
{
    return pp_exec_memory(t->exec, s, out);
}
const uint8_t *pp_pipe_trainer_recompute(const pp_pipe_trainer *t) { return t->rc; }
int pp_pipe_trainer_local_stage(const pp_pipe_trainer *t)
{
    return t->n_local == t->part.S ? -1 : t->first_local;
}
const pp_schedule *pp_pipe_trainer_schedule(const pp_pipe_trainer *t) { return t->sched; }
const pp_schedule_report *pp_pipe_trainer_report(const pp_pipe_trainer *t) { return &t->rep; }

/* Visits the model pieces in layer order: piece p is chunk p / S of stage p % S. */
typedef void (*piece_fn)(pp_model *m, pp_optimizer *o, size_t off, void *ctx);


/* Calls fn for every piece this process holds, with its offset in the whole model's parameter
 * array (pieces of other processes only advance the offset). */
static pp_status for_each_piece(pp_pipe_trainer *t, piece_fn fn, void *ctx)
{
    if (t->cfg.backend != PP_BACKEND_CPU)
        return PP_ERR(PP_ERR_INVALID, "only the cpu backend's parameters can be saved or loaded "
                                      "(sim has none; cuda's stay on the GPU)");
    size_t off = 0;
    for (int p = 0; p < t->part.P; p++) {
        pp_stage_backend *b = pp_exec_backend(t->exec, p % t->part.S);
        if (!b) { /* another process's piece: only its size matters here */
            for (int i = t->part.bounds[p]; i < t->part.bounds[p + 1]; i++)
                off += pp_model_config_layer_params(&t->cfg.train.model, i);
            continue;
        }
        pp_model *m = pp_backend_cpu_model(b, p / t->part.S);
        fn(m, pp_backend_cpu_optimizer(b, p / t->part.S), off, ctx);
        off += m->n_params;
    }
    return PP_OK;
}

typedef struct gather_ctx {
    float *params, *m, *v;
} gather_ctx;

static void gather_piece(pp_model *m, pp_optimizer *o, size_t off, void *ctx)
{
    gather_ctx *g = ctx;
    memcpy(g->params + off, m->params, m->n_params * sizeof(float));
    if (g->m)
        memcpy(g->m + off, o->m, m->n_params * sizeof(float));
    if (g->v)
        memcpy(g->v + off, o->v, m->n_params * sizeof(float));
}

pp_status pp_pipe_trainer_gather_params(pp_pipe_trainer *t, float *params, size_t n)
{
    if (t->cfg.backend == PP_BACKEND_CPU && n != pp_model_config_num_params(&t->cfg.train.model))
        return PP_ERR(PP_ERR_INVALID, "gather: buffer of %zu floats for %zu parameters", n,
                      pp_model_config_num_params(&t->cfg.train.model));
    gather_ctx g = {params, NULL, NULL};
    return for_each_piece(t, gather_piece, &g);
}

pp_status pp_pipe_trainer_save(pp_pipe_trainer *t, const char *path)
{
    if (t->cfg.backend != PP_BACKEND_CPU)
        return PP_ERR(PP_ERR_INVALID, "--save needs the cpu backend (the sim backend trains "
                                      "nothing; the cuda backend's parameters stay on the GPU)");
    size_t n = pp_model_config_num_params(&t->cfg.train.model);
    gather_ctx g = {pp_alloc(n * sizeof(float)), pp_alloc(n * sizeof(float)),
                    pp_alloc(n * sizeof(float))};
    pp_status st = PP_OK;
    if (!g.params || !g.m || !g.v) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory gathering %zu parameters to save", n);
        goto done;
    }
    if ((st = for_each_piece(t, gather_piece, &g)) != PP_OK)
        goto done;
    if (t->tp->ops->gather_bits) {
        /* One stage per process: replica 0's stage 0 collects every piece (the replicas hold
         * the same parameters) and writes the file; each array holds only this process's
         * pieces, the rest zero bits, so OR-ing the bit patterns assembles them exactly. */
        if (t->replica != 0)
            goto done;
        float *arrays[3] = {g.params, g.m, g.v};
        for (int k = 0; k < 3 && st == PP_OK; k++)
            st = t->tp->ops->gather_bits(t->tp, arrays[k], n);
        if (st != PP_OK || t->first_local != 0)
            goto done;
    }
    pp_ckpt_image img;
    memset(&img, 0, sizeof img);
    img.cfg = t->cfg.train.model;
    img.steps_done = t->steps_done;
    img.n_params = n;
    img.params = g.params;
    img.m = g.m;
    img.v = g.v;
    img.data_fingerprint = pp_data_fingerprint(t->data);
    pp_data_get_state(t->data, &img.data_state);
    st = pp_checkpoint_write_image(path, &img);
done:
    pp_free(g.params);
    pp_free(g.m);
    pp_free(g.v);
    return st;
}

typedef struct scatter_ctx {
    const pp_ckpt_image *img;
} scatter_ctx;

static void scatter_piece(pp_model *m, pp_optimizer *o, size_t off, void *ctx)
{
    const pp_ckpt_image *img = ((scatter_ctx *)ctx)->img;
    memcpy(m->params, img->params + off, m->n_params * sizeof(float));
    memcpy(o->m, img->m + off, m->n_params * sizeof(float));
    memcpy(o->v, img->v + off, m->n_params * sizeof(float));
    o->t = img->steps_done;
}

pp_status pp_pipe_trainer_load(pp_pipe_trainer *t, const char *path)
{
    if (t->cfg.backend != PP_BACKEND_CPU)
        return PP_ERR(PP_ERR_INVALID, "--resume needs the cpu backend");
    size_t n = pp_model_config_num_params(&t->cfg.train.model);
    pp_ckpt_image img;
    void *owner = NULL;
    pp_status st =
        pp_checkpoint_read_image(path, &t->cfg.train.model, n, t->data, &img, &owner);
    if (st != PP_OK)
        return st;
    st = pp_checkpoint_apply_data_state(path, t->data, &img.data_state);
    if (st == PP_OK) {
        scatter_ctx sc = {&img};
        st = for_each_piece(t, scatter_piece, &sc);
        t->steps_done = img.steps_done;
    }
    free(owner);
    return st;
}
