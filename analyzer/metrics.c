/* metrics.c: the third stage of the analysis, a finalized step -> its numbers (docs/metrics.md;
 * analyzer_internal.h). Sorts the step's ops, takes its period, window, per-stage busy, idle and
 * per-op times, its all-reduce, its links' counts, bytes and message times, its layers' times,
 * has bubble.c decompose its idle time, keeps the ops wanted for timelines, and accumulates all
 * of it over the steps; an_results() turns the accumulators into the pp_analysis. A new metric is
 * computed here (per step in step_numbers, over steps in results), with its field in
 * pp_analyzer.h and its formula in docs/metrics.md. */
#include "analyzer_internal.h"
#include "stable_sort.h"

#include <math.h>
#include <stdio.h>

static inline int op_time_less(const pp_aop *x, const pp_aop *y)
{
    if (x->stage != y->stage)
        return x->stage < y->stage;
    if (x->t0 != y->t0)
        return x->t0 < y->t0;
    return x->t1 < y->t1;
}

DEFINE_STABLE_SORT(sort_ops_by_time, pp_aop, op_time_less)

/* sort_ops_by_time, faster on a step's ops: stable counting by stage (the ops of the stages
 * arrive interleaved, each stage's nearly in time order), then each stage's run by time. tmp
 * holds n ops. Falls back to the merge sort when a stage lies outside [0, S). */
static void sort_ops(pp_aop *v, size_t n, pp_aop *tmp, int S)
{
    size_t *start = S > 0 ? calloc((size_t)S + 1, sizeof *start) : NULL;
    for (size_t i = 0; start && i < n; i++) {
        if (v[i].stage < 0 || v[i].stage >= S) {
            free(start);
            start = NULL;
        } else {
            start[v[i].stage + 1]++;
        }
    }
    if (!start) {
        sort_ops_by_time(v, n, tmp);
        return;
    }
    for (int s = 0; s < S; s++)
        start[s + 1] += start[s];
    size_t *at = start; /* at[s]: the next slot of stage s */
    for (size_t i = 0; i < n; i++)
        tmp[at[v[i].stage]++] = v[i];
    memcpy(v, tmp, n * sizeof *v);
    /* at[s] is now the end of stage s, which is where stage s + 1 begins */
    size_t lo = 0;
    for (int s = 0; s < S; s++) {
        size_t hi = at[s];
        if (hi > lo + 1)
            sort_ops_by_time(v + lo, hi - lo, tmp);
        lo = hi;
    }
    free(start);
}

/* Scratch of at least `bytes` for the per-step sorts, kept from step to step; NULL when out of
 * memory. */
static void *sort_scratch(state *st, size_t bytes)
{
    if (bytes > st->scratch_bytes) {
        void *p = realloc(st->scratch, bytes);
        if (!p)
            return NULL;
        st->scratch = p;
        st->scratch_bytes = bytes;
    }
    return st->scratch;
}

static link_acc *link_get(state *st, int src, int dst, int grad)
{
    link_acc *l = st->links.data;
    for (size_t i = 0; i < st->links.n; i++)
        if (l[i].l.src == src && l[i].l.dst == dst && l[i].l.grad == grad)
            return &l[i];
    link_acc *n = vec_push(&st->links);
    if (!n)
        return NULL;
    n->used = 1;
    n->l.src = src;
    n->l.dst = dst;
    n->l.grad = grad;
    return n;
}

/* By link, then sends before receives; the sort is stable, so each group stays in op order. */
static inline int xfer_less(const xfer *x, const xfer *y)
{
    if (x->grad != y->grad)
        return x->grad < y->grad;
    if (x->src != y->src)
        return x->src < y->src;
    if (x->dst != y->dst)
        return x->dst < y->dst;
    return x->recv < y->recv;
}

DEFINE_STABLE_SORT(sort_xfers, xfer, xfer_less)

/* For each send of ops, the index of its receive (SIZE_MAX when none) in st->match: links are
 * FIFO (docs/schedules.md), so the k-th send on (src, dst, kind) meets the k-th receive there.
 * Sorting the transfers by link keeps this O(n log n); scanning the step for every send was
 * O(n^2) and the analyzer's largest cost on long steps. Returns 0 when out of memory. */
int an_match_transfers(state *st, const pp_aop *ops, size_t n)
{
    st->xfers.n = st->match.n = 0;
    for (size_t i = 0; i < n; i++) {
        if (!vec_push(&st->match))
            return 0;
        ((size_t *)st->match.data)[i] = SIZE_MAX;
        const pp_aop *o = &ops[i];
        int send = o->kind == PP_AOP_SEND_ACT || o->kind == PP_AOP_SEND_GRAD;
        int recv = o->kind == PP_AOP_RECV_ACT || o->kind == PP_AOP_RECV_GRAD;
        if (!send && !recv)
            continue;
        xfer *x = vec_push(&st->xfers);
        if (!x)
            return 0;
        x->grad = o->kind == PP_AOP_SEND_GRAD || o->kind == PP_AOP_RECV_GRAD;
        x->src = send ? o->stage : o->peer;
        x->dst = send ? o->peer : o->stage;
        x->recv = recv;
        x->index = i;
    }
    xfer *x = st->xfers.data;
    size_t nx = st->xfers.n, *match = st->match.data;
    if (nx) {
        xfer *tmp = sort_scratch(st, nx * sizeof *x);
        if (!tmp)
            return 0;
        sort_xfers(x, nx, tmp);
    }
    /* per link: its sends in op order, then its receives in op order */
    for (size_t g = 0; g < nx;) {
        size_t r = g;
        while (r < nx && !x[r].recv && x[r].grad == x[g].grad && x[r].src == x[g].src &&
               x[r].dst == x[g].dst)
            r++;
        size_t e = r;
        while (e < nx && x[e].grad == x[g].grad && x[e].src == x[g].src && x[e].dst == x[g].dst)
            e++;
        for (size_t k = 0; g + k < r && r + k < e; k++)
            match[x[g + k].index] = x[r + k].index;
        g = e;
    }
    return 1;
}

/* The end of send ops[i]'s own part: its range, cut at its stage's next op's start (an
 * asynchronous send's range, torch's isend to its wait, runs on beside the stage's next ops).
 * The ops are by stage, then time. */
