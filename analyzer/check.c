/* check.c: pprof-check's library (pp_check.h): metrics with per-step samples from an analysis, a
 * summary JSON or a baseline file; the baseline format (docs/baseline-format.md); the Mann-Whitney
 * U test, Holm's adjustment and a bootstrap interval; verdicts; table, JSON, JUnit and Markdown.
 *
 * Statistics follow their textbook definitions: U counts the pairs in which the first sample is
 * larger (ties 1/2); its exact null distribution comes from the recurrence over the last
 * observation of the merged order, the normal approximation uses the tie-corrected variance
 * and a continuity correction of 1/2. */
#define _GNU_SOURCE /* gethostname, strdup */
#include "pp_check.h"
#include "pp_json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ======================================================================================== */
/* Families                                                                                   */
/* ======================================================================================== */

static const char *const k_kind_names[PP_CHECK_KIND_COUNT] = {
    "step_ms", "throughput", "bubble_ratio", "fwd_ms", "bwd_ms", "bandwidth_GBps",
};

/* Default thresholds (docs/cli/pprof-check.md says why): % of the baseline, points for the
 * bubble. */
static const double k_default_threshold[PP_CHECK_KIND_COUNT] = {2.0, 2.0, 2.0, 3.0, 3.0, 10.0};

const char *pp_check_kind_name(pp_check_kind k)
{
    return (unsigned)k < PP_CHECK_KIND_COUNT ? k_kind_names[k] : "?";
}

int pp_check_kind_higher_is_better(pp_check_kind k)
{
    return k == PP_CHECK_THROUGHPUT || k == PP_CHECK_BANDWIDTH;
}

int pp_check_kind_is_absolute(pp_check_kind k) { return k == PP_CHECK_BUBBLE; }

static int kind_by_name(const char *s)
{
    for (int k = 0; k < PP_CHECK_KIND_COUNT; k++)
        if (strcmp(s, k_kind_names[k]) == 0)
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
/* Statistics                                                                                 */
/* ======================================================================================== */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* k-th smallest of v[0..n) (0-based), reordering v so that everything left of k is <= v[k]
 * (selection with a three-way partition: runs of equal samples cost nothing extra). */
static double select_kth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n; /* [lo, hi) holds position k */
    while (hi - lo > 1) {
        double pivot = v[lo + (hi - lo) / 2];
        size_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            double t = v[i];
            if (t < pivot) {
                v[i++] = v[lt];
                v[lt++] = t;
            } else if (t > pivot) {
                v[i] = v[--gt];
                v[gt] = t;
            } else {
                i++;
            }
        }
        if (k < lt)
            hi = lt;
        else if (k >= gt)
            lo = gt;
        else
            return pivot;
    }
    return v[k];
}

/* Median of v[0..n), reordering v. */
static double median_inplace(double *v, size_t n)
{
    if (n == 0)
        return NAN;
    double hi = select_kth(v, n, n / 2);
    if (n % 2)
        return hi;
    /* the lower middle is the largest of the part left of n/2 */
    double lo = v[0];
    for (size_t i = 1; i < n / 2; i++)
        if (v[i] > lo)
            lo = v[i];
    return 0.5 * (lo + hi);
}

double pp_check_median(const double *x, size_t n)
{
    if (n == 0)
        return NAN;
    double *v = malloc(n * sizeof *v);
    if (!v)
        return NAN;
    memcpy(v, x, n * sizeof *v);
    double m = median_inplace(v, n);
    free(v);
    return m;
}

/* P(U <= u) under the null for sizes m, n without ties: the recurrence on whether the largest
 * observation belongs to the first sample (then it beats all n of the second: U - n) or the
 * second, P(m,n,u) = m/(m+n) P(m-1,n,u-n) + n/(m+n) P(m,n-1,u), carried as probabilities
 * (only additions of positive numbers: no cancellation). O(m n (m n)) time. */
static pp_status mwu_exact_cdf(size_t m, size_t n, double u, double *out)
{
    size_t umax = m * n;
    /* prev[j][*]: distribution for (i-1, j); cur[j][*]: for (i, j) */
    size_t w = umax + 1;
    double *prev = calloc((n + 1) * w, sizeof *prev);
    double *cur = calloc((n + 1) * w, sizeof *cur);
    if (!prev || !cur) {
        free(prev);
        free(cur);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the exact U distribution (%zu x %zu)", m, n);
    }
    for (size_t j = 0; j <= n; j++)
        prev[j * w] = 1.0; /* i = 0: U = 0 surely */
    for (size_t i = 1; i <= m; i++) {
        memset(cur, 0, (n + 1) * w * sizeof *cur);
        cur[0] = 1.0; /* j = 0: U = 0 */
        for (size_t j = 1; j <= n; j++) {
            double a = (double)i / (double)(i + j), b = (double)j / (double)(i + j);
            double *c = cur + j * w;
            const double *p1 = prev + j * w;      /* (i-1, j), shifted by j */
            const double *p2 = cur + (j - 1) * w; /* (i, j-1) */
            size_t top = i * j;
            for (size_t k = 0; k <= top; k++) {
                double v = b * p2[k];
                if (k >= j)
                    v += a * p1[k - j];
                c[k] = v;
            }
        }
        double *t = prev;
        prev = cur;
        cur = t;
    }
    const double *d = prev + n * w;
    double s = 0;
    for (size_t k = 0; k <= umax && (double)k <= u + 1e-9; k++)
        s += d[k];
    free(prev);
    free(cur);
    *out = s;
    return PP_OK;
}

typedef struct ranked {
    double v;
    int first; /* from the first sample */
} ranked;

static int cmp_ranked(const void *a, const void *b)
{
    return cmp_double(&((const ranked *)a)->v, &((const ranked *)b)->v);
}

pp_status pp_check_mann_whitney(const double *x, size_t nx, const double *y, size_t ny,
                                pp_check_mwu *out)
{
    memset(out, 0, sizeof *out);
    out->p = 1.0;
    if (nx == 0 || ny == 0)
        return PP_ERR(PP_ERR_INVALID, "Mann-Whitney U needs samples on both sides (%zu, %zu)",
                      nx, ny);
    size_t N = nx + ny;
    ranked *r = malloc(N * sizeof *r);
    if (!r)
        return PP_ERR(PP_ERR_NOMEM, "out of memory ranking %zu samples", N);
    for (size_t i = 0; i < nx; i++)
        r[i] = (ranked){x[i], 1};
    for (size_t i = 0; i < ny; i++)
        r[nx + i] = (ranked){y[i], 0};
    qsort(r, N, sizeof *r, cmp_ranked);
    /* mid-ranks; R1 = rank sum of x; T = sum over tie groups of t^3 - t */
    double R1 = 0, T = 0;
    for (size_t i = 0; i < N;) {
        size_t j = i + 1;
        while (j < N && r[j].v == r[i].v)
            j++;
        double rank = 0.5 * ((double)(i + 1) + (double)j); /* mean of ranks i+1..j */
        for (size_t k = i; k < j; k++)
            if (r[k].first)
                R1 += rank;
        double t = (double)(j - i);
        T += t * t * t - t;
        i = j;
    }
    free(r);
    double m = (double)nx, n = (double)ny;
    double U = R1 - m * (m + 1) / 2;
    out->u = U;
    double mu = m * n / 2;
    if (T == 0 && nx <= PP_CHECK_EXACT_MAX && ny <= PP_CHECK_EXACT_MAX) {
        /* two-sided: twice the smaller tail; U's distribution is symmetric about mn/2 */
        double umin = U < m * n - U ? U : m * n - U;
        double cdf = 1;
        pp_status st = mwu_exact_cdf(nx, ny, umin, &cdf);
        if (st != PP_OK)
            return st;
        out->exact = 1;
        out->p = fmin(1.0, 2 * cdf);
        return PP_OK;
    }
    double var = m * n / 12.0 * ((m + n + 1) - T / ((m + n) * (m + n - 1)));
    if (var <= 0) { /* every value equal: no evidence of a difference */
        out->p = 1.0;
        return PP_OK;
    }
    double d = fabs(U - mu) - 0.5;
    if (d < 0)
        d = 0;
    out->z = (U > mu ? d : -d) / sqrt(var);
    out->p = fmin(1.0, erfc(d / sqrt(var) / sqrt(2.0)));
    return PP_OK;
}

