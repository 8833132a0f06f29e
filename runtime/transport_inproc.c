/* transport_inproc.c: the in-process transport: stages are threads of one process and each
 * directed link (src -> dst) is a bounded mailbox of preallocated message slots guarded by a
 * mutex, with condition variables for "a message arrived" and "a slot is free". Nothing spins and
 * nothing is allocated after creation. Messages are matched by tag, so a receiver may take them
 * in a different order than they were sent (interleaved schedules do). */
#include "transport_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
    int used;
    int id; /* pp_copy_ops slot id */
    pp_msg_tag tag;
    size_t bytes;
    uint64_t avail_ns;
    char *data; /* max_bytes */
} slot;

typedef struct mailbox {
    pthread_mutex_t mu;
    pthread_cond_t arrived, freed;
    slot *slots;
    int n_used;
} mailbox;

typedef struct inproc {
    pp_transport base;
    int capacity;
    size_t max_bytes;
    const pp_copy_ops *copy; /* NULL: host memcpy */
    int device_memory;       /* slots wait for attach, which makes the copy ops */
    pp_copy_ops *owned_copy; /* the device copies attach made (CUDA builds) */
    pp_kops **stage_kops;    /* [S] their kernel tables, borrowed from the backends */
    mailbox *boxes; /* [S * S], index src * S + dst */
    char *arena;
    /* all-reduce: contributions kept per stage and summed in stage order, so the result does not
     * depend on which thread arrives first */
    pthread_mutex_t red_mu;
    pthread_cond_t red_cv;
    int red_count;
    uint64_t red_gen;
    int red_n;
    double *red_vals;    /* [S * PP_INPROC_MAX_REDUCE] */
    uint64_t *red_max;   /* [S] */
    double red_out[8];
    uint64_t red_out_max;
    int aborted;
} inproc;

enum { PP_INPROC_MAX_REDUCE = 8 };

static int tag_eq(pp_msg_tag a, pp_msg_tag b)
{
    return a.kind == b.kind && a.mb == b.mb && a.piece == b.piece;
}

static pp_status check_peer(const inproc *t, int a, int b)
{
    if (a < 0 || b < 0 || a >= t->base.S || b >= t->base.S)
        return PP_ERR(PP_ERR_INVALID, "transport: stages %d -> %d out of range [0, %d)", a, b,
                      t->base.S);
    return PP_OK;
}

static pp_status ip_isend(pp_transport *tp, int src, int dst, pp_msg_tag tag, const void *buf,
                          size_t bytes, uint64_t avail_ns, pp_request *req)
{
    inproc *t = (inproc *)tp;
    pp_status st = check_peer(t, src, dst);
    if (st != PP_OK)
        return st;
    /* Messages that carry data must fit a slot; data-less ones (sim) only count bytes. */
    if (buf && bytes > t->max_bytes)
        return PP_ERR(PP_ERR_RUNTIME, "transport: message of %zu bytes exceeds the %zu-byte slot",
                      bytes, t->max_bytes);
    mailbox *mb = &t->boxes[src * t->base.S + dst];
    pthread_mutex_lock(&mb->mu);
    while (mb->n_used == t->capacity && !t->aborted)
        pthread_cond_wait(&mb->freed, &mb->mu);
    if (t->aborted) {
        pthread_mutex_unlock(&mb->mu);
        return PP_ERR(PP_ERR_RUNTIME, "transport aborted while stage %d sent to %d", src, dst);
    }
    slot *s = NULL;
    for (int i = 0; i < t->capacity; i++)
        if (!mb->slots[i].used) {
            s = &mb->slots[i];
            break;
        }
    if (buf && bytes && !s->data) {
        pthread_mutex_unlock(&mb->mu);
        return PP_ERR(PP_ERR_RUNTIME, "transport: link %d -> %d carries no data (not neighbours)",
                      src, dst);
    }
    s->used = 1;
    s->tag = tag;
    s->bytes = bytes;
    s->avail_ns = avail_ns;
    if (buf && bytes) {
        if (t->copy)
            t->copy->put(t->copy->ctx, src, s->id, s->data, buf, bytes);
        else
            memcpy(s->data, buf, bytes);
    }
    mb->n_used++;
    pthread_cond_broadcast(&mb->arrived);
    pthread_mutex_unlock(&mb->mu);
    /* The data is copied: the send is complete as soon as it is queued. */
    pp_request_init(req, 0, src, dst, tag, NULL, bytes);
    req->avail_ns = avail_ns;
    req->done = 1;
    return PP_OK;
}

