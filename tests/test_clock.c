/* test_clock.c: clock alignment of multi-process runs (analyzer/clock.c, docs/metrics.md "Clock
 * alignment"). Synthetic 1F1B runs, one trace per rank written with the trace writer in the
 * convention's fallback form (registered messages, category = stage + 1), are given the
 * profiler's clock test hook on one rank: the analyzer must recover a 5 ms offset and 50 ppm
 * drift within 50 us and 5 ppm, and the merged analysis must match the unshifted run. */
#include "pp_analyzer.h"
#include "pp_clock.h"
#include "pp_trace.h"
#include "pp_testkit_trace.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64];

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/pp_clock_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(clock, .init = setup, .fini = teardown);

/* ---------------------------------------------------------------------------------------- */
/* A synthetic run                                                                            */
/* ---------------------------------------------------------------------------------------- */

enum { MAX_S = 4, M = 8, STEPS = 40 };
static const uint64_t US = 1000, MS = 1000000, T0 = 5000 * MS;

typedef struct tw {
    tk_tw k;            /* the writer and its block */
    uint64_t m0;        /* header mono_ns */
    int64_t offset_ns;  /* the hook applied to every timestamp */
    double drift;
} tw;

typedef struct run_spec {
    int S;
    int fwd_only;           /* inference: activations only, no traffic back */
    int shifted;            /* rank given the hook, -1 none */
    int64_t offset_ns;
    double drift;
    int distinct_hosts;
} run_spec;

/* the hook, as the profiler applies it (docs/profiler.md) */
static uint64_t hooked(const tw *t, uint64_t ts)
{
    double rel = (double)(int64_t)(ts - t->m0) * (1.0 + t->drift);
    return t->m0 + (uint64_t)(int64_t)llround(rel) + (uint64_t)t->offset_ns;
}

static void rec_range(tw *t, uint16_t type, uint64_t ts, uint32_t msg, uint32_t cat,
                      uint64_t payload)
{
    if (type == PP_REC_PUSH) {
        pp_rec_range r;
        memset(&r, 0, sizeof r);
        r.h = (pp_rec_header){PP_REC_PUSH, sizeof r, 100, hooked(t, ts)};
        r.domain = 1;
        r.message = msg;
        r.category = cat;
        r.payload_type = 1;
        r.payload = payload;
        tk_tw_rec(&t->k, &r, sizeof r);
    } else {
        pp_rec_pop r;
        memset(&r, 0, sizeof r);
        r.h = (pp_rec_header){PP_REC_POP, sizeof r, 100, hooked(t, ts)};
        r.domain = 1;
        tk_tw_rec(&t->k, &r, sizeof r);
    }
}

/* string ids: 1 "pipeprof", 2 "step", then 3 + kind * M + mb */
enum { K_FWD, K_BWD, K_SEND_ACT, K_RECV_ACT, K_SEND_GRAD, K_RECV_GRAD, K_N };
static const char *const kind_word[K_N] = {"fwd", "bwd", "send_act", "recv_act", "send_grad",
                                           "recv_grad"};
static uint32_t msg_id(int kind, int mb) { return 3 + (uint32_t)(kind * M + mb); }

static void range(tw *t, int stage, int kind, int mb, uint64_t t0, uint64_t t1)
{
    uint64_t payload = kind <= K_BWD ? (uint64_t)mb : 1 << 20;
    rec_range(t, PP_REC_PUSH, t0, msg_id(kind, mb), (uint32_t)stage + 1, payload);
    rec_range(t, PP_REC_POP, t1, 0, 0, 0);
}

static uint64_t g_rng;
static double urand(void)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

/* Writes the run: S ranks, one stage each, 1F1B (or forward only), compute ~1 ms (backward 2 ms)
 * with 5% jitter, transfers 20-100 us, 40 ms between steps so that the run spans ~3 s. */