pp_status pp_check_bootstrap(const double *x, size_t nx, const double *y, size_t ny, int ratio,
                             double level, int reps, uint64_t seed, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (nx == 0 || ny == 0 || reps < 1)
        return PP_ERR(PP_ERR_INVALID, "bootstrap needs samples on both sides and reps >= 1");
    double *bx = malloc(nx * sizeof *bx), *by = malloc(ny * sizeof *by);
    double *d = malloc((size_t)reps * sizeof *d);
    if (!bx || !by || !d) {
        free(bx);
        free(by);
        free(d);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for %d bootstrap resamples", reps);
    }
    pp_rng rng;
    pp_rng_seed(&rng, seed);
    int k = 0;
    for (int r = 0; r < reps; r++) {
        for (size_t i = 0; i < nx; i++)
            bx[i] = x[pp_rng_below(&rng, nx)];
        for (size_t i = 0; i < ny; i++)
            by[i] = y[pp_rng_below(&rng, ny)];
        double mx = median_inplace(bx, nx), my = median_inplace(by, ny);
        double v = ratio ? my / mx - 1 : my - mx;
        if (isfinite(v))
            d[k++] = v;
    }
    if (k > 0) {
        qsort(d, (size_t)k, sizeof *d, cmp_double);
        /* percentile interval, linear interpolation between order statistics */
        double tail = (1 - level) / 2;
        double ql = tail * (k - 1), qh = (1 - tail) * (k - 1);
        size_t il = (size_t)ql, ih = (size_t)qh;
        *lo = d[il] + (il + 1 < (size_t)k ? (ql - il) * (d[il + 1] - d[il]) : 0);
        *hi = d[ih] + (ih + 1 < (size_t)k ? (qh - ih) * (d[ih + 1] - d[ih]) : 0);
    }
    free(bx);
    free(by);
    free(d);
    return PP_OK;
}

typedef struct pidx {
    double p;
    size_t i;
} pidx;

static int cmp_pidx(const void *a, const void *b)
{
    const pidx *x = a, *y = b;
    if (x->p != y->p)
        return x->p < y->p ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

pp_status pp_check_holm(const double *p, size_t n, double *adj)
{
    if (n == 0)
        return PP_OK;
    pidx *s = malloc(n * sizeof *s);
    if (!s)
        return PP_ERR(PP_ERR_NOMEM, "out of memory adjusting %zu p-values", n);
    for (size_t i = 0; i < n; i++)
        s[i] = (pidx){p[i], i};
    qsort(s, n, sizeof *s, cmp_pidx);
    /* step-down: adj_(k) = max over j <= k of min(1, (n - j) p_(j)) */
    double run = 0;
    for (size_t k = 0; k < n; k++) {
        double v = fmin(1.0, (double)(n - k) * s[k].p);
        if (v > run)
            run = v;
        adj[s[k].i] = run;
    }
    free(s);
    return PP_OK;
}

/* ======================================================================================== */
/* Runs                                                                                       */
/* ======================================================================================== */

void pp_check_run_free(pp_check_run *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_metrics; i++)
        free(r->metrics[i].samples);
    free(r->metrics);
    free(r);
}

static pp_check_run *run_new(const char *source, const char *kind)
{
    pp_check_run *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    snprintf(r->source, sizeof r->source, "%s", source ? source : "");
    snprintf(r->source_kind, sizeof r->source_kind, "%s", kind);
    return r;
}

/* Appends a metric (samples copied; the value is their median, or `value` without samples). */
static pp_status run_add(pp_check_run *r, const char *name, pp_check_kind kind, const char *unit,
                         const double *samples, size_t n, double value)
{
    for (size_t i = 0; i < r->n_metrics; i++)
        if (strcmp(r->metrics[i].name, name) == 0)
            return PP_ERR(PP_ERR_INVALID, "%s: metric \"%s\" appears twice", r->source, name);
    pp_check_metric *grown = realloc(r->metrics, (r->n_metrics + 1) * sizeof *grown);
    if (!grown)
        return PP_ERR(PP_ERR_NOMEM, "out of memory adding metric %s", name);
    r->metrics = grown;
    pp_check_metric *m = &r->metrics[r->n_metrics];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    snprintf(m->unit, sizeof m->unit, "%s", unit);
    m->kind = kind;
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
    r->n_metrics++;
    return PP_OK;
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

static const uint64_t k_fnv_offset = 14695981039346656037ull;

/* Layer fingerprint and the names for messages, from names[0..n). */
static void shape_set_layers(pp_check_shape *s, const char *const *names, int n)
{
    s->n_layers = n;
    s->layer_fp[0] = '\0';
    s->layer_names[0] = '\0';
    if (n <= 0)
        return;
    uint64_t h = k_fnv_offset;
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        h = fnv1a(h, names[i], strlen(names[i]) + 1); /* with the NUL: "ab","c" != "a","bc" */
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

static void link_name(char *buf, size_t cap, int src, int dst, int grad)
{
    snprintf(buf, cap, "link%d-%d.%s.bandwidth_GBps", src, dst, grad ? "grad" : "act");
}

static const char *throughput_unit(const pp_check_shape *s, double *per_step)
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

/* The metrics common to the analysis and the summary: step time, throughput and bubble from
 * step_ms[] and bubble[] (n steps). */
static pp_status add_step_metrics(pp_check_run *r, const double *step_ms, const double *bubble,
                                  size_t n, double *tmp)
{
    pp_status st = run_add(r, "step_ms", PP_CHECK_STEP, "ms", step_ms, n, NAN);
    if (st != PP_OK)
        return st;
    double per_step;
    const char *unit = throughput_unit(&r->shape, &per_step);
    for (size_t i = 0; i < n; i++)
        tmp[i] = per_step / (step_ms[i] * 1e-3);
    if ((st = run_add(r, "throughput", PP_CHECK_THROUGHPUT, unit, tmp, n, NAN)) != PP_OK)
        return st;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(bubble[i]))
            tmp[k++] = bubble[i];
    if (k > 0)
        st = run_add(r, "bubble_ratio", PP_CHECK_BUBBLE, "ratio", tmp, k, NAN);
    return st;
}

pp_status pp_check_run_from_analysis(const pp_analysis *a, const char *source, pp_check_run **out)
{
    *out = NULL;
    pp_status st = PP_OK;
    pp_check_run *r = run_new(source, "run");
    size_t n = a->n_steps;
    double *v1 = malloc((n ? n : 1) * sizeof *v1), *v2 = malloc((n ? n : 1) * sizeof *v2);
    double *v3 = malloc((n ? n : 1) * sizeof *v3);
    const char **names = calloc(a->n_layers ? a->n_layers : 1, sizeof *names);
    if (!r || !v1 || !v2 || !v3 || !names) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory reading %s", source);
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
    if ((st = add_step_metrics(r, v1, v2, n, v3)) != PP_OK)
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
            if ((st = run_add(r, name, b ? PP_CHECK_BWD : PP_CHECK_FWD, "ms", v1, k, NAN)) != PP_OK)
                goto done;
        }
    }
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        if (!(l->bandwidth_GBps > 0) || !isfinite(l->bandwidth_GBps))
            continue;
        char name[64];
        link_name(name, sizeof name, l->src, l->dst, l->grad);
        if ((st = run_add(r, name, PP_CHECK_BANDWIDTH, "GB/s", NULL, 0, l->bandwidth_GBps)) !=
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

static const cJSON *member(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

static pp_status need_object(const cJSON *it, const char *ctx, const char *key)
{
    if (!cJSON_IsObject(it))
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" must be an object (got %s)", ctx, key,
                      it ? pp_json_type_name(it) : "nothing: it is missing");
    return PP_OK;
}

static pp_status need_array(const cJSON *it, const char *ctx, const char *key)
{
    if (!cJSON_IsArray(it))
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" must be an array (got %s)", ctx, key,
                      it ? pp_json_type_name(it) : "nothing: it is missing");
    return PP_OK;
}