static pp_status ip_irecv(pp_transport *tp, int dst, int src, pp_msg_tag tag, void *buf,
                          size_t bytes, pp_request *req)
{
    inproc *t = (inproc *)tp;
    pp_status st = check_peer(t, src, dst);
    if (st != PP_OK)
        return st;
    pp_request_init(req, 1, src, dst, tag, buf, bytes);
    return PP_OK;
}

static pp_status ip_wait(pp_transport *tp, pp_request *req)
{
    inproc *t = (inproc *)tp;
    if (req->done)
        return PP_OK;
    mailbox *mb = &t->boxes[req->src * t->base.S + req->dst];
    pthread_mutex_lock(&mb->mu);
    slot *s = NULL;
    for (;;) {
        if (t->aborted)
            break;
        for (int i = 0; i < t->capacity && !s; i++)
            if (mb->slots[i].used && tag_eq(mb->slots[i].tag, req->tag))
                s = &mb->slots[i];
        if (s)
            break;
        pthread_cond_wait(&mb->arrived, &mb->mu);
    }
    if (!s) {
        pthread_mutex_unlock(&mb->mu);
        return PP_ERR(PP_ERR_RUNTIME, "transport aborted while stage %d waited for stage %d",
                      req->dst, req->src);
    }
    pp_status st = PP_OK;
    if (s->bytes != req->bytes)
        st = PP_ERR(PP_ERR_RUNTIME,
                    "transport: stage %d expected %zu bytes from stage %d, got %zu (mb %d)",
                    req->dst, req->bytes, req->src, s->bytes, req->tag.mb);
    else if (req->buf && s->bytes && t->copy)
        t->copy->get(t->copy->ctx, req->dst, s->id, req->buf, s->data, s->bytes);
    else if (req->buf && s->bytes)
        memcpy(req->buf, s->data, s->bytes);
    req->avail_ns = s->avail_ns;
    s->used = 0;
    mb->n_used--;
    pthread_cond_broadcast(&mb->freed);
    pthread_mutex_unlock(&mb->mu);
    req->done = 1;
    return st;
}

static pp_status ip_allreduce(pp_transport *tp, int stage, double *vals, int n, uint64_t *max_ns)
{
    inproc *t = (inproc *)tp;
    int S = t->base.S;
    if (n > PP_INPROC_MAX_REDUCE)
        return PP_ERR(PP_ERR_RUNTIME, "transport: all-reduce of %d values (max %d)", n,
                      PP_INPROC_MAX_REDUCE);
    pthread_mutex_lock(&t->red_mu);
    uint64_t gen = t->red_gen;
    memcpy(t->red_vals + (size_t)stage * PP_INPROC_MAX_REDUCE, vals, (size_t)n * sizeof(double));
    t->red_max[stage] = max_ns ? *max_ns : 0;
    t->red_n = n;
    if (++t->red_count == S) {
        for (int k = 0; k < n; k++) {
            double sum = 0.0;
            for (int s = 0; s < S; s++)
                sum += t->red_vals[(size_t)s * PP_INPROC_MAX_REDUCE + k];
            t->red_out[k] = sum;
        }
        uint64_t mx = 0;
        for (int s = 0; s < S; s++)
            mx = t->red_max[s] > mx ? t->red_max[s] : mx;
        t->red_out_max = mx;
        t->red_count = 0;
        t->red_gen++;
        pthread_cond_broadcast(&t->red_cv);
    } else {
        while (t->red_gen == gen && !t->aborted)
            pthread_cond_wait(&t->red_cv, &t->red_mu);
    }
    int aborted = t->red_gen == gen;
    if (!aborted) {
        memcpy(vals, t->red_out, (size_t)n * sizeof(double));
        if (max_ns)
            *max_ns = t->red_out_max;
    }
    pthread_mutex_unlock(&t->red_mu);
    if (aborted)
        return PP_ERR(PP_ERR_RUNTIME, "transport aborted during the all-reduce (stage %d)",
                      stage);
    return PP_OK;
}

