/* bench_analyzer: how fast the analyzer (analyzer/, pp_analyze_files) ingests a trace on one
 * core and how much memory it holds, at two trace lengths. Writes a synthetic trace that follows
 * docs/nvtx-convention.md the way libpprof would record it (S stage threads running 1F1B, layer
 * ranges, transfers, one EVENTS block per thread per 20 ms of simulated time), analyzes it in a
 * fresh child process per run, checks the analysis found what was generated, and prints MB/s and
 * peak RSS. Prints numbers measured in this run; asserts no time.
 * With --gpu every compute range also launches a kernel: its CUDA API call and GPU record are
 * written one step later, as CUPTI hands its buffers over late, and the check counts them.
 *   bench_analyzer [--events 50000000] [--small N] [--repeat 1] [--dir /tmp] [--keep]
 *                  [--stages 8] [--microbatches 16] [--gpu] [--summary] */
#include "pp_analyzer.h"
#include "pp_common.h"
#include "pp_summary.h"
#include "pp_convention.h"
#include "pp_trace.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The convention's numbers (kinds, pipeprof.event, schema id) are common/pp_convention.h's: the
 * benchmark writes what the format defines rather than linking the runtime. */

/* Shape and costs of the simulated job. Times in ns. */
typedef struct gen_config {
    int S, M, L;             /* stages, micro-batches, layers per stage */
    uint64_t fwd_ns, bwd_ns; /* per micro-batch on a stage */
    uint64_t send_ns, latency_ns, opt_ns, gap_ns, flush_ns;
    uint64_t act_bytes;
    int gpu;                 /* --gpu: a kernel per compute range (2: --gpu-autograd) */
} gen_config;

/* Bytes of records not yet written for one thread; records are appended in time order. */
typedef struct pending {
    uint8_t *p;
    size_t n, cap;
} pending;

static uint32_t tid_of(int s) { return 100001u + (uint32_t)s; }
static int pending_room(pending *q, size_t more);

typedef struct gen {
    const gen_config *c;
    pp_trace_writer *w;
    pp_rng rng;
    pending *th;             /* [S] */
    pending meta;
    uint32_t next_string;
    uint32_t msg_step, msg_opt;
    uint32_t *msg_mb;        /* [9][M] by kind (fwd .. recv_grad) */
    uint32_t *msg_layer;     /* [2][S*L]: fwd, bwd */
    uint32_t msg_config;
    uint64_t *act_at, *grad_at; /* [S][M] arrival of the data stage s waits for, 0 unknown */
    uint64_t *act_send, *grad_send; /* [S][M][2] the send range of that data */
    /* messages of analyzed steps (after the first) whose receive overlaps their send: the ones
     * the analyzer times (docs/metrics.md), by sending stage */
    uint64_t timed_act[256], timed_grad[256];
    uint64_t events;         /* PUSH + POP + MARK records written */
    uint64_t next_flush;
    uint64_t blocks;
    pending gpu_cur, gpu_prev; /* --gpu: this step's API + GPU records, the previous step's */
    uint32_t corr;
} gen;

enum { CUPTI_TID = 99999,     /* the thread that delivers CUPTI's buffers */
       AUTOGRAD_TID = 199999 }; /* --gpu-autograd: the thread launching every backward */

/* A kernel launched 1 us into a compute range of stage s, running from 5 us in to 5 us before
 * its end, on device 0, stream s + 1. */
static void gpu_launch(gen *g, int s, uint64_t t0, uint64_t t1, int bwd)
{
    pending *q = &g->gpu_cur;
    if (!pending_room(q, sizeof(pp_rec_api) + sizeof(pp_rec_gpu)))
        return;
    pp_rec_api a;
    memset(&a, 0, sizeof a);
    a.h = (pp_rec_header){PP_REC_API, sizeof a, CUPTI_TID, 0};
    a.correlation = ++g->corr;
    a.thread = bwd && g->c->gpu == 2 ? AUTOGRAD_TID : tid_of(s);
    a.cbid = 211;
    a.start = t0 + 1000;
    a.end = t0 + 3000;
    memcpy(q->p + q->n, &a, sizeof a);
    q->n += sizeof a;
    pp_rec_gpu k;
    memset(&k, 0, sizeof k);
    k.h = (pp_rec_header){PP_REC_GPU, sizeof k, CUPTI_TID, 0};
    k.kind = PP_GPU_KERNEL;
    k.stream = (uint32_t)s + 1;
    k.correlation = g->corr;
    k.start = t0 + 5000;
    k.end = t1 - 5000;
    memcpy(q->p + q->n, &k, sizeof k);
    q->n += sizeof k;
}

/* Writes the previous step's GPU records (the step just generated waits for the next). */
static pp_status gpu_deliver(gen *g, int all)
{
    for (int pass = 0; pass < (all ? 2 : 1); pass++) {
        pending *q = &g->gpu_prev;
        if (q->n) {
            uint32_t n = (uint32_t)(q->n / (sizeof(pp_rec_api) + sizeof(pp_rec_gpu)) * 2);
            pp_status st = pp_trace_writer_block(g->w, PP_BLOCK_EVENTS, CUPTI_TID, q->p, q->n, n);
            if (st != PP_OK)
                return st;
            g->blocks++;
            q->n = 0;
        }
        pending t = g->gpu_prev;
        g->gpu_prev = g->gpu_cur;
        g->gpu_cur = t;
    }
    return PP_OK;
}

