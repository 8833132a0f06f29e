/* check_history.c: pprof-check's history (pp_check.h, docs/cli/pprof-check.md "History"): one
 * entry per commit or CI run in a directory (a baseline file with its label and time), each
 * metric's series over the entries, its change points by E-Divisive means (Matteson and James
 * 2014, as MongoDB's CI uses it: Daly et al., ICPE 2020) with a permutation test, and the
 * outputs: table, JSON, JUnit, Markdown and a gnuplot chart per metric. */
#define _GNU_SOURCE /* gmtime_r */
#include "check_internal.h"
#include "pp_json.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ======================================================================================== */
/* E-Divisive means                                                                           */
/* ======================================================================================== */

/* Scratch for one series of at most n values. */
typedef struct ed_work {
    double *within; /* (n+1)^2: within[a (n+1) + b] = sum of |x_i - x_j| over a <= i < j < b */
    double *perm;   /* a shuffled copy */
} ed_work;

/* The E-statistic with exponent 1 of x[0..n) split at t and cut at k (ms <= t, t + ms <= k
 * <= n), maximized over both as E-Divisive does (the cut lets a level that ends before the
 * segment does, a regression later fixed, stand out):
 *   Q(t, k) = a b / (a + b) * (2 B / (a b) - WL / C(a,2) - WR / C(b,2)),  a = t, b = k - t,
 * B the distances between x[0..t) and x[t..k), WL and WR those within each. Every sum of
 * distances within a range comes from one table built in O(n^2). Returns the largest Q (-1
 * when no split is allowed) and its t. */
static double best_split(const double *x, size_t n, size_t ms, ed_work *w, size_t *best)
{
    *best = 0;
    if (n < 2 * ms || ms < 1)
        return -1;
    size_t W = n + 1;
    double *S = w->within;
    for (size_t b = 0; b <= n; b++) {
        S[b * W + b] = 0;
        if (b == 0)
            continue;
        /* S(a, b) = S(a, b-1) + the distances from x[b-1] to x[a..b-1) */
        double col = 0;
        for (size_t a = b; a-- > 0;) {
            if (a + 1 < b)
                col += fabs(x[a] - x[b - 1]);
            S[a * W + b] = (a + 1 <= b - 1 ? S[a * W + b - 1] : 0) + col;
        }
    }
    double top = -1;
    for (size_t t = ms; t + ms <= n; t++) {
        double a = (double)t, wl = S[0 * W + t];
        double left = t >= 2 ? wl / (a * (a - 1) / 2) : 0;
        for (size_t k = t + ms; k <= n; k++) {
            double b = (double)(k - t), wr = S[t * W + k];
            double between = S[0 * W + k] - wl - wr;
            double q = 2 * between / (a * b) - left;
            if (k - t >= 2)
                q -= wr / (b * (b - 1) / 2);
            q *= a * b / (a + b);
            if (q > top + 1e-12 * fabs(top)) {
                top = q;
                *best = t;
            }
        }
    }
    return top;
}

/* The permutation p-value of x[0..n)'s best split: how often a shuffle of the segment (no
 * change in it by construction) splits as well. Stops early once p cannot come below `level`
 * (a segment without a change costs a few shuffles, not all). */
static double split_p(const double *x, size_t n, size_t ms, double q, int perms, double level,
                      pp_rng *g, ed_work *w)
{
    int as_good = 0, r = 0;
    double give_up = level * (perms + 1.0) - 1; /* as_good beyond this: p >= level */
    memcpy(w->perm, x, n * sizeof *x);
    for (r = 0; r < perms; r++) {
        for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
            size_t j = (size_t)pp_rng_below(g, i + 1);
            double t = w->perm[i];
            w->perm[i] = w->perm[j];
            w->perm[j] = t;
        }
        size_t t;
        if (best_split(w->perm, n, ms, w, &t) >= q * (1 - 1e-12) && ++as_good > give_up)
            return 1; /* not significant at level: the exact p does not matter */
    }
    return (1.0 + as_good) / (1.0 + perms);
}

