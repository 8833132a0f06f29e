/* check_compare.c: pprof-check's comparison (pp_check.h): options and --threshold, the shape
 * check, one row per metric of either run, the test on every metric with samples on both sides
 * and the verdicts against the thresholds (docs/cli/pprof-check.md). */
#include "check_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ======================================================================================== */
/* Comparison                                                                                 */
/* ======================================================================================== */

void pp_check_options_default(pp_check_options *o)
{
    memset(o, 0, sizeof *o);
    o->alpha = PP_CHECK_ALPHA_DEFAULT;
    o->holm = 1;
    o->bootstrap_reps = PP_CHECK_BOOTSTRAP_DEFAULT;
    o->seed = 20240601;
    o->power = PP_CHECK_POWER_DEFAULT;
    o->permutations = PP_CHECK_PERMUTATIONS_DEFAULT;
    o->min_segment = PP_CHECK_MIN_SEGMENT_DEFAULT;
    for (int k = 0; k < PP_CHECK_KIND_COUNT; k++)
        o->threshold[k] = pp_check_kind_default_threshold((pp_check_kind)k);
}

/* A family name, or one metric's name as pprof-check writes it. */
static int valid_metric_name(const char *s)
{
    int a, b;
    return pp_check_kind_by_name(s) >= 0 || pp_check_metric_name_kind(s, &a, &b) >= 0;
}

pp_status pp_check_threshold_parse(pp_check_options *o, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        return PP_ERR(PP_ERR_INVALID, "--threshold '%s': expected METRIC=PCT, e.g. step_ms=5 or "
                                      "stage2.fwd_ms=4%%", arg);
    char name[64];
    size_t n = (size_t)(eq - arg);
    if (n >= sizeof name)
        return PP_ERR(PP_ERR_INVALID, "--threshold '%s': metric name too long", arg);
    memcpy(name, arg, n);
    name[n] = '\0';
    if (!valid_metric_name(name))
        return PP_ERR(PP_ERR_INVALID, "--threshold '%s': unknown metric '%s' (a family: step_ms, "
                                      "throughput, bubble_ratio, fwd_ms, bwd_ms, bandwidth_GBps, "
                                      "peak_mem_MiB; or one metric: stage2.fwd_ms, "
                                      "link0-1.act.bandwidth_GBps, stage0.peak_mem_MiB)",
                      arg, name);
    char num[64];
    snprintf(num, sizeof num, "%s", eq + 1);
    size_t len = strlen(num);
    if (len > 0 && num[len - 1] == '%')
        num[len - 1] = '\0';
    double v;
    pp_status st = pp_parse_f64(num, "--threshold percentage", 0, 1000, &v);
    if (st != PP_OK)
        return pp_error_wrap(st, "--threshold '%s'", arg);
    int k = pp_check_kind_by_name(name);
    if (k >= 0) {
        o->threshold[k] = v;
        return PP_OK;
    }
    for (int i = 0; i < o->n_overrides; i++)
        if (strcmp(o->overrides[i].metric, name) == 0) {
            o->overrides[i].value = v;
            return PP_OK;
        }
    if (o->n_overrides >= PP_CHECK_MAX_OVERRIDES)
        return PP_ERR(PP_ERR_INVALID, "--threshold: at most %d per-metric thresholds",
                      PP_CHECK_MAX_OVERRIDES);
    snprintf(o->overrides[o->n_overrides].metric, sizeof o->overrides[0].metric, "%s", name);
    o->overrides[o->n_overrides++].value = v;
    return PP_OK;
}

static double threshold_of(const pp_check_options *o, const char *name, pp_check_kind k)
{
    for (int i = 0; i < o->n_overrides; i++)
        if (strcmp(o->overrides[i].metric, name) == 0)
            return o->overrides[i].value;
    return o->threshold[k];
}

void pp_check_result_free(pp_check_result *r) { if (r) { free(r->rows); free(r); } }

int pp_check_failed(const pp_check_result *r) { return r && r->n_regressions > 0; }

