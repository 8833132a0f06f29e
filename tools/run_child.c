/* run_child.c: the processes pprof-run runs (pprof_run.h): the job, whose whole tree it reaps
 * (as a child subreaper) while forwarding the signals it gets, and the child that prints the
 * pipeline summary, so that nothing the analysis does can change the job's exit status. */
#define _GNU_SOURCE /* prctl, WCOREDUMP, pipe2, strsignal: Linux-only tool by design */
#include "pprof_run.h"
#include "pp_analyzer.h"
#include "pp_tool.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const int k_forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};

/* SIGXFSZ as pprof-run found it (CMD gets it back). pprof-run ignores it: a file-size limit
 * (ulimit -f) then fails its manifest write with EFBIG, which it reports, instead of killing it
 * and replacing the job's status with 153. */
static void (*g_xfsz_old)(int) = SIG_DFL;

/* The signal mask before pprof-run blocked the forwarded signals for its post-run work
 * (prun_signals_hold): the summary's child runs with it. */
static sigset_t g_mask_before_post;

void prun_signals_init(void)
{
    g_xfsz_old = signal(SIGXFSZ, SIG_IGN);
    if (g_xfsz_old == SIG_ERR)
        g_xfsz_old = SIG_DFL;
}

void prun_signals_hold(void)
{
    sigset_t post;
    sigemptyset(&post);
    for (size_t i = 0; i < sizeof k_forwarded / sizeof k_forwarded[0]; i++)
        sigaddset(&post, k_forwarded[i]);
    sigprocmask(SIG_BLOCK, &post, &g_mask_before_post);
}

static void note_reaped(child_result *r, pid_t pid)
{
    if (r->n_reaped == r->cap_reaped) {
        size_t cap = r->cap_reaped ? 2 * r->cap_reaped : 16;
        pid_t *p = realloc(r->reaped, cap * sizeof *p);
        if (!p)
            return; /* only used to attribute trace files under a launcher */
        r->reaped = p;
        r->cap_reaped = cap;
    }
    r->reaped[r->n_reaped++] = pid;
}

/* Sends `sig` to `target` unless it already got it: the terminal's Ctrl-C and Ctrl-\ reach the
 * whole foreground process group, CMD included, and a trainer that checkpoints on the first
 * SIGINT and aborts on the second must not see two. */
static void forward_signal(pid_t target, int sig, const siginfo_t *si)
{
    if ((sig == SIGINT || sig == SIGQUIT) && si->si_code == SI_KERNEL &&
        getpgid(target) == getpgrp())
        return;
    if (kill(target, sig) == 0)
        pp_tool_note(1, "forwarded signal %d (%s) to pid %d", sig, strsignal(sig), (int)target);
}

/* Our current children (CMD's orphans, adopted as subreaper), from /proc; 0 if unknown. */
static size_t list_children(pid_t *out, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = 0;
    int pid;
    while (n < cap && fscanf(f, "%d", &pid) == 1)
        out[n++] = pid;
    fclose(f);
    return n;
}

/* Forks and execs CMD with the signal mask and SIGCHLD disposition pprof-run found; r->pid is
 * the child, r->exec_errno says whether the exec failed. On failure the mask is given back. */
static pp_status start_command(const args *a, child_result *r, const sigset_t *old_mask,
                               const struct sigaction *chld_old)
{
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) != 0) {
        sigprocmask(SIG_SETMASK, old_mask, NULL);
        return PP_ERR(PP_ERR_RUNTIME, "pipe: %s", strerror(errno));
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(errpipe[0]);
        close(errpipe[1]);
        sigprocmask(SIG_SETMASK, old_mask, NULL);
        return PP_ERR(PP_ERR_RUNTIME, "fork: %s", strerror(e));
    }
    if (pid == 0) {
        close(errpipe[0]);
        sigaction(SIGCHLD, chld_old, NULL);
        signal(SIGXFSZ, g_xfsz_old); /* the job's own, not pprof-run's (prun_signals_init) */
        sigprocmask(SIG_SETMASK, old_mask, NULL);
        execvp(a->cmd[0], a->cmd);
        int e = errno;
        ssize_t w = write(errpipe[1], &e, sizeof e);
        (void)w;
        _exit(EXIT_CANNOT_RUN);
    }
    r->pid = pid;
    close(errpipe[1]);
    /* The pipe closes on a successful exec (O_CLOEXEC) or carries execvp's errno. */
    int e = 0;
    ssize_t got;
    do
        got = read(errpipe[0], &e, sizeof e);
    while (got < 0 && errno == EINTR);
    close(errpipe[0]);
    if (got == (ssize_t)sizeof e)
        r->exec_errno = e;
    else
        pp_tool_note(1, "started '%s' as pid %d", a->cmd[0], (int)pid);
    return PP_OK;
}

/* Reaps CMD and every descendant left to us until none is left, forwarding the signals of
 * `wait_set` (blocked) to CMD, or once it has exited to its orphans. */
