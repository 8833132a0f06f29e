/* pp_executor.h: the executor: one worker thread per local stage interpreting its schedule list
 * over a transport (pp_transport.h) and the stages' backends (pp_backend.h). Called by the
 * pipeline trainer (pp_exec.h) and the tests. */
#ifndef PP_EXECUTOR_H
#define PP_EXECUTOR_H

#include "pp_backend.h"
#include "pp_plan.h"
#include "pp_transport.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_exec pp_exec;

typedef struct pp_exec_result {
    double loss;      /* mean loss over the batch (cpu), NAN for sim */
    double grad_norm; /* global, before clipping */
    double step_ms;   /* wall time of the step, from the common start to the last stage's end */
    double model_ms;  /* the time model's step time: max stage clock - start (sim: predicted) */
} pp_exec_result;

/* Runs stages [first_local, first_local + n_local) of `sched` in this process, one worker
 * thread each, over `tp`. Takes ownership of the backends (n_local of them, in stage order).
 * Workers start at once and wait for steps. */
pp_status pp_exec_create(const pp_schedule *sched, pp_transport *tp, int first_local,
                         int n_local, pp_stage_backend **backends, pp_exec **out);
/* Runs one step on every local stage: the schedule's lists, then the global gradient-norm
 * all-reduce and the optimizer step (lr, clip). Blocks until all local stages are done. A
 * failing stage aborts the transport so no stage stays blocked; the first error is returned. */
pp_status pp_exec_step(pp_exec *e, int64_t step, const pp_step_data *d, float lr, float grad_clip,
                       pp_exec_result *res);
void pp_exec_destroy(pp_exec *e);
/* The memory accounting of local `stage` (pp_backend.h, pp_stage_mem): bytes per purpose now
 * and the peaks since creation. Call between steps. PP_ERR_INVALID for a stage not local. */
pp_status pp_exec_memory(pp_exec *e, int stage, pp_stage_mem *out);
/* The local backend of `stage` (NULL if not local). */
pp_stage_backend *pp_exec_backend(pp_exec *e, int stage);


#ifdef __cplusplus
}
#endif
#endif /* PP_EXECUTOR_H */
