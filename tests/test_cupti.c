/* test_cupti.c: GPU activity capture without a GPU. Synthetic CUPTI activity buffers (records
 * laid out as CUDA 13's structs, 8-byte aligned) walked by the real libcupti
 * (cuptiActivityGetNextRecord works without a driver) and encoded by libpprof's encoder into
 * trace records; the records written as a trace and projected by the analyzer; and the
 * library's CUPTI start-up on a machine without a driver, which must say so and leave NVTX
 * capture running. */
#include "cupti_encode.h"
#include "pp_analyzer.h"
#include "pp_trace.h"
#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <cupti.h>

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TestSuite(cupti);

typedef struct names {
    const char *s[16];
    uint32_t n;
} names;

static uint32_t name_id(void *u, const char *name)
{
    names *nm = u;
    for (uint32_t i = 0; i < nm->n; i++)
        if (strcmp(nm->s[i], name) == 0)
            return i + 1;
    nm->s[nm->n++] = name;
    return nm->n;
}

static uint64_t shift_clock(void *u, uint64_t ns)
{
    (void)u;
    return ns + 7; /* a visible mapping: the encoder must apply it to every time */
}

/* A buffer holding an API record, a kernel and a copy, the layout CUPTI 13 produces. */
static size_t build_buffer(uint8_t *buf, size_t cap)
{
    size_t off = 0;
    CUpti_ActivityAPI api;
    memset(&api, 0, sizeof api);
    api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    api.cbid = 211;
    api.start = 1000;
    api.end = 1400;
    api.processId = 55;
    api.threadId = 4321;
    api.correlationId = 9;
    memcpy(buf + off, &api, sizeof api);
    off += (sizeof api + 7) & ~(size_t)7;
    CUpti_ActivityKernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = 2000;
    k.end = 5000;
    k.deviceId = 1;
    k.streamId = 13;
    k.correlationId = 9;
    k.name = "k_attention_softmax";
    memcpy(buf + off, &k, sizeof k);
    off += (sizeof k + 7) & ~(size_t)7;
    CUpti_ActivityMemcpy6 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
    m.bytes = 1 << 20;
    m.start = 5100;
    m.end = 5600;
    m.deviceId = 1;
    m.streamId = 14;
    m.correlationId = 10;
    memcpy(buf + off, &m, sizeof m);
    off += (sizeof m + 7) & ~(size_t)7;
    cr_assert_leq(off, cap);
    return off;
}

Test(cupti, libcupti_walks_a_synthetic_buffer_and_the_encoder_converts_it)
{
    _Alignas(8) static uint8_t buf[4096];
    size_t valid = build_buffer(buf, sizeof buf);
    names nm = {0};
    pprof_cupti_env env = {.name_id = name_id, .clock = shift_clock, .u = &nm, .tid = 77};
    CUpti_Activity *rec = NULL;
    uint8_t out[3][128];
    size_t lens[3] = {0};
    int n = 0;
    CUptiResult r;
    while ((r = cuptiActivityGetNextRecord(buf, valid, &rec)) == CUPTI_SUCCESS && n < 3) {
        size_t len = pprof_cupti_encode(rec, &env, out[n], sizeof out[n]);
        cr_assert(len != 0 && len != (size_t)-1, "record %d (kind %d) not encoded", n,
                  (int)rec->kind);
        lens[n++] = len;
    }
    cr_assert_eq(n, 3, "libcupti walked %d records", n);
    cr_assert_eq(r, CUPTI_ERROR_MAX_LIMIT_REACHED);
    pp_rec_api api;
    cr_assert_eq(lens[0], sizeof api);
    memcpy(&api, out[0], sizeof api);
    cr_assert_eq(api.h.type, PP_REC_API);
    cr_assert_eq(api.h.tid, 77);
    cr_assert_eq(api.correlation, 9);
    cr_assert_eq(api.thread, 4321);
    cr_assert_eq(api.cbid, 211);
    cr_assert_eq(api.driver, 0);
    cr_assert_eq(api.start, 1007);
    cr_assert_eq(api.end, 1407);
    pp_rec_gpu k, m;
    memcpy(&k, out[1], sizeof k);
    memcpy(&m, out[2], sizeof m);
    cr_assert_eq(k.h.type, PP_REC_GPU);
    cr_assert_eq(k.h.ts, 0, "GPU records carry their times in the body");
    cr_assert_eq(k.kind, PP_GPU_KERNEL);
    cr_assert_eq(k.device, 1);
    cr_assert_eq(k.stream, 13);
    cr_assert_eq(k.correlation, 9);
    cr_assert_eq(k.start, 2007);
    cr_assert_eq(k.end, 5007);
    cr_assert_eq(k.name, 1);
    cr_assert_str_eq(nm.s[0], "k_attention_softmax");
    cr_assert_eq(m.kind, PP_GPU_MEMCPY);
    cr_assert_eq(m.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD);
    cr_assert_eq(m.bytes, 1u << 20);
    cr_assert_eq(m.stream, 14);
    /* a record kind that is not captured, and a full output */
    CUpti_ActivityAPI other;
    memset(&other, 0, sizeof other);
    other.kind = CUPTI_ACTIVITY_KIND_MARKER;
    cr_assert_eq(pprof_cupti_encode(&other, &env, out[0], sizeof out[0]), 0);
    cr_assert_eq(pprof_cupti_encode(buf, &env, out[0], 8), (size_t)-1);
}

