/* summary.c: the summary JSON (docs/summary-json.md), both ways: pp_summary_write builds it from
 * an analysis (pprof-report --json, pp_report_json) and pp_summary_read turns one back into
 * pprof-check's per-step samples. It owns PP_SUMMARY_VERSION: the one place that knows which
 * fields a summary has. */
#include "report_memory.h"
#include "pp_summary.h"
#include "check_internal.h"
#include "pp_json.h"
#include "report_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================================== */
/* Shared helpers                                                                             */
/* ======================================================================================== */

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
static void put_stats(pp_json_writer *w, const char *key, const pp_astats *s, double scale)
{
    pp_json_object_inline(w, key);
    pp_json_put_uint(w, "count", s->count);
    const char *names[] = {"mean", "median", "p95", "max", "min"};
    double vals[] = {s->mean, s->median, s->p95, s->max, s->min};
    for (int k = 0; k < 5; k++) {
        if (s->count)
            pp_json_put_real(w, names[k], vals[k] * scale);
        else
            pp_json_put_null(w, names[k]);
    }
    pp_json_end(w);
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

static void json_run(pp_json_writer *w, const pp_analysis *a)
{
    pp_json_object(w, "run");
    pp_json_array(w, "files");
    for (size_t i = 0; i < a->n_files; i++) {
        const pp_afile *f = &a->files[i];
        pp_json_object_inline(w, NULL);
        pp_json_put_str(w, "path", f->path);
        pp_json_put_str(w, "host", f->host);
        pp_json_put_uint(w, "pid", f->pid);
        if (f->rank >= 0)
            pp_json_put_int(w, "rank", f->rank);
        else
            pp_json_put_null(w, "rank");
        if (f->pipe_known) { /* placed by its process groups (docs/kineto.md) */
            pp_json_put_int(w, "pipeline_rank", f->pipe_rank);
            pp_json_put_int(w, "replica", f->replica);
        }
        pp_json_put_uint(w, "events", f->events);
        pp_json_put_uint(w, "dropped", f->dropped);
        pp_json_put_uint(w, "filtered", f->filtered);
        pp_json_put_bool(w, "footer", f->has_footer);
        pp_json_object_inline(w, "damage");
        pp_json_put_uint(w, "bad_blocks", f->damage.blocks_bad);
        pp_json_put_uint(w, "bytes_skipped", f->damage.bytes_skipped);
        pp_json_put_bool(w, "truncated", f->damage.truncated);
        pp_json_put_str(w, "problem", f->damage.first_problem);
        pp_json_end(w);
        pp_json_end(w);
    }
    pp_json_end(w);
    pp_json_put_uint(w, "events", a->events_total);
    pp_json_put_uint(w, "dropped", a->dropped_total);
    pp_json_put_uint(w, "ranges_out_of_bounds", a->ranges_out_of_bounds);
    pp_json_array(w, "warnings");
    const char *p = a->warnings;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len) {
            char line[sizeof a->warnings];
            memcpy(line, p, len);
            line[len] = '\0';
            pp_json_put_str(w, NULL, line);
        }
        p += len + (nl ? 1 : 0);
    }
    pp_json_end(w);
    pp_json_end(w);
}

static void json_pipeline(pp_json_writer *w, const pp_analysis *a)
{
    pp_check_shape s = {.S = a->S,
                        .M = a->M,
                        .v = a->v > 0 ? a->v : 1,
                        .samples_per_step = a->samples_per_step,
                        .tokens_per_step = a->tokens_per_step};
    memcpy(s.schedule, a->schedule, sizeof s.schedule);
    pp_json_object(w, "pipeline");
    pp_check_shape_put(w, &s);
    pp_json_put_int(w, "data_parallel", a->dp > 1 ? a->dp : 1);
    pp_json_put_int(w, "replica", a->replica);
    pp_json_end(w);
}

