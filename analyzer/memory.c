/* memory.c: memory from a capture (docs/metrics.md "Memory"), in the host pass beside decode.c:
 *   - the counters pptrain names pp.mem.stage<S>.<purpose> in the pipeprof domain (issue 17's
 *     contract; docs/nvtx-convention.md "Memory counters") become per-stage memory by purpose:
 *     each purpose's peak, the peak of their sum and when in the step it happens;
 *   - every other counter, every heap of NVTX's memory extension (bytes in use: its live
 *     regions), each CUDA device's allocations (CUPTI memory activity, --cuda) and each
 *     process's resident memory (the capture library's pprof.rss) become named series with min,
 *     max and last.
 * Nothing here is sized by a value of the file: counters, heaps and live regions per trace and
 * series per run have fixed caps (pp_analyzer.h), the rest is counted in mem_ignored. */
#include "analyzer_internal.h"
#include "report_internal.h"

#include <math.h>
#include <stdio.h>

/* CUPTI's allocations (PP_REC_GPU_MEM) as a heap per device and regions of their own: the heap
 * id and the region key carry this bit, which no NVTX heap id (libpprof counts from 1) and no
 * user or device virtual address (below 2^57) has. */
#define GPU_HEAP (UINT64_C(1) << 63)

enum {
    CTR_SLOTS = 2 * PP_ANALYSIS_MAX_COUNTERS, /* open addressing, at most half full */
    REGION_SLOTS = 2 * PP_ANALYSIS_MAX_REGIONS,
    PEAK_TIMES = 64 /* times a stage's total peak was reached, kept to place it in a step */
};

static const char *const k_purpose[PP_MEM_N_PURPOSES] = {
    "params", "grads", "optimizer", "activations", "transport", "workspace"};

const char *pp_mem_purpose_name(int p)
{
    return p >= 0 && p < PP_MEM_N_PURPOSES ? k_purpose[p] : NULL;
}

typedef struct mem_counter {
    uint64_t id;
    uint32_t domain;
    int32_t used;
    int32_t stage;   /* >= 0: a stage's memory counter, -1: a series */
    int32_t purpose;
    int32_t series;  /* index in the run's series, -1 none (over the cap) */
} mem_counter;

typedef struct mem_heap {
    uint64_t id;
    double bytes;
    int32_t series;
} mem_heap;

typedef struct mem_region {
    uint64_t addr; /* 0: empty slot (a region at address 0 is refused) */
    uint64_t heap;
    double bytes;
} mem_region;

struct mem_file {
    mem_counter ctr[CTR_SLOTS];
    uint32_t n_ctr;
    mem_heap heaps[PP_ANALYSIS_MAX_HEAPS];
    uint32_t n_heaps;
    mem_region *regions; /* REGION_SLOTS, allocated at the first region */
    uint32_t n_regions;
};

typedef struct mem_stage_acc {
    double cur[PP_MEM_N_PURPOSES];
    unsigned seen;
    double peak[PP_MEM_N_PURPOSES];
    double total_peak, total_t;
    uint32_t n_times;
    double times[PEAK_TIMES];
    uint64_t samples;
} mem_stage_acc;

struct mem_state {
    vec stages; /* mem_stage_acc by stage */
    vec series; /* pp_amem_series */
    int warned_ctr, warned_series, warned_heap, warned_region, warned_value;
};

/* The host pass accumulates; the replay pass (st->sink, pp_report_each_event) hands each sample
 * to the sink instead; the clock and GPU passes skip everything. */
static int mem_pass(const state *st) { return !st->collect && !st->gpu_pass; }

static void emit(state *st, const file_state *f, uint32_t tid, double t, const char *domain,
                 const char *name, int kind, int32_t stage, int32_t purpose, double v)
{
    pp_report_event e;
    memset(&e, 0, sizeof e);
    e.file = f->index;
    e.tid = tid;
    e.thread = -1;
    e.depth = -1;
    e.domain = domain;
    e.name = name;
    e.category = "";
    /* t came from a uint64_t time: the largest of them rounds up to 2^64 as a double */
    e.t0 = e.t1 = t >= 0x1p64 ? UINT64_MAX : (uint64_t)t;
    e.counter = 1;
    e.value = v;
    e.stage = stage;
    e.purpose = purpose;
    e.mem_kind = kind;
    st->sink(st->sink_ctx, &e);
}

