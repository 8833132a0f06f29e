/* ranges.c: the generic view (analyzer_internal.h "ranges.c"; docs/metrics.md "Ranges and
 * marks"): what a trace holds besides the pipeline ranges decode.c turns into ops. decode.c hands
 * over every closed range that is not a pipeline range (an_other_range), every mark of another
 * domain (an_other_mark) and the META definitions that name domains, categories and threads
 * (an_other_meta). The host pass sums the ranges per (domain, name) and per thread, the marks per
 * (domain, name); a replay pass (pp_report_each_event, for the Chrome trace and the Gantt) hands
 * them to a sink instead and keeps nothing.
 *
 * Cheap and bounded: a range is looked up by (file, domain id, message id) in a hash, and names
 * are resolved and copied only when a key is new. A hostile trace with millions of distinct
 * names cannot grow memory without bound: at most PP_ANALYSIS_MAX_NAMES names (then "(other
 * names)"), PP_ANALYSIS_MAX_THREADS threads (then "(other threads)"), RG_MAX_KEYS keys and
 * RG_MAX_CELLS (name, thread) pairs; what does not fit is summed in the "other" rows, with a
 * warning. */
#define _GNU_SOURCE /* qsort_r */
#include "analyzer_internal.h"
#include "report_internal.h"

#include <math.h>
#include <stdio.h>

enum {
    RG_RESERVOIR = 256,     /* durations kept per name for its median (series.c's is 4096) */
    RG_MAX_KEYS = 1 << 16,  /* (file, domain, message) keys remembered */
    RG_MAX_CELLS = 1 << 16, /* (name, thread) pairs */
    RG_MAX_DEFS = 4096,     /* domain, category and thread names kept per file */
    RG_NONE = UINT32_MAX
};

/* ---- a small open-addressing map of two 64-bit words to a 32-bit value ---- */

typedef struct rg_map {
    uint64_t *k;   /* [2 cap]; a slot is empty when its value is RG_NONE */
    uint32_t *v;   /* [cap] */
    size_t cap, n, max;
} rg_map;

static uint64_t mix(uint64_t a, uint64_t b)
{
    uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull + (a << 6) + (a >> 2));
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return x;
}

/* The value of (a, b), RG_NONE when absent. */
static uint32_t map_get(const rg_map *m, uint64_t a, uint64_t b)
{
    if (!m->cap)
        return RG_NONE;
    for (size_t i = mix(a, b) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->v[i] == RG_NONE)
            return RG_NONE;
        if (m->k[2 * i] == a && m->k[2 * i + 1] == b)
            return m->v[i];
    }
}

static int map_grow(rg_map *m)
{
    size_t cap = m->cap ? m->cap * 2 : 64;
    uint64_t *k = malloc(cap * 2 * sizeof *k);
    uint32_t *v = malloc(cap * sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return 0;
    }
    memset(v, 0xFF, cap * sizeof *v);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->v[i] == RG_NONE)
            continue;
        size_t j = mix(m->k[2 * i], m->k[2 * i + 1]) & (cap - 1);
        while (v[j] != RG_NONE)
            j = (j + 1) & (cap - 1);
        k[2 * j] = m->k[2 * i];
        k[2 * j + 1] = m->k[2 * i + 1];
        v[j] = m->v[i];
    }
    free(m->k);
    free(m->v);
    m->k = k;
    m->v = v;
    m->cap = cap;
    return 1;
}

/* Adds (a, b) -> val (absent before); 0 when the map is full (m->max) or out of memory. */
static int map_put(rg_map *m, uint64_t a, uint64_t b, uint32_t val)
{
    if (m->n >= m->max)
        return 0;
    if ((m->n + 1) * 2 > m->cap && !map_grow(m))
        return 0;
    size_t i = mix(a, b) & (m->cap - 1);
    while (m->v[i] != RG_NONE)
        i = (i + 1) & (m->cap - 1);
    m->k[2 * i] = a;
    m->k[2 * i + 1] = b;
    m->v[i] = val;
    m->n++;
    return 1;
}

static void map_free(rg_map *m)
{
    free(m->k);
    free(m->v);
    memset(m, 0, sizeof *m);
}

/* ---- per file: the names its META blocks define ---- */