static uint64_t send_own_end(const pp_aop *ops, size_t n, size_t i)
{
    const pp_aop *s = &ops[i];
    uint64_t own_end = s->t1;
    if (i + 1 < n && ops[i + 1].stage == s->stage && ops[i + 1].t0 < own_end)
        own_end = ops[i + 1].t0 > s->t0 ? ops[i + 1].t0 : s->t0;
    return own_end;
}

/* Per matched receive of a step (step_numbers): when its message was handed over (its send's
 * own part ended) and the end of its stage's last compute op inside it
 * (an_recv_overlapped_end, 0 when none); hand is UINT64_MAX for an op no send matched. */
typedef struct recv_at {
    uint64_t hand, busy_end;
} recv_at;

/* Receive ops[r]'s busy_end: from rx when step_numbers could hold it, else found again. */
static uint64_t recv_busy_end(const recv_at *rx, const pp_aop *ops, size_t n, size_t r)
{
    return rx ? rx[r].busy_end : an_recv_overlapped_end(ops, n, r);
}

/* Per-link counts, bytes and times of the step's transfers; match: an_match_transfers'; rx:
 * step_numbers' per-receive times, or NULL. */
static void step_links(state *st, const pp_aop *ops, size_t n, const size_t *match,
                       const recv_at *rx)
{
    if (!match)
        return;
    for (size_t i = 0; i < n; i++) {
        const pp_aop *s = &ops[i];
        if (s->kind != PP_AOP_SEND_ACT && s->kind != PP_AOP_SEND_GRAD)
            continue;
        int grad = s->kind == PP_AOP_SEND_GRAD;
        link_acc *l = link_get(st, s->stage, s->peer, grad);
        if (!l)
            return;
        l->l.messages++;
        l->l.bytes += s->bytes;
        l->l.send_ns += (double)(s->t1 - s->t0);
        if (match[i] == SIZE_MAX)
            continue;
        const pp_aop *r = &ops[match[i]];
        /* The sender's own time: until its stage's next op begins (an asynchronous send's
         * range, torch's isend to its wait, runs on beside the stage's next ops), of the sends
         * that waited for no receiver: their receiver was already waiting when they began, or
         * they ended before it came (a rendezvous send that meets its receiver part way
         * through may have waited: left out). The ops are by stage, then time. */
        uint64_t own_end = send_own_end(ops, n, i);
        if (r->t0 <= s->t0 || r->t0 >= s->t1)
            an_series_add(&l->snd, (double)(own_end - s->t0));
        /* A receive its stage computed inside (posted early, waited for later) waited from
         * its stage's last op on, and its end says when the wait returned, not when the data
         * came: no transfer time from it (docs/metrics.md "Transfers"). */
        uint64_t busy_end = recv_busy_end(rx, ops, n, match[i]);
        /* The receiver's own time: the receive ranges that began once the sender had handed
         * its message over (its send call had returned: the send's own part above ended), at
         * least as long after the send began as they lasted (one that came while an
         * asynchronous send's data was still on the way waited for it: its wait would read
         * as its own time), and that no compute op of their stage overlaps (docs/metrics.md
         * "Links"); they are not timed below, their end saying nothing of the link. */
        int late = !busy_end && r->t0 >= own_end && r->t1 >= r->t0 &&
                   r->t0 - s->t0 >= r->t1 - r->t0;
        if (late)
            an_series_add(&l->rcv, (double)(r->t1 - r->t0));
        /* A receive posted early took its receiver's time too: its range up to its stage's next
         * op (torch's RECV actions, Megatron-LM's irecv before the compute). That holds the
         * posting and, where the stage then waited for another message (torch posts RECV_B of
         * one micro-batch and waits for another's in its next action), that wait: a replay's
         * receive ends at the later of its start plus such a time and its message's arrival, so
         * it is the length of a receive step as the job lived it (docs/metrics.md "Links"). Its
         * stretch after the compute inside it is the stage's gap (step_outside) */
        if (busy_end) {
            size_t k = match[i] + 1;
            uint64_t next = k < n && ops[k].stage == r->stage && ops[k].t0 < r->t1 ? ops[k].t0
                                                                                   : r->t1;
            an_series_add(&l->rcv, next > r->t0 ? (double)(next - r->t0) : 0.0);
        }
        /* blocked: from the later of its start and its stage's last compute op inside it to
         * its end, or, posted early, to its message's handing over (past that the stage was
         * not waiting for it: the time is its own, step_outside's gaps) */
        uint64_t blocked_end = r->t1;
        if (busy_end && own_end < blocked_end)
            blocked_end = own_end > busy_end ? own_end : busy_end;
        double wait = busy_end ? (blocked_end > busy_end ? (double)(blocked_end - busy_end) : 0.0)
                               : (double)(r->t1 - r->t0);
        l->l.wait_ns += wait;
        /* Arrival is observed only when the receive overlaps the send: the receiver was
         * there before the sender had handed the data over, so the data cannot have been
         * waiting for it. In flight: from the later of the two starts to the receive's end
         * (docs/metrics.md). A receive that began after the send ended found its data waiting
         * (a queue, a mailbox): its length is the receiver's own cost, not the link's. */
        if (!busy_end && !late && r->t0 <= s->t1 && r->t1 > s->t0 && r->t1 > r->t0) {
            double t = (double)(r->t1 - (r->t0 > s->t0 ? r->t0 : s->t0));
            l->l.timed++;
            l->l.transfer_ns += t;
            an_series_add(&l->lat, t);
            an_series_add(&l->bw, (double)s->bytes / t);
        }
    }
}

static int step_wanted(const state *st, int64_t step)
{
    if (st->o->step_lo && step < st->o->step_lo)
        return 0;
    if (st->o->step_hi && step > st->o->step_hi)
        return 0;
    return 1;
}

