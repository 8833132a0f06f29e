/* test_analyzer.c: the analyzer on real captures (pprof-run + pptrain on the sim backend, whose
 * timing is exact) and on hand-written traces: bubble ratios match the schedules' formulas, the
 * decomposition blames fill/drain, imbalance and transfers where they come from, a straggler is
 * named, link bandwidth matches the cost file, and damaged or foreign run directories give a
 * partial report or a clear error. */
#include "pp_analyzer.h"
#include "pp_report.h"
#include "pp_trace.h"
#include "pp_testkit.h"
#include "pp_testkit_trace.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"
#define LIBPPROF PP_BUILD_DIR "/profiler/libpprof.so"

static char g_dir[64];

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/pp_analyzer_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(analyzer, .init = setup, .fini = teardown);

static void need_capture(void)
{
    if (access(LIBPPROF, R_OK) != 0)
        cr_skip_test("libpprof.so is not built (no NVTX headers)");
}

static int run(char *const argv[])
{
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A cost file of L identical layers, per micro-batch: fwd f us, bwd 2f us (split in halves). */
static void write_costs(const char *path, int L, double f, double gbps, double lat_us,
                        unsigned long long act_bytes)
{
    FILE *fp = fopen(path, "w");
    cr_assert_not_null(fp);
    fprintf(fp, "{\"layers\": [");
    for (int l = 0; l < L; l++)
        fprintf(fp,
                "%s{\"name\": \"layer%d\", \"fwd_us\": %g, \"bwd_us\": %g, \"bwd_input_us\": %g, "
                "\"bwd_weight_us\": %g, \"activation_bytes\": %llu}",
                l ? ", " : "", l, f, 2 * f, f, f, act_bytes);
    fprintf(fp, "], \"p2p_GBps\": %g, \"p2p_latency_us\": %g}\n", gbps, lat_us);
    fclose(fp);
}

/* Captures `pptrain --backend sim` with the given pipeline into dir/name and analyzes it. */
static pp_analysis *capture(const char *name, const char *costs, const char *schedule, int S,
                            int M, int steps, const char *extra)
{
    char out[256], sS[16], sM[16], sn[16];
    snprintf(out, sizeof out, "%s/%s", g_dir, name);
    snprintf(sS, sizeof sS, "%d", S);
    snprintf(sM, sizeof sM, "%d", M);
    snprintf(sn, sizeof sn, "%d", steps);
    char *argv[32] = {PPRUN, "-q", "-o", out, "--", PPTRAIN, "--backend", "sim", "--costs",
                      (char *)costs, "--stages", sS, "--microbatches", sM, "--schedule",
                      (char *)schedule, "--steps", sn, "-q", NULL};
    int n = 19;
    if (extra) {
        argv[n++] = "--sim-slow";
        argv[n++] = (char *)extra;
        argv[n] = NULL;
    }
    cr_assert_eq(run(argv), 0, "capture of %s failed", name);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(out, NULL, &a), PP_OK, "%s", pp_error_message());
    return a;
}

/* The analyzed step with the shortest step time. On the sim backend a disturbance (another
 * process taking a core) can only make ops and waits later than their deadlines, never
 * earlier, so the fastest step is the least disturbed one: timing assertions judge it rather
 * than a mean over steps that one disturbed step would move. */
static const pp_astep *least_disturbed_step(const pp_analysis *a)
{
    cr_assert_gt(a->n_steps, 0u);
    const pp_astep *best = &a->steps[0];
    for (size_t i = 1; i < a->n_steps; i++)
        if (a->steps[i].step_ns < best->step_ns)
            best = &a->steps[i];
    cr_assert(best->decomposed, "step %lld was not decomposed", (long long)best->step);
    return best;
}

Test(analyzer, uniform_pipelines_have_the_formulas_bubble_and_it_is_fill_drain, .timeout = 300)
{
    need_capture();
    static const int SM[][2] = {{2, 4}, {4, 8}, {8, 32}};
    static const char *const kinds[] = {"gpipe", "1f1b"};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 3; i++) {
            int S = SM[i][0], M = SM[i][1];
            char costs[256], name[64];
            snprintf(costs, sizeof costs, "%s/u%d.json", g_dir, S);
            /* one layer per stage; 4 ms forward keeps wake-up latency (~30 us) small */
            write_costs(costs, S, 4000, 0, 0, 0);
            /* a timing judgement (pp_testkit.h, tk_judge): a case that misses is captured
             * again */
            tk_judge j = TK_JUDGE_INIT;
            double best_dev = INFINITY;
            while (tk_judge_next(&j)) {
                snprintf(name, sizeof name, "%s-%d-%d-%d", kinds[k], S, M, j.attempt);
                pp_analysis *a = capture(name, costs, kinds[k], S, M, 6, NULL);
                double formula = (double)(S - 1) / (M + S - 1);
                cr_assert_eq(a->S, S);
                cr_assert_str_eq(a->schedule, kinds[k]);
                cr_assert_eq(a->n_steps, 5u, "6 steps, 1 warm-up");
                /* The schedule's bubble is the one inside the steps' windows: the step time (the
                 * period) also holds pptrain's own time between steps (its loop, under a
                 * millisecond), idle too but no part of the schedule. It is judged on the median
                 * step of the 5: a disturbance moves a step's window bubble either way (a longer
                 * window adds idle; ops that start late after a wait still end at their deadlines
                 * and look shorter, or a stage's first op starts late and the window shrinks), so
                 * the middle one stands for the undisturbed run while a sum over the steps, or
                 * their extreme, takes in whatever one disturbed step did. */
                double b[16], window = 0, period = 0;
                cr_assert_leq(a->n_steps, 16u);
                for (size_t i = 0; i < a->n_steps; i++) {
                    const pp_astep *x = &a->steps[i];
                    double busy = 0;
                    for (int s = 0; s < a->S; s++)
                        busy += x->stage[s].busy_ns;
                    b[i] = 1.0 - busy / (S * x->window_ns);
                    window += x->window_ns;
                    period += x->step_ns;
                }
                const pp_astep *st = NULL;
                for (size_t i = 0; i < a->n_steps && !st; i++) {
                    size_t below = 0, above = 0;
                    for (size_t j = 0; j < a->n_steps; j++) {
                        below += b[j] < b[i];
                        above += b[j] > b[i];
                    }
                    if (2 * below <= a->n_steps && 2 * above <= a->n_steps)
                        st = &a->steps[i];
                }
                double bubble = b[st - a->steps];
                /* The same step's bubble with each stage's busy time as the cost file gives it
                 * (M ops of 4 + 8 ms): the window ends at deadlines, so it carries no more than the
                 * last wake-up's lateness, while the measured busy time loses the lateness of every
                 * op that starts late after a wait (it still ends at its deadline), a bias all
                 * steps share under a sanitizer on a busy machine. Both must match the formula. */
                double busy_cost = 0;
                for (int s = 0; s < a->S; s++)
                    busy_cost += M * (4e6 + 8e6);
                double bubble_cost = 1.0 - busy_cost / (S * st->window_ns);
                cr_assert(st->decomposed);
                double idle = 0, fill = 0;
                for (int s = 0; s < a->S; s++) {
                    idle += st->window_ns - st->stage[s].busy_ns;
                    fill += st->stage[s].fill_drain_ns;
                }
                /* the idle the schedule has in that window (the costs' busy time): what
                 * fill/drain must account for; the measured idle also holds the lateness the
                 * measured busy time loses (above), which the analyzer rightly calls imbalance
                 * (a stage that ran late) */
                double idle_cost = S * st->window_ns - busy_cost;
                /* the measured bubble: on the least disturbed attempt so far */
                best_dev = fmin(best_dev, fabs(bubble - formula));
                cr_log_info("%s S=%d M=%d: bubble %.2f%% in the median step's window (%.2f%% with "
                            "the costs' busy time; formula %.2f%%), %.2f%% of the period over all "
                            "steps; fill/drain %.1f%% of that window's idle, %.1f%% of the "
                            "schedule's (step %lld)",
                            kinds[k], S, M, 100 * bubble, 100 * bubble_cost, 100 * formula,
                            100 * a->bubble_ratio, 100 * fill / idle, 100 * fill / idle_cost,
                            (long long)st->step);
                tk_judge_that(&j, fabs(bubble_cost - formula) <= 0.015,
                              "%s S=%d M=%d: %.4f vs %.4f", kinds[k], S, M, bubble_cost, formula);
                tk_judge_that(&j, best_dev <= 0.03, "%s S=%d M=%d: %.4f vs %.4f measured",
                              kinds[k], S, M, bubble, formula);
                tk_judge_that(&j, fill >= 0.9 * idle_cost,
                              "%s S=%d M=%d: fill/drain %.3f of the schedule's idle %.3f ms "
                              "(%.3f measured)",
                              kinds[k], S, M, fill * 1e-6, idle_cost * 1e-6, idle * 1e-6);
                /* with the optimizer's barrier the period is the window plus that small gap */
                tk_judge_that(&j, period >= window && period <= 1.05 * window,
                              "%s S=%d M=%d: period %.3f, window %.3f ms", kinds[k], S, M,
                              period * 1e-6, window * 1e-6);
                /* the parts add up to the measured idle, exactly, by construction */
                for (int s = 0; s < a->S; s++) {
                    const pp_astage *g = &a->stages[s];
                    cr_assert_float_eq(g->fill_drain_ns + g->imbalance_ns + g->transfer_ns,
                                       g->idle_ns, 1e-3 * g->idle_ns + 1.0);
                }
                pp_analysis_free(a);
            }
            cr_assert(!j.missed, "%s", j.log);
        }
}

