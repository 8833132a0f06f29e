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


/* ---- Student's t and the run-level test ------------------------------------------------- */

/* The continued fraction of the regularized incomplete beta function, evaluated by the modified
 * Lentz method (converges quickly for x < (a + 1) / (a + b + 2); the caller swaps otherwise). */
static double beta_fraction(double a, double b, double x)
{
    const double tiny = 1e-300, eps = 1e-15;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    d = 1 / (fabs(d) < tiny ? tiny : d);
    double h = d;
    for (int m = 1; m <= 500; m++) {
        double m2 = 2.0 * m;
        /* the even term, then the odd one */
        double num = m * (b - m) * x / ((a - 1 + m2) * (a + m2));
        d = 1 + num * d;
        d = 1 / (fabs(d) < tiny ? tiny : d);
        c = 1 + num / c;
        c = fabs(c) < tiny ? tiny : c;
        h *= d * c;
        num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + 1 + m2));
        d = 1 + num * d;
        d = 1 / (fabs(d) < tiny ? tiny : d);
        c = 1 + num / c;
        c = fabs(c) < tiny ? tiny : c;
        double step = d * c;
        h *= step;
        if (fabs(step - 1) < eps)
            break;
    }
    return h;
}

/* I_x(a, b). */
static double beta_regularized(double a, double b, double x)
{
    if (!(x > 0))
        return 0;
    if (!(x < 1))
        return 1;
    double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
    if (x < (a + 1) / (a + b + 2))
        return front * beta_fraction(a, b, x) / a;
    return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

double pp_check_t_tail2(double t, double df)
{
    if (isnan(t) || !(df > 0))
        return NAN;
    if (isinf(t))
        return 0;
    return beta_regularized(df / 2, 0.5, df / (df + t * t));
}

double pp_check_t_quantile2(double p, double df)
{
    if (!(p > 0) || !(df > 0))
        return INFINITY;
    if (p >= 1)
        return 0;
    double lo = 0, hi = 1;
    while (pp_check_t_tail2(hi, df) > p && hi < 1e12)
        hi *= 2;
    for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; i++) {
        double mid = 0.5 * (lo + hi);
        if (pp_check_t_tail2(mid, df) > p)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

static void mean_var(const double *x, size_t n, double *mean, double *var)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    double m = s / (double)n, q = 0;
    for (size_t i = 0; i < n; i++)
        q += (x[i] - m) * (x[i] - m);
    *mean = m;
    *var = n > 1 ? q / (double)(n - 1) : 0;
}

pp_status pp_check_welch(const double *x, size_t nx, const double *y, size_t ny, double level,
                         pp_check_ttest *out)
{
    memset(out, 0, sizeof *out);
    if (nx == 0 || ny == 0 || (nx < 2 && ny < 2))
        return PP_ERR(PP_ERR_INVALID, "a t-test needs two values on one side and one on the "
                                      "other (got %zu and %zu)", nx, ny);
    double mx, vx, my, vy;
    mean_var(x, nx, &mx, &vx);
    mean_var(y, ny, &my, &vy);
    double fx = 1 / (double)nx, fy = 1 / (double)ny;
    out->diff = my - mx;
    if (nx >= 2 && ny >= 2) {
        double a = vx * fx, b = vy * fy;
        out->se = sqrt(a + b);
        out->df = (a + b) * (a + b) / (a * a / (double)(nx - 1) + b * b / (double)(ny - 1));
        if (!isfinite(out->df)) /* both variances 0 */
            out->df = (double)(nx + ny - 2);
    } else {
        /* one value on one side: the other side's variance is the only estimate of how runs
         * scatter, and stands for both (the runs are of one job on one machine) */
        out->pooled = 1;
        double v = nx >= 2 ? vx : vy;
        out->se = sqrt(v * (fx + fy));
        out->df = (double)((nx >= 2 ? nx : ny) - 1);
    }
    if (out->se > 0) {
        out->t = out->diff / out->se;
        out->p = pp_check_t_tail2(out->t, out->df);
    } else { /* no scatter at all: any difference is certain, none is none */
        out->t = out->diff == 0 ? 0 : copysign(INFINITY, out->diff);
        out->p = out->diff == 0 ? 1 : 0;
    }
    double q = pp_check_t_quantile2(1 - level, out->df);
    out->lo = out->diff - q * out->se;
    out->hi = out->diff + q * out->se;
    if (out->se == 0)
        out->lo = out->hi = out->diff;
    return PP_OK;
}

/* P(T > x) for Student's t with df degrees of freedom. */
static double t_upper(double x, double df)
{
    double half = 0.5 * pp_check_t_tail2(x, df);
    return x >= 0 ? half : 1 - half;
}

int pp_check_runs_needed(double delta, double sd, double alpha, double power, int cap)
{
    if (!(sd > 0) || !(delta > 0) || !(alpha > 0) || !(power > 0))
        return 0;
    for (int n = 2; n <= cap; n++) {
        double df = 2.0 * n - 2, tc = pp_check_t_quantile2(alpha, df);
        /* the shifted central t stands for the noncentral one (the far tail is negligible) */
        double shift = delta / (sd * sqrt(2.0 / n));
        if (t_upper(tc - shift, df) >= power)
            return n;
    }
    return cap + 1;
}

double pp_check_detectable(double sd, size_t nb, size_t nc, double alpha, double power)
{
    if (!(sd > 0) || nb == 0 || nc == 0 || (nb < 2 && nc < 2))
        return NAN;
    /* the design the test has: Welch's df is at most nb + nc - 2 (equal scatter), the pooled
     * test's the multi-run side's count - 1 */
    double df = nb >= 2 && nc >= 2 ? (double)(nb + nc - 2) : (double)((nb > nc ? nb : nc) - 1);
    double se = sd * sqrt(1.0 / (double)nb + 1.0 / (double)nc);
    /* P(T > t_crit - delta / se) = power */
    return se * (pp_check_t_quantile2(alpha, df) + pp_check_t_quantile2(2 * (1 - power), df));
}