static void write_run(const char *name, const run_spec *rs, char *dir_out, size_t cap)
{
    snprintf(dir_out, cap, "%s/%s", g_dir, name);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir_out);
    cr_assert_eq(system(cmd), 0);
    int S = rs->S;
    static tw t[MAX_S];
    for (int s = 0; s < S; s++) {
        memset(&t[s], 0, sizeof t[s]);
        t[s].m0 = T0 - 3 * MS + (uint64_t)s * 137 * US;
        if (s == rs->shifted) {
            t[s].offset_ns = rs->offset_ns;
            t[s].drift = rs->drift;
        }
        pp_trace_header h;
        tk_tw_header(&h);
        h.pid = 1000 + (uint32_t)s;
        h.rank = s;
        h.mono_ns = t[s].m0;
        h.clock_offset_ns = t[s].offset_ns;
        h.clock_drift = t[s].drift;
        snprintf(h.host, sizeof h.host, "node%d", rs->distinct_hosts ? s : 0);
        char path[256];
        snprintf(path, sizeof path, "%s/rank%d.pft", dir_out, s);
        cr_assert_eq(pp_trace_writer_open(path, &h, &t[s].k.w), PP_OK, "%s", pp_error_message());
        tk_tw_string(&t[s].k, 1, "pipeprof");
        tk_tw_string(&t[s].k, 2, "step");
        for (int k = 0; k < K_N; k++)
            for (int m = 0; m < M; m++) {
                char msg[32];
                snprintf(msg, sizeof msg, "%s mb%d", kind_word[k], m);
                tk_tw_string(&t[s].k, msg_id(k, m), msg);
            }
        pp_rec_domain d = {{PP_REC_DOMAIN, sizeof d, 0, 0}, 1, 1};
        tk_tw_rec(&t[s].k, &d, sizeof d);
        tk_tw_flush(&t[s].k, PP_BLOCK_META, 0);
    }
    g_rng = 0x9e3779b97f4a7c15ull;
    uint64_t start = T0;
    for (int step = 1; step <= STEPS; step++) {
        /* per stage: its instruction list (mb, backward?), and the simulation's state */
        int list[MAX_S][2 * M][2], len[MAX_S], pc[MAX_S];
        uint64_t free_at[MAX_S], act_at[MAX_S][M], grad_at[MAX_S][M];
        for (int s = 0; s < S; s++) {
            int w = rs->fwd_only ? M : (S - s - 1 < M ? S - s - 1 : M), n = 0;
            for (int m = 0; m < w; m++)
                list[s][n][0] = m, list[s][n++][1] = 0;
            for (int i = 0; i < M - w; i++) {
                list[s][n][0] = w + i, list[s][n++][1] = 0;
                list[s][n][0] = i, list[s][n++][1] = 1;
            }
            for (int m = rs->fwd_only ? M : M - w; m < M; m++)
                list[s][n][0] = m, list[s][n++][1] = 1;
            len[s] = n;
            pc[s] = 0;
            free_at[s] = start;
            for (int m = 0; m < M; m++)
                act_at[s][m] = grad_at[s][m] = 0;
            rec_range(&t[s], PP_REC_PUSH, start, 2, (uint32_t)s + 1, (uint64_t)step);
        }
        for (int progress = 1; progress;) {
            progress = 0;
            for (int s = 0; s < S; s++)
                while (pc[s] < len[s]) {
                    int m = list[s][pc[s]][0], bwd = list[s][pc[s]][1];
                    int has_in = bwd ? s < S - 1 : s > 0;
                    uint64_t in = bwd ? grad_at[s][m] : act_at[s][m];
                    if (has_in && !in)
                        break;
                    uint64_t now = free_at[s];
                    if (has_in) { /* the receive: waits for the data, 1 us to take it */
                        uint64_t end = (in > now ? in : now) + 1 * US;
                        range(&t[s], s, bwd ? K_RECV_GRAD : K_RECV_ACT, m, now, end);
                        now = end;
                    }
                    uint64_t dur = (uint64_t)((bwd ? 2.0 : 1.0) * MS * (0.95 + 0.1 * urand()));
                    range(&t[s], s, bwd ? K_BWD : K_FWD, m, now, now + dur);
                    now += dur;
                    int has_out = bwd ? s > 0 : s < S - 1;
                    if (has_out) { /* the send: 5 us; data at the peer 20-100 us after it began */
                        uint64_t lat = (uint64_t)((20.0 + 80.0 * urand()) * US);
                        range(&t[s], s, bwd ? K_SEND_GRAD : K_SEND_ACT, m, now, now + 5 * US);
                        if (bwd)
                            grad_at[s - 1][m] = now + lat;
                        else
                            act_at[s + 1][m] = now + lat;
                        now += 5 * US;
                    }
                    free_at[s] = now;
                    pc[s]++;
                    progress = 1;
                }
        }
        uint64_t end = start;
        for (int s = 0; s < S; s++) {
            cr_assert_eq(pc[s], len[s], "the schedule deadlocked");
            end = free_at[s] > end ? free_at[s] : end;
        }
        for (int s = 0; s < S; s++) {
            rec_range(&t[s], PP_REC_POP, end, 0, 0, 0);
            tk_tw_flush(&t[s].k, PP_BLOCK_EVENTS, 100);
        }
        start = end + 40 * MS;
    }
    for (int s = 0; s < S; s++) {
        pp_rec_footer f;
        memset(&f, 0, sizeof f);
        f.h.ts = hooked(&t[s], start);
        f.threads = 1;
        cr_assert_eq(pp_trace_writer_footer(t[s].k.w, &f), PP_OK);
        pp_trace_writer_close(t[s].k.w);
    }
}

