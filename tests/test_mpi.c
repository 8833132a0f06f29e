/* test_mpi.c: pptrain --transport mpi under mpirun (one stage per rank) against the in-process
 * transport: the same losses for 1F1B and interleaved at S = 4, the sim backend's step time,
 * data-parallel replicas (--dp) against one pipeline, and the world-size checks. mpirun runs as a child process with the flags a root container needs;
 * the tests skip when this build has no MPI or mpirun is missing. */
#include "pp_testkit.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"

static void setup(void) { tk_dir_create("pp_test_mpi"); }

TestSuite(mpi, .init = setup, .fini = tk_dir_remove, .timeout = 120);

/* Runs pptrain with args (NULL-terminated); under mpirun -np `np` when np > 0. The result
 * lives until the next call. */
static tk_result *run(int np, const char *const *args)
{
    static tk_result r;
    const char *argv[80];
    int n = 0;
    char nps[16];
    if (np > 0) {
        for (int i = 0; tk_mpirun[i]; i++)
            argv[n++] = tk_mpirun[i];
        snprintf(nps, sizeof nps, "%d", np);
        argv[n++] = "-np";
        argv[n++] = nps;
    }
    argv[n++] = PPTRAIN;
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    tk_result_free(&r);
    r = tk_runv(argv, np > 0 ? tk_mpirun_env(NULL) : NULL);
    return &r;
}

static void skip_without_mpi(void)
{
#ifndef PP_HAVE_MPI
    cr_skip_test("this build has no MPI");
#endif
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        cr_skip_test("mpirun not found (apt-get install openmpi-bin libopenmpi-dev)");
}

/* The values of `key` in a --log-json file, one per step. */
static int read_json_values(const char *path, const char *key, double *out, int cap)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no log %s", path);
    char line[1024], pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    int n = 0;
    while (n < cap && fgets(line, sizeof line, f)) {
        char *p = strstr(line, pat);
        if (p)
            out[n++] = strtod(p + strlen(pat), NULL);
    }
    fclose(f);
    return n;
}

#define MODEL "--vocab", "64", "--seq", "16", "--d-model", "32", "--heads", "4", "--layers", "6"

/* The cpu backend over both transports: every step's loss and gradient norm agree. The
 * all-reduce sums the stages' shares in stage order on every rank, as the in-process one does,
 * so the values are bit-identical; the logs print 6 significant digits or more, and the
 * comparison allows 1e-6 relative for the last printed digit's rounding only. */
static void check_same_losses(const char *schedule, const char *v, const char *M)
{
    skip_without_mpi();
    const char *log_ip = tk_path("inproc.jsonl");
    const char *a_ip[] = {MODEL, "--stages", "4", "--schedule", schedule, "--virtual-stages", v,
                          "--microbatches", M, "--batch", "8", "--steps", "3", "-q",
                          "--log-json", log_ip, NULL};
    tk_result *r = run(0, a_ip);
    cr_assert_eq(r->code, 0, "in-process run failed: %s", r->err);
    const char *log_mpi = tk_path("mpi.jsonl");
    const char *a_mpi[] = {MODEL, "--stages", "4", "--schedule", schedule, "--virtual-stages",
                           v, "--microbatches", M, "--batch", "8", "--steps", "3",
                           "--transport", "mpi", "--log-json", log_mpi, NULL};
    r = run(4, a_mpi);
    cr_assert_eq(r->code, 0, "mpirun failed (%d): %s", r->code, r->err);
    /* rank 0 alone prints: one set of step lines and one summary */
    const char *first = strstr(r->out, "step      3/3");
    cr_assert_not_null(first, "no step 3 line in: %s", r->out);
    cr_assert_null(strstr(first + 1, "step      3/3"), "more than one rank printed: %s",
                   r->out);
    const char *done = strstr(r->out, "done: 3 steps");
    cr_assert_not_null(done);
    cr_assert_null(strstr(done + 1, "done:"), "more than one summary: %s", r->out);
    const char *keys[] = {"loss", "grad_norm"};
    for (int k = 0; k < 2; k++) {
        double a[8], b[8];
        int na = read_json_values(log_ip, keys[k], a, 8);
        int nb = read_json_values(log_mpi, keys[k], b, 8);
        cr_assert_eq(na, 3);
        cr_assert_eq(nb, 3);
        for (int i = 0; i < 3; i++)
            cr_assert(fabs(a[i] - b[i]) <= 1e-6 * fabs(a[i]),
                      "%s schedule, step %d: %s %.9g in-process, %.9g over MPI", schedule,
                      i + 1, keys[k], a[i], b[i]);
    }
}

