/* check_baseline.c: pprof-check's baseline file (docs/baseline-format.md), both ways: written
 * from a run with its samples and their statistics, read back only as written (known metric
 * names, families, units and directions; statistics that agree with the samples), and the
 * version it owns (PP_BASELINE_VERSION, pp_check.h). */
#define _GNU_SOURCE /* gethostname, gmtime_r */
#include "check_internal.h"
#include "pp_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const k_stat_names[PP_SS_COUNT] = {"mean", "median", "p95", "max", "min"};

/* ---- a baseline's metrics, checked against themselves ---------------------------------- */

/* Equal up to the %.10g the writer prints with (and the rounding of samples read back). */
static int same_number(double a, double b)
{
    return fabs(a - b) <= 1e-8 * fmax(fabs(a), fabs(b)) + 1e-300;
}

/* Name, family, unit and "better" of one baseline metric: known, and agreeing with each other
 * and with the shape. */
static pp_status baseline_metric_identity(const cJSON *m, const char *mctx,
                                          const pp_check_shape *shape, char *name, size_t name_cap,
                                          char *unit, size_t unit_cap, int *kind_out)
{
    char family[32], better[16];
    pp_status st;
    if ((st = pp_json_opt_string(m, mctx, "name", name, name_cap)) != PP_OK ||
        (st = pp_json_opt_string(m, mctx, "family", family, sizeof family)) != PP_OK ||
        (st = pp_json_opt_string(m, mctx, "unit", unit, unit_cap)) != PP_OK ||
        (st = pp_json_opt_string(m, mctx, "better", better, sizeof better)) != PP_OK)
        return st;
    int kind = pp_check_kind_by_name(family);
    if (!name[0] || kind < 0)
        return PP_ERR(PP_ERR_INVALID, "%s: needs a \"name\" and a \"family\" among step_ms, "
                                      "throughput, bubble_ratio, fwd_ms, bwd_ms, "
                                      "bandwidth_GBps, peak_mem_MiB (got \"%s\")", mctx, family);
    int a, b;
    int named = pp_check_metric_name_kind(name, &a, &b);
    if (named < 0)
        return PP_ERR(PP_ERR_INVALID,
                      "%s: unknown metric name \"%s\" (pprof-check writes step_ms, throughput, "
                      "bubble_ratio, stageS.fwd_ms, stageS.bwd_ms, "
                      "linkA-B.act|grad.bandwidth_GBps and stageS.peak_mem_MiB); a renamed metric would match nothing "
                      "in the current run and go ungated", mctx, name);
    if (named != kind)
        return PP_ERR(PP_ERR_INVALID, "%s: metric \"%s\" is of family \"%s\", the file says "
                                      "\"%s\"", mctx, name,
                      pp_check_kind_name((pp_check_kind)named), family);
    if ((kind == PP_CHECK_FWD || kind == PP_CHECK_BWD) && a >= shape->S)
        return PP_ERR(PP_ERR_INVALID, "%s: metric \"%s\" names stage %d, but the shape has %d "
                                      "stage(s) (0..%d)", mctx, name, a, shape->S, shape->S - 1);
    const char *want = pp_check_kind_unit((pp_check_kind)kind, shape);
    if (!unit[0])
        snprintf(unit, unit_cap, "%s", want);
    else if (strcmp(unit, want) != 0)
        return PP_ERR(PP_ERR_INVALID, "%s: metric \"%s\" has unit \"%s\", expected \"%s\"%s",
                      mctx, name, unit, want,
                      kind == PP_CHECK_THROUGHPUT ? " (from the shape's samples_per_step and "
                                                    "tokens_per_step)" : "");
    const char *dir = pp_check_kind_higher_is_better((pp_check_kind)kind) ? "higher" : "lower";
    if (better[0] && strcmp(better, dir) != 0)
        return PP_ERR(PP_ERR_INVALID, "%s: metric \"%s\" says better is \"%s\"; for %s it is "
                                      "\"%s\"", mctx, name, better, family, dir);
    *kind_out = kind;
    return PP_OK;
}

/* Layers whose names are not listed ("layer_names" null: the writer could not list them
 * exactly): their count and fingerprint, as written. */
