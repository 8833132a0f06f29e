/* test_generic.c: the generic view (analyzer/ranges.c; docs/metrics.md "Ranges and marks") of
 * jobs that do not follow pipeprof's convention, as a user meets it:
 *   - tests/plain_nvtx_app.c (a plain NVTX3 C program) and tests/py/plain_nvtx.py (the PyPI
 *     `nvtx` package) under pprof-run: the ranges table's counts are exact per name and per
 *     thread, every range is in pprof-report's Chrome export with a duration inside the job's
 *     own bracket of it (clock_gettime just before the opening call, just after the closing
 *     one), every mark too, and the thread names the job gave are there;
 *   - a hostile trace of 100k distinct names: bounded tables and a warning;
 *   - a convention job with other ranges (capture_app steps): an "Other ranges" section and
 *     tracks of their own in the Chrome trace;
 *   - pprof-tune and pprof-check refuse a run without pipeline ranges clearly (exit 2).
 * The Python is found as in tests/test_pyjob.c. */
#define _GNU_SOURCE
#include "pp_analyzer.h"
#include "pp_trace.h"
#include "pp_testkit_trace.h"

#include <cJSON.h>
#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
#define PPREPORT PP_BUILD_DIR "/tools/pprof-report"
#define PPTUNE PP_BUILD_DIR "/tools/pprof-tune"
#define PPCHECK PP_BUILD_DIR "/tools/pprof-check"
#define LIBPPROF PP_BUILD_DIR "/profiler/libpprof.so"
#define PLAIN_APP PP_BUILD_DIR "/tests/plain_nvtx_app"
#define CAPTURE_APP PP_BUILD_DIR "/tests/capture_app"
#define PY_FIXTURE PP_TEST_PY_DIR "/plain_nvtx.py"

/* The capture's timestamps lie inside the job's own bracket of each range; the slack covers
 * the capture clock's conversion (TSC to CLOCK_MONOTONIC) and the Chrome trace's 1 ns digits. */
#define SLACK_NS 5000.0

static void setup(void) { tk_dir_create("pp_generic"); }

TestSuite(generic, .init = setup, .fini = tk_dir_remove, .timeout = 240);

/* ---- the job's truth ---- */

typedef struct truth_range {
    char domain[64], name[128];
    unsigned tid;
    double t0, t1;
    int used;
} truth_range;

typedef struct truth {
    truth_range *r;
    size_t n;
    truth_range *m; /* marks (t0, t1 unused) */
    size_t nm;
    unsigned tids[16];
    char tnames[16][64];
    size_t nt;
} truth;

static void read_truth(const char *path, truth *t)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no truth file %s", path);
    size_t cap = 4096;
    t->r = calloc(cap, sizeof *t->r);
    t->m = calloc(cap, sizeof *t->m);
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char dom[64];
        unsigned tid;
        unsigned long long a, b;
        int n = 0;
        if (line[0] == 'R' && sscanf(line, "R %63s %u %llu %llu %n", dom, &tid, &a, &b, &n) == 4) {
            cr_assert_lt(t->n, cap);
            truth_range *x = &t->r[t->n++];
            snprintf(x->domain, sizeof x->domain, "%s", strcmp(dom, "-") ? dom : "");
            snprintf(x->name, sizeof x->name, "%s", line + n);
            x->tid = tid;
            x->t0 = (double)a;
            x->t1 = (double)b;
        } else if (line[0] == 'M' && sscanf(line, "M %63s %u %n", dom, &tid, &n) == 2) {
            cr_assert_lt(t->nm, cap);
            truth_range *x = &t->m[t->nm++];
            snprintf(x->domain, sizeof x->domain, "%s", strcmp(dom, "-") ? dom : "");
            snprintf(x->name, sizeof x->name, "%s", line + n);
            x->tid = tid;
        } else if (line[0] == 'T' && sscanf(line, "T %u %n", &tid, &n) == 1 && t->nt < 16) {
            t->tids[t->nt] = tid;
            snprintf(t->tnames[t->nt++], 64, "%s", line + n);
        }
    }
    fclose(f);
    cr_assert_gt(t->n, 0u, "the job wrote no ranges");
}

