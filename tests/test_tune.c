/* test_tune.c: pprof-tune as a user runs it, on runs captured for real (pprof-run + libpprof.so
 * around pptrain's sim backend, whose sleeps follow a cost file with exact timing): the whole
 * loop (--auto) ends at the best partition's simulated step; the model predicts the run's own
 * step; the plan it writes runs under pptrain and --verify checks it; memory limits are kept;
 * --advise recovers the linear micro-batch fit; bad input is exit 2 with a message. Also the
 * library pieces: the tuning driver (analyzer/pp_tune.h: the search and its printout, plans
 * checked against runs, the --auto loop over a replayed job) and the advice (pp_advise.h: the
 * fit, the Megatron-LM and DeepSpeed forms). Without libpprof.so (no NVTX headers) the tests
 * that capture runs report themselves skipped. */
#define _GNU_SOURCE /* setenv */
#include "pp_advise.h"
#include "pp_analyzer.h"
#include "pp_extract.h"
#include "pp_plan.h"
#include "pp_sim.h"
#include "pp_tune.h"

#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
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
#define PPTUNE PP_BUILD_DIR "/tools/pprof-tune"
#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"
#define LIBPPROF PP_BUILD_DIR "/profiler/libpprof.so"


static void setup(void) { tk_dir_create("pp_tune"); }

TestSuite(tune, .init = setup, .fini = tk_dir_remove, .timeout = 240);

static void need_capture(void)
{
    if (!tk_exists(LIBPPROF))
        cr_skip_test("libpprof.so not built (no NVTX headers): no run to tune");
}

/* A GPT-like cost file: a small embedding, `blocks` transformer blocks of fwd_us / 2 fwd_us,
 * and an LM head that costs `head_x` blocks. Each block holds 8 MB of parameters and hands on a
 * 1 MiB activation (times `scale`, the micro-batch size the file stands for); times are
 * a + c x scale with a = 2/5 and c = 3/5 of the block's time at scale 1. */
static void write_gpt_costs(const char *path, int blocks, double fwd_us, double head_x,
                            int scale)
{
    char *buf = malloc(1 << 16);
    cr_assert_not_null(buf);
    size_t len = 0;
    /* at scale b the time is t1 * (0.4 + 0.6 * b): 0.4 per micro-batch, 0.6 per sample */
    double k = 0.4 + 0.6 * scale;
    unsigned long long act = 1048576ull * (unsigned long long)scale;
    len += (size_t)snprintf(buf + len, 65536 - len,
                            "{\"layers\": [{\"name\": \"embedding\", \"fwd_us\": %.3f, "
                            "\"bwd_us\": %.3f, \"activation_bytes\": %llu, "
                            "\"param_bytes\": 4000000}",
                            0.2 * fwd_us * k, 0.4 * fwd_us * k, act);
    for (int i = 0; i < blocks; i++)
        len += (size_t)snprintf(buf + len, 65536 - len,
                                ", {\"name\": \"block%d\", \"fwd_us\": %.3f, \"bwd_us\": %.3f, "
                                "\"activation_bytes\": %llu, \"param_bytes\": 8000000}",
                                i, fwd_us * k, 2 * fwd_us * k, act);
    snprintf(buf + len, 65536 - len,
             ", {\"name\": \"head\", \"fwd_us\": %.3f, \"bwd_us\": %.3f, "
             "\"activation_bytes\": 0, \"param_bytes\": 4000000}], "
             "\"p2p_GBps\": 10, \"p2p_latency_us\": 20, \"optimizer_us\": 300}\n",
             head_x * fwd_us * k, 2 * head_x * fwd_us * k);
    tk_write_text(path, buf);
    free(buf);
}

/* The steps of a capture whose prediction a test judges against its measurement: 9 analyzed
 * (the first is warm-up), so that the model fits its per-step parts, and the busy times bound the
 * ops' own variation (docs/sim-dist.md; with fewer than 8 nothing does). With 3 analyzed steps,
 * under ASan beside 6 CPU hogs, one capture's extracted costs put a plan's noise-free step 10%
 * above its run; with 9, five such pairs (beside 2 or 6 hogs) were within 0.94%. */
#define JUDGED_STEPS "10"

/* Captures pptrain's sim backend on `costs` into tk_dir/name. `layout` is "--stages" with "4" or
 * "--boundaries" with a list, or "--plan" with a file. */
static const char *capture(const char *name, const char *costs, const char *flag,
                           const char *value, const char *M, const char *batch, const char *steps)
{
    const char *dir = tk_path(name);
    const char *args[32] = {"-q", "-o", dir, "--", PPTRAIN, "--backend", "sim", "--costs",
                            costs, flag, value, "--steps", steps, "-q"};
    int n = 14;
    if (M) {
        args[n++] = "--microbatches";
        args[n++] = M;
        args[n++] = "--schedule";
        args[n++] = "1f1b";
    }
    if (batch) {
        args[n++] = "--batch";
        args[n++] = batch;
    }
    args[n] = NULL;
    tk_result r = tk_run(PPRUN, args, NULL);
    cr_assert_eq(r.code, 0, "pprof-run failed (%d): %s", r.code, r.err);
    tk_result_free(&r);
    return dir;
}

/* The fastest analyzed step of a run directory, in ms. On the sim backend a disturbance
 * (another process taking a core) can only make a step later than its deadlines, never
 * earlier, so the fastest step is the least disturbed measurement of what a layout costs: the
 * timing assertions judge it, not a median over few steps that a busy machine can move. */
/* The median step of a run: the step time is the period between step starts, so a late start
 * lengthens one step and shortens the next; the fastest step is then no longer the least
 * disturbed one on a busy machine, the median is. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median_step_ms(const char *dir)
{
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s: %s", dir, pp_error_message());
    cr_assert_gt(a->n_steps, 0u, "%s", dir);
    double v[64];
    size_t n = a->n_steps < 64 ? a->n_steps : 64;
    for (size_t i = 0; i < n; i++)
        v[i] = a->steps[i].step_ns;
    pp_analysis_free(a);
    qsort(v, n, sizeof v[0], cmp_double);
    double m = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    return m * 1e-6;
}

/* The number after `key` in text (e.g. key "error "), NAN when absent. */
static double number_after(const char *text, const char *key)
{
    const char *p = text ? strstr(text, key) : NULL;
    if (!p)
        return NAN;
    return strtod(p + strlen(key), NULL);
}

/* ---------------------------------------------------------------------------------------- */

/* The must-show: from the even split of a GPT-like model whose LM head costs about five
 * blocks, the whole loop ends at a measured step within 3% of the best partition's simulated
 * step, and faster than the even split. */
Test(tune, auto_loop_reaches_the_best_partition)
{
    need_capture();
    char costs[PATH_MAX]; /* tk_path's buffers rotate: the attempts below outlast one */
    snprintf(costs, sizeof costs, "%s", tk_path("gpt.json"));
    write_gpt_costs(costs, 14, 500, 5, 1);
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_load(costs, &c), PP_OK, "%s", pp_error_message());
    pp_rebalance_opts o = {.kind = PP_SCHED_1F1B, .S = 4, .v = 1, .M = 16, .costs = c};
    pp_rebalance_result best;
    cr_assert_eq(pp_rebalance(&o, &best), PP_OK, "%s", pp_error_message());
    cr_assert(best.exact);

    double best_ms = best.step_ns * 1e-6, even_ms = best.even_step_ns * 1e-6;
    /* a timing judgement (pp_testkit.h, tk_judge): each attempt is a whole loop of its own */
    tk_judge j = TK_JUDGE_INIT;
    char auto_dir[32], path[64];
    tk_result r = {0};
    while (tk_judge_next(&j)) {
        snprintf(auto_dir, sizeof auto_dir, "auto%d", j.attempt);
        const char *args[] = {"--auto", "-o", tk_path(auto_dir), "--", PPTRAIN, "--backend",
                              "sim", "--costs", costs, "--stages", "4", "--microbatches", "16",
                              "--schedule", "1f1b", "--steps", JUDGED_STEPS, "-q", NULL};
        tk_result_free(&r);
        r = tk_run(PPTUNE, args, NULL);
        cr_assert_eq(r.code, 0, "pprof-tune --auto failed (%d): %s%s", r.code, r.out, r.err);
        int it = -1;
        double meas = NAN, speedup = NAN;
        const char *line = strstr(r.out, "best: iteration ");
        cr_assert_not_null(line, "no best line in:\n%s", r.out);
        cr_assert_eq(sscanf(line, "best: iteration %d, %lf ms measured (%lfx", &it, &meas,
                            &speedup),
                     3, "%s", line);
        cr_log_info("auto loop: even split %.3f ms simulated, best partition %.3f ms simulated; "
                    "measured %.3f ms at iteration %d, %.3fx over iteration 0\n%s",
                    even_ms, best_ms, meas, it, speedup, r.out);
        cr_assert(it >= 1, "the loop kept the starting layout:\n%s", r.out);
        snprintf(path, sizeof path, "%s/iter%d", auto_dir, it);
        double median = median_step_ms(tk_path(path));
        cr_log_info("best iteration's median step %.3f ms", median);
        tk_judge_that(&j, fabs(median - best_ms) <= 0.03 * best_ms,
                      "median step %.3f ms of iteration %d, the best partition simulates at "
                      "%.3f ms:\n%s",
                      median, it, best_ms, r.out);
        tk_judge_that(&j, meas < even_ms,
                      "measured %.3f ms is not faster than the even split's %.3f ms", meas,
                      even_ms);
        tk_judge_that(&j, speedup > 1.2, "speedup %.3f:\n%s", speedup, r.out);
    }
    cr_assert(!j.missed, "%s", j.log);
    /* the best plan is the rebalancer's partition */
    pp_plan plan;
    snprintf(path, sizeof path, "%s/best-plan.json", auto_dir);
    cr_assert_eq(pp_plan_load(tk_path(path), &plan), PP_OK, "%s", pp_error_message());
    double plan_sim = NAN;
    pp_sim_result sr;
    cr_assert_eq(pp_sim_file(PP_SCHED_1F1B, &plan.partition, 16, c, NULL, &sr), PP_OK);
    plan_sim = sr.step_ns;
    pp_sim_result_free(&sr);
    cr_assert(plan_sim <= best.step_ns * 1.005, "best plan simulates at %.3f ms, optimum %.3f ms",
              plan_sim * 1e-6, best_ms);
    snprintf(path, sizeof path, "%s/iter0/manifest.json", auto_dir);
    cr_assert(tk_exists(tk_path(path)));
    snprintf(path, sizeof path, "%s/plan1.json", auto_dir);
    cr_assert(tk_exists(tk_path(path)));
    cr_assert(strstr(r.out, "iter") && strstr(r.out, "speedup"), "no iteration table");
    pp_plan_free(&plan);
    pp_rebalance_result_free(&best);
    pp_costs_destroy(c);
    tk_result_free(&r);
}

