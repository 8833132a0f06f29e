/* test_pprof_run.c: pprof-run as a user runs it: it passes the job's exit status through, dies
 * the way the job died, forwards signals, waits for every process the job left behind, keeps
 * the previous run as DIR.old and refuses directories that are not runs, hands the capture
 * library its environment, and writes a manifest and summary that show every trace file and
 * every dropped event, never replace another instance's manifest, stream long traces, and keep
 * the job's status when the summary crashes or the manifest cannot be written. The jobs are
 * tests/exit_app.c, `sh`, and (when built) pptrain under the real libpprof.so. */
#define _GNU_SOURCE /* realpath, putenv */
#include "pp_common.h"
#include "pp_trace.h"

#include <cJSON.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
#define PPREPORT PP_BUILD_DIR "/tools/pprof-report"
#define EXIT_APP PP_BUILD_DIR "/tests/pp_exit_app"
#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"
#define LIBPPROF PP_BUILD_DIR "/profiler/libpprof.so"

static char g_dir[64];
static char g_lib[256]; /* what --lib gets: the real library when built, else a stand-in */

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static const char *in_dir(const char *name)
{
    static char path[16][PATH_MAX];
    static int k;
    k = (k + 1) % 16;
    snprintf(path[k], sizeof path[k], "%s/%s", g_dir, name);
    return path[k];
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

static void slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
}

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/pp_run_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
    /* Plain `sh` and exit_app never load the library, so any existing file stands in for it. */
    if (exists(LIBPPROF)) {
        snprintf(g_lib, sizeof g_lib, "%s", LIBPPROF);
    } else {
        snprintf(g_lib, sizeof g_lib, "%s/libstandin.so", g_dir);
        write_text(g_lib, "not a library\n");
    }
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(pprof_run, .init = setup, .fini = teardown, .timeout = 120);

typedef struct run_result {
    int exit_code; /* -signal when pprof-run itself was killed */
    double secs;
    long maxrss_kb; /* peak RSS of it or of any process it waited for (wait4) */
    char out[65536];
    char err[16384];
} run_result;

typedef struct spawn_opts {
    const char *exe;        /* default PPRUN */
    const char *env[8];     /* "NAME=VALUE" added to the environment */
    int slot;               /* output files out<slot>.txt / err<slot>.txt */
    int ignore_sigchld;     /* start pprof-run with SIGCHLD ignored, as some parents do */
    long fsize_limit;       /* > 0: RLIMIT_FSIZE in bytes (ulimit -f), a disk that fills up */
} spawn_opts;

static const char *const k_rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                          "MV2_COMM_WORLD_RANK", "PALS_RANKID",
                                          "FLUX_TASK_RANK", "JSM_NAMESPACE_RANK",
                                          "SLURM_PROCID", "SLURM_STEP_ID", "SLURM_STEPID",
                                          "RANK", "PPROF_LIB", "PPROF_STEPS", "PPROF_QUIET",
                                          "PPROF_BUFFER_KB", "PPROF_FLUSH_MS"};

/* Starts pprof-run (or o->exe) with args (NULL-terminated, without argv[0]) in the test's temp
 * directory, with default signal dispositions whatever the test runner set. */
static pid_t spawn(const spawn_opts *o, const char *const *args)
{
    char outp[PATH_MAX], errp[PATH_MAX];
    snprintf(outp, sizeof outp, "%s/out%d.txt", g_dir, o ? o->slot : 0);
    snprintf(errp, sizeof errp, "%s/err%d.txt", g_dir, o ? o->slot : 0);
    const char *exe = o && o->exe ? o->exe : PPRUN;
    char *argv[64];
    int n = 0;
    argv[n++] = (char *)exe;
    while (args[n - 1] && n < 63) {
        argv[n] = (char *)args[n - 1];
        n++;
    }
    argv[n] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || chdir(g_dir) != 0)
            _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            signal(sigs[i], SIG_DFL);
        if (o && o->ignore_sigchld)
            signal(SIGCHLD, SIG_IGN);
        if (o && o->fsize_limit > 0) {
            struct rlimit rl = {(rlim_t)o->fsize_limit, (rlim_t)o->fsize_limit};
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
                _exit(126);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (size_t i = 0; i < sizeof k_rank_vars / sizeof k_rank_vars[0]; i++)
            unsetenv(k_rank_vars[i]);
        for (int i = 0; o && i < 8 && o->env[i]; i++)
            putenv((char *)o->env[i]);
        execv(exe, argv);
        _exit(126);
    }
    return pid;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static run_result *finish(const spawn_opts *o, pid_t pid, double t0)
{
    static run_result results[4];
    static int k;
    run_result *r = &results[k = (k + 1) % 4];
    int status = 0;
    struct rusage ru;
    cr_assert_eq(wait4(pid, &status, 0, &ru), pid);
    r->maxrss_kb = ru.ru_maxrss;
    r->secs = now_s() - t0;
    r->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/out%d.txt", g_dir, o ? o->slot : 0);
    slurp(p, r->out, sizeof r->out);
    snprintf(p, sizeof p, "%s/err%d.txt", g_dir, o ? o->slot : 0);
    slurp(p, r->err, sizeof r->err);
    return r;
}

static run_result *run_with(const spawn_opts *o, const char *const *args)
{
    double t0 = now_s();
    return finish(o, spawn(o, args), t0);
}

static run_result *run(const char *const *args)
{
    return run_with(NULL, args);
}

