/* jitter.c: jitter specs (pptrain --sim-jitter) and their factors, drawn from a counter-based
 * generator: each op's factor is a function of its key alone, never of a shared stream's
 * position, so the sim backend's stages (threads or MPI ranks) and the analyzer's replay draw the
 * same factor for the same op whatever ran first. docs/executor.md ("Jitter") states the
 * formulas this file implements; keep them together. */
#include "pp_jitter.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GOLDEN 0x9e3779b97f4a7c15ull

/* splitmix64's output function: a bijection of 64-bit words with full avalanche. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* One coordinate into the key. The + GOLDEN keeps a zero state from staying zero. */
static uint64_t fold(uint64_t h, uint64_t x) { return mix64((h ^ x) + GOLDEN); }

/* The i-th uniform of a key (splitmix64's stream started at the key): in (0, 1), never 0, so
 * its logarithm is finite; 53 random bits centred in their interval. */
static double key_uniform(uint64_t key, int i)
{
    uint64_t x = mix64(key + (uint64_t)(i + 1) * GOLDEN);
    return ((double)(x >> 11) + 0.5) * 0x1.0p-53;
}

void pp_jitter_init(pp_jitter *j)
{
    memset(j, 0, sizeof *j);
    j->dist = PP_JITTER_NONE;
    j->tail_x = 1.0;
}

int pp_jitter_is_none(const pp_jitter *j)
{
    int base = j->dist == PP_JITTER_NONE || (j->dist == PP_JITTER_LOGNORMAL && j->sigma == 0.0) ||
               (j->dist == PP_JITTER_UNIFORM && j->width == 0.0);
    int regimes = 0;
    for (int i = 0; i < j->n_regimes; i++)
        regimes |= j->regimes[i].x != 1.0;
    return base && (j->tail_p == 0.0 || j->tail_x == 1.0) && !regimes;
}

double pp_jitter_step_factor(const pp_jitter *j, int64_t step)
{
    for (int i = 0; i < j->n_regimes; i++)
        if (step >= j->regimes[i].first && step <= j->regimes[i].last)
            return j->regimes[i].x;
    return 1.0;
}

double pp_jitter_step_factor_max(const pp_jitter *j)
{
    double m = 1.0;
    for (int i = 0; i < j->n_regimes; i++)
        m = j->regimes[i].x > m ? j->regimes[i].x : m;
    return m;
}

uint64_t pp_jitter_key(const pp_jitter *j, int replica, int stage, int64_t step, int chunk,
                       int mb, pp_nvtx_kind op)
{
    uint64_t h = fold(j->seed, (uint64_t)(int64_t)replica);
    h = fold(h, (uint64_t)(int64_t)stage);
    h = fold(h, (uint64_t)step);
    h = fold(h, (uint64_t)(int64_t)chunk);
    h = fold(h, (uint64_t)(int64_t)mb);
    return fold(h, (uint64_t)(int64_t)op);
}

double pp_jitter_factor(const pp_jitter *j, uint64_t key)
{
    double f = 1.0;
    if (j->dist == PP_JITTER_LOGNORMAL) {
        double u0 = key_uniform(key, 0), u1 = key_uniform(key, 1);
        double z = sqrt(-2.0 * log(u0)) * cos(6.283185307179586 * u1); /* Box-Muller */
        f = exp(j->sigma * z);
    } else if (j->dist == PP_JITTER_UNIFORM) {
        f = 1.0 + j->width * (2.0 * key_uniform(key, 0) - 1.0);
    }
    if (j->tail_p > 0.0 && key_uniform(key, 2) < j->tail_p)
        f *= j->tail_x;
    return f;
}

/* The largest |z| Box-Muller gives: sqrt(-2 ln u0) at the smallest u0, 2^-54. */
#define MAX_Z 8.66

double pp_jitter_factor_max(const pp_jitter *j)
{
    double f = j->dist == PP_JITTER_LOGNORMAL ? exp(j->sigma * MAX_Z)
               : j->dist == PP_JITTER_UNIFORM ? 1.0 + j->width
                                               : 1.0;
    return j->tail_p > 0.0 ? f * j->tail_x : f;
}

double pp_jitter_mean(const pp_jitter *j)
{
    double m = j->dist == PP_JITTER_LOGNORMAL ? exp(0.5 * j->sigma * j->sigma) : 1.0;
    return m * (1.0 + j->tail_p * (j->tail_x - 1.0));
}