static pp_status baseline_unlisted_layers(const cJSON *shape, const char *ctx, pp_check_shape *s)
{
    if (s->n_layers > 0)
        return PP_OK;
    double n = 0;
    char fp[32];
    pp_status st;
    if ((st = pp_json_opt_int(shape, ctx, "layers", 0, 1 << 30, 0, &n)) != PP_OK ||
        (st = pp_json_opt_string(shape, ctx, "layer_fingerprint", fp, sizeof fp)) != PP_OK)
        return st;
    if (n == 0 || !fp[0])
        return PP_OK;
    size_t hex = strspn(fp + (strncmp(fp, "fnv1a64:", 8) == 0 ? 8 : 0), "0123456789abcdef");
    if (strncmp(fp, "fnv1a64:", 8) != 0 || hex != 16 || fp[24] != '\0')
        return PP_ERR(PP_ERR_INVALID, "%s: \"layer_fingerprint\" \"%s\" is not fnv1a64: and 16 "
                                      "hex digits", ctx, fp);
    s->n_layers = (int)n;
    memcpy(s->layer_fp, fp, 25);
    return PP_OK;
}

/* "value" and "stats" of a metric with n samples v[]: numbers where numbers belong, and the
 * same as the samples say (a hand-edited file whose summary disagrees with its samples cannot
 * be told apart from a damaged one, and the gate would test numbers nobody looked at). */
static pp_status baseline_metric_consistency(const cJSON *m, const char *mctx, const char *name,
                                             const double *v, size_t n, size_t steps,
                                             int kind)
{
    const cJSON *value = pp_json_member(m, "value");
    if (value && !cJSON_IsNull(value) && !cJSON_IsNumber(value))
        return PP_ERR(PP_ERR_INVALID, "%s: \"value\" of \"%s\" must be a number (got %s)",
                      mctx, name, pp_json_type_name(value));
    const cJSON *stats = pp_json_member(m, "stats");
    if (stats && !cJSON_IsNull(stats) && !cJSON_IsObject(stats))
        return PP_ERR(PP_ERR_INVALID, "%s: \"stats\" of \"%s\" must be an object or null (got "
                                      "%s)", mctx, name, pp_json_type_name(stats));
    if (n > steps)
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" has %zu samples, more than the file's %zu "
                                      "steps", mctx, name, n, steps);
    if (n > 0 && n != steps && (kind == PP_CHECK_STEP || kind == PP_CHECK_THROUGHPUT))
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" has %zu samples, but \"steps\" says %zu (one "
                                      "per analyzed step)", mctx, name, n, steps);
    const cJSON *it;
    if (cJSON_IsObject(stats))
        cJSON_ArrayForEach(it, stats) if (!cJSON_IsNumber(it) && !cJSON_IsNull(it))
            return PP_ERR(PP_ERR_INVALID, "%s: stats.%s of \"%s\" must be a number (got %s)",
                          mctx, it->string, name, pp_json_type_name(it));
    if (n == 0) {
        const cJSON *cnt = cJSON_IsObject(stats) ? pp_json_member(stats, "count") : NULL;
        if (cJSON_IsNumber(cnt) && cnt->valuedouble != 0)
            return PP_ERR(PP_ERR_INVALID, "%s: stats.count of \"%s\" is %.17g, but it has no "
                                          "samples", mctx, name, cnt->valuedouble);
        return PP_OK;
    }
    pp_check_sample_stats_t ss;
    pp_status st = pp_check_sample_stats(v, n, &ss);
    if (st != PP_OK)
        return st;
    if (cJSON_IsNumber(value) && !same_number(value->valuedouble, ss.v[PP_SS_MEDIAN]))
        return PP_ERR(PP_ERR_INVALID, "%s: \"value\" of \"%s\" is %.10g, but the median of its "
                                      "%zu samples is %.10g", mctx, name, value->valuedouble, n,
                      ss.v[PP_SS_MEDIAN]);
    if (!cJSON_IsObject(stats))
        return PP_OK;
    const cJSON *cnt = pp_json_member(stats, "count");
    if (cJSON_IsNumber(cnt) && cnt->valuedouble != (double)n)
        return PP_ERR(PP_ERR_INVALID, "%s: stats.count of \"%s\" is %.17g, but it has %zu "
                                      "samples", mctx, name, cnt->valuedouble, n);
    for (int k = 0; k < PP_SS_COUNT; k++) {
        const cJSON *x = pp_json_member(stats, k_stat_names[k]);
        if (cJSON_IsNumber(x) && !same_number(x->valuedouble, ss.v[k]))
            return PP_ERR(PP_ERR_INVALID, "%s: stats.%s of \"%s\" is %.10g, but its %zu samples "
                                          "give %.10g", mctx, k_stat_names[k], name,
                          x->valuedouble, n, ss.v[k]);
    }
    return PP_OK;
}

