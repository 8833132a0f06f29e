/* trace_load.c: pp_trace_load, the whole-trace loader (API: pp_trace.h): reads every valid
 * block through the streaming reader (trace_read.c), decodes the records into events, GPU, API
 * and NCCL records and definitions, then resolves string ids and sorts the definitions for the
 * lookups. Used by pprof-run, the tests, the fuzz target and the capture benchmark; the
 * analyzer decodes blocks itself from the streaming reader.
 *
 * Every record is copied out with memcpy (no casted pointers into the file) and no count read
 * from the file sizes an allocation beyond the bytes really present. */
#include "trace_internal.h"

#include <stdlib.h>
#include <string.h>

/* Storage that never moves: chunks holding copied strings, ext data and schema fields. */
typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) uint8_t data[];
} arena_chunk;

typedef struct def_string {
    uint32_t id;
    uint64_t order;
    const char *s;
} def_string;

typedef struct def_pair { /* domains (a = id), thread names (a = tid) */
    uint32_t a, name;
    uint64_t order;
} def_pair;

typedef struct def_cat {
    uint32_t domain, category, name;
    uint64_t order;
} def_cat;

typedef struct def_counter {
    pp_trace_counter_def d;
    uint64_t order;
} def_counter;

typedef struct def_schema {
    pp_trace_schema s;
    uint32_t name;
    uint32_t *field_names;
    uint64_t order;
} def_schema;

/* A growable array: v points at n elements of `size` bytes, room for cap. */
typedef struct vec {
    void *v;
    size_t n, cap;
} vec;

typedef struct trace_impl {
    arena_chunk *arena;
    vec strings; /* def_string, sorted by id at the end, first definition kept */
    vec domains, threads, cats, schemas;
    vec msg;     /* uint32_t message id per event, resolved at the end */
    vec gpu, api, nccl; /* pp_trace_gpu, pp_rec_api, pp_trace_nccl (names resolved at the end) */
    vec cdefs;          /* def_counter: sorted by (domain, id) at the end, first one kept */
    vec counters, mem;  /* pp_rec_counter, pp_trace_mem (names resolved at the end) */
    vec gpu_mem;        /* pp_rec_gpu_mem */
    uint64_t order;
} trace_impl;

static void *arena_alloc(trace_impl *im, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    arena_chunk *c = im->arena;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        c = calloc(1, sizeof *c + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        /* A big allocation gets its own chunk behind the current one, so the current chunk's
         * free space stays usable. */
        if (im->arena && n > 65536) {
            c->next = im->arena->next;
            im->arena->next = c;
        } else {
            c->next = im->arena;
            im->arena = c;
        }
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static void *vec_push(vec *a, size_t size)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        void *nv = pp_realloc_array(a->v, cap, size);
        if (!nv)
            return NULL;
        a->v = nv;
        a->cap = cap;
    }
    void *p = (uint8_t *)a->v + a->n * size;
    a->n++;
    memset(p, 0, size);
    return p;
}

/* Keys. Every definition type and every public lookup array starts with its key: a uint32 id
 * (strings, domains, thread names), a (domain, category) pair of uint32, or a uint64 schema id.
 * Read as one uint64, a key orders its elements as the sort, the dedupe and the lookups need. */
static inline uint64_t key_id32(const void *e)
{
    uint32_t k;
    memcpy(&k, e, sizeof k);
    return k;
}

static inline uint64_t key_cat(const void *e)
{
    uint32_t k[2]; /* domain, category */
    memcpy(k, e, sizeof k);
    return (uint64_t)k[0] << 32 | k[1];
}

static inline uint64_t key_id64(const void *e)
{
    uint64_t k;
    memcpy(&k, e, sizeof k);
    return k;
}

