/* executor.c: runs a pipeline schedule. One worker thread per local stage interprets that
 * stage's instruction list (plan/schedule.c) in order: receives block on the transport,
 * sends are queued, compute goes to the stage backend, and the step ends with a global
 * all-reduce (gradient norm, loss, clock) and the optimizer step. The executor knows nothing of
 * tensors' meaning, threads of other processes, or devices: backends and transports do. */
#include "pp_executor.h"
#include "pp_nvtx.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct slot_state {
    int mb;          /* -1 when free */
    const void *out; /* forward output (to send) */
    const void *din; /* input gradient (to send) */
    int bwd_done, grad_sent;
} slot_state;

typedef struct worker {
    struct pp_exec *e;
    int stage;
    pthread_t thread;
    int started;
    pp_stage_backend *b;
    int v, n_slots;
    int *slot_of;        /* [v * M]: slot of (chunk, mb) this step, -1 if none */
    slot_state *slots;   /* [v * n_slots] */
    char *recv_act;      /* [v * n_slots * act_in_bytes(chunk)] receive buffers */
    char *recv_grad;     /* [v * n_slots * grad_in_bytes(chunk)] */
    size_t *in_bytes;    /* [v]: activation bytes entering the chunk (= grad bytes it sends) */
    size_t *out_bytes;   /* [v]: activation bytes leaving the chunk (= grad bytes it receives) */
    size_t *act_off, *grad_off; /* [v]: offsets of each chunk's receive buffers */
    uint64_t clock_ns;
    pp_status status;
    char message[1024];
} worker;

struct pp_exec {
    const pp_schedule *sched;
    pp_transport *tp;
    int first_local, n_local;
    worker *workers;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    int n_done;
    int quit;
    int first_failed; /* stage whose failure came first (the cause; later ones are aborts) */
    /* the step being run */
    int64_t step;
    const pp_step_data *data;
    float lr, grad_clip;
    uint64_t t0_ns;
    double loss_sum, grad_sumsq;
};