static void keep_ops(state *st, bucket *b)
{
    int keep_last = !st->o->keep_lo && !st->o->keep_hi;
    int in_range = b->step >= st->o->keep_lo && (!st->o->keep_hi || b->step <= st->o->keep_hi);
    if (keep_last) {
        st->kept_ops.n = 0;
        st->kept_layer_ops.n = 0;
        st->kept_ar_ops.n = 0;
        st->kept_step = b->step;
    } else if (!in_range) {
        return;
    }
    for (size_t i = 0; i < b->ops.n; i++) {
        pp_aop *d = vec_push(&st->kept_ops);
        if (d)
            *d = ((pp_aop *)b->ops.data)[i];
    }
    for (size_t i = 0; i < b->layer_ops.n; i++) {
        pp_aop *d = vec_push(&st->kept_layer_ops);
        if (d)
            *d = ((pp_aop *)b->layer_ops.data)[i];
    }
    /* data-parallel all-reduce ranges (kind PP_AOP_OPT is a placeholder: they are kept apart) */
    for (size_t i = 0; i < b->allred.n; i++) {
        const ar_range *r = &((const ar_range *)b->allred.data)[i];
        pp_aop *d = vec_push(&st->kept_ar_ops);
        if (d)
            *d = (pp_aop){.kind = PP_AOP_OPT, .stage = r->stage, .mb = -1, .chunk = -1,
                          .peer = -1, .bytes = r->bytes, .step = b->step, .t0 = r->t0,
                          .t1 = r->t1, .rank = r->rank};
    }
    if (!st->a->kept_lo || b->step < st->a->kept_lo)
        st->a->kept_lo = b->step;
    if (b->step > st->a->kept_hi)
        st->a->kept_hi = b->step;
    if (keep_last)
        st->a->kept_lo = st->a->kept_hi = b->step;
}

/* Each stage's start and end of b's step into t0[S], t1[S] (UINT64_MAX / 0: no step range of
 * that stage). */
static void stage_bounds(const bucket *b, uint64_t *t0, uint64_t *t1, int S)
{
    for (int s = 0; s < S; s++) {
        t0[s] = UINT64_MAX;
        t1[s] = 0;
    }
    const step_range *rg = b->ranges.data;
    for (size_t i = 0; i < b->ranges.n; i++) {
        int s = rg[i].stage;
        if (s < 0 || s >= S)
            continue;
        t0[s] = rg[i].t0 < t0[s] ? rg[i].t0 : t0[s];
        t1[s] = rg[i].t1 > t1[s] ? rg[i].t1 : t1[s];
    }
}

static const bucket *bucket_find(const state *st, int64_t step)
{
    const bucket *b = st->buckets.data;
    for (size_t i = 0; i < st->buckets.n; i++)
        if (b[i].used && b[i].step == step)
            return &b[i];
    return NULL;
}

/* The mean over stages of b - a where both are known and b > a (0 when none). */
static double mean_spacing(const uint64_t *a, const uint64_t *b, int S, uint64_t none, int *n)
{
    double sum = 0;
    *n = 0;
    for (int s = 0; s < S; s++)
        if (a[s] != none && b[s] != none && b[s] > a[s]) {
            sum += (double)(b[s] - a[s]);
            (*n)++;
        }
    return *n ? sum / *n : 0.0;
}

/* The pipeline's period at b's step (docs/metrics.md): the mean over stages of the spacing of
 * a stage's step starts, from this step to the next; for the last step of the traces (no next
 * start), the spacing of the stage's step ends, from the previous step to this one; the step's
 * window when neither is known (a lone step). A job without a barrier before its optimizer step
 * runs its stages' step ranges into each other, so their union is longer than a step takes.
 * bd[4 S]: b's starts and ends (filled by the caller), then scratch. */
static double step_period_ns(const state *st, const bucket *b, uint64_t *bd, int S,
                             double window_ns)
{
    int n = 0;
    double p = 0;
    const bucket *nb = b->step < INT64_MAX ? bucket_find(st, b->step + 1) : NULL;
    if (nb) {
        stage_bounds(nb, bd + 2 * S, bd + 3 * S, S);
        p = mean_spacing(bd, bd + 2 * S, S, UINT64_MAX, &n);
    }
    if (!n && st->prev_step >= 0 && st->prev_step == b->step - 1 && st->cap_prev >= S)
        p = mean_spacing(st->prev_bound + S, bd + S, S, 0, &n);
    return n ? p : window_ns;
}

/* Keeps b's stage starts and ends for the next step's period (a step with no ranges forgets
 * them). */
static void remember_bounds(state *st, const uint64_t *bd, int S, int64_t step)
{
    st->prev_step = -1;
    if (!bd || S <= 0)
        return;
    if (S != st->cap_prev) {
        uint64_t *m = realloc(st->prev_bound, sizeof *m * 2 * (size_t)S);
        if (!m)
            return;
        st->prev_bound = m;
        st->cap_prev = S;
    }
    memcpy(st->prev_bound, bd, sizeof *bd * 2 * (size_t)S);
    st->prev_step = step;
}

/* The step's window [t0, t1): from the first stage's step start to the last stage's end. */
static int step_window(const bucket *b, uint64_t *t0, uint64_t *t1)
{
    const step_range *rg = b->ranges.data;
    *t0 = UINT64_MAX;
    *t1 = 0;
    for (size_t i = 0; i < b->ranges.n; i++) {
        *t0 = rg[i].t0 < *t0 ? rg[i].t0 : *t0;
        *t1 = rg[i].t1 > *t1 ? rg[i].t1 : *t1;
    }
    return *t1 > *t0;
}

/* A new step in st->steps with its stage[S]; NULL (and no step) when out of memory. */
static pp_astep *step_new(state *st, const bucket *b, uint64_t t0, uint64_t t1, uint64_t *bd,
                          int S)
{
    pp_astep *sp = vec_push(&st->steps);
    if (!sp)
        return NULL;
    sp->step = b->step;
    sp->t0_ns = (double)t0;
    sp->window_ns = (double)(t1 - t0);
    sp->step_ns = step_period_ns(st, b, bd, S, sp->window_ns);
    sp->culprit = -1;
    sp->opt_barrier = -1;
    sp->stage = calloc((size_t)S, sizeof(pp_stage_step));
    int *sp_S = vec_push(&st->steps_S);
    if (!sp->stage || !sp_S) {
        free(sp->stage);
        st->steps.n--; /* not a step without its stages */
        if (sp_S)
            st->steps_S.n--;
        return NULL;
    }
    *sp_S = S;
    return sp;
}

