/* test_kineto.c: the PyTorch profiler (Kineto) importer (analyzer/kineto.c, inputs.c;
 * docs/kineto.md): real torch traces (tests/data/kineto: torch.distributed.pipelining on CPU,
 * Interleaved1F1B on 2 ranks, GPipe on 4, DualPipeV on 2) converted and checked event by event against their
 * JSON, nesting against START/END, the reorder window, hostile inputs, GPU records and their
 * launches, memory against the file's size, and the tools taking Kineto inputs. */
#include "pp_analyzer.h"
#include "pp_kineto.h"
#include "pp_testkit.h"
#include "pp_trace.h"

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#define DATA PP_TEST_DATA_DIR "/kineto"
#define PPREPORT PP_BUILD_DIR "/tools/pprof-report"
#define PPCHECK PP_BUILD_DIR "/tools/pprof-check"
#define PPTUNE PP_BUILD_DIR "/tools/pprof-tune"

static void setup(void) { tk_dir_create("pp_kineto"); }
TestSuite(kineto, .init = setup, .fini = tk_dir_remove, .timeout = 300);

/* ---- helpers ---- */

/* A whole file, gunzipped when it is gzip (zlib reads both). */
static char *slurp_any(const char *path, size_t *len)
{
    gzFile g = gzopen(path, "rb");
    cr_assert_not_null(g, "%s", path);
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap + 1);
    for (int k; (k = gzread(g, b + n, (unsigned)(cap - n))) > 0;) {
        n += (size_t)k;
        if (n == cap)
            b = realloc(b, (cap *= 2) + 1);
    }
    gzclose(g);
    b[n] = '\0';
    *len = n;
    return b;
}

/* Per (category, name): how many ranges and their summed duration in ns. */
typedef struct tally {
    char key[160];
    uint64_t count, sum_ns;
} tally;

typedef struct tallies {
    tally *t;
    size_t n, cap;
} tallies;

static void tally_add(tallies *ts, const char *cat, const char *name, uint64_t ns)
{
    char key[160];
    snprintf(key, sizeof key, "%s|%s", cat, name);
    for (size_t i = 0; i < ts->n; i++)
        if (strcmp(ts->t[i].key, key) == 0) {
            ts->t[i].count++;
            ts->t[i].sum_ns += ns;
            return;
        }
    if (ts->n == ts->cap)
        ts->t = realloc(ts->t, (ts->cap = ts->cap ? 2 * ts->cap : 64) * sizeof *ts->t);
    tally *x = &ts->t[ts->n++];
    snprintf(x->key, sizeof x->key, "%s", key);
    x->count = 1;
    x->sum_ns = ns;
}

static int is_cpu_cat(const char *c)
{
    return strcmp(c, "cpu_op") == 0 || strcmp(c, "user_annotation") == 0 ||
           strcmp(c, "python_function") == 0;
}

/* What the JSON says, computed here with cJSON: the CPU X events by category and name. */
static cJSON *json_tally(const char *path, tallies *ts)
{
    size_t len;
    char *text = slurp_any(path, &len);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(root, "%s: cJSON cannot parse it", path);
    cJSON *ev = cJSON_GetObjectItem(root, "traceEvents"), *e;
    cJSON_ArrayForEach(e, ev)
    {
        cJSON *ph = cJSON_GetObjectItem(e, "ph"), *cat = cJSON_GetObjectItem(e, "cat");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") != 0 || !cJSON_IsString(cat) ||
            !is_cpu_cat(cat->valuestring))
            continue;
        double dur = cJSON_GetObjectItem(e, "dur")->valuedouble;
        tally_add(ts, cat->valuestring, cJSON_GetObjectItem(e, "name")->valuestring,
                  (uint64_t)llround(dur * 1000.0));
    }
    return root;
}

typedef struct open_r {
    uint32_t tid, domain;
    uint64_t id, ts;
    const char *msg;
} open_r;

typedef struct pft_counts {
    uint64_t push, pop, start, end, mark, gpu, api;
    int time_ordered; /* each thread's records in time order */
} pft_counts;

/* What the .pft holds: ranges paired back (POP with the innermost PUSH of its domain on its
 * thread, END with its START) and tallied by domain and message. */
static pft_counts pft_tally(const char *path, tallies *ts, pp_trace **out)
{
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(path, &t), PP_OK, "%s: %s", path, pp_error_message());
    cr_assert(t->damage.has_footer && !t->damage.blocks_bad && !t->damage.truncated,
              "%s: %s", path, t->damage.first_problem);
    pft_counts c = {.time_ordered = 1, .gpu = t->n_gpu, .api = t->n_api};
    open_r *st = calloc(t->n_events + 1, sizeof *st);
    size_t n = 0;
    uint32_t last_tid[64] = {0};
    uint64_t last_ts[64] = {0};
    for (size_t i = 0; i < t->n_events; i++) {
        const pp_trace_event *e = &t->events[i];
        size_t slot = e->tid % 64;
        if (last_tid[slot] == e->tid && e->ts < last_ts[slot])
            c.time_ordered = 0;
        last_tid[slot] = e->tid, last_ts[slot] = e->ts;
        if (e->type == PP_REC_PUSH || e->type == PP_REC_START) {
            st[n++] = (open_r){e->tid, e->domain, e->range_id, e->ts, e->message};
            e->type == PP_REC_PUSH ? c.push++ : c.start++;
        } else if (e->type == PP_REC_POP || e->type == PP_REC_END) {
            e->type == PP_REC_POP ? c.pop++ : c.end++;
            for (size_t k = n; k-- > 0;) {
                int match = e->type == PP_REC_POP
                                ? st[k].tid == e->tid && st[k].domain == e->domain && !st[k].id
                                : st[k].id == e->range_id;
                if (!match)
                    continue;
                tally_add(ts, pp_trace_domain_name(t, st[k].domain), st[k].msg, e->ts - st[k].ts);
                memmove(&st[k], &st[k + 1], (n - k - 1) * sizeof *st);
                n--;
                break;
            }
        } else if (e->type == PP_REC_MARK) {
            c.mark++;
        }
    }
    cr_assert_eq(n, 0, "%zu ranges never closed", n);
    free(st);
    *out = t;
    return c;
}

static const tally *find(const tallies *ts, const char *key)
{
    for (size_t i = 0; i < ts->n; i++)
        if (strcmp(ts->t[i].key, key) == 0)
            return &ts->t[i];
    return NULL;
}

/* ---- real torch traces ---- */

static void check_real(const char *json, int rank, uint32_t pid)
{
    const char *out = tk_path("one.pft");
    unlink(out);
    pp_kineto_stats s;
    cr_assert_eq(pp_kineto_convert(json, out, NULL, &s), PP_OK, "%s: %s", json,
                 pp_error_message());
    tallies want = {0}, got = {0};
    cJSON *root = json_tally(json, &want);
    pp_trace *t = NULL;
    pft_counts c = pft_tally(out, &got, &t);
    cr_assert_eq(want.n, got.n, "%s: %zu names in the JSON, %zu in the trace", json, want.n,
                 got.n);
    uint64_t total = 0;
    for (size_t i = 0; i < want.n; i++) {
        const tally *g = find(&got, want.t[i].key);
        cr_assert_not_null(g, "%s: '%s' missing from the trace", json, want.t[i].key);
        cr_assert_eq(g->count, want.t[i].count, "%s: %s", json, want.t[i].key);
        cr_assert_eq(g->sum_ns, want.t[i].sum_ns, "%s: %s: %llu ns, the JSON says %llu", json,
                     want.t[i].key, (unsigned long long)g->sum_ns,
                     (unsigned long long)want.t[i].sum_ns);
        total += g->count;
    }
    cr_assert_eq(total, s.ranges);
    cr_assert(c.time_ordered, "%s: a thread's records out of time order", json);
    cr_assert_eq(c.push, c.pop);
    cr_assert_eq(c.start, c.end);
    cr_assert_eq(s.dropped_late + s.dropped_caps + s.malformed, 0);
    cr_assert_eq(t->header.rank, rank, "distributedInfo.rank");
    cr_assert_str_eq(t->header.host, "vm", "host_name");
    cr_assert_eq(t->header.pid, pid);
    cr_assert(t->n_threads >= 1, "thread names carried");
    /* the torch profiler span (pid "Spans", cat "Trace") and the flows are not ranges */
    cr_assert_gt(s.skipped_other, 0);
    pp_trace_free(t);
    cJSON_Delete(root);
    free(want.t);
    free(got.t);
}

Test(kineto, real_traces_convert_event_by_event)
{
    check_real(DATA "/il/rank0.json", 0, 6320);
    check_real(DATA "/il/rank1.json.gz", 1, 6321);
    check_real(DATA "/gp/rank0.pt.trace.json", 0, 6340);
}

Test(kineto, gloo_send_and_recv_that_outlive_their_action_become_start_end)
{
    const char *out = tk_path("il1.pft");
    pp_kineto_stats s;
    cr_assert_eq(pp_kineto_convert(DATA "/il/rank1.json.gz", out, NULL, &s), PP_OK, "%s",
                 pp_error_message());
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(out, &t), PP_OK);
    uint64_t gloo_async = 0, pp_push = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        const pp_trace_event *e = &t->events[i];
        if (e->type == PP_REC_START && strncmp(e->message, "gloo:", 5) == 0)
            gloo_async++;
        if (e->type == PP_REC_PUSH && strncmp(e->message, "PP:", 3) == 0)
            pp_push++;
    }
    cr_assert_gt(gloo_async, 0, "no gloo op became START/END");
    cr_assert_gt(pp_push, 0, "the PP: actions nest (PUSH/POP)");
    cr_assert_eq(s.async_ranges, gloo_async, "only gloo ops overlap: %llu async",
                 (unsigned long long)s.async_ranges);
    pp_trace_free(t);
}

/* ---- synthetic traces ---- */


static pp_status convert_text(const char *text, pp_kineto_options *o, pp_kineto_stats *s,
                              pp_trace **t)
{
    const char *out = tk_path("syn.pft");
    unlink(out);
    pp_status st = pp_kineto_convert_mem(text, strlen(text), out, o, s);
    if (st == PP_OK && t)
        cr_assert_eq(pp_trace_load(out, t), PP_OK, "%s", pp_error_message());
    return st;
}

#define EV(cat, name, tid, ts, dur)                                                                \
    "{\"ph\":\"X\",\"cat\":\"" cat "\",\"name\":\"" name "\",\"pid\":7,\"tid\":" #tid              \
    ",\"ts\":" #ts ",\"dur\":" #dur "}"

Test(kineto, nested_events_push_pop_and_overlapping_ones_start_end)
{
    const char *j = "{\"traceEvents\":["
                    EV("user_annotation", "PP:0F0", 1, 100, 100) ","
                    EV("cpu_op", "aten::mm", 1, 110, 20) ","
                    EV("user_annotation", "gloo:send", 1, 150, 200) ","
                    EV("cpu_op", "aten::add", 1, 160, 10) ","
                    EV("user_annotation", "PP:0F1", 1, 210, 50) ","
                    EV("cpu_op", "aten::mm", 1, 210, 5) "]}";
    pp_kineto_stats s;
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(j, NULL, &s, &t), PP_OK, "%s", pp_error_message());
    cr_assert_eq(s.ranges, 6);
    cr_assert_eq(s.async_ranges, 1, "gloo:send outlives PP:0F0");
    /* expected order: PUSH F0, PUSH mm, POP, START send, PUSH add, POP, POP F0 (200),
     * PUSH F1 (210), PUSH mm (210, shorter: inside), POP, POP F1 (260), END send (350) */
    static const struct { uint16_t type; uint64_t ts; } want[] = {
        {PP_REC_PUSH, 100000}, {PP_REC_PUSH, 110000}, {PP_REC_POP, 130000},
        {PP_REC_START, 150000}, {PP_REC_PUSH, 160000}, {PP_REC_POP, 170000},
        {PP_REC_POP, 200000}, {PP_REC_PUSH, 210000}, {PP_REC_PUSH, 210000},
        {PP_REC_POP, 215000}, {PP_REC_POP, 260000}, {PP_REC_END, 350000}};
    cr_assert_eq(t->n_events, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < t->n_events; i++) {
        cr_assert_eq(t->events[i].type, want[i].type, "record %zu", i);
        cr_assert_eq(t->events[i].ts, want[i].ts, "record %zu", i);
    }
    cr_assert_str_eq(t->events[7].message, "PP:0F1", "the longer of two starting together first");
    cr_assert_str_eq(pp_trace_domain_name(t, t->events[0].domain), "user_annotation");
    cr_assert_str_eq(pp_trace_domain_name(t, t->events[1].domain), "cpu_op");
    cr_assert_eq(t->header.rank, -1, "no distributedInfo");
    cr_assert_str_eq(t->header.host, "kineto");
    pp_trace_free(t);
}

Test(kineto, a_child_ending_past_its_parent_by_rounding_alone_still_nests)
{
    /* the parent ends at round(0.4) + round(1000.2) = 1000 ns, the child inside it (true end
     * 1000.2 ns) at round(500.6) + round(499.6) = 1001 ns */
    const char *j = "[" EV("user_annotation", "p", 1, 0.0004, 1.0002) ","
                    EV("cpu_op", "c", 1, 0.5006, 0.4996) "]";
    /* absolute microsecond timestamps near 1.7e15 (older Kineto; Holistic Trace Analysis's
     * samples) hold quarter microseconds: aten::slice inside aten::narrow seems to end 0.12 us
     * after it */
    const char *k = "[" EV("cpu_op", "aten::narrow", 1, 1712195495505848.0, 1.8) ","
                    EV("cpu_op", "aten::slice", 1, 1712195495505849.0, 0.92) "]";
    const char *const texts[] = {j, k};
    for (int i = 0; i < 2; i++) {
        pp_kineto_stats s;
        pp_trace *t = NULL;
        cr_assert_eq(convert_text(texts[i], NULL, &s, &t), PP_OK, "%s", pp_error_message());
        cr_assert_eq(s.async_ranges, 0, "case %d", i);
        cr_assert_eq(t->n_events, 4);
        for (size_t e = 1; e < t->n_events; e++)
            cr_assert_geq(t->events[e].ts, t->events[e - 1].ts, "record %zu out of order", e);
        pp_trace_free(t);
    }
}

/* PaddlePaddle's profiler: its categories are host events, and the duration it appends to every
 * name ("forward[291.275 us]") is cut, so the same range keeps one name; only a final
 * "[<number> <ns|us|ms|s>]" and only in Paddle's categories */
Test(kineto, paddle_categories_are_host_events_and_their_names_lose_the_duration)
{
    const char *j = "{\"traceEvents\":["
                    EV("ProfileStep", "ProfileStep#1[21.889 ms]", 1, 100, 900) ","
                    EV("Forward", "Block[98.496 us]", 1, 110, 98.496) ","
                    EV("Operator", "matmul dygraph[12 us]", 1, 120, 12) ","
                    EV("UserDefined", "backward[1 s]", 1, 300, 200) ","
                    EV("PythonUserDefined", "mine[7 ns]x", 1, 520, 10) ","
                    EV("PythonUserDefined", "odd[1.5 xs]", 1, 540, 10) ","
                    EV("PythonUserDefined", "[3 us]", 1, 560, 10) ","
                    EV("PythonUserDefined", "nospace[3us]", 1, 580, 10) ","
                    EV("cpu_op", "aten::mm[5 us]", 1, 600, 10) ","
                    EV("Kernel", "not a host event", 1, 700, 10) "]}";
    pp_kineto_stats s;
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(j, NULL, &s, &t), PP_OK, "%s", pp_error_message());
    static const char *const want[] = {"ProfileStep#1", "Block", "matmul dygraph", "backward",
                                       "mine[7 ns]x", "odd[1.5 xs]", "[3 us]", "nospace[3us]",
                                       "aten::mm[5 us]"};
    size_t n = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        if (t->events[i].type != PP_REC_PUSH && t->events[i].type != PP_REC_START)
            continue;
        cr_assert_lt(n, sizeof want / sizeof want[0]);
        cr_expect_str_eq(t->events[i].message, want[n], "range %zu", n);
        n++;
    }
    cr_expect_eq(n, sizeof want / sizeof want[0], "%zu ranges: Paddle's 8 and torch's 1", n);
    cr_expect_str_eq(pp_trace_domain_name(t, t->events[0].domain), "ProfileStep");
    pp_trace_free(t);
}

#define BE(ph, cat, name, tid, ts)                                                                 \
    "{\"name\":\"" name "\",\"cat\":\"" cat "\",\"ph\":\"" ph "\",\"pid\":0,\"tid\":" #tid          \
    ",\"ts\":" #ts "}"

/* One range record a test expects: its type, time and (for a PUSH or START) message. */
typedef struct want_rec {
    uint16_t type;
    uint64_t ts;
    const char *msg;
} want_rec;

/* Checks thread tid's PUSH, POP, START and END records in file order against want[from..);
 * returns the index after the last one checked. */
static size_t expect_records(const pp_trace *t, uint32_t tid, const want_rec *want, size_t n_want,
                             size_t from)
{
    size_t n = from;
    for (size_t i = 0; i < t->n_events; i++) {
        const pp_trace_event *e = &t->events[i];
        if (e->tid != tid || (e->type != PP_REC_PUSH && e->type != PP_REC_POP &&
                              e->type != PP_REC_START && e->type != PP_REC_END))
            continue;
        cr_assert_lt(n, n_want, "more records than expected on thread %u", tid);
        cr_expect_eq(e->type, want[n].type, "record %zu: type %u", n, e->type);
        cr_expect_eq(e->ts, want[n].ts, "record %zu: %llu", n, (unsigned long long)e->ts);
        if (e->type == PP_REC_PUSH || e->type == PP_REC_START)
            cr_expect_str_eq(e->message, want[n].msg, "record %zu", n);
        n++;
    }
    return n;
}

/* An end that has a name closes the latest begin of that name on its thread (or of none), as
 * Perfetto pairs them: a stray end of another name (uftrace writes the end of a context switch,
 * "linux:schedule", on a thread that never began one) closes nothing, where pairing it with the
 * latest begin shifted every range after it; an end of a begin below the latest closes that
 * one, the latest staying open for its own end (the two then overlap). */
Test(kineto, named_ends_close_the_begin_of_their_name)
{
    const char *j = "[" BE("B", "cpu_op", "stage", 1, 100) ","
                    BE("B", "cpu_op", "work", 1, 110) ","
                    BE("E", "cpu_op", "linux:schedule", 1, 120) ","
                    BE("E", "cpu_op", "work", 1, 150) ","
                    BE("B", "cpu_op", "work", 1, 160) ","
                    BE("E", "cpu_op", "work", 1, 190) ","
                    BE("E", "cpu_op", "stage", 1, 200) ","
                    BE("B", "cpu_op", "a", 1, 300) ","
                    BE("B", "cpu_op", "b", 1, 310) ","
                    BE("E", "cpu_op", "a", 1, 320) ","
                    BE("E", "cpu_op", "b", 1, 400) "]";
    pp_kineto_stats s;
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(j, NULL, &s, &t), PP_OK, "%s", pp_error_message());
    cr_expect_eq(s.ranges, 5, "stage, work twice, a, b");
    cr_expect_eq(s.unpaired, 1, "the stray end");
    cr_expect_eq(s.async_ranges, 1, "b outlives a");
    cr_expect_neq(strstr(s.problem, "naming no begin"), NULL, "%s", s.problem);
    static const want_rec want[] = {
        {PP_REC_PUSH, 100000, "stage"}, {PP_REC_PUSH, 110000, "work"}, {PP_REC_POP, 150000, ""},
        {PP_REC_PUSH, 160000, "work"},  {PP_REC_POP, 190000, ""},      {PP_REC_POP, 200000, ""},
        {PP_REC_PUSH, 300000, "a"},     {PP_REC_START, 310000, "b"},   {PP_REC_POP, 320000, ""},
        {PP_REC_END, 400000, ""}};
    size_t n_want = sizeof want / sizeof want[0];
    cr_expect_eq(expect_records(t, 1, want, n_want, 0), n_want);
    pp_trace_free(t);
}

/* Chrome's begin and end events: an end without a name closes its thread's latest begin;
 * nested pairs nest; an end with nothing open, a begin never ended and an end before its begin
 * are counted and dropped, never crash or mispair the others */
Test(kineto, begin_and_end_events_pair_per_thread_the_latest_begin_first)
{
    const char *j = "[" BE("E", "cpu_op", "stray", 1, 50) ","
                    BE("B", "user_annotation", "outer", 1, 100) ","
                    BE("B", "cpu_op", "inner", 1, 110) ","
                    BE("B", "cpu_op", "other thread", 2, 115) ","
                    "{\"cat\":\"cpu_op\",\"ph\":\"E\",\"pid\":0,\"tid\":1,\"ts\":130},"
                    BE("E", "user_annotation", "outer", 1, 200) ","
                    BE("E", "cpu_op", "other thread", 2, 300) ","
                    BE("B", "cpu_op", "backwards", 1, 400) ","
                    BE("E", "cpu_op", "backwards", 1, 390) ","
                    BE("B", "cpu_op", "never ended", 1, 500) ","
                    BE("B", "Kernel", "not a host category", 1, 600) "]";
    pp_kineto_stats s;
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(j, NULL, &s, &t), PP_OK, "%s", pp_error_message());
    cr_expect_eq(s.ranges, 3);
    cr_expect_eq(s.unpaired, 2, "the stray end and the begin never ended: %llu",
                 (unsigned long long)s.unpaired);
    cr_expect_eq(s.malformed, 1, "the end before its begin");
    cr_expect_eq(s.skipped_other, 1);
    cr_expect_neq(strstr(s.problem, "end"), NULL, "%s", s.problem);
    static const want_rec want[] = {
        {PP_REC_PUSH, 100000, "outer"}, {PP_REC_PUSH, 110000, "inner"},
        {PP_REC_POP, 130000, ""},       {PP_REC_POP, 200000, ""},      /* thread 1, then 2 */
        {PP_REC_PUSH, 115000, "other thread"}, {PP_REC_POP, 300000, ""}};
    size_t n_want = sizeof want / sizeof want[0];
    cr_expect_eq(expect_records(t, 1, want, n_want, 0), 4);
    cr_expect_eq(expect_records(t, 2, want, n_want, 4), n_want);
    pp_trace_free(t);
}

/* A file of events one after another (JSON lines, as PaddlePaddle's pipeline timeline is) is
 * read as their array; its "pipeline timeline" categories count in milliseconds; a line broken
 * off keeps what comes before; a JSON object that is no event and has no traceEvents is not a
 * trace */
Test(kineto, events_one_per_line_are_read_as_their_array_paddle_timeline_in_milliseconds)
{
    const char *lines = BE("B", "pipeline timeline", "F0", 2, 1796374068190) "\n"
                        BE("E", "pipeline timeline", "F0", 2, 1796374068207) "\n"
                        BE("B", "virtual pipeline timeline", "B0_VP1", 2, 1796374068207) "\n"
                        BE("E", "virtual pipeline timeline", "B0_VP1", 2, 1796374068238) "\n"
                        BE("B", "cpu_op", "microseconds", 3, 1000) ",\n"
                        BE("E", "cpu_op", "microseconds", 3, 1017) "\n";
    pp_kineto_stats s;
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(lines, NULL, &s, &t), PP_OK, "%s", pp_error_message());
    cr_expect_eq(s.events_in, 6);
    cr_expect_eq(s.ranges, 3);
    cr_expect_eq(s.truncated, 0);
    uint64_t t0[3] = {0}, t1[3] = {0};
    int k = -1;
    for (size_t i = 0; i < t->n_events; i++) {
        const pp_trace_event *e = &t->events[i];
        if (e->type == PP_REC_PUSH)
            t0[++k] = e->ts;
        else if (e->type == PP_REC_POP && k >= 0)
            t1[k] = e->ts;
    }
    cr_assert_eq(k, 2);
    /* 17 ms and 31 ms (the ns of a 1.8e18 double: within 256 ns), 17 us */
    cr_expect_lt(llabs((long long)(t1[0] - t0[0]) - 17000000LL), 256);
    cr_expect_lt(llabs((long long)(t1[1] - t0[1]) - 31000000LL), 256);
    cr_expect_eq(t1[2] - t0[2], 17000);
    pp_trace_free(t);

    /* a last line broken off: the lines before it */
    char cut[1024];
    snprintf(cut, sizeof cut, "%s%s", lines, "{\"name\": \"F1\", \"ph\": \"B");
    cr_assert_eq(convert_text(cut, NULL, &s, NULL), PP_OK, "%s", pp_error_message());
    cr_expect_eq(s.truncated, 1);
    cr_expect_eq(s.ranges, 3);
    /* one object that is no event: not a trace, as before */
    cr_expect_eq(convert_text("{\"name\": \"x\"}\n{\"name\": \"y\"}", NULL, &s, NULL),
                 PP_ERR_INVALID);
    pp_error_clear();
}

Test(kineto, paddle_timeline_file_names_are_traces_and_carry_the_rank)
{
    cr_expect(pp_kineto_name_matches("d/profile_record_tmp_file_for_rank_0"));
    cr_expect(pp_kineto_name_matches("profile_record_tmp_file_for_rank_123456789"));
    cr_expect(!pp_kineto_name_matches("profile_record_tmp_file_for_rank_"));
    cr_expect(!pp_kineto_name_matches("profile_record_tmp_file_for_rank_3x"));
    cr_expect(!pp_kineto_name_matches("profile_record_tmp_file_for_rank_1234567890"));
    cr_expect(!pp_kineto_name_matches("profile_record_tmp_file_for_rank_-1"));
    /* the rank is the name's (files sort as 0, 1, 10, 2: their order is not the ranks') */
    const char *in = tk_path("profile_record_tmp_file_for_rank_10");
    FILE *f = fopen(in, "w");
    cr_assert_not_null(f);
    fputs(BE("B", "pipeline timeline", "F0", 11, 5) "\n" BE("E", "pipeline timeline", "F0", 11, 6)
          "\n", f);
    fclose(f);
    cr_expect(pp_kineto_sniff(in), "JSON lines of events start like a trace");
    const char *out = tk_path("r10.pft");
    unlink(out);
    pp_kineto_options o;
    pp_kineto_options_default(&o);
    o.default_rank = 1;
    pp_kineto_stats s;
    cr_assert_eq(pp_kineto_convert(in, out, &o, &s), PP_OK, "%s", pp_error_message());
    cr_expect_eq(s.rank, 10);
}

/* a..f in start order but c (100 us late: inside a window of 3), then g, further back than the
 * window, converted with a window of 3 events */
static void convert_late(pp_kineto_stats *s, pp_trace **t)
{
    static const char *const j =
        "[" EV("cpu_op", "a", 1, 100, 1) "," EV("cpu_op", "b", 1, 300, 1) ","
        EV("cpu_op", "c", 1, 200, 1) "," EV("cpu_op", "d", 1, 400, 1) ","
        EV("cpu_op", "e", 1, 500, 1) "," EV("cpu_op", "f", 1, 600, 1) ","
        EV("cpu_op", "g", 1, 150, 1) "]";
    pp_kineto_options o;
    pp_kineto_options_default(&o);
    o.reorder_window = 3;
    cr_assert_eq(convert_text(j, &o, s, t), PP_OK, "%s", pp_error_message());
}

Test(kineto, late_events_within_the_window_are_reordered_beyond_it_merged_as_a_run)
{
    pp_kineto_stats s;
    pp_trace *t = NULL;
    convert_late(&s, &t);
    cr_assert_eq(s.ranges, 7, "c reordered in the window, g merged from a run of its own");
    cr_assert_eq(s.dropped_late, 0);
    cr_assert_eq(s.runs, 2, "a b c d (the window's first releases), then g e f");
    const char *order = "agcbdef";
    for (int i = 0; i < 7; i++) {
        char want[2] = {order[i], 0};
        cr_assert_str_eq(t->events[2 * i].message, want, "range %d", i);
    }
    cr_assert_eq(t->footer.dropped, 0);
    cr_assert_eq(s.problem[0], 0, "%s", s.problem);
    pp_trace_free(t);
}

/* The window releases the least event it holds, by start, then the longer of two that start
 * together, then arrival: whether an event waits in the ring (it came in order) or in the heap
 * (it did not), and across sorted runs, the ranges come out in exactly that order. Random
 * traces, ties in starts and in ends included, against a plain sort. */
typedef struct order_key {
    int ts, end, i;
} order_key;

