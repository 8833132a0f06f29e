/* report.c: pprof-report's outputs from an analysis (pp_report.h): the summary JSON
 * (docs/summary-json.md), the Gantt picture through gnuplot and the Chrome trace
 * (docs/cli/pprof-report.md). Reads only the public pp_analysis struct.
 *
 * The JSON is written by hand rather than through cJSON so that numbers have one stable format
 * (%.10g: golden files and diffs between runs stay readable) and so that a long run's steps
 * never sit in memory twice. */
#define _GNU_SOURCE /* fdopen, pipe2 */
#include "pp_report.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ======================================================================================== */
/* A small JSON writer                                                                        */
/* ======================================================================================== */

enum { JW_DEPTH = 32 };

/* Containers opened "inline" are written on one line, with everything inside them. */
typedef struct jw {
    FILE *f;
    int depth;
    int n[JW_DEPTH];
    int inl[JW_DEPTH];
} jw;

static void jw_init(jw *w, FILE *f)
{
    memset(w, 0, sizeof *w);
    w->f = f;
}

/* Writes s as a JSON string. Bytes that are not valid UTF-8 become U+FFFD, so paths and host
 * names from any filesystem still give valid JSON. */
static void jw_quote(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc((int)c, f);
            p++;
        } else if (c < 0x20) {
            switch (c) {
            case '\n': fputs("\\n", f); break;
            case '\t': fputs("\\t", f); break;
            case '\r': fputs("\\r", f); break;
            default: fprintf(f, "\\u%04x", c); break;
            }
            p++;
        } else if (c < 0x80) {
            fputc((int)c, f);
            p++;
        } else {
            int len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
            int ok = len > 0 && c < 0xf5;
            for (int k = 1; ok && k < len; k++)
                ok = (p[k] & 0xc0) == 0x80;
            if (ok && len == 3) /* no overlong forms, no surrogates */
                ok = !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0);
            if (ok && len == 4)
                ok = !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90);
            if (ok) {
                fwrite(p, 1, (size_t)len, f);
                p += len;
            } else {
                fputs("\\ufffd", f);
                p++;
            }
        }
    }
    fputc('"', f);
}

static void jw_sep(jw *w, const char *key)
{
    if (w->depth > 0) {
        int d = w->depth;
        if (w->n[d]++)
            fputc(',', w->f);
        if (w->inl[d]) {
            if (w->n[d] > 1)
                fputc(' ', w->f);
        } else {
            fprintf(w->f, "\n%*s", 2 * d, "");
        }
    }
    if (key) {
        jw_quote(w->f, key);
        fputs(": ", w->f);
    }
}

static void jw_open(jw *w, const char *key, char c, int inl)
{
    jw_sep(w, key);
    fputc(c, w->f);
    if (w->depth + 1 >= JW_DEPTH)
        return; /* never reached: the formats here nest a few levels */
    w->depth++;
    w->n[w->depth] = 0;
    w->inl[w->depth] = inl || w->inl[w->depth - 1];
}

static void jw_close(jw *w, char c)
{
    if (!w->inl[w->depth] && w->n[w->depth])
        fprintf(w->f, "\n%*s", 2 * (w->depth - 1), "");
    w->depth--;
    fputc(c, w->f);
}

static void jw_num(jw *w, const char *key, double v)
{
    jw_sep(w, key);
    if (isfinite(v))
        fprintf(w->f, "%.10g", v == 0 ? 0.0 : v); /* no "-0" */
    else
        fputs("null", w->f);
}

static void jw_int(jw *w, const char *key, long long v)
{
    jw_sep(w, key);
    fprintf(w->f, "%lld", v);
}

static void jw_u64(jw *w, const char *key, uint64_t v)
{
    jw_sep(w, key);
    fprintf(w->f, "%llu", (unsigned long long)v);
}

static void jw_str(jw *w, const char *key, const char *s)
{
    jw_sep(w, key);
    jw_quote(w->f, s);
}

static void jw_bool(jw *w, const char *key, int v)
{
    jw_sep(w, key);
    fputs(v ? "true" : "false", w->f);
}

static void jw_null(jw *w, const char *key)
{
    jw_sep(w, key);
    fputs("null", w->f);
}

/* A number that is unknown when not positive (throughput, samples per step). */
static void jw_pos_or_null(jw *w, const char *key, double v)
{
    if (v > 0)
        jw_num(w, key, v);
    else
        jw_null(w, key);
}

/* ======================================================================================== */
/* Shared helpers                                                                             */
/* ======================================================================================== */

static double ms(double ns) { return ns * 1e-6; }

/* Order statistics in the analyzer's convention (pp_astats): median and p95 interpolate
 * linearly between the closest ranks. */
