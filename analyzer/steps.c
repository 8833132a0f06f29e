/* steps.c: the second stage of the analysis, ranges -> steps (analyzer_internal.h). Each closed
 * pipeline range decode.c hands over goes, on the run's common clock, into the bucket of its
 * step: as an op (compute or transfer, pp_aop with the convention's kind), a layer op, a step
 * range of its stage, or a data-parallel all-reduce. A step is finalized (metrics.c) once every
 * stage has started a later one, so memory follows the steps in flight. In the clock pass the
 * transfers are collected instead, and in the GPU pass the ranges go to the projection. */
#include "analyzer_internal.h"

#include <stdio.h>

void an_note_step_open(state *st, const file_state *f, int s, int64_t step)
{
    if (s < 0 || s >= 4096 || step < 0)
        return;
    if (s >= st->cap_seen) {
        int cap = st->cap_seen ? st->cap_seen : 8;
        while (cap <= s)
            cap *= 2;
        stage_seen *m = realloc(st->seen, sizeof *m * (size_t)cap);
        if (!m)
            return; /* only a warning is lost */
        for (int i = st->cap_seen; i < cap; i++)
            m[i] = (stage_seen){.last_step = -1, .rank = -1, .file = -1};
        st->seen = m;
        st->cap_seen = cap;
    }
    if (step > st->seen[s].last_step)
        st->seen[s] = (stage_seen){.last_step = step, .rank = f->rank, .file = f->index};
}

int an_ensure_stage_grow(state *st, int s)
{
    if (s < 0 || s >= 4096)
        return 0;
    if (s >= st->cap_stages) {
        int cap = st->cap_stages ? st->cap_stages : 8;
        while (cap <= s)
            cap *= 2;
        int64_t *m = realloc(st->stage_max_step, sizeof(int64_t) * (size_t)cap);
        if (!m)
            return 0;
        for (int i = st->cap_stages; i < cap; i++)
            m[i] = -1;
        st->stage_max_step = m;
        st->cap_stages = cap;
    }
    while (st->stage_acc.n <= (size_t)s)
        if (!vec_push(&st->stage_acc))
            return 0;
    if (s + 1 > st->S_seen)
        st->S_seen = s + 1;
    return 1;
}

/* bucket_get past its first guess: another open step's bucket, or a new one. */
static bucket *bucket_find_or_add(state *st, int64_t step)
{
    bucket *b = st->buckets.data;
    for (size_t i = 0; i < st->buckets.n; i++)
        if (b[i].used && b[i].step == step) {
            st->last_bucket = i;
            return &b[i];
        }
    if (step <= st->last_finalized) {
        if (!st->late_warned) {
            an_warn(st->a, "ranges of step %lld arrived after it was analyzed (ignored)",
                    (long long)step);
            st->late_warned = 1;
        }
        return NULL;
    }
    for (size_t i = 0; i < st->buckets.n; i++)
        if (!b[i].used) {
            b[i].used = 1;
            b[i].step = step;
            return &b[i];
        }
    bucket *nb = vec_push(&st->buckets);
    if (!nb)
        return NULL;
    nb->ops.elem = nb->layer_ops.elem = sizeof(pp_aop);
    nb->ranges.elem = sizeof(step_range);
    nb->allred.elem = sizeof(ar_range);
    nb->used = 1;
    nb->step = step;
    return nb;
}

/* The bucket of `step` (a new one for a step not seen yet); NULL for a step already finalized,
 * or out of memory. Consecutive ranges mostly belong to one step: that guess is inline. */
static inline bucket *bucket_get(state *st, int64_t step)
{
    bucket *b = st->buckets.data;
    size_t last = st->last_bucket;
    if (last < st->buckets.n && b[last].used && b[last].step == step)
        return &b[last];
    return bucket_find_or_add(st, step);
}

/* GPU pass: a pipeline range the GPU work it launched is projected onto (the step numbering
 * as the host pass has it). */