Test(analyzer, a_stage_twice_as_slow_is_named_as_the_cause, .timeout = 120)
{
    need_capture();
    char costs[256];
    snprintf(costs, sizeof costs, "%s/s.json", g_dir);
    write_costs(costs, 4, 2000, 0, 0, 0);
    pp_analysis *a = capture("slow", costs, "1f1b", 4, 8, 4, "2=2");
    const pp_astep *st = least_disturbed_step(a);
    int named = 0;
    double busy_max = 0, busy_sum = 0;
    for (int s = 0; s < 4; s++) {
        const pp_astage *g = &a->stages[s];
        const pp_stage_step *gs = &st->stage[s];
        cr_log_info("stage %d: busy %.2f ms, imbalance %.2f ms (step %lld), culprit %d", s,
                    gs->busy_ns * 1e-6, gs->imbalance_ns * 1e-6, (long long)st->step,
                    g->imbalance_culprit);
        busy_max = gs->busy_ns > busy_max ? gs->busy_ns : busy_max;
        busy_sum += gs->busy_ns;
        if (s == 2)
            continue;
        /* every other stage waits because of stage 2 */
        cr_assert_gt(gs->imbalance_ns, 0.05 * st->step_ns, "stage %d waits on imbalance", s);
        cr_assert_eq(g->imbalance_culprit, 2, "stage %d blames stage %d", s, g->imbalance_culprit);
        named++;
    }
    cr_assert_eq(named, 3);
    /* the slow stage itself waits less than a balanced pipeline would make it */
    cr_assert_lt(st->stage[2].imbalance_ns, 0.0);
    /* max / mean busy: 2 / 1.25 = 1.6 */
    cr_assert_gt(busy_max / (busy_sum / 4), 1.5, "imbalance %.3f", busy_max / (busy_sum / 4));
    pp_analysis_free(a);
}

Test(analyzer, link_bandwidth_matches_the_cost_file, .timeout = 120)
{
    need_capture();
    char costs[256];
    snprintf(costs, sizeof costs, "%s/c.json", g_dir);
    /* 4 MiB at 2 GB/s: 2.1 ms per transfer, + 10 us latency */
    write_costs(costs, 4, 1000, 2.0, 10, 4u << 20);
    /* a timing judgement (pp_testkit.h, tk_judge): a capture that misses is taken again */
    tk_judge j = TK_JUDGE_INIT;
    while (tk_judge_next(&j)) {
        char name[16];
        snprintf(name, sizeof name, "comm%d", j.attempt);
        pp_analysis *a = capture(name, costs, "1f1b", 4, 8, 3, NULL);
        cr_assert_eq(a->n_links, 6u, "3 links x 2 directions");
        /* the bandwidth is already the median over each link's 16 messages: a few disturbed
         * transfers do not move it */
        for (size_t i = 0; i < a->n_links; i++) {
            const pp_alink *l = &a->links[i];
            cr_log_info("%d -> %d %s: %.3f GB/s over %llu timed of %llu", l->src, l->dst,
                        l->grad ? "grad" : "act", l->bandwidth_GBps,
                        (unsigned long long)l->timed, (unsigned long long)l->messages);
            cr_assert_eq(l->messages, 16u, "8 micro-batches x 2 steps");
            cr_assert_eq(l->bytes, 16ull << 22);
            cr_assert_gt(l->timed, 0u);
            tk_judge_that(&j, fabs(l->bandwidth_GBps - 2.0) <= 0.05 * 2.0,
                          "%d -> %d %s: %.3f GB/s", l->src, l->dst, l->grad ? "grad" : "act",
                          l->bandwidth_GBps);
            cr_assert_eq(abs(l->src - l->dst), 1);
        }
        /* transfers now cost idle time, and the decomposition says so */
        double xfer = 0;
        for (int s = 0; s < a->S; s++)
            xfer += a->stages[s].transfer_ns;
        cr_assert_gt(xfer, 0.0);
        pp_analysis_free(a);
    }
    cr_assert(!j.missed, "%s", j.log);
}

/* pptrain's own activations and gradients on the sim backend, whose link model is known
 * (docs/cost-file.md: p2p_latency_us + bytes / p2p_GBps): both directions' latency is the
 * model's, so activations read like gradients. A receive that found its activation waiting in
 * the mailbox (common in both schedules) must not count the time it sat there. */

/* The least disturbed latency seen so far of each link (src -> dst, activation or gradient): a
 * late wake-up of the sim's sender shortens the in-flight part one capture shows, a late receiver
 * lengthens it, and on a busy machine (the ASan suite beside other tests) every capture may have
 * some link disturbed, rarely the same one. Each link is judged on the capture where it came
 * closest to the model: a rule that is wrong (counting the mailbox wait, timing the wrong pair)
 * is off on every capture of every link and still fails. */
typedef struct {
    int src, dst, grad;
    double best;     /* the median latency closest to the model so far, ns */
    unsigned timed;  /* messages timed in that capture */
} link_best;

static void links_note(const pp_analysis *a, const char *kind, double model_ns, link_best *lb,
                       size_t *n_lb, size_t cap)
{
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        cr_log_info("%s %d -> %d %s: latency %.1f us (model %.1f), %llu of %llu timed", kind,
                    l->src, l->dst, l->grad ? "grad" : "act", l->latency_ns.median * 1e-3,
                    model_ns * 1e-3, (unsigned long long)l->timed,
                    (unsigned long long)l->messages);
        if (l->timed == 0)
            continue;
        size_t k = 0;
        while (k < *n_lb && !(lb[k].src == l->src && lb[k].dst == l->dst && lb[k].grad == l->grad))
            k++;
        if (k == *n_lb) {
            cr_assert_lt(k, cap);
            lb[k] = (link_best){l->src, l->dst, l->grad, l->latency_ns.median, (unsigned)l->timed};
            (*n_lb)++;
        } else if (fabs(l->latency_ns.median - model_ns) < fabs(lb[k].best - model_ns)) {
            lb[k].best = l->latency_ns.median;
            lb[k].timed = (unsigned)l->timed;
        }
    }
}

/* How far below the model a link may read. A wrong rule (the mailbox wait counted) reads above
 * it, by the wait: that side keeps 25%. Below, only disturbance: a sender's late wake-up shortens
 * the in-flight part it shows (the message is due at the sender's deadline, its send range opens
 * when the sender runs again), and so does the sanitizers' slower code between the two. Under the
 * sanitizers, in a suite running beside other tests, GPipe's last link read 142 us at best of five
 * captures against the model's 206.6 (CI), and in the optimised suite on a VM in a slow stretch
 * 137.4 us (fresh-clone CI, 2026-12-02); under the sanitizers in a fresh-clone CI whose suite ran
 * 17% slower than the hour before, 102.6 us (2026-12-03): a reading down to 40% of the model is
 * disturbance, not a wrong rule, in either build. */
#define LINK_LOW 0.4
/* How far apart activations' and gradients' mean best latencies may read: half the larger */
#define LINK_APART 0.5

/* every link at its best against the model: 0 and a reason when one is off */
static int links_match_model(const link_best *lb, size_t n_lb, size_t want, const char *kind,
                             double model_ns, char *why, size_t len)
{
    if (n_lb < want) {
        snprintf(why, len, "%s: %zu links timed, %zu expected", kind, n_lb, want);
        return 0;
    }
    double lat[2] = {0}, n[2] = {0};
    for (size_t k = 0; k < n_lb; k++) {
        if (lb[k].best > 1.25 * model_ns || lb[k].best < LINK_LOW * model_ns) {
            snprintf(why, len, "%s %d -> %d: %.1f us (%u timed) at best, the model's %.1f us",
                     kind, lb[k].src, lb[k].dst, lb[k].best * 1e-3, lb[k].timed, model_ns * 1e-3);
            return 0;
        }
        lat[lb[k].grad] += lb[k].best;
        n[lb[k].grad]++;
    }
    double act = lat[0] / n[0], grad = lat[1] / n[1];
    if (fabs(act - grad) > LINK_APART * fmax(act, grad)) {
        snprintf(why, len, "%s: activations %.1f us, gradients %.1f us", kind, act * 1e-3,
                 grad * 1e-3);
        return 0;
    }
    return 1;
}

