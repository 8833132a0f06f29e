/* test_mpi_capture.c: multi-process pipelines captured end to end: pprof-run around mpirun and
 * mpirun around pprof-run give the same kind of run directory, on which pprof-report (JSON and
 * Gantt), pprof-tune and pprof-check work; a rank slowed on purpose is named as the culprit of
 * the others' waits; a rank that dies mid-run fails the job and leaves readable traces, and a
 * stage without a trace is named. Skips without MPI, mpirun or libpprof.so. */
#include "pp_analyzer.h"
#include "pp_extract.h"
#include "pp_sim.h"

#include "pp_testkit.h"

#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"
#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
#define PPREPORT PP_BUILD_DIR "/tools/pprof-report"
#define PPTUNE PP_BUILD_DIR "/tools/pprof-tune"
#define PPCHECK PP_BUILD_DIR "/tools/pprof-check"
#define LIBPPROF PP_BUILD_DIR "/profiler/libpprof.so"

static void setup(void) { tk_dir_create("pp_test_mpicap"); }

TestSuite(mpi_capture, .init = setup, .fini = tk_dir_remove, .timeout = 120);

static void skip_without_mpi(void)
{
#ifndef PP_HAVE_MPI
    cr_skip_test("this build has no MPI");
#endif
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        cr_skip_test("mpirun not found (apt-get install openmpi-bin libopenmpi-dev)");
    if (access(LIBPPROF, R_OK) != 0)
        cr_skip_test("no libpprof.so in this build (NVTX headers missing)");
}

/* Runs argv (NULL-terminated, argv[0] searched in PATH) in the test's directory with stdout and
 * stderr captured; the environment for mpirun as root, plus `env` (NAME=VALUE, NULL-ended). The
 * result lives until the next call. */
static tk_result *run(const char *const *argv, const char *const *env)
{
    static tk_result r;
    tk_result_free(&r);
    r = tk_runv(argv, tk_mpirun_env(env));
    return &r;
}

/* 8 layers of 1 ms / 2 ms with 1 MB activations over a 10 GB/s link: sends and receives show. */
static const char *write_costs(void)
{
    return tk_write_costs("costs.json", 8, 1000, 2000, 1000000, 0, 10.0, 50);
}

#define MPIRUN                                                                                   \
    "mpirun", "--oversubscribe", "--mca", "btl", "self,vader", "--mca",                          \
        "btl_vader_single_copy_mechanism", "none", "-np", "4"
#define TRAIN(costs, steps)                                                                      \
    PPTRAIN, "--backend", "sim", "--costs", costs, "--stages", "4", "--schedule", "1f1b",        \
        "--microbatches", "8", "--steps", steps, "--transport", "mpi", "-q"

static pp_analysis *analyze(const char *dir)
{
    pp_analysis_options o;
    pp_analysis_options_default(&o);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, &o, &a), PP_OK, "%s: %s", dir, pp_error_message());
    return a;
}

static cJSON *report_json(const char *dir)
{
    const char *argv[] = {PPREPORT, dir, "--json", NULL};
    tk_result *r = run(argv, NULL);
    cr_assert_eq(r->code, 0, "pprof-report --json: %s", r->err);
    cJSON *j = cJSON_Parse(r->out);
    cr_assert_not_null(j, "not JSON: %.300s", r->out);
    return j;
}

static void check_run_dir(const char *dir)
{
    /* four trace files, ranks 0..3 in their headers */
    pp_analysis *a = analyze(dir);
    cr_assert_eq(a->n_files, 4, "%zu trace files", a->n_files);
    int seen = 0;
    for (size_t i = 0; i < a->n_files; i++) {
        cr_assert(a->files[i].rank >= 0 && a->files[i].rank < 4, "rank %d",
                  (int)a->files[i].rank);
        seen |= 1 << a->files[i].rank;
    }
    cr_assert_eq(seen, 0xf, "ranks seen: mask %#x", seen);
    cr_assert_eq(a->S, 4);
    pp_analysis_free(a);
    cJSON *j = report_json(dir);
    cJSON *pipe = cJSON_GetObjectItem(j, "pipeline"), *an = cJSON_GetObjectItem(j, "analysis");
    cr_assert_eq(cJSON_GetObjectItem(pipe, "stages")->valueint, 4);
    cr_assert_geq(cJSON_GetObjectItem(an, "steps")->valueint, 2);
    cJSON_Delete(j);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        const char *png = tk_path("gantt.png");
        const char *g[] = {PPREPORT, dir, "--gantt", png, NULL};
        tk_result *r = run(g, NULL);
        cr_assert_eq(r->code, 0, "--gantt: %s", r->err);
        char head[8] = {0};
        FILE *f = fopen(png, "rb");
        cr_assert_not_null(f);
        cr_assert_eq(fread(head, 1, 4, f), 4);
        fclose(f);
        cr_assert_eq(memcmp(head, "\x89PNG", 4), 0);
    }
    const char *t[] = {PPTUNE, dir, NULL};
    tk_result *r = run(t, NULL);
    cr_assert_eq(r->code, 0, "pprof-tune: %s", r->err);
    const char *c[] = {PPCHECK, "--save-baseline", dir, NULL};
    r = run(c, NULL);
    cr_assert_eq(r->code, 0, "pprof-check --save-baseline: %s", r->err);
    cr_assert_not_null(strstr(r->out, "\"baseline_version\""), "%.300s", r->out);
}