static int order_key_cmp(const void *x, const void *y)
{
    const order_key *a = x, *b = y;
    if (a->ts != b->ts)
        return a->ts < b->ts ? -1 : 1;
    if (a->end != b->end)
        return a->end > b->end ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

Test(kineto, the_window_releases_events_in_start_order_whatever_their_arrival)
{
    enum { N = 3000 };
    static const size_t windows[] = {1, 2, 7, 64, 100, 1000, 5000};
    order_key *k = malloc(N * sizeof *k);
    char *j = malloc((size_t)N * 128);
    cr_assert(k && j);
    pp_rng rng;
    for (int trial = 0; trial < 4; trial++) {
        pp_rng_seed(&rng, 77 + (uint64_t)trial);
        size_t n = (size_t)sprintf(j, "[");
        for (int i = 0; i < N; i++) {
            int ts = i * 10 / (trial + 1) * (trial + 1); /* trial 1..3: ties in starts */
            if (pp_rng_u64(&rng) % 10 < 3)  /* 3 in 10 late, by up to 50 events */
                ts -= (int)(pp_rng_u64(&rng) % 500);
            if (ts < 0)
                ts = 0;
            int dur = 1 + 4 * (int)(pp_rng_u64(&rng) % 3); /* ties in ends too */
            k[i] = (order_key){ts, ts + dur, i};
            n += (size_t)sprintf(j + n, "%s{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"e%d\","
                                        "\"pid\":7,\"tid\":1,\"ts\":%d,\"dur\":%d}",
                                 i ? "," : "", i, ts + 1000, dur);
        }
        sprintf(j + n, "]");
        qsort(k, N, sizeof *k, order_key_cmp);
        for (size_t w = 0; w < sizeof windows / sizeof windows[0]; w++) {
            pp_kineto_options o;
            pp_kineto_options_default(&o);
            o.reorder_window = windows[w];
            pp_kineto_stats s;
            pp_trace *t = NULL;
            cr_assert_eq(convert_text(j, &o, &s, &t), PP_OK, "%s", pp_error_message());
            cr_assert_eq(s.ranges + s.dropped_late, (uint64_t)N, "window %zu", windows[w]);
            if (windows[w] > 50)
                cr_assert_eq(s.dropped_late, 0, "window %zu: nothing is further back", windows[w]);
            if (s.dropped_late == 0) {
                int r = 0;
                for (size_t e = 0; e < t->n_events; e++) {
                    const pp_trace_event *ev = &t->events[e];
                    if (ev->type != PP_REC_PUSH && ev->type != PP_REC_START)
                        continue;
                    char want[16];
                    snprintf(want, sizeof want, "e%d", k[r].i);
                    cr_assert_str_eq(ev->message, want, "trial %d, window %zu, range %d", trial,
                                     windows[w], r);
                    r++;
                }
                cr_assert_eq(r, N);
            }
            pp_trace_free(t);
        }
    }
    free(k);
    free(j);
}

/* torch writes its Python tracer's events (with_stack: nn.Module calls, the schedules'
 * functions) after every CPU op of the trace: with more CPU ops than the window holds, the
 * module events come back in time as a run of their own and still enclose the ops they ran. */
Test(kineto, python_events_written_after_every_cpu_op_still_enclose_them)
{
    enum { STEPS = 40 };
    char *j = malloc(64 * 1024);
    cr_assert_not_null(j);
    size_t n = (size_t)sprintf(j, "[");
    for (int k = 0; k < STEPS; k++)
        n += (size_t)sprintf(j + n, "%s" EV("cpu_op", "aten::mm", 1, %d, 10) "," EV(
                                        "cpu_op", "aten::add", 1, %d, 5),
                             k ? "," : "", 1000 + 100 * k + 10, 1000 + 100 * k + 30);
    for (int k = 0; k < STEPS; k++)
        n += (size_t)sprintf(j + n, "," EV("python_function", "nn.Module: Block_0", 1, %d, 50),
                             1000 + 100 * k + 5);
    sprintf(j + n, "]");
    pp_kineto_options o;
    pp_kineto_options_default(&o);
    o.reorder_window = 8;
    pp_kineto_stats s;
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(j, &o, &s, &t), PP_OK, "%s", pp_error_message());
    free(j);
    cr_assert_eq(s.runs, 2, "the CPU ops, then the module events");
    cr_assert_eq(s.dropped_late, 0);
    cr_assert_eq(s.ranges, 3 * STEPS);
    cr_assert_eq(s.async_ranges, 0, "every op nested in its module");
    cr_assert_eq(t->n_events, 6 * STEPS);
    for (int k = 0; k < STEPS; k++) {
        const pp_trace_event *e = &t->events[6 * k];
        cr_assert_str_eq(e[0].message, "nn.Module: Block_0", "step %d", k);
        cr_assert_eq(e[0].type, PP_REC_PUSH);
        cr_assert_str_eq(e[1].message, "aten::mm");
        cr_assert_eq(e[5].type, PP_REC_POP, "the module closes after its ops");
    }
    pp_trace_free(t);
}

/* Where no scratch file can be made ($TMPDIR missing or not writable) the conversion still
 * succeeds: the window alone orders the events, the ones further back are dropped, counted and
 * said. */
Test(kineto, without_a_scratch_file_late_events_are_dropped_and_said)
{
    cr_assert_eq(setenv("TMPDIR", "/nonexistent/pprof-test", 1), 0);
    pp_kineto_stats s;
    pp_trace *t = NULL;
    convert_late(&s, &t);
    unsetenv("TMPDIR");
    cr_assert_eq(s.runs, 0);
    cr_assert_eq(s.ranges, 6, "c reordered in the window, g dropped");
    cr_assert_eq(s.dropped_late, 1);
    cr_assert_eq(t->footer.dropped, 1);
    cr_assert_neq(strstr(s.problem, "temporary file"), NULL, "%s", s.problem);
    pp_trace_free(t);
}

/* Each run needs the window filled once; past PP_KINETO_MAX_RUNS of them an event earlier than
 * the last one released is dropped, counted and said. */
Test(kineto, events_out_of_order_in_more_runs_than_merged_are_dropped)
{
    enum { SEQS = PP_KINETO_MAX_RUNS + 6 };
    char *j = malloc(SEQS * 3 * 160 + 16);
    cr_assert_not_null(j);
    size_t n = (size_t)sprintf(j, "[");
    for (int r = 0; r < SEQS; r++)
        for (int i = 0; i < 3; i++)
            n += (size_t)sprintf(j + n, "%s" EV("cpu_op", "x", 1, %d, 0.5), r || i ? "," : "",
                                 100000 - 10 * r + i);
    sprintf(j + n, "]");
    pp_kineto_options o;
    pp_kineto_options_default(&o);
    o.reorder_window = 2;
    pp_kineto_stats s;
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(j, &o, &s, &t), PP_OK, "%s", pp_error_message());
    free(j);
    cr_assert_eq(s.runs, PP_KINETO_MAX_RUNS);
    cr_assert_gt(s.dropped_late, 0);
    cr_assert_eq(s.ranges + s.dropped_late, 3 * SEQS);
    cr_assert_eq(t->footer.dropped, s.dropped_late, "the footer counts them");
    cr_assert_neq(strstr(s.problem, "runs"), NULL, "%s", s.problem);
    for (size_t e = 1; e < t->n_events; e++)
        cr_assert_geq(t->events[e].ts, t->events[e - 1].ts, "record %zu out of order", e);
    pp_trace_free(t);
}

Test(kineto, thread_names_string_tids_marks_and_memory_events)
{
    const char *j =
        "{\"distributedInfo\":{\"rank\":3},\"host_name\":\"h1\",\"baseTimeNanoseconds\":1000,"
        "\"traceEvents\":["
        "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":7,\"tid\":9,\"args\":{\"name\":\"main\"}},"
        EV("cpu_op", "x", 9, 10, 5) ","
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"y\",\"pid\":7,\"tid\":\"worker\",\"ts\":11,"
        "\"dur\":1},"
        "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"tick\",\"pid\":7,\"tid\":9,"
        "\"ts\":12,\"s\":\"t\"},"
        "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"pid\":7,\"tid\":9,"
        "\"ts\":13,\"args\":{\"Bytes\":64}}]}";
    pp_kineto_stats s;
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(j, NULL, &s, &t), PP_OK, "%s", pp_error_message());
    cr_assert_eq(t->header.rank, 3);
    cr_assert_str_eq(t->header.host, "h1");
    cr_assert_eq(t->header.real_ns, t->header.mono_ns + 1000, "baseTimeNanoseconds");
    cr_assert_eq(t->header.mono_ns, 10000, "the first event");
    cr_assert_str_eq(pp_trace_thread_name(t, 9), "main");
    cr_assert_eq(s.marks, 1);
    cr_assert_eq(s.skipped_memory, 1);
    cr_assert_eq(s.ranges, 2);
    int string_tid = 0;
    for (size_t i = 0; i < t->n_events; i++)
        if (strcmp(t->events[i].message, "y") == 0)
            string_tid = t->events[i].tid >= 0x80000000u;
    cr_assert(string_tid, "a named tid gets an id of its own above 2^31");
    pp_trace_free(t);
}

/* A GPU trace in Kineto's shapes (libkineto output_json.cpp): per step a ProfilerStep#k range
 * holding a forward and a backward action on thread 5, each launching a kernel and a copy
 * (cudaLaunchKernel, cudaMemcpyAsync); after every CPU event, as Kineto writes them, the
 * kernels and copies with the launches' correlation ids. Step k starts at 1000 + 1000 k us; the
 * forward's GPU work is 100 + 50 us, the backward's 200 + 50 us. */
/* bwd_tid: the thread the backward's launches come from (5: the step's own thread; PyTorch's
 * autograd engine launches them from a thread of its own) */
static void gpu_trace_from(FILE *f, int steps, int bwd_tid)
{
    fputs("{\"schemaVersion\":1,\"distributedInfo\":{\"rank\":0},\"traceEvents\":[\n", f);
    static const char *const act[2] = {"F", "B"};
    for (int k = 0; k < steps; k++) {
        double t = 1000.0 + 1000.0 * k;
        fprintf(f, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\","
                   "\"pid\":5,\"tid\":5,\"ts\":%.3f,\"dur\":990},\n", k, t);
        for (int a = 0; a < 2; a++) {
            double t0 = t + 10 + 440 * a;
            int corr = 1 + 4 * k + 2 * a;
            fprintf(f, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"PP:0%s0\",\"pid\":5,"
                       "\"tid\":5,\"ts\":%.3f,\"dur\":400},\n", act[a], t0);
            int tid = a ? bwd_tid : 5;
            fprintf(f, "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\","
                       "\"pid\":5,\"tid\":%d,\"ts\":%.3f,\"dur\":5,\"args\":{\"cbid\":211,"
                       "\"correlation\":%d}},\n", tid, t0 + 10, corr);
            fprintf(f, "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaMemcpyAsync\","
                       "\"pid\":5,\"tid\":%d,\"ts\":%.3f,\"dur\":5,\"args\":{\"cbid\":41,"
                       "\"correlation\":%d}},\n", tid, t0 + 20, corr + 1);
        }
    }
    for (int k = 0; k < steps; k++) {
        for (int a = 0; a < 2; a++) {
            double t0 = 1000.0 + 1000.0 * k + 10 + 440 * a, kdur = a ? 200 : 100;
            int corr = 1 + 4 * k + 2 * a;
            fprintf(f, "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"void gemm<float>(...)\","
                       "\"pid\":0,\"tid\":7,\"ts\":%.3f,\"dur\":%.0f,\"args\":{\"device\":0,"
                       "\"stream\":7,\"correlation\":%d,\"registers per thread\":32}},\n",
                    t0 + 20, kdur, corr);
            fprintf(f, "{\"ph\":\"X\",\"cat\":\"gpu_memcpy\",\"name\":\"Memcpy DtoH (Device -> "
                       "Pinned)\",\"pid\":0,\"tid\":7,\"ts\":%.3f,\"dur\":50,\"args\":{\"device\":0,"
                       "\"stream\":7,\"correlation\":%d,\"bytes\":4096}},\n",
                    t0 + 25 + kdur, corr + 1);
            fprintf(f, "{\"ph\":\"f\",\"id\":%d,\"pid\":0,\"tid\":7,\"ts\":%.3f,\"cat\":\"ac2g\","
                       "\"name\":\"ac2g\",\"bp\":\"e\"},\n", corr, t0 + 20);
        }
    }
    fputs("{\"ph\":\"i\",\"s\":\"g\",\"name\":\"Record Window End\",\"pid\":\"\",\"tid\":\"\","
          "\"ts\":9999999}]}\n", f);
}

static void gpu_trace(FILE *f, int steps) { gpu_trace_from(f, steps, 5); }

Test(kineto, gpu_records_keep_their_launch_links_and_come_back_in_time_order)
{
    const char *json = tk_path("gpu.json"), *out = tk_path("gpu.pft");
    FILE *f = fopen(json, "w");
    gpu_trace(f, 2000);
    fclose(f);
    pp_kineto_stats s;
    cr_assert_eq(pp_kineto_convert(json, out, NULL, &s), PP_OK, "%s", pp_error_message());
    cr_assert_eq(s.gpu, 8000);
    cr_assert_eq(s.api, 8000);
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(out, &t), PP_OK);
    cr_assert_eq(t->n_gpu, 8000);
    cr_assert_eq(t->n_api, 8000);
    /* every GPU record's correlation finds its API call, on the ranges' thread */
    for (size_t i = 0; i < t->n_gpu; i++) {
        const pp_rec_gpu *g = &t->gpu[i].r;
        const pp_rec_api *a = NULL;
        for (size_t k = 0; k < t->n_api && !a; k++)
            if (t->api[k].correlation == g->correlation)
                a = &t->api[k];
        cr_assert_not_null(a, "kernel %zu: no launch", i);
        cr_assert_eq(a->thread, 5);
        cr_assert_geq(g->start, a->start);
        if (g->kind == PP_GPU_MEMCPY) {
            cr_assert_eq(g->bytes, 4096);
            cr_assert_eq(g->copy_kind, 2, "DtoH");
            cr_assert_eq(a->cbid, 41);
        } else {
            cr_assert_eq(g->kind, PP_GPU_KERNEL);
            cr_assert_str_eq(t->gpu[i].name, "void gemm<float>(...)");
            cr_assert_eq(a->cbid, 211);
        }
        cr_assert_eq(g->stream, 7);
    }
    /* merged in by time: the GPU records come in the file next to the CPU ranges of their
     * time, not all after them (the projection keeps a window of ranges, pp_gpu.h) */
    pp_trace_reader *r = NULL;
    cr_assert_eq(pp_trace_reader_open(out, &r), PP_OK);
    pp_trace_block b;
    bool got;
    int first_gpu_block = -1, last_cpu_block = -1, k = 0;
    while (pp_trace_reader_next(r, &b, &got) == PP_OK && got) {
        for (size_t off = 0; b.h.kind == PP_BLOCK_EVENTS && off < b.h.payload_bytes;) {
            pp_rec_header h;
            memcpy(&h, b.payload + off, sizeof h);
            if (h.type == PP_REC_GPU && first_gpu_block < 0)
                first_gpu_block = k;
            if (h.type == PP_REC_PUSH)
                last_cpu_block = k;
            off += h.size;
        }
        k++;
    }
    pp_trace_reader_close(r);
    cr_assert_lt(first_gpu_block, last_cpu_block, "GPU blocks %d, last CPU block %d",
                 first_gpu_block, last_cpu_block);
    pp_trace_free(t);
}

Test(kineto, gpu_kernels_project_onto_the_torch_actions_that_launched_them)
{
    /* 20 000 actions: far more than the projection's window of ranges per file, which the
     * GPU records written after every CPU event would miss without the merge by time */
    enum { STEPS = 10000 };
    const char *json = tk_path("gpu.json");
    FILE *f = fopen(json, "w");
    gpu_trace(f, STEPS);
    fclose(f);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(json, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->S, 1);
    cr_assert_eq(a->n_steps, STEPS - 1, "one warm-up step");
    cr_assert(a->gpu.present);
    cr_assert_eq(a->gpu.records, 4 * STEPS);
    cr_assert_eq(a->gpu.unattributed + a->gpu.late, 0, "%llu unattributed, %llu late",
                 (unsigned long long)a->gpu.unattributed, (unsigned long long)a->gpu.late);
    cr_assert_eq(a->gpu.projected, 4 * (STEPS - 1));
    cr_assert_float_eq(a->gpu.stages[0].fwd_median_ns, 150000.0, 1e-6, "kernel + copy");
    cr_assert_float_eq(a->gpu.stages[0].bwd_median_ns, 250000.0, 1e-6);
    pp_analysis_free(a);
}

/* The same trace with the backward launched the way PyTorch launches it: from the autograd
 * engine's thread, which has no range of its own, while the step's thread waits inside the
 * backward action. Every record is still projected (adopted by the backward range), with the
 * same times. */
Test(kineto, gpu_work_of_the_autograd_thread_lands_on_the_backward)
{
    enum { STEPS = 3000 };
    const char *json = tk_path("gpu_autograd.json");
    FILE *f = fopen(json, "w");
    gpu_trace_from(f, STEPS, 6);
    fclose(f);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(json, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->gpu.records, 4 * STEPS);
    cr_assert_eq(a->gpu.unattributed + a->gpu.late, 0, "%llu unattributed, %llu late",
                 (unsigned long long)a->gpu.unattributed, (unsigned long long)a->gpu.late);
    cr_assert_eq(a->gpu.projected, 4 * (STEPS - 1));
    cr_assert_eq(a->gpu.adopted, 2 * (STEPS - 1), "the backward's kernel and copy");
    cr_assert_float_eq(a->gpu.stages[0].fwd_median_ns, 150000.0, 1e-6);
    cr_assert_float_eq(a->gpu.stages[0].bwd_median_ns, 250000.0, 1e-6);
    pp_analysis_free(a);
}

/* A torch profiler slows the job as its events pile up (docs/torch.md "How many steps"): a
 * torch trace whose last steps are 1.45x slower is two regimes, and the warning names the
 * profiler as a cause besides the machine. */
Test(kineto, regimes_in_a_torch_trace_name_the_profiler_too)
{
    enum { STEPS = 16 };
    const char *json = tk_path("reg.json");
    FILE *f = fopen(json, "w");
    cr_assert_not_null(f);
    fputs("{\"schemaVersion\":1,\"distributedInfo\":{\"rank\":0},\"traceEvents\":[\n", f);
    double t = 1000.0;
    for (int k = 0; k < STEPS; k++) {
        double x = (k < 7 ? 1.0 : 1.45) * (1.0 + 0.01 * (k % 3)), d = 1000.0 * x;
        fprintf(f, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#%d\","
                   "\"pid\":5,\"tid\":5,\"ts\":%.3f,\"dur\":%.3f},\n", k, t, d - 10);
        fprintf(f, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"PP:0F0\",\"pid\":5,"
                   "\"tid\":5,\"ts\":%.3f,\"dur\":%.3f},\n", t + 10, 400 * x);
        fprintf(f, "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"PP:0B0\",\"pid\":5,"
                   "\"tid\":5,\"ts\":%.3f,\"dur\":%.3f},\n", t + 20 + 400 * x, 500 * x);
        t += d;
    }
    fputs("{\"ph\":\"i\",\"s\":\"g\",\"name\":\"Record Window End\",\"pid\":\"\","
          "\"tid\":\"\",\"ts\":9999999}]}\n", f);
    fclose(f);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(json, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_str_eq(a->dialect, "torch.distributed.pipelining");
    cr_assert(a->regimes.found, "no regimes in %zu steps", a->n_steps);
    cr_expect_eq(a->regimes.n_slow, 9);
    cr_expect(strstr(a->warnings, "two regimes, as on a machine whose speed changed during the "
                                  "run, or a torch profiler") != NULL,
              "%s", a->warnings);
    pp_analysis_free(a);
}

/* ---- the pipeline analysis of real torch traces (the torch dialect: docs/dialects.md) ---- */

static cJSON *report_json(const char *input)
{
    const char *args[] = {"--json", input, NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "%s: exit %d: %s", input, r.code, r.err);
    cJSON *j = cJSON_Parse(r.out);
    cr_assert_not_null(j, "%s: not JSON", input);
    tk_result_free(&r);
    return j;
}

Test(kineto, pprof_report_analyzes_torch_pipelines_from_their_traces)
{
    static const struct { const char *dir; int S, files; } runs[] = {
        {DATA "/il", 2, 2}, /* Interleaved1F1B: 2 ranks x 2 chunks */
        {DATA "/gp", 4, 4}, /* GPipe on 4 ranks */
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        cJSON *j = report_json(runs[i].dir);
        cJSON *p = cJSON_GetObjectItem(j, "pipeline");
        cr_assert_eq(cJSON_GetObjectItem(p, "stages")->valueint, runs[i].S, "%s", runs[i].dir);
        cJSON *files = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"), "files");
        cr_assert_eq(cJSON_GetArraySize(files), runs[i].files);
        /* the report names the torch traces, not the scratch files they became */
        const char *path = cJSON_GetObjectItem(cJSON_GetArrayItem(files, 0), "path")->valuestring;
        cr_assert_eq(strncmp(path, runs[i].dir, strlen(runs[i].dir)), 0, "%s", path);
        cr_assert_gt(cJSON_GetArraySize(cJSON_GetObjectItem(j, "steps")), 0);
        cJSON_Delete(j);
    }
    /* the Chrome export and the Gantt's data of the pipeline view */
    const char *args[] = {"-q", "--chrome", tk_path("gp.chrome.json"), "--gantt",
                          tk_path("gp.png"), "--gantt-data", tk_path("gp.dat"), DATA "/gp", NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert(r.code == 0 || (r.code == 3 && strstr(r.err, "gnuplot")), "exit %d: %s", r.code,
              r.err);
    tk_result_free(&r);
    char *chrome = tk_slurp(tk_path("gp.chrome.json"), NULL);
    cr_assert_not_null(chrome);
    cr_assert_neq(strstr(chrome, "traceEvents"), NULL);
    /* the converted traces live until pprof-report exits: their other ranges (the aten ops)
     * reach the Chrome trace's generic tracks */
    cr_assert_neq(strstr(chrome, "\"aten::"), NULL, "no aten op in the Chrome trace");
    free(chrome);
    cr_assert(tk_exists(tk_path("gp.dat")), "the Gantt's data");
}

/* The number of links in report j, each expected to carry `messages` messages. */
static int links_carrying(cJSON *j, int messages)
{
    cJSON *l;
    int links = 0;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(j, "links"))
    {
        cr_expect_eq(cJSON_GetObjectItem(l, "messages")->valueint, messages, "link %d: %d messages",
                     links, cJSON_GetObjectItem(l, "messages")->valueint);
        links++;
    }
    return links;
}

/* The report j of trace directory dir against kineto_truth.py (plain Python) over the same
 * files: per stage its optimizer steps (one a step), forwards and backwards, counts and means,
 * exactly (the same rule, the same microseconds). */
static void check_stages_against_truth(cJSON *j, const char *dir, int S, int M, int v)
{
    cJSON *steps = cJSON_GetObjectItem(j, "steps"), *st;
    int n_steps = cJSON_GetArraySize(steps);
    /* the truth: kineto_truth.py (plain Python) over the same files */
    const char *truth_path = tk_path("truth.json");
    const char *argv[] = {"python3", PP_TEST_PY_DIR "/kineto_truth.py", dir, "--out",
                          truth_path, NULL};
    tk_result r = tk_runv(argv, NULL);
    cr_assert_eq(r.code, 0, "kineto_truth.py: %s", r.err ? r.err : "");
    tk_result_free(&r);
    char *text = tk_slurp(truth_path, NULL);
    cJSON *truth = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(truth);
    for (int s = 0; s < S; s++) {
        double f = 0, b = 0, o = 0;
        int nf = 0, nb = 0, no = 0;
        cJSON_ArrayForEach(st, steps)
        {
            int step = cJSON_GetObjectItem(st, "step")->valueint;
            cJSON *ts;
            cJSON_ArrayForEach(ts, cJSON_GetObjectItem(truth, "steps"))
            {
                if (cJSON_GetObjectItem(ts, "step")->valueint != step)
                    continue;
                cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(ts, "ranks"), s);
                f += cJSON_GetObjectItem(c, "fwd_sum_ms")->valuedouble;
                b += cJSON_GetObjectItem(c, "bwd_sum_ms")->valuedouble;
                o += cJSON_GetObjectItem(c, "opt_sum_ms")->valuedouble;
                nf += cJSON_GetObjectItem(c, "fwd_n")->valueint;
                nb += cJSON_GetObjectItem(c, "bwd_n")->valueint;
                no += cJSON_GetObjectItem(c, "opt_n")->valueint;
            }
        }
        /* torch.optim's step (Optimizer.step#SGD.step): once a step on each rank */
        cJSON *os = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "stages"), s),
                                        "opt_ms");
        cr_expect_eq(no, n_steps, "stage %d: %d optimizer steps in the truth", s, no);
        cr_expect_eq(cJSON_GetObjectItem(os, "count")->valueint, no, "stage %d optimizer steps",
                     s);
        cr_expect(no > 0 && fabs(cJSON_GetObjectItem(os, "mean")->valuedouble - o / no) < 1e-6,
                  "stage %d optimizer step %.6f ms, the truth %.6f", s,
                  cJSON_GetObjectItem(os, "mean")->valuedouble, no > 0 ? o / no : 0.0);
        cr_assert_eq(nf, n_steps * M * v, "stage %d: %d forwards in the truth", s, nf);
        cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "stages"), s);
        cJSON *fs = cJSON_GetObjectItem(g, "fwd_ms");
        cr_expect_eq(cJSON_GetObjectItem(fs, "count")->valueint, nf, "stage %d forwards", s);
        cr_expect(fabs(cJSON_GetObjectItem(fs, "mean")->valuedouble - f / nf) < 1e-6,
                  "stage %d forward %.6f ms, the truth %.6f", s,
                  cJSON_GetObjectItem(fs, "mean")->valuedouble, f / nf);
        double got = 0;
        int n = 0;
        static const char *const kinds[] = {"bwd_ms", "bwd_input_ms", "bwd_weight_ms"};
        for (int k = 0; k < 3; k++) {
            cJSON *bs = cJSON_GetObjectItem(g, kinds[k]);
            int c = cJSON_GetObjectItem(bs, "count")->valueint;
            if (c > 0)
                got += cJSON_GetObjectItem(bs, "mean")->valuedouble * c;
            n += c;
        }
        cr_expect_eq(n, nb, "stage %d: %d backward ops, the truth %d", s, n, nb);
        cr_expect(n > 0 && fabs(got / n - b / nb) < 1e-6, "stage %d backward %.6f ms, the truth %.6f",
                  s, n > 0 ? got / n : 0.0, b / nb);
    }
    cJSON_Delete(truth);
}

/* A DualPipeV run (tests/data/kineto/dpv: torch 2.15.0 on CPU with gloo, `torchrun --standalone
 * --nproc-per-node 2 tests/py/torch_pipe.py --schedule dualpipev --blocks 4 --work 3,1,1,3
 * --microbatches 4 --dim 64 --steps 3 --out dpv`, gzip -9: the V placement, ProfilerSteps 1-3,
 * the first taken as warm-up), whose forward and backward pairs
 * run in PP:(<s>F<m>;<s'>B<m'>)OVERLAP_F_B actions: the analysis reads it as a V (zbv), splits
 * every pair (docs/dialects.md "Waits", rule 4) and so holds every micro-batch's forward and
 * backward, with the per-stage compute kineto_truth.py finds from the same JSON by the same
 * rule (to the nanosecond: both take the same timestamps), and each rank's optimizer step
 * (torch.optim's Optimizer.step#SGD.step) as kineto_truth.py times it; every step is replayed;
 * the links are the V's; nothing is warned about. */
Test(kineto, dualpipev_pairs_split_into_forward_and_backward)
{
    cJSON *j = report_json(DATA "/dpv");
    cJSON *p = cJSON_GetObjectItem(j, "pipeline");
    cr_expect_str_eq(cJSON_GetObjectItem(p, "schedule")->valuestring, "zbv");
    int S = cJSON_GetObjectItem(p, "stages")->valueint;
    int M = cJSON_GetObjectItem(p, "microbatches")->valueint;
    int v = cJSON_GetObjectItem(p, "virtual_stages")->valueint;
    cr_assert(S == 2 && M == 4 && v == 2, "S %d M %d v %d", S, M, v);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"),
                                                        "warnings")),
                 0, "warnings");
    cJSON *steps = cJSON_GetObjectItem(j, "steps"), *st;
    int n_steps = cJSON_GetArraySize(steps);
    cr_assert_eq(n_steps, 2);
    cJSON_ArrayForEach(st, steps)
    {
        cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(st, "decomposed")));
    }
    cr_expect_eq(links_carrying(j, n_steps * M), 4, "act and grad both ways between the two ranks");

    check_stages_against_truth(j, DATA "/dpv", S, M, v);
    cJSON_Delete(j);
}

