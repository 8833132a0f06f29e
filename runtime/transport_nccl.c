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
 * One communicator per direction of each link. NCCL runs the operations of one communicator
 * one after another in the order they were issued, whatever their streams (each kernel of a
 * communicator waits for its previous one), and a large send completes only when its receive
 * runs. With one communicator for both directions, 1F1B neighbours deadlock: stage s issues
 * send(activation) then recv(gradient), stage s+1 send(gradient) then recv(activation); each
 * send waits for a receive queued behind the peer's own send. The executor issues sends and
 * receives at the times the schedule says, often instructions apart, so they cannot be put in
 * one ncclGroupStart/End either. A communicator per (link, direction) holds only that
 * direction's sends on one side and its receives on the other, both in schedule order (FIFO
 * links), so its serialisation orders nothing that the schedule does not already order. Each is
 * a 2-rank communicator (the sender is rank 0), its id made by the sender and sent to the
 * receiver over MPI, all of a rank's created in one group; their connections are made in one
 * group at attach too (NCCL connects a peer at its first operation, a host-side exchange, which
 * lazily could wait on a peer that waits on another link). NCCL_LAUNCH_ORDER_IMPLICIT=1 would
 * order kernels across communicators again: leave it unset.
 *
 * Threads: one local stage; its worker posts sends and receives, the main thread the MPI
 * collectives, never at the same time (the executor's mutex orders them). */
#include "pp_cuda.h"
#include "transport_internal.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <string.h>

enum { RING = 64 }; /* receive events in flight per link */

typedef struct nccl_link {
    int peer;
    ncclComm_t send_comm; /* this stage -> peer (this stage is rank 0) */
    ncclComm_t recv_comm; /* peer -> this stage (this stage is rank 1) */
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
    if (l->send_comm)
        ncclCommDestroy(l->send_comm);
    if (l->recv_comm)
        ncclCommDestroy(l->recv_comm);
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
    if (!t->k)
        return PP_ERR(PP_ERR_RUNTIME, "NCCL transport: no stage bound");
    for (int i = 0; i < t->n_links; i++)
        if (t->links[i].peer == peer) {
            *out = &t->links[i];
            return PP_OK;
        }
    return PP_ERR(PP_ERR_INVALID, "NCCL transport: stage %d has no link to stage %d (not its "
                                  "neighbour in the schedule)", me, peer);
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
    /* the link's send communicator: the peer is its rank 1 */
    ncclResult_t r = ncclSend(l->slot[s], bytes, ncclUint8, 1, l->send_comm, l->send_stream);
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
    /* the link's receive communicator: the peer is its rank 0 */
    ncclResult_t r = ncclRecv(buf, bytes, ncclUint8, 0, l->recv_comm, l->recv_stream);
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

/* Aborts every link communicator (pending operations may never complete, so they are aborted,
 * not destroyed) and forgets them. */
static void links_abort(nccl_tp *t)
{
    for (int i = 0; i < t->n_links; i++) {
        nccl_link *l = &t->links[i];
        if (l->send_comm)
            ncclCommAbort(l->send_comm);
        if (l->recv_comm)
            ncclCommAbort(l->recv_comm);
        l->send_comm = l->recv_comm = NULL;
    }
}

static void nc_abort(pp_transport *tp)
{
    nccl_tp *t = (nccl_tp *)tp;
    t->aborted = 1;
    t->mpi->ops->abort(t->mpi);
    links_abort(t);
    if (t->dp_comm)
        ncclCommAbort(t->dp_comm);
    t->dp_comm = NULL;
}

static void nc_destroy(pp_transport *tp)
{
    nccl_tp *t = (nccl_tp *)tp;
    if (!t)
        return;
    if (!t->aborted)
        for (int i = 0; i < t->n_links; i++)
            link_free(&t->links[i]);
    if (t->dp_comm)
        ncclCommDestroy(t->dp_comm);
    if (t->mpi)
        t->mpi->ops->destroy(t->mpi);
    pp_free(t);
}


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

/* The two communicators of every link: for each peer, this rank makes the id of the direction
 * it sends in and learns the peer's over MPI (the replica's pipeline, ranks = stages), then
 * creates all of them in one group (ncclCommInitRank blocks until both ranks join; grouped,
 * the order in which the ranks reach them does not matter). Collective over the replica's
 * stages. */
static pp_status link_comms_init(nccl_tp *t)
{
    typedef struct id_msg {
        int ok;
        ncclUniqueId id;
    } id_msg;
    id_msg out[2], in[2];
    MPI_Request req[4];
    MPI_Comm pipe;
    memset(out, 0, sizeof out);
    memset(in, 0, sizeof in);
    if (MPI_Comm_split(MPI_COMM_WORLD, t->base.replica, t->rank, &pipe) != MPI_SUCCESS)
        return PP_ERR(PP_ERR_RUNTIME, "NCCL: splitting MPI_COMM_WORLD for the links");
    ncclResult_t r = ncclSuccess;
    int nreq = 0;
    for (int i = 0; i < t->n_links; i++) {
        ncclResult_t ri = ncclGetUniqueId(&out[i].id);
        out[i].ok = ri == ncclSuccess;
        if (ri != ncclSuccess && r == ncclSuccess)
            r = ri;
        MPI_Isend(&out[i], (int)sizeof out[i], MPI_BYTE, t->links[i].peer, 0, pipe, &req[nreq++]);
        MPI_Irecv(&in[i], (int)sizeof in[i], MPI_BYTE, t->links[i].peer, 0, pipe, &req[nreq++]);
    }
    MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    /* every stage learns whether all ids exist, so none waits forever in init */
    int ok = r == ncclSuccess, all_ok = 0;
    for (int i = 0; i < t->n_links; i++)
        ok = ok && in[i].ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, pipe);
    MPI_Comm_free(&pipe);
    if (!all_ok)
        return r != ncclSuccess ? nccl_fail(r, "ncclGetUniqueId")
                                : PP_ERR(PP_ERR_RUNTIME, "NCCL: a neighbour has no id for its "
                                                         "link communicator");
    if ((r = ncclGroupStart()) != ncclSuccess)
        return nccl_fail(r, "ncclGroupStart");
    for (int i = 0; i < t->n_links && r == ncclSuccess; i++) {
        nccl_link *l = &t->links[i];
        r = ncclCommInitRank(&l->send_comm, 2, out[i].id, 0);
        if (r == ncclSuccess)
            r = ncclCommInitRank(&l->recv_comm, 2, in[i].id, 1);
    }
    ncclResult_t re = ncclGroupEnd();
    if (r == ncclSuccess)
        r = re;
    if (r != ncclSuccess) {
        links_abort(t);
        return nccl_fail(r, "ncclCommInitRank (link communicators)");
    }
    return PP_OK;
}

/* One byte each way on every link, in one group, so NCCL connects all of a rank's peers at
 * once here instead of at each communicator's first operation during the step. */
static pp_status links_connect(nccl_tp *t)
{
    char *d_tmp = NULL;
    cudaError_t e = cudaMalloc((void **)&d_tmp, 2);
    if (e != cudaSuccess)
        return cuda_fail(e, "cudaMalloc (connecting the links)");
    ncclResult_t r = ncclGroupStart();
    for (int i = 0; i < t->n_links && r == ncclSuccess; i++) {
        nccl_link *l = &t->links[i];
        r = ncclSend(l->slot[0], 1, ncclUint8, 1, l->send_comm, l->send_stream);
        if (r == ncclSuccess)
            r = ncclRecv(d_tmp + i, 1, ncclUint8, 0, l->recv_comm, l->recv_stream);
    }
    ncclResult_t re = ncclGroupEnd();
    if (r == ncclSuccess)
        r = re;
    for (int i = 0; i < t->n_links && r == ncclSuccess && e == cudaSuccess; i++)
        if ((e = cudaStreamSynchronize(t->links[i].send_stream)) == cudaSuccess)
            e = cudaStreamSynchronize(t->links[i].recv_stream);
    cudaFree(d_tmp);
    if (r != ncclSuccess)
        return nccl_fail(r, "connecting the links");
    return e == cudaSuccess ? PP_OK : cuda_fail(e, "cudaStreamSynchronize (connecting the links)");
}

/* Every rank's outcome of a set-up phase: the next phase is collective, so a rank that failed
 * must not leave the others waiting in it. Collective over the world. */
static pp_status agree(pp_status st)
{
    int ok = st == PP_OK, all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (st != PP_OK || all_ok)
        return st;
    return PP_ERR(PP_ERR_RUNTIME, "NCCL transport: another rank failed to set up its links");
}

static pp_status nc_attach(pp_transport *tp, const pp_schedule *sched, pp_kops *const *mem,
                           int n_local)
{
    nccl_tp *t = (nccl_tp *)tp;
    if (n_local != 1 || !mem[0])
        return PP_ERR(PP_ERR_INVALID, "NCCL transport: needs the one local stage's device "
                                      "kernel table");
    /* -1 (more than 2) is refused below, on every rank alike */
    int peers[2];
    int n_peers = pp_schedule_peers(sched, t->rank, peers, 2);
    pp_kops *k = mem[0];
    t->k = k;
    t->compute = (cudaStream_t)pp_cuda_kops_stream(k);
    t->device = pp_cuda_kops_device(k);
    pp_status st = PP_OK;
    cudaError_t e = cudaSetDevice(t->device);
    if (n_peers < 0 || n_peers > 2)
        st = PP_ERR(PP_ERR_INVALID, "NCCL transport: stage %d talks to more than 2 stages",
                    t->rank);
    else if (e != cudaSuccess)
        st = cuda_fail(e, "cudaSetDevice");
    for (int i = 0; i < n_peers && st == PP_OK; i++) {
        if (peers[i] < 0 || peers[i] >= t->base.S || peers[i] == t->rank)
            st = PP_ERR(PP_ERR_INVALID, "NCCL transport: bad peer stage %d", peers[i]);
        else
            st = link_init(t, &t->links[t->n_links++], peers[i]);
    }
    /* the links (both directions of each), then the replicas of this stage */
    if ((st = agree(st)) == PP_OK)
        st = link_comms_init(t);
    if ((st = agree(st)) == PP_OK)
        st = links_connect(t);
    if ((st = agree(st)) == PP_OK && t->base.dp > 1)
        st = comm_init(t, t->rank, t->base.replica, t->base.dp, &t->dp_comm, "data-parallel");
    return st;
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
    .attach = nc_attach,
};

/* Created with the sizes of the MPI transport (S x dp ranks as there), then attached to the
 * stage's kernel table and the stages it exchanges messages with (pp_schedule_peers), which sets
 * up the NCCL communicators (ids exchanged over MPI; collective over the world): two per link,
 * one for each direction, and one per stage's replicas. The schedule's links must be FIFO
 * (pp_schedule_links_fifo; the table's entry says so). */
pp_status pp_nccl_transport_create(const pp_transport_params *p, pp_transport **out)
{
    nccl_tp *t = pp_alloc(sizeof *t);
    if (!t)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the NCCL transport");
    t->base.ops = &k_nccl_ops;
    t->base.S = p->S;
    t->capacity = p->capacity;
    t->max_bytes = p->max_bytes;
    /* the MPI transport checks the world size and gives the stage and replica; it carries no
     * messages (one slot of no bytes) */
    pp_transport_params mp = *p;
    mp.capacity = 1;
    mp.max_bytes = 0;
    mp.device_memory = 0;
    pp_status st = pp_mpi_transport_create(&mp, &t->mpi);
    if (st != PP_OK) {
        pp_free(t);
        return st;
    }
    t->rank = t->mpi->first_local;
    t->base.dp = t->mpi->dp;
    t->base.replica = t->mpi->replica;
    t->base.first_local = t->rank;
    t->base.n_local = 1;
    t->device = -1;
    *out = &t->base;
    return PP_OK;
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
        (e = cudaEventCreate(&e1)) != cudaSuccess ||
        (e = cudaMemsetAsync(a, 0x5a, bytes, s)) != cudaSuccess ||
        (e = cudaMemsetAsync(b, 0, bytes, s)) != cudaSuccess) {
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
