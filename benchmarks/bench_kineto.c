/* bench_kineto: how fast the PyTorch profiler (Kineto) importer converts a trace on one core,
 * and whether its memory stays flat as the file grows (analyzer/kineto.c streams). Writes two
 * synthetic Kineto traces in the layout torch writes them (pretty-printed, one event per
 * object, microsecond floats around 5e12 as torch's clock gives), --small and --large MB of
 * JSON, converts each in a child process of its own (peak RSS is then that conversion's) and
 * prints MB/s and peak RSS of both and their ratios, measured in the same run. Asserts nothing.
 * Usage: bench_kineto [--small MB] [--large MB] [--repeat R] [--dir DIR] [--analyze] [--keep]
 * [--stack] [--foreign] [--gpu] [--shapes] (--keep leaves the JSON files in DIR, for a profiler; --stack adds the
 * Python tracer's module events after every CPU op, as torch writes them with with_stack=True:
 * the importer merges them back in as a second sorted run, docs/kineto.md "Order"; --foreign
 * writes the same events without categories or torch's header, as another tool's Chrome trace,
 * which the importer reads twice, docs/kineto.md "Chrome traces of other tools"; --gpu adds a
 * kernel per aten op, its launch and the kernel written after every CPU event as Kineto writes
 * them, which the importer spills and merges back in by time, docs/kineto.md "The mapping"; --shapes
 * gives each aten op the inputs' shapes, types and strides torch writes with record_shapes=True,
 * arrays the importer skips). */
#include "pp_analyzer.h"
#include "pp_kineto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int g_foreign; /* --foreign: no "cat" member, no torch header */
static int g_shapes;  /* --shapes: record_shapes=True's args on the aten ops */

/* What torch 2.x writes into an aten op's args with record_shapes=True, between "Record function
 * id" and "Ev Idx" (torch 2.15 on CPU, an addmm: "Concrete Inputs", "Input type", "Input
 * Strides", "Input Dims"), for mm, add and relu of a [32, 512] activation; "" without --shapes. */
static const char *shapes(int op)
{
    static const char *const k_shapes[3] = {
        ", \"Concrete Inputs\": [\"\", \"\"], \"Input type\": [\"float\", \"float\"], "
        "\"Input Strides\": [[512, 1], [1, 512]], \"Input Dims\": [[32, 512], [512, 512]]",
        ", \"Concrete Inputs\": [\"\", \"\", \"1\"], \"Input type\": [\"float\", \"float\", "
        "\"Scalar\"], \"Input Strides\": [[512, 1], [1], []], \"Input Dims\": [[32, 512], [512], []]",
        ", \"Concrete Inputs\": [\"\"], \"Input type\": [\"float\"], \"Input Strides\": [[512, 1]], "
        "\"Input Dims\": [[32, 512]]"};
    return g_shapes ? k_shapes[op] : "";
}

/* The "cat" member of an event, or nothing for --foreign. */
static const char *cat(const char *name)
{
    static char buf[4][64];
    static int k;
    if (g_foreign)
        return "";
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "\"cat\": \"%s\", ", name);
    return buf[k];
}

/* One training step of a 2-chunk pipeline rank as torch writes it: a ProfilerStep, actions
 * with aten ops inside, gloo sends that outlive their action; about 4.6 KB of JSON. */