/* Waits up to 20 s for `path` to appear. */
static int wait_for(const char *path)
{
    for (int i = 0; i < 2000; i++) {
        if (exists(path))
            return 1;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static cJSON *load_json(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    cr_assert_eq(pp_read_file(path, &text, &len), PP_OK, "%s", pp_error_message());
    cJSON *j = cJSON_Parse(text);
    cr_assert_not_null(j, "%s is not JSON: %s", path, text);
    free(text);
    return j;
}

static const char *json_str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double json_num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    cr_assert(cJSON_IsNumber(v), "\"%s\" is not a number", key);
    return v->valuedouble;
}

/* ---- exit status -------------------------------------------------------------------------- */

Test(pprof_run, passes_the_exit_status_through)
{
    static const int codes[] = {0, 3, 42, 1, 255};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        char code[8];
        snprintf(code, sizeof code, "%d", codes[i]);
        const char *a[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, "--", EXIT_APP, "exit", code,
                           NULL};
        run_result *r = run(a);
        cr_assert_eq(r->exit_code, codes[i], "exit %d for %d; stderr: %s", r->exit_code,
                     codes[i], r->err);
    }
    const char *sh[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, "--", "sh", "-c", "exit 42",
                        NULL};
    cr_assert_eq(run(sh)->exit_code, 42);
    /* a parent that ignores SIGCHLD must not make the status disappear */
    spawn_opts ign = {.ignore_sigchld = 1};
    const char *b[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, "--", EXIT_APP, "exit", "5", NULL};
    cr_assert_eq(run_with(&ign, b)->exit_code, 5);
}

Test(pprof_run, exits_128_plus_the_signal_that_killed_the_job)
{
    static const int sigs[] = {SIGTERM, SIGKILL, SIGUSR1};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        char sig[8];
        snprintf(sig, sizeof sig, "%d", sigs[i]);
        const char *a[] = {"-o", in_dir("r"), "--lib", g_lib, "--", EXIT_APP, "raise", sig, NULL};
        run_result *r = run(a);
        cr_assert_eq(r->exit_code, 128 + sigs[i], "signal %d: exit %d; stderr: %s", sigs[i],
                     r->exit_code, r->err);
        cr_assert(strstr(r->out, "killed by signal") != NULL, "%s", r->out);
        cJSON *m = load_json(in_dir("r/manifest.json"));
        cJSON *ex = cJSON_GetObjectItem(m, "exit");
        cr_assert_str_eq(json_str(ex, "how"), "signaled");
        cr_assert_eq((int)json_num(ex, "signal"), sigs[i]);
        cr_assert_eq((int)json_num(ex, "pprof_run_exit_code"), 128 + sigs[i]);
        cJSON_Delete(m);
    }
}

/* ---- signals ------------------------------------------------------------------------------ */

Test(pprof_run, forwards_sigint_to_the_job_once)
{
    const char *ready = in_dir("ready"), *marker = in_dir("marker");
    const char *a[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, "--", EXIT_APP, "trap", ready,
                       marker, "7", NULL};
    double t0 = now_s();
    pid_t pid = spawn(NULL, a);
    cr_assert(wait_for(ready), "the job never started");
    cr_assert_eq(kill(pid, SIGINT), 0); /* to pprof-run only, not its process group */
    run_result *r = finish(NULL, pid, t0);
    cr_assert_eq(r->exit_code, 7, "exit %d; stderr: %s", r->exit_code, r->err);
    char text[64];
    slurp(marker, text, sizeof text);
    cr_assert_str_eq(text, "1\n", "the job saw SIGINT %s times", text);
}

Test(pprof_run, forwards_sigterm_and_reports_the_death)
{
    const char *ready = in_dir("ready"), *marker = in_dir("marker");
    const char *a[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, "--", EXIT_APP, "trap", ready,
                       marker, "7", NULL};
    double t0 = now_s();
    pid_t pid = spawn(NULL, a);
    cr_assert(wait_for(ready));
    cr_assert_eq(kill(pid, SIGTERM), 0);
    run_result *r = finish(NULL, pid, t0);
    cr_assert_eq(r->exit_code, 128 + SIGTERM, "exit %d; stderr: %s", r->exit_code, r->err);
    cr_assert(!exists(marker));
    cr_assert(exists(in_dir("r/manifest.json")), "no manifest after a forwarded SIGTERM");
}

/* ---- the process tree --------------------------------------------------------------------- */

Test(pprof_run, waits_for_processes_the_job_left_behind)
{
    const char *done = in_dir("grandchild_done");
    const char *a[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, "--", EXIT_APP, "orphan", done,
                       "300", NULL};
    run_result *r = run(a);
    cr_assert_eq(r->exit_code, 0, "stderr: %s", r->err);
    cr_assert(exists(done), "pprof-run returned before the orphaned grandchild finished");
    cr_assert_geq(r->secs, 0.25);
    /* the same through a shell's background job */
    const char *done2 = in_dir("bg_done");
    char script[PATH_MAX + 64];
    snprintf(script, sizeof script, "(sleep 0.3; echo x > %s) & exit 0", done2);
    const char *b[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, "--", "sh", "-c", script, NULL};
    r = run(b);
    cr_assert_eq(r->exit_code, 0);
    cr_assert(exists(done2));
}

/* ---- command and option errors ------------------------------------------------------------ */

Test(pprof_run, a_command_that_cannot_run_exits_127_and_touches_nothing)
{
    const char *a[] = {"-o", in_dir("r"), "--lib", g_lib, "--", "pp-no-such-command-xyz", NULL};
    run_result *r = run(a);
    cr_assert_eq(r->exit_code, 127, "stderr: %s", r->err);
    cr_assert(strstr(r->err, "pprof-run: cannot run 'pp-no-such-command-xyz'") != NULL, "%s",
              r->err);
    cr_assert(!exists(in_dir("r")), "a failed start created the run directory");
    /* a file that is not executable */
    write_text(in_dir("notexec"), "#!/bin/sh\n");
    chmod(in_dir("notexec"), 0644);
    const char *b[] = {"-o", in_dir("r"), "--lib", g_lib, in_dir("notexec"), NULL};
    r = run(b);
    cr_assert_eq(r->exit_code, 127);
    cr_assert(strstr(r->err, "Permission denied") != NULL, "%s", r->err);
}

typedef struct bad_case {
    const char *args[8];
    const char *phrase; /* expected in stderr */
} bad_case;

