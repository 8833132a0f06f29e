/* tune_auto.c: the loop of pprof-tune --auto (pp_tune.h). Iteration 0 runs the job as it is;
 * each later one tunes from the run before, writes OUTDIR/plan<i>.json, runs the job with it
 * (the caller's callback: pprof-run under PPROF_PLAN) and checks that the run ran the plan. The
 * loop stops at --max-iters, when the proposal was already measured (converged), when the
 * measured gain is below 1%, or when the job fails; then the iterations are tabled and the
 * best measured layout is written to OUTDIR/best-plan.json. */
#include "tune_internal.h"

#include "pp_report.h"
#include "html_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct iteration {
    int iter;
    char bounds[512];
    pp_schedule_kind kind;
    int M, v;
    double predicted_ns, measured_ns; /* predicted: the median (noise-free when none) */
    double noise_free_ns;             /* iteration 0: its own layout's noise-free step */
    double p95_ns, measured_p95_ns;   /* predicted (<= 0: none) and measured p95 */
    pp_partition part;
    char plan[PATH_MAX]; /* "" for iter 0 */
    char *gantt_svg;     /* its Gantt chart as inline SVG, for OUTDIR/index.html (NULL: none) */
    pp_aregimes regimes; /* its steps' speed regimes (regime.c) */
    int reruns;          /* runs set aside for their regimes (--rerun-disturbed) */
    pp_aregimes set_aside; /* the regimes of the first one set aside */
    int torch_trace;     /* read from a torch profiler trace (pp_extract.torch_trace) */
    char recompute[256]; /* what it recomputed (pptrain --recompute text), "none" */
    uint64_t peak_bytes; /* its largest stage peak: measured (memory counters), else the model's */
    int peak_measured;   /* 1: peak_bytes from the job's counters */
    int fits;            /* peak_bytes within the memory limit (1 without a limit) */
    /* it > 0: its run against the run its plan came from (pp_tune_speed_compare): the layers'
     * compute per micro-batch in both, and the plan's layout predicted at its speed */
    int has_speed;
    pp_tune_speed speed;
} iteration;

typedef struct auto_state {
    const pp_tune_auto_opts *ao;
    iteration *its;          /* [max_iters + 1] */
    int n_its, best;
    pp_analysis *an;         /* the last measured run */
    pp_extract e;
    pp_extract prev;         /* the run the plan being run was made from (speed comparison) */
    char stop[PATH_MAX + 64];
} auto_state;

static int same_layout(const pp_partition *x, pp_schedule_kind kx, int Mx, const char *rx,
                       const pp_partition *y, pp_schedule_kind ky, int My, const char *ry)
{
    if (x->L != y->L || x->S != y->S || x->v != y->v || kx != ky || Mx != My ||
        strcmp(rx, ry) != 0)
        return 0;
    for (int p = 0; p <= x->P; p++)
        if (x->bounds[p] != y->bounds[p])
            return 0;
    return 1;
}

