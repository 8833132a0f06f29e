/* test_check_runs.c: pprof-check with runs as the unit (analyzer/check_compare.c,
 * check_stats.c, check_baseline.c): Student's t and Welch's test against hand-computed values,
 * the runs-needed statement against the textbook answer, baselines of several runs written and
 * read back (and version 1 files still read), and the run-level verdicts on synthetic runs whose
 * steps agree closely while the runs differ: the per-step test calls such a rerun a regression,
 * the run-level test calls it noise, and a real +10% over six runs a side is a regression. The
 * tool's --save-baseline RUN..., --add-run and several CURRENT runs end to end on sim captures.
 * All noise is seeded. */
#define _GNU_SOURCE /* open_memstream */
#include "pp_check.h"

#include <cJSON.h>
#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
#define PPCHECK PP_BUILD_DIR "/tools/pprof-check"
#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"
#define LIBPPROF PP_BUILD_DIR "/profiler/libpprof.so"

static void setup(void) { tk_dir_create("pp_check_runs"); }

TestSuite(check_runs, .init = setup, .fini = tk_dir_remove, .timeout = 300);

Test(check_runs, student_t_against_tables)
{
    /* t_{0.975, 10} = 2.228138852 (two-sided 5%); Cauchy (df 1): P(|T| > 1) = 1/2 */
    cr_assert_float_eq(pp_check_t_tail2(2.228138852, 10), 0.05, 1e-8);
    cr_assert_float_eq(pp_check_t_tail2(1.0, 1), 0.5, 1e-12);
    cr_assert_float_eq(pp_check_t_tail2(0.0, 5), 1.0, 1e-12);
    cr_assert_float_eq(pp_check_t_tail2(-2.228138852, 10), 0.05, 1e-8);
    /* t_{0.995, 4} = 4.604094871; large df: the normal's 1.959963985 */
    cr_assert_float_eq(pp_check_t_quantile2(0.01, 4), 4.604094871, 1e-7);
    cr_assert_float_eq(pp_check_t_quantile2(0.05, 1e7), 1.959963985, 1e-5);
    cr_assert_float_eq(pp_check_t_quantile2(0.05, 10), 2.228138852, 1e-7);
}

Test(check_runs, welch_and_the_pooled_test_by_hand)
{
    /* means 2.5 and 5, variances 5/3 and 5/2: se^2 = 5/12 + 1/2, Welch-Satterthwaite df */
    const double x[] = {1, 2, 3, 4}, y[] = {3, 4, 5, 6, 7};
    pp_check_ttest t;
    cr_assert_eq(pp_check_welch(x, 4, y, 5, 0.95, &t), PP_OK);
    double se = sqrt(5.0 / 12 + 0.5);
    double df = pow(5.0 / 12 + 0.5, 2) / (pow(5.0 / 12, 2) / 3 + 0.25 / 4);
    cr_assert_float_eq(t.diff, 2.5, 1e-12);
    cr_assert_float_eq(t.se, se, 1e-12);
    cr_assert_float_eq(t.t, 2.5 / se, 1e-12);
    cr_assert_float_eq(t.df, df, 1e-9);
    cr_assert_float_eq(t.p, pp_check_t_tail2(2.5 / se, df), 1e-12);
    cr_assert_eq(t.pooled, 0);
    cr_assert(t.lo < 2.5 && t.hi > 2.5 && t.lo > 0, "[%g, %g]", t.lo, t.hi);
    /* one value against three: the three's variance (1) stands for both, df = 2 */
    const double one[] = {10}, three[] = {1, 2, 3};
    cr_assert_eq(pp_check_welch(one, 1, three, 3, 0.95, &t), PP_OK);
    cr_assert_eq(t.pooled, 1);
    cr_assert_float_eq(t.diff, -8, 1e-12);
    cr_assert_float_eq(t.se, sqrt(1 + 1.0 / 3), 1e-12);
    cr_assert_float_eq(t.df, 2, 1e-12);
    /* one value a side cannot be tested */
    cr_assert_eq(pp_check_welch(one, 1, one, 1, 0.95, &t), PP_ERR_INVALID);
}

