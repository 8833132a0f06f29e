/* pp_transport.h: how tensors cross pipeline stages. The transport interface (a table of
 * function pointers), the one table of transports (inproc, mpi, nccl; a stub entry for each one
 * this build lacks) and their one parameter struct, and the MPI process helpers pptrain calls
 * around a job. Implemented by runtime/transport*.c; docs/executor.md explains how a transport
 * plugs into the executor.
 *
 * Threads: transports are called from every stage worker concurrently (the MPI and NCCL ones
 * run one local stage, whose calls the executor serialises). */
#ifndef PP_TRANSPORT_H
#define PP_TRANSPORT_H

#include "pp_common.h"
#include "pp_kops.h"
#include "pp_plan.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Messages are tagged by pp_msg_tag (pp_plan.h: the schedule's tag rule). */

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
    /* Optional (NULL: nothing to bind). Called once, after the local stages' backends exist and
     * before the first message: mem[i] is the kernel table whose memory local stage
     * first_local + i keeps its tensors in (NULL: host memory), sched the schedule whose
     * messages will cross. NCCL sets up its communicators here (collective over the job); the
     * in-process transport of device stages its device copies. */
    pp_status (*attach)(pp_transport *t, const pp_schedule *sched, pp_kops *const *mem,
                        int n_local);
    /* Optional (NULL: every stage is in this process, there is nothing to gather). Assembles on
     * stage 0 of this replica an array of n 32-bit words that each stage filled only where it
     * holds data (zero elsewhere): a bitwise-OR reduction over the replica's pipeline, exact
     * for any bit pattern. Collective over the replica's stages; the result is valid on stage 0
     * (checkpoints over MPI). */
    pp_status (*gather_bits)(pp_transport *t, void *words, size_t n);
} pp_transport_ops;

struct pp_transport {
    const pp_transport_ops *ops;
    int S;
    int dp;      /* data-parallel replicas of the pipeline (1: none) */
    int replica; /* which of them this process runs, from 0 */
    int first_local, n_local; /* the stages this process runs: [first_local, +n_local) */
};

/* ======================================================================================== */
/* The table of transports                                                                    */
/* ======================================================================================== */

typedef enum pp_transport_kind {
    PP_TRANSPORT_INPROC = 0, /* all S stages are threads of this process */
    PP_TRANSPORT_MPI = 1,    /* one stage per MPI rank */
    PP_TRANSPORT_NCCL = 2,   /* cuda backend, one stage per MPI rank and GPU */
    PP_TRANSPORT_COUNT
} pp_transport_kind;

/* What every transport constructor is given; a transport ignores what it does not need. */
typedef struct pp_transport_params {
    int S;            /* stages */
    int dp;           /* data-parallel replicas (0 or 1: none) */
    int P, M;         /* model pieces and micro-batches: the range of message tags */
    int capacity;     /* messages one link can have queued at once (>= 1) */
    size_t max_bytes; /* the largest message payload */
    int device_memory; /* the stages keep their tensors on a GPU: message buffers are made
                          where they live, once attach names their kernel tables */
} pp_transport_params;

typedef struct pp_transport_entry {
    pp_transport_kind kind;
    const char *name;          /* what --transport takes */
    int one_stage_per_process; /* launched under mpirun: this process runs the stage of its
                                  rank, and data-parallel replicas are possible */
    int device_only;           /* moves GPU memory only (needs --backend cuda); the one kind
                                  that can sum device gradients across replicas */
    int in_order;              /* matches a link's messages in send order, not by tag: the
                                  schedule's links must be FIFO (pp_schedule_links_fifo) */
    int built;                 /* 0: a stub; pp_transport_create fails saying what is missing */
    const char *missing;       /* a stub's: what this build lacks ("MPI (install ...)") */
    pp_status (*create)(const pp_transport_params *p, pp_transport **out); /* NULL: stub */
} pp_transport_entry;

/* The entry of kind (NULL when out of range). */
const pp_transport_entry *pp_transport_entry_of(pp_transport_kind kind);
/* "inproc", "mpi", "nccl" -> kind; an unknown name is PP_ERR_INVALID listing the names. */
pp_status pp_transport_kind_parse(const char *name, pp_transport_kind *out);
/* Creates a transport of kind from the table; a kind this build lacks is PP_ERR_INVALID with
 * "--transport NAME: this build has no ..." and what to configure. */
pp_status pp_transport_create(pp_transport_kind kind, const pp_transport_params *p,
                              pp_transport **out);
/* destroy(NULL) is a no-op. */
void pp_transport_destroy(pp_transport *t);

/* In-process transport: one bounded mailbox per directed link (capacity messages of at most
 * max_bytes each, preallocated), mutex + condition variables, no spinning. The same as the
 * table's inproc entry with just these parameters. */
pp_status pp_transport_inproc_create(int S, int capacity, size_t max_bytes, pp_transport **out);

/* Blocking conveniences over isend/irecv + wait. */
pp_status pp_transport_send(pp_transport *t, int src, int dst, pp_msg_tag tag, const void *buf,
                            size_t bytes, uint64_t avail_ns);
pp_status pp_transport_recv(pp_transport *t, int dst, int src, pp_msg_tag tag, void *buf,
                            size_t bytes, uint64_t *avail_ns);

/* ======================================================================================== */
/* MPI job helpers (for one-stage-per-process transports)                                     */
/* ======================================================================================== */

/* Declared in every build; without MPI pp_mpi_init fails saying so (no transport of the table
 * needs them then), clock sync does nothing, finalize and abort_job return. */
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

#ifdef PP_HAVE_NCCL
/* A one-rank communicator on `device` sending `bytes` to itself (send and receive grouped):
 * checks NCCL works where only one GPU is, and measures the copy (GB/s). */
pp_status pp_nccl_selftest(int device, size_t bytes, double *gbps);
#endif

#ifdef __cplusplus
}
#endif
#endif /* PP_TRANSPORT_H */