static void json_steps(pp_json_writer *w, const pp_analysis *a)
{
    pp_json_object(w, "analysis");
    pp_json_put_uint(w, "steps", a->n_steps);
    pp_json_put_int(w, "warmup_skipped", a->warmup_skipped);
    pp_json_put_int(w, "first_step", a->n_steps ? a->steps[0].step : 0);
    pp_json_put_int(w, "last_step", a->n_steps ? a->steps[a->n_steps - 1].step : 0);
    pp_json_end(w);
    pp_json_array(w, "steps");
    double origin = a->n_steps ? a->steps[0].t0_ns : 0;
    for (size_t i = 0; i < a->n_steps; i++) {
        const pp_astep *sp = &a->steps[i];
        pp_json_object(w, NULL);
        pp_json_put_int(w, "step", sp->step);
        pp_json_put_real(w, "start_ms", pp_report_ms(sp->t0_ns - origin));
        pp_json_put_real(w, "step_ms", pp_report_ms(sp->step_ns));
        pp_json_put_real(w, "window_ms", pp_report_ms(pp_report_step_extent_ns(sp)));
        pp_json_put_real(w, "bubble_ratio", sp->bubble_ratio);
        pp_json_put_real(w, "imbalance", step_imbalance(a, sp));
        pp_json_put_bool(w, "decomposed", sp->decomposed);
        if (sp->opt_barrier >= 0)
            pp_json_put_bool(w, "optimizer_barrier", sp->opt_barrier);
        else
            pp_json_put_null(w, "optimizer_barrier");
        if (sp->culprit >= 0) {
            pp_json_put_int(w, "culprit", sp->culprit);
            pp_json_put_real(w, "critical_share", sp->critical_share);
        } else {
            pp_json_put_null(w, "culprit");
            pp_json_put_null(w, "critical_share");
        }
        pp_json_array(w, "stages");
        for (int s = 0; s < a->S; s++) {
            const pp_stage_step *ss = &sp->stage[s];
            pp_json_object_inline(w, NULL);
            pp_json_put_real(w, "busy_ms", pp_report_ms(ss->busy_ns));
            pp_json_put_real(w, "idle_ms", pp_report_ms(ss->idle_ns));
            pp_json_put_real(w, "bubble_ratio", ss->bubble_ratio);
            /* this step's mean per micro-batch: the samples pprof-check tests stage times on */
            if (ss->fwd_ns > 0)
                pp_json_put_real(w, "fwd_ms", pp_report_ms(ss->fwd_ns));
            else
                pp_json_put_null(w, "fwd_ms");
            if (ss->bwd_ns > 0)
                pp_json_put_real(w, "bwd_ms", pp_report_ms(ss->bwd_ns));
            else
                pp_json_put_null(w, "bwd_ms");
            if (sp->decomposed) {
                pp_json_put_real(w, "fill_drain_ms", pp_report_ms(ss->fill_drain_ns));
                pp_json_put_real(w, "imbalance_ms", pp_report_ms(ss->imbalance_ns));
                pp_json_put_real(w, "transfer_ms", pp_report_ms(ss->transfer_ns));
            } else {
                pp_json_put_null(w, "fill_drain_ms");
                pp_json_put_null(w, "imbalance_ms");
                pp_json_put_null(w, "transfer_ms");
            }
            pp_json_put_real(w, "allreduce_ms", pp_report_ms(ss->allreduce_ns));
            pp_json_end(w);
        }
        pp_json_end(w);
        pp_json_end(w);
    }
    pp_json_end(w);
}