static struct mem_state *mem_of(state *st)
{
    if (!st->mem) {
        st->mem = calloc(1, sizeof *st->mem);
        if (st->mem) {
            st->mem->stages.elem = sizeof(mem_stage_acc);
            st->mem->series.elem = sizeof(pp_amem_series);
        }
    }
    return st->mem;
}

static struct mem_file *mfile_of(file_state *f)
{
    if (!f->mem)
        f->mem = calloc(1, sizeof *f->mem);
    return f->mem;
}

static void ignore(state *st, int *warned, const char *fmt, const char *what)
{
    st->a->mem_ignored++;
    if (!*warned) {
        *warned = 1;
        an_warn(st->a, fmt, what);
    }
}

static uint32_t ctr_hash(uint32_t domain, uint64_t id)
{
    uint64_t h = (id ^ ((uint64_t)domain << 40)) * UINT64_C(0x9E3779B97F4A7C15);
    return (uint32_t)(h >> 40) & (CTR_SLOTS - 1);
}

/* The slot of (domain, id): its entry, or the empty slot where it would go. */
static mem_counter *ctr_slot(struct mem_file *m, uint32_t domain, uint64_t id)
{
    uint32_t i = ctr_hash(domain, id);
    while (m->ctr[i].used && (m->ctr[i].domain != domain || m->ctr[i].id != id))
        i = (i + 1) & (CTR_SLOTS - 1);
    return &m->ctr[i];
}

/* A new series of this file (-1 when the run's cap is reached). */
static int32_t series_new(state *st, const file_state *f, int kind, const char *domain,
                          const char *name, const char *unit)
{
    struct mem_state *ms = mem_of(st);
    if (!ms)
        return -1;
    if (ms->series.n >= PP_ANALYSIS_MAX_SERIES) {
        ignore(st, &ms->warned_series, "memory: more than %s counter/heap series in the run; "
                                       "the rest are ignored", "1024");
        return -1;
    }
    pp_amem_series *s = vec_push(&ms->series);
    if (!s)
        return -1;
    s->kind = kind;
    s->file = f->index;
    snprintf(s->domain, sizeof s->domain, "%s", domain);
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->unit, sizeof s->unit, "%s", unit);
    s->min = INFINITY;
    s->max = -INFINITY;
    return (int32_t)(ms->series.n - 1);
}

static const pp_amem_series *series_at(const state *st, int32_t i)
{
    if (i < 0 || !st->mem || (size_t)i >= st->mem->series.n)
        return NULL;
    return (const pp_amem_series *)st->mem->series.data + i;
}

static void series_put(state *st, int32_t i, double v, double t)
{
    if (i < 0 || !st->mem || (size_t)i >= st->mem->series.n)
        return;
    pp_amem_series *s = (pp_amem_series *)st->mem->series.data + i;
    s->samples++;
    if (v < s->min)
        s->min = v;
    if (v > s->max) {
        s->max = v;
        s->max_t_ns = t;
    }
    s->last = v;
}

/* "pp.mem.stage<S>.<purpose>": the stage (bounded) and purpose; 0 when not such a name. */
static int parse_stage_name(const char *n, int32_t *stage, int32_t *purpose)
{
    static const char prefix[] = "pp.mem.stage";
    if (strncmp(n, prefix, sizeof prefix - 1) != 0)
        return 0;
    const char *p = n + sizeof prefix - 1;
    int64_t s = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 9) {
        s = s * 10 + (*p++ - '0');
        digits++;
    }
    if (!digits || *p != '.' || s >= PP_ANALYSIS_MAX_STAGES)
        return 0;
    p++;
    for (int k = 0; k < PP_MEM_N_PURPOSES; k++)
        if (strcmp(p, k_purpose[k]) == 0) {
            *stage = (int32_t)s;
            *purpose = k;
            return 1;
        }
    return 0;
}