static void free_truth(truth *t)
{
    free(t->r);
    free(t->m);
}

static size_t truth_count(const truth *t, const char *domain, const char *name, int tid)
{
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++)
        k += strcmp(t->r[i].domain, domain) == 0 && strcmp(t->r[i].name, name) == 0 &&
             (tid < 0 || t->r[i].tid == (unsigned)tid);
    return k;
}

static size_t truth_marks(const truth *t, const char *domain, const char *name)
{
    size_t k = 0;
    for (size_t i = 0; i < t->nm; i++)
        k += strcmp(t->m[i].domain, domain) == 0 && strcmp(t->m[i].name, name) == 0;
    return k;
}

/* ---- checks ---- */

/* The ranges table against the truth: every name's count, per thread too; the marks; the
 * thread names the job gave. */
static void check_tables(const char *dir, const truth *t)
{
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->S, 0);
    cr_assert_eq(a->n_steps, 0u);
    uint64_t total = 0;
    for (size_t i = 0; i < a->n_ranges; i++) {
        const pp_arange *r = &a->ranges[i];
        cr_assert(!r->other);
        cr_expect_eq(r->ns.count, truth_count(t, r->domain, r->name, -1), "%s/%s: %llu",
                     r->domain, r->name, (unsigned long long)r->ns.count);
        cr_assert_leq(r->ns.min, r->ns.median);
        cr_assert_leq(r->ns.median, r->ns.max);
        total += r->ns.count;
    }
    cr_assert_eq(total, t->n, "%llu ranges in the table, %zu in the job",
                 (unsigned long long)total, t->n);
    cr_assert_eq(a->generic_ranges, t->n);
    /* per thread */
    uint64_t per_thread = 0;
    for (size_t i = 0; i < a->n_range_threads; i++) {
        const pp_arange_thread *c = &a->range_threads[i];
        const pp_arange *r = &a->ranges[c->range];
        const pp_athread *th = &a->threads[c->thread];
        cr_assert_geq(th->file, 0);
        cr_expect_eq(c->count, truth_count(t, r->domain, r->name, (int)th->tid),
                     "%s/%s on %u: %llu", r->domain, r->name, th->tid,
                     (unsigned long long)c->count);
        per_thread += c->count;
    }
    cr_assert_eq(per_thread, t->n);
    /* marks */
    uint64_t marks = 0;
    for (size_t i = 0; i < a->n_marks; i++) {
        cr_expect_eq(a->marks[i].count, truth_marks(t, a->marks[i].domain, a->marks[i].name),
                     "mark %s/%s", a->marks[i].domain, a->marks[i].name);
        marks += a->marks[i].count;
    }
    cr_assert_eq(marks, t->nm);
    /* thread names */
    for (size_t k = 0; k < t->nt; k++) {
        int found = 0;
        for (size_t i = 0; i < a->n_threads; i++)
            if (a->threads[i].tid == t->tids[k]) {
                cr_expect_str_eq(a->threads[i].name, t->tnames[k]);
                found = 1;
            }
        cr_expect(found, "thread %u (%s) not in the table", t->tids[k], t->tnames[k]);
    }
    pp_analysis_free(a);
}

static const char *str_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static double num_of(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    cr_assert(cJSON_IsNumber(v), "'%s' is not a number", k);
    return v->valuedouble;
}

/* Every range of the truth in the Chrome export, on its thread, inside its bracket; every
 * mark; nothing more. */