typedef struct rg_def {
    uint32_t a, b; /* domain: (id, 0); category: (domain, category); thread: (os tid, 0) */
    uint32_t name; /* string id */
} rg_def;

typedef struct rg_file {
    vec domains, categories, threads; /* rg_def, at most RG_MAX_DEFS each */
} rg_file;

void an_other_meta(file_state *f, const pp_rec_header *h, const uint8_t *rec)
{
    rg_def d;
    vec *into;
    if (h->type == PP_REC_DOMAIN && h->size >= sizeof(pp_rec_domain)) {
        pp_rec_domain r;
        memcpy(&r, rec, sizeof r);
        d = (rg_def){r.id, 0, r.name};
    } else if (h->type == PP_REC_CATEGORY && h->size >= sizeof(pp_rec_category)) {
        pp_rec_category r;
        memcpy(&r, rec, sizeof r);
        d = (rg_def){r.domain, r.category, r.name};
    } else if (h->type == PP_REC_THREAD_NAME && h->size >= sizeof(pp_rec_thread_name)) {
        pp_rec_thread_name r;
        memcpy(&r, rec, sizeof r);
        d = (rg_def){r.os_tid, 0, r.name};
    } else {
        return;
    }
    if (!f->generic) {
        f->generic = calloc(1, sizeof *f->generic);
        if (!f->generic)
            return;
        f->generic->domains.elem = f->generic->categories.elem = f->generic->threads.elem =
            sizeof(rg_def);
    }
    rg_file *g = f->generic;
    into = h->type == PP_REC_DOMAIN ? &g->domains
           : h->type == PP_REC_CATEGORY ? &g->categories
                                        : &g->threads;
    rg_def *x = into->data;
    for (size_t i = 0; i < into->n; i++)
        if (x[i].a == d.a && x[i].b == d.b) {
            if (h->type == PP_REC_THREAD_NAME)
                x[i].name = d.name; /* a thread renamed: the latest name */
            return;
        }
    if (into->n >= RG_MAX_DEFS)
        return;
    rg_def *slot = vec_push(into);
    if (slot)
        *slot = d;
}

void an_other_file_free(file_state *f)
{
    if (!f->generic)
        return;
    vec_free(&f->generic->domains);
    vec_free(&f->generic->categories);
    vec_free(&f->generic->threads);
    free(f->generic);
    f->generic = NULL;
}

static const char *def_name(file_state *f, const vec *v, uint32_t a, uint32_t b)
{
    const rg_def *x = v->data;
    for (size_t i = 0; i < v->n; i++)
        if (x[i].a == a && x[i].b == b)
            return an_str_of(f, x[i].name);
    return "";
}

static const char *rg_domain_name(file_state *f, uint32_t domain)
{
    return domain && f->generic ? def_name(f, &f->generic->domains, domain, 0) : "";
}

const char *an_other_domain_name(file_state *f, uint32_t domain)
{
    return rg_domain_name(f, domain);
}

static const char *rg_category_name(file_state *f, uint32_t domain, uint32_t category)
{
    return category && f->generic ? def_name(f, &f->generic->categories, domain, category) : "";
}

static const char *rg_thread_name(file_state *f, uint32_t tid)
{
    return f->generic ? def_name(f, &f->generic->threads, tid, 0) : "";
}

/* ---- the host pass's tables ---- */

typedef struct rg_row {
    char *domain, *name;
    int other;
    series s;        /* durations (ns): count, sum, min, max, the median's reservoir (at most
                        RG_RESERVOIR: an_series_add_cap) */
    double mean, m2; /* Welford's running mean and squared deviations, for the std dev */
} rg_row;

typedef struct rg_cell {
    uint32_t row, thread;
    uint64_t count;
    double sum, min, max;
} rg_cell;

typedef struct rg_thread {
    int32_t file;
    uint32_t tid;
    char name[64];
} rg_thread;

/* Rows of one kind (ranges or marks): by key and by name. */
typedef struct rg_table {
    vec rows;       /* rg_row */
    rg_map by_key;  /* (file << 32 | domain, message) -> row */
    rg_map by_name; /* (hash of domain and name, probe) -> row */
    uint32_t other; /* the "(other names)" row, RG_NONE until needed */
} rg_table;