static const char *mem_domain(file_state *f, uint32_t domain)
{
    if (domain == 0)
        return "";
    if (domain == f->pipeprof_domain)
        return PP_NVTX_DOMAIN;
    return an_other_domain_name(f, domain);
}

void an_mem_meta(state *st, file_state *f, const pp_rec_header *h, const uint8_t *rec)
{
    if (h->type != PP_REC_COUNTER_DEF || h->size < sizeof(pp_rec_counter_def) || !mem_pass(st))
        return;
    pp_rec_counter_def d;
    memcpy(&d, rec, sizeof d);
    struct mem_file *m = mfile_of(f);
    struct mem_state *ms = mem_of(st);
    if (!m || !ms)
        return;
    mem_counter *c = ctr_slot(m, d.domain, d.counter_id);
    if (c->used)
        return; /* the first definition wins */
    if (m->n_ctr >= PP_ANALYSIS_MAX_COUNTERS) {
        ignore(st, &ms->warned_ctr, "memory: a trace defines more than %s counters; the rest "
                                    "are ignored", "1024");
        return;
    }
    const char *name = an_str_of(f, d.name);
    *c = (mem_counter){.id = d.counter_id, .domain = d.domain, .used = 1, .stage = -1,
                       .series = -1};
    m->n_ctr++;
    int32_t stage, purpose;
    if (d.domain != 0 && d.domain == f->pipeprof_domain && parse_stage_name(name, &stage, &purpose)) {
        if (f->replica == st->o->replica || st->sink) { /* the replay shows every process */
            c->stage = stage;
            c->purpose = purpose;
        }
        return; /* another replica's: not this pipeline's memory */
    }
    int rss = d.domain == 0 && d.counter_id == PP_COUNTER_RSS_ID;
    c->series = series_new(st, f, rss ? PP_AMEM_RSS : PP_AMEM_COUNTER, mem_domain(f, d.domain),
                           name, rss ? "bytes" : an_str_of(f, d.unit));
}

static void stage_put(state *st, int32_t stage, int32_t purpose, double v, double t)
{
    struct mem_state *ms = mem_of(st);
    if (!ms)
        return;
    while (ms->stages.n <= (size_t)stage)
        if (!vec_push(&ms->stages))
            return;
    mem_stage_acc *a = (mem_stage_acc *)ms->stages.data + stage;
    a->samples++;
    a->cur[purpose] = v;
    if (!(a->seen & (1u << purpose)) || v > a->peak[purpose])
        a->peak[purpose] = v;
    a->seen |= 1u << purpose;
    double sum = 0;
    for (int p = 0; p < PP_MEM_N_PURPOSES; p++)
        if (a->seen & (1u << p))
            sum += a->cur[p];
    if (a->n_times == 0 || sum > a->total_peak) {
        a->total_peak = sum;
        a->total_t = t;
        a->n_times = 0;
        a->times[a->n_times++] = t;
    } else if (sum == a->total_peak && a->n_times < PEAK_TIMES) {
        a->times[a->n_times++] = t;
    }
}

static void on_counter(state *st, file_state *f, const pp_rec_header *h, const uint8_t *rec)
{
    pp_rec_counter c;
    memcpy(&c, rec, sizeof c);
    struct mem_file *m = f->mem;
    struct mem_state *ms = mem_of(st);
    if (!ms)
        return;
    mem_counter *e = m ? ctr_slot(m, c.domain, c.counter_id) : NULL;
    if (!e || !e->used) {
        ignore(st, &ms->warned_ctr, "memory: %s", "counter samples of a counter never defined "
                                                  "are ignored");
        return;
    }
    double v;
    if (c.kind == PP_COUNTER_FLOAT64)
        memcpy(&v, &c.value, sizeof v);
    else
        v = (double)(int64_t)c.value;
    if (!isfinite(v)) {
        ignore(st, &ms->warned_value, "memory: %s", "counter samples that are not finite "
                                                    "numbers are ignored");
        return;
    }
    double t = (double)pp_clock_to_ref(&f->clk, h->ts);
    if (st->sink) {
        const pp_amem_series *s = series_at(st, e->series);
        if (e->stage >= 0 || s)
            emit(st, f, h->tid, t, s ? s->domain : PP_NVTX_DOMAIN, s ? s->name : "",
                 s ? s->kind : PP_AMEM_COUNTER, e->stage >= 0 ? e->stage : -1, e->purpose, v);
    } else if (e->stage >= 0) {
        stage_put(st, e->stage, e->purpose, v, t);
    } else {
        series_put(st, e->series, v, t);
    }
}