/* up to five captures per schedule; each link judged on its least disturbed one (above) */
Test(analyzer, pptrain_activations_latency_is_the_link_model_like_gradients, .timeout = 300)
{
    need_capture();
    char costs[256];
    snprintf(costs, sizeof costs, "%s/lat.json", g_dir);
    /* 64 KiB at 10 GB/s after 200 us: 206.6 us per message */
    write_costs(costs, 4, 2000, 10.0, 200, 64u << 10);
    const double model_ns = 200e3 + (double)(64u << 10) / 10.0;
    /* GPipe observes one message per link and step in flight (the first: later ones are
     * waiting when asked for), so it runs more steps for a median over several */
    static const char *const kinds[] = {"1f1b", "gpipe"};
    static const int steps[] = {4, 8};
    for (int k = 0; k < 2; k++) {
        char why[256] = "";
        int ok = 0;
        link_best lb[8];
        size_t n_lb = 0;
        for (int attempt = 0; attempt < 5 && !ok; attempt++) {
            pp_analysis *a = capture(kinds[k], costs, kinds[k], 4, 8, steps[k], NULL);
            cr_assert_eq(a->n_links, 6u);
            links_note(a, kinds[k], model_ns, lb, &n_lb, 8);
            pp_analysis_free(a);
            ok = links_match_model(lb, n_lb, 6, kinds[k], model_ns, why, sizeof why);
        }
        cr_assert(ok, "%s", why);
    }
}

Test(analyzer, kept_timeline_has_every_op_of_the_last_step)
{
    need_capture();
    char costs[256];
    snprintf(costs, sizeof costs, "%s/k.json", g_dir);
    write_costs(costs, 8, 200, 0, 0, 0);
    pp_analysis *a = capture("kept", costs, "1f1b", 4, 8, 3, NULL);
    cr_assert_eq(a->kept_lo, 3);
    cr_assert_eq(a->kept_hi, 3);
    int fwd[4] = {0}, bwd[4] = {0}, layers = 0;
    for (size_t i = 0; i < a->n_ops; i++) {
        const pp_aop *o = &a->ops[i];
        cr_assert_eq(o->step, 3);
        fwd[o->stage] += o->kind == PP_AOP_FWD;
        bwd[o->stage] += o->kind == PP_AOP_BWD;
    }
    for (size_t i = 0; i < a->n_layer_ops; i++)
        layers += a->layer_ops[i].kind == PP_AOP_FWD;
    for (int s = 0; s < 4; s++) {
        cr_assert_eq(fwd[s], 8);
        cr_assert_eq(bwd[s], 8);
    }
    cr_assert_eq(layers, 8 * 8, "8 layers x 8 micro-batches");
    cr_assert_eq(a->n_layers, 8u);
    cr_assert_str_eq(a->layers[0].name, "layer0");
    pp_analysis_free(a);
}

/* With several chunks per stage the analysis keeps each chunk's compute ops apart over every
 * analyzed step (pp_astage.chunk_ns): the medians pprof-tune scales each piece's layers to, where
 * the stage's own statistics mix chunks of different costs. Interleaved, S = 2, v = 2, one layer
 * a piece of 0.5, 1, 1.5 and 2 ms forward (backward twice that): stage s's chunk c runs layer
 * 2 c + s. A one-chunk run keeps none. */
Test(analyzer, interleaved_chunks_keep_their_own_op_times, .timeout = 120)
{
    need_capture();
    char costs[256];
    snprintf(costs, sizeof costs, "%s/c.json", g_dir);
    FILE *fp = fopen(costs, "w");
    cr_assert_not_null(fp);
    fprintf(fp, "{\"layers\": [");
    for (int l = 0; l < 4; l++)
        fprintf(fp, "%s{\"name\": \"layer%d\", \"fwd_us\": %d, \"bwd_us\": %d}", l ? ", " : "", l,
                500 * (l + 1), 1000 * (l + 1));
    fprintf(fp, "]}\n");
    fclose(fp);
    pp_analysis *a = capture("chunks", costs, "interleaved", 2, 4, 5, NULL);
    cr_assert_eq(a->v, 2);
    cr_assert_gt(a->n_steps, 0u);
    for (int s = 0; s < 2; s++) {
        const pp_astage *g = &a->stages[s];
        cr_assert_eq(g->n_chunk, 2, "stage %d: %d chunks kept", s, g->n_chunk);
        for (int c = 0; c < 2; c++) {
            const pp_astats *f = &g->chunk_ns[c * 4], *b = &g->chunk_ns[c * 4 + 1];
            double want = 0.5e6 * (2 * c + s + 1);
            cr_log_info("stage %d chunk %d: fwd %.3f ms (%llu ops), bwd %.3f ms; stage fwd %.3f",
                        s, c, f->median * 1e-6, (unsigned long long)f->count, b->median * 1e-6,
                        g->fwd_ns.median * 1e-6);
            cr_assert_eq(f->count, a->n_steps * 4, "every analyzed step's 4 forwards");
            cr_assert_eq(b->count, a->n_steps * 4);
            cr_assert_eq(g->chunk_ns[c * 4 + 2].count, 0u, "no split backward here");
            /* sleeps to deadlines: an op is its layer's time and its own few microseconds, or a
             * little shorter or longer where a wake-up came late */
            cr_assert(f->median > 0.9 * want && f->median < 1.15 * want, "fwd %g, want %g",
                      f->median, want);
            cr_assert(b->median > 0.9 * 2 * want && b->median < 1.15 * 2 * want,
                      "bwd %g, want %g", b->median, 2 * want);
        }
        cr_assert_eq(g->fwd_ns.count, a->n_steps * 8, "the stage's statistics hold both chunks");
    }
    /* the text report's stage table: a row per chunk under each stage (c0, c1) */
    char *table = NULL;
    size_t tn = 0;
    FILE *f = open_memstream(&table, &tn);
    pp_analysis_print(a, f);
    fclose(f);
    const char *row = strstr(table, "\n1 ");
    cr_assert_not_null(row, "%s", table);
    double cf = 0, cbw = 0;
    const char *c1 = strstr(row, "\n  c1 ");
    cr_assert(c1 && sscanf(c1 + 7, "%lf %lf", &cf, &cbw) == 2, "%s", table);
    cr_expect(fabs(cf - a->stages[1].chunk_ns[4].median * 1e-6) < 1e-3 &&
                  fabs(cbw - a->stages[1].chunk_ns[5].median * 1e-6) < 1e-3,
              "stage 1 chunk 1 row %.3f %.3f:\n%s", cf, cbw, table);
    free(table);
    /* and the HTML report's, each number keyed by its summary JSON field */
    char *page = NULL;
    size_t pn = 0;
    f = open_memstream(&page, &pn);
    cr_assert_eq(pp_report_html(a, NULL, f), PP_OK);
    fclose(f);
    for (int s = 0; s < 2; s++)
        for (int c = 0; c < 2; c++)
            for (int k = 0; k < 2; k++) {
                char key[96];
                snprintf(key, sizeof key, "data-key=\"stages.%d.chunks.%d.%s_ms.median\">", s,
                         c, k ? "bwd" : "fwd");
                const char *cell = strstr(page, key);
                double v = 0;
                cr_assert(cell && sscanf(cell + strlen(key), "%lf", &v) == 1, "%s", key);
                double want = a->stages[s].chunk_ns[c * 4 + k].median * 1e-6;
                cr_expect(fabs(v - want) < 1e-3, "%s %.3f, want %.3f", key, v, want);
            }
    free(page);
    pp_analysis_free(a);
    a = capture("one_chunk", costs, "1f1b", 2, 4, 3, NULL);
    for (int s = 0; s < 2; s++)
        cr_assert(a->stages[s].n_chunk == 0 && !a->stages[s].chunk_ns);
    pp_analysis_free(a);
}

/* ---------------------------------------------------------------------------------------- */
/* Hand-written traces: the convention's fallback rule, damage, foreign jobs                 */
/* ---------------------------------------------------------------------------------------- */

static void push(tk_tw *t, uint32_t tid, uint64_t ts, uint32_t msg, uint32_t cat,
                 uint64_t payload)
{
    pp_rec_range r = tk_range_rec(PP_REC_PUSH, tid, ts, msg);
    r.category = cat;
    r.payload_type = 1; /* uint64 */
    r.payload = payload;
    tk_tw_rec(t, &r, sizeof r);
}

/* GPU capture of the foreign job below: every forward launches one 600 us kernel and every
 * backward one 1200 us kernel, 50 us after its range opens (the launch call 10 us after), on
 * device 0, stream stage + 1; one kernel is launched outside any range; each activation send is
 * an NCCL send of 4 MiB whose GPU side takes 1 ms. */
static uint32_t g_corr;