static const bad_case k_bad[] = {
    {{NULL}, "no command given"},
    {{"-q", NULL}, "no command given"},
    {{"--steps", "5:3", "true", NULL}, "last step 3 is before first step 5"},
    {{"--steps", "x:", "true", NULL}, "'x' is not an integer"},
    {{"--steps", "0:3", "true", NULL}, "0 is out of range"},
    {{"--steps", "3", "true", NULL}, "expected N:M or N:"},
    {{"--steps", ":4", "true", NULL}, "expected N:M or N:"},
    {{"--steps", "2:y", "true", NULL}, "'y' is not an integer"},
    {{"--buffer-kb", "1", "true", NULL}, "--buffer-kb: 1 is out of range"},
    {{"--buffer-kb", "lots", "true", NULL}, "--buffer-kb: 'lots' is not an integer"},
    {{"--flush-ms", "0", "true", NULL}, "--flush-ms: 0 is out of range"},
    {{"--flush-ms", "10001", "true", NULL}, "--flush-ms: 10001 is out of range"},
    {{"--bogus", "true", NULL}, "unknown option '--bogus'"},
    {{"-x", "true", NULL}, "unknown option '-x'"},
    {{"-o", NULL}, "needs a value"},
    {{"--lib", "/pp/no/such/libpprof.so", "true", NULL}, "--lib '/pp/no/such/libpprof.so'"},
};

Test(pprof_run, bad_options_exit_2_with_a_message)
{
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        const char *args[12];
        int n = 0;
        int has_lib = 0;
        for (int k = 0; k < 8 && k_bad[i].args[k]; k++)
            has_lib |= strcmp(k_bad[i].args[k], "--lib") == 0;
        if (!has_lib) {
            args[n++] = "--lib";
            args[n++] = g_lib;
        }
        for (int k = 0; k < 8 && k_bad[i].args[k]; k++)
            args[n++] = k_bad[i].args[k];
        args[n] = NULL;
        run_result *r = run(args);
        cr_assert_eq(r->exit_code, 2, "case %zu: exit %d, stderr: %s", i, r->exit_code, r->err);
        cr_assert(strstr(r->err, k_bad[i].phrase) != NULL, "case %zu: stderr '%s' lacks '%s'", i,
                  r->err, k_bad[i].phrase);
        cr_assert(strncmp(r->err, "pprof-run: ", 11) == 0, "case %zu: '%s'", i, r->err);
        cr_assert(!exists(in_dir("pprof.run")), "case %zu created the run directory", i);
    }
}

Test(pprof_run, help_exits_0)
{
    const char *a[] = {"--help", NULL};
    run_result *r = run(a);
    cr_assert_eq(r->exit_code, 0);
    cr_assert(strstr(r->out, "usage: pprof-run") != NULL);
    cr_assert(strstr(r->out, "--buffer-kb") != NULL);
}

Test(pprof_run, options_after_the_command_belong_to_it)
{
    /* no "--": pprof-run stops at the first non-option, so -c and -q are sh's */
    const char *a[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, "sh", "-c", "exit 9", "-q", NULL};
    run_result *r = run(a);
    cr_assert_eq(r->exit_code, 9, "stderr: %s", r->err);
    cJSON *m = load_json(in_dir("r/manifest.json"));
    cJSON *cmd = cJSON_GetObjectItem(m, "command");
    cr_assert_eq(cJSON_GetArraySize(cmd), 4);
    cr_assert_str_eq(cJSON_GetArrayItem(cmd, 3)->valuestring, "-q");
    cJSON_Delete(m);
}

/* ---- the run directory -------------------------------------------------------------------- */

static const char *manifest_command_arg(const char *manifest, int k)
{
    static char buf[64];
    cJSON *m = load_json(manifest);
    cJSON *cmd = cJSON_GetObjectItem(m, "command");
    snprintf(buf, sizeof buf, "%s", cJSON_GetArrayItem(cmd, k)->valuestring);
    cJSON_Delete(m);
    return buf;
}

Test(pprof_run, keeps_the_previous_run_as_old)
{
    const char *d = in_dir("r");
    const char *first[] = {"-q", "-o", d, "--lib", g_lib, EXIT_APP, "exit", "1", NULL};
    const char *second[] = {"-q", "-o", d, "--lib", g_lib, EXIT_APP, "exit", "2", NULL};
    const char *third[] = {"-q", "-o", d, "--lib", g_lib, EXIT_APP, "exit", "3", NULL};
    cr_assert_eq(run(first)->exit_code, 1);
    write_text(in_dir("r/h.1.pft"), "x"); /* a trace of the first run */
    cr_assert_eq(run(second)->exit_code, 2);
    cr_assert_str_eq(manifest_command_arg(in_dir("r/manifest.json"), 2), "2");
    cr_assert_str_eq(manifest_command_arg(in_dir("r.old/manifest.json"), 2), "1");
    cr_assert(exists(in_dir("r.old/h.1.pft")));
    cr_assert(!exists(in_dir("r/h.1.pft")));
    cr_assert_eq(run(third)->exit_code, 3);
    cr_assert_str_eq(manifest_command_arg(in_dir("r.old/manifest.json"), 2), "2");
    cr_assert(!exists(in_dir("r.old/h.1.pft")), "the oldest run was not replaced");
    /* a trailing slash names the same directory */
    char slashed[PATH_MAX];
    snprintf(slashed, sizeof slashed, "%s/", d);
    const char *fourth[] = {"-q", "-o", slashed, "--lib", g_lib, EXIT_APP, "exit", "4", NULL};
    cr_assert_eq(run(fourth)->exit_code, 4);
    cr_assert_str_eq(manifest_command_arg(in_dir("r.old/manifest.json"), 2), "3");
}

Test(pprof_run, an_empty_directory_is_used_as_it_is)
{
    cr_assert_eq(mkdir(in_dir("r"), 0755), 0);
    const char *a[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, EXIT_APP, "exit", "0", NULL};
    cr_assert_eq(run(a)->exit_code, 0);
    cr_assert(exists(in_dir("r/manifest.json")));
    cr_assert(!exists(in_dir("r.old")));
}