Test(check_runs, runs_needed_is_the_textbook_sample_size)
{
    /* a one-SD shift at 5%, power 0.8: 17 per group (the two-sample t-test's textbook answer) */
    int n = pp_check_runs_needed(1, 1, 0.05, 0.8, 1000);
    cr_assert(n >= 16 && n <= 18, "%d", n);
    /* twice the shift, about a quarter of the runs; a tenth of it, about a hundred times */
    int n2 = pp_check_runs_needed(2, 1, 0.05, 0.8, 1000);
    cr_assert(n2 >= 5 && n2 <= 7, "%d", n2);
    int n10 = pp_check_runs_needed(0.1, 1, 0.05, 0.8, 10000);
    cr_assert(n10 > 1400 && n10 < 1800, "%d", n10);
    /* stricter level and more power need more */
    cr_assert_gt(pp_check_runs_needed(1, 1, 0.001, 0.8, 1000), n);
    cr_assert_gt(pp_check_runs_needed(1, 1, 0.05, 0.95, 1000), n);
    cr_assert_eq(pp_check_runs_needed(1, 0, 0.05, 0.8, 1000), 0); /* no scatter known */
    cr_assert_eq(pp_check_runs_needed(0.001, 1, 0.05, 0.8, 100), 101);
}

/* ======================================================================================== */
/* Synthetic runs                                                                             */
/* ======================================================================================== */

/* A baseline_version 2 text of R runs of n steps: run k's steps scatter by 0.2% (seeded) around
 * ms * (1 + offset[k] / 100); stage 0's forward is 30% of the step. */
static char *runs_text(int R, int n, double ms, const double *offset, uint64_t seed,
                       const char *label)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f, "{\"baseline_version\": 2, \"shape\": {\"stages\": 1, \"microbatches\": 4, "
               "\"virtual_stages\": 1, \"schedule\": \"1f1b\"}, \"steps\": %d, \"runs\": [",
            R * n);
    pp_rng g;
    pp_rng_seed(&g, seed);
    const char *names[] = {"step_ms", "stage0.fwd_ms"}, *fam[] = {"step_ms", "fwd_ms"};
    for (int k = 0; k < R; k++) {
        fprintf(f, "%s{\"source\": \"run%d\", \"label\": \"%s\", \"time\": null, \"steps\": %d, "
                   "\"metrics\": [", k ? ", " : "", k, label, n);
        double level = ms * (1 + offset[k] / 100);
        for (int m = 0; m < 2; m++) {
            fprintf(f, "%s{\"name\": \"%s\", \"family\": \"%s\", \"samples\": [", m ? ", " : "",
                    names[m], fam[m]);
            for (int i = 0; i < n; i++)
                fprintf(f, "%s%.9g", i ? ", " : "",
                        level * (m ? 0.3 : 1) * (1 + 0.002 * pp_rng_normal(&g)));
            fputs("]}", f);
        }
        fputs("]}", f);
    }
    fputs("]}\n", f);
    fclose(f);
    return buf;
}

static pp_check_run *parse_ok(const char *text, const char *ctx)
{
    pp_check_run *r = NULL;
    pp_status st = pp_check_run_parse(text, ctx, &r);
    cr_assert_eq(st, PP_OK, "%s: %s", ctx, pp_error_message());
    return r;
}

static const pp_check_row *row_of(const pp_check_result *r, const char *name)
{
    for (size_t i = 0; i < r->n_rows; i++)
        if (strcmp(r->rows[i].name, name) == 0)
            return &r->rows[i];
    cr_assert_fail("no row %s", name);
    return NULL;
}

static const double k_spread[6] = {-2, -1, 0, 0, 1, 2}; /* the runs' offsets, % */

