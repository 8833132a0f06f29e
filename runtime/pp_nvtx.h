/* pp_nvtx.h: the runtime's NVTX v3 annotations, following docs/nvtx-convention.md, so that any
 * NVTX tool (pipeprof's libpprof, Nsight Systems) sees steps, per-stage forward/backward of each
 * micro-batch, every layer, every send/recv and the optimizer step. Called by the executor's
 * stage workers. With no tool attached each call costs a few nanoseconds (benchmarks/
 * bench_nvtx); when built without the NVTX headers (no CUDA toolkit) every call is a no-op.
 *
 * Thread-safety: pp_nvtx_setup is called once before workers start; push and pop may be called
 * from any thread (ranges nest per thread, as NVTX push/pop do). */
#ifndef PP_NVTX_H
#define PP_NVTX_H

#include "pp_convention.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The range kinds (pp_nvtx_kind, PP_NVTX_*) are the convention's: common/pp_convention.h. */

/* What a range is about; fields that do not apply are -1 (bytes 0). */
typedef struct pp_nvtx_info {
    int64_t step;  /* 1-based optimizer step */
    int32_t stage;
    int32_t mb;
    int32_t chunk;
    int32_t layer; /* index in the model's layer list */
    int32_t peer;  /* the other stage of a send/recv */
    uint64_t bytes;
} pp_nvtx_info;

/* Creates the "pipeprof" domain, names the categories ("stage 0" ...) and registers the
 * messages for S stages, M micro-batches, v chunks and the layer names (n_layers entries, may
 * be NULL). Idempotent per configuration: a second call with other sizes re-registers. */
void pp_nvtx_setup(int S, int M, int v, int n_layers, const char *const *layer_names);
/* Opens a range of `kind` on the calling thread. */
void pp_nvtx_push(pp_nvtx_kind kind, const pp_nvtx_info *info);
/* Closes the innermost range of the calling thread in the pipeprof domain. */
void pp_nvtx_pop(void);
/* Emits the run's configuration mark (docs/nvtx-convention.md, "Configuration mark"): an ASCII
 * message "config key=value ..." in the pipeprof domain, once, before the first step. */
void pp_nvtx_mark_config(const char *text);
/* NVTX counters (nvToolsExtCounters.h) in the pipeprof domain: registers an int64 counter of
 * unit "bytes" under `name` with the static id `id` (>= 1 << 24) and returns the id to sample
 * with (the tool's, or `id`), 0 when no tool is attached or set-up has not run. */
uint64_t pp_nvtx_counter_register(const char *name, uint64_t id);
/* One sample of a registered counter on the calling thread; id 0 is a no-op. */
void pp_nvtx_counter_sample(uint64_t id, int64_t value);
/* Names the calling OS thread (e.g. "stage 3"). */
void pp_nvtx_name_thread(const char *name);
/* 1 when the NVTX headers were available at build time. */
int pp_nvtx_compiled_in(void);
/* Helpers for an info with everything unset. */
static inline pp_nvtx_info pp_nvtx_info_none(void)
{
    pp_nvtx_info i = {-1, -1, -1, -1, -1, -1, 0};
    return i;
}

#ifdef __cplusplus
}
#endif
#endif /* PP_NVTX_H */
