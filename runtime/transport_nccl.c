/* transport_nccl.c: the NCCL transport: one pipeline stage per process and GPU (launched by
 * mpirun), activations and gradients moved with ncclSend/ncclRecv between neighbouring ranks,
 * the ncclUniqueId bootstrapped over MPI. The step's host-side collectives (gradient norm, loss,
 * the common step start) go over MPI through an MPI transport it holds.
 *
 * Ordering without host waits. The stage computes on its kernel table's stream; every link (one
 * per neighbour) has its own send and receive streams, so that a send waiting for its peer never
 * holds up a receive or the computation:
 * - isend copies the message into one of the link's staging slots on the compute stream (after
 *   the slot's previous send has finished: an event), then the send stream waits for that copy
 *   and posts ncclSend from the slot. The compute stream never waits for the peer, which gives
 *   the buffered send semantics the schedules need (1F1B neighbours send to each other at once;
 *   rendezvous sends would deadlock them);
 * - irecv makes the link's receive stream wait for the compute stream (the receive buffer is
 *   free once the work enqueued before it is done) and posts ncclRecv into the buffer; wait
 *   makes the compute stream wait for that receive.
 * NCCL matches a link's sends and receives in the order they are posted, not by tag, so the
 * pipeline trainer only uses this transport for schedules whose links are FIFO
 * (pp_schedule_links_fifo).
 *
 * Threads: one local stage; its worker posts sends and receives, the main thread the MPI
 * collectives, never at the same time (the executor's mutex orders them). */
#include "pp_cuda.h"
#include "pp_exec.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <string.h>

enum { RING = 64 }; /* receive events in flight per link */

typedef struct nccl_link {
    int peer;
    cudaStream_t send_stream, recv_stream;
    int n_slots, next_slot;
    char **slot;             /* [n_slots] device staging buffers */
    cudaEvent_t *slot_ready; /* the copy into the slot is done */
    cudaEvent_t *slot_done;  /* the slot's send is done */
    cudaEvent_t buf_free[RING], recv_done[RING];
    int next_recv;
} nccl_link;

typedef struct nccl_tp {
    pp_transport base;
    pp_transport *mpi; /* host collectives */
    ncclComm_t comm;    /* this replica's pipeline: rank = stage */
    ncclComm_t dp_comm; /* this stage's replicas (NULL when dp = 1) */
    int rank, device, capacity;
    size_t max_bytes;
    pp_kops *k;         /* the stage's table (bound after the backend exists) */
    cudaStream_t compute;
    nccl_link links[2];
    int n_links;
    int aborted;
} nccl_tp;

static pp_status nccl_fail(ncclResult_t r, const char *what)
{
    return PP_ERR(PP_ERR_RUNTIME, "NCCL: %s failed: %s", what, ncclGetErrorString(r));
}

static pp_status cuda_fail(cudaError_t e, const char *what)
{
    return PP_ERR(PP_ERR_RUNTIME, "CUDA: %s failed: %s", what, cudaGetErrorString(e));
}

static void link_free(nccl_link *l)
{
    if (l->send_stream)
        cudaStreamSynchronize(l->send_stream);
    if (l->recv_stream)
        cudaStreamSynchronize(l->recv_stream);
    for (int i = 0; i < l->n_slots; i++) {
        if (l->slot && l->slot[i])
            cudaFree(l->slot[i]);
        if (l->slot_ready && l->slot_ready[i])
            cudaEventDestroy(l->slot_ready[i]);
        if (l->slot_done && l->slot_done[i])
            cudaEventDestroy(l->slot_done[i]);
    }
    for (int i = 0; i < RING; i++) {
        if (l->buf_free[i])
            cudaEventDestroy(l->buf_free[i]);
        if (l->recv_done[i])
            cudaEventDestroy(l->recv_done[i]);
    }
    if (l->send_stream)
        cudaStreamDestroy(l->send_stream);
    if (l->recv_stream)
        cudaStreamDestroy(l->recv_stream);
    pp_free(l->slot);
    pp_free(l->slot_ready);
    pp_free(l->slot_done);
    memset(l, 0, sizeof *l);
}