static size_t write_step(FILE *f, int k, double *t, unsigned *ev)
{
    long before = ftell(f);
    fprintf(f, "  {\n    \"ph\": \"X\", %s\"name\": \"ProfilerStep#%d\","
               " \"pid\": 6320, \"tid\": 6320,\n    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": {\n"
               "      \"External id\": %u,\"Record function id\": 0, \"Ev Idx\": %u\n    }\n  },\n",
            cat("user_annotation"), k, *t, 1990.0, *ev, *ev);
    (*ev)++;
    for (int a = 0; a < 8; a++) {
        double t0 = *t + 5 + 240 * a;
        fprintf(f, "  {\n    \"ph\": \"X\", %s\"name\": \"PP:%d%c%d\","
                   " \"pid\": 6320, \"tid\": 6320,\n    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": "
                   "{\n      \"External id\": %u,\"Record function id\": 0, \"Ev Idx\": %u\n    }\n"
                   "  },\n",
                cat("user_annotation"), a % 2 ? 2 : 0, a < 4 ? 'F' : 'B', a % 4, t0, 200.0, *ev,
                *ev);
        (*ev)++;
        for (int o = 0; o < 3; o++) {
            fprintf(f, "  {\n    \"ph\": \"X\", %s\"name\": \"aten::%s\", "
                       "\"pid\": 6320, \"tid\": 6320,\n    \"ts\": %.3f, \"dur\": %.3f,\n    "
                       "\"args\": {\n      \"External id\": %u,\"Record function id\": 0, "
                       "\"Sequence number\": %d, \"Fwd thread id\": 0%s, \"Ev Idx\": %u\n    }\n"
                       "  },\n",
                    cat("cpu_op"), o == 0 ? "mm" : o == 1 ? "add" : "relu", t0 + 10 + 50 * o,
                    33.082, *ev, k, shapes(o), *ev);
            (*ev)++;
        }
        fprintf(f, "  {\n    \"ph\": \"X\", %s\"name\": \"gloo:send\","
                   " \"pid\": 6320, \"tid\": 6320,\n    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": "
                   "{\n      \"External id\": %u,\"Record function id\": 0, \"Ev Idx\": %u\n    }\n"
                   "  },\n",
                cat("user_annotation"), t0 + 180, 300.0, *ev, *ev);
        (*ev)++;
    }
    *t += 2000;
    return (size_t)(ftell(f) - before);
}

/* The same step's Python tracer events (with_stack=True), which torch writes after every CPU
 * op of the trace: a module call around each action's aten ops (--stack). */
static size_t write_step_stack(FILE *f, double *t, unsigned *ev)
{
    long before = ftell(f);
    for (int a = 0; a < 8; a++) {
        double t0 = *t + 5 + 240 * a;
        fprintf(f, "  {\n    \"ph\": \"X\", %s\"name\": "
                   "\"nn.Module: Block_%d\", \"pid\": 6320, \"tid\": 6320,\n    \"ts\": %.3f, "
                   "\"dur\": %.3f,\n    \"args\": {\n      \"Python parent id\": %u, \"Python id\": "
                   "%u, \"Ev Idx\": %u\n    }\n  },\n",
                cat("python_function"), a % 4, t0 + 6, 170.0, *ev - 1, *ev, *ev);
        (*ev)++;
    }
    *t += 2000;
    return (size_t)(ftell(f) - before);
}

/* The same step's GPU side, which Kineto writes after every CPU event of the trace (--gpu):
 * for each aten op its cudaLaunchKernel on the op's thread and the kernel on stream 7, with the
 * args torch gives them (the kernel's grid, block, occupancy), correlated by id. */
static size_t write_step_gpu(FILE *f, double *t, unsigned *corr)
{
    long before = ftell(f);
    for (int a = 0; a < 8; a++) {
        double t0 = *t + 5 + 240 * a;
        for (int o = 0; o < 3; o++) {
            double launch = t0 + 10 + 50 * o + 20;
            unsigned c = ++*corr;
            fprintf(f, "  {\n    \"ph\": \"X\", %s\"name\": \"cudaLaunchKernel\", \"pid\": 6320, "
                       "\"tid\": 6320,\n    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": {\n      "
                       "\"External id\": %u,\n      \"cbid\": 211, \"correlation\": %u\n    }\n  },\n",
                    cat("cuda_runtime"), launch, 6.311, c, c);
            fprintf(f, "  {\n    \"ph\": \"X\", %s\"name\": \"void at::native::elementwise_kernel<128, "
                       "2>(int, at::native::gpu_kernel_impl<at::native::AddFunctor<float> >)\", "
                       "\"pid\": 0, \"tid\": 7,\n    \"ts\": %.3f, \"dur\": %.3f,\n    \"args\": {\n"
                       "      \"External id\": %u,\n      \"queued\": 0, \"device\": 0, \"context\": 1,\n"
                       "      \"stream\": 7, \"correlation\": %u,\n      \"registers per thread\": 20,\n"
                       "      \"shared memory\": 0,\n      \"blocks per SM\": 7.757576,\n"
                       "      \"warps per SM\": 31.030304,\n      \"grid\": [1024, 1, 1],\n"
                       "      \"block\": [128, 1, 1],\n      \"est. achieved occupancy %%\": 100\n"
                       "    }\n  },\n",
                    cat("kernel"), launch + 12, 18.5, c, c);
        }
    }
    *t += 2000;
    return (size_t)(ftell(f) - before);
}

static int write_trace(const char *path, double mb, int stack, int gpu)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    if (g_foreign)
        fputs("{\n  \"displayTimeUnit\": \"ns\",\n  \"traceEvents\": [\n", f);
    else
        fputs("{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"backend\": \"gloo\", "
              "\"rank\": 0, \"world_size\": 2},\n  \"host_name\": \"bench\",\n  "
              "\"baseTimeNanoseconds\": 1790857026000000000,\n  \"traceEvents\": [\n",
              f);
    double t = 5279665373004.758;
    unsigned ev = 1;
    size_t bytes = 0;
    int steps = 0;
    for (int k = 1; (double)bytes < mb * 1048576.0; k++, steps++) {
        bytes += write_step(f, k, &t, &ev);
        if (stack) /* the steps' share of the Python block, as JSON bytes */
            bytes += 8 * 230;
        if (gpu) /* and of the GPU block */
            bytes += 24 * 770;
    }
    if (stack) {
        double ts = 5279665373004.758;
        for (int k = 0; k < steps; k++)
            write_step_stack(f, &ts, &ev);
    }
    if (gpu) {
        double ts = 5279665373004.758;
        unsigned corr = 0;
        for (int k = 0; k < steps; k++)
            write_step_gpu(f, &ts, &corr);
    }
    fprintf(f, "  {\n    \"ph\": \"i\", \"s\": \"g\", \"name\": \"Record Window End\", \"pid\": "
               "\"\", \"tid\": \"\", \"ts\": %.3f\n  }\n  ],\"traceName\": \"bench\" }\n", t);
    return fclose(f);
}

typedef struct result {
    int ok;
    double seconds, mb;
    long rss_kb;
    uint64_t ranges, dropped;
    unsigned runs;
} result;

/* Converts (and with `analyze` analyzes) in a child, for its own peak RSS. */
static result run_child(const char *json, const char *pft, int analyze)
{
    int fd[2];
    result r = {0};
    if (pipe(fd) != 0)
        return r;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        unlink(pft);
        pp_kineto_stats s;
        uint64_t t0 = pp_now_ns();
        pp_status st = pp_kineto_convert(json, pft, NULL, &s);
        if (st == PP_OK && analyze) {
            pp_analysis *a = NULL;
            if (pp_analyze_dir(pft, NULL, &a) == PP_OK)
                pp_analysis_free(a);
        }
        result c = {.ok = st == PP_OK,
                    .seconds = (double)(pp_now_ns() - t0) * 1e-9,
                    .mb = (double)s.bytes_in / 1048576.0,
                    .ranges = s.ranges,
                    .dropped = s.dropped_late + s.dropped_caps,
                    .runs = s.runs};
        struct rusage u;
        getrusage(RUSAGE_SELF, &u);
        c.rss_kb = u.ru_maxrss;
        ssize_t k = write(fd[1], &c, sizeof c);
        _exit(k == (ssize_t)sizeof c ? 0 : 1);
    }
    close(fd[1]);
    if (read(fd[0], &r, sizeof r) != (ssize_t)sizeof r)
        r.ok = 0;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    unlink(pft);
    return r;
}