/* libpprof's CUDA entry point on this driverless machine, called the way libcuda calls it
 * (dlopen of CUDA_INJECTION64_PATH, then InitializeInjection): it must return 1, say on stderr
 * that GPU tracing is off, and leave the NVTX capture of the same process intact. */
#define CUDA_INJECT_APP PP_BUILD_DIR "/tests/pp_cuda_inject_app"
#define PPRUN PP_BUILD_DIR "/tools/pprof-run"

/* 1 when this machine has a CUDA driver and a device. */
static int gpu_present(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return 0;
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(lib, "cuInit");
    int (*count)(int *) = (int (*)(int *))dlsym(lib, "cuDeviceGetCount");
    int n = 0, ok = init && count && init(0) == 0 && count(&n) == 0 && n > 0;
    dlclose(lib);
    return ok;
}

Test(cupti, without_a_driver_gpu_capture_says_so_and_nvtx_capture_goes_on)
{
    if (access(PP_BUILD_DIR "/profiler/libpprof.so", R_OK) != 0)
        cr_skip_test("no libpprof.so in this build");
    if (gpu_present())
        cr_skip_test("this machine has a GPU: the test is for machines without one");
    tk_dir_create("pp_test_cupti");
    const char *dir = tk_path("run");
    const char *argv[] = {PPRUN, "--cuda", "-o", dir, "--", CUDA_INJECT_APP, NULL};
    tk_result r = tk_runv(argv, NULL);
    cr_assert_eq(r.code, 0, "the job must not fail: %s", r.err);
    cr_assert_not_null(strstr(r.out, "InitializeInjection returned 1"), "%s", r.out);
    cr_assert(strstr(r.err, "no GPU tracing") || strstr(r.err, "no CUDA device"),
              "stderr: %s", r.err);
    tk_result_free(&r);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert_geq(a->n_steps, 1, "NVTX capture still works");
    cr_assert_eq(a->gpu.present, 0);
    pp_analysis_free(a);
    tk_dir_remove();
}

/* The whole CUPTI path of libpprof with a stand-in libcupti (tests/fake_cupti.c through
 * PPROF_CUPTI_LIB): start-up, buffer callbacks, the flush at exit, encoding, and the analyzer's
 * projection of the kernels onto the job's forward and backward ranges. */
#define FAKE_CUPTI PP_BUILD_DIR "/tests/libfakecupti.so"

/* extra, extra2: settings of the run's environment ("NAME=value"), or NULL */
static pp_analysis *run_with_fake_cupti_env2(const char *mode, const char *extra,
                                             const char *extra2, tk_result *out)
{
    tk_dir_create("pp_test_fakecupti");
    const char *dir = tk_path("run");
    const char *argv[] = {PPRUN, "--cuda", "-o", dir, "--", CUDA_INJECT_APP, NULL};
    char m[64];
    snprintf(m, sizeof m, "FAKE_CUPTI_MODE=%s", mode);
    /* the smallest ring (64 KiB): a flood overfills it many times over */
    const char *env[] = {"PPROF_CUPTI_LIB=" FAKE_CUPTI, m, "PPROF_BUFFER_KB=64",
                         extra ? extra : extra2, extra ? extra2 : NULL, NULL};
    *out = tk_runv(argv, env);
    cr_assert_eq(out->code, 0, "%s%s", out->out, out->err);
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    return a;
}

static pp_analysis *run_with_fake_cupti_env(const char *mode, const char *extra, tk_result *out)
{
    return run_with_fake_cupti_env2(mode, extra, NULL, out);
}

