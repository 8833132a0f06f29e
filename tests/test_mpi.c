/* test_mpi.c: pptrain --transport mpi under mpirun (one stage per rank) against the in-process
 * transport: the same losses for 1F1B and interleaved at S = 4, the sim backend's step time, and
 * the world-size check. mpirun runs as a child process with the flags a root container needs;
 * the tests skip when this build has no MPI or mpirun is missing. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"

static char g_dir[256];

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/pp_test_mpi_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0)
        cr_log_warn("could not remove %s", g_dir);
}

TestSuite(mpi, .init = setup, .fini = teardown, .timeout = 120);

static const char *in_dir(const char *name)
{
    static char path[8][320];
    static int k;
    k = (k + 1) % 8;
    snprintf(path[k], sizeof path[k], "%s/%s", g_dir, name);
    return path[k];
}

typedef struct run_result {
    int exit_code; /* -signal when killed */
    char out[32768];
    char err[16384];
} run_result;

static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

/* mpirun as root in a container: the two OMPI_ALLOW_* variables, --oversubscribe (4 ranks on
 * 2 cores), shared memory without CMA/ptrace (not permitted in most containers). An ASan build
 * of pptrain reports OpenMPI's own leaks at exit, so leak checking is off for the ranks only. */
static const char *k_mpirun[] = {"mpirun", "--oversubscribe", "--mca", "btl", "self,vader",
                                 "--mca", "btl_vader_single_copy_mechanism", "none", NULL};

/* Runs pptrain with args (NULL-terminated); under mpirun -np `np` when np > 0. */
static run_result *run(int np, const char *const *args)
{
    static run_result r;
    const char *outp = in_dir("stdout"), *errp = in_dir("stderr");
    const char *argv[80];
    int n = 0;
    char nps[16];
    if (np > 0) {
        for (int i = 0; k_mpirun[i]; i++)
            argv[n++] = k_mpirun[i];
        snprintf(nps, sizeof nps, "%d", np);
        argv[n++] = "-np";
        argv[n++] = nps;
    }
    argv[n++] = PPTRAIN;
    for (int i = 0; args[i]; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(o, 1);
        dup2(e, 2);
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
        if (np > 0) {
            const char *asan = getenv("ASAN_OPTIONS");
            char buf[512];
            snprintf(buf, sizeof buf, "%s%sdetect_leaks=0", asan ? asan : "",
                     asan && *asan ? ":" : "");
            setenv("ASAN_OPTIONS", buf, 1);
        }
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    slurp(outp, r.out, sizeof r.out);
    slurp(errp, r.err, sizeof r.err);
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
    const char *log_ip = in_dir("inproc.jsonl");
    const char *a_ip[] = {MODEL, "--stages", "4", "--schedule", schedule, "--virtual-stages", v,
                          "--microbatches", M, "--batch", "8", "--steps", "3", "-q",
                          "--log-json", log_ip, NULL};
    run_result *r = run(0, a_ip);
    cr_assert_eq(r->exit_code, 0, "in-process run failed: %s", r->err);
    const char *log_mpi = in_dir("mpi.jsonl");
    const char *a_mpi[] = {MODEL, "--stages", "4", "--schedule", schedule, "--virtual-stages",
                           v, "--microbatches", M, "--batch", "8", "--steps", "3",
                           "--transport", "mpi", "--log-json", log_mpi, NULL};
    r = run(4, a_mpi);
    cr_assert_eq(r->exit_code, 0, "mpirun failed (%d): %s", r->exit_code, r->err);
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
    const char *costs = in_dir("costs.json");
    FILE *f = fopen(costs, "w");
    cr_assert_not_null(f);
    fputs("{\"layers\": [", f);
    for (int i = 0; i < 8; i++)
        fprintf(f, "%s{\"name\": \"l%d\", \"fwd_us\": 1000, \"bwd_us\": 2000}", i ? ", " : "",
                i);
    fputs("]}\n", f);
    fclose(f);
    const char *a_ip[] = {"--backend", "sim", "--costs", costs, "--stages", "4", "--microbatches",
                          "8", "--steps", "4", "-q", NULL};
    run_result *r = run(0, a_ip);
    cr_assert_eq(r->exit_code, 0, "in-process sim failed: %s", r->err);
    double ip_ms = summary_ms(r->out, "mean step time ");
    double ip_model = summary_ms(r->out, "(time model ");
    const char *a_mpi[] = {"--backend", "sim", "--costs", costs, "--stages", "4",
                           "--microbatches", "8", "--steps", "4", "-q", "--transport", "mpi",
                           NULL};
    r = run(4, a_mpi);
    cr_assert_eq(r->exit_code, 0, "mpirun sim failed (%d): %s", r->exit_code, r->err);
    double mpi_ms = summary_ms(r->out, "mean step time ");
    double mpi_model = summary_ms(r->out, "(time model ");
    cr_log_info("sim step: in-process %.3f ms (model %.3f), mpi %.3f ms (model %.3f)", ip_ms,
                ip_model, mpi_ms, mpi_model);
    /* the model: 1F1B at S = 4, M = 8, 2 layers per stage: (M + S - 1) * 3 * 2 ms = 66 ms */
    cr_assert(fabs(mpi_model - ip_model) <= 0.02 * ip_model, "model %.3f vs %.3f", mpi_model,
              ip_model);
    cr_assert(fabs(mpi_ms - ip_ms) <= 0.15 * ip_ms, "step %.3f ms over MPI vs %.3f in-process",
              mpi_ms, ip_ms);
}

Test(mpi, world_size_must_equal_stages)
{
    skip_without_mpi();
    const char *a[] = {MODEL, "--stages", "4", "--batch", "8", "--microbatches", "4", "--steps",
                       "1", "--transport", "mpi", NULL};
    run_result *r = run(2, a);
    cr_assert_eq(r->exit_code, 2, "exit %d, stderr: %s", r->exit_code, r->err);
    cr_assert_not_null(strstr(r->err, "mpirun -np 4"), "stderr: %s", r->err);
    cr_assert_not_null(strstr(r->err, "2 rank(s)"), "stderr: %s", r->err);
}

Test(mpi, save_is_refused_with_mpi)
{
    skip_without_mpi();
    const char *a[] = {MODEL, "--stages", "2", "--steps", "1", "--transport", "mpi", "--save",
                       in_dir("ck.bin"), NULL};
    run_result *r = run(2, a);
    cr_assert_eq(r->exit_code, 2, "exit %d, stderr: %s", r->exit_code, r->err);
    cr_assert_not_null(strstr(r->err, "not supported with --transport mpi"), "stderr: %s",
                       r->err);
}

Test(mpi, build_without_mpi_says_so)
{
#ifdef PP_HAVE_MPI
    cr_skip_test("this build has MPI");
#endif
    const char *a[] = {MODEL, "--stages", "2", "--steps", "1", "--transport", "mpi", NULL};
    run_result *r = run(0, a);
    cr_assert_eq(r->exit_code, 2);
    cr_assert_not_null(strstr(r->err, "this build has no MPI"), "stderr: %s", r->err);
}

Test(mpi, unknown_transport_is_a_usage_error)
{
    const char *a[] = {"--transport", "tcp", NULL};
    run_result *r = run(0, a);
    cr_assert_eq(r->exit_code, 2);
    cr_assert_not_null(strstr(r->err, "--transport must be 'inproc' or 'mpi'"), "stderr: %s",
                       r->err);
}
