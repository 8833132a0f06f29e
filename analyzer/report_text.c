/* report_text.c: the readable summary of an analysis (pp_analysis_print, pp_analyzer.h), the
 * tables pprof-report prints and pprof-run prints at the end of a run: the pipeline and its step
 * time, then one table a part (stages, all-reduce, GPU time, links, clocks) where the run has
 * it, then the generic view (ranges outside the pipeline, per thread, marks), then the
 * warnings. A run without pipeline ranges gets the run's line and the generic view alone. The
 * other report formats are report.c's. */
#include "report_internal.h"
#include "report_memory.h"
#include "pp_analyzer.h"

#include <stdio.h>
#include <string.h>

static double ms(double ns) { return ns * 1e-6; }

/* How the pipeline ranges were named, when not by pipeprof's own convention. */
static void print_dialect(const pp_analysis *a, FILE *out)
{
    if (a->dialect[0] && strcmp(a->dialect, "pipeprof") != 0)
        fprintf(out, "dialect: %s\n", a->dialect);
}

/* A run without pipeline ranges: its processes, events and span. */
static void print_run(const pp_analysis *a, FILE *out)
{
    fprintf(out, "run: %zu process(es), %llu events, %llu dropped; no pipeline ranges: %llu "
                 "range(s) of %zu name(s), %zu mark name(s) over %.3f ms\n",
            a->n_files, (unsigned long long)a->events_total, (unsigned long long)a->dropped_total,
            (unsigned long long)a->generic_ranges, a->n_ranges, a->n_marks, ms(a->wall_ns));
    print_dialect(a, out);
    fprintf(out, "\n");
}

static void print_domain(const char *domain, FILE *out)
{
    if (domain[0])
        fprintf(out, "domain %s:\n", domain);
    else
        fprintf(out, "default domain:\n");
}

/* Before a row of the ranges or marks table (sorted by domain): the domain's heading when it
 * changes (*dom: the last one), or "(every domain):" before the row that sums the rest. */
static void print_row_domain(const char **dom, int other, const char *domain, FILE *out)
{
    if (!other && (!*dom || strcmp(*dom, domain) != 0)) {
        print_domain(domain, out);
        *dom = domain;
    }
    if (other)
        fprintf(out, "(every domain):\n");
}

/* The ranges outside the pipeline per domain and name (docs/metrics.md "Ranges and marks"). */
static void print_ranges(const pp_analysis *a, FILE *out)
{
    if (!a->n_ranges)
        return;
    fprintf(out, "%s (%% of wall: total over the run's %.3f ms)\n",
            a->S ? "Other ranges" : "Ranges", ms(a->wall_ns));
    fprintf(out, "%9s %12s %11s %11s %11s %11s %11s %8s  %s\n", "count", "total ms", "mean us",
            "median us", "min us", "max us", "stddev us", "% wall", "name");
    const char *dom = NULL;
    for (size_t i = 0; i < a->n_ranges; i++) {
        const pp_arange *r = &a->ranges[i];
        print_row_domain(&dom, r->other, r->domain, out);
        fprintf(out, "%9llu %12.3f %11.1f %11.1f %11.1f %11.1f %11.1f %7.1f%%  %s\n",
                (unsigned long long)r->ns.count, ms(r->ns.sum), r->ns.mean * 1e-3,
                r->ns.median * 1e-3, r->ns.min * 1e-3, r->ns.max * 1e-3, r->stddev_ns * 1e-3,
                100 * r->wall_share, r->name[0] ? r->name : "(no name)");
    }
}

/* Per thread: where each name's ranges ran; at most TEXT_MAX_THREAD_ROWS rows (the JSON has
 * them all). */
enum { TEXT_MAX_THREAD_ROWS = 256 };