static pp_analysis *run_with_fake_cupti(const char *mode, tk_result *out)
{
    return run_with_fake_cupti_env(mode, NULL, out);
}

Test(cupti, gpu_capture_end_to_end_with_a_stand_in_cupti)
{
    tk_result r;
    pp_analysis *a = run_with_fake_cupti("ok", &r);
    cr_assert_null(strstr(r.err, "NVTX capture goes on"), "%s", r.err);
    tk_result_free(&r);
    const pp_gpu_result *g = &a->gpu;
    cr_assert(g->present);
    /* 3 steps x (2 forward + 2 backward launches); steps 2 and 3 analyzed */
    cr_assert_eq(g->records, 12);
    cr_assert_eq(g->api_calls, 12);
    cr_assert_eq(g->projected, 8);
    cr_assert_eq(g->outside_steps, 4);
    cr_assert_eq(g->unattributed, 0);
    cr_assert_eq(g->stages[0].fwd_median_ns, 150000.0);
    cr_assert_eq(g->stages[0].bwd_median_ns, 300000.0);
    cr_assert_geq(g->stages[0].launch_lag_ns, 10000.0);
    cr_assert_leq(g->stages[0].launch_lag_ns, 1e6);
    cr_assert_eq(g->stages[0].busy_ns, 2 * 150000.0 + 2 * 300000.0);
    pp_analysis_free(a);
    tk_dir_remove();
}

/* CUPTI hands a launch-bound job's records over in 8 MB buffers, back to back: far more than a
 * ring holds (on an H200, pptrain's capture lost 402 135 records when they were encoded into a
 * full ring). The buffers go to the writer, which encodes them itself: every record reaches the
 * trace, none is dropped, and the delivering thread never waits. */
Test(cupti, a_flood_of_gpu_records_goes_to_the_writer_none_dropped)
{
    tk_result r;
    pp_analysis *a = run_with_fake_cupti("flood", &r);
    tk_result_free(&r);
    cr_assert(a->gpu.present);
    cr_assert_eq(a->gpu.records, 12 + 150000, "%llu", (unsigned long long)a->gpu.records);
    cr_assert_eq(a->gpu.projected, 8, "the job's own launches are still projected");
    uint64_t dropped = 0;
    for (size_t i = 0; i < a->n_files; i++)
        dropped += a->files[i].dropped;
    cr_assert_eq(dropped, 0);
    pp_analysis_free(a);
    tk_dir_remove();
}

/* Of the API calls only those that launch GPU work are recorded (by name: launches, graph
 * launches, copies, memsets), not every query a framework makes between them nor every driver
 * call the runtime and libraries make inside theirs; PPROF_CUPTI_API=all records them all, as
 * before. The stand-in says what it was asked; the kernels still find their launches. */
Test(cupti, only_the_api_calls_that_launch_work_are_recorded)
{
    tk_result r;
    pp_analysis *a = run_with_fake_cupti("ok", &r);
    cr_assert_not_null(strstr(r.err, "fake_cupti: DRIVER kind off; driver calls enabled: "
                                     "cuMemsetD32Async cuMemcpyHtoDAsync_v2 cuLaunchKernel "
                                     "cuGraphLaunch cuLaunchKernelEx\n"),
                       "%s", r.err);
    cr_assert_null(strstr(r.err, "cuCtxGetCurrent"), "%s", r.err);
    cr_assert_null(strstr(r.err, "cuStreamSynchronize"), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "fake_cupti: RUNTIME kind off; runtime calls enabled: "
                                     "cudaMemcpyAsync_v3020 cudaLaunchKernel_v7000 "
                                     "cudaGraphLaunch_v10000\n"),
                       "%s", r.err);
    cr_assert_eq(a->gpu.projected, 8);
    tk_result_free(&r);
    pp_analysis_free(a);
    tk_dir_remove();
    a = run_with_fake_cupti_env("ok", "PPROF_CUPTI_API=all", &r);
    cr_assert_not_null(strstr(r.err, "fake_cupti: DRIVER kind on; driver calls enabled: none"),
                       "%s", r.err);
    cr_assert_not_null(strstr(r.err, "fake_cupti: RUNTIME kind on; runtime calls enabled: none"),
                       "%s", r.err);
    cr_assert_eq(a->gpu.projected, 8);
    tk_result_free(&r);
    pp_analysis_free(a);
    tk_dir_remove();
}

/* With nothing handed to the writer (PPROF_CUPTI_DEFER_MB=0, the bound reached at once), a
 * buffer is encoded into the delivering thread's ring, and what does not fit is dropped and
 * counted, never lost silently: the records kept and the drops add up to the flood. */