static int pending_room(pending *q, size_t more)
{
    if (q->n + more <= q->cap)
        return 1;
    size_t cap = q->cap ? q->cap : 65536;
    while (cap < q->n + more)
        cap *= 2;
    uint8_t *p = realloc(q->p, cap);
    if (!p)
        return 0;
    q->p = p;
    q->cap = cap;
    return 1;
}

static uint32_t add_string(gen *g, const char *s)
{
    size_t len = strlen(s);
    if (!pending_room(&g->meta, sizeof(pp_rec_string) + len + 8))
        return 0;
    uint32_t id = g->next_string++;
    g->meta.n += pp_trace_enc_string(g->meta.p + g->meta.n, g->meta.cap - g->meta.n, id, s, len);
    return id;
}

static int add_meta(gen *g, const void *rec, size_t bytes)
{
    if (!pending_room(&g->meta, bytes))
        return 0;
    memcpy(g->meta.p + g->meta.n, rec, bytes);
    g->meta.n += bytes;
    return 1;
}

static uint32_t meta_records(const pending *q)
{
    uint32_t n = 0;
    for (size_t off = 0; off < q->n; n++) {
        pp_rec_header h;
        memcpy(&h, q->p + off, sizeof h);
        off += h.size;
    }
    return n;
}

/* The definitions a libpprof capture starts with: domain, schema, categories, thread names and
 * every message the runtime registers. */
static pp_status write_meta(gen *g)
{
    const gen_config *c = g->c;
    /* NVTX_PAYLOAD_ENTRY_TYPE_ of each field: INT32 15, UINT32 16, INT64 17, UINT64 18 */
    uint64_t field_type[PP_NVTX_FIELD_COUNT];
    for (int k = 0; k < PP_NVTX_FIELD_COUNT; k++)
        field_type[k] = (pp_nvtx_fields[k].size == 8 ? 17 : 15) + !pp_nvtx_fields[k].is_signed;
    char buf[160];
    g->next_string = 1;
    uint32_t s_domain = add_string(g, PP_NVTX_DOMAIN);
    uint32_t s_field[PP_NVTX_FIELD_COUNT];
    for (int k = 0; k < PP_NVTX_FIELD_COUNT; k++)
        s_field[k] = add_string(g, pp_nvtx_fields[k].name);
    uint32_t s_schema = add_string(g, PP_NVTX_SCHEMA_NAME);
    pp_rec_domain d = {{PP_REC_DOMAIN, sizeof d, 0, 0}, 1, s_domain};
    add_meta(g, &d, sizeof d);
    struct {
        pp_rec_schema r;
        pp_rec_schema_entry e[PP_NVTX_FIELD_COUNT];
    } sc;
    memset(&sc, 0, sizeof sc);
    sc.r.h.type = PP_REC_SCHEMA;
    sc.r.h.size = sizeof sc;
    sc.r.schema_id = PP_NVTX_SCHEMA_ID;
    sc.r.domain = 1;
    sc.r.name = s_schema;
    sc.r.n_entries = PP_NVTX_FIELD_COUNT;
    sc.r.static_size = sizeof(pp_nvtx_event);
    for (int k = 0; k < PP_NVTX_FIELD_COUNT; k++) {
        sc.e[k].type = field_type[k];
        sc.e[k].offset = pp_nvtx_fields[k].offset;
        sc.e[k].name = s_field[k];
    }
    add_meta(g, &sc, sizeof sc);
    for (int s = 0; s < c->S; s++) {
        snprintf(buf, sizeof buf, "stage %d", s);
        uint32_t name = add_string(g, buf);
        pp_rec_category cat = {{PP_REC_CATEGORY, sizeof cat, 0, 0}, 1, (uint32_t)s + 1, name, 0};
        pp_rec_thread_name tn = {{PP_REC_THREAD_NAME, sizeof tn, tid_of(s), 0}, tid_of(s), name};
        add_meta(g, &cat, sizeof cat);
        add_meta(g, &tn, sizeof tn);
    }
    g->msg_step = add_string(g, pp_nvtx_kind_word(PP_NVTX_STEP));
    g->msg_opt = add_string(g, pp_nvtx_kind_word(PP_NVTX_OPT_STEP));
    /* "<kind> mb<m>" of the kinds the generator emits (no split backward) */
    for (int k = PP_NVTX_FWD; k <= PP_NVTX_RECV_GRAD; k++)
        for (int m = 0; k != PP_NVTX_BWD_INPUT && k != PP_NVTX_BWD_WEIGHT && m < c->M; m++) {
            pp_nvtx_message_format(buf, sizeof buf, (pp_nvtx_kind)k, m, -1, -1, NULL);
            g->msg_mb[k * c->M + m] = add_string(g, buf);
        }
    int layers = c->S * c->L;
    for (int l = 0; l < layers; l++) {
        snprintf(buf, sizeof buf, "block%d fwd", l);
        g->msg_layer[l] = add_string(g, buf);
        snprintf(buf, sizeof buf, "block%d bwd", l);
        g->msg_layer[layers + l] = add_string(g, buf);
    }
    snprintf(buf, sizeof buf,
             "config schedule=1f1b S=%d M=%d v=1 layers=%d samples_per_step=%d "
             "tokens_per_step=%d backend=synthetic",
             c->S, c->M, layers, c->M * 4, c->M * 4 * 1024);
    g->msg_config = add_string(g, buf);
    if (g->next_string == 0 || g->meta.n == 0)
        return PP_ERR(PP_ERR_NOMEM, "bench_analyzer: out of memory for the definitions");
    return pp_trace_writer_block(g->w, PP_BLOCK_META, 0, g->meta.p, g->meta.n,
                                 meta_records(&g->meta));
}

