/* test_check.c: pprof-check, the regression gate, as CI relies on it. The statistics against
 * hand-computed values (Mann-Whitney U and its exact and tie-corrected p-values, Holm, the
 * bootstrap's determinism); baselines written and read back; and end to end on runs captured
 * for real (pprof-run + libpprof.so around pptrain's sim backend, whose sleeps to deadlines keep
 * timing meaningful on a busy machine): reruns of one configuration pass, stage 2 made 5%
 * slower fails naming its metrics, a 5% faster model is an improvement, differently shaped,
 * missing and garbage inputs are exit 2 with a message, JUnit and Markdown are written. Without
 * libpprof.so the capturing tests report themselves skipped. The 20-rerun false-alarm count is
 * benchmarks/check_false_alarms.sh (too slow for the suite). */
#define _GNU_SOURCE /* open_memstream, setenv */
#include "pp_check.h"

#include <cJSON.h>
#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
#define PPREPORT PP_BUILD_DIR "/tools/pprof-report"
#define PPCHECK PP_BUILD_DIR "/tools/pprof-check"
#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"
#define LIBPPROF PP_BUILD_DIR "/profiler/libpprof.so"


static void setup(void) { tk_dir_create("pp_check"); }

TestSuite(check, .init = setup, .fini = tk_dir_remove, .timeout = 180);

/* ======================================================================================== */
/* Statistics against hand-computed values                                                    */
/* ======================================================================================== */

Test(check, mann_whitney_exact_small_cases)
{
    /* x entirely below y: U = 0, and of the C(6,3) = 20 equally likely orders only this one and
     * its mirror are as extreme: p = 2/20. */
    const double x[] = {1, 2, 3}, y[] = {4, 5, 6};
    pp_check_mwu t;
    cr_assert_eq(pp_check_mann_whitney(x, 3, y, 3, &t), PP_OK);
    cr_assert_float_eq(t.u, 0, 1e-12);
    cr_assert(t.exact);
    cr_assert_float_eq(t.p, 0.1, 1e-12);
    /* interleaved: pairs with x > y are 3>2, 5>2, 5>4, so U = 3; the null counts of U = 0..9 for
     * 3 vs 3 are 1 1 2 3 3 3 3 2 1 1, P(U <= 3) = 7/20, two-sided p = 0.7 */
    const double a[] = {1, 3, 5}, b[] = {2, 4, 6};
    cr_assert_eq(pp_check_mann_whitney(a, 3, b, 3, &t), PP_OK);
    cr_assert_float_eq(t.u, 3, 1e-12);
    cr_assert_float_eq(t.p, 0.7, 1e-12);
    /* swapping the samples mirrors U (mn - U) and keeps p */
    cr_assert_eq(pp_check_mann_whitney(b, 3, a, 3, &t), PP_OK);
    cr_assert_float_eq(t.u, 6, 1e-12);
    cr_assert_float_eq(t.p, 0.7, 1e-12);
    /* 10 vs 10 fully separated: p = 2 / C(20,10) = 2 / 184756 */
    double lo[10], hi[10];
    for (int i = 0; i < 10; i++) {
        lo[i] = i;
        hi[i] = 100 + i;
    }
    cr_assert_eq(pp_check_mann_whitney(hi, 10, lo, 10, &t), PP_OK);
    cr_assert_float_eq(t.u, 100, 1e-12);
    cr_assert_float_eq(t.p, 2.0 / 184756.0, 1e-15);
}

Test(check, mann_whitney_with_ties_uses_the_corrected_normal_approximation)
{
    /* merged: 1x 2x 2x 2y 3x 3y 4y 5y; mid-ranks 1, 3, 3, 3, 5.5, 5.5, 7, 8; R1 = 12.5,
     * U = 12.5 - 4*5/2 = 2.5, mean 8; ties t = 3 and 2: sum t^3 - t = 30;
     * var = 16/12 (9 - 30/56) = 11.2857142857; z = (|2.5 - 8| - 0.5)/sqrt(var) = 1.48835139;
     * p = erfc(z / sqrt 2) = 0.1366582477 */
    const double x[] = {1, 2, 2, 3}, y[] = {2, 3, 4, 5};
    pp_check_mwu t;
    cr_assert_eq(pp_check_mann_whitney(x, 4, y, 4, &t), PP_OK);
    cr_assert_not(t.exact);
    cr_assert_float_eq(t.u, 2.5, 1e-12);
    cr_assert_float_eq(fabs(t.z), 1.4883513944689681, 1e-9);
    cr_assert_float_eq(t.p, 0.13665824773814753, 1e-9);
    /* all values equal: no evidence at all */
    const double c[] = {7, 7, 7};
    cr_assert_eq(pp_check_mann_whitney(c, 3, c, 3, &t), PP_OK);
    cr_assert_float_eq(t.p, 1.0, 1e-12);
}

Test(check, median_and_holm)
{
    const double odd[] = {3, 1, 2}, even[] = {4, 1, 3, 2}, dup[] = {5, 5, 1, 5, 9, 5};
    cr_assert_float_eq(pp_check_median(odd, 3), 2, 1e-12);
    cr_assert_float_eq(pp_check_median(even, 4), 2.5, 1e-12);
    cr_assert_float_eq(pp_check_median(dup, 6), 5, 1e-12);
    cr_assert(isnan(pp_check_median(odd, 0)));
    /* sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04, then made
     * monotone: 0.02, 0.03, 0.06, 0.06 */
    const double p[] = {0.01, 0.04, 0.03, 0.005};
    double adj[4];
    cr_assert_eq(pp_check_holm(p, 4, adj), PP_OK);
    const double want[] = {0.03, 0.06, 0.06, 0.02};
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(adj[i], want[i], 1e-12, "adj[%d] = %g", i, adj[i]);
}