static void print_range_threads(const pp_analysis *a, FILE *out)
{
    if (!a->n_range_threads)
        return;
    size_t shown = a->n_range_threads < TEXT_MAX_THREAD_ROWS ? a->n_range_threads
                                                             : TEXT_MAX_THREAD_ROWS;
    fprintf(out, "\n%-22s %-16s %9s %12s %11s %11s %11s  %s\n", "process", "thread", "count",
            "total ms", "mean us", "min us", "max us", "name");
    for (size_t i = 0; i < shown; i++) {
        const pp_arange_thread *c = &a->range_threads[i];
        if (c->range >= a->n_ranges || c->thread >= a->n_threads)
            continue;
        const pp_athread *t = &a->threads[c->thread];
        const pp_arange *r = &a->ranges[c->range];
        char proc[48] = "-", thr[80];
        if (t->file >= 0 && (size_t)t->file < a->n_files) {
            const pp_afile *f = &a->files[t->file];
            if (f->rank >= 0)
                snprintf(proc, sizeof proc, "rank %d pid %u", f->rank, f->pid);
            else
                snprintf(proc, sizeof proc, "pid %u", f->pid);
            if (t->name[0] && pp_report_tid_is_own(t->tid))
                snprintf(thr, sizeof thr, "%s", t->name);
            else if (t->name[0])
                snprintf(thr, sizeof thr, "%u %s", t->tid, t->name);
            else
                snprintf(thr, sizeof thr, "%u", t->tid);
        } else {
            snprintf(thr, sizeof thr, "%s", t->name);
        }
        char name[PP_ANALYSIS_NAME_BYTES + 72];
        if (r->domain[0])
            snprintf(name, sizeof name, "%s: %s", r->domain, r->name[0] ? r->name : "(no name)");
        else
            snprintf(name, sizeof name, "%s", r->name[0] ? r->name : "(no name)");
        fprintf(out, "%-22s %-16s %9llu %12.3f %11.1f %11.1f %11.1f  %s\n", proc, thr,
                (unsigned long long)c->count, ms(c->sum_ns),
                c->count ? c->sum_ns / (double)c->count * 1e-3 : 0.0, c->min_ns * 1e-3,
                c->max_ns * 1e-3, name);
    }
    if (shown < a->n_range_threads)
        fprintf(out, "... %zu more (name, thread) rows: --json has every one\n",
                a->n_range_threads - shown);
}

/* Marks of other domains than pipeprof's, per domain and name. */
static void print_marks(const pp_analysis *a, FILE *out)
{
    if (!a->n_marks)
        return;
    fprintf(out, "\nMarks\n%9s  %s\n", "count", "name");
    const char *dom = NULL;
    for (size_t i = 0; i < a->n_marks; i++) {
        const pp_amark *m = &a->marks[i];
        print_row_domain(&dom, m->other, m->domain, out);
        fprintf(out, "%9llu  %s\n", (unsigned long long)m->count,
                m->name[0] ? m->name : "(no name)");
    }
}

static void print_generic(const pp_analysis *a, FILE *out)
{
    if (!a->n_ranges && !a->n_marks)
        return;
    if (a->S)
        fprintf(out, "\n");
    print_ranges(a, out);
    print_range_threads(a, out);
    print_marks(a, out);
}

/* The pipeline's shape, step time, bubble and throughput. */
static void print_summary(const pp_analysis *a, FILE *out)
{
    fprintf(out, "pipeline: %d stage(s)", a->S);
    if (a->schedule[0])
        fprintf(out, ", schedule %s", a->schedule);
    if (a->no_compute_ops)
        fprintf(out, ", no forward or backward op recognised (see the warnings)");
    if (a->M)
        fprintf(out, ", %d micro-batch(es)", a->M);
    if (a->v > 1)
        fprintf(out, ", %d chunks per stage", a->v);
    if (a->dp > 1) {
        fprintf(out, ", %d data-parallel replicas (replica %d shown", a->dp, a->replica);
        /* where the traces' process groups placed them: the replica's ranks, stage by stage */
        int shown = 0;
        for (int s = 0; s < a->S && s < PP_ANALYSIS_MAX_STAGES; s++)
            for (size_t i = 0; i < a->n_files; i++)
                if (a->files[i].pipe_known && a->files[i].pipe_rank == s &&
                    a->files[i].replica == a->replica)
                    fprintf(out, "%s%d", shown++ ? "," : ": ranks ", a->files[i].rank);
        fputc(')', out);
    }
    fprintf(out, "; %zu step(s) analyzed (%lld warm-up skipped), %zu process(es), %llu events",
            a->n_steps, (long long)a->warmup_skipped, a->n_files,
            (unsigned long long)a->events_total);
    fprintf(out, ", %llu dropped\n", (unsigned long long)a->dropped_total);
    print_dialect(a, out);
    fprintf(out, "step time: mean %.3f ms, median %.3f ms, p95 %.3f ms, max %.3f ms\n",
            ms(a->step_ns.mean), ms(a->step_ns.median), ms(a->step_ns.p95), ms(a->step_ns.max));
    fprintf(out, "bubble: %.1f%% of stage time idle; imbalance (max/mean busy) %.3f",
            100 * a->bubble_ratio, a->imbalance);
    /* counts the job did not announce are unknown, never 0 */
    if (a->samples_per_s > 0 || a->tokens_per_s > 0) {
        fprintf(out, "; throughput ");
        if (a->samples_per_s > 0)
            fprintf(out, "%.1f samples/s", a->samples_per_s);
        else
            fprintf(out, "unknown samples/s");
        if (a->tokens_per_s > 0)
            fprintf(out, ", %.0f tokens/s", a->tokens_per_s);
        else
            fprintf(out, ", unknown tokens/s");
    } else {
        fprintf(out, "; throughput unknown (no samples or tokens per step in a config mark)");
    }
    fprintf(out, "\n\n");
}

