/* gpu.c: projection of GPU activity onto the pipeline's NVTX ranges, and the GPU-time metrics
 * (pp_gpu.h, docs/metrics.md "GPU time"). Timestamp containment: a GPU record's launching API
 * call (by correlation id) ran on some thread at some time; the pipeline range open on that
 * thread at that time launched the work. */
#include "pp_gpu.h"

#include <stdlib.h>
#include <string.h>

typedef struct grange {
    int32_t file;
    uint32_t tid;
    int64_t step;
    int32_t stage, kind;
    uint64_t t0, t1;
    double gpu_ns;
    uint64_t first; /* earliest start of its GPU work, UINT64_MAX none */
} grange;

typedef struct gapi {
    int32_t file;
    uint32_t corr, tid;
    uint64_t start;
} gapi;

typedef struct grec {
    int32_t file;
    uint32_t device, corr, stream;
    uint64_t start, end;
} grec;

typedef struct gnccl {
    int32_t file;
    pp_rec_nccl r;
} gnccl;

typedef struct gvec {
    void *v;
    size_t n, cap;
} gvec;

struct pp_gpu_proj {
    gvec ranges, api, recs, nccl;
    int oom;
    int keep;
    int64_t keep_lo, keep_hi;
    uint64_t keep_t0, keep_t1;
    gvec spans; /* pp_gpu_span */
};

void pp_gpu_proj_keep(pp_gpu_proj *p, int64_t lo, int64_t hi, uint64_t t0, uint64_t t1)
{
    p->keep = 1;
    p->keep_lo = lo;
    p->keep_hi = hi;
    p->keep_t0 = t0;
    p->keep_t1 = t1;
}

static int cmp_span(const void *a, const void *b)
{
    const pp_gpu_span *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static void *gpush(pp_gpu_proj *p, gvec *a, size_t size)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        void *v = pp_realloc_array(a->v, cap, size);
        if (!v) {
            p->oom = 1;
            return NULL;
        }
        a->v = v;
        a->cap = cap;
    }
    return (char *)a->v + a->n++ * size;
}

pp_status pp_gpu_proj_create(pp_gpu_proj **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? PP_OK : PP_ERR(PP_ERR_NOMEM, "out of memory for the GPU projection");
}

void pp_gpu_proj_destroy(pp_gpu_proj *p)
{
    if (!p)
        return;
    free(p->ranges.v);
    free(p->api.v);
    free(p->recs.v);
    free(p->nccl.v);
    free(p->spans.v);
    free(p);
}

void pp_gpu_proj_range(pp_gpu_proj *p, int file, uint32_t tid, int64_t step, int stage,
                       pp_gpu_op kind, uint64_t t0, uint64_t t1)
{
    grange *r = gpush(p, &p->ranges, sizeof *r);
    if (r)
        *r = (grange){.file = file, .tid = tid, .step = step, .stage = stage, .kind = (int)kind,
                      .t0 = t0, .t1 = t1, .first = UINT64_MAX};
}

void pp_gpu_proj_api(pp_gpu_proj *p, int file, const pp_rec_api *a)
{
    gapi *x = gpush(p, &p->api, sizeof *x);
    if (x)
        *x = (gapi){.file = file, .corr = a->correlation, .tid = a->thread, .start = a->start};
}

void pp_gpu_proj_gpu(pp_gpu_proj *p, int file, const pp_rec_gpu *g)
{
    if (g->kind == PP_GPU_SYNC || g->end < g->start)
        return; /* a wait is not work */
    grec *x = gpush(p, &p->recs, sizeof *x);
    if (x)
        *x = (grec){.file = file, .device = g->device, .corr = g->correlation,
                    .stream = g->stream, .start = g->start, .end = g->end};
}

void pp_gpu_proj_nccl(pp_gpu_proj *p, int file, const pp_rec_nccl *n)
{
    gnccl *x = gpush(p, &p->nccl, sizeof *x);
    if (x) {
        x->file = file;
        x->r = *n;
    }
}

static int cmp_range(const void *a, const void *b)
{
    const grange *x = a, *y = b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    return (x->t0 > y->t0) - (x->t0 < y->t0);
}