Test(check, bootstrap_is_deterministic_and_covers_the_shift)
{
    double x[40], y[40];
    pp_rng r;
    pp_rng_seed(&r, 7);
    for (int i = 0; i < 40; i++) {
        x[i] = 100 + pp_rng_normal(&r);
        y[i] = 105 + pp_rng_normal(&r);
    }
    double lo1, hi1, lo2, hi2, lo3, hi3;
    cr_assert_eq(pp_check_bootstrap(x, 40, y, 40, 1, 0.99, 2000, 42, &lo1, &hi1), PP_OK);
    cr_assert_eq(pp_check_bootstrap(x, 40, y, 40, 1, 0.99, 2000, 42, &lo2, &hi2), PP_OK);
    cr_assert(lo1 == lo2 && hi1 == hi2, "same seed, different interval");
    cr_assert(lo1 < hi1);
    /* the ratio of medians is about 1.05: a +5% change, well inside a 99% interval of a few
     * tenths of a percent of half-width (sd 1 on 100, 40 samples) */
    cr_assert(lo1 > 0.035 && hi1 < 0.065, "interval [%g, %g]", lo1, hi1);
    cr_assert_eq(pp_check_bootstrap(x, 40, y, 40, 1, 0.99, 2000, 43, &lo3, &hi3), PP_OK);
    cr_assert(lo3 != lo1 || hi3 != hi1, "the seed is not used");
    /* difference of medians for the absolute (bubble) metrics */
    cr_assert_eq(pp_check_bootstrap(x, 40, y, 40, 0, 0.99, 1000, 1, &lo1, &hi1), PP_OK);
    cr_assert(lo1 > 3.5 && hi1 < 6.5, "difference interval [%g, %g]", lo1, hi1);
}

/* ======================================================================================== */
/* Baseline format and comparison in process                                                  */
/* ======================================================================================== */

/* A baseline text with n samples of step_ms around `ms` and one stage. */
static char *baseline_text(double ms, double stage_ms, int n, const char *schedule)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f, "{\"baseline_version\": 1, \"shape\": {\"stages\": 1, \"microbatches\": 4, "
               "\"virtual_stages\": 1, \"schedule\": \"%s\", \"layer_names\": [\"a\", \"b\"]}, "
               "\"steps\": %d, \"metrics\": [",
            schedule, n);
    const char *names[] = {"step_ms", "stage0.fwd_ms"};
    const char *fam[] = {"step_ms", "fwd_ms"};
    double c[] = {ms, stage_ms};
    for (int m = 0; m < 2; m++) {
        fprintf(f, "%s{\"name\": \"%s\", \"family\": \"%s\", \"unit\": \"ms\", \"samples\": [",
                m ? ", " : "", names[m], fam[m]);
        for (int i = 0; i < n; i++)
            fprintf(f, "%s%.6f", i ? ", " : "", c[m] * (1 + 0.002 * ((i * 7) % 11 - 5) / 5.0));
        fputs("]}", f);
    }
    fputs(", {\"name\": \"link0-1.act.bandwidth_GBps\", \"family\": \"bandwidth_GBps\", "
          "\"unit\": \"GB/s\", \"value\": 10, \"samples\": []}]}",
          f);
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

Test(check, verdicts_need_threshold_and_significance)
{
    char *tb = baseline_text(10, 2, 20, "1f1b");
    char *tslow = baseline_text(10.5, 2.02, 20, "1f1b"); /* +5% step, +1% stage */
    char *tfew = baseline_text(10.5, 2, 3, "1f1b");      /* +5% on 3 steps: cannot be significant */
    pp_check_run *b = parse_ok(tb, "base.json"), *s = parse_ok(tslow, "slow.json");
    pp_check_run *few = parse_ok(tfew, "few.json");
    cr_assert_eq(b->n_metrics, 3);
    cr_assert_eq(b->shape.n_layers, 2);
    pp_check_options o;
    pp_check_options_default(&o);
    o.per_step = 1; /* these synthetic steps are independent samples: the per-step test holds */
    pp_check_result *r = NULL;
    cr_assert_eq(pp_check_compare(b, s, &o, &r), PP_OK);
    cr_assert_eq(row_of(r, "step_ms")->verdict, PP_VERDICT_REGRESSION);
    cr_assert_float_eq(row_of(r, "step_ms")->change, 5.0, 1e-6);
    cr_assert_eq(row_of(r, "stage0.fwd_ms")->verdict, PP_VERDICT_OK); /* significant, but 1% */
    cr_assert_eq(row_of(r, "link0-1.act.bandwidth_GBps")->tested, 0);
    cr_assert(pp_check_failed(r));
    pp_check_result_free(r);
    /* the reverse direction is an improvement */
    cr_assert_eq(pp_check_compare(s, b, &o, &r), PP_OK);
    cr_assert_eq(row_of(r, "step_ms")->verdict, PP_VERDICT_IMPROVEMENT);
    cr_assert_not(pp_check_failed(r));
    pp_check_result_free(r);
    /* beyond the threshold on 3 steps against 20: p is not small enough after Holm: noise */
    cr_assert_eq(pp_check_compare(b, few, &o, &r), PP_OK);
    cr_assert_eq(row_of(r, "step_ms")->verdict, PP_VERDICT_NOISE);
    pp_check_result_free(r);
    /* 3 against 3 can never be significant (smallest p 2/20): a note says so */
    char *tb3 = baseline_text(10, 2, 3, "1f1b");
    pp_check_run *b3 = parse_ok(tb3, "base3.json");
    cr_assert_eq(pp_check_compare(b3, few, &o, &r), PP_OK);
    pp_check_run_free(b3);
    free(tb3);
    cr_assert_eq(row_of(r, "step_ms")->verdict, PP_VERDICT_NOISE);
    cr_assert_not_null(strstr(r->notes, "too few steps"));
    pp_check_result_free(r);
    /* a raised threshold lets the 5% through */
    cr_assert_eq(pp_check_threshold_parse(&o, "step_ms=6%"), PP_OK);
    cr_assert_eq(pp_check_compare(b, s, &o, &r), PP_OK);
    cr_assert_eq(row_of(r, "step_ms")->verdict, PP_VERDICT_OK);
    pp_check_result_free(r);
    cr_assert_neq(pp_check_threshold_parse(&o, "nosuch=3"), PP_OK);
    cr_assert_neq(pp_check_threshold_parse(&o, "step_ms=-1"), PP_OK);
    cr_assert_eq(pp_check_threshold_parse(&o, "stage3.bwd_ms=4"), PP_OK);
    /* only the form pprof-check writes names a metric: "stage03" would match no row and the
     * threshold would never apply (the grammar baselines are read with) */
    cr_assert_eq(pp_check_threshold_parse(&o, "stage03.bwd_ms=4"), PP_ERR_INVALID);
    cr_assert_eq(pp_check_threshold_parse(&o, "link+0-1.act.bandwidth_GBps=4"), PP_ERR_INVALID);
    cr_assert_eq(pp_check_threshold_parse(&o, "link0-1.grad.bandwidth_GBps=4"), PP_OK);
    cr_assert_eq(pp_check_threshold_parse(&o, "fwd_ms=4"), PP_OK);
    pp_check_run_free(b);
    pp_check_run_free(s);
    pp_check_run_free(few);
    free(tb);
    free(tslow);
    free(tfew);
}

