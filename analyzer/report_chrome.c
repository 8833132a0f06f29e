/* report_chrome.c: the Chrome trace-event JSON of the kept timeline (pp_report_chrome,
 * pp_report.h) for Perfetto and chrome://tracing: one process per rank, one track per stage and
 * GPU stream, an "X" event per op, flow arrows from each send to its receive; and the generic
 * view: every range outside the pipeline and every mark on a track of its own thread, read
 * again from the traces as they are written out (pp_report_each_event: streamed)
 * (docs/cli/pprof-report.md). Written through the common JSON writer. */
#include "pp_report.h"
#include "pp_json.h"
#include "report_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================================== */
/* Chrome trace                                                                               */
/* ======================================================================================== */

typedef struct track {
    int32_t pid, stage;
} track;

static int add_track(track *t, size_t *n, size_t cap, int32_t pid, int32_t stage)
{
    for (size_t i = 0; i < *n; i++)
        if (t[i].pid == pid && t[i].stage == stage)
            return 1;
    if (*n >= cap)
        return 0;
    t[*n].pid = pid;
    t[*n].stage = stage;
    (*n)++;
    return 1;
}

/* The file an op's rank stands for (its rank, or its index when the file has none). */
static const pp_afile *file_of(const pp_analysis *a, int32_t rank)
{
    for (size_t i = 0; i < a->n_files; i++)
        if (a->files[i].rank == rank)
            return &a->files[i];
    if (rank >= 0 && (size_t)rank < a->n_files && a->files[rank].rank < 0)
        return &a->files[rank];
    return NULL;
}

static const char *layer_name(const pp_analysis *a, int32_t layer)
{
    for (size_t i = 0; i < a->n_layers; i++)
        if (a->layers[i].layer == layer && a->layers[i].name[0])
            return a->layers[i].name;
    return NULL;
}

static double us_at(const pp_report_window *w, uint64_t t)
{
    return ((double)t - w->origin) * 1e-3;
}

/* Opens one "X" event (a slice: ts and dur in microseconds); the caller adds its "args" and
 * closes it. */
static void slice_begin(pp_json_writer *w, const char *name, const char *cat, int32_t pid,
                        int32_t tid, double ts_us, double dur_us)
{
    pp_json_object_inline(w, NULL);
    pp_json_put_str(w, "name", name);
    pp_json_put_str(w, "cat", cat);
    pp_json_put_str(w, "ph", "X");
    pp_json_put_int(w, "pid", pid);
    pp_json_put_int(w, "tid", tid);
    pp_json_put_fixed(w, "ts", 3, ts_us);
    pp_json_put_fixed(w, "dur", 3, dur_us);
}

/* An instant event ("ph": "i") of this scope ("g" global, "t" thread), left open like
 * slice_begin's. */
static void instant_begin(pp_json_writer *w, const char *name, const char *cat, const char *scope,
                          int32_t pid, int32_t tid, double ts_us)
{
    pp_json_object_inline(w, NULL);
    pp_json_put_str(w, "name", name);
    pp_json_put_str(w, "cat", cat);
    pp_json_put_str(w, "ph", "i");
    pp_json_put_str(w, "s", scope);
    pp_json_put_int(w, "pid", pid);
    pp_json_put_int(w, "tid", tid);
    pp_json_put_fixed(w, "ts", 3, ts_us);
}

static void chrome_meta(pp_json_writer *w, const char *what, int32_t pid, int32_t tid,
                        const char *key, const char *name, long long sort)
{
    pp_json_object_inline(w, NULL);
    pp_json_put_str(w, "name", what);
    pp_json_put_str(w, "ph", "M");
    pp_json_put_int(w, "pid", pid);
    pp_json_put_int(w, "tid", tid);
    pp_json_object_inline(w, "args");
    if (name)
        pp_json_put_str(w, key, name);
    else
        pp_json_put_int(w, key, sort);
    pp_json_end(w);
    pp_json_end(w);
}

