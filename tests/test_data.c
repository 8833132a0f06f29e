/* test_data.c: unit tests of the training data sources (runtime/data.c): the synthetic Markov
 * corpus against independent computations, batching and state, and token files including every
 * way a file can be rejected. */
#include "pp_runtime.h"

#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every test gets a fresh directory for its files (pp_testkit), removed afterwards. */
static void setup(void) { tk_dir_create("pp_test_data"); }
static void teardown(void) { tk_dir_remove(); }

TestSuite(data, .init = setup, .fini = teardown);

static void tmp_path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s", tk_path(name));
}

static pp_data *markov(int V, int k, uint64_t seed)
{
    pp_data *d = NULL;
    pp_status st = pp_data_markov_create(V, k, seed, &d);
    cr_assert_eq(st, PP_OK, "markov_create(%d, %d, %llu): %s", V, k, (unsigned long long)seed,
                 pp_error_message());
    return d;
}

/* P(to | from) of the chain, 0 when `to` is not a successor. */
static double transition(const pp_data *d, int k, int from, int to)
{
    int32_t succ[64];
    double prob[64];
    cr_assert_leq(k, 64);
    int n = pp_data_markov_successors(d, from, succ, prob);
    cr_assert_eq(n, k);
    for (int j = 0; j < n; j++)
        if (succ[j] == to)
            return prob[j];
    return 0;
}

/* Dense P (row-major V x V) built from the successor lists. */
static double *dense_matrix(const pp_data *d, int V, int k)
{
    double *P = calloc((size_t)V * V, sizeof *P);
    int32_t *succ = malloc((size_t)k * sizeof *succ);
    double *prob = malloc((size_t)k * sizeof *prob);
    cr_assert(P && succ && prob);
    for (int i = 0; i < V; i++) {
        cr_assert_eq(pp_data_markov_successors(d, i, succ, prob), k);
        for (int j = 0; j < k; j++)
            P[(size_t)i * V + succ[j]] += prob[j];
    }
    free(succ);
    free(prob);
    return P;
}

/* Stationary distribution by a method independent of data.c's power iteration: solve
 * pi (P - I) = 0 with one equation replaced by sum(pi) = 1, Gaussian elimination with partial
 * pivoting. */
static void dense_stationary(const double *P, int V, double *pi)
{
    double *A = calloc((size_t)V * (V + 1), sizeof *A); /* augmented [A | b] */
    cr_assert_not_null(A);
    for (int r = 0; r < V; r++) {
        for (int c = 0; c < V; c++)
            A[(size_t)r * (V + 1) + c] = P[(size_t)c * V + r] - (r == c);
        A[(size_t)r * (V + 1) + V] = 0;
    }
    for (int c = 0; c <= V; c++)
        A[(size_t)(V - 1) * (V + 1) + c] = 1;
    for (int c = 0; c < V; c++) {
        int best = c;
        for (int r = c + 1; r < V; r++)
            if (fabs(A[(size_t)r * (V + 1) + c]) > fabs(A[(size_t)best * (V + 1) + c]))
                best = r;
        for (int x = 0; x <= V; x++) {
            double t = A[(size_t)c * (V + 1) + x];
            A[(size_t)c * (V + 1) + x] = A[(size_t)best * (V + 1) + x];
            A[(size_t)best * (V + 1) + x] = t;
        }
        double piv = A[(size_t)c * (V + 1) + c];
        cr_assert_gt(fabs(piv), 1e-12, "singular system: chain not irreducible?");
        for (int r = 0; r < V; r++) {
            if (r == c)
                continue;
            double f = A[(size_t)r * (V + 1) + c] / piv;
            for (int x = c; x <= V; x++)
                A[(size_t)r * (V + 1) + x] -= f * A[(size_t)c * (V + 1) + x];
        }
    }
    for (int r = 0; r < V; r++)
        pi[r] = A[(size_t)r * (V + 1) + V] / A[(size_t)r * (V + 1) + r];
    free(A);
}