static pp_astats stats_of(double *v, size_t n)
{
    pp_astats s;
    memset(&s, 0, sizeof s);
    s.count = n;
    if (!n)
        return s;
    for (size_t i = 1; i < n; i++) { /* insertion sort: a report's step counts are small */
        double x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
    for (size_t i = 0; i < n; i++)
        s.sum += v[i];
    s.mean = s.sum / (double)n;
    s.min = v[0];
    s.max = v[n - 1];
    double q[2] = {0.5, 0.95}, *o[2] = {&s.median, &s.p95};
    for (int k = 0; k < 2; k++) {
        double pos = q[k] * (double)(n - 1);
        size_t i = (size_t)pos;
        double f = pos - (double)i;
        *o[k] = i + 1 < n ? v[i] * (1 - f) + v[i + 1] * f : v[n - 1];
    }
    return s;
}

/* Writes stats as {"count", "mean", "median", "p95", "max", "min"}, scaled (1e-6: ns -> ms);
 * without samples only the count, the rest null. */
static void jw_stats(jw *w, const char *key, const pp_astats *s, double scale)
{
    jw_open(w, key, '{', 1);
    jw_u64(w, "count", s->count);
    const char *names[] = {"mean", "median", "p95", "max", "min"};
    double vals[] = {s->mean, s->median, s->p95, s->max, s->min};
    for (int k = 0; k < 5; k++) {
        if (s->count)
            jw_num(w, names[k], vals[k] * scale);
        else
            jw_null(w, names[k]);
    }
    jw_close(w, '}');
}

/* max / mean of the stages' busy time in one step (0 when nothing was busy). */
static double step_imbalance(const pp_analysis *a, const pp_astep *sp)
{
    double sum = 0, max = 0;
    for (int s = 0; s < a->S; s++) {
        sum += sp->stage[s].busy_ns;
        max = sp->stage[s].busy_ns > max ? sp->stage[s].busy_ns : max;
    }
    return sum > 0 ? max / (sum / a->S) : 0;
}

/* ======================================================================================== */
/* Summary JSON (docs/summary-json.md)                                                        */
/* ======================================================================================== */

static void json_run(jw *w, const pp_analysis *a)
{
    jw_open(w, "run", '{', 0);
    jw_open(w, "files", '[', 0);
    for (size_t i = 0; i < a->n_files; i++) {
        const pp_afile *f = &a->files[i];
        jw_open(w, NULL, '{', 1);
        jw_str(w, "path", f->path);
        jw_str(w, "host", f->host);
        jw_u64(w, "pid", f->pid);
        if (f->rank >= 0)
            jw_int(w, "rank", f->rank);
        else
            jw_null(w, "rank");
        jw_u64(w, "events", f->events);
        jw_u64(w, "dropped", f->dropped);
        jw_u64(w, "filtered", f->filtered);
        jw_bool(w, "footer", f->has_footer);
        jw_open(w, "damage", '{', 1);
        jw_u64(w, "bad_blocks", f->damage.blocks_bad);
        jw_u64(w, "bytes_skipped", f->damage.bytes_skipped);
        jw_bool(w, "truncated", f->damage.truncated);
        jw_str(w, "problem", f->damage.first_problem);
        jw_close(w, '}');
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_u64(w, "events", a->events_total);
    jw_u64(w, "dropped", a->dropped_total);
    jw_u64(w, "ranges_out_of_bounds", a->ranges_out_of_bounds);
    jw_open(w, "warnings", '[', 0);
    const char *p = a->warnings;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len) {
            char line[sizeof a->warnings];
            memcpy(line, p, len);
            line[len] = '\0';
            jw_str(w, NULL, line);
        }
        p += len + (nl ? 1 : 0);
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

static void json_pipeline(jw *w, const pp_analysis *a)
{
    jw_open(w, "pipeline", '{', 0);
    jw_int(w, "stages", a->S);
    if (a->M > 0)
        jw_int(w, "microbatches", a->M);
    else
        jw_null(w, "microbatches");
    jw_int(w, "virtual_stages", a->v > 0 ? a->v : 1);
    if (a->schedule[0])
        jw_str(w, "schedule", a->schedule);
    else
        jw_null(w, "schedule");
    jw_pos_or_null(w, "samples_per_step", a->samples_per_step);
    jw_pos_or_null(w, "tokens_per_step", a->tokens_per_step);
    jw_int(w, "data_parallel", a->dp > 1 ? a->dp : 1);
    jw_int(w, "replica", a->replica);
    jw_close(w, '}');
}

/* How far a step's ranges reach from its start: its window (the union of the stages' step
 * ranges), which the pictures draw; the step time is the pipeline's period instead. */
static double step_extent_ns(const pp_astep *sp)
{
    return sp->window_ns > 0 ? sp->window_ns : sp->step_ns;
}

static void json_steps(jw *w, const pp_analysis *a)
{
    jw_open(w, "analysis", '{', 0);
    jw_u64(w, "steps", a->n_steps);
    jw_int(w, "warmup_skipped", a->warmup_skipped);
    jw_int(w, "first_step", a->n_steps ? a->steps[0].step : 0);
    jw_int(w, "last_step", a->n_steps ? a->steps[a->n_steps - 1].step : 0);
    jw_close(w, '}');
    jw_open(w, "steps", '[', 0);
    double origin = a->n_steps ? a->steps[0].t0_ns : 0;
    for (size_t i = 0; i < a->n_steps; i++) {
        const pp_astep *sp = &a->steps[i];
        jw_open(w, NULL, '{', 0);
        jw_int(w, "step", sp->step);
        jw_num(w, "start_ms", ms(sp->t0_ns - origin));
        jw_num(w, "step_ms", ms(sp->step_ns));
        jw_num(w, "window_ms", ms(step_extent_ns(sp)));
        jw_num(w, "bubble_ratio", sp->bubble_ratio);
        jw_num(w, "imbalance", step_imbalance(a, sp));
        jw_bool(w, "decomposed", sp->decomposed);
        if (sp->culprit >= 0) {
            jw_int(w, "culprit", sp->culprit);
            jw_num(w, "critical_share", sp->critical_share);
        } else {
            jw_null(w, "culprit");
            jw_null(w, "critical_share");
        }
        jw_open(w, "stages", '[', 0);
        for (int s = 0; s < a->S; s++) {
            const pp_stage_step *ss = &sp->stage[s];
            jw_open(w, NULL, '{', 1);
            jw_num(w, "busy_ms", ms(ss->busy_ns));
            jw_num(w, "idle_ms", ms(ss->idle_ns));
            jw_num(w, "bubble_ratio", ss->bubble_ratio);
            /* this step's mean per micro-batch: the samples pprof-check tests stage times on */
            if (ss->fwd_ns > 0)
                jw_num(w, "fwd_ms", ms(ss->fwd_ns));
            else
                jw_null(w, "fwd_ms");
            if (ss->bwd_ns > 0)
                jw_num(w, "bwd_ms", ms(ss->bwd_ns));
            else
                jw_null(w, "bwd_ms");
            if (sp->decomposed) {
                jw_num(w, "fill_drain_ms", ms(ss->fill_drain_ns));
                jw_num(w, "imbalance_ms", ms(ss->imbalance_ns));
                jw_num(w, "transfer_ms", ms(ss->transfer_ns));
            } else {
                jw_null(w, "fill_drain_ms");
                jw_null(w, "imbalance_ms");
                jw_null(w, "transfer_ms");
            }
            jw_num(w, "allreduce_ms", ms(ss->allreduce_ns));
            jw_close(w, '}');
        }
        jw_close(w, ']');
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static pp_status json_aggregates(jw *w, const pp_analysis *a)
{
    size_t n = a->n_steps;
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return PP_ERR(PP_ERR_NOMEM, "out of memory writing the summary of %zu steps", n);
    jw_open(w, "aggregates", '{', 0);
    jw_stats(w, "step_ms", &a->step_ns, 1e-6);
    for (size_t i = 0; i < n; i++)
        v[i] = a->steps[i].bubble_ratio;
    pp_astats st = stats_of(v, n);
    st.mean = a->bubble_ratio; /* the analyzer's number, identical up to rounding */
    jw_stats(w, "bubble_ratio", &st, 1.0);
    for (size_t i = 0; i < n; i++)
        v[i] = step_imbalance(a, &a->steps[i]);
    st = stats_of(v, n);
    jw_stats(w, "imbalance", &st, 1.0);
    jw_pos_or_null(w, "samples_per_s", a->samples_per_s);
    jw_pos_or_null(w, "tokens_per_s", a->tokens_per_s);
    jw_close(w, '}');
    free(v);
    return PP_OK;
}

static void json_stages(jw *w, const pp_analysis *a)
{
    jw_open(w, "stages", '[', 0);
    for (int s = 0; s < a->S; s++) {
        const pp_astage *g = &a->stages[s];
        jw_open(w, NULL, '{', 0);
        jw_int(w, "stage", s);
        jw_stats(w, "fwd_ms", &g->fwd_ns, 1e-6);
        jw_stats(w, "bwd_ms", &g->bwd_ns, 1e-6);
        jw_stats(w, "bwd_input_ms", &g->bwd_input_ns, 1e-6);
        jw_stats(w, "bwd_weight_ms", &g->bwd_weight_ns, 1e-6);
        jw_stats(w, "opt_ms", &g->opt_ns, 1e-6);
        jw_num(w, "busy_ms", ms(g->busy_ns));
        jw_num(w, "idle_ms", ms(g->idle_ns));
        jw_num(w, "bubble_ratio", g->bubble_ratio);
        jw_num(w, "fill_drain_ms", ms(g->fill_drain_ns));
        jw_num(w, "imbalance_ms", ms(g->imbalance_ns));
        jw_num(w, "transfer_ms", ms(g->transfer_ns));
        jw_num(w, "allreduce_mean_ms", ms(g->allreduce_mean_ns));
        jw_stats(w, "allreduce_ms", &g->allreduce_ns, 1e-6);
        jw_num(w, "allreduce_bytes", g->allreduce_bytes);
        jw_pos_or_null(w, "allreduce_busbw_GBps", g->allreduce_busbw_GBps);
        if (g->imbalance_culprit >= 0)
            jw_int(w, "imbalance_culprit", g->imbalance_culprit);
        else
            jw_null(w, "imbalance_culprit");
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

static void json_links_layers(jw *w, const pp_analysis *a)
{
    jw_open(w, "links", '[', 0);
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        jw_open(w, NULL, '{', 1);
        jw_int(w, "src", l->src);
        jw_int(w, "dst", l->dst);
        jw_str(w, "kind", l->grad ? "grad" : "act");
        jw_u64(w, "messages", l->messages);
        jw_u64(w, "bytes", l->bytes);
        jw_u64(w, "timed", l->timed);
        if (l->timed && l->bandwidth_GBps > 0)
            jw_num(w, "bandwidth_GBps", l->bandwidth_GBps);
        else
            jw_null(w, "bandwidth_GBps");
        jw_stats(w, "latency_us", &l->latency_ns, 1e-3);
        jw_num(w, "transfer_ms", ms(l->transfer_ns));
        jw_num(w, "wait_ms", ms(l->wait_ns));
        jw_num(w, "send_ms", ms(l->send_ns));
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_open(w, "layers", '[', 0);
    for (size_t i = 0; i < a->n_layers; i++) {
        const pp_alayer *l = &a->layers[i];
        jw_open(w, NULL, '{', 0);
        jw_int(w, "index", l->layer);
        jw_str(w, "name", l->name);
        jw_stats(w, "fwd_ms", &l->fwd_ns, 1e-6);
        jw_stats(w, "bwd_ms", &l->bwd_ns, 1e-6);
        jw_stats(w, "bwd_weight_ms", &l->bwd_weight_ns, 1e-6);
        jw_close(w, '}');
    }
    jw_close(w, ']');
}

/* GPU time (docs/summary-json.md "gpu"): null without GPU records. */
static void json_gpu(jw *w, const pp_analysis *a)
{
    const pp_gpu_result *g = &a->gpu;
    if (!g->present) {
        jw_null(w, "gpu");
        return;
    }
    jw_open(w, "gpu", '{', 0);
    jw_u64(w, "records", g->records);
    jw_u64(w, "projected", g->projected);
    jw_u64(w, "unattributed", g->unattributed);
    jw_u64(w, "late", g->late);
    jw_num(w, "step_ms", ms(g->step_ns));
    jw_num(w, "projected_ms", ms(g->projected_ns));
    jw_num(w, "work_ms", ms(g->work_ns));
    jw_num(w, "device_busy_ms", ms(g->device_busy_ns));
    jw_open(w, "stages", '[', 0);
    for (int s = 0; s < g->S; s++) {
        const pp_gpu_stage *x = &g->stages[s];
        jw_open(w, NULL, '{', 1);
        jw_int(w, "stage", s);
        jw_num(w, "fwd_ms", ms(x->fwd_median_ns));
        jw_num(w, "bwd_ms", ms(x->bwd_median_ns));
        jw_num(w, "busy_ms", ms(x->busy_ns));
        jw_num(w, "bubble_ratio", x->bubble_ratio);
        jw_num(w, "launch_lag_ms", ms(x->launch_lag_ns));
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_open(w, "devices", '[', 0);
    for (size_t i = 0; i < g->n_devices; i++) {
        jw_open(w, NULL, '{', 1);
        jw_u64(w, "device", g->devices[i].device);
        jw_num(w, "busy_ms", ms(g->devices[i].busy_ns));
        jw_num(w, "span_ms", ms(g->devices[i].span_ns));
        jw_num(w, "utilisation", g->devices[i].utilisation);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_open(w, "nccl_links", '[', 0);
    for (size_t i = 0; i < g->n_links; i++) {
        const pp_gpu_link *l = &g->links[i];
        jw_open(w, NULL, '{', 1);
        jw_int(w, "src", l->src);
        jw_int(w, "dst", l->dst);
        jw_u64(w, "messages", l->messages);
        jw_u64(w, "bytes", l->bytes);
        jw_u64(w, "timed", l->timed);
        jw_pos_or_null(w, "algbw_GBps", l->algbw_GBps);
        jw_pos_or_null(w, "busbw_GBps", l->busbw_GBps);
        jw_close(w, '}');
    }
    jw_close(w, ']');
    jw_close(w, '}');
}

pp_status pp_report_json(const pp_analysis *a, FILE *out)
{
    if (!a || !out)
        return PP_ERR(PP_ERR_INVALID, "pp_report_json: no analysis or no output");
    jw w;
    jw_init(&w, out);
    jw_open(&w, NULL, '{', 0);
    jw_int(&w, "summary_version", PP_SUMMARY_VERSION);
    jw_str(&w, "generator", "pipeprof pprof-report");
    json_run(&w, a);
    json_pipeline(&w, a);
    json_steps(&w, a);
    pp_status st = json_aggregates(&w, a);
    if (st != PP_OK)
        return st;
    json_stages(&w, a);
    json_links_layers(&w, a);
    json_gpu(&w, a);
    jw_close(&w, '}');
    fputc('\n', out);
    if (fflush(out) != 0 || ferror(out))
        return PP_ERR(PP_ERR_IO, "writing the summary JSON: %s", strerror(errno));
    return PP_OK;
}

/* ======================================================================================== */
/* Send/receive pairs                                                                         */
/* ======================================================================================== */

typedef struct xfer_key {
    int64_t step;
    int32_t src, dst;
    int grad;
    uint64_t t0, t1;
    long index;
} xfer_key;

static int cmp_xfer(const void *pa, const void *pb)
{
    const xfer_key *x = pa, *y = pb;
    if (x->step != y->step)
        return x->step < y->step ? -1 : 1;
    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst)
        return x->dst < y->dst ? -1 : 1;
    if (x->grad != y->grad)
        return x->grad - y->grad;
    if (x->t0 != y->t0)
        return x->t0 < y->t0 ? -1 : 1;
    if (x->t1 != y->t1)
        return x->t1 < y->t1 ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Same link and step: the fields the FIFO order is counted within. */
static int same_queue(const xfer_key *x, const xfer_key *y)
{
    return x->step == y->step && x->src == y->src && x->dst == y->dst && x->grad == y->grad;
}

long pp_report_pair_transfers(const pp_analysis *a, long *recv_of)
{
    size_t n = a->n_ops, ns = 0, nr = 0;
    xfer_key *sends = malloc((n ? n : 1) * sizeof *sends);
    xfer_key *recvs = malloc((n ? n : 1) * sizeof *recvs);
    if (!sends || !recvs) {
        free(sends);
        free(recvs);
        PP_ERR(PP_ERR_NOMEM, "out of memory pairing %zu transfers", n);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const pp_aop *o = &a->ops[i];
        recv_of[i] = -1;
        int send = o->kind == PP_AOP_SEND_ACT || o->kind == PP_AOP_SEND_GRAD;
        int recv = o->kind == PP_AOP_RECV_ACT || o->kind == PP_AOP_RECV_GRAD;
        if (!send && !recv)
            continue;
        xfer_key k = {o->step,
                      send ? o->stage : o->peer,
                      send ? o->peer : o->stage,
                      o->kind == PP_AOP_SEND_GRAD || o->kind == PP_AOP_RECV_GRAD,
                      o->t0,
                      o->t1,
                      (long)i};
        if (send)
            sends[ns++] = k;
        else
            recvs[nr++] = k;
    }
    qsort(sends, ns, sizeof *sends, cmp_xfer);
    qsort(recvs, nr, sizeof *recvs, cmp_xfer);
    long pairs = 0;
    size_t i = 0, j = 0;
    while (i < ns && j < nr) {
        if (same_queue(&sends[i], &recvs[j])) {
            recv_of[sends[i].index] = recvs[j].index;
            pairs++;
            i++;
            j++;
            continue;
        }
        /* different queues: advance the side whose queue sorts first (time ignored) */
        xfer_key s = sends[i], r = recvs[j];
        s.t0 = r.t0 = s.t1 = r.t1 = 0;
        s.index = r.index = 0;
        if (cmp_xfer(&s, &r) < 0)
            i++;
        else
            j++;
    }
    free(sends);
    free(recvs);
    return pairs;
}

/* ======================================================================================== */
/* Kept timeline: which steps are drawn and where time starts                                 */
/* ======================================================================================== */

typedef struct window {
    int64_t lo, hi;  /* steps drawn */
    double origin;   /* ns on the common clock: time 0 of the picture */
    double end;      /* ns: end of the last drawn step (or op) */
} window;

static const pp_astep *step_of(const pp_analysis *a, int64_t step)
{
    for (size_t i = 0; i < a->n_steps; i++)
        if (a->steps[i].step == step)
            return &a->steps[i];
    return NULL;
}

/* The kept steps, at most max_steps of them (0: no cap). Fails when nothing was kept. */
static pp_status window_of(const pp_analysis *a, int64_t max_steps, window *w)
{
    if (!a->n_ops)
        return PP_ERR(PP_ERR_INVALID, "no timeline kept in the analysis (steps %lld..%lld): "
                                      "nothing to draw",
                      (long long)a->kept_lo, (long long)a->kept_hi);
    w->lo = a->kept_lo;
    w->hi = a->kept_hi;
    if (max_steps > 0 && w->hi - w->lo + 1 > max_steps)
        w->hi = w->lo + max_steps - 1;
    double first_op = INFINITY;
    w->end = 0;
    for (size_t i = 0; i < a->n_ops; i++) {
        const pp_aop *o = &a->ops[i];
        if (o->step < w->lo || o->step > w->hi)
            continue;
        first_op = (double)o->t0 < first_op ? (double)o->t0 : first_op;
        w->end = (double)o->t1 > w->end ? (double)o->t1 : w->end;
    }
    const pp_astep *s0 = step_of(a, w->lo);
    w->origin = s0 && s0->t0_ns <= first_op ? s0->t0_ns : first_op;
    for (int64_t s = w->lo; s <= w->hi; s++) {
        const pp_astep *sp = step_of(a, s);
        if (sp && sp->t0_ns + step_extent_ns(sp) > w->end)
            w->end = sp->t0_ns + step_extent_ns(sp);
    }
    if (!isfinite(w->origin))
        return PP_ERR(PP_ERR_INVALID, "no timeline kept for steps %lld..%lld: nothing to draw",
                      (long long)w->lo, (long long)w->hi);
    return PP_OK;
}

/* ======================================================================================== */
/* Gantt                                                                                      */
/* ======================================================================================== */

static int drawn_kind(uint8_t k) { return k < PP_AOP_COUNT; }

static pp_status gantt_data(const pp_analysis *a, const window *win, FILE *out)
{
    fprintf(out, "# pipeprof Gantt data (pprof-report): steps %lld..%lld, times in ms from the "
                 "start of step %lld\n# stage start_ms end_ms kind mb chunk\n",
            (long long)win->lo, (long long)win->hi, (long long)win->lo);
    for (size_t i = 0; i < a->n_ops; i++) {
        const pp_aop *o = &a->ops[i];
        if (o->step < win->lo || o->step > win->hi || !drawn_kind(o->kind))
            continue;
        fprintf(out, "%d %.6f %.6f %s %d %d\n", o->stage, ms((double)o->t0 - win->origin),
                ms((double)o->t1 - win->origin), pp_aop_kind_name((pp_aop_kind)o->kind), o->mb,
                o->chunk);
    }
    for (size_t i = 0; i < a->n_allreduce_ops; i++) {
        const pp_aop *o = &a->allreduce_ops[i];
        if (o->step < win->lo || o->step > win->hi)
            continue;
        fprintf(out, "%d %.6f %.6f allreduce -1 -1\n", o->stage, ms((double)o->t0 - win->origin),
                ms((double)o->t1 - win->origin));
    }
    /* GPU capture: the stage's GPU work, and NCCL's GPU spans on the sender's row (its
     * communicator rank is its stage in a pipeline communicator) */
    for (size_t i = 0; i < a->gpu.n_spans; i++) {
        const pp_gpu_span *sp = &a->gpu.spans[i];
        int row = sp->nccl ? sp->rank : sp->stage;
        if (row < 0 || row >= a->S || (!sp->nccl && (sp->step < win->lo || sp->step > win->hi)))
            continue;
        fprintf(out, "%d %.6f %.6f %s -1 -1\n", row, ms((double)sp->start - win->origin),
                ms((double)sp->end - win->origin), sp->nccl ? "nccl" : "gpu");
    }
    if (fflush(out) != 0 || ferror(out))
        return PP_ERR(PP_ERR_IO, "writing the Gantt data: %s", strerror(errno));
    return PP_OK;
}

pp_status pp_report_gantt_data(const pp_analysis *a, FILE *out)
{
    window win;
    pp_status st = window_of(a, PP_REPORT_GANTT_MAX_STEPS, &win);
    return st != PP_OK ? st : gantt_data(a, &win, out);
}

/* path with its extension (after the last '.' of the last component) replaced by ext. */
static pp_status swap_ext(const char *path, const char *ext, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(path, '.');
    size_t stem = dot && dot > (slash ? slash : path) && dot[1] != '/' ? (size_t)(dot - path)
                                                                       : strlen(path);
    if ((size_t)snprintf(out, cap, "%.*s%s", (int)stem, path, ext) >= cap)
        return PP_ERR(PP_ERR_INVALID, "path too long: '%s'", path);
    return PP_OK;
}

/* gnuplot's single-quoted strings take everything literally but '' for a quote. */
static void gp_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

/* "name='value'" for gnuplot -e, value quoted as above; 0 when it does not fit. */
static int gp_assign(char *out, size_t cap, const char *name, const char *value)
{
    size_t n = (size_t)snprintf(out, cap, "%s='", name);
    for (; n < cap && *value; value++) {
        if (*value == '\'' && n + 1 < cap)
            out[n++] = '\'';
        out[n++] = *value;
    }
    if (n + 2 > cap)
        return 0;
    out[n++] = '\'';
    out[n] = '\0';
    return 1;
}

typedef struct gantt_kind {
    const char *kinds[2]; /* data-file kinds drawn by this plot element */
    const char *title;
    const char *colour;
    int transfer;         /* 1: a thin bar at the bottom of the row; 2: a thin bar at its top */
} gantt_kind;

static const gantt_kind k_gantt_kinds[] = {
    {{"fwd", NULL}, "forward", "#4c72b0", 0},
    {{"bwd", NULL}, "backward", "#dd8452", 0},
    {{"bwd_input", NULL}, "backward (input)", "#c44e52", 0},
    {{"bwd_weight", NULL}, "backward (weight)", "#8172b3", 0},
    {{"opt_step", NULL}, "optimizer", "#55a868", 0},
    {{"send_act", "send_grad"}, "send", "#3a3a3a", 1},
    {{"recv_act", "recv_grad"}, "recv (waiting)", "#b5a36a", 1},
    {{"allreduce", NULL}, "gradient all-reduce (dp)", "#937860", 0},
    {{"gpu", NULL}, "GPU work (--cuda)", "#2ca02c", 2},
    {{"nccl", NULL}, "NCCL on the GPU (--nccl)", "#17becf", 1},
};

static int kind_present(const pp_analysis *a, const window *win, const gantt_kind *g)
{
    if (strcmp(g->kinds[0], "allreduce") == 0)
        return a->n_allreduce_ops > 0;
    for (size_t i = 0; i < a->gpu.n_spans; i++)
        if (strcmp(g->kinds[0], a->gpu.spans[i].nccl ? "nccl" : "gpu") == 0)
            return 1;
    for (size_t i = 0; i < a->n_ops; i++) {
        const pp_aop *o = &a->ops[i];
        if (o->step < win->lo || o->step > win->hi)
            continue;
        const char *name = pp_aop_kind_name((pp_aop_kind)o->kind);
        for (int k = 0; k < 2 && g->kinds[k]; k++)
            if (strcmp(name, g->kinds[k]) == 0)
                return 1;
    }
    return 0;
}

static pp_status gantt_script(const pp_analysis *a, const window *win, FILE *f, int svg,
                              const char *out_path, const char *data_path)
{
    int S = a->S > 0 ? a->S : 1;
    int width = 1200;
    int height = 150 + 46 * S;
    height = height < 300 ? 300 : height > 2000 ? 2000 : height;
    double span_ms = ms(win->end - win->origin);
    if (span_ms <= 0)
        span_ms = 1;
    double xmax = span_ms * 1.01;
    /* about 940 px of plot width (the key takes the rest); ~6.5 px a digit at 9 pt */
    double ms_per_px = xmax / 940.0;
    fprintf(f, "# pipeprof Gantt (pprof-report): steps %lld..%lld. Data columns: stage "
               "start_ms end_ms kind mb chunk\n",
            (long long)win->lo, (long long)win->hi);
    if (svg)
        fprintf(f, "set terminal svg size %d,%d dynamic noenhanced font 'sans,10' background "
                   "'white'\n",
                width, height);
    else
        fprintf(f, "set terminal pngcairo size %d,%d noenhanced font 'sans,9'\n", width, height);
    /* pprof-report hands gnuplot a temporary name (-e outfile=...); run by hand, the script
     * draws out_path itself. */
    fputs("if (!exists('outfile')) outfile = ", f);
    gp_quote(f, out_path);
    fputs("\nset output outfile\ndata = ", f);
    gp_quote(f, data_path);
    fputc('\n', f);
    char title[256];
    int n = snprintf(title, sizeof title, "S=%d", a->S);
    if (a->M > 0)
        n += snprintf(title + n, sizeof title - (size_t)n, ", M=%d", a->M);
    if (a->v > 1 && n < (int)sizeof title)
        n += snprintf(title + n, sizeof title - (size_t)n, ", v=%d", a->v);
    if (a->schedule[0] && n < (int)sizeof title)
        n += snprintf(title + n, sizeof title - (size_t)n, ", %s", a->schedule);
    if (n < (int)sizeof title)
        snprintf(title + n, sizeof title - (size_t)n, ": step %.1f ms, bubble %.1f%%",
                 ms(a->step_ns.mean), 100 * a->bubble_ratio);
    fputs("set title ", f);
    gp_quote(f, title);
    fputs(" font ',11'\n", f);
    if (win->hi > win->lo)
        fprintf(f, "set xlabel 'time (ms) from the start of step %lld (steps %lld..%lld shown; "
                   "title: means over %zu analyzed steps)'\n",
                (long long)win->lo, (long long)win->lo, (long long)win->hi, a->n_steps);
    else
        fprintf(f, "set xlabel 'time (ms) from the start of step %lld (step %lld shown; title: "
                   "means over %zu analyzed steps)'\n",
                (long long)win->lo, (long long)win->lo, a->n_steps);
    fprintf(f, "set xrange [0:%.6f]\nset yrange [%d.5:-0.5]\n", xmax, S - 1);
    fputs("set ytics (", f);
    int every = S > 32 ? (S + 31) / 32 : 1; /* at most ~32 tick labels */
    for (int s = 0, first = 1; s < S; s += every, first = 0)
        fprintf(f, "%s'stage %d' %d", first ? "" : ", ", s, s);
    fputs(") scale 0\nset xtics out nomirror\nset mxtics\nset border 3\n", f);
    fputs("set key outside right top vertical Left reverse samplen 2 spacing 1.2\n", f);
    fputs("set style fill solid 1.0 border rgb 'white'\n", f);
    /* idle: the light background a row shows where no bar covers it */
    for (int s = 0; s < S; s++)
        fprintf(f, "set object %d rect from 0,%.2f to %.6f,%.2f fc rgb '#ececec' fs solid 1.0 "
                   "noborder behind\n",
                s + 1, s - 0.42, span_ms, s + 0.42);
    /* step boundaries */
    for (int64_t st = win->lo; st <= win->hi; st++) {
        const pp_astep *sp = step_of(a, st);
        if (!sp)
            continue;
        double x0 = ms(sp->t0_ns - win->origin),
               x1 = ms(sp->t0_ns + step_extent_ns(sp) - win->origin);
        fprintf(f, "set arrow from %.6f, graph 0 to %.6f, graph 1 nohead dt 2 lw 1.2 lc rgb "
                   "'#202020' front\n",
                x0, x0);
        if (st == win->hi)
            fprintf(f, "set arrow from %.6f, graph 0 to %.6f, graph 1 nohead dt 2 lw 1.2 lc "
                       "rgb '#202020' front\n",
                    x1, x1);
        fprintf(f, "set label 'step %lld' at %.6f, graph 1 offset 0,0.6 font ',8' front\n",
                (long long)st, x0);
    }
    fprintf(f, "V = %d\nCW = %.6f\nPAD = %.6f\n", a->v, 6.5 * ms_per_px, 5.0 * ms_per_px);
    fputs("lab(mb, ch) = V > 1 ? sprintf('%d.%d', mb, ch) : sprintf('%d', mb)\n"
          "fits(l, w) = w >= strlen(l) * CW + PAD\n"
          "iscomp(k) = k eq 'fwd' || k eq 'bwd' || k eq 'bwd_input' || k eq 'bwd_weight'\n",
          f);
    fputs("plot \\\n", f);
    int first = 1;
    for (size_t g = 0; g < sizeof k_gantt_kinds / sizeof k_gantt_kinds[0]; g++) {
        const gantt_kind *k = &k_gantt_kinds[g];
        if (!kind_present(a, win, k))
            continue;
        char cond[96];
        if (k->kinds[1])
            snprintf(cond, sizeof cond, "(strcol(4) eq '%s' || strcol(4) eq '%s')", k->kinds[0],
                     k->kinds[1]);
        else
            snprintf(cond, sizeof cond, "(strcol(4) eq '%s')", k->kinds[0]);
        double y0 = k->transfer == 1 ? 0.20 : k->transfer == 2 ? -0.50 : -0.42;
        double y1 = k->transfer == 1 ? 0.42 : k->transfer == 2 ? -0.43 : 0.16;
        fprintf(f, "%s  data using (%s ? ($2+$3)/2 : NaN):1:2:3:($1%+.2f):($1%+.2f) with "
                   "boxxyerror fc rgb '%s' title '%s'",
                first ? "" : ", \\\n", cond, y0, y1, k->colour, k->title);
        first = 0;
    }
    if (first)
        return PP_ERR(PP_ERR_INVALID, "no ops to draw in steps %lld..%lld", (long long)win->lo,
                      (long long)win->hi);
    fputs(", \\\n  keyentry with boxes fc rgb '#ececec' title 'idle'", f);
    /* micro-batch ids where they fit */
    fputs(", \\\n  data using (iscomp(strcol(4)) && fits(lab($5,$6), $3-$2) ? ($2+$3)/2 : NaN)"
          ":($1-0.13):(lab($5,$6)) with labels tc rgb 'white' font ',8' notitle\n",
          f);
    fputs("set output\n", f);
    if (fflush(f) != 0 || ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the gnuplot script: %s", strerror(errno));
    return PP_OK;
}

/* Runs `gnuplot script` (PATH search, no shell) and waits. The child reports a failed exec
 * through a close-on-exec pipe, so "not installed" is told apart from "gnuplot failed". */
static pp_status run_gnuplot(const char *script, const char *output)
{
    char assign[8300];
    if (!gp_assign(assign, sizeof assign, "outfile", output))
        return PP_ERR(PP_ERR_INVALID, "path too long: '%s'", output);
    int errp[2], outp[2];
    if (pipe2(errp, O_CLOEXEC) != 0)
        return PP_ERR(PP_ERR_RUNTIME, "pipe: %s", strerror(errno));
    if (pipe2(outp, O_CLOEXEC) != 0) {
        close(errp[0]);
        close(errp[1]);
        return PP_ERR(PP_ERR_RUNTIME, "pipe: %s", strerror(errno));
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(errp[0]);
        close(errp[1]);
        close(outp[0]);
        close(outp[1]);
        return PP_ERR(PP_ERR_RUNTIME, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        /* gnuplot's messages go to the pipe (the parent keeps the first lines for the error) */
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        dup2(outp[1], 2);
        char *argv[] = {(char *)"gnuplot", (char *)"-e", assign, (char *)script, NULL};
        execvp(argv[0], argv);
        int e = errno;
        ssize_t w = write(errp[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(errp[1]);
    close(outp[1]);
    int exec_errno = 0;
    ssize_t got;
    do
        got = read(errp[0], &exec_errno, sizeof exec_errno);
    while (got < 0 && errno == EINTR);
    close(errp[0]);
    char msg[1024];
    size_t len = 0;
    for (;;) {
        char buf[4096];
        ssize_t r = read(outp[0], buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        size_t take = (size_t)r < sizeof msg - 1 - len ? (size_t)r : sizeof msg - 1 - len;
        memcpy(msg + len, buf, take);
        len += take;
    }
    msg[len] = '\0';
    close(outp[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return PP_ERR(PP_ERR_RUNTIME, "waiting for gnuplot: %s", strerror(errno));
    }
    if (got == (ssize_t)sizeof exec_errno) {
        if (exec_errno == ENOENT)
            return PP_ERR(PP_ERR_RUNTIME, "gnuplot not found (install gnuplot-nox)");
        return PP_ERR(PP_ERR_RUNTIME, "cannot run gnuplot: %s", strerror(exec_errno));
    }
    /* Keep gnuplot's own words, without blank lines, as the error's detail. */
    for (char *p = msg; *p; p++)
        if (*p == '\n')
            *p = ' ';
    if (WIFSIGNALED(status))
        return PP_ERR(PP_ERR_RUNTIME, "gnuplot killed by signal %d: %s", WTERMSIG(status), msg);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return PP_ERR(PP_ERR_RUNTIME, "gnuplot failed (exit status %d): %s",
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1, msg);
    return PP_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

static pp_status write_with(const char *path, const char *what,
                            pp_status (*fn)(const pp_analysis *, const window *, FILE *, int,
                                            const char *, const char *),
                            const pp_analysis *a, const window *win, int svg, const char *p1,
                            const char *p2)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return PP_ERR(PP_ERR_IO, "cannot write the %s '%s': %s", what, path, strerror(errno));
    pp_status st = fn(a, win, f, svg, p1, p2);
    if (fclose(f) != 0 && st == PP_OK)
        st = PP_ERR(PP_ERR_IO, "writing the %s '%s': %s", what, path, strerror(errno));
    return st;
}

static pp_status data_fn(const pp_analysis *a, const window *win, FILE *f, int svg,
                         const char *p1, const char *p2)
{
    (void)svg;
    (void)p1;
    (void)p2;
    return gantt_data(a, win, f);
}

pp_status pp_report_gantt(const pp_analysis *a, const char *out_path, const char *data_path)
{
    if (!a || !out_path || !out_path[0])
        return PP_ERR(PP_ERR_INVALID, "Gantt: no analysis or no output path");
    int svg = ends_with(out_path, ".svg");
    if (!svg && !ends_with(out_path, ".png")) {
        const char *slash = strrchr(out_path, '/');
        const char *dot = strrchr(out_path, '.');
        if (dot && (!slash || dot > slash))
            return PP_ERR(PP_ERR_INVALID, "Gantt '%s': unsupported extension '%s' (use .png or "
                                          ".svg)",
                          out_path, dot);
        return PP_ERR(PP_ERR_INVALID, "Gantt '%s': no extension (use .png or .svg)", out_path);
    }
    for (const char *p = out_path; *p; p++)
        if (*p == '\n' || *p == '\r')
            return PP_ERR(PP_ERR_INVALID, "Gantt: a line break in the output path");
    char dat[4096], gp[4096], tmp[4096];
    pp_status st = PP_OK;
    if (data_path) {
        if ((size_t)snprintf(dat, sizeof dat, "%s", data_path) >= sizeof dat)
            return PP_ERR(PP_ERR_INVALID, "path too long: '%s'", data_path);
    } else if ((st = swap_ext(out_path, ".dat", dat, sizeof dat)) != PP_OK) {
        return st;
    }
    for (const char *p = dat; *p; p++)
        if (*p == '\n' || *p == '\r')
            return PP_ERR(PP_ERR_INVALID, "Gantt: a line break in the data path");
    if ((st = swap_ext(dat, ".gp", gp, sizeof gp)) != PP_OK)
        return st;
    if (strcmp(gp, dat) == 0 || strcmp(gp, out_path) == 0) {
        if (strlen(dat) + 4 > sizeof gp)
            return PP_ERR(PP_ERR_INVALID, "path too long: '%s'", dat);
        snprintf(gp, sizeof gp, "%.4090s.gp", dat);
    }
    if (strcmp(dat, out_path) == 0)
        return PP_ERR(PP_ERR_INVALID, "Gantt: the data file would overwrite the picture '%s'",
                      out_path);
    /* gnuplot draws into a temporary file renamed over out_path once complete, so a failed
     * run never leaves a half picture (or an old one that looks new). */
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%ld", out_path, (long)getpid()) >= sizeof tmp)
        return PP_ERR(PP_ERR_INVALID, "path too long: '%s'", out_path);
    window win;
    if ((st = window_of(a, PP_REPORT_GANTT_MAX_STEPS, &win)) != PP_OK)
        return st;
    if ((st = write_with(dat, "Gantt data", data_fn, a, &win, svg, NULL, NULL)) != PP_OK)
        return st;
    if ((st = write_with(gp, "gnuplot script", gantt_script, a, &win, svg, out_path, dat)) !=
        PP_OK)
        return st;
    unlink(tmp);
    if ((st = run_gnuplot(gp, tmp)) != PP_OK) {
        unlink(tmp);
        return pp_error_wrap(st, "Gantt '%s'", out_path);
    }
    struct stat sb;
    if (stat(tmp, &sb) != 0 || sb.st_size == 0) {
        unlink(tmp);
        return PP_ERR(PP_ERR_RUNTIME, "Gantt '%s': gnuplot exited without writing the picture "
                                      "(script %s)",
                      out_path, gp);
    }
    if (rename(tmp, out_path) != 0) {
        int e = errno;
        unlink(tmp);
        return PP_ERR(PP_ERR_IO, "cannot write the Gantt '%s': %s", out_path, strerror(e));
    }
    return PP_OK;
}

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

static double us_at(const window *w, uint64_t t) { return ((double)t - w->origin) * 1e-3; }

static void chrome_meta(jw *w, const char *what, int32_t pid, int32_t tid, const char *key,
                        const char *name, long long sort)
{
    jw_open(w, NULL, '{', 1);
    jw_str(w, "name", what);
    jw_str(w, "ph", "M");
    jw_int(w, "pid", pid);
    jw_int(w, "tid", tid);
    jw_open(w, "args", '{', 1);
    if (name)
        jw_str(w, key, name);
    else
        jw_int(w, key, sort);
    jw_close(w, '}');
    jw_close(w, '}');
}

/* ts/dur printed in microseconds with nanosecond digits. */
static void jw_us(jw *w, const char *key, double us)
{
    jw_sep(w, key);
    fprintf(w->f, "%.3f", us == 0 ? 0.0 : us);
}

static void chrome_op(jw *w, const pp_analysis *a, const window *win, const pp_aop *o, int layer)
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
    jw_open(w, NULL, '{', 1);
    jw_str(w, "name", name);
    jw_str(w, "cat", cat);
    jw_str(w, "ph", "X");
    jw_int(w, "pid", o->rank);
    jw_int(w, "tid", o->stage);
    jw_us(w, "ts", us_at(win, o->t0));
    jw_us(w, "dur", o->t1 > o->t0 ? (double)(o->t1 - o->t0) * 1e-3 : 0);
    jw_open(w, "args", '{', 1);
    jw_int(w, "step", o->step);
    if (o->mb >= 0)
        jw_int(w, "mb", o->mb);
    if (layer) {
        jw_int(w, "layer", o->chunk);
    } else {
        jw_int(w, "chunk", o->chunk);
        if (!pp_aop_is_compute((pp_aop_kind)o->kind)) {
            jw_int(w, "peer", o->peer);
            jw_u64(w, "bytes", o->bytes);
        }
    }
    jw_close(w, '}');
    jw_close(w, '}');
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
static int chrome_flow(jw *w, const window *win, const pp_aop *s, const pp_aop *r, long id)
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
        jw_open(w, NULL, '{', 1);
        jw_str(w, "name", cname);
        jw_str(w, "cat", "transfer");
        jw_str(w, "ph", "X");
        jw_int(w, "pid", r->rank);
        jw_int(w, "tid", r->stage);
        jw_us(w, "ts", bind0);
        jw_us(w, "dur", r1 - bind0);
        jw_open(w, "args", '{', 1);
        jw_int(w, "step", r->step);
        if (r->mb >= 0)
            jw_int(w, "mb", r->mb);
        jw_u64(w, "bytes", s->bytes);
        jw_close(w, '}');
        jw_close(w, '}');
    }
    const pp_aop *ends[2] = {s, r};
    const double at[2] = {from, r1 - ns};
    for (int k = 0; k < 2; k++) {
        jw_open(w, NULL, '{', 1);
        jw_str(w, "name", name);
        jw_str(w, "cat", "transfer");
        jw_str(w, "ph", k ? "f" : "s");
        if (k)
            jw_str(w, "bp", "e");
        jw_int(w, "id", id);
        jw_int(w, "pid", ends[k]->rank);
        jw_int(w, "tid", ends[k]->stage);
        jw_us(w, "ts", at[k]);
        jw_close(w, '}');
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

static void chrome_gpu(jw *w, const pp_analysis *a, const window *win)
{
    static const char *const gop[] = {"fwd", "bwd", "opt", "comm"};
    static const char *const nfunc[] = {"?", "Send", "Recv", "collective"};
    const pp_gpu_result *g = &a->gpu;
    /* track names, once per (process, track) */
    for (size_t i = 0; i < g->n_spans; i++) {
        const pp_gpu_span *s = &g->spans[i];
        int32_t pid = rank_of_file(a, s->file);
        int32_t tid = s->nccl ? CHROME_NCCL_TID : CHROME_GPU_TID + (int32_t)(s->stream % 100000);
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++) {
            const pp_gpu_span *t = &g->spans[j];
            seen = rank_of_file(a, t->file) == pid &&
                   (t->nccl ? CHROME_NCCL_TID : CHROME_GPU_TID + (int32_t)(t->stream % 100000)) ==
                       tid;
        }
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
        jw_open(w, NULL, '{', 1);
        jw_str(w, "name", name);
        jw_str(w, "cat", s->nccl ? "nccl" : "gpu");
        jw_str(w, "ph", "X");
        jw_int(w, "pid", rank_of_file(a, s->file));
        jw_int(w, "tid", s->nccl ? CHROME_NCCL_TID : CHROME_GPU_TID + (int32_t)(s->stream % 100000));
        jw_us(w, "ts", us_at(win, s->start));
        jw_us(w, "dur", s->end > s->start ? (double)(s->end - s->start) * 1e-3 : 0);
        jw_open(w, "args", '{', 1);
        if (s->nccl) {
            jw_u64(w, "bytes", s->bytes);
            if (s->end > s->start)
                jw_num(w, "GBps", (double)s->bytes / (double)(s->end - s->start));
        } else {
            jw_int(w, "step", s->step);
            jw_u64(w, "device", s->device);
        }
        jw_close(w, '}');
        jw_close(w, '}');
    }
}

pp_status pp_report_chrome(const pp_analysis *a, FILE *out)
{
    if (!a || !out)
        return PP_ERR(PP_ERR_INVALID, "pp_report_chrome: no analysis or no output");
    window win;
    pp_status st = window_of(a, 0, &win);
    if (st != PP_OK)
        return st;
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
    jw w;
    jw_init(&w, out);
    jw_open(&w, NULL, '{', 0);
    jw_str(&w, "displayTimeUnit", "ms");
    jw_open(&w, "otherData", '{', 1);
    jw_str(&w, "generator", "pipeprof pprof-report");
    jw_int(&w, "first_step", win.lo);
    jw_int(&w, "last_step", win.hi);
    jw_str(&w, "time_origin", "start of the first kept step");
    jw_close(&w, '}');
    jw_open(&w, "traceEvents", '[', 0);
    /* names and order of the processes and tracks */
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
            chrome_meta(&w, "process_name", tracks[i].pid, 0, "name", name, 0);
            chrome_meta(&w, "process_sort_index", tracks[i].pid, 0, "sort_index", NULL,
                        tracks[i].pid);
        }
        char tname[32];
        snprintf(tname, sizeof tname, "stage %d", tracks[i].stage);
        chrome_meta(&w, "thread_name", tracks[i].pid, tracks[i].stage, "name", tname, 0);
        chrome_meta(&w, "thread_sort_index", tracks[i].pid, tracks[i].stage, "sort_index", NULL,
                    tracks[i].stage);
    }
    /* step starts as global instants */
    for (int64_t s = win.lo; s <= win.hi; s++) {
        const pp_astep *sp = step_of(a, s);
        if (!sp)
            continue;
        char name[48];
        snprintf(name, sizeof name, "step %lld", (long long)s);
        jw_open(&w, NULL, '{', 1);
        jw_str(&w, "name", name);
        jw_str(&w, "cat", "step");
        jw_str(&w, "ph", "i");
        jw_str(&w, "s", "g");
        jw_int(&w, "pid", nt ? tracks[0].pid : 0);
        jw_int(&w, "tid", nt ? tracks[0].stage : 0);
        jw_us(&w, "ts", (sp->t0_ns - win.origin) * 1e-3);
        jw_open(&w, "args", '{', 1);
        jw_num(&w, "step_ms", ms(sp->step_ns));
        jw_num(&w, "bubble_ratio", sp->bubble_ratio);
        jw_close(&w, '}');
        jw_close(&w, '}');
    }
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
        jw_open(&w, NULL, '{', 1);
        jw_str(&w, "name", "allreduce");
        jw_str(&w, "cat", "allreduce");
        jw_str(&w, "ph", "X");
        jw_int(&w, "pid", o->rank);
        jw_int(&w, "tid", o->stage);
        jw_us(&w, "ts", us_at(&win, o->t0));
        jw_us(&w, "dur", o->t1 > o->t0 ? (double)(o->t1 - o->t0) * 1e-3 : 0);
        jw_open(&w, "args", '{', 1);
        jw_int(&w, "step", o->step);
        jw_u64(&w, "bytes", o->bytes);
        jw_close(&w, '}');
        jw_close(&w, '}');
    }
    chrome_gpu(&w, a, &win);
    jw_close(&w, ']');
    jw_close(&w, '}');
    fputc('\n', out);
    free(tracks);
    free(recv_of);
    if (fflush(out) != 0 || ferror(out))
        return PP_ERR(PP_ERR_IO, "writing the Chrome trace: %s", strerror(errno));
    return PP_OK;
}