static void chrome_op(pp_json_writer *w, const pp_analysis *a, const pp_report_window *win,
                      const pp_aop *o, int layer)
{
    char name[96];
    const char *kind = pp_aop_kind_name((pp_aop_kind)o->kind);
    char cat[32];
    if (layer) {
        const char *ln = layer_name(a, o->chunk);
        if (ln)
            snprintf(name, sizeof name, "%s %s", ln, kind);
        else
            snprintf(name, sizeof name, "layer %d %s", o->chunk, kind);
        snprintf(cat, sizeof cat, "layer_%s", kind);
    } else {
        if (o->mb >= 0 && a->v > 1)
            snprintf(name, sizeof name, "%s mb%d c%d", kind, o->mb, o->chunk);
        else if (o->mb >= 0)
            snprintf(name, sizeof name, "%s mb%d", kind, o->mb);
        else
            snprintf(name, sizeof name, "%s", kind);
        snprintf(cat, sizeof cat, "%s", kind);
    }
    slice_begin(w, name, cat, o->rank, o->stage,
                us_at(win, o->t0), o->t1 > o->t0 ? (double)(o->t1 - o->t0) * 1e-3 : 0);
    pp_json_object_inline(w, "args");
    pp_json_put_int(w, "step", o->step);
    if (o->mb >= 0)
        pp_json_put_int(w, "mb", o->mb);
    if (layer) {
        pp_json_put_int(w, "layer", o->chunk);
    } else {
        pp_json_put_int(w, "chunk", o->chunk);
        if (!pp_aop_is_compute((pp_aop_kind)o->kind)) {
            pp_json_put_int(w, "peer", o->peer);
            pp_json_put_uint(w, "bytes", o->bytes);
        }
    }
    pp_json_end(w);
    pp_json_end(w);
}

/* One send -> receive arrow, bound the way Perfetto's JSON importer binds flow events (and
 * chrome://tracing, which it follows): a flow start ("ph":"s") attaches to the innermost slice
 * open on its track at its timestamp, a flow end with "bp":"e" likewise, and the arrow is
 * oriented from the slice that begins first to the one that begins later, whatever the events
 * say. A receive that was posted before the send began (its receiver waited) begins first, so
 * an arrow into it would point receiver -> sender: such a receive gets a child slice,
 * "<act|grad> s->d in flight", from just after the send began to the receive's end (the part of
 * the receive the data was in flight, docs/metrics.md), and the arrow ends there. The start
 * sits 1 ns into the send, the end 1 ns before the receive's end. A receive that ended before
 * its send began (clocks that disagree) gets no arrow: none could point forward. Returns 1 when
 * the arrow was written. */
static int chrome_flow(pp_json_writer *w, const pp_report_window *win, const pp_aop *s,
                       const pp_aop *r, long id)
{
    const double ns = 0.001; /* us */
    double s0 = us_at(win, s->t0), s_dur = s->t1 > s->t0 ? (double)(s->t1 - s->t0) * 1e-3 : 0;
    double r0 = us_at(win, r->t0), r1 = us_at(win, r->t1);
    double from = s0 + (s_dur > 2 * ns ? ns : s_dur * 0.5);
    double bind0 = r0; /* where the slice the arrow ends in begins */
    if (r0 <= from)
        bind0 = from + ns; /* the in-flight child */
    if (r1 - bind0 < 2 * ns)
        return 0;
    char name[64];
    int grad = s->kind == PP_AOP_SEND_GRAD;
    snprintf(name, sizeof name, "%s %d->%d", grad ? "grad" : "act", s->stage, s->peer);
    if (bind0 > r0) {
        char cname[80];
        snprintf(cname, sizeof cname, "%s in flight", name);
        slice_begin(w, cname, "transfer", r->rank, r->stage, bind0, r1 - bind0);
        pp_json_object_inline(w, "args");
        pp_json_put_int(w, "step", r->step);
        if (r->mb >= 0)
            pp_json_put_int(w, "mb", r->mb);
        pp_json_put_uint(w, "bytes", s->bytes);
        pp_json_end(w);
        pp_json_end(w);
    }
    const pp_aop *ends[2] = {s, r};
    const double at[2] = {from, r1 - ns};
    for (int k = 0; k < 2; k++) {
        pp_json_object_inline(w, NULL);
        pp_json_put_str(w, "name", name);
        pp_json_put_str(w, "cat", "transfer");
        pp_json_put_str(w, "ph", k ? "f" : "s");
        if (k)
            pp_json_put_str(w, "bp", "e");
        pp_json_put_int(w, "id", id);
        pp_json_put_int(w, "pid", ends[k]->rank);
        pp_json_put_int(w, "tid", ends[k]->stage);
        pp_json_put_fixed(w, "ts", 3, at[k]);
        pp_json_end(w);
    }
    return 1;
}

