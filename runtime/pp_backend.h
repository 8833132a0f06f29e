/* pp_backend.h: the stage-backend interface (what a stage computes: cpu, cuda, sim) as a table
 * of function pointers, and the constructors of the three backends (runtime/backend_cpu.c,
 * runtime/backend_sim.c). The executor calls a backend only from its stage's worker thread.
 * docs/executor.md explains the time model and how a backend slots in. */
#ifndef PP_BACKEND_H
#define PP_BACKEND_H

#include "pp_common.h"
#include "pp_jitter.h"
#include "pp_kops.h"
#include "pp_plan.h"
#include "pp_runtime.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pp_backend_kind {
    PP_BACKEND_CPU = 0,
    PP_BACKEND_SIM = 1,
    PP_BACKEND_CUDA = 2 /* PP_HAVE_CUDA builds */
} pp_backend_kind;
/* "cpu", "sim", "cuda": what pptrain's --backend takes (runtime/pipeline.c). */
const char *pp_backend_kind_name(pp_backend_kind k);
pp_status pp_backend_kind_parse(const char *name, pp_backend_kind *out);

/* The data of one step: the batch cut into M micro-batches (cpu backend; NULL for sim). */
typedef struct pp_step_data {
    int M;
    const pp_microbatch *mbs; /* [M] */
    float loss_scale;         /* multiplies the summed token losses (1 / (batch * T)) */
} pp_step_data;

/* Memory accounting per stage and purpose (docs/executor.md "Memory"): what the stage holds
 * now and the most it held, in bytes, from the sizes of its real allocations (cpu, cuda; the
 * sim backend holds the bytes the cost file says a real stage would). Static purposes are set
 * once at creation; activations change as micro-batches come and go. Updated only by the
 * stage's worker thread (and at creation, before the worker starts); read between steps. Each
 * change is also sampled as an NVTX counter `pp.mem.stage<S>.<purpose>` (contract of issue 17,
 * docs/nvtx-convention.md "Memory counters") once pp_stage_mem_announce registered them. */
typedef enum pp_stage_mem_purpose {
    PP_STAGE_MEM_PARAMS = 0,
    PP_STAGE_MEM_GRADS,
    PP_STAGE_MEM_OPTIMIZER,   /* AdamW's two moments */
    PP_STAGE_MEM_ACTIVATIONS, /* tensors kept for the backward, live now */
    PP_STAGE_MEM_TRANSPORT,   /* receive buffers of the executor's slots */
    PP_STAGE_MEM_WORKSPACE,   /* per-step buffers of no micro-batch (cuda: the step's tokens) */
    PP_STAGE_MEM_N_PURPOSES
} pp_stage_mem_purpose;

/* "params", "grads", "optimizer", "activations", "transport", "workspace". */
const char *pp_stage_mem_purpose_name(pp_stage_mem_purpose p);

typedef struct pp_stage_mem {
    int64_t cur[PP_STAGE_MEM_N_PURPOSES];
    int64_t peak[PP_STAGE_MEM_N_PURPOSES];
    int64_t peak_total; /* the largest sum over purposes at any moment */
    int stage;
    uint64_t counter[PP_STAGE_MEM_N_PURPOSES]; /* NVTX counter ids; 0: not registered */
} pp_stage_mem;

/* Sets one purpose's bytes now (peaks follow), samples its counter if registered. */
void pp_stage_mem_set(pp_stage_mem *m, pp_stage_mem_purpose p, int64_t bytes);
void pp_stage_mem_add(pp_stage_mem *m, pp_stage_mem_purpose p, int64_t delta);
int64_t pp_stage_mem_total(const pp_stage_mem *m);
/* Registers the stage's six counters in the pipeprof domain and samples each once; called by
 * the stage's worker thread, so the samples sit on its timeline. No-op without a tool. */
void pp_stage_mem_announce(pp_stage_mem *m);

/* Activation recomputation of one stage (pptrain --recompute, docs/pptrain.md): a recomputed
 * layer keeps only its input between forward and backward and runs its forward again inside
 * the backward, into one of n_sets workspaces per chunk (the most the schedule can hold at
 * once: forward, and backward input to weight halves; pp_recompute_sets). */
typedef struct pp_recompute {
    const uint8_t *layers; /* [L], the model's layer list: 1 = recompute; NULL: none */
    int n_sets;
} pp_recompute;

/* Workspaces stage s of sched needs per chunk for recomputed layers: 1 + the most micro-batches
 * whose input half of the backward ran but not yet the weight half, at a forward. */