static pp_analysis *analyze(const char *dir)
{
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_dir(dir, NULL, &a), PP_OK, "%s", pp_error_message());
    return a;
}

/* The merged analysis matches the unshifted run's: step times within 20 us (the clock's error
 * moves one stage's ranges by at most that), bubble ratios within 0.2 percentage points. */
static void assert_matches(const pp_analysis *a, const pp_analysis *truth)
{
    cr_assert_eq(a->S, truth->S);
    cr_assert_eq(a->n_steps, truth->n_steps);
    for (size_t i = 0; i < a->n_steps; i++)
        cr_assert_leq(fabs(a->steps[i].step_ns - truth->steps[i].step_ns), 20e3,
                      "step %zu: %.1f vs %.1f us", i, a->steps[i].step_ns * 1e-3,
                      truth->steps[i].step_ns * 1e-3);
    cr_assert_leq(fabs(a->bubble_ratio - truth->bubble_ratio), 0.002, "bubble %.4f vs %.4f",
                  a->bubble_ratio, truth->bubble_ratio);
    cr_assert_eq(a->n_links, truth->n_links);
}

static void check_recovery(int S, int shifted)
{
    char truth_dir[128], dir[128];
    run_spec rs = {.S = S, .shifted = -1};
    write_run("truth", &rs, truth_dir, sizeof truth_dir);
    rs.shifted = shifted;
    rs.offset_ns = 5 * (int64_t)MS;
    rs.drift = 50e-6;
    write_run("shifted", &rs, dir, sizeof dir);
    pp_analysis *truth = analyze(truth_dir), *a = analyze(dir);
    for (int s = 0; s < S; s++)
        cr_assert_eq(truth->files[s].clock_status, PP_CLOCK_SHARED, "one host, no hook");
    cr_assert_eq(a->n_files, (size_t)S);
    for (int s = 0; s < S; s++) {
        const pp_afile *f = &a->files[s];
        cr_assert(f->aligned, "rank %d", s);
        cr_assert_eq(f->clock_ref, 0);
        double want_off = s == shifted ? 5e6 : 0, want_drift = s == shifted ? 50e-6 : 0;
        cr_log_info("S=%d rank %d: offset %.3f us (error %.3f), drift %.3f ppm (error %.3f), "
                    "uncertainty %.1f us",
                    S, s, f->clock_offset_ns * 1e-3, (f->clock_offset_ns - want_off) * 1e-3,
                    f->clock_drift * 1e6, (f->clock_drift - want_drift) * 1e6,
                    f->clock_uncertainty_ns * 1e-3);
        cr_assert_eq(f->clock_status, s == 0 ? PP_CLOCK_REFERENCE : PP_CLOCK_ESTIMATED);
        cr_assert_leq(fabs(f->clock_offset_ns - want_off), 50e3, "rank %d offset %.1f us", s,
                      f->clock_offset_ns * 1e-3);
        cr_assert_leq(fabs(f->clock_drift - want_drift), 5e-6, "rank %d drift %.2f ppm", s,
                      f->clock_drift * 1e6);
        /* the band is no wider than the latencies: 20 us minimum each way */
        cr_assert_leq(f->clock_uncertainty_ns, s * 30e3 + 1.0, "rank %d", s);
    }
    assert_matches(a, truth);
    char *txt = NULL;
    size_t txt_len = 0;
    FILE *fp = open_memstream(&txt, &txt_len);
    pp_analysis_print(a, fp);
    fclose(fp);
    cr_assert_not_null(strstr(txt, "clock offset us"), "%s", txt);
    cr_assert_not_null(strstr(txt, "reference"), "%s", txt);
    free(txt);
    pp_analysis_free(truth);
    pp_analysis_free(a);
}

Test(clock, two_ranks_offset_5ms_drift_50ppm_recovered_within_50us, .timeout = 30)
{
    check_recovery(2, 1);
}

/* rank 3 only talks to the shifted rank 2: it is aligned through it */
Test(clock, four_ranks_middle_rank_shifted_recovered_through_the_chain, .timeout = 30)
{
    check_recovery(4, 2);
}

Test(clock, four_ranks_last_rank_shifted_recovered, .timeout = 30)
{
    check_recovery(4, 3);
}