pp_status pp_check_change_points(const double *x, size_t n, double alpha, int permutations,
                                 int min_segment, uint64_t seed, size_t *cps, double *ps,
                                 size_t cap, size_t *n_cps)
{
    *n_cps = 0;
    if (n > PP_CHECK_MAX_HISTORY || permutations < 1 || min_segment < 1)
        return PP_ERR(PP_ERR_INVALID, "change points: %zu values (at most %d), %d permutations, "
                                      "segments of %d", n, PP_CHECK_MAX_HISTORY, permutations,
                      min_segment);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return PP_ERR(PP_ERR_INVALID, "change points: value %zu is not finite", i);
    ed_work w = {malloc((n + 1) * (n + 1) * sizeof *w.within),
                 malloc((n ? n : 1) * sizeof *w.perm)};
    /* the boundaries found so far, 0 and n included, sorted */
    size_t *bounds = malloc((cap + 2) * sizeof *bounds);
    double *pv = malloc((cap + 1) * sizeof *pv);
    if (!w.within || !w.perm || !bounds || !pv) {
        free(w.within);
        free(w.perm);
        free(bounds);
        free(pv);
        return PP_ERR(PP_ERR_NOMEM, "out of memory finding change points in %zu values", n);
    }
    pp_rng g;
    pp_rng_seed(&g, seed);
    size_t nb = 2, ms = (size_t)min_segment;
    bounds[0] = 0;
    bounds[1] = n;
    size_t found = 0;
    /* E-Divisive: the best split over all segments, kept while its permutation test rejects
     * "no change in this segment"; the first that does not ends the search. The k-th split is
     * tested at alpha / 2^k, so that over all of them a history without a change shows a false
     * change point with probability below alpha (1/2 + 1/4 + ... < 1), with enough shuffles to
     * reach that level (10 / level at least). */
    double level = alpha;
    while (found < cap) {
        level /= 2;
        double want = ceil(10 / level);
        int perms = want > permutations ? (want < 1e7 ? (int)want : 10000000) : permutations;
        double top = -1;
        size_t seg = 0, at = 0;
        for (size_t s = 0; s + 1 < nb; s++) {
            size_t t, lo = bounds[s], len = bounds[s + 1] - lo;
            double q = best_split(x + lo, len, ms, &w, &t);
            if (q > top) {
                top = q;
                seg = s;
                at = lo + t;
            }
        }
        if (!(top > 0))
            break;
        size_t lo = bounds[seg], len = bounds[seg + 1] - lo;
        double p = split_p(x + lo, len, ms, top, perms, level, &g, &w);
        if (!(p < level))
            break;
        memmove(bounds + seg + 2, bounds + seg + 1, (nb - seg - 1) * sizeof *bounds);
        bounds[seg + 1] = at;
        nb++;
        pv[found] = p;
        cps[found++] = at;
    }
    /* increasing order, each with its p */
    for (size_t i = 0; i < found; i++) {
        size_t best = i;
        for (size_t j = i + 1; j < found; j++)
            if (cps[j] < cps[best])
                best = j;
        size_t tc = cps[i];
        cps[i] = cps[best];
        cps[best] = tc;
        double tp = pv[i];
        pv[i] = pv[best];
        pv[best] = tp;
    }
    if (ps)
        memcpy(ps, pv, found * sizeof *ps);
    *n_cps = found;
    free(w.within);
    free(w.perm);
    free(bounds);
    free(pv);
    return PP_OK;
}

/* ======================================================================================== */
/* Recording an entry                                                                         */
/* ======================================================================================== */

static void now_utc(char *buf, size_t cap)
{
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
    else
        snprintf(buf, cap, "unknown");
}

/* s with everything but [A-Za-z0-9._-] as '_', at most cap - 1 bytes. */
static void file_safe(const char *s, char *out, size_t cap)
{
    size_t k = 0;
    for (; *s && k + 1 < cap; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        out[k++] = ok ? c : '_';
    }
    out[k] = '\0';
}

pp_status pp_check_history_record(const char *dir, pp_check_run *r, const char *label,
                                  const char *time, const char *version, char *path_out,
                                  size_t cap)
{
    char when[32];
    if (time)
        snprintf(when, sizeof when, "%s", time);
    else
        now_utc(when, sizeof when);
    if (!label)
        label = "run";
    for (size_t k = 0; k < r->n_runs; k++)
        pp_check_run_label(r, k, label, when);
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return PP_ERR(PP_ERR_IO, "cannot create the history directory %s: %s", dir,
                      strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return PP_ERR(PP_ERR_IO, "%s is not a directory", dir);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return PP_ERR(PP_ERR_NOMEM, "out of memory writing a history entry");
    pp_status st = pp_check_baseline_write(r, version, f);
    if (fclose(f) != 0 && st == PP_OK)
        st = PP_ERR(PP_ERR_NOMEM, "out of memory writing a history entry");
    char t[32], l[64];
    file_safe(when, t, sizeof t);
    file_safe(label, l, sizeof l);
    for (int i = 1; st == PP_OK; i++) {
        char suffix[16] = "";
        if (i > 1)
            snprintf(suffix, sizeof suffix, "-%d", i);
        snprintf(path_out, cap, "%s/%s-%s%s.json", dir, t, l, suffix);
        if (access(path_out, F_OK) != 0) {
            st = pp_write_file_atomic(path_out, buf, len);
            break;
        }
        if (i >= 1000)
            st = PP_ERR(PP_ERR_IO, "%s: too many entries named %s-%s", dir, t, l);
    }
    free(buf);
    return st;
}

/* ======================================================================================== */
/* Reading and analyzing a history                                                            */
/* ======================================================================================== */

void pp_check_history_free(pp_check_history *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n_series; i++) {
        free(h->series[i].values);
        free(h->series[i].cps);
    }
    free(h->series);
    free(h->entries);
    free(h);
}