static void ip_abort(pp_transport *tp)
{
    inproc *t = (inproc *)tp;
    int S = t->base.S;
    /* Set the flag under every lock a waiter may hold, then wake them all. */
    for (int i = 0; i < S * S; i++)
        pthread_mutex_lock(&t->boxes[i].mu);
    pthread_mutex_lock(&t->red_mu);
    t->aborted = 1;
    pthread_cond_broadcast(&t->red_cv);
    pthread_mutex_unlock(&t->red_mu);
    for (int i = 0; i < S * S; i++) {
        pthread_cond_broadcast(&t->boxes[i].arrived);
        pthread_cond_broadcast(&t->boxes[i].freed);
        pthread_mutex_unlock(&t->boxes[i].mu);
    }
}

static void ip_destroy(pp_transport *tp)
{
    inproc *t = (inproc *)tp;
    if (!t)
        return;
    int S = t->base.S;
    if (t->boxes) {
        for (int i = 0; i < S * S; i++) {
            pthread_mutex_destroy(&t->boxes[i].mu);
            pthread_cond_destroy(&t->boxes[i].arrived);
            pthread_cond_destroy(&t->boxes[i].freed);
            if (t->copy && t->boxes[i].slots)
                for (int k = 0; k < t->capacity; k++)
                    if (t->boxes[i].slots[k].data)
                        t->copy->free(t->copy->ctx, t->boxes[i].slots[k].data);
            pp_free(t->boxes[i].slots);
        }
    }
    pthread_mutex_destroy(&t->red_mu);
    pthread_cond_destroy(&t->red_cv);
    pp_free(t->boxes);
    pp_free(t->arena);
    pp_free(t->red_vals);
    pp_free(t->red_max);
#ifdef PP_HAVE_CUDA
    pp_cuda_copy_ops_destroy(t->owned_copy);
#endif
    pp_free(t->stage_kops);
    pp_free(t);
}

/* Only neighbouring links carry traffic in every schedule here, plus the wrap-around link of
 * the interleaved schedule (S-1 -> 0 and back); data slots are reserved for those. */
static int link_carries_data(int S, int a, int b)
{
    return a != b && (abs(a - b) == 1 || abs(a - b) == S - 1);
}

static size_t slot_bytes_of(const inproc *t) { return (t->max_bytes + 63) & ~(size_t)63; }

/* The mailboxes, their locks and their slots' ids; the slots get data buffers later. */
static pp_status mailboxes_init(inproc *t)
{
    int S = t->base.S;
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S; b++) {
            mailbox *m = &t->boxes[a * S + b];
            pthread_mutex_init(&m->mu, NULL);
            pthread_cond_init(&m->arrived, NULL);
            pthread_cond_init(&m->freed, NULL);
            m->slots = pp_alloc(sizeof(slot) * (size_t)t->capacity);
            if (!m->slots)
                return PP_ERR(PP_ERR_NOMEM, "out of memory for transport mailboxes");
            for (int i = 0; i < t->capacity; i++)
                m->slots[i].id = (a * S + b) * t->capacity + i;
        }
    return PP_OK;
}

/* Host memory: every data slot in one arena. */
static pp_status slots_alloc_host(inproc *t)
{
    int S = t->base.S;
    size_t links_with_data = 0;
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S; b++)
            links_with_data += link_carries_data(S, a, b);
    size_t sb = slot_bytes_of(t);
    t->arena = pp_alloc(links_with_data * (size_t)t->capacity * sb + 64);
    if (!t->arena)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for %zu transport slots of %zu bytes",
                      links_with_data * (size_t)t->capacity, t->max_bytes);
    char *cursor = t->arena;
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S; b++)
            for (int i = 0; i < t->capacity && link_carries_data(S, a, b); i++) {
                t->boxes[a * S + b].slots[i].data = cursor;
                cursor += sb;
            }
    return PP_OK;
}