Test(check_runs, a_baseline_of_several_runs_round_trips)
{
    char *t = runs_text(3, 20, 100, k_spread, 1, "abc");
    pp_check_run *r = parse_ok(t, "three.json");
    cr_assert_eq(r->n_runs, 3);
    cr_assert_eq(r->n_steps, 60);
    cr_assert_eq(r->n_metrics, 2);
    const pp_check_metric *m = &r->metrics[0];
    cr_assert_str_eq(m->name, "step_ms");
    cr_assert_eq(m->n, 60);
    for (int k = 0; k < 3; k++) {
        cr_assert_eq(m->run_n[k], 20);
        cr_assert_float_eq(m->run_values[k], 100 * (1 + k_spread[k] / 100), 0.3);
        cr_assert_str_eq(r->runs[k].label, "abc");
    }
    /* the set's value: the median of the runs' medians */
    cr_assert_float_eq(m->value, m->run_values[1], 1e-12);
    char *back = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&back, &len);
    cr_assert_eq(pp_check_baseline_write(r, "test", f), PP_OK);
    fclose(f);
    cr_assert_not_null(strstr(back, "\"baseline_version\": 2"));
    pp_check_run *b = parse_ok(back, "back.json");
    cr_assert_eq(b->n_runs, 3);
    cr_assert_eq(b->n_steps, 60);
    for (size_t i = 0; i < r->n_metrics; i++)
        for (size_t k = 0; k < r->metrics[i].n; k++)
            cr_assert_float_eq(b->metrics[i].samples[k], r->metrics[i].samples[k], 1e-6);
    cr_assert_str_eq(b->runs[2].source, "run2");
    cr_assert_str_eq(b->runs[2].label, "abc");
    pp_check_run_free(b);
    free(back);
    /* a run appended to the set: shapes must agree */
    char *t1 = runs_text(1, 20, 100, k_spread + 3, 2, "def");
    pp_check_run *one = parse_ok(t1, "one.json");
    cr_assert_eq(pp_check_run_append(r, one), PP_OK);
    cr_assert_eq(r->n_runs, 4);
    cr_assert_eq(r->metrics[0].n, 80);
    cr_assert_str_eq(r->runs[3].label, "def");
    one->shape.M = 8;
    cr_assert_eq(pp_check_run_append(r, one), PP_ERR_INVALID);
    cr_assert_not_null(strstr(pp_error_message(), "micro-batches M 4 -> 8"), "%s",
                       pp_error_message());
    pp_check_run_free(one);
    pp_check_run_free(r);
    free(t);
    free(t1);
    /* what a reader refuses in version 2, and version 1 still read as one run */
    static const char *const bad[][2] = {
        {"{\"baseline_version\": 2, \"shape\": {\"stages\": 1}, \"steps\": 0, \"runs\": []}",
         "\"runs\" holds 0 runs"},
        {"{\"baseline_version\": 2, \"shape\": {\"stages\": 1}, \"steps\": 5, \"runs\": [{\"steps\""
         ": 1, \"metrics\": [{\"name\": \"step_ms\", \"family\": \"step_ms\", \"samples\": [1]}]}]}",
         "\"steps\" is 5, but its runs hold 1"},
        {"{\"baseline_version\": 2, \"shape\": {\"stages\": 1}, \"steps\": 1, \"runs\": [{\"steps\""
         ": 1, \"metrics\": [{\"name\": \"step_ms\", \"family\": \"step_ms\", \"samples\": [1, 2]}]"
         "}]}", "2 samples, more than the file's 1 steps"},
        {"{\"baseline_version\": 3, \"shape\": {\"stages\": 1}, \"steps\": 1, \"runs\": []}",
         "reads baseline_version 1 and 2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pp_check_run *x = NULL;
        cr_assert_eq(pp_check_run_parse(bad[i][0], "bad.json", &x), PP_ERR_INVALID, "%zu", i);
        cr_assert_null(x);
        cr_assert_not_null(strstr(pp_error_message(), bad[i][1]), "%zu: %s", i,
                           pp_error_message());
    }
    pp_check_run *v1 = parse_ok("{\"baseline_version\": 1, \"shape\": {\"stages\": 1}, \"steps\": "
                                "2, \"metrics\": [{\"name\": \"step_ms\", \"family\": "
                                "\"step_ms\", \"samples\": [1, 3]}]}", "v1.json");
    cr_assert_eq(v1->n_runs, 1);
    cr_assert_float_eq(v1->metrics[0].run_values[0], 2, 1e-12);
    pp_check_run_free(v1);
}