static void gpu_launch(tk_tw *g, uint32_t tid, uint64_t range_t0, uint64_t dur,
                       uint32_t stream)
{
    pp_rec_api a;
    memset(&a, 0, sizeof a);
    a.h.type = PP_REC_API;
    a.h.size = sizeof a;
    a.h.tid = 999;
    a.correlation = ++g_corr;
    a.thread = tid;
    a.cbid = 211;
    a.start = range_t0 + 10000;
    a.end = range_t0 + 20000;
    tk_tw_rec(g, &a, sizeof a);
    pp_rec_gpu k;
    memset(&k, 0, sizeof k);
    k.h.type = PP_REC_GPU;
    k.h.size = sizeof k;
    k.h.tid = 999;
    k.kind = PP_GPU_KERNEL;
    k.stream = stream;
    k.correlation = g_corr;
    k.start = range_t0 + 50000;
    k.end = k.start + dur;
    tk_tw_rec(g, &k, sizeof k);
}

static void nccl_send(tk_tw *g, uint64_t t0, int peer)
{
    pp_rec_nccl n;
    memset(&n, 0, sizeof n);
    n.h.type = PP_REC_NCCL;
    n.h.size = sizeof n;
    n.h.tid = 998;
    n.func = PP_NCCL_SEND;
    n.timed = 1;
    n.peer = peer;
    n.rank = 0;
    n.nranks = 2;
    n.bytes = 4u << 20;
    n.start = t0;
    n.end = t0 + 5000;
    n.gpu_start = t0 + 100000;
    n.gpu_end = n.gpu_start + 1000000;
    tk_tw_rec(g, &n, sizeof n);
}

/* A 2-stage GPipe job written by "another framework": registered messages, category = stage + 1,
 * integer payloads, no pipeprof.event payload. Each op takes 1 ms; stage 1 starts 1 ms late.
 * With `gpu`, the GPU capture above goes with it. */
static void write_foreign_trace_gpu(const char *path, int gpu)
{
    static tk_tw g;
    memset(&g, 0, sizeof g);
    g_corr = 0;
    static tk_tw t;
    tk_tw_open(&t, path, 42, -1);
    g.w = t.w;
    const char *fwd[2] = {"fwd mb0", "fwd mb1"}, *bwd[2] = {"bwd mb0", "bwd mb1"};
    uint32_t dom = tk_tw_sid(&t, "pipeprof"), s_step = tk_tw_sid(&t, "step");
    uint32_t s_fwd[2] = {tk_tw_sid(&t, fwd[0]), tk_tw_sid(&t, fwd[1])};
    uint32_t s_bwd[2] = {tk_tw_sid(&t, bwd[0]), tk_tw_sid(&t, bwd[1])};
    uint32_t s_sa[2] = {tk_tw_sid(&t, "send_act mb0"), tk_tw_sid(&t, "send_act mb1")};
    uint32_t s_ra[2] = {tk_tw_sid(&t, "recv_act mb0"), tk_tw_sid(&t, "recv_act mb1")};
    uint32_t s_sg[2] = {tk_tw_sid(&t, "send_grad mb0"), tk_tw_sid(&t, "send_grad mb1")};
    uint32_t s_rg[2] = {tk_tw_sid(&t, "recv_grad mb0"), tk_tw_sid(&t, "recv_grad mb1")};
    pp_rec_domain d = {{PP_REC_DOMAIN, sizeof d, 0, 0}, 1, dom};
    tk_tw_rec(&t, &d, sizeof d);
    tk_tw_flush(&t, PP_BLOCK_META, 0);
    const uint64_t ms = 1000000, T0 = 1000 * ms;
    for (int step = 1; step <= 3; step++) {
        uint64_t b = T0 + (uint64_t)(step - 1) * 10 * ms;
        /* stage 0 (tid 100): F0 F1 .. B0 B1; stage 1 (tid 101): F0 F1 B0 B1 */
        push(&t, 100, b, s_step, 1, (uint64_t)step);
        for (int m = 0; m < 2; m++) {
            push(&t, 100, b + m * ms, s_fwd[m], 1, (uint64_t)m);
            tk_tw_pop(&t, 100, b + (m + 1) * ms);
            push(&t, 100, b + (m + 1) * ms, s_sa[m], 1, 4096);
            tk_tw_pop(&t, 100, b + (m + 1) * ms + 1000);
            if (gpu) {
                gpu_launch(&g, 100, b + m * ms, 600000, 1);
                nccl_send(&g, b + (m + 1) * ms, 1);
            }
        }
        for (int m = 0; m < 2; m++) {
            push(&t, 100, b + (2 + 2 * m) * ms, s_rg[m], 1, 4096);
            tk_tw_pop(&t, 100, b + (4 + m) * ms);
            push(&t, 100, b + (4 + m) * ms, s_bwd[m], 1, (uint64_t)m);
            tk_tw_pop(&t, 100, b + (5 + m) * ms);
            if (gpu) /* 2: launched by an autograd thread of its own (PyTorch) */
                gpu_launch(&g, gpu == 2 ? 700 : 100, b + (4 + m) * ms, 1200000, 1);
        }
        tk_tw_pop(&t, 100, b + 6 * ms);
        tk_tw_flush(&t, PP_BLOCK_EVENTS, 100);
        push(&t, 101, b, s_step, 2, (uint64_t)step);
        for (int m = 0; m < 2; m++) {
            push(&t, 101, b + (uint64_t)m * ms, s_ra[m], 2, 4096);
            tk_tw_pop(&t, 101, b + (m + 1) * ms);
            push(&t, 101, b + (m + 1) * ms, s_fwd[m], 2, (uint64_t)m);
            tk_tw_pop(&t, 101, b + (m + 2) * ms);
            if (gpu && gpu != 3) /* 3: stage 1's records lost */
                gpu_launch(&g, 101, b + (m + 1) * ms, 600000, 2);
        }
        for (int m = 0; m < 2; m++) {
            push(&t, 101, b + (3 + m) * ms, s_bwd[m], 2, (uint64_t)m);
            tk_tw_pop(&t, 101, b + (4 + m) * ms);
            push(&t, 101, b + (4 + m) * ms, s_sg[m], 2, 4096);
            tk_tw_pop(&t, 101, b + (4 + m) * ms + 1000);
            if (gpu && gpu != 3)
                gpu_launch(&g, gpu == 2 ? 701 : 101, b + (3 + m) * ms, 1200000, 2);
        }
        tk_tw_pop(&t, 101, b + 6 * ms);
        tk_tw_flush(&t, PP_BLOCK_EVENTS, 101);
        if (gpu) {
            /* a launch from a thread with no pipeline range open */
            gpu_launch(&g, 555, b + 7 * ms, 100000, 3);
            /* from a thread with no range open while both stages are inside their backward,
             * on a stream no stage was seen using: ambiguous */
            if (gpu == 2)
                gpu_launch(&g, 702, b + 4 * ms, 100000, 4);
            tk_tw_flush(&g, PP_BLOCK_EVENTS, 999);
        }
    }
    pp_trace_writer_close(t.w);
}

static void write_foreign_trace(const char *path) { write_foreign_trace_gpu(path, 0); }

/* The run directory holding only write_foreign_trace_gpu(gpu)'s trace, analyzed. */
static pp_analysis *analyze_foreign_gpu(int gpu)
{
    char path[128];
    snprintf(path, sizeof path, "%s/gpu.pft", g_dir);
    unlink(path);
    write_foreign_trace_gpu(path, gpu);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_OK, "%s", pp_error_message());
    return a;
}

Test(analyzer, reads_a_foreign_job_through_the_message_grammar)
{
    char path[256];
    snprintf(path, sizeof path, "%s/foreign.pft", g_dir);
    write_foreign_trace(path);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->S, 2);
    cr_assert_eq(a->n_steps, 2u);
    /* steps start 10 ms apart and their ranges last 6 ms: the step time is the period */
    cr_assert_float_eq(a->step_ns.mean, 10e6, 1.0);
    for (size_t i = 0; i < a->n_steps; i++)
        cr_assert_float_eq(a->steps[i].window_ns, 6e6, 1.0);
    /* each stage busy 4 of the 10 ms */
    for (int s = 0; s < 2; s++) {
        cr_assert_float_eq(a->stages[s].busy_ns, 4e6, 1.0);
        cr_assert_float_eq(a->stages[s].fwd_ns.median, 1e6, 1.0);
        cr_assert_eq(a->stages[s].fwd_ns.count, 4u, "2 micro-batches x 2 steps");
    }
    cr_assert_float_eq(a->bubble_ratio, 6.0 / 10.0, 1e-9);
    /* peers implied by the neighbour rule; bytes from the payload */
    cr_assert_eq(a->n_links, 2u);
    for (size_t i = 0; i < a->n_links; i++) {
        cr_assert_eq(a->links[i].messages, 4u);
        cr_assert_eq(a->links[i].bytes, 4u * 4096u);
    }
    pp_analysis_free(a);
}