/* Which shape fields differ, as "M 8 -> 16, schedule 1f1b -> gpipe"; "" when comparable. */
void pp_check_shape_diff(const pp_check_shape *a, const pp_check_shape *b, char *buf, size_t cap)
{
    buf[0] = '\0';
    size_t len = 0;
#define ADD(...)                                                                                 \
    do {                                                                                         \
        if (len < cap) {                                                                         \
            int w_ = snprintf(buf + len, cap - len, "%s", len ? ", " : "");                      \
            len += w_ > 0 ? (size_t)w_ : 0;                                                      \
        }                                                                                        \
        if (len < cap) {                                                                         \
            int w_ = snprintf(buf + len, cap - len, __VA_ARGS__);                                \
            len += w_ > 0 ? (size_t)w_ : 0;                                                      \
        }                                                                                        \
    } while (0)
    if (a->S != b->S)
        ADD("stages S %d -> %d", a->S, b->S);
    if (a->M > 0 && b->M > 0 && a->M != b->M)
        ADD("micro-batches M %d -> %d", a->M, b->M);
    else if ((a->M > 0) != (b->M > 0))
        ADD("micro-batches M %d -> %d (0 = unknown)", a->M, b->M);
    if (a->v != b->v)
        ADD("virtual stages v %d -> %d", a->v, b->v);
    if (strcmp(a->schedule, b->schedule) != 0)
        ADD("schedule %s -> %s", a->schedule[0] ? a->schedule : "(unknown)",
            b->schedule[0] ? b->schedule : "(unknown)");
    if (a->n_layers > 0 && b->n_layers > 0) {
        if (a->n_layers != b->n_layers)
            ADD("layers %d -> %d", a->n_layers, b->n_layers);
        else if (strcmp(a->layer_fp, b->layer_fp) != 0)
            ADD("layer names (model) %.60s -> %.60s", a->layer_names, b->layer_names);
    }
    if (a->samples_per_step > 0 && b->samples_per_step > 0 &&
        fabs(a->samples_per_step - b->samples_per_step) > 1e-9 * a->samples_per_step)
        ADD("samples per step %g -> %g", a->samples_per_step, b->samples_per_step);
    if (a->tokens_per_step > 0 && b->tokens_per_step > 0 &&
        fabs(a->tokens_per_step - b->tokens_per_step) > 1e-9 * a->tokens_per_step)
        ADD("tokens per step %g -> %g", a->tokens_per_step, b->tokens_per_step);
#undef ADD
}

static const pp_check_metric *find_metric(const pp_check_run *r, const char *name)
{
    for (size_t i = 0; i < r->n_metrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0)
            return &r->metrics[i];
    return NULL;
}

/* Smallest two-sided p-value Mann-Whitney can give for sizes m, n: 2 / C(m+n, m). */
static double min_p(size_t m, size_t n)
{
    double lc = lgamma((double)(m + n + 1)) - lgamma((double)(m + 1)) - lgamma((double)(n + 1));
    return fmin(1.0, 2 * exp(-lc));
}

/* The runs of a set of R that have metric m. */
static size_t runs_with(const pp_check_metric *m, size_t R)
{
    size_t k = 0;
    for (size_t i = 0; i < R; i++)
        k += isfinite(m->run_values[i]) ? 1 : 0;
    return k;
}

static void row_fill(pp_check_row *w, const pp_check_metric *b, size_t nb,
                     const pp_check_metric *c, size_t nc, const pp_check_options *o)
{
    const pp_check_metric *m = b ? b : c;
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", m->name);
    snprintf(w->unit, sizeof w->unit, "%s", m->unit);
    w->kind = m->kind;
    w->higher_is_better = pp_check_kind_higher_is_better(m->kind);
    w->absolute = pp_check_kind_is_absolute(m->kind);
    w->threshold = threshold_of(o, m->name, m->kind);
    w->base = b ? b->value : NAN;
    w->cur = c ? c->value : NAN;
    w->n_base = b ? b->n : 0;
    w->n_cur = c ? c->n : 0;
    w->runs_base = b ? runs_with(b, nb) : 0;
    w->runs_cur = c ? runs_with(c, nc) : 0;
    w->u = w->t = w->df = w->p = w->p_adj = w->ci_lo = w->ci_hi = w->run_sd = NAN;
    w->detectable = NAN;
    if (!b || !c) {
        w->change = NAN;
        w->verdict = PP_VERDICT_MISSING;
        return;
    }
    if (strcmp(b->unit, c->unit) != 0) {
        /* throughput is samples/s, tokens/s or steps/s by what each run announced: numbers in
         * different units are not a change, and are not tested */
        w->change = NAN;
        w->verdict = PP_VERDICT_MISSING;
        w->unit_differs = 1;
        snprintf(w->unit_cur, sizeof w->unit_cur, "%s", c->unit);
        return;
    }
    if (w->absolute)
        w->change = (w->cur - w->base) * 100;
    else if (w->base != 0)
        w->change = (w->cur / w->base - 1) * 100;
    else
        w->change = w->cur == 0 ? 0 : NAN;
}

