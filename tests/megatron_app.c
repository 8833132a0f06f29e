/* megatron_app: a pipeline job that names its NVTX ranges the way Megatron-LM names its timers
 * (docs/dialects.md "Megatron-LM"), with no pipeprof convention: plain nvtxRangePushA in the
 * default domain. tests/test_dialect.c runs it under pprof-run and analyzes it with
 * dialects/megatron.json.
 *
 *   megatron_app S M STEPS FWD_US[,FWD_US...] [OPT_US[,OPT_US...] [SYNC_US]]
 *
 * S processes (forked before any NVTX call, each with RANK=<stage> so that its trace states its
 * rank), connected by pipes, run Megatron's forward_backward_pipelining_without_interleaving
 * order (warm-up forwards, 1F1B, cool-down backwards) inside one "forward-backward" range per
 * step. Stage s sleeps FWD_US[s] in each "forward-compute" and twice that in each
 * "backward-compute"; "forward-recv" / "backward-recv" block on the pipe from the neighbour,
 * "forward-send" / "backward-send" write to it. The first stage has no forward-recv and the last
 * no forward-send, as in Megatron (p2p_communication.py times only real transfers). With OPT_US,
 * each step ends as Megatron's train_step does: the data-parallel gradient sync
 * (finalize_model_grads' "all-grads-sync", SYNC_US, default 0: not timed) as the schedule's last
 * range inside "forward-backward", then stage s's optimizer step ("optimizer", OPT_US[s]) after
 * that range closed. */
#include <nvtx3/nvToolsExt.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_S = 8 };

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void take(int fd)
{
    char c;
    if (read(fd, &c, 1) != 1)
        _exit(3);
}

typedef struct stage {
    int s, S, M, steps;
    long fwd_us, opt_us, sync_us;
    int act_in, act_out, grad_in, grad_out; /* -1 where there is no neighbour */
} stage;

static void recv_forward(const stage *g)
{
    if (g->act_in < 0)
        return;
    nvtxRangePushA("forward-recv");
    take(g->act_in);
    nvtxRangePop();
}

static void send_forward(const stage *g)
{
    if (g->act_out < 0)
        return;
    nvtxRangePushA("forward-send");
    char c = 1;
    if (write(g->act_out, &c, 1) != 1)
        _exit(3);
    nvtxRangePop();
}

static void recv_backward(const stage *g)
{
    if (g->grad_in < 0)
        return;
    nvtxRangePushA("backward-recv");
    take(g->grad_in);
    nvtxRangePop();
}

static void send_backward(const stage *g)
{
    if (g->grad_out < 0)
        return;
    nvtxRangePushA("backward-send");
    char c = 1;
    if (write(g->grad_out, &c, 1) != 1)
        _exit(3);
    nvtxRangePop();
}

static void forward_step(const stage *g)
{
    nvtxRangePushA("forward-compute");
    sleep_us(g->fwd_us);
    nvtxRangePop();
}

static void backward_step(const stage *g)
{
    nvtxRangePushA("backward-compute");
    sleep_us(2 * g->fwd_us);
    nvtxRangePop();
}

static void run_stage(const stage *g)
{
    int warmup = g->S - g->s - 1 < g->M ? g->S - g->s - 1 : g->M;
    int remaining = g->M - warmup;
    for (int step = 0; step < g->steps; step++) {
        nvtxRangePushA("forward-backward");
        for (int i = 0; i < warmup; i++) {
            recv_forward(g);
            forward_step(g);
            send_forward(g);
        }
        if (remaining > 0)
            recv_forward(g);
        for (int i = 0; i < remaining; i++) {
            forward_step(g);
            send_forward(g);
            recv_backward(g);
            backward_step(g);
            send_backward(g);
            if (i + 1 < remaining)
                recv_forward(g);
        }
        for (int i = 0; i < warmup; i++) {
            recv_backward(g);
            backward_step(g);
            send_backward(g);
        }
        if (g->sync_us > 0) {
            nvtxRangePushA("all-grads-sync");
            sleep_us(g->sync_us);
            nvtxRangePop();
        }
        nvtxRangePop();
        if (g->opt_us > 0) {
            nvtxRangePushA("optimizer");
            sleep_us(g->opt_us);
            nvtxRangePop();
        }
    }
}

/* "X[,X...]" into out[MAX_S], the last value repeated for the stages it does not name. */
static void per_stage(const char *arg, long *out)
{
    char *p = (char *)arg;
    for (int s = 0; s < MAX_S; s++) {
        out[s] = strtol(p, &p, 10);
        if (*p == ',')
            p++;
        else if (s + 1 < MAX_S)
            for (int k = s + 1; k < MAX_S; k++)
                out[k] = out[s];
        if (!*p)
            break;
    }
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 7) {
        fprintf(stderr,
                "usage: megatron_app S M STEPS FWD_US[,FWD_US...] [OPT_US[,...] [SYNC_US]]\n");
        return 2;
    }
    int S = atoi(argv[1]), M = atoi(argv[2]), steps = atoi(argv[3]);
    long fwd[MAX_S], opt[MAX_S] = {0}, sync = argc > 6 ? atol(argv[6]) : 0;
    per_stage(argv[4], fwd);
    if (argc > 5)
        per_stage(argv[5], opt);
    if (S < 2 || S > MAX_S || M < 1 || steps < 1)
        return 2;
    int act[MAX_S][2], grad[MAX_S][2]; /* act[s]: s -> s+1, grad[s]: s+1 -> s */
    for (int s = 0; s + 1 < S; s++)
        if (pipe(act[s]) != 0 || pipe(grad[s]) != 0)
            return 3;
    pid_t pids[MAX_S];
    for (int s = 0; s < S; s++) {
        pids[s] = fork();
        if (pids[s] < 0)
            return 3;
        if (pids[s] == 0) {
            char r[16];
            snprintf(r, sizeof r, "%d", s);
            setenv("RANK", r, 1);
            stage g = {s, S, M, steps, fwd[s], opt[s], sync, s > 0 ? act[s - 1][0] : -1,
                       s + 1 < S ? act[s][1] : -1, s + 1 < S ? grad[s][0] : -1,
                       s > 0 ? grad[s - 1][1] : -1};
            run_stage(&g);
            return 0;
        }
    }
    int rc = 0;
    for (int s = 0; s < S; s++) {
        int status = 0;
        if (waitpid(pids[s], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
            rc = 1;
    }
    return rc;
}