Test(pprof_run, refuses_a_directory_that_is_not_a_run)
{
    cr_assert_eq(mkdir(in_dir("r"), 0755), 0);
    write_text(in_dir("r/notes.txt"), "mine\n");
    const char *a[] = {"-o", in_dir("r"), "--lib", g_lib, EXIT_APP, "exit", "0", NULL};
    run_result *r = run(a);
    cr_assert_eq(r->exit_code, 2, "stderr: %s", r->err);
    cr_assert(strstr(r->err, in_dir("r")) != NULL, "%s", r->err);
    cr_assert(strstr(r->err, "notes.txt") != NULL, "%s", r->err);
    cr_assert(exists(in_dir("r/notes.txt")));
    cr_assert(!exists(in_dir("r/manifest.json")));
    cr_assert(!exists(in_dir("r.old")));
    /* a regular file */
    write_text(in_dir("f"), "data\n");
    const char *b[] = {"-o", in_dir("f"), "--lib", g_lib, EXIT_APP, "exit", "0", NULL};
    r = run(b);
    cr_assert_eq(r->exit_code, 2);
    cr_assert(strstr(r->err, "not a directory") != NULL, "%s", r->err);
    /* a run directory whose .old is not a run: both left alone */
    cr_assert_eq(mkdir(in_dir("s"), 0755), 0);
    write_text(in_dir("s/manifest.json"), "{}\n");
    cr_assert_eq(mkdir(in_dir("s.old"), 0755), 0);
    write_text(in_dir("s.old/thesis.tex"), "precious\n");
    const char *c[] = {"-o", in_dir("s"), "--lib", g_lib, EXIT_APP, "exit", "0", NULL};
    r = run(c);
    cr_assert_eq(r->exit_code, 2);
    cr_assert(strstr(r->err, "s.old") != NULL, "%s", r->err);
    cr_assert(exists(in_dir("s.old/thesis.tex")));
    char text[16];
    slurp(in_dir("s/manifest.json"), text, sizeof text);
    cr_assert_str_eq(text, "{}\n");
}

Test(pprof_run, under_a_launcher_writes_a_manifest_per_rank_without_rotating)
{
    const char *d = in_dir("r");
    cr_assert_eq(mkdir(d, 0755), 0);
    write_text(in_dir("r/manifest.json"), "{}\n");
    spawn_opts o0 = {.env = {"OMPI_COMM_WORLD_RANK=0"}, .slot = 0};
    spawn_opts o1 = {.env = {"PMI_RANK=1"}, .slot = 1};
    const char *a[] = {"-q", "-o", d, "--lib", g_lib, EXIT_APP, "exit", "0", NULL};
    double t0 = now_s();
    pid_t p0 = spawn(&o0, a), p1 = spawn(&o1, a);
    run_result *r0 = finish(&o0, p0, t0), *r1 = finish(&o1, p1, t0);
    cr_assert_eq(r0->exit_code, 0, "stderr: %s", r0->err);
    cr_assert_eq(r1->exit_code, 0, "stderr: %s", r1->err);
    cr_assert(!exists(in_dir("r.old")), "a launched instance rotated the shared directory");
    cr_assert(exists(in_dir("r/manifest.json")));
    cJSON *m = load_json(in_dir("r/manifest.1.json"));
    cr_assert_eq((int)json_num(m, "rank"), 1);
    cr_assert_str_eq(json_str(m, "rank_variable"), "PMI_RANK");
    cJSON_Delete(m);
    cr_assert(exists(in_dir("r/manifest.0.json")));
    /* a missing directory is created by whichever instance comes first */
    spawn_opts o2 = {.env = {"RANK=2"}};
    const char *b[] = {"-q", "-o", in_dir("new/run"), "--lib", g_lib, EXIT_APP, "exit", "0",
                       NULL};
    cr_assert_eq(run_with(&o2, b)->exit_code, 0);
    cr_assert(exists(in_dir("new/run/manifest.2.json")));
    /* a directory that is not a run is still refused */
    cr_assert_eq(mkdir(in_dir("other"), 0755), 0);
    write_text(in_dir("other/notes.txt"), "mine\n");
    const char *c[] = {"-q", "-o", in_dir("other"), "--lib", g_lib, EXIT_APP, "exit", "0", NULL};
    cr_assert_eq(run_with(&o2, c)->exit_code, 2);
    /* sbatch sets SLURM_PROCID for the batch script: not a launched instance */
    spawn_opts o3 = {.env = {"SLURM_PROCID=0"}};
    const char *e[] = {"-q", "-o", in_dir("batch"), "--lib", g_lib, EXIT_APP, "exit", "0", NULL};
    cr_assert_eq(run_with(&o3, e)->exit_code, 0);
    cr_assert(exists(in_dir("batch/manifest.json")));
}

/* ---- what the job and the library see ----------------------------------------------------- */

static const char *env_value(const char *text, const char *name)
{
    static char val[PATH_MAX];
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, name, n) == 0 && p[n] == '=') {
            const char *end = strchr(p, '\n');
            size_t len = end ? (size_t)(end - p - n - 1) : strlen(p + n + 1);
            snprintf(val, sizeof val, "%.*s", (int)len, p + n + 1);
            return val;
        }
    }
    return NULL;
}

Test(pprof_run, the_job_sees_the_library_contract_in_its_environment)
{
    const char *envf = in_dir("env.txt");
    /* a relative -o: PPROF_DIR must still be absolute */
    const char *a[] = {"-q", "-o", "rel", "--lib", g_lib, "--steps", "10:20", "--buffer-kb",
                       "128", "--flush-ms", "50", "--", EXIT_APP, "env", envf, NULL};
    run_result *r = run(a);
    cr_assert_eq(r->exit_code, 0, "stderr: %s", r->err);
    char text[65536];
    slurp(envf, text, sizeof text);
    char lib_abs[PATH_MAX], dir_abs[PATH_MAX];
    cr_assert_not_null(realpath(g_lib, lib_abs));
    cr_assert_not_null(realpath(in_dir("rel"), dir_abs));
    const char *v = env_value(text, "NVTX_INJECTION64_PATH");
    cr_assert_not_null(v);
    cr_assert_str_eq(v, lib_abs);
    v = env_value(text, "PPROF_DIR");
    cr_assert_not_null(v);
    cr_assert_str_eq(v, dir_abs);
    cr_assert_str_eq(env_value(text, "PPROF_STEPS"), "10:20");
    cr_assert_str_eq(env_value(text, "PPROF_BUFFER_KB"), "128");
    cr_assert_str_eq(env_value(text, "PPROF_FLUSH_MS"), "50");
    cr_assert_str_eq(env_value(text, "PPROF_QUIET"), "1");
    /* open-ended window; no -q, no PPROF_QUIET */
    const char *b[] = {"-o", "rel", "--lib", g_lib, "--steps", "5:", EXIT_APP, "env", envf, NULL};
    cr_assert_eq(run(b)->exit_code, 0);
    slurp(envf, text, sizeof text);
    cr_assert_str_eq(env_value(text, "PPROF_STEPS"), "5:");
    cr_assert_null(env_value(text, "PPROF_QUIET"));
    cr_assert_null(env_value(text, "PPROF_BUFFER_KB"));
}