static double dense_entropy_rate(const double *P, const double *pi, int V)
{
    double h = 0;
    for (int i = 0; i < V; i++)
        for (int j = 0; j < V; j++) {
            double p = P[(size_t)i * V + j];
            if (p > 0)
                h -= pi[i] * p * log(p);
        }
    return h;
}

/* ---------------------------------------------------------------------------------------- */
/* Markov corpus                                                                             */
/* ---------------------------------------------------------------------------------------- */

Test(data, markov_same_seed_same_stream_different_seed_differs)
{
    enum { B = 4, T = 64, N = B * T };
    pp_data *a = markov(256, 4, 7), *b = markov(256, 4, 7), *c = markov(256, 4, 8);
    int32_t ia[N], ta[N], ib[N], tb[N], ic[N], tc[N];
    for (int round = 0; round < 3; round++) {
        pp_data_next_batch(a, B, T, ia, ta);
        pp_data_next_batch(b, B, T, ib, tb);
        pp_data_next_batch(c, B, T, ic, tc);
        cr_assert_arr_eq(ia, ib, sizeof ia);
        cr_assert_arr_eq(ta, tb, sizeof ta);
    }
    cr_assert_float_eq(pp_data_entropy_rate(a), pp_data_entropy_rate(b), 0);
    cr_assert_neq(memcmp(ia, ic, sizeof ia), 0, "different seeds gave the same stream");
    cr_assert_neq(pp_data_entropy_rate(a), pp_data_entropy_rate(c));
    pp_data_destroy(a);
    pp_data_destroy(b);
    pp_data_destroy(c);
}

Test(data, markov_targets_shift_inputs_and_sequences_continue)
{
    enum { B = 8, T = 16 };
    pp_data *d = markov(64, 4, 3);
    int32_t in[B * T], tg[B * T], in2[B * T], tg2[B * T];
    pp_data_next_batch(d, B, T, in, tg);
    pp_data_next_batch(d, B, T, in2, tg2);
    for (int b = 0; b < B; b++) {
        for (int t = 0; t + 1 < T; t++)
            cr_assert_eq(in[b * T + t + 1], tg[b * T + t], "b=%d t=%d", b, t);
        if (b + 1 < B)
            cr_assert_eq(in[(b + 1) * T], tg[b * T + T - 1], "sequence %d does not continue", b);
    }
    cr_assert_eq(in2[0], tg[B * T - 1], "the next batch does not continue the stream");
    pp_data_state st;
    pp_data_get_state(d, &st);
    cr_assert_eq(st.pos, 2 * B * T);
    cr_assert_eq(st.current, tg2[B * T - 1]);
    pp_data_destroy(d);
}

Test(data, markov_transitions_are_allowed_successors)
{
    enum { V = 128, K = 3, N = 200000 };
    pp_data *d = markov(V, K, 11);
    int32_t *tok = malloc(N * sizeof *tok);
    cr_assert_not_null(tok);
    pp_data_state st;
    pp_data_get_state(d, &st);
    int prev = (int)st.current;
    pp_data_markov_generate(d, tok, N);
    int seen[V] = {0};
    for (int i = 0; i < N; i++) {
        cr_assert(tok[i] >= 0 && tok[i] < V);
        cr_assert_gt(transition(d, K, prev, tok[i]), 0, "transition %d -> %d is not allowed",
                     prev, tok[i]);
        seen[tok[i]] = 1;
        prev = tok[i];
    }
    /* Irreducible: a long enough stream visits every token. */
    for (int v = 0; v < V; v++)
        cr_assert(seen[v], "token %d never visited", v);
    /* Successor lists: k distinct tokens, probabilities positive and summing to 1. */
    for (int v = 0; v < V; v++) {
        int32_t succ[K];
        double prob[K], sum = 0;
        cr_assert_eq(pp_data_markov_successors(d, v, succ, prob), K);
        for (int j = 0; j < K; j++) {
            cr_assert(succ[j] >= 0 && succ[j] < V);
            cr_assert_gt(prob[j], 0);
            sum += prob[j];
            for (int l = 0; l < j; l++)
                cr_assert_neq(succ[j], succ[l], "token %d lists successor %d twice", v, succ[j]);
        }
        cr_assert_float_eq(sum, 1.0, 1e-12);
    }
    cr_assert_eq(pp_data_markov_successors(d, V, NULL, NULL), 0);
    pp_data_destroy(d);
    free(tok);
}