Test(cupti, past_the_writers_bound_records_are_dropped_and_counted)
{
    tk_result r;
    pp_analysis *a = run_with_fake_cupti_env("flood", "PPROF_CUPTI_DEFER_MB=0", &r);
    tk_result_free(&r);
    uint64_t dropped = 0;
    for (size_t i = 0; i < a->n_files; i++)
        dropped += a->files[i].dropped;
    cr_assert_gt(dropped, 100000, "%llu", (unsigned long long)dropped);
    /* 12 launches (an API record and a kernel each) and the flood */
    cr_assert_eq(a->gpu.records + a->gpu.api_calls + dropped, 2 * 12 + 150000,
                 "%llu GPU records, %llu API calls, %llu dropped",
                 (unsigned long long)a->gpu.records, (unsigned long long)a->gpu.api_calls,
                 (unsigned long long)dropped);
    pp_analysis_free(a);
    tk_dir_remove();
}

/* PPROF_CUPTI_STATS=1 says, after the last flush and even under -q, what the GPU capture did:
 * every buffer requested and completed, where it went (the writer, or encoded in place past
 * PPROF_CUPTI_DEFER_MB), and whether on a thread that records events of its own (the job's). */
/* A run of the stand-in's "ok" mode with one setting: stderr holds said (and said2, if any), and
 * `projected` of its kernels are projected onto the ranges. */
static void said_and_projected(const char *setting, const char *said, const char *said2,
                               uint64_t projected)
{
    tk_result r;
    pp_analysis *a = run_with_fake_cupti_env("ok", setting, &r);
    cr_assert_not_null(strstr(r.err, said), "%s: no \"%s\" in\n%s", setting, said, r.err);
    cr_assert(!said2 || strstr(r.err, said2), "%s: no \"%s\" in\n%s", setting, said2, r.err);
    cr_assert(a->gpu.present, "%s", setting);
    cr_assert_eq(a->gpu.projected, projected, "%s: %llu projected", setting,
                 (unsigned long long)a->gpu.projected);
    tk_result_free(&r);
    pp_analysis_free(a);
    tk_dir_remove();
}

static unsigned long long stat_of(const char *err, const char *after)
{
    const char *line = strstr(err, "pprof: CUPTI stats: ");
    cr_assert_not_null(line, "%s", err);
    const char *p = strstr(line, after);
    cr_assert_not_null(p, "no \"%s\" in %s", after, line);
    return strtoull(p + strlen(after), NULL, 10);
}

Test(cupti, stats_say_what_the_gpu_capture_did)
{
    tk_result r;
    pp_analysis *a = run_with_fake_cupti_env2("flood", "PPROF_CUPTI_DEFER_MB=0",
                                              "PPROF_CUPTI_STATS=1", &r);
    unsigned long long requested = stat_of(r.err, "stats: ");
    unsigned long long completed = stat_of(r.err, "requested, ");
    unsigned long long to_writer = stat_of(r.err, "completed (");
    unsigned long long in_place = stat_of(r.err, "writer, ");
    /* the launches' buffer and the flood's (150 000 kernels of 8 MiB buffers: 2 or more); the
     * stand-in delivers on the job's main thread, which records events of its own */
    cr_assert_geq(requested, 3, "%s", r.err);
    cr_assert_eq(completed, requested, "%s", r.err);
    cr_assert_eq(to_writer, 0, "%s", r.err);
    cr_assert_eq(in_place, completed, "%s", r.err);
    cr_assert_eq(stat_of(r.err, "in place, "), completed, "%s", r.err);
    tk_result_free(&r);
    pp_analysis_free(a);
    tk_dir_remove();

    a = run_with_fake_cupti_env("flood", "PPROF_CUPTI_STATS=1", &r);
    cr_assert_eq(stat_of(r.err, "completed ("), stat_of(r.err, "requested, "), "%s", r.err);
    cr_assert_eq(stat_of(r.err, "writer, "), 0, "%s", r.err);
    cr_assert_eq(a->gpu.records + a->gpu.api_calls, 2 * 12 + 150000);
    tk_result_free(&r);
    pp_analysis_free(a);
    tk_dir_remove();

    a = run_with_fake_cupti_env("flood", "PPROF_CUPTI_DEFER_MB=0", &r);
    cr_assert_null(strstr(r.err, "CUPTI stats"), "said only when asked: %s", r.err);
    tk_result_free(&r);
    pp_analysis_free(a);
    tk_dir_remove();

    said_and_projected("PPROF_CUPTI_DEFER_MB=lots",
                       "PPROF_CUPTI_DEFER_MB=lots is not a number in 0..65536; using 128", NULL,
                       8);
}

