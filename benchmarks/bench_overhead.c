/* bench_overhead: what capturing costs a training job. Runs pptrain alone and under pprof-run
 * (libpprof injected), alternating A/B/A/B so that machine noise hits both arms alike, reads
 * every step's step_ms from pptrain's --log-json, drops the warm-up steps, and compares the
 * medians: overhead %, ratio, events captured per step and the implied cost per event. Two
 * workloads: the cpu backend (tiny model, 2 stages x 4 micro-batches) and the sim backend (a
 * generated cost file, 4 stages x 8 micro-batches, where compute is sleep and the capture's own
 * CPU time shows). Prints figures measured in this run; asserts nothing.
 *   bench_overhead [--reps N] [--cpu-steps N] [--sim-steps N] [--warmup N] */
#include "pp_common.h"

#include <cJSON.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"
#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
#define LIBPPROF PP_BUILD_DIR "/profiler/libpprof.so"

enum { MAX_SAMPLES = 1 << 16 };

typedef struct arm {
    double *ms;         /* step times after warm-up, all repetitions */
    size_t n;
    double run_median[64];
    int runs;
    double events;      /* captured events, summed over the profiled runs */
    double steps;       /* steps those events cover */
    double bytes;
} arm;

static char g_tmp[64];

static int exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    if (n == 0)
        return 0.0;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Runs argv with stdout and stderr to files in g_tmp; returns the exit status or -1. */
static int run_quiet(char *const *argv)
{
    char out[128];
    snprintf(out, sizeof out, "%s/output.txt", g_tmp);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Appends the step_ms of steps after `warmup` from a --log-json file; returns how many. */
static int read_steps(const char *log, int warmup, arm *a)
{
    char *text = NULL;
    size_t len = 0;
    if (pp_read_file(log, &text, &len) != PP_OK)
        return -1;
    double mine[4096];
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *step = cJSON_GetObjectItem(j, "step"), *ms = cJSON_GetObjectItem(j, "step_ms");
        if (cJSON_IsNumber(step) && cJSON_IsNumber(ms) && step->valueint > warmup && n < 4096) {
            mine[n++] = ms->valuedouble;
            if (a->n < MAX_SAMPLES)
                a->ms[a->n++] = ms->valuedouble;
        }
        cJSON_Delete(j);
    }
    free(text);
    if (a->runs < 64 && n > 0)
        a->run_median[a->runs++] = median(mine, (size_t)n);
    return n;
}

/* Adds the totals of a run's manifest to the profiled arm. */
static void read_manifest(const char *dir, int steps, arm *a)
{
    char path[256];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    char *text = NULL;
    size_t len = 0;
    if (pp_read_file(path, &text, &len) != PP_OK)
        return;
    cJSON *m = cJSON_Parse(text);
    free(text);
    const cJSON *tot = cJSON_GetObjectItem(m, "totals");
    const cJSON *ev = cJSON_GetObjectItem(tot, "events");
    if (cJSON_IsNumber(ev)) {
        a->events += ev->valuedouble;
        a->steps += steps;
    }
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(m, "files"))
    {
        const cJSON *b = cJSON_GetObjectItem(f, "bytes");
        if (cJSON_IsNumber(b))
            a->bytes += b->valuedouble;
    }
    cJSON_Delete(m);
}

/* One workload: reps x (plain, profiled), alternating. Returns 0 on success. */
static int bench(const char *name, const char *const *train_args, int steps, int reps, int warmup)
{
    arm plain = {0}, prof = {0};
    plain.ms = calloc(MAX_SAMPLES, sizeof(double));
    prof.ms = calloc(MAX_SAMPLES, sizeof(double));
    if (!plain.ms || !prof.ms) {
        fprintf(stderr, "bench_overhead: out of memory\n");
        return 3;
    }
    char log[128], dir[128], nsteps[16];
    snprintf(log, sizeof log, "%s/steps.jsonl", g_tmp);
    snprintf(dir, sizeof dir, "%s/run", g_tmp);
    snprintf(nsteps, sizeof nsteps, "%d", steps);
    int rc = 0;
    for (int r = 0; r < 2 * reps && rc == 0; r++) {
        int profiled = r % 2; /* A/B/A/B: plain first, then under pprof-run */
        char *argv[64];
        int n = 0;
        if (profiled) {
            static const char *pre[] = {PPRUN, "-q", "-o", NULL, "--lib", LIBPPROF, "--"};
            for (size_t k = 0; k < sizeof pre / sizeof pre[0]; k++)
                argv[n++] = (char *)(pre[k] ? pre[k] : dir);
        }
        argv[n++] = (char *)PPTRAIN;
        for (int k = 0; train_args[k]; k++)
            argv[n++] = (char *)train_args[k];
        argv[n++] = (char *)"--steps";
        argv[n++] = nsteps;
        argv[n++] = (char *)"--log-json";
        argv[n++] = log;
        argv[n++] = (char *)"-q";
        argv[n] = NULL;
        int st = run_quiet(argv);
        if (st != 0) {
            char out[128];
            snprintf(out, sizeof out, "%s/output.txt", g_tmp);
            fprintf(stderr, "bench_overhead: %s run %d (%s) exited with %d; its output is in %s\n",
                    name, r / 2 + 1, profiled ? "under pprof-run" : "plain", st, out);
            rc = 3;
            break;
        }
        if (read_steps(log, warmup, profiled ? &prof : &plain) <= 0) {
            fprintf(stderr, "bench_overhead: %s: no step times after warm-up in %s\n", name, log);
            rc = 3;
            break;
        }
        if (profiled)
            read_manifest(dir, steps, &prof);
    }
    if (rc == 0) {
        double m_plain = median(plain.ms, plain.n), m_prof = median(prof.ms, prof.n);
        double r_plain = median(plain.run_median, (size_t)plain.runs);
        double r_prof = median(prof.run_median, (size_t)prof.runs);
        double ev_step = prof.steps > 0 ? prof.events / prof.steps : 0.0;
        printf("%s: %d runs each, %d steps (first %d dropped as warm-up)\n", name, reps, steps,
               warmup);
        printf("  step time, median of all steps   plain %9.3f ms   profiled %9.3f ms\n", m_plain,
               m_prof);
        printf("  overhead                         %+8.2f %%   ratio %.4f\n",
               100.0 * (m_prof / m_plain - 1.0), m_prof / m_plain);
        printf("  median of per-run medians        plain %9.3f ms   profiled %9.3f ms"
               "  (%+.2f %%)\n", r_plain, r_prof, 100.0 * (r_prof / r_plain - 1.0));
        printf("  captured                         %.0f events/step, %.1f KiB trace/run\n", ev_step,
               prof.runs ? prof.bytes / prof.runs / 1024.0 : 0.0);
        if (ev_step > 0)
            printf("  implied cost per event           %+.3f us (noise-limited estimate)\n",
                   (m_prof - m_plain) * 1e3 / ev_step);
    }
    free(plain.ms);
    free(prof.ms);
    return rc;
}