Test(mpi_capture, pprof_run_around_mpirun)
{
    skip_without_mpi();
    const char *costs = write_costs(), *dir = tk_path("run");
    const char *argv[] = {PPRUN, "-q", "-o", dir, "--", MPIRUN, TRAIN(costs, "4"), NULL};
    tk_result *r = run(argv, NULL);
    cr_assert_eq(r->code, 0, "pprof-run -- mpirun: %s", r->err);
    check_run_dir(dir);
}

Test(mpi_capture, mpirun_around_pprof_run)
{
    skip_without_mpi();
    const char *costs = write_costs(), *dir = tk_path("run");
    const char *argv[] = {MPIRUN, PPRUN, "-q", "-o", dir, "--", TRAIN(costs, "4"), NULL};
    tk_result *r = run(argv, NULL);
    cr_assert_eq(r->code, 0, "mpirun pprof-run: %s", r->err);
    struct stat sb;
    for (int k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof name, "run/manifest.%d.json", k);
        cr_assert_eq(stat(tk_path(name), &sb), 0, "no %s", name);
    }
    check_run_dir(dir);
}

/* Stage 2 computes twice as slowly: every stage's imbalance is blamed on it. */
Test(mpi_capture, straggler_is_the_culprit)
{
    skip_without_mpi();
    const char *costs = write_costs(), *dir = tk_path("run");
    const char *argv[] = {PPRUN,           "-q",       "-o", dir, "--", MPIRUN, TRAIN(costs, "4"),
                          "--sim-slow", "2=2", NULL};
    tk_result *r = run(argv, NULL);
    cr_assert_eq(r->code, 0, "%s", r->err);
    cJSON *j = report_json(dir);
    cJSON *stages = cJSON_GetObjectItem(j, "stages"), *s;
    cr_assert_eq(cJSON_GetArraySize(stages), 4);
    cJSON_ArrayForEach(s, stages)
    {
        int stage = cJSON_GetObjectItem(s, "stage")->valueint;
        int culprit = cJSON_GetObjectItem(s, "imbalance_culprit")->valueint;
        cr_expect_eq(culprit, 2, "stage %d: imbalance culprit %d", stage, culprit);
    }
    cJSON_Delete(j);
}

/* Rank 2 kills itself at step 4: mpirun ends the job, pprof-run returns its failure, and the
 * traces cut off by the kill are still analyzed. mpirun kills the other ranks as well, all of
 * them inside step 3's end, so the traces end together; with rank 2's trace removed, the
 * report names the stage that has none. */