/* The result's header and one row per metric of either run (the baseline's order, then the
 * current run's additions). */
static pp_check_result *result_new(const pp_check_run *base, const pp_check_run *cur,
                                   const pp_check_options *o, const char *sb, const char *sc,
                                   const char *diff)
{
    pp_check_result *r = calloc(1, sizeof *r);
    size_t cap = base->n_metrics + cur->n_metrics;
    if (r)
        r->rows = calloc(cap ? cap : 1, sizeof *r->rows);
    if (!r || !r->rows) {
        pp_check_result_free(r);
        return NULL;
    }
    snprintf(r->base_source, sizeof r->base_source, "%s", base->source);
    snprintf(r->cur_source, sizeof r->cur_source, "%s", cur->source);
    snprintf(r->base_kind, sizeof r->base_kind, "%s", base->source_kind);
    snprintf(r->cur_kind, sizeof r->cur_kind, "%s", cur->source_kind);
    snprintf(r->base_shape, sizeof r->base_shape, "%s", sb);
    snprintf(r->cur_shape, sizeof r->cur_shape, "%s", sc);
    r->base_steps = base->n_steps;
    r->cur_steps = cur->n_steps;
    r->base_runs = base->n_runs;
    r->cur_runs = cur->n_runs;
    r->alpha = o->alpha;
    r->power = o->power;
    r->holm = o->holm;
    r->bootstrap_reps = o->per_step ? o->bootstrap_reps : 0;
    r->per_step = o->per_step;
    if (diff[0]) {
        r->shape_differs = 1;
        pp_append_line(r->notes, sizeof r->notes, "shapes differ (%s), compared anyway "
                       "(--allow-shape-change)", diff);
    }
    for (size_t i = 0; i < base->n_metrics; i++) {
        const pp_check_metric *b = &base->metrics[i];
        row_fill(&r->rows[r->n_rows++], b, base->n_runs, find_metric(cur, b->name),
                 cur->n_runs, o);
    }
    for (size_t i = 0; i < cur->n_metrics; i++)
        if (!find_metric(base, cur->metrics[i].name))
            row_fill(&r->rows[r->n_rows++], NULL, base->n_runs, &cur->metrics[i], cur->n_runs,
                     o);
    return r;
}

/* Row w's test on the samples of both sides and the bootstrap interval of its change. */
static pp_status test_row(pp_check_row *w, const pp_check_metric *b, const pp_check_metric *c,
                          const pp_check_options *o)
{
    pp_check_mwu t;
    pp_status st = pp_check_mann_whitney(b->samples, b->n, c->samples, c->n, &t);
    if (st != PP_OK)
        return st;
    w->tested = 1;
    w->test = "mann-whitney";
    w->exact = t.exact;
    w->u = t.u;
    w->p = t.p;
    if (o->bootstrap_reps <= 0)
        return PP_OK;
    uint64_t seed = pp_check_fnv1a(o->seed ^ PP_CHECK_FNV_OFFSET, w->name, strlen(w->name));
    double lo, hi;
    if ((st = pp_check_bootstrap(b->samples, b->n, c->samples, c->n, !w->absolute, 1 - o->alpha,
                                 o->bootstrap_reps, seed, &lo, &hi)) != PP_OK)
        return st;
    if (isfinite(lo) && isfinite(hi)) {
        w->has_ci = 1;
        w->ci_lo = lo * 100;
        w->ci_hi = hi * 100;
    }
    return PP_OK;
}

/* How many runs a change of each tested metric's threshold needs (at Holm's strictest level,
 * `need`), and the notes that say it. */