/* different hosts, clocks in fact equal: the estimate is zero within its uncertainty */
Test(clock, no_shift_across_hosts_estimates_zero_within_the_uncertainty, .timeout = 30)
{
    char truth_dir[128], dir[128];
    run_spec rs = {.S = 4, .shifted = -1};
    write_run("truth", &rs, truth_dir, sizeof truth_dir);
    rs.distinct_hosts = 1;
    write_run("hosts", &rs, dir, sizeof dir);
    pp_analysis *truth = analyze(truth_dir), *a = analyze(dir);
    cr_assert_str_eq(a->files[1].host, "node1");
    for (int s = 1; s < 4; s++) {
        const pp_afile *f = &a->files[s];
        cr_assert_eq(f->clock_status, PP_CLOCK_ESTIMATED);
        cr_assert_leq(fabs(f->clock_offset_ns), f->clock_uncertainty_ns, "rank %d: %.1f us", s,
                      f->clock_offset_ns * 1e-3);
        cr_assert_leq(fabs(f->clock_drift), 5e-6, "rank %d", s);
    }
    assert_matches(a, truth);
    pp_analysis_free(truth);
    pp_analysis_free(a);
}

/* activations only: nothing bounds the receiver's clock from below, so no offset is invented */
Test(clock, one_direction_of_traffic_leaves_the_offset_unbounded, .timeout = 30)
{
    char dir[128];
    run_spec rs = {.S = 2, .fwd_only = 1, .shifted = 1, .offset_ns = 5 * (int64_t)MS,
                   .drift = 50e-6};
    write_run("fwd", &rs, dir, sizeof dir);
    pp_analysis *a = analyze(dir);
    cr_assert_eq(a->files[0].clock_status, PP_CLOCK_REFERENCE);
    cr_assert_eq(a->files[1].clock_status, PP_CLOCK_UNBOUNDED);
    cr_assert_not(a->files[1].aligned);
    cr_assert(isinf(a->files[1].clock_uncertainty_ns));
    cr_assert_not_null(strstr(a->warnings, "unbounded"), "%s", a->warnings);
    pp_analysis_free(a);
}

/* The estimator alone: a line recovered from exact constraints, and its uncertainty. */
Test(clock, estimator_recovers_a_line_from_symmetric_latencies)
{
    enum { N = 200 };
    pp_clock_pair p[2 * N];
    const uint64_t m0[2] = {T0, T0 + 7 * MS};
    const double off = -3e6, drift = -20e-6, lat = 30e3;
    pp_clock_fit want = {.status = PP_CLOCK_ESTIMATED, .mono0_ns = m0[1], .offset_ns = off,
                         .drift = drift};
    for (int i = 0; i < N; i++) {
        uint64_t t = T0 + (uint64_t)i * 10 * MS; /* reference time */
        /* file 1's clock reading at reference time t */
        uint64_t c = m0[1] + (uint64_t)llround((double)(int64_t)(t - m0[1]) * (1 + drift) + off);
        uint64_t c_lat = m0[1] + (uint64_t)llround((double)(int64_t)(t + (uint64_t)lat - m0[1]) *
                                                   (1 + drift) + off);
        p[2 * i] = (pp_clock_pair){0, 1, t, c_lat};                   /* 0 -> 1 */
        p[2 * i + 1] = (pp_clock_pair){1, 0, c, t + (uint64_t)lat};   /* 1 -> 0 */
    }
    pp_clock_fit f[2];
    cr_assert_eq(pp_clock_estimate(p, 2 * N, 2, 0, m0, f), PP_OK);
    cr_assert_eq(f[1].status, PP_CLOCK_ESTIMATED);
    cr_assert_leq(fabs(f[1].offset_ns - off), 100.0, "%.1f", f[1].offset_ns);
    cr_assert_leq(fabs(f[1].drift - drift), 1e-8, "%g", f[1].drift);
    cr_assert_leq(fabs(f[1].uncertainty_ns - lat), 100.0, "%.1f", f[1].uncertainty_ns);
    /* and the mapping inverts the clock */
    uint64_t t = T0 + 500 * MS;
    uint64_t c = m0[1] + (uint64_t)llround((double)(int64_t)(t - m0[1]) * (1 + drift) + off);
    cr_assert_leq(llabs((long long)(pp_clock_to_ref(&f[1], c) - t)), 100);
    cr_assert_leq(llabs((long long)(pp_clock_to_ref(&want, c) - t)), 1);
    cr_assert_eq(pp_clock_estimate(p, 2 * N, 2, 2, m0, f), PP_ERR_INVALID);
}