/* The metrics array of one run into r (its shape and n_steps set, one run, no metrics yet). */
static pp_status read_metrics(const cJSON *metrics, const char *ctx, pp_check_run *r)
{
    pp_status st;
    if ((st = pp_json_need_array(metrics, ctx, "metrics")) != PP_OK)
        return st;
    if (cJSON_GetArraySize(metrics) == 0)
        return PP_ERR(PP_ERR_INVALID, "%s: \"metrics\" is empty", ctx);
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, metrics)
    {
        char mctx[700];
        snprintf(mctx, sizeof mctx, "%s: metrics[%d]", ctx, i++);
        char name[64], unit[16];
        int kind = -1;
        if ((st = pp_json_need_object(m, mctx, "metric")) != PP_OK)
            return st;
        if ((st = baseline_metric_identity(m, mctx, &r->shape, name, sizeof name, unit,
                                           sizeof unit, &kind)) != PP_OK)
            return st;
        const cJSON *smp = pp_json_member(m, "samples");
        if ((st = pp_json_need_array(smp, mctx, "samples")) != PP_OK)
            return st;
        int n = cJSON_GetArraySize(smp);
        double *v = malloc((n > 0 ? (size_t)n : 1) * sizeof *v);
        if (!v)
            return PP_ERR(PP_ERR_NOMEM, "out of memory reading %s", mctx);
        int k = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, smp)
        {
            if ((st = pp_json_get_real(x, mctx, "samples[]", -PP_CHECK_BIG, PP_CHECK_BIG,
                                       &v[k++])) != PP_OK) {
                free(v);
                return st;
            }
        }
        double value = NAN;
        if ((st = baseline_metric_consistency(m, mctx, name, v, (size_t)n, r->n_steps, kind)) !=
                PP_OK ||
            (n == 0 && (st = pp_json_get_real(pp_json_member(m, "value"), mctx, "value",
                                              -PP_CHECK_BIG, PP_CHECK_BIG, &value)) != PP_OK)) {
            free(v);
            return st;
        }
        st = pp_check_run_add(r, name, (pp_check_kind)kind, v, (size_t)n, value);
        free(v);
        if (st != PP_OK)
            return st;
    }
    return PP_OK;
}

/* A string member that must be valid UTF-8 (a baseline saved from this one writes it back). */
static pp_status read_text(const cJSON *obj, const char *ctx, const char *key, char *buf,
                           size_t cap)
{
    pp_status st = pp_json_opt_string(obj, ctx, key, buf, cap);
    if (st != PP_OK)
        return st;
    if (!pp_json_utf8_valid(buf))
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" is not valid UTF-8", ctx, key);
    return PP_OK;
}

/* Moves the metrics and runs of src (read into a fresh run) into the empty r; frees src. */
static void run_take(pp_check_run *r, pp_check_run *src)
{
    free(r->metrics);
    free(r->runs);
    r->metrics = src->metrics;
    r->n_metrics = src->n_metrics;
    r->runs = src->runs;
    r->n_runs = src->n_runs;
    r->n_steps = src->n_steps;
    src->metrics = NULL;
    src->n_metrics = 0;
    src->runs = NULL;
    src->n_runs = 0;
    pp_check_run_free(src);
}