/* The sampler draws each successor with its probability: Pearson's chi-square of the
 * transition counts against n_i * P_ij, with V (k - 1) = 24 degrees of freedom (the visits n_i
 * are given). The bound, df + 6 sqrt(2 df) = 65.6, is exceeded by chance with probability about
 * 1e-7, while a sampler that moves even 1% of a row's mass gives a chi-square in the hundreds. */
Test(data, markov_sampler_matches_transition_probabilities)
{
    enum { V = 8, K = 4, N = 1000000 };
    pp_data *d = markov(V, K, 21);
    double *P = dense_matrix(d, V, K);
    int32_t *tok = malloc(N * sizeof *tok);
    cr_assert_not_null(tok);
    pp_data_state st;
    pp_data_get_state(d, &st);
    int prev = (int)st.current;
    pp_data_markov_generate(d, tok, N);
    static double counts[V][V];
    double visits[V] = {0};
    for (int i = 0; i < N; i++) {
        counts[prev][tok[i]] += 1;
        visits[prev] += 1;
        prev = tok[i];
    }
    double chi2 = 0;
    for (int i = 0; i < V; i++)
        for (int j = 0; j < V; j++) {
            double p = P[(size_t)i * V + j];
            if (p == 0) {
                cr_assert_eq(counts[i][j], 0, "disallowed transition %d -> %d", i, j);
                continue;
            }
            double e = visits[i] * p;
            chi2 += (counts[i][j] - e) * (counts[i][j] - e) / e;
        }
    double df = V * (K - 1);
    cr_log_info("sampler chi-square %.1f on %.0f degrees of freedom", chi2, df);
    cr_assert_lt(chi2, df + 6 * sqrt(2 * df), "chi-square %.1f", chi2);
    free(tok);
    free(P);
    pp_data_destroy(d);
}

/* Tolerance: -ln P(x_{t+1} | x_t) has mean H under the stationary stream; its samples are
 * correlated through the chain, so the standard error comes from 100 batch means of 20000 tokens
 * each (far longer than the chain's mixing time, so the batch means are nearly independent). We
 * allow 5 standard errors: a correct implementation fails about once in 10^6 runs, while a
 * wrong stationary start or wrong sampler shifts the mean by far more. */
Test(data, markov_entropy_rate_matches_empirical_loss)
{
    enum { V = 256, K = 4, NB = 100, PER = 20000 };
    pp_data *d = markov(V, K, 1);
    double H = pp_data_entropy_rate(d);
    double *P = dense_matrix(d, V, K);
    int32_t *tok = malloc(PER * sizeof *tok);
    cr_assert_not_null(tok);
    pp_data_state st;
    pp_data_get_state(d, &st);
    int prev = (int)st.current;
    double sum = 0, sumsq = 0;
    for (int b = 0; b < NB; b++) {
        pp_data_markov_generate(d, tok, PER);
        double s = 0;
        for (int i = 0; i < PER; i++) {
            s -= log(P[(size_t)prev * V + tok[i]]);
            prev = tok[i];
        }
        s /= PER;
        sum += s;
        sumsq += s * s;
    }
    double mean = sum / NB;
    double var = (sumsq - NB * mean * mean) / (NB - 1);
    double se = sqrt(var / NB);
    cr_log_info("V=%d k=%d seed 1: H = %.6f, empirical %.6f, se %.2e", V, K, H, mean, se);
    cr_assert_lt(se, 0.005, "standard error %.3g too large for a meaningful check", se);
    cr_assert_lt(fabs(mean - H), 5 * se, "empirical %.6f vs exact %.6f (se %.2e)", mean, H, se);
    /* Skewed but not trivial: clearly below ln k, clearly above 0. */
    cr_assert(H > 0.6 && H < log(K) - 0.1, "H = %.4f", H);
    free(tok);
    free(P);
    pp_data_destroy(d);
}