int pp_check_history_failed(const pp_check_history *h) { return h && h->n_regressions > 0; }

typedef struct entry {
    pp_check_run *run;
    pp_check_run_info info;
} entry;

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int c = strcmp(x->info.time, y->info.time);
    if (c == 0)
        c = strcmp(x->info.label, y->info.label);
    return c ? c : strcmp(x->info.source, y->info.source);
}

static int is_json_name(const char *s)
{
    size_t n = strlen(s);
    return s[0] != '.' && n > 5 && strcmp(s + n - 5, ".json") == 0;
}

/* Every *.json of dir, loaded, with its label and time. */
static pp_status read_entries(const char *dir, entry **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d)
        return PP_ERR(PP_ERR_IO, "history %s: %s", dir, strerror(errno));
    entry *e = NULL;
    size_t n = 0;
    pp_status st = PP_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_json_name(de->d_name))
            continue;
        if (n >= PP_CHECK_MAX_HISTORY) {
            st = PP_ERR(PP_ERR_INVALID, "history %s: more than %d entries; keep the recent "
                                        "ones (move the oldest files away)", dir,
                        PP_CHECK_MAX_HISTORY);
            break;
        }
        entry *grown = realloc(e, (n + 1) * sizeof *e);
        if (!grown) {
            st = PP_ERR(PP_ERR_NOMEM, "out of memory reading the history %s", dir);
            break;
        }
        e = grown;
        entry *x = &e[n];
        memset(x, 0, sizeof *x);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if ((st = pp_check_run_load(path, -1, &x->run)) != PP_OK) {
            st = pp_error_wrap(st, "history entry");
            break;
        }
        n++;
        snprintf(x->info.source, sizeof x->info.source, "%s", de->d_name);
        const pp_check_run_info *r0 = &x->run->runs[0];
        if (r0->label[0])
            snprintf(x->info.label, sizeof x->info.label, "%s", r0->label);
        else /* the file's name without .json */
            snprintf(x->info.label, sizeof x->info.label, "%.*s",
                     (int)(strlen(de->d_name) - 5), de->d_name);
        snprintf(x->info.time, sizeof x->info.time, "%s",
                 r0->time[0] ? r0->time : x->run->created);
        x->info.n_steps = x->run->n_steps;
    }
    closedir(d);
    if (st == PP_OK && n == 0)
        st = PP_ERR(PP_ERR_INVALID, "history %s holds no entry (*.json: pprof-check --history "
                                    "%s --record RUN)", dir, dir);
    if (st != PP_OK) {
        for (size_t i = 0; i < n; i++)
            pp_check_run_free(e[i].run);
        free(e);
        return st;
    }
    qsort(e, n, sizeof *e, cmp_entry);
    *out = e;
    *n_out = n;
    return PP_OK;
}

static double threshold_for(const pp_check_options *o, const char *name, pp_check_kind k)
{
    for (int i = 0; i < o->n_overrides; i++)
        if (strcmp(o->overrides[i].metric, name) == 0)
            return o->overrides[i].value;
    return o->threshold[k];
}

/* The series of every metric of the entries, in the order they first appear. */
static pp_status build_series(pp_check_history *h, const entry *e, size_t n,
                              const pp_check_options *o)
{
    for (size_t i = 0; i < n; i++)
        for (size_t m = 0; m < e[i].run->n_metrics; m++) {
            const pp_check_metric *x = &e[i].run->metrics[m];
            size_t s = 0;
            while (s < h->n_series && strcmp(h->series[s].name, x->name) != 0)
                s++;
            if (s == h->n_series) {
                pp_check_series *grown = realloc(h->series, (s + 1) * sizeof *grown);
                if (!grown)
                    return PP_ERR(PP_ERR_NOMEM, "out of memory for the history's series");
                h->series = grown;
                pp_check_series *z = &grown[s];
                memset(z, 0, sizeof *z);
                h->n_series++;
                snprintf(z->name, sizeof z->name, "%s", x->name);
                snprintf(z->unit, sizeof z->unit, "%s", x->unit);
                z->kind = x->kind;
                z->higher_is_better = pp_check_kind_higher_is_better(x->kind);
                z->absolute = pp_check_kind_is_absolute(x->kind);
                z->threshold = threshold_for(o, x->name, x->kind);
                z->values = malloc(n * sizeof *z->values);
                if (!z->values)
                    return PP_ERR(PP_ERR_NOMEM, "out of memory for the history's series");
                for (size_t k = 0; k < n; k++)
                    z->values[k] = NAN;
            }
            if (strcmp(h->series[s].unit, x->unit) == 0)
                h->series[s].values[i] = x->value;
        }
    return PP_OK;
}