/* An optional number: absent or null gives *out = dflt. */
static pp_status opt_real(const cJSON *obj, const char *ctx, const char *key, double lo,
                          double hi, double dflt, double *out)
{
    const cJSON *it = member(obj, key);
    if (!it || cJSON_IsNull(it)) {
        *out = dflt;
        return PP_OK;
    }
    return pp_json_get_real(it, ctx, key, lo, hi, out);
}

static pp_status opt_int(const cJSON *obj, const char *ctx, const char *key, double lo, double hi,
                         double dflt, double *out)
{
    const cJSON *it = member(obj, key);
    if (!it || cJSON_IsNull(it)) {
        *out = dflt;
        return PP_OK;
    }
    return pp_json_get_int(it, ctx, key, lo, hi, out);
}

static pp_status opt_string(const cJSON *obj, const char *ctx, const char *key, char *buf,
                            size_t cap)
{
    const cJSON *it = member(obj, key);
    buf[0] = '\0';
    if (!it || cJSON_IsNull(it))
        return PP_OK;
    if (!cJSON_IsString(it))
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" must be a string (got %s)", ctx, key,
                      pp_json_type_name(it));
    if (strlen(it->valuestring) >= cap)
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" is longer than %zu characters", ctx, key,
                      cap - 1);
    snprintf(buf, cap, "%s", it->valuestring);
    return PP_OK;
}

static const double k_big = 1e300;

/* The pipeline object of a summary or the shape object of a baseline (the same fields, the
 * baseline adds the layer list). */
static pp_status read_shape(const cJSON *p, const char *ctx, pp_check_shape *s)
{
    double d;
    pp_status st = pp_json_get_int(member(p, "stages"), ctx, "stages", 1, 1 << 20, &d);
    if (st != PP_OK)
        return st;
    s->S = (int)d;
    if ((st = opt_int(p, ctx, "microbatches", 1, 1 << 30, 0, &d)) != PP_OK)
        return st;
    s->M = (int)d;
    if ((st = opt_int(p, ctx, "virtual_stages", 1, 1 << 20, 1, &d)) != PP_OK)
        return st;
    s->v = (int)d;
    if ((st = opt_string(p, ctx, "schedule", s->schedule, sizeof s->schedule)) != PP_OK)
        return st;
    if ((st = opt_real(p, ctx, "samples_per_step", 0, k_big, 0, &s->samples_per_step)) != PP_OK)
        return st;
    return opt_real(p, ctx, "tokens_per_step", 0, k_big, 0, &s->tokens_per_step);
}

/* Layer names from an array of strings (baseline) or of layer objects with "name" (summary). */
static pp_status read_layer_names(const cJSON *arr, const char *ctx, const char *key,
                                  pp_check_shape *s)
{
    if (!arr || cJSON_IsNull(arr)) {
        shape_set_layers(s, NULL, 0);
        return PP_OK;
    }
    pp_status st = need_array(arr, ctx, key);
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
        const cJSON *nm = cJSON_IsObject(it) ? member(it, "name") : it;
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

static pp_status read_summary(const cJSON *root, pp_check_run *r)
{
    const char *ctx = r->source;
    double d;
    pp_status st = pp_json_get_int(member(root, "summary_version"), ctx, "summary_version", 0,
                                   PP_JSON_MAX_EXACT_INT, &d);
    if (st != PP_OK)
        return st;
    if (d != 1)
        return PP_ERR(PP_ERR_INVALID, "%s: summary_version %.0f is not supported (this "
                                      "pprof-check reads summary_version 1)", ctx, d);
    const cJSON *pipe = member(root, "pipeline");
    if ((st = need_object(pipe, ctx, "pipeline")) != PP_OK)
        return st;
    char pctx[600];
    snprintf(pctx, sizeof pctx, "%s: pipeline", ctx);
    if ((st = read_shape(pipe, pctx, &r->shape)) != PP_OK)
        return st;
    if ((st = read_layer_names(member(root, "layers"), ctx, "layers", &r->shape)) != PP_OK)
        return st;
    const cJSON *steps = member(root, "steps");
    if ((st = need_array(steps, ctx, "steps")) != PP_OK)
        return st;
    int n = cJSON_GetArraySize(steps);
    if (n == 0)
        return PP_ERR(PP_ERR_INVALID, "%s: \"steps\" is empty: no per-step samples to compare",
                      ctx);
    int S = r->shape.S;
    size_t nn = (size_t)n;
    double *step_ms = malloc(nn * sizeof *step_ms), *bubble = malloc(nn * sizeof *bubble);
    double *tmp = malloc(nn * sizeof *tmp);
    size_t n_sf = 0; /* steps and stages come from the file: the product checked */
    double *sf = S >= 0 && pp_size_mul3(nn, (size_t)S, 2, &n_sf)
                     ? calloc(n_sf ? n_sf : 1, sizeof *sf) /* [s][fwd|bwd][step], NAN = none */
                     : NULL;
    if (!step_ms || !bubble || !tmp || !sf) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory reading %s", ctx);
        goto done;
    }
    for (size_t i = 0; i < nn * (size_t)S * 2; i++)
        sf[i] = NAN;
    int i = 0;
    const cJSON *sp;
    cJSON_ArrayForEach(sp, steps)
    {
        char sctx[600];
        snprintf(sctx, sizeof sctx, "%s: steps[%d]", ctx, i);
        if ((st = need_object(sp, sctx, "step")) != PP_OK)
            goto done;
        if ((st = pp_json_get_real(member(sp, "step_ms"), sctx, "step_ms", 1e-9, k_big,
                                   &step_ms[i])) != PP_OK)
            goto done;
        if ((st = opt_real(sp, sctx, "bubble_ratio", -1, 1, NAN, &bubble[i])) != PP_OK)
            goto done;
        const cJSON *stg = member(sp, "stages");
        if (stg && !cJSON_IsNull(stg)) {
            if ((st = need_array(stg, sctx, "stages")) != PP_OK)
                goto done;
            if (cJSON_GetArraySize(stg) != S) {
                st = PP_ERR(PP_ERR_INVALID, "%s: \"stages\" has %d entries, the pipeline %d", sctx,
                            cJSON_GetArraySize(stg), S);
                goto done;
            }
            int s = 0;
            const cJSON *so;
            cJSON_ArrayForEach(so, stg)
            {
                char tctx[640];
                snprintf(tctx, sizeof tctx, "%s.stages[%d]", sctx, s);
                if ((st = need_object(so, tctx, "stage")) != PP_OK)
                    goto done;
                /* per-step forward/backward means, when the summary carries them */
                double *f = &sf[((size_t)s * 2 + 0) * nn + (size_t)i];
                double *b = &sf[((size_t)s * 2 + 1) * nn + (size_t)i];
                if ((st = opt_real(so, tctx, "fwd_ms", 0, k_big, NAN, f)) != PP_OK ||
                    (st = opt_real(so, tctx, "bwd_ms", 0, k_big, NAN, b)) != PP_OK)
                    goto done;
                s++;
            }
        }
        i++;
    }
    r->n_steps = nn;
    if ((st = add_step_metrics(r, step_ms, bubble, nn, tmp)) != PP_OK)
        goto done;
    /* per stage: per-step samples when present, else the aggregate median (untestable) */
    const cJSON *stages = member(root, "stages");
    for (int s = 0; s < S; s++) {
        for (int b = 0; b < 2; b++) {
            const double *col = &sf[((size_t)s * 2 + (size_t)b) * nn];
            size_t k = 0;
            for (size_t j = 0; j < nn; j++)
                if (isfinite(col[j]) && col[j] > 0)
                    tmp[k++] = col[j];
            char name[64];
            snprintf(name, sizeof name, "stage%d.%s", s, b ? "bwd_ms" : "fwd_ms");
            pp_check_kind kind = b ? PP_CHECK_BWD : PP_CHECK_FWD;
            if (k > 0) {
                if ((st = run_add(r, name, kind, "ms", tmp, k, NAN)) != PP_OK)
                    goto done;
                continue;
            }
            const cJSON *so = cJSON_IsArray(stages) ? cJSON_GetArrayItem(stages, s) : NULL;
            const cJSON *stt = so ? member(so, b ? "bwd_ms" : "fwd_ms") : NULL;
            if (!stt && so && b) /* split-backward schedules: the input half */
                stt = member(so, "bwd_input_ms");
            const cJSON *med = cJSON_IsObject(stt) ? member(stt, "median") : NULL;
            if (cJSON_IsNumber(med) && isfinite(med->valuedouble) && med->valuedouble > 0) {
                if ((st = run_add(r, name, kind, "ms", NULL, 0, med->valuedouble)) != PP_OK)
                    goto done;
            }
        }
    }
    const cJSON *links = member(root, "links");
    if (links && !cJSON_IsNull(links)) {
        if ((st = need_array(links, ctx, "links")) != PP_OK)
            goto done;
        int li = 0;
        const cJSON *l;
        cJSON_ArrayForEach(l, links)
        {
            char lctx[600];
            snprintf(lctx, sizeof lctx, "%s: links[%d]", ctx, li++);
            double src, dst, bw;
            char kind[16];
            if ((st = need_object(l, lctx, "link")) != PP_OK ||
                (st = pp_json_get_int(member(l, "src"), lctx, "src", 0, 1 << 20, &src)) != PP_OK ||
                (st = pp_json_get_int(member(l, "dst"), lctx, "dst", 0, 1 << 20, &dst)) != PP_OK ||
                (st = opt_string(l, lctx, "kind", kind, sizeof kind)) != PP_OK ||
                (st = opt_real(l, lctx, "bandwidth_GBps", 0, k_big, 0, &bw)) != PP_OK)
                goto done;
            if (!(bw > 0))
                continue;
            char name[64];
            link_name(name, sizeof name, (int)src, (int)dst, strcmp(kind, "grad") == 0);
            if ((st = run_add(r, name, PP_CHECK_BANDWIDTH, "GB/s", NULL, 0, bw)) != PP_OK)
                goto done;
        }
    }
    const cJSON *run = member(root, "run");
    const cJSON *warn = cJSON_IsObject(run) ? member(run, "warnings") : NULL;
    const cJSON *w;
    if (cJSON_IsArray(warn))
        cJSON_ArrayForEach(w, warn) if (cJSON_IsString(w))
            pp_append_line(r->warnings, sizeof r->warnings, "%s", w->valuestring);
done:
    free(step_ms);
    free(bubble);
    free(tmp);
    free(sf);
    return st;
}