static void check_chrome(const char *dir, truth *t)
{
    const char *out = tk_path("trace.json");
    const char *args[] = {"-q", dir, "--chrome", out, NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "pprof-report --chrome: %d %s", r.code, r.err);
    tk_result_free(&r);
    char *text = tk_slurp(out, NULL);
    cr_assert_not_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(root, "the Chrome trace is not JSON");
    double origin = num_of(cJSON_GetObjectItem(root, "otherData"), "time_origin_ns");
    const cJSON *ev = cJSON_GetObjectItem(root, "traceEvents");
    size_t slices = 0, marks = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        const char *ph = str_of(e, "ph"), *cat = str_of(e, "cat");
        if (!ph || !cat || strcmp(cat, "nvtx") != 0)
            continue;
        const cJSON *args_o = cJSON_GetObjectItem(e, "args");
        const char *domain = str_of(args_o, "domain"), *name = str_of(e, "name");
        unsigned tid = (unsigned)num_of(args_o, "os_tid");
        cr_assert(domain && name);
        if (strcmp(ph, "i") == 0) {
            cr_expect_gt(truth_marks(t, domain, name), 0u, "mark %s/%s not in the job", domain,
                         name);
            marks++;
            continue;
        }
        cr_assert_str_eq(ph, "X");
        double t0 = origin + num_of(e, "ts") * 1e3, t1 = t0 + num_of(e, "dur") * 1e3;
        /* the first unused range of the truth whose bracket holds it */
        truth_range *match = NULL;
        for (size_t i = 0; i < t->n && !match; i++) {
            truth_range *x = &t->r[i];
            if (!x->used && x->tid == tid && strcmp(x->domain, domain) == 0 &&
                strcmp(x->name, name) == 0 && t0 >= x->t0 - SLACK_NS && t1 <= x->t1 + SLACK_NS)
                match = x;
        }
        cr_expect_not_null(match, "%s/%s on %u [%.0f, %.0f] is in no bracket of the job's", domain,
                           name, tid, t0, t1);
        if (match)
            match->used = 1;
        slices++;
    }
    cr_assert_eq(slices, t->n, "%zu ranges in the Chrome trace, %zu in the job", slices, t->n);
    cr_assert_eq(marks, t->nm, "%zu marks in the Chrome trace, %zu in the job", marks, t->nm);
    cJSON_Delete(root);
}

/* Runs job under pprof-run into dir. python: the job is an uninstrumented Python, which a
 * sanitized libpprof.so needs its ASan runtime preloaded into (as in tests/test_pyjob.c). */
static void capture(const char *dir, const char *const *job, int python)
{
    const char *argv[16] = {PPRUN, "-q", "-o", dir, "--"};
    int n = 5;
    for (int i = 0; job[i] && n < 15; i++)
        argv[n++] = job[i];
    argv[n] = NULL;
    char preload[1100];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", PP_ASAN_RUNTIME);
    const char *san_env[] = {preload, "ASAN_OPTIONS=detect_leaks=0", NULL};
    tk_result r = tk_runv(argv, python && PP_ASAN_RUNTIME[0] ? san_env : NULL);
    cr_assert_eq(r.code, 0, "pprof-run: %d %s", r.code, r.err);
    tk_result_free(&r);
}