/* A 2-stage job of the kind a Python framework writes (queues between threads, no barrier
 * before the optimizer step), steps 10 ms apart, worked by hand (us from each step's base b):
 *   stage 0  step [0, 8000]: fwd0 [0, 1000], send_act0 [1000, 1003], fwd1 [1003, 2000],
 *            send_act1 [2000, 2003], recv_grad0 [2003, 5040] (waits: grad0 sent at 5000),
 *            bwd0 [5040, 6000], recv_grad1 [6000, 6005] (finds grad1, sent at 5900, waiting),
 *            bwd1 [6005, 7000], opt [7000, 8000]
 *   stage 1  step [-3000, 7000] (opens its step early and waits: the windows overlap),
 *            recv_act0 [-3000, 1040] (waits: act0 sent at 1000), fwd0 [1040, 2540],
 *            recv_act1 [2540, 2545] (finds act1, sent at 2000, waiting), fwd1 [2545, 4045],
 *            bwd0 [4045, 5000], send_grad0 [5000, 5003], bwd1 [5003, 5900],
 *            send_grad1 [5900, 5903], opt [5903, 7000]
 * Each receive that waited saw its message 40 us in flight; the two that found their data
 * waiting took 5 us (a queue's get), which says nothing of the link: the receiver's own time.
 * With `transit`, stage 1's second receive comes while act1 is still on its way instead:
 * recv_act1 [2010, 2040], after the send returned (2003) but before the data (2040). */
/* The names of a two-micro-batch job's ranges, registered in a trace opened at path (rank). */
typedef struct two_mb_names {
    uint32_t step, opt, fwd[2], bwd[2], sa[2], ra[2], sg[2], rg[2];
} two_mb_names;

static void open_two_mb_job(tk_tw *t, const char *path, int rank, two_mb_names *n)
{
    tk_tw_open(t, path, rank, -1);
    uint32_t dom = tk_tw_sid(t, "pipeprof");
    n->step = tk_tw_sid(t, "step");
    n->opt = tk_tw_sid(t, "opt_step");
    /* (the writer keeps the names' pointers until it flushes: literals) */
    static const char *const names[6][2] = {
        {"fwd mb0", "fwd mb1"},           {"bwd mb0", "bwd mb1"},
        {"send_act mb0", "send_act mb1"}, {"recv_act mb0", "recv_act mb1"},
        {"send_grad mb0", "send_grad mb1"}, {"recv_grad mb0", "recv_grad mb1"}};
    uint32_t *ids[6] = {n->fwd, n->bwd, n->sa, n->ra, n->sg, n->rg};
    for (int k = 0; k < 6; k++)
        for (int mb = 0; mb < 2; mb++)
            ids[k][mb] = tk_tw_sid(t, names[k][mb]);
    pp_rec_domain d = {{PP_REC_DOMAIN, sizeof d, 0, 0}, 1, dom};
    tk_tw_rec(t, &d, sizeof d);
    tk_tw_flush(t, PP_BLOCK_META, 0);
}

static void write_queue_job(const char *path, int transit)
{
    static tk_tw t;
    two_mb_names nm;
    open_two_mb_job(&t, path, 43, &nm);
    const uint32_t s_step = nm.step, s_opt = nm.opt, *s_fwd = nm.fwd, *s_bwd = nm.bwd;
    const uint32_t *s_sa = nm.sa, *s_ra = nm.ra, *s_sg = nm.sg, *s_rg = nm.rg;
    const uint64_t us = 1000, T0 = 1000000 * us;
    typedef struct { uint32_t msg; int64_t t0, t1; uint64_t payload; } r;
    for (int step = 1; step <= 3; step++) {
        uint64_t b = T0 + (uint64_t)(step - 1) * 10000 * us;
        const r st0[] = {{s_fwd[0], 0, 1000, 0},     {s_sa[0], 1000, 1003, 4096},
                         {s_fwd[1], 1003, 2000, 1},  {s_sa[1], 2000, 2003, 4096},
                         {s_rg[0], 2003, 5040, 4096}, {s_bwd[0], 5040, 6000, 0},
                         {s_rg[1], 6000, 6005, 4096}, {s_bwd[1], 6005, 7000, 1},
                         {s_opt, 7000, 8000, 0}};
        const r st1[] = {{s_ra[0], -3000, 1040, 4096}, {s_fwd[0], 1040, 2540, 0},
                         {s_ra[1], transit ? 2010 : 2540, transit ? 2040 : 2545, 4096},
                         {s_fwd[1], 2545, 4045, 1},
                         {s_bwd[0], 4045, 5000, 0},    {s_sg[0], 5000, 5003, 4096},
                         {s_bwd[1], 5003, 5900, 1},    {s_sg[1], 5900, 5903, 4096},
                         {s_opt, 5903, 7000, 0}};
        push(&t, 100, b, s_step, 1, (uint64_t)step);
        for (size_t i = 0; i < sizeof st0 / sizeof st0[0]; i++) {
            push(&t, 100, b + (uint64_t)st0[i].t0 * us, st0[i].msg, 1, st0[i].payload);
            tk_tw_pop(&t, 100, b + (uint64_t)st0[i].t1 * us);
        }
        tk_tw_pop(&t, 100, b + 8000 * us);
        tk_tw_flush(&t, PP_BLOCK_EVENTS, 100);
        push(&t, 101, b - 3000 * us, s_step, 2, (uint64_t)step);
        for (size_t i = 0; i < sizeof st1 / sizeof st1[0]; i++) {
            push(&t, 101, (uint64_t)((int64_t)b + st1[i].t0 * (int64_t)us), st1[i].msg, 2,
                 st1[i].payload);
            tk_tw_pop(&t, 101, b + (uint64_t)st1[i].t1 * us);
        }
        tk_tw_pop(&t, 101, b + 7000 * us);
        tk_tw_flush(&t, PP_BLOCK_EVENTS, 101);
    }
    pp_trace_writer_close(t.w);
}


/* The queue job (with `transit`, its receive in transit) written into g_dir and analyzed. */
static pp_analysis *analyze_queue_job(int transit)
{
    char path[256];
    snprintf(path, sizeof path, "%s/queues.pft", g_dir);
    write_queue_job(path, transit);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_OK, "%s", pp_error_message());
    return a;
}

Test(analyzer, a_queue_job_gets_its_period_and_its_link_latency)
{
    pp_analysis *a = analyze_queue_job(0);
    cr_assert_eq(a->S, 2);
    cr_assert_eq(a->n_steps, 2u, "3 steps, 1 warm-up");
    /* the windows overlap (11 ms: stage 1 opens 3 ms early), the period is 10 ms */
    for (size_t i = 0; i < a->n_steps; i++) {
        cr_assert_float_eq(a->steps[i].window_ns, 11e6, 1.0);
        cr_assert_float_eq(a->steps[i].step_ns, 10e6, 1.0, "step %lld: %.0f ns",
                           (long long)a->steps[i].step, a->steps[i].step_ns);
        /* the bubble follows: idle = period - busy */
        for (int s = 0; s < 2; s++)
            cr_assert_float_eq(a->steps[i].stage[s].idle_ns,
                               10e6 - a->steps[i].stage[s].busy_ns, 1.0);
    }
    cr_assert_float_eq(a->stages[0].busy_ns, 4.952e6, 1.0);
    cr_assert_float_eq(a->stages[1].busy_ns, 5.949e6, 1.0);
    /* one message per link and step was observed in flight, for 40 us; the receives that found
     * their data waiting are not timed (from the send they would read 545 us and 105 us) */
    cr_assert_eq(a->n_links, 2u);
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        cr_assert_eq(l->messages, 4u, "2 micro-batches x 2 steps");
        cr_assert_eq(l->timed, 2u, "%d -> %d", l->src, l->dst);
        cr_assert_float_eq(l->latency_ns.median, 40e3, 1.0, "%d -> %d: %.0f ns", l->src,
                           l->dst, l->latency_ns.median);
        cr_assert_float_eq(l->latency_ns.max, 40e3, 1.0);
        cr_assert_float_eq(l->bandwidth_GBps, 4096.0 / 40e3, 1e-9);
        /* ... they are the receiver's own time instead: 5 us each, one a step */
        cr_assert_eq(l->recv_time_ns.count, 2u, "%d -> %d", l->src, l->dst);
        cr_assert_float_eq(l->recv_time_ns.median, 5e3, 1.0, "%d -> %d: %.0f ns", l->src,
                           l->dst, l->recv_time_ns.median);
    }
    pp_analysis_free(a);
}

/* A receive that came after its send had returned but while its message was still on the way
 * (it began 10 us after the send's start and lasted 30) waited for the link, not for its
 * receiver: not the receiver's own time (nor timed: it began after the send ended). One that
 * came later than it lasts (the gradients', 5 us, 100 us after their send) is the receiver's
 * own time, as before. */
Test(analyzer, a_receive_while_its_message_is_on_the_way_waits_for_the_link)
{
    pp_analysis *a = analyze_queue_job(1);
    cr_assert_eq(a->n_links, 2u);
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        if (!l->grad) {
            cr_assert_eq(l->timed, 2u, "the first receive of each step");
            cr_assert_float_eq(l->latency_ns.median, 40e3, 1.0);
            cr_assert_eq(l->recv_time_ns.count, 0u, "%.0f ns", l->recv_time_ns.median);
        } else {
            cr_assert_eq(l->timed, 2u);
            cr_assert_eq(l->recv_time_ns.count, 2u);
            cr_assert_float_eq(l->recv_time_ns.median, 5e3, 1.0);
        }
    }
    pp_analysis_free(a);
}

