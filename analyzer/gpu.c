/* gpu.c: projection of GPU activity onto the pipeline's NVTX ranges, and the GPU-time metrics
 * (pp_gpu.h, docs/metrics.md "GPU time"). Timestamp containment: a GPU record's launching API
 * call (by correlation id) ran on some thread at some time; the pipeline range open on that
 * thread at that time launched the work.
 *
 * Streaming: the analyzed steps are known before the records arrive (the analyzer's GPU pass
 * runs after its host pass), so every projected record is reduced at once to per-step and
 * per-stage sums. What has to wait is the join itself: a GPU record reaches the trace after the
 * range that launched it has closed, in the CUPTI buffer its API record is in. Ranges and API
 * records are therefore kept for a window of the latest `window` ranges (2 x window API records)
 * of each file; pending GPU records are joined in batches, and a range that leaves the window
 * gives its per-range numbers (GPU time, launch lag) to the stage's order statistics. A record
 * whose range already left the window counts as `late`. */
#include "pp_gpu.h"
#include "stable_sort.h"

#include <stdlib.h>
#include <string.h>

enum {
    RESERVOIR = 4096,      /* samples of a stage's order statistics: exact up to this many */
    LINK_RESERVOIR = 1024, /* samples of a link's per-message bandwidth */
    MAX_LINKS = 4096,      /* (rank, peer) pairs tracked: a hostile trace cannot grow more */
    MAX_DEVICES = 1024,
    DEVICE_IVLS = 4096,    /* unmerged intervals per device before the oldest are retired */
    STREAM_SLOTS = 8192,   /* streams whose stage is learnt: a hostile trace cannot grow more */
    STREAM_PROBES = 64,
    STREAM_SHARED = -2,
    ADOPT_THREADS = 64     /* threads of a file looked at for a record's adopting range */
};

typedef struct grange {
    int32_t file;
    uint32_t tid;
    int64_t step;
    int32_t stage, kind;
    uint64_t t0, t1;
    uint64_t seq;   /* arrival number in its file: the window keeps the latest */
    double gpu_ns;
    uint64_t first; /* earliest start of its GPU work, UINT64_MAX none */
} grange;

typedef struct gapi {
    int32_t file;
    uint32_t corr, tid;
    uint64_t start;
    uint64_t seq;
} gapi;

typedef struct grec {
    int32_t file;
    uint32_t device, corr, stream;
    uint64_t start, end;
    uint64_t arrival; /* its number among the GPU records: an early one waits a window */
} grec;

typedef struct gvec {
    void *v;
    size_t n, cap;
} gvec;

/* Order statistics over a bounded uniform reservoir (deterministic replacement). */
typedef struct gseries {
    uint64_t count;
    double *res;
    size_t n_res, cap;
    uint64_t rng;
} gseries;

typedef struct gfile {
    uint64_t range_seq, api_seq, gpu_seq; /* arrivals so far */
    uint64_t evicted_t1;    /* latest end of a range that left the window */
} gfile;

typedef struct gdevice {
    uint32_t device;
    uint64_t records;
    uint64_t first, last;
    double busy_ns;         /* retired, merged */
    uint64_t frontier;      /* end of the retired part: later intervals count from here */
    gvec ivl;               /* ivl, not yet merged */
    size_t ivl_sorted;      /* how many of them, from the first, are merged (in order) */
} gdevice;

typedef struct ivl {
    uint64_t start, end;
} ivl;

typedef struct glink {
    int src, dst;
    uint64_t messages, bytes, timed;
    gseries bw;
} glink;

/* A stream's stage: the records projected through their launching thread say which stage a
 * (file, device, stream) works for; a stream seen working for two stages has none. */
typedef struct gstream {
    int32_t file;     /* -1: a free slot */
    uint32_t device, stream;
    int32_t stage;    /* STREAM_SHARED: seen for two stages */
} gstream;

typedef struct gstage {
    gseries fwd, bwd, lag;
    double kind_ns[PP_GOP_COUNT];
} gstage;

struct pp_gpu_proj {
    /* the analyzed steps */
    size_t n_steps;
    int64_t *steps;
    uint64_t *win0, *win1;
    int S;
    size_t window;
    /* the join's window */
    gvec ranges, api, pending;
    size_t ranges_sorted, api_sorted; /* how many of each, from the first, are in key order */
    void *sort_tmp;                    /* the join's merge space */
    size_t sort_tmp_bytes;
    gfile *files;
    size_t n_files;
    /* the reductions */
    double *busy;         /* [n_steps][S] */
    uint64_t *span0, *span1; /* [n_steps] */
    double work;
    gstage *stages;       /* [S] */
    gdevice *devices;
    size_t n_devices;
    glink *links;
    size_t n_links;
    uint64_t records, api_calls, projected, unattributed, outside, late, nccl_ops;
    uint64_t adopted, ambiguous;
    /* the stage each (file, device, stream) was seen working for, learnt from the records
     * projected through their launching thread (open addressing; STREAM_SLOTS at most) */
    gstream *streams;
    /* files that have sent ranges, API calls, GPU records: the join runs when the window holds
     * twice `window` of them per such file (4x for API calls), so that each join sorts the
     * window once for all files rather than once per file */
    size_t range_files, api_files, gpu_files;
    /* NCCL's communicator ranks as stages (pp_gpu_proj_nccl_stages) */
    int32_t *file_stage;
    size_t n_file_stage;
    pp_gpu_nccl_member *members;
    size_t n_members;
    int oom;
    int keep;
    int64_t keep_lo, keep_hi;
    uint64_t keep_t0, keep_t1;
    gvec spans; /* pp_gpu_span */
};

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

