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
                                      "bandwidth_GBps (got \"%s\")", mctx, family);
    int a, b;
    int named = pp_check_metric_name_kind(name, &a, &b);
    if (named < 0)
        return PP_ERR(PP_ERR_INVALID,
                      "%s: unknown metric name \"%s\" (pprof-check writes step_ms, throughput, "
                      "bubble_ratio, stageS.fwd_ms, stageS.bwd_ms and "
                      "linkA-B.act|grad.bandwidth_GBps); a renamed metric would match nothing "
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

pp_status pp_check_baseline_read(const cJSON *root, pp_check_run *r)
{
    const char *ctx = r->source;
    double d;
    pp_status st = pp_json_get_int(pp_json_member(root, "baseline_version"), ctx,
                                   "baseline_version", 0, PP_JSON_MAX_EXACT_INT, &d);
    if (st != PP_OK)
        return st;
    if (d != PP_BASELINE_VERSION)
        return PP_ERR(PP_ERR_INVALID, "%s: baseline_version %.0f is not supported (this "
                                      "pprof-check reads baseline_version %d)", ctx, d,
                      PP_BASELINE_VERSION);
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
    r->n_steps = (size_t)d;
    const cJSON *metrics = pp_json_member(root, "metrics");
    if ((st = pp_json_need_array(metrics, ctx, "metrics")) != PP_OK)
        return st;
    if (cJSON_GetArraySize(metrics) == 0)
        return PP_ERR(PP_ERR_INVALID, "%s: \"metrics\" is empty", ctx);
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, metrics)
    {
        char mctx[600];
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

/* One metric on three lines: identity and value, the statistics of its samples (for readers of
 * the file; the reader checks them against the samples), the samples. */
static void put_metric(pp_json_writer *w, const pp_check_metric *m)
{
    pp_json_object_inline(w, NULL);
    pp_check_put_identity(w, m->name, m->kind, m->unit);
    pp_json_put_real(w, "value", m->value);
    pp_json_wrap(w);
    pp_check_sample_stats_t ss;
    if (m->n == 0 || pp_check_sample_stats(m->samples, m->n, &ss) != PP_OK) {
        pp_json_put_null(w, "stats");
    } else {
        pp_json_object(w, "stats");
        pp_json_put_uint(w, "count", m->n);
        for (int k = 0; k < PP_SS_COUNT; k++)
            pp_json_put_real(w, k_stat_names[k], ss.v[k]);
        pp_json_end(w);
    }
    pp_json_wrap(w);
    pp_json_array(w, "samples");
    for (size_t k = 0; k < m->n; k++)
        pp_json_put_real(w, NULL, m->samples[k]);
    pp_json_end(w);
    pp_json_end(w);
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
    pp_json_array(&w, "metrics");
    for (size_t i = 0; i < r->n_metrics; i++)
        put_metric(&w, &r->metrics[i]);
    pp_json_end(&w);
    pp_json_end(&w);
    return pp_json_writer_finish(&w);
}