/* One PUSH with its pipeprof.event payload. */
static void push(gen *g, int s, uint64_t ts, uint32_t msg, const pp_nvtx_event *ev)
{
    pending *q = &g->th[s];
    if (!pending_room(q, sizeof(pp_rec_range) + 80))
        return;
    pp_rec_range r;
    memset(&r, 0, sizeof r);
    r.h.type = PP_REC_PUSH;
    r.h.size = sizeof r;
    r.h.tid = tid_of(s);
    r.h.ts = ts;
    r.domain = 1;
    r.message = msg;
    r.category = (uint32_t)s + 1;
    memcpy(q->p + q->n, &r, sizeof r);
    q->n += sizeof r;
    q->n += pp_trace_enc_ext(q->p + q->n, q->cap - q->n, tid_of(s), ts, PP_NVTX_SCHEMA_ID, ev,
                             sizeof *ev);
    g->events++;
}

static void pop(gen *g, int s, uint64_t ts)
{
    pending *q = &g->th[s];
    if (!pending_room(q, sizeof(pp_rec_pop)))
        return;
    pp_rec_pop r = {{PP_REC_POP, sizeof r, tid_of(s), ts}, 1, 0};
    memcpy(q->p + q->n, &r, sizeof r);
    q->n += sizeof r;
    g->events++;
}

static void range(gen *g, int s, uint64_t t0, uint64_t t1, uint32_t msg, const pp_nvtx_event *ev)
{
    push(g, s, t0, msg, ev);
    pop(g, s, t1);
}

/* A cost with +-3 % deterministic jitter. */
static uint64_t jitter(gen *g, uint64_t ns)
{
    return (uint64_t)((double)ns * (0.97 + 0.06 * pp_rng_uniform(&g->rng)));
}

/* A compute range and its layer ranges inside it; returns its end. */
static uint64_t compute(gen *g, int s, uint64_t t0, uint64_t cost, int bwd, pp_nvtx_event ev)
{
    const gen_config *c = g->c;
    ev.kind = bwd ? PP_NVTX_BWD : PP_NVTX_FWD;
    uint64_t t1 = t0 + cost;
    push(g, s, t0, g->msg_mb[ev.kind * c->M + ev.mb], &ev);
    uint64_t inner = cost - 2000, t = t0 + 1000;
    for (int j = 0; j < c->L; j++) {
        int l = bwd ? s * c->L + (c->L - 1 - j) : s * c->L + j;
        pp_nvtx_event le = ev;
        le.kind = bwd ? PP_NVTX_LAYER_BWD : PP_NVTX_LAYER_FWD;
        le.layer = l;
        uint64_t te = t0 + 1000 + inner * (uint64_t)(j + 1) / (uint64_t)c->L;
        range(g, s, t, te, g->msg_layer[(bwd ? c->S * c->L : 0) + l], &le);
        t = te;
    }
    pop(g, s, t1);
    if (c->gpu)
        gpu_launch(g, s, t0, t1, bwd);
    return t1;
}

/* The 1F1B order of stage s: warm-up forwards, one-forward-one-backward, cool-down backwards.
 * Entry k is mb << 1 | is_backward. */
static int order_1f1b(int S, int M, int s, int k)
{
    int warm = S - 1 - s < M ? S - 1 - s : M;
    if (k < warm)
        return k << 1;
    int steady = 2 * (M - warm);
    if (k < warm + steady) {
        int i = (k - warm) / 2;
        return (k - warm) % 2 == 0 ? (warm + i) << 1 : (i << 1) | 1;
    }
    return ((k - warm - steady + (M - warm)) << 1) | 1;
}

/* Runs one step of the pipeline in simulated time from t_start: each stage advances through its
 * 1F1B list whenever the data it waits for has been sent. Returns the step's end. */
