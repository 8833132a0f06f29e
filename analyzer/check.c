/* check.c: pprof-check's runs (pp_check.h): the metric families, and a run's metrics with their
 * per-step samples from an analysis, a run directory, a summary JSON (read by summary.c) or a
 * baseline file (check_baseline.c). The statistics are check_stats.c, the comparison
 * check_compare.c, the outputs check_output.c. */
#include "check_internal.h"
#include "pp_json.h"
#include "pp_kineto.h"
#include "pp_summary.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ======================================================================================== */
/* Families                                                                                   */
/* ======================================================================================== */

/* What pprof-check knows of each family, in one place (a new family is a row here, its
 * samples in pp_check_run_from_analysis and pp_summary_read, its metric names in
 * pp_check_metric_name_kind). Default thresholds: % of the baseline, points for the bubble
 * (docs/cli/pprof-check.md says why). */
static const struct family {
    const char *name;
    const char *unit;     /* NULL: throughput's, from what the shape announces */
    int higher_is_better;
    int absolute;         /* change and threshold in percentage points of the value */
    double threshold;
    int deterministic;    /* judged by its change alone (pp_check_kind_is_deterministic) */
} k_families[PP_CHECK_KIND_COUNT] = {
    [PP_CHECK_STEP] = {"step_ms", "ms", 0, 0, 2.0, 0},
    [PP_CHECK_THROUGHPUT] = {"throughput", NULL, 1, 0, 2.0, 0},
    [PP_CHECK_BUBBLE] = {"bubble_ratio", "ratio", 0, 1, 2.0, 0},
    [PP_CHECK_FWD] = {"fwd_ms", "ms", 0, 0, 3.0, 0},
    [PP_CHECK_BWD] = {"bwd_ms", "ms", 0, 0, 3.0, 0},
    [PP_CHECK_BANDWIDTH] = {"bandwidth_GBps", "GB/s", 1, 0, 10.0, 0},
    [PP_CHECK_PEAK_MEM] = {"peak_mem_MiB", "MiB", 0, 0, 1.0, 1},
};

static const struct family *family(pp_check_kind k)
{
    return (unsigned)k < PP_CHECK_KIND_COUNT ? &k_families[k] : NULL;
}

const char *pp_check_kind_name(pp_check_kind k) { return family(k) ? family(k)->name : "?"; }

int pp_check_kind_higher_is_better(pp_check_kind k)
{
    return family(k) && family(k)->higher_is_better;
}

int pp_check_kind_is_absolute(pp_check_kind k) { return family(k) && family(k)->absolute; }

int pp_check_kind_is_deterministic(pp_check_kind k)
{
    return family(k) && family(k)->deterministic;
}

double pp_check_kind_default_threshold(pp_check_kind k)
{
    return family(k) ? family(k)->threshold : 0;
}

const char *pp_check_kind_unit(pp_check_kind k, const pp_check_shape *shape)
{
    double per_step;
    if (k == PP_CHECK_THROUGHPUT)
        return pp_check_throughput_unit(shape, &per_step);
    return family(k) ? family(k)->unit : "?";
}

int pp_check_kind_by_name(const char *s)
{
    for (int k = 0; k < PP_CHECK_KIND_COUNT; k++)
        if (strcmp(s, k_families[k].name) == 0)
            return k;
    return -1;
}

const char *pp_check_verdict_name(pp_check_verdict v)
{
    switch (v) {
    case PP_VERDICT_OK: return "ok";
    case PP_VERDICT_REGRESSION: return "regression";
    case PP_VERDICT_IMPROVEMENT: return "improvement";
    case PP_VERDICT_NOISE: return "noise";
    case PP_VERDICT_CHANGED: return "changed";
    case PP_VERDICT_MISSING: return "missing";
    }
    return "?";
}

/* ======================================================================================== */
/* Runs                                                                                       */
/* ======================================================================================== */

void pp_check_run_free(pp_check_run *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_metrics; i++) {
        free(r->metrics[i].samples);
        free(r->metrics[i].run_n);
        free(r->metrics[i].run_values);
    }
    free(r->metrics);
    free(r->runs);
    free(r);
}

