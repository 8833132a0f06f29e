/* pp_clock.h: aligns the clocks of a run's processes (docs/metrics.md, "Clock alignment").
 * The analyzer feeds it the matched send/receive pairs between processes whose clocks are not
 * shared (other hosts, or a trace carrying the profiler's clock test hook) and maps every
 * timestamp of those processes onto the reference process's clock before the analysis.
 * Pure computation: no I/O, no globals; thread-safe on distinct arguments. */
#ifndef PP_CLOCK_H
#define PP_CLOCK_H

#include "pp_common.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One message between two processes (file indices): the send range's start on the sender's
 * clock, the receive range's end (the data was there) on the receiver's clock. */
typedef struct pp_clock_pair {
    int32_t src, dst;
    uint64_t send_ns, recv_ns;
} pp_clock_pair;

typedef enum pp_clock_status {
    PP_CLOCK_SHARED = 0,    /* not estimated: the process shares the reference's clock */
    PP_CLOCK_REFERENCE = 1, /* the reference process itself */
    PP_CLOCK_ESTIMATED = 2, /* offset and drift estimated; timestamps are mapped */
    PP_CLOCK_UNBOUNDED = 3  /* not enough traffic (none, or one direction only) to bound it */
} pp_clock_status;

/* A process's clock against the reference, in the profiler test hook's terms
 * (docs/profiler.md): clock = mono0 + (t - mono0) * (1 + drift) + offset, t the reference's. */
typedef struct pp_clock_fit {
    int status;            /* pp_clock_status */
    uint64_t mono0_ns;     /* the model's origin: the file header's mono_ns */
    double offset_ns;      /* clock minus reference at mono0 */
    double drift;          /* rate error (1e-6 = 1 ppm) */
    double uncertainty_ns; /* half the narrowest width of the feasible band, plus the
                              uncertainty of the process it was aligned through */
    double violation_ns;   /* > 0 when no line satisfies every pair (mismatched pairs or a
                              clock that is not linear): by how much the best one misses */
    int32_t via;           /* the process it was aligned through, -1 for none */
    uint64_t n_fwd, n_bwd; /* pairs used: towards it and from it */
} pp_clock_fit;

/* Estimates the clock of each of n_files processes against process `ref` from the n pairs
 * (pairs naming files outside [0, n_files) or within one file are ignored). mono0_ns[i] is file
 * i's origin. Processes are reached from the reference through any chain of processes that
 * exchange messages in both directions; the others are PP_CLOCK_UNBOUNDED. fits[n_files] is
 * filled. Fails only for bad arguments or out of memory. */
pp_status pp_clock_estimate(const pp_clock_pair *pairs, size_t n, size_t n_files, int ref,
                            const uint64_t *mono0_ns, pp_clock_fit *fits);

/* A timestamp of the fitted process on the reference's clock (the identity unless
 * PP_CLOCK_ESTIMATED). */
uint64_t pp_clock_to_ref(const pp_clock_fit *f, uint64_t ts);

#ifdef __cplusplus
}
#endif
#endif /* PP_CLOCK_H */