static void power_statement(pp_check_result *r, double need, const pp_check_options *o)
{
    const pp_check_row *worst = NULL, *step = NULL;
    for (size_t i = 0; i < r->n_rows; i++) {
        pp_check_row *w = &r->rows[i];
        if (!w->tested || !isfinite(w->run_sd))
            continue;
        /* the threshold on the scale the test works on */
        double delta = w->absolute ? w->threshold : log1p(w->threshold / 100) * 100;
        w->runs_needed = pp_check_runs_needed(delta, w->run_sd, need, o->power, 1000);
        w->detectable = pp_check_detectable(w->run_sd, w->runs_base, w->runs_cur, need, o->power);
        if (!w->absolute && isfinite(w->detectable)) /* back from the log scale */
            w->detectable = expm1(w->detectable / 100) * 100;
        if (w->runs_needed > 0 && (!worst || w->runs_needed > worst->runs_needed))
            worst = w;
        if (w->kind == PP_CHECK_STEP)
            step = w;
    }
    if (r->threshold_only)
        pp_append_line(r->notes, sizeof r->notes,
                       "one run on each side: run-to-run noise cannot be told from a change, so "
                       "the thresholds alone decided (no p-value); steps of one run share its "
                       "conditions, and runs of one job on a real machine differ by more than "
                       "its steps do: give the baseline several runs (--save-baseline RUN "
                       "RUN..., --add-run) or check several current runs");
    if (!worst)
        return;
    r->runs_needed = worst->runs_needed;
    const pp_check_row *say = step ? step : worst;
    char more[160] = "";
    if (worst != say)
        snprintf(more, sizeof more, "; the most any metric needs is %d (%s)",
                 worst->runs_needed, worst->name);
    char n[32];
    if (say->runs_needed > 1000)
        snprintf(n, sizeof n, "more than 1000");
    else
        snprintf(n, sizeof n, "%d", say->runs_needed);
    char now[160] = "";
    if (isfinite(say->detectable))
        snprintf(now, sizeof now, ", which detect changes of %s beyond %.3g%s", say->name,
                 say->detectable, say->absolute ? " pt" : "%");
    pp_append_line(r->notes, sizeof r->notes,
                   "power: the runs' %s scatter by %.3g%s (standard deviation of their medians); "
                   "detecting a change of its threshold (%g%s) with probability %g at level "
                   "%.3g needs %s runs per side%s; this check has %zu and %zu%s",
                   say->name, say->run_sd, say->absolute ? " pt" : "%", say->threshold,
                   say->absolute ? " pt" : "%", o->power, need, n, more, r->base_runs,
                   r->cur_runs, now);
}

/* The finite run values of m (logarithms when *logs and all are positive; *logs cleared when
 * some is not) into v; their count. */
static size_t run_values(const pp_check_metric *m, size_t R, double *v)
{
    size_t k = 0;
    for (size_t i = 0; i < R; i++)
        if (isfinite(m->run_values[i]))
            v[k++] = m->run_values[i];
    return k;
}

static int all_positive(const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(v[i] > 0))
            return 0;
    return 1;
}

static double mean_of(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return s / (double)n;
}

/* Row w's run-level test: Welch's t on the runs' medians (on their logarithms for a change in
 * percent), the pooled t when one side has one run, nothing but the threshold with one run a
 * side. The row's values and change become the (geometric) means of the runs' medians, the
 * estimate the test is about. bv and cv hold room for the runs. */