/* Op o's duration d into its chunk's series of its kind (stage_acc.chunk_ops), growing the
 * stage's chunk table up to o's chunk (bounded by the decoder: below PP_ANALYSIS_MAX_CHUNKS, or
 * the announced v); out of memory, the sample is left out. */
static void chunk_op_add(stage_acc *sa, const pp_aop *o, double d)
{
    if (o->chunk < 0 || o->chunk >= PP_ANALYSIS_MAX_CHUNKS)
        return;
    if (o->chunk >= sa->n_chunk) {
        int n = o->chunk + 1;
        series *g = realloc(sa->chunk_ops, (size_t)n * 4 * sizeof *g);
        if (!g)
            return;
        memset(g + (size_t)sa->n_chunk * 4, 0, (size_t)(n - sa->n_chunk) * 4 * sizeof *g);
        sa->chunk_ops = g;
        sa->n_chunk = n;
    }
    /* the kinds FWD .. BWD_WEIGHT are consecutive (pp_convention.h), the table's order */
    size_t k = (size_t)(o->kind - PP_AOP_FWD);
    an_series_add_cap(&sa->chunk_ops[(size_t)o->chunk * 4 + k], d, CHUNK_RESERVOIR);
}

/* Per-op times of the step's ops into the stages' series and sp (busy, mean forward and
 * backward), and each compute kind's sum and count; 0 when out of memory. */
static int step_op_times(state *st, pp_astep *sp, const pp_aop *ops, size_t n, int S,
                         double *kind_sum, double *kind_n)
{
    int *fwd_n = calloc((size_t)S, sizeof(int)), *bwd_n = calloc((size_t)S, sizeof(int));
    if (!fwd_n || !bwd_n) {
        free(fwd_n);
        free(bwd_n);
        return 0;
    }
    /* several chunks per stage: once any op of a chunk above 0 shows, each chunk's ops are
     * kept apart too (every op of that step on, the first interleaved step included); a run
     * that announces one chunk has none above 0 (check_bounds) */
    for (size_t i = 0; i < n && !st->multi_chunk && st->v_cfg != 1; i++)
        st->multi_chunk = ops[i].chunk > 0;
    for (size_t i = 0; i < n; i++) {
        const pp_aop *o = &ops[i];
        if (o->stage < 0 || o->stage >= S || !an_ensure_stage(st, o->stage))
            continue;
        double d = (double)(o->t1 - o->t0);
        stage_acc *sa = &((stage_acc *)st->stage_acc.data)[o->stage];
        if (st->multi_chunk && o->kind >= PP_AOP_FWD && o->kind <= PP_AOP_BWD_WEIGHT)
            chunk_op_add(sa, o, d);
        switch (o->kind) {
        case PP_AOP_FWD: an_series_add(&sa->fwd, d); break;
        case PP_AOP_BWD: an_series_add(&sa->bwd, d); break;
        case PP_AOP_BWD_INPUT: an_series_add(&sa->bwd_in, d); break;
        case PP_AOP_BWD_WEIGHT: an_series_add(&sa->bwd_w, d); break;
        case PP_AOP_OPT: an_series_add(&sa->opt, d); break;
        default: break;
        }
        if (an_is_compute(o->kind)) {
            sp->stage[o->stage].busy_ns += d;
            kind_sum[o->kind] += d;
            kind_n[o->kind] += 1;
        }
        if (o->kind == PP_AOP_FWD) {
            sp->stage[o->stage].fwd_ns += d;
            fwd_n[o->stage]++;
        } else if (o->kind == PP_AOP_BWD || o->kind == PP_AOP_BWD_INPUT) {
            sp->stage[o->stage].bwd_ns += d;
            bwd_n[o->stage]++;
        } else if (o->kind == PP_AOP_BWD_WEIGHT) {
            sp->stage[o->stage].bwd_ns += d; /* joins its input half */
        }
    }
    for (int s = 0; s < S; s++) {
        if (fwd_n[s])
            sp->stage[s].fwd_ns /= fwd_n[s];
        if (bwd_n[s])
            sp->stage[s].bwd_ns /= bwd_n[s];
    }
    free(fwd_n);
    free(bwd_n);
    return 1;
}

/* Each stage's time outside its pipeline work (pp_stage_step.outside_ns): its period, from
 * its step start (bd[s]) to its next step start, minus its ops' span; which stage's ops ended
 * last; each stage's time before its optimizer step (pre_opt_ns: from the latest end of a
 * compute op or a send that started before it) and which stage reached that point last. One
 * pass over the ops, which are in time order within each stage. bd[4 S]: b's starts and ends,
 * then scratch. */