_Static_assert(offsetof(def_string, id) == 0 && offsetof(def_pair, a) == 0 &&
                   offsetof(def_cat, domain) == 0 && offsetof(def_cat, category) == 4 &&
                   offsetof(def_schema, s) == 0 && offsetof(pp_trace_schema, id) == 0,
               "each definition starts with its key");

/* The index of the element with this key among n elements of `stride` bytes sorted by key_of
 * without repeats, or n when there is none. Inlined with a constant key_of, each caller gets a
 * plain binary search. */
static inline size_t sorted_find(const void *base, size_t n, size_t stride, uint64_t key,
                                 uint64_t (*key_of)(const void *))
{
    const uint8_t *a = base;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k = key_of(a + mid * stride);
        if (k == key)
            return mid;
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return n;
}

/* qsort order of the definitions: by key, then file order. */
static inline int cmp_key_order(uint64_t ka, uint64_t kb, uint64_t oa, uint64_t ob)
{
    if (ka != kb)
        return ka < kb ? -1 : 1;
    return oa < ob ? -1 : oa > ob;
}

static int cmp_string(const void *a, const void *b)
{
    const def_string *x = a, *y = b;
    return cmp_key_order(x->id, y->id, x->order, y->order);
}

static int cmp_pair(const void *a, const void *b)
{
    const def_pair *x = a, *y = b;
    return cmp_key_order(x->a, y->a, x->order, y->order);
}

static int cmp_cat(const void *a, const void *b)
{
    return cmp_key_order(key_cat(a), key_cat(b), ((const def_cat *)a)->order,
                         ((const def_cat *)b)->order);
}

static int cmp_schema(const void *a, const void *b)
{
    const def_schema *x = a, *y = b;
    return cmp_key_order(x->s.id, y->s.id, x->order, y->order);
}

/* The string for id, "" when none or unknown. strings must be sorted and deduplicated. */
static const char *string_of(const trace_impl *im, uint32_t id)
{
    const def_string *s = im->strings.v;
    size_t i = sorted_find(s, im->strings.n, sizeof *s, id, key_id32);
    return i < im->strings.n ? s[i].s : "";
}

/* An event record (PUSH, START, MARK, POP, END) appended to events, its message id to im->msg
 * (resolved at the end). *attach becomes the event a following EXT_PAYLOAD belongs to: this one
 * for PUSH/START/MARK, none after POP/END. */
static inline pp_status load_event(trace_impl *im, vec *events, const pp_rec_header *h,
                                   const uint8_t *rec, size_t *attach)
{
    pp_trace_event *e = vec_push(events, sizeof *e);
    uint32_t *msg = vec_push(&im->msg, sizeof *msg);
    if (!e || !msg)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for events");
    e->type = h->type;
    e->tid = h->tid;
    e->ts = h->ts;
    if (h->type == PP_REC_POP) {
        pp_rec_pop r;
        memcpy(&r, rec, sizeof r);
        e->domain = r.domain;
        *attach = (size_t)-1;
    } else if (h->type == PP_REC_END) {
        pp_rec_end r;
        memcpy(&r, rec, sizeof r);
        e->range_id = r.range_id;
        *attach = (size_t)-1;
    } else {
        pp_rec_range r;
        memcpy(&r, rec, sizeof r);
        e->domain = r.domain;
        *msg = r.message;
        e->category = r.category;
        e->color = r.color;
        e->payload_type = r.payload_type;
        e->payload = r.payload;
        e->range_id = r.range_id;
        *attach = events->n - 1;
    }
    return PP_OK;
}

/* An EXT_PAYLOAD record: its data copied into the arena and attached to event *attach, or
 * dropped when there is none (documented). One extended payload per event. */