/* GPU work of the kept steps (pprof-run --cuda / --nccl): one track per device stream and one
 * for NCCL in the process that captured it, after its stage tracks. */
enum { CHROME_GPU_TID = 1000, CHROME_NCCL_TID = 900 };

static int32_t rank_of_file(const pp_analysis *a, int32_t file)
{
    if (file < 0 || (size_t)file >= a->n_files)
        return file;
    return a->files[file].rank >= 0 ? a->files[file].rank : file;
}

static int32_t gpu_tid(const pp_gpu_span *s)
{
    return s->nccl ? CHROME_NCCL_TID : CHROME_GPU_TID + (int32_t)(s->stream % 100000);
}

static void chrome_gpu(pp_json_writer *w, const pp_analysis *a, const pp_report_window *win)
{
    static const char *const gop[] = {"fwd", "bwd", "opt", "comm"};
    static const char *const nfunc[] = {"?", "Send", "Recv", "collective"};
    const pp_gpu_result *g = &a->gpu;
    /* track names, once per (process, track) */
    for (size_t i = 0; i < g->n_spans; i++) {
        const pp_gpu_span *s = &g->spans[i];
        int32_t pid = rank_of_file(a, s->file);
        int32_t tid = gpu_tid(s);
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = rank_of_file(a, g->spans[j].file) == pid && gpu_tid(&g->spans[j]) == tid;
        if (seen)
            continue;
        char name[64];
        if (s->nccl)
            snprintf(name, sizeof name, "NCCL (GPU)");
        else
            snprintf(name, sizeof name, "GPU %u stream %u", s->device, s->stream);
        chrome_meta(w, "thread_name", pid, tid, "name", name, 0);
        chrome_meta(w, "thread_sort_index", pid, tid, "sort_index", NULL, tid);
    }
    for (size_t i = 0; i < g->n_spans; i++) {
        const pp_gpu_span *s = &g->spans[i];
        char name[64];
        if (s->nccl)
            snprintf(name, sizeof name, "%s%s%d", nfunc[s->kind >= 1 && s->kind <= 3 ? s->kind : 0],
                     s->peer >= 0 ? " peer " : "", s->peer >= 0 ? s->peer : 0);
        else
            snprintf(name, sizeof name, "gpu %s (stage %d)",
                     gop[s->kind >= 0 && s->kind < 4 ? s->kind : 3], s->stage);
        if (s->nccl && s->peer < 0)
            snprintf(name, sizeof name, "%s", nfunc[s->kind >= 1 && s->kind <= 3 ? s->kind : 0]);
        double dur_us = s->end > s->start ? (double)(s->end - s->start) * 1e-3 : 0;
        slice_begin(w, name, s->nccl ? "nccl" : "gpu", rank_of_file(a, s->file), gpu_tid(s),
                    us_at(win, s->start), dur_us);
        pp_json_object_inline(w, "args");
        if (s->nccl) {
            pp_json_put_uint(w, "bytes", s->bytes);
            if (s->end > s->start)
                pp_json_put_real(w, "GBps", (double)s->bytes / (double)(s->end - s->start));
        } else {
            pp_json_put_int(w, "step", s->step);
            pp_json_put_uint(w, "device", s->device);
        }
        pp_json_end(w);
        pp_json_end(w);
    }
}