/* ---- a baseline's metrics, checked against themselves ---------------------------------- */

/* The statistics a baseline writes next to each metric's samples (docs/baseline-format.md). */
enum { SS_MEAN, SS_MEDIAN, SS_P95, SS_MAX, SS_MIN, SS_COUNT };
static const char *const k_stat_names[SS_COUNT] = {"mean", "median", "p95", "max", "min"};

typedef struct sample_stats {
    double v[SS_COUNT];
} sample_stats;

static pp_status sample_stats_of(const double *x, size_t n, sample_stats *out)
{
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the statistics of %zu samples", n);
    memcpy(v, x, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    double q = 0.95 * (double)(n - 1); /* p95 by linear interpolation */
    size_t qi = (size_t)q;
    out->v[SS_MEAN] = sum / (double)n;
    out->v[SS_MEDIAN] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    out->v[SS_P95] = v[qi] + (qi + 1 < n ? (q - (double)qi) * (v[qi + 1] - v[qi]) : 0);
    out->v[SS_MAX] = v[n - 1];
    out->v[SS_MIN] = v[0];
    free(v);
    return PP_OK;
}

/* Equal up to the %.10g the writer prints with (and the rounding of samples read back). */
static int same_number(double a, double b)
{
    return fabs(a - b) <= 1e-8 * fmax(fabs(a), fabs(b)) + 1e-300;
}

/* The family a metric name belongs to, -1 for a name pprof-check never writes. Only the exact
 * form it writes counts ("stage2.fwd_ms", not "stage02.fwd_ms"): a name that differs would
 * match nothing in the current run and silently leave the metric ungated. *a and *b get the
 * stage or the link's ends (-1 when none). */
static int metric_name_kind(const char *s, int *a, int *b)
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
            link_name(canon, sizeof canon, x, y, grad);
            if (strcmp(s, canon) == 0) {
                *a = x;
                *b = y;
                return PP_CHECK_BANDWIDTH;
            }
        }
    }
    return -1;
}

/* The unit the writer gives a family (throughput's depends on what the shape announces). */
static const char *family_unit(pp_check_kind k, const pp_check_shape *shape)
{
    double per_step;
    switch (k) {
    case PP_CHECK_THROUGHPUT: return throughput_unit(shape, &per_step);
    case PP_CHECK_BUBBLE: return "ratio";
    case PP_CHECK_BANDWIDTH: return "GB/s";
    default: return "ms";
    }
}

/* Name, family, unit and "better" of one baseline metric: known, and agreeing with each other
 * and with the shape. */
static pp_status baseline_metric_identity(const cJSON *m, const char *mctx,
                                          const pp_check_shape *shape, char *name, size_t name_cap,
                                          char *unit, size_t unit_cap, int *kind_out)
{
    char family[32], better[16];
    pp_status st;
    if ((st = opt_string(m, mctx, "name", name, name_cap)) != PP_OK ||
        (st = opt_string(m, mctx, "family", family, sizeof family)) != PP_OK ||
        (st = opt_string(m, mctx, "unit", unit, unit_cap)) != PP_OK ||
        (st = opt_string(m, mctx, "better", better, sizeof better)) != PP_OK)
        return st;
    int kind = kind_by_name(family);
    if (!name[0] || kind < 0)
        return PP_ERR(PP_ERR_INVALID, "%s: needs a \"name\" and a \"family\" among step_ms, "
                                      "throughput, bubble_ratio, fwd_ms, bwd_ms, "
                                      "bandwidth_GBps (got \"%s\")", mctx, family);
    int a, b;
    int named = metric_name_kind(name, &a, &b);
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
    const char *want = family_unit((pp_check_kind)kind, shape);
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

/* "value" and "stats" of a metric with n samples v[]: numbers where numbers belong, and the
 * same as the samples say (a hand-edited file whose summary disagrees with its samples cannot
 * be told apart from a damaged one, and the gate would test numbers nobody looked at). */
static pp_status baseline_metric_consistency(const cJSON *m, const char *mctx, const char *name,
                                             const double *v, size_t n, size_t steps,
                                             int kind)
{
    const cJSON *value = member(m, "value");
    if (value && !cJSON_IsNull(value) && !cJSON_IsNumber(value))
        return PP_ERR(PP_ERR_INVALID, "%s: \"value\" of \"%s\" must be a number (got %s)",
                      mctx, name, pp_json_type_name(value));
    const cJSON *stats = member(m, "stats");
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
        const cJSON *cnt = cJSON_IsObject(stats) ? member(stats, "count") : NULL;
        if (cJSON_IsNumber(cnt) && cnt->valuedouble != 0)
            return PP_ERR(PP_ERR_INVALID, "%s: stats.count of \"%s\" is %.17g, but it has no "
                                          "samples", mctx, name, cnt->valuedouble);
        return PP_OK;
    }
    sample_stats ss;
    pp_status st = sample_stats_of(v, n, &ss);
    if (st != PP_OK)
        return st;
    if (cJSON_IsNumber(value) && !same_number(value->valuedouble, ss.v[SS_MEDIAN]))
        return PP_ERR(PP_ERR_INVALID, "%s: \"value\" of \"%s\" is %.10g, but the median of its "
                                      "%zu samples is %.10g", mctx, name, value->valuedouble, n,
                      ss.v[SS_MEDIAN]);
    if (!cJSON_IsObject(stats))
        return PP_OK;
    const cJSON *cnt = member(stats, "count");
    if (cJSON_IsNumber(cnt) && cnt->valuedouble != (double)n)
        return PP_ERR(PP_ERR_INVALID, "%s: stats.count of \"%s\" is %.17g, but it has %zu "
                                      "samples", mctx, name, cnt->valuedouble, n);
    for (int k = 0; k < SS_COUNT; k++) {
        const cJSON *x = member(stats, k_stat_names[k]);
        if (cJSON_IsNumber(x) && !same_number(x->valuedouble, ss.v[k]))
            return PP_ERR(PP_ERR_INVALID, "%s: stats.%s of \"%s\" is %.10g, but its %zu samples "
                                          "give %.10g", mctx, k_stat_names[k], name,
                          x->valuedouble, n, ss.v[k]);
    }
    return PP_OK;
}