static inline pp_status load_ext(trace_impl *im, vec *events, const uint8_t *rec, size_t *attach)
{
    pp_rec_ext r;
    memcpy(&r, rec, sizeof r);
    if (*attach == (size_t)-1)
        return PP_OK;
    pp_trace_event *e = (pp_trace_event *)events->v + *attach;
    *attach = (size_t)-1;
    uint8_t *data = arena_alloc(im, r.data_bytes ? r.data_bytes : 1);
    if (!data)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for ext payloads");
    memcpy(data, rec + sizeof r, r.data_bytes);
    e->schema_id = r.schema_id;
    e->ext = data;
    e->ext_bytes = r.data_bytes;
    return PP_OK;
}

/* A schema definition: its fields are copied into the arena (names resolved at the end). */
static inline pp_status load_schema(trace_impl *im, const uint8_t *rec)
{
    pp_rec_schema r;
    memcpy(&r, rec, sizeof r);
    def_schema *d = vec_push(&im->schemas, sizeof *d);
    /* n_entries was checked against the record's size (<= 65535 bytes), so this
     * allocation is bounded by bytes really present. */
    size_t n = r.n_entries;
    pp_trace_schema_field *f = arena_alloc(im, (n ? n : 1) * sizeof *f);
    uint32_t *names = arena_alloc(im, (n ? n : 1) * sizeof *names);
    if (!d || !f || !names)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for schemas");
    for (size_t i = 0; i < n; i++) {
        pp_rec_schema_entry en;
        memcpy(&en, rec + sizeof r + i * sizeof en, sizeof en);
        f[i].type = en.type;
        f[i].offset = en.offset;
        f[i].name = "";
        names[i] = en.name;
    }
    d->s.id = r.schema_id;
    d->s.domain = r.domain;
    d->s.name = "";
    d->s.static_size = r.static_size;
    d->s.n_fields = r.n_entries;
    d->s.fields = f;
    d->name = r.name;
    d->field_names = names;
    d->order = im->order++;
    return PP_OK;
}

/* A definition record (string, domain, thread name, category, schema) into im's tables,
 * with its file order for the first/last-definition rules of load_finish. */
static inline pp_status load_definition(trace_impl *im, const pp_rec_header *h,
                                        const uint8_t *rec)
{
    switch (h->type) {
    case PP_REC_STRING: {
        pp_rec_string r;
        memcpy(&r, rec, sizeof r);
        if (r.id == 0)
            break; /* 0 means "no string" */
        char *s = arena_alloc(im, (size_t)r.len + 1);
        def_string *d = vec_push(&im->strings, sizeof *d);
        if (!s || !d)
            return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for strings");
        memcpy(s, rec + sizeof r, r.len);
        s[r.len] = '\0';
        d->id = r.id;
        d->order = im->order++;
        d->s = s;
        break;
    }
    case PP_REC_DOMAIN:
    case PP_REC_THREAD_NAME: {
        pp_rec_domain r; /* same layout as pp_rec_thread_name */
        memcpy(&r, rec, sizeof r);
        def_pair *d = vec_push(h->type == PP_REC_DOMAIN ? &im->domains : &im->threads,
                               sizeof *d);
        if (!d)
            return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for definitions");
        d->a = r.id;
        d->name = r.name;
        d->order = im->order++;
        break;
    }
    case PP_REC_CATEGORY: {
        pp_rec_category r;
        memcpy(&r, rec, sizeof r);
        def_cat *d = vec_push(&im->cats, sizeof *d);
        if (!d)
            return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for definitions");
        d->domain = r.domain;
        d->category = r.category;
        d->name = r.name;
        d->order = im->order++;
        break;
    }
    case PP_REC_SCHEMA:
        return load_schema(im, rec);
    default:
        break;
    }
    return PP_OK;
}

/* A GPU, API or NCCL record, kept whole in file order at the start of its element (the names
 * of pp_trace_gpu and pp_trace_nccl are resolved at the end). */