/* Per stage: forward, backward, busy and idle time, the bubble and its decomposition. */
static void print_stages(const pp_analysis *a, FILE *out)
{
    fprintf(out, "%-6s %10s %10s %10s %10s %8s %11s %11s %10s  %s\n", "stage", "fwd ms",
            "bwd ms", "busy ms", "idle ms", "bubble", "fill/drain", "imbalance", "transfer",
            "imbalance caused by");
    for (int s = 0; s < a->S; s++) {
        const pp_astage *g = &a->stages[s];
        double bwd = g->bwd_ns.count ? g->bwd_ns.median
                                     : g->bwd_input_ns.median + g->bwd_weight_ns.median;
        char cause[32] = "-";
        if (g->imbalance_culprit >= 0 && g->imbalance_ns > 0.02 * a->step_ns.mean)
            snprintf(cause, sizeof cause, "stage %d", g->imbalance_culprit);
        fprintf(out, "%-6d %10.3f %10.3f %10.3f %10.3f %7.1f%% %11.3f %11.3f %10.3f  %s\n", s,
                ms(g->fwd_ns.median), ms(bwd), ms(g->busy_ns), ms(g->idle_ns),
                100 * g->bubble_ratio, ms(g->fill_drain_ns), ms(g->imbalance_ns),
                ms(g->transfer_ns), cause);
        /* several chunks: each one's own medians below its stage's, which mix them */
        for (int c = 0; g->n_chunk > 1 && c < g->n_chunk; c++) {
            const pp_astats *f = pp_astage_chunk(g, c, PP_AOP_FWD),
                            *b = pp_astage_chunk(g, c, PP_AOP_BWD),
                            *bi = pp_astage_chunk(g, c, PP_AOP_BWD_INPUT),
                            *bw = pp_astage_chunk(g, c, PP_AOP_BWD_WEIGHT);
            if (!f->count && !b->count && !bi->count && !bw->count)
                continue;
            double cb = b->count ? b->median : bi->median + bw->median;
            fprintf(out, "  c%-3d %10.3f %10.3f\n", c, ms(f->median), ms(cb));
        }
    }
}

/* Per stage, with data-parallel replicas: the gradient all-reduce. */
static void print_allreduce(const pp_analysis *a, FILE *out)
{
    int any_ar = 0;
    for (int s = 0; s < a->S; s++)
        any_ar |= a->stages[s].allreduce_ns.count > 0;
    if (!any_ar)
        return;
    fprintf(out, "\n%-6s %14s %10s %10s %12s %12s\n", "stage", "all-reduce ms", "p95 ms", "MB",
            "busbw GB/s", "% of step");
    for (int s = 0; s < a->S; s++) {
        const pp_astage *g = &a->stages[s];
        char mb[16] = "-", bw[16] = "-"; /* sizes unknown (a torch trace without shapes) */
        if (g->allreduce_bytes > 0) {
            snprintf(mb, sizeof mb, "%.3f", g->allreduce_bytes / 1e6);
            snprintf(bw, sizeof bw, "%.3f", g->allreduce_busbw_GBps);
        }
        fprintf(out, "%-6d %14.3f %10.3f %10s %12s %11.1f%%\n", s, ms(g->allreduce_ns.median),
                ms(g->allreduce_ns.p95), mb, bw,
                a->step_ns.mean > 0 ? 100 * g->allreduce_mean_ns / a->step_ns.mean : 0.0);
    }
}

