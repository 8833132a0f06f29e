/* series.c: order statistics of a series of samples (count, sum, extremes, and the median and
 * p95 from a bounded reservoir, docs/metrics.md), for every per-op, per-step and per-message
 * series the analysis keeps. Fed by metrics.c per op of a finalized step: the adding itself is
 * inline (an_series_add, analyzer_internal.h), its reservoir grows here. */
#include "analyzer_internal.h"

int an_series_grow(series *s)
{
    /* grown by what is added: a series of a few samples costs a few doubles, not 32 KB */
    size_t cap = s->cap_res ? s->cap_res * 2 : 8;
    double *r = realloc(s->res, cap * sizeof(double));
    if (!r)
        return 0;
    if (!s->res)
        s->rng = 0x9e3779b97f4a7c15ull;
    s->res = r;
    s->cap_res = cap;
    return 1;
}

/* Rearranges v so that v[k] is the value a sort would put there, smaller ones before it and
 * larger ones after (Hoare's selection): the order statistics without sorting the reservoir,
 * which was the analysis' largest cost after decoding. */
static void select_nth(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        /* median of three as the pivot */
        double a = v[lo], b = v[mid], c = v[hi];
        double pivot = a < b ? (b < c ? b : a < c ? c : a) : (a < c ? a : b < c ? c : b);
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                double t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return;
    }
}

/* The q-quantile of v[0, n) with linear interpolation between order statistics (the value a
 * sorted array gives at q (n - 1)); reorders v. */
static double quantile_select(double *v, size_t n, double q)
{
    if (n == 0)
        return 0.0;
    double pos = q * (double)(n - 1);
    size_t i = (size_t)pos;
    double f = pos - (double)i;
    select_nth(v, n, i);
    if (i + 1 >= n)
        return v[i];
    double next = v[i + 1]; /* the smallest of what lies above v[i] */
    for (size_t k = i + 2; k < n; k++)
        next = v[k] < next ? v[k] : next;
    return v[i] * (1 - f) + next * f;
}

pp_astats an_series_stats(series *s)
{
    pp_astats st = {0};
    st.count = s->count;
    if (!s->count)
        return st;
    st.sum = s->sum;
    st.mean = s->sum / (double)s->count;
    st.max = s->max;
    st.min = s->min;
    if (s->res && s->n_res) {
        st.median = quantile_select(s->res, s->n_res, 0.5);
        st.p95 = quantile_select(s->res, s->n_res, 0.95);
    }
    return st;
}

void an_series_free(series *s)
{
    free(s->res);
    s->res = NULL;
    s->n_res = s->cap_res = 0;
}