static pp_status reap_tree(const args *a, child_result *r, const sigset_t *wait_set)
{
    pid_t pid = r->pid;
    int main_done = 0, noticed = 0;
    uint64_t main_done_ns = 0;
    for (;;) {
        int status;
        pid_t w;
        while ((w = waitpid(-1, &status, WNOHANG)) > 0) {
            note_reaped(r, w);
            if (w == pid) {
                main_done = 1;
                main_done_ns = pp_now_ns();
                r->signaled = WIFSIGNALED(status);
                r->code = r->signaled ? WTERMSIG(status) : WEXITSTATUS(status);
                r->core_dumped = r->signaled && WCOREDUMP(status);
                pp_tool_note(1, "'%s' (pid %d) %s %d", a->cmd[0], (int)pid,
                     r->signaled ? "killed by signal" : "exited with status", r->code);
            } else {
                pp_tool_note(1, "reaped descendant pid %d", (int)w);
            }
        }
        if (w < 0 && errno == ECHILD)
            return PP_OK;
        if (w < 0 && errno != EINTR)
            return PP_ERR(PP_ERR_RUNTIME, "waitpid: %s", strerror(errno));
        if (main_done && !noticed && !a->quiet && pp_now_ns() - main_done_ns > 2000000000ull) {
            pid_t kids[8];
            size_t n = list_children(kids, 8);
            fprintf(stderr, "pprof-run: '%s' exited; waiting for the processes it left "
                            "running", a->cmd[0]);
            for (size_t i = 0; i < n; i++)
                fprintf(stderr, "%s%d", i ? " " : " (pid ", (int)kids[i]);
            fprintf(stderr, "%s so that their traces are complete\n", n ? ")" : "");
            noticed = 1;
        }
        siginfo_t si;
        struct timespec tick = {1, 0}; /* the notice above; SIGCHLD normally wakes us first */
        int sig = sigtimedwait(wait_set, &si, &tick);
        if (sig <= 0 || sig == SIGCHLD)
            continue;
        if (!main_done) {
            forward_signal(pid, sig, &si);
        } else {
            pid_t kids[256];
            size_t n = list_children(kids, 256);
            for (size_t i = 0; i < n; i++)
                forward_signal(kids[i], sig, &si);
        }
    }
}

pp_status prun_command(const args *a, child_result *r)
{
    sigset_t wait_set, old_mask;
    sigemptyset(&wait_set);
    for (size_t i = 0; i < sizeof k_forwarded / sizeof k_forwarded[0]; i++) {
        /* A signal ignored on entry (nohup) stays ignored, for us and for CMD. */
        struct sigaction sa;
        if (sigaction(k_forwarded[i], NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
            continue;
        sigaddset(&wait_set, k_forwarded[i]);
    }
    sigaddset(&wait_set, SIGCHLD);
    /* With SIGCHLD ignored (inherited from our parent) the kernel would reap CMD for us and its
     * exit status would be lost: take the default, and give CMD back what it had. */
    struct sigaction chld_dfl, chld_old;
    memset(&chld_dfl, 0, sizeof chld_dfl);
    chld_dfl.sa_handler = SIG_DFL;
    sigemptyset(&chld_dfl.sa_mask);
    sigaction(SIGCHLD, &chld_dfl, &chld_old);
    /* Blocked before the fork: a signal that arrives at any moment is queued, then taken by
     * sigtimedwait; no work happens in a signal handler. */
    if (sigprocmask(SIG_BLOCK, &wait_set, &old_mask) != 0)
        return PP_ERR(PP_ERR_RUNTIME, "sigprocmask: %s", strerror(errno));
    /* Orphans of CMD's tree (a launcher's daemons, a backgrounded writer) become our children,
     * so we can wait for them: their trace files are complete only once they exit. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        pp_tool_note(1, "PR_SET_CHILD_SUBREAPER failed (%s): orphaned processes are not waited for",
             strerror(errno));
    pp_status st = start_command(a, r, &old_mask, &chld_old);
    if (st != PP_OK || (st = reap_tree(a, r, &wait_set)) != PP_OK)
        return st;
    prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    return PP_OK;
}

/* The analyzer's pipeline summary, in a forked child: whatever the analysis of the traces does
 * (a crash on a hostile trace, running out of memory), pprof-run itself carries on and exits
 * with the job's status; what went wrong is said on stderr. Signals pprof-run forwards (blocked
 * since the job ended, prun_signals_hold) are passed on to the child while it runs, so that they cannot
 * replace the job's status either. PPROF_TEST_SUMMARY_CRASH=1 (a test hook, docs/cli/pprof-run.md)
 * makes the child crash before it analyzes. */
void prun_pipeline_summary(const char *dir)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof k_forwarded / sizeof k_forwarded[0]; i++)
        sigaddset(&set, k_forwarded[i]);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL); /* SIGCHLD too, for sigtimedwait below */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "pprof-run: no pipeline summary: fork: %s (pprof-report %s gives it)\n",
                strerror(errno), dir);
        return;
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &g_mask_before_post, NULL);
        const char *hook = getenv("PPROF_TEST_SUMMARY_CRASH");
        if (hook && strcmp(hook, "1") == 0)
            raise(SIGSEGV);
        pp_analysis *an = NULL;
        pp_analysis_options o;
        pp_analysis_options_default(&o);
        if (pp_analyze_dir(dir, &o, &an) == PP_OK) {
            printf("\n");
            pp_analysis_print(an, stdout);
            pp_analysis_free(an);
        } else {
            printf("pprof-run: no pipeline summary: %s\n", pp_error_message());
        }
        _exit(fflush(stdout) == 0 ? 0 : PP_EXIT_RUNTIME);
    }
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            fprintf(stderr, "pprof-run: lost the pipeline summary's process: %s\n",
                    strerror(errno));
            return;
        }
        siginfo_t si;
        struct timespec tick = {1, 0};
        int sig = sigtimedwait(&set, &si, &tick);
        if (sig > 0 && sig != SIGCHLD)
            kill(pid, sig);
    }
    if (WIFSIGNALED(status))
        fprintf(stderr, "pprof-run: the pipeline summary died (signal %d, %s); the job's status "
                        "and the run directory are kept: pprof-report %s analyzes it\n",
                WTERMSIG(status), strsignal(WTERMSIG(status)), dir);
    else if (WEXITSTATUS(status) != 0)
        fprintf(stderr, "pprof-run: the pipeline summary failed (status %d); the job's status "
                        "and the run directory are kept: pprof-report %s analyzes it\n",
                WEXITSTATUS(status), dir);
}