/* The DeepSpeed recording's rank r (tests/data/kineto/ds, gunzipped; the caller frees it), and
 * in dst the path of its copy in dir. */
static char *ds_recording(int r, const char *dir, char *dst, size_t cap)
{
    char src[512];
    snprintf(src, sizeof src, "%s/rank%d.json.gz", DATA "/ds", r);
    snprintf(dst, cap, "%s/rank%d.json", dir, r);
    size_t len;
    char *text = slurp_any(src, &len);
    cr_assert_not_null(text, "%s", src);
    return text;
}

/* A DeepSpeed pipeline job (tests/data/kineto/ds: tests/py/ds_pipe.py, DeepSpeed 0.19.8 on torch
 * 2.15.0, CPU, gloo: `torchrun --standalone --nproc-per-node 2 tests/py/ds_pipe.py --steps 3
 * --blocks 4 --work 1,1,3,3 --dim 64 --mb-size 4 --out ds`; its leaf "<built-in ...>" Python
 * events removed, gzip -9). DeepSpeed's PipelineEngine names nothing for a profiler: its
 * instructions are its methods in the stack (_exec_forward_pass, _exec_backward_pass, the p2p
 * in _exec_send_activations & co.). Read as DeepSpeed's: 1F1B (its TrainSchedule), both links
 * with every micro-batch's message, per stage the forwards, backwards and optimizer steps
 * kineto_truth.py finds; the layers are the blocks inside the stage's PipelineModule (not the
 * stage module, not the loss after it), and the all-reduces of its optimizer step (the gradient
 * norm over both stages, which waits for the other stage: the barrier) are not taken for the
 * data-parallel one of _exec_reduce_grads, one a step. Before: GPipe, no forward or backward,
 * 99% bubble, and the stage module one layer. The same with the stage module's class renamed
 * (a job's own subclass of PipelineModule, Megatron-DeepSpeed's GPTModelPipe): the rule is the
 * nesting, not the name. */
Test(kineto, deepspeed_pipeline_engine_from_its_stack_events)
{
    static const char *const dirs[] = {DATA "/ds", NULL};
    const char *renamed = tk_path("ds-renamed");
    cr_assert_eq(mkdir(renamed, 0755), 0);
    for (int r = 0; r < 2; r++) {
        char dst[512];
        char *text = ds_recording(r, renamed, dst, sizeof dst);
        for (char *at = text; (at = strstr(at, "nn.Module: PipelineModule_")) != NULL;)
            memcpy(at + 11, "GPTModelPipe__", 14); /* over the 14 bytes of PipelineModule */
        tk_write_text(dst, text);
        free(text);
    }
    for (int k = 0; k < 2; k++) {
        const char *dir = k ? renamed : dirs[0];
        cJSON *j = report_json(dir);
        cr_expect_str_eq(cJSON_GetObjectItem(j, "dialect")->valuestring,
                         "deepspeed (torch profiler)");
        cJSON *p = cJSON_GetObjectItem(j, "pipeline");
        cr_expect_str_eq(cJSON_GetObjectItem(p, "schedule")->valuestring, "1f1b");
        int S = cJSON_GetObjectItem(p, "stages")->valueint;
        int M = cJSON_GetObjectItem(p, "microbatches")->valueint;
        int v = cJSON_GetObjectItem(p, "virtual_stages")->valueint;
        cr_assert(S == 2 && M == 4 && v == 1, "%s: S %d M %d v %d", dir, S, M, v);
        int n_steps = cJSON_GetArraySize(cJSON_GetObjectItem(j, "steps"));
        cr_assert_eq(n_steps, 2);
        cr_expect_eq(links_carrying(j, n_steps * M), 2, "activations 0 -> 1, gradients 1 -> 0");
        cJSON *l;
        int n = 0;
        cJSON_ArrayForEach(l, cJSON_GetObjectItem(j, "layers"))
        {
            const char *name = cJSON_GetObjectItem(l, "name")->valuestring;
            cr_expect(strncmp(name, "Block_", 6) == 0, "%s: layer %d is %s", dir, n, name);
            n++;
        }
        cr_expect_eq(n, 4, "%s: %d layers, the job has 4 blocks", dir, n);
        for (int s = 0; s < S; s++) {
            cJSON *ar = cJSON_GetObjectItem(
                cJSON_GetArrayItem(cJSON_GetObjectItem(j, "stages"), s), "allreduce_ms");
            cr_expect_eq(cJSON_GetObjectItem(ar, "count")->valueint, n_steps,
                         "stage %d: one data-parallel all-reduce a step", s);
            cr_expect_lt(cJSON_GetObjectItem(ar, "max")->valuedouble, 0.5,
                         "stage %d: a one-rank group's all-reduce took %.3f ms", s,
                         cJSON_GetObjectItem(ar, "max")->valuedouble);
        }
        check_stages_against_truth(j, dir, S, M, v);
        cJSON_Delete(j);
    }
}

/* A torch job whose stage modules torch's pipelining calls itself (tests/data/kineto/sm:
 * tests/py/torch_pipe.py on torch 2.15.0, CPU, gloo: `torchrun --standalone --nproc-per-node 2
 * tests/py/torch_pipe.py --schedule gpipe --blocks 8 --work 3,3,3,3,1,1,1,1 --microbatches 4
 * --steps 3 --dim 64 --mb-size 4 --with-modules --piece-call module --compile blocks --out sm`;
 * its "<built-in ...>" Python events, flow events and the Python events' args removed, gzip -9).
 * Each stage's module has a module event of its own (ModulePiece_0, called from
 * forward_maybe_with_nosync) and each block is compiled (torch.compile, aot_eager): an
 * OptimizedModule around it, the block's own event inside, dynamo's and AOTAutograd's frames and
 * a GraphModule inside that. The layers are the 8 OptimizedModules: not the stage modules (2
 * layers, as before), not the blocks or GraphModules inside them; no compiled-code warning. */
Test(kineto, stage_modules_torch_calls_and_blocks_under_torch_compile)
{
    const char *dir = DATA "/sm";
    cJSON *j = report_json(dir);
    cJSON *p = cJSON_GetObjectItem(j, "pipeline");
    int S = cJSON_GetObjectItem(p, "stages")->valueint;
    int M = cJSON_GetObjectItem(p, "microbatches")->valueint;
    int v = cJSON_GetObjectItem(p, "virtual_stages")->valueint;
    cr_assert(S == 2 && M == 4 && v == 1, "S %d M %d v %d", S, M, v);
    cr_expect_str_eq(cJSON_GetObjectItem(p, "schedule")->valuestring, "gpipe");
    int n_steps = cJSON_GetArraySize(cJSON_GetObjectItem(j, "steps"));
    cJSON *l;
    int n = 0;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(j, "layers"))
    {
        char want[32];
        snprintf(want, sizeof want, "OptimizedModule_%d", n % 4);
        cr_expect_str_eq(cJSON_GetObjectItem(l, "name")->valuestring, want, "layer %d", n);
        cr_expect_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(l, "fwd_ms"), "count")->valueint,
                     n_steps * M, "layer %d: a forward per micro-batch", n);
        n++;
    }
    cr_expect_eq(n, 8, "%d layers, the job has 8 blocks", n);
    check_stages_against_truth(j, dir, S, M, v);
    cJSON_Delete(j);
    const char *argv[] = {PPREPORT, dir, NULL};
    tk_result r = tk_runv(argv, NULL);
    cr_expect_eq(r.code, 0);
    cr_expect(strstr(r.out, "compiled code") == NULL, "%s", r.out);
    tk_result_free(&r);
    const char *targv[] = {PP_BUILD_DIR "/tools/pprof-tune", dir, "-q", NULL};
    r = tk_runv(targv, NULL);
    cr_expect_eq(r.code, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "8 layers, 2 stages, gpipe") != NULL, "%s", r.out);
    tk_result_free(&r);
}

/* A real Megatron-LM job (tests/data/kineto/mg: megatron-core 0.16.1's GPTModel, local layer
 * spec, 4 layers, on torch 2.15.0, CPU, gloo: `torchrun --standalone --nproc-per-node 2
 * tests/py/megatron_pipe.py --vp 2 --layers 4 --hidden 64 --heads 2 --seq 16 --vocab 256
 * --mb-size 2 --microbatches 4 --steps 2 --out mg`; its "<built-in ...>" Python events, flow
 * events and the Python events' args removed, gzip -9), in Megatron's interleaved schedule: 2
 * model chunks per rank. Megatron names no range for a profiler; its forward_step and
 * backward_step are the ops, and which chunk a forward runs shows only in the module it calls
 * (GPTModel_0, GPTModel_1). Before, the traces read as "no pipeline ranges"; a first reading
 * took each rank's chunks as one stage of 8 micro-batches, and its links backwards. Now: the
 * interleaved schedule with M = 4, v = 2, each rank's compute as kineto_truth.py finds it, the
 * layers (the embedding, the 4 TransformerLayers, the output layer as "head"), the four links
 * (activations 0 -> 1 twice per micro-batch, 1 -> 0 once; gradients the other way) with every
 * micro-batch's message, a bubble decomposition, and pprof-tune's layout in Megatron's syntax.
 * The same traces with their module events cut out (torch records them with the stacks; a
 * tool that shrinks traces may drop them) cannot say the chunks: the report says so, claims no
 * schedule it cannot back, and pprof-tune exits 2. */
Test(kineto, megatron_interleaved_chunks_from_their_modules)
{
    const char *dir = DATA "/mg";
    cJSON *j = report_json(dir);
    cr_expect_str_eq(cJSON_GetObjectItem(j, "dialect")->valuestring,
                     "megatron-lm (torch profiler)");
    cJSON *p = cJSON_GetObjectItem(j, "pipeline");
    int S = cJSON_GetObjectItem(p, "stages")->valueint;
    int M = cJSON_GetObjectItem(p, "microbatches")->valueint;
    int v = cJSON_GetObjectItem(p, "virtual_stages")->valueint;
    cr_assert(S == 2 && M == 4 && v == 2, "S %d M %d v %d", S, M, v);
    cr_expect_str_eq(cJSON_GetObjectItem(p, "schedule")->valuestring, "interleaved");
    int n_steps = cJSON_GetArraySize(cJSON_GetObjectItem(j, "steps"));
    cr_assert_gt(n_steps, 0);
    static const char *const names[] = {"embedding",          "TransformerLayer_0",
                                        "TransformerLayer_0", "TransformerLayer_1",
                                        "TransformerLayer_1", "head"};
    cJSON *l;
    int n = 0;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(j, "layers"))
    {
        if (n < 6)
            cr_expect_str_eq(cJSON_GetObjectItem(l, "name")->valuestring, names[n], "layer %d",
                             n);
        cr_expect_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(l, "fwd_ms"), "count")->valueint,
                     n_steps * M, "layer %d: a forward per micro-batch", n);
        n++;
    }
    cr_expect_eq(n, 6, "%d layers: the embedding, 4 blocks, the output layer", n);
    int found = 0;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(j, "links"))
    {
        int src = cJSON_GetObjectItem(l, "src")->valueint;
        int act = strcmp(cJSON_GetObjectItem(l, "kind")->valuestring, "act") == 0;
        /* pieces 0 -> 1 -> 2 -> 3 are ranks 0, 1, 0, 1: activations cross 0 -> 1 twice */
        int per_mb = (src == 0) == act ? 2 : 1;
        cr_expect_eq(cJSON_GetObjectItem(l, "messages")->valueint, n_steps * M * per_mb,
                     "link %d -> %d %s", src, cJSON_GetObjectItem(l, "dst")->valueint,
                     act ? "act" : "grad");
        found++;
    }
    cr_expect_eq(found, 4, "%d links", found);
    cJSON *g;
    cJSON_ArrayForEach(g, cJSON_GetObjectItem(j, "stages"))
    {
        cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(g, "chunks")), 2);
        cr_expect_gt(cJSON_GetObjectItem(g, "fill_drain_ms")->valuedouble, 0,
                     "the step was replayed");
    }
    check_stages_against_truth(j, dir, S, M, v);
    cJSON_Delete(j);
    const char *targv[] = {PP_BUILD_DIR "/tools/pprof-tune", dir, "-q", NULL};
    tk_result r = tk_runv(targv, NULL);
    cr_expect_eq(r.code, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "6 layers, 2 stages, interleaved, M = 4") != NULL, "%s", r.out);
    const char *lay = strstr(r.out, "--pipeline-model-parallel-layout \"");
    cr_expect(lay && lay[34] == 'E' && strchr(lay + 34, '"') &&
                  strchr(lay + 34, '"')[-1] == 'L',
              "no layout from the embedding to the loss:\n%s", r.out);
    int bars = 0;
    for (const char *q = lay ? lay + 34 : ""; *q && *q != '"'; q++)
        bars += *q == '|';
    cr_expect_eq(bars, 3, "a layout of 4 pieces:\n%s", r.out);
    tk_result_free(&r);

    /* the same traces without module events */
    const char *bare = tk_path("mg_bare");
    cr_assert_eq(mkdir(bare, 0755), 0);
    for (int k = 0; k < 2; k++) {
        char src[512], dst[512];
        snprintf(src, sizeof src, "%s/rank-%d.json.gz", dir, k);
        snprintf(dst, sizeof dst, "%s/rank-%d.json", bare, k);
        size_t len;
        char *text = slurp_any(src, &len);
        cJSON *t = cJSON_Parse(text);
        free(text);
        cr_assert_not_null(t, "%s", src);
        cJSON *evs = cJSON_GetObjectItem(t, "traceEvents");
        for (int i = cJSON_GetArraySize(evs); i-- > 0;) {
            cJSON *nm = cJSON_GetObjectItem(cJSON_GetArrayItem(evs, i), "name");
            if (cJSON_IsString(nm) && strncmp(nm->valuestring, "nn.Module: ", 11) == 0)
                cJSON_DeleteItemFromArray(evs, i);
        }
        char *out = cJSON_PrintUnformatted(t);
        FILE *fp = fopen(dst, "w");
        cr_assert_not_null(fp);
        fputs(out, fp);
        fclose(fp);
        free(out);
        cJSON_Delete(t);
    }
    j = report_json(bare);
    p = cJSON_GetObjectItem(j, "pipeline");
    cr_expect_str_eq(cJSON_GetObjectItem(p, "schedule")->valuestring, "megatron-interleaved");
    char *warned = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"),
                                                            "warnings"));
    cr_expect(warned && strstr(warned, "could not be told which model chunk") != NULL,
              "no warning about the chunks: %s", warned ? warned : "");
    free(warned);
    cJSON_Delete(j);
    const char *bargv[] = {PP_BUILD_DIR "/tools/pprof-tune", bare, "-q", NULL};
    r = tk_runv(bargv, NULL);
    cr_expect_eq(r.code, 2, "%s%s", r.out, r.err);
    cr_expect(strstr(r.err, "Megatron-LM's interleaved schedule") != NULL, "%s", r.err);
    tk_result_free(&r);
}

/* A real PaddlePaddle pipeline-parallel job (tests/data/kineto/pd: fleet's PipelineParallel, 1F1B,
 * 2 ranks on CPU, 4 blocks of 1, 1, 1, 3 Linear+tanh, 4 micro-batches, 3 profiled steps;
 * recorded with paddlepaddle 3.3.1 by tests/py/paddle_pipe.py, its traces gzipped). Paddle's
 * profiler writes categories of its own and appends each event's duration to its name; its
 * traces hold no pipeline range (its pipeline schedule records none) and no p2p event. Before,
 * pprof-report read 0 events of them ("the traces hold no NVTX range or mark"); now every host
 * event, by its name: each block's forward (Paddle's Forward events, named by the layer's
 * class) once per micro-batch on its rank, its Linear layers likewise, one ProfileStep#N per
 * rank and step; no name with a duration in it, and no pipeline claimed. */
/* PaddlePaddle's pipeline timeline, tests/data/kineto/pdtl: fleet's PipelineParallel (1F1B, 2
 * stages, 4 micro-batches, 5 steps, the last stage 2x the work) with pp_configs.profiling, on
 * CPU (tests/py/paddle_pipe.py --timeline, paddlepaddle 3.3.1): one file of JSON lines per rank,
 * "F<mb>" / "B<mb>" begin and end events in milliseconds, tid = stage + 1. The truth, from the
 * files themselves: each stage's forward and backward durations in the steps the analysis keeps
 * (a step is a pass from micro-batch 0's forward; the first, before any backward, has no step,
 * the next is the warm-up). */
typedef struct tl_truth {
    double fwd_sum[2], bwd_sum[2];
    int fwd_n[2], bwd_n[2];
} tl_truth;

static void tl_truth_of(const char *dir, tl_truth *tr)
{
    memset(tr, 0, sizeof *tr);
    for (int r = 0; r < 2; r++) {
        char path[512], line[512];
        snprintf(path, sizeof path, "%s/profile_record_tmp_file_for_rank_%d", dir, r);
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f, "%s", path);
        int pass = 0;
        long long open_ts = -1;
        while (fgets(line, sizeof line, f)) {
            char name[16], ph;
            int tid;
            long long ts;
            cr_assert_eq(sscanf(line, "{\"name\": \"%15[^\"]\", \"cat\": \"pipeline timeline\", "
                                      "\"ph\": \"%c\", \"pid\": 0, \"tid\": %d, \"ts\": %lld",
                                name, &ph, &tid, &ts),
                         4, "%s", line);
            cr_assert_eq(tid, r + 1, "stage %d's file holds tid %d", r, tid);
            if (ph == 'B') {
                pass += strcmp(name, "F0") == 0;
                open_ts = ts;
                continue;
            }
            if (pass < 3)
                continue; /* no step, then the warm-up */
            double ms = (double)(ts - open_ts);
            if (name[0] == 'F')
                tr->fwd_sum[r] += ms, tr->fwd_n[r]++;
            else
                tr->bwd_sum[r] += ms, tr->bwd_n[r]++;
        }
        fclose(f);
        cr_assert_eq(pass, 5);
    }
}

static void expect_tl_truth(cJSON *j, const tl_truth *tr, const char *what)
{
    cJSON *p = cJSON_GetObjectItem(j, "pipeline");
    cr_expect_eq(cJSON_GetObjectItem(p, "stages")->valueint, 2, "%s", what);
    cr_expect_eq(cJSON_GetObjectItem(p, "microbatches")->valueint, 4, "%s", what);
    cr_expect_str_eq(cJSON_GetObjectItem(p, "schedule")->valuestring, "1f1b", "%s", what);
    cr_expect_str_eq(cJSON_GetObjectItem(j, "dialect")->valuestring, "paddle pipeline timeline");
    cr_expect_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "analysis"), "steps")->valueint, 3);
    cJSON *stages = cJSON_GetObjectItem(j, "stages");
    cr_assert_eq(cJSON_GetArraySize(stages), 2);
    for (int s = 0; s < 2; s++) {
        cJSON *st = cJSON_GetArrayItem(stages, s);
        cJSON *fw = cJSON_GetObjectItem(st, "fwd_ms"), *bw = cJSON_GetObjectItem(st, "bwd_ms");
        cr_expect_eq(cJSON_GetObjectItem(fw, "count")->valueint, tr->fwd_n[s], "%s %d", what, s);
        cr_expect_eq(cJSON_GetObjectItem(bw, "count")->valueint, tr->bwd_n[s], "%s %d", what, s);
        double fm = cJSON_GetObjectItem(fw, "mean")->valuedouble,
               bm = cJSON_GetObjectItem(bw, "mean")->valuedouble;
        cr_expect_lt(fabs(fm - tr->fwd_sum[s] / tr->fwd_n[s]), 1e-3, "%s stage %d fwd %.6f", what,
                     s, fm);
        cr_expect_lt(fabs(bm - tr->bwd_sum[s] / tr->bwd_n[s]), 1e-3, "%s stage %d bwd %.6f", what,
                     s, bm);
    }
    /* the job's straggler is the last stage (2x the work): the first waits on it */
    cr_expect_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(stages, 0), "imbalance_culprit")->valueint,
                 1, "%s", what);
    /* the timeline holds no transfer: the bubble's replays wait on the messages the schedule
     * implies, so each stage's fill and drain is its own term (before: 0, all of it "transfer"),
     * and the parts still add up to the idle time */
    for (int s = 0; s < 2; s++) {
        cJSON *st = cJSON_GetArrayItem(stages, s);
        double fill = cJSON_GetObjectItem(st, "fill_drain_ms")->valuedouble,
               imb = cJSON_GetObjectItem(st, "imbalance_ms")->valuedouble,
               xfer = cJSON_GetObjectItem(st, "transfer_ms")->valuedouble,
               idle = cJSON_GetObjectItem(st, "idle_ms")->valuedouble;
        cr_expect_gt(fill, 1.0, "%s stage %d: fill/drain %.3f ms", what, s, fill);
        cr_expect_lt(fabs(fill + imb + xfer - idle), 1e-3 * idle + 1e-6, "%s stage %d", what, s);
    }
}

/* pdtl's stage file `stage` written to o, every stamp `off_ms` later: as it is (first NULL), or
 * as lines of a merged file (joined by ",\n"; *first: none written yet) */
static void copy_tl_lines(FILE *o, int stage, long long off_ms, int *first)
{
    char in[512], line[512];
    snprintf(in, sizeof in, DATA "/pdtl/profile_record_tmp_file_for_rank_%d", stage);
    FILE *f = fopen(in, "r");
    cr_assert_not_null(f, "%s", in);
    while (fgets(line, sizeof line, f)) {
        char *ts = strstr(line, "\"ts\": "), *end;
        cr_assert_not_null(ts);
        long long v = strtoll(ts + 6, &end, 10);
        if (first) {
            end[strcspn(end, "\n")] = '\0';
            fputs(*first ? "" : ",\n", o);
            *first = 0;
        }
        fprintf(o, "%.*s%lld%s", (int)(ts + 6 - line), line, v + off_ms, end);
    }
    fclose(f);
}

/* `copies` of the two rank files (the k-th 1 ms later) as Paddle's profiler_helper.py merges
 * them: "[ " + the lines joined by ",\n" + " ]" (one thread per stage in one file) */
static void write_merged(const char *path, int copies)
{
    FILE *o = fopen(path, "w");
    cr_assert_not_null(o);
    fputs("[ ", o);
    int first = 1;
    for (int copy = 0; copy < copies; copy++)
        for (int r = 0; r < 2; r++)
            copy_tl_lines(o, r, copy, &first);
    fputs(" ]\n", o);
    fclose(o);
}

Test(kineto, paddle_pipeline_timeline_is_analyzed_as_its_pipeline)
{
    tl_truth tr;
    tl_truth_of(DATA "/pdtl", &tr);
    cJSON *j = report_json(DATA "/pdtl");
    expect_tl_truth(j, &tr, "rank files");
    cJSON *files = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"), "files");
    cr_assert_eq(cJSON_GetArraySize(files), 2);
    for (int r = 0; r < 2; r++)
        cr_expect_eq(cJSON_GetObjectItem(cJSON_GetArrayItem(files, r), "rank")->valueint, r);
    cJSON_Delete(j);

    /* the merged file alone: the same pipeline, its stages from the threads */
    char dir[300];
    snprintf(dir, sizeof dir, "%s", tk_path("merged"));
    cr_assert_eq(mkdir(dir, 0755), 0);
    char merged[400];
    snprintf(merged, sizeof merged, "%s/pipeline_profile.json", dir);
    write_merged(merged, 1);
    j = report_json(dir);
    expect_tl_truth(j, &tr, "merged");
    cJSON *run = cJSON_GetObjectItem(j, "run");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(run, "files")), 1);
    cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItem(run, "warnings"))
        cr_expect_null(strstr(w->valuestring, "overlap"), "%s", w->valuestring);
    cJSON_Delete(j);

    /* beside the files it merges, it is not read again (each op would count twice) */
    for (int r = 0; r < 2; r++) {
        char in[512], out[512];
        snprintf(in, sizeof in, DATA "/pdtl/profile_record_tmp_file_for_rank_%d", r);
        snprintf(out, sizeof out, "%s/profile_record_tmp_file_for_rank_%d", dir, r);
        char *text = tk_slurp(in, NULL);
        cr_assert_not_null(text);
        tk_write_text(out, text);
        free(text);
    }
    j = report_json(dir);
    expect_tl_truth(j, &tr, "both");
    run = cJSON_GetObjectItem(j, "run");
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(run, "files")), 2);
    w = cJSON_GetArrayItem(cJSON_GetObjectItem(run, "warnings"), 0);
    cr_expect(w && strstr(w->valuestring, "pipeline_profile.json: not read"), "%s",
              w ? w->valuestring : "(no warning)");
    cJSON_Delete(j);
}

/* pdtl's stage file `stage` as rank `rank`'s in dir, every stamp `off_ms` later */
static void write_tl_rank(const char *dir, int rank, int stage, long long off_ms)
{
    char out[512];
    snprintf(out, sizeof out, "%s/profile_record_tmp_file_for_rank_%d", dir, rank);
    FILE *o = fopen(out, "w");
    cr_assert_not_null(o);
    copy_tl_lines(o, stage, off_ms, NULL);
    fclose(o);
}

/* A hybrid job writes a file per rank, several per stage: the k-th rank of every stage is one
 * pipeline, whichever way the ranks are laid out (data-parallel outermost, or tensor-parallel
 * innermost); each pipeline (the second one 100 s later, so that a wrong pairing shows) is
 * analyzed as the single one is. Stages held unequally often: a warning, no pairing. */
Test(kineto, paddle_timeline_of_a_hybrid_job_splits_into_its_pipelines)
{
    tl_truth tr;
    tl_truth_of(DATA "/pdtl", &tr);
    static const struct { const char *name; int rank[2][2]; } layouts[] = {
        {"dp-outer", {{0, 1}, {2, 3}}}, /* rank[copy][stage] */
        {"mp-inner", {{0, 2}, {1, 3}}},
    };
    for (size_t l = 0; l < 2; l++) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s", tk_path(layouts[l].name));
        cr_assert_eq(mkdir(dir, 0755), 0);
        for (int copy = 0; copy < 2; copy++)
            for (int stage = 0; stage < 2; stage++)
                write_tl_rank(dir, layouts[l].rank[copy][stage], stage, copy * 100000LL);
        for (int copy = 0; copy < 2; copy++) {
            char rep[8];
            snprintf(rep, sizeof rep, "%d", copy);
            const char *args[] = {"--json", "--replica", rep, dir, NULL};
            tk_result r = tk_run(PPREPORT, args, NULL);
            cr_assert_eq(r.code, 0, "%s: %s", dir, r.err);
            cJSON *j = cJSON_Parse(r.out);
            cr_assert_not_null(j);
            expect_tl_truth(j, &tr, layouts[l].name);
            cJSON *p = cJSON_GetObjectItem(j, "pipeline");
            cr_expect_eq(cJSON_GetObjectItem(p, "data_parallel")->valueint, 2, "%s",
                         layouts[l].name);
            cr_expect_eq(cJSON_GetObjectItem(p, "replica")->valueint, copy);
            cJSON_Delete(j);
            tk_result_free(&r);
        }
    }
    char dir[300];
    snprintf(dir, sizeof dir, "%s", tk_path("uneven"));
    cr_assert_eq(mkdir(dir, 0755), 0);
    write_tl_rank(dir, 0, 0, 0);
    write_tl_rank(dir, 1, 1, 0);
    write_tl_rank(dir, 2, 0, 100000);
    cJSON *j = report_json(dir);
    cJSON *w, *ws = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"), "warnings");
    int found = 0;
    cJSON_ArrayForEach(w, ws) found |= strstr(w->valuestring, "equally often") != NULL;
    cr_expect(found, "no warning about the stages held unequally often");
    cJSON_Delete(j);

    /* the merged file of such a job (the copies 1 ms apart, as replicas run): each stage's
     * copies share a thread, and the importer says so */
    snprintf(dir, sizeof dir, "%s", tk_path("merged-dp"));
    cr_assert_eq(mkdir(dir, 0755), 0);
    char path[400];
    snprintf(path, sizeof path, "%s/pipeline_profile.json", dir);
    write_merged(path, 2);
    j = report_json(dir);
    ws = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"), "warnings");
    found = 0;
    cJSON_ArrayForEach(w, ws) found |= strstr(w->valuestring, "overlap on its thread") != NULL;
    cr_expect(found, "no warning about the copies of a stage on one thread");
    cJSON_Delete(j);
}

/* A run without layer ranges (Paddle's timeline here) is costed by its stages: one layer per
 * stage, its forward and backward the medians of the stage's ops, the run's partition kept; the
 * model predicts the run's own median step within 3% (its time between ops, which without
 * receive ranges holds the waits, taken from the stage that waits least: the stages' mean made
 * it 194 ms, +36%), and no split points are offered */