static pp_status link_init(nccl_tp *t, nccl_link *l, int peer)
{
    cudaError_t e = cudaSuccess;
    memset(l, 0, sizeof *l);
    l->peer = peer;
    l->n_slots = t->capacity + 1;
    l->slot = pp_alloc(sizeof(char *) * (size_t)l->n_slots);
    l->slot_ready = pp_alloc(sizeof(cudaEvent_t) * (size_t)l->n_slots);
    l->slot_done = pp_alloc(sizeof(cudaEvent_t) * (size_t)l->n_slots);
    if (!l->slot || !l->slot_ready || !l->slot_done)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for NCCL link state");
    unsigned flags = cudaEventDisableTiming;
    if ((e = cudaStreamCreateWithFlags(&l->send_stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&l->recv_stream, cudaStreamNonBlocking)) != cudaSuccess)
        return cuda_fail(e, "cudaStreamCreate (NCCL link)");
    for (int i = 0; i < l->n_slots; i++) {
        if ((e = cudaMalloc((void **)&l->slot[i], t->max_bytes ? t->max_bytes : 1)) !=
                cudaSuccess ||
            (e = cudaEventCreateWithFlags(&l->slot_ready[i], flags)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&l->slot_done[i], flags)) != cudaSuccess)
            return cuda_fail(e, "allocating the NCCL staging slots");
    }
    for (int i = 0; i < RING; i++)
        if ((e = cudaEventCreateWithFlags(&l->buf_free[i], flags)) != cudaSuccess ||
            (e = cudaEventCreateWithFlags(&l->recv_done[i], flags)) != cudaSuccess)
            return cuda_fail(e, "cudaEventCreate (NCCL link)");
    return PP_OK;
}

static pp_status get_link(nccl_tp *t, int me, int peer, nccl_link **out)
{
    if (me != t->rank)
        return PP_ERR(PP_ERR_INVALID, "NCCL transport: stage %d is not local (rank %d)", me,
                      t->rank);
    if (peer < 0 || peer >= t->base.S || peer == me)
        return PP_ERR(PP_ERR_INVALID, "NCCL transport: bad peer stage %d", peer);
    if (!t->k)
        return PP_ERR(PP_ERR_RUNTIME, "NCCL transport: no stage bound");
    for (int i = 0; i < t->n_links; i++)
        if (t->links[i].peer == peer) {
            *out = &t->links[i];
            return PP_OK;
        }
    if (t->n_links == 2)
        return PP_ERR(PP_ERR_INVALID, "NCCL transport: stage %d talks to a third peer (%d)", me,
                      peer);
    nccl_link *l = &t->links[t->n_links++];
    pp_status st = link_init(t, l, peer);
    *out = l;
    return st;
}

static pp_status nc_isend(pp_transport *tp, int src, int dst, pp_msg_tag tag, const void *buf,
                          size_t bytes, uint64_t avail_ns, pp_request *req)
{
    nccl_tp *t = (nccl_tp *)tp;
    nccl_link *l = NULL;
    pp_status st = get_link(t, src, dst, &l);
    if (st != PP_OK)
        return st;
    if (bytes > t->max_bytes)
        return PP_ERR(PP_ERR_RUNTIME, "NCCL transport: message of %zu bytes exceeds %zu", bytes,
                      t->max_bytes);
    int s = l->next_slot;
    l->next_slot = (s + 1) % l->n_slots;
    cudaError_t e = cudaStreamWaitEvent(t->compute, l->slot_done[s], 0);
    if (e == cudaSuccess && bytes)
        e = cudaMemcpyAsync(l->slot[s], buf, bytes, cudaMemcpyDeviceToDevice, t->compute);
    if (e == cudaSuccess)
        e = cudaEventRecord(l->slot_ready[s], t->compute);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(l->send_stream, l->slot_ready[s], 0);
    if (e != cudaSuccess)
        return cuda_fail(e, "staging a send");
    ncclResult_t r = ncclSend(l->slot[s], bytes, ncclUint8, dst, t->comm, l->send_stream);
    if (r != ncclSuccess)
        return nccl_fail(r, "ncclSend");
    if ((e = cudaEventRecord(l->slot_done[s], l->send_stream)) != cudaSuccess)
        return cuda_fail(e, "cudaEventRecord");
    pp_request_init(req, 0, src, dst, tag, NULL, bytes);
    req->avail_ns = avail_ns;
    req->done = 1; /* the data is staged: the buffer is free */
    return PP_OK;
}

static pp_status nc_irecv(pp_transport *tp, int dst, int src, pp_msg_tag tag, void *buf,
                          size_t bytes, pp_request *req)
{
    nccl_tp *t = (nccl_tp *)tp;
    nccl_link *l = NULL;
    pp_status st = get_link(t, dst, src, &l);
    if (st != PP_OK)
        return st;
    int i = l->next_recv;
    l->next_recv = (i + 1) % RING;
    cudaError_t e = cudaEventRecord(l->buf_free[i], t->compute);
    if (e == cudaSuccess)
        e = cudaStreamWaitEvent(l->recv_stream, l->buf_free[i], 0);
    if (e != cudaSuccess)
        return cuda_fail(e, "ordering a receive");
    ncclResult_t r = ncclRecv(buf, bytes, ncclUint8, src, t->comm, l->recv_stream);
    if (r != ncclSuccess)
        return nccl_fail(r, "ncclRecv");
    if ((e = cudaEventRecord(l->recv_done[i], l->recv_stream)) != cudaSuccess)
        return cuda_fail(e, "cudaEventRecord");
    pp_request_init(req, 1, src, dst, tag, buf, bytes);
    req->impl = &l->recv_done[i];
    return PP_OK;
}