Test(pprof_run, finds_the_library_next_to_itself_or_says_where_it_looked)
{
    /* a copy of pprof-run in <tmp>/bin looks for <tmp>/profiler/libpprof.so */
    cr_assert_eq(mkdir(in_dir("bin"), 0755), 0);
    char cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "cp %s %s", PPRUN, in_dir("bin/pprof-run"));
    cr_assert_eq(system(cmd), 0);
    spawn_opts o = {.exe = in_dir("bin/pprof-run")};
    const char *a[] = {"-q", "-o", in_dir("r"), "--", EXIT_APP, "env", in_dir("env.txt"), NULL};
    run_result *r = run_with(&o, a);
    cr_assert_eq(r->exit_code, 2);
    cr_assert(strstr(r->err, "cannot find libpprof.so (tried ") != NULL, "%s", r->err);
    cr_assert(strstr(r->err, "profiler/libpprof.so") != NULL, "%s", r->err);
    cr_assert(!exists(in_dir("r")));
    cr_assert_eq(mkdir(in_dir("profiler"), 0755), 0);
    write_text(in_dir("profiler/libpprof.so"), "stand-in\n");
    r = run_with(&o, a);
    cr_assert_eq(r->exit_code, 0, "stderr: %s", r->err);
    char text[65536], lib_abs[PATH_MAX];
    slurp(in_dir("env.txt"), text, sizeof text);
    cr_assert_not_null(realpath(in_dir("profiler/libpprof.so"), lib_abs));
    cr_assert_str_eq(env_value(text, "NVTX_INJECTION64_PATH"), lib_abs);
    /* $PPROF_LIB wins over the lookup, and must exist */
    spawn_opts o2 = {.exe = in_dir("bin/pprof-run"), .env = {"PPROF_LIB=/pp/no/such.so"}};
    r = run_with(&o2, a);
    cr_assert_eq(r->exit_code, 2);
    cr_assert(strstr(r->err, "PPROF_LIB '/pp/no/such.so'") != NULL, "%s", r->err);
}

/* ---- manifest and summary ----------------------------------------------------------------- */

/* Writes a small trace file as the library would: header, one events block, and a footer
 * unless `footer` is 0 (a process killed before it could close its file). */
static void write_trace(const char *path, uint32_t pid, int32_t rank, uint64_t dropped,
                        int footer)
{
    pp_trace_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, PP_TRACE_MAGIC, 4);
    h.version = PP_TRACE_VERSION;
    h.header_bytes = sizeof h;
    h.pid = pid;
    h.rank = rank;
    h.mono_ns = 1000;
    h.real_ns = 1700000000000000000ull;
    snprintf(h.host, sizeof h.host, "nodeA");
    snprintf(h.exe, sizeof h.exe, "job");
    pp_trace_writer *w = NULL;
    cr_assert_eq(pp_trace_writer_open(path, &h, &w), PP_OK, "%s", pp_error_message());
    unsigned char buf[256];
    memset(buf, 0, sizeof buf);
    pp_rec_range push;
    memset(&push, 0, sizeof push);
    push.h.type = PP_REC_PUSH;
    push.h.size = sizeof push;
    push.h.tid = pid;
    push.h.ts = 2000;
    pp_rec_pop pop;
    memset(&pop, 0, sizeof pop);
    pop.h.type = PP_REC_POP;
    pop.h.size = sizeof pop;
    pop.h.tid = pid;
    pop.h.ts = 3000;
    memcpy(buf, &push, sizeof push);
    memcpy(buf + sizeof push, &pop, sizeof pop);
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, pid, buf, sizeof push + sizeof pop, 2),
                 PP_OK, "%s", pp_error_message());
    if (footer) {
        pp_rec_footer f;
        memset(&f, 0, sizeof f);
        f.h.type = PP_REC_FOOTER;
        f.h.size = sizeof f;
        f.h.ts = 4000;
        f.events = 2;
        f.dropped = dropped;
        f.blocks = 1;
        f.threads = 1;
        cr_assert_eq(pp_trace_writer_footer(w, &f), PP_OK, "%s", pp_error_message());
    }
    pp_trace_writer_close(w);
}