static pp_status json_aggregates(pp_json_writer *w, const pp_analysis *a)
{
    size_t n = a->n_steps;
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return PP_ERR(PP_ERR_NOMEM, "out of memory writing the summary of %zu steps", n);
    pp_json_object(w, "aggregates");
    put_stats(w, "step_ms", &a->step_ns, 1e-6);
    for (size_t i = 0; i < n; i++)
        v[i] = a->steps[i].bubble_ratio;
    pp_astats st = stats_of(v, n);
    st.mean = a->bubble_ratio; /* the analyzer's number, identical up to rounding */
    put_stats(w, "bubble_ratio", &st, 1.0);
    for (size_t i = 0; i < n; i++)
        v[i] = step_imbalance(a, &a->steps[i]);
    st = stats_of(v, n);
    put_stats(w, "imbalance", &st, 1.0);
    pp_json_put_real_pos(w, "samples_per_s", a->samples_per_s);
    pp_json_put_real_pos(w, "tokens_per_s", a->tokens_per_s);
    if (a->regimes.found) { /* two speed regimes (regime.c): only when found */
        const pp_aregimes *g = &a->regimes;
        pp_json_object_inline(w, "regimes");
        pp_json_put_uint(w, "fast_steps", g->n_fast);
        pp_json_put_real(w, "fast_median_ms", g->fast_median_ns * 1e-6);
        pp_json_put_uint(w, "slow_steps", g->n_slow);
        pp_json_put_real(w, "slow_median_ms", g->slow_median_ns * 1e-6);
        pp_json_put_real(w, "separation", g->separation);
        pp_json_put_uint(w, "switches", g->switches);
        pp_json_end(w);
    }
    pp_json_end(w);
    free(v);
    return PP_OK;
}

static void json_stages(pp_json_writer *w, const pp_analysis *a)
{
    pp_json_array(w, "stages");
    for (int s = 0; s < a->S; s++) {
        const pp_astage *g = &a->stages[s];
        pp_json_object(w, NULL);
        pp_json_put_int(w, "stage", s);
        put_stats(w, "fwd_ms", &g->fwd_ns, 1e-6);
        put_stats(w, "bwd_ms", &g->bwd_ns, 1e-6);
        put_stats(w, "bwd_input_ms", &g->bwd_input_ns, 1e-6);
        put_stats(w, "bwd_weight_ms", &g->bwd_weight_ns, 1e-6);
        put_stats(w, "opt_ms", &g->opt_ns, 1e-6);
        pp_json_put_real(w, "busy_ms", pp_report_ms(g->busy_ns));
        pp_json_put_real(w, "idle_ms", pp_report_ms(g->idle_ns));
        pp_json_put_real(w, "bubble_ratio", g->bubble_ratio);
        pp_json_put_real(w, "fill_drain_ms", pp_report_ms(g->fill_drain_ns));
        pp_json_put_real(w, "imbalance_ms", pp_report_ms(g->imbalance_ns));
        pp_json_put_real(w, "transfer_ms", pp_report_ms(g->transfer_ns));
        pp_json_put_real(w, "allreduce_mean_ms", pp_report_ms(g->allreduce_mean_ns));
        put_stats(w, "allreduce_ms", &g->allreduce_ns, 1e-6);
        pp_json_put_real(w, "allreduce_bytes", g->allreduce_bytes);
        pp_json_put_real_pos(w, "allreduce_busbw_GBps", g->allreduce_busbw_GBps);
        if (g->imbalance_culprit >= 0)
            pp_json_put_int(w, "imbalance_culprit", g->imbalance_culprit);
        else
            pp_json_put_null(w, "imbalance_culprit");
        if (g->n_chunk > 0) { /* several chunks per stage: each one's ops (pp_astage.chunk_ns) */
            static const char *const keys[4] = {"fwd_ms", "bwd_ms", "bwd_input_ms",
                                                "bwd_weight_ms"};
            pp_json_array(w, "chunks");
            for (int c = 0; c < g->n_chunk; c++) {
                pp_json_object(w, NULL);
                pp_json_put_int(w, "chunk", c);
                for (int k = 0; k < 4; k++)
                    put_stats(w, keys[k], &g->chunk_ns[c * 4 + k], 1e-6);
                pp_json_end(w);
            }
            pp_json_end(w);
        }
        pp_json_end(w);
    }
    pp_json_end(w);
}

