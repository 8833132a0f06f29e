/* pp_exec.h: running a pipeline. The transport interface (how tensors cross stages), the
 * stage-backend interface (what a stage computes: cpu, sim, later cuda), the executor (one
 * worker per stage interpreting its schedule list) and the pipeline trainer that wires them up
 * for pptrain. docs/executor.md explains how MPI, NCCL and CUDA slot in.
 *
 * Threads: the executor owns one worker thread per local stage. A stage backend is only ever
 * called from its stage's worker. Transports are called from every worker concurrently. */
#ifndef PP_EXEC_H
#define PP_EXEC_H

#include "pp_common.h"
#include "pp_kops.h"
#include "pp_plan.h"
#include "pp_runtime.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ======================================================================================== */
/* Transport                                                                                  */
/* ======================================================================================== */

typedef enum pp_msg_kind { PP_MSG_ACT = 0, PP_MSG_GRAD = 1 } pp_msg_kind;

/* What a message carries: an activation or gradient of micro-batch mb for model piece `piece`
 * (the piece that RECEIVES it). Unique within a step. */
typedef struct pp_msg_tag {
    int32_t kind;
    int32_t mb;
    int32_t piece;
} pp_msg_tag;

/* A pending nonblocking operation. Owned by the caller; filled by isend/irecv, completed by
 * wait. */
typedef struct pp_request {
    int kind; /* 0 send, 1 recv */
    int src, dst;
    pp_msg_tag tag;
    void *buf;
    size_t bytes;
    uint64_t avail_ns; /* recv: when the data is available at the receiver (sim time model) */
    int done;
    void *impl; /* transport's own state */
} pp_request;

/* Fills a request for a transport: kind 0 send, 1 receive (the rest zeroed). */
static inline void pp_request_init(pp_request *req, int kind, int src, int dst, pp_msg_tag tag,
                                   void *buf, size_t bytes)
{
    *req = (pp_request){.kind = kind, .src = src, .dst = dst, .tag = tag, .buf = buf,
                        .bytes = bytes};
}

typedef struct pp_transport pp_transport;

typedef struct pp_transport_ops {
    const char *name;
    /* Starts sending `bytes` from `buf` (buf may be NULL when bytes carry no data, as in the sim
     * backend) from stage src to dst. avail_ns is when the data is available at the receiver
     * under the sender's time model (0: at once). The buffer may be reused once wait returns. */
    pp_status (*isend)(pp_transport *t, int src, int dst, pp_msg_tag tag, const void *buf,
                       size_t bytes, uint64_t avail_ns, pp_request *req);
    /* Starts receiving the message `tag` from src into buf. */
    pp_status (*irecv)(pp_transport *t, int dst, int src, pp_msg_tag tag, void *buf, size_t bytes,
                       pp_request *req);
    /* Blocks until req completes (no spinning). */
    pp_status (*wait)(pp_transport *t, pp_request *req);
    /* Collective over all S stages: sums vals[0..n) in stage order (deterministic) and takes
     * the maximum of *max_ns; every stage gets the results. */
    pp_status (*allreduce)(pp_transport *t, int stage, double *vals, int n, uint64_t *max_ns);
    /* Wakes every blocked call with PP_ERR_RUNTIME (a stage failed: the step is abandoned). */
    void (*abort)(pp_transport *t);
    void (*destroy)(pp_transport *t);
    /* Optional (NULL: the local proposal stands). Called by pp_exec_step from the calling
     * thread while no worker runs: turns this process's proposed step start *t0_ns into one
     * that every process of the job uses (MPI: the latest proposal plus a margin). */
    pp_status (*agree_start)(pp_transport *t, uint64_t *t0_ns);
    /* Data parallelism (NULL unless dp > 1): sums buf[0..n) (float32 gradients; buf may be
     * NULL when n is 0) and vals[0..nvals) over the dp replicas of `stage`, and takes the
     * maximum of *max_ns. Every replica gets the results. Collective over those replicas. */
    pp_status (*dp_allreduce)(pp_transport *t, int stage, float *buf, size_t n, double *vals,
                              int nvals, uint64_t *max_ns);
} pp_transport_ops;