static inline pp_status load_gpu(trace_impl *im, const pp_rec_header *h, const uint8_t *rec)
{
    vec *v = &im->api;
    size_t elem = sizeof(pp_rec_api), bytes = sizeof(pp_rec_api);
    if (h->type == PP_REC_GPU) {
        v = &im->gpu;
        elem = sizeof(pp_trace_gpu);
        bytes = sizeof(pp_rec_gpu);
    } else if (h->type == PP_REC_NCCL) {
        v = &im->nccl;
        elem = sizeof(pp_trace_nccl);
        bytes = sizeof(pp_rec_nccl);
    }
    void *e = vec_push(v, elem);
    if (!e)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for %s records",
                      h->type == PP_REC_GPU ? "GPU" : h->type == PP_REC_NCCL ? "NCCL" : "API");
    memcpy(e, rec, bytes);
    return PP_OK;
}

/* A counter definition, sample or memory call, kept whole in file order. */
static inline pp_status load_counter(trace_impl *im, const pp_rec_header *h, const uint8_t *rec)
{
    void *e;
    if (h->type == PP_REC_COUNTER_DEF) {
        def_counter *c = vec_push(&im->cdefs, sizeof *c);
        e = c;
        if (c) {
            memcpy(&c->d.r, rec, sizeof c->d.r);
            c->order = im->order++;
        }
    } else if (h->type == PP_REC_GPU_MEM) {
        e = vec_push(&im->gpu_mem, sizeof(pp_rec_gpu_mem));
        if (e)
            memcpy(e, rec, sizeof(pp_rec_gpu_mem));
    } else if (h->type == PP_REC_COUNTER) {
        e = vec_push(&im->counters, sizeof(pp_rec_counter));
        if (e)
            memcpy(e, rec, sizeof(pp_rec_counter));
    } else {
        pp_trace_mem *m = vec_push(&im->mem, sizeof *m);
        e = m;
        if (m)
            memcpy(&m->r, rec, sizeof m->r);
    }
    if (!e)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for counter and memory records");
    return PP_OK;
}