static void json_links_layers(pp_json_writer *w, const pp_analysis *a)
{
    pp_json_array(w, "links");
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        pp_json_object_inline(w, NULL);
        pp_json_put_int(w, "src", l->src);
        pp_json_put_int(w, "dst", l->dst);
        pp_json_put_str(w, "kind", l->grad ? "grad" : "act");
        pp_json_put_uint(w, "messages", l->messages);
        pp_json_put_uint(w, "bytes", l->bytes);
        pp_json_put_uint(w, "timed", l->timed);
        if (l->timed && l->bandwidth_GBps > 0)
            pp_json_put_real(w, "bandwidth_GBps", l->bandwidth_GBps);
        else
            pp_json_put_null(w, "bandwidth_GBps");
        put_stats(w, "latency_us", &l->latency_ns, 1e-3);
        pp_json_put_real(w, "transfer_ms", pp_report_ms(l->transfer_ns));
        pp_json_put_real(w, "wait_ms", pp_report_ms(l->wait_ns));
        pp_json_put_real(w, "send_ms", pp_report_ms(l->send_ns));
        pp_json_end(w);
    }
    pp_json_end(w);
    pp_json_array(w, "layers");
    for (size_t i = 0; i < a->n_layers; i++) {
        const pp_alayer *l = &a->layers[i];
        pp_json_object(w, NULL);
        pp_json_put_int(w, "index", l->layer);
        pp_json_put_str(w, "name", l->name);
        put_stats(w, "fwd_ms", &l->fwd_ns, 1e-6);
        put_stats(w, "bwd_ms", &l->bwd_ns, 1e-6);
        put_stats(w, "bwd_weight_ms", &l->bwd_weight_ns, 1e-6);
        pp_json_end(w);
    }
    pp_json_end(w);
}

/* GPU time (docs/summary-json.md "gpu"): null without GPU records. */
static void json_gpu(pp_json_writer *w, const pp_analysis *a)
{
    const pp_gpu_result *g = &a->gpu;
    if (!g->present) {
        pp_json_put_null(w, "gpu");
        return;
    }
    pp_json_object(w, "gpu");
    pp_json_put_uint(w, "records", g->records);
    pp_json_put_uint(w, "projected", g->projected);
    pp_json_put_uint(w, "unattributed", g->unattributed);
    pp_json_put_uint(w, "adopted", g->adopted);
    pp_json_put_uint(w, "ambiguous", g->ambiguous);
    pp_json_put_uint(w, "late", g->late);
    pp_json_put_real(w, "step_ms", pp_report_ms(g->step_ns));
    pp_json_put_real(w, "projected_ms", pp_report_ms(g->projected_ns));
    pp_json_put_real(w, "work_ms", pp_report_ms(g->work_ns));
    pp_json_put_real(w, "device_busy_ms", pp_report_ms(g->device_busy_ns));
    pp_json_array(w, "stages");
    for (int s = 0; s < g->S; s++) {
        const pp_gpu_stage *x = &g->stages[s];
        pp_json_object_inline(w, NULL);
        pp_json_put_int(w, "stage", s);
        pp_json_put_real(w, "fwd_ms", pp_report_ms(x->fwd_median_ns));
        pp_json_put_real(w, "bwd_ms", pp_report_ms(x->bwd_median_ns));
        pp_json_put_real(w, "busy_ms", pp_report_ms(x->busy_ns));
        pp_json_put_real(w, "bubble_ratio", x->bubble_ratio);
        pp_json_put_real(w, "launch_lag_ms", pp_report_ms(x->launch_lag_ns));
        pp_json_end(w);
    }
    pp_json_end(w);
    pp_json_array(w, "devices");
    for (size_t i = 0; i < g->n_devices; i++) {
        pp_json_object_inline(w, NULL);
        pp_json_put_uint(w, "device", g->devices[i].device);
        pp_json_put_real(w, "busy_ms", pp_report_ms(g->devices[i].busy_ns));
        pp_json_put_real(w, "span_ms", pp_report_ms(g->devices[i].span_ns));
        pp_json_put_real(w, "utilisation", g->devices[i].utilisation);
        pp_json_end(w);
    }
    pp_json_end(w);
    pp_json_array(w, "nccl_links");
    for (size_t i = 0; i < g->n_links; i++) {
        const pp_gpu_link *l = &g->links[i];
        pp_json_object_inline(w, NULL);
        pp_json_put_int(w, "src", l->src);
        pp_json_put_int(w, "dst", l->dst);
        pp_json_put_uint(w, "messages", l->messages);
        pp_json_put_uint(w, "bytes", l->bytes);
        pp_json_put_uint(w, "timed", l->timed);
        pp_json_put_real_pos(w, "algbw_GBps", l->algbw_GBps);
        pp_json_put_real_pos(w, "busbw_GBps", l->busbw_GBps);
        pp_json_end(w);
    }
    pp_json_end(w);
    pp_json_end(w);
}