typedef struct rg_state {
    rg_table ranges, marks;
    vec threads;       /* rg_thread */
    rg_map thread_of;  /* (file, tid) -> thread */
    uint32_t other_thread;
    vec cells;         /* rg_cell */
    rg_map cell_of;    /* (row, thread) -> cell */
    uint64_t cells_dropped, backwards, total;
    uint64_t t_lo, t_hi; /* the span of what was seen */
} rg_state;

static void table_init(rg_table *t)
{
    t->rows.elem = sizeof(rg_row);
    t->by_key.max = RG_MAX_KEYS;
    t->by_name.max = 2 * PP_ANALYSIS_MAX_NAMES;
    t->other = RG_NONE;
}

static void table_free(rg_table *t)
{
    rg_row *r = t->rows.data;
    for (size_t i = 0; i < t->rows.n; i++) {
        free(r[i].domain);
        free(r[i].name);
        an_series_free(&r[i].s);
    }
    vec_free(&t->rows);
    map_free(&t->by_key);
    map_free(&t->by_name);
}

static rg_state *generic_of(state *st)
{
    if (st->generic)
        return st->generic;
    rg_state *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    table_init(&g->ranges);
    table_init(&g->marks);
    g->threads.elem = sizeof(rg_thread);
    g->cells.elem = sizeof(rg_cell);
    g->thread_of.max = PP_ANALYSIS_MAX_THREADS;
    g->cell_of.max = RG_MAX_CELLS;
    g->other_thread = RG_NONE;
    g->t_lo = UINT64_MAX;
    st->generic = g;
    return g;
}

void an_other_free(state *st)
{
    rg_state *g = st->generic;
    if (!g)
        return;
    table_free(&g->ranges);
    table_free(&g->marks);
    vec_free(&g->threads);
    map_free(&g->thread_of);
    vec_free(&g->cells);
    map_free(&g->cell_of);
    free(g);
    st->generic = NULL;
}

static uint64_t str_hash(const char *s, uint64_t h)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}

static char *dup_cut(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap - 1);
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static uint32_t new_row(rg_table *t, const char *domain, const char *name, int other)
{
    rg_row *r = vec_push(&t->rows);
    if (!r)
        return RG_NONE;
    r->domain = dup_cut(domain, sizeof ((pp_arange *)0)->domain);
    r->name = dup_cut(name, PP_ANALYSIS_NAME_BYTES);
    r->other = other;
    if (!r->domain || !r->name) {
        free(r->domain);
        free(r->name);
        t->rows.n--;
        return RG_NONE;
    }
    return (uint32_t)(t->rows.n - 1);
}

static uint32_t other_row(rg_table *t)
{
    if (t->other == RG_NONE)
        t->other = new_row(t, "", "(other names)", 1);
    return t->other;
}

/* The row of (domain, name) as cut to their stored size; a new one while there is room, else
 * the "(other names)" row. */
static uint32_t row_by_name(rg_table *t, const char *domain, const char *name)
{
    char dn[64], nm[PP_ANALYSIS_NAME_BYTES];
    snprintf(dn, sizeof dn, "%s", domain);
    snprintf(nm, sizeof nm, "%s", name);
    uint64_t h = str_hash(nm, str_hash(dn, 0xCBF29CE484222325ull) ^ 0xFF);
    const rg_row *rows = t->rows.data;
    for (uint64_t probe = 0;; probe++) {
        uint32_t r = map_get(&t->by_name, h, probe);
        if (r == RG_NONE)
            break;
        if (!rows[r].other && strcmp(rows[r].domain, dn) == 0 && strcmp(rows[r].name, nm) == 0)
            return r;
    }
    size_t named = t->rows.n - (t->other != RG_NONE);
    if (named >= PP_ANALYSIS_MAX_NAMES)
        return other_row(t);
    uint32_t r = new_row(t, dn, nm, 0);
    if (r == RG_NONE)
        return other_row(t);
    uint64_t probe = 0;
    while (map_get(&t->by_name, h, probe) != RG_NONE)
        probe++;
    if (!map_put(&t->by_name, h, probe, r)) {
        /* cannot be found again: undo it */
        rg_row *x = &((rg_row *)t->rows.data)[r];
        free(x->domain);
        free(x->name);
        t->rows.n--;
        return other_row(t);
    }
    return r;
}