/* With GPU capture: the projection's totals, per stage, per device and per NCCL link. */
static void print_gpu(const pp_analysis *a, FILE *out)
{
    const pp_gpu_result *g = &a->gpu;
    if (!g->present)
        return;
    fprintf(out, "\nGPU time: %llu records, %llu projected onto pipeline ranges, %llu "
                 "unattributed; step on the GPU %.3f ms; projected %.3f ms of %.3f ms of GPU "
                 "work per step\n",
            (unsigned long long)g->records, (unsigned long long)g->projected,
            (unsigned long long)g->unattributed, ms(g->step_ns), ms(g->projected_ns),
            ms(g->work_ns));
    if (g->adopted)
        fprintf(out, "(%llu of them launched by a thread with no range open, such as PyTorch's "
                     "autograd thread: adopted by their stage's range)\n",
                (unsigned long long)g->adopted);
    fprintf(out, "%-6s %12s %12s %12s %12s %10s %14s\n", "stage", "gpu fwd ms", "gpu bwd ms",
            "gpu busy ms", "host busy ms", "gpu bubble", "launch lag us");
    for (int s = 0; s < g->S && s < a->S; s++) {
        const pp_gpu_stage *x = &g->stages[s];
        fprintf(out, "%-6d %12.3f %12.3f %12.3f %12.3f %9.1f%% %14.1f\n", s,
                ms(x->fwd_median_ns), ms(x->bwd_median_ns), ms(x->busy_ns),
                ms(a->stages[s].busy_ns), 100 * x->bubble_ratio, x->launch_lag_ns * 1e-3);
    }
    for (size_t i = 0; i < g->n_devices; i++)
        fprintf(out, "device %u: busy %.3f ms of %.3f ms, utilisation %.1f%%\n",
                g->devices[i].device, ms(g->devices[i].busy_ns), ms(g->devices[i].span_ns),
                100 * g->devices[i].utilisation);
    for (size_t i = 0; i < g->n_links; i++)
        fprintf(out, "nccl %d -> %d: %llu sends, %.3f MB, algbw %.3f GB/s, busbw %.3f GB/s\n",
                g->links[i].src, g->links[i].dst, (unsigned long long)g->links[i].messages,
                (double)g->links[i].bytes / 1e6, g->links[i].algbw_GBps, g->links[i].busbw_GBps);
}

/* Per link and direction: messages, bytes, bandwidth, latency, wait and send time. */
static void print_links(const pp_analysis *a, FILE *out)
{
    if (!a->n_links)
        return;
    fprintf(out, "\n%-12s %-5s %9s %12s %10s %12s %10s %10s\n", "link", "kind", "messages", "MB",
            "GB/s", "latency us", "wait ms", "send ms");
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        char name[24];
        snprintf(name, sizeof name, "%d -> %d", l->src, l->dst);
        /* no message timed (or no bytes announced): bandwidth and latency unknown */
        char gbps[16] = "-", lat[16] = "-";
        if (l->timed && l->bandwidth_GBps > 0)
            snprintf(gbps, sizeof gbps, "%.3f", l->bandwidth_GBps);
        if (l->timed)
            snprintf(lat, sizeof lat, "%.1f", l->latency_ns.median * 1e-3);
        fprintf(out, "%-12s %-5s %9llu %12.3f %10s %12s %10.3f %10.3f\n", name,
                l->grad ? "grad" : "act", (unsigned long long)l->messages,
                (double)l->bytes / 1e6, gbps, lat, ms(l->wait_ns), ms(l->send_ns));
    }
}

/* The clocks: only when some were estimated (several hosts, or the profiler's test hook). */
static void print_clocks(const pp_analysis *a, FILE *out)
{
    int estimated = 0;
    for (size_t i = 0; i < a->n_files; i++)
        estimated |= a->files[i].clock_status >= PP_CLOCK_ESTIMATED;
    if (!estimated)
        return;
    fprintf(out, "\n%-8s %-16s %14s %12s %16s\n", "rank", "host", "clock offset us", "drift ppm",
            "uncertainty us");
    for (size_t i = 0; i < a->n_files; i++) {
        const pp_afile *f = &a->files[i];
        char rank[16];
        snprintf(rank, sizeof rank, "%d", f->rank >= 0 ? f->rank : (int)i);
        if (f->clock_status == PP_CLOCK_REFERENCE)
            fprintf(out, "%-8s %-16.16s %14s %12s %16s\n", rank, f->host, "reference", "-", "-");
        else if (f->clock_status == PP_CLOCK_ESTIMATED)
            fprintf(out, "%-8s %-16.16s %+14.1f %+12.2f %16.1f\n", rank, f->host,
                    f->clock_offset_ns * 1e-3, f->clock_drift * 1e6,
                    f->clock_uncertainty_ns * 1e-3);
        else if (f->clock_status == PP_CLOCK_UNBOUNDED)
            fprintf(out, "%-8s %-16.16s %14s %12s %16s\n", rank, f->host, "unbounded", "-",
                    "not aligned");
    }
}

void pp_analysis_print(const pp_analysis *a, FILE *out)
{
    if (a->S == 0 && a->n_steps == 0) {
        print_run(a, out);
        print_generic(a, out);
        an_report_memory_text(a, out);
        if (a->warnings[0])
            fprintf(out, "\nwarnings:\n%s", a->warnings);
        return;
    }
    print_summary(a, out);
    print_stages(a, out);
    print_allreduce(a, out);
    print_gpu(a, out);
    print_links(a, out);
    print_clocks(a, out);
    print_generic(a, out);
    an_report_memory_text(a, out);
    if (a->warnings[0])
        fprintf(out, "\nwarnings:\n%s", a->warnings);
}