int pp_recompute_sets(const pp_schedule *sched, int s);

/* Time model: every op receives the stage's clock `*t_ns` (CLOCK_MONOTONIC ns at which the op
 * may start) and returns with it set to when the op ended. Compute backends ignore the input and
 * set it to the real time after computing; the sim backend sleeps to the absolute deadline
 * *t_ns + cost and advances it by exactly the cost. */
typedef struct pp_stage_backend pp_stage_backend;

typedef struct pp_backend_ops {
    const char *name;
    /* Bytes of the activation that (chunk)'s output sends forward, and of the gradient its input
     * sends backward, per micro-batch. */
    size_t (*act_bytes)(pp_stage_backend *b, int chunk);
    size_t (*grad_bytes)(pp_stage_backend *b, int chunk);
    /* Marks the start of a step (zero gradients, reset the loss). */
    pp_status (*begin_step)(pp_stage_backend *b, int64_t step, const pp_step_data *d);
    /* Forward of (chunk, mb) into activation slot `slot`; `in` is the received activation (NULL
     * for the first piece). The output is at *out (act_bytes; NULL for the last piece, which
     * computes the loss instead). */
    pp_status (*forward)(pp_stage_backend *b, int chunk, int mb, int slot, const void *in,
                         const void **out, uint64_t *t_ns);
    /* Backward halves; dout is the received gradient (NULL for the last piece). The input
     * gradient is at *din (grad_bytes; NULL for the first piece). */
    pp_status (*backward_input)(pp_stage_backend *b, int chunk, int mb, int slot,
                                const void *dout, const void **din, uint64_t *t_ns);
    pp_status (*backward_weight)(pp_stage_backend *b, int chunk, int mb, int slot,
                                 uint64_t *t_ns);
    /* Sum of squared gradients of this stage and its summed micro-batch losses (last piece).
     * A device backend waits here for the step's work: a device error in it is returned (the
     * step fails with it) and the values are then undefined. */
    pp_status (*grad_stats)(pp_stage_backend *b, double *sumsq, double *loss_sum);
    /* Optimizer step with learning rate and gradient scale (clipping). */
    pp_status (*optimizer_step)(pp_stage_backend *b, float lr, float grad_scale, uint64_t *t_ns);
    /* The gradients of `chunk` that data-parallel replicas sum: *g (NULL when the backend holds
     * none, as sim) of *n floats, and the bytes a real job would reduce (sim: the cost file's
     * param_bytes of the chunk's layers). */
    void (*grads)(pp_stage_backend *b, int chunk, float **g, size_t *n, uint64_t *bytes);
    /* Time a transfer of `bytes` takes from the sender's clock (sim: latency + bytes/BW). */
    uint64_t (*transfer_ns)(pp_stage_backend *b, size_t bytes);
    /* For a backend that carries no data: the time of the stage's data-parallel all-reduce of
     * `bytes` of gradients over `dp` replicas once they meet (sim: the cost file's
     * dp_allreduce_us terms where it gives them, else a ring's 2 (dp - 1) transfers of bytes /
     * dp). NULL: none. */
    uint64_t (*dp_allreduce_ns)(pp_stage_backend *b, uint64_t bytes, int dp);
    /* The sender's own time in a send of gradients (grad = 1) or activations, for a backend
     * that carries no data: *t_ns moves on by it, and the sim backend sleeps to that deadline
     * inside the send's range (the cost file's send_act_us / send_grad_us); NULL: none. */
    void (*send_time)(pp_stage_backend *b, int grad, uint64_t *t_ns);
    /* The receiver's own time in a receive of gradients (grad = 1) or activations, for a
     * backend that carries no data: *t_ns moves on by it from the receive's start, and the sim
     * backend sleeps to that deadline inside the receive's range before it waits for the
     * message (the cost file's recv_act_us / recv_grad_us); NULL: none. */
    void (*recv_time)(pp_stage_backend *b, int grad, uint64_t *t_ns);
    /* The schedule's own time after each compute op, outside the op's range, for a backend that
     * plays a cost file (sim: its op_gap_us): the executor moves its clock on by it and sleeps
     * to that deadline between the op and the next; NULL: none. */
    void (*op_gap)(pp_stage_backend *b, uint64_t *t_ns);
    void (*destroy)(pp_stage_backend *b);
} pp_backend_ops;