struct pp_transport {
    const pp_transport_ops *ops;
    int S;
    int dp;      /* data-parallel replicas of the pipeline (1: none) */
    int replica; /* which of them this process runs, from 0 */
};

/* In-process transport: one bounded mailbox per directed link (capacity messages of at most
 * max_bytes each, preallocated), mutex + condition variables, no spinning. */
pp_status pp_transport_inproc_create(int S, int capacity, size_t max_bytes, pp_transport **out);

/* How the in-process transport moves message data when it is not in host memory (a GPU's):
 * each mailbox slot gets a buffer from alloc; put copies a sender's buffer into a slot, get a
 * slot into a receiver's buffer. slot_id numbers the slots of the transport from 0 (below
 * n_slots_hint of create_ex). Both may be asynchronous (enqueued on the stage's stream) as long as
 * they keep the order: a get after the put of the same message, a put into a slot after the get
 * that emptied it. */
typedef struct pp_copy_ops {
    void *ctx;
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    void (*put)(void *ctx, int src, int slot_id, void *slot_buf, const void *buf, size_t bytes);
    void (*get)(void *ctx, int dst, int slot_id, void *buf, const void *slot_buf, size_t bytes);
} pp_copy_ops;

/* With copy ops (NULL: host memcpy, as pp_transport_inproc_create). The ops must outlive the
 * transport. */
pp_status pp_transport_inproc_create_ex(int S, int capacity, size_t max_bytes,
                                        const pp_copy_ops *copy, pp_transport **out);
/* Slots of a transport of S stages and this capacity (the slot_id range of pp_copy_ops). */
int pp_transport_inproc_slots(int S, int capacity);

#ifdef PP_HAVE_MPI
/* MPI transport: S x dp ranks; rank r runs stage r % S of replica r / S. Each replica's
 * pipeline talks over its own communicator (split from MPI_COMM_WORLD), each stage's replicas
 * reduce gradients over another (dp_allreduce). P pieces and M micro-batches size the tag encoding; capacity and max_bytes the
 * preallocated staging slots, as for the in-process transport. MPI must be initialised with at
 * least MPI_THREAD_SERIALIZED (pp_mpi_init). abort() only fails this rank's pending calls: the
 * caller then ends the job with pp_mpi_abort_job. Calls must be serialised (one local stage). */
pp_status pp_transport_mpi_create(int S, int dp, int P, int M, int capacity, size_t max_bytes,
                                  pp_transport **out);
/* Assembles on stage 0 of this replica an array of n 32-bit words that each stage filled only
 * where it holds data (zero elsewhere): a bitwise-OR reduction over the replica's pipeline, exact
 * for any bit pattern. Collective over the replica's S ranks; the result is valid on stage 0. */
pp_status pp_transport_mpi_gather_bits(pp_transport *t, void *words, size_t n);
/* The stage this process runs over an MPI transport (its rank in its replica's pipeline). */
int pp_transport_mpi_rank(const pp_transport *t);
/* MPI_Init_thread(SERIALIZED) and the world's rank and size; finalize; MPI_Abort of the job. */
pp_status pp_mpi_init(int *argc, char ***argv, int *rank, int *size);
void pp_mpi_finalize(void);
/* Clock ping-pong for the analyzer's clock alignment (docs/metrics.md): world rank 0 exchanges
 * `rounds` round trips with every other rank, one at a time, each message bracketed by NVTX marks
 * "clocksync send|recv peer=P phase=F seq=K" (P the other's world rank) in the pipeprof domain,
 * so the profiler timestamps them on each process's clock. A collective over MPI_COMM_WORLD;
 * call it while no stage worker runs (pptrain: after set-up, phase 0, and after the last step,
 * phase 1). Marks cost nothing without a tool attached. */
