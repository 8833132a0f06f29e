/* pp_jitter.h: the sim backend's noise on purpose (pptrain --sim-jitter SPEC): a jitter spec
 * parsed into a struct, and the random factor that multiplies one compute op's cost, drawn from
 * a counter-based generator keyed by (seed, replica, stage, step, chunk, micro-batch, op kind),
 * so a draw never depends on thread or process interleaving. The sim backend
 * (runtime/backend_sim.c) and the analyzer's Monte Carlo replay call the same two functions, so
 * a predictor told the spec samples exactly the distribution the run had (docs/executor.md,
 * "Jitter", gives the formulas).
 *
 * Pure functions of their arguments: thread-safe, no allocation. */
#ifndef PP_JITTER_H
#define PP_JITTER_H

#include "pp_common.h"
#include "pp_convention.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pp_jitter_dist {
    PP_JITTER_NONE = 0,      /* factor 1 (a tail may still apply) */
    PP_JITTER_LOGNORMAL = 1, /* exp(sigma * z), z standard normal: median 1 */
    PP_JITTER_UNIFORM = 2    /* 1 + width * (2u - 1): uniform on [1 - width, 1 + width], mean 1 */
} pp_jitter_dist;

/* Limits pp_jitter_parse enforces (the factor must stay positive and its product with a cost
 * inside the sim's clock). */
#define PP_JITTER_MAX_SIGMA 2.0
#define PP_JITTER_MAX_WIDTH 0.99
#define PP_JITTER_MAX_TAIL_X 1000.0
#define PP_JITTER_MAX_SPEC 256 /* characters of a spec */
#define PP_JITTER_MAX_REGIMES 4 /* regime:A-B:X parts */
#define PP_JITTER_MAX_REGIME_X 100.0

typedef struct pp_jitter {
    pp_jitter_dist dist;
    double sigma;     /* lognormal: standard deviation of ln(factor), [0, 2] */
    double width;     /* uniform: half-width W, [0, 0.99] */
    double tail_p;    /* probability that an op is a straggler, [0, 1] (0: no tail) */
    double tail_x;    /* a straggler's extra multiplier, [1, 1000] */
    uint64_t seed;    /* the spec's seed=N, else what the caller set (pptrain: --seed) */
    int seed_given;   /* 1 when the spec said seed=N */
    /* speed regimes: steps first .. last (counting from 1) run every compute op x times as
     * long, the machine slower (x > 1) or faster for a stretch; in the spec's order, apart */
    int n_regimes;
    struct pp_jitter_regime {
        int64_t first, last;
        double x;
    } regimes[PP_JITTER_MAX_REGIMES];
} pp_jitter;

/* The no-noise spec: dist NONE, tail_p 0, tail_x 1, seed 0. */
void pp_jitter_init(pp_jitter *j);

/* Parses SPEC: comma-separated parts, each at most once but regime (up to
 * PP_JITTER_MAX_REGIMES, their steps apart), at most one distribution:
 *   lognormal:SIGMA   uniform:W   tail:P:X   regime:A-B:X   seed=N   none
 * e.g. "lognormal:0.1", "uniform:0.2,seed=7", "lognormal:0.05,tail:0.01:3",
 * "lognormal:0.05,regime:20-39:1.3". "none" alone is no jitter; a spec with no distribution, no
 * tail and no regime (e.g. "seed=3") is refused. On error
 * PP_ERR_INVALID with a message naming the spec and the bad part, *out untouched. Without
 * seed=N, out->seed is 0 and seed_given 0: the caller sets its own. */
pp_status pp_jitter_parse(const char *spec, pp_jitter *out);

/* 1 when the spec changes no duration (no distribution, no tail or a tail of factor 1, no
 * regime). */
int pp_jitter_is_none(const pp_jitter *j);

/* The spec in pp_jitter_parse's grammar, canonical ("lognormal:0.1,tail:0.01:3,seed=7"; the
 * seed always written; "none,seed=N" when no noise), truncated to fit buf[cap] (cap >= 1).
 * Returns the length it needed, as snprintf. Parsing the text gives back the same struct. */
int pp_jitter_format(const pp_jitter *j, char *buf, size_t cap);

/* The key of one compute op of one step: a fold of the seed and the op's coordinates through
 * splitmix64's finalizer. op is the op's kind in the NVTX convention: PP_NVTX_FWD, PP_NVTX_BWD,
 * PP_NVTX_BWD_INPUT, PP_NVTX_BWD_WEIGHT or PP_NVTX_OPT_STEP (chunk 0, mb 0). step counts from 1
 * as pptrain's do; replica is the data-parallel replica (0 without --dp). */
uint64_t pp_jitter_key(const pp_jitter *j, int replica, int stage, int64_t step, int chunk,
                       int mb, pp_nvtx_kind op);

/* The factor for `key` (any 64-bit value: a predictor may draw keys of its own): > 0, exactly
 * reproducible. */
double pp_jitter_factor(const pp_jitter *j, uint64_t key);

/* The largest factor pp_jitter_factor can return for j (a bound for clock-range checks). */
double pp_jitter_factor_max(const pp_jitter *j);

/* Step `step`'s regime factor: the x of the regime holding it, else 1. The sim backend
 * multiplies every compute op of the step by it; a predictor does not (a regime is the
 * machine's speed, not the ops' noise: docs/executor.md "Jitter"). */
double pp_jitter_step_factor(const pp_jitter *j, int64_t step);

/* The largest step factor (1 without regimes). */
double pp_jitter_step_factor_max(const pp_jitter *j);

/* The factor's mean: exp(sigma^2 / 2) for lognormal, 1 for uniform and none, times
 * 1 + P (X - 1) with a tail. Without a tail every distribution's median is 1. */
double pp_jitter_mean(const pp_jitter *j);

#ifdef __cplusplus
}
#endif
#endif /* PP_JITTER_H */