static uint32_t row_of(rg_table *t, file_state *f, uint32_t domain, uint32_t message)
{
    uint64_t a = (uint64_t)(uint32_t)f->index << 32 | domain;
    uint32_t r = map_get(&t->by_key, a, message);
    if (r != RG_NONE)
        return r;
    r = row_by_name(t, rg_domain_name(f, domain), an_str_of(f, message));
    if (r != RG_NONE)
        map_put(&t->by_key, a, message, r); /* full: looked up by name the next time */
    return r;
}

static uint32_t thread_index(rg_state *g, file_state *f, uint32_t tid)
{
    uint64_t a = (uint64_t)(uint32_t)f->index << 32 | tid;
    uint32_t x = map_get(&g->thread_of, a, 0);
    if (x != RG_NONE)
        return x;
    if (g->threads.n < PP_ANALYSIS_MAX_THREADS) {
        rg_thread *t = vec_push(&g->threads);
        if (t) {
            t->file = f->index;
            t->tid = tid;
            snprintf(t->name, sizeof t->name, "%s", rg_thread_name(f, tid));
            x = (uint32_t)(g->threads.n - 1);
            if (map_put(&g->thread_of, a, 0, x))
                return x;
            g->threads.n--;
        }
    }
    if (g->other_thread == RG_NONE) {
        rg_thread *t = vec_push(&g->threads);
        if (!t)
            return RG_NONE;
        t->file = -1;
        snprintf(t->name, sizeof t->name, "(other threads)");
        g->other_thread = (uint32_t)(g->threads.n - 1);
    }
    return g->other_thread;
}

static void cell_add(rg_state *g, uint32_t row, uint32_t thread, double d)
{
    if (row == RG_NONE || thread == RG_NONE)
        return;
    uint32_t c = map_get(&g->cell_of, row, thread);
    if (c == RG_NONE) {
        rg_cell *x = g->cells.n < RG_MAX_CELLS ? vec_push(&g->cells) : NULL;
        if (!x) {
            g->cells_dropped++;
            return;
        }
        *x = (rg_cell){.row = row, .thread = thread, .min = d, .max = d};
        c = (uint32_t)(g->cells.n - 1);
        if (!map_put(&g->cell_of, row, thread, c)) {
            g->cells.n--;
            g->cells_dropped++;
            return;
        }
    }
    rg_cell *x = &((rg_cell *)g->cells.data)[c];
    x->count++;
    x->sum += d;
    if (d < x->min)
        x->min = d;
    if (d > x->max)
        x->max = d;
}

static void span_add(rg_state *g, uint64_t t0, uint64_t t1)
{
    if (t0 < g->t_lo)
        g->t_lo = t0;
    if (t1 > g->t_hi)
        g->t_hi = t1;
}

/* The replay pass: one event to the sink, its names resolved. */
static void to_sink(state *st, file_state *f, const thread_state *t, const open_range *o,
                    uint64_t t0, uint64_t t1, int mark)
{
    int depth = -1;
    const open_range *base = t->stack.data;
    if (!mark && t->stack.n && o >= base && o < base + t->stack.n)
        depth = (int)(o - base);
    pp_report_event e = {.file = f->index,
                         .tid = t->tid,
                         .thread = -1,
                         .mark = mark,
                         .depth = depth,
                         .domain = rg_domain_name(f, o->domain),
                         .name = an_str_of(f, o->message),
                         .category = rg_category_name(f, o->domain, o->category),
                         .t0 = t0,
                         .t1 = t1,
                         .payload_type = o->payload_type,
                         .payload = o->payload};
    st->sink(st->sink_ctx, &e);
}

void an_other_range(state *st, file_state *f, const thread_state *t, const open_range *o,
                    uint64_t t1)
{
    if (st->collect || st->gpu_pass || t1 < o->t0) {
        if (!st->collect && !st->gpu_pass && !st->sink && generic_of(st))
            st->generic->backwards++;
        return;
    }
    uint64_t t0 = o->t0;
    if (f->clk.status == PP_CLOCK_ESTIMATED) {
        t0 = pp_clock_to_ref(&f->clk, t0);
        t1 = pp_clock_to_ref(&f->clk, t1);
    }
    if (st->sink) {
        to_sink(st, f, t, o, t0, t1, 0);
        return;
    }
    rg_state *g = generic_of(st);
    if (!g)
        return;
    uint32_t r = row_of(&g->ranges, f, o->domain, o->message);
    if (r == RG_NONE)
        return;
    double d = t1 > t0 ? (double)(t1 - t0) : 0.0;
    rg_row *row = &((rg_row *)g->ranges.rows.data)[r];
    an_series_add_cap(&row->s, d, RG_RESERVOIR); /* 2 KB a name at most: up to 4096 names */
    double delta = d - row->mean;
    row->mean += delta / (double)row->s.count;
    row->m2 += delta * (d - row->mean);
    cell_add(g, r, thread_index(g, f, t->tid), d);
    span_add(g, t0, t1);
    g->total++;
}

