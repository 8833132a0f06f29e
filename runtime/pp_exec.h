/* pp_exec.h: the pipeline trainer, pptrain's engine for any S, schedule, backend and transport:
 * it validates the configuration, makes the transport from the table (pp_transport.h), one
 * backend per local stage (pp_backend.h) and the executor (pp_executor.h), which this header
 * includes, then runs optimizer steps and checkpoints. docs/executor.md explains the parts.
 *
 * Threads: one trainer is used from one thread; the executor it owns runs a worker per stage. */
#ifndef PP_EXEC_H
#define PP_EXEC_H

#include "pp_backend.h"
#include "pp_executor.h"
#include "pp_plan.h"
#include "pp_runtime.h"
#include "pp_transport.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_pipe_config {
    pp_train_config train;   /* model, optimizer, batch, M, steps, seed (cpu) */
    pp_backend_kind backend;
    pp_schedule_kind schedule;
    int v;                   /* virtual chunks per stage */
    pp_partition partition;  /* owned by the caller; L must be the model's (cpu) or the cost
                                file's (sim) layer count */
    const pp_costs *costs;   /* sim only; borrowed */
    int slow_stage;          /* sim: stage whose costs are multiplied (-1: none) */
    double slow_factor;
    const pp_jitter *sim_jitter; /* sim: each compute op's random factor (NULL: none; borrowed,
                                    read while the backends are made) */
    pp_transport_kind transport; /* a row of the transport table; 0 (inproc) unless set */
    int dp;                  /* data-parallel replicas (a one-stage-per-process transport; 0 or
                                1: none). The batch is the global one: each replica trains
                                batch / dp of it */
    int cuda_device;         /* cuda: the GPU of stage 0 in-process, or of this rank */
    int cuda_precision;      /* cuda: pp_cuda_precision (0 fp32) */
    const char *recompute;   /* --recompute: "none", "full" or a list (pp_recompute_parse);
                                NULL: none. Borrowed, read at creation */
} pp_pipe_config;

typedef struct pp_pipe_trainer pp_pipe_trainer;

/* Builds schedule (validated), transport, backends and executor. Takes ownership of data
 * (NULL for sim). */
pp_status pp_pipe_trainer_create(const pp_pipe_config *c, pp_data *data, pp_pipe_trainer **out);
void pp_pipe_trainer_destroy(pp_pipe_trainer *t);
/* One optimizer step. For sim, loss is NAN and tokens_per_s counts batch * T tokens of the
 * cost model only when known (0 otherwise). */
pp_status pp_pipe_trainer_step(pp_pipe_trainer *t, pp_step_stats *st, pp_exec_result *res);
int64_t pp_pipe_trainer_steps_done(const pp_pipe_trainer *t);
/* The stage this process runs (-1: all of them, in-process). */
int pp_pipe_trainer_local_stage(const pp_pipe_trainer *t);
const pp_schedule *pp_pipe_trainer_schedule(const pp_pipe_trainer *t);
const pp_schedule_report *pp_pipe_trainer_report(const pp_pipe_trainer *t);
/* Memory accounting of stage s (local to this process), pp_exec_memory. */
pp_status pp_pipe_trainer_memory(pp_pipe_trainer *t, int s, pp_stage_mem *out);
/* The layers recomputed, [L] (1 = recomputed), as --recompute resolved on the partition. */
const uint8_t *pp_pipe_trainer_recompute(const pp_pipe_trainer *t);
/* Parameters of the whole model in layer order, gathered from the stages (cpu): n floats. */
pp_status pp_pipe_trainer_gather_params(pp_pipe_trainer *t, float *params, size_t n);
/* Checkpoints in the single-stage format (docs/checkpoint.md), so a run can resume with another
 * stage count, schedule or transport (cpu only). Over MPI, save is collective: replica 0's
 * stages send their pieces to its stage 0, which writes the file; load reads the file on every
 * rank (a file system they share) and each takes its own pieces. gather_params returns only
 * this process's pieces over MPI (zeros elsewhere). */
pp_status pp_pipe_trainer_save(pp_pipe_trainer *t, const char *path);
pp_status pp_pipe_trainer_load(pp_pipe_trainer *t, const char *path);


#ifdef __cplusplus
}
#endif
#endif /* PP_EXEC_H */