Test(kineto, pprof_tune_costs_a_run_without_layers_by_its_stages)
{
    cJSON *j = report_json(DATA "/pdtl");
    double measured = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "aggregates"), "step_ms"), "median")->valuedouble;
    const char *costs = tk_path("stages.json");
    const char *args[] = {"--export-costs", costs, DATA "/pdtl", NULL};
    tk_result r = tk_run(PPTUNE, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    const char *sc = strstr(r.out, "the model predicts ");
    cr_assert_not_null(sc, "%s", r.out);
    double predicted = strtod(sc + strlen("the model predicts "), NULL);
    cr_expect_lt(fabs(predicted / measured - 1), 0.03, "predicted %.3f ms, measured %.3f",
                 predicted, measured);
    cr_expect_null(strstr(r.out, "split_points"), "split points offered for stages: %s", r.out);
    cr_expect_neq(strstr(r.out, "boundaries      0,1,2"), NULL, "%s", r.out);
    tk_result_free(&r);
    char *text = tk_slurp(costs, NULL);
    cr_assert_not_null(text);
    cJSON *c = cJSON_Parse(text);
    free(text);
    cJSON *layers = cJSON_GetObjectItem(c, "layers");
    cr_assert_eq(cJSON_GetArraySize(layers), 2);
    cJSON *stages = cJSON_GetObjectItem(j, "stages");
    for (int s = 0; s < 2; s++) {
        cJSON *l = cJSON_GetArrayItem(layers, s), *st = cJSON_GetArrayItem(stages, s);
        char name[16];
        snprintf(name, sizeof name, "stage%d", s);
        cr_expect_str_eq(cJSON_GetObjectItem(l, "name")->valuestring, name);
        double f = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "fwd_ms"), "median")->valuedouble,
               b = cJSON_GetObjectItem(cJSON_GetObjectItem(st, "bwd_ms"), "median")->valuedouble;
        cr_expect_lt(fabs(cJSON_GetObjectItem(l, "fwd_us")->valuedouble - 1e3 * f), 1e-6 * f * 1e3);
        cr_expect_lt(fabs(cJSON_GetObjectItem(l, "bwd_us")->valuedouble - 1e3 * b), 1e-6 * b * 1e3);
    }
    cJSON_Delete(c);
    cJSON_Delete(j);
}

/* --advise over Paddle timelines at two micro-batch sizes (pdtl: 4 of 128 samples, pdtl8: 8 of
 * 64, the same 512 a step; the timeline states no sizes: --microbatch-sizes): the stages' costs
 * fitted against the size, every count ranked; the measured order of the two runs (4
 * micro-batches faster than 8 on this job: each op's point-to-point time on gloo) is the
 * ranking's */
Test(kineto, pprof_tune_advises_the_microbatching_of_runs_without_layers)
{
    const char *args[] = {"--advise", DATA "/pdtl", DATA "/pdtl8", "--microbatch-sizes", "128,64",
                          NULL};
    tk_result r = tk_run(PPTUNE, args, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s", r.code, r.err);
    cr_expect_neq(strstr(r.out, "micro-batch fit over 2 runs"), NULL, "%s", r.out);
    const char *best = strstr(r.out, "\nbest: M = ");
    cr_assert_not_null(best, "%s", r.out);
    int rank4 = -1, rank8 = -1;
    for (const char *line = r.out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        int rank, m, b;
        if (sscanf(line, " %d %d %d 1f1b", &rank, &m, &b) == 3 && m * b == 512) {
            if (m == 4)
                rank4 = rank;
            if (m == 8)
                rank8 = rank;
        }
    }
    cr_expect(rank4 > 0 && rank8 > 0 && rank4 < rank8, "M = 4 ranked %d, M = 8 %d: %s", rank4,
              rank8, r.out);
    cr_expect_null(strstr(r.out, "split_points"));
    tk_result_free(&r);
}

/* Interleaved ("virtual pipeline timeline": "F<mb>_VP<chunk>") on 2 stages x 2 chunks, M = 4,
 * as PipelineParallelWithInterleave names its stamps, three passes: chunks from the names,
 * stages from the threads, steps from micro-batch 0's forward of chunk 0 */
Test(kineto, paddle_virtual_pipeline_timeline_names_the_chunks)
{
    /* stage 0's order in interleaved 1F1B (M = 4, S = 2, v = 2): four warm-up forwards, the
     * steady state's forward-backward pairs, the cool-down's backwards (both stages run it
     * here: the names are what is tested) */
    static const char *const order[] = {"F0_VP0", "F1_VP0", "F0_VP1", "F1_VP1",
                                        "F2_VP0", "B0_VP1", "F3_VP0", "B1_VP1",
                                        "F2_VP1", "B0_VP0", "F3_VP1", "B1_VP0",
                                        "B2_VP1", "B3_VP1", "B2_VP0", "B3_VP0"};
    char *text = malloc(1 << 16);
    cr_assert_not_null(text);
    size_t len = 0;
    long long ts = 1796374068000LL;
    for (int pass = 0; pass < 3; pass++)
        for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
            for (int tid = 1; tid <= 2; tid++) {
                int ms = order[i][0] == 'F' ? 2 * tid : 4 * tid;
                for (int be = 0; be < 2; be++)
                    len += (size_t)snprintf(
                        text + len, (1 << 16) - len,
                        "{\"name\": \"%s\", \"cat\": \"virtual pipeline timeline\", \"ph\": "
                        "\"%c\", \"pid\": 0, \"tid\": %d, \"ts\": %lld, \"cname\": \"x\"}\n",
                        order[i], be ? 'E' : 'B', tid, ts + (tid - 1) + (be ? ms : 0));
                if (tid == 2)
                    ts += 10;
            }
    char dir[300];
    snprintf(dir, sizeof dir, "%s", tk_path("vp"));
    cr_assert_eq(mkdir(dir, 0755), 0);
    char path[400];
    snprintf(path, sizeof path, "%s/profile_record_tmp_file_for_rank_0", dir);
    tk_write_text(path, text);
    free(text);
    cJSON *j = report_json(dir);
    cJSON *p = cJSON_GetObjectItem(j, "pipeline");
    cr_expect_eq(cJSON_GetObjectItem(p, "stages")->valueint, 2);
    cr_expect_eq(cJSON_GetObjectItem(p, "virtual_stages")->valueint, 2);
    cr_expect_eq(cJSON_GetObjectItem(p, "microbatches")->valueint, 4);
    cr_expect_str_eq(cJSON_GetObjectItem(p, "schedule")->valuestring, "interleaved");
    cJSON *stages = cJSON_GetObjectItem(j, "stages");
    for (int s = 0; s < 2; s++) {
        cJSON *st = cJSON_GetArrayItem(stages, s);
        cJSON *fw = cJSON_GetObjectItem(st, "fwd_ms"), *bw = cJSON_GetObjectItem(st, "bwd_ms");
        cr_expect_eq(cJSON_GetObjectItem(fw, "count")->valueint, 8, "stage %d: 1 step x 8", s);
        cr_expect_lt(fabs(cJSON_GetObjectItem(fw, "mean")->valuedouble - 2.0 * (s + 1)), 1e-3);
        cr_expect_lt(fabs(cJSON_GetObjectItem(bw, "mean")->valuedouble - 4.0 * (s + 1)), 1e-3);
    }
    cJSON_Delete(j);
}

Test(kineto, paddle_pipeline_job_read_as_its_host_events)
{
    cJSON *j = report_json(DATA "/pd");
    cJSON *p = cJSON_GetObjectItem(j, "pipeline");
    cJSON *stages = cJSON_GetObjectItem(p, "stages");
    cr_expect(!cJSON_IsNumber(stages) || stages->valueint == 0, "a pipeline of %d stages claimed",
              cJSON_IsNumber(stages) ? stages->valueint : -1);
    cJSON *files = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"), "files");
    cr_assert_eq(cJSON_GetArraySize(files), 2);
    static const struct { const char *domain, *name; int count; } want[] = {
        {"Forward", "Block", 3 * 4 * 4},          /* 4 blocks, 4 micro-batches, 3 steps */
        {"Forward", "Linear", 3 * 4 * 6},         /* 1 + 1 + 1 + 3 Linear layers */
        {"Forward", "MSELoss", 3 * 4},            /* the last stage's loss */
        {"UserDefined", "backward", 3 * 4 * 2},   /* each rank's backward per micro-batch */
        {"ProfileStep", "ProfileStep#1", 2},
        {"ProfileStep", "ProfileStep#3", 2},
        {"Optimization", "Optimization Step", 3 * 2}};
    int found[sizeof want / sizeof want[0]] = {0};
    cJSON *r;
    int n = 0;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "ranges"))
    {
        const char *dom = cJSON_GetObjectItem(r, "domain")->valuestring;
        const char *name = cJSON_GetObjectItem(r, "name")->valuestring;
        size_t len = strlen(name);
        cr_expect(len < 2 || strcmp(name + len - 2, "s]") != 0, "%s: '%s' keeps its duration",
                  dom, name);
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            if (strcmp(dom, want[i].domain) == 0 && strcmp(name, want[i].name) == 0) {
                found[i] = 1;
                cr_expect_eq(cJSON_GetObjectItem(r, "count")->valueint, want[i].count, "%s %s",
                             dom, name);
            }
        n++;
    }
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(found[i], "no %s range %s", want[i].domain, want[i].name);
    cr_expect_gt(n, 50, "%d range names", n);
    cJSON_Delete(j);
}

/* In the Chrome export of trace directory dir, the sends of Megatron's combined call: two sends
 * of one stage with no compute op between them. Counts the pairs whose first send is the
 * activations' into *act_first, the others into *grad_first. */
static void combined_sends(const char *dir, const char *name, int *act_first, int *grad_first)
{
    const char *out = tk_path(name);
    const char *args[] = {"-q", "--chrome", out, dir, NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "%s: exit %d: %s", dir, r.code, r.err);
    tk_result_free(&r);
    char *text = tk_slurp(out, NULL);
    cr_assert_not_null(text);
    cJSON *c = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(c);
    const cJSON *evs = cJSON_IsArray(c) ? c : cJSON_GetObjectItem(c, "traceEvents");
    *act_first = *grad_first = 0;
    for (int stage = 0; stage < 2; stage++) {
        /* the stage's pipeline track (pid = tid = stage): its ops and transfers in time order
         * (the export writes each track's slices by start) */
        double last_send_ts = -1;
        int last_send_act = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, evs)
        {
            const cJSON *ph = cJSON_GetObjectItem(e, "ph"), *nm = cJSON_GetObjectItem(e, "name");
            const cJSON *pid = cJSON_GetObjectItem(e, "pid"), *tid = cJSON_GetObjectItem(e, "tid");
            if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "X") != 0 || !cJSON_IsString(nm) ||
                !cJSON_IsNumber(pid) || !cJSON_IsNumber(tid) || pid->valueint != stage ||
                tid->valueint != stage)
                continue;
            const char *n = nm->valuestring;
            if (strncmp(n, "fwd ", 4) == 0 || strncmp(n, "bwd ", 4) == 0) {
                last_send_ts = -1;
                continue;
            }
            int act = strncmp(n, "send_act ", 9) == 0, grad = strncmp(n, "send_grad ", 10) == 0;
            if (!act && !grad)
                continue;
            if (last_send_ts >= 0) {
                *act_first += last_send_act;
                *grad_first += !last_send_act;
                last_send_ts = -1;
                continue;
            }
            last_send_ts = cJSON_GetObjectItem(e, "ts")->valuedouble;
            last_send_act = act;
        }
    }
    cJSON_Delete(c);
}

/* Megatron's combined send_forward_backward_recv_forward_backward posts its two sends in
 * another order when batch_p2p_comm is off: _batched_p2p_ops (the default, tests/data/kineto/mg)
 * the gradient's before the activations', _p2p_ops the activations' first
 * (tests/data/kineto/mgs: the same job as mg with --no-batch-p2p, recorded and cut the same
 * way). Before, both were read in the batch's order: in mgs every combined call's two sends
 * were told the wrong way round, each timed from the other's start. Now the frame that posts
 * them (_p2p_ops) says which order; the rest of the analysis as for mg. */
Test(kineto, megatron_sends_in_the_order_each_p2p_mode_posts_them)
{
    int act_first, grad_first;
    combined_sends(DATA "/mg", "mg.chrome.json", &act_first, &grad_first);
    cr_expect(grad_first >= 4 && act_first == 0, "batched: %d pairs with the gradient first, %d "
              "with the activations", grad_first, act_first);
    combined_sends(DATA "/mgs", "mgs.chrome.json", &act_first, &grad_first);
    cr_expect(act_first >= 4 && grad_first == 0, "one by one: %d pairs with the activations "
              "first, %d with the gradient", act_first, grad_first);
    cJSON *j = report_json(DATA "/mgs");
    cJSON *p = cJSON_GetObjectItem(j, "pipeline");
    int M = cJSON_GetObjectItem(p, "microbatches")->valueint;
    cr_assert(cJSON_GetObjectItem(p, "stages")->valueint == 2 && M == 4 &&
              cJSON_GetObjectItem(p, "virtual_stages")->valueint == 2);
    int n_steps = cJSON_GetArraySize(cJSON_GetObjectItem(j, "steps"));
    cJSON *l;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(j, "links"))
    {
        int src = cJSON_GetObjectItem(l, "src")->valueint;
        int act = strcmp(cJSON_GetObjectItem(l, "kind")->valuestring, "act") == 0;
        cr_expect_eq(cJSON_GetObjectItem(l, "messages")->valueint,
                     n_steps * M * ((src == 0) == act ? 2 : 1), "link %d %s", src,
                     act ? "act" : "grad");
    }
    check_stages_against_truth(j, DATA "/mgs", 2, M, 2);
    cJSON_Delete(j);
}

/* torch writes the Python tracer's events after every CPU op: past the reorder window (65 536
 * events, some 7 steps of this small Megatron job) they came back as too late and were dropped,
 * and a 16-step run read as 7 micro-batches with its layers on the wrong pieces. The Megatron
 * recording converted with a window of 1024 events: the module events come back as a second
 * sorted run, merged in; the analysis is the one of the default window, where all fit. */
Test(kineto, module_events_after_every_cpu_op_merge_back_beyond_the_window)
{
    const char *dir = DATA "/mg", *pdir = tk_path("mg_runs");
    cr_assert_eq(mkdir(pdir, 0755), 0);
    for (int k = 0; k < 2; k++) {
        char src[512], dst[512];
        snprintf(src, sizeof src, "%s/rank-%d.json.gz", dir, k);
        snprintf(dst, sizeof dst, "%s/rank-%d.pft", pdir, k);
        pp_kineto_options o;
        pp_kineto_options_default(&o);
        o.reorder_window = 1024;
        pp_kineto_stats s;
        cr_assert_eq(pp_kineto_convert(src, dst, &o, &s), PP_OK, "%s", pp_error_message());
        cr_expect_eq(s.runs, 2, "rank %d: the CPU ops, then the Python events", k);
        cr_expect_eq(s.dropped_late, 0, "rank %d", k);
    }
    cJSON *want = report_json(dir), *got = report_json(pdir);
    static const char *const same[] = {"pipeline", "layers", "links", "stages", "aggregates"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        char *a = cJSON_PrintUnformatted(cJSON_GetObjectItem(want, same[i]));
        char *b = cJSON_PrintUnformatted(cJSON_GetObjectItem(got, same[i]));
        cr_assert(a && b);
        cr_expect_str_eq(b, a, "'%s' differs", same[i]);
        free(a);
        free(b);
    }
    cr_expect_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(got, "run"), "dropped")->valueint, 0);
    cJSON_Delete(want);
    cJSON_Delete(got);
}

/* The DeepSpeed recording without its Python events (a job profiled without with_stack): its
 * steps, sends and receives remain, no compute op. Before, that read as GPipe with a 99% bubble
 * of transfers; now the report says it found no forward or backward op and what the trace
 * needs, claims no schedule, and pprof-tune refuses with exit 2 instead of extracting nothing. */
Test(kineto, a_trace_without_compute_ops_says_so)
{
    const char *dir = tk_path("nostack");
    cr_assert_eq(mkdir(dir, 0755), 0);
    for (int r = 0; r < 2; r++) {
        char dst[512];
        char *text = ds_recording(r, dir, dst, sizeof dst);
        cJSON *root = cJSON_Parse(text);
        free(text);
        cr_assert_not_null(root);
        cJSON *evs = cJSON_GetObjectItem(root, "traceEvents");
        for (int i = cJSON_GetArraySize(evs) - 1; i >= 0; i--) {
            const cJSON *cat = cJSON_GetObjectItem(cJSON_GetArrayItem(evs, i), "cat");
            if (cJSON_IsString(cat) && strcmp(cat->valuestring, "python_function") == 0)
                cJSON_DeleteItemFromArray(evs, i);
        }
        char *out = cJSON_PrintUnformatted(root);
        tk_write_text(dst, out);
        free(out);
        cJSON_Delete(root);
    }
    cJSON *j = report_json(dir);
    cJSON *p = cJSON_GetObjectItem(j, "pipeline");
    cr_expect_eq(cJSON_GetObjectItem(p, "stages")->valueint, 2);
    cJSON *sched = cJSON_GetObjectItem(p, "schedule");
    cr_expect(!cJSON_IsString(sched) || !sched->valuestring[0], "a schedule claimed: %s",
              cJSON_IsString(sched) ? sched->valuestring : "");
    char *w = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"),
                                                         "warnings"));
    cr_expect(w && strstr(w, "no forward or backward op") && strstr(w, "with_stack=True"),
              "warnings: %s", w ? w : "(none)");
    free(w);
    cJSON_Delete(j);
    const char *args[] = {dir, NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_expect_eq(r.code, 0);
    cr_expect(strstr(r.out, "no forward or backward op recognised") != NULL, "%s", r.out);
    tk_result_free(&r);
    const char *targv[] = {PP_BUILD_DIR "/tools/pprof-tune", dir, NULL};
    r = tk_runv(targv, NULL);
    cr_expect_eq(r.code, 2, "pprof-tune exit %d", r.code);
    cr_expect(strstr(r.err, "no forward or backward op") != NULL, "%s", r.err);
    tk_result_free(&r);
}

/* rank1 of the interleaved run as if from another host whose clock is 2.5 s ahead. */
static void shifted_copy(const char *src, const char *dst, const char *host, double shift_us)
{
    size_t len;
    char *text = slurp_any(src, &len);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(root);
    cJSON_ReplaceItemInObject(root, "host_name", cJSON_CreateString(host));
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents"))
    {
        cJSON *ts = cJSON_GetObjectItem(e, "ts");
        if (cJSON_IsNumber(ts))
            cJSON_SetNumberValue(ts, ts->valuedouble + shift_us);
    }
    char *out = cJSON_PrintUnformatted(root);
    tk_write_text(dst, out);
    free(out);
    cJSON_Delete(root);
}

/* torch's _PipelineScheduleRuntime (tests/data/kineto/il) sends asynchronously: a send's range
 * runs from its isend to its wait, over the stage's next actions. Its own part ends where the
 * stage's next op begins (docs/metrics.md "Links"), and only that part hides the stage's time
 * between its ops (pp_stage_step.gap_ns): the Python between the schedule's actions (its RECV
 * actions before they post, WAIT_SEND, the calls around them) is 0.05-0.2 ms a compute op on
 * the 2-core VM, which pprof-tune charges after each op (op_gap_us). While the whole range
 * counted, the sends covered nearly all of it: 10-18 us an op read, below the 5% of an op that
 * is charged. */