static pp_status nc_wait(pp_transport *tp, pp_request *req)
{
    nccl_tp *t = (nccl_tp *)tp;
    if (req->done)
        return PP_OK;
    if (t->aborted)
        return PP_ERR(PP_ERR_RUNTIME, "NCCL transport aborted (rank %d)", t->rank);
    /* the computation after this point sees the data; the host does not wait */
    cudaError_t e = cudaStreamWaitEvent(t->compute, *(cudaEvent_t *)req->impl, 0);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaStreamWaitEvent");
    req->done = 1;
    req->avail_ns = 0;
    return PP_OK;
}

/* Data parallelism: the gradients (device memory) summed over this stage's replicas with
 * ncclAllReduce in place on the compute stream, after the backward kernels that produced them
 * and before the optimizer's; the host values (loss, clock) over MPI. */
static pp_status nc_dp_allreduce(pp_transport *tp, int stage, float *buf, size_t n, double *vals,
                                 int nvals, uint64_t *max_ns)
{
    nccl_tp *t = (nccl_tp *)tp;
    if (t->dp_comm && buf && n) {
        ncclResult_t r = ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, t->dp_comm, t->compute);
        if (r != ncclSuccess)
            return nccl_fail(r, "ncclAllReduce of the gradients");
    }
    if (!nvals && !max_ns)
        return PP_OK;
    return t->mpi->ops->dp_allreduce(t->mpi, stage, NULL, 0, vals, nvals, max_ns);
}

static pp_status nc_allreduce(pp_transport *tp, int stage, double *vals, int n, uint64_t *max_ns)
{
    nccl_tp *t = (nccl_tp *)tp;
    return t->mpi->ops->allreduce(t->mpi, stage, vals, n, max_ns);
}

static pp_status nc_agree_start(pp_transport *tp, uint64_t *t0_ns)
{
    nccl_tp *t = (nccl_tp *)tp;
    return t->mpi->ops->agree_start(t->mpi, t0_ns);
}

static void nc_abort(pp_transport *tp)
{
    nccl_tp *t = (nccl_tp *)tp;
    t->aborted = 1;
    t->mpi->ops->abort(t->mpi);
    /* pending NCCL operations may never complete: the communicator is aborted, not destroyed */
    if (t->comm)
        ncclCommAbort(t->comm);
    if (t->dp_comm)
        ncclCommAbort(t->dp_comm);
    t->comm = t->dp_comm = NULL;
}

static void nc_destroy(pp_transport *tp)
{
    nccl_tp *t = (nccl_tp *)tp;
    if (!t)
        return;
    if (!t->aborted)
        for (int i = 0; i < t->n_links; i++)
            link_free(&t->links[i]);
    if (t->comm)
        ncclCommDestroy(t->comm);
    if (t->dp_comm)
        ncclCommDestroy(t->dp_comm);
    if (t->mpi)
        t->mpi->ops->destroy(t->mpi);
    pp_free(t);
}

static const pp_transport_ops k_nccl_ops = {
    .name = "nccl",
    .isend = nc_isend,
    .irecv = nc_irecv,
    .wait = nc_wait,
    .allreduce = nc_allreduce,
    .abort = nc_abort,
    .destroy = nc_destroy,
    .agree_start = nc_agree_start,
    .dp_allreduce = nc_dp_allreduce,
};

pp_status pp_transport_nccl_create(int S, int dp, int P, int M, int capacity,
                                   size_t max_bytes, pp_transport **out)
{
    nccl_tp *t = pp_alloc(sizeof *t);
    if (!t)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the NCCL transport");
    t->base.ops = &k_nccl_ops;
    t->base.S = S;
    t->capacity = capacity;
    t->max_bytes = max_bytes;
    /* the MPI transport checks the world size and gives the stage and replica */
    pp_status st = pp_transport_mpi_create(S, dp, P, M, 1, 0, &t->mpi);
    if (st != PP_OK) {
        pp_free(t);
        return st;
    }
    t->rank = pp_transport_mpi_rank(t->mpi);
    t->base.dp = t->mpi->dp;
    t->base.replica = t->mpi->replica;
    t->device = -1;
    *out = &t->base;
    return PP_OK;
}

int pp_transport_nccl_rank(const pp_transport *tp) { return ((const nccl_tp *)tp)->rank; }

/* One NCCL communicator over the world's ranks of the same `color` (ordered by `key`): its
 * member 0 creates the id, MPI carries it to the others. Collective over the world. */