/* Through the copy ops (a GPU's memory): each data slot its own buffer. */
static pp_status slots_alloc_copy(inproc *t)
{
    int S = t->base.S;
    for (int a = 0; a < S; a++)
        for (int b = 0; b < S; b++)
            for (int i = 0; i < t->capacity && link_carries_data(S, a, b); i++) {
                slot *sl = &t->boxes[a * S + b].slots[i];
                sl->data = t->copy->alloc(t->copy->ctx, slot_bytes_of(t));
                if (!sl->data)
                    return PP_ERR(PP_ERR_NOMEM, "out of device memory for transport slots "
                                                "of %zu bytes", slot_bytes_of(t));
            }
    return PP_OK;
}

/* The device copies between the stages' streams (CUDA builds). */
static pp_status device_copy_create(inproc *t, pp_kops *const *mem)
{
#ifdef PP_HAVE_CUDA
    int S = t->base.S;
    t->stage_kops = pp_alloc(sizeof(pp_kops *) * (size_t)S);
    if (!t->stage_kops)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the stages' kernel tables");
    memcpy(t->stage_kops, mem, sizeof(pp_kops *) * (size_t)S);
    pp_status st = pp_cuda_copy_ops_create(t->stage_kops, S, S * S * t->capacity,
                                           &t->owned_copy);
    t->copy = t->owned_copy;
    return st;
#else
    (void)t, (void)mem;
    return PP_ERR(PP_ERR_INVALID, "in-process transport: device stages need a CUDA build");
#endif
}

/* Device stages: copies on the stages' streams, then the slots in device memory. */
static pp_status ip_attach(pp_transport *tp, const pp_schedule *sched, pp_kops *const *mem,
                           int n_local)
{
    inproc *t = (inproc *)tp;
    (void)sched;
    if (!t->device_memory)
        return PP_OK;
    if (n_local != t->base.S || !mem[0])
        return PP_ERR(PP_ERR_INVALID, "in-process transport: device memory needs the kernel "
                                      "tables of all %d stages", t->base.S);
    pp_status st = device_copy_create(t, mem);
    return st == PP_OK ? slots_alloc_copy(t) : st;
}

static const pp_transport_ops k_inproc_ops = {
    .name = "inproc",
    .isend = ip_isend,
    .irecv = ip_irecv,
    .wait = ip_wait,
    .allreduce = ip_allreduce,
    .abort = ip_abort,
    .destroy = ip_destroy,
    .attach = ip_attach,
};

pp_status pp_inproc_transport_create(const pp_transport_params *p, pp_transport **out)
{
    if (p->S < 1 || p->capacity < 1)
        return PP_ERR(PP_ERR_INVALID, "in-process transport needs S >= 1 and capacity >= 1");
    inproc *t = pp_alloc(sizeof *t);
    if (!t)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the transport");
    int S = p->S;
    t->base = (pp_transport){.ops = &k_inproc_ops, .S = S, .dp = 1, .n_local = S};
    t->capacity = p->capacity;
    t->max_bytes = p->max_bytes;
    t->device_memory = p->device_memory;
    pthread_mutex_init(&t->red_mu, NULL);
    pthread_cond_init(&t->red_cv, NULL);
    t->boxes = pp_alloc(sizeof(mailbox) * (size_t)S * S);
    t->red_vals = pp_alloc(sizeof(double) * (size_t)S * PP_INPROC_MAX_REDUCE);
    t->red_max = pp_alloc(sizeof(uint64_t) * (size_t)S);
    pp_status st = t->boxes && t->red_vals && t->red_max
                       ? mailboxes_init(t)
                       : PP_ERR(PP_ERR_NOMEM, "out of memory for the transport");
    if (st == PP_OK && !t->device_memory)
        st = slots_alloc_host(t);
    if (st != PP_OK) {
        ip_destroy(&t->base);
        return st;
    }
    *out = &t->base;
    return PP_OK;
}