/* A baseline of a job that announced no sample count has throughput in steps/s; a run that does
 * announce one has it in samples/s. Their ratio is no change (it read +1496% in the CI gate). */
static char *throughput_text(double samples_per_step, double per_s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f, "{\"baseline_version\": 1, \"shape\": {\"stages\": 1, \"microbatches\": 4, "
               "\"virtual_stages\": 1, \"schedule\": \"1f1b\", \"samples_per_step\": %g}, "
               "\"steps\": 3, \"metrics\": [{\"name\": \"throughput\", \"family\": "
               "\"throughput\", \"unit\": \"%s\", \"samples\": [%g, %g, %g]}]}",
            samples_per_step, samples_per_step > 0 ? "samples/s" : "steps/s", per_s, per_s,
            per_s);
    fclose(f);
    return buf;
}

Test(check, throughput_in_different_units_is_not_compared)
{
    char *ts = throughput_text(0, 7.5), *tm = throughput_text(16, 120);
    pp_check_run *steps = parse_ok(ts, "steps.json"), *samples = parse_ok(tm, "samples.json");
    pp_check_options o;
    pp_check_options_default(&o);
    o.allow_shape_change = 1; /* the shapes differ only by what they announce */
    pp_check_result *r = NULL;
    cr_assert_eq(pp_check_compare(steps, samples, &o, &r), PP_OK);
    const pp_check_row *w = row_of(r, "throughput");
    cr_assert_eq(w->verdict, PP_VERDICT_MISSING);
    cr_assert(w->unit_differs);
    cr_assert_eq(w->tested, 0);
    cr_assert(isnan(w->change));
    cr_assert_eq(r->n_improvements, 0);
    cr_assert_not_null(strstr(r->notes, "throughput not compared"), "%s", r->notes);
    cr_assert_not_null(strstr(r->notes, "steps/s"));
    pp_check_result_free(r);
    /* the same units are compared as before */
    cr_assert_eq(pp_check_compare(samples, samples, &o, &r), PP_OK);
    cr_assert_eq(row_of(r, "throughput")->verdict, PP_VERDICT_OK);
    pp_check_result_free(r);
    pp_check_run_free(steps);
    pp_check_run_free(samples);
    free(ts);
    free(tm);
}

Test(check, shape_mismatch_is_refused_unless_allowed)
{
    char *t1 = baseline_text(10, 2, 10, "1f1b"), *t2 = baseline_text(10, 2, 10, "gpipe");
    pp_check_run *a = parse_ok(t1, "a.json"), *b = parse_ok(t2, "b.json");
    pp_check_options o;
    pp_check_options_default(&o);
    pp_check_result *r = NULL;
    cr_assert_eq(pp_check_compare(a, b, &o, &r), PP_ERR_INVALID);
    cr_assert_not_null(strstr(pp_error_message(), "schedule 1f1b -> gpipe"), "%s",
                       pp_error_message());
    o.allow_shape_change = 1;
    cr_assert_eq(pp_check_compare(a, b, &o, &r), PP_OK);
    cr_assert(r->shape_differs);
    pp_check_result_free(r);
    pp_check_run_free(a);
    pp_check_run_free(b);
    free(t1);
    free(t2);
}