/* ---- the memory extension: heaps and their live regions ---- */

static mem_heap *heap_of(state *st, file_state *f, struct mem_file *m, uint64_t id, uint32_t name,
                         uint32_t domain, int create)
{
    for (uint32_t i = 0; i < m->n_heaps; i++)
        if (m->heaps[i].id == id)
            return &m->heaps[i];
    if (!create)
        return NULL;
    if (m->n_heaps >= PP_ANALYSIS_MAX_HEAPS) {
        ignore(st, &mem_of(st)->warned_heap, "memory: a trace registers more than %s heaps; "
                                             "the rest are ignored", "256");
        return NULL;
    }
    mem_heap *hp = &m->heaps[m->n_heaps++];
    hp->id = id;
    hp->bytes = 0;
    char label[PP_ANALYSIS_NAME_BYTES];
    const char *n = an_str_of(f, name);
    if (id & GPU_HEAP)
        snprintf(label, sizeof label, "CUDA device %u", (unsigned)(id & 0xffffffffu));
    else if (*n)
        snprintf(label, sizeof label, "%s", n);
    else if (id == 0)
        snprintf(label, sizeof label, "process-wide heap");
    else
        snprintf(label, sizeof label, "heap %llu", (unsigned long long)id);
    hp->series = series_new(st, f, PP_AMEM_HEAP, mem_domain(f, domain), label, "bytes");
    return hp;
}

static uint32_t region_hash(uint64_t addr)
{
    return (uint32_t)((addr * UINT64_C(0x9E3779B97F4A7C15)) >> 40) & (REGION_SLOTS - 1);
}

static mem_region *region_find(struct mem_file *m, uint64_t addr)
{
    if (!m->regions)
        return NULL;
    for (uint32_t i = region_hash(addr);; i = (i + 1) & (REGION_SLOTS - 1)) {
        if (m->regions[i].addr == addr)
            return &m->regions[i];
        if (m->regions[i].addr == 0)
            return NULL;
    }
}

/* Removes the entry at slot r by shifting the probe run back (no tombstones). */
static void region_erase(struct mem_file *m, mem_region *r)
{
    uint32_t i = (uint32_t)(r - m->regions);
    m->regions[i].addr = 0;
    m->n_regions--;
    for (uint32_t j = (i + 1) & (REGION_SLOTS - 1); m->regions[j].addr;
         j = (j + 1) & (REGION_SLOTS - 1)) {
        uint32_t home = region_hash(m->regions[j].addr);
        /* j's entry may move to i when i lies cyclically in [home, j) */
        if (((j - home) & (REGION_SLOTS - 1)) >= ((j - i) & (REGION_SLOTS - 1))) {
            m->regions[i] = m->regions[j];
            m->regions[j].addr = 0;
            i = j;
        }
    }
}

/* The heap's bytes in use after a call at time t of thread tid of file f. */
static void heap_changed(state *st, const file_state *f, uint32_t tid, const mem_heap *hp,
                         double t)
{
    if (!st->sink) {
        series_put(st, hp->series, hp->bytes, t);
        return;
    }
    const pp_amem_series *s = series_at(st, hp->series);
    if (s)
        emit(st, f, tid, t, s->domain, s->name, PP_AMEM_HEAP, -1, 0, hp->bytes);
}

/* Every region of heap `id` (every region when all) dropped; the heaps touched resampled. */
static void heap_clear(state *st, const file_state *f, uint32_t tid, struct mem_file *m,
                       uint64_t id, int all, double t)
{
    if (m->regions && m->n_regions)
        for (uint32_t i = 0; i < REGION_SLOTS;) {
            mem_region *r = &m->regions[i];
            if (r->addr && (all || r->heap == id))
                region_erase(m, r); /* an entry may have shifted into i: look again */
            else
                i++;
        }
    for (uint32_t i = 0; i < m->n_heaps; i++)
        if (all || m->heaps[i].id == id) {
            m->heaps[i].bytes = 0;
            heap_changed(st, f, tid, &m->heaps[i], t);
        }
}

