/* transport_mpi.c: the MPI transport: one pipeline stage per MPI rank. With dp data-parallel
 * replicas the world's S x dp ranks form dp pipelines: rank r runs stage r % S of replica r / S,
 * each replica's stages talk over their own communicator (split from MPI_COMM_WORLD), and the dp
 * ranks of each stage sum their gradients over another (dp_allreduce). pp_pipe_trainer creates
 * it from the transport table (transport.c) when pptrain runs with --transport mpi;
 * docs/executor.md describes how it plugs into the executor.
 *
 * Every message is a 16-byte header (avail_ns, payload bytes) followed by the payload, sent with
 * MPI_Isend from a preallocated staging slot: a send completes as soon as the data is copied, so
 * sends never block on the receiver, just as the in-process mailboxes do (blocking rendezvous
 * sends would deadlock 1F1B, where neighbours send to each other at once). Waits poll with
 * MPI_Test and short sleeps instead of spinning in MPI_Wait, so oversubscribed ranks leave the
 * cores to the ranks that compute. The all-reduce gathers every stage's values and sums them in
 * stage order on every rank, bit-identical to the in-process transport.
 *
 * Threads: all calls of one transport must be serialised (MPI_THREAD_SERIALIZED is enough): with
 * one local stage, its worker and the executor's main thread take turns, ordered by the
 * executor's mutex. */
#include "pp_nvtx.h"
#include "transport_internal.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PP_MPI_HDR = 16, PP_MPI_MAX_REDUCE = 8 };

typedef struct mpi_slot {
    MPI_Request rq;
    int busy;
    char *buf; /* PP_MPI_HDR + max_bytes */
} mpi_slot;

typedef struct mpi_tp {
    pp_transport base;
    MPI_Comm comm;  /* this replica's pipeline: rank = stage */
    MPI_Comm world; /* every rank: the common step start */
    MPI_Comm dpc;   /* this stage's replicas (MPI_COMM_NULL when dp = 1) */
    int rank;       /* the stage */
    int P;          /* model pieces S * v: the tag encoding's stride */
    int max_mb;     /* micro-batches the tag encoding holds */
    size_t max_bytes;
    int n_send, n_recv;
    mpi_slot *send; /* [n_send] */
    mpi_slot *recv; /* [n_recv] */
    char *arena;
    char *red;      /* S * (PP_MPI_MAX_REDUCE + 1) * 8 bytes gathered */
    int aborted;
} mpi_tp;

static pp_status mpi_err(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof msg, "error %d", rc);
    return PP_ERR(PP_ERR_RUNTIME, "MPI transport: %s failed: %s", what, msg);
}

/* Tag (kind, mb, piece) -> kind + 2 * (piece + P * mb); create checked that it fits MPI_TAG_UB. */
static int encode_tag(const mpi_tp *t, pp_msg_tag tag)
{
    return tag.kind + 2 * (tag.piece + t->P * tag.mb);
}