Test(check, baseline_round_trip_and_bad_texts)
{
    char *t = baseline_text(10, 2, 12, "1f1b");
    pp_check_run *a = parse_ok(t, "a.json");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(pp_check_baseline_write(a, "9.9", f), PP_OK);
    fclose(f);
    pp_check_run *b = parse_ok(buf, "written.json");
    cr_assert_eq(b->n_metrics, a->n_metrics);
    cr_assert_str_eq(b->shape.layer_fp, a->shape.layer_fp);
    cr_assert_str_eq(b->version, "9.9");
    for (size_t i = 0; i < a->n_metrics; i++) {
        cr_assert_str_eq(b->metrics[i].name, a->metrics[i].name);
        cr_assert_eq(b->metrics[i].n, a->metrics[i].n);
        for (size_t k = 0; k < a->metrics[i].n; k++)
            cr_assert_float_eq(b->metrics[i].samples[k], a->metrics[i].samples[k], 1e-9);
    }
    pp_check_run_free(a);
    pp_check_run_free(b);
    free(buf);
    free(t);
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"garbage", "invalid JSON"},
        {"[1, 2]", "expected a JSON object"},
        {"{\"hello\": 1}", "neither"},
        {"{\"summary_version\": 2}", "summary_version 2 is not supported"},
        {"{\"baseline_version\": 3}", "baseline_version 3 is not supported"},
        {"{\"baseline_version\": 1, \"shape\": {\"stages\": 2}, \"steps\": 1, \"metrics\": "
         "[{\"name\": \"x\", \"family\": \"bogus\", \"samples\": []}]}", "family"},
        {"{\"summary_version\": 1, \"pipeline\": {\"stages\": 1}, \"steps\": []}", "empty"},
        {"{\"baseline_version\": 1, \"provenance\": {\"source\": \"runs/\xff\"}}",
         "provenance: \"source\" is not valid UTF-8"},
        {"{\"summary_version\": 1, \"pipeline\": {\"stages\": 1, \"schedule\": \"g\x9cipe\"}, "
         "\"steps\": [{\"step_ms\": 1}]}", "\"schedule\" is not valid UTF-8"},
        {"{\"summary_version\": 1, \"pipeline\": {\"stages\": 1}, \"steps\": "
         "[{\"step_ms\": \"fast\"}]}", "step_ms"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pp_check_run *r = NULL;
        cr_assert_neq(pp_check_run_parse(bad[i].text, "bad.json", &r), PP_OK, "%s", bad[i].text);
        cr_assert_null(r);
        cr_assert_not_null(strstr(pp_error_message(), bad[i].says), "'%s': %s", bad[i].text,
                           pp_error_message());
        cr_assert_not_null(strstr(pp_error_message(), "bad.json"), "%s", pp_error_message());
    }
}

/* Layer names the baseline cannot list as they are (a comma in one, bytes that are not UTF-8,
 * a name over 127 bytes, too many to fit) are written as null with their count and
 * fingerprint, which are read back: the run compares as the same model (tests/fuzz_plan.c found
 * the fingerprint changed). */
Test(check, unlisted_layer_names_keep_their_fingerprint_through_a_baseline)
{
    static const char *const lists[] = {
        "[\"a,b\", \"c\"]", "[\"a\", \"b\\u00e9\xff\"]",
        "[\"a\", \"long_name_over_127_bytesxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"]", NULL};
    char many[4096];
    size_t k = (size_t)snprintf(many, sizeof many, "[");
    for (int i = 0; i < 80; i++)
        k += (size_t)snprintf(many + k, sizeof many - k, "%s\"layer_number_%d\"", i ? ", " : "",
                              i);
    snprintf(many + k, sizeof many - k, "]");
    for (int c = 0; c < 4; c++) {
        const char *names = lists[c] ? lists[c] : many;
        char *t = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&t, &len);
        fprintf(f, "{\"baseline_version\": 1, \"shape\": {\"stages\": 1, \"layer_names\": %s}, "
                   "\"steps\": 2, \"metrics\": [{\"name\": \"step_ms\", \"family\": "
                   "\"step_ms\", \"samples\": [1, 2]}]}", names);
        fclose(f);
        pp_check_run *a = parse_ok(t, "a.json");
        cr_assert(a->shape.n_layers == 2 || a->shape.n_layers == 80);
        char *buf = NULL;
        f = open_memstream(&buf, &len);
        cr_assert_eq(pp_check_baseline_write(a, "9.9", f), PP_OK);
        fclose(f);
        cr_assert_not_null(strstr(buf, "\"layer_names\": null"), "case %d: %s", c, buf);
        pp_check_run *b = parse_ok(buf, "written.json");
        cr_assert_eq(b->shape.n_layers, a->shape.n_layers, "case %d", c);
        cr_assert_str_eq(b->shape.layer_fp, a->shape.layer_fp, "case %d", c);
        pp_check_run_free(a);
        pp_check_run_free(b);
        free(buf);
        free(t);
    }
    pp_check_run *r = NULL;
    cr_assert_neq(pp_check_run_parse("{\"baseline_version\": 1, \"shape\": {\"stages\": 1, "
                                     "\"layers\": 2, \"layer_fingerprint\": \"fnv1a64:xyz\", "
                                     "\"layer_names\": null}, \"steps\": 1, \"metrics\": []}",
                                     "bad.json", &r), PP_OK);
    cr_assert_not_null(strstr(pp_error_message(), "layer_fingerprint"), "%s", pp_error_message());
}

/* A baseline of one 1-stage pipeline, 3 steps, and the one metric given as JSON. */
static char *one_metric_baseline(const char *metric)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f, "{\"baseline_version\": 1, \"shape\": {\"stages\": 1}, \"steps\": 3, "
               "\"metrics\": [%s]}", metric);
    fclose(f);
    return buf;
}

/* What pprof-check itself writes is the only thing it reads back: a metric it would not write
 * (renamed, mislabelled, or whose value, statistics or counts disagree with its samples) is
 * refused naming the metric, since comparing it would test nothing or something else. */