pp_check_run *pp_check_run_new(const char *source, const char *kind)
{
    pp_check_run *r = calloc(1, sizeof *r);
    if (r)
        r->runs = calloc(1, sizeof *r->runs);
    if (!r || !r->runs) {
        free(r);
        return NULL;
    }
    r->n_runs = 1;
    snprintf(r->source, sizeof r->source, "%s", source ? source : "");
    snprintf(r->runs[0].source, sizeof r->runs[0].source, "%s", r->source);
    snprintf(r->source_kind, sizeof r->source_kind, "%s", kind);
    return r;
}

pp_status pp_check_run_add(pp_check_run *r, const char *name, pp_check_kind kind,
                           const double *samples, size_t n, double value)
{
    for (size_t i = 0; i < r->n_metrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0)
            return PP_ERR(PP_ERR_INVALID, "%s: metric \"%s\" appears twice", r->source, name);
    if (r->n_runs != 1) /* sets of runs are made by pp_check_run_append */
        return PP_ERR(PP_ERR_INVALID, "%s: metrics are added to one run at a time", r->source);
    pp_check_metric *grown = realloc(r->metrics, (r->n_metrics + 1) * sizeof *grown);
    if (!grown)
        return PP_ERR(PP_ERR_NOMEM, "out of memory adding metric %s", name);
    r->metrics = grown;
    pp_check_metric *m = &r->metrics[r->n_metrics];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->unit, sizeof m->unit, "%s", pp_check_kind_unit(kind, &r->shape));
    m->kind = kind;
    m->run_n = calloc(1, sizeof *m->run_n);
    m->run_values = calloc(1, sizeof *m->run_values);
    r->n_metrics++; /* freed with r from here on */
    if (!m->run_n || !m->run_values)
        return PP_ERR(PP_ERR_NOMEM, "out of memory adding metric %s", name);
    if (n > 0) {
        m->samples = malloc(n * sizeof *m->samples);
        if (!m->samples)
            return PP_ERR(PP_ERR_NOMEM, "out of memory adding metric %s", name);
        memcpy(m->samples, samples, n * sizeof *samples);
        m->n = n;
        m->value = pp_check_median(samples, n);
    } else {
        m->value = value;
    }
    m->run_n[0] = n;
    m->run_values[0] = m->value;
    r->runs[0].n_steps = r->n_steps;
    return PP_OK;
}

uint64_t pp_check_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Layer fingerprint and the names for messages, from names[0..n). */
static void shape_set_layers(pp_check_shape *s, const char *const *names, int n)
{
    s->n_layers = n;
    s->layer_fp[0] = '\0';
    s->layer_names[0] = '\0';
    if (n <= 0)
        return;
    uint64_t h = PP_CHECK_FNV_OFFSET;
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        /* with the NUL: "ab","c" != "a","bc" */
        h = pp_check_fnv1a(h, names[i], strlen(names[i]) + 1);
        if (len + 1 < sizeof s->layer_names) {
            int w = snprintf(s->layer_names + len, sizeof s->layer_names - len, "%s%s",
                             i ? "," : "", names[i]);
            len = w < 0 ? len : len + (size_t)w;
            if (len >= sizeof s->layer_names)
                len = sizeof s->layer_names - 1;
        }
    }
    snprintf(s->layer_fp, sizeof s->layer_fp, "fnv1a64:%016llx", (unsigned long long)h);
}

void pp_check_shape_format(const pp_check_shape *s, char *buf, size_t cap)
{
    char m[24] = "?";
    if (s->M > 0)
        snprintf(m, sizeof m, "%d", s->M);
    char layers[40] = "";
    if (s->n_layers > 0)
        snprintf(layers, sizeof layers, ", %d layers", s->n_layers);
    snprintf(buf, cap, "S=%d M=%s v=%d %s%s", s->S, m, s->v,
             s->schedule[0] ? s->schedule : "(schedule unknown)", layers);
}

void pp_check_link_name(char *buf, size_t cap, int src, int dst, int grad)
{
    snprintf(buf, cap, "link%d-%d.%s.bandwidth_GBps", src, dst, grad ? "grad" : "act");
}

const char *pp_check_throughput_unit(const pp_check_shape *s, double *per_step)
{
    if (s->samples_per_step > 0) {
        *per_step = s->samples_per_step;
        return "samples/s";
    }
    if (s->tokens_per_step > 0) {
        *per_step = s->tokens_per_step;
        return "tokens/s";
    }
    *per_step = 1;
    return "steps/s";
}

