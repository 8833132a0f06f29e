/* check_stats.c: the statistics behind pprof-check's verdicts (pp_check.h): medians, the
 * Mann-Whitney U test, Holm's adjustment, a percentile bootstrap of the change in medians, and
 * the summary statistics a baseline records.
 *
 * Statistics follow their textbook definitions: U counts the pairs in which the first sample is
 * larger (ties 1/2); its exact null distribution comes from the recurrence over the last
 * observation of the merged order, the normal approximation uses the tie-corrected variance
 * and a continuity correction of 1/2. */
#include "check_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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


pp_status pp_check_sample_stats(const double *x, size_t n, pp_check_sample_stats_t *out)
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
    out->v[PP_SS_MEAN] = sum / (double)n;
    out->v[PP_SS_MEDIAN] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    out->v[PP_SS_P95] = v[qi] + (qi + 1 < n ? (q - (double)qi) * (v[qi + 1] - v[qi]) : 0);
    out->v[PP_SS_MAX] = v[n - 1];
    out->v[PP_SS_MIN] = v[0];
    free(v);
    return PP_OK;
}