Test(kineto, the_time_between_ops_beside_asynchronous_sends)
{
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(DATA "/il", NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_gt(a->n_steps, 0);
    cr_assert_eq(a->n_steps, 3);
    for (int s = 0; s < a->S; s++) {
        double per_op[3];
        for (size_t i = 0; i < 3; i++) {
            const pp_stage_step *ss = &a->steps[i].stage[s];
            cr_assert_gt(ss->n_compute, 0, "step %zu stage %d", i, s);
            per_op[i] = ss->gap_ns / ss->n_compute;
            cr_expect_gt(per_op[i], 40e3, "step %zu stage %d: %.1f us an op", i, s,
                         per_op[i] * 1e-3);
        }
        /* the median over the steps (one of them holds a 4 ms stall of gloo's before a send
         * was posted, outside every op) */
        double lo = fmin(per_op[0], per_op[1]), hi = fmax(per_op[0], per_op[1]);
        double med = fmax(lo, fmin(hi, per_op[2]));
        cr_expect(med > 50e3 && med < 250e3, "stage %d: %.1f us an op", s, med * 1e-3);
    }
    pp_analysis_free(a);
    const char *argv[] = {PPTUNE, DATA "/il", "-v", NULL};
    tk_result r = tk_runv(argv, NULL);
    cr_expect_eq(r.code, 0, "%s", r.err);
    cr_expect(r.err && strstr(r.err, "a compute op between the stage's ops"), "%s", r.err);
    tk_result_free(&r);
}

/* torch's _PipelineScheduleRuntime posts each receive (a RECV action) one or more actions
 * before the compute that waits for it, and that compute's action waits for it first: the
 * receive's range covers the compute ops between and, after them, the stage's own Python up to
 * the compute that needs it. Past its message's handing over that stretch is the stage's time
 * between ops (docs/metrics.md "Links"), and posting it is its receiver's own time. Read so, the
 * il recording's second stage spends a median 120 us an op between its ops (53 us while the
 * ranges counted whole), and its own layout's self-check reads +13% instead of +35% (both its
 * stages stall 3-4 ms in two of its three steps, which no cost explains). */
Test(kineto, receives_posted_early_hold_the_stages_own_time)
{
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(DATA "/il", NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->n_steps, 3);
    double per_op[3];
    for (size_t i = 0; i < 3; i++) {
        const pp_stage_step *ss = &a->steps[i].stage[1];
        cr_assert_gt(ss->n_compute, 0);
        per_op[i] = ss->gap_ns / ss->n_compute;
    }
    double lo = fmin(per_op[0], per_op[1]), hi = fmax(per_op[0], per_op[1]);
    double med = fmax(lo, fmin(hi, per_op[2]));
    cr_expect(med > 90e3, "stage 1: %.1f us an op", med * 1e-3);
    /* the early receives' postings are their receivers' time: 12 to 19 samples a link, where
     * the receives that came after their message gave 4, 0, 0 and 1 */
    for (size_t i = 0; i < a->n_links; i++)
        cr_expect_gt(a->links[i].recv_time_ns.count, 8u, "link %zu", i);
    pp_analysis_free(a);
    const char *argv[] = {PPTUNE, DATA "/il", NULL};
    tk_result r = tk_runv(argv, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    const char *sc = strstr(r.out, "(error ");
    cr_assert_not_null(sc, "%s", r.out);
    double err = strtod(sc + 7, NULL);
    cr_expect(fabs(err) < 20, "self-check %+.2f%%", err);
    tk_result_free(&r);
}

/* The senders' and receivers' own times keep their samples (pp_alink.send_sample,
 * recv_sample: the ones behind send_time_ns and recv_time_ns), and pprof-tune replays their
 * variation where the run's own steps ask for it (docs/sim-dist.md "Senders' and receivers'
 * own time"). The Megatron-LM recording (tests/data/kineto/mg: gloo's sends and receives posted
 * by Python, a tail of slow posts): its own layout's self-check reads +4.0% with it, +8.3% with
 * the cost file's medians alone. */
Test(kineto, the_senders_and_receivers_own_times_vary_as_measured)
{
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(DATA "/mg", NULL, &a), PP_OK, "%s", pp_error_message());
    int with_samples = 0;
    for (size_t i = 0; i < a->n_links; i++) {
        const pp_alink *l = &a->links[i];
        const pp_astats *st[2] = {&l->send_time_ns, &l->recv_time_ns};
        const double *smp[2] = {l->send_sample, l->recv_sample};
        uint32_t n[2] = {l->n_send_sample, l->n_recv_sample};
        for (int k = 0; k < 2; k++) {
            cr_assert_eq(n[k], st[k]->count, "link %zu kind %d: %u samples of %llu", i, k, n[k],
                         (unsigned long long)st[k]->count);
            double lo = HUGE_VAL, hi = -HUGE_VAL;
            for (uint32_t j = 0; j < n[k]; j++) {
                lo = fmin(lo, smp[k][j]);
                hi = fmax(hi, smp[k][j]);
            }
            if (n[k]) {
                cr_expect(lo <= st[k]->median && st[k]->median <= hi, "link %zu kind %d", i, k);
                with_samples++;
            }
        }
    }
    cr_expect_gt(with_samples, 0);
    pp_analysis_free(a);
    const char *argv[] = {PPTUNE, DATA "/mg", "-v", NULL};
    tk_result r = tk_runv(argv, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_expect(strstr(r.err, "senders' and receivers' own times vary as measured"), "%s", r.err);
    const char *sc = strstr(r.out, "(error ");
    cr_assert_not_null(sc, "%s", r.out);
    double err = strtod(sc + 7, NULL);
    cr_expect(fabs(err) < 6, "self-check %+.2f%%", err);
    tk_result_free(&r);
}

Test(kineto, ranks_on_two_hosts_are_aligned_by_their_sends_and_receives)
{
    cr_assert_eq(mkdir(tk_path("hosts"), 0755), 0);
    shifted_copy(DATA "/il/rank0.json", tk_path("hosts/rank0.json"), "vm", 0);
    shifted_copy(DATA "/il/rank1.json.gz", tk_path("hosts/rank1.json"), "other-host", 2.5e6);
    pp_analysis *one = NULL, *two = NULL;
    cr_assert_eq(pp_analyze_dir(DATA "/il", NULL, &one), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_analyze_dir(tk_path("hosts"), NULL, &two), PP_OK, "%s", pp_error_message());
    cr_assert_eq(one->files[1].clock_status, PP_CLOCK_SHARED, "one host: one clock");
    cr_assert_eq(two->files[1].clock_status, PP_CLOCK_ESTIMATED);
    /* the estimate is bounded by the gloo messages' latencies: well under a millisecond */
    cr_assert_float_eq(two->files[1].clock_offset_ns, 2.5e9, 1e6, "offset %.0f ns",
                       two->files[1].clock_offset_ns);
    cr_assert_eq(two->n_steps, one->n_steps);
    cr_assert_float_eq(two->step_ns.mean, one->step_ns.mean, 0.01 * one->step_ns.mean,
                       "step %.0f ns aligned, %.0f ns on one clock", two->step_ns.mean,
                       one->step_ns.mean);
    cr_assert_float_eq(two->bubble_ratio, one->bubble_ratio, 0.02);
    pp_analysis_free(one);
    pp_analysis_free(two);
}

/* ---- process groups: which ranks make one pipeline ---- */

static char *repeat(const char *head, const char *unit, size_t n, const char *tail);

/* A copy of a recorded trace as global rank `rank` of a `world`-rank job whose distributedInfo
 * lists the groups `groups` (a JSON array, as torch writes pg_config), its times stretched by
 * `scale` from its first event (a slower replica). */
static void grouped_copy(const char *src, const char *dst, int rank, int world,
                         const char *groups, double scale)
{
    size_t len;
    char *text = slurp_any(src, &len);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(root);
    cJSON *info = cJSON_CreateObject();
    cJSON_AddStringToObject(info, "backend", "gloo");
    cJSON_AddNumberToObject(info, "rank", rank);
    cJSON_AddNumberToObject(info, "world_size", world);
    cJSON *pg = cJSON_Parse(groups);
    cr_assert_not_null(pg, "groups: %s", groups);
    cJSON_AddItemToObject(info, "pg_config", pg);
    cJSON_ReplaceItemInObject(root, "distributedInfo", info);
    double t0 = INFINITY;
    cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents"))
    {
        cJSON *ts = cJSON_GetObjectItem(e, "ts");
        if (cJSON_IsNumber(ts) && ts->valuedouble < t0)
            t0 = ts->valuedouble;
    }
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents"))
    {
        cJSON *ts = cJSON_GetObjectItem(e, "ts"), *dur = cJSON_GetObjectItem(e, "dur");
        if (cJSON_IsNumber(ts))
            cJSON_SetNumberValue(ts, t0 + (ts->valuedouble - t0) * scale);
        if (cJSON_IsNumber(dur))
            cJSON_SetNumberValue(dur, dur->valuedouble * scale);
    }
    char *out = cJSON_PrintUnformatted(root);
    tk_write_text(dst, out);
    free(out);
    cJSON_Delete(root);
}

/* The recorded 2-rank interleaved run as two data-parallel replicas of it on 4 ranks: stage s
 * of replica d is global rank at[d][s]; replica 1 runs 1.5 times slower. desc_pp / desc_dp
 * describe the groups ("undefined": as plain new_group calls leave them). */
static void make_replicas_of(const char *dir, const int at[2][2], const char *desc_pp,
                             const char *desc_dp, const char *const src[2])
{
    cr_assert_eq(mkdir(dir, 0755), 0);
    for (int d = 0; d < 2; d++)
        for (int st = 0; st < 2; st++) {
            int r = at[d][st];
            char groups[512], path[600];
            snprintf(groups, sizeof groups,
                     "[{\"pg_name\":\"0\",\"pg_desc\":\"default_pg\",\"pg_size\":4,"
                     "\"ranks\":[0,1,2,3]},"
                     "{\"pg_name\":\"1\",\"pg_desc\":\"%s\",\"pg_size\":2,\"ranks\":[%d,%d]},"
                     "{\"pg_name\":\"2\",\"pg_desc\":\"%s\",\"pg_size\":2,\"ranks\":[%d,%d]}]",
                     desc_pp, at[d][0], at[d][1], desc_dp, at[0][st], at[1][st]);
            snprintf(path, sizeof path, "%s/rank%d.json", dir, r);
            grouped_copy(src[st], path, r, 4, groups, d ? 1.5 : 1.0);
        }
}

static void make_replicas(const char *dir, const int at[2][2], const char *desc_pp,
                          const char *desc_dp)
{
    static const char *const src[2] = {DATA "/il/rank0.json", DATA "/il/rank1.json.gz"};
    make_replicas_of(dir, at, desc_pp, desc_dp, src);
}

/* DeepSpeed names none of its process groups. With its default topology (rank = stage x dp +
 * replica) a rank's data-parallel group is consecutive ranks and its pipeline's ranks dp apart:
 * the DeepSpeed recording's two ranks copied into 2 replicas x 2 stages that way are read as
 * such, no warning. The same copies placed replicas outermost (rank = replica x 2 + stage, which
 * DeepSpeed's default does not do) give groups of the same shapes, but the place they would
 * give some ranks disagrees with what they ran (a first stage that receives activations): the
 * groups are not used, each rank a stage, with a warning. */
Test(kineto, deepspeed_groups_by_their_shape_and_what_each_rank_ran)
{
    static const char *const src[2] = {DATA "/ds/rank0.json.gz", DATA "/ds/rank1.json.gz"};
    static const int ds_at[2][2] = {{0, 2}, {1, 3}}, outer_at[2][2] = {{0, 1}, {2, 3}};
    const char *dir = tk_path("ds-dp");
    make_replicas_of(dir, ds_at, "undefined", "undefined", src);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_expect_eq(a->S, 2);
    cr_expect_eq(a->dp, 2);
    cr_expect(!strstr(a->warnings, "process groups"), "%s", a->warnings);
    for (size_t i = 0; i < a->n_files; i++)
        cr_expect(a->files[i].pipe_known && a->files[i].pipe_rank == a->files[i].rank / 2 &&
                      a->files[i].replica == a->files[i].rank % 2,
                  "rank %d: place %d, replica %d", a->files[i].rank, a->files[i].pipe_rank,
                  a->files[i].replica);
    pp_analysis_free(a);

    const char *dir2 = tk_path("ds-outer");
    make_replicas_of(dir2, outer_at, "undefined", "undefined", src);
    cr_assert_eq(pp_analyze_dir(dir2, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_expect_eq(a->dp, 0);
    cr_expect(strstr(a->warnings, "process groups"), "%s", a->warnings); /* not used, said so */
    pp_analysis_free(a);
}

/* torchtitan's DeviceMesh ("pp", "dp": the pipeline outermost, so rank 1 is stage 0 of replica
 * 1) and Megatron-LM's group names (the replicas outermost): the analysis reads two stages and
 * two replicas, each replica's ranks at their places in their pipeline; replica 0's analysis is
 * the original run's, replica 1's is 1.5 times slower; a replica past the last is refused. */
Test(kineto, process_groups_name_the_pipeline_and_its_data_parallel_replicas)
{
    pp_analysis *one = NULL;
    cr_assert_eq(pp_analyze_dir(DATA "/il", NULL, &one), PP_OK, "%s", pp_error_message());
    static const struct {
        const char *dir, *pp, *dp;
        int at[2][2];
    } layouts[] = {
        {"mesh", "mesh_pp", "mesh_dp", {{0, 2}, {1, 3}}},
        {"megatron", "PIPELINE_MODEL_PARALLEL_GROUP", "DATA_PARALLEL_GROUP", {{0, 1}, {2, 3}}},
    };
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
        const char *dir = tk_path(layouts[l].dir);
        make_replicas(dir, layouts[l].at, layouts[l].pp, layouts[l].dp);
        for (int d = 0; d < 2; d++) {
            pp_analysis_options o;
            pp_analysis_options_default(&o);
            o.replica = d;
            pp_analysis *a = NULL;
            cr_assert_eq(pp_analyze_dir(dir, &o, &a), PP_OK, "%s", pp_error_message());
            cr_assert_eq(a->S, one->S, "%s: %d stages, the pipeline has %d", dir, a->S, one->S);
            cr_assert_eq(a->dp, 2, "%s: %d replicas", dir, a->dp);
            cr_assert_eq(a->n_steps, one->n_steps);
            double want = one->step_ns.mean * (d ? 1.5 : 1.0);
            cr_assert_float_eq(a->step_ns.mean, want, 0.01 * want,
                               "%s replica %d: step %.0f ns, %.0f ns expected", dir, d,
                               a->step_ns.mean, want);
            cr_assert_float_eq(a->bubble_ratio, one->bubble_ratio, 0.02);
            for (size_t i = 0; i < a->n_files; i++) {
                int r = a->files[i].rank;
                int rd = layouts[l].at[1][0] == r || layouts[l].at[1][1] == r;
                int place = layouts[l].at[rd][1] == r;
                cr_assert_eq(a->files[i].replica, rd, "%s: rank %d's replica", dir, r);
                cr_assert_eq(a->files[i].pipe_rank, place, "%s: rank %d's stage", dir, r);
            }
            cr_assert_null(strstr(a->warnings, "process group"), "%s", a->warnings);
            pp_analysis_free(a);
        }
        pp_analysis_options o;
        pp_analysis_options_default(&o);
        o.replica = 2;
        pp_analysis *a = NULL;
        cr_assert_eq(pp_analyze_dir(dir, &o, &a), PP_ERR_INVALID);
        cr_assert(strstr(pp_error_message(), "2 data-parallel replica(s)"), "%s",
                  pp_error_message());
        pp_error_clear();
    }
    pp_analysis_free(one);
    /* a recorded job of that mesh (torch_pipe.py --dp 2 --mesh pp,dp, Interleaved1F1B, 2
     * chunks a rank): ranks 0 and 2 make replica 0 */
    pp_analysis *rec = NULL;
    cr_assert_eq(pp_analyze_dir(DATA "/dp", NULL, &rec), PP_OK, "%s", pp_error_message());
    cr_assert_eq(rec->S, 2);
    cr_assert_eq(rec->v, 2);
    cr_assert_eq(rec->dp, 2);
    cr_assert_geq(rec->n_steps, 2);
    for (size_t i = 0; i < rec->n_files; i++) {
        cr_assert_eq(rec->files[i].pipe_rank, rec->files[i].rank / 2, "rank %d's stage",
                     rec->files[i].rank);
        cr_assert_eq(rec->files[i].replica, rec->files[i].rank % 2);
    }
    pp_analysis_free(rec);
}

/* Groups that name no pipeline (plain new_group calls), and pipelines that contradict each
 * other: ranks are read as stages, as before, and the analysis says why. */
Test(kineto, unnamed_or_contradicting_groups_are_warned_about)
{
    static const int at[2][2] = {{0, 2}, {1, 3}};
    const char *dir = tk_path("unnamed");
    make_replicas(dir, at, "undefined", "undefined");
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->dp, 0);
    cr_assert(strstr(a->warnings, "4 trace(s) come from processes in process groups smaller "
                                  "than the job, none described as the pipeline's"),
              "%s", a->warnings);
    pp_analysis_free(a);

    /* ranks 0 and 2 both at place 0 of the pipeline whose lowest rank is 0 */
    const char *dir2 = tk_path("clash");
    cr_assert_eq(mkdir(dir2, 0755), 0);
    static const char *const src[2] = {DATA "/il/rank0.json", DATA "/il/rank1.json.gz"};
    for (int r = 0; r < 4; r++) {
        char path[600];
        snprintf(path, sizeof path, "%s/rank%d.json", dir2, r);
        grouped_copy(src[r / 2], path, r, 4,
                     r % 2 ? "[{\"pg_desc\":\"mesh_pp\",\"ranks\":[1,0]}]"
                           : "[{\"pg_desc\":\"mesh_pp\",\"ranks\":[0,1]}]",
                     1.0);
    }
    cr_assert_eq(pp_analyze_dir(dir2, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert(strstr(a->warnings, "pipeline process groups are not used"), "%s", a->warnings);
    cr_assert_eq(a->dp, 0);
    pp_analysis_free(a);
}

/* Four processes' traces concatenated into one file (the whole analysis's fuzz seed of the
 * converted synthetic 2 x 2 run): read as one damaged trace, one stage computes longer than its
 * step; the analysis says so rather than reporting a negative bubble as if it were one. */
Test(kineto, one_file_of_four_processes_is_warned_about)
{
    const char *path = PP_TEST_DATA_DIR "/fuzz/analysis/torch_dp_mesh.pft";
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_files(&path, 1, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->S, 1);
    cr_assert_gt(a->stages[0].busy_ns, a->step_ns.mean);
    cr_assert(strstr(a->warnings, "stage 0 computes") &&
                  strstr(a->warnings, "longer than the step itself"),
              "%s", a->warnings);
    pp_analysis_free(a);
}

/* What the importer writes into the header from distributedInfo.pg_config, on groups good,
 * odd and hostile: never a crash, never a place it cannot prove. */
Test(kineto, the_pipeline_group_in_the_header_only_when_it_places_the_rank)
{
    static const struct {
        const char *info;
        uint32_t flags;
        int place, size, first;
    } cases[] = {
        {"{\"rank\":5,\"world_size\":8,\"pg_config\":[{\"pg_desc\":\"mesh_pp\","
         "\"ranks\":[1,3,5,7]}]}", PP_TRACE_PIPELINE_GROUP, 2, 4, 1},
        /* keys in another order, the rank after the groups */
        {"{\"pg_config\":[{\"ranks\":[6,2],\"pg_desc\":\"my_pipeline\"}],\"rank\":2}",
         PP_TRACE_PIPELINE_GROUP, 1, 2, 2},
        /* the rank is not in the group, or twice in it */
        {"{\"rank\":4,\"pg_config\":[{\"pg_desc\":\"mesh_pp\",\"ranks\":[1,3]}]}",
         PP_TRACE_OTHER_GROUPS, 0, 0, 0},
        {"{\"rank\":1,\"pg_config\":[{\"pg_desc\":\"mesh_pp\",\"ranks\":[1,1]}]}",
         PP_TRACE_OTHER_GROUPS, 0, 0, 0},
        /* megatron-core's groups (pp 2 x dp 2): the experts' tensor x pipeline group holds
         * "PIPELINE" too, and is no pipeline */
        {"{\"rank\":3,\"world_size\":4,\"pg_config\":[{\"pg_desc\":\"default_pg\","
         "\"ranks\":[0,1,2,3]},{\"pg_desc\":\"DATA_PARALLEL_GROUP\",\"ranks\":[2,3]},"
         "{\"pg_desc\":\"PIPELINE_MODEL_PARALLEL_GROUP\",\"ranks\":[1,3]},"
         "{\"pg_desc\":\"EXPERT_TENSOR_MODEL_PIPELINE_PARALLEL_GROUP\",\"ranks\":[1,3]}]}",
         PP_TRACE_PIPELINE_GROUP, 1, 2, 1},
        /* two pipelines: which? */
        {"{\"rank\":1,\"pg_config\":[{\"pg_desc\":\"mesh_pp\",\"ranks\":[0,1]},"
         "{\"pg_desc\":\"PIPELINE_X\",\"ranks\":[1,2]}]}", PP_TRACE_OTHER_GROUPS, 0, 0, 0},
        /* ranks that are no whole numbers, huge, negative, strings: the group is not read */
        {"{\"rank\":1,\"pg_config\":[{\"pg_desc\":\"mesh_pp\",\"ranks\":[0,1.5]}]}", 0, 0,
         0, 0},
        {"{\"rank\":1,\"pg_config\":[{\"pg_desc\":\"mesh_pp\",\"ranks\":[1,1e300]}]}", 0,
         0, 0, 0},
        {"{\"rank\":1,\"pg_config\":[{\"pg_desc\":\"mesh_pp\",\"ranks\":[-1,1]}]}", 0, 0, 0,
         0},
        {"{\"rank\":1,\"pg_config\":[{\"pg_desc\":\"mesh_pp\",\"ranks\":[\"0\",1]}]}", 0,
         0, 0, 0},
        {"{\"rank\":1,\"pg_config\":[{\"pg_desc\":\"mesh_pp\",\"ranks\":[[0],{\"a\":1},1]}]}",
         0, 0, 0, 0},
        /* wrong types around the groups */
        {"{\"rank\":1,\"pg_config\":{\"pg_desc\":\"mesh_pp\"}}", 0, 0, 0, 0},
        {"{\"rank\":1,\"pg_config\":[1,\"x\",null,[{\"pg_desc\":\"mesh_pp\"}]]}", 0, 0, 0,
         0},
        {"{\"rank\":1,\"pg_config\":[{\"pg_desc\":7,\"ranks\":[0,1]}]}", 0, 0, 0, 0},
        /* groups smaller than the world, none named: a warning's worth */
        {"{\"rank\":1,\"world_size\":4,\"pg_config\":[{\"pg_desc\":\"default_pg\","
         "\"ranks\":[0,1,2,3]},{\"pg_desc\":\"undefined\",\"ranks\":[1,3]}]}",
         PP_TRACE_OTHER_GROUPS, 0, 0, 0},
        /* only the world's group */
        {"{\"rank\":1,\"world_size\":2,\"pg_config\":[{\"pg_desc\":\"default_pg\","
         "\"ranks\":[0,1]}]}", 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[1024];
        snprintf(json, sizeof json,
                 "{\"distributedInfo\":%s,\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\","
                 "\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":10,\"dur\":5}]}",
                 cases[i].info);
        const char *out = tk_path("pg.pft");
        unlink(out);
        pp_kineto_stats st;
        cr_assert_eq(pp_kineto_convert_mem(json, strlen(json), out, NULL, &st), PP_OK,
                     "case %zu: %s", i, pp_error_message());
        pp_trace *t = NULL;
        cr_assert_eq(pp_trace_load(out, &t), PP_OK, "case %zu", i);
        cr_assert_eq(t->header.flags, cases[i].flags, "case %zu (%s): flags %u", i, cases[i].info,
                     t->header.flags);
        cr_assert_eq(st.pipe_flags, cases[i].flags, "case %zu: stats", i);
        if (cases[i].flags & PP_TRACE_PIPELINE_GROUP) {
            cr_assert_eq(t->header.pipe_rank, cases[i].place, "case %zu", i);
            cr_assert_eq(t->header.pipe_size, cases[i].size, "case %zu", i);
            cr_assert_eq(t->header.pipe_first, cases[i].first, "case %zu", i);
        } else {
            cr_assert_eq(t->header.pipe_rank, 0);
            cr_assert_eq(t->header.pipe_size, 0);
        }
        pp_trace_free(t);
    }
    /* a group of more ranks than any pipeline has: not read, in bounded memory */
    char *big = repeat("{\"distributedInfo\":{\"rank\":1,\"pg_config\":[{\"pg_desc\":"
                       "\"mesh_pp\",\"ranks\":[1",
                       ",2", 200000,
                       "]}]},\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":"
                       "\"a\",\"pid\":1,\"tid\":1,\"ts\":10,\"dur\":5}]}");
    const char *out = tk_path("pgbig.pft");
    pp_kineto_stats st;
    cr_assert_eq(pp_kineto_convert_mem(big, strlen(big), out, NULL, &st), PP_OK, "%s",
                 pp_error_message());
    cr_assert_eq(st.pipe_flags, 0);
    free(big);
}

/* ---- hostile input ---- */

static char *repeat(const char *head, const char *unit, size_t n, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *b = malloc(hl + ul * n + tl + 1), *p = b;
    memcpy(p, head, hl), p += hl;
    for (size_t i = 0; i < n; i++)
        memcpy(p, unit, ul), p += ul;
    memcpy(p, tail, tl + 1);
    return b;
}

Test(kineto, hostile_inputs_give_an_error_or_a_partial_trace_never_a_crash)
{
    static const struct {
        const char *what, *text;
        int ok; /* 1: converts (partially), 0: refused with a message */
    } cases[] = {
        {"empty", "", 0},
        {"not JSON", "PPFT garbage \x01\x02", 0},
        {"a number", "42", 0},
        {"no traceEvents", "{\"schemaVersion\":1,\"x\":[1,2,{\"a\":null}]}", 0},
        {"truncated in the first event", "{\"traceEvents\":[{\"ph\":\"X\",\"ts\":1", 0},
        {"truncated after an event",
         "{\"traceEvents\":[" EV("cpu_op", "a", 1, 1, 1) ",{\"ph\":\"X\",\"na", 1},
        {"bad number", "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"ts\":1.2.3}]}", 0},
        {"huge ids", "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":"
                     "1e300,\"tid\":-5,\"ts\":1,\"dur\":1,\"args\":{\"correlation\":1e30,"
                     "\"device\":4294967296123,\"stream\":-1,\"bytes\":1e40}},"
                     EV("cpu_op", "a", 99999999999999, 1, 1) "]}", 1},
        {"NaN and negative durations",
         "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"a\",\"tid\":1,\"ts\":NaN,"
         "\"dur\":1},{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"b\",\"tid\":1,\"ts\":5,\"dur\":"
         "-3},{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"c\",\"tid\":1,\"ts\":Infinity,\"dur\":1},"
         "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"d\",\"tid\":1,\"ts\":1e300,\"dur\":1}]}", 1},
        {"wrong types",
         "{\"traceEvents\":[7,\"x\",null,[1],{\"ph\":5,\"cat\":[],\"name\":{},\"tid\":true,"
         "\"ts\":\"1\",\"dur\":{}},{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"ok\",\"tid\":1,"
         "\"ts\":1,\"dur\":1,\"args\":[1,2]}],\"distributedInfo\":{\"rank\":\"zero\"},"
         "\"host_name\":7}", 1},
        {"bad escape", "{\"traceEvents\":[{\"name\":\"\\q\"}]}", 0},
        {"lone surrogate", "{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":"
                           "\"\\ud800x\\udfff\",\"tid\":1,\"ts\":1,\"dur\":1}]}", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_kineto_stats s;
        pp_trace *t = NULL;
        pp_error_clear();
        pp_status st = convert_text(cases[i].text, NULL, &s, &t);
        if (cases[i].ok) {
            cr_assert_eq(st, PP_OK, "%s: %s", cases[i].what, pp_error_message());
            pp_trace_free(t);
        } else {
            cr_assert_neq(st, PP_OK, "%s: converted", cases[i].what);
            cr_assert(pp_error_message()[0], "%s: no message", cases[i].what);
            cr_assert(!tk_exists(tk_path("syn.pft")), "%s: a file left behind", cases[i].what);
        }
        cr_assert(!tk_exists(tk_path("syn.pft.part")), "%s: the scratch file left", cases[i].what);
    }
}

/* A trace without GPU records is finished where it was written (its header rewritten, then
 * linked to the output), never over a file already there: as the writer's own O_EXCL open. */
Test(kineto, an_existing_output_is_never_replaced)
{
    const char *j = "{\"traceEvents\":[" EV("user_annotation", "PP:0F0", 1, 100, 100) ","
                    EV("cpu_op", "aten::mm", 1, 110, 20) "],\"distributedInfo\":{\"rank\":3}}";
    const char *out = tk_path("syn.pft");
    unlink(out);
    FILE *f = fopen(out, "w");
    cr_assert(f);
    fputs("someone's file", f);
    fclose(f);
    pp_kineto_stats s;
    pp_error_clear();
    pp_status st = pp_kineto_convert_mem(j, strlen(j), out, NULL, &s);
    cr_assert_eq(st, PP_ERR_IO);
    cr_assert(strstr(pp_error_message(), "syn.pft") && strstr(pp_error_message(), "exists"), "%s",
              pp_error_message());
    char buf[64] = "";
    f = fopen(out, "r");
    cr_assert(f);
    cr_assert(fgets(buf, sizeof buf, f));
    fclose(f);
    cr_assert_str_eq(buf, "someone's file");
    cr_assert(!tk_exists(tk_path("syn.pft.part")), "the scratch file left");
    /* and without it the same text converts, its header the rank's */
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(j, NULL, &s, &t), PP_OK, "%s", pp_error_message());
    cr_assert_eq(t->header.rank, 3);
    pp_trace_free(t);
    cr_assert(!tk_exists(tk_path("syn.pft.part")), "the scratch file left");
}

Test(kineto, deep_nesting_long_strings_and_many_names_stay_bounded)
{
    /* 100 000 nested arrays inside an event's args: the skip gives up at 256 */
    char *deep = repeat("{\"traceEvents\":[" EV("cpu_op", "a", 1, 1, 1) ",{\"args\":", "[",
                        100000, "]}]}");
    pp_kineto_stats s;
    cr_assert_eq(convert_text(deep, NULL, &s, NULL), PP_OK, "%s", pp_error_message());
    cr_assert(s.truncated);
    cr_assert_neq(strstr(s.problem, "nesting"), NULL, "%s", s.problem);
    free(deep);
    /* a 10 MB name: cut at 4096 bytes */
    char *big = repeat("{\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"cpu_op\",\"tid\":1,\"ts\":1,"
                       "\"dur\":1,\"name\":\"", "abcdefghij", 1000000, "\"}]}");
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(big, NULL, &s, &t), PP_OK, "%s", pp_error_message());
    cr_assert_eq(s.strings_truncated, 1);
    cr_assert_eq(strlen(t->events[0].message), 4096);
    pp_trace_free(t);
    free(big);
    /* 2000 ranges nested on one thread: the deepest beyond 1024 dropped and counted */
    FILE *f = fopen(tk_path("nest.json"), "w");
    fputs("{\"traceEvents\":[", f);
    for (int i = 0; i < 2000; i++)
        fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"n%d\",\"tid\":1,\"ts\":%d,"
                   "\"dur\":%d}", i ? "," : "", i, i + 10, 100000 - 2 * i);
    fputs("]}", f);
    fclose(f);
    unlink(tk_path("nest.pft"));
    cr_assert_eq(pp_kineto_convert(tk_path("nest.json"), tk_path("nest.pft"), NULL, &s), PP_OK);
    cr_assert_eq(s.ranges, PP_KINETO_MAX_DEPTH);
    cr_assert_eq(s.dropped_caps, 2000 - PP_KINETO_MAX_DEPTH);
}

/* ---- memory against the file's size ---- */

static void big_trace(const char *path, size_t events)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("{\"schemaVersion\":1,\"distributedInfo\":{\"rank\":0},\"traceEvents\":[\n", f);
    for (size_t i = 0; i < events; i++) {
        /* an action with two ops inside it and a send that outlives it, on 4 threads; a
         * ProfilerStep every 250 actions of thread 100, so that the steps (whose numbers the
         * analysis keeps, a few hundred bytes each) stay few */
        double t0 = 10.0 * (double)(i / 4);
        int tid = 100 + (int)(i % 4);
        if (i % 1000 == 0)
            fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":"
                       "\"ProfilerStep#%zu\",\"pid\":1,\"tid\":100,\"ts\":%.3f,\"dur\":2499}",
                    i ? "," : "", i / 1000, t0);
        fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"PP:%dF%zu\",\"pid\":1,"
                   "\"tid\":%d,\"ts\":%.3f,\"dur\":8.5,\"args\":{\"External id\":%zu}},\n"
                   "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":%d,"
                   "\"ts\":%.3f,\"dur\":2.25,\"args\":{\"External id\":%zu,\"Sequence number\":1}},\n"
                   "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"gloo:send\",\"pid\":1,"
                   "\"tid\":%d,\"ts\":%.3f,\"dur\":9.75}",
                i || i % 1000 == 0 ? "," : "", tid % 4, i % 8, tid, t0, i, tid, t0 + 1, i, tid,
                t0 + 5);
    }
    fputs("]}\n", f);
    fclose(f);
}

typedef struct rss_report {
    pp_status st, analysis;
    long maxrss_kb;
    uint64_t ranges, bytes_in, steps;
    char why[256];
} rss_report;

static rss_report convert_in_child(const char *json, const char *out)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        rss_report r = {0};
        pp_kineto_stats s;
        r.st = pp_kineto_convert(json, out, NULL, &s);
        if (r.st == PP_OK) { /* and the analysis of what it wrote */
            pp_analysis *a = NULL;
            r.analysis = pp_analyze_dir(out, NULL, &a);
            r.steps = a ? a->n_steps : 0;
            snprintf(r.why, sizeof r.why, "%s", pp_error_message());
            pp_analysis_free(a);
        }
        r.ranges = s.ranges;
        r.bytes_in = s.bytes_in;
        struct rusage u;
        getrusage(RUSAGE_SELF, &u);
        r.maxrss_kb = u.ru_maxrss;
        ssize_t k = write(fd[1], &r, sizeof r);
        _exit(k == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    rss_report r = {0};
    cr_assert_eq(read(fd[0], &r, sizeof r), (ssize_t)sizeof r);
    close(fd[0]);
    int status;
    waitpid(pid, &status, 0);
    return r;
}

Test(kineto, peak_memory_does_not_grow_with_the_file_size)
{
    /* about 20 MB and 200 MB of JSON (the bound: the window, the caps, the buffers) */
    enum { SMALL = 50000 };
    big_trace(tk_path("small.json"), SMALL);
    big_trace(tk_path("large.json"), 10 * SMALL);
    rss_report s = convert_in_child(tk_path("small.json"), tk_path("small.pft"));
    rss_report l = convert_in_child(tk_path("large.json"), tk_path("large.pft"));
    cr_assert_eq(s.st, PP_OK);
    cr_assert_eq(l.st, PP_OK);
    cr_assert_eq(s.analysis, PP_OK, "%s", s.why);
    cr_assert_eq(l.analysis, PP_OK, "%s", l.why);
    cr_assert_eq(s.steps, SMALL / 1000 - 1, "every ProfilerStep but the warm-up");
    cr_assert_eq(l.steps, 10 * SMALL / 1000 - 1);
    cr_assert_eq(s.ranges, 3 * SMALL + SMALL / 1000);
    cr_assert_eq(l.ranges, 30 * SMALL + 10 * SMALL / 1000);
    cr_log_info("peak RSS %ld KiB for %llu MB of JSON, %ld KiB for %llu MB", s.maxrss_kb,
                (unsigned long long)(s.bytes_in >> 20), l.maxrss_kb,
                (unsigned long long)(l.bytes_in >> 20));
    cr_assert_gt(l.bytes_in, 150u << 20);
#if defined(__SANITIZE_ADDRESS__)
    cr_log_info("sanitizer build: the peak RSS comparison is skipped");
#else
    cr_assert_leq(l.maxrss_kb, s.maxrss_kb + s.maxrss_kb / 2,
                  "peak RSS %ld KiB for a 10x larger file, %ld KiB for the small one",
                  l.maxrss_kb, s.maxrss_kb);
#endif
    unlink(tk_path("large.json"));
    unlink(tk_path("large.pft"));
}

/* ---- inputs and the tools ---- */