pp_status pp_mpi_clock_sync(int rounds, int phase);
void pp_mpi_abort_job(int code);
#endif

#ifdef PP_HAVE_NCCL
/* NCCL transport (CUDA stages, one per MPI rank and GPU; runtime/transport_nccl.c): created with
 * the sizes of the MPI transport (S x dp ranks as there), then bound to the stage's kernel table
 * and the stages it exchanges messages with (pp_schedule_peers), which sets up the NCCL
 * communicators (ids exchanged over MPI; collective over the world): two per link, one for each
 * direction, and one per stage's replicas. Activations and gradients move with
 * ncclSend/ncclRecv on per-link streams, data-parallel gradients are summed with ncclAllReduce
 * on the compute stream; the host collectives go over MPI.
 * The schedule's links must be FIFO (pp_schedule_links_fifo). */
pp_status pp_transport_nccl_create(int S, int dp, int P, int M, int capacity,
                                   size_t max_bytes, pp_transport **out);
int pp_transport_nccl_rank(const pp_transport *t);
pp_status pp_transport_nccl_bind(pp_transport *t, pp_kops *k, const int *peers, int n_peers);
/* A one-rank communicator on `device` sending `bytes` to itself (send and receive grouped):
 * checks NCCL works where only one GPU is, and measures the copy (GB/s). */
pp_status pp_nccl_selftest(int device, size_t bytes, double *gbps);
#endif

/* 1 when every link of the schedule receives its messages in the order they were sent (what
 * NCCL's in-order matching needs); else 0, with the first link that reorders in why. */
int pp_schedule_links_fifo(const pp_schedule *sched, char *why, size_t n);
/* The stages `stage` sends to or receives from in the schedule, ascending, into peers[max];
 * returns how many (-1 when there are more than max). The relation is symmetric: the NCCL
 * transport makes a communicator per direction of each such pair. */
int pp_schedule_peers(const pp_schedule *sched, int stage, int *peers, int max);

/* Blocking conveniences over isend/irecv + wait. */
pp_status pp_transport_send(pp_transport *t, int src, int dst, pp_msg_tag tag, const void *buf,
                            size_t bytes, uint64_t avail_ns);
pp_status pp_transport_recv(pp_transport *t, int dst, int src, pp_msg_tag tag, void *buf,
                            size_t bytes, uint64_t *avail_ns);

/* ======================================================================================== */
/* Stage backend                                                                              */
/* ======================================================================================== */

/* The data of one step: the batch cut into M micro-batches (cpu backend; NULL for sim). */
typedef struct pp_step_data {
    int M;
    const pp_microbatch *mbs; /* [M] */
    float loss_scale;         /* multiplies the summed token losses (1 / (batch * T)) */
} pp_step_data;

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
    void (*destroy)(pp_stage_backend *b);
} pp_backend_ops;

struct pp_stage_backend {
    const pp_backend_ops *ops;
    int stage;
    int n_chunks;     /* v */
    int n_slots;      /* activation slots per chunk */
    int carries_data; /* 0 for sim: messages carry byte counts, not tensors */
    const pp_kops *mem; /* where its tensors live (the executor's receive buffers too); NULL:
                           host memory */
};

/* CPU backend for stage s: the layers of each of its chunks (pieces s, s + S, ...) with their
 * own parameters, AdamW state and n_slots activation slots of mb_B sequences per chunk. */
pp_status pp_backend_cpu_create(const pp_model_config *cfg, const pp_partition *part, int stage,
                                const pp_adamw_config *opt, uint64_t seed, int mb_B,
                                int n_slots, pp_stage_backend **out);
/* The same on another host kernel table (k->on_device 0; borrowed: it outlives the backend),
 * e.g. one that checks or injects faults, as tests do. */
pp_status pp_backend_cpu_create_kops(const pp_model_config *cfg, const pp_partition *part,
                                     int stage, const pp_adamw_config *opt, uint64_t seed,
                                     int mb_B, int n_slots, const pp_kops *k,
                                     pp_stage_backend **out);