static void gseries_add(pp_gpu_proj *p, gseries *s, size_t cap, double x)
{
    if (!s->res) {
        s->res = malloc(cap * sizeof *s->res);
        if (!s->res) {
            p->oom = 1;
            return;
        }
        s->cap = cap;
        s->rng = 0x9e3779b97f4a7c15ull;
    }
    s->count++;
    if (s->n_res < s->cap) {
        s->res[s->n_res++] = x;
        return;
    }
    /* keep each of the count samples with probability cap / count */
    s->rng = s->rng * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t j = (s->rng >> 11) % s->count;
    if (j < s->cap)
        s->res[j] = x;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double gseries_median(gseries *s)
{
    size_t n = s->n_res;
    if (!n)
        return 0.0;
    qsort(s->res, n, sizeof *s->res, cmp_double);
    return n % 2 ? s->res[n / 2] : 0.5 * (s->res[n / 2 - 1] + s->res[n / 2]);
}

void pp_gpu_proj_keep(pp_gpu_proj *p, int64_t lo, int64_t hi, uint64_t t0, uint64_t t1)
{
    p->keep = 1;
    p->keep_lo = lo;
    p->keep_hi = hi;
    p->keep_t0 = t0;
    p->keep_t1 = t1;
}

pp_status pp_gpu_proj_create(pp_gpu_proj **out, const int64_t *steps, const uint64_t *win0,
                             const uint64_t *win1, size_t n, int S, size_t window)
{
    pp_gpu_proj *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the GPU projection");
    p->S = S > 0 ? S : 0;
    p->n_steps = n;
    p->window = window ? window : PP_GPU_WINDOW_RANGES;
    size_t ns = n ? n : 1, cells = 0;
    /* [step][stage]: steps and stages come from the trace, the size is checked */
    if (!pp_size_mul(ns, (size_t)(p->S ? p->S : 1), &cells)) {
        pp_gpu_proj_destroy(p);
        return PP_ERR(PP_ERR_NOMEM, "GPU projection: %zu steps x %d stages is too large", n, S);
    }
    p->steps = pp_alloc_array(ns, sizeof *p->steps);
    p->win0 = pp_alloc_array(ns, sizeof *p->win0);
    p->win1 = pp_alloc_array(ns, sizeof *p->win1);
    p->span0 = pp_alloc_array(ns, sizeof *p->span0);
    p->span1 = calloc(ns, sizeof *p->span1);
    p->busy = calloc(cells, sizeof *p->busy);
    p->stages = calloc(p->S ? (size_t)p->S : 1, sizeof *p->stages);
    p->streams = pp_alloc_array(STREAM_SLOTS, sizeof *p->streams);
    if (!p->steps || !p->win0 || !p->win1 || !p->span0 || !p->span1 || !p->busy || !p->stages ||
        !p->streams) {
        pp_gpu_proj_destroy(p);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the GPU projection of %zu steps", n);
    }
    if (n) {
        memcpy(p->steps, steps, n * sizeof *steps);
        memcpy(p->win0, win0, n * sizeof *win0);
        memcpy(p->win1, win1, n * sizeof *win1);
    }
    for (size_t i = 0; i < n; i++)
        p->span0[i] = UINT64_MAX;
    for (size_t i = 0; i < STREAM_SLOTS; i++)
        p->streams[i].file = -1;
    *out = p;
    return PP_OK;
}

void pp_gpu_proj_destroy(pp_gpu_proj *p)
{
    if (!p)
        return;
    free(p->steps);
    free(p->win0);
    free(p->win1);
    free(p->span0);
    free(p->span1);
    free(p->busy);
    for (int s = 0; p->stages && s < p->S; s++) {
        free(p->stages[s].fwd.res);
        free(p->stages[s].bwd.res);
        free(p->stages[s].lag.res);
    }
    free(p->stages);
    for (size_t i = 0; i < p->n_devices; i++)
        free(p->devices[i].ivl.v);
    free(p->devices);
    for (size_t i = 0; i < p->n_links; i++)
        free(p->links[i].bw.res);
    free(p->links);
    free(p->ranges.v);
    free(p->api.v);
    free(p->sort_tmp);
    free(p->pending.v);
    free(p->files);
    free(p->spans.v);
    free(p->file_stage);
    free(p->members);
    free(p->streams);
    free(p);
}

pp_status pp_gpu_proj_nccl_stages(pp_gpu_proj *p, const int32_t *stage_of_file, size_t n_files,
                                  const pp_gpu_nccl_member *members, size_t n_members)
{
    free(p->file_stage);
    free(p->members);
    p->file_stage = malloc((n_files ? n_files : 1) * sizeof *p->file_stage);
    p->members = malloc((n_members ? n_members : 1) * sizeof *p->members);
    p->n_file_stage = p->n_members = 0;
    if (!p->file_stage || !p->members)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for NCCL's communicators");
    if (n_files)
        memcpy(p->file_stage, stage_of_file, n_files * sizeof *stage_of_file);
    if (n_members)
        memcpy(p->members, members, n_members * sizeof *members);
    p->n_file_stage = n_files;
    p->n_members = n_members;
    return PP_OK;
}

static int32_t stage_of(const pp_gpu_proj *p, int32_t file)
{
    return file >= 0 && (size_t)file < p->n_file_stage ? p->file_stage[file] : -1;
}

/* r's communicator rank and peer as stages, where both are known (pp_gpu_proj_nccl_stages). */
static void nccl_as_stages(const pp_gpu_proj *p, int file, pp_rec_nccl *r)
{
    int32_t self = stage_of(p, file), peer = -1;
    if (self < 0)
        return;
    if (r->peer >= 0) {
        size_t j = 0;
        while (j < p->n_members && !(p->members[j].comm == r->comm && p->members[j].rank == r->peer))
            j++;
        if (j == p->n_members || (peer = stage_of(p, p->members[j].file)) < 0)
            return;
    }
    r->rank = self;
    if (r->peer >= 0)
        r->peer = peer;
}

static gfile *file_of(pp_gpu_proj *p, int file)
{
    if (file < 0)
        return NULL;
    if ((size_t)file >= p->n_files) {
        size_t n = (size_t)file + 1;
        gfile *f = realloc(p->files, n * sizeof *f);
        if (!f) {
            p->oom = 1;
            return NULL;
        }
        memset(f + p->n_files, 0, (n - p->n_files) * sizeof *f);
        p->files = f;
        p->n_files = n;
    }
    return &p->files[file];
}

static long step_index(const pp_gpu_proj *p, int64_t step)
{
    size_t lo = 0, hi = p->n_steps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->steps[mid] == step)
            return (long)mid;
        if (p->steps[mid] < step)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* Whether t lies in one of the analyzed steps' (sorted, disjoint) host windows. */
static int in_windows(const pp_gpu_proj *p, uint64_t t)
{
    size_t lo = 0, hi = p->n_steps;
    while (lo < hi) { /* first window starting after t */
        size_t mid = lo + (hi - lo) / 2;
        if (p->win0[mid] <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && t <= p->win1[lo - 1];
}

/* The window's keys: ranges by (file, tid, t0, seq), API calls by (file, corr, seq). */
static inline int range_less(const grange *x, const grange *y)
{
    if (x->file != y->file)
        return x->file < y->file;
    if (x->tid != y->tid)
        return x->tid < y->tid;
    if (x->t0 != y->t0)
        return x->t0 < y->t0;
    return x->seq < y->seq;
}

static inline int api_less(const gapi *x, const gapi *y)
{
    if (x->file != y->file)
        return x->file < y->file;
    if (x->corr != y->corr)
        return x->corr < y->corr;
    return x->seq < y->seq;
}

/* The window stays sorted from join to join (evict keeps the order), so a join sorts what
 * arrived since and merges it in: qsort of the whole window was a fifth of the analysis of a
 * trace with GPU records (bench_analyzer --gpu). */
DEFINE_STABLE_SORT(sort_ranges, grange, range_less)
DEFINE_SORTED_APPEND(append_ranges, grange, range_less, sort_ranges)
DEFINE_STABLE_SORT(sort_api, gapi, api_less)
DEFINE_SORTED_APPEND(append_api, gapi, api_less, sort_api)

/* Merge space for n elements of `size` bytes, kept from join to join; NULL when out of memory. */
static void *sort_space(pp_gpu_proj *p, size_t n, size_t size)
{
    size_t bytes = 0;
    if (!pp_size_mul(n ? n : 1, size, &bytes))
        return NULL;
    if (bytes > p->sort_tmp_bytes) {
        void *t = realloc(p->sort_tmp, bytes);
        if (!t)
            return NULL;
        p->sort_tmp = t;
        p->sort_tmp_bytes = bytes;
    }
    return p->sort_tmp;
}

/* Sorts the window's ranges and API calls; 0 when out of memory. */
static int window_sort(pp_gpu_proj *p)
{
    if (p->ranges_sorted < p->ranges.n) {
        grange *tmp = sort_space(p, p->ranges.n, sizeof(grange));
        if (!tmp)
            return 0;
        append_ranges(p->ranges.v, p->ranges.n, p->ranges_sorted, tmp);
        p->ranges_sorted = p->ranges.n;
    }
    if (p->api_sorted < p->api.n) {
        gapi *tmp = sort_space(p, p->api.n, sizeof(gapi));
        if (!tmp)
            return 0;
        append_api(p->api.v, p->api.n, p->api_sorted, tmp);
        p->api_sorted = p->api.n;
    }
    return 1;
}

/* Whether API call k is the first of the window's with the key (file, corr). */
static inline int api_first_of(const pp_gpu_proj *p, size_t k, int file, uint32_t corr)
{
    const gapi *a = p->api.v;
    return k < p->api.n && a[k].file == file && a[k].corr == corr &&
           (k == 0 || a[k - 1].file != file || a[k - 1].corr != corr);
}

/* The window's first API call of (file, corr), or NULL. *hint: where the previous lookup
 * ended; a join's records mostly follow their calls in order, so the next one is tried
 * before a search (and *hint updated). */
static const gapi *find_api(const pp_gpu_proj *p, int file, uint32_t corr, size_t *hint)
{
    const gapi *a = p->api.v;
    for (size_t k = *hint; k <= *hint + 1; k++)
        if (api_first_of(p, k, file, corr)) {
            *hint = k + 1;
            return &a[k];
        }
    size_t lo = 0, hi = p->api.n;
    while (lo < hi) { /* first entry with key >= (file, corr) */
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid].file < file || (a[mid].file == file && a[mid].corr < corr))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < p->api.n && a[lo].file == file && a[lo].corr == corr) {
        *hint = lo + 1;
        return &a[lo];
    }
    return NULL;
}

/* Whether range i's key (file, tid, t0) is at or before (file, tid, t). */
static inline int range_le(const grange *r, int file, uint32_t tid, uint64_t t)
{
    return r->file < file || (r->file == file && (r->tid < tid || (r->tid == tid && r->t0 <= t)));
}

/* In the sorted window: the index of the first range after (file, tid, t), by the key
 * (file, tid, t0), searched in [lo, hi). */
static size_t range_after_in(const pp_gpu_proj *p, int file, uint32_t tid, uint64_t t, size_t lo,
                             size_t hi)
{
    const grange *r = p->ranges.v;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (range_le(&r[mid], file, tid, t))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t range_after(const pp_gpu_proj *p, int file, uint32_t tid, uint64_t t)
{
    return range_after_in(p, file, tid, t, 0, p->ranges.n);
}

/* range_after from a hint: the index the previous lookup of the same thread gave. A thread's
 * launches mostly come in order, a few ranges (its transfers) apart, so the answer is searched
 * forward from there in steps that double, then bisected: a few comparisons instead of a
 * search of the whole window. */
static size_t range_after_from(const pp_gpu_proj *p, int file, uint32_t tid, uint64_t t,
                               size_t hint)
{
    const grange *r = p->ranges.v;
    size_t n = p->ranges.n;
    if (hint > n || (hint > 0 && !range_le(&r[hint - 1], file, tid, t)))
        return range_after(p, file, tid, t);
    size_t lo = hint, step = 1; /* r[lo - 1] is at or before the key */
    while (lo < n && range_le(&r[lo], file, tid, t)) {
        size_t next = n - lo > step ? lo + step : n;
        if (next < n && range_le(&r[next], file, tid, t)) {
            lo = next + 1;
            step *= 2;
            continue;
        }
        return range_after_in(p, file, tid, t, lo + 1, next);
    }
    return lo;
}

/* The range of (file, tid) open at t: the last one starting at or before t, if it is still
 * open at t. With a hint (where this thread's previous lookup ended), range_after_from. */
static grange *find_range(pp_gpu_proj *p, int file, uint32_t tid, uint64_t t, size_t *hint)
{
    grange *r = p->ranges.v;
    size_t lo = hint ? range_after_from(p, file, tid, t, *hint) : range_after(p, file, tid, t);
    if (hint)
        *hint = lo;
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

static gdevice *device_of(pp_gpu_proj *p, uint32_t device)
{
    for (size_t i = 0; i < p->n_devices; i++)
        if (p->devices[i].device == device)
            return &p->devices[i];
    if (p->n_devices >= MAX_DEVICES)
        return NULL;
    gdevice *d = realloc(p->devices, (p->n_devices + 1) * sizeof *d);
    if (!d) {
        p->oom = 1;
        return NULL;
    }
    p->devices = d;
    d = &p->devices[p->n_devices++];
    memset(d, 0, sizeof *d);
    d->device = device;
    d->first = UINT64_MAX;
    return d;
}

static int cmp_ivl(const void *a, const void *b)
{
    const ivl *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static inline int ivl_less(const ivl *x, const ivl *y) { return x->start < y->start; }
DEFINE_STABLE_SORT(sort_ivls, ivl, ivl_less)
DEFINE_SORTED_APPEND(append_ivls, ivl, ivl_less, sort_ivls)

/* Merges a device's pending intervals; retires (adds to busy) those wholly before the last
 * `keep` of them, so that late arrivals still merge with the recent ones. */
static void device_merge(pp_gpu_proj *p, gdevice *d, size_t keep)
{
    ivl *v = d->ivl.v;
    size_t n = d->ivl.n;
    if (!n)
        return;
    ivl *tmp = sort_space(p, n, sizeof *v);
    if (tmp) /* the merged ones are in order: sort the new ones and merge them in */
        append_ivls(v, n, d->ivl_sorted, tmp);
    else
        qsort(v, n, sizeof *v, cmp_ivl);
    size_t m = 0; /* merge in place */
    for (size_t i = 0; i < n; i++) {
        if (m && v[i].start <= v[m - 1].end) {
            if (v[i].end > v[m - 1].end)
                v[m - 1].end = v[i].end;
        } else {
            v[m++] = v[i];
        }
    }
    size_t retire = m > keep ? m - keep : 0;
    for (size_t i = 0; i < retire; i++) {
        uint64_t s = v[i].start > d->frontier ? v[i].start : d->frontier;
        if (v[i].end > s)
            d->busy_ns += (double)(v[i].end - s);
        if (v[i].end > d->frontier)
            d->frontier = v[i].end;
    }
    memmove(v, v + retire, (m - retire) * sizeof *v);
    d->ivl.n = d->ivl_sorted = m - retire;
}

/* A projected record of an analyzed step onto its device's busy time. */
static void device_add(pp_gpu_proj *p, uint32_t device, uint64_t start, uint64_t end)
{
    gdevice *d = device_of(p, device);
    if (!d)
        return;
    d->records++;
    if (start < d->first)
        d->first = start;
    if (end > d->last)
        d->last = end;
    if (d->ivl.n >= DEVICE_IVLS)
        device_merge(p, d, DEVICE_IVLS / 2);
    ivl *x = gpush(p, &d->ivl, sizeof *x);
    if (x)
        *x = (ivl){start, end};
}

/* The slot of (file, device, stream), or the free slot where it goes; NULL when it is not
 * within STREAM_PROBES slots of its hash (a table filled by a hostile trace costs no more). */
static gstream *stream_slot(pp_gpu_proj *p, int32_t file, uint32_t device, uint32_t stream)
{
    uint64_t h = ((uint64_t)(uint32_t)file * 0x9e3779b97f4a7c15ull) ^
                 ((uint64_t)device << 32 | stream) * 0xbf58476d1ce4e5b9ull;
    size_t i = (size_t)(h >> 40) & (STREAM_SLOTS - 1);
    for (size_t k = 0; k < STREAM_PROBES; k++, i = (i + 1) & (STREAM_SLOTS - 1)) {
        gstream *x = &p->streams[i];
        if (x->file < 0 || (x->file == file && x->device == device && x->stream == stream))
            return x;
    }
    return NULL;
}

/* A record projected through its launching thread: its stream works for that range's stage. */
static void stream_learn(pp_gpu_proj *p, const grec *g, int32_t stage)
{
    gstream *x = stream_slot(p, g->file, g->device, g->stream);
    if (!x)
        return;
    if (x->file < 0)
        *x = (gstream){.file = g->file, .device = g->device, .stream = g->stream, .stage = stage};
    else if (x->stage != stage)
        x->stage = STREAM_SHARED;
}

/* Projects g onto r; whether it landed in an analyzed step. */
static int project_one(pp_gpu_proj *p, const grec *g, grange *r)
{
    long si = step_index(p, r->step);
    if (si < 0 || r->stage < 0 || r->stage >= p->S) {
        p->outside++;
        return 0;
    }
    p->projected++;
    double d = (double)(g->end - g->start);
    r->gpu_ns += d;
    if (g->start < r->first)
        r->first = g->start;
    p->busy[(size_t)si * (size_t)p->S + (size_t)r->stage] += d;
    p->stages[r->stage].kind_ns[r->kind] += d;
    if (g->start < p->span0[si])
        p->span0[si] = g->start;
    if (g->end > p->span1[si])
        p->span1[si] = g->end;
    device_add(p, g->device, g->start, g->end);
    if (p->keep && r->step >= p->keep_lo && r->step <= p->keep_hi) {
        pp_gpu_span *sp = gpush(p, &p->spans, sizeof *sp);
        if (sp)
            *sp = (pp_gpu_span){.file = g->file, .device = g->device, .stream = g->stream,
                                .stage = r->stage, .kind = r->kind, .step = r->step,
                                .start = g->start, .end = g->end, .peer = -1};
    }
    return 1;
}

/* A record whose launching thread had no pipeline range open when it launched (PyTorch's
 * autograd runs the backward on a thread of its own while the stage's thread waits inside its
 * backward range; a helper thread of the job): the range it is adopted by, or NULL. The
 * candidates are the ranges of the same trace file open at the launch, one per thread (the
 * innermost, as for the launching thread). When the record's stream is known to work for one
 * stage, only that stage's ranges count; the candidates left must all be of one stage (else
 * the record is ambiguous: not projected), and the latest opened of them adopts it. */
static grange *adopt(pp_gpu_proj *p, const grec *g, const gapi *a, int by_stream_only,
                     int *ambiguous)
{
    *ambiguous = 0;
    const gstream *x = stream_slot(p, g->file, g->device, g->stream);
    int32_t want = x && x->file >= 0 ? x->stage : -1; /* -1: not known; STREAM_SHARED */
    if (by_stream_only && want < 0)
        return NULL;
    grange *r = p->ranges.v, *best = NULL;
    size_t n = p->ranges.n, lo = 0, hi = n;
    while (lo < hi) { /* first range of the file */
        size_t mid = lo + (hi - lo) / 2;
        if (r[mid].file < a->file)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (int threads = 0; lo < n && r[lo].file == a->file && threads < ADOPT_THREADS; threads++) {
        uint32_t tid = r[lo].tid;
        grange *c = find_range(p, a->file, tid, a->start, NULL);
        if (c && (want < 0 || c->stage == want)) {
            if (best && best->stage != c->stage) {
                *ambiguous = 1;
                return NULL;
            }
            if (!best || c->t0 > best->t0)
                best = c;
        }
        lo = range_after(p, a->file, tid, UINT64_MAX); /* the next thread's first range */
    }
    return best;
}

/* Whether thread (file, tid) can no longer bring a range open at t: it has no range in the
 * window, or one opened after t (pipeline ranges do not nest, so one open at t closed, and
 * arrived, before that one opened). */
static int launcher_done(const pp_gpu_proj *p, int32_t file, uint32_t tid, uint64_t t)
{
    const grange *r = p->ranges.v;
    size_t n = p->ranges.n, lo = range_after(p, file, tid, t);
    if (lo < n && r[lo].file == file && r[lo].tid == tid)
        return 1;
    return !(lo > 0 && r[lo - 1].file == file && r[lo - 1].tid == tid);
}

/* Joins the pending GPU records with the API records and ranges in the window. A record that
 * finds neither may still be early (its API record in a later block, its range not closed
 * yet): it waits until `window` later GPU records have arrived, unless `final`. */
static void join(pp_gpu_proj *p, int final)
{
    if (!window_sort(p)) { /* the projection fails (pp_gpu_proj_finish) */
        p->oom = 1;
        p->pending.n = 0;
        return;
    }
    grec *g = p->pending.v;
    /* the lookups' hints: one for the API calls, one per launching thread (hashed, a slot
     * two threads share only misses more often) */
    size_t kept = 0, api_hint = 0, range_hint[32] = {0};
    for (size_t i = 0; i < p->pending.n; i++) {
        const gapi *a = find_api(p, g[i].file, g[i].corr, &api_hint);
        size_t *rh = a ? &range_hint[(a->tid * 0x9e3779b9u + (uint32_t)a->file) >> 27] : NULL;
        grange *r = a ? find_range(p, a->file, a->tid, a->start, rh) : NULL;
        if (r) {
            if (r->stage >= 0 && r->stage < p->S)
                stream_learn(p, &g[i], r->stage);
            project_one(p, &g[i], r);
            continue;
        }
        uint64_t seq = p->files[g[i].file].gpu_seq;
        int due = final || g[i].arrival + p->window <= seq, ambiguous = 0;
        /* Adopted early (after an eighth of the window, while the range is surely still in
         * it) where its stream's stage is known and its own thread can bring no range; else
         * at the end of its wait, by the one stage open too. */
        if (a && (due || (g[i].arrival + p->window / 8 <= seq &&
                          launcher_done(p, a->file, a->tid, a->start))) &&
            (r = adopt(p, &g[i], a, !due, &ambiguous)) != NULL) {
            p->adopted += (uint64_t)project_one(p, &g[i], r);
            continue;
        }
        if (!due) {
            g[kept++] = g[i];
            continue;
        }
        p->ambiguous += (uint64_t)ambiguous;
        const gfile *f = a && (size_t)a->file < p->n_files ? &p->files[a->file] : NULL;
        if (f && a->start <= f->evicted_t1)
            p->late++;
        else
            p->unattributed++;
    }
    p->pending.n = kept;
}

/* A range leaving the window: its GPU time and launch lag are final. */
static void range_retire(pp_gpu_proj *p, const grange *r)
{
    if (r->gpu_ns <= 0 || r->stage < 0 || r->stage >= p->S || step_index(p, r->step) < 0)
        return;
    gstage *st = &p->stages[r->stage];
    if (r->kind == PP_GOP_FWD)
        gseries_add(p, &st->fwd, RESERVOIR, r->gpu_ns);
    else if (r->kind == PP_GOP_BWD)
        gseries_add(p, &st->bwd, RESERVOIR, r->gpu_ns);
    if (r->kind != PP_GOP_COMM && r->first != UINT64_MAX && r->first >= r->t0)
        gseries_add(p, &st->lag, RESERVOIR, (double)(r->first - r->t0));
}

/* After a join: each file keeps its latest `window` ranges and 2 x window API records. */
static void evict(pp_gpu_proj *p, int all)
{
    grange *r = p->ranges.v;
    size_t k = 0;
    for (size_t i = 0; i < p->ranges.n; i++) {
        gfile *f = &p->files[r[i].file];
        if (all || r[i].seq + p->window < f->range_seq) {
            range_retire(p, &r[i]);
            if (r[i].t1 > f->evicted_t1)
                f->evicted_t1 = r[i].t1;
        } else {
            r[k++] = r[i]; /* stays sorted */
        }
    }
    p->ranges_sorted = p->ranges_sorted == p->ranges.n ? k : 0;
    p->ranges.n = k;
    gapi *a = p->api.v;
    k = 0;
    for (size_t i = 0; i < p->api.n; i++) {
        gfile *f = &p->files[a[i].file];
        if (!all && a[i].seq + 2 * p->window >= f->api_seq)
            a[k++] = a[i];
    }
    p->api_sorted = p->api_sorted == p->api.n ? k : 0;
    p->api.n = k;
}

static void join_and_evict(pp_gpu_proj *p)
{
    join(p, 0);
    evict(p, 0);
}

void pp_gpu_proj_range(pp_gpu_proj *p, int file, uint32_t tid, int64_t step, int stage,
                       pp_gpu_op kind, uint64_t t0, uint64_t t1)
{
    gfile *f = file_of(p, file);
    if (!f)
        return;
    p->range_files += f->range_seq == 0;
    if (p->ranges.n >= 2 * p->window * p->range_files)
        join_and_evict(p);
    grange *r = gpush(p, &p->ranges, sizeof *r);
    if (!r)
        return;
    *r = (grange){.file = file, .tid = tid, .step = step, .stage = stage, .kind = (int)kind,
                  .t0 = t0, .t1 = t1, .seq = f->range_seq++, .first = UINT64_MAX};
}

/* (Reads a's correlation, thread and start only: analyzer/gpu_rec.c records what lies between
 * correlation and end; pp_gpu_proj_gpu likewise reads g's fields from kind to end.) */
void pp_gpu_proj_api(pp_gpu_proj *p, int file, const pp_rec_api *a)
{
    gfile *f = file_of(p, file);
    if (!f)
        return;
    p->api_calls++;
    p->api_files += f->api_seq == 0;
    if (p->api.n >= 4 * p->window * p->api_files)
        join_and_evict(p);
    gapi *x = gpush(p, &p->api, sizeof *x);
    if (!x)
        return;
    *x = (gapi){.file = file, .corr = a->correlation, .tid = a->thread, .start = a->start,
                .seq = f->api_seq++};
}

void pp_gpu_proj_gpu(pp_gpu_proj *p, int file, const pp_rec_gpu *g)
{
    if (g->kind == PP_GPU_SYNC || g->end < g->start)
        return; /* a wait is not work */
    gfile *f = file_of(p, file);
    if (!f)
        return;
    p->records++;
    if (in_windows(p, g->start))
        p->work += (double)(g->end - g->start);
    p->gpu_files += f->gpu_seq == 0;
    if (p->pending.n >= 2 * p->window * p->gpu_files)
        join_and_evict(p);
    grec *x = gpush(p, &p->pending, sizeof *x);
    if (x)
        *x = (grec){.file = file, .device = g->device, .corr = g->correlation,
                    .stream = g->stream, .start = g->start, .end = g->end,
                    .arrival = f->gpu_seq};
    f->gpu_seq++;
}

void pp_gpu_proj_nccl(pp_gpu_proj *p, int file, const pp_rec_nccl *rec)
{
    pp_rec_nccl mapped = *rec;
    const pp_rec_nccl *n = &mapped;
    nccl_as_stages(p, file, &mapped);
    p->nccl_ops++;
    if (p->keep && n->timed && n->gpu_start >= p->keep_t0 && n->gpu_start <= p->keep_t1) {
        pp_gpu_span *sp = gpush(p, &p->spans, sizeof *sp);
        if (sp)
            *sp = (pp_gpu_span){.file = file, .stage = -1, .kind = n->func, .step = -1,
                                .start = n->gpu_start, .end = n->gpu_end, .nccl = 1,
                                .rank = n->rank, .peer = n->peer, .bytes = n->bytes};
    }
    /* sends define the links (each message once) */
    if (n->func != PP_NCCL_SEND || n->peer < 0)
        return;
    glink *l = NULL;
    for (size_t j = 0; j < p->n_links && !l; j++)
        if (p->links[j].src == n->rank && p->links[j].dst == n->peer)
            l = &p->links[j];
    if (!l) {
        if (p->n_links >= MAX_LINKS)
            return;
        glink *v = realloc(p->links, (p->n_links + 1) * sizeof *v);
        if (!v) {
            p->oom = 1;
            return;
        }
        p->links = v;
        l = &p->links[p->n_links++];
        memset(l, 0, sizeof *l);
        l->src = n->rank;
        l->dst = n->peer;
    }
    l->messages++;
    l->bytes += n->bytes;
    if (n->timed && n->gpu_end > n->gpu_start) {
        l->timed++;
        gseries_add(p, &l->bw, LINK_RESERVOIR,
                    (double)n->bytes / (double)(n->gpu_end - n->gpu_start));
    }
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

static int cmp_span(const void *a, const void *b)
{
    const pp_gpu_span *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static int cmp_device(const void *a, const void *b)
{
    const pp_gpu_device *x = a, *y = b;
    return (x->device > y->device) - (x->device < y->device);
}

pp_status pp_gpu_proj_finish(pp_gpu_proj *p, pp_gpu_result *out)
{
    memset(out, 0, sizeof *out);
    join(p, 1);
    evict(p, 1);
    if (p->oom)
        return PP_ERR(PP_ERR_NOMEM, "out of memory projecting %llu GPU records",
                      (unsigned long long)p->records);
    int S = p->S;
    out->records = p->records;
    out->api_calls = p->api_calls;
    out->projected = p->projected;
    out->unattributed = p->unattributed;
    out->adopted = p->adopted;
    out->ambiguous = p->ambiguous;
    out->outside_steps = p->outside;
    out->late = p->late;
    out->nccl_ops = p->nccl_ops;
    out->present = p->records > 0 || p->nccl_ops > 0;
    out->S = S;
    out->stages = calloc(S ? (size_t)S : 1, sizeof *out->stages);
    out->devices = calloc(p->n_devices ? p->n_devices : 1, sizeof *out->devices);
    out->links = calloc(p->n_links ? p->n_links : 1, sizeof *out->links);
    if (!out->stages || !out->devices || !out->links) {
        pp_gpu_result_free(out);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the GPU metrics");
    }
    size_t with_work = 0;
    double span_sum = 0.0;
    for (size_t si = 0; si < p->n_steps; si++)
        if (p->span1[si] > p->span0[si]) {
            with_work++;
            span_sum += (double)(p->span1[si] - p->span0[si]);
        }
    out->step_ns = with_work ? span_sum / (double)with_work : 0.0;
    out->work_ns = p->n_steps ? p->work / (double)p->n_steps : 0.0;
    double proj_total = 0.0;
    for (int s = 0; s < S; s++) {
        gstage *g = &p->stages[s];
        pp_gpu_stage *st = &out->stages[s];
        st->fwd_ranges = g->fwd.count;
        st->bwd_ranges = g->bwd.count;
        st->fwd_median_ns = gseries_median(&g->fwd);
        st->bwd_median_ns = gseries_median(&g->bwd);
        st->launch_lag_ns = gseries_median(&g->lag);
        double bubble = 0.0;
        for (size_t si = 0; si < p->n_steps; si++) {
            if (p->span1[si] <= p->span0[si])
                continue;
            double b = p->busy[si * (size_t)S + (size_t)s];
            st->busy_ns += b;
            bubble += 1.0 - b / (double)(p->span1[si] - p->span0[si]);
        }
        if (with_work) {
            st->busy_ns /= (double)with_work;
            for (int k = 0; k < PP_GOP_COUNT; k++)
                st->kind_ns[k] = g->kind_ns[k] / (double)with_work;
            st->bubble_ratio = bubble / (double)with_work;
        }
        proj_total += st->kind_ns[PP_GOP_FWD] + st->kind_ns[PP_GOP_BWD] + st->kind_ns[PP_GOP_OPT];
    }
    out->projected_ns = proj_total;
    double busy_all = 0.0;
    for (size_t i = 0; i < p->n_devices; i++) {
        gdevice *d = &p->devices[i];
        device_merge(p, d, 0);
        pp_gpu_device *o = &out->devices[out->n_devices++];
        o->device = d->device;
        o->records = d->records;
        o->busy_ns = d->busy_ns;
        o->span_ns = d->last > d->first ? (double)(d->last - d->first) : 0.0;
        o->utilisation = o->span_ns > 0 ? o->busy_ns / o->span_ns : 0.0;
        busy_all += o->busy_ns;
    }
    if (out->n_devices > 1)
        qsort(out->devices, out->n_devices, sizeof *out->devices, cmp_device);
    out->device_busy_ns = with_work ? busy_all / (double)with_work : 0.0;
    for (size_t j = 0; j < p->n_links; j++) {
        glink *l = &p->links[j];
        pp_gpu_link *o = &out->links[out->n_links++];
        *o = (pp_gpu_link){.src = l->src, .dst = l->dst, .messages = l->messages,
                           .bytes = l->bytes, .timed = l->timed};
        o->algbw_GBps = gseries_median(&l->bw);
        o->busbw_GBps = o->algbw_GBps; /* nccl-tests: busbw = algbw for send/recv */
    }
    if (p->spans.n) {
        qsort(p->spans.v, p->spans.n, sizeof(pp_gpu_span), cmp_span);
        out->spans = p->spans.v;
        out->n_spans = p->spans.n;
        p->spans.v = NULL;
        p->spans.n = p->spans.cap = 0;
    }
    return PP_OK;
}