/* The family a metric name belongs to, -1 for a name pprof-check never writes. Only the exact
 * form it writes counts ("stage2.fwd_ms", not "stage02.fwd_ms"): a name that differs would
 * match nothing in the current run and silently leave the metric ungated. *a and *b get the
 * stage or the link's ends (-1 when none). */
int pp_check_metric_name_kind(const char *s, int *a, int *b)
{
    *a = *b = -1;
    if (strcmp(s, "step_ms") == 0)
        return PP_CHECK_STEP;
    if (strcmp(s, "throughput") == 0)
        return PP_CHECK_THROUGHPUT;
    if (strcmp(s, "bubble_ratio") == 0)
        return PP_CHECK_BUBBLE;
    char canon[64];
    int x, y;
    if (sscanf(s, "stage%d.", &x) == 1 && x >= 0) {
        pp_check_peak_mem_name(canon, sizeof canon, x);
        if (strcmp(s, canon) == 0) {
            *a = x;
            return PP_CHECK_PEAK_MEM;
        }
        for (int bwd = 0; bwd < 2; bwd++) {
            snprintf(canon, sizeof canon, "stage%d.%s", x, bwd ? "bwd_ms" : "fwd_ms");
            if (strcmp(s, canon) == 0) {
                *a = x;
                return bwd ? PP_CHECK_BWD : PP_CHECK_FWD;
            }
        }
    }
    if (sscanf(s, "link%d-%d.", &x, &y) == 2 && x >= 0 && y >= 0) {
        for (int grad = 0; grad < 2; grad++) {
            pp_check_link_name(canon, sizeof canon, x, y, grad);
            if (strcmp(s, canon) == 0) {
                *a = x;
                *b = y;
                return PP_CHECK_BANDWIDTH;
            }
        }
    }
    return -1;
}

/* The metrics common to the analysis and the summary: step time, throughput and bubble from
 * step_ms[] and bubble[] (n steps). */
pp_status pp_check_add_step_metrics(pp_check_run *r, const double *step_ms, const double *bubble,
                           size_t n, double *tmp)
{
    pp_status st = pp_check_run_add(r, "step_ms", PP_CHECK_STEP, step_ms, n, NAN);
    if (st != PP_OK)
        return st;
    double per_step;
    pp_check_throughput_unit(&r->shape, &per_step);
    for (size_t i = 0; i < n; i++)
        tmp[i] = per_step / (step_ms[i] * 1e-3);
    if ((st = pp_check_run_add(r, "throughput", PP_CHECK_THROUGHPUT, tmp, n, NAN)) != PP_OK)
        return st;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(bubble[i]))
            tmp[k++] = bubble[i];
    if (k > 0)
        st = pp_check_run_add(r, "bubble_ratio", PP_CHECK_BUBBLE, tmp, k, NAN);
    return st;
}