/* baseline_version 2: "runs", each with its own steps and metrics. */
static pp_status read_runs(const cJSON *root, const char *ctx, size_t steps, pp_check_run *r)
{
    const cJSON *runs = pp_json_member(root, "runs");
    pp_status st = pp_json_need_array(runs, ctx, "runs");
    if (st != PP_OK)
        return st;
    int n = cJSON_GetArraySize(runs);
    if (n == 0 || n > PP_CHECK_MAX_RUNS)
        return PP_ERR(PP_ERR_INVALID, "%s: \"runs\" holds %d runs (1 to %d)", ctx, n,
                      PP_CHECK_MAX_RUNS);
    int i = 0;
    size_t total = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, runs)
    {
        char rctx[640];
        snprintf(rctx, sizeof rctx, "%s: runs[%d]", ctx, i++);
        if ((st = pp_json_need_object(it, rctx, "run")) != PP_OK)
            return st;
        pp_check_run *one = pp_check_run_new(r->source, r->source_kind);
        if (!one)
            return PP_ERR(PP_ERR_NOMEM, "out of memory reading %s", rctx);
        one->shape = r->shape;
        double d;
        pp_check_run_info *info = &one->runs[0];
        if ((st = read_text(it, rctx, "source", info->source, sizeof info->source)) != PP_OK ||
            (st = read_text(it, rctx, "label", info->label, sizeof info->label)) != PP_OK ||
            (st = read_text(it, rctx, "time", info->time, sizeof info->time)) != PP_OK ||
            (st = pp_json_get_int(pp_json_member(it, "steps"), rctx, "steps", 0,
                                  PP_JSON_MAX_EXACT_INT, &d)) != PP_OK) {
            pp_check_run_free(one);
            return st;
        }
        one->n_steps = info->n_steps = (size_t)d;
        total += one->n_steps;
        if ((st = read_metrics(pp_json_member(it, "metrics"), rctx, one)) != PP_OK) {
            pp_check_run_free(one);
            return st;
        }
        if (r->n_metrics == 0 && i == 1) {
            run_take(r, one);
            continue;
        }
        st = pp_check_run_append(r, one);
        pp_check_run_free(one);
        if (st != PP_OK)
            return st;
    }
    if (total != steps)
        return PP_ERR(PP_ERR_INVALID, "%s: \"steps\" is %zu, but its runs hold %zu steps", ctx,
                      steps, total);
    return PP_OK;
}

pp_status pp_check_baseline_read(const cJSON *root, pp_check_run *r)
{
    const char *ctx = r->source;
    double d;
    pp_status st = pp_json_get_int(pp_json_member(root, "baseline_version"), ctx,
                                   "baseline_version", 0, PP_JSON_MAX_EXACT_INT, &d);
    if (st != PP_OK)
        return st;
    if (d != PP_BASELINE_VERSION && d != PP_BASELINE_VERSION_V1)
        return PP_ERR(PP_ERR_INVALID, "%s: baseline_version %.0f is not supported (this "
                                      "pprof-check reads baseline_version %d and %d)", ctx, d,
                      PP_BASELINE_VERSION_V1, PP_BASELINE_VERSION);
    int v1 = d == PP_BASELINE_VERSION_V1;
    const cJSON *prov = pp_json_member(root, "provenance");
    if (prov && !cJSON_IsNull(prov)) {
        char c[600];
        snprintf(c, sizeof c, "%s: provenance", ctx);
        if ((st = pp_json_need_object(prov, ctx, "provenance")) != PP_OK ||
            (st = pp_json_opt_string(prov, c, "source", r->origin, sizeof r->origin)) != PP_OK ||
            (st = pp_json_opt_string(prov, c, "created", r->created, sizeof r->created)) != PP_OK ||
            (st = pp_json_opt_string(prov, c, "host", r->host, sizeof r->host)) != PP_OK ||
            (st = pp_json_opt_string(prov, c, "pipeprof_version", r->version,
                                     sizeof r->version)) != PP_OK)
            return st;
        /* a baseline saved from this one would write U+FFFD for bad bytes, 3 bytes each: past
         * the sizes above */
        const char *const got[] = {r->origin, r->created, r->host, r->version};
        const char *const key[] = {"source", "created", "host", "pipeprof_version"};
        for (int k = 0; k < 4; k++)
            if (!pp_json_utf8_valid(got[k]))
                return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" is not valid UTF-8", c, key[k]);
    }
    const cJSON *shape = pp_json_member(root, "shape");
    if ((st = pp_json_need_object(shape, ctx, "shape")) != PP_OK)
        return st;
    char sctx[600];
    snprintf(sctx, sizeof sctx, "%s: shape", ctx);
    if ((st = pp_check_shape_read(shape, sctx, &r->shape)) != PP_OK)
        return st;
    if ((st = pp_check_shape_read_layers(pp_json_member(shape, "layer_names"), sctx,
                                         "layer_names", &r->shape)) != PP_OK ||
        (st = baseline_unlisted_layers(shape, sctx, &r->shape)) != PP_OK ||
        (st = pp_json_get_int(pp_json_member(root, "steps"), ctx, "steps", 0,
                              PP_JSON_MAX_EXACT_INT, &d)) != PP_OK)
        return st;
    if (!v1)
        return read_runs(root, ctx, (size_t)d, r);
    r->n_steps = (size_t)d;
    r->runs[0].n_steps = r->n_steps;
    snprintf(r->runs[0].source, sizeof r->runs[0].source, "%s", r->origin);
    return read_metrics(pp_json_member(root, "metrics"), ctx, r);
}