static pp_status read_baseline(const cJSON *root, pp_check_run *r)
{
    const char *ctx = r->source;
    double d;
    pp_status st = pp_json_get_int(member(root, "baseline_version"), ctx, "baseline_version", 0,
                                   PP_JSON_MAX_EXACT_INT, &d);
    if (st != PP_OK)
        return st;
    if (d != PP_BASELINE_VERSION)
        return PP_ERR(PP_ERR_INVALID, "%s: baseline_version %.0f is not supported (this "
                                      "pprof-check reads baseline_version %d)", ctx, d,
                      PP_BASELINE_VERSION);
    const cJSON *prov = member(root, "provenance");
    if (prov && !cJSON_IsNull(prov)) {
        char c[600];
        snprintf(c, sizeof c, "%s: provenance", ctx);
        if ((st = need_object(prov, ctx, "provenance")) != PP_OK ||
            (st = opt_string(prov, c, "source", r->origin, sizeof r->origin)) != PP_OK ||
            (st = opt_string(prov, c, "created", r->created, sizeof r->created)) != PP_OK ||
            (st = opt_string(prov, c, "host", r->host, sizeof r->host)) != PP_OK ||
            (st = opt_string(prov, c, "pipeprof_version", r->version, sizeof r->version)) != PP_OK)
            return st;
    }
    const cJSON *shape = member(root, "shape");
    if ((st = need_object(shape, ctx, "shape")) != PP_OK)
        return st;
    char sctx[600];
    snprintf(sctx, sizeof sctx, "%s: shape", ctx);
    if ((st = read_shape(shape, sctx, &r->shape)) != PP_OK)
        return st;
    if ((st = read_layer_names(member(shape, "layer_names"), sctx, "layer_names", &r->shape)) !=
        PP_OK)
        return st;
    if ((st = pp_json_get_int(member(root, "steps"), ctx, "steps", 0, PP_JSON_MAX_EXACT_INT, &d)) !=
        PP_OK)
        return st;
    r->n_steps = (size_t)d;
    const cJSON *metrics = member(root, "metrics");
    if ((st = need_array(metrics, ctx, "metrics")) != PP_OK)
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
        if ((st = need_object(m, mctx, "metric")) != PP_OK)
            return st;
        if ((st = baseline_metric_identity(m, mctx, &r->shape, name, sizeof name, unit,
                                           sizeof unit, &kind)) != PP_OK)
            return st;
        const cJSON *smp = member(m, "samples");
        if ((st = need_array(smp, mctx, "samples")) != PP_OK)
            return st;
        int n = cJSON_GetArraySize(smp);
        double *v = malloc((n > 0 ? (size_t)n : 1) * sizeof *v);
        if (!v)
            return PP_ERR(PP_ERR_NOMEM, "out of memory reading %s", mctx);
        int k = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, smp)
        {
            if ((st = pp_json_get_real(x, mctx, "samples[]", -k_big, k_big, &v[k++])) != PP_OK) {
                free(v);
                return st;
            }
        }
        double value = NAN;
        if ((st = baseline_metric_consistency(m, mctx, name, v, (size_t)n, r->n_steps, kind)) !=
                PP_OK ||
            (n == 0 && (st = pp_json_get_real(member(m, "value"), mctx, "value", -k_big, k_big,
                                              &value)) != PP_OK)) {
            free(v);
            return st;
        }
        st = run_add(r, name, (pp_check_kind)kind, unit, v, (size_t)n, value);
        free(v);
        if (st != PP_OK)
            return st;
    }
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
    int is_base = member(root, "baseline_version") != NULL;
    int is_sum = member(root, "summary_version") != NULL;
    if (!is_base && !is_sum) {
        st = PP_ERR(PP_ERR_INVALID, "%s: neither a pprof-report --json summary (no "
                                    "\"summary_version\") nor a pprof-check baseline (no "
                                    "\"baseline_version\")", ctx);
        goto done;
    }
    r = run_new(ctx, is_base ? "baseline" : "summary");
    if (!r) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory reading %s", ctx);
        goto done;
    }
    st = is_base ? read_baseline(root, r) : read_summary(root, r);
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
    if (S_ISDIR(sb.st_mode)) {
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

/* ---- writing a baseline ------------------------------------------------------------------- */

/* s as a JSON string; control characters escaped, other bytes as they are. */
static void json_quote(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.10g", v);
    else
        fputs("null", f);
}

static void json_pos_or_null(FILE *f, double v)
{
    if (v > 0 && isfinite(v))
        fprintf(f, "%.10g", v);
    else
        fputs("null", f);
}

static void json_str_or_null(FILE *f, const char *s)
{
    if (s && s[0])
        json_quote(f, s);
    else
        fputs("null", f);
}

static void now_utc(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else
        snprintf(buf, cap, "unknown");
}

/* Summary statistics of a metric's samples for readers of the file; the reader checks them
 * against the samples. */
static void json_stats(FILE *f, const pp_check_metric *m)
{
    sample_stats ss;
    if (m->n == 0 || sample_stats_of(m->samples, m->n, &ss) != PP_OK) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\"count\": %zu, \"mean\": ", m->n);
    json_num(f, ss.v[SS_MEAN]);
    fputs(", \"median\": ", f);
    json_num(f, ss.v[SS_MEDIAN]);
    fputs(", \"p95\": ", f);
    json_num(f, ss.v[SS_P95]);
    fputs(", \"max\": ", f);
    json_num(f, ss.v[SS_MAX]);
    fputs(", \"min\": ", f);
    json_num(f, ss.v[SS_MIN]);
    fputc('}', f);
}

pp_status pp_check_baseline_write(const pp_check_run *r, const char *version, FILE *f)
{
    char created[32], host[64] = "";
    now_utc(created, sizeof created);
    if (gethostname(host, sizeof host - 1) != 0)
        host[0] = '\0';
    host[sizeof host - 1] = '\0';
    const pp_check_shape *s = &r->shape;
    fprintf(f, "{\n  \"baseline_version\": %d,\n  \"generator\": \"pipeprof pprof-check\",\n",
            PP_BASELINE_VERSION);
    fputs("  \"provenance\": {\"source\": ", f);
    json_quote(f, r->origin[0] ? r->origin : r->source);
    fputs(", \"source_kind\": ", f);
    json_quote(f, r->source_kind);
    fputs(", \"created\": ", f);
    json_quote(f, created);
    fputs(", \"host\": ", f);
    json_str_or_null(f, host);
    fputs(", \"pipeprof_version\": ", f);
    json_str_or_null(f, version);
    fputs("},\n", f);
    fprintf(f, "  \"shape\": {\"stages\": %d, \"microbatches\": ", s->S);
    if (s->M > 0)
        fprintf(f, "%d", s->M);
    else
        fputs("null", f);
    fprintf(f, ", \"virtual_stages\": %d, \"schedule\": ", s->v);
    json_str_or_null(f, s->schedule);
    fputs(", \"samples_per_step\": ", f);
    json_pos_or_null(f, s->samples_per_step);
    fputs(", \"tokens_per_step\": ", f);
    json_pos_or_null(f, s->tokens_per_step);
    fprintf(f, ", \"layers\": %d, \"layer_fingerprint\": ", s->n_layers);
    json_str_or_null(f, s->layer_fp);
    fputs(", \"layer_names\": ", f);
    if (s->n_layers > 0 && strlen(s->layer_names) < sizeof s->layer_names - 1) {
        fputc('[', f);
        const char *p = s->layer_names;
        for (int i = 0; i < s->n_layers; i++) {
            const char *comma = strchr(p, ',');
            size_t len = comma && i + 1 < s->n_layers ? (size_t)(comma - p) : strlen(p);
            char name[128];
            snprintf(name, sizeof name, "%.*s", (int)(len < 127 ? len : 127), p);
            if (i)
                fputs(", ", f);
            json_quote(f, name);
            p += len + (comma ? 1 : 0);
        }
        fputc(']', f);
    } else {
        fputs("null", f); /* too many to list: the fingerprint still identifies them */
    }
    fprintf(f, "},\n  \"steps\": %zu,\n  \"metrics\": [", r->n_steps);
    for (size_t i = 0; i < r->n_metrics; i++) {
        const pp_check_metric *m = &r->metrics[i];
        fputs(i ? ",\n    {" : "\n    {", f);
        fputs("\"name\": ", f);
        json_quote(f, m->name);
        fputs(", \"family\": ", f);
        json_quote(f, pp_check_kind_name(m->kind));
        fputs(", \"unit\": ", f);
        json_quote(f, m->unit);
        fprintf(f, ", \"better\": \"%s\", \"value\": ",
                pp_check_kind_higher_is_better(m->kind) ? "higher" : "lower");
        json_num(f, m->value);
        fputs(",\n     \"stats\": ", f);
        json_stats(f, m);
        fputs(",\n     \"samples\": [", f);
        for (size_t k = 0; k < m->n; k++) {
            if (k)
                fputs(", ", f);
            json_num(f, m->samples[k]);
        }
        fputs("]}", f);
    }
    fputs("\n  ]\n}\n", f);
    if (ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the baseline failed");
    return PP_OK;
}

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
    for (int k = 0; k < PP_CHECK_KIND_COUNT; k++)
        o->threshold[k] = k_default_threshold[k];
}

