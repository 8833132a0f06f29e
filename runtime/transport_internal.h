/* transport_internal.h: what the transports of runtime/ share and nobody outside needs: each
 * transport's constructor for the table in transport.c, and the device copies the in-process
 * transport makes for CUDA stages (cuda_copy.c). */
#ifndef PP_TRANSPORT_INTERNAL_H
#define PP_TRANSPORT_INTERNAL_H

#include "pp_transport.h"

/* The constructors of the table (transport.c); each is built only where its library is. */
pp_status pp_inproc_transport_create(const pp_transport_params *p, pp_transport **out);
pp_status pp_mpi_transport_create(const pp_transport_params *p, pp_transport **out);
pp_status pp_nccl_transport_create(const pp_transport_params *p, pp_transport **out);

/* How the in-process transport moves message data when it is not in host memory (a GPU's):
 * each mailbox slot gets a buffer from alloc; put copies a sender's buffer into a slot, get a
 * slot into a receiver's buffer. slot_id numbers the slots of the transport from 0 (below
 * S * S * capacity). Both may be asynchronous (enqueued on the stage's stream) as long as they
 * keep the order: a get after the put of the same message, a put into a slot after the get
 * that emptied it. */
typedef struct pp_copy_ops {
    void *ctx;
    void *(*alloc)(void *ctx, size_t bytes);
    void (*free)(void *ctx, void *p);
    void (*put)(void *ctx, int src, int slot_id, void *slot_buf, const void *buf, size_t bytes);
    void (*get)(void *ctx, int dst, int slot_id, void *buf, const void *slot_buf, size_t bytes);
} pp_copy_ops;

#ifdef PP_HAVE_CUDA
/* Copy ops between the CUDA stages of one process: device-to-device copies on the sender's and
 * the receiver's streams, ordered by CUDA events, no host waiting. kops[s] is stage s's table
 * (borrowed: it must outlive the ops); n_slots the transport's slot count. */
pp_status pp_cuda_copy_ops_create(pp_kops *const *kops, int S, int n_slots, pp_copy_ops **out);
void pp_cuda_copy_ops_destroy(pp_copy_ops *c);
#endif

#endif /* PP_TRANSPORT_INTERNAL_H */