Test(check, baseline_metrics_must_be_known_and_agree_with_their_samples)
{
    static const struct {
        const char *metric, *says;
    } bad[] = {
        /* renamed: it would match nothing in the current run and go ungated */
        {"{\"name\": \"step_time_ms\", \"family\": \"step_ms\", \"samples\": [10, 11, 12]}",
         "unknown metric name \"step_time_ms\""},
        {"{\"name\": \"stage00.fwd_ms\", \"family\": \"fwd_ms\", \"samples\": [1, 2, 3]}",
         "unknown metric name \"stage00.fwd_ms\""},
        {"{\"name\": \"fwd_ms\", \"family\": \"fwd_ms\", \"samples\": [1, 2, 3]}",
         "unknown metric name \"fwd_ms\""},
        {"{\"name\": \"stage0.fwd_ms\", \"family\": \"bwd_ms\", \"samples\": [1, 2, 3]}",
         "is of family \"fwd_ms\", the file says \"bwd_ms\""},
        {"{\"name\": \"stage3.fwd_ms\", \"family\": \"fwd_ms\", \"samples\": [1, 2, 3]}",
         "names stage 3, but the shape has 1 stage(s)"},
        {"{\"name\": \"step_ms\", \"family\": \"step_ms\", \"unit\": \"s\", \"samples\": [1, 2, 3]}",
         "has unit \"s\", expected \"ms\""},
        {"{\"name\": \"step_ms\", \"family\": \"step_ms\", \"better\": \"higher\", "
         "\"samples\": [1, 2, 3]}",
         "says better is \"higher\""},
        /* values that are strings */
        {"{\"name\": \"step_ms\", \"family\": \"step_ms\", \"samples\": [\"10\", 11, 12]}",
         "\"samples[]\" must be a number"},
        {"{\"name\": \"step_ms\", \"family\": \"step_ms\", \"value\": \"11\", "
         "\"samples\": [10, 11, 12]}",
         "\"value\" of \"step_ms\" must be a number (got a string)"},
        {"{\"name\": \"step_ms\", \"family\": \"step_ms\", \"stats\": {\"max\": \"12\"}, "
         "\"samples\": [10, 11, 12]}",
         "stats.max of \"step_ms\" must be a number (got a string)"},
        {"{\"name\": \"link0-1.act.bandwidth_GBps\", \"family\": \"bandwidth_GBps\", "
         "\"value\": \"9.5\", \"samples\": []}",
         "must be a number"},
        /* counts and summaries that disagree with the samples */
        {"{\"name\": \"step_ms\", \"family\": \"step_ms\", \"stats\": {\"count\": 5}, "
         "\"samples\": [10, 11, 12]}",
         "stats.count of \"step_ms\" is 5, but it has 3 samples"},
        {"{\"name\": \"step_ms\", \"family\": \"step_ms\", \"samples\": [10, 11]}",
         "has 2 samples, but \"steps\" says 3"},
        {"{\"name\": \"stage0.bwd_ms\", \"family\": \"bwd_ms\", \"samples\": [1, 2, 3, 4]}",
         "has 4 samples, more than the file's 3 steps"},
        {"{\"name\": \"step_ms\", \"family\": \"step_ms\", \"value\": 30, "
         "\"samples\": [10, 11, 12]}",
         "\"value\" of \"step_ms\" is 30, but the median of its 3 samples is 11"},
        {"{\"name\": \"step_ms\", \"family\": \"step_ms\", \"stats\": {\"count\": 3, "
         "\"min\": 9}, \"samples\": [10, 11, 12]}",
         "stats.min of \"step_ms\" is 9, but its 3 samples give 10"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *text = one_metric_baseline(bad[i].metric);
        pp_check_run *r = NULL;
        cr_assert_eq(pp_check_run_parse(text, "bad.json", &r), PP_ERR_INVALID, "case %zu: %s", i,
                     text);
        cr_assert_null(r);
        cr_assert_not_null(strstr(pp_error_message(), bad[i].says), "case %zu: '%s' not in: %s",
                           i, bad[i].says, pp_error_message());
        free(text);
    }
    /* the same metrics as pprof-check writes them are read, stage bwd with fewer samples than
     * steps (a step where the stage ran none) included */
    char *ok = one_metric_baseline(
        "{\"name\": \"step_ms\", \"family\": \"step_ms\", \"unit\": \"ms\", \"better\": "
        "\"lower\", \"value\": 11, \"stats\": {\"count\": 3, \"mean\": 11, \"median\": 11, "
        "\"p95\": 11.9, \"max\": 12, \"min\": 10}, \"samples\": [12, 10, 11]}, "
        "{\"name\": \"stage0.bwd_ms\", \"family\": \"bwd_ms\", \"samples\": [2, 3]}, "
        "{\"name\": \"throughput\", \"family\": \"throughput\", \"unit\": \"steps/s\", "
        "\"value\": null, \"stats\": null, \"samples\": [100, 90, 80]}");
    pp_check_run *r = parse_ok(ok, "ok.json");
    cr_assert_eq(r->n_metrics, 3);
    pp_check_run_free(r);
    free(ok);
}

/* The bug this guards: renaming step_ms in a baseline used to turn the gate off (both sides'
 * metric "missing", exit 0) while the current run was 5% slower. */
Test(check, a_renamed_baseline_metric_is_exit_2_not_a_pass)
{
    char *base = baseline_text(10, 2, 20, "1f1b"), *slow = baseline_text(10.5, 2, 20, "1f1b");
    tk_write_text(tk_path("base.json"), base);
    tk_write_text(tk_path("slow.json"), slow);
    const char *args[] = {"--baseline", tk_path("base.json"), tk_path("slow.json"), NULL};
    tk_result r = tk_run(PPCHECK, args, NULL);
    cr_assert_eq(r.code, 1, "the slower run is a regression: exit %d\n%s%s", r.code, r.out, r.err);
    tk_result_free(&r);
    char *p = strstr(base, "\"name\": \"step_ms\"");
    cr_assert_not_null(p);
    memcpy(p, "\"name\": \"step_mz\"", strlen("\"name\": \"step_mz\""));
    tk_write_text(tk_path("renamed.json"), base);
    const char *args2[] = {"--baseline", tk_path("renamed.json"), tk_path("slow.json"), NULL};
    r = tk_run(PPCHECK, args2, NULL);
    cr_assert_eq(r.code, 2, "exit %d\n%s%s", r.code, r.out, r.err);
    cr_assert_not_null(strstr(r.err, "unknown metric name \"step_mz\""), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "renamed.json"), "%s", r.err);
    tk_result_free(&r);
    free(base);
    free(slow);
}

