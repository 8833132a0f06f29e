/* test_pyjob.c: a pipeline in another language, analyzed as a user would: tests/py/pipe_1f1b.py
 * (threads, queue.Queue between neighbours, 1F1B order, fixed sleeps; NVTX from the PyPI `nvtx`
 * package in the convention's fallback form) runs under pprof-run, with and without a barrier
 * before its optimizer step, and the analysis must agree with what the job measured itself:
 * the step time with the job's own period (its step starts), each link's latency with the
 * job's own put -> get latency.
 *
 * The Python comes from PPROF_PYTHON, else the CMake cache's PP_PYTHON, else the venv that
 * scripts/setup.sh makes (/var/cache/pipeprof/venv, or ${XDG_CACHE_HOME:-~/.cache}/pipeprof/venv
 * when /var/cache is not writable). The tests skip only when none of them can import nvtx, or
 * libpprof.so was not built. */
#define _GNU_SOURCE
#include "pp_analyzer.h"

#include <cJSON.h>
#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
#define PPTUNE PP_BUILD_DIR "/tools/pprof-tune"
#define LIBPPROF PP_BUILD_DIR "/profiler/libpprof.so"
#define FIXTURE PP_TEST_PY_DIR "/pipe_1f1b.py"

static void setup(void) { tk_dir_create("pp_pyjob"); }

TestSuite(pyjob, .init = setup, .fini = tk_dir_remove, .timeout = 180);

/* The first Python with nvtx of: PPROF_PYTHON, PP_PYTHON, setup.sh's venvs; NULL when none. */
static const char *find_python(void)
{
    return tk_find_python("PPROF_PYTHON", PP_PYTHON, NULL, "venv", "import nvtx");
}

/* The Python to run the fixture with; skips the test when nothing can capture it. */
static const char *need_python(void)
{
    if (!tk_exists(LIBPPROF))
        cr_skip_test("libpprof.so not built (no NVTX headers): nothing captures the job");
    const char *py = find_python();
    if (!py)
        cr_skip_test("no Python with the nvtx package (run scripts/setup.sh, or set "
                     "PPROF_PYTHON)");
    return py;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    cr_assert(cJSON_IsNumber(v), "'%s' is not a number", k);
    return v->valuedouble;
}

/* t[stage][step - 1] of the job's "step_starts" / "step_ends". */
static double at(const cJSON *arr, int stage, int64_t step)
{
    const cJSON *row = cJSON_GetArrayItem(arr, stage);
    const cJSON *v = cJSON_GetArrayItem(row, (int)(step - 1));
    cr_assert(cJSON_IsNumber(v), "no time for stage %d step %lld", stage, (long long)step);
    return v->valuedouble;
}

/* pprof-run's argv around the fixture, run. A sanitized libpprof.so needs its ASan runtime
 * first in the (uninstrumented) Python; Python's own allocations at exit are not ours to report. */
static tk_result run_fixture(const char *const *argv)
{
    static char preload[1100];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", PP_ASAN_RUNTIME);
    const char *san_env[] = {preload, "ASAN_OPTIONS=detect_leaks=0", NULL};
    return tk_runv(argv, PP_ASAN_RUNTIME[0] ? san_env : NULL);
}

/* Runs the fixture under pprof-run (with or without the barrier), analyzes it, and checks it
 * against the job's own measurements. */
