/* test_memory.c: memory as pipeprof captures and analyses it (issue 17; docs/profiler.md
 * "Counters and memory", docs/metrics.md "Memory"):
 *   - capture: tests/mem_app.c (a plain NVTX program reporting memory by the counters and memory
 *     extensions) under pprof-run: the trace holds every registration and every sample with its
 *     value, on the thread that sampled, and the writer's resident-memory counter;
 *   - analysis (analyzer/memory.c) of synthetic traces written here: two stages' peaks by
 *     purpose and in total, the step and the time in it of each total peak (worked out below),
 *     the other counters, heaps and RSS as series; hostile ids, names and values bounded. */
#define _GNU_SOURCE
#include "pp_analyzer.h"
#include "pp_kineto.h"
#include "pp_report.h"
#include "pp_trace.h"
#include "pp_testkit.h"
#include "pp_testkit_trace.h"

#include <cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
#define PPREPORT PP_BUILD_DIR "/tools/pprof-report"
#define PPCHECK PP_BUILD_DIR "/tools/pprof-check"
#ifndef PP_PPROF_LIB
#define PP_PPROF_LIB ""
#endif
#ifndef PP_MEM_APP
#define PP_MEM_APP ""
#endif

static void setup(void) { tk_dir_create("pp_memory"); }
TestSuite(memory, .init = setup, .fini = tk_dir_remove);

/* The one .pft file of a run directory. */
static const char *the_pft(const char *dir)
{
    static char path[1024];
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l > 4 && strcmp(e->d_name + l - 4, ".pft") == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            n++;
        }
    }
    closedir(d);
    cr_assert_eq(n, 1, "%d trace files in %s", n, dir);
    return path;
}

static const pp_trace_counter_def *def_named(const pp_trace *t, const char *name)
{
    for (size_t i = 0; i < t->n_counter_defs; i++)
        if (strcmp(t->counter_defs[i].name, name) == 0)
            return &t->counter_defs[i];
    return NULL;
}

Test(memory, counters_and_heaps_of_a_plain_nvtx_job_are_all_captured)
{
    if (!tk_exists(PP_PPROF_LIB) || !tk_exists(PP_MEM_APP))
        cr_skip_test("libpprof.so / mem_app not built");
    enum { N = 50 };
    const char *dir = tk_path("run");
    const char *args[] = {"-q", "-o", dir, "--", PP_MEM_APP, "50", NULL};
    tk_result r = tk_run(PPRUN, args, NULL);
    cr_assert_eq(r.code, 0, "pprof-run: %d %s", r.code, r.err);
    cr_assert_str_eq(r.out, "1\n", "a region's handle is its address");
    tk_result_free(&r);
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(the_pft(dir), &t), PP_OK);
    cr_assert_eq(t->damage.blocks_bad, 0);
    cr_assert(t->damage.has_footer);
    cr_assert_eq(t->footer.dropped, 0);

    /* the two stages' counters: params once, activations 1 + 2N samples, in order, each on
     * its stage's own thread */
    uint32_t tid_of[2] = {0, 0};
    for (int s = 0; s < 2; s++) {
        char name[64];
        snprintf(name, sizeof name, "pp.mem.stage%d.params", s);
        const pp_trace_counter_def *p = def_named(t, name);
        snprintf(name, sizeof name, "pp.mem.stage%d.activations", s);
        const pp_trace_counter_def *a = def_named(t, name);
        cr_assert(p && a, "stage %d counters registered", s);
        cr_assert_str_eq(p->unit, "bytes");
        cr_assert_str_eq(pp_trace_domain_name(t, p->r.domain), "pipeprof");
        cr_assert_neq(p->r.counter_id, a->r.counter_id);
        int np = 0, na = 0;
        uint64_t last_ts = 0;
        for (size_t i = 0; i < t->n_counters; i++) {
            const pp_rec_counter *c = &t->counters[i];
            if (c->domain != p->r.domain)
                continue;
            if (c->counter_id == p->r.counter_id) {
                cr_assert_eq((int64_t)c->value, (s + 1) * 1000);
                np++;
            } else if (c->counter_id == a->r.counter_id) {
                cr_assert_eq(c->kind, PP_COUNTER_INT64);
                int64_t k = na <= N ? na : 2 * N - na;
                cr_assert_eq((int64_t)c->value, k * 100 * (s + 1), "sample %d", na);
                cr_assert_geq(c->h.ts, last_ts, "samples in time order");
                last_ts = c->h.ts;
                if (!tid_of[s])
                    tid_of[s] = c->h.tid;
                cr_assert_eq(c->h.tid, tid_of[s], "all on the stage's thread");
                na++;
            }
        }
        cr_assert_eq(np, 1);
        cr_assert_eq(na, 1 + 2 * N);
    }
    cr_assert_neq(tid_of[0], tid_of[1]);

    /* the float64 counter with a static id */
    const pp_trace_counter_def *ratio = def_named(t, "app.ratio");
    cr_assert_not_null(ratio);
    cr_assert_eq(ratio->r.counter_id, (UINT64_C(1) << 24) + 5);
    cr_assert_str_eq(ratio->unit, "ratio");
    int nr = 0;
    for (size_t i = 0; i < t->n_counters; i++) {
        const pp_rec_counter *c = &t->counters[i];
        if (c->domain != ratio->r.domain || c->counter_id != ratio->r.counter_id)
            continue;
        double v;
        memcpy(&v, &c->value, sizeof v);
        cr_assert_eq(c->kind, PP_COUNTER_FLOAT64);
        cr_assert_eq(v, (nr + 1) * 0.5);
        nr++;
    }
    cr_assert_eq(nr, N);

    /* the writer's resident memory: defined, sampled (at least at exit), plausible */
    const pp_trace_counter_def *rss = pp_trace_counter_find(t, 0, PP_COUNTER_RSS_ID);
    cr_assert_not_null(rss);
    cr_assert_str_eq(rss->name, PP_COUNTER_RSS_NAME);
    cr_assert_str_eq(rss->unit, "bytes");
    int nrss = 0;
    for (size_t i = 0; i < t->n_counters; i++)
        if (t->counters[i].domain == 0 && t->counters[i].counter_id == PP_COUNTER_RSS_ID) {
            cr_assert_gt(t->counters[i].value, 4096u);
            cr_assert_lt(t->counters[i].value, UINT64_C(64) << 30);
            nrss++;
        }
    cr_assert_geq(nrss, 1);

    /* the memory extension's calls, in order */
    static const struct { uint32_t op; uint64_t bytes; uint64_t addr_off; } want[] = {
        {PP_MEM_HEAP_REGISTER, 4096, 0},  {PP_MEM_REGION_REGISTER, 64, 0},
        {PP_MEM_REGION_REGISTER, 128, 1024}, {PP_MEM_REGION_RESIZE, 256, 0},
        {PP_MEM_REGION_UNREGISTER, 0, 1024}, {PP_MEM_HEAP_RESET, 0, 0},
        {PP_MEM_HEAP_UNREGISTER, 0, 0}};
    cr_assert_eq(t->n_mem, sizeof want / sizeof want[0]);
    uint64_t base = t->mem[0].r.addr, heap = t->mem[0].r.heap;
    cr_assert_neq(heap, 0);
    cr_assert_str_eq(t->mem[0].name, "arena");
    cr_assert_str_eq(pp_trace_domain_name(t, t->mem[0].r.domain), "app");
    for (size_t i = 0; i < t->n_mem; i++) {
        const pp_rec_mem *m = &t->mem[i].r;
        cr_assert_eq(m->op, want[i].op, "call %zu", i);
        cr_assert_eq(m->bytes, want[i].bytes, "call %zu", i);
        if (m->op != PP_MEM_HEAP_RESET && m->op != PP_MEM_HEAP_UNREGISTER)
            cr_assert_eq(m->addr, base + want[i].addr_off, "call %zu", i);
        if (m->op == PP_MEM_REGION_REGISTER || m->op >= PP_MEM_HEAP_UNREGISTER)
            cr_assert(m->op == PP_MEM_REGION_UNREGISTER || m->op == PP_MEM_REGION_RESIZE ||
                      m->heap == heap, "call %zu names the heap", i);
    }
    pp_trace_free(t);
}