static void on_mem(state *st, file_state *f, const pp_rec_header *h, const uint8_t *rec)
{
    pp_rec_mem r;
    memcpy(&r, rec, sizeof r);
    struct mem_file *m = mfile_of(f);
    struct mem_state *ms = mem_of(st);
    if (!m || !ms)
        return;
    double t = (double)pp_clock_to_ref(&f->clk, h->ts);
    switch (r.op) {
    case PP_MEM_HEAP_REGISTER: {
        mem_heap *hp = heap_of(st, f, m, r.heap, r.name, r.domain, 1);
        if (hp)
            heap_changed(st, f, h->tid, hp, t);
        break;
    }
    case PP_MEM_HEAP_RESET:
    case PP_MEM_HEAP_UNREGISTER: heap_clear(st, f, h->tid, m, r.heap, r.heap == 0, t); break;
    case PP_MEM_REGION_REGISTER: {
        if (r.addr == 0)
            break;
        mem_heap *hp = heap_of(st, f, m, r.heap, 0, r.domain, 1);
        if (!hp)
            break;
        if (!m->regions && !(m->regions = calloc(REGION_SLOTS, sizeof *m->regions)))
            break;
        mem_region *old = region_find(m, r.addr);
        if (old) { /* registered again without an unregister: the new size replaces it */
            mem_heap *oh = heap_of(st, f, m, old->heap, 0, 0, 0);
            if (oh)
                oh->bytes -= old->bytes;
            region_erase(m, old);
        }
        if (m->n_regions >= PP_ANALYSIS_MAX_REGIONS) {
            ignore(st, &ms->warned_region, "memory: a trace holds more than %s live regions; "
                                           "the rest are ignored", "65536");
            break;
        }
        uint32_t i = region_hash(r.addr);
        while (m->regions[i].addr)
            i = (i + 1) & (REGION_SLOTS - 1);
        m->regions[i] = (mem_region){r.addr, r.heap, (double)r.bytes};
        m->n_regions++;
        hp->bytes += (double)r.bytes;
        heap_changed(st, f, h->tid, hp, t);
        break;
    }
    case PP_MEM_REGION_RESIZE:
    case PP_MEM_REGION_UNREGISTER: {
        mem_region *old = region_find(m, r.addr);
        if (!old)
            break; /* a region never registered (or past the cap): nothing to change */
        mem_heap *hp = heap_of(st, f, m, old->heap, 0, 0, 0);
        if (hp)
            hp->bytes += (r.op == PP_MEM_REGION_RESIZE ? (double)r.bytes : 0) - old->bytes;
        if (r.op == PP_MEM_REGION_RESIZE)
            old->bytes = (double)r.bytes;
        else
            region_erase(m, old);
        if (hp)
            heap_changed(st, f, h->tid, hp, t);
        break;
    }
    default: break;
    }
}

/* A CUPTI allocation or release as the memory extension's region call on the device's heap. */
static void on_gpu_mem(state *st, file_state *f, const pp_rec_header *h, const uint8_t *rec)
{
    pp_rec_gpu_mem g;
    memcpy(&g, rec, sizeof g);
    if (!g.address)
        return;
    pp_rec_header hh = *h;
    hh.ts = g.ts;
    pp_rec_mem m = {.h = hh,
                    .op = g.op == PP_GPU_MEM_ALLOC ? PP_MEM_REGION_REGISTER
                                                   : PP_MEM_REGION_UNREGISTER,
                    .heap = GPU_HEAP | g.device,
                    .addr = GPU_HEAP | g.address,
                    .bytes = g.bytes};
    on_mem(st, f, &hh, (const uint8_t *)&m);
}

