/* tune_internal.h: what the tuning driver's files (tune.c, tune_explain.c, tune_advise.c,
 * tune_auto.c) share and pp_tune.h does not promise: one proposal, the chunk counts a schedule
 * allows, and the pieces of the --formula view. */
#ifndef PP_TUNE_INTERNAL_H
#define PP_TUNE_INTERNAL_H

#include "pp_tune.h"

#include <stddef.h>
#include <stdio.h>

/* snprintf into a fixed buffer that reports truncation (and keeps gcc's truncation analysis,
 * which cannot see the lengths checked elsewhere, quiet). 1 when it fitted. */
int pp_tune_fmt_into(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "1.50 GiB", "12.0 MiB", "3.0 KiB", "12 B". */
void pp_tune_fmt_bytes(uint64_t b, char *buf, size_t cap);

/* "optimal" or "gap <= X%" for a proposal's search. */
const char *pp_tune_search_word(const pp_tune_proposal *p, char *buf, size_t cap);

/* Why a schedule the user listed is not proposed to this run. */
const char *pp_tune_not_runnable(const pp_extract *e);

/* Rebalances (kind, S, v, M) over costs c. Failures of shape or memory are recorded in p->why
 * (p->ok = 0) with the status returned; the caller decides whether they are fatal. */
/* With `recompute`, stages may recompute where the limit needs it (pp_rebalance_opts). */
pp_status pp_tune_propose(const pp_costs *c, pp_schedule_kind kind, int S, int v, int M, int b,
                          uint64_t mem_limit, int recompute, double budget_s,
                          pp_tune_proposal *p);

/* The chunk counts to try for a schedule: 1, or for interleaved v = 2 (the run's own v when it
 * ran interleaved), or 2..4 with `sweep`. Returns how many; why[] explains an empty list. */
int pp_tune_v_choices(pp_schedule_kind kind, int S, int L, int M, int run_v, int sweep, int *vs,
                      char *why, size_t cap);

/* A speed comparison (pp_tune_speed_compare) in two lines for --verify and --auto, against the
 * run's measured median and p95: `label` begins the first ("speed:", "iter 2 speed:"),
 * `base_name` names the run compared with ("the baseline", "iter 1"). */
void pp_tune_print_speed(const pp_tune_speed *sp, double meas_ns, double meas95_ns,
                         const char *label, const char *base_name, FILE *out);

/* --formula pieces: each stage's forward and backward sums, the simulator's terms (busy, idle,
 * bubble; no_barrier: the run's stages stepped their optimizers alone, so grad_norm_us is
 * named the time before the step, pp_extract.no_barrier), and the memory model's terms per
 * stage. */
void pp_tune_print_stage_sums(const pp_costs *c, const pp_partition *part, int M, FILE *out);
void pp_tune_print_sim_terms(const pp_costs *c, const pp_partition *part, pp_schedule_kind kind,
                             int M, int no_barrier, FILE *out);
void pp_tune_print_memory_terms(const pp_costs *c, const pp_partition *part,
                                pp_schedule_kind kind, int M, const uint8_t *rc, uint64_t limit,
                                FILE *out);

#endif /* PP_TUNE_INTERNAL_H */