Test(data, markov_entropy_rate_matches_dense_solution)
{
    static const struct {
        int V, k;
        uint64_t seed;
    } cases[] = {{2, 2, 1}, {3, 2, 5}, {16, 4, 1}, {16, 2, 2}, {16, 16, 3}, {40, 7, 9}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int V = cases[c].V, k = cases[c].k;
        pp_data *d = markov(V, k, cases[c].seed);
        double *P = dense_matrix(d, V, k);
        double *pi = malloc((size_t)V * sizeof *pi);
        cr_assert_not_null(pi);
        dense_stationary(P, V, pi);
        double h = dense_entropy_rate(P, pi, V);
        cr_assert_float_eq(pp_data_entropy_rate(d), h, 1e-9, "V=%d k=%d: %.12f vs dense %.12f",
                           V, k, pp_data_entropy_rate(d), h);
        free(P);
        free(pi);
        pp_data_destroy(d);
    }
}

/* The V=2 chain by hand: P = [[a, 1-a], [b, 1-b]] has pi = (b, 1-a) / (1 - a + b). */
Test(data, markov_entropy_rate_two_tokens_by_hand)
{
    pp_data *d = markov(2, 2, 42);
    double a = transition(d, 2, 0, 0), b = transition(d, 2, 1, 0);
    double pi0 = b / (1 - a + b), pi1 = 1 - pi0;
    double h0 = -(a * log(a) + (1 - a) * log(1 - a));
    double h1 = -(b * log(b) + (1 - b) * log(1 - b));
    cr_assert_float_eq(pp_data_entropy_rate(d), pi0 * h0 + pi1 * h1, 1e-12);
    pp_data_destroy(d);
}

/* The first input token should follow the stationary distribution of its chain. Over many seeds
 * (each its own chain), the sum of pi_s(x_s) - sum_j pi_s(j)^2 has mean 0 under a stationary
 * start; a uniform start would shift it by sum_j pi_s(j)^2 - 1/V per chain, which for these small
 * skewed chains is dozens of standard deviations in total. Tolerance 5 sigma. */
Test(data, markov_starts_from_stationary_distribution)
{
    enum { V = 4, K = 2, SEEDS = 2000 };
    double stat = 0, var = 0, shift_uniform = 0;
    for (int s = 1; s <= SEEDS; s++) {
        pp_data *d = markov(V, K, (uint64_t)s);
        double *P = dense_matrix(d, V, K);
        double pi[V];
        dense_stationary(P, V, pi);
        pp_data_state st;
        pp_data_get_state(d, &st);
        cr_assert(st.current >= 0 && st.current < V);
        double m2 = 0, m3 = 0;
        for (int j = 0; j < V; j++) {
            m2 += pi[j] * pi[j];
            m3 += pi[j] * pi[j] * pi[j];
        }
        stat += pi[st.current] - m2;
        var += m3 - m2 * m2;
        shift_uniform += m2 - 1.0 / V;
        free(P);
        pp_data_destroy(d);
    }
    double sd = sqrt(var);
    cr_log_info("stationary start: z = %.2f (a uniform start would give z = %.1f)", stat / sd,
                -shift_uniform / sd);
    cr_assert_gt(shift_uniform / sd, 10, "test has no power against a uniform start");
    cr_assert_lt(fabs(stat), 5 * sd, "z = %.2f", stat / sd);
}

Test(data, markov_state_round_trip_reproduces_batches)
{
    enum { B = 4, T = 32, N = B * T };
    pp_data *d = markov(256, 4, 5);
    int32_t in[N], tg[N], in1[N], tg1[N], in2[N], tg2[N];
    pp_data_next_batch(d, B, T, in, tg);
    pp_data_state st;
    pp_data_get_state(d, &st);
    pp_data_next_batch(d, B, T, in1, tg1);
    pp_data_next_batch(d, B, T, in2, tg2);

    /* The same object rewound, and a fresh one as a resumed run would create. */
    pp_data *fresh = markov(256, 4, 5);
    pp_data *targets[2] = {d, fresh};
    for (int i = 0; i < 2; i++) {
        int32_t a[N], b[N];
        cr_assert_eq(pp_data_set_state(targets[i], &st), PP_OK, "%s", pp_error_message());
        pp_data_next_batch(targets[i], B, T, a, b);
        cr_assert_arr_eq(a, in1, sizeof a);
        cr_assert_arr_eq(b, tg1, sizeof b);
        pp_data_next_batch(targets[i], B, T, a, b);
        cr_assert_arr_eq(a, in2, sizeof a);
        cr_assert_arr_eq(b, tg2, sizeof b);
    }
    pp_data_destroy(d);
    pp_data_destroy(fresh);
}

