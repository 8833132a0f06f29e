/* bench_capture: what libpprof.so costs an annotated job per NVTX range. Times a domain push+pop
 * pair (registered string + int64 payload, as pptrain emits), a domain start/end pair and one
 * int64 counter sample (nvtxCounterSampleInt64, as pptrain reports its memory), on 1 and 2
 * threads, with no tool attached and with libpprof.so injected. Each configuration runs in
 * a fresh child process (this program re-executed with or without NVTX_INJECTION64_PATH), all in
 * this one run, so the ratios compare like with like. With the tool the child's trace footer is
 * read back and its drops are printed next to the times. Prints numbers; asserts nothing.
 *   bench_capture [--pairs 500000] [--repeats 3] [--buffer-kb 4096] */
#define _GNU_SOURCE /* setenv in the child, mkdtemp */
#include "pp_common.h"
#include "pp_trace.h"

#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCounters.h>

#include <dirent.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- child: the timed loops ---- */

typedef struct bench_arg {
    long pairs;
    int start_end; /* 0 push/pop, 1 start/end, 2 a counter sample */
    double ns_per_pair;
    pthread_barrier_t *bar;
} bench_arg;

static nvtxDomainHandle_t g_dom;
static nvtxStringHandle_t g_str;
static uint64_t g_counter;

/* Pairs are timed in bursts of BURST (1.3 MB of records, a third of the default 4 MiB ring),
 * with a pause after each that lets the writer (PPROF_FLUSH_MS=5 here) drain the ring: the
 * shape of a real job, whose ranges come between pieces of work, and no drops. A tight loop of
 * millions of pairs measures something else: the memory bandwidth of the ring (about 1.6 GB/s of
 * records per thread), which no writer keeps up with. */
enum { BURST = 16384 };

static void *bench_thread(void *p)
{
    bench_arg *b = p;
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = 1;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = g_str;
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    /* warm-up: the thread's first event registers its buffer */
    for (long i = 0; i < 1000; i++) {
        nvtxDomainRangePushEx(g_dom, &a);
        nvtxDomainRangePop(g_dom);
    }
    pthread_barrier_wait(b->bar);
    uint64_t busy = 0;
    for (long done = 0; done < b->pairs;) {
        long n = b->pairs - done < BURST ? b->pairs - done : BURST;
        /* spin rather than sleep: a sleeping vCPU comes back with cold caches and a low clock,
         * which would be charged to the tool */
        for (uint64_t until = pp_now_ns() + 12000000; pp_now_ns() < until;)
            ;
        uint64_t t0 = pp_now_ns();
        if (b->start_end == 2) {
            for (long i = 0; i < n; i++)
                nvtxCounterSampleInt64(g_dom, g_counter, i);
        } else if (b->start_end) {
            for (long i = 0; i < n; i++) {
                a.payload.llValue = i;
                nvtxRangeId_t id = nvtxDomainRangeStartEx(g_dom, &a);
                nvtxDomainRangeEnd(g_dom, id);
            }
        } else {
            for (long i = 0; i < n; i++) {
                a.payload.llValue = i;
                nvtxDomainRangePushEx(g_dom, &a);
                nvtxDomainRangePop(g_dom);
            }
        }
        busy += pp_now_ns() - t0;
        done += n;
    }
    b->ns_per_pair = (double)busy / (double)b->pairs;
    return NULL;
}

/* One kind of pair on `threads` threads at once; the mean over threads of ns per pair. */
static double child_run(long pairs, int threads, int start_end)
{
    pthread_t th[8];
    bench_arg args[8];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        args[i] = (bench_arg){pairs, start_end, 0, &bar};
        if (pthread_create(&th[i], NULL, bench_thread, &args[i]) != 0)
            return -1;
    }
    double sum = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        sum += args[i].ns_per_pair;
    }
    pthread_barrier_destroy(&bar);
    return sum / threads;
}

static int child_main(long pairs, int threads)
{
    g_dom = nvtxDomainCreateA("bench");
    g_str = nvtxDomainRegisterStringA(g_dom, "fwd mb0");
    nvtxCounterAttr_t ca;
    memset(&ca, 0, sizeof ca);
    ca.structSize = sizeof ca;
    ca.schemaId = NVTX_PAYLOAD_ENTRY_TYPE_INT64;
    ca.name = "pp.mem.stage0.activations";
    g_counter = nvtxCounterRegister(g_dom, &ca);
    double pp = child_run(pairs, threads, 0);
    double se = child_run(pairs, threads, 1);
    double cs = child_run(pairs, threads, 2);
    printf("%.3f %.3f %.3f\n", pp, se, cs);
    return pp < 0 || se < 0 || cs < 0;
}

/* ---- parent: one child per configuration ---- */

static char g_self[4096];

typedef struct result {
    double push_pop, start_end, sample;
    unsigned long long events, dropped;
    int ok;
} result;

static void rm_traces(const char *dir, result *r)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        pp_trace *t = NULL;
        if (r && pp_trace_load(path, &t) == PP_OK) {
            r->events += t->footer.events;
            r->dropped += t->footer.dropped;
            pp_trace_free(t);
        }
        unlink(path);
    }
    closedir(d);
}

/* libpprof: the library's default clock (rdtsc when the TSC is invariant, converted by the
 * writer); lib+mono: PPROF_CLOCK=monotonic, two clock_gettime calls per pair. */
static const char *const k_tool_names[] = {"none", "libpprof", "lib+mono"};