/* Names and order of the processes and their stage tracks. */
static void chrome_tracks(pp_json_writer *w, const pp_analysis *a, const track *tracks, size_t nt)
{
    for (size_t i = 0; i < nt; i++) {
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= tracks[j].pid == tracks[i].pid;
        if (!seen) {
            const pp_afile *f = file_of(a, tracks[i].pid);
            char name[160];
            if (f && f->rank >= 0)
                snprintf(name, sizeof name, "rank %d (%s pid %u)", f->rank, f->host, f->pid);
            else if (f)
                snprintf(name, sizeof name, "process %d (%s pid %u)", tracks[i].pid, f->host,
                         f->pid);
            else
                snprintf(name, sizeof name, "process %d", tracks[i].pid);
            chrome_meta(w, "process_name", tracks[i].pid, 0, "name", name, 0);
            chrome_meta(w, "process_sort_index", tracks[i].pid, 0, "sort_index", NULL,
                        tracks[i].pid);
        }
        char tname[32];
        snprintf(tname, sizeof tname, "stage %d", tracks[i].stage);
        chrome_meta(w, "thread_name", tracks[i].pid, tracks[i].stage, "name", tname, 0);
        chrome_meta(w, "thread_sort_index", tracks[i].pid, tracks[i].stage, "sort_index", NULL,
                    tracks[i].stage);
    }
}

/* Step starts as global instants, on the first track. */
static void chrome_steps(pp_json_writer *w, const pp_analysis *a, const pp_report_window *win,
                         int32_t pid, int32_t tid)
{
    for (int64_t s = win->lo; s <= win->hi; s++) {
        const pp_astep *sp = pp_report_step_of(a, s);
        if (!sp)
            continue;
        char name[48];
        snprintf(name, sizeof name, "step %lld", (long long)s);
        instant_begin(w, name, "step", "g", pid, tid, (sp->t0_ns - win->origin) * 1e-3);
        pp_json_object_inline(w, "args");
        pp_json_put_real(w, "step_ms", pp_report_ms(sp->step_ns));
        pp_json_put_real(w, "bubble_ratio", sp->bubble_ratio);
        pp_json_end(w);
        pp_json_end(w);
    }
}

/* The generic view's threads: tid CHROME_THREAD_TID + index in a->threads, so that they never
 * meet the stage, NCCL and GPU tracks; named after the OS thread. Processes that hold no
 * pipeline track are named here. */
enum { CHROME_THREAD_TID = 100000 };

static void chrome_threads(pp_json_writer *w, const pp_analysis *a, const track *tracks,
                           size_t nt)
{
    for (size_t i = 0; i < a->n_threads; i++) {
        const pp_athread *t = &a->threads[i];
        if (t->file < 0)
            continue; /* "(other threads)": its ranges are not told apart by thread */
        int32_t pid = rank_of_file(a, t->file);
        int named = 0;
        for (size_t j = 0; j < nt && !named; j++)
            named = tracks[j].pid == pid;
        for (size_t j = 0; j < i && !named; j++)
            named = a->threads[j].file >= 0 && rank_of_file(a, a->threads[j].file) == pid;
        if (!named) {
            const pp_afile *f = &a->files[t->file];
            char name[160];
            if (f->rank >= 0)
                snprintf(name, sizeof name, "rank %d (%s pid %u)", f->rank, f->host, f->pid);
            else
                snprintf(name, sizeof name, "process %d (%s pid %u)", pid, f->host, f->pid);
            chrome_meta(w, "process_name", pid, 0, "name", name, 0);
            chrome_meta(w, "process_sort_index", pid, 0, "sort_index", NULL, pid);
        }
        char tname[96];
        if (t->name[0] && pp_report_tid_is_own(t->tid))
            snprintf(tname, sizeof tname, "%s", t->name);
        else if (t->name[0])
            snprintf(tname, sizeof tname, "%s (tid %u)", t->name, t->tid);
        else
            snprintf(tname, sizeof tname, "thread %u", t->tid);
        int32_t tid = CHROME_THREAD_TID + (int32_t)i;
        chrome_meta(w, "thread_name", pid, tid, "name", tname, 0);
        chrome_meta(w, "thread_sort_index", pid, tid, "sort_index", NULL, tid);
    }
}

typedef struct chrome_generic {
    pp_json_writer *w;
    const pp_analysis *a;
    const pp_report_window *win;
    int clip; /* with a pipeline: only what overlaps the kept steps' window */
    int ranges; /* 1: the generic view's ranges and marks too (0: counters only) */
} chrome_generic;