static void step_outside(const state *st, pp_astep *sp, const bucket *b, const pp_aop *ops,
                         size_t n, const recv_at *rx, uint64_t *bd, int S)
{
    uint64_t *first = bd + 2 * S, *last = bd + 3 * S;
    for (int s = 0; s < S; s++) {
        first[s] = UINT64_MAX;
        last[s] = 0;
        sp->stage[s].outside_ns = -1;
        sp->stage[s].pre_opt_ns = -1;
    }
    int late = -1;             /* the stage that reached its optimizer step last */
    uint64_t late_at = 0;      /* when: its latest compute end before it */
    int cur = -1;              /* the stage of the run of ops being read */
    uint64_t compute_end = 0;  /* its latest compute op (or send) end so far */
    uint64_t cover = 0;        /* its latest end of any op so far (gap_ns) */
    int last_compute = 0;      /* the op that ends there is a compute op */
    int opt_seen = 0;          /* its optimizer op came (the gaps stop there) */
    /* the optimizer steps' earliest start, the stages' ends of work before them (opt_barrier) */
    double o_lo = HUGE_VAL, e_lo = HUGE_VAL, e_hi = -HUGE_VAL;
    int n_opt = 0;
    for (size_t i = 0; i < n; i++) {
        const pp_aop *o = &ops[i];
        int s = o->stage;
        if (s < 0 || s >= S)
            continue;
        if (s != cur) {
            if (cur >= 0 && !opt_seen) /* (its last op's time after it lies outside) */
                sp->stage[cur].n_compute -= last_compute;
            cur = s;
            compute_end = 0;
            cover = 0;
            last_compute = 0;
            opt_seen = 0;
            sp->stage[s].gap_ns = 0;
            sp->stage[s].n_compute = 0;
        }
        if (!opt_seen && o->kind != PP_AOP_OPT) {
            if (cover && o->t0 > cover)
                sp->stage[s].gap_ns += (double)(o->t0 - cover);
            sp->stage[s].n_compute += an_is_compute(o->kind);
            /* a send covers its own part only (step_links): an asynchronous send's range runs
             * on beside the stage's next ops to its wait, and would hide the time between them */
            uint64_t end = o->t1;
            if (o->kind == PP_AOP_SEND_ACT || o->kind == PP_AOP_SEND_GRAD)
                end = send_own_end(ops, n, i);
            /* a receive posted early, its stage computing inside it, waits after that compute
             * only until its message was handed over (rx[i].hand); past that its range holds the
             * stage's own time between its ops (torch's Python between actions), which is a
             * gap like any other */
            if (rx && rx[i].hand != UINT64_MAX && rx[i].busy_end &&
                (o->kind == PP_AOP_RECV_ACT || o->kind == PP_AOP_RECV_GRAD)) {
                uint64_t w = rx[i].hand > rx[i].busy_end ? rx[i].hand : rx[i].busy_end;
                if (w < end)
                    end = w;
            }
            if (end > cover) {
                cover = end;
                last_compute = an_is_compute(o->kind);
            }
        } else if (!opt_seen) {
            /* the time after the stage's last op is its wait for the optimizer step
             * (pre_opt_ns), no gap: that op has none */
            sp->stage[s].n_compute -= last_compute;
            last_compute = 0;
        }
        opt_seen |= o->kind == PP_AOP_OPT;
        first[s] = o->t0 < first[s] ? o->t0 : first[s];
        if (o->kind != PP_AOP_RECV_ACT && o->kind != PP_AOP_RECV_GRAD) {
            uint64_t e = o->kind == PP_AOP_SEND_ACT || o->kind == PP_AOP_SEND_GRAD
                             ? send_own_end(ops, n, i)
                             : o->t1;
            last[s] = e > last[s] ? e : last[s];
        }
        if (o->kind == PP_AOP_OPT) {
            if (sp->stage[s].pre_opt_ns < 0 && compute_end && compute_end <= o->t0) {
                sp->stage[s].pre_opt_ns = (double)(o->t0 - compute_end);
                o_lo = fmin(o_lo, (double)o->t0);
                e_lo = fmin(e_lo, (double)compute_end);
                e_hi = fmax(e_hi, (double)compute_end);
                n_opt++;
                if (late < 0 || compute_end > late_at) {
                    late = s;
                    late_at = compute_end;
                }
            }
        } else if ((an_is_compute(o->kind) || o->kind == PP_AOP_SEND_ACT ||
                    o->kind == PP_AOP_SEND_GRAD) &&
                   o->t1 > compute_end) {
            compute_end = o->t1; /* a send's own time is the cost file's send term */
        }
    }
    if (cur >= 0 && !opt_seen)
        sp->stage[cur].n_compute -= last_compute;
    /* Whether the optimizer steps waited for one another (pp_astep.opt_barrier): behind a
     * barrier (a gradient-norm all-reduce) no stage starts its optimizer step before the last
     * stage's work ended; without one, the stage done first starts its own while the others
     * still work. 1 when the earliest start comes after the latest end (less a tenth of the
     * ends' spread: clock skew, the barrier's own release), 0 otherwise, -1 with fewer than two
     * stages' optimizer steps or ends that are not apart (nothing to tell). */
    sp->opt_barrier = n_opt < 2 || e_hi - e_lo <= 0 ? -1 : o_lo >= e_hi - 0.1 * (e_hi - e_lo);
    if (late >= 0)
        sp->stage[late].last_to_opt = 1;
    int latest = -1;
    for (int s = 0; s < S; s++)
        if (last[s] > first[s] && (latest < 0 || last[s] > last[latest]))
            latest = s;
    if (latest >= 0)
        sp->stage[latest].last_end = 1;
    const bucket *nb = b->step < INT64_MAX ? bucket_find(st, b->step + 1) : NULL;
    if (!nb)
        return;
    /* the next step's start on each stage: its ranges' earliest start (first[] reused as the
     * span) */
    for (int s = 0; s < S; s++)
        first[s] = last[s] > first[s] ? last[s] - first[s] : UINT64_MAX;
    for (int s = 0; s < S; s++)
        last[s] = UINT64_MAX;
    const step_range *rg = nb->ranges.data;
    for (size_t i = 0; i < nb->ranges.n; i++)
        if (rg[i].stage >= 0 && rg[i].stage < S && rg[i].t0 < last[rg[i].stage])
            last[rg[i].stage] = rg[i].t0;
    for (int s = 0; s < S; s++) {
        if (first[s] == UINT64_MAX || last[s] == UINT64_MAX || bd[s] == UINT64_MAX ||
            last[s] <= bd[s])
            continue;
        double out = (double)(last[s] - bd[s]) - (double)first[s];
        sp->stage[s].outside_ns = out > 0 ? out : 0;
    }
}

typedef struct span {
    int32_t stage;
    uint64_t t0, t1;
} span;

static int span_cmp(const void *x, const void *y)
{
    const span *a = x, *b = y;
    if (a->stage != b->stage)
        return a->stage < b->stage ? -1 : 1;
    return a->t0 < b->t0 ? -1 : a->t0 > b->t0;
}

/* The stages' all-reduce time that their compute does not hide (into sp's allreduce_ns): the
 * union of each stage's all-reduce ranges less its overlap with the union of the stage's
 * compute ops. A collective run on a thread of its own while the stage computes (DDP's
 * buckets during the backward) is waited for only where it outlasts the compute; one run after
 * the schedule (pptrain's) counts whole. 0 when out of memory (the sum is used then). */