static void sleep_until(uint64_t t_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(t_ns / 1000000000ull),
                          .tv_nsec = (long)(t_ns % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static pp_status fail(worker *w, pp_status st)
{
    if (w->status == PP_OK) {
        w->status = st;
        snprintf(w->message, sizeof w->message, "stage %d: %s", w->stage, pp_error_message());
    }
    return st;
}

static int slot_acquire(worker *w, int chunk, int mb)
{
    int M = w->e->sched->M;
    int *so = &w->slot_of[chunk * M + mb];
    if (*so >= 0)
        return *so;
    for (int i = 0; i < w->n_slots; i++) {
        slot_state *s = &w->slots[chunk * w->n_slots + i];
        if (s->mb < 0) {
            memset(s, 0, sizeof *s);
            s->mb = mb;
            *so = i;
            return i;
        }
    }
    return -1;
}

static void slot_maybe_release(worker *w, int chunk, int piece, int slot)
{
    slot_state *s = &w->slots[chunk * w->n_slots + slot];
    if (s->bwd_done && (s->grad_sent || piece == 0)) {
        w->slot_of[chunk * w->e->sched->M + s->mb] = -1;
        s->mb = -1;
    }
}

static void *recv_act_buf(worker *w, int chunk, int slot)
{
    if (!w->b->carries_data || !w->recv_act)
        return NULL;
    return w->recv_act + w->act_off[chunk] + (size_t)slot * w->in_bytes[chunk];
}

static void *recv_grad_buf(worker *w, int chunk, int slot)
{
    if (!w->b->carries_data || !w->recv_grad)
        return NULL;
    return w->recv_grad + w->grad_off[chunk] + (size_t)slot * w->out_bytes[chunk];
}

/* Advances the stage clock after a blocking wait: compute backends live in real time, the sim
 * backend in deadline time (the data is there once it is available under the cost model). */
static void clock_after_wait(worker *w, uint64_t avail_ns)
{
    if (w->b->carries_data) {
        w->clock_ns = pp_now_ns();
    } else if (avail_ns > w->clock_ns) {
        /* Only a real wait is slept here (so a receive range covers exactly the waiting for
         * data); data that was already there costs nothing, and the next op sleeps to its
         * own deadline. */
        w->clock_ns = avail_ns;
        sleep_until(w->clock_ns);
    }
}

/* The data-parallel gradient all-reduce of a stage, one NVTX range: every chunk's gradients
 * summed over the replicas. The sim backend holds no gradients: its replicas meet
 * (the latest clock) and then take its dp_allreduce_ns of the stage's parameter bytes (a ring's
 * 2 (dp - 1) transfers of 1/dp of them, or the cost file's terms). */
static pp_status dp_allreduce(worker *w)
{
    pp_transport *tp = w->e->tp;
    pp_stage_backend *b = w->b;
    int dp = tp->dp;
    pp_nvtx_info info = pp_nvtx_info_none();
    info.step = w->e->step;
    info.stage = w->stage;
    uint64_t total = 0;
    for (int c = 0; c < w->v; c++) {
        float *g;
        size_t n;
        uint64_t bytes;
        b->ops->grads(b, c, &g, &n, &bytes);
        total += bytes;
    }
    info.bytes = total;
    pp_nvtx_push(PP_NVTX_ALLREDUCE, &info);
    pp_status st = PP_OK;
    uint64_t t = w->clock_ns;
    for (int c = 0; c < w->v && st == PP_OK; c++) {
        float *g;
        size_t n;
        uint64_t bytes;
        b->ops->grads(b, c, &g, &n, &bytes);
        st = tp->ops->dp_allreduce(tp, w->stage, g, n, NULL, 0, c == 0 ? &t : NULL);
    }
    if (st == PP_OK) {
        uint64_t cost = b->carries_data || !b->ops->dp_allreduce_ns
                            ? 0
                            : b->ops->dp_allreduce_ns(b, total, dp);
        clock_after_wait(w, t + cost);
    }
    pp_nvtx_pop();
    return st;
}

/* A receive into buf (the slot's receive buffer), one NVTX range of kind nk; the clock moves
 * on by the backend's receive time (sim: the cost file's), then to when the data is there. */
static pp_status do_recv(worker *w, const pp_instr *in, pp_msg_tag tag, void *buf, size_t bytes,
                         pp_nvtx_kind nk, pp_nvtx_info *info)
{
    uint64_t avail = 0;
    info->bytes = bytes;
    pp_nvtx_push(nk, info);
    pp_stage_backend *b = w->b;
    if (!b->carries_data && b->ops->recv_time) /* the receiver's own time, from its start */
        b->ops->recv_time(b, in->op == PP_OP_RECV_GRAD, &w->clock_ns);
    pp_status st = pp_transport_recv(w->e->tp, w->stage, in->peer, tag, buf, bytes, &avail);
    if (st == PP_OK)
        clock_after_wait(w, avail);
    pp_nvtx_pop();
    return st;
}

/* A send of data (the slot's output or input gradient; none for the sim backend), available
 * at the receiver after the backend's transfer time. */
static pp_status do_send(worker *w, const pp_instr *in, pp_msg_tag tag, const void *data,
                         size_t bytes, pp_nvtx_kind nk, pp_nvtx_info *info)
{
    pp_stage_backend *b = w->b;
    info->bytes = bytes;
    pp_nvtx_push(nk, info);
    pp_status st = pp_transport_send(w->e->tp, w->stage, in->peer, tag,
                                     b->carries_data ? data : NULL, bytes,
                                     w->clock_ns + b->ops->transfer_ns(b, bytes));
    if (b->carries_data)
        w->clock_ns = pp_now_ns();
    else if (b->ops->send_time) /* the sender's own time in the send, from its start */
        b->ops->send_time(b, in->op == PP_OP_SEND_GRAD, &w->clock_ns);
    pp_nvtx_pop();
    return st;
}

/* BWD (both halves) or BWD_INPUT; a full backward frees the slot once its gradient is sent. */
/* After a compute op, outside its range: the backend's time between ops (sim: the cost file's
 * op_gap_us), slept to its deadline. */
static void op_gap(worker *w)
{
    if (!w->b->ops->op_gap)
        return;
    uint64_t t = w->clock_ns;
    w->b->ops->op_gap(w->b, &w->clock_ns);
    if (w->clock_ns != t)
        sleep_until(w->clock_ns);
}

static pp_status do_backward(worker *w, const pp_instr *in, int piece, int slot,
                             pp_nvtx_info *info)
{
    pp_stage_backend *b = w->b;
    int chunk = in->chunk, P = w->e->sched->S * w->e->sched->v;
    slot_state *ss = &w->slots[chunk * w->n_slots + slot];
    int full = in->op == PP_OP_BWD;
    pp_nvtx_push(full ? PP_NVTX_BWD : PP_NVTX_BWD_INPUT, info);
    const void *dout = piece == P - 1 ? NULL : recv_grad_buf(w, chunk, slot);
    pp_status st = b->ops->backward_input(b, chunk, in->mb, slot, dout, &ss->din, &w->clock_ns);
    if (st == PP_OK && full)
        st = b->ops->backward_weight(b, chunk, in->mb, slot, &w->clock_ns);
    pp_nvtx_pop();
    op_gap(w);
    if (full) {
        ss->bwd_done = 1;
        slot_maybe_release(w, chunk, piece, slot);
    }
    return st;
}

/* Global gradient norm and loss across all stages, and the latest stage clock: the optimizer
 * step waits for the norm, as clipping needs it. */
static pp_status do_opt_step(worker *w, pp_nvtx_info *info)
{
    pp_exec *e = w->e;
    pp_stage_backend *b = w->b;
    pp_transport *tp = e->tp;
    int s = w->stage;
    pp_status st;
    /* Data parallelism: the replicas of this stage sum their gradients first, so the norm
     * below is the global batch's. */
    int dp = tp->dp > 1 && tp->ops->dp_allreduce;
    if (dp && (st = dp_allreduce(w)) != PP_OK)
        return st;
    double vals[2];
    if ((st = b->ops->grad_stats(b, &vals[0], &vals[1])) != PP_OK)
        return st;
    uint64_t t = w->clock_ns;
    st = tp->ops->allreduce(tp, s, vals, 2, &t);
    /* ... and the replicas' losses, each its own batch share's mean */
    if (st == PP_OK && dp &&
        (st = tp->ops->dp_allreduce(tp, s, NULL, 0, &vals[1], 1, NULL)) == PP_OK)
        vals[1] /= tp->dp;
    if (st != PP_OK)
        return st;
    clock_after_wait(w, t);
    double norm = sqrt(vals[0]);
    if (s == e->first_local) {
        e->grad_sumsq = vals[0];
        e->loss_sum = vals[1];
    }
    info->mb = info->chunk = info->peer = -1;
    pp_nvtx_push(PP_NVTX_OPT_STEP, info);
    st = b->ops->optimizer_step(b, e->lr, pp_grad_clip_scale(e->grad_clip, norm), &w->clock_ns);
    pp_nvtx_pop();
    return st;
}

/* One instruction of the stage's list; slot is its activation slot (-1 for the optimizer
 * step). */
static pp_status run_instr(worker *w, const pp_instr *in, int slot, pp_nvtx_info *info)
{
    pp_stage_backend *b = w->b;
    int s = w->stage, chunk = in->chunk, mb = in->mb;
    int piece = chunk >= 0 ? pp_schedule_piece(w->e->sched, s, chunk) : -1;
    slot_state *ss = slot >= 0 ? &w->slots[chunk * w->n_slots + slot] : NULL;
    pp_status st;
    pp_msg_tag tag;
    switch ((pp_op)in->op) {
    case PP_OP_RECV_ACT:
        tag = pp_schedule_msg_tag(w->e->sched, s, in);
        return do_recv(w, in, tag, recv_act_buf(w, chunk, slot), w->in_bytes[chunk],
                       PP_NVTX_RECV_ACT, info);
    case PP_OP_FWD: {
        pp_nvtx_push(PP_NVTX_FWD, info);
        const void *src = piece == 0 ? NULL : recv_act_buf(w, chunk, slot);
        st = b->ops->forward(b, chunk, mb, slot, src, &ss->out, &w->clock_ns);
        pp_nvtx_pop();
        op_gap(w);
        return st;
    }
    case PP_OP_SEND_ACT:
        tag = pp_schedule_msg_tag(w->e->sched, s, in);
        return do_send(w, in, tag, ss->out, w->out_bytes[chunk], PP_NVTX_SEND_ACT, info);
    case PP_OP_RECV_GRAD:
        tag = pp_schedule_msg_tag(w->e->sched, s, in);
        return do_recv(w, in, tag, recv_grad_buf(w, chunk, slot), w->out_bytes[chunk],
                       PP_NVTX_RECV_GRAD, info);
    case PP_OP_BWD:
    case PP_OP_BWD_INPUT: return do_backward(w, in, piece, slot, info);
    case PP_OP_BWD_WEIGHT:
        pp_nvtx_push(PP_NVTX_BWD_WEIGHT, info);
        st = b->ops->backward_weight(b, chunk, mb, slot, &w->clock_ns);
        pp_nvtx_pop();
        op_gap(w);
        ss->bwd_done = 1;
        slot_maybe_release(w, chunk, piece, slot);
        return st;
    case PP_OP_SEND_GRAD:
        tag = pp_schedule_msg_tag(w->e->sched, s, in);
        st = do_send(w, in, tag, ss->din, w->in_bytes[chunk], PP_NVTX_SEND_GRAD, info);
        ss->grad_sent = 1;
        slot_maybe_release(w, chunk, piece, slot);
        return st;
    case PP_OP_OPT_STEP: return do_opt_step(w, info);
    default: return PP_ERR(PP_ERR_RUNTIME, "stage %d: unknown instruction %d", s, in->op);
    }
}

/* The stage's list for one step, inside its step range. */
static pp_status run_list(worker *w)
{
    pp_exec *e = w->e;
    const pp_schedule *sc = e->sched;
    pp_stage_backend *b = w->b;
    int s = w->stage;
    pp_status st;
    for (int i = 0; i < sc->v * sc->M; i++)
        w->slot_of[i] = -1;
    for (int i = 0; i < sc->v * w->n_slots; i++)
        w->slots[i].mb = -1;
    if ((st = b->ops->begin_step(b, e->step, e->data)) != PP_OK)
        return st;
    pp_nvtx_info info = pp_nvtx_info_none();
    info.step = e->step;
    info.stage = s;
    pp_nvtx_push(PP_NVTX_STEP, &info);
    const pp_instr *list = sc->instrs[s];
    for (int k = 0; k < sc->n_instrs[s]; k++) {
        const pp_instr *in = &list[k];
        int slot = -1;
        if (in->chunk >= 0 && (slot = slot_acquire(w, in->chunk, in->mb)) < 0)
            /* the step range stays open, as it always did on this error */
            return PP_ERR(PP_ERR_RUNTIME,
                          "activation slots exhausted on stage %d (chunk %d, %d slots) at "
                          "instruction %d",
                          s, in->chunk, w->n_slots, k);
        info.mb = in->mb;
        info.chunk = in->chunk;
        info.peer = in->peer;
        info.layer = -1;
        info.bytes = 0;
        if ((st = run_instr(w, in, slot, &info)) != PP_OK) {
            pp_nvtx_pop(); /* the step range */
            return st;
        }
    }
    pp_nvtx_pop();
    return PP_OK;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    pp_exec *e = w->e;
    char name[32];
    snprintf(name, sizeof name, "stage %d", w->stage);
    pp_nvtx_name_thread(name);
    /* the stage's memory counters, registered and first sampled on its own thread */
    pp_stage_mem_announce(&w->b->memory);
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&e->mu);
        while (e->gen == seen && !e->quit)
            pthread_cond_wait(&e->go, &e->mu);
        if (e->quit) {
            pthread_mutex_unlock(&e->mu);
            return NULL;
        }
        seen = e->gen;
        pthread_mutex_unlock(&e->mu);

        w->status = PP_OK;
        w->message[0] = '\0';
        w->clock_ns = e->t0_ns;
        sleep_until(e->t0_ns);
        pp_status st = run_list(w);
        if (st != PP_OK) {
            fail(w, st);
            /* The first failure is the cause: the others fail because of the abort below,
             * which comes after this record. */
            pthread_mutex_lock(&e->mu);
            if (e->first_failed < 0)
                e->first_failed = w->stage;
            pthread_mutex_unlock(&e->mu);
            /* Nobody may stay blocked on a stage that will not send. */
            e->tp->ops->abort(e->tp);
        }

        pthread_mutex_lock(&e->mu);
        e->n_done++;
        pthread_cond_signal(&e->done);
        pthread_mutex_unlock(&e->mu);
    }
}