/* ======================================================================================== */
/* End to end on captured sim runs                                                            */
/* ======================================================================================== */

/* 4 layers of fwd_us / 2 x fwd_us backward; scale multiplies every cost. */
static const char *write_costs(const char *name, double scale)
{
    char text[512];
    double f = 1000 * scale, b = 2000 * scale;
    snprintf(text, sizeof text,
             "{\"layers\": [{\"name\": \"a\", \"fwd_us\": %g, \"bwd_us\": %g}, "
             "{\"name\": \"b\", \"fwd_us\": %g, \"bwd_us\": %g}, "
             "{\"name\": \"c\", \"fwd_us\": %g, \"bwd_us\": %g}, "
             "{\"name\": \"d\", \"fwd_us\": %g, \"bwd_us\": %g}], "
             "\"p2p_GBps\": 10, \"p2p_latency_us\": 10}\n",
             f, b, f, b, f, b, f, b);
    const char *path = tk_path(name);
    tk_write_text(path, text);
    return path;
}

/* Captures a run of pptrain's sim backend (~33 ms steps at scale 1) into tk_dir/name: 4 stages,
 * M micro-batches unless given otherwise; `slow` is a --sim-slow value or NULL. 25 steps: 24
 * analyzed samples give the test power to spare (the smallest exact p is ~3e-14) in < 1 s. */
static const char *capture(const char *name, const char *costs, int S, int M, const char *sched,
                           int steps, const char *slow)
{
    if (access(LIBPPROF, F_OK) != 0)
        cr_skip_test("libpprof.so not built (no NVTX headers): no run to check");
    char s[16], m[16], n[16];
    snprintf(s, sizeof s, "%d", S);
    snprintf(m, sizeof m, "%d", M);
    snprintf(n, sizeof n, "%d", steps);
    const char *dir = tk_path(name);
    const char *args[32] = {"-q", "-o", dir, "--", PPTRAIN, "--backend", "sim", "--costs", costs,
                            "--stages", s, "--microbatches", m, "--schedule", sched, "--steps", n,
                            "-q", NULL};
    if (slow) {
        args[18] = "--sim-slow";
        args[19] = slow;
        args[20] = NULL;
    }
    tk_result r = tk_run(PPRUN, args, NULL);
    cr_assert_eq(r.code, 0, "pprof-run failed (%d): %s", r.code, r.err);
    tk_result_free(&r);
    return dir;
}

static const char *save_baseline(const char *dir, const char *name)
{
    const char *out = tk_path(name);
    const char *args[] = {"--save-baseline", dir, "-o", out, "-q", NULL};
    tk_result r = tk_run(PPCHECK, args, NULL);
    cr_assert_eq(r.code, 0, "--save-baseline failed (%d): %s", r.code, r.err);
    tk_result_free(&r);
    return out;
}

/* The sim backend's steps are independent (it sleeps to absolute deadlines): the per-step test
 * is valid on its one-run captures, where the run-level test would have thresholds only. */
static tk_result check_json(const char *base, const char *cur)
{
    const char *args[] = {"--per-step", "--baseline", base, cur, "--json", NULL};
    return tk_run(PPCHECK, args, NULL);
}

/* The verdict of metric `name` in pprof-check's JSON output. */
static const char *verdict_in(const cJSON *j, const char *name)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(j, "metrics"))
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(m, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
            return cJSON_GetObjectItemCaseSensitive(m, "verdict")->valuestring;
    }
    cr_assert_fail("metric %s not in the output", name);
    return NULL;
}

/* Three reruns, each judged on the less disturbed of two captures: the sim backend sleeps to its
 * deadlines, and on a busy 2-core machine (an ASan build in CI) one capture's wake-ups can run
 * late for a whole run, which the per-step test then rightly calls a change of that run (once:
 * bubble +2.04 pt against a 2 pt threshold, p = 0.0004). A second alarm on the same rerun
 * fails. */
Test(check, reruns_of_the_same_configuration_pass)
{
    const char *costs = write_costs("costs.json", 1.0);
    const char *base = save_baseline(capture("base", costs, 4, 8, "1f1b", 25, NULL), "base.json");
    for (int i = 0; i < 3; i++) {
        for (int attempt = 0; attempt < 2; attempt++) {
            char name[24];
            snprintf(name, sizeof name, "rerun%d-%d", i, attempt);
            const char *dir = capture(name, costs, 4, 8, "1f1b", 25, NULL);
            const char *args[] = {"--per-step", "--baseline", base, dir, NULL};
            tk_result r = tk_run(PPCHECK, args, NULL);
            int pass = r.code == 0 && strstr(r.out, "result: PASS") != NULL;
            if (!pass && attempt == 0)
                cr_log_info("rerun %d alarmed, captured again:\n%s%s", i, r.out, r.err);
            else
                cr_assert(pass, "false alarm on rerun %d, twice:\n%s%s", i, r.out, r.err);
            tk_result_free(&r);
            if (pass)
                break;
        }
    }
}