Test(mpi_capture, dead_rank)
{
    skip_without_mpi();
    const char *costs = write_costs(), *dir = tk_path("run");
    const char *argv[] = {PPRUN, "-q", "-o", dir, "--", MPIRUN, TRAIN(costs, "6"), NULL};
    const char *env[] = {"PPTRAIN_TEST_DIE_RANK=2", "PPTRAIN_TEST_DIE_STEP=4", NULL};
    tk_result *r = run(argv, env);
    cr_assert_neq(r->code, 0, "the job's failure must come back: %s", r->err);
    pp_analysis *a = analyze(dir);
    cr_assert_eq(a->n_files, 4);
    int rank2 = -1;
    for (size_t i = 0; i < a->n_files; i++) {
        cr_assert_eq(a->files[i].damage.blocks_bad, 0, "%s damaged", a->files[i].path);
        if (a->files[i].rank == 2)
            rank2 = (int)i;
    }
    cr_assert_geq(rank2, 0);
    cr_assert_geq(a->n_steps, 1);
    cr_assert_not_null(strstr(a->warnings, "no footer"), "warnings: %s", a->warnings);
    cr_assert_not_null(strstr(a->warnings, "rank 2 died"), "warnings: %s", a->warnings);
    /* the manifest names the rank whose process died among its lost processes */
    char *text = tk_slurp(tk_path("run/manifest.json"), NULL);
    cr_assert_not_null(text);
    cJSON *m = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(m);
    int named = 0;
    cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(m, "lost"))
    {
        cJSON *rk = cJSON_GetObjectItem(x, "rank");
        named |= cJSON_IsNumber(rk) && rk->valueint == 2;
    }
    cJSON_Delete(m);
    cr_assert(named, "rank 2 is not in the manifest's lost processes");
    char path[600];
    snprintf(path, sizeof path, "%s", a->files[rank2].path);
    pp_analysis_free(a);
    cr_assert_eq(unlink(path), 0, "%s", path);
    const char *rep[] = {PPREPORT, dir, NULL};
    r = run(rep, NULL);
    cr_assert_eq(r->code, 0, "%s", r->err);
    cr_assert_not_null(strstr(r->out, "stage 2: no trace holds its steps"), "report: %s%s",
                       r->out, r->err);
}

/* The analysis of run directory dir's data-parallel replica `replica`. */
static pp_analysis *analyze_replica(const char *dir, int replica)
{
    pp_analysis_options o;
    pp_analysis_options_default(&o);
    o.replica = replica;
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, &o, &a), PP_OK, "%s", pp_error_message());
    return a;
}

/* Two data-parallel replicas of a 2-stage pipeline under pprof-run: the report analyzes one
 * replica's pipeline (either), and gives every stage's all-reduce time, bytes and bus
 * bandwidth; the sim's ring all-reduce of 16 MB per stage over 10 GB/s takes 1.62 ms. */