/* The change points of series z (found over its finite values; idx maps them to entries), with
 * the levels' medians and the verdicts. */
static pp_status series_change_points(pp_check_history *h, pp_check_series *z, double alpha,
                                      const pp_check_options *o, double *v, size_t *idx,
                                      size_t *cps, double *ps)
{
    size_t m = 0;
    for (size_t i = 0; i < h->n_entries; i++)
        if (isfinite(z->values[i])) {
            v[m] = z->values[i];
            idx[m++] = i;
        }
    z->n_values = m;
    if (m < 2 * (size_t)o->min_segment)
        return PP_OK;
    size_t cap = m / (size_t)o->min_segment, nc = 0;
    uint64_t seed = pp_check_fnv1a(o->seed ^ PP_CHECK_FNV_OFFSET, z->name, strlen(z->name));
    pp_status st = pp_check_change_points(v, m, alpha, o->permutations, o->min_segment, seed,
                                          cps, ps, cap, &nc);
    if (st != PP_OK || nc == 0)
        return st;
    z->cps = calloc(nc, sizeof *z->cps);
    if (!z->cps)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for change points");
    z->n_cps = nc;
    for (size_t c = 0; c < nc; c++) {
        size_t lo = c ? cps[c - 1] : 0, hi = c + 1 < nc ? cps[c + 1] : m;
        pp_check_cp *p = &z->cps[c];
        p->index = idx[cps[c]];
        p->p = ps[c];
        p->before = pp_check_median(v + lo, cps[c] - lo);
        p->after = pp_check_median(v + cps[c], hi - cps[c]);
        if (z->absolute)
            p->change = (p->after - p->before) * 100;
        else
            p->change = p->before != 0 ? (p->after / p->before - 1) * 100 : NAN;
        int beyond = isfinite(p->change) && fabs(p->change) > z->threshold;
        int worse = z->higher_is_better ? p->change < 0 : p->change > 0;
        p->verdict = !beyond ? PP_VERDICT_OK : worse ? PP_VERDICT_REGRESSION
                                                     : PP_VERDICT_IMPROVEMENT;
        h->n_cps++;
        if (p->verdict == PP_VERDICT_REGRESSION)
            h->n_regressions++;
        if (p->verdict == PP_VERDICT_IMPROVEMENT)
            h->n_improvements++;
    }
    return PP_OK;
}

pp_status pp_check_history_analyze(const char *dir, const pp_check_options *o,
                                   pp_check_history **out)
{
    *out = NULL;
    entry *e = NULL;
    size_t n = 0;
    pp_status st = read_entries(dir, &e, &n);
    if (st != PP_OK)
        return st;
    pp_check_history *h = calloc(1, sizeof *h);
    double *v = malloc(n * sizeof *v), *ps = malloc(n * sizeof *ps);
    size_t *idx = malloc(n * sizeof *idx), *cps = malloc(n * sizeof *cps);
    if (h)
        h->entries = calloc(n, sizeof *h->entries);
    if (!h || !h->entries || !v || !ps || !idx || !cps) {
        st = PP_ERR(PP_ERR_NOMEM, "out of memory for the history %s", dir);
        goto done;
    }
    snprintf(h->dir, sizeof h->dir, "%s", dir);
    h->alpha = o->alpha;
    h->permutations = o->permutations;
    h->min_segment = o->min_segment;
    /* entries of another shape than the latest are not comparable: left out, with a note */
    const pp_check_shape *last = &e[n - 1].run->shape;
    size_t kept = 0, other = 0;
    for (size_t i = 0; i < n; i++) {
        char diff[512];
        pp_check_shape_diff(&e[i].run->shape, last, diff, sizeof diff);
        if (diff[0] && !o->allow_shape_change) {
            if (other++ == 0)
                pp_append_line(h->notes, sizeof h->notes, "left out entries of another shape "
                               "than the latest (first: %s: %s)", e[i].info.source, diff);
            pp_check_run_free(e[i].run);
            continue;
        }
        e[kept++] = e[i];
    }
    if (other > 1)
        pp_append_line(h->notes, sizeof h->notes, "%zu entries left out in all", other);
    n = kept;
    h->n_entries = n;
    for (size_t i = 0; i < n; i++)
        h->entries[i] = e[i].info;
    if ((st = build_series(h, e, n, o)) != PP_OK)
        goto done;
    /* Bonferroni over the series tested: a history without a change shows a false change point
     * in some metric with probability <= alpha */
    size_t tested = 0;
    for (size_t s = 0; s < h->n_series; s++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            m += isfinite(h->series[s].values[i]) ? 1 : 0;
        tested += m >= 2 * (size_t)o->min_segment ? 1 : 0;
    }
    double alpha = tested ? o->alpha / (double)tested : o->alpha;
    if (n < 2 * (size_t)o->min_segment)
        pp_append_line(h->notes, sizeof h->notes, "%zu entries: a change point needs %d on "
                       "each side", n, o->min_segment);
    for (size_t s = 0; s < h->n_series && st == PP_OK; s++)
        st = series_change_points(h, &h->series[s], alpha, o, v, idx, cps, ps);
done:
    for (size_t i = 0; i < n; i++)
        pp_check_run_free(e[i].run);
    free(e);
    free(v);
    free(ps);
    free(idx);
    free(cps);
    if (st != PP_OK) {
        pp_check_history_free(h);
        return st;
    }
    *out = h;
    return PP_OK;
}