Test(generic, plain_nvtx_c_job_counts_exact_and_every_range_in_chrome)
{
    if (!tk_exists(LIBPPROF) || !tk_exists(PLAIN_APP))
        cr_skip_test("libpprof.so / plain_nvtx_app not built");
    const char *dir = tk_path("run"), *tf = tk_path("truth.txt");
    const char *job[] = {PLAIN_APP, tf, "12", NULL};
    capture(dir, job, 0);
    truth t;
    read_truth(tf, &t);
    /* 3 threads x 12 rounds x (step, load batch, 2 forward) + the handoff */
    cr_assert_eq(t.n, 3u * 12 * 4 + 1);
    check_tables(dir, &t);
    check_chrome(dir, &t);
    free_truth(&t);
    /* the table names the domains, the thread names and the marks */
    const char *args[] = {dir, NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "no pipeline ranges"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "domain model:"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, " loader "), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "Marks"), "%s", r.out);
    tk_result_free(&r);
    /* the JSON has the same tables; pprof-tune refuses the run clearly */
    const char *aj[] = {"--json", dir, NULL};
    r = tk_run(PPREPORT, aj, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cJSON *root = cJSON_Parse(r.out);
    cr_assert_not_null(root);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "ranges")), 4);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(root, "marks")), 4);
    cJSON_Delete(root);
    tk_result_free(&r);
    r = tk_run(PPTUNE, args, NULL);
    cr_assert_eq(r.code, 2, "pprof-tune: %d", r.code);
    cr_assert_not_null(strstr(r.err, "no pipeline ranges in the capture (145 ranges of 4 names "
                                     "seen)"),
                       "%s", r.err);
    tk_result_free(&r);
    /* and pprof-check */
    const char *ac[] = {"--save-baseline", dir, "-o", tk_path("base.json"), NULL};
    r = tk_run(PPCHECK, ac, NULL);
    cr_assert_eq(r.code, 2, "pprof-check: %d", r.code);
    cr_assert_not_null(strstr(r.err, "no pipeline ranges in the capture"), "%s", r.err);
    tk_result_free(&r);
}

/* ---- the Python job ---- */

/* The first Python with nvtx of: PPROF_PYTHON, PP_PYTHON, setup.sh's venvs; NULL when none. */
static const char *find_python(void)
{
    return tk_find_python("PPROF_PYTHON", PP_PYTHON, NULL, "venv", "import nvtx");
}

Test(generic, pypi_nvtx_job_counts_exact_and_every_range_in_chrome)
{
    if (!tk_exists(LIBPPROF))
        cr_skip_test("libpprof.so not built");
    const char *py = find_python();
    if (!py)
        cr_skip_test("no Python with the nvtx package (scripts/setup.sh makes one)");
    const char *dir = tk_path("run"), *tf = tk_path("truth.txt");
    const char *job[] = {py, PY_FIXTURE, "--out", tf, "--rounds", "8", NULL};
    capture(dir, job, 1);
    truth t;
    read_truth(tf, &t);
    /* 3 threads x 8 rounds x (py step, read, 2 layer) + the handoff */
    cr_assert_eq(t.n, 3u * 8 * 4 + 1);
    check_tables(dir, &t);
    check_chrome(dir, &t);
    free_truth(&t);
}

/* ---- a hostile trace: 100k distinct names ---- */

Test(generic, hundred_thousand_names_stay_bounded_with_a_warning)
{
    enum { NAMES = 100000 };
    static tk_tw t;
    const char *dir = tk_path("hostile");
    cr_assert_eq(mkdir(dir, 0755), 0);
    char path[512];
    snprintf(path, sizeof path, "%s/h.1.pft", dir);
    tk_tw_open(&t, path, 0, -1);
    for (uint32_t i = 1; i <= NAMES; i++) {
        char s[32];
        int n = snprintf(s, sizeof s, "name %u", i);
        tk_tw_room(&t, 64, PP_BLOCK_META, 0);
        t.len += pp_trace_enc_string(t.buf + t.len, sizeof t.buf - t.len, i, s, (size_t)n);
        t.n++;
    }
    tk_tw_flush(&t, PP_BLOCK_META, 0);
    uint64_t ts = 1000;
    for (uint32_t i = 1; i <= NAMES; i++) {
        /* threads 1..300: more than the 256 the table keeps */
        uint32_t tid = 1 + i % 300;
        pp_rec_range r;
        memset(&r, 0, sizeof r);
        r.h = (pp_rec_header){.type = PP_REC_PUSH, .size = sizeof r, .tid = tid, .ts = ts};
        r.message = i;
        pp_rec_pop p;
        memset(&p, 0, sizeof p);
        p.h = (pp_rec_header){.type = PP_REC_POP, .size = sizeof p, .tid = tid, .ts = ts + 10};
        memcpy(t.buf + t.len, &r, sizeof r);
        memcpy(t.buf + t.len + sizeof r, &p, sizeof p);
        t.len += sizeof r + sizeof p;
        t.n += 2;
        tk_tw_flush(&t, PP_BLOCK_EVENTS, tid); /* one block per range: every thread interleaved */
        ts += 20;
    }
    pp_trace_writer_close(t.w);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    /* the tables stay within their bounds; the rest is summed, not lost */
    cr_assert_eq(a->n_ranges, (size_t)PP_ANALYSIS_MAX_NAMES + 1);
    cr_assert_leq(a->n_threads, (size_t)PP_ANALYSIS_MAX_THREADS + 1);
    const pp_arange *other = &a->ranges[a->n_ranges - 1];
    cr_assert(other->other);
    cr_assert_eq(other->ns.count, (uint64_t)(NAMES - PP_ANALYSIS_MAX_NAMES));
    cr_assert_eq(a->generic_ranges, (uint64_t)NAMES);
    uint64_t sum = 0;
    for (size_t i = 0; i < a->n_ranges; i++)
        sum += a->ranges[i].ns.count;
    cr_assert_eq(sum, (uint64_t)NAMES);
    cr_assert_not_null(strstr(a->warnings, "(other names)"), "%s", a->warnings);
    cr_assert_not_null(strstr(a->warnings, "(other threads)"), "%s", a->warnings);
    /* the table prints 256 per-thread rows, and says how many more the JSON has */
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    pp_analysis_print(a, m);
    fclose(m);
    cr_assert_not_null(strstr(buf, "more (name, thread) rows: --json has every one"));
    cr_assert_lt(len, 2u << 20, "a %zu-byte table", len);
    free(buf);
    pp_analysis_free(a);
}