Test(mpi_capture, data_parallel_allreduce_is_reported)
{
    skip_without_mpi();
    /* 16 MB of parameters per stage (2 layers), a 10 GB/s link */
    const char *costs = tk_write_costs("dp-costs.json", 4, 1000, 2000, 100000, 8000000, 10.0, 10);
    char dir[PATH_MAX]; /* tk_path's buffers rotate: the attempts outlast one */
    tk_result *r = NULL;
    /* about the modelled ring time (1.62 ms): waiting for the other replica adds to it, a rank
     * that reaches the all-reduce late (ASan, 4 ranks on 2 cores) sleeps less of it, as the
     * sim's deadlines absorb lateness; a timing judgement (pp_testkit.h, tk_judge) on the least
     * disturbed of up to four captures (a fresh-clone CI under ASan, its suites 9-17% slower
     * than an hour before, read a stage's median below 0.8 ms) */
    tk_judge j = TK_JUDGE_INIT;
    while (tk_judge_next(&j)) {
        tk_judge_dir(&j, "dp", dir, sizeof dir);
        const char *argv[] = {PPRUN, "-q", "-o", dir, "--", MPIRUN, PPTRAIN, "--backend", "sim",
                              "--costs", costs, "--stages", "2", "--microbatches", "4",
                              "--steps", "6", "--transport", "mpi", "--dp", "2", "-q", NULL};
        r = run(argv, NULL);
        cr_assert_eq(r->code, 0, "%s", r->err);
        for (int replica = 0; replica < 2; replica++) {
            pp_analysis *a = analyze_replica(dir, replica);
            for (int s = 0; s < a->S; s++) {
                double med = a->stages[s].allreduce_ns.median;
                tk_judge_that(&j, med >= 0.8e6 && med <= 4e6,
                              "replica %d stage %d: all-reduce median %.3f ms", replica, s,
                              med * 1e-6);
            }
            pp_analysis_free(a);
        }
    }
    cr_assert(!j.missed, "%s", j.log);
    for (int replica = 0; replica < 2; replica++) {
        pp_analysis *a = analyze_replica(dir, replica);
        cr_assert_eq(a->n_files, 4);
        cr_assert_eq(a->S, 2);
        cr_assert_eq(a->dp, 2);
        cr_assert_eq(a->n_steps, 5, "replica %d: %zu steps", replica, a->n_steps);
        /* one pipeline's transfers only: 4 micro-batches each way per step */
        for (size_t i = 0; i < a->n_links; i++)
            cr_assert_eq(a->links[i].messages, 4 * a->n_steps, "link %d->%d: %llu messages",
                         a->links[i].src, a->links[i].dst,
                         (unsigned long long)a->links[i].messages);
        for (int s = 0; s < 2; s++) {
            const pp_astage *g = &a->stages[s];
            cr_log_info("replica %d stage %d: all-reduce median %.3f ms, %.1f MB, %.2f GB/s",
                        replica, s, g->allreduce_ns.median * 1e-6, g->allreduce_bytes * 1e-6,
                        g->allreduce_busbw_GBps);
            cr_assert_eq(g->allreduce_ns.count, a->n_steps);
            cr_assert_eq(g->allreduce_bytes, 16e6);
            /* the bubble's parts still add up to the idle time */
            double parts = g->fill_drain_ns + g->imbalance_ns + g->transfer_ns +
                           g->allreduce_mean_ns;
            cr_assert(fabs(parts - g->idle_ns) <= 1e-6 * g->idle_ns + 1.0,
                      "stage %d: parts %.0f ns, idle %.0f ns", s, parts, g->idle_ns);
        }
        pp_analysis_free(a);
    }
    /* the pictures draw the kept step's all-reduce, one per stage */
    pp_analysis *k = analyze(dir);
    cr_assert_eq(k->n_allreduce_ops, 2);
    pp_analysis_free(k);
    const char *gantt[] = {PPREPORT, dir, "--gantt", tk_path("dp.png"), "-q", NULL};
    r = run(gantt, NULL);
    cr_assert_eq(r->code, 0, "%s", r->err);
    char *dat = tk_slurp(tk_path("dp.dat"), NULL);
    cr_assert_not_null(dat);
    cr_assert_not_null(strstr(dat, " allreduce "), "%s", dat);
    free(dat);
    const char *rep[] = {PPREPORT, dir, NULL};
    r = run(rep, NULL);
    cr_assert_eq(r->code, 0, "%s", r->err);
    cr_assert_not_null(strstr(r->out, "2 data-parallel replicas (replica 0 shown)"), "%s",
                       r->out);
    cr_assert_not_null(strstr(r->out, "all-reduce ms"), "%s", r->out);
    const char *bad[] = {PPREPORT, dir, "--replica", "2", NULL};
    r = run(bad, NULL);
    cr_assert_eq(r->code, 2, "%s", r->err);
    cr_assert_not_null(strstr(r->err, "2 data-parallel replica(s)"), "%s", r->err);
}

/* The start-up and final clock ping-pong: two replicas of a one-stage pipeline exchange no
 * pipeline messages, only the all-reduce, so without the ping-pong the shifted rank's clock
 * cannot be bounded; with it (pptrain's default, 8 round trips at start and at end) the analyzer
 * recovers the 5 ms offset and 50 ppm drift within 50 us over the run. */
Test(mpi_capture, clock_pingpong_aligns_ranks_without_pipeline_traffic)
{
    skip_without_mpi();
    const char *costs = write_costs();
    for (int sync = 0; sync < 2; sync++) {
        const char *dir = tk_path(sync ? "sync" : "nosync");
        const char *rounds = sync ? "8" : "0";
#define ONE_STAGE                                                                                \
    PPTRAIN, "--backend", "sim", "--costs", costs, "--stages", "1", "--dp", "2", "--steps",      \
        "20", "--transport", "mpi", "-q", "--clock-sync", rounds
        const char *argv[] = {PPRUN, "-q", "-o", dir, "--", "mpirun", "--oversubscribe", "--mca",
                              "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism",
                              "none", "-np", "1", ONE_STAGE, ":", "-np", "1", "env",
                              "PPROF_TEST_CLOCK_OFFSET_NS=5000000",
                              "PPROF_TEST_CLOCK_DRIFT=0.00005", ONE_STAGE, NULL};
#undef ONE_STAGE
        tk_result *r = run(argv, NULL);
        cr_assert_eq(r->code, 0, "%s", r->err);
        pp_analysis *a = analyze(dir);
        cr_assert_eq(a->n_files, 2);
        const pp_afile *f = a->files[0].rank == 1 ? &a->files[0] : &a->files[1];
        cr_assert_eq(f->rank, 1);
        if (!sync) {
            cr_assert_eq(a->clock_sync_pairs, 0);
            cr_assert_eq(f->clock_status, PP_CLOCK_UNBOUNDED);
            cr_assert_not_null(strstr(a->warnings, "unbounded"), "%s", a->warnings);
        } else {
            /* 8 round trips = 16 messages, at start and at end */
            cr_assert_eq(a->clock_sync_pairs, 32);
            cr_assert_eq(f->clock_status, PP_CLOCK_ESTIMATED);
            double span_ns = (double)(a->n_steps + (size_t)a->warmup_skipped) * a->step_ns.mean;
            double err_ns = fabs(f->clock_offset_ns - 5e6) + fabs(f->clock_drift - 50e-6) * span_ns;
            cr_log_info("ping-pong: offset %.1f us, drift %.2f ppm, uncertainty %.1f us, "
                        "largest error over the run %.1f us",
                        f->clock_offset_ns * 1e-3, f->clock_drift * 1e6,
                        f->clock_uncertainty_ns * 1e-3, err_ns * 1e-3);
            cr_assert_leq(err_ns, 50e3);
        }
        pp_analysis_free(a);
    }
}