Test(mpi, one_f_one_b_matches_inproc) { check_same_losses("1f1b", "1", "4"); }

Test(mpi, interleaved_matches_inproc) { check_same_losses("interleaved", "2", "8"); }

static double summary_ms(const char *out, const char *key)
{
    const char *p = strstr(out, key);
    cr_assert_not_null(p, "no '%s' in: %s", key, out);
    return strtod(p + strlen(key), NULL);
}

/* The sim backend: the ranks agree on each step's start and carry the senders' clocks, so the
 * time model gives the in-process prediction and the measured step time comes close. The
 * wall-time bound is loose: 4 ranks share 2 cores and every receive polls. */
Test(mpi, sim_step_time_matches_inproc)
{
    skip_without_mpi();
    const char *costs = tk_path("costs.json");
    FILE *f = fopen(costs, "w");
    cr_assert_not_null(f);
    fputs("{\"layers\": [", f);
    for (int i = 0; i < 8; i++)
        fprintf(f, "%s{\"name\": \"l%d\", \"fwd_us\": 1000, \"bwd_us\": 2000}", i ? ", " : "",
                i);
    fputs("]}\n", f);
    fclose(f);
    const char *log_ip = tk_path("ip.jsonl"), *log_mpi = tk_path("mpi.jsonl");
    const char *a_ip[] = {"--backend", "sim", "--costs", costs, "--stages", "4", "--microbatches",
                          "8", "--steps", "5", "-q", "--log-json", log_ip, NULL};
    tk_result *r = run(0, a_ip);
    cr_assert_eq(r->code, 0, "in-process sim failed: %s", r->err);
    double ip_model = summary_ms(r->out, "(time model ");
    const char *a_mpi[] = {"--backend", "sim", "--costs", costs, "--stages", "4",
                           "--microbatches", "8", "--steps", "5", "-q", "--transport", "mpi",
                           "--log-json", log_mpi, NULL};
    r = run(4, a_mpi);
    cr_assert_eq(r->code, 0, "mpirun sim failed (%d): %s", r->code, r->err);
    double mpi_model = summary_ms(r->out, "(time model ");
    /* each side's fastest step: a disturbance can only make a sim step later than its
     * deadlines, so the fastest is the least disturbed, where a mean over steps is moved by a
     * single slow one */
    double ms[2] = {INFINITY, INFINITY}, v[8];
    const char *logs[2] = {log_ip, log_mpi};
    for (int k = 0; k < 2; k++) {
        int n = read_json_values(logs[k], "step_ms", v, 8);
        cr_assert_eq(n, 5, "%s: %d steps logged", logs[k], n);
        for (int i = 0; i < n; i++)
            ms[k] = v[i] < ms[k] ? v[i] : ms[k];
    }
    double ip_ms = ms[0], mpi_ms = ms[1];
    cr_log_info("sim step, fastest of 5: in-process %.3f ms (model %.3f), mpi %.3f ms (model %.3f)", ip_ms,
                ip_model, mpi_ms, mpi_model);
    /* the model: 1F1B at S = 4, M = 8, 2 layers per stage: (M + S - 1) * 3 * 2 ms = 66 ms */
    cr_assert(fabs(mpi_model - ip_model) <= 0.02 * ip_model, "model %.3f vs %.3f", mpi_model,
              ip_model);
    cr_assert(fabs(mpi_ms - ip_ms) <= 0.15 * ip_ms, "step %.3f ms over MPI vs %.3f in-process",
              mpi_ms, ip_ms);
}

/* Data parallelism: 2 replicas of a 2-stage pipeline (4 ranks), each training half of the
 * batch with half the micro-batches, against one in-process pipeline over the whole batch with
 * the same micro-batch size. The gradients are the same sums in another order (each replica
 * accumulates its micro-batches, then the replicas add up), so losses and norms agree to
 * float32 accumulation error: 1e-5 relative, the pipeline equivalence tolerance of
 * docs/schedules.md. */
