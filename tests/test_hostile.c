/* test_hostile.c: hostile and foreign traces never crash, bloat or mislead the analysis
 * (issue 14, docs/nvtx-convention.md "Bounds"). A plain NVTX job (tests/hostile_app.c) emits
 * legal NVTX ranges whose values no pipeline has; pprof-run must keep the job's exit status,
 * pprof-report must answer (exit 0 with the ranges counted, or 2 with a message), pprof-tune and
 * pprof-check must not crash, and no tool's peak RSS may pass 100 MB (measured with wait4).
 * Damaged traces too: every byte of a capture flipped in turn (checksums repaired so that the
 * change reaches the analysis), and one rank's file of a 4-rank run altered. */
#define _DEFAULT_SOURCE /* wait4 */
#include "pp_analyzer.h"
#include "pp_report.h"
#include "pp_testkit.h"
#include "pp_trace.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
#define PPREPORT PP_BUILD_DIR "/tools/pprof-report"
#define PPTUNE PP_BUILD_DIR "/tools/pprof-tune"
#define PPCHECK PP_BUILD_DIR "/tools/pprof-check"
#define LIBPPROF PP_BUILD_DIR "/profiler/libpprof.so"
#define HOSTILE PP_BUILD_DIR "/tests/hostile_app"

/* Peak RSS allowed to each tool (the bloat this guards against was gigabytes); under ASan
 * too, whose shadow memory and quarantine stay well below it for these small runs. */
#define RSS_LIMIT_KB (100L * 1024)

static void setup(void) { tk_dir_create("pp_hostile"); }
static void teardown(void) { tk_dir_remove(); }

TestSuite(hostile, .init = setup, .fini = teardown, .timeout = 600);

static void need_capture(void)
{
    if (access(LIBPPROF, R_OK) != 0 || access(HOSTILE, X_OK) != 0)
        cr_skip_test("libpprof.so or hostile_app is not built (no NVTX headers)");
}

typedef struct measured {
    int code;      /* exit status, or 128 + signal */
    int signaled;
    long maxrss_kb; /* peak RSS of the process and its descendants */
    char err[512]; /* the start of its stderr */
} measured;

/* Runs argv (argv[0] absolute) in tk_dir, stdout to /dev/null, stderr to a file; the peak RSS
 * from wait4's rusage, which covers the process and the children it waited for. */