/* The profiler's clock hook shifts rank 1's clock by 5 ms and 50 ppm (an MPMD mpirun gives that
 * one process the variables); the analyzer must recover both from the send/receive pairs, within
 * 50 us and 5 ppm, and leave the other ranks near zero. */
Test(mpi_capture, a_shifted_rank_clock_is_recovered)
{
    skip_without_mpi();
    /* small messages: the causality band is as narrow as the transfers are short */
    const char *costs = tk_write_costs("clock-costs.json", 8, 500, 1000, 65536, 0, 10.0, 10);
    const char *dir = tk_path("clock");
    const char *argv[] = {PPRUN, "-q", "-o", dir, "--", "mpirun", "--oversubscribe", "--mca",
                          "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none",
                          "-np", "1", TRAIN(costs, "40"), ":", "-np", "1", "env",
                          "PPROF_TEST_CLOCK_OFFSET_NS=5000000", "PPROF_TEST_CLOCK_DRIFT=0.00005",
                          TRAIN(costs, "40"), ":", "-np", "2", TRAIN(costs, "40"), NULL};
    tk_result *r = run(argv, NULL);
    cr_assert_eq(r->code, 0, "%s", r->err);
    pp_analysis *a = analyze(dir);
    /* the span the correction is applied over: every analyzed step plus the warm-up */
    double span_ns = (double)(a->n_steps + (size_t)a->warmup_skipped) * a->step_ns.mean;
    int found = 0;
    for (size_t i = 0; i < a->n_files; i++) {
        const pp_afile *f = &a->files[i];
        cr_log_info("rank %d: offset %.1f us, drift %.2f ppm, uncertainty %.1f us", f->rank,
                    f->clock_offset_ns * 1e-3, f->clock_drift * 1e6,
                    f->clock_uncertainty_ns * 1e-3);
        if (f->rank == 1) {
            found = 1;
            /* Recovered within 50 us everywhere in the run: the offset error plus what the
             * drift error accumulates over the run's span (a 2-s run resolves drift to a few
             * ppm here, less precisely under ASan, which slows and jitters every process). */
            double err_ns = fabs(f->clock_offset_ns - 5e6) +
                            fabs(f->clock_drift - 50e-6) * span_ns;
            cr_log_info("rank 1: largest alignment error over the %.2f s run: %.1f us",
                        span_ns * 1e-9, err_ns * 1e-3);
            cr_assert_leq(err_ns, 50e3, "offset %.1f us, drift %.2f ppm: %.1f us off",
                          f->clock_offset_ns * 1e-3, f->clock_drift * 1e6, err_ns * 1e-3);
        } else if (f->rank > 1) {
            /* Not shifted: zero lies within the reported uncertainty, which is the band's
             * narrowest half-width somewhere in the run; at the header's instant, where the
             * offset is stated, the band may be wider by what the estimated drift moves the
             * line over the run (seen: -2.3 ppm over 1.3 s, 4.4 us against 2.1 us, on a busy
             * machine under ASan). And the whole run stays within rank 1's 50 us. */
            double drift_ns = fabs(f->clock_drift) * span_ns;
            cr_assert_leq(fabs(f->clock_offset_ns), f->clock_uncertainty_ns + drift_ns + 1e3,
                          "rank %d offset %.1f us, uncertainty %.1f us, drift %.2f ppm", f->rank,
                          f->clock_offset_ns * 1e-3, f->clock_uncertainty_ns * 1e-3,
                          f->clock_drift * 1e6);
            cr_assert_leq(fabs(f->clock_offset_ns) + drift_ns, 50e3, "rank %d", f->rank);
        }
    }
    cr_assert(found, "no trace of rank 1");
    /* the merged timeline is the same pipeline: 4 stages, the formula's bubble region */
    cr_assert_eq(a->S, 4);
    pp_analysis_free(a);
}