static void nap(int *round)
{
    /* Short first (a neighbour is usually about to send), then up to 50 us: the latency a poll
     * adds stays small next to an op, and an idle rank costs almost no CPU. */
    long ns = *round < 64 ? 2000 : 50000;
    (*round)++;
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

/* Completes rq, polling; fails when the transport is aborted meanwhile. */
static pp_status poll_done(mpi_tp *t, MPI_Request *rq, MPI_Status *status, const char *what)
{
    int round = 0;
    for (;;) {
        int flag = 0;
        int rc = MPI_Test(rq, &flag, status);
        if (rc != MPI_SUCCESS)
            return mpi_err(rc, what);
        if (flag)
            return PP_OK;
        if (t->aborted)
            return PP_ERR(PP_ERR_RUNTIME, "transport aborted during %s (rank %d)", what,
                          t->rank);
        nap(&round);
    }
}

/* The checks every send and receive makes: me local, the peer and the tag in range, a payload
 * that fits a staging slot (what: "message" or "receive"). */
static pp_status check_op(const mpi_tp *t, int me, int peer, pp_msg_tag tag, const void *buf,
                          size_t bytes, const char *what)
{
    if (me != t->rank)
        return PP_ERR(PP_ERR_INVALID, "MPI transport: stage %d is not local (this is rank %d)",
                      me, t->rank);
    if (peer < 0 || peer >= t->base.S)
        return PP_ERR(PP_ERR_INVALID, "MPI transport: stage %d out of range [0, %d)", peer,
                      t->base.S);
    if (tag.mb < 0 || tag.mb >= t->max_mb || tag.piece < 0 || tag.piece >= t->P ||
        (tag.kind != PP_MSG_ACT && tag.kind != PP_MSG_GRAD))
        return PP_ERR(PP_ERR_INVALID, "MPI transport: tag (%d, %d, %d) out of range", tag.kind,
                      tag.mb, tag.piece);
    if (buf && bytes > t->max_bytes)
        return PP_ERR(PP_ERR_RUNTIME, "transport: %s of %zu bytes exceeds the %zu-byte slot",
                      what, bytes, t->max_bytes);
    return PP_OK;
}

static pp_status mp_isend(pp_transport *tp, int src, int dst, pp_msg_tag tag, const void *buf,
                          size_t bytes, uint64_t avail_ns, pp_request *req)
{
    mpi_tp *t = (mpi_tp *)tp;
    pp_status st = check_op(t, src, dst, tag, buf, bytes, "message");
    if (st != PP_OK)
        return st;
    /* A free staging slot: one whose earlier send the receiver has taken. The slots outnumber
     * the messages a link can have queued, so this rarely waits. */
    mpi_slot *s = NULL;
    for (int round = 0; !s;) {
        for (int i = 0; i < t->n_send && !s; i++) {
            mpi_slot *c = &t->send[i];
            if (c->busy) {
                int flag = 0;
                int rc = MPI_Test(&c->rq, &flag, MPI_STATUS_IGNORE);
                if (rc != MPI_SUCCESS)
                    return mpi_err(rc, "MPI_Test of a send");
                c->busy = !flag;
            }
            if (!c->busy)
                s = c;
        }
        if (!s) {
            if (t->aborted)
                return PP_ERR(PP_ERR_RUNTIME, "transport aborted while stage %d sent to %d", src,
                              dst);
            nap(&round);
        }
    }
    uint64_t hdr[2] = {avail_ns, (uint64_t)bytes};
    memcpy(s->buf, hdr, sizeof hdr);
    size_t payload = buf ? bytes : 0;
    if (payload)
        memcpy(s->buf + PP_MPI_HDR, buf, payload);
    int rc = MPI_Isend(s->buf, (int)(PP_MPI_HDR + payload), MPI_BYTE, dst, encode_tag(t, tag),
                       t->comm, &s->rq);
    if (rc != MPI_SUCCESS)
        return mpi_err(rc, "MPI_Isend");
    s->busy = 1;
    pp_request_init(req, 0, src, dst, tag, NULL, bytes);
    req->avail_ns = avail_ns;
    req->done = 1; /* copied: the caller's buffer is free again */
    return PP_OK;
}

static pp_status mp_irecv(pp_transport *tp, int dst, int src, pp_msg_tag tag, void *buf,
                          size_t bytes, pp_request *req)
{
    mpi_tp *t = (mpi_tp *)tp;
    pp_status st = check_op(t, dst, src, tag, buf, bytes, "receive");
    if (st != PP_OK)
        return st;
    mpi_slot *s = NULL;
    for (int i = 0; i < t->n_recv && !s; i++)
        if (!t->recv[i].busy)
            s = &t->recv[i];
    if (!s)
        return PP_ERR(PP_ERR_RUNTIME, "MPI transport: more than %d receives pending on stage %d",
                      t->n_recv, dst);
    /* Room for a payload even when this side expects none, so a mismatch is reported below
     * rather than as a truncation. */
    int rc = MPI_Irecv(s->buf, (int)(PP_MPI_HDR + t->max_bytes), MPI_BYTE, src,
                       encode_tag(t, tag), t->comm, &s->rq);
    if (rc != MPI_SUCCESS)
        return mpi_err(rc, "MPI_Irecv");
    s->busy = 1;
    pp_request_init(req, 1, src, dst, tag, buf, bytes);
    req->impl = s;
    return PP_OK;
}

static pp_status mp_wait(pp_transport *tp, pp_request *req)
{
    mpi_tp *t = (mpi_tp *)tp;
    if (req->done)
        return PP_OK;
    mpi_slot *s = req->impl;
    MPI_Status status;
    pp_status st = poll_done(t, &s->rq, &status, "a receive");
    if (st != PP_OK)
        return st; /* the slot stays busy: its receive may still land */
    s->busy = 0;
    req->done = 1;
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    uint64_t hdr[2];
    if (count < PP_MPI_HDR)
        return PP_ERR(PP_ERR_RUNTIME, "MPI transport: short message (%d bytes) from stage %d",
                      count, req->src);
    memcpy(hdr, s->buf, sizeof hdr);
    size_t payload = (size_t)count - PP_MPI_HDR;
    if (hdr[1] != req->bytes || (req->buf && payload != req->bytes))
        return PP_ERR(PP_ERR_RUNTIME,
                      "transport: stage %d expected %zu bytes from stage %d, got %llu (mb %d)",
                      req->dst, req->bytes, req->src, (unsigned long long)hdr[1], req->tag.mb);
    if (req->buf && payload)
        memcpy(req->buf, s->buf + PP_MPI_HDR, payload);
    req->avail_ns = hdr[0];
    return PP_OK;
}

static pp_status mp_allreduce(pp_transport *tp, int stage, double *vals, int n, uint64_t *max_ns)
{
    mpi_tp *t = (mpi_tp *)tp;
    int S = t->base.S;
    if (n > PP_MPI_MAX_REDUCE)
        return PP_ERR(PP_ERR_RUNTIME, "transport: all-reduce of %d values (max %d)", n,
                      PP_MPI_MAX_REDUCE);
    if (stage != t->rank)
        return PP_ERR(PP_ERR_INVALID, "MPI transport: stage %d is not local (rank %d)", stage,
                      t->rank);
    /* Gather, then sum in stage order on every rank: MPI_Allreduce's order is unspecified. */
    enum { REC = (PP_MPI_MAX_REDUCE + 1) * 8 };
    char mine[REC];
    memset(mine, 0, sizeof mine);
    uint64_t mx = max_ns ? *max_ns : 0;
    memcpy(mine, &mx, 8);
    memcpy(mine + 8, vals, (size_t)n * sizeof(double));
    MPI_Request rq;
    int rc = MPI_Iallgather(mine, REC, MPI_BYTE, t->red, REC, MPI_BYTE, t->comm, &rq);
    if (rc != MPI_SUCCESS)
        return mpi_err(rc, "MPI_Iallgather");
    pp_status st = poll_done(t, &rq, MPI_STATUS_IGNORE, "the all-reduce");
    if (st != PP_OK)
        return st;
    for (int k = 0; k < n; k++) {
        double sum = 0.0;
        for (int s = 0; s < S; s++) {
            double x;
            memcpy(&x, t->red + (size_t)s * REC + 8 + (size_t)k * 8, 8);
            sum += x;
        }
        vals[k] = sum;
    }
    uint64_t out = 0;
    for (int s = 0; s < S; s++) {
        uint64_t c;
        memcpy(&c, t->red + (size_t)s * REC, 8);
        out = c > out ? c : out;
    }
    if (max_ns)
        *max_ns = out;
    return PP_OK;
}

static pp_status mp_agree_start(pp_transport *tp, uint64_t *t0_ns)
{
    mpi_tp *t = (mpi_tp *)tp;
    /* The latest proposal, plus time for the gather itself (oversubscribed ranks take turns on
     * the cores), so every rank is awake before the common start. */
    uint64_t mine = *t0_ns, all = 0;
    MPI_Request rq;
    int rc = MPI_Iallreduce(&mine, &all, 1, MPI_UINT64_T, MPI_MAX, t->world, &rq);
    if (rc != MPI_SUCCESS)
        return mpi_err(rc, "MPI_Iallreduce of the step start");
    pp_status st = poll_done(t, &rq, MPI_STATUS_IGNORE, "the step-start agreement");
    if (st == PP_OK)
        *t0_ns = all + 1000000;
    return st;
}

/* Gradients summed with MPI_Iallreduce (in place, polled like every wait): with two replicas
 * a + b = b + a exactly, so every replica ends with bit-identical parameters; with more, MPI's
 * reduction order is its own, still the same on every rank for a given communicator. */
static pp_status mp_dp_allreduce(pp_transport *tp, int stage, float *buf, size_t n, double *vals,
                                 int nvals, uint64_t *max_ns)
{
    mpi_tp *t = (mpi_tp *)tp;
    if (stage != t->rank)
        return PP_ERR(PP_ERR_INVALID, "MPI transport: stage %d is not local (rank %d)", stage,
                      t->rank);
    if (t->dpc == MPI_COMM_NULL)
        return PP_OK;
    pp_status st = PP_OK;
    /* MPI counts are ints: large gradient buffers go in pieces */
    const size_t piece = (size_t)1 << 28;
    for (size_t off = 0; buf && off < n && st == PP_OK; off += piece) {
        int cnt = (int)(n - off < piece ? n - off : piece);
        MPI_Request rq;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, buf + off, cnt, MPI_FLOAT, MPI_SUM, t->dpc, &rq);
        if (rc != MPI_SUCCESS)
            return mpi_err(rc, "MPI_Iallreduce of the gradients");
        st = poll_done(t, &rq, MPI_STATUS_IGNORE, "the gradient all-reduce");
    }
    if (st == PP_OK && nvals > 0) {
        MPI_Request rq;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, vals, nvals, MPI_DOUBLE, MPI_SUM, t->dpc, &rq);
        if (rc != MPI_SUCCESS)
            return mpi_err(rc, "MPI_Iallreduce of the replicas' values");
        st = poll_done(t, &rq, MPI_STATUS_IGNORE, "the replicas' all-reduce");
    }
    if (st == PP_OK && max_ns) {
        MPI_Request rq;
        uint64_t mine = *max_ns;
        int rc = MPI_Iallreduce(&mine, max_ns, 1, MPI_UINT64_T, MPI_MAX, t->dpc, &rq);
        if (rc != MPI_SUCCESS)
            return mpi_err(rc, "MPI_Iallreduce of the replicas' clocks");
        st = poll_done(t, &rq, MPI_STATUS_IGNORE, "the replicas' clock all-reduce");
    }
    return st;
}

