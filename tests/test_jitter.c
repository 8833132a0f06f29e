/* test_jitter.c: the sim backend's jitter (common/pp_jitter.h, runtime/backend_sim.c, pptrain
 * --sim-jitter): spec parsing, the drawn factors' distributions (a fixed set of keys, so every
 * statistic is exact and the same on every run), determinism per seed, and what a jittered
 * pipeline's steps look like. */
#include "pp_jitter.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of sorted v[n] (nearest rank). */
static double quantile(const double *v, size_t n, double q)
{
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

#define N_DRAWS 200000

/* N_DRAWS factors of j over the keys of stages 0..7, steps 1.., micro-batches 0..49, forward
 * ops: the coordinates a run uses. v must hold N_DRAWS. */
static void draw(const pp_jitter *j, double *v)
{
    size_t n = 0;
    for (int64_t step = 1; n < N_DRAWS; step++)
        for (int s = 0; s < 8 && n < N_DRAWS; s++)
            for (int mb = 0; mb < 50 && n < N_DRAWS; mb++)
                v[n++] = pp_jitter_factor(j, pp_jitter_key(j, 0, s, step, 0, mb, PP_NVTX_FWD));
}

static pp_jitter parsed(const char *spec)
{
    pp_jitter j;
    cr_assert_eq(pp_jitter_parse(spec, &j), PP_OK, "%s: %s", spec, pp_error_message());
    return j;
}

Test(jitter, parses_the_documented_specs)
{
    pp_jitter j = parsed("lognormal:0.1");
    cr_expect_eq(j.dist, PP_JITTER_LOGNORMAL);
    cr_expect_eq(j.sigma, 0.1);
    cr_expect_eq(j.tail_p, 0.0);
    cr_expect_eq(j.seed_given, 0);
    j = parsed("uniform:0.25,seed=7");
    cr_expect_eq(j.dist, PP_JITTER_UNIFORM);
    cr_expect_eq(j.width, 0.25);
    cr_expect_eq(j.seed, 7u);
    cr_expect_eq(j.seed_given, 1);
    j = parsed("seed=3,tail:0.01:4,lognormal:0.05");
    cr_expect_eq(j.dist, PP_JITTER_LOGNORMAL);
    cr_expect_eq(j.tail_p, 0.01);
    cr_expect_eq(j.tail_x, 4.0);
    j = parsed("tail:0.5:2");
    cr_expect_eq(j.dist, PP_JITTER_NONE);
    cr_expect_not(pp_jitter_is_none(&j));
    j = parsed("none");
    cr_expect(pp_jitter_is_none(&j));
    j = parsed("lognormal:0");
    cr_expect(pp_jitter_is_none(&j));
    j = parsed("uniform:0.2");
    cr_expect_not(pp_jitter_is_none(&j));
}

Test(jitter, format_parses_back_to_the_same_spec)
{
    static const char *specs[] = {"lognormal:0.1", "uniform:0.3,seed=9", "none,seed=4",
                                  "lognormal:0.07,tail:0.02:3.5,seed=18446744073",
                                  "tail:0.1:2", "uniform:0.1,tail:1:1000"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        pp_jitter a = parsed(specs[i]), b;
        char text[PP_JITTER_MAX_SPEC];
        int n = pp_jitter_format(&a, text, sizeof text);
        cr_assert(n > 0 && (size_t)n < sizeof text);
        cr_assert_eq(pp_jitter_parse(text, &b), PP_OK, "%s -> %s: %s", specs[i], text,
                     pp_error_message());
        cr_expect_eq(a.dist, b.dist, "%s", text);
        cr_expect_eq(a.sigma, b.sigma, "%s", text);
        cr_expect_eq(a.width, b.width, "%s", text);
        cr_expect_eq(a.tail_p, b.tail_p, "%s", text);
        cr_expect_eq(a.tail_x, b.tail_x, "%s", text);
        cr_expect_eq(a.seed, b.seed, "%s", text);
    }
}

Test(jitter, refuses_bad_specs_naming_them)
{
    static const struct {
        const char *spec, *says;
    } bad[] = {
        {"", "empty"},
        {"gauss:0.1", "unknown part 'gauss:0.1'"},
        {"lognormal", "unknown part 'lognormal'"},
        {"lognormal:", "lognormal sigma: empty"},
        {"lognormal:-0.1", "out of range"},
        {"lognormal:2.5", "out of range"},
        {"lognormal:nan", "not a finite number"},
        {"lognormal:0.1x", "not a finite number"},
        {"uniform:1", "out of range"},
        {"tail:0.1", "needs tail:P:X"},
        {"tail:1.5:2", "tail probability"},
        {"tail:0.1:0.5", "tail factor"},
        {"tail:0.1:2:3", "tail factor"},
        {"seed=abc", "seed"},
        {"seed=-1", "seed"},
        {"seed=3", "names no distribution"},
        {"lognormal:0.1,,seed=1", "empty part"},
        {"lognormal:0.1,", "empty part"},
        {"lognormal:0.1,uniform:0.1", "a distribution given twice"},
        {"none,lognormal:0.1", "a distribution given twice"},
        {"tail:0.1:2,tail:0.1:2", "tail given twice"},
        {"seed=1,lognormal:0.1,seed=2", "seed given twice"},
        {"Lognormal:0.1", "unknown part"},
        {" lognormal:0.1", "unknown part"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pp_jitter j;
        pp_jitter_init(&j);
        j.sigma = 123;
        cr_expect_eq(pp_jitter_parse(bad[i].spec, &j), PP_ERR_INVALID, "'%s' was accepted",
                     bad[i].spec);
        const char *msg = pp_error_message();
        char name[300];
        snprintf(name, sizeof name, "jitter spec '%s'", bad[i].spec);
        cr_expect(strstr(msg, name) != NULL, "'%s': message does not name it: %s", bad[i].spec,
                  msg);
        cr_expect(strstr(msg, bad[i].says) != NULL, "'%s': message lacks '%s': %s",
                  bad[i].spec, bad[i].says, msg);
        cr_expect_eq(j.sigma, 123, "'%s': *out was changed", bad[i].spec);
    }
    char long_spec[PP_JITTER_MAX_SPEC + 40];
    memset(long_spec, 'a', sizeof long_spec - 1);
    long_spec[sizeof long_spec - 1] = '\0';
    pp_jitter j;
    cr_expect_eq(pp_jitter_parse(long_spec, &j), PP_ERR_INVALID);
    cr_expect(strstr(pp_error_message(), "characters (at most 256)") != NULL, "%s",
              pp_error_message());
    cr_expect_eq(pp_jitter_parse(NULL, &j), PP_ERR_INVALID);
}

/* With 200000 draws the sample median's standard error is about 1.25 sigma / sqrt(n) = 0.06%
 * of the median at sigma 0.2; the bounds below are several of those, and the draws are fixed,
 * so the checks are exact rather than flaky. */
Test(jitter, lognormal_has_median_one_and_the_stated_spread)
{
    static double v[N_DRAWS];
    pp_jitter j = parsed("lognormal:0.2,seed=11");
    draw(&j, v);
    double sum = 0, sumsq = 0;
    for (size_t i = 0; i < N_DRAWS; i++) {
        cr_assert(v[i] > 0 && isfinite(v[i]));
        double l = log(v[i]);
        sum += l;
        sumsq += l * l;
    }
    double mean_log = sum / N_DRAWS, sd_log = sqrt(sumsq / N_DRAWS - mean_log * mean_log);
    cr_expect(fabs(mean_log) < 0.002, "mean of ln f %g", mean_log);
    cr_expect(fabs(sd_log / 0.2 - 1) < 0.01, "sd of ln f %g, want 0.2", sd_log);
    qsort(v, N_DRAWS, sizeof *v, cmp_double);
    cr_expect(fabs(quantile(v, N_DRAWS, 0.5) - 1) < 0.003, "median %g",
              quantile(v, N_DRAWS, 0.5));
    double p95 = exp(1.6448536269514722 * 0.2); /* the lognormal's 95th percentile */
    cr_expect(fabs(quantile(v, N_DRAWS, 0.95) / p95 - 1) < 0.005, "p95 %g, want %g",
              quantile(v, N_DRAWS, 0.95), p95);
    cr_expect(v[N_DRAWS - 1] <= pp_jitter_factor_max(&j));
    double mean = 0;
    for (size_t i = 0; i < N_DRAWS; i++)
        mean += v[i];
    cr_expect(fabs(mean / N_DRAWS / pp_jitter_mean(&j) - 1) < 0.003, "mean %g, want %g",
              mean / N_DRAWS, pp_jitter_mean(&j));
}

Test(jitter, uniform_has_mean_one_within_its_width)
{
    static double v[N_DRAWS];
    pp_jitter j = parsed("uniform:0.3,seed=5");
    draw(&j, v);
    double sum = 0, sumsq = 0, lo = 2, hi = 0;
    for (size_t i = 0; i < N_DRAWS; i++) {
        sum += v[i];
        sumsq += v[i] * v[i];
        lo = fmin(lo, v[i]);
        hi = fmax(hi, v[i]);
    }
    double mean = sum / N_DRAWS, var = sumsq / N_DRAWS - mean * mean;
    cr_expect(lo >= 0.7 && hi <= 1.3, "range [%g, %g]", lo, hi);
    cr_expect(lo < 0.701 && hi > 1.299, "range [%g, %g] does not fill [0.7, 1.3]", lo, hi);
    cr_expect(fabs(mean - 1) < 0.002, "mean %g", mean);
    cr_expect(fabs(var / (0.09 / 3) - 1) < 0.02, "variance %g, want W^2/3 = 0.03", var);
    cr_expect(pp_jitter_factor_max(&j) == 1.3);
}

Test(jitter, tail_makes_the_stated_share_of_stragglers)
{
    static double v[N_DRAWS];
    pp_jitter j = parsed("lognormal:0.05,tail:0.02:4,seed=2");
    draw(&j, v);
    size_t slow = 0;
    for (size_t i = 0; i < N_DRAWS; i++)
        slow += v[i] > 2.0; /* a straggler is 4x a factor within 1.5 of 1 */
    double share = (double)slow / N_DRAWS; /* binomial sd: sqrt(0.02 * 0.98 / n) = 0.03% */
    cr_expect(fabs(share - 0.02) < 0.002, "straggler share %g, want 0.02", share);
    pp_jitter t = parsed("tail:1:3");
    cr_expect_eq(pp_jitter_factor(&t, 12345), 3.0);
    cr_expect_eq(pp_jitter_mean(&t), 3.0);
}

/* The draws of different ops are independent: neighbouring micro-batches, stages, steps and op
 * kinds show no correlation, and no coordinate is ignored by the key. */
Test(jitter, draws_of_different_ops_are_uncorrelated)
{
    pp_jitter j = parsed("lognormal:0.3,seed=1");
    enum { N = 50000 };
    double sxy[4] = {0}, sx = 0, sxx = 0;
    for (int i = 0; i < N; i++) {
        int s = i % 8, mb = i / 8 % 32;
        int64_t step = 1 + i / 256;
        double x = log(pp_jitter_factor(&j, pp_jitter_key(&j, 0, s, step, 0, mb, PP_NVTX_FWD)));
        double y[4] = {
            log(pp_jitter_factor(&j, pp_jitter_key(&j, 0, s, step, 0, mb + 1, PP_NVTX_FWD))),
            log(pp_jitter_factor(&j, pp_jitter_key(&j, 0, s + 1, step, 0, mb, PP_NVTX_FWD))),
            log(pp_jitter_factor(&j, pp_jitter_key(&j, 0, s, step + 1, 0, mb, PP_NVTX_FWD))),
            log(pp_jitter_factor(&j, pp_jitter_key(&j, 0, s, step, 0, mb, PP_NVTX_BWD)))};
        sx += x;
        sxx += x * x;
        for (int k = 0; k < 4; k++)
            sxy[k] += x * y[k];
    }
    double var = sxx / N - (sx / N) * (sx / N);
    for (int k = 0; k < 4; k++) {
        double r = (sxy[k] / N - (sx / N) * (sx / N)) / var; /* same marginal: one variance */
        cr_expect(fabs(r) < 0.02, "coordinate %d: correlation %g", k, r); /* sd 1/sqrt(N) */
    }
    uint64_t base = pp_jitter_key(&j, 0, 1, 2, 0, 3, PP_NVTX_FWD);
    cr_expect_neq(base, pp_jitter_key(&j, 1, 1, 2, 0, 3, PP_NVTX_FWD));
    cr_expect_neq(base, pp_jitter_key(&j, 0, 1, 2, 1, 3, PP_NVTX_FWD));
    cr_expect_neq(base, pp_jitter_key(&j, 0, 1, 2, 0, 3, PP_NVTX_OPT_STEP));
}

Test(jitter, same_seed_same_factors_other_seed_others)
{
    pp_jitter a = parsed("lognormal:0.1,seed=42"), b = parsed("lognormal:0.1,seed=42"),
              c = parsed("lognormal:0.1,seed=43");
    int differ = 0;
    for (int mb = 0; mb < 100; mb++) {
        double fa = pp_jitter_factor(&a, pp_jitter_key(&a, 0, 2, 7, 0, mb, PP_NVTX_BWD));
        double fb = pp_jitter_factor(&b, pp_jitter_key(&b, 0, 2, 7, 0, mb, PP_NVTX_BWD));
        double fc = pp_jitter_factor(&c, pp_jitter_key(&c, 0, 2, 7, 0, mb, PP_NVTX_BWD));
        cr_expect(memcmp(&fa, &fb, sizeof fa) == 0, "mb %d: %a vs %a", mb, fa, fb);
        differ += fa != fc;
    }
    cr_expect_eq(differ, 100);
    /* Pinned values, computed by an independent implementation of the formulas of
     * docs/executor.md ("Jitter") in Python: a predictor written elsewhere can check itself
     * against them, and a change here that would desynchronise it is caught. The key and the
     * uniform factor are exact integer and float arithmetic; the lognormal goes through libm. */
    pp_jitter u = parsed("uniform:0.5,seed=1");
    uint64_t k = pp_jitter_key(&u, 0, 0, 1, 0, 0, PP_NVTX_FWD);
    cr_expect_eq(k, UINT64_C(0xe0b967969b5e379f), "%llx", (unsigned long long)k);
    cr_expect_eq(pp_jitter_factor(&u, k), 1.2781591020974763);
    pp_jitter l = parsed("lognormal:0.1,seed=1");
    k = pp_jitter_key(&l, 0, 3, 5, 1, 2, PP_NVTX_BWD);
    cr_expect_eq(k, UINT64_C(0x0c498baaf6394fc0), "%llx", (unsigned long long)k);
    cr_expect(fabs(pp_jitter_factor(&l, k) / 0.9859831846209194 - 1) < 1e-14);
}