/* ======================================================================================== */
/* Outputs                                                                                    */
/* ======================================================================================== */

static const char *cunit(const pp_check_series *z) { return z->absolute ? " pt" : "%"; }

static void fmt_level(const pp_check_series *z, double v, char *buf, size_t cap)
{
    if (!isfinite(v))
        snprintf(buf, cap, "-");
    else if (z->absolute)
        snprintf(buf, cap, "%.2f%%", v * 100);
    else
        snprintf(buf, cap, "%.4g", v);
}

/* "step_ms: +5.02% at abc123 (entry 15 of 30, 2026-...), 33.2 -> 34.9 ms, p 0.0005" */
static void cp_line(const pp_check_history *h, const pp_check_series *z, const pp_check_cp *c,
                    char *buf, size_t cap)
{
    char b[32], a[32];
    fmt_level(z, c->before, b, sizeof b);
    fmt_level(z, c->after, a, sizeof a);
    const pp_check_run_info *e = &h->entries[c->index];
    snprintf(buf, cap, "%s: %+.2f%s at %s (entry %zu of %zu%s%s), %s -> %s %s, p %.2g, %s",
             z->name, c->change, cunit(z), e->label, c->index + 1, h->n_entries,
             e->time[0] ? ", " : "", e->time, b, a, z->absolute ? "" : z->unit, c->p,
             pp_check_verdict_name(c->verdict));
}

static void method_line(const pp_check_history *h, char *buf, size_t cap)
{
    snprintf(buf, cap, "E-Divisive means (exponent 1), the k-th split of a metric kept when a "
                       "permutation test (%d shuffles or more) gives p < %g / tested metrics / "
                       "2^k; levels of %d entries or more", h->permutations, h->alpha,
             h->min_segment);
}