pp_status pp_check_run_from_analysis(const pp_analysis *a, const char *source, pp_check_run **out)
{
    *out = NULL;
    pp_status st = PP_OK;
    pp_check_run *r = pp_check_run_new(source, "run");
    size_t n = a->n_steps;
    double *v1 = malloc((n ? n : 1) * sizeof *v1), *v2 = malloc((n ? n : 1) * sizeof *v2);
    double *v3 = malloc((n ? n : 1) * sizeof *v3);
    const char **names = calloc(a->n_layers ? a->n_layers : 1, sizeof *names);
    if (!r || !v1 || !v2 || !v3 || !names) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory reading %s", source);
        goto done;
    }
    if (n == 0 && a->S == 0) { /* the generic view alone (ranges.c): no pipeline to gate */
        st = PP_ERR(PP_ERR_INVALID, "%s: no pipeline ranges in the capture (%llu ranges of %zu "
                                    "names seen): pprof-check compares pipeline runs; see "
                                    "docs/dialects.md (--dialect)",
                    source, (unsigned long long)a->generic_ranges, a->n_ranges);
        goto done;
    }
    if (n == 0) {
        st = PP_ERR(PP_ERR_INVALID, "%s: no step was analyzed (a run needs steps after the "
                                    "warm-up to be compared)", source);
        goto done;
    }
    r->shape.S = a->S;
    r->shape.M = a->M;
    r->shape.v = a->v > 0 ? a->v : 1;
    snprintf(r->shape.schedule, sizeof r->shape.schedule, "%s", a->schedule);
    r->shape.samples_per_step = a->samples_per_step;
    r->shape.tokens_per_step = a->tokens_per_step;
    for (size_t i = 0; i < a->n_layers; i++)
        names[i] = a->layers[i].name;
    shape_set_layers(&r->shape, names, (int)a->n_layers);
    r->n_steps = n;
    for (size_t i = 0; i < n; i++) {
        v1[i] = a->steps[i].step_ns * 1e-6;
        v2[i] = a->steps[i].bubble_ratio;
    }
    if ((st = pp_check_add_step_metrics(r, v1, v2, n, v3)) != PP_OK)
        goto done;
    for (int s = 0; s < a->S; s++) {
        for (int b = 0; b < 2; b++) {
            size_t k = 0;
            for (size_t i = 0; i < n; i++) {
                double ns = b ? a->steps[i].stage[s].bwd_ns : a->steps[i].stage[s].fwd_ns;
                if (ns > 0) /* 0: the stage ran none of them in this step */
                    v1[k++] = ns * 1e-6;
            }
            if (k == 0)
                continue;
            char name[64];
            snprintf(name, sizeof name, "stage%d.%s", s, b ? "bwd_ms" : "fwd_ms");
            pp_check_kind kind = b ? PP_CHECK_BWD : PP_CHECK_FWD;
            if ((st = pp_check_run_add(r, name, kind, v1, k, NAN)) != PP_OK)
                goto done;
        }
    }
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        if (!(l->bandwidth_GBps > 0) || !isfinite(l->bandwidth_GBps))
            continue;
        char name[64];
        pp_check_link_name(name, sizeof name, l->src, l->dst, l->grad);
        double bw = l->bandwidth_GBps;
        if ((st = pp_check_run_add(r, name, PP_CHECK_BANDWIDTH, NULL, 0, bw)) != PP_OK)
            goto done;
    }
    for (size_t i = 0; i < a->n_mem_stages; i++) {
        char name[64];
        pp_check_peak_mem_name(name, sizeof name, a->mem_stages[i].stage);
        double mib = a->mem_stages[i].total_peak_bytes / 1048576.0;
        if (isfinite(mib) && (st = pp_check_run_add(r, name, PP_CHECK_PEAK_MEM, NULL, 0, mib)) !=
                                 PP_OK)
            goto done;
    }
    if (a->warnings[0])
        snprintf(r->warnings, sizeof r->warnings, "%.1000s", a->warnings);
done:
    free(v1);
    free(v2);
    free(v3);
    free(names);
    if (st != PP_OK) {
        pp_check_run_free(r);
        return st;
    }
    *out = r;
    return PP_OK;
}

/* ---- reading JSON ------------------------------------------------------------------------- */

/* The pipeline object of a summary or the shape object of a baseline (the same fields, the
 * baseline adds the layer list). */
pp_status pp_check_shape_read(const cJSON *p, const char *ctx, pp_check_shape *s)
{
    double d;
    pp_status st = pp_json_get_int(pp_json_member(p, "stages"), ctx, "stages", 1, 1 << 20, &d);
    if (st != PP_OK)
        return st;
    s->S = (int)d;
    if ((st = pp_json_opt_int(p, ctx, "microbatches", 1, 1 << 30, 0, &d)) != PP_OK)
        return st;
    s->M = (int)d;
    if ((st = pp_json_opt_int(p, ctx, "virtual_stages", 1, 1 << 20, 1, &d)) != PP_OK)
        return st;
    s->v = (int)d;
    if ((st = pp_json_opt_string(p, ctx, "schedule", s->schedule, sizeof s->schedule)) != PP_OK)
        return st;
    if (!pp_json_utf8_valid(s->schedule)) /* a baseline would write U+FFFD: another schedule */
        return PP_ERR(PP_ERR_INVALID, "%s: \"schedule\" is not valid UTF-8", ctx);
    if ((st = pp_json_opt_real(p, ctx, "samples_per_step", 0, PP_CHECK_BIG, 0,
                               &s->samples_per_step)) != PP_OK)
        return st;
    return pp_json_opt_real(p, ctx, "tokens_per_step", 0, PP_CHECK_BIG, 0, &s->tokens_per_step);
}

void pp_check_shape_put(pp_json_writer *w, const pp_check_shape *s)
{
    pp_json_put_int(w, "stages", s->S);
    if (s->M > 0)
        pp_json_put_int(w, "microbatches", s->M);
    else
        pp_json_put_null(w, "microbatches");
    pp_json_put_int(w, "virtual_stages", s->v);
    pp_json_put_str(w, "schedule", s->schedule[0] ? s->schedule : NULL);
    pp_json_put_real_pos(w, "samples_per_step", s->samples_per_step);
    pp_json_put_real_pos(w, "tokens_per_step", s->tokens_per_step);
}

