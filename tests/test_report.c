/* test_report.c: pprof-report as a user runs it, on run directories captured for real
 * (pprof-run + libpprof.so around pptrain's sim backend): the Gantt's data has one bar per
 * forward and backward of each micro-batch on each stage and gnuplot turns it into a PNG or SVG;
 * the Chrome trace loads as JSON with one track per stage and a flow per transfer; the summary
 * JSON carries the per-step samples pprof-check compares; bad input is exit 2 with a message,
 * damaged traces are reported with a warning, a missing gnuplot is a clear exit 3. Golden tests
 * pin the JSON and Gantt data formats on a hand-built analysis. Without libpprof.so (no NVTX
 * headers) the tests that capture runs report themselves skipped. */
#define _GNU_SOURCE /* open_memstream, setenv */
#include "pp_analyzer.h"
#include "pp_report.h"
#include "pp_summary.h"

#include <cJSON.h>
#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
#define PPREPORT PP_BUILD_DIR "/tools/pprof-report"
#define PPTRAIN PP_BUILD_DIR "/tools/pptrain"
#define LIBPPROF PP_BUILD_DIR "/profiler/libpprof.so"
#define CAPTURE_APP PP_BUILD_DIR "/tests/capture_app"


static void setup(void) { tk_dir_create("pp_report"); }

TestSuite(report, .init = setup, .fini = tk_dir_remove, .timeout = 120);

/* Captures a 4-stage run of pptrain's sim backend (each of 4 layers fwd_us / 2 x fwd_us
 * backward) into tk_dir/name; skips the test without the capture library. */
static const char *make_run(const char *name, const char *schedule, int M, int steps, int fwd_us)
{
    if (!tk_exists(LIBPPROF))
        cr_skip_test("libpprof.so not built (no NVTX headers): no run to report on");
    char costs[512];
    snprintf(costs, sizeof costs,
             "{\"layers\": [{\"name\": \"a\", \"fwd_us\": %d, \"bwd_us\": %d}, "
             "{\"name\": \"b\", \"fwd_us\": %d, \"bwd_us\": %d}, "
             "{\"name\": \"c\", \"fwd_us\": %d, \"bwd_us\": %d}, "
             "{\"name\": \"d\", \"fwd_us\": %d, \"bwd_us\": %d}], "
             "\"p2p_GBps\": 10, \"p2p_latency_us\": 10}\n",
             fwd_us, 2 * fwd_us, fwd_us, 2 * fwd_us, fwd_us, 2 * fwd_us, fwd_us, 2 * fwd_us);
    tk_write_text(tk_path("costs.json"), costs);
    char m[16], st[16];
    snprintf(m, sizeof m, "%d", M);
    snprintf(st, sizeof st, "%d", steps);
    const char *dir = tk_path(name);
    const char *args[] = {"-q", "-o", dir, "--", PPTRAIN, "--backend", "sim", "--costs",
                          tk_path("costs.json"), "--stages", "4", "--microbatches", m,
                          "--schedule", schedule, "--steps", st, "-q", NULL};
    tk_result r = tk_run(PPRUN, args, NULL);
    cr_assert_eq(r.code, 0, "pprof-run failed (%d): %s", r.code, r.err);
    tk_result_free(&r);
    return dir;
}

/* The first *.pft of dir. */
static void first_trace(const char *dir, char *out, size_t cap)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "ls %s/*.pft | head -n 1", dir);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    cr_assert_not_null(fgets(out, (int)cap, p));
    pclose(p);
    out[strcspn(out, "\n")] = '\0';
}

/* Per stage, the number of data lines of each kind in a Gantt data file. */
typedef struct bar_counts {
    int fwd[8], bwd[8], other;
    int lines;
} bar_counts;

static bar_counts count_bars(const char *text)
{
    bar_counts c;
    memset(&c, 0, sizeof c);
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(len < 255 ? len : 255), p);
        p += len + (nl ? 1 : 0);
        if (!line[0] || line[0] == '#')
            continue;
        int stage, mb, chunk;
        double t0, t1;
        char kind[32];
        cr_assert_eq(sscanf(line, "%d %lf %lf %31s %d %d", &stage, &t0, &t1, kind, &mb, &chunk),
                     6, "bad Gantt data line '%s'", line);
        cr_assert(t1 >= t0, "bar ends before it starts: '%s'", line);
        cr_assert(stage >= 0 && stage < 8);
        c.lines++;
        if (strcmp(kind, "fwd") == 0)
            c.fwd[stage]++;
        else if (strcmp(kind, "bwd") == 0)
            c.bwd[stage]++;
        else
            c.other++;
    }
    return c;
}

static int has_png_magic(const char *path)
{
    static const unsigned char magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    unsigned char head[8] = {0};
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(head, 1, 8, f) : 0;
    if (f)
        fclose(f);
    return n == 8 && memcmp(head, magic, 8) == 0;
}

static cJSON *parse_json(const char *text, const char *what)
{
    cJSON *j = cJSON_Parse(text);
    cr_assert_not_null(j, "%s is not JSON: %.300s", what, text);
    return j;
}

static cJSON *load_json(const char *path)
{
    char *text = tk_slurp(path, NULL);
    cr_assert_not_null(text, "%s: cannot read", path);
    cJSON *j = parse_json(text, path);
    free(text);
    return j;
}

static double num(const cJSON *obj, const char *key)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
    cr_assert(cJSON_IsNumber(it), "'%s' is not a number", key);
    return it->valuedouble;
}

/* ---- Gantt ------------------------------------------------------------------------------- */