int main(int argc, char **argv)
{
    int reps = 5, cpu_steps = 40, sim_steps = 20, warmup = 5;
    static const struct option opts[] = {{"reps", required_argument, 0, 'r'},
                                         {"cpu-steps", required_argument, 0, 'c'},
                                         {"sim-steps", required_argument, 0, 's'},
                                         {"warmup", required_argument, 0, 'w'},
                                         {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int64_t v;
        const char *what = c == 'r' ? "--reps" : c == 'c' ? "--cpu-steps" : c == 's' ? "--sim-steps"
                                                                                     : "--warmup";
        if (c == '?' || pp_parse_i64(optarg, what, c == 'w' ? 0 : 1, c == 'r' ? 32 : 4000, &v) !=
                            PP_OK) {
            if (c != '?')
                fprintf(stderr, "bench_overhead: %s\n", pp_error_message());
            fprintf(stderr, "usage: bench_overhead [--reps N] [--cpu-steps N] [--sim-steps N] "
                            "[--warmup N]\n");
            return 2;
        }
        if (c == 'r') reps = (int)v;
        else if (c == 'c') cpu_steps = (int)v;
        else if (c == 's') sim_steps = (int)v;
        else warmup = (int)v;
    }
    if (!exists(LIBPPROF)) {
        printf("bench_overhead: libpprof.so is not built (%s): nothing to compare\n", LIBPPROF);
        return 0;
    }
    if (!exists(PPTRAIN) || !exists(PPRUN)) {
        printf("bench_overhead: pptrain or pprof-run is not built: nothing to compare\n");
        return 0;
    }
    snprintf(g_tmp, sizeof g_tmp, "/tmp/pp_bench_overhead_XXXXXX");
    if (!mkdtemp(g_tmp)) {
        perror("bench_overhead: mkdtemp");
        return 3;
    }
    /* sim: 8 layers of 0.5 ms forward, 1 ms backward, cut into 4 stages */
    char costs[128];
    snprintf(costs, sizeof costs, "%s/costs.json", g_tmp);
    FILE *f = fopen(costs, "w");
    if (!f) {
        perror("bench_overhead: costs.json");
        return 3;
    }
    fputs("{\"layers\": [", f);
    for (int i = 0; i < 8; i++)
        fprintf(f, "%s{\"name\": \"block%d\", \"fwd_us\": 500, \"bwd_us\": 1000, "
                   "\"activation_bytes\": 1048576}", i ? ", " : "", i);
    fputs("], \"p2p_GBps\": 20.0, \"p2p_latency_us\": 15.0, \"optimizer_us\": 200}\n", f);
    fclose(f);

    printf("pptrain step time, plain vs under pprof-run (libpprof %s)\n\n", LIBPPROF);
    const char *cpu[] = {"--stages", "2", "--microbatches", "4", NULL};
    int rc = bench("cpu backend, tiny model, S=2 M=4", cpu, cpu_steps, reps,
                   warmup < cpu_steps ? warmup : 0);
    if (rc == 0) {
        printf("\n");
        const char *sim[] = {"--backend", "sim", "--costs", costs, "--stages", "4",
                             "--microbatches", "8", NULL};
        int w = warmup < sim_steps ? (warmup < 3 ? warmup : 3) : 0;
        rc = bench("sim backend, 8 layers, S=4 M=8", sim, sim_steps, reps, w);
    }
    if (rc == 0) {
        char cmd[160];
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_overhead: could not remove %s\n", g_tmp);
    }
    return rc;
}