/* ---- a convention job with other ranges ---- */

Test(generic, convention_job_shows_its_other_ranges)
{
    if (!tk_exists(LIBPPROF) || !tk_exists(CAPTURE_APP))
        cr_skip_test("libpprof.so / capture_app not built");
    const char *dir = tk_path("run");
    const char *job[] = {CAPTURE_APP, "steps", "6", NULL};
    capture(dir, job, 0);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->S, 1);
    cr_assert_gt(a->n_steps, 0u);
    /* one "side N" range per step on the helper thread */
    cr_assert_eq(a->n_ranges, 6u);
    cr_assert_eq(a->generic_ranges, 6u);
    pp_analysis_free(a);
    const char *args[] = {dir, NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    char *stages = strstr(r.out, "stage "), *other = strstr(r.out, "Other ranges");
    cr_assert(stages && other && other > stages, "%s", r.out);
    cr_assert_not_null(strstr(other, "side 3"), "%s", r.out);
    tk_result_free(&r);
    /* the Chrome trace of steps 2..6: the stage's track and the helper thread's own, with the
     * side ranges of those steps */
    const char *out = tk_path("trace.json");
    const char *ac[] = {"-q", dir, "--steps", "2:6", "--chrome", out, NULL};
    r = tk_run(PPREPORT, ac, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    tk_result_free(&r);
    char *text = tk_slurp(out, NULL);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(root);
    int sides = 0, stage_ops = 0, thread_named = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents"))
    {
        const char *ph = str_of(e, "ph"), *name = str_of(e, "name"), *cat = str_of(e, "cat");
        int tid = (int)num_of(e, "tid");
        if (strcmp(ph, "X") == 0 && cat && strcmp(cat, "nvtx") == 0) {
            cr_assert(strncmp(name, "side ", 5) == 0, "%s", name);
            cr_assert_geq(tid, 100000);
            sides++;
        } else if (strcmp(ph, "X") == 0) {
            cr_assert_eq(tid, 0);
            stage_ops++;
        } else if (strcmp(ph, "M") == 0 && strcmp(name, "thread_name") == 0 && tid >= 100000) {
            thread_named++;
        }
    }
    cr_assert_geq(sides, 4, "%d side ranges", sides);
    cr_assert_gt(stage_ops, 0);
    cr_assert_eq(thread_named, 1);
    cJSON_Delete(root);
}