pp_status pp_check_history_write_table(const pp_check_history *h, FILE *f)
{
    char line[640];
    method_line(h, line, sizeof line);
    fprintf(f, "history: %s (%zu entries", h->dir, h->n_entries);
    if (h->n_entries)
        fprintf(f, ", %s .. %s", h->entries[0].label, h->entries[h->n_entries - 1].label);
    fprintf(f, ")\nmethod:  %s\n\n", line);
    fprintf(f, "%-28s %-9s %7s %11s %11s  %s\n", "metric", "unit", "entries", "first",
            "latest", "change points");
    for (size_t s = 0; s < h->n_series; s++) {
        const pp_check_series *z = &h->series[s];
        double first = NAN, latest = NAN;
        for (size_t i = 0; i < h->n_entries; i++)
            if (isfinite(z->values[i])) {
                latest = z->values[i];
                if (!isfinite(first))
                    first = z->values[i];
            }
        char a[32], b[32];
        fmt_level(z, first, a, sizeof a);
        fmt_level(z, latest, b, sizeof b);
        fprintf(f, "%-28s %-9s %7zu %11s %11s  ", z->name, z->absolute ? "%" : z->unit,
                z->n_values, a, b);
        if (z->n_cps == 0)
            fputs("none\n", f);
        for (size_t c = 0; c < z->n_cps; c++) {
            const pp_check_cp *p = &z->cps[c];
            fprintf(f, "%s%+.2f%s at %s (p %.2g)%s", c ? ", " : "", p->change, cunit(z),
                    h->entries[p->index].label, p->p,
                    p->verdict == PP_VERDICT_REGRESSION ? " REGRESSION"
                    : p->verdict == PP_VERDICT_IMPROVEMENT ? " improvement" : "");
        }
        if (z->n_cps)
            fputc('\n', f);
    }
    pp_check_print_notes(f, h->notes, 0);
    fprintf(f, "\nresult: %s, %d change point%s (%d regression%s, %d improvement%s)\n",
            h->n_regressions ? "FAIL" : "PASS", h->n_cps, h->n_cps == 1 ? "" : "s",
            h->n_regressions, h->n_regressions == 1 ? "" : "s", h->n_improvements,
            h->n_improvements == 1 ? "" : "s");
    for (size_t s = 0; s < h->n_series; s++)
        for (size_t c = 0; c < h->series[s].n_cps; c++) {
            cp_line(h, &h->series[s], &h->series[s].cps[c], line, sizeof line);
            fprintf(f, "  %s\n", line);
        }
    if (ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the history table failed");
    return PP_OK;
}

pp_status pp_check_history_write_json(const pp_check_history *h, FILE *f)
{
    pp_json_writer w;
    pp_json_writer_init(&w, f, "the history report", PP_JSON_PRETTY);
    pp_json_object(&w, NULL);
    pp_json_put_int(&w, "history_version", PP_CHECK_HISTORY_JSON_VERSION);
    pp_json_put_str(&w, "result", h->n_regressions ? "fail" : "pass");
    pp_json_put_str(&w, "dir", h->dir);
    pp_json_object_inline(&w, "method");
    pp_json_put_str(&w, "name", "e-divisive-means");
    pp_json_put_int(&w, "exponent", 1);
    pp_json_put_int(&w, "permutations", h->permutations);
    pp_json_put_real_digits(&w, "alpha", 6, h->alpha);
    pp_json_put_str(&w, "correction", "bonferroni");
    pp_json_put_int(&w, "min_segment", h->min_segment);
    pp_json_end(&w);
    pp_json_array(&w, "entries");
    for (size_t i = 0; i < h->n_entries; i++) {
        pp_json_object_inline(&w, NULL);
        pp_json_put_str(&w, "file", h->entries[i].source);
        pp_json_put_str(&w, "label", h->entries[i].label);
        pp_json_put_str(&w, "time", h->entries[i].time[0] ? h->entries[i].time : NULL);
        pp_json_put_uint(&w, "steps", h->entries[i].n_steps);
        pp_json_end(&w);
    }
    pp_json_end(&w);
    pp_json_array(&w, "metrics");
    for (size_t s = 0; s < h->n_series; s++) {
        const pp_check_series *z = &h->series[s];
        pp_json_object(&w, NULL);
        pp_check_put_identity(&w, z->name, z->kind, z->unit);
        pp_json_put_str(&w, "change_unit", z->absolute ? "points" : "%");
        pp_json_put_real(&w, "threshold", z->threshold);
        pp_json_array_inline(&w, "values");
        for (size_t i = 0; i < h->n_entries; i++)
            pp_json_put_real(&w, NULL, z->values[i]);
        pp_json_end(&w);
        pp_json_array(&w, "change_points");
        for (size_t c = 0; c < z->n_cps; c++) {
            const pp_check_cp *p = &z->cps[c];
            pp_json_object_inline(&w, NULL);
            pp_json_put_uint(&w, "entry", p->index);
            pp_json_put_str(&w, "label", h->entries[p->index].label);
            pp_json_put_real(&w, "before", p->before);
            pp_json_put_real(&w, "after", p->after);
            pp_json_put_real(&w, "change", p->change);
            pp_json_put_real(&w, "p", p->p);
            pp_json_put_str(&w, "verdict", pp_check_verdict_name(p->verdict));
            pp_json_end(&w);
        }
        pp_json_end(&w);
        pp_json_end(&w);
    }
    pp_json_end(&w);
    pp_check_put_notes(&w, h->notes);
    pp_json_end(&w);
    return pp_json_writer_finish(&w);
}

pp_status pp_check_history_write_junit(const pp_check_history *h, FILE *f)
{
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f, "<testsuites name=\"pprof-check-history\" tests=\"%zu\" failures=\"%d\" "
               "errors=\"0\">\n", h->n_series, h->n_regressions);
    fprintf(f, "  <testsuite name=\"pprof-check-history\" tests=\"%zu\" failures=\"%d\" "
               "errors=\"0\" skipped=\"0\" time=\"0\">\n", h->n_series, h->n_regressions);
    char line[640];
    method_line(h, line, sizeof line);
    fputs("    <properties>\n      <property name=\"history\" value=\"", f);
    pp_check_xml_text(f, h->dir);
    fprintf(f, "\"/>\n      <property name=\"entries\" value=\"%zu\"/>\n", h->n_entries);
    fputs("      <property name=\"method\" value=\"", f);
    pp_check_xml_text(f, line);
    fputs("\"/>\n    </properties>\n", f);
    for (size_t s = 0; s < h->n_series; s++) {
        const pp_check_series *z = &h->series[s];
        fputs("    <testcase classname=\"pprof-check-history.", f);
        pp_check_xml_text(f, pp_check_kind_name(z->kind));
        fputs("\" name=\"", f);
        pp_check_xml_text(f, z->name);
        fputs("\" time=\"0\">\n", f);
        for (size_t c = 0; c < z->n_cps; c++) {
            cp_line(h, z, &z->cps[c], line, sizeof line);
            if (z->cps[c].verdict == PP_VERDICT_REGRESSION) {
                fputs("      <failure type=\"regression\" message=\"", f);
                pp_check_xml_text(f, line);
                fputs("\">", f);
                pp_check_xml_text(f, line);
                fputs("</failure>\n", f);
            }
        }
        fprintf(f, "      <system-out>%zu entries, %zu change point%s", z->n_values, z->n_cps,
                z->n_cps == 1 ? "" : "s");
        for (size_t c = 0; c < z->n_cps; c++) {
            cp_line(h, z, &z->cps[c], line, sizeof line);
            fputs("\n", f);
            pp_check_xml_text(f, line);
        }
        fputs("</system-out>\n    </testcase>\n", f);
    }
    fputs("  </testsuite>\n</testsuites>\n", f);
    if (ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the history's JUnit report failed");
    return PP_OK;
}

pp_status pp_check_history_write_markdown(const pp_check_history *h, FILE *f)
{
    fprintf(f, "### pprof-check history: %s, %d change point%s\n\n",
            h->n_regressions ? "FAIL" : "PASS", h->n_cps, h->n_cps == 1 ? "" : "s");
    char line[640];
    method_line(h, line, sizeof line);
    fprintf(f, "%zu entries of `", h->n_entries);
    pp_check_md_text(f, h->dir);
    fputs("`; ", f);
    pp_check_md_text(f, line);
    fputs(".\n\n| metric | entries | change at | first commit | level before | level after "
          "| p | verdict |\n|---|---:|---:|---|---:|---:|---:|---|\n", f);
    for (size_t s = 0; s < h->n_series; s++) {
        const pp_check_series *z = &h->series[s];
        if (z->n_cps == 0) {
            fputs("| ", f);
            pp_check_md_text(f, z->name);
            fprintf(f, " | %zu | none | | | | | |\n", z->n_values);
        }
        for (size_t c = 0; c < z->n_cps; c++) {
            const pp_check_cp *p = &z->cps[c];
            char b[32], a[32];
            fmt_level(z, p->before, b, sizeof b);
            fmt_level(z, p->after, a, sizeof a);
            const char *bold = p->verdict == PP_VERDICT_REGRESSION ? "**" : "";
            fputs("| ", f);
            pp_check_md_text(f, z->name);
            fprintf(f, " | %zu | %+.2f%s | ", z->n_values, p->change, cunit(z));
            pp_check_md_text(f, h->entries[p->index].label);
            fprintf(f, " | %s | %s | %.2g | %s%s%s |\n", b, a, p->p, bold,
                    pp_check_verdict_name(p->verdict), bold);
        }
    }
    pp_check_print_notes(f, h->notes, 1);
    if (ferror(f))
        return PP_ERR(PP_ERR_IO, "writing the history's Markdown report failed");
    return PP_OK;
}

/* A label as one gnuplot data column and inside a single-quoted gnuplot string: printable
 * ASCII without blanks or quotes. */
static void plot_text(const char *s, char *out, size_t cap)
{
    size_t k = 0;
    for (; *s && k + 1 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        out[k++] = c > 0x20 && c < 0x7f && c != '"' && c != '\'' && c != '\\' ? (char)c : '_';
    }
    out[k] = '\0';
}

/* Runs gnuplot on script (no shell); 0 when it ran and succeeded. */
static int run_gnuplot(const char *script)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* One metric's .dat (entry, value, label, level) and .gp. */
static pp_status write_chart(const pp_check_history *h, const pp_check_series *z,
                             const char *prefix, int render)
{
    char base[1200], path[1300];
    char safe[80];
    plot_text(z->name, safe, sizeof safe);
    snprintf(base, sizeof base, "%s%s", prefix, safe);
    snprintf(path, sizeof path, "%s.dat", base);
    FILE *f = fopen(path, "w");
    if (!f)
        return PP_ERR(PP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    fprintf(f, "# %s over the history %s: entry, value (%s), label, level (median between "
               "change points)\n", z->name, h->dir, z->unit);
    size_t c = 0;
    for (size_t i = 0; i < h->n_entries; i++) {
        if (!isfinite(z->values[i]))
            continue;
        while (c < z->n_cps && z->cps[c].index <= i)
            c++;
        /* the median of the level entry i is on */
        double level = c < z->n_cps ? z->cps[c].before : z->n_cps ? z->cps[c - 1].after : NAN;
        char label[140];
        plot_text(h->entries[i].label, label, sizeof label);
        double scale = z->absolute ? 100 : 1;
        fprintf(f, "%zu %.10g %s ", i + 1, z->values[i] * scale, label);
        if (isfinite(level))
            fprintf(f, "%.10g\n", level * scale);
        else
            fprintf(f, "NaN\n");
    }
    if (fclose(f) != 0)
        return PP_ERR(PP_ERR_IO, "writing %s failed", path);
    snprintf(path, sizeof path, "%s.gp", base);
    f = fopen(path, "w");
    if (!f)
        return PP_ERR(PP_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    char file_base[1200];
    plot_text(base, file_base, sizeof file_base); /* a path with blanks or quotes: '_' */
    fprintf(f, "# %s over %zu history entries, %zu change point(s); gnuplot %s.gp\n", z->name,
            h->n_entries, z->n_cps, file_base);
    fprintf(f, "set terminal pngcairo size 1100,420\nset output '%s.png'\n", file_base);
    fprintf(f, "set title '%s: %zu change point(s)' noenhanced\n", safe, z->n_cps);
    fprintf(f, "set ylabel '%s' noenhanced\nset xlabel 'entry (first commit of each level "
               "marked)'\nset grid ytics\nset key top left\n",
            z->absolute ? "percent" : z->unit);
    fprintf(f, "set xtics rotate by 60 right noenhanced font ',8'\n");
    for (size_t k = 0; k < z->n_cps; k++) {
        const pp_check_cp *p = &z->cps[k];
        char label[140];
        plot_text(h->entries[p->index].label, label, sizeof label);
        const char *col = p->verdict == PP_VERDICT_REGRESSION ? "#c00000"
                          : p->verdict == PP_VERDICT_IMPROVEMENT ? "#008000" : "#808080";
        fprintf(f, "set arrow from %.1f, graph 0 to %.1f, graph 1 nohead dt 2 lw 2 lc rgb '%s'\n",
                (double)p->index + 0.5, (double)p->index + 0.5, col);
        fprintf(f, "set label '%s %+.2f%s' at %.1f, graph 0.95 left offset 0.5,0 noenhanced "
                   "tc rgb '%s'\n", label, p->change, z->absolute ? " pt" : "%",
                (double)p->index + 0.5, col);
    }
    fprintf(f, "plot '%s.dat' using 1:2:xtic(3) with linespoints pt 7 ps 0.6 title '%s' "
               "noenhanced, '' using 1:4 with histeps lw 2 title 'level'\n", file_base, safe);
    if (fclose(f) != 0)
        return PP_ERR(PP_ERR_IO, "writing %s failed", path);
    if (render && run_gnuplot(path) != 0)
        pp_log(1, "gnuplot did not render %s (is it installed?); the script and data stay",
                    path);
    return PP_OK;
}

pp_status pp_check_history_write_charts(const pp_check_history *h, const char *prefix,
                                        int render)
{
    char safe[1200];
    plot_text(prefix, safe, sizeof safe);
    if (!prefix[0] || strcmp(safe, prefix) != 0)
        return PP_ERR(PP_ERR_INVALID, "--chart '%s': the prefix goes into gnuplot's scripts as "
                                      "it is: printable characters without blanks, quotes or "
                                      "backslashes", prefix);
    size_t len = strlen(prefix);
    if (prefix[len - 1] == '/' && mkdir(prefix, 0777) != 0 && errno != EEXIST)
        return PP_ERR(PP_ERR_IO, "--chart %s: cannot create the directory: %s", prefix,
                      strerror(errno));
    for (size_t s = 0; s < h->n_series; s++) {
        pp_status st = write_chart(h, &h->series[s], prefix, render);
        if (st != PP_OK)
            return st;
    }
    return PP_OK;
}
