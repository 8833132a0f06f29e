/* regime.c: are a run's step times two regimes? (pp_step_regimes, pp_analyzer.h)
 *
 * A shared machine can change speed for seconds at a time (another tenant, a clock, a migration):
 * then the steps fall into a fast and a slow group, each a few per cent wide and tens of per cent
 * apart, in stretches of consecutive steps. A median over such a run is the median of a mixture:
 * it moves with the share of slow steps, which differs from run to run, so two runs (or a
 * prediction and a run) compared by their medians can differ by the regimes' gap with nothing
 * changed. The analysis says so rather than let a median mislead (docs/metrics.md "Regimes").
 *
 * Test, on the logarithms of the step times: the split of the sorted values that maximises the
 * between-group variance (Otsu), each group at least 15% of the steps and 5 steps; it is two
 * regimes when the groups are well separated (Ashman's D = sqrt(2) |m1 - m2| / sqrt(v1 + v2) >= 3,
 * where a sum of two equal normals is bimodal above 2), the slow median at least 5% above the fast
 * one, and the slow steps come in stretches (at most half the regime changes between consecutive
 * steps that a random order of the same steps would have, 2 n p (1 - p)): jitter that is
 * independent from step to step is not a regime. */
#include "analyzer_internal.h"
#include "pp_dialect.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median_sorted(const double *v, size_t n)
{
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

pp_status pp_step_regimes(const double *step_ns, size_t n, pp_aregimes *out)
{
    memset(out, 0, sizeof *out);
    if (!step_ns || n < 10)
        return PP_OK;
    double *lg = malloc(n * sizeof *lg);
    double *srt = malloc(n * sizeof *srt);
    if (!lg || !srt) {
        free(lg);
        free(srt);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the step regimes of %zu steps", n);
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (step_ns[i] > 0 && isfinite(step_ns[i]))
            lg[m++] = log(step_ns[i]);
    memcpy(srt, lg, m * sizeof *srt);
    qsort(srt, m, sizeof *srt, cmp_dbl);
    size_t min_group = (size_t)ceil(0.15 * (double)m);
    if (min_group < 5)
        min_group = 5;
    /* each split's between-group variance from a running sum */
    double best = -1, tot = 0;
    size_t cut = 0;
    for (size_t i = 0; i < m; i++)
        tot += srt[i];
    double s1 = 0;
    for (size_t k = 1; k < m; k++) { /* the fast group is srt[0..k) */
        s1 += srt[k - 1];
        if (k < min_group || m - k < min_group)
            continue;
        double m1 = s1 / (double)k, m2 = (tot - s1) / (double)(m - k);
        double between = (double)k * (double)(m - k) * (m1 - m2) * (m1 - m2);
        if (between > best) {
            best = between;
            cut = k;
        }
    }
    if (cut) {
        double k = (double)cut, r = (double)(m - cut);
        double m1 = 0, m2 = 0, q1 = 0, q2 = 0;
        for (size_t i = 0; i < cut; i++)
            m1 += srt[i];
        for (size_t i = cut; i < m; i++)
            m2 += srt[i];
        m1 /= k;
        m2 /= r;
        for (size_t i = 0; i < cut; i++)
            q1 += (srt[i] - m1) * (srt[i] - m1);
        for (size_t i = cut; i < m; i++)
            q2 += (srt[i] - m2) * (srt[i] - m2);
        double v1 = q1 / k, v2 = q2 / r;
        double d = v1 + v2 > 0 ? sqrt(2.0) * fabs(m2 - m1) / sqrt(v1 + v2) : INFINITY;
        double threshold = 0.5 * (srt[cut - 1] + srt[cut]);
        size_t switches = 0;
        for (size_t i = 1; i < m; i++)
            switches += (lg[i] > threshold) != (lg[i - 1] > threshold);
        double p = r / (double)m, expected = 2.0 * (double)m * p * (1 - p);
        out->separation = d;
        out->n_fast = cut;
        out->n_slow = m - cut;
        out->slow_share = p;
        out->fast_median_ns = exp(median_sorted(srt, cut));
        out->slow_median_ns = exp(median_sorted(srt + cut, m - cut));
        out->switches = switches;
        out->found = d >= 3.0 && out->slow_median_ns >= 1.05 * out->fast_median_ns &&
                     (double)switches <= 0.5 * expected;
    }
    free(lg);
    free(srt);
    return PP_OK;
}

void an_regimes(pp_analysis *a, const char *dialect)
{
    if (a->n_steps < 10)
        return;
    double *v = malloc(a->n_steps * sizeof *v);
    if (!v)
        return; /* the analysis stands without this note */
    for (size_t i = 0; i < a->n_steps; i++)
        v[i] = a->steps[i].step_ns;
    if (pp_step_regimes(v, a->n_steps, &a->regimes) != PP_OK)
        pp_error_clear();
    free(v);
    const pp_aregimes *g = &a->regimes;
    /* a torch profiler trace: the profiler itself slows the job as the events it holds pile
     * up (docs/torch.md, "How many steps") */
    int torch = pp_dialect_is_torch_profiler(dialect);
    if (g->found)
        an_warn(a, "step times fall into two regimes, as on a machine whose speed changed during "
                   "the run%s: %zu steps at a median of %.3f ms, %zu at %.3f ms (%.2fx), in %zu "
                   "stretches; a median over the run moves with their mix, so compare runs "
                   "regime by regime (aggregates.regimes in --json)",
                torch ? ", or a torch profiler whose own cost grew with the events it held "
                        "(fewer active steps: docs/torch.md, \"How many steps\")"
                      : "",
                g->n_fast, g->fast_median_ns * 1e-6, g->n_slow, g->slow_median_ns * 1e-6,
                g->slow_median_ns / g->fast_median_ns, g->switches + 1);
}