static inline void gpu_range(state *st, file_state *f, thread_state *t, const decoded *d,
                             uint64_t t0, uint64_t t1)
{
    if (d->kind == PP_NVTX_STEP) {
        t->n_steps++; /* fallback numbering */
        return;
    }
    int64_t step = d->step >= 0 ? d->step : t->cur_step;
    pp_gpu_op g = pp_gpu_op_of(d->kind);
    if (step < 0 || g == PP_GOP_COUNT)
        return;
    pp_gpu_proj_range(st->gpu, f->index, t->tid, step, d->stage, g, t0, t1);
}

/* Host pass: the range gpu_range would hand the GPU pass's projection, recorded for it
 * (gpu_rec.c), with the step it would give it. */
static inline void gpu_range_record(state *st, const file_state *f, const thread_state *t,
                                    const decoded *d, uint64_t t0, uint64_t t1)
{
    int64_t step = d->step >= 0 ? d->step : t->cur_step;
    pp_gpu_op g = pp_gpu_op_of(d->kind);
    if (d->kind == PP_NVTX_STEP || step < 0 || g == PP_GOP_COUNT)
        return;
    st->gpu_rec_on = an_gpu_rec_range(st->gpu_rec, f->index, t->tid, step, (int32_t)d->stage,
                                      (int32_t)g, t0, t1);
}

/* Counts a pipeline range that broke a bound (check_bounds, or its end before its start) and
 * describes the first one in the warnings. */
static void note_out_of_bounds(state *st, file_state *f, const open_range *o, const char *why)
{
    if (st->a->ranges_out_of_bounds++ == 0)
        snprintf(st->oob_first, sizeof st->oob_first, "'%.60s' (category %u) in %.200s: %s",
                 an_str_of(f, o->message), o->category, f->info ? f->info->path : "?", why);
}

/* A data-parallel all-reduce range, into its step's bucket. */
static inline void range_allreduce(state *st, const file_state *f, const thread_state *t,
                                   const decoded *d, uint64_t raw_t0, uint64_t t0, uint64_t t1)
{
    int64_t ar_step = d->step >= 0 ? d->step : t->cur_step;
    if (ar_step < 0) /* a collective on a thread of its own (torch's process group's) */
        ar_step = an_file_step_at(f, raw_t0);
    bucket *ab = st->collect || ar_step < 0 ? NULL : bucket_get(st, ar_step);
    ar_range *x = ab ? vec_push(&ab->allred) : NULL;
    if (x)
        *x = (ar_range){.stage = (int32_t)d->stage, .rank = f->rank >= 0 ? f->rank : f->index,
                        .t0 = t0, .t1 = t1, .bytes = d->bytes};
}

/* A step range, into its step's bucket (numbered by the thread's count when the trace gives no
 * number). */
static inline void range_step(state *st, thread_state *t, decoded *d, uint64_t t0, uint64_t t1)
{
    if (d->step < 0)
        d->step = t->n_steps + 1; /* fallback numbering */
    t->n_steps++;
    if (st->collect)
        return;
    bucket *b = bucket_get(st, d->step);
    step_range *r = b ? vec_push(&b->ranges) : NULL;
    if (r) {
        r->stage = (int32_t)d->stage;
        r->t0 = t0;
        r->t1 = t1;
    }
}

/* A layer range: kept apart from the ops (kind: its compute kind, chunk: the layer index); the
 * layer takes its name from the message the first time. */
static inline void range_layer(state *st, file_state *f, const thread_state *t,
                               const open_range *o, const decoded *d, bucket *b, pp_aop op)
{
    op.kind = d->kind == PP_NVTX_LAYER_FWD   ? PP_AOP_FWD
              : d->kind == PP_NVTX_LAYER_BWD ? PP_AOP_BWD
                                             : PP_AOP_BWD_WEIGHT;
    op.chunk = (int32_t)d->layer;
    if (op.mb < 0)
        op.mb = t->cur_mb;
    pp_aop *lp = vec_push_raw(&b->layer_ops);
    if (lp)
        *lp = op;
    if (d->layer < 0)
        return;
    while (st->layers.n <= (size_t)d->layer && d->layer < 1 << 20)
        if (!vec_push(&st->layers))
            break;
    if (st->layers.n > (size_t)d->layer) {
        layer_acc *la = &((layer_acc *)st->layers.data)[d->layer];
        if (!la->name[0])
            pp_nvtx_message_layer_name(an_str_of(f, o->message), la->name, sizeof la->name);
    }
}

