/* exit_app: a tiny job for tests/test_pprof_run.c, so each behaviour of pprof-run is exercised
 * by a child that does exactly one thing, without depending on how a shell treats signals.
 *   exit_app exit CODE                 exits with CODE
 *   exit_app raise SIG                 kills itself with signal number SIG
 *   exit_app trap READY MARKER CODE    on SIGINT: writes how many SIGINTs arrived to MARKER,
 *                                      exits CODE; creates READY once the handler is installed
 *   exit_app env FILE                  writes its environment to FILE, one variable a line
 *   exit_app orphan FILE MS            leaves a process behind that writes FILE after MS ms,
 *                                      and exits 0 at once */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static volatile sig_atomic_t g_sigints;

static void on_sigint(int sig)
{
    (void)sig;
    g_sigints++;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    fputs(text, f);
    return fclose(f) != 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "exit") == 0)
        return atoi(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "raise") == 0) {
        int sig = atoi(argv[2]);
        signal(sig, SIG_DFL);
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, sig);
        sigprocmask(SIG_UNBLOCK, &s, NULL);
        raise(sig);
        return 99; /* not reached for a deadly signal */
    }
    if (argc >= 5 && strcmp(argv[1], "trap") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_sigint;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigset_t s;
        sigemptyset(&s);
        sigaddset(&s, SIGINT);
        sigprocmask(SIG_UNBLOCK, &s, NULL);
        if (write_text(argv[2], "ready\n"))
            return 98;
        for (int i = 0; i < 600 && !g_sigints; i++)
            sleep_ms(50);
        if (!g_sigints)
            return 97; /* no signal within 30 s */
        sleep_ms(200); /* a duplicate, if one is coming, arrives now */
        char buf[32];
        snprintf(buf, sizeof buf, "%d\n", (int)g_sigints);
        if (write_text(argv[3], buf))
            return 98;
        return atoi(argv[4]);
    }
    if (argc >= 3 && strcmp(argv[1], "env") == 0) {
        FILE *f = fopen(argv[2], "w");
        if (!f)
            return 98;
        for (char **e = environ; *e; e++)
            fprintf(f, "%s\n", *e);
        return fclose(f) != 0 ? 98 : 0;
    }
    if (argc >= 4 && strcmp(argv[1], "orphan") == 0) {
        pid_t pid = fork();
        if (pid < 0)
            return 98;
        if (pid == 0) {
            sleep_ms(atol(argv[3]));
            _exit(write_text(argv[2], "done\n") ? 98 : 0);
        }
        return 0;
    }
    fprintf(stderr, "exit_app: bad arguments\n");
    return 2;
}