/* The model's self-check on a captured run, and a plan that pptrain accepts. */
Test(tune, predicts_the_current_layout_and_writes_a_runnable_plan)
{
    need_capture();
    char costs[PATH_MAX]; /* tk_path's buffers rotate: the attempts below outlast one */
    snprintf(costs, sizeof costs, "%s", tk_path("gpt.json"));
    write_gpt_costs(costs, 14, 500, 5, 1);
    /* a timing judgement (pp_testkit.h, tk_judge) */
    tk_judge j = TK_JUDGE_INIT;
    char name[16];
    tk_result r = {0};
    while (tk_judge_next(&j)) {
        snprintf(name, sizeof name, "r%d", j.attempt);
        const char *dir = capture(name, costs, "--stages", "4", "16", NULL, JUDGED_STEPS);
        const char *args[] = {dir, "-o", tk_path("plan.json"), "--formula", "--export-costs",
                              tk_path("exported.json"), NULL};
        tk_result_free(&r);
        r = tk_run(PPTUNE, args, NULL);
        cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
        double err = number_after(strstr(r.out, "self-check"), "(error ");
        cr_log_info("self-check on the even split: error %+.3f%%\n", err);
        tk_judge_that(&j, fabs(err) < 2.0, "model error %.3f%%:\n%s", err, r.out);
        pp_costs *ex = NULL;
        cr_assert_eq(pp_costs_load(tk_path("exported.json"), &ex), PP_OK, "%s",
                     pp_error_message());
        cr_assert_eq(ex->n_layers, 16);
        tk_judge_that(&j, fabs(ex->layers[15].fwd_us - 2500) < 50, "head fwd %.1f us",
                      ex->layers[15].fwd_us);
        pp_costs_destroy(ex);
    }
    cr_assert(!j.missed, "%s", j.log);
    cr_assert(strstr(r.out, "Megatron-LM:  --pipeline-model-parallel-layout \"E"), "%s", r.out);
    cr_assert(strstr(r.out, "DeepSpeed:    PipelineModule parts = [0, "), "%s", r.out);
    cr_assert(strstr(r.out, "lower bound") && strstr(r.out, "memory(stage) = params + grads"),
              "--formula terms missing:\n%s", r.out);

    pp_plan plan;
    cr_assert_eq(pp_plan_load(tk_path("plan.json"), &plan), PP_OK, "%s", pp_error_message());
    cr_assert_eq(plan.partition.S, 4);
    cr_assert_eq(plan.microbatches, 16);
    cr_assert_str_eq(plan.schedule, "1f1b");
    cr_assert(plan.predicted_step_ms > 0 && strstr(plan.baseline, name), "%s", plan.baseline);
    pp_plan_free(&plan);
    const char *targs[] = {"--backend", "sim", "--costs", costs, "--plan", tk_path("plan.json"),
                           "--steps", "2", "-q", NULL};
    tk_result t = tk_run(PPTRAIN, targs, NULL);
    cr_assert_eq(t.code, 0, "pptrain refused the plan: %s", t.err);
    tk_result_free(&t);
    tk_result_free(&r);
}

/* A GPT-like cost file at `path` (tk_path's buffers rotate: the caller's copy outlasts them)
 * with `set` applied to it before it is written. */
static void write_gpt_costs_head(char *path, size_t cap, const char *name, double head_x,
                                 void (*set)(pp_costs *c))
{
    snprintf(path, cap, "%s", tk_path(name));
    write_gpt_costs(path, 14, 500, head_x, 1);
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_load(path, &c), PP_OK, "%s", pp_error_message());
    set(c);
    cr_assert_eq(pp_costs_write(c, path), PP_OK, "%s", pp_error_message());
    pp_costs_destroy(c);
}

static void write_gpt_costs_with(char *path, size_t cap, const char *name,
                                 void (*set)(pp_costs *c))
{
    write_gpt_costs_head(path, cap, name, 5, set);
}

/* One judged attempt of a term's round trip: a 4-stage sim-backend capture of `costs`,
 * pprof-tune --formula --export-costs on it; the self-check within 2% (judged), the formula
 * naming the term (`shown`), and the exported costs loaded (the caller judges its term). */