/* An op (compute or transfer) of `step`, into its bucket, or into the clock pass' transfers.
 * Inlined where it is used: an_on_range, once for every op (out of line, bench_analyzer read
 * 3-10% slower), and pending_place. */
static inline __attribute__((always_inline)) void range_op(state *st, file_state *f,
                                                           thread_state *t, const open_range *o,
                                                           const decoded *d, int64_t step,
                                                           uint64_t t0, uint64_t t1)
{
    bucket *b = NULL;
    if (st->collect) {
        if (d->kind < PP_NVTX_SEND_ACT || d->kind > PP_NVTX_RECV_GRAD)
            return;
    } else if (!(b = bucket_get(st, step))) {
        return;
    }
    pp_aop op = {0};
    op.kind = (uint8_t)d->kind;
    op.stage = (int32_t)d->stage;
    op.mb = (int32_t)d->mb;
    op.chunk = d->chunk >= 0 ? (int32_t)d->chunk : 0;
    op.peer = (int32_t)d->peer;
    op.bytes = d->bytes;
    op.step = step;
    op.t0 = t0;
    op.t1 = t1;
    op.rank = st->collect ? f->index : f->rank >= 0 ? f->rank : f->index;
    op.replica = f->replica;
    if (d->kind >= PP_NVTX_LAYER_FWD && d->kind <= PP_NVTX_LAYER_BWD_WEIGHT) {
        range_layer(st, f, t, o, d, b, op);
        return;
    }
    if (st->collect) {
        /* implied peers once every stage is known (clock_pass.c) */
        pp_aop *p = vec_push(&st->collected);
        if (p)
            *p = op;
        return;
    }
    int S = an_state_stages(st);
    if (op.peer == -1 && !an_is_compute(op.kind) && S > 0) /* (AN_PEER_LATE: an_finalize) */
        op.peer = an_implied_peer(st, op.kind, op.stage, op.chunk, S);
    pp_aop *p = vec_push_raw(&b->ops);
    if (p)
        *p = op;
}

/* ---- ranges of threads without step ranges (a driver thread's step around worker threads):
 * each waits, bounded, until a step range of its process that encloses its start in time has
 * closed, since a file's blocks are not in time order across its threads ---- */

enum { AN_PENDING_MAX = 16384, AN_PENDING_MAX_TOTAL = 65536 }; /* a file, all files */

typedef struct pending_op {
    decoded d;
    uint64_t raw_t0;   /* its start on the file's own clock: the step ranges' clock */
    uint64_t t0, t1;   /* on the reference clock */
    uint32_t message;  /* for a layer range's name */
    int32_t cur_mb;    /* its thread's enclosing compute range's mb, for a layer range */
} pending_op;

static inline __attribute__((always_inline)) void range_op(state *st, file_state *f,
                                                           thread_state *t, const open_range *o,
                                                           const decoded *d, int64_t step,
                                                           uint64_t t0, uint64_t t1);

/* The latest closed step of f whose range encloses raw time x; -1 when none. */
static int64_t closed_step_around(const file_state *f, uint64_t x)
{
    unsigned cap = sizeof f->steps_closed / sizeof f->steps_closed[0];
    unsigned n = f->n_steps_closed < cap ? f->n_steps_closed : cap;
    int64_t step = -1;
    uint64_t best = 0;
    for (unsigned i = 0; i < n; i++)
        if (f->steps_closed[i].t0 <= x && x < f->steps_closed[i].t1 &&
            (step < 0 || f->steps_closed[i].t0 >= best))
            step = f->steps_closed[i].step, best = f->steps_closed[i].t0;
    return step;
}

