/* pp_testkit.c: see pp_testkit.h. */
#define _GNU_SOURCE /* mkdtemp, setenv, putenv */
#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

char tk_dir[256];

void tk_dir_create(const char *prefix)
{
    snprintf(tk_dir, sizeof tk_dir, "/tmp/%s_XXXXXX", prefix);
    cr_assert_not_null(mkdtemp(tk_dir), "mkdtemp: %s", strerror(errno));
}

void tk_dir_remove(void)
{
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tk_dir);
    cr_assert_eq(system(cmd), 0);
}

const char *tk_path(const char *name)
{
    static char path[16][PATH_MAX];
    static int k;
    k = (k + 1) % 16;
    snprintf(path[k], sizeof path[k], "%s/%s", tk_dir, name);
    return path[k];
}

int tk_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

void tk_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

char *tk_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t want = n > 0 ? (size_t)n : 0;
    char *buf = malloc(want + 1);
    size_t got = buf ? fread(buf, 1, want, f) : 0;
    fclose(f);
    if (buf)
        buf[got] = '\0';
    if (len)
        *len = got;
    return buf;
}

tk_result tk_runv(const char *const *argv, const char *const *env)
{
    static int slot;
    slot++;
    char outp[PATH_MAX], errp[PATH_MAX];
    snprintf(outp, sizeof outp, "%s/.out%d", tk_dir, slot);
    snprintf(errp, sizeof errp, "%s/.err%d", tk_dir, slot);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || chdir(tk_dir) != 0)
            _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        signal(SIGCHLD, SIG_DFL);
        unsetenv("PPROF_LIB");
        unsetenv("PPROF_PLAN");
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    tk_result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    r.out = tk_slurp(outp, NULL);
    r.err = tk_slurp(errp, NULL);
    cr_assert(r.out && r.err);
    return r;
}

tk_result tk_run(const char *exe, const char *const *args, const char *const *env)
{
    const char *argv[64];
    int n = 0;
    argv[n++] = exe;
    while (args && args[n - 1] && n < 63) {
        argv[n] = args[n - 1];
        n++;
    }
    argv[n] = NULL;
    return tk_runv(argv, env);
}

const char *const *tk_mpirun_env(const char *const *extra)
{
    static char asan[512];
    static const char *env[40];
    const char *have = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "ASAN_OPTIONS=%s%sdetect_leaks=0", have ? have : "",
             have && *have ? ":" : "");
    int n = 0;
    env[n++] = "OMPI_ALLOW_RUN_AS_ROOT=1";
    env[n++] = "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1";
    env[n++] = asan;
    for (int i = 0; extra && extra[i] && n < 39; i++)
        env[n++] = extra[i];
    env[n] = NULL;
    return env;
}

const char *const tk_mpirun[] = {"mpirun", "--oversubscribe", "--mca", "btl", "self,vader",
                                 "--mca", "btl_vader_single_copy_mechanism", "none", NULL};

void tk_result_free(tk_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

const char *tk_write_costs(const char *name, int n, double fwd_us, double bwd_us,
                           unsigned long long act_bytes, unsigned long long param_bytes,
                           double gbps, double latency_us)
{
    const char *path = tk_path(name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs("{\"layers\": [", f);
    for (int i = 0; i < n; i++) {
        fprintf(f, "%s{\"name\": \"l%d\", \"fwd_us\": %g, \"bwd_us\": %g", i ? ", " : "", i,
                fwd_us, bwd_us);
        if (act_bytes)
            fprintf(f, ", \"activation_bytes\": %llu", act_bytes);
        if (param_bytes)
            fprintf(f, ", \"param_bytes\": %llu", param_bytes);
        fputc('}', f);
    }
    fprintf(f, "], \"p2p_GBps\": %g, \"p2p_latency_us\": %g}\n", gbps, latency_us);
    cr_assert_eq(fclose(f), 0);
    return path;
}

int tk_python_ok(const char *py, const char *check)
{
    if (!py || !py[0] || access(py, X_OK) != 0)
        return 0;
    const char *argv[] = {py, "-c", check, NULL};
    tk_result r = tk_runv(argv, NULL);
    int ok = r.code == 0;
    tk_result_free(&r);
    return ok;
}

const char *tk_find_python(const char *env_var, const char *configured, const char *venv_var,
                           const char *venv, const char *check)
{
    static char path[PATH_MAX];
    const char *env = getenv(env_var);
    if (env && env[0])
        return tk_python_ok(env, check) ? env : NULL;
    if (tk_python_ok(configured, check))
        return configured;
    const char *dir = venv_var ? getenv(venv_var) : NULL;
    if (dir && dir[0]) {
        snprintf(path, sizeof path, "%s/bin/python", dir);
        return tk_python_ok(path, check) ? path : NULL;
    }
    snprintf(path, sizeof path, "/var/cache/pipeprof/%s/bin/python", venv);
    if (tk_python_ok(path, check))
        return path;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0])
        snprintf(path, sizeof path, "%s/pipeprof/%s/bin/python", xdg, venv);
    else if (home && home[0])
        snprintf(path, sizeof path, "%s/.cache/pipeprof/%s/bin/python", home, venv);
    else
        return NULL;
    return tk_python_ok(path, check) ? path : NULL;
}

int tk_judge_next(tk_judge *j)
{
    if (j->attempt >= 0 && (!j->missed || j->attempt + 1 >= TK_TIMING_ATTEMPTS))
        return 0;
    j->attempt++;
    j->missed = 0;
    return 1;
}

const char *tk_judge_dir(const tk_judge *j, const char *prefix, char *dir, size_t cap)
{
    char name[64];
    snprintf(name, sizeof name, "%s%d", prefix, j->attempt);
    snprintf(dir, cap, "%s", tk_path(name));
    return dir;
}

void tk_judge_that(tk_judge *j, int ok, const char *fmt, ...)
{
    if (ok)
        return;
    j->missed = TK_TIMING_JUDGED;
    char line[6144];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    cr_log_info("attempt %d of %d missed: %s", j->attempt + 1, TK_TIMING_ATTEMPTS, line);
    int n = snprintf(j->log + j->len, sizeof j->log - j->len, "attempt %d of %d: %s\n",
                     j->attempt + 1, TK_TIMING_ATTEMPTS, line);
    if (n > 0)
        j->len += (size_t)n < sizeof j->log - j->len ? (size_t)n : sizeof j->log - 1 - j->len;
}