Test(check, one_stage_5_percent_slower_is_a_regression_naming_it)
{
    /* 3 ms forward ops and 49 steps: a late wake-up on a busy machine moves an op's measured
     * duration either way (the next op catches up to its deadline), by up to milliseconds under
     * ASan with other work running; at 1 ms and 24 samples a side that blurred stage 2's +5%
     * (median right, per-step means scattered) into "noise" after Holm's correction */
    const char *costs = write_costs("costs.json", 3.0);
    const char *base = save_baseline(capture("base", costs, 4, 8, "1f1b", 49, NULL), "base.json");
    const char *slow = capture("slow", costs, 4, 8, "1f1b", 49, "2=1.05");
    tk_result r = check_json(base, slow);
    cr_assert_eq(r.code, 1, "a 5%% slower stage 2 passed (%d):\n%s%s", r.code, r.out, r.err);
    cJSON *j = cJSON_Parse(r.out);
    cr_assert_not_null(j, "not JSON: %s", r.out);
    cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(j, "result")->valuestring, "fail");
    /* Stage 2 is named: its backward (two thirds of its time) a regression. Its forward's
     * per-step means scatter most (each op absorbs the wake-up lateness of the one before,
     * under ASan on a busy machine by up to milliseconds), so it must be beyond the threshold
     * and slower, but may fall short of significance after Holm's correction ("noise"). */
    cr_assert_str_eq(verdict_in(j, "stage2.bwd_ms"), "regression", "%s", r.out);
    const char *fwd2 = verdict_in(j, "stage2.fwd_ms");
    cr_assert(strcmp(fwd2, "regression") == 0 || strcmp(fwd2, "noise") == 0,
              "stage2.fwd_ms: %s\n%s", fwd2, r.out);
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(j, "metrics"))
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(m, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, "stage2.fwd_ms") == 0)
            cr_assert_gt(cJSON_GetObjectItemCaseSensitive(m, "change")->valuedouble, 3.0,
                         "stage2.fwd_ms is not slower beyond its threshold");
    }
    /* with 1F1B at M = 8 the slow stage paces the steady state: about +2.6% per step, beyond
     * the 2% step-time threshold */
    cr_assert_str_eq(verdict_in(j, "step_ms"), "regression", "%s", r.out);
    for (int s = 0; s < 4; s++) {
        if (s == 2)
            continue;
        char f[32], b[32];
        snprintf(f, sizeof f, "stage%d.fwd_ms", s);
        snprintf(b, sizeof b, "stage%d.bwd_ms", s);
        cr_assert_str_neq(verdict_in(j, f), "regression", "%s", r.out);
        cr_assert_str_neq(verdict_in(j, b), "regression", "%s", r.out);
    }
    cJSON_Delete(j);
    tk_result_free(&r);
    /* the table, JUnit and Markdown say the same */
    const char *args[] = {"--per-step", "--baseline", base, slow, "--junit", "gate.xml",
                          "--markdown", "gate.md", NULL};
    r = tk_run(PPCHECK, args, NULL);
    cr_assert_eq(r.code, 1);
    cr_assert_not_null(strstr(r.out, "result: FAIL"));
    cr_assert_not_null(strstr(r.out, "stage2.fwd_ms"));
    char *xml = tk_slurp(tk_path("gate.xml"), NULL);
    char *md = tk_slurp(tk_path("gate.md"), NULL);
    cr_assert(xml && md);
    cr_assert_eq(strncmp(xml, "<?xml", 5), 0);
    int cases = 0, closes = 0, failures = 0;
    for (const char *p = xml; (p = strstr(p, "<testcase ")); p++)
        cases++;
    for (const char *p = xml; (p = strstr(p, "</testcase>")); p++)
        closes++;
    for (const char *p = xml; (p = strstr(p, "<failure ")); p++)
        failures++;
    cr_assert_eq(cases, 15, "one test case per metric (4 stages x fwd, bwd, peak memory + 3), "
                            "got %d", cases);
    cr_assert_eq(closes, cases);
    cr_assert(failures >= 2 && failures < cases);
    char want[64];
    snprintf(want, sizeof want, "failures=\"%d\"", failures);
    cr_assert_not_null(strstr(xml, want), "%s", xml);
    cr_assert_not_null(strstr(xml, "name=\"stage2.bwd_ms\""));
    cr_assert_not_null(strstr(xml, "</testsuites>"));
    cr_assert_not_null(strstr(md, "### pprof-check: FAIL"));
    cr_assert_not_null(strstr(md, "| stage2.fwd_ms |"));
    cr_assert_not_null(strstr(md, "**regression**"));
    free(xml);
    free(md);
    tk_result_free(&r);
}

/* 48 analyzed steps a side, as the regression test above: with 24, a CI run whose parallel tests
 * loaded the 2-core machine spread the sim backend's steps (late wake-ups) until the 5% change's
 * p, 0.0068, stood at 0.074 after Holm's correction over 11 metrics: "noise", rightly. */
Test(check, five_percent_faster_is_an_improvement)
{
    const char *costs = write_costs("costs.json", 1.0), *fast = write_costs("fast.json", 0.95);
    const char *base = capture("base", costs, 4, 8, "1f1b", 49, NULL);
    const char *cur = capture("fast", fast, 4, 8, "1f1b", 49, NULL);
    /* directory against directory, no baseline file in between */
    tk_result r = check_json(base, cur);
    cr_assert_eq(r.code, 0, "(%d):\n%s%s", r.code, r.out, r.err);
    cJSON *j = cJSON_Parse(r.out);
    cr_assert_not_null(j);
    cr_assert_str_eq(verdict_in(j, "step_ms"), "improvement", "%s", r.out);
    cr_assert_str_eq(verdict_in(j, "throughput"), "improvement", "%s", r.out);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "regressions")), 0);
    cr_assert(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "improvements")) >= 2);
    cJSON_Delete(j);
    tk_result_free(&r);
}