/* Layer names from an array of strings (baseline) or of layer objects with "name" (summary). */
pp_status pp_check_shape_read_layers(const cJSON *arr, const char *ctx, const char *key,
                           pp_check_shape *s)
{
    if (!arr || cJSON_IsNull(arr)) {
        shape_set_layers(s, NULL, 0);
        return PP_OK;
    }
    pp_status st = pp_json_need_array(arr, ctx, key);
    if (st != PP_OK)
        return st;
    int n = cJSON_GetArraySize(arr);
    const char **names = calloc(n > 0 ? (size_t)n : 1, sizeof *names);
    if (!names)
        return PP_ERR(PP_ERR_NOMEM, "out of memory reading %s", ctx);
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        const cJSON *nm = cJSON_IsObject(it) ? pp_json_member(it, "name") : it;
        if (!cJSON_IsString(nm)) {
            free(names);
            return PP_ERR(PP_ERR_INVALID, "%s: \"%s\"[%d] has no name string", ctx, key, i);
        }
        names[i++] = nm->valuestring;
    }
    shape_set_layers(s, names, n);
    free(names);
    return PP_OK;
}

pp_status pp_check_run_parse(const char *text, const char *ctx, pp_check_run **out)
{
    *out = NULL;
    cJSON *root = NULL;
    pp_status st = pp_json_parse(text, ctx, &root);
    if (st != PP_OK)
        return pp_error_wrap(st, "not a summary or baseline JSON");
    pp_check_run *r = NULL;
    if (!cJSON_IsObject(root)) {
        st = PP_ERR(PP_ERR_INVALID, "%s: expected a JSON object (a pprof-report --json summary "
                                    "or a pprof-check baseline), got %s", ctx,
                    pp_json_type_name(root));
        goto done;
    }
    int is_base = pp_json_member(root, "baseline_version") != NULL;
    int is_sum = pp_json_member(root, PP_SUMMARY_VERSION_KEY) != NULL;
    if (!is_base && !is_sum) {
        st = PP_ERR(PP_ERR_INVALID, "%s: neither a pprof-report --json summary (no "
                                    "\"summary_version\") nor a pprof-check baseline (no "
                                    "\"baseline_version\")", ctx);
        goto done;
    }
    r = pp_check_run_new(ctx, is_base ? "baseline" : "summary");
    if (!r) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory reading %s", ctx);
        goto done;
    }
    st = is_base ? pp_check_baseline_read(root, r) : pp_summary_read(root, r);
done:
    cJSON_Delete(root);
    if (st != PP_OK) {
        pp_check_run_free(r);
        return st;
    }
    *out = r;
    return PP_OK;
}

pp_status pp_check_run_load(const char *path, int warmup, pp_check_run **out)
{
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0)
        return PP_ERR(PP_ERR_IO, "%s: %s (expected a run directory, a summary JSON or a "
                                 "baseline file)", path, strerror(errno));
    /* a directory, or a PyTorch profiler trace (one rank's: docs/kineto.md) */
    if (S_ISDIR(sb.st_mode) || pp_kineto_sniff(path)) {
        pp_analysis_options o;
        pp_analysis_options_default(&o);
        if (warmup >= 0)
            o.warmup = warmup;
        pp_analysis *a = NULL;
        pp_status st = pp_analyze_dir(path, &o, &a);
        if (st != PP_OK)
            return st;
        st = pp_check_run_from_analysis(a, path, out);
        pp_analysis_free(a);
        return st;
    }
    char *text = NULL;
    size_t len = 0;
    pp_status st = pp_read_file(path, &text, &len);
    if (st != PP_OK)
        return st;
    if (strlen(text) != len) {
        free(text);
        return PP_ERR(PP_ERR_INVALID, "%s: binary data, not a summary or baseline JSON (a run "
                                      "directory is given by its folder, not a .pft file)", path);
    }
    st = pp_check_run_parse(text, path, out);
    free(text);
    return st;
}


void pp_check_peak_mem_name(char *buf, size_t cap, int stage)
{
    snprintf(buf, cap, "stage%d.peak_mem_MiB", stage);
}
