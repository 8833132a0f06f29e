/* test_regime.c: the two-regime test of step times (analyzer/regime.c, pp_step_regimes): a run
 * whose machine changed speed for stretches of steps is told apart from one with independent
 * jitter, from a few slow outliers, and from plain noise; the groups' sizes and medians are the
 * ones the test made. Seeded noise only. */
#include "pp_analyzer.h"
#include "pp_common.h"

#include <criterion/criterion.h>
#include <math.h>

#define TWO_PI 6.283185307179586

/* n steps: stretches of `len` steps alternating between base and base * gap, each step with a
 * lognormal jitter of sd `sigma` (log scale); shuffle != 0 puts them in a random order instead */
static void make(double *v, size_t n, double base, double gap, size_t len, double sigma,
                 int shuffle, uint64_t seed)
{
    pp_rng g;
    pp_rng_seed(&g, seed);
    for (size_t i = 0; i < n; i++) {
        /* Box-Muller from two uniforms of the project's generator */
        double u1 = ((double)pp_rng_below(&g, 1u << 30) + 1) / (double)(1u << 30);
        double u2 = (double)pp_rng_below(&g, 1u << 30) / (double)(1u << 30);
        double z = sqrt(-2 * log(u1)) * cos(TWO_PI * u2);
        v[i] = base * ((i / len) % 2 ? gap : 1.0) * exp(sigma * z);
    }
    for (size_t i = n; shuffle && i > 1; i--) {
        size_t j = (size_t)pp_rng_below(&g, i);
        double t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

Test(regime, stretches_of_a_slower_machine_are_two_regimes)
{
    double v[60];
    /* 4 stretches of 15: 30 fast steps at 67 ms, 30 slow at 1.3x, 2% jitter */
    make(v, 60, 67e6, 1.3, 15, 0.02, 0, 1);
    pp_aregimes g;
    cr_assert_eq(pp_step_regimes(v, 60, &g), PP_OK);
    cr_assert(g.found, "separation %.2f, switches %zu", g.separation, g.switches);
    cr_assert_eq(g.n_fast, 30u);
    cr_assert_eq(g.n_slow, 30u);
    cr_assert_eq(g.switches, 3u);
    cr_assert_lt(fabs(g.fast_median_ns / 67e6 - 1), 0.02, "%.3f ms", g.fast_median_ns * 1e-6);
    cr_assert_lt(fabs(g.slow_median_ns / (1.3 * 67e6) - 1), 0.02, "%.3f ms",
                 g.slow_median_ns * 1e-6);
    cr_assert_float_eq(g.slow_share, 0.5, 1e-12);
}

Test(regime, the_same_steps_in_random_order_are_jitter_not_a_regime)
{
    double v[60];
    make(v, 60, 67e6, 1.3, 15, 0.02, 1, 1);
    pp_aregimes g;
    cr_assert_eq(pp_step_regimes(v, 60, &g), PP_OK);
    cr_assert_gt(g.separation, 3.0, "the groups are as far apart as before");
    cr_assert_not(g.found, "switches %zu", g.switches);
}

Test(regime, plain_noise_and_a_few_outliers_are_not_two_regimes)
{
    double v[200];
    pp_aregimes g;
    for (uint64_t seed = 1; seed <= 20; seed++) {
        make(v, 200, 50e6, 1.0, 200, 0.05, 0, seed);
        cr_assert_eq(pp_step_regimes(v, 200, &g), PP_OK);
        cr_assert_not(g.found, "seed %llu: separation %.2f", (unsigned long long)seed,
                      g.separation);
    }
    /* six slow outliers in a row (3%): fewer than 15% of the steps, no regime */
    make(v, 200, 50e6, 1.0, 200, 0.01, 0, 3);
    for (int i = 100; i < 106; i++)
        v[i] *= 1.5;
    cr_assert_eq(pp_step_regimes(v, 200, &g), PP_OK);
    cr_assert_not(g.found);
}

Test(regime, too_few_steps_or_a_small_gap_say_nothing)
{
    double v[60];
    pp_aregimes g;
    make(v, 9, 67e6, 1.5, 3, 0.001, 0, 2);
    cr_assert_eq(pp_step_regimes(v, 9, &g), PP_OK);
    cr_assert_not(g.found, "nine steps");
    /* 3% apart with 0.1% jitter: separated, but below the 5% that matters */
    make(v, 60, 67e6, 1.03, 15, 0.001, 0, 2);
    cr_assert_eq(pp_step_regimes(v, 60, &g), PP_OK);
    cr_assert_not(g.found, "gap %.3f", g.slow_median_ns / g.fast_median_ns);
    cr_assert_eq(pp_step_regimes(NULL, 0, &g), PP_OK);
    cr_assert_not(g.found);
}