static pp_status test_row_runs(pp_check_row *w, const pp_check_metric *b, size_t Rb,
                               const pp_check_metric *c, size_t Rc, const pp_check_options *o,
                               double *bv, double *cv)
{
    size_t nb = run_values(b, Rb, bv), nc = run_values(c, Rc, cv);
    /* metrics without per-step samples (link bandwidth: one figure per run, scattered far more
     * than the runs' step times) stay reported, untested, as they were */
    if (nb == 0 || nc == 0 || b->n == 0 || c->n == 0)
        return PP_OK;
    int logs = !w->absolute && all_positive(bv, nb) && all_positive(cv, nc);
    for (size_t i = 0; logs && i < nb; i++)
        bv[i] = log(bv[i]);
    for (size_t i = 0; logs && i < nc; i++)
        cv[i] = log(cv[i]);
    double mb = mean_of(bv, nb), mc = mean_of(cv, nc);
    w->base = logs ? exp(mb) : mb;
    w->cur = logs ? exp(mc) : mc;
    if (w->absolute)
        w->change = (w->cur - w->base) * 100;
    else if (logs)
        w->change = expm1(mc - mb) * 100;
    else if (w->base != 0)
        w->change = (w->cur / w->base - 1) * 100;
    if (nb < 2 && nc < 2) {
        w->test = "threshold-only";
        return PP_OK;
    }
    pp_check_ttest t;
    pp_status st = pp_check_welch(bv, nb, cv, nc, 1 - o->alpha, &t);
    if (st != PP_OK)
        return st;
    w->tested = 1;
    w->test = t.pooled ? "pooled-t" : "welch";
    w->t = t.t;
    w->df = t.df;
    w->p = t.p;
    double scale = logs || w->absolute ? 100 : 100 / w->base;
    if (isfinite(t.lo) && isfinite(t.hi)) {
        w->has_ci = 1;
        w->ci_lo = logs ? expm1(t.lo) * 100 : t.lo * scale;
        w->ci_hi = logs ? expm1(t.hi) * 100 : t.hi * scale;
    }
    /* the runs' scatter: the pooled standard deviation of both sides */
    double q = 0, dfs = 0;
    const double *side[2] = {bv, cv};
    size_t cnt[2] = {nb, nc};
    for (int s = 0; s < 2; s++) {
        if (cnt[s] < 2)
            continue;
        double m = mean_of(side[s], cnt[s]);
        for (size_t i = 0; i < cnt[s]; i++)
            q += (side[s][i] - m) * (side[s][i] - m);
        dfs += (double)(cnt[s] - 1);
    }
    w->run_sd = sqrt(q / dfs) * scale;
    return PP_OK;
}

/* The test on every metric with samples on both sides, then Holm's adjustment over them. */
static pp_status test_rows(pp_check_result *r, const pp_check_run *base, const pp_check_run *cur,
                           const pp_check_options *o)
{
    pp_status st = PP_OK;
    size_t cap = r->n_rows ? r->n_rows : 1;
    double *p = malloc(cap * sizeof *p), *adj = malloc(cap * sizeof *adj);
    size_t *idx = malloc(cap * sizeof *idx);
    double *bv = malloc(base->n_runs * sizeof *bv), *cv = malloc(cur->n_runs * sizeof *cv);
    if (!p || !adj || !idx || !bv || !cv) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory comparing runs");
        goto done;
    }
    size_t nt = 0;
    double worst_min_p = 0;
    for (size_t i = 0; i < r->n_rows; i++) {
        pp_check_row *w = &r->rows[i];
        const pp_check_metric *b = find_metric(base, w->name), *c = find_metric(cur, w->name);
        if (!b || !c || w->unit_differs)
            continue;
        if (!o->per_step) {
            if ((st = test_row_runs(w, b, base->n_runs, c, cur->n_runs, o, bv, cv)) != PP_OK)
                goto done;
            if (w->test && !w->tested)
                r->threshold_only = 1;
            if (!w->tested)
                continue;
        } else {
            if (b->n == 0 || c->n == 0)
                continue;
            if (base->n_runs > 1 || cur->n_runs > 1) { /* the medians of the pooled steps */
                w->base = pp_check_median(b->samples, b->n);
                w->cur = pp_check_median(c->samples, c->n);
                if (w->absolute)
                    w->change = (w->cur - w->base) * 100;
                else if (w->base != 0)
                    w->change = (w->cur / w->base - 1) * 100;
            }
            if ((st = test_row(w, b, c, o)) != PP_OK)
                goto done;
            worst_min_p = fmax(worst_min_p, min_p(b->n, c->n));
        }
        p[nt] = w->p;
        idx[nt++] = i;
    }
    r->n_tested = (int)nt;
    if (o->holm) {
        if ((st = pp_check_holm(p, nt, adj)) != PP_OK)
            goto done;
    } else {
        memcpy(adj, p, nt * sizeof *adj);
    }
    for (size_t k = 0; k < nt; k++)
        r->rows[idx[k]].p_adj = adj[k];
    double need = o->holm && nt > 0 ? o->alpha / (double)nt : o->alpha;
    if (!o->per_step)
        power_statement(r, need, o);
    if (nt > 0 && worst_min_p >= need)
        pp_append_line(r->notes, sizeof r->notes,
                       "too few steps to ever be significant: with %zu and %zu steps the smallest "
                       "possible p is %.3g, not below %.3g (alpha%s); capture more steps",
                       base->n_steps, cur->n_steps, worst_min_p, need,
                       o->holm ? " / tested metrics, Holm" : "");