static void mp_abort(pp_transport *tp)
{
    /* Wakes this rank's pending polls. The other ranks are blocked on messages this one will not
     * send: the caller ends the job (pptrain prints the error, then MPI_Abort). */
    ((mpi_tp *)tp)->aborted = 1;
}

static void mp_destroy(pp_transport *tp)
{
    mpi_tp *t = (mpi_tp *)tp;
    if (!t)
        return;
    int pending = 0;
    for (int i = 0; i < t->n_send && t->send; i++)
        if (t->send[i].busy) {
            MPI_Status status;
            if (t->aborted)
                pending = 1; /* the receiver may never take it: leave it to MPI_Abort */
            else
                MPI_Wait(&t->send[i].rq, &status);
        }
    for (int i = 0; i < t->n_recv && t->recv; i++)
        if (t->recv[i].busy) {
            MPI_Cancel(&t->recv[i].rq);
            MPI_Wait(&t->recv[i].rq, MPI_STATUS_IGNORE);
        }
    if (pending)
        return; /* MPI still owns the staging buffers; the job is being aborted */
    if (t->comm != MPI_COMM_NULL)
        MPI_Comm_free(&t->comm);
    if (t->world != MPI_COMM_NULL)
        MPI_Comm_free(&t->world);
    if (t->dpc != MPI_COMM_NULL)
        MPI_Comm_free(&t->dpc);
    pp_free(t->send);
    pp_free(t->recv);
    pp_free(t->arena);
    pp_free(t->red);
    pp_free(t);
}