pp_status pp_exec_memory(pp_exec *e, int stage, pp_stage_mem *out)
{
    pp_stage_backend *b = pp_exec_backend(e, stage);
    if (!b)
        return PP_ERR(PP_ERR_INVALID, "stage %d is not run by this process", stage);
    pthread_mutex_lock(&e->mu); /* the workers are between steps: their last writes are seen */
    *out = b->memory;
    pthread_mutex_unlock(&e->mu);
    return PP_OK;
}

pp_stage_backend *pp_exec_backend(pp_exec *e, int stage)
{
    int i = stage - e->first_local;
    return i >= 0 && i < e->n_local ? e->workers[i].b : NULL;
}

static pp_status worker_init(worker *w)
{
    const pp_schedule *sc = w->e->sched;
    pp_stage_backend *b = w->b;
    w->v = sc->v;
    w->n_slots = b->n_slots;
    w->slot_of = pp_alloc(sizeof(int) * (size_t)sc->v * sc->M);
    w->slots = pp_alloc(sizeof(slot_state) * (size_t)sc->v * w->n_slots);
    w->in_bytes = pp_alloc(sizeof(size_t) * (size_t)sc->v);
    w->out_bytes = pp_alloc(sizeof(size_t) * (size_t)sc->v);
    w->act_off = pp_alloc(sizeof(size_t) * (size_t)sc->v);
    w->grad_off = pp_alloc(sizeof(size_t) * (size_t)sc->v);
    if (!w->slot_of || !w->slots || !w->in_bytes || !w->out_bytes || !w->act_off || !w->grad_off)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for stage %d's executor state", w->stage);
    size_t act_total = 0, grad_total = 0;
    for (int c = 0; c < sc->v; c++) {
        w->in_bytes[c] = b->ops->grad_bytes(b, c);
        w->out_bytes[c] = b->ops->act_bytes(b, c);
        w->act_off[c] = act_total;
        w->grad_off[c] = grad_total;
        act_total += w->in_bytes[c] * (size_t)w->n_slots;
        grad_total += w->out_bytes[c] * (size_t)w->n_slots;
    }
    /* allocated below for a data-carrying backend; the sim backend holds what a real one would */
    pp_stage_mem_set(&b->memory, PP_STAGE_MEM_TRANSPORT, (int64_t)(act_total + grad_total));
    if (b->carries_data && b->mem) {
        /* in the backend's memory space (a GPU's) */
        w->recv_act = b->mem->alloc(b->mem->ctx, act_total);
        w->recv_grad = b->mem->alloc(b->mem->ctx, grad_total);
        if (!w->recv_act || !w->recv_grad)
            return PP_ERR(PP_ERR_NOMEM, "out of %s memory: stage %d needs %.1f MiB of receive "
                                        "buffers",
                          b->mem->name, w->stage, (double)(act_total + grad_total) / 1048576.0);
    } else if (b->carries_data) {
        w->recv_act = pp_alloc(act_total);
        w->recv_grad = pp_alloc(grad_total);
        if (!w->recv_act || !w->recv_grad)
            return PP_ERR(PP_ERR_NOMEM, "out of memory: stage %d needs %.1f MiB of receive buffers",
                          w->stage, (double)(act_total + grad_total) / 1048576.0);
    }
    return PP_OK;
}