/* ---- synthetic traces ---- */

static void push(tk_tw *t, uint32_t tid, uint64_t ts, uint32_t msg, uint32_t cat, uint64_t payload)
{
    pp_rec_range r = tk_range_rec(PP_REC_PUSH, tid, ts, msg);
    r.category = cat;
    r.payload_type = 1; /* uint64 */
    r.payload = payload;
    tk_tw_rec(t, &r, sizeof r);
}

static void counter_def(tk_tw *t, uint32_t domain, uint64_t id, uint32_t name, uint32_t unit)
{
    pp_rec_counter_def d = {.h = {PP_REC_COUNTER_DEF, sizeof d, 0, 0}, .counter_id = id,
                            .domain = domain, .name = name, .unit = unit, .schema = 2};
    tk_tw_rec(t, &d, sizeof d);
}

static void sample(tk_tw *t, uint32_t tid, uint64_t ts, uint32_t domain, uint64_t id, int64_t v)
{
    pp_rec_counter c = {.h = {PP_REC_COUNTER, sizeof c, tid, ts}, .counter_id = id,
                        .domain = domain, .kind = PP_COUNTER_INT64, .value = (uint64_t)v};
    tk_tw_rec(t, &c, sizeof c);
}

static void sample_f(tk_tw *t, uint32_t tid, uint64_t ts, uint32_t domain, uint64_t id, double v)
{
    pp_rec_counter c = {.h = {PP_REC_COUNTER, sizeof c, tid, ts}, .counter_id = id,
                        .domain = domain, .kind = PP_COUNTER_FLOAT64};
    memcpy(&c.value, &v, sizeof v);
    tk_tw_rec(t, &c, sizeof c);
}

static void mem(tk_tw *t, uint32_t tid, uint64_t ts, uint32_t op, uint64_t heap, uint64_t addr,
                uint64_t bytes, uint32_t name)
{
    pp_rec_mem m = {.h = {PP_REC_MEM, sizeof m, tid, ts}, .op = op, .domain = 1, .heap = heap,
                    .addr = addr, .bytes = bytes, .name = name};
    tk_tw_rec(t, &m, sizeof m);
}

enum { MS = 1000000 };
static const uint64_t T0 = 1000ull * MS;

/* Two stages (tids 100, 101; categories 1, 2), three steps of 10 ms from T0: each stage runs
 * F0 [0, 1), F1 [1, 2), B0 [4, 5), B1 [5, 6) ms into the step inside a step range [0, 8).
 * Counter ids: stage s's params 10 + s, grads 20 + s, activations 30 + s (domain 1, pipeprof).
 * Stage s (A = 100 (s + 1) bytes): params (s + 1) 1000 and stage 0's grads 500, sampled once
 * before step 1; activations after F0 A, after F1 2A (stage 0 in step 3: 3A), after B0 A,
 * after B1 0. So stage 0 peaks at 1000 + 500 + 300 = 1800 in step 3, 2 ms in; stage 1 at
 * 2000 + 400 = 2400, first in step 1 (a warm-up step) and again 2 ms into step 2. */
static void write_two_stages_x(const char *path, int64_t stage0_scale)
{
    static tk_tw t;
    tk_tw_open(&t, path, 42, -1);
    uint32_t dom = tk_tw_sid(&t, "pipeprof"), s_step = tk_tw_sid(&t, "step");
    uint32_t s_f[2] = {tk_tw_sid(&t, "fwd mb0"), tk_tw_sid(&t, "fwd mb1")};
    uint32_t s_b[2] = {tk_tw_sid(&t, "bwd mb0"), tk_tw_sid(&t, "bwd mb1")};
    uint32_t bytes = tk_tw_sid(&t, "bytes");
    pp_rec_domain d = {{PP_REC_DOMAIN, sizeof d, 0, 0}, 1, dom};
    tk_tw_rec(&t, &d, sizeof d);
    const char *names[] = {"pp.mem.stage0.params", "pp.mem.stage1.params",
                           "pp.mem.stage0.grads", "pp.mem.stage0.activations",
                           "pp.mem.stage1.activations"};
    const uint64_t ids[] = {10, 11, 20, 30, 31};
    for (int i = 0; i < 5; i++)
        counter_def(&t, 1, ids[i], tk_tw_sid(&t, names[i]), bytes);
    tk_tw_flush(&t, PP_BLOCK_META, 0);
    for (int s = 0; s < 2; s++) {
        uint32_t tid = 100 + (uint32_t)s, cat = 1 + (uint32_t)s;
        int64_t A = 100 * (s + 1) * (s == 0 ? stage0_scale : 1);
        sample(&t, tid, T0 - MS, 1, 10 + (uint64_t)s, (s + 1) * 1000);
        if (s == 0)
            sample(&t, tid, T0 - MS, 1, 20, 500);
        sample(&t, tid, T0 - MS, 1, 30 + (uint64_t)s, 0);
        for (int step = 1; step <= 3; step++) {
            uint64_t b = T0 + (uint64_t)(step - 1) * 10 * MS;
            int64_t after[4] = {A, s == 0 && step == 3 ? 3 * A : 2 * A, A, 0};
            uint64_t at[4] = {1, 2, 5, 6};
            push(&t, tid, b, s_step, cat, (uint64_t)step);
            for (int k = 0; k < 4; k++) {
                uint64_t t0 = b + (k < 2 ? (uint64_t)k : (uint64_t)k + 2) * MS;
                push(&t, tid, t0, k < 2 ? s_f[k] : s_b[k - 2], cat, (uint64_t)(k % 2));
                tk_tw_pop(&t, tid, t0 + MS);
                sample(&t, tid, b + at[k] * MS, 1, 30 + (uint64_t)s, after[k]);
            }
            tk_tw_pop(&t, tid, b + 8 * MS);
        }
        tk_tw_flush(&t, PP_BLOCK_EVENTS, tid);
    }
    pp_trace_writer_close(t.w);
}