/* ---- sets of runs ------------------------------------------------------------------------- */

double pp_check_median_finite(const double *x, size_t n)
{
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return NAN;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i]))
            v[k++] = x[i];
    double m = pp_check_median(v, k);
    free(v);
    return m;
}

size_t pp_check_run_slice(const pp_check_metric *m, size_t k, size_t *off)
{
    size_t o = 0;
    for (size_t j = 0; j < k; j++)
        o += m->run_n[j];
    *off = o;
    return m->run_n[k];
}

static const pp_check_metric *metric_named(const pp_check_run *r, const char *name)
{
    for (size_t i = 0; i < r->n_metrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0)
            return &r->metrics[i];
    return NULL;
}

/* Grows metric m of a set of R0 runs to R1 runs, the new ones from s (runs R0.. of the set
 * are s's runs; s NULL: absent there). */
static pp_status metric_grow(pp_check_metric *m, size_t R0, size_t R1, const pp_check_metric *s)
{
    size_t *rn = realloc(m->run_n, R1 * sizeof *rn);
    if (rn)
        m->run_n = rn;
    double *rv = rn ? realloc(m->run_values, R1 * sizeof *rv) : NULL;
    if (rv)
        m->run_values = rv;
    size_t add = s ? s->n : 0;
    double *smp = rv && add ? realloc(m->samples, (m->n + add) * sizeof *smp) : m->samples;
    if (!rn || !rv || (add && !smp))
        return PP_ERR(PP_ERR_NOMEM, "out of memory joining runs of %s", m->name);
    m->samples = smp;
    for (size_t k = R0; k < R1; k++) {
        m->run_n[k] = s ? s->run_n[k - R0] : 0;
        m->run_values[k] = s ? s->run_values[k - R0] : NAN;
    }
    if (add)
        memcpy(m->samples + m->n, s->samples, add * sizeof *smp);
    m->n += add;
    m->value = pp_check_median_finite(m->run_values, R1);
    return PP_OK;
}

