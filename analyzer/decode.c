/* decode.c: the first stage of the analysis, trace blocks -> ranges (analyzer_internal.h). Reads
 * a file's META blocks into its string, domain and schema tables, pairs the push/pop and
 * start/end records of its EVENTS blocks per thread into ranges, and decodes the ranges of the
 * pipeprof domain by the convention (docs/nvtx-convention.md, common/pp_convention.h): the
 * pipeprof.event payload first, the message grammar as fallback, every value checked against
 * the bounds. Closed ranges go on to steps.c (an_on_range); marks set the run's configuration.
 * A new trace dialect (another domain, schema or message grammar) plugs in here: it decodes
 * into the same `decoded` range, with the convention's kinds. on_events is the analysis' hot
 * loop (docs/metrics.md: >= 800 MB/s per core); its helpers are static inline. */
#include "analyzer_internal.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>

const char *pp_aop_kind_name(pp_aop_kind k)
{
    switch (k) {
    case PP_AOP_FWD: case PP_AOP_BWD: case PP_AOP_BWD_INPUT: case PP_AOP_BWD_WEIGHT:
    case PP_AOP_OPT: case PP_AOP_SEND_ACT: case PP_AOP_RECV_ACT: case PP_AOP_SEND_GRAD:
    case PP_AOP_RECV_GRAD: return pp_nvtx_kind_word(k);
    default: return "?";
    }
}

int pp_aop_is_compute(pp_aop_kind k) { return an_is_compute(k); }

static int cmp_far(const void *a, const void *b)
{
    uint32_t x = ((const far_string *)a)->id, y = ((const far_string *)b)->id;
    return (x > y) - (x < y);
}

const char *an_str_of(file_state *f, uint32_t id)
{
    if (id == 0)
        return "";
    if (id < f->strings.n && ((char **)f->strings.data)[id])
        return ((char **)f->strings.data)[id];
    far_string key = {.id = id};
    const far_string *x = f->far_strings.n ? bsearch(&key, f->far_strings.data, f->far_strings.n,
                                                     sizeof key, cmp_far)
                                           : NULL;
    return x && x->s ? x->s : "";
}

/* Where string `id` is stored: the dense table while the id stays within four times the
 * strings defined (plus 4096: the capture library numbers them 1, 2, ...), else the sorted
 * far list. NULL when out of memory. */
