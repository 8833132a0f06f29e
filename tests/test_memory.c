/* test_memory.c: memory as pipeprof captures and analyses it (issue 17; docs/profiler.md
 * "Counters and memory", docs/metrics.md "Memory"):
 *   - capture: tests/mem_app.c (a plain NVTX program reporting memory by the counters and memory
 *     extensions) under pprof-run: the trace holds every registration and every sample with its
 *     value, on the thread that sampled, and the writer's resident-memory counter. */
#define _GNU_SOURCE
#include "pp_trace.h"
#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PPRUN PP_BUILD_DIR "/tools/pprof-run"
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