static pp_status mp_gather_bits(pp_transport *tp, void *words, size_t n)
{
    mpi_tp *t = (mpi_tp *)tp;
    const size_t piece = (size_t)1 << 28; /* MPI counts are ints */
    for (size_t off = 0; off < n; off += piece) {
        int cnt = (int)(n - off < piece ? n - off : piece);
        uint32_t *w = (uint32_t *)words + off;
        int rc = t->rank == 0 ? MPI_Reduce(MPI_IN_PLACE, w, cnt, MPI_UINT32_T, MPI_BOR, 0, t->comm)
                              : MPI_Reduce(w, NULL, cnt, MPI_UINT32_T, MPI_BOR, 0, t->comm);
        if (rc != MPI_SUCCESS)
            return mpi_err(rc, "gathering the checkpoint");
    }
    return PP_OK;
}

static const pp_transport_ops k_mpi_ops = {
    .name = "mpi",
    .isend = mp_isend,
    .irecv = mp_irecv,
    .wait = mp_wait,
    .allreduce = mp_allreduce,
    .abort = mp_abort,
    .destroy = mp_destroy,
    .agree_start = mp_agree_start,
    .dp_allreduce = mp_dp_allreduce,
    .gather_bits = mp_gather_bits,
};

/* S x dp ranks; rank r runs stage r % S of replica r / S. P pieces and M micro-batches size the
 * tag encoding; capacity and max_bytes the preallocated staging slots, as for the in-process
 * transport. MPI must be initialised with at least MPI_THREAD_SERIALIZED (pp_mpi_init). abort()
 * only fails this rank's pending calls: the caller then ends the job with pp_mpi_abort_job. */