struct pp_stage_backend {
    const pp_backend_ops *ops;
    int stage;
    int n_chunks;     /* v */
    int n_slots;      /* activation slots per chunk */
    int carries_data; /* 0 for sim: messages carry byte counts, not tensors */
    pp_kops *mem;     /* where its tensors live (the executor's receive buffers and a
                         transport's device copies too); NULL: host memory */
    pp_stage_mem memory; /* its bytes per purpose (the executor adds the transport's) */
};

/* CPU backend for stage s: the layers of each of its chunks (pieces s, s + S, ...) with their
 * own parameters, AdamW state and n_slots activation slots of mb_B sequences per chunk. */
pp_status pp_backend_cpu_create(const pp_model_config *cfg, const pp_partition *part, int stage,
                                const pp_adamw_config *opt, uint64_t seed, int mb_B,
                                int n_slots, pp_stage_backend **out);
/* The same with activation recomputation (rc NULL or rc->layers NULL: none; copied). */
pp_status pp_backend_cpu_create_rc(const pp_model_config *cfg, const pp_partition *part,
                                   int stage, const pp_adamw_config *opt, uint64_t seed,
                                   int mb_B, int n_slots, const pp_recompute *rc,
                                   pp_stage_backend **out);
/* The same on another host kernel table (k->on_device 0; borrowed: it outlives the backend),
 * e.g. one that checks or injects faults, as tests do. */
pp_status pp_backend_cpu_create_kops(const pp_model_config *cfg, const pp_partition *part,
                                     int stage, const pp_adamw_config *opt, uint64_t seed,
                                     int mb_B, int n_slots, const pp_kops *k,
                                     pp_stage_backend **out);
/* The cpu backend's model slice of `chunk` (for checkpoints and tests). */
pp_model *pp_backend_cpu_model(pp_stage_backend *b, int chunk);
pp_optimizer *pp_backend_cpu_optimizer(pp_stage_backend *b, int chunk);

/* CUDA backend for stage s: the cpu backend's layers and math on GPU `device`, through a kernel
 * table with the stage's own stream (kernels/cuda/pp_cuda.h): parameters, gradients, AdamW
 * moments and activations in device memory, every op enqueued without waiting for the GPU; the
 * host waits only at the step's end (gradient statistics). Initial parameters are the cpu
 * backend's (same seed), so the two backends start identical. max_M: the most micro-batches a
 * step has (their tokens are staged on the device). precision: pp_cuda_precision. Declared in
 * every build: without CUDA it fails with "this build has no CUDA". Its kernel table (the
 * stage's stream) is b->mem, for transports that order copies on it. */
pp_status pp_backend_cuda_create(const pp_model_config *cfg, const pp_partition *part, int stage,
                                 const pp_adamw_config *opt, uint64_t seed, int mb_B, int n_slots,
                                 int device, int precision, int max_M, const pp_recompute *rc,
                                 pp_stage_backend **out);

/* Sim backend for stage s: every layer op sleeps to its deadline per the cost file; the
 * multiplier scales this stage's compute costs (1.0 = as in the file; stragglers). With
 * split_backward the input and weight halves cost pp_costs_layer_us's (bwd_input_us and
 * bwd_weight_us, or bwd_us / 2 each where the file has no split); otherwise a backward costs
 * bwd_us. `costs` is borrowed and must outlive the
 * backend. n_slots is how many micro-batches per chunk the executor may track at once (no memory
 * is held for them). jitter (NULL: none; copied) multiplies each compute op's cost by
 * pp_jitter_factor of its key (replica, stage, step, chunk, mb, op kind): docs/executor.md,
 * "Jitter". Every cost times the multiplier and the jitter's largest factor must fit the sim's
 * clock (PP_ERR_INVALID otherwise). */
pp_status pp_backend_sim_create(const pp_costs *costs, const pp_partition *part, int stage,
                                double multiplier, int split_backward, int n_slots,
                                const pp_jitter *jitter, int replica, pp_stage_backend **out);
/* The same with recomputation: a recomputed layer's backward (its input half when split) also
 * takes the layer's fwd_us, and its activations are modelled as the cpu backend holds them:
 * its input (the previous layer's activation_bytes) between forward and backward, its own
 * activation_bytes while the backward runs. */
pp_status pp_backend_sim_create_rc(const pp_costs *costs, const pp_partition *part, int stage,
                                   double multiplier, int split_backward, int n_slots,
                                   const pp_jitter *jitter, int replica, const pp_recompute *rc,
                                   pp_stage_backend **out);

#ifdef __cplusplus
}
#endif
#endif /* PP_BACKEND_H */