/* A job in the way torch's _PipelineScheduleRuntime runs one: sends asynchronous (each range
 * runs on to its wait, past the stage's next ops), receives posted before the compute op ahead
 * of the one that needs them and waited for in that one's action. Steps 10 ms apart, us from
 * each step's base b:
 *   stage 0  step [0, 8000]: fwd0 [0, 1000], send_act0 [1000, 6500] (its own part to 1100),
 *            fwd1 [1100, 2100], send_act1 [2100, 6600] (its own part to 2200: handed over),
 *            recv_grad0 [2200, 4650], bwd0 [4650, 5650], recv_grad1 [5650, 5720],
 *            bwd1 [5720, 6720], opt [7000, 7500]
 *   stage 1  step [-1000, 8500]: recv_act0 [-500, 1050], recv_act1 [1045, 2500] (posted 5 us
 *            before fwd0, which runs inside it), fwd0 [1050, 2050], fwd1 [2500, 3500],
 *            bwd0 [3500, 4500], send_grad0 [4500, 8000] (own part to 4600), bwd1 [4600, 5600],
 *            send_grad1 [5600, 8100] (own part to 5700), opt [5700, 6000]
 * After fwd0 stage 1 waits for act1 until it is handed over (2200), then spends 300 us of its
 * own (the Python between actions) before fwd1. */
static void write_early_recv_job(const char *path)
{
    static tk_tw t;
    two_mb_names nm;
    open_two_mb_job(&t, path, 44, &nm);
    const uint32_t s_step = nm.step, s_opt = nm.opt, *s_fwd = nm.fwd, *s_bwd = nm.bwd;
    const uint32_t *s_sa = nm.sa, *s_ra = nm.ra, *s_sg = nm.sg, *s_rg = nm.rg;
    const uint64_t us = 1000, T0 = 1000000 * us;
    typedef struct { uint32_t msg; int64_t t0, t1; uint64_t payload; } r;
    for (int step = 1; step <= 3; step++) {
        uint64_t b = T0 + (uint64_t)(step - 1) * 10000 * us;
        const r st0[] = {{s_fwd[0], 0, 1000, 0},      {s_sa[0], 1000, 6500, 4096},
                         {s_fwd[1], 1100, 2100, 1},   {s_sa[1], 2100, 6600, 4096},
                         {s_rg[0], 2200, 4650, 4096}, {s_bwd[0], 4650, 5650, 0},
                         {s_rg[1], 5650, 5720, 4096}, {s_bwd[1], 5720, 6720, 1},
                         {s_opt, 7000, 7500, 0}};
        const r st1[] = {{s_ra[0], -500, 1050, 4096}, {s_ra[1], 1045, 2500, 4096},
                         {s_fwd[0], 1050, 2050, 0},   {s_fwd[1], 2500, 3500, 1},
                         {s_bwd[0], 3500, 4500, 0},   {s_sg[0], 4500, 8000, 4096},
                         {s_bwd[1], 4600, 5600, 1},   {s_sg[1], 5600, 8100, 4096},
                         {s_opt, 5700, 6000, 0}};
        const r *sts[2] = {st0, st1};
        const size_t ns[2] = {sizeof st0 / sizeof st0[0], sizeof st1 / sizeof st1[0]};
        const int64_t open[2] = {0, -1000}, close[2] = {8000, 8500};
        for (int s = 0; s < 2; s++) {
            uint32_t tid = 100 + (uint32_t)s;
            /* an asynchronous send and an early receive overlap the stage's next ops without
             * nesting: each range on a thread of its own (its category gives its stage) */
            push(&t, tid, (uint64_t)((int64_t)b + open[s] * (int64_t)us), s_step,
                 (uint32_t)s + 1, (uint64_t)step);
            tk_tw_pop(&t, tid, (uint64_t)((int64_t)b + close[s] * (int64_t)us));
            tk_tw_flush(&t, PP_BLOCK_EVENTS, tid);
            for (size_t i = 0; i < ns[s]; i++) {
                uint32_t rt = tid + 10 * (uint32_t)(i + 1);
                push(&t, rt, (uint64_t)((int64_t)b + sts[s][i].t0 * (int64_t)us), sts[s][i].msg,
                     (uint32_t)s + 1, sts[s][i].payload);
                tk_tw_pop(&t, rt, (uint64_t)((int64_t)b + sts[s][i].t1 * (int64_t)us));
                tk_tw_flush(&t, PP_BLOCK_EVENTS, rt);
            }
        }
    }
    pp_trace_writer_close(t.w);
}

/* A receive posted early (its stage computes inside it) waited, after that compute, only
 * until its message was handed over (its send's own part ended); the rest of its range is its
 * stage's own time between ops (a gap, the cost file's op_gap_us), not a wait, and posting it
 * (its range up to its stage's next op) is its receiver's own time. An asynchronous send's
 * range that runs on past the stage's last op does not shorten the stage's time outside its
 * ops (the per-step fixed cost). */
Test(analyzer, a_receive_posted_early_waits_only_until_its_message_was_handed_over)
{
    char path[256];
    snprintf(path, sizeof path, "%s/early.pft", g_dir);
    write_early_recv_job(path);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->S, 2);
    cr_assert_eq(a->n_steps, 2u, "3 steps, 1 warm-up");
    for (size_t i = 0; i < a->n_steps; i++) {
        const pp_astep *sp = &a->steps[i];
        /* stage 1: 300 us between the handing over of act1 (2200) and fwd1 (2500); before, the
         * receive's range covered it and the stage read no gap */
        cr_assert_float_eq(sp->stage[1].gap_ns, 300e3, 1.0, "step %lld: %.0f ns",
                           (long long)sp->step, sp->stage[1].gap_ns);
        cr_assert_float_eq(sp->stage[0].gap_ns, 0.0, 1.0, "%.0f ns", sp->stage[0].gap_ns);
        /* stage 1's period (10 ms) less its ops' span, from recv_act0 (-500) to its optimizer
         * step's end (6000): its sends' ranges that run to 8100 are not its work (1400 us
         * before); the last step has no next one to measure it to */
        if (sp->step < 3)
            cr_assert_float_eq(sp->stage[1].outside_ns, 3500e3, 1.0, "step %lld: %.0f ns",
                               (long long)sp->step, sp->stage[1].outside_ns);
    }
    cr_assert_eq(a->n_links, 2u);
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        if (l->grad)
            continue;
        /* recv_act0 blocks 1550 us, recv_act1 from fwd0's end (2050) to its message's handing
         * over (2200): 150 us (450 before, to its range's end), per step */
        cr_assert_float_eq(l->wait_ns, 2 * (1550e3 + 150e3), 1.0, "%.0f ns", l->wait_ns);
        /* posting recv_act1 took its receiver 5 us (before, no early receive was a sample) */
        cr_assert_eq(l->recv_time_ns.count, 2u, "%llu", (unsigned long long)l->recv_time_ns.count);
        cr_assert_float_eq(l->recv_time_ns.median, 5e3, 1.0, "%.0f ns", l->recv_time_ns.median);
    }
    pp_analysis_free(a);
}

/* A job that announced neither samples nor tokens per step: its throughput is unknown, and the
 * table says so instead of printing 0 (the JSON has null, tests/test_report.c). */
Test(analyzer, unannounced_counts_print_as_unknown)
{
    pp_analysis *a = analyze_queue_job(0);
    cr_assert_eq(a->samples_per_step, 0.0);
    cr_assert_eq(a->tokens_per_step, 0.0);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    pp_analysis_print(a, f);
    fclose(f);
    cr_assert(strstr(text, "throughput unknown") != NULL, "%s", text);
    cr_assert(strstr(text, "0 tokens/s") == NULL && strstr(text, "0.0 samples/s") == NULL, "%s",
              text);
    free(text);
    /* announced samples but no tokens: samples/s known, tokens/s unknown */
    a->samples_per_s = 100;
    text = NULL;
    f = open_memstream(&text, &len);
    pp_analysis_print(a, f);
    fclose(f);
    cr_assert(strstr(text, "throughput 100.0 samples/s, unknown tokens/s") != NULL, "%s", text);
    free(text);
    pp_analysis_free(a);
}

/* A capture that lost most of its events (full buffers) and kept no step: the error names the
 * drops as the likely reason, not the convention. */