/* The generic view (docs/summary-json.md "ranges", "marks"): written only when the run has
 * ranges outside the pipeline or marks of other domains, so pipeline-only summaries keep their
 * keys. */
static void json_generic(pp_json_writer *w, const pp_analysis *a)
{
    if (a->dialect[0] && strcmp(a->dialect, "pipeprof") != 0)
        pp_json_put_str(w, "dialect", a->dialect);
    if (!a->n_ranges && !a->n_marks)
        return;
    pp_json_put_real(w, "wall_ms", pp_report_ms(a->wall_ns));
    pp_json_array(w, "ranges");
    size_t c = 0;
    for (size_t i = 0; i < a->n_ranges; i++) {
        const pp_arange *r = &a->ranges[i];
        pp_json_object(w, NULL);
        pp_json_put_str(w, "domain", r->domain);
        pp_json_put_str(w, "name", r->name);
        pp_json_put_bool(w, "other", r->other);
        pp_json_put_uint(w, "count", r->ns.count);
        pp_json_put_real(w, "total_ms", pp_report_ms(r->ns.sum));
        put_stats(w, "duration_ms", &r->ns, 1e-6);
        pp_json_put_real(w, "stddev_ms", pp_report_ms(r->stddev_ns));
        pp_json_put_real(w, "wall_share", r->wall_share);
        pp_json_array(w, "threads");
        while (c < a->n_range_threads && a->range_threads[c].range < i)
            c++;
        for (; c < a->n_range_threads && a->range_threads[c].range == i; c++) {
            const pp_arange_thread *x = &a->range_threads[c];
            if (x->thread >= a->n_threads)
                continue;
            const pp_athread *t = &a->threads[x->thread];
            pp_json_object_inline(w, NULL);
            if (t->file >= 0 && (size_t)t->file < a->n_files) {
                const pp_afile *f = &a->files[t->file];
                pp_json_put_int(w, "file", t->file);
                if (f->rank >= 0)
                    pp_json_put_int(w, "rank", f->rank);
                else
                    pp_json_put_null(w, "rank");
                pp_json_put_uint(w, "pid", f->pid);
                pp_json_put_uint(w, "tid", t->tid);
            } else {
                pp_json_put_null(w, "file");
                pp_json_put_null(w, "rank");
                pp_json_put_null(w, "pid");
                pp_json_put_null(w, "tid");
            }
            pp_json_put_str(w, "thread", t->name);
            pp_json_put_uint(w, "count", x->count);
            pp_json_put_real(w, "total_ms", pp_report_ms(x->sum_ns));
            pp_json_put_real(w, "min_ms", pp_report_ms(x->min_ns));
            pp_json_put_real(w, "max_ms", pp_report_ms(x->max_ns));
            pp_json_end(w);
        }
        pp_json_end(w);
        pp_json_end(w);
    }
    pp_json_end(w);
    pp_json_array(w, "marks");
    for (size_t i = 0; i < a->n_marks; i++) {
        const pp_amark *m = &a->marks[i];
        pp_json_object_inline(w, NULL);
        pp_json_put_str(w, "domain", m->domain);
        pp_json_put_str(w, "name", m->name);
        pp_json_put_bool(w, "other", m->other);
        pp_json_put_uint(w, "count", m->count);
        pp_json_end(w);
    }
    pp_json_end(w);
}