pp_status pp_mpi_transport_create(const pp_transport_params *p, pp_transport **out)
{
    int S = p->S, dp = p->dp, P = p->P, M = p->M, capacity = p->capacity;
    size_t max_bytes = p->max_bytes;
    int inited = 0, size = 0, rank = 0;
    MPI_Initialized(&inited);
    if (!inited)
        return PP_ERR(PP_ERR_INVALID, "MPI transport: MPI is not initialised");
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (dp < 1)
        dp = 1;
    if (S < 1 || size != S * dp)
        return PP_ERR(PP_ERR_INVALID,
                      "--transport mpi runs one stage per rank: %d stage(s) x %d replica(s) "
                      "need mpirun -np %d, this job has %d rank(s)",
                      S, dp, S * dp, size);
    if (capacity < 1 || P < 1 || M < 1)
        return PP_ERR(PP_ERR_INVALID, "MPI transport needs capacity, P and M >= 1");
    int *ub = NULL, found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
    long long tag_ub = found && ub ? *ub : 32767; /* the standard's guaranteed minimum */
    if (2LL * P * M > tag_ub + 1LL)
        return PP_ERR(PP_ERR_INVALID,
                      "MPI transport: %d pieces x %d micro-batches need tags up to %lld, this "
                      "MPI allows %lld",
                      P, M, 2LL * P * M - 1, tag_ub);
    mpi_tp *t = pp_alloc(sizeof *t);
    if (!t)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the transport");
    t->base.ops = &k_mpi_ops;
    t->base.S = S;
    t->base.dp = dp;
    t->base.replica = rank / S;
    t->base.first_local = rank % S;
    t->base.n_local = 1;
    t->comm = t->world = t->dpc = MPI_COMM_NULL;
    t->rank = rank % S;
    t->P = P;
    t->max_mb = M;
    t->max_bytes = max_bytes;
    /* A stage sends to at most two peers, each link holding up to `capacity` queued messages. */
    t->n_send = 2 * capacity + 2;
    t->n_recv = 2;
    size_t slot_bytes = (PP_MPI_HDR + max_bytes + 63) & ~(size_t)63;
    t->send = pp_alloc(sizeof(mpi_slot) * (size_t)t->n_send);
    t->recv = pp_alloc(sizeof(mpi_slot) * (size_t)t->n_recv);
    t->arena = pp_alloc(slot_bytes * (size_t)(t->n_send + t->n_recv));
    t->red = pp_alloc((size_t)S * (PP_MPI_MAX_REDUCE + 1) * 8);
    if (!t->send || !t->recv || !t->arena || !t->red) {
        mp_destroy(&t->base);
        return PP_ERR(PP_ERR_NOMEM, "out of memory for %d MPI staging slots of %zu bytes",
                      t->n_send + t->n_recv, slot_bytes);
    }
    for (int i = 0; i < t->n_send; i++)
        t->send[i] = (mpi_slot){MPI_REQUEST_NULL, 0, t->arena + (size_t)i * slot_bytes};
    for (int i = 0; i < t->n_recv; i++)
        t->recv[i] = (mpi_slot){MPI_REQUEST_NULL, 0,
                                t->arena + (size_t)(t->n_send + i) * slot_bytes};
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &t->world);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_split(MPI_COMM_WORLD, rank / S, rank % S, &t->comm);
    if (rc == MPI_SUCCESS && dp > 1)
        rc = MPI_Comm_split(MPI_COMM_WORLD, rank % S, rank / S, &t->dpc);
    if (rc != MPI_SUCCESS) {
        mp_destroy(&t->base);
        return mpi_err(rc, "creating the communicators");
    }
    /* Errors come back as return codes and become pp_status messages. */
    MPI_Comm_set_errhandler(t->comm, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(t->world, MPI_ERRORS_RETURN);
    if (t->dpc != MPI_COMM_NULL)
        MPI_Comm_set_errhandler(t->dpc, MPI_ERRORS_RETURN);
    *out = &t->base;
    return PP_OK;
}