static char **string_slot(file_state *f, uint32_t id)
{
    /* an id stored far before the table grew past it stays there */
    far_string key = {.id = id};
    far_string *fs = f->far_strings.data;
    size_t lo = 0, hi = f->far_strings.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (fs[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < f->far_strings.n && fs[lo].id == id)
        return &fs[lo].s;
    if (id < f->strings.n)
        return &((char **)f->strings.data)[id];
    if ((size_t)id < 4 * f->n_strings + 4096) {
        while (f->strings.n <= id)
            if (!vec_push(&f->strings))
                return NULL;
        return &((char **)f->strings.data)[id];
    }
    if (!vec_push(&f->far_strings))
        return NULL;
    fs = f->far_strings.data;
    memmove(&fs[lo + 1], &fs[lo], (f->far_strings.n - 1 - lo) * sizeof *fs);
    fs[lo] = key;
    return &fs[lo].s;
}

static uint64_t get_u(const uint8_t *p, size_t n, uint64_t off, int bytes)
{
    if (off > n || (uint64_t)bytes > n - off) /* off is the trace's schema offset: no wrap */
        return 0;
    uint64_t v = 0;
    memcpy(&v, p + off, (size_t)bytes);
    return v;
}

/* The message grammar (pp_nvtx_message_parse) of string `id`, from the file's cache, into d.
 * Ids past MSG_CACHE_IDS are parsed every time, so a hostile id cannot make the cache large. */
enum { MSG_CACHE_IDS = 1 << 16 };

static void message_into(const pp_nvtx_message *m, decoded *d)
{
    d->kind = m->kind;
    d->mb = m->mb;
    d->chunk = m->chunk;
    d->layer = m->layer;
    d->peer = m->peer;
}

static void decode_message_id(file_state *f, uint32_t id, decoded *d)
{
    if (id == 0)
        return; /* "" : the grammar matches nothing */
    pp_nvtx_message m;
    if (id >= f->strings.n || !((char **)f->strings.data)[id]) {
        const char *s = an_str_of(f, id); /* a far id (string_slot): parsed every time */
        if (*s) {
            pp_nvtx_message_parse(s, &m);
            message_into(&m, d);
        }
        return;
    }
    while (f->msgs.n <= id && id < MSG_CACHE_IDS)
        if (!vec_push(&f->msgs))
            break;
    if (f->msgs.n <= id) {
        pp_nvtx_message_parse(an_str_of(f, id), &m);
        message_into(&m, d);
        return;
    }
    msg_info *mi = &((msg_info *)f->msgs.data)[id];
    if (!mi->valid) {
        pp_nvtx_message_parse(an_str_of(f, id), &mi->m);
        mi->valid = 1;
    }
    message_into(&mi->m, d);
}

/* Checks a decoded range against the bounds of pp_analyzer.h (the configuration mark's S, M, v
 * and layers where it stated them). -1 is "unset" for every field. On a broken bound the
 * range becomes PP_NVTX_KIND_NONE, so no caller uses any of its values, and d->oob says which
 * bound. */
static inline void check_bounds(const state *st, decoded *d)
{
    if (d->kind == PP_NVTX_KIND_NONE)
        return;
    int64_t S = st->S_cfg > 0 ? st->S_cfg : PP_ANALYSIS_MAX_STAGES;
    int64_t M = st->M_cfg > 0 ? st->M_cfg : PP_ANALYSIS_MAX_MB;
    int64_t v = st->v_cfg > 0 ? st->v_cfg : PP_ANALYSIS_MAX_CHUNKS;
    int64_t L = st->L_cfg > 0 ? st->L_cfg : PP_ANALYSIS_MAX_LAYERS;
    if (d->stage < -1 || d->stage >= S)
        d->oob = st->S_cfg > 0 ? "stage >= the announced S" : "stage outside [0, 4096)";
    else if (d->peer < -1 || d->peer >= S)
        d->oob = st->S_cfg > 0 ? "peer >= the announced S" : "peer outside [0, 4096)";
    else if (d->mb < -1 || d->mb >= M)
        d->oob = st->M_cfg > 0 ? "micro-batch >= the announced M"
                               : "micro-batch outside [0, 2^20)";
    else if (d->chunk < -1 || d->chunk >= v)
        d->oob = st->v_cfg > 0 ? "chunk >= the announced v" : "chunk outside [0, 64)";
    else if (d->layer < -1 || d->layer >= L)
        d->oob = st->L_cfg > 0 ? "layer >= the announced layers"
                               : "layer outside [0, 2^16)";
    else if (d->step < -1 || d->step > PP_ANALYSIS_MAX_STEP)
        d->oob = "step outside [0, 2^48]";
    if (d->oob)
        d->kind = PP_NVTX_KIND_NONE;
}

/* A 32-bit signed field of the extended payload, widened. */
static int64_t get_i32(const uint8_t *p, size_t n, uint64_t off)
{
    return (int64_t)(int32_t)(uint32_t)get_u(p, n, off, 4);
}

static void decode(const state *st, file_state *f, const open_range *o, decoded *d)
{
    if (o->has_ext && f->schema_ok && f->default_layout && o->ext_bytes >= sizeof(pp_nvtx_event)) {
        /* the convention's layout (docs/nvtx-convention.md), as every libpprof capture has it:
         * the fields at fixed offsets, without an offset check per field (values: check_bounds) */
        pp_nvtx_event e;
        memcpy(&e, o->ext, sizeof e);
        *d = (decoded){.kind = e.kind >= PP_NVTX_KIND_COUNT ? PP_NVTX_KIND_NONE : (int)e.kind,
                       .step = e.step, .stage = e.stage, .mb = e.mb, .chunk = e.chunk,
                       .layer = e.layer, .peer = e.peer, .bytes = e.bytes, .has_bytes = 1};
        check_bounds(st, d);
        return;
    }
    memset(d, 0, sizeof *d);
    d->kind = PP_NVTX_KIND_NONE;
    d->step = -1;
    d->stage = d->mb = d->chunk = d->layer = d->peer = -1;
    if (o->has_ext && f->schema_ok) {
        const uint8_t *p = o->ext;
        size_t n = o->ext_bytes;
        uint32_t kind = (uint32_t)get_u(p, n, f->off[PP_NVTX_F_KIND], 4);
        /* a later kind: not ours to read */
        d->kind = kind >= PP_NVTX_KIND_COUNT ? PP_NVTX_KIND_NONE : (int)kind;
        d->stage = get_i32(p, n, f->off[PP_NVTX_F_STAGE]);
        d->mb = get_i32(p, n, f->off[PP_NVTX_F_MB]);
        d->chunk = get_i32(p, n, f->off[PP_NVTX_F_CHUNK]);
        d->layer = get_i32(p, n, f->off[PP_NVTX_F_LAYER]);
        d->peer = get_i32(p, n, f->off[PP_NVTX_F_PEER]);
        d->bytes = get_u(p, n, f->off[PP_NVTX_F_BYTES], 8);
        d->has_bytes = 1;
        d->step = (int64_t)get_u(p, n, f->off[PP_NVTX_F_STEP], 8);
        check_bounds(st, d);
        return;
    }
    decode_message_id(f, o->message, d);
    /* the category is a uint32: stage = category - 1 computed wide (no overflow) */
    d->stage = o->category > 0 ? (int64_t)o->category - 1 : -1;
    int is_int = o->payload_type == 1 || o->payload_type == 2 || o->payload_type == 4 ||
                 o->payload_type == 5;
    if (is_int) {
        /* an unsigned 64-bit payload past INT64_MAX reads as INT64_MAX: too large, not
         * negative */
        int64_t x = o->payload > (uint64_t)INT64_MAX && o->payload_type == 1
                        ? INT64_MAX
                        : (int64_t)o->payload;
        if (o->payload_type == 4)
            x = (uint32_t)o->payload;
        if (o->payload_type == 5)
            x = (int32_t)o->payload;
        switch (d->kind) {
        case PP_NVTX_STEP: d->step = x; break;
        case PP_NVTX_FWD: case PP_NVTX_BWD: case PP_NVTX_BWD_INPUT: case PP_NVTX_BWD_WEIGHT:
        case PP_NVTX_LAYER_FWD: case PP_NVTX_LAYER_BWD: case PP_NVTX_LAYER_BWD_WEIGHT:
            d->mb = x;
            break;
        case PP_NVTX_SEND_ACT: case PP_NVTX_RECV_ACT: case PP_NVTX_SEND_GRAD:
        case PP_NVTX_RECV_GRAD: case PP_NVTX_ALLREDUCE:
            d->bytes = o->payload_type == 1 ? o->payload : (uint64_t)x;
            d->has_bytes = 1;
            break;
        default: break;
        }
    }
    check_bounds(st, d);
}

static thread_state *thread_of(file_state *f, uint32_t tid)
{
    thread_state *t = f->threads.data;
    for (size_t i = 0; i < f->threads.n; i++)
        if (t[i].tid == tid)
            return &t[i];
    thread_state *n = vec_push(&f->threads);
    if (!n)
        return NULL;
    n->tid = tid;
    n->stack.elem = sizeof(open_range);
    n->cur_step = -1;
    n->cur_stage = -1;
    n->cur_mb = -1;
    return n;
}

/* A layer mark (docs/nvtx-convention.md "Layer marks"): the layer's name and sizes. */
static void on_layer_mark(state *st, const char *msg)
{
    pp_nvtx_layer_info li;
    if (!pp_nvtx_layer_mark_parse(msg, &li) || li.index < 0 || li.index >= 1 << 20)
        return;
    while (st->layers.n <= (size_t)li.index)
        if (!vec_push(&st->layers))
            return;
    layer_acc *la = &((layer_acc *)st->layers.data)[li.index];
    la->has_info = 1;
    la->param_bytes = li.param_bytes;
    la->activation_bytes = li.activation_bytes;
    la->has_kept = li.has_kept && li.has_input;
    la->kept_bytes = li.kept_bytes;
    la->input_bytes = li.input_bytes;
    if (li.name[0])
        snprintf(la->name, sizeof la->name, "%s", li.name);
}

/* A clock ping-pong mark, kept in the clock pass (clock_pass.c pairs them). */
static void on_clocksync(state *st, file_state *f, const char *msg, uint64_t ts)
{
    pp_nvtx_clocksync c;
    if (!st->collect || f->rank < 0 || !pp_nvtx_clocksync_parse(msg, &c))
        return;
    sync_mark *m = vec_push(&st->syncs);
    if (m)
        *m = (sync_mark){.src = c.recv ? c.peer : f->rank, .dst = c.recv ? f->rank : c.peer,
                         .phase = c.phase, .seq = c.seq, .recv = c.recv, .file = f->index,
                         .ts = ts};
}

/* A whole-number config value in [lo, max] (lo: 0 for replica, else 1); a value outside, or
 * not a number, is warned about once per key and not used. */
static int config_int(pp_analysis *a, const char *key, const char *v, int64_t max, int64_t *out)
{
    int64_t lo = strcmp(key, "replica") == 0 ? 0 : 1;
    if (pp_parse_i64(v, key, lo, max, out) == PP_OK)
        return 1;
    pp_error_clear();
    if (strcmp(v, "0") == 0)
        return 0; /* 0: unknown, as for the counts */
    char line[96];
    snprintf(line, sizeof line, "config mark: %s=", key);
    if (!strstr(a->warnings, line))
        an_warn(a, "config mark: %s=%.32s is not a whole number in [%lld, %lld]: ignored", key, v,
                (long long)lo, (long long)max);
    return 0;
}

/* samples_per_step / tokens_per_step: a finite count >= 0, else 0 (unknown). */
static double config_count(const char *v)
{
    double x = atof(v);
    return isfinite(x) && x >= 0 && x < 1e18 ? x : 0.0;
}

/* One key=value of the configuration mark (docs/nvtx-convention.md); numbers outside their
 * bounds are not announced. */
typedef struct config_ctx {
    state *st;
    file_state *f;
} config_ctx;

static void config_kv(void *ctx, const char *k, const char *v)
{
    state *st = ((config_ctx *)ctx)->st;
    file_state *f = ((config_ctx *)ctx)->f;
    pp_analysis *a = st->a;
    int64_t x = 0;
    if (strcmp(k, "schedule") == 0)
        snprintf(a->schedule, sizeof a->schedule, "%s", v);
    else if (strcmp(k, "schedules") == 0 && strlen(v) < sizeof a->schedules)
        snprintf(a->schedules, sizeof a->schedules, "%s", v);
    else if (strcmp(k, "recompute") == 0 && strlen(v) < sizeof a->recompute)
        snprintf(a->recompute, sizeof a->recompute, "%s", v);
    else if (strcmp(k, "S") == 0)
        st->S_cfg = config_int(a, k, v, PP_ANALYSIS_MAX_STAGES, &x) ? (int)x : 0;
    else if (strcmp(k, "M") == 0)
        a->M = st->M_cfg = config_int(a, k, v, PP_ANALYSIS_MAX_MB, &x) ? (int)x : 0;
    else if (strcmp(k, "v") == 0)
        a->v = st->v_cfg = config_int(a, k, v, PP_ANALYSIS_MAX_CHUNKS, &x) ? (int)x : 0;
    else if (strcmp(k, "layers") == 0)
        st->L_cfg = config_int(a, k, v, PP_ANALYSIS_MAX_LAYERS, &x) ? (int)x : 0;
    else if (strcmp(k, "samples_per_step") == 0)
        a->samples_per_step = config_count(v);
    else if (strcmp(k, "tokens_per_step") == 0)
        a->tokens_per_step = config_count(v);
    else if (strcmp(k, "dp") == 0)
        a->dp = config_int(a, k, v, 1 << 20, &x) ? (int)x : a->dp;
    else if (strcmp(k, "replica") == 0)
        f->replica = config_int(a, k, v, (1 << 20) - 1, &x) ? (int)x : 0;
}

/* A mark of the pipeprof domain: the configuration, a layer's sizes, or the clock ping-pong. */
static void on_mark(state *st, file_state *f, const char *msg, uint64_t ts)
{
    switch (pp_nvtx_mark_kind(msg)) {
    case PP_NVTX_MARK_CLOCKSYNC: on_clocksync(st, f, msg, ts); return;
    case PP_NVTX_MARK_LAYER: on_layer_mark(st, msg); return;
    case PP_NVTX_MARK_NONE: return;
    case PP_NVTX_MARK_CONFIG: break;
    }
    config_ctx c = {st, f};
    pp_nvtx_mark_each(msg, config_kv, &c);
    st->cfg_gen++; /* the bounds decode() checks may have changed */
    if (st->S_cfg)
        an_ensure_stage(st, st->S_cfg - 1);
}

/* An interval of file f onto the reference clock. */
static inline void interval_to_ref(const file_state *f, uint64_t *start, uint64_t *end)
{
    *start = pp_clock_to_ref(&f->clk, *start);
    *end = pp_clock_to_ref(&f->clk, *end);
}

/* A GPU-capture record onto the reference clock, to the GPU pass's projection, or in the host
 * pass to the recording of what that pass will be handed (gpu_rec.c). */
static void on_gpu_record(state *st, file_state *f, uint16_t type, const uint8_t *rec,
                          uint16_t size)
{
    if (type == PP_REC_GPU && size >= sizeof(pp_rec_gpu)) {
        pp_rec_gpu g;
        memcpy(&g, rec, sizeof g);
        interval_to_ref(f, &g.start, &g.end);
        if (st->gpu)
            pp_gpu_proj_gpu(st->gpu, f->index, &g);
        else
            st->gpu_rec_on = an_gpu_rec_record(st->gpu_rec, f->index, type, &g, sizeof g);
    } else if (type == PP_REC_API && size >= sizeof(pp_rec_api)) {
        pp_rec_api a;
        memcpy(&a, rec, sizeof a);
        interval_to_ref(f, &a.start, &a.end);
        if (st->gpu)
            pp_gpu_proj_api(st->gpu, f->index, &a);
        else
            st->gpu_rec_on = an_gpu_rec_record(st->gpu_rec, f->index, type, &a, sizeof a);
    } else if (type == PP_REC_NCCL && size >= sizeof(pp_rec_nccl)) {
        pp_rec_nccl n;
        memcpy(&n, rec, sizeof n);
        interval_to_ref(f, &n.start, &n.end);
        if (n.timed)
            interval_to_ref(f, &n.gpu_start, &n.gpu_end);
        if (st->gpu)
            pp_gpu_proj_nccl(st->gpu, f->index, &n);
        else
            st->gpu_rec_on = an_gpu_rec_record(st->gpu_rec, f->index, type, &n, sizeof n);
    }
}

/* Host pass: which trace file holds each NCCL communicator's rank (pp_gpu_proj_nccl_stages). A
 * hostile trace cannot make the list longer than 65536. */
static void note_nccl_member(state *st, const file_state *f, const uint8_t *rec)
{
    pp_rec_nccl n;
    memcpy(&n, rec, sizeof n);
    const pp_gpu_nccl_member *m = st->nccl_members.data;
    for (size_t j = 0; j < st->nccl_members.n; j++)
        if (m[j].comm == n.comm && m[j].rank == n.rank)
            return;
    if (st->nccl_members.n >= 65536)
        return;
    pp_gpu_nccl_member *x = vec_push(&st->nccl_members);
    if (x)
        *x = (pp_gpu_nccl_member){n.comm, n.rank, f->index};
}

/* Whether the record after the one ending at `off` is a pipeprof.event extended payload (which
 * then belongs to it). */
static int ext_follows(const uint8_t *p, size_t bytes, size_t off)
{
    pp_rec_ext e;
    if (off + sizeof e > bytes)
        return 0;
    memcpy(&e, p + off, sizeof e);
    const size_t keep = sizeof ((open_range *)0)->ext; /* what a range keeps of it */
    size_t nb = e.data_bytes < keep ? e.data_bytes : keep;
    return e.h.type == PP_REC_EXT_PAYLOAD && e.h.size >= sizeof e && off + e.h.size <= bytes &&
           e.schema_id == PP_NVTX_SCHEMA_ID && sizeof e + nb <= e.h.size;
}

/* The next record of blk (its header into h), *off moved past it; NULL after the block's
 * n_records records, or at a record that does not fit in it (the rest is not read). */
static inline const uint8_t *next_record(const pp_trace_block *blk, size_t *off,
                                         pp_rec_header *h, uint32_t *i)
{
    size_t bytes = blk->h.payload_bytes;
    if (*i >= blk->h.n_records || *off + sizeof *h > bytes)
        return NULL;
    memcpy(h, blk->payload + *off, sizeof *h);
    if (h->size < sizeof *h || *off + h->size > bytes)
        return NULL;
    const uint8_t *rec = blk->payload + *off;
    *off += h->size;
    (*i)++;
    return rec;
}

/* What the enclosing ranges say, for layer ranges and fallback step numbers: a step range or
 * a compute range opened on t (d: decode() of it). */
static inline void note_open(state *st, file_state *f, thread_state *t, const decoded *d,
                             int64_t step, uint64_t t0)
{
    if (d->kind == PP_NVTX_STEP) {
        t->cur_step = step;
        unsigned k = f->n_step_opens++ % (sizeof f->step_opens / sizeof f->step_opens[0]);
        f->step_opens[k].step = step;
        f->step_opens[k].t0 = t0;
        t->cur_stage = d->stage;
        if (f->replica == st->o->replica)
            an_note_step_open(st, f, d->stage, step);
    } else if (d->kind >= PP_NVTX_FWD && d->kind <= PP_NVTX_BWD_WEIGHT) {
        t->cur_mb = d->mb;
    }
}


/* ---- dialects (pp_dialect.h, docs/dialects.md): foreign ranges named the way another framework
 * names them become pipeline ranges. Only ranges outside the pipeprof domain come here: the
 * convention's hot path never does. ---- */

/* open_range.has_dec of a range a dialect decoded at its opening (1 is the convention's cache):
 * a pipeline range; a torch transfer action whose point-to-point operation took its op; that
 * operation's range (the op, with the comm's interval); a torch compute action (its waits are
 * taken out at its close); a torch OVERLAP_F_B action (its two ops made at its close). */
enum { DEC_DIALECT = 2, DEC_TAKEN = 3, DEC_COMM = 4, DEC_TORCH_COMPUTE = 5, DEC_OVERLAP = 6,
       DEC_PEND_RECV = 7 /* a Schedule1F1B receive, held at its close (stack_recv_held) */ };
enum { DIALECT_SCAN = 64 }; /* open ranges looked through for the enclosing torch action */

/* The name of domain id in f ("" for the default domain and an unknown one). */
static const char *domain_of(file_state *f, uint32_t id)
{
    const domain_name *d = f->domains.data;
    for (size_t i = 0; i < f->domains.n; i++)
        if (d[i].id == id)
            return an_str_of(f, d[i].name);
    return "";
}

/* What the dialects say about string `id` in `domain` into *x (the user's file first, then
 * Paddle's pipeline timeline in its domains, the torch names elsewhere); its src (0: no match,
 * 1 the file, 2 torch, 3 Paddle). */
static int dialect_eval(file_state *f, uint32_t id, uint32_t domain, pp_dialect_match *x)
{
    const char *name = an_str_of(f, id);
    if (!*name)
        return 0;
    if (f->dialect && pp_dialect_match_name(f->dialect, domain_of(f, domain), name, x))
        return 1;
    if (domain && (domain == f->paddle_tl[0] || domain == f->paddle_tl[1]))
        return pp_dialect_paddle_match(domain == f->paddle_tl[1], name, x) ? 3 : 0;
    return pp_dialect_torch_match(name, x) ? 2 : 0;
}

/* dialect_eval through the file's cache (ids below MSG_CACHE_IDS, one domain per id: a second
 * domain recomputes); the match into *x, its src returned. */
static int dialect_of(file_state *f, uint32_t id, uint32_t domain, pp_dialect_match *x)
{
    if (id == 0)
        return 0;
    while (f->dinfo.n <= id && id < MSG_CACHE_IDS && id < f->strings.n)
        if (!vec_push(&f->dinfo))
            break;
    if (f->dinfo.n <= id)
        return dialect_eval(f, id, domain, x);
    dialect_info *di = &((dialect_info *)f->dinfo.data)[id];
    if (!di->valid || di->domain != domain) {
        di->src = (uint8_t)dialect_eval(f, id, domain, &di->m);
        di->domain = domain;
        di->valid = 1;
    }
    *x = di->m;
    return di->src;
}

int64_t an_file_step_at(const file_state *f, uint64_t t0)
{
    unsigned cap = sizeof f->step_opens / sizeof f->step_opens[0];
    unsigned n = f->n_step_opens < cap ? f->n_step_opens : cap;
    int64_t step = -1;
    uint64_t best = 0;
    for (unsigned i = 0; i < n; i++)
        if (f->step_opens[i].t0 <= t0 && (step < 0 || f->step_opens[i].t0 >= best))
            step = f->step_opens[i].step, best = f->step_opens[i].t0;
    return step;
}

/* The trace's pipeline rank: its place in its pipeline's process group where the trace tells,
 * else its header's rank, else its index among the files. */
static inline int64_t trace_rank(const file_state *f)
{
    return f->pipe_rank >= 0 ? f->pipe_rank : f->rank >= 0 ? f->rank : f->index;
}

/* A torch stage id onto (stage, chunk): the stage is the trace's rank (the first stage id it
 * names when it states no rank), the chunk the order in which the trace first names the id
 * (each rank starts on its lowest stage in every torch schedule). -1 past 64 ids. */
static int64_t torch_chunk(file_state *f, int64_t sid)
{
    for (int i = 0; i < f->n_torch_ids; i++)
        if (f->torch_ids[i] == sid)
            return i;
    if (f->n_torch_ids == (int)(sizeof f->torch_ids / sizeof f->torch_ids[0]))
        return -1;
    f->torch_ids[f->n_torch_ids] = (int32_t)sid;
    return f->n_torch_ids++;
}

/* f's first two torch stage ids into the run's placement (an_placement), once. */
static void torch_placement_note(state *st, file_state *f)
{
    if (f->torch_pair_noted || f->n_torch_ids < 2)
        return;
    f->torch_pair_noted = 1;
    int64_t sum = (int64_t)f->torch_ids[0] + f->torch_ids[1];
    int64_t diff = (int64_t)f->torch_ids[1] - f->torch_ids[0];
    if (st->torch_pairs++ == 0) {
        st->torch_sum = sum;
        st->torch_diff = diff;
        st->torch_same_sum = st->torch_same_diff = 1;
        return;
    }
    st->torch_same_sum &= sum == st->torch_sum;
    st->torch_same_diff &= diff == st->torch_diff;
}

/* A dialect's match turned into a decoded range on thread t ("rank", "sequence", torch's
 * stage ids), checked against the bounds. */
static void dialect_resolve(const state *st, file_state *f, thread_state *t,
                            const pp_dialect_match *m, decoded *d)
{
    memset(d, 0, sizeof *d);
    d->kind = m->kind;
    d->peer = -1;
    int64_t *out[PP_DF_COUNT] = {&d->stage, &d->mb, &d->chunk, &d->layer, &d->step};
    for (int k = 0; k < PP_DF_COUNT; k++) {
        int64_t v = -1;
        switch (m->from[k]) {
        case PP_DFROM_VALUE: v = m->v[k]; break;
        case PP_DFROM_RANK: v = trace_rank(f); break;
        case PP_DFROM_THREAD: v = (int64_t)t->tid - 1; break; /* tid 0: -1, unset */
        case PP_DFROM_SEQUENCE:
            if (k == PP_DF_LAYER)
                v = t->dlayer_seq++;
            else if (k == PP_DF_MB && d->kind >= 0 && d->kind < PP_NVTX_KIND_COUNT)
                v = t->dseq[d->kind]++;
            /* step: -1, the fallback numbering counts step ranges */
            break;
        default: break;
        }
        *out[k] = v;
    }
    if (m->torch_stage_id >= 0) {
        d->chunk = torch_chunk(f, m->torch_stage_id);
        if (f->rank < 0)
            d->stage = f->torch_ids[0];
        if (d->chunk < 0)
            d->kind = PP_NVTX_KIND_NONE;
    }
    if (d->kind == PP_NVTX_STEP) {
        memset(t->dseq, 0, sizeof t->dseq);
    } else if (d->kind >= PP_NVTX_FWD && d->kind <= PP_NVTX_BWD_WEIGHT) {
        t->dlayer_seq = 0;
    }
    check_bounds(st, d);
    if (!d->oob && d->kind >= PP_NVTX_SEND_ACT && d->kind <= PP_NVTX_RECV_GRAD)
        d->peer = AN_PEER_LATE; /* implied when its step is finalized */
}

/* A compute kind's direction for the torch rings: 0 forward, 1 backward (its input is a
 * gradient), -1 none (W waits for nothing). */
static int torch_dir(int kind)
{
    return kind == PP_NVTX_FWD ? 0 : kind == PP_NVTX_BWD || kind == PP_NVTX_BWD_INPUT ? 1 : -1;
}

static void torch_time_put(torch_time *ring, int *next, const decoded *d, int dir, uint64_t t)
{
    ring[*next] = (torch_time){(int32_t)d->chunk, dir, (int32_t)d->mb, 1, t};
    *next = (*next + 1) % TORCH_TIMES;
}

/* The latest time of (d's chunk, dir, d's mb) in (lo, hi], taken out of the ring; 0 none. */
static uint64_t torch_time_take(torch_time *ring, const decoded *d, int dir, uint64_t lo,
                                uint64_t hi)
{
    int best = -1;
    for (int i = 0; i < TORCH_TIMES; i++) {
        const torch_time *x = &ring[i];
        if (x->used && x->chunk == d->chunk && x->dir == dir && x->mb == d->mb && x->t > lo &&
            x->t <= hi && (best < 0 || x->t > ring[best].t))
            best = i;
    }
    if (best < 0)
        return 0;
    ring[best].used = 0;
    return ring[best].t;
}

/* The latest-opened START range of thread t (o excluded) that a dialect decoded as an action
 * (comm: the actions a comm range can belong to), if it opened after `nested` (the innermost
 * candidate on t's stack, or NULL); else `nested`. A Kineto trace recorded with_stack has its
 * record_function ranges start inside the Python frame that opens them and outlive it, so the
 * importer writes the torch actions as START/END, not on the stack (H4, for H3: the smallest
 * hunk that makes with_stack traces decode like the others). */
static open_range *start_enclosing(file_state *f, const thread_state *t, const open_range *o,
                                   open_range *nested, int comm)
{
    open_range *s = f->starts.data, *best = nested;
    for (size_t k = 0; k < f->starts.n; k++) {
        int h = s[k].has_dec;
        if (&s[k] == o || s[k].tid != t->tid ||
            !(comm ? h == DEC_DIALECT || h == DEC_TORCH_COMPUTE
                   : h >= DEC_DIALECT && h != DEC_TAKEN && h != DEC_COMM))
            continue;
        if (!best || s[k].t0 >= best->t0)
            best = &s[k];
    }
    return best;
}

/* What a held receive feeds: the next compute op whatever it is (Schedule1F1B's), the next
 * forward (activations), the next backward (gradients), or (Megatron's combined call, one of
 * its two receives absent) the next forward unless that one runs the first virtual stage,
 * which receives nothing, else the next backward. */
enum { STACK_RECV_ANY = -1, STACK_RECV_ACT = 0, STACK_RECV_GRAD = 1, STACK_RECV_EITHER = 2 };

/* Which of "forward" / "backward" the words after `verb` ("send_", "recv_") in Megatron's p2p
 * function name fn name: bit 0 forward, bit 1 backward. */
static int p2p_words(const char *fn, const char *verb)
{
    const char *p = strstr(fn, verb);
    int bits = 0;
    if (!p)
        return 0;
    for (p += strlen(verb);;) {
        if (strncmp(p, "forward", 7) == 0)
            bits |= 1, p += 7;
        else if (strncmp(p, "backward", 8) == 0)
            bits |= 2, p += 8;
        else
            break;
        if (*p != '_')
            break;
        p++;
    }
    return bits;
}

/* In a Megatron-LM trace, the direction of point-to-point operation o (a send when send) posted
 * on t: 0 activations, 1 gradients, STACK_RECV_EITHER (a receive that may be either), -1 not
 * known (no p2p_communication call around it). Megatron names its calls by what they move
 * (send_forward_recv_backward: the forward's output out, the gradient for the backward in); its
 * combined send_forward_backward_recv_forward_backward posts the activations' receive before
 * the gradient's, and its sends, each only where there is one, in an order that depends on
 * how: batched (_batched_p2p_ops, batch_p2p_comm, the default) the gradient's first, so the
 * first send is the gradient unless the latest backward ran the first virtual stage (nothing to
 * send back); one by one (_p2p_ops, batch_p2p_comm off) the activations' first, so the first is
 * the activations unless the latest forward ran the last virtual stage (nothing to send on).
 * A second send is the other one, a second receive the gradient, a first one either. */
static int megatron_p2p_dir(file_state *f, const thread_state *t, const open_range *o, int send)
{
    /* the call: the innermost p2p_communication frame named send_... / recv_... (inside it,
     * _communicate and _batched_p2p_ops / _p2p_ops post the operations) */
    const open_range *s = t->stack.data, *call = NULL;
    const char *fn = NULL;
    int single = 0;
    size_t lo = t->stack.n > DIALECT_SCAN ? t->stack.n - DIALECT_SCAN : 0;
    for (size_t k = t->stack.n; k-- > lo && !call;) {
        const char *msg = an_str_of(f, s[k].message);
        const char *py =
            &s[k] != o ? strstr(msg, "pipeline_parallel/p2p_communication.py(") : NULL;
        fn = py ? strstr(py, "): ") : NULL;
        if (fn && (strncmp(fn + 3, "send_", 5) == 0 || strncmp(fn + 3, "recv_", 5) == 0))
            call = &s[k];
        else if (fn && strcmp(fn + 3, "_p2p_ops") == 0)
            single = 1;
    }
    if (!call)
        return -1;
    if (call->t0 != f->mg_p2p_t0) {
        f->mg_p2p_t0 = call->t0;
        f->mg_p2p_sends = f->mg_p2p_recvs = 0;
    }
    int n = send ? f->mg_p2p_sends++ : f->mg_p2p_recvs++;
    int w = p2p_words(fn + 3, send ? "send_" : "recv_");
    if (w == 1 || w == 2)
        return w - 1;
    if (w != 3)
        return -1;
    if (send && single) {
        /* the latest forward ran the last virtual stage: its chunk the last of the rank's (every
         * chunk has run a forward before the last one does), its rank the pipeline's last */
        int last = f->has_stack_fwd && f->n_stages > 0 &&
                   f->stack_fwd.stage == f->n_stages - 1 &&
                   (f->mg_n_chunks <= 1 || f->stack_fwd.chunk == f->mg_n_chunks - 1);
        return n == 0 && f->has_stack_fwd && !last ? 0 : 1;
    }
    if (send)
        return n == 0 && f->has_stack_bwd &&
                       !(f->stack_bwd.chunk <= 0 && f->stack_bwd.stage == 0)
                   ? 1
                   : 0;
    return n == 0 ? STACK_RECV_EITHER : 1;
}

/* A torch point-to-point operation (gloo:recv, nccl:send, ...) just opened as o: it takes the
 * op of the torch action it is posted in (the innermost one open on t): a RECV_F / SEND_B ...
 * action's transfer, or, inside a compute action (GPipe's Forward i / Backward i), the transfer
 * that compute receives or sends. Elsewhere it is no pipeline range. */
static void comm_open(file_state *f, thread_state *t, open_range *o, const pp_dialect_match *m)
{
    open_range *s = t->stack.data;
    size_t top = t->stack.n;
    if (top && o == &s[top - 1])
        top--; /* o itself (a PUSH) */
    open_range *own = NULL;
    size_t lo = top > DIALECT_SCAN ? top - DIALECT_SCAN : 0;
    for (size_t k = top; k-- > lo;)
        if (s[k].has_dec == DEC_DIALECT || s[k].has_dec == DEC_TORCH_COMPUTE) {
            own = &s[k];
            break;
        }
    own = start_enclosing(f, t, o, own, 1);
    if (own && (own->dec.kind == PP_NVTX_STEP || own->dec.kind == PP_NVTX_OPT_STEP))
        own = NULL; /* in no action: the step range (ProfilerStep#N) holds it */
    if (!own && f->has_stack_op && f->stack_tid == t->tid) {
        /* Schedule1F1B posts between its calls: a send after the compute op that made its
         * message, a receive before the one it feeds (held: which one is not known yet).
         * Megatron-LM's calls say which way each goes: a send is then the latest op's of that
         * direction, a receive feeds the next op of that direction. */
        int send = m->torch_comm != PP_DCOMM_RECV;
        int mdir = f->megatron ? megatron_p2p_dir(f, t, o, send) : -1;
        int dir = torch_dir(f->stack_op.kind);
        o->dec = f->stack_op;
        if (send && mdir == 0 && f->has_stack_fwd)
            o->dec = f->stack_fwd, dir = 0;
        else if (send && mdir == 1 && f->has_stack_bwd)
            o->dec = f->stack_bwd, dir = 1;
        if (dir < 0)
            return;
        o->dec.peer = AN_PEER_LATE;
        o->dec.layer = -1;
        if (!send) {
            o->dec.kind = PP_NVTX_RECV_ACT; /* (settled by the op it feeds) */
            o->has_dec = DEC_PEND_RECV;
            o->pend_dir = (int8_t)(mdir < 0 ? STACK_RECV_ANY : mdir);
        } else {
            o->dec.kind = dir ? PP_NVTX_SEND_GRAD : PP_NVTX_SEND_ACT;
            o->has_dec = DEC_COMM;
        }
        return;
    }
    if (!own || own->dec.kind == PP_NVTX_KIND_NONE)
        return;
    int recv = m->torch_comm == PP_DCOMM_RECV, k = own->dec.kind, dir = torch_dir(k);
    int kind;
    if (k == PP_NVTX_RECV_ACT || k == PP_NVTX_RECV_GRAD)
        kind = recv ? k : -1;
    else if (k == PP_NVTX_SEND_ACT || k == PP_NVTX_SEND_GRAD)
        kind = recv ? -1 : k;
    else if (own->has_dec == DEC_TORCH_COMPUTE && dir >= 0)
        kind = recv ? (dir ? PP_NVTX_RECV_GRAD : PP_NVTX_RECV_ACT)
                    : (dir ? PP_NVTX_SEND_GRAD : PP_NVTX_SEND_ACT);
    else
        kind = -1;
    if (kind < 0)
        return;
    o->dec = own->dec;
    o->dec.kind = kind;
    o->dec.peer = AN_PEER_LATE;
    o->has_dec = DEC_COMM;
    if (own->has_dec == DEC_DIALECT)
        own->has_dec = DEC_TAKEN; /* the action only posted it */
    else if (!recv)
        torch_time_put(f->t_send, &f->n_send, &own->dec, dir, o->t0);
}

/* The innermost range open on t that a dialect decoded (o itself excluded), NULL none. */
static open_range *dialect_enclosing(file_state *f, thread_state *t, const open_range *o)
{
    open_range *s = t->stack.data;
    size_t lo = t->stack.n > DIALECT_SCAN ? t->stack.n - DIALECT_SCAN : 0;
    for (size_t k = t->stack.n; k-- > lo;)
        if (&s[k] != o && s[k].has_dec >= DEC_DIALECT && s[k].has_dec != DEC_TAKEN)
            return start_enclosing(f, t, o, &s[k], 0);
    return start_enclosing(f, t, o, NULL, 0);
}

static int is_module(file_state *f, const open_range *o)
{
    return strncmp(an_str_of(f, o->message), "nn.Module: ", 11) == 0;
}

/* In a DeepSpeed trace, whether module o, opening on t inside compute op enc, is a layer. The
 * engine's forward runs the stage's module (a PipelineModule, or a class of the job's own
 * derived from it: Megatron-DeepSpeed's GPTModelPipe) and, on the last stage, its loss_fn after
 * it; the layers are the modules directly inside the first. So the first module opening
 * directly inside a forward op is its stage module, not decoded (what opens inside it sees the
 * op as enclosing), and the modules directly inside that one are the layers; another module
 * directly inside the op (the loss) is none, nor is what opens inside it; it stays in the op's
 * time. A backward's modules (recomputation) are no layers either. */
static int deepspeed_layer(file_state *f, thread_state *t, const open_range *enc,
                           const open_range *o)
{
    if (enc->dec.kind != PP_NVTX_FWD)
        return 0;
    const open_range *s = t->stack.data, *outer = NULL;
    int depth = 0;
    size_t lo = t->stack.n > DIALECT_SCAN ? t->stack.n - DIALECT_SCAN : 0;
    for (size_t k = t->stack.n; k-- > lo && &s[k] != enc;)
        if (&s[k] != o && is_module(f, &s[k])) {
            depth++;
            outer = &s[k];
        }
    if (depth == 0) {
        if (f->ds_op_t0 != enc->t0 || f->ds_op_tid != t->tid) {
            f->ds_op_t0 = enc->t0; /* the op's first module: its stage module */
            f->ds_op_tid = t->tid;
            f->ds_stage_module_t0 = o->t0;
        }
        return 0;
    }
    return depth == 1 && f->ds_op_t0 == enc->t0 && f->ds_op_tid == t->tid &&
           outer->t0 == f->ds_stage_module_t0;
}

/* What module o is in a Megatron-LM trace (megatron_layer). */
enum { MG_NONE, MG_LAYER, MG_EMBEDDING, MG_HEAD };

static int name_starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* In a Megatron-LM trace, what module o, opening on t inside compute op enc, is. forward_step
 * runs the job's forward_step_func, which calls the model chunk: Megatron's
 * DistributedDataParallel around Float16Module (mixed precision) around the model (GPTModel,
 * MambaModel, ...). The first module inside a forward op is that chunk; a wrapper hands the
 * role to the first module inside it. The chunk's decoder (TransformerBlock, MambaStack) runs
 * the blocks: the modules directly inside it are layers (not its final norm); the other modules
 * directly inside the chunk are layers as well: the embedding (LanguageModelEmbedding, named
 * "embedding") before the decoder and the output layer ("head") after it, the names pprof-tune's
 * --pipeline-model-parallel-layout form reads. What opens deeper is inside a layer; a
 * backward's modules (recomputation) are no layers. */
static int megatron_layer(file_state *f, thread_state *t, const open_range *enc,
                          const open_range *o)
{
    if (enc->dec.kind != PP_NVTX_FWD)
        return MG_NONE;
    const open_range *s = t->stack.data, *parent = NULL;
    int depth = 0;
    size_t lo = t->stack.n > DIALECT_SCAN ? t->stack.n - DIALECT_SCAN : 0;
    for (size_t k = t->stack.n; k-- > lo && &s[k] != enc;)
        if (&s[k] != o && is_module(f, &s[k]) && !depth++)
            parent = &s[k];
    const char *name = an_str_of(f, o->message) + 11;
    int same_op = f->mg_op_t0 == enc->t0 && f->mg_op_tid == t->tid;
    if (depth == 0) {
        f->mg_op_t0 = enc->t0;
        f->mg_op_tid = t->tid;
        f->mg_chunk_t0 = o->t0;
        f->mg_chunk_msg = o->message;
        f->mg_block_t0 = 0;
        return MG_NONE;
    }
    if (!same_op)
        return MG_NONE;
    if (parent->t0 == f->mg_chunk_t0 && parent->message == f->mg_chunk_msg) {
        const char *pm = an_str_of(f, parent->message) + 11;
        if (name_starts(pm, "DistributedDataParallel_") || name_starts(pm, "Float16Module_") ||
            name_starts(pm, "OptimizedModule_")) {
            f->mg_chunk_t0 = o->t0; /* the wrapped module is the chunk */
            f->mg_chunk_msg = o->message;
            return MG_NONE;
        }
        if (name_starts(name, "TransformerBlock_") || name_starts(name, "MambaStack_")) {
            f->mg_block_t0 = o->t0;
            f->mg_block_msg = o->message;
            return MG_NONE;
        }
        if (name_starts(name, "LanguageModelEmbedding_"))
            return MG_EMBEDDING;
        return f->mg_block_t0 ? MG_HEAD : MG_LAYER;
    }
    /* in the decoder: its blocks; its final norm (the last stage's) is none: Megatron builds
     * it on the stage of the output layer, whatever the layout, so it stays in that op's time */
    return f->mg_block_t0 && parent->t0 == f->mg_block_t0 &&
                   parent->message == f->mg_block_msg && !strstr(name, "Norm")
               ? MG_LAYER
               : MG_NONE;
}

/* Who called a torch module event: compiled code (AOTAutograd's GraphModule run inside a
 * Torch-Compiled Region, not one of the job's modules), torch's pipelining runtime (the stage's
 * submod: PipelineStage.forward_one_chunk -> forward_maybe_with_nosync, through dynamo's frames
 * when the module is compiled) or the job's own code. */
enum { CALLER_JOB, CALLER_PIPELINING, CALLER_COMPILED };

/* The caller a range open around a module event names, -1 for a frame that only passes the call
 * on (nn.Module.__call__'s own, dynamo's eval-frame wrappers, a built-in). */
static int module_caller(const char *s)
{
    if (strncmp(s, "Torch-Compiled Region", 21) == 0 || strncmp(s, "CompiledFunction", 16) == 0 ||
        strstr(s, "torch/_functorch/") || strstr(s, "torch/_inductor/"))
        return CALLER_COMPILED;
    /* torch/fx/: a GraphModule's own __call__ (AOTAutograd's, inside the compiled code above,
     * or the stage module torch's pipeline() front end traced); torch/nn/parallel/: DDP's
     * forward running the module it wraps */
    if (strstr(s, "torch/nn/modules/module.py(") || strstr(s, "torch/_dynamo/") ||
        strstr(s, "torch/fx/") || strstr(s, "torch/nn/parallel/") ||
        strcmp(s, "DistributedDataParallel.forward") == 0 || strncmp(s, "<built-in", 9) == 0)
        return -1;
    return strstr(s, "torch/distributed/pipelining/") ? CALLER_PIPELINING : CALLER_JOB;
}

/* Whether msg names a stage module of the file; with add, notes it as one (the first 8). */
static int stage_module_name(file_state *f, uint32_t msg, int add)
{
    for (int i = 0; i < f->tm_n_names; i++)
        if (f->tm_names[i] == msg)
            return 1;
    if (add && f->tm_n_names < (int)(sizeof f->tm_names / sizeof f->tm_names[0]))
        f->tm_names[f->tm_n_names++] = msg;
    return 0;
}

/* In a torch trace (no DeepSpeed), whether module o, opening on t inside compute op enc, is a
 * layer. PipelineStage calls its submod through nn.Module.__call__, so in most jobs the
 * outermost module of a forward op is the stage module (torchtitan's pruned copy of the model,
 * an nn.Sequential, an OptimizedModule when torch.compile wraps it), called from torch's
 * pipelining code: it is no layer, and the modules directly inside it are the layers (in a
 * backward op too, recomputed, where the stage module is known by its name). An outermost
 * module the job's own code called (a stage module called without __call__, as torch_pipe.py's
 * by default) is a layer itself, as before. A module compiled code runs is none (counted: the
 * blocks it fused are not visible), nor is one deeper inside. */
static int torch_module_layer(state *st, file_state *f, thread_state *t, const open_range *enc,
                              const open_range *o)
{
    const open_range *s = t->stack.data, *parent = NULL;
    int depth = 0, caller = -1, direct = 0;
    size_t lo = t->stack.n > DIALECT_SCAN ? t->stack.n - DIALECT_SCAN : 0;
    for (size_t k = t->stack.n; k-- > lo;) {
        const open_range *r = &s[k];
        if (r == o)
            continue;
        if (r == enc || r->t0 < enc->t0)
            break;
        if (is_module(f, r)) {
            if (!depth++)
                parent = r;
            if (caller < 0) {
                caller = CALLER_JOB; /* called straight from its parent's __call__ */
                direct = 1;
            }
        } else if (caller < 0) {
            caller = module_caller(an_str_of(f, r->message));
        }
    }
    int same_op = f->tm_n_names && f->tm_op_t0 == enc->t0 && f->tm_op_tid == t->tid;
    /* directly inside the stage module (or the module torch.compile's wrapper runs for it) */
    int in_stage_module =
        parent && same_op && parent->t0 == f->tm_mod_t0 && parent->message == f->tm_msg;
    /* a wrapper (torch.compile's OptimizedModule, DistributedDataParallel) runs the module it
     * wraps, whose own event opens directly inside it: that one is the stage module from here
     * on */
    const char *pm = parent ? an_str_of(f, parent->message) : "";
    if (in_stage_module && direct &&
        (strncmp(pm, "nn.Module: OptimizedModule_", 27) == 0 ||
         strncmp(pm, "nn.Module: DistributedDataParallel_", 35) == 0)) {
        f->tm_mod_t0 = o->t0;
        f->tm_msg = o->message;
        stage_module_name(f, o->message, 1);
        return 0;
    }
    if (caller == CALLER_COMPILED) {
        if (depth == 0 || in_stage_module)
            st->torch_compiled_modules++; /* where a layer would be */
        return 0;
    }
    if (depth == 0) {
        /* called by torch's pipelining, or a stage module's name: one recomputed in a
         * backward */
        int pipelining = caller == CALLER_PIPELINING;
        if (stage_module_name(f, o->message, pipelining) || pipelining) {
            f->tm_op_t0 = enc->t0;
            f->tm_op_tid = t->tid;
            f->tm_mod_t0 = o->t0;
            f->tm_msg = o->message;
            return 0;
        }
        return 1;
    }
    return in_stage_module;
}

/* In a DeepSpeed trace, whether all-reduce o (on any thread) is the optimizer's: one that starts
 * after its step's _exec_optimizer_step did (the engine runs nothing but the optimizer step and
 * the loss's broadcast after it). Those are the gradient norm over the pipeline's stages
 * (clip_grad_norm_, DeepSpeed's default gradient clipping) or fp16's overflow check, both over
 * the pipeline's ranks: waiting for the other stages, they hold the barrier before the
 * optimizer, which the replay has, and no data-parallel all-reduce (the engine's
 * _exec_reduce_grads runs that one, before). They stay other ranges. */
static int deepspeed_opt_collective(const file_state *f, const open_range *o)
{
    return f->deepspeed && f->ds_opt_step > 0 && o->t0 >= f->ds_opt_t0 &&
           an_file_step_at(f, o->t0) + 1 == f->ds_opt_step;
}

/* The provisional layer index of torch module `name` on `stage` (its first sighting appends it,
 * named, to st->layers); -1 past 4096 modules or out of memory. */
static int64_t torch_layer(state *st, int64_t stage, int64_t chunk, const char *name)
{
    dialect_layer *l = st->dlayers.data;
    int32_t local = 0;
    for (size_t i = 0; i < st->dlayers.n; i++) {
        if (l[i].stage != stage)
            continue;
        if (strncmp(l[i].name, name, sizeof l[i].name - 1) == 0)
            return (int64_t)i;
        local++;
    }
    if (st->dlayers.n >= 4096 || !(l = vec_push(&st->dlayers)))
        return -1;
    l->stage = (int32_t)stage;
    l->chunk = (int32_t)(chunk > 0 ? chunk : 0);
    l->local = local;
    snprintf(l->name, sizeof l->name, "%s", name);
    size_t p = st->dlayers.n - 1;
    while (st->layers.n <= p)
        if (!vec_push(&st->layers))
            return -1;
    layer_acc *la = &((layer_acc *)st->layers.data)[p];
    if (!la->name[0])
        snprintf(la->name, sizeof la->name, "%s", name);
    return (int64_t)p;
}

static int cmp_dlayer(const void *a, const void *b)
{
    const dialect_layer *x = *(const dialect_layer *const *)a, *y = *(const dialect_layer *const *)b;
    if (x->piece != y->piece)
        return x->piece < y->piece ? -1 : 1;
    return (x->local > y->local) - (x->local < y->local);
}

void an_dialect_layers(state *st)
{
    size_t n = st->dlayers.n;
    if (!n || st->layers.n < n)
        return;
    dialect_layer *l = st->dlayers.data;
    const dialect_layer **order = malloc(n * sizeof *order);
    int32_t *to = malloc(n * sizeof *to);
    layer_acc *moved = malloc(n * sizeof *moved);
    if (order && to && moved) {
        /* the model's order: by piece (the chunk's place under the run's placement), then by
         * first sighting within the stage */
        int S = an_state_stages(st);
        pp_schedule sc = {.S = S > 0 ? S : 1, .placement = an_placement(st)};
        for (size_t i = 0; i < n; i++) {
            order[i] = &l[i];
            int stage = l[i].stage >= 0 && l[i].stage < sc.S ? l[i].stage : 0;
            l[i].piece = pp_schedule_piece(&sc, stage, l[i].chunk);
        }
        qsort(order, n, sizeof *order, cmp_dlayer);
        for (size_t j = 0; j < n; j++)
            to[order[j] - l] = (int32_t)j;
        layer_acc *la = st->layers.data;
        for (size_t i = 0; i < n; i++)
            moved[to[i]] = la[i];
        memcpy(la, moved, n * sizeof *moved);
        pp_aop *op = st->kept_layer_ops.data;
        for (size_t i = 0; i < st->kept_layer_ops.n; i++)
            if (op[i].chunk >= 0 && (size_t)op[i].chunk < n)
                op[i].chunk = to[op[i].chunk];
    }
    free(order);
    free(to);
    free(moved);
}

static inline void close_pipeline(state *st, file_state *f, thread_state *t, const open_range *o,
                                  uint64_t t1, const decoded *d);

/* The step range of t's sequence step, closed at its extent: into steps.c as a step range of
 * the convention would go (an_on_range, the stage's latest step). */
static void syn_close(state *st, file_state *f, thread_state *t)
{
    if (!t->syn_open)
        return;
    t->syn_open = 0;
    open_range x;
    memset(&x, 0, sizeof x);
    x.t0 = t->syn_t0;
    decoded d = {.kind = PP_NVTX_STEP, .step = t->syn_step, .stage = t->syn_stage, .mb = -1,
                 .chunk = -1, .layer = -1, .peer = -1};
    int64_t cur = t->cur_step;
    close_pipeline(st, f, t, &x, t->syn_t1 > t->syn_t0 ? t->syn_t1 : t->syn_t0, &d);
    t->cur_step = cur; /* (no step range of the trace's own was open) */
}

/* A dialect op d opening at t0 outside any step range: the micro-batch sequence makes the
 * steps. A forward of micro-batch 0 on chunk 0 starts the next step when the sequence has moved
 * past micro-batch 0 since the last one did (a later micro-batch, a backward), or it is the
 * thread's first; the op belongs to the step open. */
static void syn_op(state *st, file_state *f, thread_state *t, decoded *d, uint64_t t0)
{
    if (d->kind != PP_NVTX_FWD)
        t->syn_trains = 1; /* forward-only passes (inference) make no steps */
    if (d->kind == PP_NVTX_FWD && d->mb == 0 && d->chunk <= 0 && t->syn_trains &&
        (!t->syn_open || t->syn_more)) {
        syn_close(st, f, t);
        t->syn_open = 1;
        t->syn_more = 0;
        t->syn_step++;
        t->syn_stage = (int32_t)d->stage;
        t->syn_t0 = t->syn_t1 = t0;
        t->dbwd_seen = 0;
        if (f->replica == st->o->replica && d->stage >= 0)
            an_note_step_open(st, f, (int)d->stage, t->syn_step);
    } else if (d->mb > 0 || d->kind != PP_NVTX_FWD) {
        t->syn_more = 1;
    }
    if (t->syn_open)
        d->step = t->syn_step;
}

/* A dialect op d just decoded from match m, opening at t0 on thread t: its step when the trace
 * has no step ranges, the shape it shows, the thread's enclosing state. */
static void dialect_op_noted(state *st, file_state *f, thread_state *t, const pp_dialect_match *m,
                             decoded *d, uint64_t t0)
{
    /* (a counted mb restarts with the step range only: it cannot tell where a step ends) */
    if (d->kind != PP_NVTX_STEP && d->step < 0 && t->cur_step < 0 && !d->oob &&
        m->from[PP_DF_MB] == PP_DFROM_VALUE)
        syn_op(st, f, t, d, t0);
    else if (d->kind == PP_NVTX_OPT_STEP && d->step < 0 && t->cur_step < 0 && t->syn_open)
        d->step = t->syn_step; /* the optimizer step after the sequence's last backward */
    if (d->kind == PP_NVTX_STEP) {
        t->dbwd_seen = 0;
    } else if (d->kind >= PP_NVTX_FWD && d->kind <= PP_NVTX_BWD_WEIGHT) {
        /* the shape: M, v, the order of forwards and backwards, split backwards */
        if (d->mb > st->dshape_mb)
            st->dshape_mb = d->mb;
        int64_t chunk = d->chunk < 0 ? 0 : d->chunk; /* unset: chunk 0 */
        if (chunk > st->dshape_chunk)
            st->dshape_chunk = chunk;
        if (d->kind == PP_NVTX_FWD)
            st->dshape_fwd_after_bwd |= t->dbwd_seen;
        else
            t->dbwd_seen = 1;
        st->dshape_split |= d->kind == PP_NVTX_BWD_INPUT || d->kind == PP_NVTX_BWD_WEIGHT;
    }
    note_open(st, f, t, d, d->kind == PP_NVTX_STEP && d->step < 0 ? t->n_steps + 1 : d->step, t0);
    if (d->kind >= PP_NVTX_FWD && d->kind <= PP_NVTX_BWD_WEIGHT && d->stage >= 0)
        t->cur_stage = (int32_t)d->stage;
}

/* DualPipeV's OVERLAP_F_B action (match m) just opened as o: a forward then a backward, one after
 * the other in one range. Its sub-actions are decoded now; it is split at its close where the
 * backward started (overlap_mark). What opens inside it is its own: no Schedule1F1B op, no
 * layer. One whose sub-actions are not a forward then a backward stays undecoded. */
static void overlap_open(state *st, file_state *f, thread_state *t, open_range *o,
                         const pp_dialect_match *m)
{
    st->torch_overlaps++;
    st->dialect_used = PP_DIALECT_TORCH;
    o->dec = (decoded){.kind = PP_NVTX_KIND_NONE, .stage = -1, .mb = -1, .chunk = -1,
                       .layer = -1, .step = -1, .peer = -1};
    o->has_dec = DEC_OVERLAP;
    f->ov_open = 0;
    pp_dialect_match sub[2];
    if (!pp_dialect_torch_sub(m, 0, &sub[0]) || !pp_dialect_torch_sub(m, 1, &sub[1]) ||
        sub[0].kind != PP_NVTX_FWD || torch_dir(sub[1].kind) != 1)
        return;
    for (int k = 0; k < 2; k++) {
        dialect_resolve(st, f, t, &sub[k], &f->ov_sub[k]);
        torch_placement_note(st, f);
        if (f->ov_sub[k].kind == PP_NVTX_KIND_NONE)
            return;
    }
    for (int k = 0; k < 2; k++)
        dialect_op_noted(st, f, t, &sub[k], &f->ov_sub[k], o->t0);
    f->ov_open = 1;
    f->ov_tid = t->tid;
    f->ov_t0 = o->t0;
    f->ov_split = f->ov_fend = 0;
}

static int is_aten_op(file_state *f, const open_range *o)
{
    return strncmp(an_str_of(f, o->message), "aten::", 6) == 0;
}

/* While an OVERLAP_F_B action is open in f, a range o opening inside it: the first one that
 * belongs to the backward (torch's backward_one_chunk stack event, or the autograd engine's
 * first function, on any thread: on GPUs autograd runs on its own) marks where the backward's
 * compute started. */
static void overlap_mark(file_state *f, const open_range *o, int src, const pp_dialect_match *m)
{
    if (o->t0 >= f->ov_t0 && ((src && m->torch_stack && torch_dir(m->kind) == 1) ||
                              strncmp(an_str_of(f, o->message),
                                      "autograd::engine::evaluate_function", 35) == 0))
        f->ov_split = o->t0;
}

/* A range o of f closing at t1, before the backward of the OVERLAP_F_B action open in f
 * started: an aten op on the action's thread ends the forward's compute so far. */
static inline void overlap_inner_close(file_state *f, const thread_state *t, const open_range *o,
                                       uint64_t t1)
{
    if (f->ov_open && !f->ov_split && t->tid == f->ov_tid && o->t0 >= f->ov_t0 &&
        o->has_dec != DEC_OVERLAP && t1 > f->ov_fend && is_aten_op(f, o))
        f->ov_fend = t1;
}

/* A Schedule1F1B receive closed at t1 (DEC_PEND_RECV): held until the next compute op on its
 * thread opens (the oldest dropped past 8: a receive no compute op followed is no transfer the
 * analysis can place). */
static void stack_recv_held(file_state *f, const open_range *o, uint64_t t1)
{
    int cap = (int)(sizeof f->pend / sizeof f->pend[0]);
    if (f->n_pend == cap) {
        memmove(&f->pend[0], &f->pend[1], (size_t)(cap - 1) * sizeof f->pend[0]);
        f->n_pend--;
    }
    f->pend[f->n_pend++] = (struct stack_recv){o->t0, t1, o->message, o->category, o->tid,
                                               o->pend_dir};
}

/* A Schedule1F1B compute op (a stack event) just opened as o on t: the sends after it are its
 * own, and the receives held on t fed it: its input, activations for a forward, gradients for
 * a backward, of its micro-batch (each ended before it started: waited for). */
static void stack_op_opened(state *st, file_state *f, thread_state *t, const open_range *o)
{
    f->has_stack_op = 1;
    f->stack_tid = t->tid;
    f->stack_op = o->dec;
    int dir = torch_dir(o->dec.kind), kept = 0;
    if (dir == 0)
        f->has_stack_fwd = 1, f->stack_fwd = o->dec;
    else if (dir == 1)
        f->has_stack_bwd = 1, f->stack_bwd = o->dec;
    /* a forward of the first virtual stage receives nothing: Megatron's lone receive before it
     * is the gradient for the next backward */
    int first = dir == 0 && o->dec.chunk <= 0 && o->dec.stage == 0;
    for (int i = 0; i < f->n_pend; i++) {
        const struct stack_recv *p = &f->pend[i];
        int feeds = p->dir == STACK_RECV_ANY || p->dir == dir ||
                    (p->dir == STACK_RECV_EITHER && (dir == 1 || !first));
        if (p->tid != t->tid || (!feeds && p->t1 <= o->t0)) {
            f->pend[kept++] = *p;
            continue;
        }
        if (p->t1 > o->t0)
            continue;
        open_range x;
        memset(&x, 0, sizeof x);
        x.t0 = p->t0;
        x.message = p->message;
        x.category = p->category;
        x.tid = p->tid;
        decoded d = o->dec;
        d.kind = dir ? PP_NVTX_RECV_GRAD : PP_NVTX_RECV_ACT;
        d.peer = AN_PEER_LATE;
        d.layer = -1;
        st->dialect_ranges++;
        close_pipeline(st, f, t, &x, p->t1, &d);
    }
    f->n_pend = kept;
}

/* Megatron-LM's interleaved schedule called (f): a new step's forwards and backwards. */
static void megatron_interleaved_call(file_state *f)
{
    f->mg_interleaved = 1;
    f->mg_fwd_n = f->mg_bwd_n = 0;
    memset(f->mg_chunk_fwds, 0, sizeof f->mg_chunk_fwds);
    f->mg_pending = 0;
    f->has_stack_fwd = f->has_stack_bwd = 0; /* no send of this step's is theirs */
    if (!f->mg_fwd)
        f->mg_fwd = malloc(MG_FWD_CAP * sizeof *f->mg_fwd); /* NULL: none resolved */
}

/* The model chunk whose outermost module is named msg (index in the order first run), -1 past
 * the first 16. */
static int megatron_chunk_of(file_state *f, uint32_t msg)
{
    for (int i = 0; i < f->mg_n_chunks; i++)
        if (f->mg_chunk_names[i] == msg)
            return i;
    if (f->mg_n_chunks == (int)(sizeof f->mg_chunk_names / sizeof f->mg_chunk_names[0]))
        return -1;
    f->mg_chunk_names[f->mg_n_chunks] = msg;
    return f->mg_n_chunks++;
}

/* The pending forward op of an interleaved Megatron step (open on t as op): its first module,
 * mod, names its chunk; its micro-batch is the chunk's forwards so far in the step (the
 * schedule's table runs each chunk's micro-batches in order). Decoded now, as dialect_open
 * decodes another op at its opening. */
static void megatron_forward_resolved(state *st, file_state *f, thread_state *t, open_range *op,
                                      const open_range *mod)
{
    f->mg_pending = 0;
    int c = megatron_chunk_of(f, mod->message);
    decoded *d = &op->dec;
    if (c < 0 || !f->mg_fwd || f->mg_fwd_n >= MG_FWD_CAP) {
        st->megatron_unresolved++;
        d->kind = PP_NVTX_KIND_NONE; /* another range at its close */
        return;
    }
    d->chunk = c;
    d->mb = f->mg_chunk_fwds[c]++;
    f->mg_fwd[f->mg_fwd_n++] = (struct mg_fwd){c, (int32_t)d->mb};
    check_bounds(st, d);
    if (d->kind == PP_NVTX_KIND_NONE)
        return;
    dialect_op_noted(st, f, t, &f->mg_pend_match, d, op->t0);
    if (!d->oob)
        stack_op_opened(st, f, t, op);
}

/* An interleaved Megatron step's op d just decoded (its chunk and mb still the sequence's): a
 * forward waits for its module (pending: 1 returned, nothing more done now); a backward is
 * the next forward's in the step, backward k running forward k's micro-batch on chunk
 * v - 1 - its chunk (Megatron's get_model_chunk_id). One that cannot be told is no op. */
static int megatron_interleaved_op(state *st, file_state *f, thread_state *t, const open_range *o,
                                   const pp_dialect_match *m, decoded *d)
{
    if (d->kind == PP_NVTX_FWD) {
        if (f->mg_pending)
            st->megatron_unresolved++; /* the one before never ran a module */
        f->mg_pending = 1;
        f->mg_pend_t0 = o->t0;
        f->mg_pend_tid = t->tid;
        f->mg_pend_match = *m;
        d->mb = 0;
        d->chunk = 0;
        return 1;
    }
    uint32_t k = f->mg_bwd_n++;
    if (!f->mg_fwd || k >= f->mg_fwd_n) {
        st->megatron_unresolved++;
        d->kind = PP_NVTX_KIND_NONE;
        return 0;
    }
    d->chunk = f->mg_n_chunks - 1 - f->mg_fwd[k].chunk;
    d->mb = f->mg_fwd[k].mb;
    check_bounds(st, d);
    return 0;
}

/* A range outside the pipeprof domain, just opened as o: decoded by the dialects when one
 * names it (has_dec = DEC_DIALECT, or a torch DEC_*), with what it says about the ranges
 * inside it. */
static void dialect_open(state *st, file_state *f, thread_state *t, open_range *o)
{
    pp_dialect_match m;
    int src = dialect_of(f, o->message, o->domain, &m);
    if (f->ov_open && !f->ov_split)
        overlap_mark(f, o, src, &m);
    if (src && m.torch_overlap) {
        overlap_open(st, f, t, o, &m);
        return;
    }
    if (src == 2 && m.torch_megatron == 2) {
        st->megatron_interleaved++;
        megatron_interleaved_call(f);
        return;
    }
    if (src == 2 && m.torch_deepspeed == 2) {
        f->ds_opt_t0 = o->t0;
        f->ds_opt_step = an_file_step_at(f, o->t0) + 1; /* +1: 0 is none */
        return;
    }
    if (!src || m.kind == PP_NVTX_KIND_NONE)
        return;
    if (src == 2 && m.kind == PP_NVTX_ALLREDUCE && deepspeed_opt_collective(f, o))
        return;
    if (m.torch_deepspeed)
        f->deepspeed = 1;
    if (m.torch_megatron)
        f->megatron = 1;
    if (src == 1)
        st->dialect_used = pp_dialect_name(f->dialect);
    else if (src == 3)
        st->dialect_used = PP_DIALECT_PADDLE_TIMELINE;
    else if (f->deepspeed)
        st->dialect_used = PP_DIALECT_DEEPSPEED;
    else if (f->megatron)
        st->dialect_used = PP_DIALECT_MEGATRON;
    else if (!st->dialect_used || (strcmp(st->dialect_used, PP_DIALECT_DEEPSPEED) != 0 &&
                                   strcmp(st->dialect_used, PP_DIALECT_MEGATRON) != 0))
        st->dialect_used = PP_DIALECT_TORCH; /* a framework's trace's other names say no more */
    if (m.torch_comm) {
        comm_open(f, t, o, &m);
        return;
    }
    open_range *enc = (m.torch_stack || m.torch_module) ? dialect_enclosing(f, t, o) : NULL;
    /* a stack event inside a torch action is that action's (GPipe's Forward i holds one, an
     * OVERLAP_F_B two) */
    if (m.torch_stack && enc &&
        (torch_dir(enc->dec.kind) >= 0 || enc->has_dec == DEC_OVERLAP))
        return;
    /* a module is a layer when it is the outermost one inside a compute op */
    int64_t layer = -1;
    if (m.torch_module) {
        if (!enc || enc->dec.kind < PP_NVTX_FWD || enc->dec.kind > PP_NVTX_BWD_WEIGHT)
            return;
        const char *lname = an_str_of(f, o->message) + 11;
        if (f->mg_pending && enc->t0 == f->mg_pend_t0 && enc->tid == t->tid) {
            megatron_forward_resolved(st, f, t, enc, o);
            if (enc->dec.kind == PP_NVTX_KIND_NONE || enc->dec.oob)
                return;
        }
        if (f->megatron) {
            int r = megatron_layer(f, t, enc, o);
            if (r == MG_NONE)
                return;
            lname = r == MG_EMBEDDING ? "embedding" : r == MG_HEAD ? "head" : lname;
        } else if (f->deepspeed ? !deepspeed_layer(f, t, enc, o)
                                : !torch_module_layer(st, f, t, enc, o)) {
            return;
        }
        m.kind = enc->dec.kind == PP_NVTX_FWD          ? PP_NVTX_LAYER_FWD
                 : enc->dec.kind == PP_NVTX_BWD_WEIGHT ? PP_NVTX_LAYER_BWD_WEIGHT
                                                       : PP_NVTX_LAYER_BWD;
        if ((layer = torch_layer(st, enc->dec.stage, enc->dec.chunk, lname)) < 0)
            return;
    }
    decoded *d = &o->dec;
    dialect_resolve(st, f, t, &m, d);
    if (m.torch_stage_id >= 0)
        torch_placement_note(st, f);
    if (m.torch_module) {
        d->layer = layer;
        d->chunk = enc->dec.chunk;
        check_bounds(st, d);
    }
    if (m.torch_megatron == 1 && f->mg_interleaved && !d->oob &&
        megatron_interleaved_op(st, f, t, o, &m, d)) {
        o->has_dec = DEC_TORCH_COMPUTE; /* decoded when its module opens */
        return;
    }
    o->has_dec = m.torch && torch_dir(d->kind) >= 0 ? DEC_TORCH_COMPUTE : DEC_DIALECT;
    if (d->kind == PP_NVTX_KIND_NONE)
        return;
    dialect_op_noted(st, f, t, &m, d, o->t0);
    if (m.torch_stack && !d->oob && torch_dir(d->kind) >= 0)
        stack_op_opened(st, f, t, o);
}

/* The step bookkeeping of a closed step range: its stage's latest step, the thread outside it. */
static inline void close_step(state *st, file_state *f, thread_state *t, const decoded *d)
{
    int64_t step = d->step >= 0 ? d->step : t->n_steps;
    /* in a file whose stages run on threads without step ranges, a step range (a driver
     * thread's, its stage the rank's) says nothing of how far a stage's work has come: its ops
     * say it (steps.c) */
    if (!f->stepless && d->stage >= 0 && an_ensure_stage(st, (int)d->stage) &&
        step > st->stage_max_step[d->stage])
        st->stage_max_step[d->stage] = step;
    t->cur_step = -1;
}

/* A closed pipeline range (d: its decode) to steps.c, and the step bookkeeping of a step
 * range. */
static inline void close_pipeline(state *st, file_state *f, thread_state *t, const open_range *o,
                                  uint64_t t1, const decoded *d)
{
    an_on_range(st, f, t, o, t1, d);
    if (d->kind == PP_NVTX_STEP) {
        close_step(st, f, t, d);
        if (!st->collect && !st->gpu_pass && f->replica == st->o->replica)
            an_pending_step_closed(st, f, d->step >= 0 ? d->step : t->n_steps, o->t0, t1);
    }
}

/* A range a dialect decoded at its opening, closed at t1 (its out-of-bounds case is counted by
 * an_on_range; one that a rule maps to "other" is the generic view's). */
static void dialect_close(state *st, file_state *f, thread_state *t, const open_range *o,
                          uint64_t t1)
{
    if (o->has_dec == DEC_PEND_RECV) {
        stack_recv_held(f, o, t1);
        return;
    }
    if (f->mg_pending && o->t0 == f->mg_pend_t0 && o->tid == f->mg_pend_tid) {
        /* an interleaved Megatron forward that ran no module: its chunk is not known */
        f->mg_pending = 0;
        st->megatron_unresolved++;
        an_other_range(st, f, t, o, t1);
        return;
    }
    if (o->has_dec == DEC_OVERLAP) {
        /* as the other actions (docs/dialects.md "Waits"): the forward from its input's
         * arrival inside the action (else its start) to its last aten op before the backward
         * started, the backward from its own input's arrival (else the forward's end) to the
         * end; the waits before each are idle time */
        if (f->ov_open && f->ov_t0 == o->t0 && f->ov_split > o->t0 && f->ov_split < t1) {
            uint64_t a = torch_time_take(f->t_arrive, &f->ov_sub[0], 0, o->t0, t1);
            uint64_t f0 = a ? a : o->t0;
            uint64_t f1 = f->ov_fend > f0 && f->ov_fend <= f->ov_split ? f->ov_fend : f->ov_split;
            uint64_t b = torch_time_take(f->t_arrive, &f->ov_sub[1], 1, o->t0, t1);
            uint64_t b0 = b > f1 ? b : f1;
            open_range x = *o;
            x.has_dec = DEC_DIALECT;
            x.t0 = f0;
            st->dialect_ranges += 2;
            for (int k = 0; k < 2; k++)
                if (t->syn_open && f->ov_sub[k].step == t->syn_step && t1 > t->syn_t1)
                    t->syn_t1 = t1;
            close_pipeline(st, f, t, &x, f1, &f->ov_sub[0]);
            x.t0 = b0 < t1 ? b0 : f1;
            close_pipeline(st, f, t, &x, t1, &f->ov_sub[1]);
        } else {
            st->torch_unsplit++;
            an_other_range(st, f, t, o, t1);
        }
        f->ov_open = 0;
        return;
    }
    if (o->has_dec == DEC_TAKEN || (o->dec.kind == PP_NVTX_KIND_NONE && !o->dec.oob)) {
        an_other_range(st, f, t, o, t1);
        return;
    }
    st->dialect_ranges++;
    if (t->syn_open && o->dec.step == t->syn_step && t1 > t->syn_t1)
        t->syn_t1 = t1; /* the sequence step's extent */
    if (o->has_dec == DEC_COMM && (o->dec.kind == PP_NVTX_RECV_ACT ||
                                   o->dec.kind == PP_NVTX_RECV_GRAD))
        torch_time_put(f->t_arrive, &f->n_arrive, &o->dec, o->dec.kind == PP_NVTX_RECV_GRAD,
                       t1);
    if (o->has_dec == DEC_TORCH_COMPUTE && !o->dec.oob) {
        /* its input's arrival inside it is its start, its own send's posting its end */
        int dir = torch_dir(o->dec.kind);
        open_range x = *o;
        uint64_t a = torch_time_take(f->t_arrive, &o->dec, dir, o->t0, t1);
        if (a)
            x.t0 = a;
        uint64_t e = torch_time_take(f->t_send, &o->dec, dir, x.t0, t1);
        close_pipeline(st, f, t, &x, e ? e : t1, &o->dec);
        return;
    }
    close_pipeline(st, f, t, o, t1, &o->dec);
}

void an_dialect_shape(const state *st, pp_analysis *a)
{
    if (!st->dialect_ranges)
        return;
    if (!a->M && st->dshape_mb >= 0)
        a->M = (int)st->dshape_mb + 1;
    if (!a->v && st->dshape_chunk >= 0)
        a->v = (int)st->dshape_chunk + 1;
    a->placement = an_placement(st);
    if (st->torch_unsplit)
        an_warn(a, "%llu of %llu torch OVERLAP_F_B actions (DualPipeV) could not be split into "
                   "their forward and backward (no backward event inside, or sub-actions other "
                   "than a forward then a backward): their time counts as idle, so their stages' "
                   "busy time, bubble and replay understate the work (docs/dialects.md)",
                (unsigned long long)st->torch_unsplit, (unsigned long long)st->torch_overlaps);
    a->torch_compiled_modules = st->torch_compiled_modules;
    if (st->torch_compiled_modules)
        an_warn(a, "%llu module event(s) where the layers would be ran inside compiled code "
                   "(torch.compile around a whole stage module: a Torch-Compiled Region, "
                   "AOTAutograd's GraphModule): the blocks it fused are not visible, so their "
                   "stages have no layers; compile each block instead (torch.compile per block, "
                   "as torchtitan does) for per-layer costs (docs/torch.md)",
                (unsigned long long)st->torch_compiled_modules);
    if (st->megatron_unresolved && !a->schedule[0]) {
        /* forward_step runs model[chunk], and without the chunk's module event nothing in
         * the trace says which chunk: those calls are no ops (decode.c), the schedule is named
         * by its function */
        snprintf(a->schedule, sizeof a->schedule, "%s", PP_SCHED_MEGATRON_INTERLEAVED);
        an_warn(a, "Megatron-LM's interleaved schedule (%llu call(s) of "
                   "forward_backward_pipelining_with_interleaving): %llu of its forward_step / "
                   "backward_step calls could not be told which model chunk they ran (a "
                   "forward says it only by the model chunk's module event, which torch records "
                   "with_stack=True; this trace has none) and are not pipeline ops, so the "
                   "stages' busy time, bubble and replay understate the work, and pprof-tune "
                   "cannot propose for it (docs/dialects.md)",
                (unsigned long long)st->megatron_interleaved,
                (unsigned long long)st->megatron_unresolved);
    }
    if (!a->schedule[0]) {
        /* V placement (torch's ZBV, DualPipeV) and LoopedBFS (several chunks, every forward
         * before any backward, unless M < S, where interleaved 1F1B runs in that order too) are
         * no schedules the tuner models: their own names */
        int bfs = a->v > 1 && !st->dshape_fwd_after_bwd && a->M >= an_state_stages(st);
        const char *k = an_placement(st) == PP_PLACE_V ? (st->dshape_split ? "zbv" : "v-shape")
                        : bfs                          ? "looped-bfs"
                        : a->v > 1                     ? "interleaved"
                        : st->dshape_split             ? "zb-h1"
                        : st->dshape_fwd_after_bwd     ? "1f1b"
                                                       : "gpipe";
        snprintf(a->schedule, sizeof a->schedule, "%s", k);
    }
}

static void start_ended_early(state *st, file_state *f, thread_state *t, open_range *o);

/* A PUSH, START or MARK record (of its full size); returns the range an EXT_PAYLOAD record may
 * attach to. */
static inline open_range *on_open(state *st, file_state *f, thread_state *t,
                                  const pp_rec_header *h, const uint8_t *rec, const uint8_t *p,
                                  size_t bytes, size_t off)
{
    pp_rec_range r;
    memcpy(&r, rec, sizeof r);
    f->events++;
    if (h->type == PP_REC_MARK) {
        if (r.domain == f->pipeprof_domain && f->pipeprof_domain)
            on_mark(st, f, an_str_of(f, r.message), h->ts);
        else
            an_other_mark(st, f, t, &r, h->ts);
        return NULL;
    }
    /* every field but the payload's bytes and the cached decode (flagged unset): this runs for
     * every range of the trace */
    open_range spare;
    vec *target = h->type == PP_REC_PUSH ? &t->stack : &f->starts;
    open_range *last = vec_push_raw(target);
    open_range *o = last ? last : &spare;
    o->domain = r.domain;
    o->t0 = h->ts;
    o->message = r.message;
    o->category = r.category;
    o->payload_type = r.payload_type;
    o->payload = r.payload;
    o->range_id = r.range_id;
    o->tid = t->tid;
    o->has_ext = 0;
    o->ext_bytes = 0;
    o->has_dec = 0;
    /* when its pipeprof.event payload follows, on_ext does this */
    if (r.domain == f->pipeprof_domain && f->pipeprof_domain) {
        if (h->type == PP_REC_PUSH && !ext_follows(p, bytes, off)) {
            decoded d;
            decode(st, f, o, &d);
            note_open(st, f, t, &d,
                      d.kind == PP_NVTX_STEP && d.step < 0 ? t->n_steps + 1 : d.step, o->t0);
        }
    } else {
        dialect_open(st, f, t, o); /* another domain's range: a dialect may name it */
    }
    if (h->type == PP_REC_START && f->early_ends.n && last) {
        start_ended_early(st, f, t, last); /* its END was read first */
        return NULL;
    }
    return last;
}

/* An EXT_PAYLOAD record of the pipeprof.event schema, attached to `last`, the range just
 * opened. */
static inline void on_ext(state *st, file_state *f, thread_state *t, const pp_rec_header *h,
                          const uint8_t *rec, open_range *last)
{
    pp_rec_ext e;
    if (h->size < sizeof e || !last || last->has_ext)
        return;
    memcpy(&e, rec, sizeof e);
    if (e.schema_id != PP_NVTX_SCHEMA_ID)
        return;
    uint32_t nb = e.data_bytes;
    if (nb > sizeof last->ext)
        nb = sizeof last->ext;
    if (sizeof e + nb > h->size)
        return;
    if (nb == sizeof(pp_nvtx_event)) /* libpprof's payload: a copy of known size */
        memcpy(last->ext, rec + sizeof e, sizeof(pp_nvtx_event));
    else
        memcpy(last->ext, rec + sizeof e, nb);
    last->ext_bytes = nb;
    last->has_ext = 1;
    /* re-evaluate the enclosing-range state with the authoritative payload */
    if (last->domain == f->pipeprof_domain && t->stack.n &&
        last == &((open_range *)t->stack.data)[t->stack.n - 1]) {
        const decoded *d = &last->dec; /* decoded in place, not copied there */
        decode(st, f, last, &last->dec);
        last->dec_gen = f->meta_gen;
        last->dec_cfg = st->cfg_gen;
        last->has_dec = 1;
        note_open(st, f, t, d, d->step, last->t0);
        if (d->kind >= PP_NVTX_FWD && d->kind <= PP_NVTX_BWD_WEIGHT && d->stage >= 0)
            t->cur_stage = d->stage;
    }
}

/* A closing record of f into r (size bytes) and counted; 0 when it is too short to be one. */
static inline int closing_record(file_state *f, const pp_rec_header *h, const uint8_t *rec,
                                 void *r, size_t size)
{
    if (h->size < size)
        return 0;
    memcpy(r, rec, size);
    f->events++;
    return 1;
}

/* A POP record: closes the innermost open range of its domain on t. */
static inline void on_pop(state *st, file_state *f, thread_state *t, const pp_rec_header *h,
                          const uint8_t *rec)
{
    pp_rec_pop r;
    if (!closing_record(f, h, rec, &r, sizeof r))
        return;
    open_range *s = t->stack.data;
    for (size_t k = t->stack.n; k-- > 0;) {
        if (s[k].domain != r.domain)
            continue;
        /* One decode serves the range and the step bookkeeping below (with no pipeprof domain
         * seen, a default-domain range is still checked for a step payload). The range is used
         * in place (nothing below touches the stack), then removed. */
        const open_range *o = &s[k];
        if (f->ov_open)
            overlap_inner_close(f, t, o, h->ts);
        if (o->domain == f->pipeprof_domain && f->pipeprof_domain) {
            decoded fresh;
            const decoded *d = &fresh; /* the cached decode is used where it is, not copied */
            if (o->has_dec && o->dec_gen == f->meta_gen && o->dec_cfg == st->cfg_gen)
                d = &o->dec;
            else
                decode(st, f, o, &fresh);
            close_pipeline(st, f, t, o, h->ts, d);
            if (d->kind == PP_NVTX_KIND_NONE && !d->oob)
                an_other_range(st, f, t, o, h->ts);
        } else if (o->has_dec >= DEC_DIALECT) {
            dialect_close(st, f, t, o, h->ts); /* (dialect_open names no pipeprof range) */
        } else if (o->domain == f->pipeprof_domain) {
            /* no pipeprof domain seen: a default-domain range still counts as a step for the
             * bookkeeping when its message says so; it is the generic view's range */
            decoded d;
            decode(st, f, o, &d);
            if (d.kind == PP_NVTX_STEP)
                close_step(st, f, t, &d);
            an_other_range(st, f, t, o, h->ts);
        } else {
            an_other_range(st, f, t, o, h->ts);
        }
        if (k + 1 < t->stack.n) /* mostly the innermost range: nothing above it to move */
            memmove(&s[k], &s[k + 1], (t->stack.n - k - 1) * sizeof *s);
        t->stack.n--;
        break;
    }
}

/* Removes the START range of `id` from f's open ones into *o; 0 when none is open. */
static inline int take_start(file_state *f, uint64_t id, open_range *o)
{
    open_range *s = f->starts.data;
    for (size_t k = 0; k < f->starts.n; k++)
        if (s[k].range_id == id) {
            *o = s[k];
            s[k] = s[--f->starts.n];
            return 1;
        }
    return 0;
}

/* A START range o of f closed at ts on thread t. */
static void close_start(state *st, file_state *f, thread_state *t, const open_range *o,
                        uint64_t ts)
{
    if (f->ov_open)
        overlap_inner_close(f, t, o, ts);
    if (o->has_dec >= DEC_DIALECT) {
        dialect_close(st, f, t, o, ts);
    } else if (f->pipeprof_domain && o->domain == f->pipeprof_domain) {
        decoded d;
        decode(st, f, o, &d);
        an_on_range(st, f, t, o, ts, &d);
        if (d.kind == PP_NVTX_KIND_NONE && !d.oob)
            an_other_range(st, f, t, o, ts);
    } else {
        an_other_range(st, f, t, o, ts);
    }
}

/* An END record: closes the START range of its id; one whose START was not read yet (its
 * thread's block comes later in the file) waits in f->early_ends. */
static inline void on_end(state *st, file_state *f, thread_state *t, const pp_rec_header *h,
                          const uint8_t *rec)
{
    pp_rec_end r;
    open_range o;
    if (!closing_record(f, h, rec, &r, sizeof r))
        return;
    if (take_start(f, r.range_id, &o)) {
        close_start(st, f, t, &o, h->ts);
        return;
    }
    early_end *e = f->early_ends.n < 4096 ? vec_push(&f->early_ends) : NULL;
    if (e)
        *e = (early_end){r.range_id, h->ts, t->tid};
}

/* A START just opened (o, the last of f->starts) whose END was read before it: closed now, on
 * the ending thread (known: its block was read). */
static void start_ended_early(state *st, file_state *f, thread_state *t, open_range *o)
{
    early_end *e = f->early_ends.data;
    for (size_t k = 0; k < f->early_ends.n; k++) {
        if (e[k].range_id != o->range_id)
            continue;
        early_end x = e[k];
        e[k] = e[--f->early_ends.n];
        open_range copy = *o;
        f->starts.n--;
        thread_state *th = f->threads.data, *ender = t;
        for (size_t i = 0; i < f->threads.n; i++)
            if (th[i].tid == x.tid)
                ender = &th[i];
        close_start(st, f, ender, &copy, x.ts);
        return;
    }
}

/* A GPU-capture record: onto the common clock, then to the projection (analyzed replica); the
 * host pass only counts them. */
static inline void on_gpu(state *st, file_state *f, const pp_rec_header *h, const uint8_t *rec)
{
    if (f->replica != st->o->replica)
        return;
    if (st->gpu) {
        on_gpu_record(st, f, h->type, rec, h->size);
    } else {
        st->gpu_records++;
        if (h->type == PP_REC_NCCL && h->size >= sizeof(pp_rec_nccl))
            note_nccl_member(st, f, rec);
        if (st->gpu_rec_on && !st->collect)
            on_gpu_record(st, f, h->type, rec, h->size);
    }
}

/* Pushes, pops, starts and ends of one EVENTS block: the analysis' hot loop (the helpers above
 * are inlined into it). */
static void on_events(state *st, file_state *f, const pp_trace_block *blk)
{
    thread_state *t = thread_of(f, blk->h.tid);
    if (!t)
        return;
    const uint8_t *p = blk->payload;
    size_t off = 0, bytes = blk->h.payload_bytes;
    open_range *last = NULL; /* the range an EXT_PAYLOAD attaches to */
    pp_rec_header h;
    uint32_t i = 0;
    for (const uint8_t *rec; (rec = next_record(blk, &off, &h, &i)) != NULL;) {
        switch (h.type) {
        case PP_REC_PUSH:
        case PP_REC_START:
        case PP_REC_MARK:
            if (h.size >= sizeof(pp_rec_range))
                last = on_open(st, f, t, &h, rec, p, bytes, off);
            break;
        case PP_REC_GPU:
        case PP_REC_API:
        case PP_REC_NCCL: on_gpu(st, f, &h, rec); break;
        case PP_REC_EXT_PAYLOAD: on_ext(st, f, t, &h, rec, last); break;
        case PP_REC_COUNTER:
        case PP_REC_MEM:
        case PP_REC_GPU_MEM: an_mem_record(st, f, &h, rec); break; /* memory.c */
        case PP_REC_POP:
            if (h.size >= sizeof(pp_rec_pop))
                last = NULL;
            on_pop(st, f, t, &h, rec);
            break;
        case PP_REC_END:
            if (h.size >= sizeof(pp_rec_end))
                last = NULL;
            on_end(st, f, t, &h, rec);
            break;
        default: break;
        }
    }
}

/* A SCHEMA record: the pipeprof.event layout the file registered, by the fields' names. */
static void on_schema(file_state *f, const uint8_t *rec, uint16_t size)
{
    pp_rec_schema sc;
    if (size < sizeof sc)
        return;
    memcpy(&sc, rec, sizeof sc);
    if (sc.schema_id != PP_NVTX_SCHEMA_ID)
        return;
    int found = 0;
    for (uint32_t e = 0; e < sc.n_entries; e++) {
        size_t eo = sizeof sc + (size_t)e * sizeof(pp_rec_schema_entry);
        if (eo + sizeof(pp_rec_schema_entry) > size)
            break;
        pp_rec_schema_entry en;
        memcpy(&en, rec + eo, sizeof en);
        for (int k = 0; k < PP_NVTX_FIELD_COUNT; k++)
            if (strcmp(an_str_of(f, en.name), pp_nvtx_fields[k].name) == 0) {
                f->off[k] = en.offset;
                found++;
            }
    }
    f->schema_ok = found == PP_NVTX_FIELD_COUNT;
    f->default_layout = 1;
    for (int k = 0; k < PP_NVTX_FIELD_COUNT; k++)
        f->default_layout &= f->off[k] == pp_nvtx_fields[k].offset;
}

/* A META block: the strings, domains and schemas later records refer to. */
static void on_meta(state *st, file_state *f, const pp_trace_block *blk)
{
    f->meta_gen++;
    size_t off = 0;
    pp_rec_header h;
    uint32_t i = 0;
    for (const uint8_t *rec; (rec = next_record(blk, &off, &h, &i)) != NULL;) {
        an_other_meta(f, &h, rec); /* names of domains, categories, threads (ranges.c) */
        if (h.type == PP_REC_COUNTER_DEF) {
            an_mem_meta(st, f, &h, rec); /* counters (memory.c) */
            continue;
        }
        if (h.type == PP_REC_STRING) {
            pp_rec_string s;
            if (h.size < sizeof s)
                continue;
            memcpy(&s, rec, sizeof s);
            if (s.id == 0 || sizeof s + s.len > h.size)
                continue;
            char **slot = string_slot(f, s.id);
            if (!slot)
                return;
            if (*slot)
                continue; /* first definition wins */
            *slot = malloc(s.len + 1);
            f->n_strings++;
            if (*slot) {
                memcpy(*slot, rec + sizeof s, s.len);
                (*slot)[s.len] = '\0';
            }
        } else if (h.type == PP_REC_DOMAIN) {
            pp_rec_domain d;
            if (h.size < sizeof d)
                continue;
            memcpy(&d, rec, sizeof d);
            const char *name = an_str_of(f, d.name);
            if (!f->pipeprof_domain && strcmp(name, PP_NVTX_DOMAIN) == 0) {
                f->pipeprof_domain = d.id;
                continue;
            }
            for (int k = 0; k < 2; k++) /* Paddle's timeline domains: its names built in */
                if (!f->paddle_tl[k] && strcmp(name, k ? "virtual pipeline timeline"
                                                       : "pipeline timeline") == 0)
                    f->paddle_tl[k] = d.id;
            if (f->dialect && pp_dialect_uses_domains(f->dialect) && f->domains.n < 4096) {
                domain_name *dn = vec_push(&f->domains); /* for the rules naming a domain */
                if (dn)
                    *dn = (domain_name){d.id, d.name};
            }
        } else if (h.type == PP_REC_SCHEMA) {
            on_schema(f, rec, h.size);
        }
    }
}

void an_count_stages(file_state *fs, size_t n)
{
    int64_t top = -1;
    for (size_t i = 0; i < n; i++)
        if (!fs[i].done && trace_rank(&fs[i]) > top)
            top = trace_rank(&fs[i]);
    for (size_t i = 0; i < n; i++)
        fs[i].n_stages = top >= 0 && top < INT32_MAX ? (int32_t)(top + 1) : 0;
}

void an_file_state_init(file_state *f, int index)
{
    f->index = index;
    f->min_stage = -1;
    f->pipe_rank = -1;
    f->strings.elem = sizeof(char *);
    f->far_strings.elem = sizeof(far_string);
    f->msgs.elem = sizeof(msg_info);
    f->dinfo.elem = sizeof(dialect_info);
    f->domains.elem = sizeof(domain_name);
    f->threads.elem = sizeof(thread_state);
    f->starts.elem = sizeof(open_range);
    f->early_ends.elem = sizeof(early_end);
    /* the convention's layout until (unless) the file registers the schema */
    for (int k = 0; k < PP_NVTX_FIELD_COUNT; k++)
        f->off[k] = pp_nvtx_fields[k].offset;
    f->default_layout = 1;
    f->proj_stage = -1;
}

void an_file_state_free(file_state *f)
{
    pp_trace_reader_close(f->r);
    char **s = f->strings.data;
    for (size_t i = 0; i < f->strings.n; i++)
        free(s[i]);
    vec_free(&f->strings);
    far_string *fs = f->far_strings.data;
    for (size_t i = 0; i < f->far_strings.n; i++)
        free(fs[i].s);
    vec_free(&f->far_strings);
    vec_free(&f->msgs);
    vec_free(&f->dinfo);
    vec_free(&f->domains);
    thread_state *t = f->threads.data;
    for (size_t i = 0; i < f->threads.n; i++)
        vec_free(&t[i].stack);
    vec_free(&f->threads);
    vec_free(&f->starts);
    vec_free(&f->early_ends);
    vec_free(&f->pending);
    free(f->mg_fwd);
    f->mg_fwd = NULL;
    an_other_file_free(f);
    an_mem_file_free(f);
}


int an_read_block(state *st, file_state *f)
{
    pp_trace_block blk;
    bool got = false;
    if (pp_trace_reader_next(f->r, &blk, &got) != PP_OK || !got) {
        thread_state *t = f->threads.data; /* the last sequence steps end with the trace */
        for (size_t i = 0; i < f->threads.n; i++)
            syn_close(st, f, &t[i]);
        an_pending_flush(st, f);
        return 0;
    }
    if (blk.h.kind == PP_BLOCK_META) {
        on_meta(st, f, &blk);
    } else if (blk.h.kind == PP_BLOCK_EVENTS) {
        on_events(st, f, &blk);
    } else if (blk.h.kind == PP_BLOCK_FOOTER && blk.h.payload_bytes >= sizeof(pp_rec_footer)) {
        pp_rec_footer ft;
        memcpy(&ft, blk.payload, sizeof ft);
        f->info->has_footer = 1;
        f->info->events = ft.events;
        f->info->dropped = ft.dropped;
        f->info->filtered = ft.filtered;
    }
    return 1;
}