Test(kineto, input_resolution_takes_directories_files_and_cleans_up)
{
    /* TMPDIR inside the test's directory: the scratch directory must be gone afterwards */
    const char *tmp = tk_path("tmp");
    cr_assert_eq(mkdir(tmp, 0755), 0);
    setenv("TMPDIR", tmp, 1);
    pp_inputs *in = NULL;
    const char *dir[] = {DATA "/gp"};
    cr_assert_eq(pp_inputs_open(dir, 1, NULL, &in), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_inputs_count(in), 4);
    cr_assert_eq(pp_inputs_converted(in), 4);
    cr_assert_str_eq(pp_inputs_source(in, 0), DATA "/gp/rank0.pt.trace.json");
    for (size_t i = 0; i < 4; i++) {
        pp_trace *t = NULL;
        cr_assert_eq(pp_trace_load(pp_inputs_paths(in)[i], &t), PP_OK);
        cr_assert_eq(t->header.rank, (int32_t)i);
        pp_trace_free(t);
    }
    pp_inputs_close(in);
    const char *files[] = {DATA "/il/rank1.json.gz", DATA "/il/rank0.json"};
    cr_assert_eq(pp_inputs_open(files, 2, NULL, &in), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_inputs_count(in), 2);
    cr_assert_str_empty(pp_inputs_notes(in));
    pp_inputs_close(in);
    /* two profiling cycles of one rank: said */
    const char *twice[] = {DATA "/il/rank0.json", DATA "/gp/rank0.pt.trace.json"};
    cr_assert_eq(pp_inputs_open(twice, 2, NULL, &in), PP_OK, "%s", pp_error_message());
    cr_assert_neq(strstr(pp_inputs_notes(in), "rank 0 again"), NULL, "%s", pp_inputs_notes(in));
    pp_inputs_close(in);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s)\"", tmp);
    cr_assert_eq(system(cmd), 0, "the scratch directories were not removed");
    /* pprof-report's own Chrome export beside the traces is not taken for one */
    cr_assert_eq(mkdir(tk_path("withexport"), 0755), 0);
    char cmd2[1024];
    snprintf(cmd2, sizeof cmd2, "cp %s %s/", DATA "/il/rank0.json", tk_path("withexport"));
    cr_assert_eq(system(cmd2), 0);
    tk_write_text(tk_path("withexport/chrome.json"),
                  "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"generator\": \"pipeprof "
                  "pprof-report\", \"first_step\": 4}, \"traceEvents\": []}");
    const char *wx[] = {tk_path("withexport")};
    cr_assert_eq(pp_inputs_open(wx, 1, NULL, &in), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_inputs_count(in), 1, "the export is no rank");
    pp_inputs_close(in);
    /* a JSON that is not a trace, and a directory without traces */
    tk_write_text(tk_path("x.json"), "{\"summary_version\":1}");
    const char *bad[] = {tk_path("x.json")};
    cr_assert_eq(pp_inputs_open(bad, 1, NULL, &in), PP_ERR_INVALID);
    cr_assert_neq(strstr(pp_error_message(), "not a run directory"), NULL);
    cr_assert_eq(mkdir(tk_path("empty"), 0755), 0);
    const char *empty[] = {tk_path("empty")};
    cr_assert_eq(pp_inputs_open(empty, 1, NULL, &in), PP_ERR_INVALID);
    cr_assert_neq(strstr(pp_error_message(), "no trace files"), NULL);
    unsetenv("TMPDIR");
}

Test(kineto, pprof_report_import_writes_a_run_directory_the_tools_read)
{
    const char *out = tk_path("imported");
    const char *args[] = {"--import", out, DATA "/il", NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert(tk_exists(tk_path("imported/rank0.pft")), "%s", r.err);
    cr_assert(tk_exists(tk_path("imported/rank1.pft")), "%s", r.err);
    cr_assert_neq(strstr(r.err, "2 PyTorch trace(s) converted"), NULL, "%s", r.err);
    tk_result_free(&r);
    /* again: the previous import is kept as .old */
    r = tk_run(PPREPORT, args, NULL);
    cr_assert(tk_exists(tk_path("imported.old/rank0.pft")), "%s", r.err);
    tk_result_free(&r);
    /* the files themselves and a .json.gz, as inputs of the report */
    const char *files[] = {DATA "/il/rank0.json", DATA "/il/rank1.json.gz", NULL};
    r = tk_run(PPREPORT, files, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cr_assert_neq(strstr(r.out, "pipeline: 2 stage(s)"), NULL, "%s", r.out);
    tk_result_free(&r);
    /* pprof-check: a torch run against itself, as directories and as a trace file */
    const char *check[] = {"-b", DATA "/il", DATA "/il", NULL};
    r = tk_run(PPCHECK, check, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    tk_result_free(&r);
    const char *save[] = {"--save-baseline", DATA "/gp/rank0.pt.trace.json", "-o",
                          tk_path("base.json"), NULL};
    r = tk_run(PPCHECK, save, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    cr_assert(tk_exists(tk_path("base.json")));
    tk_result_free(&r);
    /* not a trace: exit 2 with the reason */
    tk_write_text(tk_path("bad.json"), "{\"traceEvents\": [1, 2");
    const char *bad[] = {tk_path("bad.json"), NULL};
    r = tk_run(PPREPORT, bad, NULL);
    cr_assert_eq(r.code, 2, "%s", r.err);
    cr_assert_neq(strstr(r.err, "not a readable Kineto trace"), NULL, "%s", r.err);
    tk_result_free(&r);
}

/* Chrome's tracing and Perfetto record protobuf unless told to write JSON: such a file (a Trace
 * message of packets, as Chromium 156's --trace-startup writes by default) gets exit 2 naming
 * what it is and the two ways to a file that is read, not "not a trace"; a file that only
 * starts like one (a packet longer than the file) and any other file get the plain message. */
Test(kineto, a_perfetto_protobuf_trace_is_named_with_the_way_to_read_it)
{
    /* packet 1 (10 bytes): timestamp (field 8, varint 1000), trusted_packet_sequence_id
     * (field 10, varint 1), a track event (field 11, 2 bytes); packet 2 (2 bytes) */
    static const uint8_t proto[] = {0x0a, 0x0a, 0x40, 0xe8, 0x07, 0x50, 0x01, 0x5a, 0x02,
                                    0x08, 0x01, 0x00, 0x0a, 0x02, 0x40, 0x01};
    static const uint8_t cut[] = {0x0a, 0x40, 0x40, 0xe8, 0x07, 0x50, 0x01};
    struct {
        const char *name;
        const uint8_t *bytes;
        size_t len;
        const char *want;
    } cases[] = {
        {"chrome.pftrace", proto, sizeof proto, "is a Perfetto protobuf trace"},
        {"cut.pftrace", cut, sizeof cut, "is not a run directory, a .pft trace or a Chrome JSON"},
        {"text.log", (const uint8_t *)"hello\n", 6, "is not a run directory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *path = tk_path(cases[i].name);
        FILE *f = fopen(path, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(cases[i].bytes, 1, cases[i].len, f), cases[i].len);
        fclose(f);
        const char *args[] = {path, NULL};
        tk_result r = tk_run(PPREPORT, args, NULL);
        cr_expect_eq(r.code, 2, "%s: %s", cases[i].name, r.err);
        cr_expect_neq(strstr(r.err, cases[i].want), NULL, "%s: %s", cases[i].name, r.err);
        if (i == 0)
            cr_expect(strstr(r.err, "--trace-startup-format=json") &&
                          strstr(r.err, "traceconv json"), "%s", r.err);
        tk_result_free(&r);
    }
}

/* ---- Chrome traces of other tools (docs/kineto.md "Chrome traces of other tools") ---- */

/* A range of report JSON j's "ranges" by name: its count and, in *thread, its first thread's
 * name. */
static int range_count(const cJSON *j, const char *name, const char **thread)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "ranges"))
    {
        const cJSON *n = cJSON_GetObjectItem(r, "name");
        if (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0)
            continue;
        const cJSON *t = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "threads"), 0);
        if (thread)
            *thread = t ? cJSON_GetObjectItem(t, "thread")->valuestring : "";
        return (int)cJSON_GetObjectItem(r, "count")->valuedouble;
    }
    return 0;
}

/* A trace as TensorFlow's trace viewer writes one: no category torch or Paddle uses (none at all,
 * or "Op"), a process per device each numbering its threads from 1, begin/end pairs and an
 * instant event. Before, nothing of it was read and pprof-report said the traces held no NVTX
 * range, asking whether the job's NVTX use was captured. Now it is read as another tool's
 * Chrome trace: every event a range or mark, the host's and the device's thread 1 kept apart
 * (merged, the device's op that crosses the host's step would read as overlapping, not nested),
 * a thread named after its process (the file has two: "/host:CPU / python", named by its
 * thread_name event, or "/device:GPU:0 tid 1"), and the report's generic view counts every name,
 * saying how the file was read. A torch trace is read as before. */
Test(kineto, another_tools_chrome_trace_is_read_as_ranges_of_its_processes_threads)
{
    const char *path = tk_path("tf.trace.json");
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":["
               "{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"/host:CPU\"}},"
               "{\"ph\":\"M\",\"pid\":1,\"tid\":1,\"name\":\"thread_name\",\"args\":{\"name\":\"python\"}},"
               "{\"ph\":\"M\",\"pid\":2,\"name\":\"process_name\",\"args\":{\"name\":\"/device:GPU:0\"}}");
    for (int step = 0; step < 3; step++) {
        int t0 = step * 1200;
        fprintf(f, ",{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"name\":\"train_step\",\"ts\":%d,\"dur\":1000}",
                t0);
        for (int i = 0; i < 4; i++)
            fprintf(f, ",{\"ph\":\"X\",\"cat\":\"Op\",\"pid\":1,\"tid\":1,\"name\":\"MatMul\",\"ts\":%d,"
                       "\"dur\":150}", t0 + 10 + 200 * i);
        /* the device's op starts inside the host's step and ends after it */
        fprintf(f, ",{\"ph\":\"X\",\"pid\":2,\"tid\":1,\"name\":\"Conv2D\",\"ts\":%d,\"dur\":600}",
                t0 + 500);
        fprintf(f, ",{\"ph\":\"B\",\"pid\":1,\"tid\":2,\"name\":\"input\",\"ts\":%d}"
                   ",{\"ph\":\"E\",\"pid\":1,\"tid\":2,\"ts\":%d}", t0 + 1000, t0 + 1150);
    }
    fprintf(f, ",{\"ph\":\"i\",\"pid\":1,\"tid\":1,\"name\":\"checkpoint\",\"ts\":3500,\"s\":\"t\"}");
    /* instants of the process's and the global scope have no tid: marks of their own tracks */
    fprintf(f, ",{\"ph\":\"i\",\"pid\":1,\"name\":\"epoch\",\"ts\":3550,\"s\":\"p\"}"
               ",{\"ph\":\"i\",\"name\":\"sync\",\"ts\":3560,\"s\":\"g\"}]}");
    fclose(f);

    pp_kineto_stats s;
    const char *out = tk_path("tf.pft");
    cr_assert_eq(pp_kineto_convert(path, out, NULL, &s), PP_OK, "%s", pp_error_message());
    cr_expect_eq(s.any_category, 1);
    cr_expect_eq(s.ranges, 3 + 12 + 3 + 3, "every complete and begin/end event a range");
    cr_expect_eq(s.async_ranges, 0, "the device's ops are on a thread of their own");
    cr_expect_eq(s.marks, 3);
    cr_expect_eq(s.malformed + s.dropped_caps + s.unpaired, 0);
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(out, &t), PP_OK, "%s", pp_error_message());
    cr_expect_eq(t->footer.threads, 5, "host threads 1 and 2, the device's thread 1, the host "
                                       "process's and the global scope");
    pp_trace_free(t);

    cJSON *j = report_json(path);
    const char *thread = NULL;
    cr_expect_eq(range_count(j, "train_step", &thread), 3);
    cr_expect_str_eq(thread, "/host:CPU / python", "named by its thread_name event");
    cr_expect_eq(range_count(j, "MatMul", NULL), 12);
    cr_expect_eq(range_count(j, "input", NULL), 3);
    cr_expect_eq(range_count(j, "Conv2D", &thread), 3);
    cr_expect_str_eq(thread, "/device:GPU:0 tid 1", "an unnamed thread by its process and tid");
    const cJSON *w = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"), "warnings");
    char *ws = cJSON_PrintUnformatted(w);
    cr_expect(ws && strstr(ws, "read as another tool's Chrome trace"), "warnings: %s", ws);
    free(ws);
    cJSON_Delete(j);
    /* the text report's threads by their names, without the importer's own ids (2^31 and up) */
    const char *targv[] = {path, NULL};
    tk_result r = tk_run(PPREPORT, targv, NULL);
    cr_expect_eq(r.code, 0, "%s", r.err);
    cr_expect(strstr(r.out, " /host:CPU / python ") && strstr(r.out, " /device:GPU:0 tid 1 ") &&
                  !strstr(r.out, "214748"),
              "%s", r.out);
    tk_result_free(&r);

    /* a torch trace: its own categories, read as before */
    cr_assert_eq(pp_kineto_convert(DATA "/il/rank0.json", tk_path("il0.pft"), NULL, &s), PP_OK,
                 "%s", pp_error_message());
    cr_expect_eq(s.any_category, 0);
    cr_expect_gt(s.ranges, 0);
}

/* The JSON array of n events, the i-th written by one(i) into a buffer of 128 bytes (malloc). */
static char *array_text(size_t n, int (*one)(char *buf, size_t cap, size_t i))
{
    size_t cap = n * 128 + 8, len = 0;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    text[len++] = '[';
    for (size_t i = 0; i < n; i++) {
        if (i)
            text[len++] = ',';
        int k = one(text + len, 128, i);
        cr_assert(k > 0 && k < 128);
        len += (size_t)k;
    }
    text[len++] = ']';
    text[len] = '\0';
    return text;
}

/* Converts the JSON array of n events written by one(i) (array_text). */
static void convert_array(size_t n, int (*one)(char *buf, size_t cap, size_t i),
                          pp_kineto_stats *s, pp_trace **t)
{
    char *text = array_text(n, one);
    cr_assert_eq(convert_text(text, NULL, s, t), PP_OK, "%s", pp_error_message());
    free(text);
}

static int one_process_op(char *buf, size_t cap, size_t i)
{
    return snprintf(buf, cap, "{\"ph\":\"X\",\"pid\":%zu,\"tid\":1,\"name\":\"op\",\"ts\":%zu,"
                              "\"dur\":5}", i + 1, 10 * i);
}

static int one_counter(char *buf, size_t cap, size_t i)
{
    return snprintf(buf, cap, "{\"ph\":\"C\",\"pid\":1,\"name\":\"c%zu\",\"ts\":%zu,"
                              "\"args\":{\"v\":1}}", i, i);
}

/* Another tool's trace of thousands of processes (a hostile one): at most 1024 threads are
 * kept, the rest dropped and counted, and the conversion ends normally. */
Test(kineto, another_tools_trace_of_thousands_of_processes_stays_bounded)
{
    size_t n = 5000;
    pp_kineto_stats s;
    pp_trace *t = NULL;
    convert_array(n, one_process_op, &s, &t);
    cr_expect_eq(s.any_category, 1);
    cr_expect_eq(s.ranges, 1024);
    cr_expect_eq(s.dropped_caps, n - 1024);
    cr_expect(strstr(s.problem, "more than 1024 threads") != NULL, "%s", s.problem);
    cr_expect_eq(t->footer.threads, 1024);
    pp_trace_free(t);
}

/* The record of `type` whose message is `name` in t; NULL when none. */
static const pp_trace_event *record_named(const pp_trace *t, uint16_t type, const char *name)
{
    for (size_t i = 0; i < t->n_events; i++)
        if (t->events[i].type == type && strcmp(t->events[i].message, name) == 0)
            return &t->events[i];
    return NULL;
}

/* Chrome's async events in another tool's trace: a nestable tree ("b", "e", "n") and legacy
 * operations ("S", "T", "F"), each begin paired with the end of its id (its category's, its
 * process's unless "id2" makes it global, its name's too for the legacy ones), the range on the
 * begin's thread; an end closes the latest begin of its id. Before, every one was skipped. */
Test(kineto, another_tools_async_events_are_ranges_on_their_begins_thread)
{
#define AS(ph, cat, idf, pid, tid, name, ts)                                                       \
    "{\"ph\":\"" ph "\",\"cat\":\"" cat "\"," idf ",\"pid\":" #pid ",\"tid\":" #tid                \
    ",\"name\":\"" name "\",\"ts\":" #ts "},"
    const char *j =
        "["
        /* one tree: read encloses parse, an instant inside; 1 and "1" are one id */
        AS("b", "io", "\"id\":1", 1, 1, "read", 0) AS("b", "io", "\"id\":\"1\"", 1, 1, "parse", 10)
        AS("n", "io", "\"id\":1", 1, 1, "chunk", 15) AS("e", "io", "\"id\":1", 1, 1, "parse", 20)
        AS("e", "io", "\"id\":1", 1, 1, "read", 50)
        /* two trees on one thread, the second outliving the first: overlapping */
        AS("b", "net", "\"id\":\"0x2\"", 1, 1, "send", 100)
        AS("b", "net", "\"id\":\"0x3\"", 1, 1, "recv", 110)
        AS("e", "net", "\"id\":\"0x2\"", 1, 1, "", 150)
        AS("e", "net", "\"id\":\"0x3\"", 1, 1, "", 200)
        /* a global id ended by another process; a local one of the same text is another id */
        AS("b", "net", "\"id2\":{\"global\":\"0x4\"}", 1, 1, "allreduce", 300)
        AS("b", "net", "\"id2\":{\"local\":\"0x4\"}", 2, 5, "local", 300)
        AS("e", "net", "\"id2\":{\"local\":\"0x4\"}", 2, 5, "", 320)
        AS("e", "net", "\"id2\":{\"global\":\"0x4\"}", 2, 5, "", 380)
        /* a plain id is its process's: these two do not pair */
        AS("b", "net", "\"id\":7", 1, 1, "orphan", 400) AS("e", "net", "\"id\":7", 2, 5, "", 410)
        /* legacy: matched by name as well, a step skipped */
        AS("S", "job", "\"id\":9", 1, 2, "load", 500) AS("S", "job", "\"id\":9", 1, 2, "save", 510)
        AS("T", "job", "\"id\":9", 1, 2, "load", 520) AS("F", "job", "\"id\":9", 1, 2, "load", 530)
        AS("F", "job", "\"id\":9", 1, 2, "save", 540)
        /* a mark of Chrome's performance.mark */
        "{\"ph\":\"R\",\"cat\":\"blink.user_timing\",\"pid\":1,\"tid\":1,\"name\":\"ready\","
        "\"ts\":560},"
        /* no id; an end before its begin */
        AS("b", "net", "\"args\":{}", 1, 1, "noid", 600)
        AS("b", "net", "\"id\":8", 1, 1, "backwards", 700)
        "{\"ph\":\"e\",\"cat\":\"net\",\"id\":8,\"pid\":1,\"tid\":1,\"ts\":690}]";
#undef AS
    pp_kineto_stats s;
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(j, NULL, &s, &t), PP_OK, "%s", pp_error_message());
    cr_expect_eq(s.any_category, 1);
    cr_expect_eq(s.ranges, 8, "read parse send recv allreduce local load save");
    cr_expect_eq(s.async_ranges, 2, "recv outlives send, save outlives load");
    cr_expect_eq(s.marks, 2, "chunk, ready");
    cr_expect_eq(s.unpaired, 2, "orphan's begin and its end in another process");
    cr_expect_eq(s.malformed, 2, "no id; an end before its begin");
    cr_expect_eq(s.dropped_caps, 0);
    static const struct { uint16_t type; const char *name; uint64_t ts; } want[] = {
        {PP_REC_PUSH, "read", 0},          {PP_REC_PUSH, "parse", 10000},
        {PP_REC_MARK, "chunk", 15000},     {PP_REC_PUSH, "send", 100000},
        {PP_REC_START, "recv", 110000},    {PP_REC_PUSH, "allreduce", 300000},
        {PP_REC_PUSH, "local", 300000},    {PP_REC_PUSH, "load", 500000},
        {PP_REC_START, "save", 510000}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const pp_trace_event *e = record_named(t, want[i].type, want[i].name);
        cr_assert_not_null(e, "no record %u of %s", want[i].type, want[i].name);
        cr_expect_eq(e->ts, want[i].ts, "%s", want[i].name);
        cr_expect_str_eq(pp_trace_domain_name(t, e->domain),
                         i < 3 ? "io" : i < 7 ? "net" : "job", "%s", want[i].name);
    }
    /* each range ends where its end says: the POP after read's PUSH at 50 us, recv's END at 200 */
    const pp_trace_event *rd = record_named(t, PP_REC_PUSH, "read");
    uint64_t read_end = 0, recv_end = 0;
    for (const pp_trace_event *e = t->events; e < t->events + t->n_events; e++) {
        if (e->type == PP_REC_POP && e->tid == rd->tid && e->ts <= 60000)
            read_end = e->ts > read_end ? e->ts : read_end;
        if (e->type == PP_REC_END && e->range_id == record_named(t, PP_REC_START, "recv")->range_id)
            recv_end = e->ts;
    }
    cr_expect_eq(read_end, 50000);
    cr_expect_eq(recv_end, 200000);
    pp_trace_free(t);
    /* the report: the global id's range on the thread of its begin */
    const char *path = tk_path("async.trace.json");
    tk_write_text(path, j);
    cJSON *r = report_json(path);
    const char *thread = NULL;
    cr_expect_eq(range_count(r, "allreduce", &thread), 1);
    cr_expect_str_eq(thread, "pid 1 tid 1");
    cr_expect_eq(range_count(r, "local", &thread), 1);
    cr_expect_str_eq(thread, "pid 2 tid 5");
    cJSON_Delete(r);
}

/* The series of the report's memory section named `name`; NULL when none. */
static const cJSON *series_named(const cJSON *j, const char *name)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(cJSON_GetObjectItem(j, "memory"), "series"))
    {
        const cJSON *n = cJSON_GetObjectItem(r, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
            return r;
    }
    return NULL;
}

/* Chrome's counter events in another tool's trace: each number among a "C" event's args a
 * sample of the counter "<name>.<key> (pid P)" of its category's domain, on its process's track
 * (whatever its tid; the "ph" read before or after the args), shown as a series; a value that is
 * not a finite number is malformed, series beyond 8 an event are dropped and counted, an event
 * without a number is not read. Before, every one was skipped. */
/* A "pid" that is text (Ray's timeline writes "Node <ip>", and the workers' "tid" is the same
 * on every node): each named process's threads are its own, so two nodes' "worker 1" do not
 * merge into one thread whose ranges overlap; an async id is its named process's, and so is a
 * counter. Before, a text pid was ignored: the two workers were one thread. */
Test(kineto, processes_named_by_text_keep_their_threads_apart)
{
    const char *j =
        "{\"traceEvents\":["
        "{\"ph\":\"X\",\"cat\":\"task\",\"name\":\"fwd\",\"pid\":\"Node 10.0.0.1\",\"tid\":"
        "\"worker 1\",\"ts\":100,\"dur\":50},"
        "{\"ph\":\"X\",\"cat\":\"task\",\"name\":\"fwd\",\"pid\":\"Node 10.0.0.2\",\"tid\":"
        "\"worker 1\",\"ts\":120,\"dur\":50},"
        "{\"ph\":\"b\",\"cat\":\"io\",\"name\":\"fetch\",\"id\":1,\"pid\":\"Node 10.0.0.1\",\"tid\":"
        "\"worker 1\",\"ts\":200},"
        "{\"ph\":\"e\",\"cat\":\"io\",\"name\":\"fetch\",\"id\":1,\"pid\":\"Node 10.0.0.2\",\"tid\":"
        "\"worker 1\",\"ts\":230},"
        "{\"ph\":\"e\",\"cat\":\"io\",\"name\":\"fetch\",\"id\":1,\"pid\":\"Node 10.0.0.1\",\"tid\":"
        "\"worker 1\",\"ts\":240},"
        "{\"ph\":\"C\",\"name\":\"mem\",\"pid\":\"Node 10.0.0.2\",\"ts\":10,\"args\":{\"used\":7}}"
        "]}";
    pp_kineto_stats s;
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(j, NULL, &s, &t), PP_OK, "%s", pp_error_message());
    cr_expect_eq(s.ranges, 3, "two fwd and the fetch");
    cr_expect_eq(s.async_ranges, 0, "each fwd alone on its node's worker: nothing overlaps");
    cr_expect_eq(s.unpaired, 1, "the end on the other node closes nothing");
    pp_trace_free(t);
    const char *path = tk_path("named_pids.trace.json");
    tk_write_text(path, j);
    cJSON *r = report_json(path);
    int threads = 0;
    const cJSON *rg, *th;
    cJSON_ArrayForEach(rg, cJSON_GetObjectItem(r, "ranges"))
    {
        if (strcmp(cJSON_GetObjectItem(rg, "name")->valuestring, "fwd") != 0)
            continue;
        cJSON_ArrayForEach(th, cJSON_GetObjectItem(rg, "threads"))
        {
            const char *name = cJSON_GetObjectItem(th, "thread")->valuestring;
            cr_expect(strcmp(name, "Node 10.0.0.1 tid worker 1") == 0 ||
                          strcmp(name, "Node 10.0.0.2 tid worker 1") == 0,
                      "%s", name);
            threads++;
        }
    }
    cr_expect_eq(threads, 2, "fwd on two threads");
    cr_expect_not_null(series_named(r, "mem.used (Node 10.0.0.2)"));
    cJSON_Delete(r);
}

/* The names of the threads range `name` ran on, each followed by '|', into buf. */
static const char *threads_of(const cJSON *j, const char *name, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    const cJSON *r, *t;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "ranges"))
    {
        if (strcmp(cJSON_GetObjectItem(r, "name")->valuestring, name) != 0)
            continue;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(r, "threads"))
        {
            const char *th = cJSON_GetObjectItem(t, "thread")->valuestring;
            cr_expect_leq(strlen(th), 63, "%s", th);
            len += (size_t)snprintf(buf + len, len < cap ? cap - len : 0, "%s|", th);
        }
    }
    return buf;
}

/* A Chrome trace of several processes (Chrome's own: a browser, renderers, services) names
 * threads alike in each process, and several threads of one process alike (its pool's
 * workers), in metadata events that come after every other event. Each thread is named after
 * its process: "Renderer (pid 10) / CrRendererMain" where two processes are "Renderer",
 * "Browser / Worker (tid 7)" where two of its threads are "Worker", "Browser tid 4" for a thread
 * it does not name, its key "pid 9 tid 3" in a process nobody names; a thread named twice by its
 * latest name; and within the 63 bytes a thread's name has in the analysis, a long process name
 * cut first so that the tid stays. Before, every renderer's main thread read "CrRendererMain":
 * one name for six threads of six processes. In a file of one process the names are as the
 * thread_name events give them, "Worker (tid 7)" where two threads have one. */
Test(kineto, another_tools_threads_are_named_after_their_processes)
{
    const char *events =
        "{\"ph\":\"X\",\"pid\":10,\"tid\":1,\"name\":\"paint\",\"ts\":0,\"dur\":10},"
        "{\"ph\":\"X\",\"pid\":11,\"tid\":1,\"name\":\"paint\",\"ts\":5,\"dur\":10},"
        "{\"ph\":\"X\",\"pid\":5,\"tid\":7,\"name\":\"task\",\"ts\":0,\"dur\":5},"
        "{\"ph\":\"X\",\"pid\":5,\"tid\":8,\"name\":\"task\",\"ts\":1,\"dur\":5},"
        "{\"ph\":\"X\",\"pid\":5,\"tid\":2,\"name\":\"main\",\"ts\":0,\"dur\":20},"
        "{\"ph\":\"X\",\"pid\":5,\"tid\":4,\"name\":\"io\",\"ts\":0,\"dur\":2},"
        "{\"ph\":\"X\",\"pid\":9,\"tid\":3,\"name\":\"other\",\"ts\":0,\"dur\":3},"
        "{\"ph\":\"X\",\"pid\":12,\"tid\":20,\"name\":\"net\",\"ts\":0,\"dur\":3},"
        "{\"ph\":\"X\",\"pid\":12,\"tid\":21,\"name\":\"net\",\"ts\":1,\"dur\":3},";
    const char *meta =
        "{\"ph\":\"M\",\"pid\":10,\"name\":\"process_name\",\"args\":{\"name\":\"Renderer\"}},"
        "{\"ph\":\"M\",\"pid\":11,\"name\":\"process_name\",\"args\":{\"name\":\"Renderer\"}},"
        "{\"ph\":\"M\",\"pid\":5,\"name\":\"process_name\",\"args\":{\"name\":\"Browser\"}},"
        "{\"ph\":\"M\",\"pid\":12,\"name\":\"process_name\",\"args\":{\"name\":"
        "\"Service: network.mojom.NetworkService\"}},"
        "{\"ph\":\"M\",\"pid\":10,\"tid\":1,\"name\":\"thread_name\",\"args\":{\"name\":"
        "\"CrRendererMain\"}},"
        "{\"ph\":\"M\",\"pid\":11,\"tid\":1,\"name\":\"thread_name\",\"args\":{\"name\":"
        "\"CrRendererMain\"}},"
        "{\"ph\":\"M\",\"pid\":5,\"tid\":7,\"name\":\"thread_name\",\"args\":{\"name\":\"Worker\"}},"
        "{\"ph\":\"M\",\"pid\":5,\"tid\":8,\"name\":\"thread_name\",\"args\":{\"name\":\"Worker\"}},"
        "{\"ph\":\"M\",\"pid\":5,\"tid\":2,\"name\":\"thread_name\",\"args\":{\"name\":\"Old\"}},"
        "{\"ph\":\"M\",\"pid\":5,\"tid\":2,\"name\":\"thread_name\",\"args\":{\"name\":"
        "\"CrBrowserMain\"}},"
        "{\"ph\":\"M\",\"pid\":12,\"tid\":20,\"name\":\"thread_name\",\"args\":{\"name\":"
        "\"ThreadPoolForegroundWorker\"}},"
        "{\"ph\":\"M\",\"pid\":12,\"tid\":21,\"name\":\"thread_name\",\"args\":{\"name\":"
        "\"ThreadPoolForegroundWorker\"}}";
    char text[4096], buf[1024];
    snprintf(text, sizeof text, "{\"traceEvents\":[%s%s]}", events, meta);
    const char *path = tk_path("processes.trace.json");
    tk_write_text(path, text);
    cJSON *j = report_json(path);
    cr_expect_str_eq(threads_of(j, "paint", buf, sizeof buf),
                     "Renderer (pid 10) / CrRendererMain|Renderer (pid 11) / CrRendererMain|");
    cr_expect_str_eq(threads_of(j, "task", buf, sizeof buf),
                     "Browser / Worker (tid 7)|Browser / Worker (tid 8)|");
    cr_expect_str_eq(threads_of(j, "main", buf, sizeof buf), "Browser / CrBrowserMain|");
    cr_expect_str_eq(threads_of(j, "io", buf, sizeof buf), "Browser tid 4|");
    cr_expect_str_eq(threads_of(j, "other", buf, sizeof buf), "pid 9 tid 3|");
    cr_expect_str_eq(threads_of(j, "net", buf, sizeof buf),
                     "Service: network.mojom... / ThreadPoolForegroundWorker (tid 20)|"
                     "Service: network.mojom... / ThreadPoolForegroundWorker (tid 21)|");
    cJSON_Delete(j);

    /* one process: its threads as their thread_name events name them, those of one name told
     * apart by their tids */
    snprintf(text, sizeof text,
             "{\"traceEvents\":[{\"ph\":\"X\",\"pid\":5,\"tid\":2,\"name\":\"main\",\"ts\":0,"
             "\"dur\":20},{\"ph\":\"X\",\"pid\":5,\"tid\":7,\"name\":\"task\",\"ts\":0,"
             "\"dur\":5},{\"ph\":\"X\",\"pid\":5,\"tid\":8,\"name\":\"task\",\"ts\":1,"
             "\"dur\":5},%s]}", meta);
    tk_write_text(path, text);
    j = report_json(path);
    cr_expect_str_eq(threads_of(j, "main", buf, sizeof buf), "CrBrowserMain|");
    cr_expect_str_eq(threads_of(j, "task", buf, sizeof buf), "Worker (tid 7)|Worker (tid 8)|");
    cJSON_Delete(j);
}