/* A waiting range into `step`: as any op, and its stage has moved on to that step. */
static void pending_place(state *st, file_state *f, const pending_op *p, int64_t step)
{
    thread_state t = {.tid = 0, .cur_step = step, .n_steps = 0, .cur_stage = -1,
                      .cur_mb = p->cur_mb};
    open_range o = {.t0 = p->raw_t0, .message = p->message};
    int s = (int)p->d.stage;
    an_note_step_open(st, f, s, step);
    if (an_ensure_stage(st, s) && step - 1 > st->stage_max_step[s])
        st->stage_max_step[s] = step - 1;
    range_op(st, f, &t, &o, &p->d, step, p->t0, p->t1);
}

/* A closed step range scans the waiting ranges only when their starts' bounds meet it, and all
 * of a file's scans visit at most AN_PENDING_VISITS per range that ever waited (plus a start):
 * a hostile file of many step ranges between many ranges that no step encloses costs time in
 * proportion to its size, not to their product. A range whose step range closes after the
 * budget is spent is placed at the end from the latest closed steps, if they hold it. */
enum { AN_PENDING_VISITS = 256 };

void an_pending_step_closed(state *st, file_state *f, int64_t step, uint64_t t0, uint64_t t1)
{
    unsigned k = f->n_steps_closed++ % (sizeof f->steps_closed / sizeof f->steps_closed[0]);
    f->steps_closed[k].step = step;
    f->steps_closed[k].t0 = t0;
    f->steps_closed[k].t1 = t1;
    if (!f->pending.n || t1 <= f->pending_lo || t0 > f->pending_hi ||
        f->pending_visits + f->pending.n > AN_PENDING_VISITS * f->pending_added + 65536)
        return;
    f->pending_visits += f->pending.n;
    pending_op *p = f->pending.data;
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < f->pending.n;) {
        if (p[i].raw_t0 >= t0 && p[i].raw_t0 < t1) {
            pending_op x = p[i];
            p[i] = p[--f->pending.n];
            st->pending_total--;
            pending_place(st, f, &x, step);
        } else {
            lo = p[i].raw_t0 < lo ? p[i].raw_t0 : lo;
            hi = p[i].raw_t0 > hi ? p[i].raw_t0 : hi;
            i++;
        }
    }
    f->pending_lo = lo;
    f->pending_hi = hi;
}

void an_pending_flush(state *st, file_state *f)
{
    pending_op *p = f->pending.data;
    for (size_t i = 0; i < f->pending.n; i++) {
        int64_t step = closed_step_around(f, p[i].raw_t0);
        if (step >= 0)
            pending_place(st, f, &p[i], step);
    }
    st->pending_total -= f->pending.n;
    f->pending.n = 0;
}

/* A range of a thread that opens no step range: into the closed step around it, else waiting
 * (at most AN_PENDING_MAX a file and AN_PENDING_MAX_TOTAL over all files, a few MB: past that
 * it is dropped, as before this existed). */
static void pending_add(state *st, file_state *f, const thread_state *t, const open_range *o,
                        const decoded *d, uint64_t t0, uint64_t t1)
{
    pending_op p = {.d = *d, .raw_t0 = o->t0, .t0 = t0, .t1 = t1, .message = o->message,
                    .cur_mb = t->cur_mb};
    f->stepless = 1;
    int64_t step = closed_step_around(f, o->t0);
    if (step >= 0) {
        pending_place(st, f, &p, step);
        return;
    }
    if (!f->pending.elem)
        f->pending.elem = sizeof(pending_op);
    pending_op *q = f->pending.n < AN_PENDING_MAX && st->pending_total < AN_PENDING_MAX_TOTAL
                        ? vec_push_raw(&f->pending)
                        : NULL;
    if (q) {
        *q = p;
        if (f->pending.n == 1 || o->t0 < f->pending_lo)
            f->pending_lo = o->t0;
        if (f->pending.n == 1 || o->t0 > f->pending_hi)
            f->pending_hi = o->t0;
        f->pending_added++;
        st->pending_total++;
    }
}