static void note(const auto_state *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(const auto_state *s, const char *fmt, ...)
{
    if (!s->ao->tune.note)
        return;
    char msg[3 * PATH_MAX + 256]; /* the longest: two paths of an iteration and its number */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    s->ao->tune.note(0, "%s", msg);
}

/* Tunes from iteration it - 1's run and writes the plan for iteration it to `plan`. *converged
 * when the proposal is a layout already measured. */
static pp_status tune_next(auto_state *s, int it, const char *plan, int *converged)
{
    const pp_tune_auto_opts *ao = s->ao;
    char prev[PATH_MAX];
    *converged = 0;
    if (!pp_tune_fmt_into(prev, sizeof prev, "%s/iter%d", ao->outdir, it - 1))
        return PP_ERR(PP_ERR_INVALID, "output directory '%s': path too long", ao->outdir);
    pp_tune_search ts;
    pp_status st = pp_tune_search_run(&ao->tune, prev, &s->e, &ts);
    if (st != PP_OK) {
        pp_tune_search_free(&ts);
        return st;
    }
    const pp_tune_proposal *b = &ts.cands[ts.best];
    int seen = -1;
    for (int k = 0; k < it; k++)
        if (same_layout(&b->part, b->kind, b->M, b->recompute_text, &s->its[k].part,
                        s->its[k].kind, s->its[k].M, s->its[k].recompute))
            seen = k;
    if (seen >= 0) {
        note(s, "iter %d: the best predicted layout is iteration %d's: converged", it, seen);
        snprintf(s->stop, sizeof s->stop, "converged (the proposal was already measured)");
        *converged = 1;
        pp_tune_search_free(&ts);
        return PP_OK;
    }
    st = pp_tune_plan_write(&b->part, b->kind, b->M, s->e.microbatch_size,
                            ao->tune.memory_limit_bytes, b->step_ns, b->bubble, b->dist.median_ns,
                            b->dist.p95_ns, prev, pp_tune_plan_recompute(&s->e, b), plan);
    /* the measured median compares with the predicted median (docs/sim-dist.md) */
    s->its[it].predicted_ns = b->dist.n ? b->dist.median_ns : b->step_ns;
    s->its[it].p95_ns = b->dist.n ? b->dist.p95_ns : -1;
    pp_tune_search_free(&ts);
    if (st != PP_OK)
        return st;
    pp_tune_fmt_into(s->its[it].plan, sizeof s->its[it].plan, "%s", plan);
    /* kept until the plan's run is measured, to tell its speed from the model's error */
    pp_extract_free(&s->prev);
    s->prev = s->e;
    memset(&s->e, 0, sizeof s->e);
    pp_analysis_free(s->an);
    s->an = NULL;
    return PP_OK;
}

/* Loads iteration it's run from `dir`, checks it ran `plan` (it > 0), records it and draws its
 * Gantt picture. */
static pp_status measure(auto_state *s, int it, const char *dir, const char *plan)
{
    const pp_tune_auto_opts *ao = s->ao;
    iteration *cur = &s->its[it];
    pp_extract *e = &s->e;
    pp_status st = pp_tune_load_run(&ao->tune, dir, &s->an, e);
    if (st != PP_OK)
        return st;
    if (it > 0) {
        pp_plan pl;
        if ((st = pp_plan_load(plan, &pl)) != PP_OK)
            return st;
        st = pp_tune_check_ran_plan(dir, e, &pl, plan);
        pp_plan_free(&pl);
        if (st != PP_OK)
            return pp_error_wrap(st, "the job did not run the plan (does it read PPROF_PLAN, or "
                                     "take --plan?)");
        if (pp_tune_speed_compare(&ao->tune, &s->prev, e, &cur->speed) == PP_OK) {
            cur->has_speed = 1;
        } else {
            note(s, "iter %d: its speed is not compared with iteration %d's: %s", it, it - 1,
                 pp_error_message());
            pp_error_clear();
        }
    } else {
        pp_sim_dist_result d;
        if (pp_tune_predict_dist(&ao->tune, e, NULL, e->schedule, &e->partition, e->M, &d) == PP_OK) {
            cur->predicted_ns = d.median_ns;
            cur->noise_free_ns = d.noise_free_ns;
            cur->p95_ns = d.p95_ns;
        } else {
            pp_extract_predict(e, e->schedule, &e->partition, e->M, &cur->predicted_ns, NULL);
            cur->noise_free_ns = cur->predicted_ns;
            cur->p95_ns = -1;
        }
    }
    cur->kind = e->schedule;
    cur->M = e->M;
    cur->v = e->partition.v;
    snprintf(cur->recompute, sizeof cur->recompute, "none");
    if (e->recompute)
        pp_recompute_format(&e->partition, e->recompute, cur->recompute, sizeof cur->recompute);
    /* its memory: what the job's counters measured, else what the model says of its layout */
    cur->peak_bytes = 0;
    cur->peak_measured = s->an->n_mem_stages > 0;
    for (size_t i = 0; i < s->an->n_mem_stages; i++)
        if (s->an->mem_stages[i].total_peak_bytes > (double)cur->peak_bytes)
            cur->peak_bytes = (uint64_t)s->an->mem_stages[i].total_peak_bytes;
    if (!cur->peak_measured && e->has_param_bytes) {
        uint64_t *mem = calloc((size_t)e->partition.S, sizeof *mem);
        if (mem && pp_advise_stage_memory(e->costs, &e->partition, e->schedule, e->M,
                                          e->recompute, mem, NULL) == PP_OK)
            for (int k = 0; k < e->partition.S; k++)
                cur->peak_bytes = mem[k] > cur->peak_bytes ? mem[k] : cur->peak_bytes;
        free(mem);
    }
    cur->fits = !ao->tune.memory_limit_bytes || cur->peak_bytes <= ao->tune.memory_limit_bytes;
    cur->measured_ns = e->measured_step_ns;
    cur->measured_p95_ns = e->measured_p95_ns;
    cur->regimes = s->an->regimes;
    cur->torch_trace = e->torch_trace;
    pp_partition_format(&e->partition, cur->bounds, sizeof cur->bounds);
    if ((st = pp_partition_from_bounds(e->partition.bounds, e->partition.P + 1, e->partition.L,
                                       e->partition.S, e->partition.v, &cur->part)) != PP_OK)
        return st;
    s->n_its = it + 1;
    /* the run's own page (DIR/report.html) and its Gantt for the index page; neither stops the
     * loop when it cannot be written */
    char html[PATH_MAX + 16];
    snprintf(html, sizeof html, "%s/report.html", dir);
    FILE *hf = fopen(html, "w");
    char title[32];
    snprintf(title, sizeof title, "iteration %d", it);
    pp_report_html_opts ho = {.title = title, .command = NULL};
    if (!hf || pp_report_html(s->an, &ho, hf) != PP_OK) {
        note(s, "iter %d: no HTML report: %s", it, hf ? pp_error_message() : strerror(errno));
        pp_error_clear();
    }
    if (hf)
        fclose(hf);
    size_t svg_len = 0;
    FILE *m = open_memstream(&cur->gantt_svg, &svg_len);
    if (m) {
        if (pp_report_gantt_svg(s->an, m) != PP_OK)
            pp_error_clear();
        if (fclose(m) != 0) {
            free(cur->gantt_svg);
            cur->gantt_svg = NULL;
        }
    }
    if (ao->gantt) {
        char png[PATH_MAX + 16];
        snprintf(png, sizeof png, "%s/gantt.png", dir);
        if (pp_report_gantt(s->an, png, NULL) != PP_OK) {
            note(s, "iter %d: no Gantt picture: %s", it, pp_error_message());
            pp_error_clear();
        }
    }
    note(s, "iter %d: boundaries %s, %s, M = %d: measured %.3f ms, predicted %.3f ms", it,
         cur->bounds, pp_schedule_kind_name(cur->kind), cur->M, cur->measured_ns * 1e-6,
         cur->predicted_ns * 1e-6);
    return PP_OK;
}

/* Iteration it's run in `dir` fell into two speed regimes: its directory and log are renamed
 * to iter<it>-disturbed<k> (kept, and named in the notes), and what measure() made of it is
 * dropped, so the job can run again into `dir`. */
static pp_status set_aside(auto_state *s, int it, const char *dir, const char *log)
{
    iteration *r = &s->its[it];
    const pp_aregimes *g = &r->regimes;
    char to[PATH_MAX + 32], to_log[PATH_MAX + 48];
    snprintf(to, sizeof to, "%s-disturbed%d", dir, r->reruns + 1);
    snprintf(to_log, sizeof to_log, "%s-disturbed%d.log", dir, r->reruns + 1);
    if (rename(dir, to) != 0)
        return PP_ERR(PP_ERR_IO, "setting aside the disturbed run %s as %s: %s", dir, to,
                      strerror(errno));
    if (rename(log, to_log) != 0 && errno != ENOENT)
        return PP_ERR(PP_ERR_IO, "setting aside the disturbed run's log %s: %s", log,
                      strerror(errno));
    note(s, "iter %d: its steps fall into two speed regimes (%zu at %.3f ms, %zu at %.3f ms: the "
            "machine changed speed%s): set aside as %s, running it again (--rerun-disturbed)",
         it, g->n_fast, g->fast_median_ns * 1e-6, g->n_slow, g->slow_median_ns * 1e-6,
         r->torch_trace ? ", or the torch profiler's own cost" : "", to);
    if (!r->reruns)
        r->set_aside = *g;
    r->reruns++;
    pp_partition_free(&r->part);
    free(r->gantt_svg);
    r->gantt_svg = NULL;
    r->has_speed = 0;
    pp_analysis_free(s->an);
    s->an = NULL;
    pp_extract_free(&s->e);
    memset(&s->e, 0, sizeof s->e);
    return PP_OK;
}

/* One iteration: tune (it > 0), run, measure. *stop when the loop ends here. */
static pp_status iterate(auto_state *s, int it, int *stop, int *job_failed)
{
    const pp_tune_auto_opts *ao = s->ao;
    char dir[PATH_MAX], log[PATH_MAX + 16], plan[PATH_MAX + 16] = "";
    if (!pp_tune_fmt_into(dir, sizeof dir, "%s/iter%d", ao->outdir, it) ||
        !pp_tune_fmt_into(log, sizeof log, "%s/iter%d.log", ao->outdir, it) ||
        (it > 0 && !pp_tune_fmt_into(plan, sizeof plan, "%s/plan%d.json", ao->outdir, it)))
        return PP_ERR(PP_ERR_INVALID, "output directory '%s': path too long", ao->outdir);
    s->its[it].iter = it;
    pp_status st;
    if (it > 0 && ((st = tune_next(s, it, plan, stop)) != PP_OK || *stop))
        return st;
    for (;;) {
        note(s, "iter %d: running the job%s%s (log %s)", it, it ? " with PPROF_PLAN=" : "",
             it ? plan : "", log);
        int failed = 0;
        if ((st = ao->job.run(ao->job.ctx, it, dir, it ? plan : NULL, log, &failed)) != PP_OK)
            return st;
        if (failed) {
            /* the iterations measured so far still stand: report them and keep the best */
            *job_failed = 1;
            *stop = 1;
            snprintf(s->stop, sizeof s->stop, "the job failed with %s (exit 3)", plan);
            return PP_OK;
        }
        if ((st = measure(s, it, dir, plan)) != PP_OK)
            return st;
        iteration *r = &s->its[it];
        if (!r->regimes.found || r->reruns >= ao->rerun_disturbed)
            break;
        if ((st = set_aside(s, it, dir, log)) != PP_OK)
            return st;
    }
    if (it == 0)
        return PP_OK;
    const iteration *cur = &s->its[it];
    double gain = s->its[s->best].measured_ns / cur->measured_ns - 1;
    int prev_best = s->best;
    /* within the memory limit beats over it; then the faster */
    int fit_gain = cur->fits && !s->its[s->best].fits;
    if (fit_gain || (cur->fits == s->its[s->best].fits &&
                     cur->measured_ns < s->its[s->best].measured_ns))
        s->best = it;
    if (!fit_gain && !cur->fits && ao->tune.memory_limit_bytes) {
        snprintf(s->stop, sizeof s->stop, "iteration %d's plan broke the memory limit as measured "
                 "(the model is off: see --verify)", it);
        *stop = 1;
    } else if (!fit_gain && gain < 0.01) {
        snprintf(s->stop, sizeof s->stop, "measured gain %+.2f%% over iteration %d is below 1%%",
                 100.0 * gain, prev_best);
        *stop = 1;
    }
    return PP_OK;
}

/* OUTDIR/index.html: the iterations' table (predicted against measured, median and p95, the
 * speedup) and each iteration's Gantt chart inline, with a link to its own report. */
static void write_index(const auto_state *s)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/index.html", s->ao->outdir);
    FILE *o = fopen(path, "w");
    if (!o) {
        note(s, "no index page %s: %s", path, strerror(errno));
        return;
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>"
          "pipeprof: pprof-tune --auto</title>\n<style>body{font:14px/1.45 system-ui,sans-serif;"
          "margin:2em auto;max-width:1200px;padding:0 1em}td,th{padding:2px 8px;border-bottom:"
          "1px solid #eee}td.n{text-align:right}th{background:#f4f4f4}h2{border-bottom:1px solid "
          "#ccc}svg text{font:11px system-ui,sans-serif}.legend span{display:inline-block;width:12px;"
          "height:12px;margin:0 4px 0 12px;vertical-align:middle}</style>\n</head>\n<body>\n<h1>pprof-tune "
          "--auto</h1>\n",
          o);
    fprintf(o, "<p id=\"stop\">%d run(s); stopped: ", s->n_its);
    pp_html_esc(o, s->stop); /* the loop's own text, a plan path in it */
    fputs("</p>\n<table id=\"iterations\">\n<tr><th>iter</th><th>schedule</th><th>M</th>"
          "<th>v</th><th>boundaries</th><th>predicted ms</th><th>measured ms</th><th>error</th>"
          "<th>p95 predicted</th><th>p95 measured</th><th>error</th><th>error at the run's "
          "speed</th><th>speedup</th></tr>\n",
          o);
    for (int i = 0; i < s->n_its; i++) {
        const iteration *r = &s->its[i];
        fprintf(o, "<tr%s><td>%d</td><td>%s</td><td class=\"n\">%d</td><td class=\"n\">%d</td>"
                   "<td>%s</td><td class=\"n\" data-key=\"predicted_ms\">%.3f</td>"
                   "<td class=\"n\" data-key=\"measured_ms\">%.3f</td><td class=\"n\">%+.2f%%</td>",
                i == s->best ? " style=\"font-weight:bold\"" : "", r->iter,
                pp_schedule_kind_name(r->kind), r->M, r->v, r->bounds, r->predicted_ns * 1e-6,
                r->measured_ns * 1e-6,
                100.0 * (r->measured_ns - r->predicted_ns) / r->predicted_ns);
        if (r->p95_ns > 0)
            fprintf(o, "<td class=\"n\">%.3f</td><td class=\"n\">%.3f</td><td class=\"n\">%+.2f%%"
                       "</td>",
                    r->p95_ns * 1e-6, r->measured_p95_ns * 1e-6,
                    100.0 * (r->measured_p95_ns - r->p95_ns) / r->p95_ns);
        else
            fprintf(o, "<td>&ndash;</td><td class=\"n\">%.3f</td><td>&ndash;</td>",
                    r->measured_p95_ns * 1e-6);
        if (r->has_speed)
            fprintf(o, "<td class=\"n\" data-key=\"speed_error\" title=\"compute per "
                       "micro-batch %+.2f%% against iteration %d\">%+.2f%%</td>",
                    100.0 * (r->speed.ratio - 1), r->iter - 1,
                    100.0 * (r->measured_ns - r->speed.adjusted.median_ns) /
                        r->speed.adjusted.median_ns);
        else
            fputs("<td>&ndash;</td>", o);
        fprintf(o, "<td class=\"n\">%.3fx%s</td></tr>\n", s->its[0].measured_ns / r->measured_ns,
                i == s->best ? " (best)" : "");
    }
    fputs("</table>\n", o);
    for (int i = 0; i < s->n_its; i++) {
        fprintf(o, "<h2 id=\"iter%d\">Iteration %d: %s</h2>\n<p><a href=\"iter%d/report.html\">"
                   "its report</a></p>\n",
                i, i, s->its[i].bounds, i);
        if (s->its[i].gantt_svg)
            fputs(s->its[i].gantt_svg, o);
    }
    fprintf(o, "<footer>Written by pipeprof %s (pprof-tune --auto).</footer>\n</body>\n</html>\n",
            PP_VERSION);
    if (fclose(o) != 0)
        note(s, "writing the index page %s failed", path);
}