static void run_and_check(int barrier)
{
    const char *py = need_python();
    const int S = 4, M = 8, steps = 6;
    const char *dir = tk_path("run"), *truth = tk_path("truth.json");
    const char *argv[] = {PPRUN, "-q", "-o", dir, "--", py, FIXTURE, "--stages", "4",
                          "--microbatches", "8", "--steps", "6", "--out", truth,
                          barrier ? "--barrier" : NULL, NULL};
    tk_result r = run_fixture(argv);
    int code = r.code;
    char msg[2048];
    snprintf(msg, sizeof msg, "%s%s", r.out ? r.out : "", r.err ? r.err : "");
    tk_result_free(&r);
    cr_assert_eq(code, 0, "pprof-run of the Python job failed (%d): %s", code, msg);
    char *text = tk_slurp(truth, NULL);
    cr_assert_not_null(text, "the job wrote no %s", truth);
    cJSON *j = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(j, "%s is not JSON", truth);
    const cJSON *t0 = cJSON_GetObjectItem(j, "step_starts"), *t1 = cJSON_GetObjectItem(j, "step_ends");
    cr_assert_eq(cJSON_GetArraySize(t0), S);

    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->S, S);
    cr_assert_str_eq(a->schedule, "1f1b");
    cr_assert_eq(a->n_steps, (size_t)(steps - 1), "all steps but the warm-up");

    /* The job's own period over the analyzed steps, per docs/metrics.md: from each step's start
     * to the next one's on every stage, and for the last step from the previous step's end to
     * its own; the mean over stages, then over steps. */
    double want = 0, window = 0;
    for (size_t i = 0; i < a->n_steps; i++) {
        int64_t k = a->steps[i].step;
        double p = 0;
        for (int s = 0; s < S; s++)
            p += k < steps ? at(t0, s, k + 1) - at(t0, s, k) : at(t1, s, k) - at(t1, s, k - 1);
        want += p / S;
        window += a->steps[i].window_ns;
    }
    want /= (double)a->n_steps;
    window /= (double)a->n_steps;
    cr_log_info("%s barrier: step time %.3f ms, the job's period %.3f ms (mean start spacing "
                "%.3f ms), union of the step ranges %.3f ms",
                barrier ? "with" : "without", a->step_ns.mean * 1e-6, want * 1e-6,
                num(j, "period_ns") * 1e-6, window * 1e-6);
    cr_assert_leq(fabs(a->step_ns.mean - want), 0.02 * want,
                  "step time %.3f ms vs the job's period %.3f ms", a->step_ns.mean * 1e-6,
                  want * 1e-6);
    /* the bubble follows the period: idle = period - busy on every stage */
    for (size_t i = 0; i < a->n_steps; i++)
        for (int s = 0; s < S; s++)
            cr_assert_float_eq(a->steps[i].stage[s].idle_ns + a->steps[i].stage[s].busy_ns,
                               a->steps[i].step_ns, 1.0);

    /* every link's latency within 2x of the job's own put -> get latency on that link */
    const cJSON *lat = cJSON_GetObjectItem(j, "latency_ns");
    cr_assert_eq(a->n_links, (size_t)(2 * (S - 1)));
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        char key[32];
        snprintf(key, sizeof key, "%s %d->%d", l->grad ? "grad" : "act", l->src, l->dst);
        const cJSON *v = cJSON_GetObjectItem(lat, key);
        cr_assert(cJSON_IsNumber(v), "the job measured no latency on %s", key);
        double job = v->valuedouble, got = l->latency_ns.median;
        cr_log_info("%s: latency %.1f us (job %.1f us), %llu of %llu messages timed, %.3f GB/s",
                    key, got * 1e-3, job * 1e-3, (unsigned long long)l->timed,
                    (unsigned long long)l->messages, l->bandwidth_GBps);
        cr_assert_eq(l->messages, (uint64_t)(M * (steps - 1)), "%s", key);
        cr_assert_gt(l->timed, 0u, "%s: no message timed", key);
        cr_assert(got >= 0.5 * job && got <= 2.0 * job, "%s: latency %.1f us, the job's %.1f us",
                  key, got * 1e-3, job * 1e-3);
    }
    /* throughput from the samples the config mark announced, over the period */
    cr_assert_float_eq(a->samples_per_s, M / (a->step_ns.mean * 1e-9), 1e-6 * a->samples_per_s);
    pp_analysis_free(a);
    cJSON_Delete(j);
}

Test(pyjob, without_a_barrier_the_step_time_is_the_period_and_links_the_queue_latency)
{
    run_and_check(0);
}

Test(pyjob, with_a_barrier_the_step_time_is_the_period_and_links_the_queue_latency)
{
    run_and_check(1);
}

/* A receiver that returns late (every 4th message on a link, 3 ms: a thread descheduled when its
 * data arrived) holds up everything after it on its stage, where the sim backend's next op makes
 * a late wake-up up: pprof-tune's extraction keeps the transfers' measured variation for this
 * job, since its own layout replays nearer its measured median with it than without
 * (docs/sim-dist.md "Why transfers vary"; tests/test_tune.c checks that a sim-backend capture
 * keeps them fixed). */
Test(pyjob, late_receives_make_the_transfers_vary)
{
    const char *py = need_python();
    const char *dir = tk_path("late");
    const char *argv[] = {PPRUN, "-q", "-o", dir, "--", py, FIXTURE, "--stages", "4",
                          "--microbatches", "8", "--steps", "12", "--layers", "2",
                          "--late-every", "4", "--late-ms", "3", "--out", tk_path("late.json"),
                          NULL};
    tk_result r = run_fixture(argv);
    cr_assert_eq(r.code, 0, "pprof-run of the Python job failed (%d): %s%s", r.code, r.out,
                 r.err);
    tk_result_free(&r);
    const char *targs[] = {dir, "-v", NULL};
    r = tk_run(PPTUNE, targs, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    const char *key = "transfers vary as measured: the run's own layout replays to a median ";
    const char *n = strstr(r.err, key);
    cr_assert_not_null(n, "the transfers were kept fixed:\n%s", r.err);
    double with = strtod(n + strlen(key), NULL);
    const char *w = strstr(n, "with their variation, ");
    cr_assert_not_null(w, "%s", n);
    double without = strtod(w + strlen("with their variation, "), NULL);
    cr_log_info("the run's own median replayed %+.2f%% with the transfers' variation, %+.2f%% "
                "without\n", with, without);
    cr_assert(fabs(with) + 0.5 < fabs(without), "%+.2f%% with, %+.2f%% without", with, without);
    tk_result_free(&r);
}