pp_status pp_check_run_append(pp_check_run *dst, const pp_check_run *src)
{
    char diff[512];
    pp_check_shape_diff(&dst->shape, &src->shape, diff, sizeof diff);
    if (diff[0])
        return PP_ERR(PP_ERR_INVALID, "%s and %s are runs of different configurations (%s): the "
                                      "runs of one set must have one shape", dst->source,
                      src->source, diff);
    if (dst->n_runs + src->n_runs > PP_CHECK_MAX_RUNS)
        return PP_ERR(PP_ERR_INVALID, "more than %d runs in one set", PP_CHECK_MAX_RUNS);
    for (size_t i = 0; i < src->n_metrics; i++) {
        const pp_check_metric *d = metric_named(dst, src->metrics[i].name);
        if (d && strcmp(d->unit, src->metrics[i].unit) != 0)
            return PP_ERR(PP_ERR_INVALID, "%s gives %s in %s, %s in %s: the runs of one set "
                                          "must announce the same samples or tokens per step",
                          dst->source, d->name, d->unit, src->source, src->metrics[i].unit);
    }
    size_t R0 = dst->n_runs, R1 = R0 + src->n_runs;
    pp_check_run_info *runs = realloc(dst->runs, R1 * sizeof *runs);
    if (!runs)
        return PP_ERR(PP_ERR_NOMEM, "out of memory joining runs");
    dst->runs = runs;
    memcpy(runs + R0, src->runs, src->n_runs * sizeof *runs);
    if (src->n_runs == 1)
        runs[R0].n_steps = src->n_steps;
    if (R0 == 1)
        runs[0].n_steps = dst->n_steps;
    pp_status st;
    for (size_t i = 0; i < dst->n_metrics; i++)
        if ((st = metric_grow(&dst->metrics[i], R0, R1,
                              metric_named(src, dst->metrics[i].name))) != PP_OK)
            return st;
    for (size_t i = 0; i < src->n_metrics; i++) {
        const pp_check_metric *s = &src->metrics[i];
        if (metric_named(dst, s->name))
            continue;
        pp_check_metric *grown = realloc(dst->metrics, (dst->n_metrics + 1) * sizeof *grown);
        if (!grown)
            return PP_ERR(PP_ERR_NOMEM, "out of memory joining runs");
        dst->metrics = grown;
        pp_check_metric *m = &grown[dst->n_metrics++];
        memset(m, 0, sizeof *m);
        snprintf(m->name, sizeof m->name, "%s", s->name);
        snprintf(m->unit, sizeof m->unit, "%s", s->unit);
        m->kind = s->kind;
        if ((st = metric_grow(m, 0, R0, NULL)) != PP_OK ||
            (st = metric_grow(m, R0, R1, s)) != PP_OK)
            return st;
    }
    dst->n_runs = R1;
    dst->n_steps += src->n_steps;
    if (src->warnings[0] && !strstr(dst->warnings, src->warnings))
        pp_append_line(dst->warnings, sizeof dst->warnings, "%.300s", src->warnings);
    return PP_OK;
}

pp_status pp_check_runs_load(const char *const *paths, size_t n, int warmup, pp_check_run **out)
{
    *out = NULL;
    if (n == 0)
        return PP_ERR(PP_ERR_INVALID, "no run given");
    pp_check_run *set = NULL;
    pp_status st = pp_check_run_load(paths[0], warmup, &set);
    for (size_t i = 1; st == PP_OK && i < n; i++) {
        pp_check_run *one = NULL;
        if ((st = pp_check_run_load(paths[i], warmup, &one)) == PP_OK)
            st = pp_check_run_append(set, one);
        pp_check_run_free(one);
    }
    if (st != PP_OK) {
        pp_check_run_free(set);
        return st;
    }
    if (n > 1) {
        snprintf(set->source, sizeof set->source, "%s and %zu more", paths[0], n - 1);
        /* the set's runs, not the first file's kind */
        snprintf(set->source_kind, sizeof set->source_kind, "runs");
    }
    *out = set;
    return PP_OK;
}

void pp_check_run_label(pp_check_run *r, size_t k, const char *label, const char *time)
{
    if (k >= r->n_runs)
        return;
    if (label)
        snprintf(r->runs[k].label, sizeof r->runs[k].label, "%s", label);
    if (time)
        snprintf(r->runs[k].time, sizeof r->runs[k].time, "%s", time);
}

/* ---- writing a baseline ------------------------------------------------------------------- */

static void now_utc(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else
        snprintf(buf, cap, "unknown");
}

/* "" is unknown: null. */
static const char *or_null(const char *s) { return s && s[0] ? s : NULL; }

static void put_provenance(pp_json_writer *w, const pp_check_run *r, const char *version)
{
    char created[32], host[64] = "";
    now_utc(created, sizeof created);
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    host[sizeof host - 1] = '\0';
    pp_json_object_inline(w, "provenance");
    /* what a reader refuses (not UTF-8: a run directory's path, a host name) is unknown */
    const char *src = r->origin[0] ? r->origin : r->source;
    pp_json_put_str(w, "source", pp_json_utf8_valid(src) ? src : NULL);
    pp_json_put_str(w, "source_kind", r->source_kind);
    pp_json_put_str(w, "created", created);
    pp_json_put_str(w, "host", pp_json_utf8_valid(host) ? or_null(host) : NULL);
    pp_json_put_str(w, "pipeprof_version", or_null(version));
    pp_json_end(w);
}