Test(analyzer, heavy_drops_are_named_when_no_steps_are_found)
{
    static tk_tw t;
    char path[256];
    snprintf(path, sizeof path, "%s/dropped.pft", g_dir);
    tk_tw_open(&t, path, 0, 0);
    uint32_t dom = tk_tw_sid(&t, "pipeprof"), s_fwd = tk_tw_sid(&t, "fwd mb0");
    pp_rec_domain d = {{PP_REC_DOMAIN, sizeof d, 0, 0}, 1, dom};
    tk_tw_rec(&t, &d, sizeof d);
    tk_tw_flush(&t, PP_BLOCK_META, 0);
    /* a few forwards survived; their step ranges did not */
    for (int i = 0; i < 5; i++) {
        push(&t, 7, 1000000 + (uint64_t)i * 2000, s_fwd, 1, 0);
        tk_tw_pop(&t, 7, 1001000 + (uint64_t)i * 2000);
    }
    tk_tw_flush(&t, PP_BLOCK_EVENTS, 7);
    pp_rec_footer ft;
    memset(&ft, 0, sizeof ft);
    ft.events = 10;
    ft.dropped = 90;
    ft.threads = 1;
    cr_assert_eq(pp_trace_writer_footer(t.w, &ft), PP_OK, "%s", pp_error_message());
    pp_trace_writer_close(t.w);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_ERR_INVALID);
    const char *m = pp_error_message();
    cr_assert(strstr(m, "no pipeline steps") != NULL, "%s", m);
    cr_assert(strstr(m, "dropped 90 of 100 events") != NULL, "%s", m);
    cr_assert(strstr(m, "PPROF_BUFFER_KB") != NULL, "%s", m);
    cr_assert(strstr(m, "NVTX convention") == NULL, "%s", m);
}

Test(analyzer, damaged_and_foreign_run_directories)
{
    pp_analysis *a = NULL;
    /* a missing directory, an empty one */
    cr_assert_eq(pp_analyze_dir("/tmp/pp_no_such_run_dir", NULL, &a), PP_ERR_IO);
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "no trace files") != NULL, "%s", pp_error_message());
    /* a garbage trace only */
    char path[256];
    snprintf(path, sizeof path, "%s/junk.pft", g_dir);
    FILE *f = fopen(path, "w");
    fputs("this is not a trace", f);
    fclose(f);
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "no readable trace") != NULL, "%s", pp_error_message());
    /* plus a good one: analyzed, with a warning about the junk */
    snprintf(path, sizeof path, "%s/good.pft", g_dir);
    write_foreign_trace(path);
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert(strstr(a->warnings, "junk.pft") != NULL, "%s", a->warnings);
    cr_assert(strstr(a->warnings, "no footer") != NULL, "%s", a->warnings);
    pp_analysis_free(a);
    /* truncated in the middle: what is left is analyzed, the damage reported */
    struct stat sb;
    stat(path, &sb);
    cr_assert_eq(truncate(path, sb.st_size - 100), 0);
    char junk[256];
    snprintf(junk, sizeof junk, "%s/junk.pft", g_dir);
    unlink(junk);
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_OK, "%s", pp_error_message());
    /* the cut took stage 1's ranges of the last step: that step is reported without a
     * decomposition, the earlier one in full */
    cr_assert_eq(a->n_steps, 2u);
    cr_assert(a->steps[0].decomposed);
    cr_assert(!a->steps[1].decomposed);
    cr_assert(strstr(a->warnings, "truncated") != NULL, "%s", a->warnings);
    cr_assert(strstr(a->warnings, "could not be replayed") != NULL, "%s", a->warnings);
    pp_analysis_free(a);
}

/* PyTorch's autograd engine launches every backward kernel from a thread of its own (one per
 * device) while the stage's thread waits inside its backward range: on an H200 the torch job
 * of benchmarks/gpu/ read 0.000 ms of GPU backward for both stages. The same layout with the
 * backward launched by such threads (on the streams the stages' forwards used): the records
 * are adopted by the stage's range open at the launch, and every number is the one of the
 * same job launching from the stage's thread; a launch from such a thread on a stream no stage
 * used, while both stages' ranges are open, stays unprojected (ambiguous). */
Test(analyzer, gpu_work_launched_by_a_thread_outside_the_ranges_is_adopted_by_its_stage)
{
    pp_analysis *ref = analyze_foreign_gpu(1), *a = analyze_foreign_gpu(2);
    const pp_gpu_result *g = &a->gpu, *r = &ref->gpu;
    cr_assert_eq(r->adopted, 0);
    cr_assert_eq(g->records, r->records + 3);
    cr_assert_eq(g->projected, r->projected);
    cr_assert_eq(g->adopted, 2 * 2 * 2, "both stages' backward of the 2 analyzed steps");
    cr_assert_eq(g->ambiguous, 3);
    cr_assert_eq(g->unattributed, r->unattributed + 3);
    cr_assert_not_null(strstr(a->warnings, "ranges of two stages"), "%s", a->warnings);
    for (int s = 0; s < 2; s++) {
        cr_assert_eq(g->stages[s].bwd_median_ns, 1200000.0, "stage %d", s);
        cr_assert_eq(g->stages[s].bwd_median_ns, r->stages[s].bwd_median_ns);
        cr_assert_eq(g->stages[s].fwd_median_ns, r->stages[s].fwd_median_ns);
        cr_assert_eq(g->stages[s].busy_ns, r->stages[s].busy_ns);
        cr_assert_eq(g->stages[s].bubble_ratio, r->stages[s].bubble_ratio);
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    pp_analysis_print(a, f);
    fclose(f);
    cr_assert_not_null(strstr(text, "(8 of them launched by a thread with no range open"), "%s",
                       text);
    free(text);
    pp_analysis_free(ref);
    pp_analysis_free(a);
}

/* A stage whose GPU records are all gone (dropped, or launched where they cannot be matched)
 * reads 0 ms of GPU time, as pptrain's stage 0 did on an H200: the analysis says that the
 * figure is unknown rather than zero, naming the stage. */
Test(analyzer, a_stage_without_any_gpu_work_is_named)
{
    pp_analysis *a = analyze_foreign_gpu(3);
    cr_assert_eq(a->gpu.stages[1].busy_ns, 0.0);
    cr_assert_gt(a->gpu.stages[0].busy_ns, 0.0);
    cr_assert_not_null(strstr(a->warnings, "no GPU work was projected onto the ranges of stage "
                                           "1 (forward and backward)"),
                       "%s", a->warnings);
    pp_analysis_free(a);
}

Test(analyzer, a_job_without_pipeline_ranges_gets_the_generic_view)
{
    /* a valid trace with no pipeprof domain: its range is the analysis (ranges.c) */
    static tk_tw t;
    char path[256];
    snprintf(path, sizeof path, "%s/plain.pft", g_dir);
    tk_tw_open(&t, path, 0, 0);
    push(&t, 7, 100, 0, 0, 0);
    tk_tw_pop(&t, 7, 200);
    tk_tw_flush(&t, PP_BLOCK_EVENTS, 7);
    pp_trace_writer_close(t.w);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->S, 0);
    cr_assert_eq(a->n_steps, 0u);
    cr_assert_eq(a->n_ranges, 1u);
    cr_assert_eq(a->ranges[0].ns.count, 1u);
    cr_assert_float_eq(a->ranges[0].ns.sum, 100.0, 1e-9);
    cr_assert_float_eq(a->wall_ns, 100.0, 1e-9);
    pp_analysis_free(a);
    /* a trace with no range or mark at all stays a clear error */
    unlink(path);
    tk_tw_open(&t, path, 0, 0);
    pp_trace_writer_close(t.w);
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "no NVTX range or mark") != NULL, "%s",
              pp_error_message());
}

/* GPU time: the kernels land on the ranges that launched them (by the launching thread and the
 * launch call's time), per-stage forward/backward GPU times are the kernels', the bubble in GPU
 * time follows from the stages' busy time over the step's GPU span, the device's busy time is
 * the union of its kernels, and NCCL's sends give the link's bandwidth. Numbers worked by hand
 * from write_foreign_trace_gpu's layout (steps 2 and 3 analyzed). */