static void worker_free(worker *w)
{
    pp_free(w->slot_of);
    pp_free(w->slots);
    if (w->b && w->b->mem) {
        if (w->recv_act)
            w->b->mem->free(w->b->mem->ctx, w->recv_act);
        if (w->recv_grad)
            w->b->mem->free(w->b->mem->ctx, w->recv_grad);
    } else {
        pp_free(w->recv_act);
        pp_free(w->recv_grad);
    }
    pp_free(w->in_bytes);
    pp_free(w->out_bytes);
    pp_free(w->act_off);
    pp_free(w->grad_off);
    if (w->b)
        w->b->ops->destroy(w->b);
}

/* The executor owns the backends it is given, also when it cannot be created. */
static void destroy_backends(pp_stage_backend **backends, int n)
{
    for (int i = 0; i < n; i++)
        if (backends[i])
            backends[i]->ops->destroy(backends[i]);
}

pp_status pp_exec_create(const pp_schedule *sched, pp_transport *tp, int first_local,
                         int n_local, pp_stage_backend **backends, pp_exec **out)
{
    pp_status st = PP_OK;
    if (first_local < 0 || n_local < 1 || first_local + n_local > sched->S) {
        destroy_backends(backends, n_local);
        return PP_ERR(PP_ERR_INVALID, "executor: local stages [%d, %d) not within S = %d",
                      first_local, first_local + n_local, sched->S);
    }
    pp_exec *e = pp_alloc(sizeof *e);
    if (!e) {
        destroy_backends(backends, n_local);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the executor");
    }
    e->sched = sched;
    e->tp = tp;
    e->first_local = first_local;
    e->n_local = n_local;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->go, NULL);
    pthread_cond_init(&e->done, NULL);
    e->workers = pp_alloc(sizeof(worker) * (size_t)n_local);
    if (!e->workers) {
        destroy_backends(backends, n_local);
        pp_exec_destroy(e);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the executor");
    }
    for (int i = 0; i < n_local; i++) {
        e->workers[i].e = e;
        e->workers[i].stage = first_local + i;
        e->workers[i].b = backends[i];
    }
    for (int i = 0; i < n_local && st == PP_OK; i++)
        st = worker_init(&e->workers[i]);
    for (int i = 0; i < n_local && st == PP_OK; i++) {
        if (pthread_create(&e->workers[i].thread, NULL, worker_main, &e->workers[i]) != 0)
            st = PP_ERR(PP_ERR_RUNTIME, "cannot start the worker thread of stage %d",
                        first_local + i);
        else
            e->workers[i].started = 1;
    }
    if (st != PP_OK) {
        pp_exec_destroy(e);
        return st;
    }
    *out = e;
    return PP_OK;
}