/* A data-parallel pipeline (2 stages x 2 replicas, sim backend) whose layers hold large
 * parameters: the embedding 200 MiB, each of 10 blocks 60 MiB, the head 8 MiB; 1 MiB
 * activations over 2 GB/s, 20 us latency. The sim backend charges each stage's gradient
 * all-reduce as a ring over its link (2 (dp - 1) transfers of its parameters / dp: 40 us + 500
 * us per MB), or the cost file's dp_allreduce_us terms when `terms` gives them. */
static const char *write_dp_costs(const char *name, const char *terms)
{
    const char *path = tk_path(name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "{\"version\": 1, \"p2p_GBps\": 2, \"p2p_latency_us\": 20, \"optimizer_us\": 300, "
               "%s\"layers\": [",
            terms);
    for (int l = 0; l < 12; l++) {
        double fwd = l == 0 ? 200 : l == 11 ? 2000 : 1000;
        unsigned long mib = l == 0 ? 200 : l == 11 ? 8 : 60;
        fprintf(f, "%s{\"name\": \"l%d\", \"fwd_us\": %g, \"bwd_us\": %g, \"activation_bytes\": "
                   "1048576, \"param_bytes\": %lu}",
                l ? ", " : "", l, fwd, 2 * fwd, mib << 20);
    }
    fputs("]}\n", f);
    fclose(f);
    return path;
}

#define TRAIN_DP(costs)                                                                          \
    PPTRAIN, "--backend", "sim", "--costs", costs, "--dp", "2", "--steps", "10", "--transport",   \
        "mpi", "-q"

/* The stage's parameters under the even split of the 12 layers (0,6,12). */
static uint64_t dp_stage_bytes(const pp_extract *e, int s)
{
    int lo, hi;
    pp_partition_piece_layers(&e->partition, s, 0, &lo, &hi);
    return pp_costs_param_bytes(e->costs, lo, hi);
}

/* Captures the even split of `costs` (2 stages x 2 replicas) into `dir` and checks that the
 * extraction gives each stage's all-reduce as fixed_us + per_mb_us x its MB within 1% (`what`
 * names the truth); returns the fitted gradient norm's time, us. */
static double capture_dp_fit(const char *dir, const char *costs, double fixed_us,
                             double per_mb_us, const char *what)
{
    const char *a[] = {PPRUN, "-o", dir, "--", MPIRUN, TRAIN_DP(costs), "--stages", "2",
                       "--microbatches", "8", NULL};
    tk_result *r = run(a, NULL);
    cr_assert_eq(r->code, 0, "pprof-run -- mpirun --dp 2 (%s): %s", what, r->err);
    pp_analysis *an = analyze(dir);
    cr_assert_eq(an->dp, 2);
    pp_extract e;
    cr_assert_eq(pp_extract_from_analysis(an, &e), PP_OK, "%s", pp_error_message());
    for (int s = 0; s < 2; s++) {
        uint64_t bytes = dp_stage_bytes(&e, s);
        double want = fixed_us + per_mb_us * (double)bytes * 1e-6;
        double got = pp_costs_dp_allreduce_us(e.costs, bytes);
        cr_assert(fabs(got / want - 1) < 0.01, "stage %d: all-reduce %.3f ms, %s %.3f", s,
                  got * 1e-3, what, want * 1e-3);
    }
    double grad_norm_us = e.costs->grad_norm_us;
    pp_extract_free(&e);
    pp_analysis_free(an);
    return grad_norm_us;
}

/* "step median: measured X ms, predicted Y ms" of pprof-tune --verify: X / Y - 1. */
static double verify_error(const char *out)
{
    const char *p = strstr(out, "step median: measured ");
    cr_assert_not_null(p, "%s", out);
    double x = 0, y = 0;
    cr_assert_eq(sscanf(p, "step median: measured %lf ms, predicted %lf ms", &x, &y), 2, "%s", p);
    return x / y - 1;
}