pp_status pp_summary_write(const pp_analysis *a, FILE *out)
{
    if (!a || !out)
        return PP_ERR(PP_ERR_INVALID, "pp_summary_write: no analysis or no output");
    pp_json_writer w;
    pp_json_writer_init(&w, out, "the summary JSON", PP_JSON_PRETTY);
    pp_json_object(&w, NULL);
    pp_json_put_int(&w, "summary_version", PP_SUMMARY_VERSION);
    pp_json_put_str(&w, "generator", "pipeprof pprof-report");
    pp_json_put_str(&w, "pipeprof_version", PP_VERSION);
    json_run(&w, a);
    json_pipeline(&w, a);
    json_steps(&w, a);
    pp_status st = json_aggregates(&w, a);
    if (st != PP_OK)
        return st;
    json_stages(&w, a);
    json_links_layers(&w, a);
    json_gpu(&w, a);
    json_generic(&w, a);
    an_summary_memory(&w, a); /* report_memory.c */
    pp_json_end(&w);
    return pp_json_writer_finish(&w);
}


/* ======================================================================================== */
/* Reading a summary back (pprof-check's input)                                               */
/* ======================================================================================== */

/* A summary's per-step columns: step_ms[i], bubble[i] and sf[(s * 2 + fwd|bwd) * n + i] (NAN
 * where a step does not give a stage's mean). */
typedef struct summary_steps {
    size_t n;
    int S;
    double *step_ms, *bubble, *sf, *tmp;
} summary_steps;

static void steps_free(summary_steps *c)
{
    free(c->step_ms);
    free(c->bubble);
    free(c->sf);
    free(c->tmp);
}

static pp_status steps_alloc(summary_steps *c, size_t n, int S, const char *ctx)
{
    memset(c, 0, sizeof *c);
    c->n = n;
    c->S = S;
    c->step_ms = malloc(n * sizeof *c->step_ms);
    c->bubble = malloc(n * sizeof *c->bubble);
    c->tmp = malloc(n * sizeof *c->tmp);
    size_t n_sf = 0; /* steps and stages come from the file: the product checked */
    c->sf = S >= 0 && pp_size_mul3(n, (size_t)S, 2, &n_sf)
                ? calloc(n_sf ? n_sf : 1, sizeof *c->sf)
                : NULL;
    if (!c->step_ms || !c->bubble || !c->tmp || !c->sf)
        return PP_ERR(PP_ERR_NOMEM, "out of memory reading %s", ctx);
    for (size_t i = 0; i < n_sf; i++)
        c->sf[i] = NAN;
    return PP_OK;
}

/* Step i's per-stage forward and backward means, when the summary carries them. */
static pp_status read_step_stages(const cJSON *stg, const char *sctx, summary_steps *c, size_t i)
{
    if (!stg || cJSON_IsNull(stg))
        return PP_OK;
    pp_status st = pp_json_need_array(stg, sctx, "stages");
    if (st != PP_OK)
        return st;
    if (cJSON_GetArraySize(stg) != c->S)
        return PP_ERR(PP_ERR_INVALID, "%s: \"stages\" has %d entries, the pipeline %d", sctx,
                      cJSON_GetArraySize(stg), c->S);
    int s = 0;
    const cJSON *so;
    cJSON_ArrayForEach(so, stg)
    {
        char tctx[640];
        snprintf(tctx, sizeof tctx, "%s.stages[%d]", sctx, s);
        double *f = &c->sf[((size_t)s * 2 + 0) * c->n + i];
        double *b = &c->sf[((size_t)s * 2 + 1) * c->n + i];
        if ((st = pp_json_need_object(so, tctx, "stage")) != PP_OK ||
            (st = pp_json_opt_real(so, tctx, "fwd_ms", 0, PP_CHECK_BIG, NAN, f)) != PP_OK ||
            (st = pp_json_opt_real(so, tctx, "bwd_ms", 0, PP_CHECK_BIG, NAN, b)) != PP_OK)
            return st;
        s++;
    }
    return PP_OK;
}

static pp_status read_steps(const cJSON *steps, const char *ctx, summary_steps *c)
{
    size_t i = 0;
    const cJSON *sp;
    cJSON_ArrayForEach(sp, steps)
    {
        char sctx[600];
        snprintf(sctx, sizeof sctx, "%s: steps[%zu]", ctx, i);
        pp_status st;
        if ((st = pp_json_need_object(sp, sctx, "step")) != PP_OK ||
            (st = pp_json_get_real(pp_json_member(sp, "step_ms"), sctx, "step_ms", 1e-9,
                                   PP_CHECK_BIG, &c->step_ms[i])) != PP_OK ||
            (st = pp_json_opt_real(sp, sctx, "bubble_ratio", -1, 1, NAN, &c->bubble[i])) !=
                PP_OK ||
            (st = read_step_stages(pp_json_member(sp, "stages"), sctx, c, i)) != PP_OK)
            return st;
        i++;
    }
    return PP_OK;
}