Test(data, markov_set_state_rejects_foreign_state)
{
    pp_data *d = markov(16, 4, 1);
    pp_data_state st;
    pp_data_get_state(d, &st);
    pp_data_state bad = st;
    bad.current = 16;
    cr_assert_eq(pp_data_set_state(d, &bad), PP_ERR_CORRUPT);
    cr_assert_not_null(strstr(pp_error_message(), "current token"), "%s", pp_error_message());
    bad.current = -1;
    cr_assert_eq(pp_data_set_state(d, &bad), PP_ERR_CORRUPT);
    bad = st;
    memset(bad.rng, 0, sizeof bad.rng);
    cr_assert_eq(pp_data_set_state(d, &bad), PP_ERR_CORRUPT);
    cr_assert_not_null(strstr(pp_error_message(), "all zero"), "%s", pp_error_message());
    pp_data_destroy(d);
}

Test(data, markov_fingerprint_and_description)
{
    pp_data *a = markov(256, 4, 1), *a2 = markov(256, 4, 1);
    pp_data *seed = markov(256, 4, 2), *vocab = markov(255, 4, 1), *branch = markov(256, 5, 1);
    cr_assert_eq(pp_data_fingerprint(a), pp_data_fingerprint(a2));
    cr_assert_neq(pp_data_fingerprint(a), pp_data_fingerprint(seed));
    cr_assert_neq(pp_data_fingerprint(a), pp_data_fingerprint(vocab));
    cr_assert_neq(pp_data_fingerprint(a), pp_data_fingerprint(branch));
    const char *desc = pp_data_describe(a);
    cr_assert_not_null(strstr(desc, "markov chain (V=256, k=4, seed 1)"), "%s", desc);
    cr_assert_not_null(strstr(desc, "nats/token"), "%s", desc);
    cr_log_info("%s", desc);
    pp_data *d1337 = markov(256, 4, 1337);
    cr_log_info("%s", pp_data_describe(d1337));
    pp_data_destroy(d1337);
    pp_data_destroy(a);
    pp_data_destroy(a2);
    pp_data_destroy(seed);
    pp_data_destroy(vocab);
    pp_data_destroy(branch);
}