pp_status pp_exec_step(pp_exec *e, int64_t step, const pp_step_data *d, float lr, float grad_clip,
                       pp_exec_result *res)
{
    /* A common start a little in the future, so every worker is awake before its first
     * deadline (matters for the sim backend's timing); a transport spanning processes agrees on
     * one for all of them. */
    uint64_t t0 = pp_now_ns() + 300000;
    if (e->tp->ops->agree_start) {
        pp_status ast = e->tp->ops->agree_start(e->tp, &t0);
        if (ast != PP_OK)
            return ast;
    }
    pthread_mutex_lock(&e->mu);
    e->step = step;
    e->data = d;
    e->lr = lr;
    e->grad_clip = grad_clip;
    e->loss_sum = 0.0;
    e->grad_sumsq = 0.0;
    e->t0_ns = t0;
    e->n_done = 0;
    e->first_failed = -1;
    e->gen++;
    pthread_cond_broadcast(&e->go);
    while (e->n_done < e->n_local)
        pthread_cond_wait(&e->done, &e->mu);
    pthread_mutex_unlock(&e->mu);
    uint64_t end = pp_now_ns();
    pp_status st = PP_OK;
    uint64_t max_clock = e->t0_ns;
    for (int i = 0; i < e->n_local; i++) {
        worker *w = &e->workers[i];
        if (w->clock_ns > max_clock)
            max_clock = w->clock_ns;
    }
    if (e->first_failed >= 0) {
        worker *w = &e->workers[e->first_failed - e->first_local];
        st = PP_ERR(w->status, "%s", w->message);
    }
    if (res) {
        res->loss = d && d->mbs ? e->loss_sum : NAN;
        res->grad_norm = sqrt(e->grad_sumsq);
        res->step_ms = (double)(end - e->t0_ns) * 1e-6;
        res->model_ms = (double)(max_clock - e->t0_ns) * 1e-6;
    }
    return st;
}

void pp_exec_destroy(pp_exec *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    e->quit = 1;
    pthread_cond_broadcast(&e->go);
    pthread_mutex_unlock(&e->mu);
    if (e->workers) {
        for (int i = 0; i < e->n_local; i++)
            if (e->workers[i].started)
                pthread_join(e->workers[i].thread, NULL);
        for (int i = 0; i < e->n_local; i++)
            worker_free(&e->workers[i]);
    }
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->go);
    pthread_cond_destroy(&e->done);
    pp_free(e->workers);
    pp_free(e);
}