/* The shortest of %.15g, %.16g, %.17g that reads back as v: "0.1", not "0.10000000000000001". */
static void shortest(double v, char *buf, size_t cap)
{
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, cap, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

int pp_jitter_format(const pp_jitter *j, char *buf, size_t cap)
{
    char a[32], b[32], tail[80 + PP_JITTER_MAX_REGIMES * 80] = "";
    size_t n = 0;
    if (j->tail_p > 0.0) {
        shortest(j->tail_p, a, sizeof a);
        shortest(j->tail_x, b, sizeof b);
        n += (size_t)snprintf(tail, sizeof tail, "tail:%s:%s,", a, b);
    }
    for (int i = 0; i < j->n_regimes && i < PP_JITTER_MAX_REGIMES; i++) {
        shortest(j->regimes[i].x, a, sizeof a);
        n += (size_t)snprintf(tail + n, sizeof tail - n, "regime:%lld-%lld:%s,",
                              (long long)j->regimes[i].first, (long long)j->regimes[i].last, a);
    }
    unsigned long long seed = (unsigned long long)j->seed;
    if (j->dist == PP_JITTER_LOGNORMAL || j->dist == PP_JITTER_UNIFORM) {
        shortest(j->dist == PP_JITTER_LOGNORMAL ? j->sigma : j->width, a, sizeof a);
        return snprintf(buf, cap, "%s:%s,%sseed=%llu",
                        j->dist == PP_JITTER_LOGNORMAL ? "lognormal" : "uniform", a, tail, seed);
    }
    return snprintf(buf, cap, "%sseed=%llu", *tail ? tail : "none,", seed);
}

enum { SEEN_DIST = 1, SEEN_TAIL = 2, SEEN_SEED = 4, SEEN_REGIME = 8 };

#define KNOWN "lognormal:SIGMA, uniform:W, tail:P:X, regime:A-B:X, seed=N or none"

/* One number of a part: `what` names it in the message ("sigma"). */
static pp_status part_number(const char *spec, const char *text, const char *what, double lo,
                             double hi, double *out)
{
    pp_status st = pp_parse_f64(text, what, lo, hi, out);
    return st == PP_OK ? st : pp_error_wrap(st, "jitter spec '%s'", spec);
}

/* regime:A-B:X (the text after "regime:"), appended to j's regimes. */
static pp_status parse_regime(const char *spec, const char *part, char *text, pp_jitter *j)
{
    char *dash = strchr(text, '-'), *x = dash ? strchr(dash + 1, ':') : NULL;
    if (!dash || !x)
        return PP_ERR(PP_ERR_INVALID, "jitter spec '%s': '%s' needs regime:A-B:X (steps A to B "
                      "run every compute op X times as long), e.g. regime:20-39:1.3", spec, part);
    if (j->n_regimes == PP_JITTER_MAX_REGIMES)
        return PP_ERR(PP_ERR_INVALID, "jitter spec '%s': more than %d regimes", spec,
                      PP_JITTER_MAX_REGIMES);
    *dash = '\0';
    *x = '\0';
    struct pp_jitter_regime r;
    pp_status st = pp_parse_i64(text, "regime's first step", 1, INT64_MAX, &r.first);
    if (st == PP_OK)
        st = pp_parse_i64(dash + 1, "regime's last step", 1, INT64_MAX, &r.last);
    if (st != PP_OK)
        return pp_error_wrap(st, "jitter spec '%s'", spec);
    st = part_number(spec, x + 1, "regime factor", 1.0 / PP_JITTER_MAX_REGIME_X,
                     PP_JITTER_MAX_REGIME_X, &r.x);
    if (st != PP_OK)
        return st;
    if (r.last < r.first)
        return PP_ERR(PP_ERR_INVALID, "jitter spec '%s': regime steps %lld-%lld run backwards",
                      spec, (long long)r.first, (long long)r.last);
    for (int i = 0; i < j->n_regimes; i++)
        if (r.first <= j->regimes[i].last && j->regimes[i].first <= r.last)
            return PP_ERR(PP_ERR_INVALID, "jitter spec '%s': regimes %lld-%lld and %lld-%lld "
                          "overlap", spec, (long long)j->regimes[i].first,
                          (long long)j->regimes[i].last, (long long)r.first, (long long)r.last);
    j->regimes[j->n_regimes++] = r;
    return PP_OK;
}

/* One part of a spec, into j; *seen has a bit per part kind, so a repeat is an error. */
static pp_status parse_part(const char *spec, char *part, pp_jitter *j, unsigned *seen)
{
    pp_status st = PP_OK;
    char *colon = strchr(part, ':');
    unsigned bit;
    if (strcmp(part, "none") == 0) {
        bit = SEEN_DIST;
    } else if (strncmp(part, "seed=", 5) == 0) {
        int64_t v;
        bit = SEEN_SEED;
        if ((st = pp_parse_i64(part + 5, "seed", 0, INT64_MAX, &v)) != PP_OK)
            return pp_error_wrap(st, "jitter spec '%s'", spec);
        j->seed = (uint64_t)v;
        j->seed_given = 1;
    } else if (colon && (size_t)(colon - part) == 9 && strncmp(part, "lognormal", 9) == 0) {
        bit = SEEN_DIST;
        j->dist = PP_JITTER_LOGNORMAL;
        st = part_number(spec, colon + 1, "lognormal sigma", 0.0, PP_JITTER_MAX_SIGMA, &j->sigma);
    } else if (colon && (size_t)(colon - part) == 7 && strncmp(part, "uniform", 7) == 0) {
        bit = SEEN_DIST;
        j->dist = PP_JITTER_UNIFORM;
        st = part_number(spec, colon + 1, "uniform width", 0.0, PP_JITTER_MAX_WIDTH, &j->width);
    } else if (colon && (size_t)(colon - part) == 4 && strncmp(part, "tail", 4) == 0) {
        char *x = strchr(colon + 1, ':');
        bit = SEEN_TAIL;
        if (!x)
            return PP_ERR(PP_ERR_INVALID, "jitter spec '%s': '%s' needs tail:P:X (probability P "
                          "that an op takes X times as long), e.g. tail:0.01:4", spec, part);
        *x = '\0';
        st = part_number(spec, colon + 1, "tail probability", 0.0, 1.0, &j->tail_p);
        if (st == PP_OK)
            st = part_number(spec, x + 1, "tail factor", 1.0, PP_JITTER_MAX_TAIL_X, &j->tail_x);
    } else if (colon && (size_t)(colon - part) == 6 && strncmp(part, "regime", 6) == 0) {
        char whole[PP_JITTER_MAX_SPEC + 1];
        snprintf(whole, sizeof whole, "%s", part);
        bit = SEEN_REGIME;
        st = parse_regime(spec, whole, colon + 1, j);
        *seen &= ~(unsigned)SEEN_REGIME; /* may repeat */
    } else {
        return PP_ERR(PP_ERR_INVALID, "jitter spec '%s': unknown part '%s' (expected " KNOWN ")",
                      spec, part);
    }
    if (st != PP_OK)
        return st;
    if (*seen & bit)
        return PP_ERR(PP_ERR_INVALID, "jitter spec '%s': %s given twice", spec,
                      bit == SEEN_DIST ? "a distribution" : bit == SEEN_TAIL ? "tail" : "seed");
    *seen |= bit;
    return PP_OK;
}

pp_status pp_jitter_parse(const char *spec, pp_jitter *out)
{
    if (!spec || !*spec)
        return PP_ERR(PP_ERR_INVALID, "jitter spec '': empty (expected " KNOWN ")");
    size_t n = strlen(spec);
    if (n > PP_JITTER_MAX_SPEC)
        return PP_ERR(PP_ERR_INVALID, "jitter spec '%.40s...': %zu characters (at most %d)",
                      spec, n, PP_JITTER_MAX_SPEC);
    char text[PP_JITTER_MAX_SPEC + 1];
    memcpy(text, spec, n + 1);
    pp_jitter j;
    pp_jitter_init(&j);
    unsigned seen = 0;
    char *part = text;
    for (;;) {
        char *comma = strchr(part, ',');
        if (comma)
            *comma = '\0';
        if (!*part)
            return PP_ERR(PP_ERR_INVALID, "jitter spec '%s': an empty part (parts are separated "
                          "by single commas)", spec);
        pp_status st = parse_part(spec, part, &j, &seen);
        if (st != PP_OK)
            return st;
        if (!comma)
            break;
        part = comma + 1;
    }
    if (!(seen & (SEEN_DIST | SEEN_TAIL | SEEN_REGIME)))
        return PP_ERR(PP_ERR_INVALID, "jitter spec '%s': names no distribution (expected "
                      KNOWN ")", spec);
    if (j.tail_p == 0.0)
        j.tail_x = 1.0; /* no tail: one canonical form */
    *out = j;
    return PP_OK;
}