Test(data, markov_rejects_bad_parameters)
{
    static const struct {
        int V, k;
        const char *phrase;
    } cases[] = {
        {1, 2, "vocab"},          {0, 2, "vocab"},          {-5, 2, "vocab"},
        {PP_MAX_VOCAB + 1, 4, "vocab"}, {256, 1, "branching"}, {256, 0, "branching"},
        {256, 257, "branching"},  {PP_MAX_VOCAB, 64, "transitions"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_data *d = (pp_data *)&d; /* must be reset to NULL on failure */
        pp_status st = pp_data_markov_create(cases[i].V, cases[i].k, 1, &d);
        cr_assert_eq(st, PP_ERR_INVALID, "V=%d k=%d accepted", cases[i].V, cases[i].k);
        cr_assert_null(d);
        cr_assert_not_null(strstr(pp_error_message(), cases[i].phrase), "V=%d k=%d: %s",
                           cases[i].V, cases[i].k, pp_error_message());
    }
}

/* ---------------------------------------------------------------------------------------- */
/* Token files                                                                               */
/* ---------------------------------------------------------------------------------------- */

Test(data, tokens_round_trip_each_width_with_wrap_around)
{
    static const struct {
        int width, vocab;
    } cases[] = {{1, 256}, {2, 1000}, {4, 100000}};
    enum { MAXCOUNT = 97, B = 3, T = 8, ROUNDS = 10 };
    for (size_t c = 0; c < 2 * sizeof cases / sizeof cases[0]; c++) {
        /* 97 tokens: an epoch is exactly 12 sequences (12*8 + 1 = 97, the last target is the
         * file's last token); 96 tokens: one short of that, so the 12th sequence wraps. */
        const uint64_t COUNT = c % 2 ? 96 : 97;
        const size_t w = c / 2;
        int32_t tok[MAXCOUNT];
        pp_rng r;
        pp_rng_seed(&r, 100 + c);
        for (uint64_t i = 0; i < COUNT; i++)
            tok[i] = (int32_t)pp_rng_below(&r, (uint64_t)cases[w].vocab);
        tok[0] = cases[w].vocab - 1; /* the largest token survives the round trip */
        char path[128];
        tmp_path(path, sizeof path, "round.tok");
        cr_assert_eq(pp_tokfile_write(path, tok, COUNT, cases[w].width), PP_OK, "%s",
                     pp_error_message());
        pp_data *d = NULL;
        cr_assert_eq(pp_data_tokens_open(path, cases[w].vocab, T, &d), PP_OK, "%s",
                     pp_error_message());
        cr_assert(isnan(pp_data_entropy_rate(d)));
        char want[160];
        snprintf(want, sizeof want, "(%llu tokens, width %d)", (unsigned long long)COUNT,
                 cases[w].width);
        cr_assert_not_null(strstr(pp_data_describe(d), want), "%s", pp_data_describe(d));
        cr_assert_not_null(strstr(pp_data_describe(d), path));

        /* 30 sequences: two wrap-arounds. */
        uint64_t pos = 0;
        for (int round = 0; round < ROUNDS; round++) {
            int32_t in[B * T], tg[B * T];
            pp_data_next_batch(d, B, T, in, tg);
            for (int b = 0; b < B; b++) {
                if (pos + T + 1 > COUNT)
                    pos = 0;
                for (int t = 0; t < T; t++) {
                    cr_assert_eq(in[b * T + t], tok[pos + t], "width %d round %d b %d t %d",
                                 cases[w].width, round, b, t);
                    cr_assert_eq(tg[b * T + t], tok[pos + t + 1]);
                }
                pos += T;
            }
        }
        pp_data_destroy(d);
    }
}

Test(data, tokens_state_round_trip_and_validation)
{
    enum { COUNT = 50, T = 7 };
    int32_t tok[COUNT];
    for (int i = 0; i < COUNT; i++)
        tok[i] = (i * 37) % 50;
    char path[128];
    tmp_path(path, sizeof path, "state.tok");
    cr_assert_eq(pp_tokfile_write(path, tok, COUNT, 1), PP_OK, "%s", pp_error_message());
    pp_data *d = NULL, *e = NULL;
    cr_assert_eq(pp_data_tokens_open(path, 50, T, &d), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_data_tokens_open(path, 50, T, &e), PP_OK, "%s", pp_error_message());
    int32_t in[2 * T], tg[2 * T], in2[2 * T], tg2[2 * T];
    pp_data_next_batch(d, 2, T, in, tg);
    pp_data_state st;
    pp_data_get_state(d, &st);
    cr_assert_eq(st.pos, 2 * T);
    pp_data_next_batch(d, 2, T, in, tg);
    cr_assert_eq(pp_data_set_state(e, &st), PP_OK, "%s", pp_error_message());
    pp_data_next_batch(e, 2, T, in2, tg2);
    cr_assert_arr_eq(in, in2, sizeof in);
    cr_assert_arr_eq(tg, tg2, sizeof tg);

    st.pos = COUNT;
    cr_assert_eq(pp_data_set_state(e, &st), PP_ERR_CORRUPT);
    cr_assert_not_null(strstr(pp_error_message(), "position 50"), "%s", pp_error_message());
    pp_data_destroy(d);
    pp_data_destroy(e);
}

Test(data, tokens_fingerprint_follows_contents)
{
    int32_t a[20], b[20];
    for (int i = 0; i < 20; i++)
        a[i] = b[i] = i;
    b[19] = 0;
    char pa[128], pa2[128], pb[128];
    tmp_path(pa, sizeof pa, "a.tok");
    tmp_path(pa2, sizeof pa2, "a_copy.tok");
    tmp_path(pb, sizeof pb, "b.tok");
    cr_assert_eq(pp_tokfile_write(pa, a, 20, 2), PP_OK);
    cr_assert_eq(pp_tokfile_write(pa2, a, 20, 2), PP_OK);
    cr_assert_eq(pp_tokfile_write(pb, b, 20, 2), PP_OK);
    pp_data *da = NULL, *da2 = NULL, *db = NULL;
    cr_assert_eq(pp_data_tokens_open(pa, 32, 4, &da), PP_OK);
    cr_assert_eq(pp_data_tokens_open(pa2, 32, 4, &da2), PP_OK);
    cr_assert_eq(pp_data_tokens_open(pb, 32, 4, &db), PP_OK);
    pp_data *m = markov(32, 4, 1);
    cr_assert_eq(pp_data_fingerprint(da), pp_data_fingerprint(da2), "same contents, new path");
    cr_assert_neq(pp_data_fingerprint(da), pp_data_fingerprint(db));
    cr_assert_neq(pp_data_fingerprint(da), pp_data_fingerprint(m));
    pp_data_destroy(da);
    pp_data_destroy(da2);
    pp_data_destroy(db);
    pp_data_destroy(m);
}

/* Writes raw bytes, bypassing pp_tokfile_write, to build malformed files. */
static void write_raw(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    if (len)
        cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int b = 0; b < 4; b++)
        p[b] = (unsigned char)(v >> (8 * b));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

/* A valid file image: 24-byte header and `count` 1-byte tokens i % 10; cases then damage it. */
static size_t good_image(unsigned char *buf, uint64_t count)
{
    memcpy(buf, "PPTK", 4);
    put_u32(buf + 4, 1);
    put_u32(buf + 8, 1);
    put_u32(buf + 12, 0);
    put_u64(buf + 16, count);
    for (uint64_t i = 0; i < count; i++)
        buf[24 + i] = (unsigned char)(i % 10);
    return 24 + count;
}

enum { BAD_VOCAB = 10, BAD_T = 8, BAD_COUNT = 40 };

typedef struct bad_file_case {
    const char *name;
    pp_status status;
    const char *phrase; /* must appear in the error message */
} bad_file_case;

/* Damages the image for case i; returns the length to write. */
static size_t damage(int i, unsigned char *buf)
{
    size_t len = good_image(buf, BAD_COUNT);
    switch (i) {
    case 0: return 0;                                       /* empty */
    case 1: return 10;                                      /* shorter than the header */
    case 2: buf[0] = 'X'; return len;                       /* bad magic */
    case 3: put_u32(buf + 4, 2); return len;                /* version */
    case 4: put_u32(buf + 8, 3); return len;                /* width */
    case 5: put_u32(buf + 12, 1); return len;               /* flags */
    case 6: return len - 1;                                 /* truncated by one byte */
    case 7: buf[len] = 0; return len + 1;                   /* one trailing byte */
    case 8: buf[24 + 17] = BAD_VOCAB; return len;           /* token == vocab */
    case 9: return good_image(buf, BAD_T);                  /* T tokens: one short */
    case 10: put_u64(buf + 16, UINT64_MAX / 2); return len; /* absurd count */
    default: return len;
    }
}

static const bad_file_case bad_cases[] = {
    {"empty", PP_ERR_CORRUPT, "empty"},
    {"short header", PP_ERR_CORRUPT, "shorter than the 24-byte header"},
    {"bad magic", PP_ERR_CORRUPT, "bad magic"},
    {"bad version", PP_ERR_CORRUPT, "unsupported version 2"},
    {"bad width", PP_ERR_CORRUPT, "bad token width 3"},
    {"nonzero flags", PP_ERR_CORRUPT, "nonzero flags"},
    {"truncated", PP_ERR_CORRUPT, "truncated: 63 bytes, expected 64"},
    {"trailing byte", PP_ERR_CORRUPT, "trailing bytes: 65 bytes, expected 64"},
    {"out of vocabulary", PP_ERR_INVALID, "token 17 has value 10, outside the vocabulary"},
    {"too few tokens", PP_ERR_INVALID, "too short for one sequence"},
    {"absurd count", PP_ERR_CORRUPT, "truncated"},
};

Test(data, tokens_open_rejects_each_bad_file)
{
    for (int i = 0; i < (int)(sizeof bad_cases / sizeof bad_cases[0]); i++) {
        unsigned char buf[256];
        char path[128];
        tmp_path(path, sizeof path, "bad.tok");
        size_t len = damage(i, buf);
        write_raw(path, buf, len);
        pp_data *d = (pp_data *)&d; /* must be reset to NULL on failure */
        pp_status st = pp_data_tokens_open(path, BAD_VOCAB, BAD_T, &d);
        cr_assert_eq(st, bad_cases[i].status, "%s: status %s, message: %s", bad_cases[i].name,
                     pp_status_name(st), pp_error_message());
        cr_assert_null(d, "%s", bad_cases[i].name);
        const char *msg = pp_error_message();
        cr_assert_not_null(strstr(msg, bad_cases[i].phrase), "%s: message \"%s\" lacks \"%s\"",
                           bad_cases[i].name, msg, bad_cases[i].phrase);
        cr_assert_not_null(strstr(msg, path), "%s: message does not name the file: %s",
                           bad_cases[i].name, msg);
    }
    /* The undamaged image opens, so each case above fails for its own reason. */
    unsigned char buf[256];
    char path[128];
    tmp_path(path, sizeof path, "good.tok");
    write_raw(path, buf, good_image(buf, BAD_COUNT));
    pp_data *d = NULL;
    cr_assert_eq(pp_data_tokens_open(path, BAD_VOCAB, BAD_T, &d), PP_OK, "%s",
                 pp_error_message());
    pp_data_destroy(d);
}

Test(data, tokens_open_rejects_missing_file)
{
    char path[128];
    tmp_path(path, sizeof path, "does_not_exist.tok");
    pp_data *d = (pp_data *)&d;
    cr_assert_eq(pp_data_tokens_open(path, 256, 8, &d), PP_ERR_IO);
    cr_assert_null(d);
    cr_assert_not_null(strstr(pp_error_message(), "cannot read token file"), "%s",
                       pp_error_message());
    cr_assert_not_null(strstr(pp_error_message(), path), "%s", pp_error_message());
}

Test(data, tokfile_write_rejects_tokens_that_do_not_fit)
{
    char path[128];
    tmp_path(path, sizeof path, "w.tok");
    int32_t ok[3] = {0, 255, 7};
    int32_t big1[3] = {0, 256, 7};
    int32_t big2[3] = {65536, 0, 0};
    int32_t neg[3] = {0, 1, -1};
    cr_assert_eq(pp_tokfile_write(path, ok, 3, 1), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_tokfile_write(path, big1, 3, 1), PP_ERR_INVALID);
    cr_assert_not_null(strstr(pp_error_message(), "token 1 = 256 does not fit width 1"), "%s",
                       pp_error_message());
    cr_assert_eq(pp_tokfile_write(path, big2, 3, 2), PP_ERR_INVALID);
    cr_assert_not_null(strstr(pp_error_message(), "does not fit width 2"), "%s",
                       pp_error_message());
    cr_assert_eq(pp_tokfile_write(path, big2, 3, 4), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_tokfile_write(path, neg, 3, 4), PP_ERR_INVALID);
    cr_assert_eq(pp_tokfile_write(path, ok, 3, 3), PP_ERR_INVALID);
    cr_assert_not_null(strstr(pp_error_message(), "width 3"), "%s", pp_error_message());
    /* A rejected write leaves the previous file in place. */
    pp_data *d = NULL;
    cr_assert_eq(pp_data_tokens_open(path, 70000, 2, &d), PP_OK, "%s", pp_error_message());
    int32_t in[2], tg[2];
    pp_data_next_batch(d, 1, 2, in, tg);
    cr_assert_eq(in[0], 65536);
    pp_data_destroy(d);
}