void an_mem_record(state *st, file_state *f, const pp_rec_header *h, const uint8_t *rec)
{
    if (!mem_pass(st))
        return;
    if (h->type == PP_REC_COUNTER && h->size >= sizeof(pp_rec_counter))
        on_counter(st, f, h, rec);
    else if (h->type == PP_REC_MEM && h->size >= sizeof(pp_rec_mem))
        on_mem(st, f, h, rec);
    else if (h->type == PP_REC_GPU_MEM && h->size >= sizeof(pp_rec_gpu_mem))
        on_gpu_mem(st, f, h, rec);
}

void an_mem_file_free(file_state *f)
{
    if (f->mem)
        free(f->mem->regions);
    free(f->mem);
    f->mem = NULL;
}

/* ---- results ---- */

/* The analyzed step holding time t: its index, or -1. A step spans [t0, next step's t0), the
 * last one its period (or its window when longer). */
static long step_at(const pp_analysis *a, double t)
{
    for (size_t i = 0; i < a->n_steps; i++) {
        const pp_astep *s = &a->steps[i];
        double end = i + 1 < a->n_steps && a->steps[i + 1].step == s->step + 1
                         ? a->steps[i + 1].t0_ns
                         : s->t0_ns + (s->window_ns > s->step_ns ? s->window_ns : s->step_ns);
        if (t >= s->t0_ns && t < end)
            return (long)i;
    }
    return -1;
}

static int cmp_series(const void *x, const void *y)
{
    const pp_amem_series *a = x, *b = y;
    if (a->file != b->file)
        return a->file < b->file ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    int c = strcmp(a->domain, b->domain);
    return c ? c : strcmp(a->name, b->name);
}

void an_mem_results(state *st, const file_state *fs, size_t n_files)
{
    struct mem_state *ms = st->mem;
    pp_analysis *a = st->a;
    if (!ms)
        return;
    const mem_stage_acc *acc = ms->stages.data;
    size_t n = 0;
    for (size_t s = 0; s < ms->stages.n; s++)
        n += acc[s].seen != 0;
    if (n && (a->mem_stages = calloc(n, sizeof *a->mem_stages)) != NULL) {
        for (size_t s = 0; s < ms->stages.n; s++) {
            const mem_stage_acc *x = &acc[s];
            if (!x->seen)
                continue;
            pp_amem_stage *o = &a->mem_stages[a->n_mem_stages++];
            o->stage = (int)s;
            o->purposes = x->seen;
            for (int p = 0; p < PP_MEM_N_PURPOSES; p++)
                o->peak_bytes[p] = x->seen & (1u << p) ? x->peak[p] : 0;
            o->total_peak_bytes = x->total_peak;
            o->peak_t_ns = x->total_t;
            o->samples = x->samples;
            o->peak_step = -1;
            o->peak_offset_ns = -1;
            o->peak_fraction = -1;
            for (uint32_t k = 0; k < x->n_times; k++) {
                long i = step_at(a, x->times[k]);
                if (i < 0)
                    continue;
                const pp_astep *sp = &a->steps[i];
                o->peak_step = sp->step;
                o->peak_offset_ns = x->times[k] - sp->t0_ns;
                o->peak_fraction = sp->step_ns > 0 ? o->peak_offset_ns / sp->step_ns : -1;
                break;
            }
        }
    }
    if (ms->series.n) {
        size_t ns = 0;
        pp_amem_series *sv = vec_take(&ms->series, &ns);
        for (size_t i = 0; i < ns; i++) {
            if (!sv[i].samples)
                sv[i].min = sv[i].max = 0;
            /* a process that ran one stage: its series are that stage's */
            sv[i].stage = sv[i].file >= 0 && (size_t)sv[i].file < n_files &&
                                  fs[sv[i].file].proj_stage >= 0
                              ? fs[sv[i].file].proj_stage
                              : -1;
        }
        qsort(sv, ns, sizeof *sv, cmp_series);
        a->mem_series = sv;
        a->n_mem_series = ns;
    }
}

void an_mem_free(state *st)
{
    if (!st->mem)
        return;
    vec_free(&st->mem->stages);
    vec_free(&st->mem->series);
    free(st->mem);
    st->mem = NULL;
}