/* PPROF_CUPTI_KINDS records only the kinds it names (a diagnosis: kernels alone cannot be
 * projected, their launching calls unrecorded); by default every kind but synchronisation
 * (nothing reads it), which a word it does not know leaves as it is. */
Test(cupti, kinds_choose_the_activity_recorded)
{
    said_and_projected("PPROF_CUPTI_KINDS=kernel,memcpy", "fake_cupti: kinds enabled: 10 1\n",
                       "fake_cupti: RUNTIME kind off; runtime calls enabled: none", 0);
    said_and_projected("PPROF_CUPTI_KINDS=kernel,tensor",
                       "\"tensor\" is none of kernel, memcpy, memset, runtime, driver, sync, "
                       "memory; recording the default kinds",
                       "fake_cupti: kinds enabled: 10 1 2 49\n", 8);
    said_and_projected("PPROF_CUPTI_KINDS=sync,kernel,runtime",
                       "fake_cupti: kinds enabled: 10 38\n", NULL, 8);
}

/* Records CUPTI itself lost (its buffers full) count among the capture's dropped events, so
 * pprof-run's warning and the report say them; the library names the cause even when quiet. */
Test(cupti, records_cupti_dropped_are_counted_as_lost)
{
    tk_result r;
    pp_analysis *a = run_with_fake_cupti_env("cuptidrop", "PPROF_QUIET=1", &r);
    cr_assert_not_null(strstr(r.err, "pprof: CUPTI dropped 7 GPU activity records"), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "pprof-run: warning: 7 events dropped"), "%s", r.err);
    tk_result_free(&r);
    uint64_t dropped = 0;
    for (size_t i = 0; i < a->n_files; i++)
        dropped += a->files[i].dropped;
    cr_assert_eq(dropped, 7);
    cr_assert_eq(a->gpu.projected, 8, "the records CUPTI kept are all there");
    pp_analysis_free(a);
    tk_dir_remove();
}

Test(cupti, another_cupti_client_leaves_nvtx_capture_running)
{
    tk_result r;
    pp_analysis *a = run_with_fake_cupti("busy", &r);
    cr_assert_not_null(strstr(r.err, "another CUPTI client is attached"), "%s", r.err);
    tk_result_free(&r);
    cr_assert_eq(a->gpu.present, 0);
    cr_assert_geq(a->n_steps, 1);
    pp_analysis_free(a);
    tk_dir_remove();
}

Test(cupti, memory_activity_becomes_gpu_memory_records)
{
    names nm = {0};
    pprof_cupti_env env = {.name_id = name_id, .clock = shift_clock, .u = &nm, .tid = 77};
    CUpti_ActivityMemory4 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.address = 0x7f0000001000;
    m.bytes = 1 << 20;
    m.timestamp = 3000;
    m.deviceId = 2;
    m.streamId = 13;
    m.correlationId = 11;
    uint8_t out[128];
    size_t len = pprof_cupti_encode(&m, &env, out, sizeof out);
    pp_rec_gpu_mem g;
    cr_assert_eq(len, sizeof g);
    memcpy(&g, out, sizeof g);
    cr_assert_eq(g.h.type, PP_REC_GPU_MEM);
    cr_assert_eq(g.h.ts, 0, "the time is in the body");
    cr_assert_eq(g.h.tid, 77);
    cr_assert_eq(g.op, PP_GPU_MEM_ALLOC);
    cr_assert_eq(g.memory_kind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    cr_assert_eq(g.device, 2);
    cr_assert_eq(g.stream, 13);
    cr_assert_eq(g.correlation, 11);
    cr_assert_eq(g.address, 0x7f0000001000);
    cr_assert_eq(g.bytes, 1u << 20);
    cr_assert_eq(g.ts, 3007);
    m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    cr_assert_eq(pprof_cupti_encode(&m, &env, out, sizeof out), sizeof g);
    memcpy(&g, out, sizeof g);
    cr_assert_eq(g.op, PP_GPU_MEM_RELEASE);
    m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID;
    cr_assert_eq(pprof_cupti_encode(&m, &env, out, sizeof out), 0, "not captured");
    m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    cr_assert_eq(pprof_cupti_encode(&m, &env, out, 8), (size_t)-1);
}