static pp_costs *round_trip(tk_judge *j, const char *costs, const char *tag, const char *shown)
{
    char name[16], out[32];
    snprintf(name, sizeof name, "%s%d", tag, j->attempt);
    snprintf(out, sizeof out, "%s_out.json", tag);
    const char *dir = capture(name, costs, "--stages", "4", "16", NULL, JUDGED_STEPS);
    const char *args[] = {dir, "--formula", "--export-costs", tk_path(out), NULL};
    tk_result r = tk_run(PPTUNE, args, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    double err = number_after(strstr(r.out, "self-check"), "(error ");
    cr_log_info("%s: self-check error %+.3f%%\n", tag, err);
    tk_judge_that(j, fabs(err) < 2.0, "model error %.3f%%:\n%s", err, r.out);
    cr_assert(strstr(r.out, shown), "--formula shows no '%s':\n%s", shown, r.out);
    tk_result_free(&r);
    pp_costs *ex = NULL;
    cr_assert_eq(pp_costs_load(tk_path(out), &ex), PP_OK, "%s", pp_error_message());
    return ex;
}

static void set_sends(pp_costs *c)
{
    c->send_act_us = 200;
    c->send_grad_us = 400;
}

/* Judged round trips (round_trip) of a per-message term, its two kinds read back by `get`
 * (pp_costs_send_us, pp_costs_recv_us) within `tol` us of `want`: a range starts and ends as
 * late as the sleeps around it wake, and the median is the cost. */
static void judge_per_message(const char *costs, const char *tag, const char *shown,
                              double (*get)(const pp_costs *, int), const char *const key[2],
                              const double want[2], double tol)
{
    tk_judge j = TK_JUDGE_INIT; /* a timing judgement (pp_testkit.h, tk_judge) */
    while (tk_judge_next(&j)) {
        pp_costs *ex = round_trip(&j, costs, tag, shown);
        cr_log_info("extracted %s: %.1f us (activations), %.1f us (gradients)\n", tag,
                    get(ex, 0), get(ex, 1));
        for (int g = 0; g < 2; g++)
            tk_judge_that(&j, fabs(get(ex, g) - want[g]) < tol, "%s %.1f, want %.0f", key[g],
                          get(ex, g), want[g]);
        pp_costs_destroy(ex);
    }
    cr_assert(!j.missed, "%s", j.log);
}

/* The senders' own time (docs/cost-file.md send_act_us, send_grad_us): the sim backend sleeps
 * through it inside each send's range, the extraction reads it back from those ranges, and the
 * model's self-check, which charges it on every sender, stays within its 2%. */
Test(tune, the_senders_time_in_each_send_is_read_back_and_predicted)
{
    need_capture();
    char costs[PATH_MAX];
    write_gpt_costs_with(costs, sizeof costs, "gpt_send.json", set_sends);
    static const char *const key[2] = {"send_act_us", "send_grad_us"};
    judge_per_message(costs, "send", "each send on its sender = ", pp_costs_send_us, key,
                      (const double[2]){200, 400}, 30);
}

static void set_receives(pp_costs *c)
{
    c->recv_act_us = 300;
    c->recv_grad_us = 600;
}

/* The receivers' own time (docs/cost-file.md recv_act_us, recv_grad_us): the sim backend sleeps
 * through it inside each receive's range before the receive waits, the analysis reads it back
 * from the receives that began after their message was handed over, and the model's self-check,
 * which charges it on every receive whose message is there, stays within its 2%. A light head
 * (a fifth of a block), so that the middle stages are the slow ones: stage 2 comes to its
 * gradients' receives after stage 3 sent them (with the usual heavy head every stage waits for
 * its gradients, and no receive of them shows the receiver's time). */
Test(tune, the_receivers_time_in_each_receive_is_read_back_and_predicted)
{
    need_capture();
    char costs[PATH_MAX];
    write_gpt_costs_head(costs, sizeof costs, "gpt_recv.json", 0.2, set_receives);
    static const char *const key[2] = {"recv_act_us", "recv_grad_us"};
    judge_per_message(costs, "recv", "each receive on its receiver = ", pp_costs_recv_us, key,
                      (const double[2]){300, 600}, 45);
}

static void set_gap(pp_costs *c) { c->op_gap_us = 500; }

/* The schedule's own time between ops (docs/cost-file.md op_gap_us): the sim backend sleeps it
 * after each compute op outside the op's range, as a torch schedule spends its Python; the
 * extraction reads it back from the stages' time in no op (written when >= 5% of an op: 0.5 ms
 * against ops of 1-3 ms), and the model's self-check, which charges it after every compute op,
 * stays within 2% (measured +0.06%, 497 us read back; without the term a 2-stage run with 1 ms
 * between ops of 1 and 2 ms read +52.7%). */
Test(tune, the_time_between_ops_is_read_back_and_predicted)
{
    need_capture();
    char costs[PATH_MAX];
    write_gpt_costs_with(costs, sizeof costs, "gpt_gap.json", set_gap);
    tk_judge j = TK_JUDGE_INIT;
    while (tk_judge_next(&j)) {
        pp_costs *ex = round_trip(&j, costs, "gap", "between ops = ");
        cr_log_info("extracted gap: %.1f us\n", ex->op_gap_us);
        tk_judge_that(&j, fabs(ex->op_gap_us - 500) < 50, "op_gap_us %.1f, want 500",
                      ex->op_gap_us);
        pp_costs_destroy(ex);
    }
    cr_assert(!j.missed, "%s", j.log);
}

/* The step's distribution beside the noise-free step (docs/sim-dist.md): rows for both, the
 * run's own variation predicting its measured median, and --jitter's noise lifting the median
 * above the noise-free step (a max over noisy paths). */
Test(tune, predicts_the_median_and_p95_with_the_runs_or_a_given_variation)
{
    need_capture();
    char costs[PATH_MAX]; /* tk_path's buffers rotate: the attempts below outlast one */
    snprintf(costs, sizeof costs, "%s", tk_path("gpt.json"));
    write_gpt_costs(costs, 14, 500, 5, 1);
    /* a timing judgement (pp_testkit.h, tk_judge) */
    tk_judge j = TK_JUDGE_INIT;
    const char *run = NULL;
    double free_ms = NAN, med_ms = NAN, meas_ms = NAN;
    while (tk_judge_next(&j)) {
        char name[16];
        snprintf(name, sizeof name, "dist%d", j.attempt);
        run = capture(name, costs, "--stages", "4", "16", NULL, JUDGED_STEPS);
        const char *args[] = {run, "-v", NULL};
        tk_result r = tk_run(PPTUNE, args, NULL);
        cr_assert_eq(r.code, 0, "%s", r.err);
        free_ms = number_after(r.out, "noise-free ms");
        med_ms = number_after(r.out, "step median ms");
        meas_ms = number_after(strstr(r.out, "step median ms"), "(measured ");
        cr_assert(strstr(r.out, "step p95 ms") && strstr(r.out, "replays"), "%s", r.out);
        cr_assert(strstr(r.err, "per step (shared by a step's ops:") &&
                      strstr(r.err, "over 9 steps, the rest per op"),
                  "%s", r.err);
        /* the sim backend makes a late wake-up after a receive up in the next op: the
         * transfers' measured variation does not move its step and stays out of the model */
        cr_assert(!strstr(r.err, "transfers vary as measured"), "%s", r.err);
        tk_judge_that(&j, med_ms > 0 && fabs(med_ms - meas_ms) < 0.03 * meas_ms,
                      "median %.3f, measured %.3f:\n%s", med_ms, meas_ms, r.out);
        tk_result_free(&r);
    }
    cr_assert(!j.missed, "%s", j.log);
    tk_result r;
    const char *jargs[] = {run, "-q", "--jitter", "lognormal:0.2", NULL};
    r = tk_run(PPTUNE, jargs, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    double jfree_ms = number_after(r.out, "noise-free ms");
    double jmed_ms = number_after(r.out, "step median ms");
    cr_log_info("noise-free %.3f ms; median: the run's variation %.3f, lognormal:0.2 %.3f "
                "(measured %.3f)\n", free_ms, med_ms, jmed_ms, meas_ms);
    cr_assert_eq(jfree_ms, free_ms);
    cr_assert_gt(jmed_ms, 1.01 * jfree_ms, "%s", r.out);
    tk_result_free(&r);
}

/* The run of a plan: captures `costs` as the even split of 4 stages (tk_dir/before<attempt>),
 * tunes it into tk_dir/plan.json, captures the plan on `rerun_costs` (tk_dir/after<attempt>), and
 * returns pprof-tune --verify's result on the two (the caller frees it). `jitter` (NULL: the
 * run's own variation) is pprof-tune's --jitter for the plan and the verification. */
static tk_result verify_rerun(const char *costs, const char *rerun_costs, int attempt,
                              const char *jitter, const char **before, const char **after)
{
    char name[16];
    snprintf(name, sizeof name, "before%d", attempt);
    *before = capture(name, costs, "--stages", "4", "16", NULL, JUDGED_STEPS);
    const char *args[] = {*before, "-o", tk_path("plan.json"), "-q", jitter ? "--jitter" : NULL,
                          jitter, NULL};
    tk_result r = tk_run(PPTUNE, args, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    tk_result_free(&r);
    snprintf(name, sizeof name, "after%d", attempt);
    *after = capture(name, rerun_costs, "--plan", tk_path("plan.json"), NULL, NULL, JUDGED_STEPS);
    const char *vargs[] = {"--verify", tk_path("plan.json"), *after, "--baseline", *before,
                           jitter ? "--jitter" : NULL, jitter, NULL};
    r = tk_run(PPTUNE, vargs, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    return r;
}

/* --verify: the run of a plan is within 3% of its prediction; a run of another layout is
 * refused with both layouts named; so is a plan for another model. */
Test(tune, verify_checks_the_run_of_a_plan)
{
    need_capture();
    const char *before = NULL, *after = NULL;
    char costs[PATH_MAX]; /* tk_path's buffers rotate: the attempts below outlast one */
    snprintf(costs, sizeof costs, "%s", tk_path("gpt.json"));
    write_gpt_costs(costs, 14, 500, 5, 1);
    /* a timing judgement (pp_testkit.h, tk_judge): each attempt captures both runs again */
    tk_judge j = TK_JUDGE_INIT;
    while (tk_judge_next(&j)) {
        tk_result r = verify_rerun(costs, costs, j.attempt, NULL, &before, &after);
        double err = number_after(strstr(r.out, "step median: measured"), "error ");
        double achieved = number_after(r.out, "speedup: achieved ");
        double predicted = number_after(r.out, "x, predicted ");
        cr_log_info("verify: error %+.3f%%, speedup achieved %.3fx, predicted %.3fx\n", err,
                    achieved, predicted);
        cr_assert(isfinite(err) && isfinite(achieved) && isfinite(predicted), "%s", r.out);
        tk_judge_that(&j, predicted > 1.2, "predicted speedup %.3f:\n%s", predicted, r.out);
        /* the plan's predicted median against the run's measured median, like with like */
        pp_plan plan;
        cr_assert_eq(pp_plan_load(tk_path("plan.json"), &plan), PP_OK, "%s",
                     pp_error_message());
        double pred_ms = plan.predicted_median_ms;
        pp_plan_free(&plan);
        double after_ms = median_step_ms(after), before_ms = median_step_ms(before);
        cr_log_info("median steps: before %.3f ms, after %.3f ms, plan predicts %.3f ms\n",
                    before_ms, after_ms, pred_ms);
        /* 3%: the bound the achieved speedup always had against the predicted one (the plan's
         * prediction comes from the first run's costs and variation, measured with that run's
         * own disturbances) */
        tk_judge_that(&j, fabs(after_ms - pred_ms) < 0.03 * pred_ms,
                      "after %.3f ms, predicted %.3f ms (before %.3f ms):\n%s", after_ms,
                      pred_ms, before_ms, r.out);
        tk_judge_that(&j, before_ms / after_ms > 1.2, "speedup %.3f", before_ms / after_ms);
        tk_result_free(&r);
    }
    cr_assert(!j.missed, "%s", j.log);

    const char *wargs[] = {"--verify", tk_path("plan.json"), before, NULL};
    tk_result r = tk_run(PPTUNE, wargs, NULL);
    cr_assert_eq(r.code, 2, "%s", r.out);
    cr_assert(strstr(r.err, "ran boundaries 0,4,8,12,16, the plan says 0,"), "%s", r.err);
    tk_result_free(&r);

    /* a plan made for a model of 6 layers */
    tk_write_text(tk_path("other.json"),
               "{\"version\": 1, \"num_layers\": 6, \"stages\": 4, \"boundaries\": [0, 1, 2, 4, "
               "6], \"schedule\": \"1f1b\", \"microbatches\": 16}\n");
    const char *oargs[] = {"--verify", tk_path("other.json"), after, NULL};
    r = tk_run(PPTUNE, oargs, NULL);
    cr_assert_eq(r.code, 2);
    cr_assert(strstr(r.err, "model of 16 layers") && strstr(r.err, "made for 6"), "%s", r.err);
    tk_result_free(&r);
}

/* The machine's speed against the model's error (docs/sim-dist.md "Speed between runs"): the
 * plan's run finds every layer 8% slower than the run the plan came from (the sim backend on a
 * cost file with the layers' times x 1.08, transfers and optimizer as they were), so the plan's
 * prediction misses by about that much; --verify and --auto measure the layers' compute per
 * micro-batch 8% up, and at that speed the first run's costs predict the measured median.
 * Predicted with --jitter none: the sim backend's step keeps to its deadlines, and what is judged
 * here is the speed, not the ops' variation, which a disturbed capture gets wrong (in a
 * fresh-clone CI whose host was busy, all four attempts of the --auto part predicted the
 * balanced layout 2.8-6.8% above its run at its speed, while their own layouts' self-checks read
 * -0.6 .. +1.2%; docs/sim-dist.md, "Variation that does not move the step"). */
Test(tune, verify_and_auto_tell_the_machines_speed_from_the_models_error)
{
    need_capture();
    const char *before, *after;
    char fast[PATH_MAX], slow[PATH_MAX]; /* tk_path's buffers rotate: the attempts outlast one */
    snprintf(fast, sizeof fast, "%s", tk_path("fast.json"));
    snprintf(slow, sizeof slow, "%s", tk_path("slow.json"));
    write_gpt_costs(fast, 14, 500, 5, 1);
    write_gpt_costs(slow, 14, 540, 5, 1);
    /* timing judgements (pp_testkit.h, tk_judge): --verify's, then --auto's */
    tk_judge j = TK_JUDGE_INIT;
    while (tk_judge_next(&j)) {
        tk_result r = verify_rerun(fast, slow, j.attempt, "none", &before, &after);
        double err = number_after(strstr(r.out, "step median: measured"), "error ");
        const char *sp = strstr(r.out, "speed: the layers' compute per micro-batch took ");
        double speed = number_after(sp, "in the baseline (");
        double adj = number_after(sp ? strstr(sp, "this layout's median") : NULL, "(error ");
        cr_log_info("verify: error %+.2f%%, layers' compute %+.2f%%, error at that speed "
                    "%+.2f%%\n%s", err, speed, adj, r.out);
        tk_judge_that(&j, err > 5, "the plan's error %+.2f%% (the layers ran 8%% slower):\n%s",
                      err, r.out);
        tk_judge_that(&j, fabs(speed - 8) < 1, "layers' compute %+.2f%%, 8%% expected:\n%s",
                      speed, r.out);
        /* 2.5%: the two runs' own disturbances, as in verify_checks_the_run_of_a_plan's 3% */
        tk_judge_that(&j, fabs(adj) < 2.5, "error at the run's speed %+.2f%%:\n%s", adj,
                      r.out);
        tk_result_free(&r);
    }
    cr_assert(!j.missed, "%s", j.log);

    /* --auto: the job runs on the slow cost file whenever it is given a plan */
    char job[3 * PATH_MAX + 256];
    snprintf(job, sizeof job,
             "c='%s'; [ -n \"$PPROF_PLAN\" ] && c='%s'; exec '%s' --backend sim --costs \"$c\" "
             "--stages 4 --microbatches 16 --schedule 1f1b --steps " JUDGED_STEPS " -q",
             fast, slow, PPTRAIN);
    tk_judge ja = TK_JUDGE_INIT;
    char auto_dir[16], index_path[64];
    while (tk_judge_next(&ja)) {
        snprintf(auto_dir, sizeof auto_dir, "auto%d", ja.attempt);
        const char *aargs[] = {"--auto", "-o", tk_path(auto_dir), "--max-iters", "1",
                               "--jitter", "none", "--", "/bin/sh", "-c", job, NULL};
        tk_result r = tk_run(PPTUNE, aargs, NULL);
        cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
        const char *sp = strstr(r.out, "iter 1 speed: the layers' compute per micro-batch took ");
        double speed = number_after(sp, "in iter 0 (");
        double adj = number_after(sp ? strstr(sp, "this layout's median") : NULL, "(error ");
        cr_log_info("auto: layers' compute %+.2f%%, error at that speed %+.2f%%\n%s", speed,
                    adj, r.out);
        tk_judge_that(&ja, fabs(speed - 8) < 1 && fabs(adj) < 2.5,
                      "layers' compute %+.2f%% (8%% expected), error at that speed %+.2f%%:\n%s",
                      speed, adj, r.out);
        tk_result_free(&r);
    }
    cr_assert(!ja.missed, "%s", ja.log);
    snprintf(index_path, sizeof index_path, "%s/index.html", auto_dir);
    char *index = tk_slurp(tk_path(index_path), NULL);
    cr_assert(index && strstr(index, "error at the run's speed") &&
                  strstr(index, "data-key=\"speed_error\""),
              "%s", index ? index : "(no index.html)");
    free(index);
}

/* A run whose machine changed speed for a stretch of its steps measures the mixture of two
 * speeds, and its costs make the next prediction from a mixture too. The sim backend's regime
 * jitter (steps 8-14 of 20 at 1.3x) makes such a run on purpose: --auto finds the two regimes,
 * sets the run aside as iter0-disturbed1 and runs the job again (a job that is slow on its first
 * run only, so the second is steady); --rerun-disturbed 0 keeps the first run and says that its
 * steps fell into two regimes; a job slow every time is run 1 + N times, the last kept.
 *
 * What the 1.3x regime decides is asserted outright: it is far above any disturbance, and the
 * number of reruns --rerun-disturbed allows (once by default) is no timing. What a busy machine
 * can move is judged on the least disturbed of TK_TIMING_ATTEMPTS attempts: a fast step made late
 * can join the slow regime (a CI run of 2026-12-06 read "11 at 28.840 ms, 8 at 36.900 ms" for
 * the 12 and 7 the job asked for), and a steady rerun made unsteady is kept in two regimes. */
Test(tune, auto_runs_an_iteration_again_when_the_machine_changed_speed)
{
    need_capture();
    char costs[PATH_MAX], flag[PATH_MAX], job[3 * PATH_MAX + 512];
    snprintf(costs, sizeof costs, "%s", tk_path("regime.json"));
    snprintf(flag, sizeof flag, "%s", tk_path("ran-once"));
    write_gpt_costs(costs, 6, 400, 2, 1);
    static const struct {
        const char *rerun, *when; /* when: the shell test for a slow run */
        int runs;                 /* iteration 0's runs */
    } k_cases[] = {{NULL, "[ ! -e \"$F\" ]", 2}, {"0", "true", 1}, {"1", "true", 2}};
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        int runs = k_cases[i].runs;
        tk_judge j = TK_JUDGE_INIT;
        while (tk_judge_next(&j)) {
            unlink(flag);
            snprintf(job, sizeof job,
                     "F='%s'; J=lognormal:0.03,seed=5; if %s; then J=$J,regime:8-14:1.3; fi; "
                     "touch \"$F\"; exec '%s' --backend sim --costs '%s' --stages 2 "
                     "--microbatches 4 --schedule 1f1b --steps 20 --sim-jitter \"$J\" -q",
                     flag, k_cases[i].when, PPTRAIN, costs);
            char out[64];
            snprintf(out, sizeof out, "regime%zu-%d", i, j.attempt);
            const char *args[12] = {"--auto", "-o", tk_path(out), "--max-iters", "1"};
            int n = 5;
            if (k_cases[i].rerun) {
                args[n++] = "--rerun-disturbed";
                args[n++] = k_cases[i].rerun;
            }
            args[n++] = "--";
            args[n++] = "/bin/sh";
            args[n++] = "-c";
            args[n++] = job;
            args[n] = NULL;
            tk_result r = tk_run(PPTUNE, args, NULL);
            cr_assert_eq(r.code, 0, "case %zu: %s%s", i, r.out, r.err);
            const char *line = strstr(r.out, "iter 0: run ");
            for (int k = 1; k <= 3; k++) {
                char aside[96];
                snprintf(aside, sizeof aside, "%s/iter0-disturbed%d", out, k);
                cr_expect_eq(tk_exists(tk_path(aside)), k < runs, "case %zu: %s %s", i, aside,
                             k < runs ? "missing" : "there");
            }
            if (runs > 1) {
                char want[128];
                snprintf(want, sizeof want, "iter 0: run %d times; the first run's steps fell "
                         "into two speed regimes (", runs);
                cr_expect(line && strncmp(line, want, strlen(want)) == 0, "case %zu:\n%s", i,
                          r.out);
                cr_expect(strstr(r.err, "set aside as") != NULL, "case %zu:\n%s", i, r.err);
                /* the set-aside run's regimes: 7 slow steps, 12 fast (the first is warm-up) */
                tk_judge_that(&j, line && strstr(line, "(12 at ") && strstr(line, ", 7 at "),
                              "case %zu: not 12 fast steps and 7 slow:\n%s", i, r.out);
            } else {
                cr_expect(line == NULL, "case %zu:\n%s", i, r.out);
            }
            /* the run kept: steady after a rerun (case 0), two regimes where it was slow (1, 2) */
            int kept_regimes = strstr(r.out, "iter 0: two speed regimes in its steps") != NULL;
            int rerun_regimes = strstr(r.out, ", in two regimes too") != NULL;
            if (i > 0) {
                cr_expect(kept_regimes, "case %zu:\n%s", i, r.out);
                cr_expect_eq(rerun_regimes, i == 2, "case %zu:\n%s", i, r.out);
            } else {
                tk_judge_that(&j, !kept_regimes && !rerun_regimes,
                              "case %zu: the rerun not steady:\n%s", i, r.out);
            }
            tk_result_free(&r);
        }
        cr_assert(!j.missed, "case %zu: %s", i, j.log);
    }
}

/* A memory limit that rules out the unconstrained optimum: the plan fits it; an impossible one is
 * exit 2 with the rebalancer's message. */
Test(tune, memory_limit_is_kept)
{
    need_capture();
    const char *costs = tk_path("gpt.json");
    write_gpt_costs(costs, 14, 500, 5, 1);
    const char *dir = capture("r0", costs, "--stages", "4", "16", NULL, "4");
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_load(costs, &c), PP_OK);
    pp_rebalance_opts o = {.kind = PP_SCHED_1F1B, .S = 4, .v = 1, .M = 16, .costs = c};
    pp_rebalance_result free_r;
    cr_assert_eq(pp_rebalance(&o, &free_r), PP_OK);
    uint64_t peak = 0;
    for (int s = 0; s < 4; s++)
        peak = free_r.stage_memory_bytes[s] > peak ? free_r.stage_memory_bytes[s] : peak;
    uint64_t limit = peak - 1;
    char lim[32];
    snprintf(lim, sizeof lim, "%llu", (unsigned long long)limit);
    const char *args[] = {dir, "--memory-limit", lim, "-o", tk_path("plan.json"), "--formula",
                          NULL};
    tk_result r = tk_run(PPTUNE, args, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    pp_plan plan;
    cr_assert_eq(pp_plan_load(tk_path("plan.json"), &plan), PP_OK);
    cr_assert_eq(plan.memory_limit_bytes, limit);
    uint64_t mem[4];
    cr_assert_eq(pp_advise_stage_memory(c, &plan.partition, PP_SCHED_1F1B, 16, NULL, mem, NULL), PP_OK);
    for (int s = 0; s < 4; s++)
        cr_assert(mem[s] <= limit, "stage %d holds %llu bytes > limit %llu", s,
                  (unsigned long long)mem[s], (unsigned long long)limit);
    char fb[64], pb[64];
    pp_partition_format(&free_r.partition, fb, sizeof fb);
    pp_partition_format(&plan.partition, pb, sizeof pb);
    cr_assert_str_neq(fb, pb, "the limit did not change the partition");
    cr_log_info("memory limit %llu bytes: unconstrained %s, constrained %s\n",
                (unsigned long long)limit, fb, pb);
    pp_plan_free(&plan);
    tk_result_free(&r);

    /* 3 analyzed steps: the extraction notes say the variation is all per op, and why */
    const char *vargs[] = {dir, "-v", NULL};
    r = tk_run(PPTUNE, vargs, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.err, "all of it per op: 3 analyzed step(s), fewer than 8"), "%s", r.err);
    tk_result_free(&r);

    const char *bargs[] = {dir, "--memory-limit", "1M", NULL};
    r = tk_run(PPTUNE, bargs, NULL);
    cr_assert_eq(r.code, 2, "%s", r.out);
    cr_assert(strstr(r.err, "memory"), "%s", r.err);
    tk_result_free(&r);
    pp_rebalance_result_free(&free_r);
    pp_costs_destroy(c);
}

/* A cost file with the memory keys: an embedding, `blocks` blocks of 500 / 1000 us that keep
 * 12 MiB per micro-batch for their backward (1 MiB, their input, when recomputed) and hold 8 MB
 * of parameters, and a head. */
static void write_memory_costs(const char *path, int blocks)
{
    char *buf = malloc(1 << 16);
    cr_assert_not_null(buf);
    size_t len = (size_t)snprintf(buf, 65536,
                                  "{\"layers\": [{\"name\": \"embedding\", \"fwd_us\": 100, "
                                  "\"bwd_us\": 200, \"activation_bytes\": 1048576, "
                                  "\"param_bytes\": 4000000, \"kept_bytes\": 1048576, "
                                  "\"input_bytes\": 0}");
    for (int i = 0; i < blocks; i++)
        len += (size_t)snprintf(buf + len, 65536 - len,
                                ", {\"name\": \"block%d\", \"fwd_us\": 500, \"bwd_us\": 1000, "
                                "\"activation_bytes\": 1048576, \"param_bytes\": 8000000, "
                                "\"kept_bytes\": 12582912, \"input_bytes\": 1048576}",
                                i);
    snprintf(buf + len, 65536 - len,
             ", {\"name\": \"head\", \"fwd_us\": 600, \"bwd_us\": 1200, \"activation_bytes\": 0, "
             "\"param_bytes\": 4000000, \"kept_bytes\": 2097152, \"input_bytes\": 1048576}], "
             "\"p2p_GBps\": 10, \"p2p_latency_us\": 20, \"optimizer_us\": 300}\n");
    tk_write_text(path, buf);
    free(buf);
}

static uint64_t max_u64(const uint64_t *v, int n)
{
    uint64_t m = 0;
    for (int i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* The largest stage peak the job's memory counters measured in run directory `dir`, with the
 * number of stages that reported. */
static uint64_t measured_peak(const char *dir, int *stages)
{
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s: %s", dir, pp_error_message());
    uint64_t m = 0;
    for (size_t i = 0; i < a->n_mem_stages; i++)
        if (a->mem_stages[i].total_peak_bytes > (double)m)
            m = (uint64_t)a->mem_stages[i].total_peak_bytes;
    *stages = (int)a->n_mem_stages;
    pp_analysis_free(a);
    return m;
}

/* Issue 17's memory-bound case (sim backend, 1F1B, 4 stages, 8 micro-batches, 150 MiB per
 * stage): the even split and the time-optimal split both break the limit; the best partition
 * meeting it without recomputation is slower than the best with it, which recomputes one stage
 * and not all; --auto runs that plan, the run stays under the limit by the job's own counters,
 * and its median step lands within 5% of the plan's predicted median. */
Test(tune, memory_bound_auto_recomputes_where_it_pays)
{
    need_capture();
    const char *costs = tk_path("mem.json");
    write_memory_costs(costs, 8);
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_load(costs, &c), PP_OK, "%s", pp_error_message());
    enum { S = 4, M = 8 };
    uint64_t limit = 150ull << 20, mem[S];
    pp_rebalance_opts o = {.kind = PP_SCHED_1F1B, .S = S, .v = 1, .M = M, .costs = c};
    pp_rebalance_result fast, none, rc;
    cr_assert_eq(pp_rebalance(&o, &fast), PP_OK, "%s", pp_error_message());
    cr_assert_gt(max_u64(fast.stage_memory_bytes, S), limit, "the time-optimal split fits");
    pp_partition even;
    cr_assert_eq(pp_partition_even(c->n_layers, S, 1, &even), PP_OK);
    cr_assert_eq(pp_advise_stage_memory(c, &even, PP_SCHED_1F1B, M, NULL, mem, NULL), PP_OK);
    cr_assert_gt(max_u64(mem, S), limit, "the even split fits");
    o.memory_limit_bytes = limit;
    cr_assert_eq(pp_rebalance(&o, &none), PP_OK, "%s", pp_error_message());
    o.recompute = 1;
    cr_assert_eq(pp_rebalance(&o, &rc), PP_OK, "%s", pp_error_message());
    cr_assert(rc.exact && none.exact);
    cr_assert(rc.recomputed_stages >= 1 && rc.recomputed_stages < S, "%d stages recomputed",
              rc.recomputed_stages);
    cr_assert_lt(rc.step_ns, none.step_ns * 0.95, "recomputation does not pay: %.3f vs %.3f ms",
                 rc.step_ns * 1e-6, none.step_ns * 1e-6);
    cr_log_info("limit 150 MiB: time-optimal %.3f ms (%.1f MiB), best without recomputation "
                "%.3f ms, with it %.3f ms (%d stages)\n",
                fast.step_ns * 1e-6, (double)max_u64(fast.stage_memory_bytes, S) / 1048576,
                none.step_ns * 1e-6, rc.step_ns * 1e-6, rc.recomputed_stages);

    /* the plan and its memory are exact; its median is a timing judgement (tk_judge) */
    tk_judge j = TK_JUDGE_INIT;
    char auto_dir[32], dir[64];
    tk_result r = {0};
    pp_plan plan = {0};
    while (tk_judge_next(&j)) {
        snprintf(auto_dir, sizeof auto_dir, "auto%d", j.attempt);
        const char *args[] = {"--auto", "-o", tk_path(auto_dir), "--memory-limit", "150M",
                              "--max-iters", "2", "--", PPTRAIN, "--backend", "sim", "--costs",
                              costs, "--stages", "4", "--microbatches", "8", "--schedule",
                              "1f1b", "--steps", "5", "-q", NULL};
        tk_result_free(&r);
        r = tk_run(PPTUNE, args, NULL);
        cr_assert_eq(r.code, 0, "pprof-tune --auto failed (%d): %s%s", r.code, r.out, r.err);
        int it = -1;
        const char *line = strstr(r.out, "best: iteration ");
        cr_assert(line && sscanf(line, "best: iteration %d", &it) == 1, "%s", r.out);
        cr_assert_geq(it, 1, "the loop kept the starting layout:\n%s", r.out);
        cr_assert(strstr(r.out, "iter 0: recompute none;") && strstr(r.out, "OVER the limit"),
                  "%s", r.out);
        snprintf(dir, sizeof dir, "%s/best-plan.json", auto_dir);
        pp_plan_free(&plan);
        cr_assert_eq(pp_plan_load(tk_path(dir), &plan), PP_OK, "%s", pp_error_message());
        char want[256], got[64], bnd[64];
        cr_assert_eq(pp_recompute_format(&rc.partition, rc.recompute, want, sizeof want), PP_OK);
        cr_assert_str_eq(plan.recompute, want);
        pp_partition_format(&plan.partition, got, sizeof got);
        pp_partition_format(&rc.partition, bnd, sizeof bnd);
        cr_assert_str_eq(got, bnd);
        snprintf(dir, sizeof dir, "%s/iter%d", auto_dir, it);
        int stages = 0;
        uint64_t peak = measured_peak(tk_path(dir), &stages);
        cr_assert_eq(stages, S, "memory counters of %d stages", stages);
        cr_assert_leq(peak, limit, "measured peak %llu bytes over the limit",
                      (unsigned long long)peak);
        double median = median_step_ms(tk_path(dir));
        cr_log_info("iteration %d (recompute %s): median %.3f ms, predicted %.3f ms, peak %.1f "
                    "MiB\n",
                    it, plan.recompute, median, plan.predicted_median_ms,
                    (double)peak / 1048576);
        double want_ms = plan.predicted_median_ms;
        tk_judge_that(&j, fabs(median - want_ms) <= 0.05 * want_ms,
                      "median %.3f ms, predicted %.3f ms:\n%s", median, want_ms, r.out);
    }
    cr_assert(!j.missed, "%s", j.log);
    pp_plan_free(&plan);
    pp_partition_free(&even);
    pp_rebalance_result_free(&fast);
    pp_rebalance_result_free(&none);
    pp_rebalance_result_free(&rc);
    pp_costs_destroy(c);
    tk_result_free(&r);
}

/* The same loop on the cpu backend, whose allocations are real and deterministic: GPipe keeps
 * all 8 micro-batches' activations (over 12 MiB on both stages), and the re-run with the plan's
 * recomputation stays under 12 MiB per stage by the trainer's own accounting. */
Test(tune, memory_bound_auto_on_the_cpu_backend_stays_under_the_limit)
{
    need_capture();
    const char *args[] = {"--auto", "-o", tk_path("auto"), "--memory-limit", "12M",
                          "--max-iters", "1", "--", PPTRAIN, "--backend", "cpu", "--stages", "2",
                          "--schedule", "gpipe", "--layers", "6", "--d-model", "64", "--seq",
                          "32", "--batch", "16", "--microbatches", "8", "--steps", "4",
                          "--warmup", "1", "-q", NULL};
    tk_result r = tk_run(PPTUNE, args, NULL);
    cr_assert_eq(r.code, 0, "pprof-tune --auto failed (%d): %s%s", r.code, r.out, r.err);
    uint64_t limit = 12ull << 20;
    int stages = 0;
    uint64_t before = measured_peak(tk_path("auto/iter0"), &stages);
    cr_assert_eq(stages, 2);
    cr_assert_gt(before, limit, "the job as it is fits: %llu bytes", (unsigned long long)before);
    pp_plan plan;
    cr_assert_eq(pp_plan_load(tk_path("auto/plan1.json"), &plan), PP_OK, "%s",
                 pp_error_message());
    cr_assert(plan.recompute[0] && strcmp(plan.recompute, "none") != 0, "%s", r.out);
    uint64_t after = measured_peak(tk_path("auto/iter1"), &stages);
    cr_assert_eq(stages, 2);
    cr_log_info("cpu backend: peak %.2f MiB as it is, %.2f MiB with recompute %s (limit 12 MiB)\n",
                (double)before / 1048576, (double)after / 1048576, plan.recompute);
    cr_assert_leq(after, limit, "%llu bytes with the plan:\n%s", (unsigned long long)after, r.out);
    cr_assert(strstr(r.out, "best: iteration 1"), "%s", r.out);
    pp_plan_free(&plan);
    tk_result_free(&r);
}

/* --advise over runs at micro-batch sizes 1 and 2 recovers t(b) = a + c b and ranks every M
 * dividing the global batch. */
Test(tune, advise_fits_the_microbatch_size)
{
    need_capture();
    write_gpt_costs(tk_path("b1.json"), 14, 500, 5, 1);
    write_gpt_costs(tk_path("b2.json"), 14, 500, 5, 2);
    const char *r1 = capture("b1", tk_path("b1.json"), "--stages", "4", "16", "16", "3");
    const char *r2 = capture("b2", tk_path("b2.json"), "--stages", "4", "8", "16", "3");
    const char *args[] = {"--advise", r1, r2, "--microbatch-sizes", "1,2", "--global-batch",
                          "16", "-o", tk_path("plan.json"), "-v", NULL};
    tk_result r = tk_run(PPTUNE, args, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    /* blocks: fwd 500 x (0.4 + 0.6 b) us: a = 0.200 ms, c = 0.300 ms; bwd twice that. The sim
     * backend's layer ranges split an op's time between its layers only up to its catch-up
     * to deadlines (a layer right after a wait absorbs tens of microseconds), while each op's
     * total is exact: so the check is on the mean over the 14 blocks (-v lists every layer). */
    double sum[4] = {0};
    int n_blocks = 0;
    for (const char *row = strstr(r.out, " block"); row; row = strstr(row + 1, " block")) {
        int idx;
        double fa, fc, fres, ba, bc;
        if (sscanf(row, " block%d %lf %lf %lf%% %lf %lf", &idx, &fa, &fc, &fres, &ba, &bc) != 6)
            continue;
        sum[0] += fa;
        sum[1] += fc;
        sum[2] += ba;
        sum[3] += bc;
        n_blocks++;
    }
    cr_assert_eq(n_blocks, 14, "%s", r.out);
    for (int k = 0; k < 4; k++)
        sum[k] /= n_blocks;
    cr_log_info("advise fit, mean over blocks: fwd a %.4f c %.4f ms, bwd a %.4f c %.4f ms "
                "(true 0.2, 0.3, 0.4, 0.6)\n",
                sum[0], sum[1], sum[2], sum[3]);
    /* timing: judged in optimised builds (pp_testkit.h TK_TIMING_JUDGED; an ASan run on a slow
     * day of the VM read fwd a 0.176) */
    cr_assert(!TK_TIMING_JUDGED || (fabs(sum[0] - 0.2) < 0.02 && fabs(sum[1] - 0.3) < 0.02),
              "fwd fit %f %f", sum[0], sum[1]);
    cr_assert(!TK_TIMING_JUDGED || (fabs(sum[2] - 0.4) < 0.03 && fabs(sum[3] - 0.6) < 0.03),
              "bwd fit %f %f", sum[2], sum[3]);
    cr_assert(strstr(r.out, "linear in the micro-batch size"), "assumptions not stated");
    /* the ranked table: every M dividing 16, step times non-decreasing */
    const char *t = strstr(r.out, "rank");
    cr_assert_not_null(t);
    int seen_M[17] = {0}, rows = 0;
    double prev = 0;
    for (const char *p = strchr(t, '\n') + 1; *p == ' '; p = strchr(p, '\n') + 1) {
        int rank, M, b, v;
        char sched[32];
        double step;
        if (sscanf(p, " %d %d %d %31s %d %lf", &rank, &M, &b, sched, &v, &step) != 6)
            break;
        cr_assert(M >= 1 && M <= 16 && M * b == 16, "row M %d b %d", M, b);
        cr_assert(step >= prev, "table not ranked at rank %d", rank);
        prev = step;
        seen_M[M] = 1;
        rows++;
    }
    cr_assert(seen_M[1] && seen_M[2] && seen_M[4] && seen_M[8] && seen_M[16], "%s", r.out);
    pp_plan plan;
    cr_assert_eq(pp_plan_load(tk_path("plan.json"), &plan), PP_OK);
    cr_assert_eq(plan.microbatches * plan.microbatch_size, 16);
    cr_log_info("advise: %d ranked rows, best M = %d of %d, %s\n", rows, plan.microbatches,
                plan.microbatch_size, plan.schedule);
    pp_plan_free(&plan);
    tk_result_free(&r);
}

/* Bad flags, missing or unusable directories: exit 2 and a message. */
/* pprof-tune proposes only schedules the job can run: pptrain announces its own in the config
 * mark (schedules=); its sim backend runs ZB-H1 on a cost file without backward halves too (the
 * halving rule, docs/cost-file.md), so `--schedules all` proposes it. A job whose mark leaves a
 * schedule out is not proposed it, and one that announces nothing gets only its own schedule. */
Test(tune, only_schedules_the_job_can_run_are_proposed)
{
    need_capture();
    const char *costs = tk_path("gpt.json");
    write_gpt_costs(costs, 6, 500, 2, 1);
    const char *dir = capture("r0", costs, "--stages", "4", "8", NULL, "3");
    const char *args[] = {dir, "--schedules", "all", "-o", tk_path("plan.json"), NULL};
    tk_result r = tk_run(PPTUNE, args, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "  zb-h1 ") != NULL, "ZB-H1 not proposed to a job that announces "
                                                 "it:\n%s", r.out);
    cr_assert(strstr(r.out, "  gpipe ") != NULL, "%s", r.out);
    tk_result_free(&r);

    /* the extraction's view: what the mark announced, and nothing beyond the own schedule when
     * it announces nothing */
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_str_eq(a->schedules, "gpipe,1f1b,interleaved,zb-h1");
    snprintf(a->schedules, sizeof a->schedules, "gpipe,1f1b,interleaved");
    pp_extract e;
    cr_assert_eq(pp_extract_from_analysis(a, &e), PP_OK, "%s", pp_error_message());
    cr_assert_eq(e.runnable, (1u << PP_SCHED_GPIPE) | (1u << PP_SCHED_1F1B) |
                                 (1u << PP_SCHED_INTERLEAVED));
    cr_assert(e.runnable_announced);
    pp_extract_free(&e);
    a->schedules[0] = '\0';
    cr_assert_eq(pp_extract_from_analysis(a, &e), PP_OK, "%s", pp_error_message());
    cr_assert_eq(e.runnable, 1u << PP_SCHED_1F1B, "only the run's own schedule");
    cr_assert(!e.runnable_announced);
    cr_assert(strstr(e.notes, "does not announce the schedules") != NULL, "%s", e.notes);
    pp_extract_free(&e);
    /* a framework's own schedule names are ignored, known ones kept */
    snprintf(a->schedules, sizeof a->schedules, "my-dualpipe,zb-h1");
    cr_assert_eq(pp_extract_from_analysis(a, &e), PP_OK, "%s", pp_error_message());
    cr_assert_eq(e.runnable, (1u << PP_SCHED_1F1B) | (1u << PP_SCHED_ZBH1));
    pp_extract_free(&e);
    pp_analysis_free(a);
}

Test(tune, bad_input_is_exit_2)
{
    static const struct {
        const char *args[6];
        const char *says;
    } k_cases[] = {
        {{"--bogus", "x", NULL}, "unknown option"},
        {{NULL}, "missing the run directory"},
        {{"a", "b", NULL}, "one run directory expected"},
        {{"d", "--memory-limit", "12X", NULL}, "unknown unit"},
        {{"d", "--schedules", "pipedream", NULL}, "unknown schedule"},
        {{"--advise", "d", NULL}, "two or more"},
        {{"--auto", "--", "true", NULL}, "needs -o OUTDIR"},
        {{"--verify", "p.json", NULL}, "one run directory"},
        {{"d", "--baseline", "e", NULL}, "--baseline is for --verify"},
        {{"d", "--max-iters", "0", NULL}, "--max-iters"},
        {{"d", "--rerun-disturbed", "1", NULL}, "--rerun-disturbed is for --auto"},
        {{"--auto", "-o", "o", "--rerun-disturbed", "11", NULL}, "--rerun-disturbed"},
        {{"d", "--jitter", "lognormal:9", NULL}, "jitter spec 'lognormal:9'"},
    };
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        tk_result r = tk_run(PPTUNE, k_cases[i].args, NULL);
        cr_expect_eq(r.code, 2, "case %zu: exit %d", i, r.code);
        cr_expect(strstr(r.err, k_cases[i].says), "case %zu: '%s' not in: %s", i,
                  k_cases[i].says, r.err);
        tk_result_free(&r);
    }
    /* a directory without traces, and one with a trace file holding no pipeline ranges */
    cr_assert_eq(mkdir(tk_path("empty"), 0755), 0);
    const char *eargs[] = {tk_path("empty"), NULL};
    tk_result r = tk_run(PPTUNE, eargs, NULL);
    cr_assert_eq(r.code, 2, "%s", r.out);
    cr_assert(strstr(r.err, "empty"), "%s", r.err);
    tk_result_free(&r);
    const char *margs[] = {tk_path("missing"), NULL};
    r = tk_run(PPTUNE, margs, NULL);
    cr_assert_eq(r.code, 2);
    tk_result_free(&r);
    if (tk_exists(LIBPPROF)) {
        /* pptrain with one stage still names no pipeline (no layer cut to tune) is not the case
         * to test here; a job that emits no ranges at all is: */
        const char *cargs[] = {"-q", "-o", tk_path("noranges"), "--", "/bin/true", NULL};
        r = tk_run(PPRUN, cargs, NULL);
        tk_result_free(&r);
        const char *nargs[] = {tk_path("noranges"), NULL};
        r = tk_run(PPTUNE, nargs, NULL);
        cr_assert_eq(r.code, 2, "%s", r.out);
        cr_assert(strlen(r.err) > 12, "no message");
        tk_result_free(&r);
    }
}

/* A job whose messages carry no bytes (signals between stages): no bandwidth can be measured,
 * so the exported link model is latency only, never 0 / 0 = NaN GB/s (which the writer refused
 * with a message blaming the cost file). */
Test(tune, export_costs_of_zero_byte_messages_is_latency_only)
{
    need_capture();
    const char *costs = tk_write_costs("c0.json", 4, 1000, 2000, 0, 0, 0, 200);
    const char *dir = capture("zero", costs, "--stages", "4", "4", NULL, "4");
    const char *args[] = {dir, "--export-costs", tk_path("out.json"), "--formula", "-v", NULL};
    tk_result r = tk_run(PPTUNE, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_assert_null(strstr(r.out, "nan"), "%s", r.out);
    cr_assert_null(strstr(r.err, "nan"), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "every timed message carried 0 bytes"), "%s", r.err);
    cr_assert_not_null(strstr(r.out, "no bandwidth term"), "%s", r.out);
    tk_result_free(&r);
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_load(tk_path("out.json"), &c), PP_OK, "%s", pp_error_message());
    cr_assert_eq(c->p2p_GBps, 0.0);
    cr_assert(isfinite(c->p2p_latency_us) && c->p2p_latency_us > 0, "latency %g us",
              c->p2p_latency_us);
    cr_assert_eq(c->n_layers, 4);
    pp_costs_destroy(c);
}

/* The job's failure in --auto is exit 3 with its output. */
Test(tune, auto_job_failure_is_exit_3)
{
    need_capture();
    const char *args[] = {"--auto", "-o", tk_path("auto"), "--", PPTRAIN, "--backend", "sim",
                          "--costs", tk_path("no-such-costs.json"), "--stages", "2", NULL};
    tk_result r = tk_run(PPTUNE, args, NULL);
    cr_assert_eq(r.code, 3, "%s%s", r.out, r.err);
    cr_assert(strstr(r.err, "the job failed") && strstr(r.err, "no-such-costs"), "%s", r.err);
    tk_result_free(&r);
}

/* Library pieces: the fit on exact lines, the framework forms. */
Test(tune, fit_and_framework_forms)
{
    pp_costs *c1 = NULL, *c2 = NULL, *c4 = NULL;
    cr_assert_eq(pp_costs_uniform(6, 0, 0, 0, &c1), PP_OK);
    cr_assert_eq(pp_costs_uniform(6, 0, 0, 0, &c2), PP_OK);
    cr_assert_eq(pp_costs_uniform(6, 0, 0, 0, &c4), PP_OK);
    pp_costs *cs[3] = {c1, c2, c4};
    int sizes[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++)
        for (int l = 0; l < 6; l++) {
            pp_layer_cost *lc = &cs[i]->layers[l];
            snprintf(lc->name, sizeof lc->name, "%s",
                     l == 0 ? "embedding" : l == 5 ? "head" : "block");
            lc->fwd_us = 100 + 50.0 * l * sizes[i];
            lc->bwd_us = 2 * lc->fwd_us;
            lc->activation_bytes = 1000u * (unsigned)sizes[i];
            lc->param_bytes = 77;
        }
    pp_advise_fit f;
    cr_assert_eq(pp_advise_fit_costs((const pp_costs *const *)cs, sizes, 3, &f), PP_OK, "%s",
                 pp_error_message());
    cr_assert_eq(f.n_sizes, 3);
    for (int l = 0; l < 6; l++) {
        cr_assert_float_eq(f.layers[l].fwd.a_us, 100, 1e-9);
        cr_assert_float_eq(f.layers[l].fwd.c_us, 50.0 * l, 1e-9);
        cr_assert_float_eq(f.layers[l].bwd.c_us, 100.0 * l, 1e-9);
        cr_assert(f.layers[l].fwd.rms_us < 1e-9);
    }
    pp_costs *c8 = NULL;
    cr_assert_eq(pp_advise_costs_at(&f, 8, &c8, NULL), PP_OK);
    cr_assert_float_eq(c8->layers[3].fwd_us, 100 + 50.0 * 3 * 8, 1e-9);
    cr_assert_eq(c8->layers[3].activation_bytes, 8000);
    cr_assert_eq(c8->layers[3].param_bytes, 77);
    cr_assert_eq(c8->microbatch_size, 8);

    int same[2] = {2, 2};
    pp_advise_fit g;
    cr_assert_eq(pp_advise_fit_costs((const pp_costs *const *)cs, same, 2, &g), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "two or more different sizes"));

    pp_partition p;
    int b[] = {0, 2, 4, 6};
    cr_assert_eq(pp_partition_from_bounds(b, 4, 6, 3, 1, &p), PP_OK);
    char buf[128];
    pp_advise_megatron_layout(c1, &p, buf, sizeof buf);
    cr_assert_str_eq(buf, "Et|tt|tL");
    pp_advise_deepspeed_parts(&p, buf, sizeof buf);
    cr_assert_str_eq(buf, "[0, 2, 4, 6]");
    pp_partition_free(&p);
    int b2[] = {0, 1, 5, 6};
    cr_assert_eq(pp_partition_from_bounds(b2, 4, 6, 3, 1, &p), PP_OK);
    pp_advise_megatron_layout(c1, &p, buf, sizeof buf);
    cr_assert_str_eq(buf, "E|t*4|L");
    pp_partition_free(&p);
    /* interleaved: pieces in order chunk 0 stages 0..S-1, then chunk 1 */
    int b3[] = {0, 2, 3, 4, 6};
    cr_assert_eq(pp_partition_from_bounds(b3, 5, 6, 2, 2, &p), PP_OK);
    pp_advise_megatron_layout(c1, &p, buf, sizeof buf);
    cr_assert_str_eq(buf, "Et|t|t|tL");
    pp_partition_free(&p);

    pp_advise_fit_free(&f);
    pp_costs_destroy(c8);
    pp_costs_destroy(c1);
    pp_costs_destroy(c2);
    pp_costs_destroy(c4);
}