/* cur against base with the defaults (or the per-step test). */
static pp_check_result *compare(const char *base, const char *cur, int per_step)
{
    pp_check_run *b = parse_ok(base, "base.json"), *c = parse_ok(cur, "cur.json");
    pp_check_options o;
    pp_check_options_default(&o);
    o.per_step = per_step;
    pp_check_result *r = NULL;
    cr_assert_eq(pp_check_compare(b, c, &o, &r), PP_OK, "%s", pp_error_message());
    pp_check_run_free(b);
    pp_check_run_free(c);
    return r;
}

Test(check_runs, a_rerun_off_by_the_runs_own_scatter_is_noise_not_a_regression)
{
    /* six baseline runs 1.4% apart (standard deviation of their levels), each run's steps
     * within 0.2%; a rerun 3% slower: within what runs of this job do */
    char *base = runs_text(6, 40, 100, k_spread, 11, "base");
    const double off3[] = {3};
    char *rerun = runs_text(1, 40, 100, off3, 12, "rerun");
    /* the per-step test sees 40 tight steps against 240 and calls it a regression */
    pp_check_result *r = compare(base, rerun, 1);
    cr_assert_eq(row_of(r, "step_ms")->verdict, PP_VERDICT_REGRESSION);
    pp_check_result_free(r);
    /* the run-level test: one run against six, the six's scatter: noise */
    r = compare(base, rerun, 0);
    const pp_check_row *w = row_of(r, "step_ms");
    cr_assert_str_eq(w->test, "pooled-t");
    cr_assert_eq(w->runs_base, 6);
    cr_assert_eq(w->runs_cur, 1);
    cr_assert_float_eq(w->df, 5, 1e-12);
    cr_assert_eq(w->verdict, PP_VERDICT_NOISE, "p %g", w->p_adj);
    cr_assert_not(pp_check_failed(r));
    cr_assert(w->run_sd > 1.0 && w->run_sd < 2.0, "run sd %g%%", w->run_sd);
    /* and it says how many runs a 2% change needs at this scatter */
    cr_assert_gt(w->runs_needed, 6);
    cr_assert_not_null(strstr(r->notes, "runs per side"), "%s", r->notes);
    pp_check_result_free(r);
    /* six runs 10% slower against six: a regression, Welch */
    char *slow = runs_text(6, 40, 110, k_spread, 13, "slow");
    r = compare(base, slow, 0);
    w = row_of(r, "step_ms");
    cr_assert_str_eq(w->test, "welch");
    cr_assert_eq(w->verdict, PP_VERDICT_REGRESSION, "p %g", w->p_adj);
    cr_assert_float_eq(w->change, 10, 0.5);
    cr_assert(w->has_ci && w->ci_lo > 5 && w->ci_hi < 15, "[%g, %g]", w->ci_lo, w->ci_hi);
    cr_assert_eq(row_of(r, "stage0.fwd_ms")->verdict, PP_VERDICT_REGRESSION);
    cr_assert(pp_check_failed(r));
    pp_check_result_free(r);
    /* the reverse: an improvement */
    r = compare(slow, base, 0);
    cr_assert_eq(row_of(r, "step_ms")->verdict, PP_VERDICT_IMPROVEMENT);
    pp_check_result_free(r);
    free(base);
    free(rerun);
    free(slow);
}

Test(check_runs, one_run_a_side_falls_back_to_the_threshold_with_a_warning)
{
    const double zero[] = {0}, off3[] = {3}, off1[] = {1};
    char *a = runs_text(1, 40, 100, zero, 21, "a"), *b = runs_text(1, 40, 100, off3, 22, "b");
    char *c = runs_text(1, 40, 100, off1, 23, "c");
    pp_check_result *r = compare(a, b, 0);
    const pp_check_row *w = row_of(r, "step_ms");
    cr_assert_eq(w->tested, 0);
    cr_assert_str_eq(w->test, "threshold-only");
    cr_assert(isnan(w->p));
    cr_assert_eq(w->verdict, PP_VERDICT_REGRESSION); /* +3% beyond 2%: the threshold decides */
    cr_assert_eq(r->threshold_only, 1);
    cr_assert_not_null(strstr(r->notes, "cannot be told from a change"), "%s", r->notes);
    pp_check_result_free(r);
    r = compare(a, c, 0); /* +1%: within */
    cr_assert_eq(row_of(r, "step_ms")->verdict, PP_VERDICT_OK);
    cr_assert_not(pp_check_failed(r));
    pp_check_result_free(r);
    free(a);
    free(b);
    free(c);
}