/* The fastest of `repeat` runs (its RSS: the largest seen). */
static result best_of(const char *json, const char *pft, int analyze, int repeat)
{
    result best = {0};
    for (int i = 0; i < repeat; i++) {
        result r = run_child(json, pft, analyze);
        if (!r.ok)
            return r;
        long rss = best.rss_kb > r.rss_kb ? best.rss_kb : r.rss_kb;
        if (!best.ok || r.seconds < best.seconds)
            best = r;
        best.rss_kb = rss;
    }
    return best;
}

int main(int argc, char **argv)
{
    double small = 20, large = 200;
    int repeat = 3, analyze = 0, keep = 0, stack = 0, gpu = 0;
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--small") == 0 && i + 1 < argc)
            small = atof(argv[++i]);
        else if (strcmp(argv[i], "--large") == 0 && i + 1 < argc)
            large = atof(argv[++i]);
        else if (strcmp(argv[i], "--repeat") == 0 && i + 1 < argc)
            repeat = atoi(argv[++i]);
        else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
            dir = argv[++i];
        else if (strcmp(argv[i], "--analyze") == 0)
            analyze = 1;
        else if (strcmp(argv[i], "--keep") == 0)
            keep = 1;
        else if (strcmp(argv[i], "--stack") == 0)
            stack = 1;
        else if (strcmp(argv[i], "--foreign") == 0)
            g_foreign = 1;
        else if (strcmp(argv[i], "--gpu") == 0)
            gpu = 1;
        else if (strcmp(argv[i], "--shapes") == 0)
            g_shapes = 1;
        else {
            fprintf(stderr, "usage: bench_kineto [--small MB] [--large MB] [--repeat R] "
                            "[--dir DIR] [--analyze] [--keep] [--stack] [--foreign] [--gpu] "
                            "[--shapes]\n");
            return 2;
        }
    }
    if (!(small > 0) || !(large > 0) || repeat < 1) {
        fprintf(stderr, "bench_kineto: sizes and --repeat must be positive\n");
        return 2;
    }
    char js[2][4096], pft[2][4096];
    const double mb[2] = {small, large};
    result r[2];
    for (int i = 0; i < 2; i++) {
        snprintf(js[i], sizeof js[i], "%s/bench_kineto_%d.json", dir, i);
        snprintf(pft[i], sizeof pft[i], "%s/bench_kineto_%d.pft", dir, i);
        if (write_trace(js[i], mb[i], stack, gpu) != 0) {
            fprintf(stderr, "bench_kineto: cannot write %s\n", js[i]);
            return 3;
        }
    }
    for (int i = 0; i < 2; i++) {
        r[i] = best_of(js[i], pft[i], analyze, repeat);
        if (!keep)
            unlink(js[i]);
        if (!r[i].ok) {
            fprintf(stderr, "bench_kineto: converting %s failed\n", js[i]);
            return 3;
        }
        printf("%-5s %7.1f MB of JSON, %9llu ranges: %6.3f s, %6.1f MB/s%s, peak RSS %6.1f MB; "
               "%u sorted run(s), %llu dropped\n",
               i ? "large" : "small", r[i].mb, (unsigned long long)r[i].ranges, r[i].seconds,
               r[i].mb / r[i].seconds, analyze ? " (convert + analyze)" : "",
               (double)r[i].rss_kb / 1024.0, r[i].runs, (unsigned long long)r[i].dropped);
    }
    printf("ratios large/small: size %.2fx, time %.2fx, throughput %.2fx, peak RSS %.2fx\n",
           r[1].mb / r[0].mb, r[1].seconds / r[0].seconds,
           (r[1].mb / r[1].seconds) / (r[0].mb / r[0].seconds),
           (double)r[1].rss_kb / (double)r[0].rss_kb);
    return 0;
}