static measured run_measured(const char *const *argv)
{
    measured m = {0};
    const char *errp = tk_path("stderr.txt");
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        if (chdir(tk_dir) != 0)
            _exit(127);
        int null = open("/dev/null", O_WRONLY);
        int err = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (null < 0 || err < 0)
            _exit(127);
        dup2(null, 1);
        dup2(err, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    cr_assert_eq(wait4(pid, &status, 0, &ru), pid);
    m.signaled = WIFSIGNALED(status);
    m.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    m.maxrss_kb = ru.ru_maxrss;
    char *e = tk_slurp(errp, NULL);
    if (e)
        snprintf(m.err, sizeof m.err, "%s", e);
    free(e);
    return m;
}

/* Captures hostile_app with `extra` (NULL-terminated: options, then specs) into tk_dir/name;
 * asserts pprof-run kept the job's status (0) and stayed small. */
static const char *capture(const char *name, const char *const *extra)
{
    const char *dir = tk_path(name);
    const char *argv[32] = {PPRUN, "-q", "-o", dir, "--", HOSTILE};
    int n = 6;
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    measured m = run_measured(argv);
    cr_assert_eq(m.code, 0, "%s: pprof-run exits %d (the job's status is 0): %s", name, m.code,
                 m.err);
    cr_expect_lt(m.maxrss_kb, RSS_LIMIT_KB, "%s: pprof-run peak RSS %ld kB", name, m.maxrss_kb);
    return dir;
}

/* pprof-report, pprof-tune and pprof-check on dir: no crash, exit codes of their pages, RSS
 * bounded. Returns pprof-report's exit code. */
static int analyze_all(const char *what, const char *dir, const char *baseline)
{
    char dirbuf[256], json[256], plan[256];
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    snprintf(json, sizeof json, "%s", tk_path("summary.json"));
    snprintf(plan, sizeof plan, "%s", tk_path("plan.json"));
    unlink(json);
    const char *rep[] = {PPREPORT, "-q", "--json", "-o", json, "--chrome", tk_path("c.json"),
                         dirbuf, NULL};
    measured r = run_measured(rep);
    cr_expect(!r.signaled && (r.code == 0 || r.code == 2),
              "%s: pprof-report exits %d (0, or 2 with a message): %s", what, r.code, r.err);
    if (r.code == 2)
        cr_expect_gt(strlen(r.err), 10u, "%s: pprof-report exits 2 without saying why", what);
    cr_expect_lt(r.maxrss_kb, RSS_LIMIT_KB, "%s: pprof-report peak RSS %ld kB", what,
                 r.maxrss_kb);
    const char *tune[] = {PPTUNE, "-o", plan, dirbuf, NULL};
    measured t = run_measured(tune);
    cr_expect(!t.signaled && t.code <= 3, "%s: pprof-tune exits %d: %s", what, t.code, t.err);
    cr_expect_lt(t.maxrss_kb, RSS_LIMIT_KB, "%s: pprof-tune peak RSS %ld kB", what, t.maxrss_kb);
    if (baseline) {
        const char *chk[] = {PPCHECK, "--baseline", baseline, dirbuf, NULL};
        measured c = run_measured(chk);
        cr_expect(!c.signaled && c.code <= 2, "%s: pprof-check exits %d: %s", what, c.code,
                  c.err);
        cr_expect_lt(c.maxrss_kb, RSS_LIMIT_KB, "%s: pprof-check peak RSS %ld kB", what,
                     c.maxrss_kb);
    }
    return r.code;
}

/* The number after "ranges_out_of_bounds": in the summary JSON, -1 when absent. */
static long out_of_bounds_in_summary(void)
{
    char *j = tk_slurp(tk_path("summary.json"), NULL);
    if (!j)
        return -1;
    const char *p = strstr(j, "\"ranges_out_of_bounds\": ");
    long v = p ? strtol(p + strlen("\"ranges_out_of_bounds\": "), NULL, 10) : -1;
    free(j);
    return v;
}

/* The baseline every hostile run is checked against: the same job without hostile ranges. */
static const char *baseline_of_clean_run(void)
{
    const char *clean = capture("clean", NULL);
    static char base[256];
    snprintf(base, sizeof base, "%s", tk_path("base.json"));
    const char *argv[] = {PPREPORT, "-q", "--json", "-o", base, clean, NULL};
    measured m = run_measured(argv);
    cr_assert_eq(m.code, 0, "the clean run analyzes: %s", m.err);
    return base;
}

/* Each legal for NVTX, each once a crash or gigabytes (issue 14), each one range in step 2. */
static const struct {
    const char *spec, *what;
} k_hostile[] = {
    {"fwd mb1073741823 c1073741823", "2^30 micro-batches x 2^30 chunks (heap overflow in the sim)"},
    {"fwd mb100000000", "10^8 micro-batches (1.5 GB of message table)"},
    {"fwd mb0|2147483648", "category 2^31: category - 1 overflowed"},
    {"fwd mb0|4294967295", "category 2^32 - 1: stage 2^32 - 2"},
    {"fwd mb2147483647", "mb + 1 overflowed"},
    {"fwd mb99999999999999999999", "a micro-batch past 64 bits"},
    {"step|1|9223372036854775807", "a step range numbered INT64_MAX"},
    {"send_act mb0 peer2147483647|1|4096", "a peer 2^31 - 1"},
    {"layer1000000000 fwd", "a layer index of 10^9"},
    {"ext:1,0,2147483647,2147483647,0,-1,0,2", "extended payload: mb and chunk INT32_MAX"},
    {"ext:1,2147483647,0,0,-1,-1,0,2", "extended payload: stage INT32_MAX"},
    {"ext:1,0,0,0,-1,-1,0,-9223372036854775807", "extended payload: step INT64_MIN + 1"},
};

Test(hostile, hostile_ranges_leave_the_job_and_every_tool_standing)
{
    need_capture();
    const char *base = baseline_of_clean_run();
    for (size_t i = 0; i < sizeof k_hostile / sizeof k_hostile[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "h%zu", i);
        const char *extra[] = {k_hostile[i].spec, NULL};
        const char *dir = capture(name, extra);
        /* the rest of the job is a healthy pipeline: its analysis stands, the range counted */
        cr_expect_eq(analyze_all(k_hostile[i].what, dir, base), 0, "%s", k_hostile[i].what);
        cr_expect_geq(out_of_bounds_in_summary(), 1,
                      "%s: the range is counted in ranges_out_of_bounds", k_hostile[i].what);
    }
}

Test(hostile, an_announced_shape_bounds_the_ranges)
{
    need_capture();
    /* with "config S=1 M=2 v=1", mb 2 and chunk 1 are out of bounds; the clean ranges are not */
    const char *extra[] = {"-c", "config schedule=gpipe S=1 M=2 v=1", "fwd mb2", "fwd mb0 c1",
                           "fwd mb1|2", NULL};
    const char *dir = capture("shape", extra);
    cr_assert_eq(analyze_all("announced shape", dir, NULL), 0);
    cr_expect_eq(out_of_bounds_in_summary(), 3, "the three ranges outside S=1 M=2 v=1");
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_expect_eq(a->S, 1);
    cr_expect_eq(a->M, 2);
    cr_expect_eq(a->ranges_out_of_bounds, 3u);
    cr_expect_not_null(strstr(a->warnings, "3 pipeline range(s) ignored"), "%s", a->warnings);
    cr_expect_not_null(strstr(a->warnings, "'fwd mb2'"), "the first one is named: %s",
                       a->warnings);
    cr_expect_eq(a->stages[0].fwd_ns.count, 2u * 3u, "2 forwards x 3 analyzed steps, no more");
    pp_analysis_free(a);
}

Test(hostile, a_config_mark_out_of_its_bounds_is_not_announced)
{
    need_capture();
    const char *extra[] = {"-c", "config S=100000 M=-3 v=65 layers=x", NULL};
    const char *dir = capture("badcfg", extra);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_expect_eq(a->S, 1, "the ranges' one stage, not 100000");
    cr_expect_eq(a->M, 0, "M unknown");
    cr_expect_not_null(strstr(a->warnings, "config mark: S=100000"), "%s", a->warnings);
    cr_expect_not_null(strstr(a->warnings, "config mark: M=-3"), "%s", a->warnings);
    cr_expect_eq(a->n_steps, 3u);
    pp_analysis_free(a);
}

Test(hostile, a_stage_first_seen_late_widens_the_earlier_steps)
{
    need_capture();
    /* nothing announced; a range of stage 1 in step 6 of 7, after steps 1.. were reduced with
     * one stage: every step must still hold a->S stages (the report's per-step imbalance
     * reads them all) */
    const char *extra[] = {"-s", "7", "-t", "6", "fwd mb0|2", NULL};
    const char *dir = capture("late", extra);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->S, 2, "the late stage counts");
    cr_assert_eq(a->n_steps, 6u);
    for (size_t i = 0; i < a->n_steps; i++) {
        cr_expect_gt(a->steps[i].stage[0].busy_ns, 0.0);
        if (a->steps[i].step < 6)
            cr_expect_eq(a->steps[i].stage[1].busy_ns, 0.0, "step %lld: stage 1 did nothing",
                         (long long)a->steps[i].step);
    }
    FILE *null = fopen("/dev/null", "w");
    cr_assert_not_null(null);
    cr_expect_eq(pp_report_json(a, null), PP_OK, "the JSON's per-step imbalance over 2 stages");
    fclose(null);
    pp_analysis_free(a);
}