/* Issue 18, Deliver 2 for data-parallel jobs: each stage's gradient all-reduce is a named term
 * (dp_allreduce_us + dp_allreduce_us_per_MB x the stage's parameters) before the optimizer's
 * barrier, fitted from the capture; the rebalancer weighs it. Here the stage that ends last
 * (stage 0, 1F1B) waits for its own all-reduce, so the dp-aware optimum (0,5,12: 436.7 ms)
 * gives stage 0 fewer blocks than compute alone would (0,7,12, which runs 463.3 ms against the
 * even split's 447.2). Before the term the all-reduce was one constant in the gradient norm's
 * time: pprof-tune proposed 0,7,12, predicted it 3% faster than the even split, and it ran 4.5%
 * slower (468.7 ms against 448.7). */
Test(mpi_capture, data_parallel_allreduce_is_a_per_stage_term, .timeout = 240)
{
    skip_without_mpi();
    const char *costs = write_dp_costs("dpcosts.json", "");
    const char *base = tk_path("dpbase"), *after = tk_path("dpafter"), *plan = tk_path("dp.json");
    double grad_norm_us = capture_dp_fit(base, costs, 40, 500, "the ring's");
    /* the gradient norm's all-reduce of two numbers, not the gradients' */
    cr_assert_lt(grad_norm_us, 5000, "%.3f ms", grad_norm_us * 1e-3);

    /* the proposal is the optimum under the true costs, with the ring as the terms, and not the
     * compute-only optimum */
    const char *t[] = {PPTUNE, base, "-q", "-o", plan, NULL};
    tk_result *r = run(t, NULL);
    cr_assert_eq(r->code, 0, "pprof-tune: %s", r->err);
    pp_plan pl;
    cr_assert_eq(pp_plan_load(plan, &pl), PP_OK, "%s", pp_error_message());
    pp_costs *truth = NULL;
    cr_assert_eq(pp_costs_load(costs, &truth), PP_OK);
    int best[2] = {0, 0};
    for (int dp = 0; dp < 2; dp++) {
        truth->dp_allreduce_us = dp ? 40 : 0;
        truth->dp_allreduce_us_per_MB = dp ? 500 : 0;
        double step = HUGE_VAL;
        for (int cut = 1; cut < 12; cut++) {
            int b[3] = {0, cut, 12};
            pp_partition p;
            cr_assert_eq(pp_partition_from_bounds(b, 3, 12, 2, 1, &p), PP_OK);
            pp_sim_result sr;
            cr_assert_eq(pp_sim_file(PP_SCHED_1F1B, &p, 8, truth, NULL, &sr), PP_OK);
            if (sr.step_ns < step) {
                step = sr.step_ns;
                best[dp] = cut;
            }
            pp_sim_result_free(&sr);
            pp_partition_free(&p);
        }
    }
    cr_assert_neq(best[0], best[1], "the case must need the term: %d and %d", best[0], best[1]);
    cr_assert_eq(pl.partition.bounds[1], best[1], "proposed 0,%d,12; the optimum is 0,%d,12",
                 pl.partition.bounds[1], best[1]);
    pp_plan_free(&pl);
    pp_costs_destroy(truth);

    /* its run measures what the plan predicted */
    const char *b2[] = {PPRUN, "-o", after, "--", MPIRUN, TRAIN_DP(costs), "--plan", plan, NULL};
    r = run(b2, NULL);
    cr_assert_eq(r->code, 0, "the plan's run: %s", r->err);
    const char *v[] = {PPTUNE, "--verify", plan, after, "--baseline", base, NULL};
    r = run(v, NULL);
    cr_assert_eq(r->code, 0, "pprof-tune --verify: %s", r->err);
    double err = verify_error(r->out);
    cr_log_info("data-parallel all-reduce: proposed 0,%d,12 (compute alone: 0,%d,12); %s", best[1],
                best[0], r->out);
    cr_assert(fabs(err) < 0.01, "the plan's median missed by %+.2f%%: %s", 100 * err, r->out);

    /* a cost file that gives the terms: the sim backend charges them (one rule with the
     * simulator), and the extraction gives them back */
    costs = write_dp_costs("dpterms.json",
                           "\"dp_allreduce_us\": 3000, \"dp_allreduce_us_per_MB\": 200, ");
    capture_dp_fit(tk_path("dpterms"), costs, 3000, 200, "the file's");
}