/* pprof-tune's torch lines for a plan over costs whose layers are named n[0..L), as text. */
static char *torch_forms(const char *const *n, int L, const int *bounds, int P)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(L, 10, 20, 1000, &c), PP_OK);
    for (int l = 0; l < L; l++)
        snprintf(c->layers[l].name, sizeof c->layers[l].name, "%s", n[l]);
    pp_partition p;
    cr_assert_eq(pp_partition_from_bounds(bounds, P + 1, L, P, 1, &p), PP_OK);
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    pp_tune_print_framework_forms(c, &p, f);
    long len = ftell(f);
    rewind(f);
    char *text = calloc(1, (size_t)len + 1);
    cr_assert_eq(fread(text, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    pp_partition_free(&p);
    pp_costs_destroy(c);
    return text;
}

/* Split points of a torch job whose layers are its module events: with modules other than the
 * blocks among them (an embedding, a norm and a head: the modules directly inside torchtitan's
 * stage modules), layers.i counts the blocks only (before, the embedding shifted every split
 * point by one); a piece that starts at a module other than a block is said not to be
 * expressible by them; torchtitan's module_fqns_per_model_part, which is, is printed for its
 * models' shape (an embedding before the blocks, a norm and a head after them) under its names;
 * layers all of one class are numbered as before. */
Test(tune, torch_split_points_count_the_blocks)
{
    const char *tt[] = {"Embedding_0", "TransformerBlock_0", "TransformerBlock_1",
                        "TransformerBlock_2", "TransformerBlock_0", "TransformerBlock_1",
                        "RMSNorm_0", "Linear_0"};
    int b1[] = {0, 3, 8};
    char *t = torch_forms(tt, 8, b1, 2);
    cr_expect(strstr(t, "pipeline_parallel_split_points = [\"layers.2\"]") != NULL, "%s", t);
    cr_expect(strstr(t, "split_spec={\"layers.2\": SplitPoint.BEGINNING})") != NULL, "%s", t);
    cr_expect(strstr(t, "layers.i is the i-th TransformerBlock") != NULL, "%s", t);
    cr_expect(strstr(t, "cannot start a piece there") == NULL, "%s", t);
    cr_expect(strstr(t, "module_fqns_per_model_part = [[\"tok_embeddings\", \"layers.0\", "
                        "\"layers.1\"], [\"layers.2\", \"layers.3\", \"layers.4\", \"norm\", "
                        "\"output\"]]") != NULL, "%s", t);
    free(t);
    int b2[] = {0, 2, 6, 8}; /* the last piece: the norm and the head alone */
    t = torch_forms(tt, 8, b2, 3);
    cr_expect(strstr(t, "pipeline_parallel_split_points = [\"layers.1\", \"layers.5\"]") != NULL,
              "%s", t);
    cr_expect(strstr(t, "piece 2 starts at layer 6, RMSNorm_0, which is not a TransformerBlock")
                  != NULL, "%s", t);
    cr_expect(strstr(t, "[\"layers.1\", \"layers.2\", \"layers.3\", \"layers.4\"], "
                        "[\"norm\", \"output\"]]") != NULL, "%s", t);
    cr_expect(strstr(t, "module_fqns_per_model_part does") != NULL, "%s", t);
    free(t);
    /* another shape around the blocks (two modules before them): no torchtitan names guessed */
    const char *two[] = {"Embedding_0", "Dropout_0", "Block_0", "Block_1", "Block_2", "Linear_0"};
    int b5[] = {0, 3, 6};
    t = torch_forms(two, 6, b5, 2);
    cr_expect(strstr(t, "pipeline_parallel_split_points = [\"layers.1\"]") != NULL, "%s", t);
    cr_expect(strstr(t, "module_fqns_per_model_part") == NULL, "%s", t);
    free(t);
    const char *blocks[] = {"Block_0", "Block_1", "Block_2", "Block_0", "Block_1", "Block_2"};
    int b3[] = {0, 4, 6};
    t = torch_forms(blocks, 6, b3, 2);
    cr_expect(strstr(t, "pipeline_parallel_split_points = [\"layers.4\"]") != NULL, "%s", t);
    cr_expect(strstr(t, "layer i is written layers.i") != NULL, "%s", t);
    free(t);
    const char *fqn[] = {"tok_embeddings.0", "layers.0", "layers.1", "layers.2"};
    int b4[] = {0, 2, 4};
    t = torch_forms(fqn, 4, b4, 2);
    cr_expect(strstr(t, "pipeline_parallel_split_points = [\"layers.1\"]") != NULL, "%s", t);
    cr_expect(strstr(t, "no module paths") == NULL, "%s", t);
    free(t);
}

/* The tuning driver called as a library (pp_tune.h), on a made-up run: the run's own schedule is
 * always a candidate, a listed schedule the job cannot run is skipped with the reason, the best
 * proposal beats the even split of a skewed model, and a plan made from it is checked against
 * runs that did and did not run it. */
Test(tune, driver_searches_explains_and_checks_plans)
{
    pp_extract e;
    memset(&e, 0, sizeof e);
    cr_assert_eq(pp_costs_uniform(8, 100, 200, 1000, &e.costs), PP_OK);
    e.costs->layers[7].fwd_us = 900; /* a heavy head: the even split is not the best */
    e.costs->layers[7].bwd_us = 1800;
    cr_assert_eq(pp_partition_even(8, 4, 1, &e.partition), PP_OK);
    e.schedule = PP_SCHED_1F1B;
    e.runnable = 1u << PP_SCHED_1F1B | 1u << PP_SCHED_GPIPE;
    e.runnable_announced = 1;
    e.M = 8;
    e.measured_step_ns = 1e7;
    pp_tune_opts o = {.kinds = {PP_SCHED_GPIPE, PP_SCHED_ZBH1}, .n_kinds = 2};
    pp_tune_search s;
    cr_assert_eq(pp_tune_search_run(&o, "run", &e, &s), PP_OK, "%s", pp_error_message());
    cr_assert_eq(s.n_cands, 2); /* 1f1b (the run's own) and gpipe */
    cr_assert_eq(s.cands[0].kind, PP_SCHED_1F1B);
    cr_assert_eq(s.n_skipped, 1);
    cr_assert(strstr(s.skipped[0], "zb-h1: ") == s.skipped[0], "%s", s.skipped[0]);
    const pp_tune_proposal *b = &s.cands[s.best];
    cr_assert(b->ok && b->step_ns < s.current_pred_ns, "best %.0f, even %.0f", b->step_ns,
              s.current_pred_ns);
    cr_assert_eq(b->part.bounds[3], 7, "the head alone on the last stage");

    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    pp_tune_search_print(&o, "run", &e, &s, m);
    fclose(m);
    cr_assert(strstr(text, "self-check:") && strstr(text, "skipped zb-h1") &&
                  strstr(text, "<- best") && strstr(text, "Megatron-LM:"),
              "%s", text);
    cr_assert(strstr(text, "regimes") == NULL, "%s", text);
    free(text);
    /* a run in two speed regimes (docs/metrics.md "Regimes"): the self-check sets the model
     * against each; from a torch profiler trace it names the profiler as a cause too */
    pp_extract reg = e;
    reg.regimes = (pp_aregimes){.found = 1, .n_fast = 6, .n_slow = 9,
                                .fast_median_ns = 0.5 * s.current_dist.median_ns,
                                .slow_median_ns = 1.5 * s.current_dist.median_ns};
    for (int torch = 0; torch < 2; torch++) {
        reg.torch_trace = torch;
        m = open_memstream(&text, &len);
        pp_tune_search_print(&o, "run", &reg, &s, m);
        fclose(m);
        cr_expect(strstr(text, "6 at ") && strstr(text, "(-50.00% from the model), 9 at ") &&
                      strstr(text, "(+50.00%)"),
                  "%s", text);
        cr_expect((strstr(text, "torch profiler's own cost") != NULL) == torch, "%s", text);
        free(text);
    }

    pp_plan plan;
    cr_assert_eq(pp_tune_plan_make(&b->part, b->kind, b->M, 2, 0, b->step_ns, b->bubble,
                                   b->dist.median_ns, b->dist.p95_ns, "run", NULL, &plan),
                 PP_OK);
    cr_assert_str_eq(plan.baseline, "run");
    cr_assert_float_eq(plan.predicted_step_ms, b->step_ns * 1e-6, 1e-12);
    cr_assert_eq(pp_tune_check_ran_plan("run", &e, &plan, "plan.json"), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "ran boundaries 0,2,4,6,8, the plan says"), "%s",
              pp_error_message());
    pp_extract ran = e;
    ran.partition = b->part;
    ran.schedule = b->kind;
    cr_assert_eq(pp_tune_check_ran_plan("run2", &ran, &plan, "plan.json"), PP_OK, "%s",
                 pp_error_message());
    ran.M = 4;
    cr_assert_eq(pp_tune_check_ran_plan("run2", &ran, &plan, "plan.json"), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "ran 4 micro-batches, the plan says 8"));
    pp_plan_free(&plan);
    pp_tune_search_free(&s);
    pp_extract_free(&e);
}