Test(kineto, another_tools_counters_are_series_of_their_process)
{
    const char *j =
        "[{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"name\":\"step\",\"ts\":0,\"dur\":100},"
        "{\"ph\":\"C\",\"pid\":1,\"tid\":7,\"name\":\"mem\",\"ts\":0,"
        "\"args\":{\"allocated\":100,\"reserved\":200}},"
        "{\"ph\":\"C\",\"pid\":1,\"name\":\"mem\",\"ts\":50,\"args\":{\"allocated\":300,"
        "\"reserved\":400}},"
        "{\"ph\":\"C\",\"pid\":1,\"name\":\"mem\",\"ts\":80,\"args\":{\"allocated\":150.5,"
        "\"reserved\":400}},"
        "{\"ph\":\"C\",\"pid\":2,\"name\":\"mem\",\"ts\":10,\"args\":{\"allocated\":7}},"
        "{\"ph\":\"C\",\"cat\":\"io\",\"pid\":1,\"name\":\"queue\",\"id\":3,\"ts\":20,"
        "\"args\":{\"depth\":4}},"
        "{\"args\":{\"value\":9},\"name\":\"late\",\"pid\":1,\"ts\":30,\"ph\":\"C\"},"
        "{\"ph\":\"C\",\"pid\":1,\"name\":\"bad\",\"ts\":40,\"args\":{\"v\":NaN}},"
        "{\"ph\":\"C\",\"pid\":1,\"name\":\"wide\",\"ts\":40,\"args\":{\"a\":1,\"b\":2,\"c\":3,"
        "\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9}},"
        "{\"ph\":\"C\",\"pid\":1,\"name\":\"words\",\"ts\":40,\"args\":{\"s\":\"text\"}}]";
    pp_kineto_stats s;
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(j, NULL, &s, &t), PP_OK, "%s", pp_error_message());
    cr_expect_eq(s.any_category, 1);
    cr_expect_eq(s.counter_samples, 6 + 1 + 1 + 1 + 8);
    cr_expect_eq(s.malformed, 1, "NaN");
    cr_expect_eq(s.dropped_caps, 1, "the ninth series of one event");
    cr_expect_eq(t->n_counter_defs, 2 + 1 + 1 + 1 + 8, "pid 2's mem.allocated is its own");
    cr_expect_eq(t->n_counters, s.counter_samples);
    for (size_t i = 0; i < t->n_counters; i++)
        cr_expect_eq(t->counters[i].kind, PP_COUNTER_FLOAT64);
    pp_trace_free(t);

    const char *path = tk_path("counters.trace.json");
    tk_write_text(path, j);
    cJSON *r = report_json(path);
    static const struct { const char *name, *domain; int samples; double min, max, last; } want[] = {
        {"mem.allocated (pid 1)", "(no category)", 3, 100, 300, 150.5},
        {"mem.reserved (pid 1)", "(no category)", 3, 200, 400, 400},
        {"mem.allocated (pid 2)", "(no category)", 1, 7, 7, 7},
        {"queue[3].depth (pid 1)", "io", 1, 4, 4, 4},
        {"late.value (pid 1)", "(no category)", 1, 9, 9, 9},
        {"wide.h (pid 1)", "(no category)", 1, 8, 8, 8}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const cJSON *x = series_named(r, want[i].name);
        cr_assert_not_null(x, "no series %s", want[i].name);
        cr_expect_str_eq(cJSON_GetObjectItem(x, "domain")->valuestring, want[i].domain);
        cr_expect_eq(cJSON_GetObjectItem(x, "samples")->valueint, want[i].samples, "%s",
                     want[i].name);
        cr_expect_eq(cJSON_GetObjectItem(x, "min")->valuedouble, want[i].min, "%s", want[i].name);
        cr_expect_eq(cJSON_GetObjectItem(x, "max")->valuedouble, want[i].max, "%s", want[i].name);
        cr_expect_eq(cJSON_GetObjectItem(x, "last")->valuedouble, want[i].last, "%s",
                     want[i].name);
    }
    cr_expect_null(series_named(r, "wide.i (pid 1)"), "past 8 series");
    cr_expect_null(series_named(r, "words.s (pid 1)"));
    cJSON_Delete(r);
}

/* Another tool's trace of 3000 counters: 1024 are kept (the analysis' own cap per trace), the
 * later ones' samples dropped and counted. */
Test(kineto, another_tools_counters_beyond_the_cap_are_dropped)
{
    size_t n = 3000;
    pp_kineto_stats s;
    pp_trace *t = NULL;
    convert_array(n, one_counter, &s, &t);
    cr_expect_eq(s.counter_samples, PP_KINETO_MAX_COUNTERS);
    cr_expect_eq(s.dropped_caps, n - PP_KINETO_MAX_COUNTERS);
    cr_expect(strstr(s.problem, "more than 1024 counters") != NULL, "%s", s.problem);
    cr_expect_eq(t->n_counter_defs, PP_KINETO_MAX_COUNTERS);
    pp_trace_free(t);
}

/* A hostile trace of async begins: at most PP_KINETO_MAX_BEGINS wait for their ends (the rest
 * dropped and counted), ends of ids never begun are counted, the pool of waiting begins is
 * reused (a million ranges one after another hold one entry), and the conversion ends
 * normally. */
Test(kineto, async_events_of_a_hostile_trace_stay_bounded)
{
    size_t over = PP_KINETO_MAX_BEGINS + 1000, seq = 200000, cap = (over * 2 + seq * 2) * 80 + 64;
    size_t len = 0;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    len += (size_t)snprintf(text + len, cap - len, "[");
    for (size_t i = 0; i < over; i++) /* begins, their ends later and in the same order */
        len += (size_t)snprintf(text + len, cap - len,
                                "{\"ph\":\"b\",\"id\":%zu,\"pid\":1,\"tid\":1,\"name\":\"a\","
                                "\"ts\":%zu},", i, i);
    for (size_t i = 0; i < over; i++)
        len += (size_t)snprintf(text + len, cap - len,
                                "{\"ph\":\"e\",\"id\":%zu,\"pid\":1,\"tid\":1,\"ts\":%zu},", i,
                                over + i);
    for (size_t i = 0; i < seq; i++) /* one after another on another thread, ids reused */
        len += (size_t)snprintf(text + len, cap - len,
                                "{\"ph\":\"b\",\"id\":%zu,\"pid\":1,\"tid\":2,\"name\":\"s\","
                                "\"ts\":%zu},{\"ph\":\"e\",\"id\":%zu,\"pid\":1,\"tid\":2,"
                                "\"ts\":%zu},", i % 3, 3 * over + 2 * i, i % 3, 3 * over + 2 * i + 1);
    len += (size_t)snprintf(text + len, cap - len,
                            "{\"ph\":\"e\",\"id\":\"never\",\"pid\":1,\"tid\":1,\"ts\":1}]");
    cr_assert_lt(len, cap);
    pp_kineto_stats s;
    cr_assert_eq(convert_text(text, NULL, &s, NULL), PP_OK, "%s", pp_error_message());
    free(text);
    cr_expect_eq(s.any_category, 1);
    cr_expect_eq(s.dropped_caps, over - PP_KINETO_MAX_BEGINS, "begins beyond the cap");
    cr_expect_eq(s.unpaired, over - PP_KINETO_MAX_BEGINS + 1, "their ends, and one never begun");
    cr_expect_eq(s.ranges, PP_KINETO_MAX_BEGINS + seq);
    cr_expect(strstr(s.problem, "waiting for their end") != NULL, "%s", s.problem);
}

/* The complete events named `name` in the Chrome trace at path (gzip or not), read with cJSON:
 * the truth the report's counts are held to. */
static int chrome_count(const char *path, const char *name)
{
    size_t len;
    char *text = slurp_any(path, &len);
    cJSON *j = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(j, "%s is not JSON", path);
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "traceEvents"))
    {
        const cJSON *ph = cJSON_GetObjectItem(e, "ph"), *nm = cJSON_GetObjectItem(e, "name");
        n += cJSON_IsString(ph) && strcmp(ph->valuestring, "X") == 0 && cJSON_IsString(nm) &&
             strcmp(nm->valuestring, name) == 0;
    }
    cJSON_Delete(j);
    return n;
}

/* A JSON file (gzip-compressed or not) parsed by cJSON; fails the test when it is not JSON. */
static cJSON *json_of_file(const char *path)
{
    size_t len;
    char *text = slurp_any(path, &len);
    cJSON *j = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(j, "%s is not JSON", path);
    return j;
}

/* Whether event e has phase `ph` and name `name`. */
static int events_named_one(const cJSON *e, const char *ph, const char *name)
{
    const char *p = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
    const char *nm = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
    return p && strcmp(p, ph) == 0 && nm && strcmp(nm, name) == 0;
}

/* How many events of `events` have phase `ph` and name `name`. */
static int events_named(const cJSON *events, const char *ph, const char *name)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events)
        n += events_named_one(e, ph, name);
    return n;
}

/* A report's range `r` (an element of "ranges") counted as often as `events` holds events of
 * phase `ph` and its name (expected); returns the report's count. */
static int count_as_in_file(const cJSON *r, const cJSON *events, const char *ph)
{
    const char *name = cJSON_GetObjectItem(r, "name")->valuestring;
    int got = (int)cJSON_GetObjectItem(r, "count")->valuedouble;
    int want = events_named(events, ph, name);
    cr_expect_eq(got, want, "%s: %d in the report, %d in the file", name, got, want);
    return got;
}

/* A real JAX program's profile (tests/data/kineto/jax: tests/py/jax_job.py, jax 0.10.2 on the
 * CPU, 3 steps of 4 layers under StepTraceAnnotation and TraceAnnotation): as a directory, its
 * perfetto_trace.json.gz, the same trace as host.trace.json.gz beside it, is left out (saying
 * so) rather than read as a second process; every annotation's count is the file's own, on the
 * thread JAX named "python"; the perfetto file alone reads the same. */
Test(kineto, a_jax_profile_reads_as_its_annotations)
{
    const char *host = DATA "/jax/host.trace.json.gz", *perfetto = DATA "/jax/perfetto_trace.json.gz";
    static const char *const names[] = {"train", "layer0", "layer1", "layer2", "layer3",
                                        "PjitFunction(layer)"};
    for (int k = 0; k < 2; k++) {
        cJSON *j = report_json(k == 0 ? DATA "/jax" : perfetto);
        cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"), "files")),
                     1, "one process");
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            const char *thread = NULL;
            int want = chrome_count(host, names[i]);
            cr_assert_gt(want, 0, "%s is not in the recording", names[i]);
            cr_expect_eq(range_count(j, names[i], &thread), want, "%s: %d in the file", names[i],
                         want);
            cr_expect(i > 0 || strcmp(thread, "python") == 0, "train on %s", thread);
        }
        cr_expect_eq(chrome_count(host, "train"), 3);
        /* and every complete event of the file, on every thread: JAX numbers one of its
         * threads above 2^31 (3269655851), whose 90 events were skipped before */
        cJSON *file = json_of_file(host);
        const cJSON *events = cJSON_GetObjectItem(file, "traceEvents"), *r, *e;
        int ranges = 0, complete = 0;
        cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "ranges"))
            ranges += count_as_in_file(r, events, "X");
        cJSON_ArrayForEach(e, events)
            complete += cJSON_IsString(cJSON_GetObjectItem(e, "ph")) &&
                        strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X") == 0;
        cr_expect_eq(ranges, complete, "every complete event a range");
        cJSON_Delete(file);
        char *ws = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"),
                                                              "warnings"));
        cr_expect(ws && strstr(ws, "read as another tool's Chrome trace"), "%s", ws);
        cr_expect(!strstr(ws, "usable tid"), "%s", ws);
        cr_expect(k == 1 || strstr(ws, "perfetto_trace.json.gz: not read, the same trace"), "%s",
                  ws);
        free(ws);
        cJSON_Delete(j);
    }
}

/* A real VizTracer trace (tests/data/kineto/viztracer, recorded by tests/py/viztracer_job.py with
 * viztracer 1.1.1: a two-stage GPipe over threads, every Python and C call a complete event of
 * category "fee", the job's own log_event ranges "FEE", log_instant "instant", a VizCounter's
 * counter events without a category): every complete event is a range of its category and
 * name, as many as the file holds (read with cJSON), the job's stage ranges on the threads it
 * named, the instants marks, the counter's two keys two series with every sample. */
Test(kineto, a_viztracer_trace_reads_as_its_calls_ranges_instants_and_counters)
{
    const char *path = DATA "/viztracer/vz.json.gz";
    cJSON *file = json_of_file(path);
    const cJSON *events = cJSON_GetObjectItem(file, "traceEvents");
    cJSON *j = report_json(path);
    int ranges = 0, in_file = 0, depth = 0, steps = 0, pid = -1;
    const cJSON *e, *r;
    cJSON_ArrayForEach(e, events)
    {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
        in_file += ph && strcmp(ph, "X") == 0;
        if (ph && strcmp(ph, "C") == 0) {
            const cJSON *a = cJSON_GetObjectItem(e, "args");
            depth += cJSON_GetObjectItem(a, "depth") != NULL;
            steps += cJSON_GetObjectItem(a, "steps") != NULL;
            pid = cJSON_GetObjectItem(e, "pid")->valueint;
        }
    }
    cr_assert_gt(in_file, 3000);
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "ranges"))
    {
        const char *dom = cJSON_GetObjectItem(r, "domain")->valuestring;
        const char *name = cJSON_GetObjectItem(r, "name")->valuestring;
        int want = 0, got = (int)cJSON_GetObjectItem(r, "count")->valuedouble;
        cJSON_ArrayForEach(e, events)
        {
            const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
            const char *cat = cJSON_GetStringValue(cJSON_GetObjectItem(e, "cat"));
            const char *nm = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
            want += ph && strcmp(ph, "X") == 0 && cat && strcmp(cat, dom) == 0 && nm &&
                    strcmp(nm, name) == 0;
        }
        cr_expect_eq(got, want, "%s: %s: %d in the report, %d in the file", dom, name, got, want);
        ranges += got;
        if (strncmp(name, "stage0 forward", 14) == 0 || strncmp(name, "stage1 forward", 14) == 0) {
            const char *thread = cJSON_GetObjectItem(
                cJSON_GetArrayItem(cJSON_GetObjectItem(r, "threads"), 0), "thread")->valuestring;
            cr_expect_eq(strncmp(thread, name, 6), 0, "%s on %s", name, thread);
            cr_expect_eq(got, 3, "%s: once a step", name);
        }
    }
    cr_expect_eq(ranges, in_file, "every complete event a range");
    const cJSON *m = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "marks"), 0);
    cr_expect_str_eq(cJSON_GetObjectItem(m, "name")->valuestring, "step begin");
    cr_expect_eq(cJSON_GetObjectItem(m, "count")->valueint, 3);
    char name[64];
    snprintf(name, sizeof name, "queue.depth (pid %d)", pid);
    const cJSON *sd = series_named(j, name);
    cr_assert_not_null(sd, "no series %s", name);
    cr_expect_eq(cJSON_GetObjectItem(sd, "samples")->valueint, depth);
    snprintf(name, sizeof name, "queue.steps (pid %d)", pid);
    const cJSON *ss = series_named(j, name);
    cr_assert_not_null(ss, "no series %s", name);
    cr_expect_eq(cJSON_GetObjectItem(ss, "samples")->valueint, steps);
    cr_expect_eq(cJSON_GetObjectItem(ss, "last")->valuedouble, 3, "three steps done");
    cJSON_Delete(j);
    cJSON_Delete(file);
}

/* A real py-spy trace (tests/data/kineto/pyspy, recorded from outside by py-spy 0.4.3's
 * --format chrometrace while tests/py/pyspy_job.py ran: begin/end events of category "py-spy",
 * one pair per run of samples with the same frame, the file a bare array, the threads numbered
 * by pthread_self(), near 2^47). Before, every event was skipped (no usable tid) and the report
 * said the traces held no range. Each begin is a range of its name, as many as the file holds
 * (read with cJSON), on the thread of its number. */
static void check_pyspy_trace(const char *path, int min_begins)
{
    cJSON *file = json_of_file(path);
    cr_assert(cJSON_IsArray(file), "%s is not a JSON array", path);
    cJSON *j = report_json(path);
    int begins = 0, ends = 0, ranges = 0;
    const cJSON *e, *r;
    cJSON_ArrayForEach(e, file)
    {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
        begins += ph && strcmp(ph, "B") == 0;
        ends += ph && strcmp(ph, "E") == 0;
        cr_assert_gt(cJSON_GetObjectItem(e, "tid")->valuedouble, 4294967296.0,
                     "py-spy's threads are pthread_self()'s");
    }
    cr_assert_geq(begins, min_begins);
    cr_assert_eq(begins, ends);
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "ranges"))
    {
        const char *name = cJSON_GetObjectItem(r, "name")->valuestring;
        cr_expect_str_eq(cJSON_GetObjectItem(r, "domain")->valuestring, "py-spy");
        ranges += count_as_in_file(r, file, "B");
        /* every thread of the range is one of the file's, named by its whole number */
        const cJSON *th;
        cJSON_ArrayForEach(th, cJSON_GetObjectItem(r, "threads"))
        {
            const char *thread = cJSON_GetObjectItem(th, "thread")->valuestring;
            int found = 0;
            cJSON_ArrayForEach(e, file)
            {
                char want_name[96];
                snprintf(want_name, sizeof want_name, "pid %d tid %.0f",
                         cJSON_GetObjectItem(e, "pid")->valueint,
                         cJSON_GetObjectItem(e, "tid")->valuedouble);
                found |= strcmp(thread, want_name) == 0;
            }
            cr_expect(found, "%s: thread %s is none of the file's", name, thread);
        }
    }
    cr_expect_eq(ranges, begins, "every begin/end pair a range");
    const cJSON *stage = NULL;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "ranges"))
        if (strcmp(cJSON_GetObjectItem(r, "name")->valuestring, "stage_forward") == 0)
            stage = r;
    cr_assert_not_null(stage, "the job's stage_forward frames");
    cJSON_Delete(j);
    cJSON_Delete(file);
}

Test(kineto, a_py_spy_trace_reads_as_its_frames_on_their_threads)
{
    check_pyspy_trace(DATA "/pyspy/spy.json", 81);
}

/* The same job recorded here by py-spy, where scripts/setup.sh installed it (beside the venv's
 * Python): a sampler's trace of another run, read the same way. */
Test(kineto, a_py_spy_recording_made_here_reads_the_same_way)
{
    const char *py = tk_find_python("PPROF_PYTHON", PP_PYTHON, NULL, "venv", "import sys");
    if (!py)
        cr_skip_test("no Python venv (run scripts/setup.sh)");
    char spy[4096];
    snprintf(spy, sizeof spy, "%s", py);
    char *slash = strrchr(spy, '/');
    if (!slash || (size_t)(slash - spy) + 8 >= sizeof spy)
        cr_skip_test("no py-spy beside %s", py);
    snprintf(slash + 1, sizeof spy - (size_t)(slash + 1 - spy), "py-spy");
    if (access(spy, X_OK) != 0)
        cr_skip_test("no py-spy beside %s (run scripts/setup.sh)", py);
    const char *out = tk_path("spy_live.json");
    const char *argv[] = {spy, "record", "--format", "chrometrace", "--rate", "250", "-o", out,
                          "--", py, PP_TEST_PY_DIR "/pyspy_job.py", NULL};
    tk_result r = tk_runv(argv, NULL);
    if (r.code != 0 && strstr(r.err, "ermission"))
        cr_skip_test("py-spy may not read the job here: %s", r.err);
    cr_assert_eq(r.code, 0, "py-spy: exit %d: %s%s", r.code, r.out, r.err);
    tk_result_free(&r);
    /* a sampler: how many runs of identical stacks it sees depends on the machine's load (the
     * CI's other tests beside it), so only a few are asked for */
    check_pyspy_trace(out, 5);
}

/* A real uftrace trace of a C program (tests/data/kineto/uftrace: pipe.c beside it, a two-stage
 * GPipe over POSIX threads, recorded by uftrace v0.13 and exported with `uftrace dump --chrome`:
 * begin/end events of no category, "displayTimeUnit" "ns", a "metadata" object, each thread a
 * process of its own in its metadata). uftrace writes the ends of context switches
 * ("linux:schedule") on threads that never began one: those end nothing, and every function is
 * a range of its name as often as the file begins it, each as long as its begin to its end on its
 * thread (the stages' total against the file's). Before, each such end closed the latest begin
 * and the ranges after it on the thread were shifted: a stage read 222 us instead of 2369. */
Test(kineto, a_uftrace_trace_of_a_c_program_reads_as_its_functions)
{
    const char *path = DATA "/uftrace/uftrace.json";
    cJSON *file = json_of_file(path);
    const cJSON *events = cJSON_GetObjectItem(file, "traceEvents"), *r, *e, *f;
    cJSON *j = report_json(path);
    int ranges = 0, begins = 0;
    double stage_us = 0;
    cJSON_ArrayForEach(e, events)
    {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
        const char *nm = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
        begins += ph && strcmp(ph, "B") == 0;
        if (!ph || strcmp(ph, "B") != 0 || !nm || strcmp(nm, "stage") != 0)
            continue;
        double tid = cJSON_GetObjectItem(e, "tid")->valuedouble; /* its end: the next of its tid */
        for (f = e->next; f; f = f->next) {
            const char *fp = cJSON_GetStringValue(cJSON_GetObjectItem(f, "ph"));
            const char *fn = cJSON_GetStringValue(cJSON_GetObjectItem(f, "name"));
            const cJSON *ft = cJSON_GetObjectItem(f, "tid");
            if (fp && strcmp(fp, "E") == 0 && fn && strcmp(fn, "stage") == 0 && ft &&
                ft->valuedouble == tid)
                break;
        }
        cr_assert_not_null(f, "a stage without its end");
        stage_us += cJSON_GetObjectItem(f, "ts")->valuedouble -
                    cJSON_GetObjectItem(e, "ts")->valuedouble;
    }
    cr_assert_gt(begins, 100);
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "ranges"))
    {
        ranges += count_as_in_file(r, events, "B");
        if (strcmp(cJSON_GetObjectItem(r, "name")->valuestring, "stage") == 0)
            cr_expect(fabs(cJSON_GetObjectItem(r, "total_ms")->valuedouble * 1e3 - stage_us) < 1.0,
                      "the stages: %.3f ms in the report, %.3f in the file",
                      cJSON_GetObjectItem(r, "total_ms")->valuedouble, stage_us / 1e3);
    }
    cr_expect_eq(ranges, begins, "every begin a range");
    cr_expect_gt(stage_us, 10000.0, "six stages of 2-5 ms");
    cJSON_Delete(j);
    cJSON_Delete(file);
}

/* A real trace of Chromium itself (tests/data/kineto/chromium: Chromium 156's headless shell
 * loading page.html beside it, whose script measures five steps with performance.measure,
 * recorded with `--trace-startup=blink.user_timing,toplevel --trace-startup-format=json`): the
 * Chrome trace format's own writer, twelve processes (a browser, six renderers, a GPU process,
 * services), 26 thousand events, complete, begin/end, instant, flow, async and mark events, the
 * metadata naming processes and threads after everything else, the tasks running when it
 * stopped begun ("B") and never ended. Every complete event is a range of its name as often as
 * the file holds it (the begins never ended are none); the page's steps (async events of
 * blink.user_timing) are ranges of the renderer that ran it, "Renderer (pid P) /
 * CrRendererMain"; and no two threads share a name (before, the six renderers' main threads all
 * read "CrRendererMain", and a process's pool workers all read alike). */
Test(kineto, chromiums_own_trace_reads_as_its_processes_threads)
{
    const char *path = DATA "/chromium/trace.json.gz";
    cJSON *file = json_of_file(path);
    const cJSON *events = cJSON_GetObjectItem(file, "traceEvents"), *e, *r, *t;
    cJSON *j = report_json(path);
    int renderer = -1, completes = 0, counted = 0;
    cJSON_ArrayForEach(e, events)
    {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
        const char *nm = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
        completes += ph && strcmp(ph, "X") == 0;
        if (ph && strcmp(ph, "b") == 0 && nm && strcmp(nm, "step 0") == 0)
            renderer = (int)cJSON_GetObjectItem(e, "pid")->valuedouble;
    }
    cr_assert_gt(renderer, 0, "the page's first step");
    cr_assert_gt(completes, 20000);
    char want[96], buf[256];
    snprintf(want, sizeof want, "Renderer (pid %d) / CrRendererMain|", renderer);
    for (int k = 0; k < 5; k++) {
        char step[16];
        snprintf(step, sizeof step, "step %d", k);
        cr_expect_eq(range_count(j, step, NULL), 1, "%s", step);
        cr_expect_str_eq(threads_of(j, step, buf, sizeof buf), want, "%s", step);
    }
    /* the threads by (tid, name): one name each, and each name one thread's */
    enum { MAX_T = 512 };
    static double tids[MAX_T];
    static const char *names[MAX_T];
    size_t n = 0;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "ranges"))
    {
        const char *nm = cJSON_GetObjectItem(r, "name")->valuestring;
        if (events_named(events, "X", nm)) /* its 30 "B" were never ended: none a range */
            counted += count_as_in_file(r, events, "X");
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(r, "threads"))
        {
            double tid = cJSON_GetObjectItem(t, "tid")->valuedouble;
            const char *th = cJSON_GetObjectItem(t, "thread")->valuestring;
            size_t i = 0;
            while (i < n && tids[i] != tid && strcmp(names[i], th) != 0)
                i++;
            if (i == n && n < MAX_T) {
                tids[n] = tid, names[n++] = th;
            } else if (i < n) {
                cr_expect(tids[i] == tid && strcmp(names[i], th) == 0,
                          "threads %.0f and %.0f: '%s' and '%s'", tids[i], tid, names[i], th);
            }
        }
    }
    cr_expect_gt(n, 50, "the processes' threads");
    cr_expect_eq(counted, completes, "every complete event a range");
    cJSON_Delete(j);
    cJSON_Delete(file);
}

