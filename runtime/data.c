/* data.c: training data for pptrain: the synthetic Markov corpus (whose entropy rate is the
 * best loss any model can reach) and token files (docs/token-file.md). Called by the trainer,
 * pptrain and the tests; the format and the construction are explained in docs/data.md. */
#include "pp_runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PP_DATA_MARKOV = 1, PP_DATA_TOKENS = 2 };

/* Token file header: magic, version, width, flags (4 bytes each), count (8 bytes). */
enum { PP_TOKFILE_HEADER_BYTES = 24, PP_TOKFILE_VERSION = 1 };
static const unsigned char PP_TOKFILE_MAGIC[4] = {'P', 'P', 'T', 'K'};

/* The chain's tables take 20 bytes per edge; 2^24 edges (320 MiB) is far beyond what a
 * first-order corpus for a small model needs, and a typo in V or k should not exhaust memory. */
#define PP_MARKOV_MAX_EDGES ((int64_t)1 << 24)

/* A floor on the random edge weights (before normalising) keeps every edge, the cycle edge
 * included, at a clearly positive probability: irreducibility then holds in floating point too,
 * and -ln P stays moderate for every transition. */
#define PP_MARKOV_MIN_WEIGHT 1e-3

/* Power iteration stops when the L1 change of pi falls below this; the cap only guards against a
 * chain that mixes pathologically slowly, which the construction does not produce. */
#define PP_MARKOV_PI_TOL 1e-13
#define PP_MARKOV_PI_MAX_ITERS 200000

struct pp_data {
    int kind;
    char *description;
    uint64_t fingerprint;

    /* Markov corpus: token i's successors are succ[i*k .. i*k+k-1] with probabilities prob[] and
     * cumulative probabilities cum[] (the last one of each row exactly 1). */
    int vocab;
    int branching;
    uint64_t seed;
    int32_t *succ;
    double *prob;
    double *cum;
    double entropy_rate;
    pp_rng rng;
    int32_t current;

    /* Token file, loaded whole as int32. Files here are small; large corpora would want mmap of
     * the file and conversion per batch instead. */
    int32_t *tokens;
    uint64_t count;
    int width;

    uint64_t pos; /* Markov: tokens generated; token file: index of the next input token */
};

/* FNV-1a over a few 64-bit words: enough to tell data sources apart, and stable across builds. */
static uint64_t fingerprint_words(const uint64_t *w, int n)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 8; b++) {
            h ^= (w[i] >> (8 * b)) & 0xff;
            h *= 0x100000001b3ULL;
        }
    return h;
}