Test(pprof_run, manifest_and_summary_describe_the_run_and_every_trace_file)
{
    /* The job copies prepared trace files into $PPROF_DIR, as libpprof would write them. */
    write_trace(in_dir("ok.pft"), 101, 0, 0, 1);
    write_trace(in_dir("drops.pft"), 102, 1, 5, 1);
    write_trace(in_dir("killed.pft"), 103, -1, 0, 0);
    write_text(in_dir("junk.pft"), "this is not a trace file at all, not even its header\n");
    char script[4 * PATH_MAX];
    snprintf(script, sizeof script,
             "cp %s \"$PPROF_DIR/nodeA.101.pft\" && cp %s \"$PPROF_DIR/nodeA.102.pft\" && "
             "cp %s \"$PPROF_DIR/nodeA.103.pft\" && cp %s \"$PPROF_DIR/nodeA.104.pft\"; exit 3",
             in_dir("ok.pft"), in_dir("drops.pft"), in_dir("killed.pft"), in_dir("junk.pft"));
    const char *a[] = {"-o", in_dir("r"), "--lib", g_lib, "--", "sh", "-c", script, NULL};
    run_result *r = run(a);
    cr_assert_eq(r->exit_code, 3, "stderr: %s", r->err);

    cJSON *m = load_json(in_dir("r/manifest.json"));
    cr_assert_eq((int)json_num(m, "manifest_version"), 1);
    cJSON *ver = cJSON_GetObjectItem(m, "version");
    cr_assert_str_eq(json_str(ver, "pipeprof"), "0.1.0");
    cr_assert_eq((int)json_num(ver, "trace_format"), PP_TRACE_VERSION);
    cJSON *cmd = cJSON_GetObjectItem(m, "command");
    cr_assert_eq(cJSON_GetArraySize(cmd), 3);
    cr_assert_str_eq(cJSON_GetArrayItem(cmd, 0)->valuestring, "sh");
    cr_assert_str_eq(cJSON_GetArrayItem(cmd, 2)->valuestring, script);
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(m, "rank")));
    cr_assert_eq(json_str(m, "library")[0], '/');
    cr_assert_eq(json_str(m, "run_dir")[0], '/');
    cr_assert_eq(json_str(m, "cwd")[0], '/');
    cr_assert_gt(json_num(m, "pprof_run_pid"), 0);
    cr_assert_not_null(json_str(m, "host"));
    cJSON *env = cJSON_GetObjectItem(m, "environment");
    cr_assert_str_eq(json_str(env, "PPROF_DIR"), json_str(m, "run_dir"));
    cr_assert_str_eq(json_str(env, "NVTX_INJECTION64_PATH"), json_str(m, "library"));
    cr_assert_null(cJSON_GetObjectItem(env, "HOME"), "the manifest records the whole env");
    const char *utc = json_str(cJSON_GetObjectItem(m, "start"), "utc");
    cr_assert(utc && strlen(utc) == 24 && utc[10] == 'T' && utc[23] == 'Z', "%s", utc);
    cr_assert_gt(json_num(cJSON_GetObjectItem(m, "end"), "realtime_ns"),
                 1.6e18); /* after 2020 */
    cr_assert_geq(json_num(m, "duration_s"), 0.0);
    cJSON *ex = cJSON_GetObjectItem(m, "exit");
    cr_assert_str_eq(json_str(ex, "how"), "exited");
    cr_assert_eq((int)json_num(ex, "status"), 3);

    cJSON *files = cJSON_GetObjectItem(m, "files");
    cr_assert_eq(cJSON_GetArraySize(files), 4);
    cJSON *f0 = cJSON_GetArrayItem(files, 0), *f1 = cJSON_GetArrayItem(files, 1);
    cJSON *f2 = cJSON_GetArrayItem(files, 2), *f3 = cJSON_GetArrayItem(files, 3);
    cr_assert_str_eq(json_str(f0, "name"), "nodeA.101.pft");
    cr_assert_eq((int)json_num(f0, "pid"), 101);
    cr_assert_eq((int)json_num(f0, "rank"), 0);
    cr_assert_str_eq(json_str(f0, "host"), "nodeA");
    cr_assert_eq((int)json_num(f0, "events"), 2);
    cr_assert_eq((int)json_num(f0, "dropped"), 0);
    cr_assert_gt(json_num(f0, "bytes"), 256);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(f0, "has_footer")));
    cr_assert_eq((int)json_num(f1, "dropped"), 5);
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(f2, "has_footer")));
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(f2, "rank")));
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(f3, "readable")));
    cr_assert_eq((int)json_num(f3, "pid"), 104, "the pid comes from the name when unreadable");
    cr_assert_not_null(json_str(f3, "problem"));
    /* the process that died, named */
    cJSON *lost = cJSON_GetObjectItem(m, "lost");
    cr_assert_eq(cJSON_GetArraySize(lost), 1);
    cr_assert_str_eq(json_str(cJSON_GetArrayItem(lost, 0), "name"), "nodeA.103.pft");
    cr_assert_eq((int)json_num(cJSON_GetArrayItem(lost, 0), "pid"), 103);
    cJSON *tot = cJSON_GetObjectItem(m, "totals");
    cr_assert_eq((int)json_num(tot, "files"), 4);
    cr_assert_eq((int)json_num(tot, "dropped"), 5);
    cJSON_Delete(m);

    /* the summary: every file, its drops, the missing footer, the unreadable one */
    cr_assert(strstr(r->out, "exited with status 3") != NULL, "%s", r->out);
    cr_assert(strstr(r->out, "nodeA.101.pft") != NULL, "%s", r->out);
    cr_assert(strstr(r->out, "no footer (process killed?)") != NULL, "%s", r->out);
    cr_assert(strstr(r->out, "unreadable") != NULL, "%s", r->out);
    cr_assert(strstr(r->out, "total: 4 files") != NULL, "%s", r->out);
    cr_assert(strstr(r->out, "5 dropped") != NULL, "%s", r->out);
    cr_assert(strstr(r->err, "warning: 5 events dropped") != NULL, "%s", r->err);
    cr_assert(strstr(r->err, "(died: pid 103)") != NULL, "%s", r->err);

    /* -q: no summary, but the drops still show */
    const char *q[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, "--", "sh", "-c", script, NULL};
    r = run(q);
    cr_assert_eq(r->exit_code, 3);
    cr_assert_str_eq(r->out, "");
    cr_assert(strstr(r->err, "5 events dropped") != NULL, "%s", r->err);
}