static void write_two_stages(const char *path) { write_two_stages_x(path, 1); }

static pp_analysis *analyze(const char *path, int warmup)
{
    pp_analysis_options o;
    pp_analysis_options_default(&o);
    o.warmup = warmup;
    const char *paths[] = {path};
    pp_analysis *a = NULL;
    pp_status st = pp_analyze_files(paths, 1, &o, &a);
    cr_assert_eq(st, PP_OK, "%s", pp_error_message());
    return a;
}

Test(memory, two_stages_peak_by_purpose_in_total_and_when_in_the_step)
{
    const char *path = tk_path("two.pft");
    write_two_stages(path);
    pp_analysis *a = analyze(path, 1);
    cr_assert_eq(a->n_steps, 2, "steps 2 and 3 after one warm-up step");
    cr_assert_eq(a->n_mem_stages, 2);
    const pp_amem_stage *s0 = &a->mem_stages[0], *s1 = &a->mem_stages[1];
    cr_assert_eq(s0->stage, 0);
    cr_assert_eq(s1->stage, 1);
    cr_assert_eq(s0->purposes, 1u << PP_MEM_PARAMS | 1u << PP_MEM_GRADS | 1u << PP_MEM_ACTIVATIONS);
    cr_assert_eq(s1->purposes, 1u << PP_MEM_PARAMS | 1u << PP_MEM_ACTIVATIONS);
    cr_assert_eq(s0->peak_bytes[PP_MEM_PARAMS], 1000);
    cr_assert_eq(s0->peak_bytes[PP_MEM_GRADS], 500);
    cr_assert_eq(s0->peak_bytes[PP_MEM_ACTIVATIONS], 300);
    cr_assert_eq(s0->peak_bytes[PP_MEM_OPTIMIZER], 0);
    cr_assert_eq(s0->total_peak_bytes, 1800);
    cr_assert_eq(s0->peak_step, 3);
    cr_assert_eq(s0->peak_t_ns, (double)(T0 + 22 * MS));
    cr_assert_eq(s0->peak_offset_ns, 2.0 * MS);
    cr_assert_float_eq(s0->peak_fraction, 0.2, 1e-9, "2 ms of a 10 ms step");
    cr_assert_eq(s1->peak_bytes[PP_MEM_ACTIVATIONS], 400);
    cr_assert_eq(s1->total_peak_bytes, 2400);
    cr_assert_eq(s1->peak_t_ns, (double)(T0 + 2 * MS), "first reached in the warm-up step");
    cr_assert_eq(s1->peak_step, 2, "placed in the first analyzed step that reaches it");
    cr_assert_eq(s1->peak_offset_ns, 2.0 * MS);
    cr_assert_eq(s1->samples, 1 + 1 + 12);
    cr_assert_eq(s0->samples, 1 + 1 + 1 + 12);
    cr_assert_eq(a->n_mem_series, 0, "the contract's counters are not series");
    cr_assert_eq(a->mem_ignored, 0);
    pp_analysis_free(a);

    /* without warm-up, stage 1's peak is placed in step 1 */
    a = analyze(path, 0);
    cr_assert_eq(a->mem_stages[1].peak_step, 1);
    cr_assert_eq(a->mem_stages[0].peak_step, 3);
    pp_analysis_free(a);
}

/* One stage's step ranges, a few counters of other domains, heaps and an RSS counter; plus
 * hostile definitions and samples. */
