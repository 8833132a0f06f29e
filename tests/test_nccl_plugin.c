/* test_nccl_plugin.c: libpprof's NCCL profiler plugin (profiler/nccl_plugin.c), loaded and
 * driven as NCCL 2.28 does by tests/cuda_inject_app.c under pprof-run --nccl, in NCCL's order:
 * an operation's own stop comes first, its kernel channels start and stop afterwards on another
 * thread (NCCL's proxy). Needs neither a GPU nor NCCL; under ASan a plugin that freed the
 * operation at its stop fails here with a heap-use-after-free. */
#include "pp_analyzer.h"
#include "pp_testkit.h"
#include "pp_trace.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(nccl_plugin);

#define INJECT_APP PP_BUILD_DIR "/tests/pp_cuda_inject_app"
#define PPRUN PP_BUILD_DIR "/tools/pprof-run"

/* Every NCCL record of the run's trace files. */
typedef struct nccl_seen {
    int sends, sends_timed, sends_1ms, recvs, recvs_timed, colls, colls_timed;
    uint64_t recv_bytes, coll_bytes;
} nccl_seen;

static nccl_seen read_records(const char *dir)
{
    nccl_seen s;
    memset(&s, 0, sizeof s);
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".pft"))
            continue;
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        pp_trace *t = NULL;
        cr_assert_eq(pp_trace_load(path, &t), PP_OK, "%s", pp_error_message());
        for (size_t i = 0; i < t->n_nccl; i++) {
            const pp_rec_nccl *r = &t->nccl[i].r;
            cr_assert_eq(r->comm, 0x1234abcdULL);
            cr_assert_eq(r->rank, 0);
            cr_assert_eq(r->nranks, 2);
            if (r->func == PP_NCCL_SEND) {
                s.sends++;
                s.sends_timed += r->timed;
                /* the channels' span, first start to last stop: 1 ms (a mapped clock may move
                 * the ends by a few ns) */
                if (r->timed && r->bytes == 4u << 20 &&
                    fabs((double)(r->gpu_end - r->gpu_start) - 1e6) < 1e3)
                    s.sends_1ms++;
            } else if (r->func == PP_NCCL_RECV) {
                s.recvs++;
                s.recvs_timed += r->timed;
                s.recv_bytes += r->bytes;
                cr_assert_eq(r->peer, 1);
            } else {
                s.colls++;
                s.colls_timed += r->timed;
                s.coll_bytes += r->bytes;
                cr_assert_str_eq(t->nccl[i].name, "AllReduce");
                cr_assert_eq(r->peer, -1);
            }
        }
        pp_trace_free(t);
    }
    closedir(d);
    return s;
}

/* Sends whose channels start and stop after the send's own stop get the channels' GPU span and
 * their bytes (count x datatype size); an operation whose channel never comes is still written,
 * at finalize, untimed; a channel naming an operation already written is ignored (the job does
 * not crash, no record is doubled); the analyzer's link bandwidth is bytes over the GPU span. */
Test(nccl_plugin, records_carry_gpu_time_when_channels_end_after_the_operation)
{
    if (access(PP_BUILD_DIR "/profiler/libpprof.so", R_OK) != 0)
        cr_skip_test("no libpprof.so in this build");
    tk_dir_create("pp_test_nccl");
    const char *dir = tk_path("run");
    const char *argv[] = {PPRUN, "--nccl", "-q", "-o", dir, "--", INJECT_APP, NULL};
    tk_result r = tk_runv(argv, NULL);
    cr_assert_eq(r.code, 0, "%s%s", r.out, r.err);
    cr_assert_not_null(strstr(r.out, "plugin pipeprof"), "%s", r.out);
    tk_result_free(&r);

    nccl_seen s = read_records(dir);
    cr_assert_eq(s.sends, 4, "3 steps' sends and the last one: %d", s.sends);
    cr_assert_eq(s.sends_timed, 4, "every send gets its channels' GPU span: %d", s.sends_timed);
    cr_assert_eq(s.sends_1ms, 3, "%d", s.sends_1ms);
    cr_assert_eq(s.recvs, 1, "the receive whose channel never came, written at finalize");
    cr_assert_eq(s.recvs_timed, 0);
    cr_assert_eq(s.recv_bytes, 1024);
    cr_assert_eq(s.colls, 3);
    cr_assert_eq(s.colls_timed, 0);
    cr_assert_eq(s.coll_bytes, 3 * 2000, "bf16: 2 bytes per element");

    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    const pp_gpu_result *g = &a->gpu;
    cr_assert(g->present);
    cr_assert_eq(g->nccl_ops, 8, "%llu", (unsigned long long)g->nccl_ops);
    cr_assert_eq(g->n_links, 1);
    cr_assert_eq(g->links[0].src, 0);
    cr_assert_eq(g->links[0].dst, 1);
    cr_assert_eq(g->links[0].messages, 4);
    cr_assert_eq(g->links[0].bytes, 3u * (4u << 20) + 1024u);
    cr_assert_eq(g->links[0].timed, 4);
    /* the median send: 4 MiB over 1 ms */
    cr_assert(fabs(g->links[0].algbw_GBps - 4.194304) < 1e-3, "%.6f GB/s",
              g->links[0].algbw_GBps);
    pp_analysis_free(a);
    tk_dir_remove();
}
