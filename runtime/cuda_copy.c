/* cuda_copy.c: the in-process transport's copy ops for CUDA stages of one process: a message
 * moves from the sender's buffer into a device slot on the sender's stream, and from the slot
 * into the receiver's buffer on the receiver's stream. Two CUDA events per slot order them:
 * `put` (the slot holds the message) and `got` (the receiver has copied it out, so the slot may
 * be refilled). The host never waits for the GPU: it only enqueues copies and event waits. */
#include "pp_cuda.h"
#include "transport_internal.h"

typedef struct cuda_copy {
    pp_copy_ops ops;
    pp_kops *const *kops; /* [S] the stages' tables, borrowed (used only during steps) */
    int S, n_slots, device;
    pp_cuda_event **put, **got; /* [n_slots] */
} cuda_copy;

/* Slots outlive the stages' tables (the transport is destroyed after the executor), so they
 * are allocated on the device directly. */
static void *cc_alloc(void *ctx, size_t bytes)
{
    return pp_cuda_dev_alloc(((cuda_copy *)ctx)->device, bytes);
}

static void cc_free(void *ctx, void *p)
{
    (void)ctx;
    pp_cuda_dev_free(p);
}

static void cc_put(void *ctx, int src, int slot_id, void *slot_buf, const void *buf, size_t bytes)
{
    cuda_copy *c = ctx;
    pp_kops *k = c->kops[src];
    pp_cuda_stream_wait(k, c->got[slot_id]); /* the slot's previous message is out */
    k->copy(k->ctx, slot_buf, buf, bytes);
    pp_cuda_event_record(c->put[slot_id], k);
}

static void cc_get(void *ctx, int dst, int slot_id, void *buf, const void *slot_buf, size_t bytes)
{
    cuda_copy *c = ctx;
    pp_kops *k = c->kops[dst];
    pp_cuda_stream_wait(k, c->put[slot_id]); /* the message is in */
    k->copy(k->ctx, buf, slot_buf, bytes);
    pp_cuda_event_record(c->got[slot_id], k);
}

void pp_cuda_copy_ops_destroy(pp_copy_ops *ops)
{
    cuda_copy *c = (cuda_copy *)ops;
    if (!c)
        return;
    for (int i = 0; i < c->n_slots; i++) {
        if (c->put)
            pp_cuda_event_destroy(c->put[i]);
        if (c->got)
            pp_cuda_event_destroy(c->got[i]);
    }
    pp_free(c->put);
    pp_free(c->got);
    pp_free(c);
}

pp_status pp_cuda_copy_ops_create(pp_kops *const *kops, int S, int n_slots, pp_copy_ops **out)
{
    cuda_copy *c = pp_alloc(sizeof *c);
    if (!c)
        return PP_ERR(PP_ERR_NOMEM, "out of memory for the CUDA copy ops");
    c->kops = kops;
    c->S = S;
    c->n_slots = n_slots;
    c->put = pp_alloc(sizeof(*c->put) * (size_t)n_slots);
    c->got = pp_alloc(sizeof(*c->got) * (size_t)n_slots);
    pp_status st = c->put && c->got ? PP_OK
                                    : PP_ERR(PP_ERR_NOMEM, "out of memory for %d events", n_slots);
    int dev = pp_cuda_kops_device(kops[0]);
    c->device = dev;
    for (int i = 0; i < n_slots && st == PP_OK; i++) {
        st = pp_cuda_event_create(dev, &c->put[i]);
        if (st == PP_OK)
            st = pp_cuda_event_create(dev, &c->got[i]);
    }
    if (st != PP_OK) {
        pp_cuda_copy_ops_destroy(&c->ops);
        return st;
    }
    c->ops = (pp_copy_ops){.ctx = c, .alloc = cc_alloc, .free = cc_free, .put = cc_put,
                           .get = cc_get};
    *out = &c->ops;
    return PP_OK;
}