static void write_series_and_hostile(const char *path)
{
    static tk_tw t;
    tk_tw_open(&t, path, 43, -1);
    uint32_t dom = tk_tw_sid(&t, "pipeprof"), s_step = tk_tw_sid(&t, "step");
    uint32_t s_f = tk_tw_sid(&t, "fwd mb0");
    pp_rec_domain d = {{PP_REC_DOMAIN, sizeof d, 0, 0}, 1, dom};
    tk_tw_rec(&t, &d, sizeof d);
    pp_rec_domain d2 = {{PP_REC_DOMAIN, sizeof d2, 0, 0}, 2, tk_tw_sid(&t, "app")};
    tk_tw_rec(&t, &d2, sizeof d2);
    counter_def(&t, 2, 5, tk_tw_sid(&t, "app.queue"), tk_tw_sid(&t, "items"));
    counter_def(&t, 0, PP_COUNTER_RSS_ID, tk_tw_sid(&t, "pprof.rss"), tk_tw_sid(&t, "bytes"));
    /* names that look like the contract's but are not: a stage past the bound, an unknown
     * purpose, the right name in another domain; all three become plain series */
    counter_def(&t, 1, 6, tk_tw_sid(&t, "pp.mem.stage99999.params"), 0);
    counter_def(&t, 1, 7, tk_tw_sid(&t, "pp.mem.stage0.bogus"), 0);
    counter_def(&t, 2, 8, tk_tw_sid(&t, "pp.mem.stage0.params"), 0);
    counter_def(&t, 1, 9, tk_tw_sid(&t, "pp.mem.stage0.params"), 0);
    counter_def(&t, 1, 9, tk_tw_sid(&t, "pp.mem.stage0.grads"), 0); /* redefinition: ignored */
    uint32_t arena = tk_tw_sid(&t, "arena");
    tk_tw_flush(&t, PP_BLOCK_META, 0);
    uint32_t tid = 100;
    for (int step = 1; step <= 2; step++) {
        uint64_t b = T0 + (uint64_t)(step - 1) * 10 * MS;
        push(&t, tid, b, s_step, 1, (uint64_t)step);
        push(&t, tid, b, s_f, 1, 0);
        tk_tw_pop(&t, tid, b + MS);
        tk_tw_pop(&t, tid, b + 8 * MS);
    }
    sample(&t, tid, T0 + 1, 2, 5, 7);
    sample(&t, tid, T0 + 2, 2, 5, -3);
    sample(&t, tid, T0 + 3, 2, 5, 4);
    sample(&t, tid, T0 + 4, 0, PP_COUNTER_RSS_ID, 1 << 20);
    sample(&t, tid, T0 + 5, 0, PP_COUNTER_RSS_ID, 3 << 20);
    sample(&t, tid, T0 + 6, 1, 9, INT64_MAX); /* legal, just huge */
    sample(&t, tid, T0 + 7, 1, 424242, 5);    /* never defined: ignored */
    sample_f(&t, tid, T0 + 8, 2, 5, NAN);     /* not a number: ignored */
    /* a heap: regions 64 and 128, the first resized to 256, the second unregistered, then a
     * region of an unknown address unregistered (nothing happens), then the heap reset */
    mem(&t, tid, T0 + 10, PP_MEM_HEAP_REGISTER, 4, 0x1000, 4096, arena);
    mem(&t, tid, T0 + 11, PP_MEM_REGION_REGISTER, 4, 0x1000, 64, 0);
    mem(&t, tid, T0 + 12, PP_MEM_REGION_REGISTER, 4, 0x1400, 128, 0);
    mem(&t, tid, T0 + 13, PP_MEM_REGION_RESIZE, 0, 0x1000, 256, 0);
    mem(&t, tid, T0 + 14, PP_MEM_REGION_UNREGISTER, 0, 0x1400, 0, 0);
    mem(&t, tid, T0 + 15, PP_MEM_REGION_UNREGISTER, 0, 0x9999, 0, 0);
    mem(&t, tid, T0 + 16, PP_MEM_HEAP_RESET, 4, 0, 0, 0);
    tk_tw_flush(&t, PP_BLOCK_EVENTS, tid);
    /* 70000 regions in the process-wide heap: 65536 live ones kept, then all freed */
    for (uint32_t i = 0; i < 70000; i++) {
        tk_tw_room(&t, 64, PP_BLOCK_EVENTS, tid);
        mem(&t, tid, T0 + 100 + i, PP_MEM_REGION_REGISTER, 0, 0x100000 + 64 * (uint64_t)i, 8, 0);
    }
    for (uint32_t i = 0; i < 70000; i++) {
        tk_tw_room(&t, 64, PP_BLOCK_EVENTS, tid);
        mem(&t, tid, T0 + 80000 + i, PP_MEM_REGION_UNREGISTER, 0, 0x100000 + 64 * (uint64_t)i,
            0, 0);
    }
    tk_tw_flush(&t, PP_BLOCK_EVENTS, tid);
    pp_trace_writer_close(t.w);
}

static const pp_amem_series *series_named(const pp_analysis *a, const char *domain,
                                          const char *name)
{
    for (size_t i = 0; i < a->n_mem_series; i++)
        if (strcmp(a->mem_series[i].domain, domain) == 0 &&
            strcmp(a->mem_series[i].name, name) == 0)
            return &a->mem_series[i];
    return NULL;
}

Test(memory, other_counters_heaps_and_rss_are_series_and_hostile_input_is_bounded)
{
    const char *path = tk_path("series.pft");
    write_series_and_hostile(path);
    pp_analysis *a = analyze(path, 0);
    const pp_amem_series *q = series_named(a, "app", "app.queue");
    cr_assert_not_null(q);
    cr_assert_eq(q->kind, PP_AMEM_COUNTER);
    cr_assert_str_eq(q->unit, "items");
    cr_assert_eq(q->samples, 3);
    cr_assert_eq(q->min, -3);
    cr_assert_eq(q->max, 7);
    cr_assert_eq(q->last, 4);
    cr_assert_eq(q->max_t_ns, (double)(T0 + 1));
    const pp_amem_series *rss = series_named(a, "", "pprof.rss");
    cr_assert_not_null(rss);
    cr_assert_eq(rss->kind, PP_AMEM_RSS);
    cr_assert_eq(rss->max, 3 << 20);
    cr_assert_eq(rss->last, 3 << 20);
    /* the look-alikes are series; the real one (domain pipeprof, id 9) is stage 0's params */
    cr_assert_not_null(series_named(a, "pipeprof", "pp.mem.stage99999.params"));
    cr_assert_not_null(series_named(a, "pipeprof", "pp.mem.stage0.bogus"));
    cr_assert_not_null(series_named(a, "app", "pp.mem.stage0.params"));
    cr_assert_null(series_named(a, "pipeprof", "pp.mem.stage0.params"));
    cr_assert_eq(a->n_mem_stages, 1);
    cr_assert_eq(a->mem_stages[0].purposes, 1u << PP_MEM_PARAMS, "the first definition wins");
    cr_assert_eq(a->mem_stages[0].peak_bytes[PP_MEM_PARAMS], (double)INT64_MAX);
    /* the heap: 0 at register, 64, 192, 384, 256, then 0 at the reset */
    const pp_amem_series *h = series_named(a, "pipeprof", "arena");
    cr_assert_not_null(h);
    cr_assert_eq(h->kind, PP_AMEM_HEAP);
    cr_assert_eq(h->samples, 6);
    cr_assert_eq(h->max, 384);
    cr_assert_eq(h->last, 0);
    const pp_amem_series *pw = series_named(a, "pipeprof", "process-wide heap");
    cr_assert_not_null(pw);
    cr_assert_eq(pw->max, 8.0 * 65536, "live regions capped at 65536");
    cr_assert_eq(pw->last, 0, "every kept region freed");
    cr_assert_eq(a->mem_ignored, 2 + (70000 - 65536), "the undefined and NaN samples, the "
                                                    "regions past the cap");
    cr_assert_not_null(strstr(a->warnings, "65536 live regions"), "%s", a->warnings);
    pp_analysis_free(a);
}