/* The only .pft file of dir with rank `rank` (-1: any), as a path in a static buffer. */
static const char *trace_of(const char *dir, int rank)
{
    static char path[512];
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s/*.pft", dir);
    FILE *ls = popen(cmd, "r");
    cr_assert_not_null(ls);
    char line[512];
    path[0] = '\0';
    while (fgets(line, sizeof line, ls)) {
        line[strcspn(line, "\n")] = '\0';
        pp_trace_reader *r = NULL;
        if (pp_trace_reader_open(line, &r) != PP_OK)
            continue;
        int32_t rk = pp_trace_reader_header(r)->rank;
        pp_trace_reader_close(r);
        if (rank < 0 || rk == rank)
            snprintf(path, sizeof path, "%s", line);
    }
    pclose(ls);
    cr_assert(path[0], "no trace of rank %d in %s", rank, dir);
    return path;
}

/* The analysis in a child: pp_analyze_dir and every report writer, to /dev/null; returns the
 * child's peak RSS in kB (asserting it neither crashed nor failed but with a message). */
static long analyze_in_child(const char *dir)
{
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        pp_analysis *a = NULL;
        if (pp_analyze_dir(dir, NULL, &a) != PP_OK)
            _exit(pp_error_message()[0] ? 2 : 99);
        FILE *null = fopen("/dev/null", "w");
        pp_analysis_print(a, null);
        if (pp_report_json(a, null) != PP_OK || pp_report_chrome(a, null) != PP_OK ||
            pp_report_gantt_data(a, null) != PP_OK)
            _exit(pp_error_message()[0] ? 3 : 98);
        fclose(null);
        pp_analysis_free(a);
        _exit(0);
    }
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    cr_assert_eq(wait4(pid, &status, 0, &ru), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) <= 3,
              "the analysis of %s %s %d", dir, WIFEXITED(status) ? "exits" : "died of signal",
              WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    return ru.ru_maxrss;
}