/* A metric name as pprof-check writes them: a family, stageN.fwd_ms|bwd_ms, or
 * linkA-B.act|grad.bandwidth_GBps. */
static int valid_metric_name(const char *s)
{
    if (kind_by_name(s) >= 0)
        return 1;
    int a, b, n = 0;
    char rest[64];
    if (sscanf(s, "stage%d.%63s%n", &a, rest, &n) == 2 && a >= 0 && s[n] == '\0')
        return strcmp(rest, "fwd_ms") == 0 || strcmp(rest, "bwd_ms") == 0;
    if (sscanf(s, "link%d-%d.%63s%n", &a, &b, rest, &n) == 3 && a >= 0 && b >= 0 && s[n] == '\0')
        return strcmp(rest, "act.bandwidth_GBps") == 0 || strcmp(rest, "grad.bandwidth_GBps") == 0;
    return 0;
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
                                      "throughput, bubble_ratio, fwd_ms, bwd_ms, bandwidth_GBps; "
                                      "or one metric: stage2.fwd_ms, link0-1.act.bandwidth_GBps)",
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
    int k = kind_by_name(name);
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
static void shape_diff(const pp_check_shape *a, const pp_check_shape *b, char *buf, size_t cap)
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

static void row_fill(pp_check_row *w, const pp_check_metric *b, const pp_check_metric *c,
                     const pp_check_options *o)
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
    w->u = w->p = w->p_adj = w->ci_lo = w->ci_hi = NAN;
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

pp_status pp_check_compare(const pp_check_run *base, const pp_check_run *cur,
                           const pp_check_options *o, pp_check_result **out)
{
    *out = NULL;
    pp_status st = PP_OK;
    double *p = NULL, *adj = NULL;
    size_t *idx = NULL;
    char diff[512];
    shape_diff(&base->shape, &cur->shape, diff, sizeof diff);
    char sb[160], sc[160];
    pp_check_shape_format(&base->shape, sb, sizeof sb);
    pp_check_shape_format(&cur->shape, sc, sizeof sc);
    if (diff[0] && !o->allow_shape_change)
        return PP_ERR(PP_ERR_INVALID, "the runs have different shapes (%s): baseline %s is %s, "
                                      "current %s is %s; their numbers are not comparable "
                                      "(--allow-shape-change compares them anyway)",
                      diff, base->source, sb, cur->source, sc);
    pp_check_result *r = calloc(1, sizeof *r);
    size_t cap = base->n_metrics + cur->n_metrics;
    if (r)
        r->rows = calloc(cap ? cap : 1, sizeof *r->rows);
    if (!r || !r->rows) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory comparing runs");
        goto done;
    }
    snprintf(r->base_source, sizeof r->base_source, "%s", base->source);
    snprintf(r->cur_source, sizeof r->cur_source, "%s", cur->source);
    snprintf(r->base_kind, sizeof r->base_kind, "%s", base->source_kind);
    snprintf(r->cur_kind, sizeof r->cur_kind, "%s", cur->source_kind);
    snprintf(r->base_shape, sizeof r->base_shape, "%s", sb);
    snprintf(r->cur_shape, sizeof r->cur_shape, "%s", sc);
    r->base_steps = base->n_steps;
    r->cur_steps = cur->n_steps;
    r->alpha = o->alpha;
    r->holm = o->holm;
    r->bootstrap_reps = o->bootstrap_reps;
    if (diff[0]) {
        r->shape_differs = 1;
        pp_append_line(r->notes, sizeof r->notes, "shapes differ (%s), compared anyway "
                       "(--allow-shape-change)", diff);
    }
    for (size_t i = 0; i < base->n_metrics; i++) {
        const pp_check_metric *b = &base->metrics[i];
        row_fill(&r->rows[r->n_rows++], b, find_metric(cur, b->name), o);
    }
    for (size_t i = 0; i < cur->n_metrics; i++)
        if (!find_metric(base, cur->metrics[i].name))
            row_fill(&r->rows[r->n_rows++], NULL, &cur->metrics[i], o);
    /* the test on every metric with samples on both sides */
    p = malloc((r->n_rows ? r->n_rows : 1) * sizeof *p);
    adj = malloc((r->n_rows ? r->n_rows : 1) * sizeof *adj);
    idx = malloc((r->n_rows ? r->n_rows : 1) * sizeof *idx);
    if (!p || !adj || !idx) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory comparing runs");
        goto done;
    }
    size_t nt = 0;
    double worst_min_p = 0;
    for (size_t i = 0; i < r->n_rows; i++) {
        pp_check_row *w = &r->rows[i];
        const pp_check_metric *b = find_metric(base, w->name), *c = find_metric(cur, w->name);
        if (!b || !c || b->n == 0 || c->n == 0 || w->unit_differs)
            continue;
        pp_check_mwu t;
        if ((st = pp_check_mann_whitney(b->samples, b->n, c->samples, c->n, &t)) != PP_OK)
            goto done;
        w->tested = 1;
        w->exact = t.exact;
        w->u = t.u;
        w->p = t.p;
        p[nt] = t.p;
        idx[nt++] = i;
        double mp = min_p(b->n, c->n);
        if (mp > worst_min_p)
            worst_min_p = mp;
        if (o->bootstrap_reps > 0) {
            uint64_t seed = fnv1a(o->seed ^ k_fnv_offset, w->name, strlen(w->name));
            double lo, hi;
            if ((st = pp_check_bootstrap(b->samples, b->n, c->samples, c->n, !w->absolute,
                                         1 - o->alpha, o->bootstrap_reps, seed, &lo, &hi)) != PP_OK)
                goto done;
            if (isfinite(lo) && isfinite(hi)) {
                w->has_ci = 1;
                w->ci_lo = lo * 100;
                w->ci_hi = hi * 100;
            }
        }
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
    if (nt > 0 && worst_min_p >= need)
        pp_append_line(r->notes, sizeof r->notes,
                       "too few steps to ever be significant: with %zu and %zu steps the smallest "
                       "possible p is %.3g, not below %.3g (alpha%s); capture more steps",
                       base->n_steps, cur->n_steps, worst_min_p, need,
                       o->holm ? " / tested metrics, Holm" : "");
    /* verdicts */
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
        if (!beyond)
            w->verdict = PP_VERDICT_OK;
        else if (!w->tested)
            w->verdict = PP_VERDICT_CHANGED;
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
    if (base->warnings[0])
        pp_append_line(r->notes, sizeof r->notes, "baseline %s has warnings: %.200s",
                       base->source, base->warnings);
    if (cur->warnings[0])
        pp_append_line(r->notes, sizeof r->notes, "current %s has warnings: %.200s", cur->source,
                       cur->warnings);
done:
    free(p);
    free(adj);
    free(idx);
    if (st != PP_OK) {
        pp_check_result_free(r);
        return st;
    }
    *out = r;
    return PP_OK;
}