static int exposed_allreduce(pp_astep *sp, const bucket *b, int S)
{
    const ar_range *ar = b->allred.data;
    const pp_aop *op = b->ops.data;
    size_t na = 0, nc = 0;
    span *a = malloc((b->allred.n ? b->allred.n : 1) * sizeof *a);
    span *c = malloc((b->ops.n ? b->ops.n : 1) * sizeof *c);
    if (!a || !c) {
        free(a);
        free(c);
        return 0;
    }
    for (size_t i = 0; i < b->allred.n; i++)
        if (ar[i].stage >= 0 && ar[i].stage < S && ar[i].t1 >= ar[i].t0)
            a[na++] = (span){ar[i].stage, ar[i].t0, ar[i].t1};
    for (size_t i = 0; i < b->ops.n; i++)
        if (pp_aop_is_compute(op[i].kind) && op[i].stage >= 0 && op[i].stage < S &&
            op[i].t1 > op[i].t0)
            c[nc++] = (span){op[i].stage, op[i].t0, op[i].t1};
    qsort(a, na, sizeof *a, span_cmp);
    qsort(c, nc, sizeof *c, span_cmp);
    size_t j = 0;
    for (size_t i = 0; i < na;) {
        /* one merged all-reduce interval [u0, u1) of stage s */
        int32_t s = a[i].stage;
        uint64_t u0 = a[i].t0, u1 = a[i].t1;
        for (i++; i < na && a[i].stage == s && a[i].t0 <= u1; i++)
            u1 = a[i].t1 > u1 ? a[i].t1 : u1;
        while (j < nc && (c[j].stage < s || (c[j].stage == s && c[j].t1 <= u0)))
            j++;
        double hidden = 0;
        uint64_t covered = u0; /* compute ops may overlap each other: count each time once */
        for (size_t k = j; k < nc && c[k].stage == s && c[k].t0 < u1; k++) {
            uint64_t lo = c[k].t0 > covered ? c[k].t0 : covered;
            uint64_t hi = c[k].t1 < u1 ? c[k].t1 : u1;
            if (hi > lo) {
                hidden += (double)(hi - lo);
                covered = hi;
            }
        }
        sp->stage[s].allreduce_ns += (double)(u1 - u0) - hidden;
    }
    free(a);
    free(c);
    return 1;
}

/* Data-parallel all-reduce: communication outside the pipeline's schedule. */
static void step_allreduce(state *st, pp_astep *sp, const bucket *b, int S)
{
    const ar_range *ar = b->allred.data;
    double *ar_bytes = calloc((size_t)S, sizeof(double));
    int exposed = b->allred.n && exposed_allreduce(sp, b, S);
    for (size_t i = 0; i < b->allred.n; i++) {
        if (ar[i].stage < 0 || ar[i].stage >= S || ar[i].t1 < ar[i].t0)
            continue;
        if (!exposed)
            sp->stage[ar[i].stage].allreduce_ns += (double)(ar[i].t1 - ar[i].t0);
        if (ar_bytes)
            ar_bytes[ar[i].stage] += (double)ar[i].bytes;
    }
    for (int s = 0; s < S && b->allred.n; s++) {
        stage_acc *sa = &((stage_acc *)st->stage_acc.data)[s];
        an_series_add(&sa->allred, sp->stage[s].allreduce_ns);
        sa->allred_bytes += ar_bytes ? ar_bytes[s] : 0;
    }
    free(ar_bytes);
}

/* Idle time and bubble of each stage and of the step, the imbalance, the step time series. */
static void step_idle(state *st, pp_astep *sp, int S)
{
    double idle_sum = 0, busy_max = 0, busy_sum = 0;
    for (int s = 0; s < S; s++) {
        pp_stage_step *ss = &sp->stage[s];
        ss->idle_ns = sp->step_ns - ss->busy_ns;
        ss->bubble_ratio = ss->idle_ns / sp->step_ns;
        idle_sum += ss->idle_ns;
        busy_sum += ss->busy_ns;
        busy_max = ss->busy_ns > busy_max ? ss->busy_ns : busy_max;
    }
    sp->bubble_ratio = idle_sum / (S * sp->step_ns);
    st->bubble_sum += sp->bubble_ratio;
    if (busy_sum > 0)
        st->imbalance_sum += busy_max / (busy_sum / S);
    an_series_add(&st->step_series, sp->step_ns);
}

/* The step's per-stage numbers into the stages' sums over steps, and its culprit's vote. */
static void step_accumulate(state *st, const pp_astep *sp, int S)
{
    for (int s = 0; s < S; s++) {
        stage_acc *sa = &((stage_acc *)st->stage_acc.data)[s];
        const pp_stage_step *ss = &sp->stage[s];
        sa->n++;
        sa->busy += ss->busy_ns;
        sa->idle += ss->idle_ns;
        sa->fill += ss->fill_drain_ns;
        sa->imb += ss->imbalance_ns;
        sa->xfer += ss->transfer_ns;
        sa->ar += ss->allreduce_ns;
        if (sp->culprit >= 0) {
            sa->culprit_votes.elem = sizeof(int);
            while (sa->culprit_votes.n <= (size_t)sp->culprit)
                vec_push(&sa->culprit_votes);
            if (sa->culprit_votes.n > (size_t)sp->culprit)
                ((int *)sa->culprit_votes.data)[sp->culprit]++;
        }
    }
}

/* The step's layer ops into the layers' series. */
static void step_layers(state *st, const bucket *b)
{
    const pp_aop *lo = b->layer_ops.data;
    for (size_t i = 0; i < b->layer_ops.n; i++) {
        int L = lo[i].chunk; /* layer index */
        if (L < 0 || L > 1 << 20)
            continue;
        while (st->layers.n <= (size_t)L)
            if (!vec_push(&st->layers))
                break;
        if (st->layers.n <= (size_t)L)
            continue;
        layer_acc *la = &((layer_acc *)st->layers.data)[L];
        la->used = 1;
        double d = (double)(lo[i].t1 - lo[i].t0);
        if (lo[i].kind == PP_AOP_FWD)
            an_series_add(&la->fwd, d);
        else if (lo[i].kind == PP_AOP_BWD)
            an_series_add(&la->bwd, d);
        else
            an_series_add(&la->bwdw, d);
    }
}

/* The numbers of an analyzed step (docs/metrics.md); bd[4 S]: its stages' starts and ends,
 * then scratch. */