/* --auto's loop as a library call, with a job that replays captured runs instead of running:
 * iteration 0 is the golden 1F1B run, iteration 1 the golden run of the plan tuned from it. The
 * loop must tune iteration 1's plan from iteration 0, check that the replayed run ran it, and
 * stop converged with best-plan.json and the table written. */
static pp_status replay_job(void *ctx, int iter, const char *dir, const char *plan,
                            const char *log, int *failed)
{
    int *runs = ctx;
    static const char *const k_runs[] = {"onef1b4", "onef1b4_plan"};
    (void)log;
    cr_assert((iter == 0) == (plan == NULL), "iteration %d: plan %s", iter, plan ? plan : "-");
    if (iter >= 2) {
        *failed = 1;
        return PP_OK;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp -r '%s/../golden/runs/%s' '%s'", PP_TEST_DATA_DIR, k_runs[iter],
             dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    (*runs)++;
    return PP_OK;
}

Test(tune, auto_loop_as_a_library_with_a_replayed_job)
{
    int runs = 0;
    pp_tune_auto_opts ao = {.tune = {.time_budget_s = 0}, .outdir = tk_dir, .max_iters = 3,
                            .job = {.run = replay_job, .ctx = &runs}};
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    int job_failed = -1;
    pp_status st = pp_tune_auto(&ao, m, &job_failed);
    fclose(m);
    cr_assert_eq(st, PP_OK, "%s", pp_error_message());
    cr_assert_eq(job_failed, 0, "%s", text);
    cr_assert_eq(runs, 2, "%s", text);
    /* iteration 1's run is the tuned layout, so tuning from it proposes it again */
    cr_assert(strstr(text, "pprof-tune --auto: 2 run(s)") && strstr(text, "stopped: converged") &&
                  strstr(text, "best: iteration 1,"),
              "%s", text);
    cr_assert(tk_exists(tk_path("plan1.json")) && tk_exists(tk_path("best-plan.json")), "%s",
              text);
    pp_plan best;
    cr_assert_eq(pp_plan_load(tk_path("best-plan.json"), &best), PP_OK, "%s", pp_error_message());
    cr_assert_eq(best.num_layers, 8);
    cr_log_info("%s", text); /* the table, with --verbose */
    pp_plan_free(&best);
    free(text);
}