static void check_dp_matches(const char *schedule, const char *v, const char *M_dp,
                             const char *M_one)
{
    skip_without_mpi();
    const char *log_ip = tk_path("one.jsonl");
    const char *a_ip[] = {MODEL, "--stages", "2", "--schedule", schedule, "--virtual-stages", v,
                          "--microbatches", M_one, "--batch", "8", "--steps", "3", "-q",
                          "--log-json", log_ip, NULL};
    tk_result *r = run(0, a_ip);
    cr_assert_eq(r->code, 0, "in-process run failed: %s", r->err);
    const char *log_dp = tk_path("dp.jsonl");
    const char *a_dp[] = {MODEL, "--stages", "2", "--schedule", schedule, "--virtual-stages", v,
                          "--microbatches", M_dp, "--batch", "8", "--steps", "3",
                          "--transport", "mpi", "--dp", "2", "--log-json", log_dp, NULL};
    r = run(4, a_dp);
    cr_assert_eq(r->code, 0, "mpirun --dp 2 failed (%d): %s", r->code, r->err);
    cr_assert_not_null(strstr(r->out, "2 data-parallel replicas"), "%s", r->out);
    const char *keys[] = {"loss", "grad_norm"};
    for (int k = 0; k < 2; k++) {
        double a[8], b[8];
        cr_assert_eq(read_json_values(log_ip, keys[k], a, 8), 3);
        cr_assert_eq(read_json_values(log_dp, keys[k], b, 8), 3);
        for (int i = 0; i < 3; i++)
            cr_assert(fabs(a[i] - b[i]) <= 1e-5 * fabs(a[i]),
                      "%s, step %d: %s %.9g in one pipeline, %.9g with 2 replicas", schedule,
                      i + 1, keys[k], a[i], b[i]);
    }
    /* training moved: a wrong all-reduce (no sum, or a double count) shows in step 2 on */
    double l[8];
    read_json_values(log_dp, "loss", l, 8);
    cr_assert(l[2] < l[0], "loss did not fall: %g -> %g", l[0], l[2]);
}

Test(mpi, dp2_one_f_one_b_matches_one_pipeline) { check_dp_matches("1f1b", "1", "2", "4"); }

Test(mpi, dp2_interleaved_matches_one_pipeline)
{
    check_dp_matches("interleaved", "2", "2", "4");
}

/* The sim backend's replicas meet at the all-reduce and then take what a ring all-reduce of
 * each stage's parameter bytes costs: 2 (dp - 1) transfers of 1/dp of them. The time model is
 * deterministic, so the step grows by exactly that over the same pipeline without replicas. */
Test(mpi, dp_sim_adds_the_ring_allreduce)
{
    skip_without_mpi();
    /* 16 MB of parameters per stage (2 layers), a 10 GB/s link */
    const char *costs = tk_write_costs("dp-costs.json", 4, 1000, 2000, 100000, 8000000, 10.0, 10);
    const char *a_one[] = {"--backend", "sim", "--costs", costs, "--stages", "2",
                           "--microbatches", "4", "--steps", "3", "-q", "--transport", "mpi",
                           NULL};
    tk_result *r = run(2, a_one);
    cr_assert_eq(r->code, 0, "%s", r->err);
    double one = summary_ms(r->out, "(time model ");
    const char *a_dp[] = {"--backend", "sim", "--costs", costs, "--stages", "2",
                          "--microbatches", "4", "--steps", "3", "-q", "--transport", "mpi",
                          "--dp", "2", NULL};
    r = run(4, a_dp);
    cr_assert_eq(r->code, 0, "%s", r->err);
    double dp = summary_ms(r->out, "(time model ");
    /* 16 MB per stage: 2 x (10 us + 8 MB / 10 GB/s) = 1.62 ms */
    cr_log_info("sim model: one pipeline %.3f ms, 2 replicas %.3f ms", one, dp);
    cr_assert(fabs(dp - one - 1.62) <= 0.01, "2 replicas %.3f ms, one pipeline %.3f ms: the "
                                              "all-reduce should add 1.62 ms",
              dp, one);
}

Test(mpi, dp_needs_mpi_and_the_right_world)
{
    const char *a[] = {MODEL, "--stages", "2", "--dp", "2", "--steps", "1", NULL};
    tk_result *r = run(0, a);
    cr_assert_eq(r->code, 2, "exit %d, stderr: %s", r->code, r->err);
    cr_assert_not_null(strstr(r->err, "--transport mpi"), "stderr: %s", r->err);
    skip_without_mpi();
    const char *b[] = {MODEL, "--stages", "2", "--dp", "2", "--batch", "8", "--microbatches",
                       "2", "--steps", "1", "--transport", "mpi", NULL};
    r = run(2, b);
    cr_assert_eq(r->code, 2, "exit %d, stderr: %s", r->code, r->err);
    cr_assert_not_null(strstr(r->err, "need mpirun -np 4"), "stderr: %s", r->err);
    /* the batch must split into replicas of whole micro-batches */
    const char *c[] = {MODEL, "--stages", "2", "--dp", "2", "--batch", "6", "--microbatches",
                       "2", "--steps", "1", "--transport", "mpi", NULL};
    r = run(4, c);
    cr_assert_eq(r->code, 2, "exit %d, stderr: %s", r->code, r->err);
    cr_assert_not_null(strstr(r->err, "must split into 2 replicas"), "stderr: %s", r->err);
}