static void step_numbers(state *st, bucket *b, uint64_t *bd, int S)
{
    uint64_t t0, t1;
    if (!step_window(b, &t0, &t1))
        return;
    pp_aop *ops = b->ops.data;
    size_t n = b->ops.n;
    pp_aop *tmp = n ? sort_scratch(st, n * sizeof *ops) : NULL;
    if (n && !tmp)
        return;
    if (n)
        sort_ops(ops, n, tmp, S);
    pp_astep *sp = step_new(st, b, t0, t1, bd, S);
    double kind_sum[PP_AOP_COUNT] = {0}, kind_n[PP_AOP_COUNT] = {0};
    if (!sp || !step_op_times(st, sp, ops, n, S, kind_sum, kind_n))
        return;
    /* the transfers' pairs, and for each matched receive when its message was handed over (its
     * send's own part ended) and its stage's last compute op inside it, found once: step_outside's
     * gaps and step_links' times use them (rx lives in the sorts' scratch: nothing sorts until
     * step_links is done) */
    const size_t *match = an_match_transfers(st, ops, n) ? st->match.data : NULL;
    recv_at *rx = match && n ? sort_scratch(st, n * sizeof *rx) : NULL;
    if (rx) {
        for (size_t i = 0; i < n; i++)
            rx[i] = (recv_at){UINT64_MAX, 0};
        for (size_t i = 0; i < n; i++)
            if (match[i] != SIZE_MAX)
                rx[match[i]] = (recv_at){send_own_end(ops, n, i),
                                         an_recv_overlapped_end(ops, n, match[i])};
    }
    step_outside(st, sp, b, ops, n, rx, bd, S);
    step_allreduce(st, sp, b, S);
    step_idle(st, sp, S);
    /* the decomposition: replay the step's own lists (bubble.c) */
    double means[PP_AOP_COUNT];
    for (int k = 0; k < PP_AOP_COUNT; k++)
        means[k] = kind_n[k] > 0 ? kind_sum[k] / kind_n[k] : 0.0;
    if (an_step_decompose(sp, ops, n, S, an_placement(st), means))
        st->n_decomp++;
    else if (!strstr(st->a->warnings, "could not be replayed"))
        an_warn(st->a, "step %lld: its ranges could not be replayed (partial data?); no bubble "
                       "decomposition for it",
                (long long)b->step);
    step_accumulate(st, sp, S);
    step_links(st, ops, n, match, rx);
    step_layers(st, b);
    keep_ops(st, b);
}

void an_finalize(state *st, bucket *b)
{
    pp_analysis *a = st->a;
    int S = an_state_stages(st);
    uint64_t *bd = NULL; /* [4 S]: the stages' starts and ends of this step, scratch */
    pp_aop *ops = b->ops.data; /* a dialect's transfers: their peers now that the stages are */
    for (size_t i = 0; i < b->ops.n && S > 0; i++)
        if (ops[i].peer == AN_PEER_LATE)
            ops[i].peer = an_implied_peer(st, ops[i].kind, ops[i].stage, ops[i].chunk, S);
    if (b->step > st->last_finalized)
        st->last_finalized = b->step;
    if (b->ranges.n && S > 0 && (bd = malloc(4 * sizeof *bd * (size_t)S)) != NULL)
        stage_bounds(b, bd, bd + S, S);
    if (step_wanted(st, b->step) && b->ranges.n && S > 0 && bd) {
        if (a->warmup_skipped < st->o->warmup)
            a->warmup_skipped++;
        else
            step_numbers(st, b, bd, S);
    }
    remember_bounds(st, bd, S, b->step);
    free(bd);
    b->ops.n = b->layer_ops.n = b->ranges.n = b->allred.n = 0;
    b->used = 0;
}

/* The steps into a: every step's stage[] widened to S entries (zeros for stages first seen after
 * it), and the means over steps. */
static void results_steps(state *st, int S)
{
    pp_analysis *a = st->a;
    pp_astep *sps = st->steps.data;
    const int *sps_S = st->steps_S.data;
    for (size_t i = 0; i < st->steps.n; i++) {
        if (i < st->steps_S.n && sps_S[i] >= S)
            continue;
        int had = i < st->steps_S.n ? sps_S[i] : 0;
        pp_stage_step *w = pp_realloc_array(sps[i].stage, (size_t)S, sizeof *w);
        if (!w) {
            for (size_t k = i; k < st->steps.n; k++)
                free(sps[k].stage);
            st->steps.n = i; /* out of memory: the steps up to here */
            an_warn(a, "out of memory widening the steps to %d stages: %zu step(s) kept", S, i);
            break;
        }
        memset(w + had, 0, (size_t)(S - had) * sizeof *w);
        for (int s = had; s < S; s++)
            w[s].outside_ns = w[s].pre_opt_ns = -1;
        sps[i].stage = w;
    }
    a->steps = vec_take(&st->steps, &a->n_steps);
    a->step_ns = an_series_stats(&st->step_series);
    if (a->n_steps) {
        a->bubble_ratio = st->bubble_sum / (double)a->n_steps;
        a->imbalance = st->imbalance_sum / (double)a->n_steps;
        double secs = a->step_ns.mean * 1e-9;
        if (secs > 0) {
            a->samples_per_s = a->samples_per_step / secs;
            a->tokens_per_s = a->tokens_per_step / secs;
        }
    }
}