static void put_shape(pp_json_writer *w, const pp_check_shape *s)
{
    pp_json_object_inline(w, "shape");
    pp_check_shape_put(w, s);
    pp_json_put_int(w, "layers", s->n_layers);
    pp_json_put_str(w, "layer_fingerprint", or_null(s->layer_fp));
    /* listed only when the reader gets back the same names (and so the same fingerprint): not
     * cut short, no name with a comma or over 127 bytes, valid UTF-8 (else the writer's U+FFFD
     * changes them) */
    int commas = 0;
    size_t longest = 0;
    for (const char *c = s->layer_names;; c++) {
        size_t len = strcspn(c, ",");
        longest = len > longest ? len : longest;
        if (!c[len])
            break;
        commas++;
        c += len;
    }
    if (s->n_layers > 0 && strlen(s->layer_names) < sizeof s->layer_names - 1 &&
        commas == s->n_layers - 1 && longest < 128 && pp_json_utf8_valid(s->layer_names)) {
        pp_json_array(w, "layer_names");
        const char *p = s->layer_names;
        for (int i = 0; i < s->n_layers; i++) {
            const char *comma = strchr(p, ',');
            size_t len = comma && i + 1 < s->n_layers ? (size_t)(comma - p) : strlen(p);
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(len < 127 ? len : 127), p);
            pp_json_put_str(w, NULL, name);
            p += len + (comma ? 1 : 0);
        }
        pp_json_end(w);
    } else {
        pp_json_put_null(w, "layer_names"); /* too many to list: the fingerprint names them */
    }
    pp_json_end(w);
}

/* Run k of one metric on three lines: identity and value, the statistics of its samples (for
 * readers of the file; the reader checks them against the samples), the samples. */
static void put_metric(pp_json_writer *w, const pp_check_metric *m, size_t k)
{
    size_t off, n = pp_check_run_slice(m, k, &off);
    const double *x = n ? m->samples + off : NULL; /* no samples: no pointer arithmetic on NULL */
    pp_json_object_inline(w, NULL);
    pp_check_put_identity(w, m->name, m->kind, m->unit);
    pp_json_put_real(w, "value", m->run_values[k]);
    pp_json_wrap(w);
    pp_check_sample_stats_t ss;
    if (n == 0 || pp_check_sample_stats(x, n, &ss) != PP_OK) {
        pp_json_put_null(w, "stats");
    } else {
        pp_json_object(w, "stats");
        pp_json_put_uint(w, "count", n);
        for (int j = 0; j < PP_SS_COUNT; j++)
            pp_json_put_real(w, k_stat_names[j], ss.v[j]);
        pp_json_end(w);
    }
    pp_json_wrap(w);
    pp_json_array(w, "samples");
    for (size_t j = 0; j < n; j++)
        pp_json_put_real(w, NULL, x[j]);
    pp_json_end(w);
    pp_json_end(w);
}

/* A string the reader takes back (valid UTF-8), else null. */
static void put_text(pp_json_writer *w, const char *key, const char *s)
{
    pp_json_put_str(w, key, s && s[0] && pp_json_utf8_valid(s) ? s : NULL);
}

pp_status pp_check_baseline_write(const pp_check_run *r, const char *version, FILE *f)
{
    pp_json_writer w;
    pp_json_writer_init(&w, f, "the baseline", PP_JSON_PRETTY);
    pp_json_object(&w, NULL);
    pp_json_put_int(&w, "baseline_version", PP_BASELINE_VERSION);
    pp_json_put_str(&w, "generator", "pipeprof pprof-check");
    put_provenance(&w, r, version);
    put_shape(&w, &r->shape);
    pp_json_put_uint(&w, "steps", r->n_steps);
    pp_json_array(&w, "runs");
    for (size_t k = 0; k < r->n_runs; k++) {
        const pp_check_run_info *info = &r->runs[k];
        pp_json_object(&w, NULL);
        put_text(&w, "source", info->source);
        put_text(&w, "label", info->label);
        put_text(&w, "time", info->time);
        pp_json_put_uint(&w, "steps", r->n_runs == 1 ? r->n_steps : info->n_steps);
        pp_json_array(&w, "metrics");
        for (size_t i = 0; i < r->n_metrics; i++)
            if (isfinite(r->metrics[i].run_values[k]) || r->metrics[i].run_n[k] > 0)
                put_metric(&w, &r->metrics[i], k);
        pp_json_end(&w);
        pp_json_end(&w);
    }
    pp_json_end(&w);
    pp_json_end(&w);
    return pp_json_writer_finish(&w);
}