Test(report, gantt_has_one_bar_per_forward_and_backward)
{
    const char *dir = make_run("run", "1f1b", 8, 4, 2000);
    const char *args[] = {"-q", dir, "--gantt", "g.png", NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_expect_str_empty(r.out, "-q prints no table");
    tk_result_free(&r);
    cr_assert(has_png_magic(tk_path("g.png")), "g.png is not a PNG");
    cr_assert(tk_exists(tk_path("g.gp")), "the gnuplot script is left next to the picture");
    char *dat = tk_slurp(tk_path("g.dat"), NULL);
    cr_assert_not_null(dat, "the Gantt data is left next to the picture as g.dat");
    bar_counts c = count_bars(dat);
    for (int s = 0; s < 4; s++) {
        cr_expect_eq(c.fwd[s], 8, "stage %d: %d forward bars, 8 micro-batches", s, c.fwd[s]);
        cr_expect_eq(c.bwd[s], 8, "stage %d: %d backward bars, 8 micro-batches", s, c.bwd[s]);
    }
    cr_expect_gt(c.other, 0, "sends, receives and the optimizer are drawn too");
    free(dat);
    /* nothing left behind but the picture, its data and its script */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q tmp", tk_dir);
    cr_expect_neq(system(cmd), 0, "no temporary file left");
}

Test(report, gantt_svg_and_chosen_data_path)
{
    const char *dir = make_run("run", "1f1b", 8, 4, 2000);
    const char *args[] = {"-q", dir, "--gantt", "pic.svg", "--gantt-data", "bars.txt", NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    tk_result_free(&r);
    char *svg = tk_slurp(tk_path("pic.svg"), NULL);
    cr_assert_not_null(svg);
    cr_expect_not_null(strstr(svg, "<svg"), "pic.svg is an SVG");
    cr_expect_not_null(strstr(svg, "S=4, M=8, 1f1b: step "), "the title names the pipeline");
    free(svg);
    cr_expect(tk_exists(tk_path("bars.txt")) && tk_exists(tk_path("bars.gp")));
    cr_expect(!tk_exists(tk_path("pic.dat")));
}

Test(report, gantt_of_chosen_steps)
{
    const char *dir = make_run("run", "1f1b", 4, 4, 1000);
    const char *args[] = {"-q", dir, "--steps", "2:3", "--gantt", "g.png", NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    tk_result_free(&r);
    char *dat = tk_slurp(tk_path("g.dat"), NULL);
    cr_assert_not_null(dat);
    bar_counts c = count_bars(dat);
    for (int s = 0; s < 4; s++)
        cr_expect_eq(c.fwd[s], 8, "stage %d: 2 steps x 4 micro-batches, got %d", s, c.fwd[s]);
    cr_expect_not_null(strstr(dat, "steps 2..3"));
    free(dat);
}

Test(report, gantt_draws_at_most_8_steps_and_says_so)
{
    const char *dir = make_run("run", "1f1b", 4, 10, 500);
    const char *args[] = {dir, "--steps", "1:10", "--gantt", "g.png", "--chrome", "t.json", NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_expect_not_null(strstr(r.err, "at most 8"), "%s", r.err);
    tk_result_free(&r);
    char *dat = tk_slurp(tk_path("g.dat"), NULL);
    cr_assert_not_null(dat);
    bar_counts c = count_bars(dat);
    for (int s = 0; s < 4; s++)
        cr_expect_eq(c.fwd[s], 8 * 4, "stage %d: 8 steps x 4 micro-batches, got %d", s, c.fwd[s]);
    free(dat);
    /* the Chrome trace keeps all ten */
    char *trace = tk_slurp(tk_path("t.json"), NULL);
    cr_assert_not_null(trace);
    int n = 0;
    for (const char *p = trace; (p = strstr(p, "\"cat\": \"fwd\"")) != NULL; p++)
        n++;
    cr_expect_eq(n, 10 * 4 * 4, "10 steps x 4 stages x 4 micro-batches, got %d", n);
    free(trace);
}

Test(report, gantt_data_in_process)
{
    const char *dir = make_run("run", "gpipe", 4, 3, 1000);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    cr_assert_eq(pp_report_gantt_data(a, m), PP_OK);
    fclose(m);
    bar_counts c = count_bars(buf);
    for (int s = 0; s < 4; s++) {
        cr_expect_eq(c.fwd[s], 4);
        cr_expect_eq(c.bwd[s], 4);
    }
    free(buf);
    /* an extension gnuplot is not asked for is refused, naming it */
    cr_expect_eq(pp_report_gantt(a, tk_path("g.jpg"), NULL), PP_ERR_INVALID);
    cr_expect_not_null(strstr(pp_error_message(), ".jpg"), "%s", pp_error_message());
    cr_expect(!tk_exists(tk_path("g.dat")), "nothing written for a refused picture");
    pp_analysis_free(a);
}

Test(report, missing_gnuplot_is_a_clear_error)
{
    const char *dir = make_run("run", "1f1b", 4, 3, 1000);
    cr_assert_eq(mkdir(tk_path("emptybin"), 0755), 0);
    const char *args[] = {dir, "--gantt", "g.png", NULL};
    char path_env[PATH_MAX + 8];
    snprintf(path_env, sizeof path_env, "PATH=%s", tk_path("emptybin"));
    const char *env[] = {path_env, NULL};
    tk_result r = tk_run(PPREPORT, args, env);
    cr_expect_eq(r.code, 3, "a missing gnuplot is a runtime error (3), got %d", r.code);
    cr_expect_not_null(strstr(r.err, "gnuplot not found (install gnuplot-nox)"), "%s", r.err);
    cr_expect(!tk_exists(tk_path("g.png")));
    tk_result_free(&r);
}

/* ---- Chrome trace ------------------------------------------------------------------------- */

Test(report, chrome_trace_has_tracks_ops_and_flows)
{
    const char *dir = make_run("run", "1f1b", 8, 4, 2000);
    const char *args[] = {"-q", dir, "--chrome", "trace.json", NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    tk_result_free(&r);
    cJSON *j = load_json(tk_path("trace.json"));
    cr_expect_str_eq(cJSON_GetObjectItem(j, "displayTimeUnit")->valuestring, "ms");
    const cJSON *ev = cJSON_GetObjectItem(j, "traceEvents");
    cr_assert(cJSON_IsArray(ev));
    int fwd[4] = {0}, bwd[4] = {0}, named[4] = {0}, layers = 0, sends = 0, procs = 0;
    long starts[512], ends[512];
    int ns = 0, nf = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        const char *ph = cJSON_GetObjectItem(e, "ph")->valuestring;
        const cJSON *name = cJSON_GetObjectItem(e, "name");
        int tid = (int)num(e, "tid");
        if (strcmp(ph, "M") == 0 && strcmp(name->valuestring, "thread_name") == 0) {
            const char *tn = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "name")->valuestring;
            char want[16];
            snprintf(want, sizeof want, "stage %d", tid);
            cr_expect_str_eq(tn, want);
            if (tid >= 0 && tid < 4)
                named[tid]++;
        } else if (strcmp(ph, "M") == 0 && strcmp(name->valuestring, "process_name") == 0) {
            procs++;
        } else if (strcmp(ph, "X") == 0) {
            cr_assert(tid >= 0 && tid < 4);
            cr_expect_geq(num(e, "dur"), 0);
            const char *cat = cJSON_GetObjectItem(e, "cat")->valuestring;
            const cJSON *args = cJSON_GetObjectItem(e, "args");
            cr_expect(cJSON_IsNumber(cJSON_GetObjectItem(args, "step")));
            if (strcmp(cat, "fwd") == 0) {
                fwd[tid]++;
                char want[32];
                snprintf(want, sizeof want, "fwd mb%d", (int)num(args, "mb"));
                cr_expect_str_eq(name->valuestring, want);
            } else if (strcmp(cat, "bwd") == 0) {
                bwd[tid]++;
            } else if (strncmp(cat, "send_", 5) == 0) {
                sends++;
            } else if (strncmp(cat, "layer_", 6) == 0) {
                layers++;
            }
        } else if (strcmp(ph, "s") == 0 && ns < 512) {
            starts[ns++] = (long)num(e, "id");
        } else if (strcmp(ph, "f") == 0 && nf < 512) {
            ends[nf++] = (long)num(e, "id");
            cr_expect_str_eq(cJSON_GetObjectItem(e, "bp")->valuestring, "e");
        }
    }
    for (int s = 0; s < 4; s++) {
        cr_expect_eq(fwd[s], 8, "stage %d: %d fwd events", s, fwd[s]);
        cr_expect_eq(bwd[s], 8, "stage %d: %d bwd events", s, bwd[s]);
        cr_expect_eq(named[s], 1, "stage %d track named once", s);
    }
    cr_expect_eq(procs, 1, "one process (the in-process run)");
    cr_expect_eq(layers, 4 * 8 * 2, "one forward and one backward per layer and micro-batch");
    /* 1F1B on 4 stages: 3 activation and 3 gradient links, 8 messages each */
    cr_expect_eq(sends, 6 * 8);
    cr_expect_eq(ns, sends, "one flow start per send");
    cr_expect_eq(nf, ns, "each flow start has an end");
    for (int i = 0; i < ns; i++) {
        int matched = 0;
        for (int k = 0; k < nf; k++)
            matched += ends[k] == starts[i];
        cr_expect_eq(matched, 1, "flow %ld: %d ends", starts[i], matched);
    }
    cJSON_Delete(j);
}

/* A slice of a Chrome trace, for checking how Perfetto binds flow events. */
typedef struct cslice {
    int pid, tid;
    double ts, dur;
    const char *name;
} cslice;

/* The innermost slice open on (pid, tid) at ts (Perfetto binds "s" and "f" with "bp":"e" to
 * the topmost open slice): the latest-starting slice strictly around ts. */
static const cslice *slice_at(const cslice *v, int n, int pid, int tid, double ts)
{
    const cslice *best = NULL;
    for (int i = 0; i < n; i++)
        if (v[i].pid == pid && v[i].tid == tid && v[i].ts < ts && ts < v[i].ts + v[i].dur &&
            (!best || v[i].ts > best->ts || (v[i].ts == best->ts && v[i].dur < best->dur)))
            best = &v[i];
    return best;
}

/* Every send -> receive arrow binds where Perfetto will keep it and points forward: its start
 * lies in the send's slice, its end in a slice that begins after the start (the receive, or
 * the receive's in-flight part when the receive was posted before the send), which Perfetto
 * then orients sender -> receiver. */
Test(report, chrome_flows_start_in_the_send_and_end_in_a_later_slice_of_the_receive)
{
    const char *dir = make_run("run", "1f1b", 8, 3, 1000);
    const char *args[] = {"-q", dir, "--chrome", "trace.json", NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    tk_result_free(&r);
    cJSON *j = load_json(tk_path("trace.json"));
    const cJSON *ev = cJSON_GetObjectItem(j, "traceEvents");
    int n = cJSON_GetArraySize(ev), nx = 0, sends = 0, in_flight = 0;
    cslice *x = calloc((size_t)n, sizeof *x);
    cr_assert_not_null(x);
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X") != 0)
            continue;
        x[nx] = (cslice){(int)num(e, "pid"), (int)num(e, "tid"), num(e, "ts"), num(e, "dur"),
                         cJSON_GetObjectItem(e, "name")->valuestring};
        sends += strncmp(x[nx].name, "send_", 5) == 0;
        in_flight += strstr(x[nx].name, " in flight") != NULL;
        nx++;
    }
    int flows = 0;
    cJSON_ArrayForEach(e, ev)
    {
        if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "s") != 0)
            continue;
        flows++;
        double id = num(e, "id"), ts = num(e, "ts");
        const cslice *from = slice_at(x, nx, (int)num(e, "pid"), (int)num(e, "tid"), ts);
        cr_assert_not_null(from, "flow %.0f: its start at %.3f us lies in no slice", id, ts);
        cr_assert(strncmp(from->name, "send_", 5) == 0, "flow %.0f starts in '%s'", id,
                  from->name);
        const cJSON *f = NULL, *g;
        cJSON_ArrayForEach(g, ev)
        {
            if (strcmp(cJSON_GetObjectItem(g, "ph")->valuestring, "f") == 0 && num(g, "id") == id)
                f = g;
        }
        cr_assert_not_null(f, "flow %.0f has no end", id);
        cr_assert_str_eq(cJSON_GetObjectItem(f, "bp")->valuestring, "e");
        double fts = num(f, "ts");
        const cslice *to = slice_at(x, nx, (int)num(f, "pid"), (int)num(f, "tid"), fts);
        cr_assert_not_null(to, "flow %.0f: its end at %.3f us lies in no slice", id, fts);
        cr_assert_gt(fts, ts, "flow %.0f ends (%.3f) before it starts (%.3f)", id, fts, ts);
        cr_assert_gt(to->ts, ts, "flow %.0f ends in '%s', which begins at %.3f, before the "
                                 "flow's start at %.3f (Perfetto would point it backwards)",
                     id, to->name, to->ts, ts);
        cr_assert_gt(to->ts, from->ts);
        /* the end is the receive or its in-flight part */
        if (strstr(to->name, " in flight")) {
            const cslice *recv = NULL;
            for (int i = 0; i < nx; i++)
                if (x[i].pid == to->pid && x[i].tid == to->tid && x[i].ts < to->ts &&
                    fabs(x[i].ts + x[i].dur - (to->ts + to->dur)) < 0.0015)
                    recv = &x[i];
            cr_assert_not_null(recv, "flow %.0f: '%s' is inside no receive", id, to->name);
            cr_assert(strncmp(recv->name, "recv_", 5) == 0, "%s", recv->name);
        } else {
            cr_assert(strncmp(to->name, "recv_", 5) == 0, "flow %.0f ends in '%s'", id, to->name);
        }
    }
    cr_log_info("%d flows, %d of them into a receive posted before its send", flows, in_flight);
    cr_expect_eq(sends, 6 * 8, "3 links x 2 directions x 8 micro-batches");
    cr_expect_eq(flows, sends, "one arrow per message");
    cr_expect_gt(in_flight, 0, "1F1B's receivers wait for some messages");
    free(x);
    cJSON_Delete(j);
}

/* ---- summary JSON ------------------------------------------------------------------------ */

Test(report, json_summary_of_a_1f1b_run)
{
    /* long ops: the sim's wake-up latencies stay far below the 1.5-point tolerance */
    const char *dir = make_run("run", "1f1b", 8, 5, 10000);
    const char *args[] = {dir, "--json", NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cJSON *j = parse_json(r.out, "pprof-report --json");
    tk_result_free(&r);
    cr_expect_eq(num(j, "summary_version"), 1);
    const cJSON *pl = cJSON_GetObjectItem(j, "pipeline");
    cr_expect_eq(num(pl, "stages"), 4);
    cr_expect_eq(num(pl, "microbatches"), 8);
    cr_expect_str_eq(cJSON_GetObjectItem(pl, "schedule")->valuestring, "1f1b");
    const cJSON *steps = cJSON_GetObjectItem(j, "steps");
    cr_assert_eq(cJSON_GetArraySize(steps), 4, "5 steps, the first skipped as warm-up");
    const cJSON *sp;
    double b[8];
    int nb = 0;
    int64_t expect_step = 2;
    cJSON_ArrayForEach(sp, steps)
    {
        cr_expect_eq(num(sp, "step"), (double)expect_step++);
        cr_expect_gt(num(sp, "step_ms"), 0);
        cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(sp, "stages")), 4);
        if (nb < 8)
            b[nb++] = num(sp, "bubble_ratio");
    }
    const cJSON *agg = cJSON_GetObjectItem(j, "aggregates");
    const cJSON *step_ms = cJSON_GetObjectItem(agg, "step_ms");
    cr_expect_eq(num(step_ms, "count"), 4);
    cr_expect(cJSON_IsNumber(cJSON_GetObjectItem(cJSON_GetObjectItem(agg, "bubble_ratio"), "mean")));
    /* 1F1B's fill/drain share is (S-1)/(M+S-1) = 3/11, judged on the median of the steps'
     * bubbles: a disturbance moves one step's either way (a longer step adds idle, an op that
     * starts late still ends at its deadline and looks shorter), the middle stands for the
     * undisturbed run where a mean takes in the disturbed step */
    for (int i = 0; i < nb; i++)
        for (int k = i + 1; k < nb; k++)
            if (b[k] < b[i]) {
                double t = b[i];
                b[i] = b[k];
                b[k] = t;
            }
    double bubble = nb % 2 ? b[nb / 2] : 0.5 * (b[nb / 2 - 1] + b[nb / 2]);
    cr_expect(fabs(bubble - 3.0 / 11.0) < 0.015, "bubble %.4f, 3/11 = %.4f", bubble, 3.0 / 11);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "stages")), 4);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "links")), 6);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "layers")), 4);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"), "files")), 1);
    cJSON_Delete(j);
}