pp_status pp_mpi_init(int *argc, char ***argv, int *rank, int *size)
{
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return PP_ERR(PP_ERR_RUNTIME, "MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        return PP_ERR(PP_ERR_RUNTIME,
                      "this MPI gives thread level %d, the MPI transport needs "
                      "MPI_THREAD_SERIALIZED (stages run on worker threads)",
                      provided);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    return PP_OK;
}

void pp_mpi_finalize(void) { MPI_Finalize(); }

void pp_mpi_abort_job(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

static void sync_mark(const char *dir, int peer, int phase, int seq)
{
    char msg[96];
    pp_nvtx_clocksync c = {strcmp(dir, "recv") == 0, peer, phase, seq};
    pp_nvtx_clocksync_format(msg, sizeof msg, &c);
    pp_nvtx_mark_config(msg);
}

pp_status pp_mpi_clock_sync(int rounds, int phase)
{
    int rank = 0, size = 1;
    MPI_Comm c;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &c) != MPI_SUCCESS)
        return PP_ERR(PP_ERR_RUNTIME, "clock sync: MPI_Comm_dup failed");
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    int rc = MPI_Barrier(c); /* every rank is here: round trips measure the link, not start-up */
    enum { TAG = 1 };
    /* A send mark precedes its send and a receive mark follows its receive, so every pair
     * brackets the real message: the causality bound the alignment needs. */
    for (int peer = 1; peer < size && rc == MPI_SUCCESS; peer++) {
        if (rank != 0 && rank != peer)
            continue;
        for (int k = 0; k < rounds && rc == MPI_SUCCESS; k++) {
            int x = k;
            if (rank == 0) {
                sync_mark("send", peer, phase, k);
                rc = MPI_Send(&x, 1, MPI_INT, peer, TAG, c);
                if (rc == MPI_SUCCESS)
                    rc = MPI_Recv(&x, 1, MPI_INT, peer, TAG, c, MPI_STATUS_IGNORE);
                if (rc == MPI_SUCCESS)
                    sync_mark("recv", peer, phase, k);
            } else {
                rc = MPI_Recv(&x, 1, MPI_INT, 0, TAG, c, MPI_STATUS_IGNORE);
                if (rc == MPI_SUCCESS) {
                    sync_mark("recv", 0, phase, k);
                    sync_mark("send", 0, phase, k);
                    rc = MPI_Send(&x, 1, MPI_INT, 0, TAG, c);
                }
            }
        }
    }
    MPI_Comm_free(&c);
    if (rc != MPI_SUCCESS)
        return mpi_err(rc, "the clock ping-pong");
    return PP_OK;
}