Test(analyzer, gpu_records_project_onto_the_pipeline_ranges)
{
    char path[128];
    snprintf(path, sizeof path, "%s/gpu.pft", g_dir);
    write_foreign_trace_gpu(path, 1);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_OK, "%s", pp_error_message());
    const pp_gpu_result *g = &a->gpu;
    cr_assert(g->present);
    cr_assert_eq(a->n_steps, 2);
    /* 3 steps x (8 pipeline kernels + 1 outside): 2 x 8 projected in analyzed steps, 8 in the
     * warm-up step, 3 unattributed */
    cr_assert_eq(g->records, 27);
    cr_assert_eq(g->projected, 16);
    cr_assert_eq(g->outside_steps, 8);
    cr_assert_eq(g->unattributed, 3);
    cr_assert_not_null(strstr(a->warnings, "could not be projected"), "%s", a->warnings);
    cr_assert_null(strstr(a->warnings, "no GPU work was projected"), "%s", a->warnings);
    for (int s = 0; s < 2; s++) {
        const pp_gpu_stage *st = &g->stages[s];
        cr_assert_eq(st->fwd_median_ns, 600000.0, "stage %d fwd %.0f", s, st->fwd_median_ns);
        cr_assert_eq(st->bwd_median_ns, 1200000.0, "stage %d bwd %.0f", s, st->bwd_median_ns);
        cr_assert_eq(st->fwd_ranges, 4, "stage %d: %llu forward ranges", s, (unsigned long long)st->fwd_ranges);
        cr_assert_eq(st->busy_ns, 3600000.0);
        cr_assert_eq(st->launch_lag_ns, 50000.0);
        /* GPU span of a step: 0.05 ms .. 6.25 ms */
        cr_assert(fabs(st->bubble_ratio - (1.0 - 3.6 / 6.2)) < 1e-9, "bubble %.6f",
                  st->bubble_ratio);
    }
    cr_assert_eq(g->step_ns, 6200000.0);
    /* both stages' work (7.2 ms a step) is all the work inside the analyzed steps (the stray
     * kernel runs after the step's ranges close) */
    cr_assert_eq(g->projected_ns, 7200000.0);
    cr_assert_eq(g->work_ns, 7200000.0);
    /* device 0: union 0.6 + 0.6 + 0.6 + 3.2 ms per step */
    cr_assert_eq(g->n_devices, 1);
    cr_assert_eq(g->devices[0].busy_ns, 2 * 5000000.0);
    cr_assert_eq(g->device_busy_ns, 5000000.0);
    cr_assert(fabs(g->devices[0].utilisation - 10.0 / 16.2) < 1e-9);
    /* NCCL: 6 sends 0 -> 1 of 4 MiB, 1 ms each on the GPU: 4.194 GB/s */
    cr_assert_eq(g->n_links, 1);
    cr_assert_eq(g->links[0].messages, 6);
    cr_assert_eq(g->links[0].bytes, 6u * (4u << 20));
    cr_assert(fabs(g->links[0].algbw_GBps - 4.194304) < 1e-9);
    /* the summary JSON carries it (docs/summary-json.md "gpu"), and the table */
    char *json = NULL, *table = NULL;
    size_t jn = 0, tn = 0;
    FILE *f = open_memstream(&json, &jn);
    cr_assert_eq(pp_report_json(a, f), PP_OK);
    fclose(f);
    cr_assert_not_null(strstr(json, "\"gpu\": {"), "%s", json);
    cr_assert_not_null(strstr(json, "\"algbw_GBps\": 4.194304"), "%s", json);
    f = open_memstream(&table, &tn);
    pp_analysis_print(a, f);
    fclose(f);
    cr_assert_not_null(strstr(table, "GPU time: 27 records, 16 projected"), "%s", table);
    /* the Chrome trace shows the kept step's GPU work on per-stream tracks, and NCCL's sends:
     * 8 kernels and 2 sends in step 3 */
    char *chrome = NULL;
    size_t cn = 0;
    f = open_memstream(&chrome, &cn);
    cr_assert_eq(pp_report_chrome(a, f), PP_OK);
    fclose(f);
    cr_assert_eq(a->gpu.n_spans, 10);
    cr_assert_not_null(strstr(chrome, "\"GPU 0 stream 1\""), "%s", chrome);
    cr_assert_not_null(strstr(chrome, "\"GPU 0 stream 2\""), "%s", chrome);
    cr_assert_not_null(strstr(chrome, "\"gpu bwd (stage 1)\""), "%s", chrome);
    cr_assert_not_null(strstr(chrome, "\"NCCL (GPU)\""), "%s", chrome);
    cr_assert_not_null(strstr(chrome, "\"Send peer 1\""), "%s", chrome);
    free(chrome);
    free(json);
    free(table);
    pp_analysis_free(a);
}

/* The Gantt draws the GPU capture too: the stages' GPU work in a thin band at the top of their
 * rows and NCCL's GPU spans on the sender's row (data file kinds gpu and nccl). */
Test(analyzer, gantt_data_carries_gpu_work_and_nccl_spans)
{
    char path[128];
    snprintf(path, sizeof path, "%s/gpu.pft", g_dir);
    write_foreign_trace_gpu(path, 1);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(g_dir, NULL, &a), PP_OK, "%s", pp_error_message());
    char *data = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&data, &n);
    cr_assert_eq(pp_report_gantt_data(a, f), PP_OK);
    fclose(f);
    int gpu = 0, nccl = 0;
    for (char *p = data; (p = strstr(p, " gpu ")); p++)
        gpu++;
    for (char *p = data; (p = strstr(p, " nccl ")); p++)
        nccl++;
    cr_assert_eq(gpu, 8, "%s", data);
    cr_assert_eq(nccl, 2, "%s", data);
    /* stage 1's first backward kernel: step 3 starts at 1020 ms, launched at +3.05 ms */
    cr_assert_not_null(strstr(data, "1 3.050000 4.250000 gpu -1 -1"), "%s", data);
    free(data);
    pp_analysis_free(a);
}

/* NCCL ranks are communicator ranks: over 2-rank link communicators (pptrain's NCCL transport,
 * one per link and direction) stage 1 sends to stage 2 as rank 0 to peer 1, and stage 2 sends
 * back as rank 0 too. The links are reported between stages, from each process's pipeline
 * ranges and which process holds the peer's rank of the communicator (what the analyzer's host
 * pass finds, handed to the streaming projection); a process that runs several stages keeps the
 * communicator's numbers. */
Test(analyzer, nccl_links_between_stages_over_two_rank_communicators)
{
    const uint64_t ms = 1000000;
    int64_t steps[1] = {1};
    uint64_t w0[1] = {0}, w1[1] = {10 * ms};
    pp_gpu_proj *p = NULL;
    cr_assert_eq(pp_gpu_proj_create(&p, steps, w0, w1, 1, 3, 0), PP_OK);
    int32_t stage_of_file[4] = {0, 1, 2, -2};
    const pp_gpu_nccl_member members[] = {{0xa, 0, 1}, {0xa, 1, 2}, {0xb, 0, 2}, {0xb, 1, 1},
                                          {0xc, 1, 0}, {0xc, 0, 1}, {0xd, 0, 3}};
    cr_assert_eq(pp_gpu_proj_nccl_stages(p, stage_of_file, 4, members,
                                         sizeof members / sizeof members[0]),
                 PP_OK);
    /* files 0, 1, 2: the processes of stages 0, 1, 2; file 3 runs stages 0 and 1 */
    for (int f = 0; f < 3; f++)
        pp_gpu_proj_range(p, f, 100 + f, 1, f, PP_GOP_FWD, ms, 2 * ms);
    pp_gpu_proj_range(p, 3, 200, 1, 0, PP_GOP_FWD, ms, 2 * ms);
    pp_gpu_proj_range(p, 3, 201, 1, 1, PP_GOP_FWD, ms, 2 * ms);
    /* comm 0xa: 1 -> 2 (stage 1 is rank 0), 0xb: 2 -> 1 (stage 2 is rank 0), 0xc: 0 -> 1 with
     * the sender as rank 1 */
    struct {
        int file;
        uint64_t comm;
        int rank, peer, func;
    } recs[] = {{1, 0xa, 0, 1, PP_NCCL_SEND}, {2, 0xa, 1, 0, PP_NCCL_RECV},
                {2, 0xb, 0, 1, PP_NCCL_SEND}, {1, 0xb, 1, 0, PP_NCCL_RECV},
                {0, 0xc, 1, 0, PP_NCCL_SEND}, {1, 0xc, 0, 1, PP_NCCL_RECV},
                {3, 0xd, 0, 1, PP_NCCL_SEND}};
    for (size_t i = 0; i < sizeof recs / sizeof recs[0]; i++) {
        pp_rec_nccl n;
        memset(&n, 0, sizeof n);
        n.h.type = PP_REC_NCCL;
        n.h.size = sizeof n;
        n.func = (uint8_t)recs[i].func;
        n.comm = recs[i].comm;
        n.rank = recs[i].rank;
        n.peer = recs[i].peer;
        n.nranks = 2;
        n.bytes = 1u << 20;
        n.timed = 1;
        n.start = ms;
        n.end = ms + 1000;
        n.gpu_start = ms + 2000;
        n.gpu_end = ms + 2000 + 1000000;
        pp_gpu_proj_nccl(p, recs[i].file, &n);
    }
    pp_gpu_result g;
    cr_assert_eq(pp_gpu_proj_finish(p, &g), PP_OK);
    int want[4][2] = {{1, 2}, {2, 1}, {0, 1}, {0, 1}};
    int seen[4] = {0, 0, 0, 0};
    cr_assert_eq(g.n_links, 3, "1 -> 2, 2 -> 1, 0 -> 1 (twice: stages, and file 3's numbers)");
    for (size_t i = 0; i < g.n_links; i++) {
        int k = 0;
        while (k < 3 && !(g.links[i].src == want[k][0] && g.links[i].dst == want[k][1]))
            k++;
        cr_assert_lt(k, 3, "unexpected link %d -> %d", g.links[i].src, g.links[i].dst);
        seen[k]++;
        cr_assert_eq(g.links[i].messages, k == 2 ? 2 : 1);
    }
    cr_assert(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
    pp_gpu_result_free(&g);
    pp_gpu_proj_destroy(p);
}