/* ======================================================================================== */
/* Outputs                                                                                    */
/* ======================================================================================== */

static void fmt_value(const pp_check_row *w, double v, char *buf, size_t cap)
{
    if (!isfinite(v))
        snprintf(buf, cap, "-");
    else if (w->absolute)
        snprintf(buf, cap, "%.2f%%", v * 100);
    else if (strcmp(w->unit, "ms") == 0)
        snprintf(buf, cap, "%.3f", v);
    else
        snprintf(buf, cap, "%.4g", v);
}

static const char *change_unit(const pp_check_row *w) { return w->absolute ? " pt" : "%"; }

static void fmt_change(const pp_check_row *w, double v, char *buf, size_t cap)
{
    if (!isfinite(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, "%+.2f%s", v, change_unit(w));
}

static void fmt_threshold(const pp_check_row *w, char *buf, size_t cap)
{
    snprintf(buf, cap, "%.3g%s", w->threshold, change_unit(w));
}

static void fmt_ci(const pp_check_row *w, char *buf, size_t cap)
{
    if (!w->has_ci)
        snprintf(buf, cap, "%s", w->tested ? "-" : "no test");
    else
        snprintf(buf, cap, "[%+.2f, %+.2f]%s", w->ci_lo, w->ci_hi, change_unit(w));
}

static void fmt_p(const pp_check_row *w, char *buf, size_t cap)
{
    if (!w->tested)
        snprintf(buf, cap, "no test");
    else if (w->p_adj < 1e-4)
        snprintf(buf, cap, "%.1e", w->p_adj);
    else
        snprintf(buf, cap, "%.4f", w->p_adj);
}

static void names_of(const pp_check_result *r, pp_check_verdict v, char *buf, size_t cap)
{
    buf[0] = '\0';
    size_t len = 0;
    for (size_t i = 0; i < r->n_rows && len < cap; i++)
        if (r->rows[i].verdict == v) {
            int w = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", r->rows[i].name);
            len += w > 0 ? (size_t)w : 0;
        }
}

static void test_line(const pp_check_result *r, char *buf, size_t cap)
{
    snprintf(buf, cap, "Mann-Whitney U on per-step samples, two-sided, alpha %g%s; interval: "
                       "%g%% bootstrap of the change in medians (%d resamples)",
             r->alpha, r->holm ? ", Holm-adjusted over the tested metrics" : "",
             (1 - r->alpha) * 100, r->bootstrap_reps);
}

pp_status pp_check_write_table(const pp_check_result *r, FILE *f)
{
    char line[512];
    fprintf(f, "baseline: %s (%s, %zu steps)\ncurrent:  %s (%s, %zu steps)\n", r->base_source,
            r->base_kind, r->base_steps, r->cur_source, r->cur_kind, r->cur_steps);
    if (r->shape_differs)
        fprintf(f, "shape:    baseline %s, current %s\n", r->base_shape, r->cur_shape);
    else
        fprintf(f, "shape:    %s\n", r->base_shape);
    test_line(r, line, sizeof line);
    fprintf(f, "test:     %s\n\n", line);
    char ci_head[32];
    snprintf(ci_head, sizeof ci_head, "%g%% interval", (1 - r->alpha) * 100);
    fprintf(f, "%-28s %-9s %11s %11s %9s %9s  %-22s %9s  %s\n", "metric", "unit", "baseline",
            "current", "change", "threshold", ci_head, r->holm ? "p (Holm)" : "p", "verdict");
    for (size_t i = 0; i < r->n_rows; i++) {
        const pp_check_row *w = &r->rows[i];
        char b[32], c[32], ch[32], th[32], ci[64], p[32];
        fmt_value(w, w->base, b, sizeof b);
        fmt_value(w, w->cur, c, sizeof c);
        fmt_change(w, w->change, ch, sizeof ch);
        fmt_threshold(w, th, sizeof th);
        fmt_ci(w, ci, sizeof ci);
        fmt_p(w, p, sizeof p);
        const char *verdict = pp_check_verdict_name(w->verdict);
        fprintf(f, "%-28s %-9s %11s %11s %9s %9s  %-22s %9s  %s\n", w->name,
                w->absolute ? "%" : w->unit, b, c, ch, th, ci, p,
                w->verdict == PP_VERDICT_REGRESSION ? "REGRESSION" : verdict);
    }
    if (r->notes[0]) {
        fputc('\n', f);
        for (const char *s = r->notes; *s;) {
            const char *nl = strchr(s, '\n');
            size_t len = nl ? (size_t)(nl - s) : strlen(s);
            fprintf(f, "note: %.*s\n", (int)len, s);
            s += len + (nl ? 1 : 0);
        }
    }
    char names[1024];
    fputc('\n', f);
    if (r->n_regressions) {
        names_of(r, PP_VERDICT_REGRESSION, names, sizeof names);
        fprintf(f, "result: FAIL, %d regression%s: %s\n", r->n_regressions,
                r->n_regressions == 1 ? "" : "s", names);
    } else {
        fprintf(f, "result: PASS, no regression\n");
    }
    if (r->n_improvements) {
        names_of(r, PP_VERDICT_IMPROVEMENT, names, sizeof names);
        fprintf(f, "improvements (%d): %s\n", r->n_improvements, names);
    }
    if (ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the table failed");
    return PP_OK;
}

static void json_side(FILE *f, const char *key, const char *src, const char *kind, size_t steps,
                      const char *shape)
{
    fprintf(f, "  \"%s\": {\"source\": ", key);
    json_quote(f, src);
    fputs(", \"kind\": ", f);
    json_quote(f, kind);
    fprintf(f, ", \"steps\": %zu, \"shape\": ", steps);
    json_quote(f, shape);
    fputs("},\n", f);
}

static void json_names(FILE *f, const pp_check_result *r, pp_check_verdict v)
{
    fputc('[', f);
    int k = 0;
    for (size_t i = 0; i < r->n_rows; i++)
        if (r->rows[i].verdict == v) {
            if (k++)
                fputs(", ", f);
            json_quote(f, r->rows[i].name);
        }
    fputc(']', f);
}

pp_status pp_check_write_json(const pp_check_result *r, FILE *f)
{
    fprintf(f, "{\n  \"check_version\": %d,\n  \"result\": \"%s\",\n", PP_CHECK_JSON_VERSION,
            r->n_regressions ? "fail" : "pass");
    fprintf(f, "  \"test\": {\"name\": \"mann-whitney-u\", \"sides\": 2, \"alpha\": %g, "
               "\"correction\": \"%s\", \"tested_metrics\": %d},\n",
            r->alpha, r->holm ? "holm" : "none", r->n_tested);
    fprintf(f, "  \"interval\": {\"method\": \"bootstrap-percentile\", \"of\": "
               "\"change of medians\", \"level\": %g, \"resamples\": %d},\n",
            1 - r->alpha, r->bootstrap_reps);
    json_side(f, "baseline", r->base_source, r->base_kind, r->base_steps, r->base_shape);
    json_side(f, "current", r->cur_source, r->cur_kind, r->cur_steps, r->cur_shape);
    fprintf(f, "  \"shape_differs\": %s,\n  \"metrics\": [", r->shape_differs ? "true" : "false");
    for (size_t i = 0; i < r->n_rows; i++) {
        const pp_check_row *w = &r->rows[i];
        fputs(i ? ",\n    {" : "\n    {", f);
        fputs("\"name\": ", f);
        json_quote(f, w->name);
        fprintf(f, ", \"family\": \"%s\", \"unit\": ", pp_check_kind_name(w->kind));
        json_quote(f, w->unit);
        fprintf(f, ", \"better\": \"%s\", \"baseline\": ",
                w->higher_is_better ? "higher" : "lower");
        json_num(f, w->base);
        fputs(", \"current\": ", f);
        json_num(f, w->cur);
        fputs(", \"change\": ", f);
        json_num(f, w->change);
        fprintf(f, ", \"change_unit\": \"%s\", \"threshold\": ", w->absolute ? "points" : "%");
        json_num(f, w->threshold);
        fprintf(f, ",\n     \"n_baseline\": %zu, \"n_current\": %zu, \"tested\": %s, "
                   "\"exact\": %s, \"u\": ",
                w->n_base, w->n_cur, w->tested ? "true" : "false", w->exact ? "true" : "false");
        json_num(f, w->u);
        fputs(", \"p\": ", f);
        json_num(f, w->p);
        fputs(", \"p_adjusted\": ", f);
        json_num(f, w->p_adj);
        fputs(", \"interval\": ", f);
        if (w->has_ci) {
            fputc('[', f);
            json_num(f, w->ci_lo);
            fputs(", ", f);
            json_num(f, w->ci_hi);
            fputc(']', f);
        } else {
            fputs("null", f);
        }
        fprintf(f, ", \"verdict\": \"%s\"}", pp_check_verdict_name(w->verdict));
    }
    fputs("\n  ],\n  \"regressions\": ", f);
    json_names(f, r, PP_VERDICT_REGRESSION);
    fputs(",\n  \"improvements\": ", f);
    json_names(f, r, PP_VERDICT_IMPROVEMENT);
    fputs(",\n  \"notes\": [", f);
    int k = 0;
    for (const char *s = r->notes; *s;) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < 1023 ? len : 1023), s);
        fputs(k++ ? ", " : "", f);
        json_quote(f, line);
        s += len + (nl ? 1 : 0);
    }
    fputs("]\n}\n", f);
    if (ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the JSON report failed");
    return PP_OK;
}