Test(pprof_run, under_a_launcher_lists_only_its_own_rank)
{
    /* the shared directory already holds rank 0's trace and rank 1's */
    cr_assert_eq(mkdir(in_dir("r"), 0755), 0);
    write_trace(in_dir("r/nodeA.201.pft"), 201, 0, 0, 1);
    write_trace(in_dir("r/nodeA.202.pft"), 202, 1, 0, 1);
    spawn_opts o = {.env = {"PMI_RANK=1"}};
    const char *a[] = {"-o", in_dir("r"), "--lib", g_lib, EXIT_APP, "exit", "0", NULL};
    run_result *r = run_with(&o, a);
    cr_assert_eq(r->exit_code, 0, "stderr: %s", r->err);
    cJSON *m = load_json(in_dir("r/manifest.1.json"));
    cJSON *files = cJSON_GetObjectItem(m, "files");
    cr_assert_eq(cJSON_GetArraySize(files), 1);
    cr_assert_str_eq(json_str(cJSON_GetArrayItem(files, 0), "name"), "nodeA.202.pft");
    cJSON_Delete(m);
    cr_assert(strstr(r->out, "nodeA.201.pft") == NULL, "%s", r->out);
}

/* ---- the job's outcome is pprof-run's, whatever the post-run work meets --------------------- */

/* The job leaves a trace in $PPROF_DIR (as libpprof would) and exits with `code`. */
static const char *job_with_trace(const char *trace, int code)
{
    static char script[2 * PATH_MAX];
    snprintf(script, sizeof script, "cp %s \"$PPROF_DIR/nodeA.101.pft\"; exit %d", trace, code);
    return script;
}

/* The summary's analysis runs in a child: when it crashes (here through the documented test
 * hook PPROF_TEST_SUMMARY_CRASH=1), pprof-run says so and still exits with the job's status,
 * with the manifest written. */
Test(pprof_run, a_crashing_summary_keeps_the_jobs_status)
{
    write_trace(in_dir("t.pft"), 101, 0, 0, 1);
    static const int codes[] = {0, 3};
    for (size_t i = 0; i < 2; i++) {
        spawn_opts o = {.env = {"PPROF_TEST_SUMMARY_CRASH=1"}};
        const char *a[] = {"-o", in_dir("r"), "--lib", g_lib, "--", "sh", "-c",
                           job_with_trace(in_dir("t.pft"), codes[i]), NULL};
        run_result *r = run_with(&o, a);
        cr_assert_eq(r->exit_code, codes[i], "stderr: %s", r->err);
        /* SIGSEGV, or SIGABRT when a sanitizer catches it */
        cr_assert(strstr(r->err, "the pipeline summary died (signal ") != NULL, "%s", r->err);
        cr_assert(strstr(r->out, "nodeA.101.pft") != NULL, "the file table is printed: %s",
                  r->out);
        cr_assert(exists(in_dir("r/manifest.json")));
    }
    /* without the hook the same run has its summary (the generic view: the trace holds one
     * range and no pipeline) and no complaint */
    const char *a[] = {"-o", in_dir("r"), "--lib", g_lib, "--", "sh", "-c",
                       job_with_trace(in_dir("t.pft"), 0), NULL};
    run_result *r = run(a);
    cr_assert_eq(r->exit_code, 0, "stderr: %s", r->err);
    cr_assert(strstr(r->err, "summary died") == NULL, "%s", r->err);
    cr_assert(strstr(r->out, "no pipeline ranges: 1 range(s)") != NULL, "%s", r->out);
}

/* A full disk for the manifest (a file-size limit: writes fail with EFBIG, and pprof-run does
 * not die of SIGXFSZ): the job's status comes back, 0 included, and stderr says what failed. */
Test(pprof_run, a_manifest_that_cannot_be_written_keeps_the_jobs_status)
{
    static const int codes[] = {0, 3};
    for (size_t i = 0; i < 2; i++) {
        char code[8];
        snprintf(code, sizeof code, "%d", codes[i]);
        spawn_opts o = {.fsize_limit = 200};
        const char *a[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, "--", EXIT_APP, "exit",
                           code, NULL};
        run_result *r = run_with(&o, a);
        cr_assert_eq(r->exit_code, codes[i], "stderr: %s", r->err);
        cr_assert(strstr(r->err, "pprof-run: no manifest:") != NULL, "%s", r->err);
        cr_assert(strstr(r->err, "File too large") != NULL, "%s", r->err);
        cr_assert(!exists(in_dir("r/manifest.json")));
    }
}

/* Another pprof-run sharing DIR (a launcher whose rank variable is unknown) wrote manifest.json
 * first: it is kept, and this instance's goes to manifest.<host>.<pid>.json. */
Test(pprof_run, a_manifest_written_meanwhile_is_not_replaced)
{
    const char *a[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, "--", "sh", "-c",
                       "echo '{\"other\": 1}' > \"$PPROF_DIR/manifest.json\"; exit 5", NULL};
    run_result *r = run(a);
    cr_assert_eq(r->exit_code, 5, "stderr: %s", r->err);
    char text[256];
    slurp(in_dir("r/manifest.json"), text, sizeof text);
    cr_assert_str_eq(text, "{\"other\": 1}\n");
    const char *mine = strstr(r->err, "this one is ");
    cr_assert_not_null(mine, "%s", r->err);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", mine + strlen("this one is "));
    path[strcspn(path, "\n")] = '\0';
    cr_assert(strstr(path, "/manifest.") && strstr(path, ".json"), "%s", path);
    cJSON *m = load_json(path);
    cr_assert_eq((int)json_num(cJSON_GetObjectItem(m, "exit"), "status"), 5);
    cJSON_Delete(m);
}

/* Launchers beyond Open MPI, MPICH and Slurm: each instance writes its own manifest. */
Test(pprof_run, other_launchers_rank_variables_give_a_manifest_per_rank)
{
    static const char *const vars[] = {"MV2_COMM_WORLD_RANK=4", "PALS_RANKID=5",
                                       "FLUX_TASK_RANK=6", "JSM_NAMESPACE_RANK=7"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        spawn_opts o = {.env = {vars[i]}};
        const char *a[] = {"-q", "-o", in_dir("r"), "--lib", g_lib, EXIT_APP, "exit", "0", NULL};
        run_result *r = run_with(&o, a);
        cr_assert_eq(r->exit_code, 0, "%s: %s", vars[i], r->err);
        char name[64];
        snprintf(name, sizeof name, "r/manifest.%c.json", vars[i][strlen(vars[i]) - 1]);
        cr_assert(exists(in_dir(name)), "%s: no %s", vars[i], name);
    }
    cr_assert(!exists(in_dir("r/manifest.json")));
}