Test(report, text_table_and_output_file)
{
    const char *dir = make_run("run", "1f1b", 4, 3, 1000);
    const char *args[] = {dir, NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_expect_not_null(strstr(r.out, "pipeline: 4 stage(s), schedule 1f1b"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "bubble"));
    tk_result_free(&r);
    const char *args2[] = {"-o", "sum.json", "--json", "-q", dir, NULL};
    r = tk_run(PPREPORT, args2, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_expect_str_empty(r.out);
    tk_result_free(&r);
    cJSON *j = load_json(tk_path("sum.json"));
    cr_expect_eq(num(j, "summary_version"), 1);
    cJSON_Delete(j);
}

/* ---- bad input --------------------------------------------------------------------------- */

static void expect_exit2(const char *const *args, const char *msg)
{
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_expect_eq(r.code, 2, "%s %s: exit %d (2 expected); stderr: %s", args[0],
                 args[1] ? args[1] : "", r.code, r.err);
    cr_expect_not_null(strstr(r.err, msg), "stderr lacks '%s': %s", msg, r.err);
    cr_expect_str_empty(r.out, "nothing on stdout for bad input");
    tk_result_free(&r);
}

Test(report, unusable_directories_are_exit_2)
{
    const char *a1[] = {tk_path("missing"), NULL};
    expect_exit2(a1, "cannot open run directory");
    cr_assert_eq(mkdir(tk_path("empty"), 0755), 0);
    const char *a2[] = {tk_path("empty"), NULL};
    expect_exit2(a2, "no trace files");
    cr_assert_eq(mkdir(tk_path("garbage"), 0755), 0);
    tk_write_text(tk_path("garbage/x.1.pft"), "this is not a trace file at all, not even close\n");
    const char *a3[] = {tk_path("garbage"), NULL};
    expect_exit2(a3, "no readable trace");
}

/* A FIFO named like a trace is refused, never waited on: alone it leaves nothing to analyze
 * (exit 2 naming it), next to a real trace it is skipped with a warning. */
Test(report, a_fifo_named_pft_is_skipped_never_waited_on)
{
    cr_assert_eq(mkdir(tk_path("fifo"), 0755), 0);
    cr_assert_eq(mkfifo(tk_path("fifo/host.7.pft"), 0644), 0);
    const char *a1[] = {tk_path("fifo"), NULL};
    expect_exit2(a1, "host.7.pft' is a FIFO, not a regular file");
    const char *dir = make_run("run", "1f1b", 4, 3, 1000);
    char fifo[PATH_MAX];
    snprintf(fifo, sizeof fifo, "%s/zz.1.pft", dir);
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    const char *a2[] = {dir, NULL};
    tk_result r = tk_run(PPREPORT, a2, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_assert_not_null(strstr(r.out, "is a FIFO"), "%s", r.out);
    tk_result_free(&r);
}

Test(report, run_without_pipeline_ranges_gets_the_generic_view)
{
    if (!tk_exists(LIBPPROF) || !tk_exists(CAPTURE_APP))
        cr_skip_test("libpprof.so / capture_app not built");
    const char *dir = tk_path("plain");
    const char *cap[] = {"-q", "-o", dir, "--", CAPTURE_APP, "burst", "1000", NULL};
    tk_result r = tk_run(PPRUN, cap, NULL);
    cr_assert_eq(r.code, 0, "pprof-run: %s", r.err);
    tk_result_free(&r);
    const char *args[] = {dir, NULL};
    tk_result rr = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(rr.code, 0, "exit %d: %s", rr.code, rr.err);
    cr_assert_not_null(strstr(rr.out, "no pipeline ranges"), "%s", rr.out);
    cr_assert_not_null(strstr(rr.out, "Ranges"), "%s", rr.out);
    tk_result_free(&rr);
}

Test(report, truncated_trace_is_reported_with_a_warning)
{
    const char *dir = make_run("run", "1f1b", 8, 6, 1000);
    char trace[PATH_MAX];
    first_trace(dir, trace, sizeof trace);
    cr_assert_eq(mkdir(tk_path("cut"), 0755), 0);
    size_t len = 0;
    char *data = tk_slurp(trace, &len);
    cr_assert_not_null(data);
    /* two thirds: a block cut in the middle, no footer, later steps missing */
    FILE *f = fopen(tk_path("cut/host.1.pft"), "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, len * 2 / 3 + 7, f), len * 2 / 3 + 7);
    fclose(f);
    free(data);
    const char *args[] = {tk_path("cut"), NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_expect_eq(r.code, 0, "a partial trace is still reported: exit %d, %s", r.code, r.err);
    cr_expect_not_null(strstr(r.out, "warnings:"), "%s", r.out);
    cr_expect_not_null(strstr(r.out, "no footer"), "%s", r.out);
    tk_result_free(&r);
    /* --json: in the JSON and echoed on stderr */
    const char *args2[] = {tk_path("cut"), "--json", NULL};
    r = tk_run(PPREPORT, args2, NULL);
    cr_expect_eq(r.code, 0);
    cJSON *j = parse_json(r.out, "--json");
    const cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"), "warnings");
    cr_expect_gt(cJSON_GetArraySize(w), 0);
    cr_expect_not_null(strstr(r.err, "warning:"), "%s", r.err);
    cJSON_Delete(j);
    tk_result_free(&r);
}

Test(report, bad_flags_are_exit_2)
{
    static const char *const cases[][4] = {
        {"--bogus", "x", NULL, "unknown option"},
        {"-Z", "x", NULL, "unknown option"},
        {"--steps", "5:2", "x", "before first step"},
        {"--steps", "a:b", "x", "--steps"},
        {"--steps", "0:3", "x", "--steps"},
        {"--warmup", "-1", "x", "--warmup"},
        {"--ranks", "1,,2", "x", "--ranks"},
        {"--ranks", "x", "x", "--ranks"},
        {"--gantt", "g.jpg", "x", ".png or .svg"},
        {"--gantt", "g", "x", ".png or .svg"},
        {"--gantt-data", "d.txt", "x", "--gantt-data needs --gantt"},
        {"x", "y", NULL, "one run directory expected"},
        {"--json", NULL, NULL, "no run directory given"},
        {"--chrome", NULL, NULL, "needs a value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[4] = {cases[i][0], cases[i][1], cases[i][2], NULL};
        expect_exit2(args, cases[i][3]);
    }
    const char *help[] = {"--help", NULL};
    tk_result r = tk_run(PPREPORT, help, NULL);
    cr_expect_eq(r.code, 0);
    cr_expect_not_null(strstr(r.out, "usage: pprof-report"));
    tk_result_free(&r);
}

Test(report, ranks_filter_to_an_absent_rank_is_exit_2)
{
    const char *dir = make_run("run", "1f1b", 4, 3, 1000);
    const char *args[] = {"--ranks", "7", dir, NULL};
    expect_exit2(args, "no readable trace");
}

/* ---- golden files ------------------------------------------------------------------------ */

/* A hand-built analysis: S=2, M=1, one kept step with a forward, a send, a receive and a
 * backward per stage, one link each way and one layer. */
typedef struct fake {
    pp_analysis a;
    pp_afile file;
    pp_astep steps[2];
    pp_stage_step ss[2][2];
    pp_astage stages[2];
    pp_alink links[2];
    pp_alayer layer;
    pp_aop ops[9];
} fake;

static pp_astats st3(double a, double b, double c)
{
    pp_astats s = {3, (a + b + c) / 3, b, b + 0.9 * (c - b), c, a, a + b + c};
    return s;
}

static void fake_build(fake *f)
{
    memset(f, 0, sizeof *f);
    pp_analysis *a = &f->a;
    snprintf(f->file.path, sizeof f->file.path, "run/h\"ost.12.pft");
    snprintf(f->file.host, sizeof f->file.host, "h\"ost");
    f->file.pid = 12;
    f->file.rank = -1;
    f->file.events = 100;
    f->file.has_footer = 1;
    a->n_files = 1;
    a->files = &f->file;
    a->events_total = 100;
    snprintf(a->warnings, sizeof a->warnings, "first problem\nsecond\n");
    a->S = 2;
    a->M = 1;
    a->v = 1;
    snprintf(a->schedule, sizeof a->schedule, "1f1b");
    a->samples_per_step = 8;
    a->n_steps = 2;
    a->steps = f->steps;
    for (int i = 0; i < 2; i++) {
        pp_astep *sp = &f->steps[i];
        sp->step = 2 + i;
        sp->t0_ns = 1e9 + i * 10e6;
        sp->step_ns = 10e6;
        sp->decomposed = i == 0;
        sp->opt_barrier = i == 0 ? 1 : -1;
        sp->culprit = i == 0 ? 1 : -1;
        sp->critical_share = i == 0 ? 0.625 : 0;
        sp->stage = f->ss[i];
        for (int s = 0; s < 2; s++) {
            f->ss[i][s].busy_ns = 6e6 + s * 1e6;
            f->ss[i][s].idle_ns = 10e6 - f->ss[i][s].busy_ns;
            f->ss[i][s].bubble_ratio = f->ss[i][s].idle_ns / 10e6;
            f->ss[i][s].fill_drain_ns = 2e6;
            f->ss[i][s].imbalance_ns = 1e6 - s * 1e6;
            f->ss[i][s].transfer_ns = f->ss[i][s].idle_ns - 2e6 - (1e6 - s * 1e6);
        }
        sp->bubble_ratio = (f->ss[i][0].idle_ns + f->ss[i][1].idle_ns) / 20e6;
    }
    a->step_ns = (pp_astats){2, 10e6, 10e6, 10e6, 10e6, 10e6, 20e6};
    a->bubble_ratio = 0.35;
    a->imbalance = 7.0 / 6.5;
    a->samples_per_s = 800;
    a->stages = f->stages;
    for (int s = 0; s < 2; s++) {
        pp_astage *g = &f->stages[s];
        g->stage = s;
        g->fwd_ns = st3(1e6, 2e6, 3e6);
        g->bwd_ns = st3(2e6, 4e6, 6e6);
        g->busy_ns = 6e6 + s * 1e6;
        g->idle_ns = 4e6 - s * 1e6;
        g->bubble_ratio = g->idle_ns / 10e6;
        g->fill_drain_ns = 2e6;
        g->imbalance_ns = 1e6 - s * 1e6;
        g->transfer_ns = 1e6;
        g->imbalance_culprit = s == 0 ? 1 : -1;
    }
    a->n_links = 2;
    a->links = f->links;
    for (int k = 0; k < 2; k++) {
        pp_alink *l = &f->links[k];
        l->src = k;
        l->dst = 1 - k;
        l->grad = k;
        l->messages = 2;
        l->bytes = 2048;
        l->timed = k ? 0 : 2;
        l->transfer_ns = k ? 0 : 2000;
        l->bandwidth_GBps = k ? 0 : 1.024;
        l->latency_ns = k ? (pp_astats){0} : (pp_astats){2, 1000, 1000, 1000, 1000, 1000, 2000};
        l->wait_ns = 5e5;
        l->send_ns = 1e4;
    }
    a->n_layers = 1;
    a->layers = &f->layer;
    snprintf(f->layer.name, sizeof f->layer.name, "block0");
    f->layer.fwd_ns = st3(1e6, 2e6, 3e6);
    /* step 3's ops: t0 = 1.01e9 */
    const uint64_t T = 1010000000ull;
    static const struct {
        uint8_t kind;
        int stage, mb, peer;
        uint64_t t0, t1;
    } ops[] = {
        {PP_AOP_FWD, 0, 0, -1, 0, 2000000},
        {PP_AOP_SEND_ACT, 0, 0, 1, 2000000, 2001000},
        {PP_AOP_RECV_GRAD, 0, 0, 1, 2001000, 6000000},
        {PP_AOP_BWD, 0, 0, -1, 6000000, 9500000},
        {PP_AOP_RECV_ACT, 1, 0, 0, 0, 2002000},
        {PP_AOP_FWD, 1, 0, -1, 2002000, 3500000},
        {PP_AOP_BWD, 1, 0, -1, 3500000, 5999000},
        {PP_AOP_SEND_GRAD, 1, 0, 0, 5999000, 6000000},
        {PP_AOP_OPT, 1, -1, -1, 9600000, 10000000},
    };
    for (int i = 0; i < 9; i++) {
        pp_aop *o = &f->ops[i];
        o->kind = ops[i].kind;
        o->stage = ops[i].stage;
        o->mb = ops[i].mb;
        o->peer = ops[i].peer;
        o->bytes = o->peer >= 0 ? 1024 : 0;
        o->step = 3;
        o->t0 = T + ops[i].t0;
        o->t1 = T + ops[i].t1;
        o->rank = 0;
    }
    a->n_ops = 9;
    a->ops = f->ops;
    a->kept_lo = a->kept_hi = 3;
}

static char *capture(pp_status (*fn)(const pp_analysis *, FILE *), const pp_analysis *a)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    cr_assert_not_null(m);
    cr_assert_eq(fn(a, m), PP_OK, "%s", pp_error_message());
    fclose(m);
    return buf;
}

/* Compares with a golden text and, on a difference, names the first differing line. */
static void expect_golden(const char *got, const char *want, const char *what)
{
    if (strcmp(got, want) == 0)
        return;
    int line = 1;
    const char *g = got, *w = want;
    while (*g && *g == *w) {
        line += *g == '\n';
        g++;
        w++;
    }
    cr_expect_fail("%s differs from the golden text at line %d:\n got: %.120s\nwant: %.120s\n"
                   "(whole output:\n%s)",
                   what, line, g, w, got);
}

static const char k_golden_json[] =
    "{\n"
    "  \"summary_version\": 1,\n"
    "  \"generator\": \"pipeprof pprof-report\",\n"
    "  \"pipeprof_version\": \"" PP_VERSION "\",\n"
    "  \"run\": {\n"
    "    \"files\": [\n"
    "      {\"path\": \"run/h\\\"ost.12.pft\", \"host\": \"h\\\"ost\", \"pid\": 12, \"rank\": null, "
    "\"events\": 100, \"dropped\": 0, \"filtered\": 0, \"footer\": true, \"damage\": "
    "{\"bad_blocks\": 0, \"bytes_skipped\": 0, \"truncated\": false, \"problem\": \"\"}}\n"
    "    ],\n"
    "    \"events\": 100,\n"
    "    \"dropped\": 0,\n"
    "    \"ranges_out_of_bounds\": 0,\n"
    "    \"warnings\": [\n"
    "      \"first problem\",\n"
    "      \"second\"\n"
    "    ]\n"
    "  },\n"
    "  \"pipeline\": {\n"
    "    \"stages\": 2,\n"
    "    \"microbatches\": 1,\n"
    "    \"virtual_stages\": 1,\n"
    "    \"schedule\": \"1f1b\",\n"
    "    \"samples_per_step\": 8,\n"
    "    \"tokens_per_step\": null,\n"
    "    \"data_parallel\": 1,\n"
    "    \"replica\": 0\n"
    "  },\n"
    "  \"analysis\": {\n"
    "    \"steps\": 2,\n"
    "    \"warmup_skipped\": 0,\n"
    "    \"first_step\": 2,\n"
    "    \"last_step\": 3\n"
    "  },\n"
    "  \"steps\": [\n"
    "    {\n"
    "      \"step\": 2,\n"
    "      \"start_ms\": 0,\n"
    "      \"step_ms\": 10,\n"
    "      \"window_ms\": 10,\n"
    "      \"bubble_ratio\": 0.35,\n"
    "      \"imbalance\": 1.076923077,\n"
    "      \"decomposed\": true,\n"
    "      \"optimizer_barrier\": true,\n"
    "      \"culprit\": 1,\n"
    "      \"critical_share\": 0.625,\n"
    "      \"stages\": [\n"
    "        {\"busy_ms\": 6, \"idle_ms\": 4, \"bubble_ratio\": 0.4, \"fwd_ms\": null, \"bwd_ms\": null, \"fill_drain_ms\": 2, "
    "\"imbalance_ms\": 1, \"transfer_ms\": 1, \"allreduce_ms\": 0},\n"
    "        {\"busy_ms\": 7, \"idle_ms\": 3, \"bubble_ratio\": 0.3, \"fwd_ms\": null, \"bwd_ms\": null, \"fill_drain_ms\": 2, "
    "\"imbalance_ms\": 0, \"transfer_ms\": 1, \"allreduce_ms\": 0}\n"
    "      ]\n"
    "    },\n"
    "    {\n"
    "      \"step\": 3,\n"
    "      \"start_ms\": 10,\n"
    "      \"step_ms\": 10,\n"
    "      \"window_ms\": 10,\n"
    "      \"bubble_ratio\": 0.35,\n"
    "      \"imbalance\": 1.076923077,\n"
    "      \"decomposed\": false,\n"
    "      \"optimizer_barrier\": null,\n"
    "      \"culprit\": null,\n"
    "      \"critical_share\": null,\n"
    "      \"stages\": [\n"
    "        {\"busy_ms\": 6, \"idle_ms\": 4, \"bubble_ratio\": 0.4, \"fwd_ms\": null, \"bwd_ms\": null, \"fill_drain_ms\": null, "
    "\"imbalance_ms\": null, \"transfer_ms\": null, \"allreduce_ms\": 0},\n"
    "        {\"busy_ms\": 7, \"idle_ms\": 3, \"bubble_ratio\": 0.3, \"fwd_ms\": null, \"bwd_ms\": null, \"fill_drain_ms\": null, "
    "\"imbalance_ms\": null, \"transfer_ms\": null, \"allreduce_ms\": 0}\n"
    "      ]\n"
    "    }\n"
    "  ],\n"
    "  \"aggregates\": {\n"
    "    \"step_ms\": {\"count\": 2, \"mean\": 10, \"median\": 10, \"p95\": 10, \"max\": 10, "
    "\"min\": 10},\n"
    "    \"bubble_ratio\": {\"count\": 2, \"mean\": 0.35, \"median\": 0.35, \"p95\": 0.35, "
    "\"max\": 0.35, \"min\": 0.35},\n"
    "    \"imbalance\": {\"count\": 2, \"mean\": 1.076923077, \"median\": 1.076923077, "
    "\"p95\": 1.076923077, \"max\": 1.076923077, \"min\": 1.076923077},\n"
    "    \"samples_per_s\": 800,\n"
    "    \"tokens_per_s\": null\n"
    "  },\n"
    "  \"stages\": [\n"
    "    {\n"
    "      \"stage\": 0,\n"
    "      \"fwd_ms\": {\"count\": 3, \"mean\": 2, \"median\": 2, \"p95\": 2.9, \"max\": 3, "
    "\"min\": 1},\n"
    "      \"bwd_ms\": {\"count\": 3, \"mean\": 4, \"median\": 4, \"p95\": 5.8, \"max\": 6, "
    "\"min\": 2},\n"
    "      \"bwd_input_ms\": {\"count\": 0, \"mean\": null, \"median\": null, \"p95\": null, "
    "\"max\": null, \"min\": null},\n"
    "      \"bwd_weight_ms\": {\"count\": 0, \"mean\": null, \"median\": null, \"p95\": null, "
    "\"max\": null, \"min\": null},\n"
    "      \"opt_ms\": {\"count\": 0, \"mean\": null, \"median\": null, \"p95\": null, "
    "\"max\": null, \"min\": null},\n"
    "      \"busy_ms\": 6,\n"
    "      \"idle_ms\": 4,\n"
    "      \"bubble_ratio\": 0.4,\n"
    "      \"fill_drain_ms\": 2,\n"
    "      \"imbalance_ms\": 1,\n"
    "      \"transfer_ms\": 1,\n"
    "      \"allreduce_mean_ms\": 0,\n"
    "      \"allreduce_ms\": {\"count\": 0, \"mean\": null, \"median\": null, \"p95\": null, "
    "\"max\": null, \"min\": null},\n"
    "      \"allreduce_bytes\": 0,\n"
    "      \"allreduce_busbw_GBps\": null,\n"
    "      \"imbalance_culprit\": 1\n"
    "    },\n"
    "    {\n"
    "      \"stage\": 1,\n"
    "      \"fwd_ms\": {\"count\": 3, \"mean\": 2, \"median\": 2, \"p95\": 2.9, \"max\": 3, "
    "\"min\": 1},\n"
    "      \"bwd_ms\": {\"count\": 3, \"mean\": 4, \"median\": 4, \"p95\": 5.8, \"max\": 6, "
    "\"min\": 2},\n"
    "      \"bwd_input_ms\": {\"count\": 0, \"mean\": null, \"median\": null, \"p95\": null, "
    "\"max\": null, \"min\": null},\n"
    "      \"bwd_weight_ms\": {\"count\": 0, \"mean\": null, \"median\": null, \"p95\": null, "
    "\"max\": null, \"min\": null},\n"
    "      \"opt_ms\": {\"count\": 0, \"mean\": null, \"median\": null, \"p95\": null, "
    "\"max\": null, \"min\": null},\n"
    "      \"busy_ms\": 7,\n"
    "      \"idle_ms\": 3,\n"
    "      \"bubble_ratio\": 0.3,\n"
    "      \"fill_drain_ms\": 2,\n"
    "      \"imbalance_ms\": 0,\n"
    "      \"transfer_ms\": 1,\n"
    "      \"allreduce_mean_ms\": 0,\n"
    "      \"allreduce_ms\": {\"count\": 0, \"mean\": null, \"median\": null, \"p95\": null, "
    "\"max\": null, \"min\": null},\n"
    "      \"allreduce_bytes\": 0,\n"
    "      \"allreduce_busbw_GBps\": null,\n"
    "      \"imbalance_culprit\": null\n"
    "    }\n"
    "  ],\n"
    "  \"links\": [\n"
    "    {\"src\": 0, \"dst\": 1, \"kind\": \"act\", \"messages\": 2, \"bytes\": 2048, "
    "\"timed\": 2, \"bandwidth_GBps\": 1.024, \"latency_us\": {\"count\": 2, \"mean\": 1, "
    "\"median\": 1, \"p95\": 1, \"max\": 1, \"min\": 1}, \"transfer_ms\": 0.002, "
    "\"wait_ms\": 0.5, \"send_ms\": 0.01},\n"
    "    {\"src\": 1, \"dst\": 0, \"kind\": \"grad\", \"messages\": 2, \"bytes\": 2048, "
    "\"timed\": 0, \"bandwidth_GBps\": null, \"latency_us\": {\"count\": 0, \"mean\": null, "
    "\"median\": null, \"p95\": null, \"max\": null, \"min\": null}, \"transfer_ms\": 0, "
    "\"wait_ms\": 0.5, \"send_ms\": 0.01}\n"
    "  ],\n"
    "  \"layers\": [\n"
    "    {\n"
    "      \"index\": 0,\n"
    "      \"name\": \"block0\",\n"
    "      \"fwd_ms\": {\"count\": 3, \"mean\": 2, \"median\": 2, \"p95\": 2.9, \"max\": 3, "
    "\"min\": 1},\n"
    "      \"bwd_ms\": {\"count\": 0, \"mean\": null, \"median\": null, \"p95\": null, "
    "\"max\": null, \"min\": null},\n"
    "      \"bwd_weight_ms\": {\"count\": 0, \"mean\": null, \"median\": null, \"p95\": null, "
    "\"max\": null, \"min\": null}\n"
    "    }\n"
    "  ],\n"
    "  \"gpu\": null\n"
    "}\n";

Test(report, golden_summary_json)
{
    fake *f = calloc(1, sizeof *f);
    cr_assert_not_null(f);
    fake_build(f);
    char *got = capture(pp_report_json, &f->a);
    expect_golden(got, k_golden_json, "summary JSON");
    cJSON *j = cJSON_Parse(got);
    cr_expect_not_null(j, "the golden summary parses");
    cJSON_Delete(j);
    free(got);
    free(f);
}

static const char k_golden_gantt[] =
    "# pipeprof Gantt data (pprof-report): steps 3..3, times in ms from the start of step 3\n"
    "# stage start_ms end_ms kind mb chunk\n"
    "0 0.000000 2.000000 fwd 0 0\n"
    "0 2.000000 2.001000 send_act 0 0\n"
    "0 2.001000 6.000000 recv_grad 0 0\n"
    "0 6.000000 9.500000 bwd 0 0\n"
    "1 0.000000 2.002000 recv_act 0 0\n"
    "1 2.002000 3.500000 fwd 0 0\n"
    "1 3.500000 5.999000 bwd 0 0\n"
    "1 5.999000 6.000000 send_grad 0 0\n"
    "1 9.600000 10.000000 opt_step -1 0\n";

Test(report, golden_gantt_data_and_transfer_pairs)
{
    fake *f = calloc(1, sizeof *f);
    cr_assert_not_null(f);
    fake_build(f);
    char *got = capture(pp_report_gantt_data, &f->a);
    expect_golden(got, k_golden_gantt, "Gantt data");
    free(got);
    long recv_of[9];
    cr_expect_eq(pp_report_pair_transfers(&f->a, recv_of), 2);
    cr_expect_eq(recv_of[1], 4, "stage 0's activation send meets stage 1's receive");
    cr_expect_eq(recv_of[7], 2, "stage 1's gradient send meets stage 0's receive");
    for (int i = 0; i < 9; i++)
        if (i != 1 && i != 7)
            cr_expect_eq(recv_of[i], -1);
    /* FIFO: the k-th send meets the k-th receive even when listed out of order */
    f->ops[8] = f->ops[1];
    f->ops[8].t0 += 100;
    f->ops[8].t1 += 100;
    f->ops[6] = f->ops[4];
    f->ops[6].t0 += 50; /* the second receive of the link */
    cr_expect_eq(pp_report_pair_transfers(&f->a, recv_of), 3);
    cr_expect_eq(recv_of[1], 4);
    cr_expect_eq(recv_of[8], 6);
    free(f);
}

Test(report, chrome_of_the_fake_analysis_pairs_flows)
{
    fake *f = calloc(1, sizeof *f);
    cr_assert_not_null(f);
    fake_build(f);
    char *got = capture(pp_report_chrome, &f->a);
    cJSON *j = parse_json(got, "Chrome trace");
    const cJSON *e;
    int x = 0, s = 0, fl = 0;
    double s_ts[2] = {0}, f_ts[2] = {0};
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents"))
    {
        const char *ph = cJSON_GetObjectItem(e, "ph")->valuestring;
        x += strcmp(ph, "X") == 0;
        if (strcmp(ph, "s") == 0 && s < 2)
            s_ts[s++] = num(e, "ts");
        if (strcmp(ph, "f") == 0 && fl < 2)
            f_ts[fl++] = num(e, "ts");
    }
    /* 9 ops, and both messages' in-flight parts: the activation was sent 2000..2001 us and
     * received 0..2002 us, the receive was posted first, so the arrow ends in a child slice of
     * it that begins after the send, at the receive's end (the gradient likewise) */
    cr_expect_eq(x, 11);
    cr_expect_eq(s, 2);
    cr_expect_eq(fl, 2);
    cr_expect(s_ts[0] > 2000 && s_ts[0] < 2001, "%f", s_ts[0]);
    cr_expect(f_ts[0] > 2001.9 && f_ts[0] < 2002, "%f", f_ts[0]);
    cJSON_Delete(j);
    free(got);
    free(f);
}

/* The summary module reads back what it writes: the metrics pprof-check takes from the JSON are
 * those it takes from the analysis itself (to the ten digits the JSON keeps), and a summary of
 * another version is refused by name. */
Test(report, summary_read_gives_back_what_summary_write_wrote)
{
    fake *f = calloc(1, sizeof *f);
    cr_assert_not_null(f);
    fake_build(f);
    char *text = capture(pp_summary_write, &f->a);
    pp_check_run *back = NULL, *direct = NULL;
    cr_assert_eq(pp_check_run_parse(text, "fake.json", &back), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_check_run_from_analysis(&f->a, "fake", &direct), PP_OK, "%s",
                 pp_error_message());
    cr_assert_str_eq(back->source_kind, "summary");
    cr_assert_eq(back->shape.S, direct->shape.S);
    cr_assert_eq(back->shape.M, direct->shape.M);
    cr_assert_eq(back->shape.v, direct->shape.v);
    cr_assert_str_eq(back->shape.schedule, direct->shape.schedule);
    cr_assert_str_eq(back->shape.layer_fp, direct->shape.layer_fp);
    cr_assert_eq(back->n_steps, direct->n_steps);
    cr_assert_geq(back->n_metrics, 3, "step, throughput and bubble at least");
    for (size_t i = 0; i < back->n_metrics; i++) {
        const pp_check_metric *b = &back->metrics[i], *d = NULL;
        for (size_t j = 0; j < direct->n_metrics && !d; j++)
            if (strcmp(direct->metrics[j].name, b->name) == 0)
                d = &direct->metrics[j];
        if (!d) {
            /* the fake steps carry no stage means: the summary's aggregate, a value alone */
            cr_assert_eq(b->n, 0, "%s", b->name);
            cr_assert_gt(b->value, 0, "%s", b->name);
            continue;
        }
        cr_assert_str_eq(b->unit, d->unit);
        cr_assert_eq(b->n, d->n, "%s", d->name);
        cr_assert_float_eq(b->value, d->value, 1e-9 * fabs(d->value) + 1e-12, "%s", d->name);
        for (size_t k = 0; k < d->n; k++)
            cr_assert_float_eq(b->samples[k], d->samples[k], 1e-9 * fabs(d->samples[k]) + 1e-12,
                               "%s[%zu]", d->name, k);
    }
    for (size_t j = 0; j < direct->n_metrics; j++) {
        int found = 0;
        for (size_t i = 0; i < back->n_metrics; i++)
            found |= strcmp(back->metrics[i].name, direct->metrics[j].name) == 0;
        cr_assert(found, "%s is lost on the way through the summary", direct->metrics[j].name);
    }
    pp_check_run_free(back);
    pp_check_run_free(direct);
    char *v = strstr(text, "\"summary_version\": 1,");
    cr_assert_not_null(v);
    v[strlen("\"summary_version\": ")] = '9';
    cr_assert_eq(pp_check_run_parse(text, "fake.json", &back), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "summary_version 9 is not supported"), "%s",
              pp_error_message());
    free(text);
    free(f);
}