void an_other_mark(state *st, file_state *f, const thread_state *t, const pp_rec_range *r,
                   uint64_t ts)
{
    if (st->collect || st->gpu_pass)
        return;
    ts = pp_clock_to_ref(&f->clk, ts);
    if (st->sink) {
        open_range o = {.domain = r->domain, .message = r->message, .category = r->category,
                        .payload_type = r->payload_type, .payload = r->payload};
        to_sink(st, f, t, &o, ts, ts, 1);
        return;
    }
    rg_state *g = generic_of(st);
    if (!g)
        return;
    uint32_t m = row_of(&g->marks, f, r->domain, r->message);
    if (m == RG_NONE)
        return;
    ((rg_row *)g->marks.rows.data)[m].s.count++;
    thread_index(g, f, t->tid);
    span_add(g, ts, ts);
}

/* ---- results ---- */

static int cmp_rows(const void *pa, const void *pb, void *ctx)
{
    const rg_row *rows = ctx;
    const rg_row *x = &rows[*(const uint32_t *)pa], *y = &rows[*(const uint32_t *)pb];
    if (x->other != y->other)
        return x->other - y->other;
    int c = strcmp(x->domain, y->domain);
    if (c)
        return c;
    if (x->s.sum != y->s.sum)
        return x->s.sum > y->s.sum ? -1 : 1;
    if (x->s.count != y->s.count)
        return x->s.count > y->s.count ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_threads(const void *pa, const void *pb, void *ctx)
{
    const rg_thread *th = ctx;
    const rg_thread *x = &th[*(const uint32_t *)pa], *y = &th[*(const uint32_t *)pb];
    if ((x->file < 0) != (y->file < 0))
        return x->file < 0 ? 1 : -1;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return (x->tid > y->tid) - (x->tid < y->tid);
}

static int cmp_cells(const void *pa, const void *pb)
{
    const pp_arange_thread *x = pa, *y = pb;
    if (x->range != y->range)
        return x->range < y->range ? -1 : 1;
    return (x->thread > y->thread) - (x->thread < y->thread);
}

/* The order of a table's rows (by domain, then total down, "(other names)" last) into
 * order[n]; rank[old] = new index. */
static void order_of(const vec *rows, uint32_t *order, uint32_t *rank, int marks)
{
    const rg_row *r = rows->data;
    for (size_t i = 0; i < rows->n; i++)
        order[i] = (uint32_t)i;
    (void)marks; /* marks have no durations: sum 0, the count decides */
    qsort_r(order, rows->n, sizeof *order, cmp_rows, (void *)r);
    for (size_t i = 0; i < rows->n; i++)
        rank[order[i]] = (uint32_t)i;
}

void an_other_results(state *st, file_state *fs, size_t n)
{
    pp_analysis *a = st->a;
    for (size_t i = 0; i < n; i++)
        fs[i].info->analyzed = fs[i].r != NULL && an_rank_wanted(st->o, fs[i].rank);
    /* the run's span: the generic view's, widened to the analyzed steps */
    uint64_t lo = st->generic ? st->generic->t_lo : UINT64_MAX;
    uint64_t hi = st->generic ? st->generic->t_hi : 0;
    for (size_t i = 0; i < a->n_steps; i++) {
        double s0 = a->steps[i].t0_ns, s1 = s0 + (a->steps[i].window_ns > 0
                                                      ? a->steps[i].window_ns
                                                      : a->steps[i].step_ns);
        if (s0 >= 0 && s0 < (double)lo)
            lo = (uint64_t)s0;
        if (s1 > (double)hi) /* a hostile step can end past 2^64 ns */
            hi = s1 >= 0x1p64 ? UINT64_MAX : (uint64_t)s1;
    }
    if (hi > lo) {
        a->wall_t0_ns = (double)lo;
        a->wall_ns = (double)(hi - lo);
    } else if (lo != UINT64_MAX) {
        a->wall_t0_ns = (double)lo;
    }
    rg_state *g = st->generic;
    if (!g)
        return;
    size_t nr = g->ranges.rows.n, nm = g->marks.rows.n, nt = g->threads.n, nc = g->cells.n;
    uint32_t *ord = malloc((nr + nm + nt + 1) * sizeof *ord);
    uint32_t *rank = malloc((nr + nm + nt + 1) * sizeof *rank);
    a->ranges = calloc(nr ? nr : 1, sizeof *a->ranges);
    a->marks = calloc(nm ? nm : 1, sizeof *a->marks);
    a->threads = calloc(nt ? nt : 1, sizeof *a->threads);
    a->range_threads = calloc(nc ? nc : 1, sizeof *a->range_threads);
    if (!ord || !rank || !a->ranges || !a->marks || !a->threads || !a->range_threads) {
        free(ord);
        free(rank);
        an_warn(a, "out of memory for the generic view's tables: left out");
        return;
    }
    /* ranges */
    order_of(&g->ranges.rows, ord, rank, 0);
    rg_row *rr = g->ranges.rows.data;
    for (size_t i = 0; i < nr; i++) {
        rg_row *r = &rr[ord[i]];
        pp_arange *x = &a->ranges[i];
        snprintf(x->domain, sizeof x->domain, "%s", r->domain);
        snprintf(x->name, sizeof x->name, "%s", r->name);
        x->other = r->other;
        x->ns = an_series_stats(&r->s);
        x->stddev_ns = r->s.count ? sqrt(r->m2 / (double)r->s.count) : 0.0;
        x->wall_share = a->wall_ns > 0 ? x->ns.sum / a->wall_ns : 0.0;
    }
    a->n_ranges = nr;
    /* threads, then the cells with the new indices */
    uint32_t *trank = rank + nr + nm;
    uint32_t *tord = ord + nr + nm;
    rg_thread *th = g->threads.data;
    /* each thread by its latest name: a THREAD_NAME after its first range renames it (the
     * Kineto importer names another tool's threads after their processes at the end) */
    for (size_t i = 0; i < nt; i++) {
        const char *name = th[i].file >= 0 && (size_t)th[i].file < n
                               ? rg_thread_name(&fs[th[i].file], th[i].tid) : "";
        if (name[0])
            snprintf(th[i].name, sizeof th[i].name, "%s", name);
    }
    for (size_t i = 0; i < nt; i++)
        tord[i] = (uint32_t)i;
    qsort_r(tord, nt, sizeof *tord, cmp_threads, th);
    for (size_t i = 0; i < nt; i++) {
        trank[tord[i]] = (uint32_t)i;
        a->threads[i].file = th[tord[i]].file;
        a->threads[i].tid = th[tord[i]].tid;
        memcpy(a->threads[i].name, th[tord[i]].name, sizeof a->threads[i].name);
    }
    a->n_threads = nt;
    rg_cell *c = g->cells.data;
    for (size_t i = 0; i < nc; i++)
        a->range_threads[i] = (pp_arange_thread){.range = rank[c[i].row],
                                                 .thread = trank[c[i].thread],
                                                 .count = c[i].count,
                                                 .sum_ns = c[i].sum,
                                                 .min_ns = c[i].min,
                                                 .max_ns = c[i].max};
    qsort(a->range_threads, nc, sizeof *a->range_threads, cmp_cells);
    a->n_range_threads = nc;
    /* marks */
    uint32_t *mord = ord + nr, *mrank = rank + nr;
    order_of(&g->marks.rows, mord, mrank, 1);
    rg_row *mr = g->marks.rows.data;
    for (size_t i = 0; i < nm; i++) {
        rg_row *r = &mr[mord[i]];
        pp_amark *x = &a->marks[i];
        snprintf(x->domain, sizeof x->domain, "%s", r->domain);
        snprintf(x->name, sizeof x->name, "%s", r->name);
        x->other = r->other;
        x->count = r->s.count;
    }
    a->n_marks = nm;
    a->generic_ranges = g->total;
    free(ord);
    free(rank);
    if (g->ranges.other != RG_NONE || g->marks.other != RG_NONE)
        an_warn(a, "more than %d distinct range or mark names: the rest are summed as "
                   "\"(other names)\"",
                PP_ANALYSIS_MAX_NAMES);
    if (g->other_thread != RG_NONE)
        an_warn(a, "more than %d threads with ranges: the rest are summed as \"(other "
                   "threads)\"",
                PP_ANALYSIS_MAX_THREADS);
    if (g->cells_dropped)
        an_warn(a, "%llu range(s) left out of the per-thread table (more than %d name and "
                   "thread pairs)",
                (unsigned long long)g->cells_dropped, RG_MAX_CELLS);
    if (g->backwards)
        an_warn(a, "%llu range(s) outside the pipeline end before they start: ignored",
                (unsigned long long)g->backwards);
}

/* ---- the replay pass ---- */

typedef struct replay {
    void (*fn)(void *ctx, const pp_report_event *e);
    void *ctx;
    const pp_analysis *a;
    int32_t last_file, last_thread; /* the thread found last (a block is one thread's) */
    uint32_t last_tid;
} replay;

/* An event of the pass with its thread's index in the analysis. */
static void replay_event(void *ctx, const pp_report_event *e)
{
    replay *r = ctx;
    pp_report_event x = *e;
    if (r->last_file == e->file && r->last_tid == e->tid) {
        x.thread = r->last_thread;
    } else {
        for (size_t i = 0; i < r->a->n_threads; i++)
            if (r->a->threads[i].file == e->file && r->a->threads[i].tid == e->tid) {
                x.thread = (int32_t)i;
                break;
            }
        r->last_file = e->file;
        r->last_tid = e->tid;
        r->last_thread = x.thread;
    }
    r->fn(r->ctx, &x);
}

pp_status pp_report_each_event(const pp_analysis *a,
                               void (*fn)(void *ctx, const pp_report_event *e), void *ctx)
{
    if (!a || !fn)
        return PP_ERR(PP_ERR_INVALID, "pp_report_each_event: no analysis or no sink");
    size_t n = a->n_files;
    pp_analysis_options o;
    pp_analysis_options_default(&o);
    /* A replica no trace has: steps.c then leaves every pipeline range alone (an_on_range
     * returns before it keeps anything), so this pass keeps nothing but the decoding state. */
    o.replica = -1;
    pp_analysis *scratch = calloc(1, sizeof *scratch);
    file_state *fs = calloc(n ? n : 1, sizeof *fs);
    pp_afile *info = calloc(n ? n : 1, sizeof *info);
    state st;
    an_state_init(&st, &o, scratch);
    pp_status rc = PP_OK;
    if (!scratch || !fs || !info) {
        rc = PP_ERR(PP_ERR_NOMEM, "out of memory reading the traces again");
        n = 0;
    }
    /* the decoding writes its warnings and counts into scratch; the sink sees the analysis */
    replay r = {fn, ctx, a, -1, -1, 0};
    st.sink = replay_event;
    st.sink_ctx = &r;
    for (size_t i = 0; i < n; i++) {
        file_state *f = &fs[i];
        an_file_state_init(f, (int)i);
        info[i] = a->files[i];
        f->info = &info[i];
        f->rank = a->files[i].rank;
        f->replica = a->files[i].replica;
        f->pipe_rank = a->files[i].pipe_known ? a->files[i].pipe_rank : -1;
        f->done = 1;
        const char *tp = a->files[i].trace_path[0] ? a->files[i].trace_path : a->files[i].path;
        if (!a->files[i].analyzed || pp_trace_reader_open(tp, &f->r) != PP_OK) {
            pp_error_clear();
            continue;
        }
        f->done = 0;
        f->clk = (pp_clock_fit){.status = a->files[i].clock_status,
                                .mono0_ns = pp_trace_reader_header(f->r)->mono_ns,
                                .offset_ns = a->files[i].clock_offset_ns,
                                .drift = a->files[i].clock_drift};
    }
    an_count_stages(fs, n);
    while (n && an_read_round(&st, fs, n))
        ;
    for (size_t i = 0; i < n; i++)
        an_file_state_free(&fs[i]);
    free(fs);
    free(info);
    an_state_free(&st);
    free(scratch);
    return rc;
}