/* Per stage: the per-step samples when the steps give them, else the aggregate median (a
 * value without samples: reported, not tested). */
static pp_status add_stage_metrics(pp_check_run *r, const cJSON *root, summary_steps *c)
{
    const cJSON *stages = pp_json_member(root, "stages");
    for (int s = 0; s < c->S; s++) {
        for (int b = 0; b < 2; b++) {
            const double *col = &c->sf[((size_t)s * 2 + (size_t)b) * c->n];
            size_t k = 0;
            for (size_t j = 0; j < c->n; j++)
                if (isfinite(col[j]) && col[j] > 0)
                    c->tmp[k++] = col[j];
            char name[64];
            snprintf(name, sizeof name, "stage%d.%s", s, b ? "bwd_ms" : "fwd_ms");
            pp_check_kind kind = b ? PP_CHECK_BWD : PP_CHECK_FWD;
            pp_status st;
            if (k > 0) {
                if ((st = pp_check_run_add(r, name, kind, c->tmp, k, NAN)) != PP_OK)
                    return st;
                continue;
            }
            const cJSON *so = cJSON_IsArray(stages) ? cJSON_GetArrayItem(stages, s) : NULL;
            const cJSON *stt = so ? pp_json_member(so, b ? "bwd_ms" : "fwd_ms") : NULL;
            if (!stt && so && b) /* split-backward schedules: the input half */
                stt = pp_json_member(so, "bwd_input_ms");
            const cJSON *med = cJSON_IsObject(stt) ? pp_json_member(stt, "median") : NULL;
            if (cJSON_IsNumber(med) && isfinite(med->valuedouble) && med->valuedouble > 0 &&
                (st = pp_check_run_add(r, name, kind, NULL, 0, med->valuedouble)) != PP_OK)
                return st;
        }
    }
    return PP_OK;
}

/* The links' measured bandwidths: values without per-step samples. */
static pp_status add_link_metrics(pp_check_run *r, const cJSON *links, const char *ctx)
{
    if (!links || cJSON_IsNull(links))
        return PP_OK;
    pp_status st = pp_json_need_array(links, ctx, "links");
    if (st != PP_OK)
        return st;
    int li = 0;
    const cJSON *l;
    cJSON_ArrayForEach(l, links)
    {
        char lctx[600];
        snprintf(lctx, sizeof lctx, "%s: links[%d]", ctx, li++);
        double src, dst, bw;
        char kind[16];
        if ((st = pp_json_need_object(l, lctx, "link")) != PP_OK ||
            (st = pp_json_get_int(pp_json_member(l, "src"), lctx, "src", 0, 1 << 20, &src)) !=
                PP_OK ||
            (st = pp_json_get_int(pp_json_member(l, "dst"), lctx, "dst", 0, 1 << 20, &dst)) !=
                PP_OK ||
            (st = pp_json_opt_string(l, lctx, "kind", kind, sizeof kind)) != PP_OK ||
            (st = pp_json_opt_real(l, lctx, "bandwidth_GBps", 0, PP_CHECK_BIG, 0, &bw)) != PP_OK)
            return st;
        if (!(bw > 0))
            continue;
        char name[64];
        pp_check_link_name(name, sizeof name, (int)src, (int)dst, strcmp(kind, "grad") == 0);
        if ((st = pp_check_run_add(r, name, PP_CHECK_BANDWIDTH, NULL, 0, bw)) != PP_OK)
            return st;
    }
    return PP_OK;
}