static uint64_t gen_step(gen *g, int64_t step, uint64_t t_start, int *pos, uint64_t *clk)
{
    const gen_config *c = g->c;
    int S = c->S, M = c->M;
    memset(g->act_at, 0, sizeof(uint64_t) * (size_t)(S * M));
    memset(g->grad_at, 0, sizeof(uint64_t) * (size_t)(S * M));
    for (int s = 0; s < S; s++) {
        pp_nvtx_event ev = {PP_NVTX_STEP, s, -1, -1, -1, -1, 0, step};
        clk[s] = t_start + (uint64_t)s * 1000;
        push(g, s, clk[s], g->msg_step, &ev);
        clk[s] += 2000;
        pos[s] = 0;
    }
    /* One stage in the middle is 15 % slower: the imbalance the analysis should blame. */
    int left = S * 2 * M;
    while (left > 0) {
        int progress = 0;
        for (int s = 0; s < S; s++) {
            double slow = s == S / 2 ? 1.15 : 1.0;
            while (pos[s] < 2 * M) {
                int e = order_1f1b(S, M, s, pos[s]);
                int mb = e >> 1, bwd = e & 1;
                uint64_t *wait_at = bwd ? &g->grad_at[s * M + mb] : &g->act_at[s * M + mb];
                int waits = bwd ? s < S - 1 : s > 0;
                if (waits && *wait_at == 0)
                    break; /* the sender has not got there yet */
                pp_nvtx_event ev = {0, s, mb, 0, -1, -1, 0, step};
                if (waits) {
                    ev.kind = bwd ? PP_NVTX_RECV_GRAD : PP_NVTX_RECV_ACT;
                    ev.peer = bwd ? s + 1 : s - 1;
                    ev.bytes = c->act_bytes;
                    uint64_t t1 = *wait_at > clk[s] + 2000 ? *wait_at : clk[s] + 2000;
                    const uint64_t *snd = &(bwd ? g->grad_send : g->act_send)[(s * M + mb) * 2];
                    if (step > 1 && clk[s] <= snd[1] && t1 > snd[0])
                        (bwd ? g->timed_grad : g->timed_act)[ev.peer]++;
                    range(g, s, clk[s], t1, g->msg_mb[ev.kind * M + mb], &ev);
                    clk[s] = t1 + 500;
                    ev.peer = -1;
                    ev.bytes = 0;
                }
                uint64_t cost = (uint64_t)((double)(bwd ? c->bwd_ns : c->fwd_ns) * slow);
                clk[s] = compute(g, s, clk[s], jitter(g, cost), bwd, ev) + 500;
                int sends = bwd ? s > 0 : s < S - 1;
                if (sends) {
                    int peer = bwd ? s - 1 : s + 1;
                    ev.kind = bwd ? PP_NVTX_SEND_GRAD : PP_NVTX_SEND_ACT;
                    ev.peer = peer;
                    ev.bytes = c->act_bytes;
                    uint64_t t1 = clk[s] + jitter(g, c->send_ns);
                    range(g, s, clk[s], t1, g->msg_mb[ev.kind * M + mb], &ev);
                    uint64_t arrive = clk[s] + jitter(g, c->latency_ns);
                    if (bwd)
                        g->grad_at[peer * M + mb] = arrive;
                    else
                        g->act_at[peer * M + mb] = arrive;
                    uint64_t *snd = &(bwd ? g->grad_send : g->act_send)[(peer * M + mb) * 2];
                    snd[0] = clk[s];
                    snd[1] = t1;
                    clk[s] = t1 + 500;
                }
                pos[s]++;
                left--;
                progress = 1;
            }
        }
        if (!progress)
            return 0; /* cannot happen with a 1F1B order; the caller reports it */
    }
    /* The optimizer step starts after the all-reduce of the gradient norm: a barrier. */
    uint64_t bar = 0;
    for (int s = 0; s < S; s++)
        bar = clk[s] > bar ? clk[s] : bar;
    bar += 50000;
    uint64_t end = 0;
    for (int s = 0; s < S; s++) {
        pp_nvtx_event ev = {PP_NVTX_OPT_STEP, s, -1, -1, -1, -1, 0, step};
        uint64_t t1 = bar + jitter(g, c->opt_ns);
        range(g, s, bar, t1, g->msg_opt, &ev);
        pop(g, s, t1 + 1000); /* the step range */
        end = t1 + 1000 > end ? t1 + 1000 : end;
    }
    return end;
}

/* Writes, per thread, one EVENTS block of the records up to `until`, as libpprof's writer
 * thread does every flush period. A PUSH and its payload share a timestamp, so they stay in one
 * block. */
static pp_status flush_until(gen *g, uint64_t until)
{
    for (int s = 0; s < g->c->S; s++) {
        pending *q = &g->th[s];
        size_t off = 0;
        uint32_t n = 0;
        while (off < q->n) {
            pp_rec_header h;
            memcpy(&h, q->p + off, sizeof h);
            if (h.ts > until)
                break;
            off += h.size;
            n++;
        }
        if (!n)
            continue;
        pp_status st = pp_trace_writer_block(g->w, PP_BLOCK_EVENTS, tid_of(s), q->p, off, n);
        if (st != PP_OK)
            return st;
        g->blocks++;
        memmove(q->p, q->p + off, q->n - off);
        q->n -= off;
    }
    return PP_OK;
}

typedef struct gen_result {
    uint64_t events, steps, bytes, blocks;
    double seconds;
    uint64_t timed_act[256], timed_grad[256]; /* gen's */
} gen_result;

static int tty_progress(void) { return isatty(STDOUT_FILENO) && isatty(STDERR_FILENO); }