static int cmp_counter(const void *a, const void *b)
{
    const def_counter *x = a, *y = b;
    if (x->d.r.domain != y->d.r.domain)
        return x->d.r.domain < y->d.r.domain ? -1 : 1;
    if (x->d.r.counter_id != y->d.r.counter_id)
        return x->d.r.counter_id < y->d.r.counter_id ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Decodes one checked block's records into the trace, one static inline helper per family of
 * record types (all inlined here: no call per record). */
static pp_status load_block(pp_trace *t, trace_impl *im, vec *events, const pp_trace_block *b)
{
    const uint8_t *p = b->payload;
    size_t bytes = b->h.payload_bytes, off = 0;
    /* The event an EXT_PAYLOAD attaches to: the block's latest PUSH/START/MARK (-1 = none). */
    size_t attach = (size_t)-1;
    while (off < bytes) {
        pp_rec_header h;
        memcpy(&h, p + off, sizeof h);
        const uint8_t *rec = p + off;
        off += h.size; /* checked by pp_trace_payload_check before the block was handed out */
        pp_status st = PP_OK;
        switch (h.type) {
        case PP_REC_PUSH:
        case PP_REC_START:
        case PP_REC_MARK:
        case PP_REC_POP:
        case PP_REC_END:
            st = load_event(im, events, &h, rec, &attach);
            break;
        case PP_REC_EXT_PAYLOAD:
            st = load_ext(im, events, rec, &attach);
            break;
        case PP_REC_STRING:
        case PP_REC_DOMAIN:
        case PP_REC_THREAD_NAME:
        case PP_REC_CATEGORY:
        case PP_REC_SCHEMA:
            st = load_definition(im, &h, rec);
            break;
        case PP_REC_GPU:
        case PP_REC_API:
        case PP_REC_NCCL:
            st = load_gpu(im, &h, rec);
            break;
        case PP_REC_COUNTER_DEF:
        case PP_REC_COUNTER:
        case PP_REC_MEM:
        case PP_REC_GPU_MEM:
            st = load_counter(im, &h, rec);
            break;
        case PP_REC_FOOTER: {
            /* The last footer wins; a well-formed file has one, at its end. */
            memcpy(&t->footer, rec, sizeof t->footer);
            t->damage.has_footer = 1;
            break;
        }
        default:
            t->damage.records_unknown++;
            break;
        }
        if (st != PP_OK)
            return st;
    }
    return PP_OK;
}

/* Sorts a definition vector by key then file order and keeps one per key: the first
 * (keep_last = 0) or the last (keep_last = 1) definition in file order. */
static void defs_dedupe(vec *a, size_t size, int (*cmp)(const void *, const void *),
                        uint64_t (*key_of)(const void *), int keep_last)
{
    if (a->n == 0)
        return;
    qsort(a->v, a->n, size, cmp);
    uint8_t *base = a->v;
    size_t out = 0;
    for (size_t i = 0; i < a->n; i++) {
        uint8_t *cur = base + i * size;
        if (out > 0 && key_of(base + (out - 1) * size) == key_of(cur)) {
            if (keep_last)
                memmove(base + (out - 1) * size, cur, size);
            continue;
        }
        if (out != i)
            memmove(base + out * size, cur, size);
        out++;
    }
    a->n = out;
}

/* Resolves string ids and moves the definitions into the public arrays. */
static pp_status load_finish(pp_trace *t, trace_impl *im, vec *events)
{
    /* Strings, domains and schemas are defined once by a writer, so a second definition of an
     * id is damage and the first one (already used by what came before) stays. Thread and
     * category names may be renamed by the program (nvtxNameOsThread, nvtxNameCategory): the
     * last name given wins. */
    defs_dedupe(&im->strings, sizeof(def_string), cmp_string, key_id32, 0);
    defs_dedupe(&im->domains, sizeof(def_pair), cmp_pair, key_id32, 0);
    defs_dedupe(&im->threads, sizeof(def_pair), cmp_pair, key_id32, 1);
    defs_dedupe(&im->cats, sizeof(def_cat), cmp_cat, key_cat, 1);
    defs_dedupe(&im->schemas, sizeof(def_schema), cmp_schema, key_id64, 0);

    t->n_events = events->n;
    t->events = events->v;
    events->v = NULL;
    t->n_gpu = im->gpu.n;
    t->gpu = im->gpu.v;
    im->gpu.v = NULL;
    for (size_t i = 0; i < t->n_gpu; i++)
        t->gpu[i].name = string_of(im, t->gpu[i].r.name);
    t->n_api = im->api.n;
    t->api = im->api.v;
    im->api.v = NULL;
    t->n_nccl = im->nccl.n;
    t->nccl = im->nccl.v;
    im->nccl.v = NULL;
    for (size_t i = 0; i < t->n_nccl; i++)
        t->nccl[i].name = string_of(im, t->nccl[i].r.name);
    t->n_counters = im->counters.n;
    t->counters = im->counters.v;
    im->counters.v = NULL;
    t->n_gpu_mem = im->gpu_mem.n;
    t->gpu_mem = im->gpu_mem.v;
    im->gpu_mem.v = NULL;
    t->n_mem = im->mem.n;
    t->mem = im->mem.v;
    im->mem.v = NULL;
    for (size_t i = 0; i < t->n_mem; i++)
        t->mem[i].name = string_of(im, t->mem[i].r.name);
    def_counter *dcn = im->cdefs.v;
    if (im->cdefs.n)
        qsort(dcn, im->cdefs.n, sizeof *dcn, cmp_counter);
    t->counter_defs = calloc(im->cdefs.n ? im->cdefs.n : 1, sizeof *t->counter_defs);
    if (!t->counter_defs)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for counter definitions");
    for (size_t i = 0; i < im->cdefs.n; i++) {
        if (t->n_counter_defs > 0) {
            const pp_rec_counter_def *prev = &t->counter_defs[t->n_counter_defs - 1].r;
            if (prev->domain == dcn[i].d.r.domain && prev->counter_id == dcn[i].d.r.counter_id)
                continue; /* first definition wins */
        }
        pp_trace_counter_def *o = &t->counter_defs[t->n_counter_defs++];
        o->r = dcn[i].d.r;
        o->name = string_of(im, o->r.name);
        o->unit = string_of(im, o->r.unit);
    }
    const uint32_t *msg = im->msg.v;
    for (size_t i = 0; i < t->n_events; i++)
        t->events[i].message = string_of(im, msg[i]);

    size_t nd = im->domains.n, nt = im->threads.n, nc = im->cats.n, ns = im->schemas.n;
    t->domains = calloc(nd ? nd : 1, sizeof *t->domains);
    t->threads = calloc(nt ? nt : 1, sizeof *t->threads);
    t->categories = calloc(nc ? nc : 1, sizeof *t->categories);
    t->schemas = calloc(ns ? ns : 1, sizeof *t->schemas);
    if (!t->domains || !t->threads || !t->categories || !t->schemas)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for definitions");
    const def_pair *dp = im->domains.v;
    for (size_t i = 0; i < nd; i++) {
        t->domains[i].id = dp[i].a;
        t->domains[i].name = string_of(im, dp[i].name);
    }
    t->n_domains = nd;
    dp = im->threads.v;
    for (size_t i = 0; i < nt; i++) {
        t->threads[i].tid = dp[i].a;
        t->threads[i].name = string_of(im, dp[i].name);
    }
    t->n_threads = nt;
    const def_cat *dc = im->cats.v;
    for (size_t i = 0; i < nc; i++) {
        t->categories[i].domain = dc[i].domain;
        t->categories[i].category = dc[i].category;
        t->categories[i].name = string_of(im, dc[i].name);
    }
    t->n_categories = nc;
    const def_schema *ds = im->schemas.v;
    for (size_t i = 0; i < ns; i++) {
        t->schemas[i] = ds[i].s;
        t->schemas[i].name = string_of(im, ds[i].name);
        for (uint32_t k = 0; k < ds[i].s.n_fields; k++)
            t->schemas[i].fields[k].name = string_of(im, ds[i].field_names[k]);
    }
    t->n_schemas = ns;
    return PP_OK;
}

/* Frees the tables that resolve ids (definitions, message ids), which load_finish has turned
 * into the public arrays; the arena (strings, ext data, schema fields) stays. */
static void impl_free_tables(trace_impl *im)
{
    vec *tables[] = {&im->strings, &im->domains, &im->threads, &im->cats, &im->schemas, &im->msg,
                     &im->cdefs};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        free(tables[i]->v);
        *tables[i] = (vec){0};
    }
}