static pp_status comm_init(nccl_tp *t, int color, int key, int n, ncclComm_t *out,
                           const char *what)
{
    (void)t;
    MPI_Comm sub;
    if (MPI_Comm_split(MPI_COMM_WORLD, color, key, &sub) != MPI_SUCCESS)
        return PP_ERR(PP_ERR_RUNTIME, "NCCL: splitting MPI_COMM_WORLD for the %s communicator",
                      what);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = ncclSuccess;
    if (key == 0)
        r = ncclGetUniqueId(&id);
    /* every member learns whether member 0 got an id, so none waits forever in init */
    int ok = r == ncclSuccess, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, sub);
    pp_status st = PP_OK;
    if (!all_ok) {
        st = r != ncclSuccess ? nccl_fail(r, "ncclGetUniqueId")
                              : PP_ERR(PP_ERR_RUNTIME, "NCCL: no id for the %s communicator",
                                       what);
    } else {
        MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, sub);
        r = ncclCommInitRank(out, n, id, key);
        if (r != ncclSuccess) {
            *out = NULL;
            st = nccl_fail(r, "ncclCommInitRank");
        }
    }
    MPI_Comm_free(&sub);
    return st;
}

pp_status pp_transport_nccl_bind(pp_transport *tp, pp_kops *k)
{
    nccl_tp *t = (nccl_tp *)tp;
    t->k = k;
    t->compute = (cudaStream_t)pp_cuda_kops_stream(k);
    t->device = pp_cuda_kops_device(k);
    cudaError_t e = cudaSetDevice(t->device);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaSetDevice");
    /* the pipeline of this replica (members: its stages), then the replicas of this stage */
    pp_status st = comm_init(t, t->base.replica, t->rank, t->base.S, &t->comm, "pipeline");
    if (st == PP_OK && t->base.dp > 1)
        st = comm_init(t, t->rank, t->base.replica, t->base.dp, &t->dp_comm, "data-parallel");
    return st;
}

pp_status pp_nccl_selftest(int device, size_t bytes, double *gbps)
{
    cudaError_t e = cudaSetDevice(device);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaSetDevice");
    ncclComm_t comm = NULL;
    int devs[1] = {device};
    ncclResult_t r = ncclCommInitAll(&comm, 1, devs);
    if (r != ncclSuccess)
        return nccl_fail(r, "ncclCommInitAll (1 rank)");
    pp_status st = PP_OK;
    void *a = NULL, *b = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    if ((e = cudaMalloc(&a, bytes)) != cudaSuccess || (e = cudaMalloc(&b, bytes)) != cudaSuccess ||
        (e = cudaStreamCreate(&s)) != cudaSuccess || (e = cudaEventCreate(&e0)) != cudaSuccess ||
        (e = cudaEventCreate(&e1)) != cudaSuccess || (e = cudaMemset(a, 0x5a, bytes)) != cudaSuccess ||
        (e = cudaMemset(b, 0, bytes)) != cudaSuccess) {
        st = cuda_fail(e, "setting up the NCCL self-test");
        goto done;
    }
    /* a rank sending to itself: send and receive in one group, or NCCL would wait forever */
    for (int rep = 0; rep < 2 && st == PP_OK; rep++) {
        cudaEventRecord(e0, s);
        if ((r = ncclGroupStart()) == ncclSuccess && (r = ncclSend(a, bytes, ncclUint8, 0, comm, s)) ==
                ncclSuccess && (r = ncclRecv(b, bytes, ncclUint8, 0, comm, s)) == ncclSuccess)
            r = ncclGroupEnd();
        if (r != ncclSuccess)
            st = nccl_fail(r, "self send/receive");
        cudaEventRecord(e1, s);
    }
    if (st == PP_OK && (e = cudaStreamSynchronize(s)) != cudaSuccess)
        st = cuda_fail(e, "cudaStreamSynchronize");
    if (st == PP_OK) {
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        if (gbps)
            *gbps = ms > 0 ? (double)bytes / (ms * 1e6) : 0.0;
        unsigned char probe[64];
        size_t n = bytes < sizeof probe ? bytes : sizeof probe;
        cudaMemcpy(probe, (char *)b + (bytes - n), n, cudaMemcpyDeviceToHost);
        for (size_t i = 0; i < n && st == PP_OK; i++)
            if (probe[i] != 0x5a)
                st = PP_ERR(PP_ERR_RUNTIME, "NCCL self-test: byte %zu arrived as %#x", i,
                            probe[i]);
    }
done:
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    if (s)
        cudaStreamDestroy(s);
    cudaFree(a);
    cudaFree(b);
    ncclCommDestroy(comm);
    return st;
}