/* Writes a trace of at least `target` events (whole steps) to path. */
static pp_status generate(const gen_config *c, const char *path, uint64_t target, gen_result *out)
{
    pp_status st = PP_OK;
    gen g;
    memset(&g, 0, sizeof g);
    g.c = c;
    pp_rng_seed(&g.rng, 42);
    uint64_t t_start = UINT64_C(1000000000000);
    int *pos = calloc((size_t)c->S, sizeof *pos);
    uint64_t *clk = calloc((size_t)c->S, sizeof *clk);
    g.th = calloc((size_t)c->S, sizeof *g.th);
    g.msg_mb = calloc((size_t)(9 * c->M), sizeof *g.msg_mb);
    g.msg_layer = calloc((size_t)(2 * c->S * c->L), sizeof *g.msg_layer);
    g.act_at = calloc((size_t)(c->S * c->M), sizeof *g.act_at);
    g.grad_at = calloc((size_t)(c->S * c->M), sizeof *g.grad_at);
    g.act_send = calloc((size_t)(c->S * c->M) * 2, sizeof *g.act_send);
    g.grad_send = calloc((size_t)(c->S * c->M) * 2, sizeof *g.grad_send);
    uint64_t t0 = pp_now_ns();
    if (!pos || !clk || !g.th || !g.msg_mb || !g.msg_layer || !g.act_at || !g.grad_at ||
        !g.act_send || !g.grad_send) {
        st = PP_ERR(PP_ERR_NOMEM, "bench_analyzer: out of memory");
        goto done;
    }
    pp_trace_header h;
    memset(&h, 0, sizeof h);
    h.pid = (uint32_t)getpid();
    h.rank = -1;
    h.mono_ns = t_start;
    h.real_ns = (uint64_t)time(NULL) * UINT64_C(1000000000);
    snprintf(h.host, sizeof h.host, "bench");
    snprintf(h.exe, sizeof h.exe, "bench_analyzer");
    if ((st = pp_trace_writer_open(path, &h, &g.w)) != PP_OK || (st = write_meta(&g)) != PP_OK)
        goto done;
    /* The configuration mark, from the main thread before the first step, as pptrain does. */
    pp_rec_range mark;
    memset(&mark, 0, sizeof mark);
    mark.h = (pp_rec_header){PP_REC_MARK, sizeof mark, 100000u, t_start};
    mark.domain = 1;
    mark.message = g.msg_config;
    if ((st = pp_trace_writer_block(g.w, PP_BLOCK_EVENTS, 100000u, &mark, sizeof mark, 1)) !=
        PP_OK)
        goto done;
    g.events = 1;
    g.next_flush = t_start + c->flush_ns;
    uint64_t t = t_start + 100000, steps = 0;
    int show = tty_progress();
    while (g.events < target) {
        uint64_t end = gen_step(&g, (int64_t)steps + 1, t, pos, clk);
        if (!end) {
            st = PP_ERR(PP_ERR_RUNTIME, "bench_analyzer: the 1F1B order deadlocked (a bug)");
            goto done;
        }
        steps++;
        for (; g.next_flush <= end; g.next_flush += c->flush_ns)
            if ((st = flush_until(&g, g.next_flush)) != PP_OK)
                goto done;
        if (c->gpu && (st = gpu_deliver(&g, 0)) != PP_OK)
            goto done;
        t = end + c->gap_ns;
        if (show && steps % 256 == 0)
            fprintf(stderr, "\r  writing %s: %.1f M of %.1f M events", path, (double)g.events / 1e6,
                    (double)target / 1e6);
    }
    if (show)
        fprintf(stderr, "\r%*s\r", 100, "");
    if ((st = flush_until(&g, UINT64_MAX)) != PP_OK)
        goto done;
    if (c->gpu && (st = gpu_deliver(&g, 1)) != PP_OK)
        goto done;
    pp_rec_footer f;
    memset(&f, 0, sizeof f);
    f.h.ts = t;
    f.real_ns = h.real_ns + (t - t_start);
    f.events = g.events;
    f.threads = (uint64_t)c->S + 1;
    if ((st = pp_trace_writer_footer(g.w, &f)) != PP_OK)
        goto done;
    out->events = g.events;
    memcpy(out->timed_act, g.timed_act, sizeof g.timed_act);
    memcpy(out->timed_grad, g.timed_grad, sizeof g.timed_grad);
    out->steps = steps;
    out->blocks = pp_trace_writer_blocks(g.w);
    out->seconds = (double)(pp_now_ns() - t0) * 1e-9;
done:
    pp_trace_writer_close(g.w);
    if (st == PP_OK) {
        FILE *fp = fopen(path, "rb");
        if (fp && fseek(fp, 0, SEEK_END) == 0)
            out->bytes = (uint64_t)ftell(fp);
        if (fp)
            fclose(fp);
    }
    for (int s = 0; g.th && s < c->S; s++)
        free(g.th[s].p);
    free(g.th);
    free(g.meta.p);
    free(g.gpu_cur.p);
    free(g.gpu_prev.p);
    free(g.msg_mb);
    free(g.msg_layer);
    free(g.act_at);
    free(g.grad_at);
    free(g.act_send);
    free(g.grad_send);
    free(pos);
    free(clk);
    return st;
}

/* What a child reports about its analysis. */
typedef struct run_result {
    int ok;                   /* the analysis succeeded and matched the generated trace */
    char why[200];            /* otherwise what did not match */
    double wall_s, cpu_s;
    long rss_start_kb, rss_peak_kb;
    double steps_mb;          /* the per-step numbers the analysis returns (a->steps) */
    double summary_s;         /* --summary: writing the summary JSON (pp_summary_write) */
    uint64_t summary_bytes;
    long rss_summary_kb;      /* peak RSS after it */
} run_result;

/* ru_maxrss is in KiB; MB here are 1e6 bytes throughout. */
static double rss_mb(long kb) { return (double)kb * 1024.0 / 1e6; }

static double cpu_seconds(const struct rusage *u)
{
    return (double)u->ru_utime.tv_sec + (double)u->ru_utime.tv_usec * 1e-6 +
           (double)u->ru_stime.tv_sec + (double)u->ru_stime.tv_usec * 1e-6;
}