done:
    free(p);
    free(adj);
    free(idx);
    free(bv);
    free(cv);
    return st;
}

/* Each row's verdict from its change, its threshold and its adjusted p-value; the counts and the
 * notes on rows that could not be compared. */
static void judge_rows(pp_check_result *r, const pp_check_options *o)
{
    for (size_t i = 0; i < r->n_rows; i++) {
        pp_check_row *w = &r->rows[i];
        if (w->verdict == PP_VERDICT_MISSING) {
            if (w->unit_differs)
                pp_append_line(r->notes, sizeof r->notes, "%s not compared: the baseline has it "
                               "in %s, the current run in %s (they announce different sample or "
                               "token counts)", w->name, w->unit, w->unit_cur);
            else
                pp_append_line(r->notes, sizeof r->notes, "%s is only in the %s run", w->name,
                               isfinite(w->base) ? "baseline" : "current");
            continue;
        }
        double ch = w->change;
        int beyond = isfinite(ch) && fabs(ch) > w->threshold;
        int worse = w->higher_is_better ? ch < 0 : ch > 0;
        int threshold_only = w->test && strcmp(w->test, "threshold-only") == 0;
        if (!beyond)
            w->verdict = PP_VERDICT_OK;
        else if (threshold_only)
            w->verdict = worse ? PP_VERDICT_REGRESSION : PP_VERDICT_IMPROVEMENT;
        else if (!w->tested)
            w->verdict = !pp_check_kind_is_deterministic(w->kind) ? PP_VERDICT_CHANGED
                         : worse                                  ? PP_VERDICT_REGRESSION
                                                                  : PP_VERDICT_IMPROVEMENT;
        else if (w->p_adj < o->alpha)
            w->verdict = worse ? PP_VERDICT_REGRESSION : PP_VERDICT_IMPROVEMENT;
        else
            w->verdict = PP_VERDICT_NOISE;
        switch (w->verdict) {
        case PP_VERDICT_REGRESSION: r->n_regressions++; break;
        case PP_VERDICT_IMPROVEMENT: r->n_improvements++; break;
        case PP_VERDICT_NOISE: r->n_noise++; break;
        case PP_VERDICT_CHANGED: r->n_changed++; break;
        default: break;
        }
    }
}

pp_status pp_check_compare(const pp_check_run *base, const pp_check_run *cur,
                           const pp_check_options *o, pp_check_result **out)
{
    *out = NULL;
    char diff[512];
    pp_check_shape_diff(&base->shape, &cur->shape, diff, sizeof diff);
    char sb[160], sc[160];
    pp_check_shape_format(&base->shape, sb, sizeof sb);
    pp_check_shape_format(&cur->shape, sc, sizeof sc);
    if (diff[0] && !o->allow_shape_change)
        return PP_ERR(PP_ERR_INVALID, "the runs have different shapes (%s): baseline %s is %s, "
                                      "current %s is %s; their numbers are not comparable "
                                      "(--allow-shape-change compares them anyway)",
                      diff, base->source, sb, cur->source, sc);
    pp_check_result *r = result_new(base, cur, o, sb, sc, diff);
    if (!r)
        return PP_ERR(PP_ERR_NOMEM, "out of memory comparing runs");
    pp_status st = test_rows(r, base, cur, o);
    if (st != PP_OK) {
        pp_check_result_free(r);
        return st;
    }
    judge_rows(r, o);
    if (o->per_step && (base->n_runs > 1 || cur->n_runs > 1))
        pp_append_line(r->notes, sizeof r->notes, "--per-step pools the steps of %zu and %zu "
                       "runs as independent samples: right where steps are (the sim backend), "
                       "not where runs differ from each other (real machines)",
                       base->n_runs, cur->n_runs);
    if (base->warnings[0])
        pp_append_line(r->notes, sizeof r->notes, "baseline %s has warnings: %.200s",
                       base->source, base->warnings);
    if (cur->warnings[0])
        pp_append_line(r->notes, sizeof r->notes, "current %s has warnings: %.200s", cur->source,
                       cur->warnings);
    *out = r;
    return PP_OK;
}