static void chrome_payload(pp_json_writer *w, uint32_t type, uint64_t bits)
{
    switch (type) {
    case 1: pp_json_put_uint(w, "payload", bits); break;
    case 2: pp_json_put_int(w, "payload", (long long)bits); break;
    case 3: {
        double d;
        memcpy(&d, &bits, sizeof d);
        if (isfinite(d))
            pp_json_put_real(w, "payload", d);
        break;
    }
    case 4: pp_json_put_uint(w, "payload", (uint32_t)bits); break;
    case 5: pp_json_put_int(w, "payload", (int32_t)(uint32_t)bits); break;
    case 6: {
        float f;
        uint32_t b = (uint32_t)bits;
        memcpy(&f, &b, sizeof f);
        if (isfinite(f))
            pp_json_put_real(w, "payload", f);
        break;
    }
    default: break;
    }
}

/* A counter sample as a "C" event of its process: a stage's memory on the counter track
 * "stage S memory (MiB)", one series per purpose; any other counter, heap or the RSS on a track
 * of its own name (and unit). */
static void chrome_counter(const chrome_generic *c, const pp_report_event *e)
{
    if (c->clip && ((double)e->t0 < c->win->origin || (double)e->t0 > c->win->end))
        return;
    pp_json_writer *w = c->w;
    char name[PP_ANALYSIS_NAME_BYTES + 96];
    const char *series = "value";
    double v = e->value;
    if (e->stage >= 0) {
        snprintf(name, sizeof name, "stage %d memory (MiB)", (int)e->stage);
        series = pp_mem_purpose_name(e->purpose) ? pp_mem_purpose_name(e->purpose) : "?";
        v /= 1048576.0;
    } else {
        const char *unit = e->mem_kind == PP_AMEM_COUNTER ? "" : "bytes";
        snprintf(name, sizeof name, "%s%s%s%s%s%s", e->domain, e->domain[0] ? ": " : "",
                 e->name[0] ? e->name : "(no name)", unit[0] ? " (" : "", unit,
                 unit[0] ? ")" : "");
    }
    pp_json_object_inline(w, NULL);
    pp_json_put_str(w, "name", name);
    pp_json_put_str(w, "cat", "memory");
    pp_json_put_str(w, "ph", "C");
    pp_json_put_int(w, "pid", rank_of_file(c->a, e->file));
    /* a counter belongs to its process; the tid (ignored by the viewers) is the stage's track */
    pp_json_put_int(w, "tid", e->stage >= 0 ? e->stage : 0);
    pp_json_put_fixed(w, "ts", 3, us_at(c->win, e->t0));
    pp_json_object_inline(w, "args");
    pp_json_put_real(w, series, v);
    pp_json_end(w);
    pp_json_end(w);
}

static void chrome_generic_event(void *ctx, const pp_report_event *e)
{
    const chrome_generic *c = ctx;
    if (e->counter) {
        chrome_counter(c, e);
        return;
    }
    if (!c->ranges)
        return;
    if (e->thread < 0 || c->a->threads[e->thread].file < 0)
        return;
    if (c->clip && ((double)e->t1 < c->win->origin || (double)e->t0 > c->win->end))
        return;
    pp_json_writer *w = c->w;
    int32_t pid = rank_of_file(c->a, e->file), tid = CHROME_THREAD_TID + e->thread;
    const char *name = e->name[0] ? e->name : "(no name)";
    if (e->mark) {
        instant_begin(w, name, "nvtx", "t", pid, tid, us_at(c->win, e->t0));
    } else {
        slice_begin(w, name, "nvtx", pid, tid, us_at(c->win, e->t0),
                    (double)(e->t1 - e->t0) * 1e-3);
    }
    pp_json_object_inline(w, "args");
    pp_json_put_str(w, "domain", e->domain);
    if (e->category[0])
        pp_json_put_str(w, "category", e->category);
    chrome_payload(w, e->payload_type, e->payload);
    pp_json_put_uint(w, "os_tid", e->tid);
    pp_json_end(w);
    pp_json_end(w);
}