/* ======================================================================================== */
/* The tool, on sim captures                                                                  */
/* ======================================================================================== */

static const char *capture(const char *name, const char *costs)
{
    if (access(LIBPPROF, F_OK) != 0)
        cr_skip_test("libpprof.so not built (no NVTX headers): no run to check");
    const char *dir = tk_path(name);
    const char *args[] = {"-q", "-o", dir, "--", PPTRAIN, "--backend", "sim", "--costs", costs,
                          "--stages", "2", "--microbatches", "4", "--steps", "6", "-q", NULL};
    tk_result r = tk_run(PPRUN, args, NULL);
    cr_assert_eq(r.code, 0, "pprof-run failed (%d): %s", r.code, r.err);
    tk_result_free(&r);
    return dir;
}

Test(check_runs, save_add_and_check_several_runs_with_the_tool)
{
    const char *costs = tk_write_costs("costs.json", 4, 500, 1000, 0, 0, 10, 10);
    char r1[256], r2[256], r3[256], r4[256];
    snprintf(r1, sizeof r1, "%s", capture("r1", costs));
    snprintf(r2, sizeof r2, "%s", capture("r2", costs));
    snprintf(r3, sizeof r3, "%s", capture("r3", costs));
    snprintf(r4, sizeof r4, "%s", capture("r4", costs));
    const char *base = tk_path("base.json");
    const char *save[] = {"--save-baseline", r1, r2, "-o", base, NULL};
    tk_result r = tk_run(PPCHECK, save, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "2 runs"), "%s", r.err);
    tk_result_free(&r);
    const char *add[] = {"--baseline", base, "--add-run", r3, NULL};
    r = tk_run(PPCHECK, add, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "3 runs"), "%s", r.err);
    tk_result_free(&r);
    /* the baseline's three runs against two current ones */
    const char *chk[] = {"--baseline", base, r4, r1, "--json", NULL};
    r = tk_run(PPCHECK, chk, NULL);
    cr_assert(r.code == 0 || r.code == 1, "(%d) %s", r.code, r.err);
    cJSON *j = cJSON_Parse(r.out);
    cr_assert_not_null(j, "%s", r.out);
    cr_assert_eq(cJSON_GetObjectItem(j, "check_version")->valueint, 2);
    const cJSON *test = cJSON_GetObjectItem(j, "test");
    cr_assert_str_eq(cJSON_GetObjectItem(test, "name")->valuestring, "welch-t-run-medians");
    cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "baseline"), "runs")->valueint, 3);
    cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "current"), "runs")->valueint, 2);
    const cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "metrics"), 0);
    cr_assert_str_eq(cJSON_GetObjectItem(m0, "name")->valuestring, "step_ms");
    cr_assert_str_eq(cJSON_GetObjectItem(m0, "test")->valuestring, "welch");
    cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(m0, "runs_needed")), "%s", r.out);
    cJSON_Delete(j);
    tk_result_free(&r);
    /* runs of another shape do not join a set */
    const char *costs8 = tk_write_costs("costs8.json", 8, 500, 1000, 0, 0, 10, 10);
    const char *other = capture("other", costs8);
    const char *mix[] = {"--baseline", base, r4, other, NULL};
    r = tk_run(PPCHECK, mix, NULL);
    cr_assert_eq(r.code, 2, "(%d) %s", r.code, r.err);
    cr_assert_not_null(strstr(r.err, "different configurations"), "%s", r.err);
    tk_result_free(&r);
    const char *noruns[] = {"--baseline", base, "--add-run", NULL};
    r = tk_run(PPCHECK, noruns, NULL);
    cr_assert_eq(r.code, 2);
    tk_result_free(&r);
}