/* Many counters in two traces: 1024 counters per trace, 1024 series per run. */
static void write_many(const char *path, uint32_t pid, uint32_t n)
{
    static tk_tw t;
    tk_tw_open(&t, path, pid, (int32_t)pid - 50);
    uint32_t dom = tk_tw_sid(&t, "app");
    pp_rec_domain d = {{PP_REC_DOMAIN, sizeof d, 0, 0}, 1, dom};
    tk_tw_rec(&t, &d, sizeof d);
    static char names[3000][24];
    for (uint32_t i = 0; i < n; i++) {
        tk_tw_room(&t, 64, PP_BLOCK_META, 0);
        snprintf(names[i], sizeof names[i], "many.%u", i);
        tk_tw_string(&t, 1000 + i, names[i]);
        counter_def(&t, 1, 1000 + i, 1000 + i, 0);
    }
    tk_tw_flush(&t, PP_BLOCK_META, 0);
    for (uint32_t i = 0; i < n; i++) {
        tk_tw_room(&t, 64, PP_BLOCK_EVENTS, 7);
        sample(&t, 7, T0 + i, 1, 1000 + i, (int64_t)i);
    }
    tk_tw_flush(&t, PP_BLOCK_EVENTS, 7);
    pp_trace_writer_close(t.w);
}

Test(memory, counters_and_series_are_capped_with_a_warning)
{
    write_many(tk_path("a.pft"), 50, 2000);
    write_many(tk_path("b.pft"), 51, 100);
    pp_analysis_options o;
    pp_analysis_options_default(&o);
    const char *paths[] = {tk_path("a.pft"), tk_path("b.pft")};
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_files(paths, 2, &o, &a), PP_OK, "%s", pp_error_message());
    cr_assert_eq(a->n_mem_series, PP_ANALYSIS_MAX_SERIES);
    size_t per_file[2] = {0, 0};
    for (size_t i = 0; i < a->n_mem_series; i++) {
        cr_assert(a->mem_series[i].file == 0 || a->mem_series[i].file == 1);
        per_file[a->mem_series[i].file]++;
        cr_assert_eq(a->mem_series[i].samples, 1);
    }
    cr_assert_leq(per_file[0], 1024);
    cr_assert_leq(per_file[1], 100);
    /* ignored: the first trace's 976 definitions past 1024 and their samples, the second's
     * 100 definitions past the run's series (their samples go to no series: not counted) */
    cr_assert_eq(a->mem_ignored, 976 + 976 + 100);
    cr_assert_not_null(strstr(a->warnings, "more than 1024 counters"), "%s", a->warnings);
    cr_assert_not_null(strstr(a->warnings, "more than 1024 counter/heap series"), "%s",
                       a->warnings);
    pp_analysis_free(a);
}

/* ---- reports ---- */

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    cr_assert(cJSON_IsNumber(v), "%s is not a number", k);
    return v->valuedouble;
}

Test(memory, text_and_json_reports_show_the_peaks_and_when)
{
    const char *path = tk_path("two.pft");
    write_two_stages(path);
    const char *args[] = {path, NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    const char *t = strstr(r.out, "Memory per stage");
    cr_assert_not_null(t, "%s", r.out);
    /* stage 0: params, grads, -, activations, -, -; total; step 3, 2 ms in, 20% */
    cr_assert_not_null(strstr(t, "     3     2.000    20.0%"), "%s", t);
    tk_result_free(&r);
    const char *jargs[] = {"--json", path, NULL};
    r = tk_run(PPREPORT, jargs, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cJSON *root = cJSON_Parse(r.out);
    cr_assert_not_null(root);
    const cJSON *m = cJSON_GetObjectItem(root, "memory");
    cr_assert_not_null(m);
    const cJSON *st = cJSON_GetObjectItem(m, "stages");
    cr_assert_eq(cJSON_GetArraySize(st), 2);
    const cJSON *s0 = cJSON_GetArrayItem(st, 0), *s1 = cJSON_GetArrayItem(st, 1);
    cr_assert_eq(num(s0, "stage"), 0);
    cr_assert_eq(num(s0, "total_peak_bytes"), 1800);
    cr_assert_eq(num(s0, "peak_step"), 3);
    cr_assert_float_eq(num(s0, "peak_offset_ms"), 2.0, 1e-9);
    cr_assert_float_eq(num(s0, "peak_fraction"), 0.2, 1e-9);
    const cJSON *pk = cJSON_GetObjectItem(s0, "peak_bytes");
    cr_assert_eq(num(pk, "params"), 1000);
    cr_assert_eq(num(pk, "grads"), 500);
    cr_assert_eq(num(pk, "activations"), 300);
    cr_assert_null(cJSON_GetObjectItem(pk, "optimizer"), "a purpose not reported is absent");
    cr_assert_eq(num(s1, "total_peak_bytes"), 2400);
    cr_assert_eq(num(s1, "peak_step"), 2);
    cr_assert_eq(num(m, "ignored"), 0);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(m, "series")), 0);
    cJSON_Delete(root);
    tk_result_free(&r);
}

Test(memory, a_job_with_memory_and_no_ranges_reports_its_series)
{
    if (!tk_exists(PP_PPROF_LIB) || !tk_exists(PP_MEM_APP))
        cr_skip_test("libpprof.so / mem_app not built");
    const char *dir = tk_path("run");
    const char *args[] = {"-q", "-o", dir, "--", PP_MEM_APP, "5", NULL};
    tk_result r = tk_run(PPRUN, args, NULL);
    cr_assert_eq(r.code, 0, "pprof-run: %d %s", r.code, r.err);
    tk_result_free(&r);
    const char *jargs[] = {"--json", dir, NULL};
    r = tk_run(PPREPORT, jargs, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    cJSON *root = cJSON_Parse(r.out);
    cr_assert_not_null(root, "%s", r.out);
    const cJSON *m = cJSON_GetObjectItem(root, "memory");
    cr_assert_not_null(m);
    /* mem_app's stages have no step ranges: their peaks are placed in no step */
    const cJSON *st = cJSON_GetObjectItem(m, "stages");
    cr_assert_eq(cJSON_GetArraySize(st), 2);
    cr_assert_eq(num(cJSON_GetArrayItem(st, 1), "total_peak_bytes"), 2000 + 5 * 200);
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(st, 1), "peak_step")));
    int rss = 0, heap = 0, ratio = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(m, "series"))
    {
        const char *kind = cJSON_GetObjectItem(s, "kind")->valuestring;
        const char *name = cJSON_GetObjectItem(s, "name")->valuestring;
        if (strcmp(kind, "rss") == 0) {
            rss++;
            cr_assert_gt(num(s, "max"), 4096);
        }
        if (strcmp(kind, "heap") == 0 && strcmp(name, "arena") == 0) {
            heap++;
            cr_assert_eq(num(s, "max"), 256 + 128, "64 + 128, then 64 -> 256");
        }
        if (strcmp(name, "app.ratio") == 0) {
            ratio++;
            cr_assert_eq(num(s, "max"), 2.5);
        }
    }
    cr_assert_eq(rss, 1);
    cr_assert_eq(heap, 1);
    cr_assert_eq(ratio, 1);
    cJSON_Delete(root);
    tk_result_free(&r);
}