void an_on_range(state *st, file_state *f, thread_state *t, const open_range *o, uint64_t t1,
              const decoded *raw)
{
    decoded d = *raw;
    if (!d.oob && d.kind != PP_NVTX_KIND_NONE && t1 < o->t0)
        d.oob = "it ends before it starts";
    if (d.oob) {
        if (!st->collect)
            note_out_of_bounds(st, f, o, d.oob);
        return;
    }
    if (d.kind == PP_NVTX_KIND_NONE)
        return;
    if (d.stage < 0)
        d.stage = t->cur_stage;
    if (d.stage < 0 || !an_ensure_stage(st, (int)d.stage))
        return;
    if (f->min_stage < 0 || d.stage < f->min_stage)
        f->min_stage = (int32_t)d.stage;
    /* onto the reference clock (identity unless this process's clock was estimated: no call
     * per range then) */
    uint64_t t0 = o->t0;
    if (f->clk.status == PP_CLOCK_ESTIMATED) {
        t0 = pp_clock_to_ref(&f->clk, t0);
        t1 = pp_clock_to_ref(&f->clk, t1);
    }
    /* Data-parallel replicas run the same pipeline: one of them is analyzed (the others' clocks
     * are still aligned, from their own transfers, in the clock pass). */
    if (f->replica != st->o->replica && !st->collect)
        return;
    if (st->gpu_pass) {
        gpu_range(st, f, t, &d, t0, t1);
        return;
    }
    if (st->gpu_rec_on && !st->collect)
        gpu_range_record(st, f, t, &d, t0, t1);
    /* the stage of the ranges the GPU pass will project onto: NCCL's ranks become stages */
    if (!st->collect && pp_gpu_op_of(d.kind) != PP_GOP_COUNT && (d.step >= 0 || t->cur_step >= 0))
        f->proj_stage = f->proj_stage == -1 || f->proj_stage == d.stage ? (int32_t)d.stage : -2;
    if (d.kind == PP_NVTX_ALLREDUCE) {
        range_allreduce(st, f, t, &d, o->t0, t0, t1);
        return;
    }
    if (d.kind == PP_NVTX_STEP) {
        range_step(st, t, &d, t0, t1);
        return;
    }
    int64_t step = d.step >= 0 ? d.step : t->cur_step;
    /* an optimizer step after its step range closed (Megatron-LM's 'optimizer' timer follows
     * its 'forward-backward'): the step its process opened last */
    if (step < 0 && d.kind == PP_NVTX_OPT_STEP)
        step = an_file_step_at(f, o->t0);
    if (step >= 0) {
        range_op(st, f, t, o, &d, step, t0, t1);
        if (f->stepless && !st->collect && step - 1 > st->stage_max_step[d.stage])
            st->stage_max_step[d.stage] = step - 1; /* its stage's progress (decode.c close_step) */
    } else if (t->n_steps == 0 && !st->collect) {
        pending_add(st, f, t, o, &d, t0, t1);
    }
}

/* Finalizes every step that all stages have moved past (all of them at the end). */
void an_finalize_ready(state *st, int at_end)
{
    int S = an_state_stages(st);
    int64_t ready = INT64_MAX;
    if (!at_end) {
        if (S <= 0)
            return;
        for (int s = 0; s < S; s++) {
            int64_t m = s < st->cap_stages ? st->stage_max_step[s] : -1;
            ready = m < ready ? m : ready;
        }
        /* Without the config mark the set of stages may still grow: keep one more step. */
        ready -= st->S_cfg ? 1 : 2;
    }
    for (;;) {
        bucket *b = st->buckets.data, *oldest = NULL;
        for (size_t i = 0; i < st->buckets.n; i++)
            if (b[i].used && b[i].step <= ready && (!oldest || b[i].step < oldest->step))
                oldest = &b[i];
        if (!oldest)
            break;
        an_finalize(st, oldest);
    }
}