static uint8_t *read_all(const char *path, size_t *n)
{
    char *d = NULL;
    cr_assert_eq(pp_read_file(path, &d, n), PP_OK, "%s", pp_error_message());
    return (uint8_t *)d;
}

static void write_all(const char *path, const uint8_t *d, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(d, 1, n, f), n);
    fclose(f);
}

/* Every byte past the header of one process's trace, each turned into its complement (0 <->
 * 0xFF: a sign, a high byte of a count), checksums repaired; one analysis per byte in a child,
 * its peak RSS measured. With the extended payload (-x) or the message grammar. */
static void flip_every_byte(const char *name, const char *const *extra)
{
    const char *dir = capture(name, extra);
    char src[512];
    snprintf(src, sizeof src, "%s", trace_of(dir, -1));
    size_t n = 0;
    uint8_t *orig = read_all(src, &n);
    uint8_t *buf = malloc(n);
    cr_assert_not_null(buf);
    char mdir[256];
    snprintf(mdir, sizeof mdir, "%s.flipped", dir);
    mkdir(mdir, 0755);
    char dst[512];
    snprintf(dst, sizeof dst, "%s/t.pft", mdir);
    long worst = 0;
    size_t worst_at = 0, tried = 0;
    for (size_t at = sizeof(pp_trace_header); at < n; at++) {
        memcpy(buf, orig, n);
        buf[at] ^= 0xFF;
        pp_trace_repair_checksums(buf, n);
        write_all(dst, buf, n);
        long kb = analyze_in_child(mdir);
        tried++;
        if (kb > worst) {
            worst = kb;
            worst_at = at;
        }
    }
    cr_log_info("%s: %zu flipped bytes of a %zu-byte trace: peak RSS %ld kB (byte %zu)", name,
                tried, n, worst, worst_at);
    cr_expect_lt(worst, RSS_LIMIT_KB, "%s: byte %zu flipped: peak RSS %ld kB", name, worst_at,
                 worst);
    free(buf);
    free(orig);
}

Test(hostile, every_flipped_byte_of_a_trace_leaves_the_analysis_bounded)
{
    need_capture();
    const char *ext[] = {"-s", "3", "-x", NULL};
    flip_every_byte("flip-ext", ext);
    const char *grammar[] = {"-s", "3", NULL};
    flip_every_byte("flip-grammar", grammar);
}

Test(hostile, one_altered_rank_file_of_a_4_rank_run_leaves_the_analysis_bounded)
{
    need_capture();
    const char *extra[] = {"-r", "4", "-s", "3", "-x", NULL};
    const char *dir = capture("ranks", extra);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->S, 4, "the 4-rank run has 4 stages");
    cr_assert_gt(a->n_links, 0u, "and transfers between them");
    pp_analysis_free(a);
    char victim[512];
    snprintf(victim, sizeof victim, "%s", trace_of(dir, 2));
    size_t n = 0;
    uint8_t *orig = read_all(victim, &n);
    /* 11 consecutive bytes set to 0xFF at spots through rank 2's file, checksums repaired */
    long worst = 0;
    size_t worst_at = 0, tried = 0;
    for (size_t at = sizeof(pp_trace_header); at + 11 <= n; at += 5) {
        uint8_t *buf = malloc(n);
        cr_assert_not_null(buf);
        memcpy(buf, orig, n);
        memset(buf + at, 0xFF, 11);
        pp_trace_repair_checksums(buf, n);
        write_all(victim, buf, n);
        free(buf);
        long kb = analyze_in_child(dir);
        tried++;
        if (kb > worst) {
            worst = kb;
            worst_at = at;
        }
    }
    write_all(victim, orig, n);
    cr_log_info("%zu alterations of rank 2's %zu-byte file: peak RSS %ld kB (at byte %zu)", tried,
                n, worst, worst_at);
    cr_expect_lt(worst, RSS_LIMIT_KB, "11 bytes at %zu of rank 2's file: peak RSS %ld kB",
                 worst_at, worst);
    free(orig);
}
