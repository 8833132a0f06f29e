/* transport.c: the one table of transports. pptrain (through the pipeline trainer) names a
 * transport by kind; the table gives its constructor and what it needs of the rest of the job.
 * A transport this build lacks keeps its row as a stub (no constructor; creating it says what to
 * configure), so every build knows every name. Also: the blocking send/receive over any
 * transport, and the MPI job helpers' stand-ins for a build without MPI. */
#include "transport_internal.h"

#include <stdio.h>
#include <string.h>

/* What a build lacks for each transport it cannot make; the stubs' errors and pptrain say it. */
#define MPI_MISSING "MPI (install it, e.g. openmpi-bin libopenmpi-dev, and configure again)"
#define NCCL_MISSING "NCCL (needs the CUDA toolkit's NCCL and MPI at configure time)"

/* A row this build cannot make: not built, what is missing, no constructor. */
#define STUB(missing) 0, missing, NULL
#ifdef PP_HAVE_MPI
#define MPI_ROW 1, NULL, pp_mpi_transport_create
#else
#define MPI_ROW STUB(MPI_MISSING)
#endif
#ifdef PP_HAVE_NCCL
#define NCCL_ROW 1, NULL, pp_nccl_transport_create
#else
#define NCCL_ROW STUB(NCCL_MISSING)
#endif

/* kind, name, one stage per process, device only, in order, then built, missing, create */
static const pp_transport_entry k_transports[PP_TRANSPORT_COUNT] = {
    {PP_TRANSPORT_INPROC, "inproc", 0, 0, 0, 1, NULL, pp_inproc_transport_create},
    {PP_TRANSPORT_MPI, "mpi", 1, 0, 0, MPI_ROW},
    {PP_TRANSPORT_NCCL, "nccl", 1, 1, 1, NCCL_ROW},
};

const pp_transport_entry *pp_transport_entry_of(pp_transport_kind kind)
{
    return (int)kind >= 0 && kind < PP_TRANSPORT_COUNT ? &k_transports[kind] : NULL;
}

pp_status pp_transport_kind_parse(const char *name, pp_transport_kind *out)
{
    for (int k = 0; k < PP_TRANSPORT_COUNT; k++)
        if (strcmp(name, k_transports[k].name) == 0) {
            *out = (pp_transport_kind)k;
            return PP_OK;
        }
    return PP_ERR(PP_ERR_INVALID, "--transport must be 'inproc', 'mpi' or 'nccl'");
}

pp_status pp_transport_create(pp_transport_kind kind, const pp_transport_params *p,
                              pp_transport **out)
{
    const pp_transport_entry *e = pp_transport_entry_of(kind);
    if (!e)
        return PP_ERR(PP_ERR_INVALID, "transport kind %d is not in the table", (int)kind);
    *out = NULL;
    if (!e->built) /* the stub's answer */
        return PP_ERR(PP_ERR_INVALID, "--transport %s: this build has no %s", e->name,
                      e->missing);
    return e->create(p, out);
}

void pp_transport_destroy(pp_transport *t)
{
    if (t)
        t->ops->destroy(t);
}

pp_status pp_transport_inproc_create(int S, int capacity, size_t max_bytes, pp_transport **out)
{
    pp_transport_params p = {.S = S, .dp = 1, .capacity = capacity, .max_bytes = max_bytes};
    return pp_inproc_transport_create(&p, out);
}

pp_status pp_transport_send(pp_transport *t, int src, int dst, pp_msg_tag tag, const void *buf,
                            size_t bytes, uint64_t avail_ns)
{
    pp_request r;
    pp_status st = t->ops->isend(t, src, dst, tag, buf, bytes, avail_ns, &r);
    return st != PP_OK ? st : t->ops->wait(t, &r);
}

pp_status pp_transport_recv(pp_transport *t, int dst, int src, pp_msg_tag tag, void *buf,
                            size_t bytes, uint64_t *avail_ns)
{
    pp_request r;
    pp_status st = t->ops->irecv(t, dst, src, tag, buf, bytes, &r);
    if (st == PP_OK)
        st = t->ops->wait(t, &r);
    if (st == PP_OK && avail_ns)
        *avail_ns = r.avail_ns;
    return st;
}

#ifndef PP_HAVE_MPI
/* No transport of this build runs one stage per process, so nothing calls these but a tool
 * that was not told: init says why. */
pp_status pp_mpi_init(int *argc, char ***argv, int *rank, int *size)
{
    (void)argc, (void)argv;
    *rank = 0;
    *size = 1;
    return PP_ERR(PP_ERR_INVALID, "this build has no MPI");
}

void pp_mpi_finalize(void) {}

pp_status pp_mpi_clock_sync(int rounds, int phase)
{
    (void)rounds, (void)phase;
    return PP_OK;
}

void pp_mpi_abort_job(int code) { (void)code; }
#endif