/* Cheap checks that the analysis read what generate() wrote. */
static void check(const pp_analysis *a, const gen_config *c, const gen_result *gr,
                  run_result *r)
{
    uint64_t steps = gr->steps - 1; /* the default warm-up skips one */
    uint64_t per_link = steps * (uint64_t)c->M;
    r->ok = 0;
    if (a->S != c->S)
        snprintf(r->why, sizeof r->why, "%d stages found, %d generated", a->S, c->S);
    else if (a->n_steps != steps)
        snprintf(r->why, sizeof r->why, "%zu steps analyzed, expected %llu", a->n_steps,
                 (unsigned long long)steps);
    else if (a->M != c->M)
        snprintf(r->why, sizeof r->why, "M = %d from the config mark, expected %d", a->M, c->M);
    else if (a->events_total != gr->events)
        snprintf(r->why, sizeof r->why, "%llu events counted, %llu written",
                 (unsigned long long)a->events_total, (unsigned long long)gr->events);
    else if (a->n_links != (size_t)(2 * (c->S - 1)))
        snprintf(r->why, sizeof r->why, "%zu links, expected %d", a->n_links, 2 * (c->S - 1));
    else if (a->n_layers != (size_t)(c->S * c->L))
        snprintf(r->why, sizeof r->why, "%zu layers, expected %d", a->n_layers, c->S * c->L);
    else {
        for (size_t i = 0; i < a->n_links; i++) {
            const pp_alink *l = &a->links[i];
            uint64_t timed = l->src >= 0 && l->src < 256
                                 ? (l->grad ? gr->timed_grad : gr->timed_act)[l->src]
                                 : 0;
            if (l->messages != per_link || l->timed != timed) {
                snprintf(r->why, sizeof r->why,
                         "link %d -> %d: %llu messages (%llu timed), expected %llu (%llu)",
                         l->src, l->dst, (unsigned long long)l->messages,
                         (unsigned long long)l->timed, (unsigned long long)per_link,
                         (unsigned long long)timed);
                return;
            }
        }
        for (int s = 0; s < a->S; s++)
            if (a->stages[s].fwd_ns.count != per_link || a->stages[s].bwd_ns.count != per_link) {
                snprintf(r->why, sizeof r->why, "stage %d: %llu fwd, %llu bwd ranges, expected "
                         "%llu each", s, (unsigned long long)a->stages[s].fwd_ns.count,
                         (unsigned long long)a->stages[s].bwd_ns.count,
                         (unsigned long long)per_link);
                return;
            }
        for (size_t i = 0; i < a->n_steps; i++)
            if (!a->steps[i].decomposed) {
                snprintf(r->why, sizeof r->why, "step %lld not decomposed",
                         (long long)a->steps[i].step);
                return;
            }
        /* --gpu: one kernel per compute range, every one of an analyzed step projected */
        uint64_t kernels = (gr->steps) * (uint64_t)c->S * 2 * (uint64_t)c->M;
        uint64_t analyzed = steps * (uint64_t)c->S * 2 * (uint64_t)c->M;
        uint64_t adopted = c->gpu == 2 ? analyzed / 2 : 0;
        if (c->gpu && (a->gpu.records != kernels || a->gpu.projected != analyzed ||
                       a->gpu.late || a->gpu.unattributed || a->gpu.adopted != adopted)) {
            snprintf(r->why, sizeof r->why,
                     "GPU: %llu records (%llu written), %llu projected (expected %llu), %llu "
                     "late, %llu unattributed, %llu adopted (expected %llu)",
                     (unsigned long long)a->gpu.records, (unsigned long long)kernels,
                     (unsigned long long)a->gpu.projected, (unsigned long long)analyzed,
                     (unsigned long long)a->gpu.late, (unsigned long long)a->gpu.unattributed,
                     (unsigned long long)a->gpu.adopted, (unsigned long long)adopted);
            return;
        }
        r->ok = 1;
    }
}

/* Analyzes `path` in a fresh child process, so that the peak RSS is this analysis's alone (the
 * parent stays small: it holds no trace). */