static uint32_t read_u32_le(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t read_u64_le(const unsigned char *p)
{
    return (uint64_t)read_u32_le(p) | (uint64_t)read_u32_le(p + 4) << 32;
}

static void write_u32_le(unsigned char *p, uint32_t v)
{
    for (int b = 0; b < 4; b++)
        p[b] = (unsigned char)(v >> (8 * b));
}

static void write_u64_le(unsigned char *p, uint64_t v)
{
    write_u32_le(p, (uint32_t)v);
    write_u32_le(p + 4, (uint32_t)(v >> 32));
}

void pp_data_destroy(pp_data *d)
{
    if (!d)
        return;
    free(d->description);
    pp_free(d->succ);
    pp_free(d->prob);
    pp_free(d->cum);
    pp_free(d->tokens);
    pp_free(d);
}

/* ---------------------------------------------------------------------------------------- */
/* Markov corpus                                                                             */
/* ---------------------------------------------------------------------------------------- */

/* Moves the token at position p of the scratch array to position j (a swap), recording p so the
 * swaps can be undone in reverse order and the array returns to the identity for the next row. */
static void scratch_swap(int32_t *idx, int32_t *where, int j, int p)
{
    int32_t a = idx[j], b = idx[p];
    idx[j] = b;
    idx[p] = a;
    where[b] = j;
    where[a] = p;
}

/* Chooses the successors and probabilities of every token. Irreducible: successor 0 of every
 * token is its next token on a random cyclic permutation of all V tokens, so every token reaches
 * every other. Aperiodic: the first token of that permutation also has itself as a successor; a
 * self-loop is a cycle of length 1, so the gcd of cycle lengths through it is 1, and in an
 * irreducible chain all states share one period. The other successors are distinct tokens drawn
 * uniformly (partial Fisher-Yates, O(k) per token), and the weights are exponential draws, so a
 * row's probabilities are Dirichlet(1, ..., 1): clearly skewed (for k = 4 the mean row entropy is
 * 1/2 + 1/3 + 1/4 = 1.083 nats against ln 4 = 1.386) yet with no negligible successor. */
static pp_status markov_build(pp_data *d, pp_rng *build)
{
    const int V = d->vocab, k = d->branching;
    pp_status st = PP_OK;
    int32_t *perm = pp_alloc((size_t)V * sizeof *perm);
    int32_t *rank = pp_alloc((size_t)V * sizeof *rank);
    int32_t *idx = pp_alloc((size_t)V * sizeof *idx);
    int32_t *where = pp_alloc((size_t)V * sizeof *where);
    int32_t *undo = pp_alloc((size_t)k * sizeof *undo);
    if (!perm || !rank || !idx || !where || !undo) {
        st = PP_ERR(PP_ERR_NOMEM, "markov chain (V=%d, k=%d): out of memory for construction",
                    V, k);
        goto cleanup;
    }

    for (int i = 0; i < V; i++)
        perm[i] = idx[i] = where[i] = i;
    for (int i = V - 1; i > 0; i--) {
        int j = (int)pp_rng_below(build, (uint64_t)i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int i = 0; i < V; i++)
        rank[perm[i]] = i;

    for (int i = 0; i < V; i++) {
        int j = 0;
        int32_t forced[2];
        int nforced = 0;
        forced[nforced++] = perm[(rank[i] + 1) % V];
        if (i == perm[0])
            forced[nforced++] = i;
        for (; j < nforced; j++) {
            undo[j] = where[forced[j]];
            scratch_swap(idx, where, j, undo[j]);
        }
        for (; j < k; j++) {
            undo[j] = j + (int)pp_rng_below(build, (uint64_t)(V - j));
            scratch_swap(idx, where, j, undo[j]);
        }

        int32_t *s = d->succ + (size_t)i * k;
        double *p = d->prob + (size_t)i * k, *c = d->cum + (size_t)i * k;
        double total = 0;
        for (j = 0; j < k; j++) {
            s[j] = idx[j];
            double w = -log(1.0 - pp_rng_uniform(build));
            p[j] = w < PP_MARKOV_MIN_WEIGHT ? PP_MARKOV_MIN_WEIGHT : w;
            total += p[j];
        }
        double acc = 0;
        for (j = 0; j < k; j++) {
            p[j] /= total;
            acc += p[j];
            c[j] = acc;
        }
        /* Sampling compares u < cum with u < 1, so the last bin must end at exactly 1. */
        c[k - 1] = 1.0;

        for (j = k - 1; j >= 0; j--)
            scratch_swap(idx, where, j, undo[j]);
    }

cleanup:
    pp_free(perm);
    pp_free(rank);
    pp_free(idx);
    pp_free(where);
    pp_free(undo);
    return st;
}

/* Stationary distribution by power iteration on the lazy chain (P + I) / 2: it has the same
 * stationary distribution as P, and its self-loops of weight 1/2 make convergence monotone
 * whatever the spectrum of P. */
static pp_status markov_stationary(const pp_data *d, double *pi, double *next)
{
    const int V = d->vocab, k = d->branching;
    double change = 0;
    for (int i = 0; i < V; i++)
        pi[i] = 1.0 / V;
    for (int iter = 0; iter < PP_MARKOV_PI_MAX_ITERS; iter++) {
        for (int i = 0; i < V; i++)
            next[i] = 0.5 * pi[i];
        for (int i = 0; i < V; i++) {
            const int32_t *s = d->succ + (size_t)i * k;
            const double *p = d->prob + (size_t)i * k;
            double half = 0.5 * pi[i];
            for (int j = 0; j < k; j++)
                next[s[j]] += half * p[j];
        }
        /* Renormalising stops rounding from drifting the total away from 1. */
        double total = 0;
        for (int i = 0; i < V; i++)
            total += next[i];
        change = 0;
        for (int i = 0; i < V; i++) {
            next[i] /= total;
            change += fabs(next[i] - pi[i]);
            pi[i] = next[i];
        }
        if (change < PP_MARKOV_PI_TOL)
            return PP_OK;
    }
    return PP_ERR(PP_ERR_RUNTIME,
                  "markov chain (V=%d, k=%d, seed %llu): stationary distribution did not "
                  "converge in %d iterations (last L1 change %.3g)",
                  V, k, (unsigned long long)d->seed, PP_MARKOV_PI_MAX_ITERS, change);
}

/* One step of the chain from `from`: the successor whose cumulative bin holds u. */
static int32_t markov_step(pp_data *d, int32_t from)
{
    const int k = d->branching;
    const double *c = d->cum + (size_t)from * k;
    double u = pp_rng_uniform(&d->rng);
    int lo = 0, hi = k - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (u < c[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return d->succ[(size_t)from * k + lo];
}

pp_status pp_data_markov_create(int vocab, int branching, uint64_t seed, pp_data **out)
{
    pp_status st = PP_OK;
    pp_data *d = NULL;
    double *pi = NULL, *next = NULL;
    if (!out)
        return PP_ERR(PP_ERR_INVALID, "pp_data_markov_create: out is NULL");
    *out = NULL;
    if (vocab < 2 || vocab > PP_MAX_VOCAB)
        return PP_ERR(PP_ERR_INVALID, "markov chain: vocab %d out of range [2, %d]", vocab,
                      PP_MAX_VOCAB);
    if (branching < 2 || branching > vocab)
        return PP_ERR(PP_ERR_INVALID,
                      "markov chain: branching %d out of range [2, vocab=%d] (each token needs "
                      "at least 2 distinct successors; 1 would make the chain a periodic cycle)",
                      branching, vocab);
    if ((int64_t)vocab * branching > PP_MARKOV_MAX_EDGES)
        return PP_ERR(PP_ERR_INVALID,
                      "markov chain: vocab %d x branching %d = %lld transitions, more than the "
                      "limit of %lld",
                      vocab, branching, (long long)vocab * branching,
                      (long long)PP_MARKOV_MAX_EDGES);

    d = pp_alloc(sizeof *d);
    if (!d)
        return PP_ERR(PP_ERR_NOMEM, "markov chain: out of memory");
    d->kind = PP_DATA_MARKOV;
    d->vocab = vocab;
    d->branching = branching;
    d->seed = seed;
    size_t edges = (size_t)vocab * (size_t)branching;
    d->succ = pp_alloc(edges * sizeof *d->succ);
    d->prob = pp_alloc(edges * sizeof *d->prob);
    d->cum = pp_alloc(edges * sizeof *d->cum);
    pi = pp_alloc((size_t)vocab * sizeof *pi);
    next = pp_alloc((size_t)vocab * sizeof *next);
    if (!d->succ || !d->prob || !d->cum || !pi || !next) {
        st = PP_ERR(PP_ERR_NOMEM, "markov chain (V=%d, k=%d): out of memory for %zu transitions",
                    vocab, branching, edges);
        goto cleanup;
    }

    /* The chain and the token stream use separate generators, so the chain's parameters do not
     * depend on how the stream is read, and both follow from the seed alone. */
    pp_rng build;
    pp_rng_seed(&build, seed);
    pp_rng_seed(&d->rng, seed ^ 0xd1b54a32d192ed03ULL);

    st = markov_build(d, &build);
    if (st != PP_OK)
        goto cleanup;
    st = markov_stationary(d, pi, next);
    if (st != PP_OK)
        goto cleanup;

    double h = 0;
    for (int i = 0; i < vocab; i++) {
        const double *p = d->prob + (size_t)i * branching;
        double row = 0;
        for (int j = 0; j < branching; j++)
            row -= p[j] * log(p[j]);
        h += pi[i] * row;
    }
    d->entropy_rate = h;

    /* Starting from pi makes the stream stationary from its first token, so every position of
     * every batch has the same best achievable loss, H. */
    double u = pp_rng_uniform(&d->rng), acc = 0;
    d->current = (int32_t)(vocab - 1);
    for (int i = 0; i < vocab; i++) {
        acc += pi[i];
        if (u < acc) {
            d->current = i;
            break;
        }
    }

    char buf[160];
    snprintf(buf, sizeof buf, "markov chain (V=%d, k=%d, seed %llu), entropy rate %.4f nats/token",
             vocab, branching, (unsigned long long)seed, h);
    d->description = strdup(buf);
    if (!d->description) {
        st = PP_ERR(PP_ERR_NOMEM, "markov chain: out of memory");
        goto cleanup;
    }
    uint64_t words[4] = {PP_DATA_MARKOV, (uint64_t)vocab, (uint64_t)branching, seed};
    d->fingerprint = fingerprint_words(words, 4);

cleanup:
    pp_free(pi);
    pp_free(next);
    if (st != PP_OK) {
        pp_data_destroy(d);
        return st;
    }
    *out = d;
    return PP_OK;
}

int pp_data_markov_successors(const pp_data *d, int token, int32_t *succ, double *prob)
{
    if (!d || d->kind != PP_DATA_MARKOV || token < 0 || token >= d->vocab)
        return 0;
    const int k = d->branching;
    if (succ)
        memcpy(succ, d->succ + (size_t)token * k, (size_t)k * sizeof *succ);
    if (prob)
        memcpy(prob, d->prob + (size_t)token * k, (size_t)k * sizeof *prob);
    return k;
}

void pp_data_markov_generate(pp_data *d, int32_t *tokens, uint64_t count)
{
    if (count == 0)
        return;
    if (d->kind != PP_DATA_MARKOV) {
        /* Not a generator: give defined output rather than leave the caller's buffer as is. */
        memset(tokens, 0, count * sizeof *tokens);
        return;
    }
    int32_t cur = d->current;
    for (uint64_t i = 0; i < count; i++) {
        cur = markov_step(d, cur);
        tokens[i] = cur;
    }
    d->current = cur;
    d->pos += count;
}

/* ---------------------------------------------------------------------------------------- */
/* Token files                                                                               */
/* ---------------------------------------------------------------------------------------- */

/* Checks the header and size of a token file image; on success returns width and count. */
static pp_status tokfile_check_header(const char *path, const unsigned char *buf, size_t len,
                                      int *width_out, uint64_t *count_out)
{
    if (len == 0)
        return PP_ERR(PP_ERR_CORRUPT,
                      "token file %s: file is empty, expected a %d-byte header and tokens", path,
                      PP_TOKFILE_HEADER_BYTES);
    if (len < PP_TOKFILE_HEADER_BYTES)
        return PP_ERR(PP_ERR_CORRUPT,
                      "token file %s: %zu bytes, shorter than the %d-byte header", path, len,
                      PP_TOKFILE_HEADER_BYTES);
    if (memcmp(buf, PP_TOKFILE_MAGIC, 4) != 0)
        return PP_ERR(PP_ERR_CORRUPT,
                      "token file %s: bad magic %02x %02x %02x %02x, expected \"PPTK\" (not a "
                      "token file?)",
                      path, buf[0], buf[1], buf[2], buf[3]);
    uint32_t version = read_u32_le(buf + 4);
    uint32_t width = read_u32_le(buf + 8);
    uint32_t flags = read_u32_le(buf + 12);
    uint64_t count = read_u64_le(buf + 16);
    if (version != PP_TOKFILE_VERSION)
        return PP_ERR(PP_ERR_CORRUPT,
                      "token file %s: unsupported version %u (this build reads version %d)", path,
                      version, PP_TOKFILE_VERSION);
    if (width != 1 && width != 2 && width != 4)
        return PP_ERR(PP_ERR_CORRUPT, "token file %s: bad token width %u (must be 1, 2 or 4)",
                      path, width);
    if (flags != 0)
        return PP_ERR(PP_ERR_CORRUPT,
                      "token file %s: nonzero flags 0x%x (reserved, must be 0 in version %d)",
                      path, flags, PP_TOKFILE_VERSION);
    /* A count so large that the expected size overflows cannot match any real file. */
    uint64_t payload = (uint64_t)len - PP_TOKFILE_HEADER_BYTES;
    if (count > (UINT64_MAX - PP_TOKFILE_HEADER_BYTES) / width)
        return PP_ERR(PP_ERR_CORRUPT,
                      "token file %s: truncated: %zu bytes, but the header claims %llu tokens "
                      "of width %u",
                      path, len, (unsigned long long)count, width);
    uint64_t expected = PP_TOKFILE_HEADER_BYTES + count * width;
    if (count * width != payload)
        return PP_ERR(PP_ERR_CORRUPT,
                      "token file %s: %s: %zu bytes, expected %llu (%d-byte header + %llu "
                      "tokens of width %u)",
                      path, count * width > payload ? "truncated" : "trailing bytes", len,
                      (unsigned long long)expected, PP_TOKFILE_HEADER_BYTES,
                      (unsigned long long)count, width);
    *width_out = (int)width;
    *count_out = count;
    return PP_OK;
}

pp_status pp_data_tokens_open(const char *path, int vocab, int seq_len, pp_data **out)
{
    pp_status st = PP_OK;
    char *buf = NULL;
    size_t len = 0;
    pp_data *d = NULL;
    if (!out || !path)
        return PP_ERR(PP_ERR_INVALID, "pp_data_tokens_open: path or out is NULL");
    *out = NULL;
    if (vocab < 1 || vocab > PP_MAX_VOCAB)
        return PP_ERR(PP_ERR_INVALID, "token file %s: vocab %d out of range [1, %d]", path, vocab,
                      PP_MAX_VOCAB);
    if (seq_len < 1 || seq_len > PP_MAX_SEQ)
        return PP_ERR(PP_ERR_INVALID, "token file %s: seq_len %d out of range [1, %d]", path,
                      seq_len, PP_MAX_SEQ);

    st = pp_read_file(path, &buf, &len);
    if (st != PP_OK)
        return pp_error_wrap(st, "cannot read token file");

    const unsigned char *ubuf = (const unsigned char *)buf;
    int width = 0;
    uint64_t count = 0;
    st = tokfile_check_header(path, ubuf, len, &width, &count);
    if (st != PP_OK)
        goto cleanup;

    d = pp_alloc(sizeof *d);
    if (d)
        d->tokens = pp_alloc(count ? count * sizeof *d->tokens : 1);
    if (!d || !d->tokens) {
        st = PP_ERR(PP_ERR_NOMEM, "token file %s: out of memory for %llu tokens", path,
                    (unsigned long long)count);
        goto cleanup;
    }
    const unsigned char *p = ubuf + PP_TOKFILE_HEADER_BYTES;
    for (uint64_t i = 0; i < count; i++, p += width) {
        uint32_t v = width == 1 ? p[0]
                     : width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8
                                  : read_u32_le(p);
        if (v >= (uint32_t)vocab) {
            st = PP_ERR(PP_ERR_INVALID,
                        "token file %s: token %llu has value %u, outside the vocabulary "
                        "(vocab_size %d)",
                        path, (unsigned long long)i, v, vocab);
            goto cleanup;
        }
        d->tokens[i] = (int32_t)v;
    }
    if (count < (uint64_t)seq_len + 1) {
        st = PP_ERR(PP_ERR_INVALID,
                    "token file %s: too short for one sequence: %llu tokens, need at least "
                    "seq_len + 1 = %d",
                    path, (unsigned long long)count, seq_len + 1);
        goto cleanup;
    }

    d->kind = PP_DATA_TOKENS;
    d->vocab = vocab;
    d->count = count;
    d->width = width;
    size_t dlen = strlen(path) + 80;
    d->description = malloc(dlen);
    if (!d->description) {
        st = PP_ERR(PP_ERR_NOMEM, "token file %s: out of memory", path);
        goto cleanup;
    }
    snprintf(d->description, dlen, "token file %s (%llu tokens, width %d)", path,
             (unsigned long long)count, width);
    /* Contents, not path: a moved or copied file is the same data, an edited one is not. */
    uint64_t words[3] = {PP_DATA_TOKENS, pp_crc32c(0, buf, len), count};
    d->fingerprint = fingerprint_words(words, 3);

cleanup:
    free(buf);
    if (st != PP_OK) {
        pp_data_destroy(d);
        return st;
    }
    *out = d;
    return PP_OK;
}

pp_status pp_tokfile_write(const char *path, const int32_t *tokens, uint64_t count, int width)
{
    if (!path || (!tokens && count > 0))
        return PP_ERR(PP_ERR_INVALID, "pp_tokfile_write: path or tokens is NULL");
    if (width != 1 && width != 2 && width != 4)
        return PP_ERR(PP_ERR_INVALID, "token file %s: bad token width %d (must be 1, 2 or 4)",
                      path, width);
    uint64_t limit = width == 4 ? (uint64_t)INT32_MAX : ((uint64_t)1 << (8 * width)) - 1;
    for (uint64_t i = 0; i < count; i++)
        if (tokens[i] < 0 || (uint64_t)tokens[i] > limit)
            return PP_ERR(PP_ERR_INVALID,
                          "token file %s: token %llu = %d does not fit width %d (range 0..%llu)",
                          path, (unsigned long long)i, tokens[i], width,
                          (unsigned long long)limit);
    if (count > (SIZE_MAX - PP_TOKFILE_HEADER_BYTES) / (size_t)width)
        return PP_ERR(PP_ERR_INVALID, "token file %s: %llu tokens is too many", path,
                      (unsigned long long)count);

    size_t len = PP_TOKFILE_HEADER_BYTES + (size_t)count * (size_t)width;
    unsigned char *buf = malloc(len);
    if (!buf)
        return PP_ERR(PP_ERR_NOMEM, "token file %s: out of memory for %zu bytes", path, len);
    memcpy(buf, PP_TOKFILE_MAGIC, 4);
    write_u32_le(buf + 4, PP_TOKFILE_VERSION);
    write_u32_le(buf + 8, (uint32_t)width);
    write_u32_le(buf + 12, 0);
    write_u64_le(buf + 16, count);
    unsigned char *p = buf + PP_TOKFILE_HEADER_BYTES;
    for (uint64_t i = 0; i < count; i++, p += width)
        for (int b = 0; b < width; b++)
            p[b] = (unsigned char)((uint32_t)tokens[i] >> (8 * b));
    pp_status st = pp_write_file_atomic(path, buf, len);
    free(buf);
    return st == PP_OK ? PP_OK : pp_error_wrap(st, "cannot write token file");
}

/* ---------------------------------------------------------------------------------------- */
/* Common interface                                                                          */
/* ---------------------------------------------------------------------------------------- */

void pp_data_next_batch(pp_data *d, int B, int T, int32_t *inputs, int32_t *targets)
{
    for (int b = 0; b < B; b++) {
        int32_t *in = inputs + (size_t)b * T, *tg = targets + (size_t)b * T;
        if (d->kind == PP_DATA_MARKOV) {
            int32_t cur = d->current;
            for (int t = 0; t < T; t++) {
                in[t] = cur;
                cur = markov_step(d, cur);
                tg[t] = cur;
            }
            d->current = cur;
            d->pos += (uint64_t)T;
            continue;
        }
        /* An epoch ends when the next sequence and its last target no longer fit. */
        if (d->pos + (uint64_t)T + 1 > d->count)
            d->pos = 0;
        if ((uint64_t)T + 1 <= d->count) {
            memcpy(in, d->tokens + d->pos, (size_t)T * sizeof *in);
            memcpy(tg, d->tokens + d->pos + 1, (size_t)T * sizeof *tg);
        } else {
            /* T beyond the seq_len checked at open: the file is shorter than one sequence, so
             * read it cyclically rather than past its end. */
            for (int t = 0; t < T; t++) {
                in[t] = d->tokens[(d->pos + (uint64_t)t) % d->count];
                tg[t] = d->tokens[(d->pos + (uint64_t)t + 1) % d->count];
            }
        }
        d->pos = (d->pos + (uint64_t)T) % d->count;
    }
}

double pp_data_entropy_rate(const pp_data *d)
{
    return d->kind == PP_DATA_MARKOV ? d->entropy_rate : NAN;
}

const char *pp_data_describe(const pp_data *d)
{
    return d->description;
}

uint64_t pp_data_fingerprint(const pp_data *d)
{
    return d->fingerprint;
}

void pp_data_get_state(const pp_data *d, pp_data_state *st)
{
    memset(st, 0, sizeof *st);
    st->pos = d->pos;
    if (d->kind == PP_DATA_MARKOV) {
        memcpy(st->rng, d->rng.s, sizeof st->rng);
        st->current = d->current;
    } else {
        st->current = -1;
    }
}

pp_status pp_data_set_state(pp_data *d, const pp_data_state *st)
{
    if (d->kind == PP_DATA_MARKOV) {
        if (st->current < 0 || st->current >= d->vocab)
            return PP_ERR(PP_ERR_CORRUPT,
                          "data state: current token %lld outside the markov chain's vocabulary "
                          "[0, %d)",
                          (long long)st->current, d->vocab);
        /* xoshiro's all-zero state is a fixed point no seeding produces: a zeroed record. */
        if ((st->rng[0] | st->rng[1] | st->rng[2] | st->rng[3]) == 0)
            return PP_ERR(PP_ERR_CORRUPT,
                          "data state: generator state is all zero, not a saved markov state");
        memcpy(d->rng.s, st->rng, sizeof d->rng.s);
        d->current = (int32_t)st->current;
        d->pos = st->pos;
        return PP_OK;
    }
    if (st->pos >= d->count)
        return PP_ERR(PP_ERR_CORRUPT,
                      "data state: position %llu is beyond the token file's %llu tokens",
                      (unsigned long long)st->pos, (unsigned long long)d->count);
    d->pos = st->pos;
    return PP_OK;
}