/* A long trace (1.2 M events, about 48 MB): pprof-run's manifest and summary read it as
 * pprof-report does, block by block, so its peak RSS (pprof-run, the job and the summary's
 * child, as wait4 reports it) stays near pprof-report's, far below the trace's size. */
static void write_long_trace(const char *path, int pairs)
{
    pp_trace_header h;
    memset(&h, 0, sizeof h);
    h.pid = 101;
    h.rank = 0;
    snprintf(h.host, sizeof h.host, "nodeA");
    pp_trace_writer *w = NULL;
    cr_assert_eq(pp_trace_writer_open(path, &h, &w), PP_OK, "%s", pp_error_message());
    enum { PER_BLOCK = 512 };
    static unsigned char buf[PER_BLOCK * (sizeof(pp_rec_range) + sizeof(pp_rec_pop))];
    uint64_t ts = 1000;
    for (int done = 0; done < pairs; done += PER_BLOCK) {
        size_t len = 0;
        for (int k = 0; k < PER_BLOCK; k++) {
            pp_rec_range push;
            memset(&push, 0, sizeof push);
            push.h = (pp_rec_header){PP_REC_PUSH, sizeof push, 101, ts};
            pp_rec_pop pop = {{PP_REC_POP, sizeof pop, 101, ts + 500}, 0, 0};
            memcpy(buf + len, &push, sizeof push);
            memcpy(buf + len + sizeof push, &pop, sizeof pop);
            len += sizeof push + sizeof pop;
            ts += 1000;
        }
        cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_EVENTS, 101, buf, len, 2 * PER_BLOCK),
                     PP_OK, "%s", pp_error_message());
    }
    pp_trace_writer_close(w);
}

Test(pprof_run, the_summary_of_a_long_trace_streams_like_pprof_report)
{
    write_long_trace(in_dir("long.pft"), 600 * 1024);
    struct stat sb;
    cr_assert_eq(stat(in_dir("long.pft"), &sb), 0);
    const char *a[] = {"-o", in_dir("r"), "--lib", g_lib, "--", "sh", "-c",
                       job_with_trace(in_dir("long.pft"), 0), NULL};
    run_result *r = run(a);
    cr_assert_eq(r->exit_code, 0, "stderr: %s", r->err);
    cr_assert(strstr(r->out, "1228800") != NULL, "every event counted: %s", r->out);
    long run_kb = r->maxrss_kb;
    spawn_opts o = {.exe = PPREPORT, .slot = 1};
    const char *rep[] = {in_dir("r"), NULL};
    r = run_with(&o, rep);
    long report_kb = r->maxrss_kb;
    cr_log_info("trace %.1f MB: pprof-run peak RSS %ld KiB, pprof-report %ld KiB",
                (double)sb.st_size / 1e6, run_kb, report_kb);
#if defined(__SANITIZE_ADDRESS__)
    return; /* AddressSanitizer's shadow and quarantine: RSS says nothing about the tools */
#endif
    cr_assert_leq(run_kb, report_kb + report_kb / 2, "pprof-run %ld KiB, pprof-report %ld KiB",
                  run_kb, report_kb);
    cr_assert_lt(run_kb * 1024.0, 0.5 * (double)sb.st_size, "%ld KiB for a %lld-byte trace",
                 run_kb, (long long)sb.st_size);
}

/* A SIGTERM once the job is over (here: as soon as the manifest is there, while the summary
 * reads the long trace) ends the summary, not pprof-run's answer: the job's status. */
Test(pprof_run, a_signal_after_the_job_keeps_its_status)
{
    write_long_trace(in_dir("long.pft"), 600 * 1024);
    const char *a[] = {"-o", in_dir("r"), "--lib", g_lib, "--", "sh", "-c",
                       job_with_trace(in_dir("long.pft"), 3), NULL};
    double t0 = now_s();
    pid_t pid = spawn(NULL, a);
    cr_assert(wait_for(in_dir("r/manifest.json")), "no manifest");
    kill(pid, SIGTERM);
    run_result *r = finish(NULL, pid, t0);
    cr_log_info("%s", r->err);
    cr_assert_eq(r->exit_code, 3, "stderr: %s", r->err);
}

/* ---- end to end with the real library ----------------------------------------------------- */

Test(pprof_run, captures_pptrain_end_to_end)
{
    if (!exists(LIBPPROF))
        cr_skip_test("libpprof.so is not built (%s)", LIBPPROF);
    if (!exists(PPTRAIN))
        cr_skip_test("pptrain is not built");
    const char *costs = in_dir("costs.json");
    write_text(costs, "{\"layers\": ["
                      "{\"name\": \"l0\", \"fwd_us\": 200, \"bwd_us\": 400},"
                      "{\"name\": \"l1\", \"fwd_us\": 200, \"bwd_us\": 400},"
                      "{\"name\": \"l2\", \"fwd_us\": 200, \"bwd_us\": 400},"
                      "{\"name\": \"l3\", \"fwd_us\": 200, \"bwd_us\": 400}],"
                      " \"p2p_GBps\": 10.0, \"p2p_latency_us\": 10.0, \"optimizer_us\": 100}");
    const char *a[] = {"-o", in_dir("run1"), "--", PPTRAIN, "--backend", "sim", "--costs", costs,
                       "--stages", "2", "--microbatches", "4", "--steps", "3", NULL};
    run_result *r = run(a);
    cr_assert_eq(r->exit_code, 0, "stderr: %s\nstdout: %s", r->err, r->out);
    cJSON *m = load_json(in_dir("run1/manifest.json"));
    cJSON *files = cJSON_GetObjectItem(m, "files");
    cr_assert_geq(cJSON_GetArraySize(files), 1, "no trace file; stderr: %s", r->err);
    cJSON *f = cJSON_GetArrayItem(files, 0);
    cr_assert_gt(json_num(f, "events"), 0);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(f, "has_footer")));
    cr_assert(strstr(r->out, json_str(f, "name")) != NULL, "summary lacks the file: %s", r->out);
    cJSON_Delete(m);
}
