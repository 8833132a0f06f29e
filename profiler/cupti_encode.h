/* cupti_encode.h: CUPTI activity records -> pipeprof trace records (PP_REC_GPU, PP_REC_API,
 * PP_REC_GPU_MEM),
 * docs/trace-format.md. Pure: no CUPTI calls, no globals, so the tests run it on synthetic
 * CUPTI buffers without a GPU (tests/test_cupti.c) and libpprof.so runs the same code on real
 * ones (profiler/cupti.c).
 *
 * Only the common prefix of each record struct is read (the fields CUDA 13.0's
 * CUpti_ActivityKernel10, Memcpy6, Memset4, API, Synchronization2, Memory4 share with their
 * successors:
 * each CUPTI bump has only appended fields, INSTRUMENTATION.md 2.2). */
#ifndef PPROF_CUPTI_ENCODE_H
#define PPROF_CUPTI_ENCODE_H

#include "pp_trace.h"

#include <stddef.h>
#include <stdint.h>

/* How the encoder gets a string id for a kernel name, and maps CUPTI's timestamps (already on
 * CLOCK_MONOTONIC through the registered timestamp callback) onto the trace's clock (the clock
 * test hooks). */
typedef struct pprof_cupti_env {
    uint32_t (*name_id)(void *u, const char *name);
    uint64_t (*clock)(void *u, uint64_t ns);
    void *u;
    uint32_t tid; /* the record header's tid: the thread delivering the buffer */
} pprof_cupti_env;

/* Encodes one CUPTI activity record into out (cap bytes). Returns the bytes written (a
 * pp_rec_gpu, pp_rec_api or pp_rec_gpu_mem), 0 for kinds that are not captured, or (size_t)-1 when cap is too
 * small. */
size_t pprof_cupti_encode(const void *record, const pprof_cupti_env *env, void *out, size_t cap);

#endif /* PPROF_CUPTI_ENCODE_H */