/* How many of `events` have phase ph, name `name` and category `cat`. */
static int events_named_in(const cJSON *events, const char *ph, const char *name, const char *cat)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, events)
    {
        const char *c = cJSON_GetStringValue(cJSON_GetObjectItem(e, "cat"));
        n += c && strcmp(c, cat) == 0 && events_named_one(e, ph, name);
    }
    return n;
}

/* Every range of report j against the file's events: as many as the file's complete events,
 * begins and async ends of its name and category (`async`: each end closes a begin). The
 * ranges' total. */
static int ranges_as_in_file(const cJSON *j, const cJSON *events, int async)
{
    int total = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetObjectItem(j, "ranges"))
    {
        const char *nm = cJSON_GetObjectItem(r, "name")->valuestring;
        const char *cat = cJSON_GetObjectItem(r, "domain")->valuestring;
        int got = (int)cJSON_GetObjectItem(r, "count")->valuedouble;
        int want = events_named_in(events, "X", nm, cat) + events_named_in(events, "B", nm, cat) +
                   (async ? events_named_in(events, "e", nm, cat) : 0);
        cr_expect_eq(got, want, "%s: %d in the report, %d in the file", nm, got, want);
        total += got;
    }
    return total;
}

/* Traces of another framework and of another language's runtime, recorded here: ONNX Runtime's
 * profiler (tests/data/kineto/onnxruntime: tests/py/ort_job.py, onnxruntime 1.32.0 on the CPU,
 * a four-layer MLP run 20 times: a bare JSON array of complete events, "Session" and "Node",
 * nested objects in their args) and Node.js's trace events (tests/data/kineto/node: job.js
 * beside it, Node 20.20: complete, begin/end and async events, the promises' async begins
 * never ended). Every complete event, begin/end pair and ended async event is a range of its
 * name as often as the file holds it; the never-ended promises are none, and said. */
Test(kineto, another_framework_and_another_runtime_read_as_their_events)
{
    const char *ort = DATA "/onnxruntime/profile.json.gz";
    cJSON *file = json_of_file(ort);
    cr_assert(cJSON_IsArray(file));
    cJSON *j = report_json(ort);
    cr_expect_eq(ranges_as_in_file(j, file, 0), cJSON_GetArraySize(file), "every event a range");
    cr_expect_eq(range_count(j, "model_run", NULL), 20);
    cr_expect_eq(range_count(j, "layer3.matmul_kernel_time", NULL), 20);
    cJSON_Delete(j);
    cJSON_Delete(file);

    const char *node = DATA "/node/node_trace.1.log";
    file = json_of_file(node);
    const cJSON *events = cJSON_GetObjectItem(file, "traceEvents");
    j = report_json(node);
    int total = ranges_as_in_file(j, events, 1);
    cr_expect_gt(total, 40, "%d ranges", total);
    cr_expect_eq(range_count(j, "Timeout", NULL), 3, "the job's three timers");
    cr_expect_eq(range_count(j, "PROMISE", NULL), 0, "never ended");
    char *ws = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"),
                                                          "warnings"));
    cr_expect(ws && strstr(ws, "never ended"), "%s", ws);
    free(ws);
    cJSON_Delete(j);
    cJSON_Delete(file);
}

/* A trace from another language's tool, made here: clang's -ftime-trace of a compile (complete
 * events of no category, its phases and every header it read, "M" events naming its threads,
 * "Total ..." summaries on threads of their own). Every complete event is a range of its name,
 * as many as the file holds, and the compiler's thread is named as clang names it. */
Test(kineto, a_compilers_time_trace_reads_as_its_phases)
{
    const char *src = tk_path("tt.c"), *obj = tk_path("tt.o"), *trace = tk_path("tt.json");
    FILE *f = fopen(src, "w");
    cr_assert_not_null(f);
    fputs("#include <stdio.h>\n#include <string.h>\n#include <math.h>\n"
          "static double f(double x) { return sqrt(x) + strlen(\"pipeline\"); }\n"
          "int main(void) { printf(\"%g\\n\", f(2.0)); return 0; }\n", f);
    fclose(f);
    const char *argv[] = {"clang", "-ftime-trace", "-ftime-trace-granularity=0", "-O1", "-c", src,
                          "-o", obj, NULL};
    tk_result r = tk_runv(argv, NULL);
    if (r.code == 127 || (r.code != 0 && strstr(r.err, "No such file")))
        cr_skip_test("no clang on PATH (scripts/setup.sh installs it)");
    cr_assert_eq(r.code, 0, "clang: exit %d: %s", r.code, r.err);
    tk_result_free(&r);
    cJSON *file = json_of_file(trace);
    const cJSON *events = cJSON_GetObjectItem(file, "traceEvents"), *e, *rg;
    int complete = 0, ranges = 0;
    const char *thread_name = NULL;
    cJSON_ArrayForEach(e, events)
    {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
        complete += ph && strcmp(ph, "X") == 0;
        if (ph && strcmp(ph, "M") == 0 &&
            strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "name")), "thread_name") == 0 &&
            !thread_name)
            thread_name = cJSON_GetStringValue(
                cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "name"));
    }
    cr_assert_gt(complete, 5, "clang's phases and headers");
    cJSON *j = report_json(trace);
    int named = 0;
    cJSON_ArrayForEach(rg, cJSON_GetObjectItem(j, "ranges"))
    {
        ranges += count_as_in_file(rg, events, "X");
        const cJSON *th;
        cJSON_ArrayForEach(th, cJSON_GetObjectItem(rg, "threads"))
            named += thread_name &&
                     strcmp(cJSON_GetObjectItem(th, "thread")->valuestring, thread_name) == 0;
    }
    cr_expect_eq(ranges, complete, "every complete event a range");
    cr_expect(!thread_name || named > 0, "no range on the thread clang named %s", thread_name);
    cJSON_Delete(j);
    cJSON_Delete(file);
}

/* In torch's own reading too, a tid that is a whole number but no small thread id (a pthread_t,
 * a negative one) names a thread of its own instead of having its events skipped; one that is
 * not a whole number is still no thread. */
Test(kineto, large_and_negative_thread_numbers_are_threads_of_their_own)
{
    const char *j = "{\"traceEvents\":[" EV("cpu_op", "a", 140176548420480, 100, 10) ","
                    EV("cpu_op", "b", 140176518010560, 105, 10) ","
                    EV("cpu_op", "c", -3, 110, 10) ","
                    EV("cpu_op", "d", 140176548420480, 120, 10) ","
                    EV("cpu_op", "e", 1.5, 130, 10) "]}";
    pp_kineto_stats s;
    pp_trace *t = NULL;
    cr_assert_eq(convert_text(j, NULL, &s, &t), PP_OK, "%s", pp_error_message());
    cr_assert_eq(s.ranges, 4, "a, b, c, d: e's tid is no thread");
    cr_assert_eq(s.malformed, 1);
    uint32_t ta = 0, tb = 0, tc = 0, td = 0;
    for (size_t i = 0; i < t->n_events; i++) {
        const pp_trace_event *e = &t->events[i];
        if (e->type != PP_REC_PUSH)
            continue;
        uint32_t *to = strcmp(e->message, "a") == 0   ? &ta
                       : strcmp(e->message, "b") == 0 ? &tb
                       : strcmp(e->message, "c") == 0 ? &tc
                                                      : &td;
        *to = e->tid;
    }
    cr_assert(ta && tb && tc && td);
    cr_assert_eq(ta, td, "one thread: the same number");
    cr_assert(ta != tb && ta != tc && tb != tc, "three threads");
    cr_assert(ta >= 0x80000000u && tb >= 0x80000000u && tc >= 0x80000000u,
              "ids of their own, above 2^31");
    pp_trace_free(t);
}

/* What the report says of the VizTracer job's pipeline (S stages, M micro-batches): its shape,
 * every analyzed step decomposed, each stage's forwards and backwards counted M a step, the
 * first stage (the most work in the job's default and in the live run) the busiest. */
/* pprof-report --json of trace with the VizTracer job's dialect (exit 0 asserted). */
static cJSON *viztracer_report(const char *trace)
{
    const char *argv[] = {PPREPORT, "--json", "--dialect", DATA "/viztracer/dialect.json", trace,
                          NULL};
    tk_result r = tk_runv(argv, NULL);
    cr_assert_eq(r.code, 0, "%s: exit %d: %s", trace, r.code, r.err);
    cJSON *j = cJSON_Parse(r.out);
    cr_assert_not_null(j);
    tk_result_free(&r);
    return j;
}

static void check_viztracer_pipeline(const char *trace, int S, int M)
{
    cJSON *j = viztracer_report(trace);
    const cJSON *p = cJSON_GetObjectItem(j, "pipeline");
    cr_expect_eq(cJSON_GetObjectItem(p, "stages")->valueint, S);
    cr_expect_eq(cJSON_GetObjectItem(p, "microbatches")->valueint, M);
    cr_expect_str_eq(cJSON_GetObjectItem(p, "schedule")->valuestring, "gpipe");
    const cJSON *steps = cJSON_GetObjectItem(j, "steps"), *x;
    int n_steps = cJSON_GetArraySize(steps);
    cr_assert_gt(n_steps, 0);
    cJSON_ArrayForEach(x, steps)
        cr_expect(cJSON_IsTrue(cJSON_GetObjectItem(x, "decomposed")), "step %d not decomposed",
                  cJSON_GetObjectItem(x, "step")->valueint);
    double busy0 = 0;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "stages"))
    {
        int s = cJSON_GetObjectItem(x, "stage")->valueint;
        double busy = cJSON_GetObjectItem(x, "busy_ms")->valuedouble;
        for (int k = 0; k < 2; k++) {
            const cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(x, k ? "bwd_ms" : "fwd_ms"),
                                                 "count");
            cr_expect_eq(c ? c->valueint : -1, n_steps * M, "stage %d: %s ops", s,
                         k ? "backward" : "forward");
        }
        if (s == 0)
            busy0 = busy;
        else
            cr_expect_gt(busy0, busy, "stage 0 (the most work) is the busiest: %.3f vs %.3f ms",
                         busy0, busy);
    }
    char *ws = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"),
                                                          "warnings"));
    cr_expect(ws && !strstr(ws, "no forward or backward op") && !strstr(ws, "no trace holds"),
              "%s", ws);
    free(ws);
    cJSON_Delete(j);
}

/* The VizTracer job's pipeline through a dialect file of its names (docs/dialects.md, "Worked
 * examples"): the step is a range of the main thread, each stage's forwards and backwards are
 * ranges of the stage's own thread, which opens no step range. Each such range goes into the
 * step whose range encloses it in time (docs/metrics.md "Steps of a driver thread"); before, they
 * were outside every step and the report said no forward or backward op was recognised. */
Test(kineto, a_viztracer_pipeline_on_worker_threads_is_analyzed_through_a_dialect)
{
    check_viztracer_pipeline(DATA "/viztracer/vz.json.gz", 2, 4);
}

/* A hostile file for the waiting ranges: 20000 step ranges of the main thread, and between them
 * 5000 stage ranges of a worker thread that no step range encloses. They wait and are looked
 * through within the budget (docs/metrics.md "Steps of a driver thread"; the budget is spent
 * after about 270 step ranges here), and in the end they are dropped: no step holds an op, and
 * the report says so, exit 0. Before the budget, every step range looked through all of them. */
static int one_hostile_event(char *buf, size_t cap, size_t i)
{
    if (i < 20000)
        return snprintf(buf, cap, "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"name\":\"train_step (x:1)\","
                                  "\"ts\":%zu,\"dur\":4}", 10 * i);
    size_t k = i - 20000;
    return snprintf(buf, cap, "{\"ph\":\"X\",\"pid\":1,\"tid\":2,\"name\":\"stage0 forward mb%zu "
                              "(x:1)\",\"ts\":%zu,\"dur\":1}", k % 8, 10 * ((k * 37) % 20000) + 6);
}

Test(kineto, waiting_ranges_of_a_hostile_file_stay_bounded)
{
    char *text = array_text(25000, one_hostile_event);
    const char *path = tk_path("waiting.trace.json");
    tk_write_text(path, text);
    free(text);
    cJSON *j = viztracer_report(path);
    char *ws = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "run"),
                                                          "warnings"));
    cr_expect(ws && strstr(ws, "no forward or backward op"), "%s", ws);
    free(ws);
    cr_expect_gt(cJSON_GetArraySize(cJSON_GetObjectItem(j, "steps")), 19000);
    cJSON_Delete(j);
}

/* A worker thread with few events against a main thread with many. The converter writes a
 * thread's block when its buffer fills, and with it every other thread's events up to that time:
 * each worker block comes right after the main thread's block that closed its steps, and its
 * ranges go into those steps (the latest 64 closed step ranges of the file are kept). The worker
 * is stage 1, then stage 0, the stage the main thread's step ranges belong to (its rank's): in a
 * file with such ranges a stage's progress is its ops', not the step ranges' (before, the
 * worker of stage 0 lost the ranges of 916 of 1499 steps, analyzed before they were read). The
 * steps analyzed before the worker's first block was read lose theirs, with the warning
 * (docs/metrics.md "Steps of a driver thread"): a handful. */
static int sparse_stage;

static int one_sparse_worker_event(char *buf, size_t cap, size_t i)
{
    size_t step = i / 42, k = i % 42;
    uint64_t t = 1000 * step;
    if (k == 0)
        return snprintf(buf, cap, "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"name\":\"train_step (x:1)\","
                                  "\"ts\":%llu,\"dur\":900}", (unsigned long long)t);
    if (k == 1)
        return snprintf(buf, cap, "{\"ph\":\"X\",\"pid\":1,\"tid\":2,\"name\":\"stage%d forward mb0 "
                                  "(x:1)\",\"ts\":%llu,\"dur\":100}", sparse_stage,
                        (unsigned long long)t + 10);
    if (k == 2)
        return snprintf(buf, cap, "{\"ph\":\"X\",\"pid\":1,\"tid\":2,\"name\":\"stage%d backward mb0 "
                                  "(x:1)\",\"ts\":%llu,\"dur\":200}", sparse_stage,
                        (unsigned long long)t + 200);
    return snprintf(buf, cap, "{\"ph\":\"X\",\"pid\":1,\"tid\":1,\"name\":\"call\",\"ts\":%llu,"
                              "\"dur\":1}", (unsigned long long)t + 400 + 10 * k);
}

Test(kineto, a_sparse_worker_threads_ranges_find_their_steps)
{
    for (sparse_stage = 1; sparse_stage >= 0; sparse_stage--) {
        size_t steps = 1500;
        char *text = array_text(steps * 42, one_sparse_worker_event);
        const char *path = tk_path("sparse.trace.json");
        tk_write_text(path, text);
        free(text);
        cJSON *j = viztracer_report(path);
        int n_steps = cJSON_GetArraySize(cJSON_GetObjectItem(j, "steps"));
        cr_expect_eq(n_steps, (int)steps - 1, "every step but the warm-up");
        const cJSON *st = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "stages"), sparse_stage);
        for (int k = 0; k < 2; k++) {
            const cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(st, k ? "bwd_ms" : "fwd_ms"),
                                                 "count");
            int got = c ? c->valueint : -1;
            cr_expect(got <= n_steps && got >= n_steps - 8, "stage %d: %s ops of %d steps: %d",
                      sparse_stage, k ? "bwd" : "fwd", n_steps, got);
        }
        cJSON_Delete(j);
    }
}

/* The same job run here under VizTracer (where scripts/setup.sh installed it), another shape:
 * three stages, five micro-batches. */
Test(kineto, a_viztracer_pipeline_run_here_is_analyzed_through_a_dialect, .timeout = 300)
{
    const char *py = tk_find_python("PPROF_PYTHON", PP_PYTHON, NULL, "venv", "import viztracer");
    if (!py)
        cr_skip_test("no Python with VizTracer (run scripts/setup.sh, or set PPROF_PYTHON)");
    const char *out = tk_path("vz_live.json.gz");
    const char *argv[] = {py, "-m", "viztracer", "--quiet", "-o", out,
                          PP_TEST_PY_DIR "/viztracer_job.py", "--steps", "4", "--stages", "3",
                          "--microbatches", "5", "--work", "3,2,1", NULL};
    tk_result r = tk_runv(argv, NULL);
    cr_assert_eq(r.code, 0, "viztracer: exit %d: %s%s", r.code, r.out, r.err);
    tk_result_free(&r);
    check_viztracer_pipeline(out, 3, 5);
}

/* Which reading a file gets (docs/kineto.md "Which reading"): another tool's reading is tried
 * first; it stops at the first event torch's reading would read, and becomes torch's at torch's
 * header keys before any event. The result is the one the two readings in turn give: another
 * tool's file and a torch trace are read once, the files that mix them as before. */
Test(kineto, another_tools_file_is_read_once_and_torchs_reading_decides_as_before)
{
    static const struct {
        const char *what, *json;
        uint32_t readings;
        int any_category;
        uint64_t ranges, foreign;
    } cases[] = {
        {"another tool's events", "{\"traceEvents\":[" EV("tf_op", "a", 1, 100, 10) ","
                                  "{\"ph\":\"X\",\"name\":\"b\",\"pid\":7,\"tid\":1,\"ts\":120,\"dur\":5}]}",
         1, 1, 2, 0},
        /* torch's header before any event: the first reading becomes torch's */
        {"torch's header first", "{\"schemaVersion\":1,\"traceEvents\":[" EV("cpu_op", "a", 1, 100, 10)
                                 "," EV("tf_op", "b", 1, 120, 5) "]}",
         1, 0, 1, 1},
        {"torch's header, another tool's events", "{\"schemaVersion\":1,\"traceEvents\":["
                                                  EV("tf_op", "b", 1, 120, 5) "]}",
         2, 1, 1, 0},
        /* after the events: the first reading stops there, torch's keeps nothing of them, and
         * another tool's reading is the third */
        {"torch's header last", "{\"traceEvents\":[" EV("tf_op", "b", 1, 120, 5) "],"
                                "\"distributedInfo\":{\"rank\":3}}",
         3, 1, 1, 0},
        {"a torch event after another tool's", "{\"traceEvents\":[" EV("tf_op", "a", 1, 100, 10) ","
                                               EV("tf_op", "b", 1, 120, 5) ","
                                               EV("cpu_op", "c", 1, 130, 5) "]}",
         2, 0, 1, 2},
        /* torch's category, but its reading keeps nothing of it (an end with nothing open):
         * read again as another tool's, the third reading */
        {"torch's reading keeps nothing", "{\"traceEvents\":[" EV("tf_op", "a", 1, 100, 10) ","
                                          "{\"ph\":\"E\",\"cat\":\"cpu_op\",\"pid\":7,\"tid\":1,\"ts\":150}]}",
         3, 1, 1, 0},
        /* names and flows only: nothing torch's reading counts as another tool's, so torch's
         * reading stands */
        {"names and flows only", "{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":7,"
                                 "\"tid\":1,\"args\":{\"name\":\"main\"}},{\"ph\":\"s\",\"cat\":\"x\","
                                 "\"id\":1,\"pid\":7,\"tid\":1,\"ts\":5}]}",
         2, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_kineto_stats s;
        cr_assert_eq(convert_text(cases[i].json, NULL, &s, NULL), PP_OK, "%s: %s", cases[i].what,
                     pp_error_message());
        cr_expect_eq(s.readings, cases[i].readings, "%s: %u readings", cases[i].what, s.readings);
        cr_expect_eq(s.any_category, cases[i].any_category, "%s", cases[i].what);
        cr_expect_eq(s.ranges, cases[i].ranges, "%s: %llu ranges", cases[i].what,
                     (unsigned long long)s.ranges);
        cr_expect_eq(s.foreign, cases[i].foreign, "%s", cases[i].what);
        cr_expect_geq(s.bytes_read, s.bytes_in * (cases[i].readings > 2 ? 2 : 1), "%s",
                      cases[i].what);
        cr_expect(cases[i].readings > 1 || s.bytes_read == s.bytes_in, "%s", cases[i].what);
    }
    /* real files, each read once */
    const char *out = tk_path("which.pft");
    pp_kineto_stats s;
    unlink(out);
    cr_assert_eq(pp_kineto_convert(DATA "/viztracer/vz.json.gz", out, NULL, &s), PP_OK);
    cr_expect_eq(s.readings, 1);
    cr_expect_eq(s.bytes_read, s.bytes_in);
    cr_expect(s.any_category && s.ranges > 1000, "%llu ranges", (unsigned long long)s.ranges);
    unlink(out);
    cr_assert_eq(pp_kineto_convert(DATA "/gp/rank1.json", out, NULL, &s), PP_OK);
    cr_expect_eq(s.readings, 1);
    cr_expect_eq(s.bytes_read, s.bytes_in);
    cr_expect(!s.any_category && s.ranges > 0);
}

/* The first reading's question (kineto.c torch_class_of: would torch's reading read this
 * event?) and torch's reading's own answer (its dispatch) agree, for every phase and every kind
 * of category: beside another tool's event the first reading stops exactly at the events torch's
 * reading reads, which, read by torch's reading alone (after torch's header), are counted
 * neither as another tool's nor skipped. */
Test(kineto, the_first_readings_question_is_torchs_own_answer)
{
    static const char *const phs = "XiIBEbenSFRCsftPO";
    static const char *const cats[] = {"cpu_op", "user_annotation", "python_function", "python",
                                       "Runtime", "cpu_instant_event", "kernel", "gpu_memcpy",
                                       "gpu_memset", "cuda_runtime", "cuda_driver", "Operator",
                                       "pipeline timeline", "virtual pipeline timeline",
                                       "tf_op", "Trace", "ac2g", "", NULL};
    int checked = 0;
    for (const char *ph = phs; *ph; ph++)
        for (size_t k = 0; k < sizeof cats / sizeof cats[0]; k++)
            for (int mem = 0; mem < 2; mem++) {
                char ev[256], cat[48] = "";
                if (cats[k])
                    snprintf(cat, sizeof cat, "\"cat\":\"%s\",", cats[k]);
                snprintf(ev, sizeof ev,
                         "{\"ph\":\"%c\",%s\"name\":\"%s\",\"pid\":7,\"tid\":1,\"ts\":200,"
                         "\"dur\":5,\"id\":1,\"args\":{\"v\":1,\"correlation\":5}}",
                         *ph, cat, mem ? "[memory]" : "x");
                char other[512], alone[512];
                snprintf(other, sizeof other, "{\"traceEvents\":[%s,%s]}",
                         "{\"ph\":\"X\",\"cat\":\"tf_op\",\"name\":\"a\",\"pid\":7,\"tid\":1,"
                         "\"ts\":100,\"dur\":10}", ev);
                snprintf(alone, sizeof alone, "{\"schemaVersion\":1,\"traceEvents\":[%s]}", ev);
                pp_kineto_stats a, b;
                cr_assert_eq(convert_text(other, NULL, &a, NULL), PP_OK, "%s", ev);
                cr_assert_eq(convert_text(alone, NULL, &b, NULL), PP_OK, "%s", ev);
                int stopped = a.readings > 1;
                int torch_reads = !b.any_category && b.skipped_other == 0;
                cr_expect_eq(stopped, torch_reads, "%s: the first reading %s, torch's %s", ev,
                             stopped ? "stopped" : "went on",
                             torch_reads ? "reads it" : "does not");
                checked++;
            }
    cr_assert_eq(checked, 17 * 19 * 2);
}

/* Converts the file at path into out and loads the result. */
static pp_trace *convert_loaded(const char *path, const char *out, pp_kineto_stats *s)
{
    unlink(out);
    cr_assert_eq(pp_kineto_convert(path, out, NULL, s), PP_OK, "%s", pp_error_message());
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(out, &t), PP_OK);
    return t;
}

/* Timestamps in every spelling a JSON writer uses read as strtod reads them (the tokenizer's
 * one-pass path for plain decimals, the long way for the rest), also where a number straddles
 * the boundary of the tokenizer's 256 KB reads of a file. Each event on a thread of its own, its
 * PUSH at round(ts x 1000) ns. */
Test(kineto, numbers_read_as_strtod_reads_them_wherever_they_lie)
{
    static const char *const ts[] = {"100",          "100.5",          "0",
                                     "0.000001",     "1234567.891",    "1e2",
                                     "1.5E3",        "2.5e+2",         "7.25e-1",
                                     "4503599627370.495", "9007199254740.993",
                                     "100.000000000000000000000001", "12345678901234567890e-10",
                                     "100.", "0.1234567890123456789012"};
    size_t n = sizeof ts / sizeof ts[0];
    for (int straddle = 0; straddle < 2; straddle++) {
        const char *path = tk_path("numbers.json");
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        long at = fprintf(f, "{\"traceEvents\":[");
        for (size_t i = 0; i < n; i++) {
            char head[160];
            int k = snprintf(head, sizeof head, "%s{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"n%zu\","
                                                "\"pid\":1,\"tid\":%zu,\"dur\":1,\"ts\":",
                             i ? "," : "", i, i + 1);
            if (straddle) { /* pad so that this number starts 3 bytes before a 256 KB boundary */
                long want = (long)(i + 1) * 262144 - 3 - k;
                cr_assert_gt(want, at);
                at += fprintf(f, "%*s", (int)(want - at), "");
            }
            at += fprintf(f, "%s%s}", head, ts[i]);
        }
        fprintf(f, "]}");
        fclose(f);
        pp_kineto_stats s;
        pp_trace *t = convert_loaded(path, tk_path("numbers.pft"), &s);
        cr_assert_eq(s.ranges, n, "%llu ranges, %llu malformed", (unsigned long long)s.ranges,
                     (unsigned long long)s.malformed);
        size_t seen = 0;
        for (size_t e = 0; e < t->n_events; e++) {
            if (t->events[e].type != PP_REC_PUSH)
                continue;
            size_t i = (size_t)strtoul(t->events[e].message + 1, NULL, 10);
            cr_assert_lt(i, n);
            double v = strtod(ts[i], NULL);
            cr_expect_eq(t->events[e].ts, (uint64_t)llround(v * 1000.0), "ts %s%s: %llu ns",
                         ts[i], straddle ? " across a boundary" : "",
                         (unsigned long long)t->events[e].ts);
            seen++;
        }
        cr_assert_eq(seen, n);
        pp_trace_free(t);
    }
}

/* Names of every length around the tokenizer's 16-byte steps, with an escape before, inside or
 * after them, and one near the cap of 4096 bytes, come out as written (unescaped), also across
 * the boundary of its 256 KB reads. */
Test(kineto, strings_of_every_length_and_escape_read_whole)
{
    enum { LENS = 48, KINDS = 4 };
    static const char *const esc[KINDS] = {"", "\\\"", "\\n", "\\u00e9"};
    static const char *const raw[KINDS] = {"", "\"", "\n", "\xc3\xa9"};
    const char *path = tk_path("strings.json");
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "{\"traceEvents\":[");
    char want[LENS * KINDS * 3][128];
    size_t n = 0;
    for (int len = 1; len <= LENS; len++)
        for (int k = 0; k < KINDS; k++)
            for (int where = 0; where < (k ? 3 : 1); where++) {
                int cut = where == 0 ? 0 : where == 1 ? len / 2 : len; /* before, in, after */
                char name[128], w[128];
                snprintf(name, sizeof name, "%.*s%s%.*s", cut, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", esc[k],
                         len - cut, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" + cut);
                snprintf(w, sizeof w, "%.*s%s%.*s", cut, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", raw[k],
                         len - cut, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" + cut);
                if (n == 300) /* this one across the first 256 KB boundary */
                    fprintf(f, "%*s", (int)(262144 - 20 - ftell(f)), "");
                fprintf(f, "%s{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"%s\",\"pid\":1,\"tid\":%zu,"
                           "\"ts\":%zu,\"dur\":1}",
                        n ? "," : "", name, n + 1, 10 * n + 10);
                memcpy(want[n++], w, sizeof w);
            }
    /* a name of 4100 bytes: cut at 4096 */
    fprintf(f, ",{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"%0*d\",\"pid\":1,\"tid\":9999,\"ts\":5,"
               "\"dur\":1}]}", 4100, 7);
    fclose(f);
    pp_kineto_stats s;
    pp_trace *t = convert_loaded(path, tk_path("strings.pft"), &s);
    cr_assert_eq(s.ranges, n + 1);
    cr_assert_eq(s.strings_truncated, 1);
    size_t seen = 0;
    for (size_t e = 0; e < t->n_events; e++) {
        if (t->events[e].type != PP_REC_PUSH)
            continue;
        if (t->events[e].ts == 5000) {
            cr_expect_eq(strlen(t->events[e].message), 4096);
            continue;
        }
        size_t i = (size_t)(t->events[e].ts / 10000) - 1;
        cr_assert_lt(i, n);
        cr_expect_str_eq(t->events[e].message, want[i], "name %zu", i);
        seen++;
    }
    cr_assert_eq(seen, n);
    pp_trace_free(t);
}