/* The iterations' table, OUTDIR/best-plan.json and the best layout's forms. */
static pp_status print_summary(const auto_state *s, FILE *o)
{
    const pp_tune_auto_opts *ao = s->ao;
    const iteration *its = s->its;
    int best = s->best;
    fprintf(o, "pprof-tune --auto: %d run(s) in %s; stopped: %s\n\n", s->n_its, ao->outdir,
            s->stop);
    /* like with like: the median against the predicted median, the p95 against the p95 */
    fprintf(o, "%-5s %-12s %4s %2s  %-22s %12s %12s %8s %10s %10s %8s %9s\n", "iter", "schedule",
            "M", "v", "boundaries", "predicted ms", "measured ms", "error", "p95 pred", "p95 meas",
            "error", "speedup");
    for (int i = 0; i < s->n_its; i++) {
        const iteration *r = &its[i];
        char p95[3][24] = {"-", "-", "-"};
        if (r->p95_ns > 0) {
            snprintf(p95[0], sizeof p95[0], "%.3f", r->p95_ns * 1e-6);
            snprintf(p95[2], sizeof p95[2], "%+.2f%%",
                     100.0 * (r->measured_p95_ns - r->p95_ns) / r->p95_ns);
        }
        snprintf(p95[1], sizeof p95[1], "%.3f", r->measured_p95_ns * 1e-6);
        fprintf(o, "%-5d %-12s %4d %2d  %-22s %12.3f %12.3f %+7.2f%% %10s %10s %8s %8.3fx%s\n",
                r->iter, pp_schedule_kind_name(r->kind), r->M, r->v, r->bounds,
                r->predicted_ns * 1e-6, r->measured_ns * 1e-6,
                100.0 * (r->measured_ns - r->predicted_ns) / r->predicted_ns, p95[0], p95[1],
                p95[2], its[0].measured_ns / r->measured_ns, i == best ? "  <- best" : "");
    }
    /* memory and recomputation, when a limit was given or some iteration recomputed */
    int any_rc = 0;
    for (int i = 0; i < s->n_its; i++)
        any_rc |= strcmp(its[i].recompute, "none") != 0;
    for (int i = 0; (ao->tune.memory_limit_bytes || any_rc) && i < s->n_its; i++) {
        const iteration *r = &its[i];
        char pb[32], lb[32];
        pp_tune_fmt_bytes(r->peak_bytes, pb, sizeof pb);
        pp_tune_fmt_bytes(ao->tune.memory_limit_bytes, lb, sizeof lb);
        fprintf(o, "iter %d: recompute %s; largest stage peak %s (%s)", r->iter, r->recompute,
                r->peak_bytes ? pb : "unknown", r->peak_measured ? "measured" : "the model's");
        if (ao->tune.memory_limit_bytes)
            fprintf(o, ", %s the limit of %s", r->fits ? "within" : "OVER", lb);
        fputc('\n', o);
    }
    /* runs set aside for their regimes, and the one measured instead */
    for (int i = 0; i < s->n_its; i++) {
        const iteration *r = &its[i];
        if (r->reruns)
            fprintf(o, "iter %d: run %d times; the first run's steps fell into two speed regimes "
                       "(%zu at %.3f ms, %zu at %.3f ms), set aside as %s/iter%d-disturbed1%s; "
                       "the table has the last run%s\n",
                    r->iter, r->reruns + 1, r->set_aside.n_fast,
                    r->set_aside.fast_median_ns * 1e-6, r->set_aside.n_slow,
                    r->set_aside.slow_median_ns * 1e-6, ao->outdir, r->iter,
                    r->reruns > 1 ? " (and the next ones)" : "",
                    r->regimes.found ? ", in two regimes too" : "");
    }
    /* a run in two speed regimes: its median is the mixture's, so the prediction is set against
     * each regime too (docs/metrics.md "Regimes") */
    for (int i = 0; i < s->n_its; i++) {
        const iteration *r = &its[i];
        const pp_aregimes *g = &r->regimes;
        if (!g->found)
            continue;
        fprintf(o, "iter %d: two speed regimes in its steps (the machine changed speed%s): %zu at "
                   "%.3f ms, %zu at %.3f ms; predicted %.3f ms is %+.2f%% from the fast one, "
                   "%+.2f%% from the slow one\n",
                r->iter, r->torch_trace ? ", or the torch profiler's own cost" : "", g->n_fast,
                g->fast_median_ns * 1e-6, g->n_slow,
                g->slow_median_ns * 1e-6, r->predicted_ns * 1e-6,
                100.0 * (g->fast_median_ns - r->predicted_ns) / r->predicted_ns,
                100.0 * (g->slow_median_ns - r->predicted_ns) / r->predicted_ns);
    }
    /* how much of each plan's error is the machine's speed between its run and the run it
     * came from (docs/sim-dist.md "Speed between runs") */
    for (int i = 1; i < s->n_its; i++) {
        const iteration *r = &its[i];
        if (!r->has_speed)
            continue;
        char label[32], base[32];
        snprintf(label, sizeof label, "iter %d speed:", r->iter);
        snprintf(base, sizeof base, "iter %d", r->iter - 1);
        pp_tune_print_speed(&r->speed, r->measured_ns, r->measured_p95_ns, label, base, o);
    }
    char best_plan[PATH_MAX + 32];
    snprintf(best_plan, sizeof best_plan, "%s/best-plan.json", ao->outdir);
    pp_plan pl;
    pp_status st;
    if (best > 0) {
        st = pp_plan_load(its[best].plan, &pl);
    } else {
        /* the original layout stays best: the plan says so */
        char base[PATH_MAX + 16];
        snprintf(base, sizeof base, "%s/iter0", ao->outdir);
        st = pp_tune_plan_make(&its[0].part, its[0].kind, its[0].M, 0,
                               ao->tune.memory_limit_bytes, its[0].noise_free_ns, -1,
                               its[0].predicted_ns, its[0].p95_ns, base, NULL, &pl);
    }
    if (st == PP_OK) {
        st = pp_plan_write(&pl, best_plan);
        pp_plan_free(&pl);
    }
    if (st != PP_OK)
        return st;
    pp_tune_warn_model_error(100.0 * (its[0].measured_ns - its[0].predicted_ns) /
                                 its[0].predicted_ns,
                             its[0].part.S, o);
    fprintf(o, "\nbest: iteration %d, %.3f ms measured (%.3fx vs iter0): %s\n", best,
            its[best].measured_ns * 1e-6, its[0].measured_ns / its[best].measured_ns, best_plan);
    if (s->e.costs && !s->e.stage_level)
        pp_tune_print_framework_forms(s->e.costs, &its[best].part, o);
    if (ao->gantt && s->n_its > 1)
        fprintf(o, "Gantt charts: %s/iter0/gantt.png .. %s/iter%d/gantt.png\n", ao->outdir,
                ao->outdir, s->n_its - 1);
    else if (ao->gantt)
        fprintf(o, "Gantt chart:  %s/iter0/gantt.png\n", ao->outdir);
    fprintf(o, "HTML:         %s/index.html (each iteration's report: iterN/report.html)\n",
            ao->outdir);
    return PP_OK;
}

pp_status pp_tune_auto(const pp_tune_auto_opts *ao, FILE *out, int *job_failed)
{
    auto_state s;
    memset(&s, 0, sizeof s);
    s.ao = ao;
    *job_failed = 0;
    snprintf(s.stop, sizeof s.stop, "reached --max-iters");
    s.its = calloc((size_t)ao->max_iters + 1, sizeof *s.its);
    if (!s.its)
        return PP_ERR(PP_ERR_NOMEM, "out of memory");
    pp_status st = PP_OK;
    for (int it = 0, stop = 0; it <= ao->max_iters && !stop; it++)
        if ((st = iterate(&s, it, &stop, job_failed)) != PP_OK)
            break;
    if (st == PP_OK && !(*job_failed && s.n_its == 0)) {
        st = print_summary(&s, out);
        write_index(&s);
    }
    pp_extract_free(&s.e);
    pp_extract_free(&s.prev);
    pp_analysis_free(s.an);
    for (int i = 0; i <= ao->max_iters; i++) {
        pp_partition_free(&s.its[i].part);
        free(s.its[i].gantt_svg);
    }
    free(s.its);
    return st;
}