static result run_child(int tool, long pairs, int threads, const char *dir, long buffer_kb)
{
    result r = {0, 0, 0, 0, 0, 0};
    int fd[2];
    if (pipe(fd) != 0)
        return r;
    pid_t pid = fork();
    if (pid < 0)
        return r;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        char np[32], nt[16], kb[32];
        snprintf(np, sizeof np, "%ld", pairs);
        snprintf(nt, sizeof nt, "%d", threads);
        snprintf(kb, sizeof kb, "%ld", buffer_kb);
        if (tool) {
            setenv("NVTX_INJECTION64_PATH", PP_PPROF_LIB, 1);
            setenv("PPROF_DIR", dir, 1);
            setenv("PPROF_BUFFER_KB", kb, 1);
            setenv("PPROF_FLUSH_MS", "5", 1);
            setenv("PPROF_QUIET", "1", 1);
            /* tool 1: the default clock (TSC when invariant); tool 2: clock_gettime */
            setenv("PPROF_CLOCK", tool == 2 ? "monotonic" : "auto", 1);
        } else {
            unsetenv("NVTX_INJECTION64_PATH");
        }
        execl(g_self, g_self, "--child", np, nt, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[128] = {0};
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (n > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
        sscanf(buf, "%lf %lf %lf", &r.push_pop, &r.start_end, &r.sample) == 3)
        r.ok = 1;
    rm_traces(dir, tool ? &r : NULL);
    return r;
}

/* The floor under any tool that stamps both ends: two CLOCK_MONOTONIC reads (vDSO). */
static double clock_pair_ns(void)
{
    uint64_t sink = 0, t0 = pp_now_ns();
    for (int i = 0; i < 2000000; i++)
        sink += pp_now_ns() + pp_now_ns();
    double ns = (double)(pp_now_ns() - t0) / 2e6;
    return sink ? ns : ns; /* sink keeps the loop */
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child_main(atol(argv[2]), atoi(argv[3]));
    long pairs = 500000, buffer_kb = 4096;
    int repeats = 3;
    static const struct option opts[] = {{"pairs", required_argument, 0, 'n'},
                                         {"repeats", required_argument, 0, 'r'},
                                         {"buffer-kb", required_argument, 0, 'b'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *usage = "usage: bench_capture [--pairs N] [--repeats R] [--buffer-kb KB]\n";
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': pairs = atol(optarg); break;
        case 'r': repeats = atoi(optarg); break;
        case 'b': buffer_kb = atol(optarg); break;
        case 'h': printf("%s", usage); return 0;
        default: fprintf(stderr, "%s", usage); return 2;
        }
    }
    if (pairs < 1 || repeats < 1 || repeats > 25 || buffer_kb < 64) {
        fprintf(stderr, "bench_capture: --pairs >= 1, --repeats in 1..25, --buffer-kb >= 64\n");
        return 2;
    }
    ssize_t n = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
    if (n <= 0) {
        fprintf(stderr, "bench_capture: cannot find its own executable\n");
        return 3;
    }
    g_self[n] = '\0';
    char dir[] = "/tmp/pp_bench_capture_XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "bench_capture: cannot create a temporary directory\n");
        return 3;
    }
    printf("bench_capture: %ld pairs per thread, median of %d runs, PPROF_BUFFER_KB=%ld\n", pairs,
           repeats, buffer_kb);
    printf("%-8s %-10s %12s %12s %12s %12s %12s %10s\n", "threads", "tool", "push+pop ns",
           "ratio", "start/end ns", "ratio", "sample ns", "dropped");
    for (int threads = 1; threads <= 2; threads++) {
        double base_pp = 0, base_se = 0;
        for (int tool = 0; tool <= 2; tool++) {
            double pp[25], se[25], cs[25];
            unsigned long long dropped = 0, events = 0;
            int ok = 0;
            for (int i = 0; i < repeats; i++) {
                result r = run_child(tool, pairs, threads, dir, buffer_kb);
                if (!r.ok)
                    continue;
                pp[ok] = r.push_pop;
                se[ok] = r.start_end;
                cs[ok] = r.sample;
                dropped += r.dropped;
                events += r.events;
                ok++;
            }
            if (!ok) {
                printf("%-8d %-10s  (child failed)\n", threads, k_tool_names[tool]);
                continue;
            }
            qsort(pp, (size_t)ok, sizeof pp[0], cmp_double);
            qsort(se, (size_t)ok, sizeof se[0], cmp_double);
            qsort(cs, (size_t)ok, sizeof cs[0], cmp_double);
            double mpp = pp[ok / 2], mse = se[ok / 2], mcs = cs[ok / 2];
            if (!tool) {
                base_pp = mpp;
                base_se = mse;
                printf("%-8d %-10s %12.2f %12s %12.2f %12s %12.2f %10s\n", threads, "none", mpp,
                       "1", mse, "1", mcs, "-");
            } else {
                char dr[32];
                snprintf(dr, sizeof dr, "%.2g%%",
                         events + dropped ? 100.0 * (double)dropped / (double)(events + dropped)
                                          : 0.0);
                printf("%-8d %-10s %12.2f %11.0fx %12.2f %11.0fx %12.2f %10s\n", threads,
                       k_tool_names[tool], mpp, base_pp > 0 ? mpp / base_pp : 0, mse,
                       base_se > 0 ? mse / base_se : 0, mcs, dr);
            }
        }
    }
    printf("reference: two clock_gettime(CLOCK_MONOTONIC) calls %.2f ns\n", clock_pair_ns());
    printf("(ns per pair per thread, timed in bursts of %d pairs with the writer draining in\n"
           " between; sample ns: one counter sample; ratio = with tool / without; dropped =\n"
           " share of range records the tool dropped because a ring was full; target <= 30 ns\n"
           " per push+pop, one NVTX range)\n",
           BURST);
    rmdir(dir);
    return 0;
}