Test(memory, pprof_check_gates_on_a_stage_peak_memory)
{
    /* the current run's stage 0 keeps 11x the activations: peak 1000 + 500 + 3300 = 4800 bytes
     * against 1800 (+167%); the same timing, so no other metric moves */
    const char *base = tk_path("base"), *cur = tk_path("cur");
    cr_assert_eq(mkdir(base, 0755), 0);
    cr_assert_eq(mkdir(cur, 0755), 0);
    char p[1024];
    snprintf(p, sizeof p, "%s/h.1.pft", base);
    write_two_stages(p);
    snprintf(p, sizeof p, "%s/h.1.pft", cur);
    write_two_stages_x(p, 11);
    const char *args[] = {"-b", base, cur, NULL};
    tk_result r = tk_run(PPCHECK, args, NULL);
    cr_assert_eq(r.code, 1, "exit %d: %s %s", r.code, r.out, r.err);
    cr_assert_not_null(strstr(r.out, "stage0.peak_mem_MiB"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "regression"), "%s", r.out);
    tk_result_free(&r);
    /* the same through a summary and a saved baseline; within a raised threshold it passes */
    const char *jargs[] = {"--json", "-o", tk_path("base.json"), base, NULL};
    r = tk_run(PPREPORT, jargs, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    tk_result_free(&r);
    const char *sargs[] = {"--save-baseline", tk_path("base.json"), "-o", tk_path("bl.json"),
                           NULL};
    r = tk_run(PPCHECK, sargs, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    tk_result_free(&r);
    const char *froms[] = {tk_path("base.json"), tk_path("bl.json")};
    for (int i = 0; i < 2; i++) {
        const char *a2[] = {"-b", froms[i], cur, NULL};
        r = tk_run(PPCHECK, a2, NULL);
        cr_assert_eq(r.code, 1, "from %s: exit %d: %s %s", froms[i], r.code, r.out, r.err);
        cr_assert_not_null(strstr(r.out, "stage0.peak_mem_MiB"), "%s", r.out);
        tk_result_free(&r);
    }
    const char *a3[] = {"-b", base, "--threshold", "peak_mem_MiB=200", cur, NULL};
    r = tk_run(PPCHECK, a3, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s %s", r.code, r.out, r.err);
    tk_result_free(&r);
    /* the same run against itself passes */
    const char *a4[] = {"-b", base, base, NULL};
    r = tk_run(PPCHECK, a4, NULL);
    cr_assert_eq(r.code, 0, "exit %d: %s %s", r.code, r.out, r.err);
    tk_result_free(&r);
}

/* The "C" events of a Chrome trace file: how many, and how many on track `name`. */
static int chrome_counters(const char *path, const char *name, const char *series, double *last)
{
    size_t len = 0;
    char *text = tk_slurp(path, &len);
    cr_assert_not_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(root);
    int n = 0, named = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents"))
    {
        const cJSON *ph = cJSON_GetObjectItem(e, "ph");
        if (!cJSON_IsString(ph) || strcmp(ph->valuestring, "C") != 0)
            continue;
        n++;
        if (strcmp(cJSON_GetObjectItem(e, "name")->valuestring, name) != 0)
            continue;
        const cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), series);
        if (v) {
            named++;
            *last = v->valuedouble;
        }
    }
    cJSON_Delete(root);
    return named + 1000 * n;
}

Test(memory, chrome_export_has_counter_tracks)
{
    /* with a pipeline: the kept step (3) only, 4 activation samples a stage */
    const char *path = tk_path("two.pft");
    write_two_stages(path);
    const char *args[] = {"--chrome", tk_path("two.json"), path, NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    tk_result_free(&r);
    double last = -1;
    int got = chrome_counters(tk_path("two.json"), "stage 0 memory (MiB)", "activations", &last);
    cr_assert_eq(got, 8 * 1000 + 4, "got %d", got);
    cr_assert_eq(last, 0, "the last sample of step 3: B1 released everything");
    got = chrome_counters(tk_path("two.json"), "stage 1 memory (MiB)", "activations", &last);
    cr_assert_eq(got % 1000, 4);

    /* without ranges: every sample of the run */
    if (!tk_exists(PP_PPROF_LIB) || !tk_exists(PP_MEM_APP))
        return;
    const char *dir = tk_path("run");
    const char *rargs[] = {"-q", "-o", dir, "--", PP_MEM_APP, "5", NULL};
    r = tk_run(PPRUN, rargs, NULL);
    cr_assert_eq(r.code, 0, "pprof-run: %d %s", r.code, r.err);
    tk_result_free(&r);
    const char *cargs[] = {"--chrome", tk_path("run.json"), dir, NULL};
    r = tk_run(PPREPORT, cargs, NULL);
    cr_assert_eq(r.code, 0, "%s", r.err);
    tk_result_free(&r);
    got = chrome_counters(tk_path("run.json"), "stage 1 memory (MiB)", "activations", &last);
    cr_assert_eq(got % 1000, 1 + 2 * 5);
    got = chrome_counters(tk_path("run.json"), "stage 1 memory (MiB)", "params", &last);
    cr_assert_eq(got % 1000, 1);
    cr_assert_float_eq(last, 2000 / 1048576.0, 1e-12);
    got = chrome_counters(tk_path("run.json"), "app: arena (bytes)", "value", &last);
    cr_assert_eq(got % 1000, 7, "register, 2 regions, resize, unregister, reset, unregister");
    got = chrome_counters(tk_path("run.json"), "app: app.ratio", "value", &last);
    cr_assert_eq(got % 1000, 5);
    cr_assert_eq(last, 2.5);
    got = chrome_counters(tk_path("run.json"), "pprof.rss (bytes)", "value", &last);
    cr_assert_geq(got % 1000, 1);
    cr_assert_eq(got / 1000, 2 * 12 + 7 + 5 + got % 1000, "nothing else: %d", got);
}

Test(memory, gantt_has_a_memory_row_per_stage)
{
    const char *path = tk_path("two.pft");
    write_two_stages(path);
    const char *args[] = {"-q", path, "--steps", "2:3", "--gantt", tk_path("g.png"),
                          "--gantt-data", tk_path("g.dat"), NULL};
    tk_result r = tk_run(PPREPORT, args, NULL);
    int drawn = r.code == 0;
    if (!drawn) /* without gnuplot the data is still written */
        cr_assert_not_null(strstr(r.err, "gnuplot"), "%s", r.err);
    tk_result_free(&r);
    size_t len = 0;
    char *bars = tk_slurp(tk_path("g.dat"), &len);
    cr_assert_not_null(bars);
    cr_assert_null(strstr(bars, " mem "), "the bars' data stay as they were: %s", bars);
    free(bars);
    char *dat = tk_slurp(tk_path("g.mem.dat"), &len);
    cr_assert_not_null(dat);
    /* stage 0's row over steps 2..3 (20 ms from step 2's start): the value held at 0
     * (1500 B: params + grads, activations 0 after step 1), then 8 samples, then the end */
    const char *m0 = strstr(dat, "# memory of stage 0");
    const char *m1 = strstr(dat, "# memory of stage 1");
    cr_assert(m0 && m1 && m0 < m1, "%s", dat);
    int n0 = 0;
    for (const char *p = m0; p < m1 && (p = strstr(p, "\n0 ")) && p < m1; p++)
        n0++;
    cr_assert_eq(n0, 1 + 8 + 1, "%s", m0);
    cr_assert_not_null(strstr(m0, "\n0 0.000000 0.000000 mem 0.001431 0.000000\n"),
                       "the row's least value, at its bottom: %s", m0);
    cr_assert_not_null(strstr(m0, "\n0 12.000000 12.000000 mem 0.001717 1.000000\n"),
                       "the step-3 peak, 1800 B, 2 ms into step 3, at its top: %s", m0);
    free(dat);
    if (drawn) {
        cr_assert(tk_exists(tk_path("g.png")));
        char *gp = tk_slurp(tk_path("g.gp"), &len);
        cr_assert_not_null(gp);
        cr_assert_not_null(strstr(gp, "'stage 1 memory, peak 0.002289 MiB' 3"), "%s", gp);
        cr_assert_not_null(strstr(gp, "memdata index 1 using"), "%s", gp);
        cr_assert_not_null(strstr(gp, "g.mem.dat'"), "%s", gp);
        free(gp);
    }
}

/* ---- Kineto traces recorded with profile_memory=True ---- */

#define MEMEV(tid, ts, dtype, did, alloc, reserved)                                              \
    "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"pid\":7,\"tid\":" #tid   \
    ",\"ts\":" #ts ",\"s\":\"t\",\"args\":{\"Addr\":1234,\"Bytes\":512,\"Total Allocated\":"     \
    #alloc ",\"Total Reserved\":" #reserved ",\"Device Type\":" #dtype ",\"Device Id\":" #did "}}"

Test(memory, kineto_memory_events_become_counter_series)
{
    const char *j =
        "{\"distributedInfo\":{\"rank\":1},\"traceEvents\":["
        "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":7,\"tid\":9,\"ts\":100,"
        "\"dur\":50},"
        MEMEV(9, 110, 1, 0, 1024, 2097152) "," MEMEV(9, 120, 1, 0, 3072, 2097152) ","
        MEMEV(9, 130, 1, 0, 2048, 4194304) "," MEMEV(9, 140, 0, -1, 4096, 4096) ","
        MEMEV(9, 141, 99, 0, 1, 1) ","                      /* no such device type: malformed */
        "{\"ph\":\"i\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\",\"pid\":7,\"tid\":9,"
        "\"ts\":142,\"args\":{\"Bytes\":64}}]}";           /* no totals: skipped */
    const char *out = tk_path("k.pft");
    pp_kineto_stats ks;
    cr_assert_eq(pp_kineto_convert_mem(j, strlen(j), out, NULL, &ks), PP_OK, "%s",
                 pp_error_message());
    cr_assert_eq(ks.memory_samples, 8, "allocated and reserved of 4 events");
    cr_assert_eq(ks.malformed, 1);
    cr_assert_eq(ks.skipped_memory, 1);
    pp_trace *t = NULL;
    cr_assert_eq(pp_trace_load(out, &t), PP_OK);
    cr_assert_eq(t->n_counters, 8);
    cr_assert_eq(t->n_counter_defs, 4);
    for (size_t i = 1; i < t->n_counters; i++)
        cr_assert_geq(t->counters[i].h.ts, t->counters[i - 1].h.ts, "in time order");
    pp_trace_free(t);
    pp_analysis *a = analyze(out, 0);
    const pp_amem_series *al = series_named(a, "torch.memory", "allocated cuda:0");
    const pp_amem_series *rs = series_named(a, "torch.memory", "reserved cuda:0");
    const pp_amem_series *cpu = series_named(a, "torch.memory", "allocated cpu");
    cr_assert(al && rs && cpu);
    cr_assert_str_eq(al->unit, "bytes");
    cr_assert_eq(al->samples, 3);
    cr_assert_eq(al->max, 3072);
    cr_assert_eq(al->last, 2048);
    cr_assert_eq(rs->max, 4194304);
    cr_assert_eq(cpu->max, 4096);
    pp_analysis_free(a);
}

/* ---- CUPTI memory activity (pprof-run --cuda) ---- */

static void gpu_mem(tk_tw *t, uint32_t tid, uint64_t ts, uint8_t op, uint32_t dev,
                    uint64_t addr, uint64_t bytes)
{
    pp_rec_gpu_mem g = {.h = {PP_REC_GPU_MEM, sizeof g, tid, 0}, .op = op, .memory_kind = 3,
                        .device = dev, .address = addr, .bytes = bytes, .ts = ts};
    tk_tw_rec(t, &g, sizeof g);
}

Test(memory, cupti_allocations_are_a_heap_per_device)
{
    static tk_tw t;
    const char *path = tk_path("gpu.pft");
    tk_tw_open(&t, path, 44, 0);
    uint32_t s_f = tk_tw_sid(&t, "forward");
    tk_tw_flush(&t, PP_BLOCK_META, 0);
    tk_tw_rec(&t, &(pp_rec_range){.h = {PP_REC_PUSH, sizeof(pp_rec_range), 5, T0}, .message = s_f},
              sizeof(pp_rec_range));
    tk_tw_pop(&t, 5, T0 + 10 * MS);
    tk_tw_flush(&t, PP_BLOCK_EVENTS, 5);
    /* device 0: 1 MiB, 2 MiB, the first released, 4 MiB at the same address again; device 1:
     * 8 MiB; a release of an address never allocated changes nothing */
    gpu_mem(&t, 6, T0 + 1 * MS, PP_GPU_MEM_ALLOC, 0, 0x7f0000000000, 1 << 20);
    gpu_mem(&t, 6, T0 + 2 * MS, PP_GPU_MEM_ALLOC, 0, 0x7f0000100000, 2 << 20);
    gpu_mem(&t, 6, T0 + 3 * MS, PP_GPU_MEM_RELEASE, 0, 0x7f0000000000, 1 << 20);
    gpu_mem(&t, 6, T0 + 4 * MS, PP_GPU_MEM_ALLOC, 0, 0x7f0000000000, 4 << 20);
    gpu_mem(&t, 6, T0 + 5 * MS, PP_GPU_MEM_ALLOC, 1, 0x7f0000000000, 8 << 20);
    gpu_mem(&t, 6, T0 + 6 * MS, PP_GPU_MEM_RELEASE, 0, 0x12345, 0);
    tk_tw_flush(&t, PP_BLOCK_EVENTS, 6);
    pp_trace_writer_close(t.w);
    pp_trace *tr = NULL;
    cr_assert_eq(pp_trace_load(path, &tr), PP_OK);
    cr_assert_eq(tr->n_gpu_mem, 6);
    cr_assert_eq(tr->gpu_mem[3].bytes, 4u << 20);
    cr_assert_eq(tr->n_gpu, 0, "not GPU kernels or copies");
    pp_trace_free(tr);
    pp_analysis *a = analyze(path, 0);
    const pp_amem_series *d0 = series_named(a, "", "CUDA device 0");
    const pp_amem_series *d1 = series_named(a, "", "CUDA device 1");
    cr_assert(d0 && d1);
    cr_assert_eq(d0->kind, PP_AMEM_HEAP);
    cr_assert_eq(d0->samples, 4, "the unknown release is not a sample");
    cr_assert_eq(d0->max, 6 << 20, "2 MiB + 4 MiB");
    cr_assert_eq(d0->last, 6 << 20);
    cr_assert_eq(d0->max_t_ns, (double)(T0 + 4 * MS));
    cr_assert_eq(d1->max, 8 << 20);
    cr_assert_eq(a->gpu.present, 0, "no GPU pass for memory records alone");
    pp_analysis_free(a);
}

/* One rank's trace: stage `stage`'s ranges (as write_two_stages_x's, three steps) and its
 * process's CUPTI allocations on device `dev`: `bytes`, then as much again. */
static void write_rank_with_gpu(const char *path, int rank, int stage, uint32_t dev,
                                uint64_t bytes)
{
    static tk_tw t;
    tk_tw_open(&t, path, 60 + (uint32_t)rank, rank);
    uint32_t dom = tk_tw_sid(&t, "pipeprof"), s_step = tk_tw_sid(&t, "step");
    uint32_t s_f = tk_tw_sid(&t, "fwd mb0"), s_b = tk_tw_sid(&t, "bwd mb0");
    pp_rec_domain d = {{PP_REC_DOMAIN, sizeof d, 0, 0}, 1, dom};
    tk_tw_rec(&t, &d, sizeof d);
    tk_tw_flush(&t, PP_BLOCK_META, 0);
    uint32_t tid = 100 + (uint32_t)stage, cat = 1 + (uint32_t)stage;
    for (int step = 1; step <= 3; step++) {
        uint64_t b = T0 + (uint64_t)(step - 1) * 10 * MS;
        push(&t, tid, b, s_step, cat, (uint64_t)step);
        push(&t, tid, b + MS, s_f, cat, 0);
        tk_tw_pop(&t, tid, b + 2 * MS);
        push(&t, tid, b + 4 * MS, s_b, cat, 0);
        tk_tw_pop(&t, tid, b + 5 * MS);
        tk_tw_pop(&t, tid, b + 8 * MS);
    }
    tk_tw_flush(&t, PP_BLOCK_EVENTS, tid);
    gpu_mem(&t, 7, T0 + MS, PP_GPU_MEM_ALLOC, dev, 0x7f0000000000, bytes);
    gpu_mem(&t, 7, T0 + 3 * MS, PP_GPU_MEM_ALLOC, dev, 0x7f0010000000, bytes);
    tk_tw_flush(&t, PP_BLOCK_EVENTS, 7);
    pp_trace_writer_close(t.w);
}

/* Issue 17's projection of CUDA allocations onto stages: in a run of one stage per process
 * (MPI or NCCL, a GPU each) a device's allocations are its process's stage's; the series says
 * which, in the text and JSON reports. A process running several stages (the in-process
 * transport) has no single stage: -1, as for every series of write_two_stages's trace. */
Test(memory, cupti_allocations_are_projected_onto_the_stage_of_their_process)
{
    const char *p0 = tk_path("r0.pft"), *p1 = tk_path("r1.pft");
    write_rank_with_gpu(p0, 0, 0, 0, 1 << 20);
    write_rank_with_gpu(p1, 1, 1, 1, 3 << 20);
    pp_analysis_options o;
    pp_analysis_options_default(&o);
    const char *paths[] = {p0, p1};
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_files(paths, 2, &o, &a), PP_OK, "%s", pp_error_message());
    const pp_amem_series *d0 = series_named(a, "", "CUDA device 0");
    const pp_amem_series *d1 = series_named(a, "", "CUDA device 1");
    cr_assert(d0 && d1);
    cr_assert_eq(d0->stage, 0);
    cr_assert_eq(d1->stage, 1);
    cr_assert_eq(d0->max, 2 << 20);
    cr_assert_eq(d1->max, 6 << 20);
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    pp_analysis_print(a, m);
    fclose(m);
    cr_assert(strstr(text, "rank 1 pid 61 s1") != NULL, "%s", text);
    free(text);
    text = NULL;
    m = open_memstream(&text, &len);
    cr_assert_eq(pp_report_json(a, m), PP_OK);
    fclose(m);
    cr_assert(strstr(text, "\"stage\": 1, \"kind\": \"heap\", \"domain\": \"\", \"name\": \"CUDA device 1\"") != NULL,
              "%s", text);
    free(text);
    pp_analysis_free(a);
    /* one process, two stages: no stage of its own */
    write_two_stages(tk_path("two.pft"));
    a = analyze(tk_path("two.pft"), 0);
    for (size_t i = 0; i < a->n_mem_series; i++)
        cr_assert_eq(a->mem_series[i].stage, -1);
    pp_analysis_free(a);
}