/* The cpu backend's model slice of `chunk` (for checkpoints and tests). */
pp_model *pp_backend_cpu_model(pp_stage_backend *b, int chunk);
pp_optimizer *pp_backend_cpu_optimizer(pp_stage_backend *b, int chunk);

#ifdef PP_HAVE_CUDA
/* CUDA backend for stage s: the cpu backend's layers and math on GPU `device`, through a kernel
 * table with the stage's own stream (kernels/cuda/pp_cuda.h): parameters, gradients, AdamW
 * moments and activations in device memory, every op enqueued without waiting for the GPU; the
 * host waits only at the step's end (gradient statistics). Initial parameters are the cpu
 * backend's (same seed), so the two backends start identical. max_M: the most micro-batches a
 * step has (their tokens are staged on the device). precision: pp_cuda_precision. */
pp_status pp_backend_cuda_create(const pp_model_config *cfg, const pp_partition *part, int stage,
                                 const pp_adamw_config *opt, uint64_t seed, int mb_B, int n_slots,
                                 int device, int precision, int max_M, pp_stage_backend **out);
/* The stage's kernel table (its stream), for transports that order copies on it. */
pp_kops *pp_backend_cuda_kops(pp_stage_backend *b);
/* Copy ops for the in-process transport between the CUDA stages of one process: device-to-
 * device copies on the sender's and the receiver's streams, ordered by CUDA events, no host
 * waiting. kops[s] is stage s's table; n_slots from pp_transport_inproc_slots. */
pp_status pp_cuda_copy_ops_create(pp_kops *const *kops, int S, int n_slots, pp_copy_ops **out);
void pp_cuda_copy_ops_destroy(pp_copy_ops *c);
#endif

/* Sim backend for stage s: every layer op sleeps to its deadline per the cost file; the
 * multiplier scales this stage's compute costs (1.0 = as in the file; stragglers). With
 * split_backward the input and weight halves cost bwd_input_us and bwd_weight_us (the cost file
 * must have them); otherwise a backward costs bwd_us. `costs` is borrowed and must outlive the
 * backend. n_slots is how many micro-batches per chunk the executor may track at once (no memory
 * is held for them). */
pp_status pp_backend_sim_create(const pp_costs *costs, const pp_partition *part, int stage,
                                double multiplier, int split_backward, int n_slots,
                                pp_stage_backend **out);

/* ======================================================================================== */
/* Executor                                                                                   */
/* ======================================================================================== */

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
/* The local backend of `stage` (NULL if not local). */
pp_stage_backend *pp_exec_backend(pp_exec *e, int stage);

/* ======================================================================================== */
/* Pipeline trainer: pptrain's engine for any S, schedule and backend                        */
/* ======================================================================================== */

typedef enum pp_backend_kind {
    PP_BACKEND_CPU = 0,
    PP_BACKEND_SIM = 1,
    PP_BACKEND_CUDA = 2 /* PP_HAVE_CUDA builds */
} pp_backend_kind;
/* inproc: all S stages are threads of this process; mpi: this process runs only the stage of
 * its MPI rank (PP_HAVE_MPI builds only). */
typedef enum pp_transport_kind {
    PP_TRANSPORT_INPROC = 0,
    PP_TRANSPORT_MPI = 1,
    PP_TRANSPORT_NCCL = 2 /* cuda backend, one stage per MPI rank (PP_HAVE_NCCL builds) */
} pp_transport_kind;

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
    pp_transport_kind transport; /* 0 (inproc) unless set */
    int dp;                  /* data-parallel replicas (mpi transport; 0 or 1: none). The batch
                                is the global one: each replica trains batch / dp of it */
    int cuda_device;         /* cuda: the GPU of stage 0 in-process, or of this rank */
    int cuda_precision;      /* cuda: pp_cuda_precision (0 fp32) */
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