pp_status pp_report_chrome(const pp_analysis *a, FILE *out)
{
    if (!a || !out)
        return PP_ERR(PP_ERR_INVALID, "pp_report_chrome: no analysis or no output");
    pp_report_window win;
    int generic = a->n_ranges || a->n_marks;
    int memory = a->n_mem_stages || a->n_mem_series; /* counter tracks (chrome_counter) */
    pp_status st = PP_OK;
    if (!a->n_ops && (generic || memory)) {
        /* no pipeline timeline: the whole run, from its first range */
        win = (pp_report_window){.lo = 0, .hi = -1, .origin = a->wall_t0_ns,
                                 .end = a->wall_t0_ns + a->wall_ns};
    } else if ((st = pp_report_window_of(a, 0, &win)) != PP_OK) {
        return st;
    }
    size_t cap = 4096;
    track *tracks = malloc(cap * sizeof *tracks);
    long *recv_of = malloc((a->n_ops ? a->n_ops : 1) * sizeof *recv_of);
    if (!tracks || !recv_of) {
        free(tracks);
        free(recv_of);
        return PP_ERR(PP_ERR_NOMEM, "out of memory writing the Chrome trace");
    }
    size_t nt = 0;
    for (size_t i = 0; i < a->n_ops; i++)
        add_track(tracks, &nt, cap, a->ops[i].rank, a->ops[i].stage);
    for (size_t i = 0; i < a->n_layer_ops; i++)
        add_track(tracks, &nt, cap, a->layer_ops[i].rank, a->layer_ops[i].stage);
    if (pp_report_pair_transfers(a, recv_of) < 0) {
        free(tracks);
        free(recv_of);
        return PP_ERR(PP_ERR_NOMEM, "out of memory writing the Chrome trace");
    }
    pp_json_writer w;
    pp_json_writer_init(&w, out, "the Chrome trace", PP_JSON_PRETTY);
    pp_json_object(&w, NULL);
    pp_json_put_str(&w, "displayTimeUnit", "ms");
    pp_json_object_inline(&w, "otherData");
    pp_json_put_str(&w, "generator", "pipeprof pprof-report");
    if (a->n_ops) {
        pp_json_put_int(&w, "first_step", win.lo);
        pp_json_put_int(&w, "last_step", win.hi);
        pp_json_put_str(&w, "time_origin", "start of the first kept step");
    } else {
        pp_json_put_str(&w, "time_origin", "start of the run's first range");
    }
    if (generic) /* where ts 0 is on the traces' clock, to compare with a job's own times */
        pp_json_put_fixed(&w, "time_origin_ns", 0, win.origin);
    pp_json_end(&w);
    pp_json_array(&w, "traceEvents");
    chrome_tracks(&w, a, tracks, nt);
    if (generic)
        chrome_threads(&w, a, tracks, nt);
    if (a->n_ops)
        chrome_steps(&w, a, &win, nt ? tracks[0].pid : 0, nt ? tracks[0].stage : 0);
    for (size_t i = 0; i < a->n_ops; i++)
        chrome_op(&w, a, &win, &a->ops[i], 0);
    for (size_t i = 0; i < a->n_layer_ops; i++)
        chrome_op(&w, a, &win, &a->layer_ops[i], 1);
    long id = 0;
    for (size_t i = 0; i < a->n_ops; i++)
        if (recv_of[i] >= 0 && chrome_flow(&w, &win, &a->ops[i], &a->ops[recv_of[i]], id + 1))
            id++;
    for (size_t i = 0; i < a->n_allreduce_ops; i++) {
        const pp_aop *o = &a->allreduce_ops[i];
        slice_begin(&w, "allreduce", "allreduce", o->rank, o->stage,
                    us_at(&win, o->t0), o->t1 > o->t0 ? (double)(o->t1 - o->t0) * 1e-3 : 0);
        pp_json_object_inline(&w, "args");
        pp_json_put_int(&w, "step", o->step);
        pp_json_put_uint(&w, "bytes", o->bytes);
        pp_json_end(&w);
        pp_json_end(&w);
    }
    chrome_gpu(&w, a, &win);
    if (generic || memory) {
        chrome_generic c = {&w, a, &win, a->n_ops > 0, generic};
        st = pp_report_each_event(a, chrome_generic_event, &c);
    }
    pp_json_end(&w);
    pp_json_end(&w);
    free(tracks);
    free(recv_of);
    pp_status wst = pp_json_writer_finish(&w);
    return st != PP_OK ? st : wst;
}