static int analyze_in_child(const char *path, const gen_config *c, const gen_result *gr,
                            int summary, run_result *out)
{
    int fd[2];
    memset(out, 0, sizeof *out);
    if (pipe(fd) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        run_result r;
        memset(&r, 0, sizeof r);
        struct rusage u0, u1;
        getrusage(RUSAGE_SELF, &u0);
        r.rss_start_kb = u0.ru_maxrss;
        const char *paths[1] = {path};
        pp_analysis *a = NULL;
        uint64_t t0 = pp_now_ns();
        pp_status st = pp_analyze_files(paths, 1, NULL, &a);
        r.wall_s = (double)(pp_now_ns() - t0) * 1e-9;
        getrusage(RUSAGE_SELF, &u1);
        r.cpu_s = cpu_seconds(&u1) - cpu_seconds(&u0);
        r.rss_peak_kb = u1.ru_maxrss;
        if (st != PP_OK)
            snprintf(r.why, sizeof r.why, "analysis failed: %s", pp_error_message());
        else
            check(a, c, gr, &r);
        if (a && summary) { /* the summary JSON, to a file beside the trace, as pprof-report -o */
            char json[4096 + 8];
            snprintf(json, sizeof json, "%s.json", path);
            FILE *f = fopen(json, "w");
            uint64_t s0 = pp_now_ns();
            pp_status ss = f ? pp_summary_write(a, f) : PP_ERR_IO;
            if (f && fflush(f) != 0)
                ss = PP_ERR_IO;
            r.summary_s = (double)(pp_now_ns() - s0) * 1e-9;
            r.summary_bytes = f ? (uint64_t)ftell(f) : 0;
            if (f)
                fclose(f);
            unlink(json);
            getrusage(RUSAGE_SELF, &u1);
            r.rss_summary_kb = u1.ru_maxrss;
            if (ss != PP_OK && r.ok) {
                r.ok = 0;
                snprintf(r.why, sizeof r.why, "the summary JSON failed");
            }
        }
        if (a)
            r.steps_mb = (double)a->n_steps *
                         (double)(sizeof(pp_astep) + (size_t)a->S * sizeof(pp_stage_step)) / 1e6;
        pp_analysis_free(a);
        ssize_t k = write(fd[1], &r, sizeof r);
        _exit(k == (ssize_t)sizeof r ? 0 : 3);
    }
    close(fd[1]);
    size_t got = 0;
    while (got < sizeof *out) {
        ssize_t k = read(fd[0], (char *)out + got, sizeof *out - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got != sizeof *out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(out->why, sizeof out->why, "the analysis process died (status %d)", status);
        out->ok = 0;
        return -1;
    }
    return 0;
}

typedef struct size_result {
    gen_result g;
    run_result best; /* the fastest of the repeats */
    int ok;
} size_result;

/* Generates, analyzes `repeat` times and (unless keep) deletes one trace. */
static int bench_size(const gen_config *c, const char *dir, const char *label, uint64_t events,
                      int repeat, int keep, int summary, size_result *out)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/bench.%s.pft", dir, label);
    memset(out, 0, sizeof *out);
    printf("%s: writing %.1f M events to %s ...\n", label, (double)events / 1e6, path);
    fflush(stdout);
    if (generate(c, path, events, &out->g) != PP_OK) {
        fprintf(stderr, "bench_analyzer: %s\n", pp_error_message());
        unlink(path);
        return -1;
    }
    printf("%s: %.2f M events, %llu steps, %llu blocks, %.1f MB, written in %.1f s\n", label,
           (double)out->g.events / 1e6, (unsigned long long)out->g.steps,
           (unsigned long long)out->g.blocks, (double)out->g.bytes / 1e6, out->g.seconds);
    out->ok = 1;
    for (int i = 0; i < repeat; i++) {
        run_result r;
        analyze_in_child(path, c, &out->g, summary, &r);
        printf("%s: analysis %d: %.2f s wall, %.2f s CPU, %.1f MB/s, peak RSS %.1f MB "
               "(%.1f MB at start, %.1f MB of per-step results), check %s%s\n",
               label, i + 1, r.wall_s, r.cpu_s,
               r.wall_s > 0 ? (double)out->g.bytes / 1e6 / r.wall_s : 0.0,
               rss_mb(r.rss_peak_kb), rss_mb(r.rss_start_kb), r.steps_mb,
               r.ok ? "ok" : "FAILED: ", r.ok ? "" : r.why);
        if (summary)
            printf("%s: summary JSON %d: %.1f MB in %.3f s, %.1f MB/s, peak RSS %.1f MB after it\n",
                   label, i + 1, (double)r.summary_bytes / 1e6, r.summary_s,
                   r.summary_s > 0 ? (double)r.summary_bytes / 1e6 / r.summary_s : 0.0,
                   rss_mb(r.rss_summary_kb));
        fflush(stdout);
        if (!r.ok)
            out->ok = 0;
        if (i == 0 || r.wall_s < out->best.wall_s)
            out->best = r;
    }
    if (!keep)
        unlink(path);
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_analyzer [--events N] [--small N] [--repeat R] [--dir DIR] [--keep]\n"
            "                      [--stages S] [--microbatches M] [--gpu] [--gpu-autograd]\n"
            "                      [--summary]\n"
            "  --events N   events (range pushes + pops) of the large trace (default 50000000)\n"
            "  --small N    events of the small trace (default events / 10)\n"
            "  --repeat R   analyses per trace, the fastest reported (default 1)\n"
            "  --dir DIR    where the traces go, in a new temporary folder (default /tmp)\n"
            "  --keep       keep the traces (and say where)\n"
            "  --stages S, --microbatches M   the simulated pipeline (default 8 and 16)\n"
            "  --gpu        a kernel per compute range (CUDA API + GPU records, one step late)\n"
            "  --summary    also write the summary JSON (pp_summary_write) after each analysis\n"
            "  --gpu-autograd   --gpu with every backward's kernel launched by one thread outside\n"
            "               the ranges, as PyTorch's autograd does (adopted by the stage's range)\n");
}