static void xml_escape(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if (*p < 0x20 && *p != '\n' && *p != '\t')
                fputc('?', f); /* not allowed in XML 1.0 */
            else
                fputc(*p, f);
        }
    }
}

/* "change +5.1% (threshold 3%), 99% interval [...], p (Holm) 1e-8, n 24 vs 24" */
static void row_summary(const pp_check_row *w, double alpha, char *buf, size_t cap)
{
    char b[32], c[32], ch[32], th[32], ci[64], p[32];
    fmt_value(w, w->base, b, sizeof b);
    fmt_value(w, w->cur, c, sizeof c);
    fmt_change(w, w->change, ch, sizeof ch);
    fmt_threshold(w, th, sizeof th);
    fmt_ci(w, ci, sizeof ci);
    fmt_p(w, p, sizeof p);
    snprintf(buf, cap, "%s: %s -> %s %s, change %s (threshold %s), %g%% interval %s, p %s, "
                       "%zu vs %zu steps",
             pp_check_verdict_name(w->verdict), b, c, w->absolute ? "%" : w->unit, ch, th,
             (1 - alpha) * 100, ci, p, w->n_base, w->n_cur);
}

pp_status pp_check_write_junit(const pp_check_result *r, FILE *f)
{
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f, "<testsuites name=\"pprof-check\" tests=\"%zu\" failures=\"%d\" errors=\"0\">\n",
            r->n_rows, r->n_regressions);
    fprintf(f, "  <testsuite name=\"pprof-check\" tests=\"%zu\" failures=\"%d\" errors=\"0\" "
               "skipped=\"0\" time=\"0\">\n",
            r->n_rows, r->n_regressions);
    char line[512];
    test_line(r, line, sizeof line);
    fputs("    <properties>\n      <property name=\"baseline\" value=\"", f);
    xml_escape(f, r->base_source);
    fputs("\"/>\n      <property name=\"current\" value=\"", f);
    xml_escape(f, r->cur_source);
    fputs("\"/>\n      <property name=\"shape\" value=\"", f);
    xml_escape(f, r->cur_shape);
    fputs("\"/>\n      <property name=\"test\" value=\"", f);
    xml_escape(f, line);
    fputs("\"/>\n    </properties>\n", f);
    for (size_t i = 0; i < r->n_rows; i++) {
        const pp_check_row *w = &r->rows[i];
        char s[512];
        row_summary(w, r->alpha, s, sizeof s);
        fputs("    <testcase classname=\"pprof-check.", f);
        xml_escape(f, pp_check_kind_name(w->kind));
        fputs("\" name=\"", f);
        xml_escape(f, w->name);
        fputs("\" time=\"0\">", f);
        if (w->verdict == PP_VERDICT_REGRESSION) {
            fputs("\n      <failure type=\"regression\" message=\"", f);
            xml_escape(f, s);
            fputs("\">", f);
            xml_escape(f, s);
            fputs("</failure>\n    ", f);
        } else {
            fputs("\n      <system-out>", f);
            xml_escape(f, s);
            fputs("</system-out>\n    ", f);
        }
        fputs("</testcase>\n", f);
    }
    fputs("  </testsuite>\n</testsuites>\n", f);
    if (ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the JUnit report failed");
    return PP_OK;
}

/* Text for a Markdown table cell or inline code: '|' escaped, newlines and backticks dropped. */
static void md_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else if (*s == '\n' || *s == '`')
            fputc(' ', f);
        else
            fputc(*s, f);
    }
}

pp_status pp_check_write_markdown(const pp_check_result *r, FILE *f)
{
    char names[1024], line[512];
    if (r->n_regressions) {
        names_of(r, PP_VERDICT_REGRESSION, names, sizeof names);
        fprintf(f, "### pprof-check: FAIL, %d regression%s\n\n", r->n_regressions,
                r->n_regressions == 1 ? "" : "s");
        fputs("Regressed: ", f);
        md_text(f, names);
        fputs("\n\n", f);
    } else {
        fprintf(f, "### pprof-check: PASS\n\n");
    }
    if (r->n_improvements) {
        names_of(r, PP_VERDICT_IMPROVEMENT, names, sizeof names);
        fputs("Improved: ", f);
        md_text(f, names);
        fputs("\n\n", f);
    }
    fputs("Baseline `", f);
    md_text(f, r->base_source);
    fprintf(f, "` (%s, %zu steps) vs current `", r->base_kind, r->base_steps);
    md_text(f, r->cur_source);
    fprintf(f, "` (%s, %zu steps); ", r->cur_kind, r->cur_steps);
    md_text(f, r->cur_shape);
    test_line(r, line, sizeof line);
    fputs(".\n", f);
    md_text(f, line);
    fputs(".\n\n", f);
    fprintf(f, "| metric | baseline | current | change | threshold | %g%% interval | p%s | "
               "verdict |\n|---|---:|---:|---:|---:|---|---:|---|\n",
            (1 - r->alpha) * 100, r->holm ? " (Holm)" : "");
    for (size_t i = 0; i < r->n_rows; i++) {
        const pp_check_row *w = &r->rows[i];
        char b[32], c[32], ch[32], th[32], ci[64], p[32];
        fmt_value(w, w->base, b, sizeof b);
        fmt_value(w, w->cur, c, sizeof c);
        fmt_change(w, w->change, ch, sizeof ch);
        fmt_threshold(w, th, sizeof th);
        fmt_ci(w, ci, sizeof ci);
        fmt_p(w, p, sizeof p);
        const char *unit = w->absolute ? "" : w->unit;
        fputs("| ", f);
        md_text(f, w->name);
        fprintf(f, " | %s %s | %s %s | %s | %s | %s | %s | %s%s%s |\n", b, unit, c, unit, ch, th,
                ci, p, w->verdict == PP_VERDICT_REGRESSION ? "**" : "",
                pp_check_verdict_name(w->verdict),
                w->verdict == PP_VERDICT_REGRESSION ? "**" : "");
    }
    if (r->notes[0]) {
        fputc('\n', f);
        for (const char *s = r->notes; *s;) {
            const char *nl = strchr(s, '\n');
            size_t len = nl ? (size_t)(nl - s) : strlen(s);
            char note[1024];
            snprintf(note, sizeof note, "%.*s", (int)(len < 1023 ? len : 1023), s);
            fputs("- ", f);
            md_text(f, note);
            fputc('\n', f);
            s += len + (nl ? 1 : 0);
        }
    }
    if (ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the Markdown report failed");
    return PP_OK;
}