static void impl_free(trace_impl *im)
{
    if (!im)
        return;
    arena_chunk *c = im->arena;
    while (c) {
        arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    impl_free_tables(im);
    free(im->gpu.v);
    free(im->api.v);
    free(im->nccl.v);
    free(im->counters.v);
    free(im->mem.v);
    free(im->gpu_mem.v);
    free(im);
}

static pp_status load_from(pp_trace_reader *r, pp_trace **out)
{
    pp_status st = PP_OK;
    vec events = {0};
    pp_trace *t = calloc(1, sizeof *t);
    trace_impl *im = calloc(1, sizeof *im);
    if (!t || !im) {
        free(t);
        free(im);
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory");
    }
    t->impl = im;
    t->header = *pp_trace_reader_header(r);
    for (;;) {
        pp_trace_block b;
        bool got;
        st = pp_trace_reader_next(r, &b, &got);
        if (st != PP_OK || !got)
            break;
        st = load_block(t, im, &events, &b);
        if (st != PP_OK)
            break;
    }
    /* Damage counters are final only after the last block; footer flag is the loader's. */
    int has_footer = t->damage.has_footer;
    uint64_t unknown = t->damage.records_unknown;
    t->damage = *pp_trace_reader_damage(r);
    t->damage.has_footer = has_footer;
    t->damage.records_unknown = unknown;
    if (st == PP_OK)
        st = load_finish(t, im, &events);
    free(events.v);
    if (st != PP_OK) {
        pp_trace_free(t);
        return st;
    }
    impl_free_tables(im); /* no longer needed */
    *out = t;
    return PP_OK;
}

pp_status pp_trace_load_mem(const void *data, size_t len, pp_trace **out)
{
    if (!out)
        return PP_ERR(PP_ERR_INVALID, "trace: load_mem needs an out");
    *out = NULL;
    pp_trace_reader *r;
    pp_status st = pp_trace_reader_open_mem(data, len, &r);
    if (st != PP_OK)
        return st;
    st = load_from(r, out);
    pp_trace_reader_close(r);
    return st;
}

pp_status pp_trace_load(const char *path, pp_trace **out)
{
    if (!out)
        return PP_ERR(PP_ERR_INVALID, "trace: load needs an out");
    *out = NULL;
    pp_trace_reader *r;
    pp_status st = pp_trace_reader_open(path, &r);
    if (st != PP_OK)
        return st;
    st = load_from(r, out);
    pp_trace_reader_close(r);
    if (st != PP_OK)
        return pp_error_wrap(st, "%s", path);
    return PP_OK;
}

void pp_trace_free(pp_trace *t)
{
    if (!t)
        return;
    free(t->events);
    free(t->gpu);
    free(t->api);
    free(t->nccl);
    free(t->counter_defs);
    free(t->counters);
    free(t->mem);
    free(t->gpu_mem);
    free(t->domains);
    free(t->threads);
    free(t->categories);
    free(t->schemas);
    impl_free(t->impl);
    free(t);
}

/* ---- lookups: the public arrays are sorted by their key (load_finish), so sorted_find ---- */

const char *pp_trace_domain_name(const pp_trace *t, uint32_t domain)
{
    if (!t)
        return NULL;
    size_t i = sorted_find(t->domains, t->n_domains, sizeof *t->domains, domain, key_id32);
    return i < t->n_domains ? t->domains[i].name : NULL;
}

const char *pp_trace_category_name(const pp_trace *t, uint32_t domain, uint32_t category)
{
    if (!t)
        return NULL;
    uint64_t key = (uint64_t)domain << 32 | category;
    size_t i = sorted_find(t->categories, t->n_categories, sizeof *t->categories, key, key_cat);
    return i < t->n_categories ? t->categories[i].name : NULL;
}

const char *pp_trace_thread_name(const pp_trace *t, uint32_t tid)
{
    if (!t)
        return NULL;
    size_t i = sorted_find(t->threads, t->n_threads, sizeof *t->threads, tid, key_id32);
    return i < t->n_threads ? t->threads[i].name : NULL;
}

const pp_trace_schema *pp_trace_schema_find(const pp_trace *t, uint64_t schema_id)
{
    if (!t)
        return NULL;
    size_t i = sorted_find(t->schemas, t->n_schemas, sizeof *t->schemas, schema_id, key_id64);
    return i < t->n_schemas ? &t->schemas[i] : NULL;
}

const pp_trace_counter_def *pp_trace_counter_find(const pp_trace *t, uint32_t domain,
                                                  uint64_t counter_id)
{
    if (!t)
        return NULL;
    size_t lo = 0, hi = t->n_counter_defs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const pp_rec_counter_def *r = &t->counter_defs[mid].r;
        if (r->domain < domain || (r->domain == domain && r->counter_id < counter_id))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < t->n_counter_defs && t->counter_defs[lo].r.domain == domain &&
        t->counter_defs[lo].r.counter_id == counter_id)
        return &t->counter_defs[lo];
    return NULL;
}