Test(check, summary_json_is_accepted_as_input)
{
    const char *costs = write_costs("costs.json", 1.0);
    const char *base = capture("base", costs, 4, 8, "1f1b", 25, NULL);
    const char *summary = tk_path("base-summary.json");
    const char *rargs[] = {base, "--json", "-q", "-o", summary, NULL};
    tk_result r = tk_run(PPREPORT, rargs, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    tk_result_free(&r);
    /* the same run again passes the gate: a timing judgement (pp_testkit.h, tk_judge), since a
     * spell of late wake-ups on the sim backend shortens the measured busy time and lifts one
     * capture's bubble (one CI run: +3.56 points, p 0.0093 after Holm's correction) */
    char b2[PATH_MAX]; /* tk_path's buffers rotate: the attempts below outlast one */
    snprintf(b2, sizeof b2, "%s", save_baseline(summary, "from-summary.json"));
    tk_judge jd = TK_JUDGE_INIT;
    while (tk_judge_next(&jd)) {
        char name[16];
        snprintf(name, sizeof name, "cur%d", jd.attempt);
        const char *cur = capture(name, costs, 4, 8, "1f1b", 25, NULL);
        r = check_json(summary, cur);
        cr_assert(r.code == 0 || r.code == 1, "(%d):\n%s%s", r.code, r.out, r.err);
        cJSON *j = cJSON_Parse(r.out);
        cr_assert_not_null(j, "%s", r.out);
        cr_assert_str_eq(cJSON_GetObjectItemCaseSensitive(
                             cJSON_GetObjectItemCaseSensitive(j, "baseline"), "kind")->valuestring,
                         "summary");
        tk_judge_that(&jd, r.code == 0 && !strcmp(verdict_in(j, "step_ms"), "ok"),
                      "exit %d, step_ms %s:\n%s", r.code, verdict_in(j, "step_ms"), r.out);
        cJSON_Delete(j);
        tk_result_free(&r);
        /* and a baseline saved from the summary compares the same way */
        r = check_json(b2, cur);
        cr_assert(r.code == 0 || r.code == 1, "(%d):\n%s%s", r.code, r.out, r.err);
        tk_judge_that(&jd, r.code == 0, "from the saved baseline, exit %d:\n%s", r.code, r.out);
        tk_result_free(&r);
    }
    cr_assert(!jd.missed, "%s", jd.log);
}

Test(check, different_shapes_are_exit_2)
{
    const char *costs = write_costs("costs.json", 1.0);
    const char *base = save_baseline(capture("base", costs, 4, 8, "1f1b", 6, NULL), "base.json");
    static const struct {
        int S, M;
        const char *sched, *says;
    } other[] = {
        {4, 4, "1f1b", "micro-batches M 8 -> 4"},
        {2, 8, "1f1b", "stages S 4 -> 2"},
        {4, 8, "gpipe", "schedule 1f1b -> gpipe"},
    };
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        char name[16];
        snprintf(name, sizeof name, "other%zu", i);
        const char *dir = capture(name, costs, other[i].S, other[i].M, other[i].sched, 6, NULL);
        const char *args[] = {"--baseline", base, dir, NULL};
        tk_result r = tk_run(PPCHECK, args, NULL);
        cr_assert_eq(r.code, 2, "%s: exit %d\n%s%s", other[i].says, r.code, r.out, r.err);
        cr_assert_not_null(strstr(r.err, other[i].says), "%s", r.err);
        cr_assert_not_null(strstr(r.err, "--allow-shape-change"), "%s", r.err);
        tk_result_free(&r);
        const char *allow[] = {"--baseline", base, dir, "--allow-shape-change", NULL};
        r = tk_run(PPCHECK, allow, NULL);
        cr_assert_neq(r.code, 2, "--allow-shape-change still refused: %s", r.err);
        cr_assert_not_null(strstr(r.out, "shapes differ"), "%s", r.out);
        tk_result_free(&r);
    }
}

Test(check, missing_and_garbage_inputs_are_exit_2)
{
    tk_write_text(tk_path("garbage.json"), "this is not json\n");
    tk_write_text(tk_path("empty.json"), "");
    tk_write_text(tk_path("v2.json"), "{\"summary_version\": 2, \"pipeline\": {\"stages\": 4}}\n");
    tk_write_text(tk_path("array.json"), "[1, 2, 3]\n");
    cr_assert_eq(mkdir(tk_path("emptydir"), 0755), 0);
    cr_assert_eq(mkfifo(tk_path("fifo.json"), 0644), 0); /* refused, never waited on */
    static const struct {
        const char *base, *cur, *says;
    } cases[] = {
        {"garbage.json", "garbage.json", "garbage.json"},
        {"empty.json", "garbage.json", "empty.json"},
        {"v2.json", "garbage.json", "summary_version 2 is not supported"},
        {"array.json", "garbage.json", "array.json"},
        {"nosuchdir", "garbage.json", "nosuchdir"},
        {"emptydir", "garbage.json", "emptydir"},
        {"fifo.json", "garbage.json", "fifo.json' is a FIFO, not a regular file"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[] = {"--baseline", cases[i].base, cases[i].cur, NULL};
        tk_result r = tk_run(PPCHECK, args, NULL);
        cr_assert_eq(r.code, 2, "%s: exit %d: %s", cases[i].base, r.code, r.err);
        cr_assert_not_null(strstr(r.err, cases[i].says), "%s: %s", cases[i].base, r.err);
        tk_result_free(&r);
    }
    /* usage errors */
    static const char *const usage[][6] = {
        {"garbage.json", NULL},                                  /* no --baseline */
        {"--baseline", "garbage.json", NULL},                    /* no CURRENT */
        {"--baseline", "a", "--add-run", NULL},                  /* no run to add */
        {"--threshold", "bogus=3", "--baseline", "a", "b", NULL},
        {"--threshold", "step_ms=lots", "--baseline", "a", "b", NULL},
        {"--alpha", "2", "--baseline", "a", "b", NULL},
    };
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        tk_result r = tk_run(PPCHECK, usage[i], NULL);
        cr_assert_eq(r.code, 2, "usage case %zu: exit %d", i, r.code);
        cr_assert_not_null(strstr(r.err, "pprof-check: "), "%s", r.err);
        tk_result_free(&r);
    }
}