/* One stage's numbers over the analyzed steps. */
static void results_stage(const state *st, int s, pp_astage *o)
{
    const pp_analysis *a = st->a;
    o->stage = s;
    o->imbalance_culprit = -1;
    if ((size_t)s >= st->stage_acc.n)
        return;
    stage_acc *sa = &((stage_acc *)st->stage_acc.data)[s];
    o->fwd_ns = an_series_stats(&sa->fwd);
    o->bwd_ns = an_series_stats(&sa->bwd);
    o->bwd_input_ns = an_series_stats(&sa->bwd_in);
    o->bwd_weight_ns = an_series_stats(&sa->bwd_w);
    o->opt_ns = an_series_stats(&sa->opt);
    o->allreduce_ns = an_series_stats(&sa->allred);
    /* the reservoirs themselves are handed over: the op-duration distribution (pp_astage) */
    series *kept[PP_ASTAGE_N_SAMPLES] = {&sa->fwd, &sa->bwd, &sa->bwd_in, &sa->bwd_w, &sa->opt};
    for (int k = 0; k < PP_ASTAGE_N_SAMPLES; k++) {
        o->sample[k] = kept[k]->res;
        o->n_sample[k] = (uint32_t)kept[k]->n_res;
        kept[k]->res = NULL;
        kept[k]->n_res = kept[k]->cap_res = 0;
    }
    if (sa->n_chunk > 0 && (o->chunk_ns = calloc((size_t)sa->n_chunk * 4, sizeof *o->chunk_ns))) {
        o->n_chunk = sa->n_chunk;
        for (int k = 0; k < sa->n_chunk * 4; k++)
            o->chunk_ns[k] = an_series_stats(&sa->chunk_ops[k]);
    }
    if (o->allreduce_ns.count)
        o->allreduce_bytes = sa->allred_bytes / (double)o->allreduce_ns.count;
    /* bus bandwidth as nccl-tests defines it for all-reduce: 2 (n - 1) / n x bytes / time */
    if (o->allreduce_ns.median > 0 && a->dp > 1)
        o->allreduce_busbw_GBps =
            o->allreduce_bytes * 2.0 * (a->dp - 1) / a->dp / o->allreduce_ns.median;
    if (sa->n) {
        o->busy_ns = sa->busy / sa->n;
        o->idle_ns = sa->idle / sa->n;
        o->fill_drain_ns = sa->fill / sa->n;
        o->imbalance_ns = sa->imb / sa->n;
        o->transfer_ns = sa->xfer / sa->n;
        o->allreduce_mean_ns = sa->ar / sa->n;
        o->bubble_ratio = a->step_ns.mean > 0 ? o->idle_ns / a->step_ns.mean : 0;
    }
    const int *votes = sa->culprit_votes.data;
    for (size_t k = 0; k < sa->culprit_votes.n; k++)
        if (votes[k] > 0 && (o->imbalance_culprit < 0 || votes[k] > votes[o->imbalance_culprit]))
            o->imbalance_culprit = (int)k;
}

/* The links and layers into a. */
static void results_links_layers(state *st)
{
    pp_analysis *a = st->a;
    a->n_links = st->links.n;
    a->links = calloc(a->n_links ? a->n_links : 1, sizeof(pp_alink));
    for (size_t i = 0; a->links && i < a->n_links; i++) {
        link_acc *l = &((link_acc *)st->links.data)[i];
        a->links[i] = l->l;
        /* The median over messages: a receiver descheduled when its data arrived (an
         * oversubscribed CPU) inflates single transfers, not the median. */
        a->links[i].bandwidth_GBps = an_series_stats(&l->bw).median;
        a->links[i].latency_ns = an_series_stats(&l->lat);
        a->links[i].send_time_ns = an_series_stats(&l->snd);
        a->links[i].recv_time_ns = an_series_stats(&l->rcv);
        /* the reservoir itself is handed over: the transfers' variation */
        a->links[i].sample = l->lat.res;
        a->links[i].n_sample = (uint32_t)l->lat.n_res;
        l->lat.res = NULL;
        l->lat.n_res = l->lat.cap_res = 0;
        a->links[i].send_sample = l->snd.res;
        a->links[i].n_send_sample = (uint32_t)l->snd.n_res;
        l->snd.res = NULL;
        l->snd.n_res = l->snd.cap_res = 0;
        a->links[i].recv_sample = l->rcv.res;
        a->links[i].n_recv_sample = (uint32_t)l->rcv.n_res;
        l->rcv.res = NULL;
        l->rcv.n_res = l->rcv.cap_res = 0;
    }
    size_t nl = 0;
    for (size_t i = 0; i < st->layers.n; i++)
        nl += ((layer_acc *)st->layers.data)[i].used || ((layer_acc *)st->layers.data)[i].has_info;
    a->layers = calloc(nl ? nl : 1, sizeof(pp_alayer));
    for (size_t i = 0; a->layers && i < st->layers.n; i++) {
        layer_acc *la = &((layer_acc *)st->layers.data)[i];
        if (!la->used && !la->has_info)
            continue;
        pp_alayer *o = &a->layers[a->n_layers++];
        o->layer = (int32_t)i;
        snprintf(o->name, sizeof o->name, "%s", la->name);
        o->fwd_ns = an_series_stats(&la->fwd);
        o->bwd_ns = an_series_stats(&la->bwd);
        o->bwd_weight_ns = an_series_stats(&la->bwdw);
        o->has_info = la->has_info;
        o->param_bytes = la->param_bytes;
        o->activation_bytes = la->activation_bytes;
        o->has_kept = la->has_kept;
        o->kept_bytes = la->kept_bytes;
        o->input_bytes = la->input_bytes;
    }
}

void an_results(state *st)
{
    pp_analysis *a = st->a;
    int S = an_state_stages(st);
    a->S = S;
    a->replica = st->o->replica;
    results_steps(st, S);
    a->stages = calloc((size_t)(S > 0 ? S : 1), sizeof(pp_astage));
    int overlapped = -1;
    for (int s = 0; a->stages && s < S; s++) {
        results_stage(st, s, &a->stages[s]);
        if (overlapped < 0 && a->stages[s].busy_ns > 1.01 * a->step_ns.mean && a->step_ns.mean > 0)
            overlapped = s;
    }
    /* a stage busier than the step: its compute ranges overlap each other (two processes'
     * traces in one file, or two ranks read as one stage), so no idle time is left to share */
    if (overlapped >= 0)
        an_warn(a, "stage %d computes %.3f ms a step, longer than the step itself (%.3f ms): its "
                   "compute ranges overlap each other (two processes or ranks read as one "
                   "stage?); its idle time and bubble are not meaningful",
                overlapped, a->stages[overlapped].busy_ns * 1e-6, a->step_ns.mean * 1e-6);
    results_links_layers(st);
    a->ops = vec_take(&st->kept_ops, &a->n_ops);
    a->layer_ops = vec_take(&st->kept_layer_ops, &a->n_layer_ops);
    a->allreduce_ops = vec_take(&st->kept_ar_ops, &a->n_allreduce_ops);
}