Test(mpi, world_size_must_equal_stages)
{
    skip_without_mpi();
    const char *a[] = {MODEL, "--stages", "4", "--batch", "8", "--microbatches", "4", "--steps",
                       "1", "--transport", "mpi", NULL};
    tk_result *r = run(2, a);
    cr_assert_eq(r->code, 2, "exit %d, stderr: %s", r->code, r->err);
    cr_assert_not_null(strstr(r->err, "mpirun -np 4"), "stderr: %s", r->err);
    cr_assert_not_null(strstr(r->err, "2 rank(s)"), "stderr: %s", r->err);
}

/* Checkpoints over MPI are the in-process ones, byte for byte: a checkpoint written by 2 ranks
 * (interleaved, 2 chunks each) equals the in-process one, and resuming it with 4 ranks and
 * another schedule ends at the same bytes as one straight in-process run (the pipelines are
 * bit-exact with the single-stage trainer, docs/schedules.md). */
static int same_file(const char *a, const char *b)
{
    size_t na = 0, nb = 0;
    char *x = tk_slurp(a, &na), *y = tk_slurp(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

Test(mpi, checkpoints_over_mpi_equal_the_in_process_ones)
{
    skip_without_mpi();
#define CK_ARGS MODEL, "--batch", "8", "--microbatches", "4", "--steps", "6", "-q"
    const char *straight = tk_path("straight.bin"), *ip = tk_path("ip3.bin");
    const char *mp = tk_path("mpi3.bin"), *resumed = tk_path("resumed.bin");
    const char *a_straight[] = {CK_ARGS, "--stages", "2", "--schedule", "interleaved", "--save",
                                straight, NULL};
    tk_result *r = run(0, a_straight);
    cr_assert_eq(r->code, 0, "%s", r->err);
    const char *a_ip[] = {CK_ARGS, "--stages", "2", "--schedule", "interleaved", "--stop-at", "3",
                          "--save", ip, NULL};
    r = run(0, a_ip);
    cr_assert_eq(r->code, 0, "%s", r->err);
    const char *a_mpi[] = {CK_ARGS, "--stages", "2", "--schedule", "interleaved", "--stop-at",
                           "3", "--transport", "mpi", "--save", mp, NULL};
    r = run(2, a_mpi);
    cr_assert_eq(r->code, 0, "%s", r->err);
    cr_assert_not_null(strstr(r->out, "checkpoint: "), "rank 0 says where: %s", r->out);
    cr_assert(same_file(ip, mp), "the MPI checkpoint differs from the in-process one");
    const char *a_res[] = {CK_ARGS, "--stages", "4", "--schedule", "1f1b", "--transport", "mpi",
                           "--resume", mp, "--save", resumed, NULL};
    r = run(4, a_res);
    cr_assert_eq(r->code, 0, "%s", r->err);
    cr_assert(same_file(straight, resumed), "resumed over MPI, the run ended elsewhere");
#undef CK_ARGS
}

Test(mpi, build_without_mpi_says_so)
{
#ifdef PP_HAVE_MPI
    tk_dir_remove(); /* a skipped test does not reach the suite's .fini */
    cr_skip_test("this build has MPI");
#endif
    const char *a[] = {MODEL, "--stages", "2", "--steps", "1", "--transport", "mpi", NULL};
    tk_result *r = run(0, a);
    cr_assert_eq(r->code, 2);
    cr_assert_not_null(strstr(r->err, "this build has no MPI"), "stderr: %s", r->err);
}

Test(mpi, unknown_transport_is_a_usage_error)
{
    const char *a[] = {"--transport", "tcp", NULL};
    tk_result *r = run(0, a);
    cr_assert_eq(r->code, 2);
    cr_assert_not_null(strstr(r->err, "--transport must be 'inproc', 'mpi' or 'nccl'"), "stderr: %s",
                       r->err);
}