/* The stages' memory peaks ("memory.stages[]", report_memory.c): values without samples. */
static pp_status add_memory_metrics(pp_check_run *r, const cJSON *mem, const char *ctx)
{
    if (!mem || cJSON_IsNull(mem))
        return PP_OK;
    pp_status st = pp_json_need_object(mem, ctx, "memory");
    const cJSON *stages = st == PP_OK ? pp_json_member(mem, "stages") : NULL;
    if (st != PP_OK || (st = pp_json_need_array(stages, ctx, "memory.stages")) != PP_OK)
        return st;
    int i = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, stages)
    {
        char sctx[600];
        snprintf(sctx, sizeof sctx, "%s: memory.stages[%d]", ctx, i++);
        double stage, peak;
        if ((st = pp_json_need_object(s, sctx, "stage")) != PP_OK ||
            (st = pp_json_get_int(pp_json_member(s, "stage"), sctx, "stage", 0,
                                  PP_ANALYSIS_MAX_STAGES - 1, &stage)) != PP_OK ||
            (st = pp_json_opt_real(s, sctx, "total_peak_bytes", 0, PP_CHECK_BIG, 0, &peak)) !=
                PP_OK)
            return st;
        char name[64];
        pp_check_peak_mem_name(name, sizeof name, (int)stage);
        if ((st = pp_check_run_add(r, name, PP_CHECK_PEAK_MEM, NULL, 0, peak / 1048576.0)) !=
            PP_OK)
            return st;
    }
    return PP_OK;
}

pp_status pp_summary_read(const cJSON *root, pp_check_run *r)
{
    const char *ctx = r->source;
    double d;
    pp_status st = pp_json_get_int(pp_json_member(root, PP_SUMMARY_VERSION_KEY), ctx,
                                   PP_SUMMARY_VERSION_KEY, 0, PP_JSON_MAX_EXACT_INT, &d);
    if (st != PP_OK)
        return st;
    if (d != PP_SUMMARY_VERSION)
        return PP_ERR(PP_ERR_INVALID, "%s: summary_version %.0f is not supported (this "
                                      "pprof-check reads summary_version %d)",
                      ctx, d, PP_SUMMARY_VERSION);
    const cJSON *pipe = pp_json_member(root, "pipeline");
    if ((st = pp_json_need_object(pipe, ctx, "pipeline")) != PP_OK)
        return st;
    char pctx[600];
    snprintf(pctx, sizeof pctx, "%s: pipeline", ctx);
    if ((st = pp_check_shape_read(pipe, pctx, &r->shape)) != PP_OK ||
        (st = pp_check_shape_read_layers(pp_json_member(root, "layers"), ctx, "layers",
                                         &r->shape)) != PP_OK)
        return st;
    const cJSON *steps = pp_json_member(root, "steps");
    if ((st = pp_json_need_array(steps, ctx, "steps")) != PP_OK)
        return st;
    int n = cJSON_GetArraySize(steps);
    if (n == 0)
        return PP_ERR(PP_ERR_INVALID, "%s: \"steps\" is empty: no per-step samples to compare",
                      ctx);
    summary_steps c;
    if ((st = steps_alloc(&c, (size_t)n, r->shape.S, ctx)) == PP_OK &&
        (st = read_steps(steps, ctx, &c)) == PP_OK) {
        r->n_steps = c.n;
        if ((st = pp_check_add_step_metrics(r, c.step_ms, c.bubble, c.n, c.tmp)) == PP_OK &&
            (st = add_stage_metrics(r, root, &c)) == PP_OK)
            st = add_link_metrics(r, pp_json_member(root, "links"), ctx);
        if (st == PP_OK)
            st = add_memory_metrics(r, pp_json_member(root, "memory"), ctx);
    }
    steps_free(&c);
    if (st != PP_OK)
        return st;
    const cJSON *run = pp_json_member(root, "run");
    const cJSON *warn = cJSON_IsObject(run) ? pp_json_member(run, "warnings") : NULL;
    const cJSON *w;
    if (cJSON_IsArray(warn))
        cJSON_ArrayForEach(w, warn) if (cJSON_IsString(w))
            pp_append_line(r->warnings, sizeof r->warnings, "%s", w->valuestring);
    return PP_OK;
}