static int cmp_api(const void *a, const void *b)
{
    const gapi *x = a, *y = b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return (x->corr > y->corr) - (x->corr < y->corr);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct ivl {
    uint32_t device;
    uint64_t start, end;
} ivl;

static int cmp_ivl(const void *a, const void *b)
{
    const ivl *x = a, *y = b;
    if (x->device != y->device)
        return x->device < y->device ? -1 : 1;
    return (x->start > y->start) - (x->start < y->start);
}

static const gapi *find_api(const pp_gpu_proj *p, int file, uint32_t corr)
{
    const gapi *a = p->api.v;
    size_t lo = 0, hi = p->api.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = a[mid].file != file ? (a[mid].file < file ? -1 : 1)
                                    : (a[mid].corr > corr) - (a[mid].corr < corr);
        if (c == 0)
            return &a[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* The range of (file, tid) open at t: the last one starting at or before t, if it is still
 * open at t. */
static grange *find_range(pp_gpu_proj *p, int file, uint32_t tid, uint64_t t)
{
    grange *r = p->ranges.v;
    size_t lo = 0, hi = p->ranges.n;
    while (lo < hi) { /* first index with key > (file, tid, t) */
        size_t mid = lo + (hi - lo) / 2;
        int le = r[mid].file < file ||
                 (r[mid].file == file && (r[mid].tid < tid || (r[mid].tid == tid && r[mid].t0 <= t)));
        if (le)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return NULL;
    grange *c = &r[lo - 1];
    if (c->file != file || c->tid != tid || c->t1 < t)
        return NULL;
    /* ranges opened at the same instant (a framework's transfer and compute ranges back to
     * back): the compute range launched the work */
    for (size_t k = lo - 1; k-- > 0 && r[k].file == file && r[k].tid == tid && r[k].t0 == c->t0;)
        if (c->kind == PP_GOP_COMM && r[k].kind != PP_GOP_COMM && r[k].t1 >= t)
            c = &r[k];
    return c;
}

static long step_index(const int64_t *steps, size_t n, int64_t step)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (steps[mid] == step)
            return (long)mid;
        if (steps[mid] < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static double median_of(double *v, size_t n)
{
    if (!n)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void pp_gpu_result_free(pp_gpu_result *r)
{
    if (!r)
        return;
    free(r->stages);
    free(r->devices);
    free(r->links);
    free(r->spans);
    memset(r, 0, sizeof *r);
}

/* Whether t lies in one of the (sorted, disjoint) windows. */
static int in_windows(const uint64_t *w0, const uint64_t *w1, size_t n, uint64_t t)
{
    size_t lo = 0, hi = n;
    while (lo < hi) { /* first window starting after t */
        size_t mid = lo + (hi - lo) / 2;
        if (w0[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && t <= w1[lo - 1];
}

static pp_status project(pp_gpu_proj *p, const int64_t *steps, const uint64_t *win0,
                         const uint64_t *win1, size_t n_steps, int S, pp_gpu_result *out,
                         double *busy, uint64_t *span0, uint64_t *span1, ivl *ivls,
                         size_t *n_ivls, double *work)
{
    const grec *g = p->recs.v;
    for (size_t i = 0; i < p->recs.n; i++) {
        if (in_windows(win0, win1, n_steps, g[i].start))
            *work += (double)(g[i].end - g[i].start);
        const gapi *a = find_api(p, g[i].file, g[i].corr);
        grange *r = a ? find_range(p, a->file, a->tid, a->start) : NULL;
        if (!r) {
            out->unattributed++;
            continue;
        }
        long si = step_index(steps, n_steps, r->step);
        if (si < 0 || r->stage < 0 || r->stage >= S) {
            out->outside_steps++;
            continue;
        }
        out->projected++;
        double d = (double)(g[i].end - g[i].start);
        r->gpu_ns += d;
        if (g[i].start < r->first)
            r->first = g[i].start;
        busy[(size_t)si * S * PP_GOP_COUNT + (size_t)r->stage * PP_GOP_COUNT + (size_t)r->kind] += d;
        if (g[i].start < span0[si])
            span0[si] = g[i].start;
        if (g[i].end > span1[si])
            span1[si] = g[i].end;
        ivls[(*n_ivls)++] = (ivl){g[i].device, g[i].start, g[i].end};
        if (p->keep && r->step >= p->keep_lo && r->step <= p->keep_hi) {
            pp_gpu_span *sp = gpush(p, &p->spans, sizeof *sp);
            if (sp)
                *sp = (pp_gpu_span){.file = g[i].file, .device = g[i].device,
                                    .stream = g[i].stream, .stage = r->stage, .kind = r->kind,
                                    .step = r->step, .start = g[i].start, .end = g[i].end,
                                    .peer = -1};
        }
    }
    /* NCCL operations' GPU spans in the kept window */
    const gnccl *c = p->nccl.v;
    for (size_t i = 0; p->keep && i < p->nccl.n; i++) {
        const pp_rec_nccl *n = &c[i].r;
        if (!n->timed || n->gpu_start < p->keep_t0 || n->gpu_start > p->keep_t1)
            continue;
        pp_gpu_span *sp = gpush(p, &p->spans, sizeof *sp);
        if (sp)
            *sp = (pp_gpu_span){.file = c[i].file, .stage = -1, .kind = n->func, .step = -1,
                                .start = n->gpu_start, .end = n->gpu_end, .nccl = 1,
                                .rank = n->rank, .peer = n->peer, .bytes = n->bytes};
    }
    if (p->oom)
        return PP_ERR(PP_ERR_NOMEM, "out of memory keeping GPU spans");
    return PP_OK;
}

static pp_status stage_metrics(pp_gpu_proj *p, const int64_t *steps, size_t n_steps, int S,
                               pp_gpu_result *out, const double *busy, const uint64_t *span0,
                               const uint64_t *span1)
{
    size_t nr = p->ranges.n;
    double *fwd = malloc((nr ? nr : 1) * sizeof *fwd), *bwd = malloc((nr ? nr : 1) * sizeof *bwd);
    double *lag = malloc((nr ? nr : 1) * sizeof *lag);
    if (!fwd || !bwd || !lag) {
        free(fwd), free(bwd), free(lag);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for GPU stage metrics");
    }
    const grange *r = p->ranges.v;
    size_t steps_with_work = 0;
    double span_sum = 0.0;
    for (size_t si = 0; si < n_steps; si++)
        if (span1[si] > span0[si]) {
            steps_with_work++;
            span_sum += (double)(span1[si] - span0[si]);
        }
    out->step_ns = steps_with_work ? span_sum / (double)steps_with_work : 0.0;
    double proj_total = 0.0;
    for (int s = 0; s < S; s++) {
        pp_gpu_stage *st = &out->stages[s];
        size_t nf = 0, nb = 0, nl = 0;
        for (size_t i = 0; i < nr; i++) {
            if (r[i].stage != s || r[i].gpu_ns <= 0 || step_index(steps, n_steps, r[i].step) < 0)
                continue;
            if (r[i].kind == PP_GOP_FWD)
                fwd[nf++] = r[i].gpu_ns;
            else if (r[i].kind == PP_GOP_BWD)
                bwd[nb++] = r[i].gpu_ns;
            if (r[i].kind != PP_GOP_COMM && r[i].first != UINT64_MAX && r[i].first >= r[i].t0)
                lag[nl++] = (double)(r[i].first - r[i].t0);
        }
        st->fwd_ranges = nf;
        st->bwd_ranges = nb;
        st->fwd_median_ns = median_of(fwd, nf);
        st->bwd_median_ns = median_of(bwd, nb);
        st->launch_lag_ns = median_of(lag, nl);
        double bubble = 0.0;
        for (size_t si = 0; si < n_steps; si++) {
            if (span1[si] <= span0[si])
                continue;
            double b = 0.0;
            for (int k = 0; k < PP_GOP_COUNT; k++) {
                double x = busy[si * (size_t)S * PP_GOP_COUNT + (size_t)s * PP_GOP_COUNT + (size_t)k];
                st->kind_ns[k] += x;
                b += x;
            }
            st->busy_ns += b;
            bubble += 1.0 - b / (double)(span1[si] - span0[si]);
        }
        if (steps_with_work) {
            st->busy_ns /= (double)steps_with_work;
            for (int k = 0; k < PP_GOP_COUNT; k++)
                st->kind_ns[k] /= (double)steps_with_work;
            st->bubble_ratio = bubble / (double)steps_with_work;
        }
        proj_total += st->kind_ns[PP_GOP_FWD] + st->kind_ns[PP_GOP_BWD] + st->kind_ns[PP_GOP_OPT];
    }
    out->projected_ns = proj_total;
    free(fwd), free(bwd), free(lag);
    return PP_OK;
}

static pp_status device_metrics(pp_gpu_result *out, ivl *iv, size_t n, size_t n_steps_work)
{
    if (n)
        qsort(iv, n, sizeof *iv, cmp_ivl);
    size_t nd = 0;
    for (size_t i = 0; i < n; i++)
        nd += i == 0 || iv[i].device != iv[i - 1].device;
    out->devices = calloc(nd ? nd : 1, sizeof *out->devices);
    if (!out->devices)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for GPU device metrics");
    double busy_all = 0.0;
    for (size_t i = 0; i < n;) {
        pp_gpu_device *d = &out->devices[out->n_devices++];
        d->device = iv[i].device;
        uint64_t first = iv[i].start, last = iv[i].end, cur0 = iv[i].start, cur1 = iv[i].end;
        size_t j = i;
        for (; j < n && iv[j].device == d->device; j++) {
            d->records++;
            if (iv[j].end > last)
                last = iv[j].end;
            if (iv[j].start > cur1) { /* a gap: close the merged interval */
                d->busy_ns += (double)(cur1 - cur0);
                cur0 = iv[j].start;
                cur1 = iv[j].end;
            } else if (iv[j].end > cur1) {
                cur1 = iv[j].end;
            }
        }
        d->busy_ns += (double)(cur1 - cur0);
        d->span_ns = (double)(last - first);
        d->utilisation = d->span_ns > 0 ? d->busy_ns / d->span_ns : 0.0;
        busy_all += d->busy_ns;
        i = j;
    }
    out->device_busy_ns = n_steps_work ? busy_all / (double)n_steps_work : 0.0;
    return PP_OK;
}

typedef struct link_key {
    int src, dst;
    double *bw;
    size_t n_bw;
    pp_gpu_link l;
} link_key;

static pp_status nccl_links(pp_gpu_proj *p, pp_gpu_result *out)
{
    const gnccl *c = p->nccl.v;
    size_t n = p->nccl.n;
    out->nccl_ops = n;
    link_key *k = calloc(n ? n : 1, sizeof *k);
    double *bw = malloc((n ? n : 1) * sizeof *bw);
    if (!k || !bw) {
        free(k), free(bw);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for NCCL links");
    }
    size_t nk = 0, nbw = 0;
    /* sends define the links (each message once); a receive without its send's trace still
     * counts bytes on the link it names */
    for (size_t i = 0; i < n; i++) {
        const pp_rec_nccl *r = &c[i].r;
        if (r->func != PP_NCCL_SEND || r->peer < 0)
            continue;
        size_t j = 0;
        while (j < nk && !(k[j].src == r->rank && k[j].dst == r->peer))
            j++;
        if (j == nk) {
            k[nk].src = k[nk].l.src = r->rank;
            k[nk].dst = k[nk].l.dst = r->peer;
            nk++;
        }
        k[j].l.messages++;
        k[j].l.bytes += r->bytes;
        if (r->timed && r->gpu_end > r->gpu_start)
            k[j].l.timed++;
    }
    out->links = calloc(nk ? nk : 1, sizeof *out->links);
    if (!out->links) {
        free(k), free(bw);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for NCCL links");
    }
    for (size_t j = 0; j < nk; j++) {
        nbw = 0;
        for (size_t i = 0; i < n; i++) {
            const pp_rec_nccl *r = &c[i].r;
            if (r->func == PP_NCCL_SEND && r->rank == k[j].src && r->peer == k[j].dst &&
                r->timed && r->gpu_end > r->gpu_start)
                bw[nbw++] = (double)r->bytes / (double)(r->gpu_end - r->gpu_start);
        }
        k[j].l.algbw_GBps = median_of(bw, nbw);
        k[j].l.busbw_GBps = k[j].l.algbw_GBps; /* nccl-tests: busbw = algbw for send/recv */
        out->links[out->n_links++] = k[j].l;
    }
    free(k), free(bw);
    return PP_OK;
}

/* NCCL numbers a record's rank and peer within its communicator. Point-to-point messages often
 * go over 2-rank communicators (pptrain's NCCL transport has one per link and direction, PyTorch
 * one per pair of ranks), whose ranks are 0 and 1 whatever the stages. So a record's rank
 * becomes the stage of its process (the one stage of that trace file's pipeline ranges), and its
 * peer the stage of the process that holds the same communicator at the peer's rank (seen in
 * that process's own records). A record whose process, or whose peer's process, has no single
 * stage keeps the communicator's numbers (a pipeline-wide communicator, where they are the
 * stages, or a one-process job). */
static void nccl_ranks_as_stages(pp_gpu_proj *p)
{
    typedef struct member {
        uint64_t comm;
        int32_t rank, file;
    } member;
    gnccl *c = p->nccl.v;
    const grange *g = p->ranges.v;
    size_t n = p->nccl.n;
    int32_t n_files = 0;
    for (size_t i = 0; i < p->ranges.n; i++)
        if (g[i].file >= n_files)
            n_files = g[i].file + 1;
    for (size_t i = 0; i < n; i++)
        if (c[i].file >= n_files)
            n_files = c[i].file + 1;
    int32_t *stage = malloc((size_t)(n_files ? n_files : 1) * sizeof *stage);
    member *m = malloc((n ? n : 1) * sizeof *m);
    if (!n || !stage || !m) {
        free(stage), free(m);
        return;
    }
    for (int32_t f = 0; f < n_files; f++)
        stage[f] = -1; /* -1: none seen, -2: several */
    for (size_t i = 0; i < p->ranges.n; i++) {
        int32_t *s = &stage[g[i].file];
        if (g[i].stage < 0 || *s == -2)
            continue;
        *s = *s == -1 || *s == g[i].stage ? g[i].stage : -2;
    }
    size_t nm = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < nm && !(m[j].comm == c[i].r.comm && m[j].rank == c[i].r.rank))
            j++;
        if (j == nm)
            m[nm++] = (member){c[i].r.comm, c[i].r.rank, c[i].file};
    }
    for (size_t i = 0; i < n; i++) {
        pp_rec_nccl *r = &c[i].r;
        int32_t self = stage[c[i].file], peer = -1;
        if (self < 0)
            continue;
        if (r->peer >= 0) {
            size_t j = 0;
            while (j < nm && !(m[j].comm == r->comm && m[j].rank == r->peer))
                j++;
            if (j == nm || (peer = stage[m[j].file]) < 0)
                continue;
        }
        r->rank = self;
        if (r->peer >= 0)
            r->peer = peer;
    }
    free(stage), free(m);
}

pp_status pp_gpu_proj_finish(pp_gpu_proj *p, const int64_t *steps, const uint64_t *win0,
                             const uint64_t *win1, size_t n, int S, pp_gpu_result *out)
{
    memset(out, 0, sizeof *out);
    if (p->oom)
        return PP_ERR(PP_ERR_NOMEM, "out of memory collecting GPU records");
    nccl_ranks_as_stages(p);
    out->records = p->recs.n;
    out->api_calls = p->api.n;
    out->present = p->recs.n > 0 || p->nccl.n > 0;
    out->S = S > 0 ? S : 0;
    out->stages = calloc(out->S ? (size_t)out->S : 1, sizeof *out->stages);
    /* [step][stage][kind]: only with GPU records (without, a run of many steps and stages would
     * pay for a table of zeros); the size checked, steps and stages come from the trace */
    size_t cells = 1;
    if (out->present &&
        !pp_size_mul3(n ? n : 1, (size_t)(S > 0 ? S : 1), PP_GOP_COUNT, &cells)) {
        pp_gpu_result_free(out);
        return PP_ERR(PP_ERR_NOMEM, "GPU projection: %zu steps x %d stages is too large", n, S);
    }
    double *busy = calloc(cells, sizeof *busy);
    uint64_t *span0 = pp_realloc_array(NULL, n ? n : 1, sizeof *span0);
    uint64_t *span1 = calloc(n ? n : 1, sizeof *span1);
    ivl *iv = pp_realloc_array(NULL, p->recs.n ? p->recs.n : 1, sizeof *iv);
    pp_status st = PP_OK;
    if (!out->stages || !busy || !span0 || !span1 || !iv) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory projecting %zu GPU records", p->recs.n);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        span0[i] = UINT64_MAX;
    if (p->ranges.n)
        qsort(p->ranges.v, p->ranges.n, sizeof(grange), cmp_range);
    if (p->api.n)
        qsort(p->api.v, p->api.n, sizeof(gapi), cmp_api);
    size_t n_iv = 0;
    double work = 0.0;
    if ((st = project(p, steps, win0, win1, n, out->S, out, busy, span0, span1, iv, &n_iv,
                      &work)) != PP_OK)
        goto done;
    out->work_ns = n ? work / (double)n : 0.0;
    if ((st = stage_metrics(p, steps, n, out->S, out, busy, span0, span1)) != PP_OK)
        goto done;
    size_t with_work = 0;
    for (size_t i = 0; i < n; i++)
        with_work += span1[i] > span0[i];
    if ((st = device_metrics(out, iv, n_iv, with_work)) != PP_OK)
        goto done;
    if ((st = nccl_links(p, out)) != PP_OK)
        goto done;
    if (p->spans.n) {
        qsort(p->spans.v, p->spans.n, sizeof(pp_gpu_span), cmp_span);
        out->spans = p->spans.v;
        out->n_spans = p->spans.n;
        p->spans.v = NULL;
        p->spans.n = p->spans.cap = 0;
    }
done:
    free(busy);
    free(span0);
    free(span1);
    free(iv);
    if (st != PP_OK)
        pp_gpu_result_free(out);
    return st;
}