int main(int argc, char **argv)
{
    int64_t events = 50000000, small = 0, repeat = 1, S = 8, M = 16;
    const char *base = "/tmp";
    int keep = 0, gpu = 0, summary = 0;
    static const struct option opts[] = {{"events", required_argument, 0, 'e'},
                                         {"small", required_argument, 0, 's'},
                                         {"repeat", required_argument, 0, 'r'},
                                         {"dir", required_argument, 0, 'd'},
                                         {"keep", no_argument, 0, 'k'},
                                         {"stages", required_argument, 0, 'S'},
                                         {"microbatches", required_argument, 0, 'M'},
                                         {"gpu", no_argument, 0, 'g'},
                                         {"gpu-autograd", no_argument, 0, 'A'},
                                         {"summary", no_argument, 0, 'J'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        pp_status st = PP_OK;
        switch (o) {
        case 'e': st = pp_parse_i64(optarg, "--events", 10000, INT64_C(1) << 40, &events); break;
        case 's': st = pp_parse_i64(optarg, "--small", 10000, INT64_C(1) << 40, &small); break;
        case 'r': st = pp_parse_i64(optarg, "--repeat", 1, 100, &repeat); break;
        case 'd': base = optarg; break;
        case 'k': keep = 1; break;
        case 'S': st = pp_parse_i64(optarg, "--stages", 2, 256, &S); break;
        case 'M': st = pp_parse_i64(optarg, "--microbatches", 1, 1024, &M); break;
        case 'g': gpu = gpu ? gpu : 1; break;
        case 'A': gpu = 2; break;
        case 'J': summary = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (st != PP_OK) {
            fprintf(stderr, "bench_analyzer: %s\n", pp_error_message());
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    if (!small)
        small = events / 10 > 10000 ? events / 10 : 10000;

    gen_config c = {.S = (int)S, .M = (int)M, .L = 4,
                    .fwd_ns = 1000000, .bwd_ns = 2000000, /* 1 ms and 2 ms per micro-batch */
                    .send_ns = 20000, .latency_ns = 350000, .opt_ns = 800000,
                    .gap_ns = 300000, .flush_ns = 20000000, .act_bytes = 8u << 20,
                    .gpu = gpu};

    /* About 76 bytes per event (a 56-byte push with its 72-byte payload record and a 24-byte
     * pop per two events, plus block headers); both traces exist at once only with --keep. */
    double need = 80.0 * (double)(keep ? events + small : events) * 1.05;
    struct statvfs vfs;
    if (statvfs(base, &vfs) != 0) {
        fprintf(stderr, "bench_analyzer: cannot stat '%s': %s\n", base, strerror(errno));
        return 2;
    }
    double avail = (double)vfs.f_bavail * (double)vfs.f_frsize;
    if (avail < need) {
        fprintf(stderr,
                "bench_analyzer: %s has %.1f GB free, the traces need about %.1f GB: pass "
                "--dir elsewhere or fewer --events\n",
                base, avail / 1e9, need / 1e9);
        return 2;
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/bench_analyzer.XXXXXX", base);
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench_analyzer: cannot create a folder in '%s': %s\n", base,
                strerror(errno));
        return 3;
    }
    printf("bench_analyzer: synthetic 1F1B traces, %d stage threads, %d micro-batches, %d layers "
           "per stage, extended payloads%s; %.1f GB free in %s (about %.1f GB needed)\n",
           c.S, c.M, c.L, gpu ? ", a kernel per compute range" : "", avail / 1e9, base,
           need / 1e9);
    printf("MB = 1e6 bytes of trace file; wall and CPU time of pp_analyze_files in a fresh child "
           "process; peak RSS = that child's ru_maxrss\n\n");
    size_result r_small, r_large;
    int rc = 0;
    if (bench_size(&c, dir, "small", (uint64_t)small, (int)repeat, keep, summary, &r_small) != 0 ||
        bench_size(&c, dir, "large", (uint64_t)events, (int)repeat, keep, summary, &r_large) != 0) {
        rc = 3;
    } else {
        const size_result *rs[2] = {&r_small, &r_large};
        const char *names[2] = {"small", "large"};
        printf("\n%-6s %10s %8s %10s %9s %9s %11s %11s %10s  %s\n", "trace", "M events", "steps",
               "trace MB", "wall s", "CPU s", "MB/s wall", "MB/s CPU", "peak RSS", "check");
        for (int i = 0; i < 2; i++) {
            const size_result *x = rs[i];
            printf("%-6s %10.2f %8llu %10.1f %9.2f %9.2f %11.1f %11.1f %7.1f MB  %s\n", names[i],
                   (double)x->g.events / 1e6, (unsigned long long)x->g.steps,
                   (double)x->g.bytes / 1e6, x->best.wall_s, x->best.cpu_s,
                   (double)x->g.bytes / 1e6 / x->best.wall_s,
                   (double)x->g.bytes / 1e6 / x->best.cpu_s, rss_mb(x->best.rss_peak_kb),
                   x->ok ? "ok" : "FAILED");
        }
        /* The analysis returns one pp_astep per step (about 0.44 KB at S = 8), which grows with
         * the number of steps by design; the rest is the streaming working set. */
        double pk_s = rss_mb(r_small.best.rss_peak_kb);
        double pk_l = rss_mb(r_large.best.rss_peak_kb);
        printf("\npeak RSS large / small: %.2f for a %.1fx longer trace (1.00 = independent of "
               "length)\n",
               pk_l / pk_s, (double)r_large.g.bytes / (double)r_small.g.bytes);
        printf("without the per-step results (%.1f MB and %.1f MB): %.2f\n", r_small.best.steps_mb,
               r_large.best.steps_mb,
               (pk_l - r_large.best.steps_mb) / (pk_s - r_small.best.steps_mb));
        if (!r_small.ok || !r_large.ok)
            rc = 1;
    }
    if (keep) {
        printf("traces kept in %s\n", dir);
    } else if (rmdir(dir) != 0) {
        fprintf(stderr, "bench_analyzer: could not remove %s: %s\n", dir, strerror(errno));
    }
    return rc;
}
