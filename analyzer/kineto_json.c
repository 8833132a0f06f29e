/* kineto_json.c: the streaming JSON tokenizer of the Kineto importer (kineto_json.h). The input
 * is read in chunks, through zlib's gzread for files (it reads uncompressed files as they are),
 * so a trace of any size takes a fixed amount of memory. */
#include "kineto_json.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

enum { CHUNK = 256 * 1024, NUM_CAP = 64 };

#if defined(__SSE2__)
/* Which of the 16 bytes of v end a string's plain run (a quote or a backslash), a bit each: the
 * test string_run16, key_fast and scan_string share. */
static inline unsigned quote_or_backslash16(__m128i v)
{
    return (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                    _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
}
#endif

struct kj_lexer {
    gzFile gz;              /* NULL for a buffer */
    const uint8_t *mem;
    size_t mem_len;
    uint8_t *buf;
    size_t pos, len;        /* buf[pos..len) unread */
    uint64_t base;          /* input offset of buf[0] */
    int eof;
    char str[KJ_STR_CAP + 1];
    size_t str_len;
    uint64_t truncated;
    double num;
    char err[192];
};

pp_status kj_open_file(const char *path, kj_lexer **out)
{
    *out = NULL;
    int fd = -1;
    uint64_t bytes = 0;
    pp_status st = pp_file_open_regular(path, &fd, &bytes);
    if (st != PP_OK)
        return st;
    kj_lexer *lx = calloc(1, sizeof *lx);
    uint8_t *buf = malloc(CHUNK);
    gzFile gz = (lx && buf) ? gzdopen(fd, "rb") : NULL;
    if (!gz) {
        free(lx);
        free(buf);
        close(fd);
        return PP_ERR(PP_ERR_NOMEM, "%s: out of memory opening the trace", path);
    }
    gzbuffer(gz, CHUNK);
    lx->gz = gz;
    lx->buf = buf;
    *out = lx;
    return PP_OK;
}

pp_status kj_open_mem(const void *data, size_t len, kj_lexer **out)
{
    kj_lexer *lx = calloc(1, sizeof *lx);
    if (!lx)
        return PP_ERR(PP_ERR_NOMEM, "out of memory opening a trace buffer");
    lx->mem = data;
    lx->mem_len = len;
    lx->buf = (uint8_t *)data; /* read in place: never written */
    lx->len = len;
    lx->eof = 1;
    *out = lx;
    return PP_OK;
}

void kj_close(kj_lexer *lx)
{
    if (!lx)
        return;
    if (lx->gz) {
        gzclose(lx->gz);
        free(lx->buf);
    }
    free(lx);
}

/* Refills the buffer; 0 at the end of the input (or a read error, recorded). */
static int refill(kj_lexer *lx)
{
    if (lx->eof)
        return 0;
    lx->base += lx->len;
    lx->pos = lx->len = 0;
    int n = gzread(lx->gz, lx->buf, CHUNK);
    if (n <= 0) {
        lx->eof = 1;
        if (n < 0 && !lx->err[0]) {
            int zerr = 0;
            const char *m = gzerror(lx->gz, &zerr);
            snprintf(lx->err, sizeof lx->err, "read error: %s", m ? m : "?");
        } else if (!gzeof(lx->gz) && !lx->err[0]) {
            snprintf(lx->err, sizeof lx->err, "read error");
        }
        return 0;
    }
    lx->len = (size_t)n;
    return 1;
}

/* The next byte, -1 at the end. */
static inline int peek(kj_lexer *lx)
{
    if (lx->pos == lx->len && !refill(lx))
        return -1;
    return lx->buf[lx->pos];
}

static inline int take(kj_lexer *lx)
{
    int c = peek(lx);
    if (c >= 0)
        lx->pos++;
    return c;
}

static kj_tok fail(kj_lexer *lx, const char *what)
{
    if (!lx->err[0])
        snprintf(lx->err, sizeof lx->err, "%s at byte %llu", what,
                 (unsigned long long)kj_offset(lx));
    return KJ_ERR;
}

static void put(kj_lexer *lx, unsigned c)
{
    if (lx->str_len < KJ_STR_CAP)
        lx->str[lx->str_len++] = (char)c;
    else
        lx->str_len = KJ_STR_CAP + 1; /* marks the cut; fixed up at the end */
}

static void put_utf8(kj_lexer *lx, uint32_t cp)
{
    if (cp < 0x80) {
        put(lx, cp);
    } else if (cp < 0x800) {
        put(lx, 0xc0 | (cp >> 6));
        put(lx, 0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        put(lx, 0xe0 | (cp >> 12));
        put(lx, 0x80 | ((cp >> 6) & 0x3f));
        put(lx, 0x80 | (cp & 0x3f));
    } else {
        put(lx, 0xf0 | (cp >> 18));
        put(lx, 0x80 | ((cp >> 12) & 0x3f));
        put(lx, 0x80 | ((cp >> 6) & 0x3f));
        put(lx, 0x80 | (cp & 0x3f));
    }
}

static int hex4(kj_lexer *lx, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int c = take(lx);
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0)
            return 0;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return 1;
}

/* Copies the plain run of a string at p (up to a quote or a backslash) into lx->str 16 bytes at
 * a time while 16 bytes of input and of room under KJ_STR_CAP remain; returns where it stopped
 * (at the quote or backslash, or where fewer than 16 remain). A string's bytes through a 16-byte
 * compare: the plain loop's inlined copy was a `rep movs`, whose start-up cost on the short
 * strings of a trace was a fifth of the tokenizer's time (perf, bench_kineto). */
static inline const uint8_t *string_run16(kj_lexer *lx, const uint8_t *p, const uint8_t *end)
{
#if defined(__SSE2__)
    while (end - p >= 16 && lx->str_len + 16 <= KJ_STR_CAP) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        _mm_storeu_si128((__m128i *)(void *)(lx->str + lx->str_len), v);
        unsigned m = quote_or_backslash16(v);
        if (m) {
            unsigned k = (unsigned)__builtin_ctz(m);
            lx->str_len += k;
            return p + k;
        }
        lx->str_len += 16;
        p += 16;
    }
#else
    (void)lx, (void)end;
#endif
    return p;
}

static kj_tok lex_string(kj_lexer *lx)
{
    lx->str_len = 0;
    for (;;) {
        /* the plain run up to a quote or a backslash, copied in one go */
        if (lx->pos == lx->len && !refill(lx))
            return KJ_EOF;
        const uint8_t *end = lx->buf + lx->len;
        const uint8_t *q = string_run16(lx, lx->buf + lx->pos, end);
        lx->pos = (size_t)(q - lx->buf); /* what it copied */
        const uint8_t *p = q;
        while (q < end && *q != '"' && *q != '\\')
            q++;
        size_t run = (size_t)(q - p);
        size_t room = lx->str_len <= KJ_STR_CAP ? KJ_STR_CAP - lx->str_len : 0;
        if (run > room) {
            memcpy(lx->str + lx->str_len, p, room);
            lx->str_len = KJ_STR_CAP + 1;
        } else {
            memcpy(lx->str + lx->str_len, p, run);
            lx->str_len += run;
        }
        lx->pos += run;
        if (q == end)
            continue;
        int c = take(lx);
        if (c == '"')
            break;
        /* an escape */
        c = take(lx);
        uint32_t cp;
        switch (c) {
        case '"': case '\\': case '/': put(lx, (unsigned)c); break;
        case 'b': put(lx, '\b'); break;
        case 'f': put(lx, '\f'); break;
        case 'n': put(lx, '\n'); break;
        case 'r': put(lx, '\r'); break;
        case 't': put(lx, '\t'); break;
        case 'u':
            if (!hex4(lx, &cp))
                return peek(lx) < 0 ? KJ_EOF : fail(lx, "bad \\u escape");
            if (cp >= 0xd800 && cp < 0xdc00 && peek(lx) == '\\') {
                uint32_t lo;
                take(lx);
                if (take(lx) != 'u' || !hex4(lx, &lo))
                    return fail(lx, "bad \\u escape");
                cp = (lo >= 0xdc00 && lo < 0xe000) ? 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00)
                                                   : 0xfffd;
            } else if (cp >= 0xd800 && cp < 0xe000) {
                cp = 0xfffd;
            }
            put_utf8(lx, cp);
            break;
        case -1: return KJ_EOF;
        default: return fail(lx, "bad escape in a string");
        }
    }
    if (lx->str_len > KJ_STR_CAP) {
        lx->str_len = KJ_STR_CAP;
        lx->truncated++;
    }
    lx->str[lx->str_len] = '\0';
    return KJ_STR;
}

/* [-]digits[.digits], wholly inside the buffer, with a mantissa below 2^53 and at most 22
 * decimals, ended by a byte that cannot continue a number: the mantissa and the power of ten are
 * exact doubles, so their quotient is the correctly rounded value strtod gives (Clinger's fast
 * path), without strtod's cost, in one pass over the digits. 0 (nothing consumed) for anything
 * else, which lex_number reads the long way. */
static int fast_number(kj_lexer *lx)
{
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                 1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const uint8_t *p = lx->buf + lx->pos, *stop = lx->buf + lx->len, *q = p;
    int neg = q < stop && *q == '-';
    q += neg;
    uint64_t m = 0;
    int digits = 0, frac = -1;
    for (; q < stop; q++) {
        unsigned d = (unsigned)*q - '0';
        if (d <= 9) {
            if (++digits > 19)
                return 0;
            m = m * 10 + d;
            frac += frac >= 0;
        } else if (*q == '.' && frac < 0) {
            frac = 0;
        } else {
            break;
        }
    }
    if (q == stop || *q == 'e' || *q == 'E' || *q == '+' || *q == '-' || *q == '.' || !digits ||
        frac == 0 || frac > 22 || m >= (UINT64_C(1) << 53))
        return 0;
    double v = (double)m;
    if (frac > 0)
        v /= p10[frac];
    lx->num = neg ? -v : v;
    lx->pos += (size_t)(q - p);
    return 1;
}

static kj_tok lex_number(kj_lexer *lx)
{
    char b[NUM_CAP];
    size_t n = 0;
    if (fast_number(lx))
        return KJ_NUM;
    for (int c; (c = peek(lx)) >= 0;) {
        if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'))
            break;
        if (n + 1 >= sizeof b)
            return fail(lx, "number longer than 63 characters");
        b[n++] = (char)c;
        lx->pos++;
    }
    if (n == 1 && b[0] == '-' && peek(lx) == 'I') { /* -Infinity */
        char w[9];
        size_t k = 0;
        while (k < 8 && peek(lx) >= 'A' && peek(lx) <= 'z')
            w[k++] = (char)take(lx);
        w[k] = '\0';
        if (strcmp(w, "Infinity") != 0)
            return fail(lx, "bad literal");
        lx->num = -INFINITY;
        return KJ_NUM;
    }
    b[n] = '\0';
    char *end = NULL;
    errno = 0;
    lx->num = strtod(b, &end);
    if (n == 0 || end != b + n)
        return peek(lx) < 0 && n ? KJ_EOF : fail(lx, "bad number");
    return KJ_NUM;
}

static kj_tok lex_word(kj_lexer *lx)
{
    char w[12];
    size_t k = 0;
    for (int c; (c = peek(lx)) >= 0 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));) {
        if (k + 1 >= sizeof w)
            return fail(lx, "bad literal");
        w[k++] = (char)c;
        lx->pos++;
    }
    w[k] = '\0';
    if (strcmp(w, "true") == 0)
        return KJ_TRUE;
    if (strcmp(w, "false") == 0)
        return KJ_FALSE;
    if (strcmp(w, "null") == 0)
        return KJ_NULL;
    if (strcmp(w, "NaN") == 0) { /* Python's json writes these */
        lx->num = NAN;
        return KJ_NUM;
    }
    if (strcmp(w, "Infinity") == 0) {
        lx->num = INFINITY;
        return KJ_NUM;
    }
    return peek(lx) < 0 ? KJ_EOF : fail(lx, "unexpected character");
}

kj_tok kj_next(kj_lexer *lx)
{
    if (lx->err[0])
        return KJ_ERR;
    int c = -1;
    for (;;) {
        const uint8_t *p = lx->buf + lx->pos, *end = lx->buf + lx->len;
        while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
            p++;
        lx->pos = (size_t)(p - lx->buf);
        if (p < end) {
            c = *p;
            break;
        }
        if (!refill(lx))
            break;
    }
    switch (c) {
    case -1: return lx->err[0] ? KJ_ERR : KJ_EOF;
    case '{': lx->pos++; return KJ_OBJ;
    case '}': lx->pos++; return KJ_OBJ_END;
    case '[': lx->pos++; return KJ_ARR;
    case ']': lx->pos++; return KJ_ARR_END;
    case ':': lx->pos++; return KJ_COLON;
    case ',': lx->pos++; return KJ_COMMA;
    case '"': lx->pos++; return lex_string(lx);
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return lex_number(lx);
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
            return lex_word(lx);
        return fail(lx, "unexpected character");
    }
}

static inline int is_space(uint8_t b) { return b == ' ' || b == '\n' || b == '\r' || b == '\t'; }

/* The key at p (its opening quote), wholly in the buffer with its colon, shorter than cap and
 * without an escape: copied into key, and the position after the colon; NULL for any other key,
 * which kj_key reads the long way. 16 bytes at a time with SSE2, each block stored into key as it
 * is compared (while it fits), as string_run16 does. */
static inline const uint8_t *key_fast(const uint8_t *p, const uint8_t *end, char *key, size_t cap)
{
    const uint8_t *s = p + 1;
    size_t n = 0;    /* the bytes of the key copied */
    int stop = 0;    /* s[n] is a quote or a backslash */
#if defined(__SSE2__)
    while (!stop && n + 16 <= cap && (size_t)(end - s) >= n + 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + n));
        _mm_storeu_si128((__m128i *)(void *)(key + n), v);
        unsigned m = quote_or_backslash16(v);
        stop = m != 0;
        n += stop ? (unsigned)__builtin_ctz(m) : 16;
    }
#endif
    for (; !stop && n < cap && s + n < end && s[n] != '"' && s[n] != '\\'; n++)
        key[n] = (char)s[n];
    if (n >= cap || s + n >= end || s[n] != '"')
        return NULL;
    const uint8_t *q = s + n + 1;
    while (q < end && is_space(*q))
        q++;
    if (q == end || *q != ':')
        return NULL;
    key[n] = '\0';
    return q + 1;
}

kj_tok kj_key(kj_lexer *lx, char *key, size_t cap)
{
    if (!lx->err[0]) {
        const uint8_t *p = lx->buf + lx->pos, *end = lx->buf + lx->len;
        while (p < end && is_space(*p))
            p++;
        lx->pos = (size_t)(p - lx->buf);
        const uint8_t *after = p < end && *p == '"' ? key_fast(p, end, key, cap) : NULL;
        if (after) {
            lx->pos = (size_t)(after - lx->buf);
            return KJ_STR;
        }
    }
    /* the long way: as kj_next reads the key and then the colon */
    kj_tok t = kj_next(lx);
    if (t != KJ_STR)
        return t;
    size_t n = lx->str_len < cap ? lx->str_len : cap - 1;
    memcpy(key, lx->str, n);
    key[n] = '\0';
    t = kj_next(lx);
    return t == KJ_COLON ? KJ_STR : t == KJ_EOF ? KJ_EOF : KJ_ERR;
}

kj_tok kj_next_key(kj_lexer *lx, char *key, size_t cap)
{
    kj_tok t;
    const uint8_t *p = lx->buf + lx->pos, *end = lx->buf + lx->len;
    while (p < end && is_space(*p))
        p++;
    if (p < end && !lx->err[0] && (*p == ',' || *p == '}')) {
        lx->pos = (size_t)(p - lx->buf) + 1;
        t = *p == ',' ? KJ_COMMA : KJ_OBJ_END;
    } else {
        t = kj_next(lx);
    }
    if (t != KJ_COMMA)
        return t == KJ_OBJ_END || t == KJ_EOF ? t : KJ_ERR;
    t = kj_key(lx, key, cap);
    return t == KJ_STR || t == KJ_EOF ? t : KJ_ERR;
}

const char *kj_str(const kj_lexer *lx, size_t *len)
{
    if (len)
        *len = lx->str_len;
    return lx->str;
}

double kj_num(const kj_lexer *lx) { return lx->num; }

/* The first byte in [p, end) that is a quote or a backslash (inside a string), or end. */
static inline const uint8_t *scan_string(const uint8_t *p, const uint8_t *end)
{
#if defined(__SSE2__)
    for (; end - p >= 16; p += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        unsigned m = quote_or_backslash16(v);
        if (m)
            return p + __builtin_ctz(m);
    }
#endif
    while (p < end && *p != '"' && *p != '\\')
        p++;
    return p;
}

/* The first byte in [p, end) that opens a string or a container or closes a container, or end.
 * '[' and '{' differ in one bit (0x20) only, as ']' and '}' do: one compare each after an OR. */
static inline const uint8_t *scan_structure(const uint8_t *p, const uint8_t *end)
{
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"'), bit = _mm_set1_epi8(0x20),
                  open = _mm_set1_epi8('{'), close = _mm_set1_epi8('}');
    for (; end - p >= 16; p += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i f = _mm_or_si128(v, bit);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(
            _mm_cmpeq_epi8(v, quote),
            _mm_or_si128(_mm_cmpeq_epi8(f, open), _mm_cmpeq_epi8(f, close))));
        if (m)
            return p + __builtin_ctz(m);
    }
#endif
    while (p < end && *p != '"' && (*p | 0x20) != '{' && (*p | 0x20) != '}')
        p++;
    return p;
}

kj_tok kj_skip_value(kj_lexer *lx, kj_tok first)
{
    if (first != KJ_OBJ && first != KJ_ARR)
        return first == KJ_EOF || first == KJ_ERR ? first
               : (first == KJ_STR || first == KJ_NUM || first == KJ_TRUE || first == KJ_FALSE ||
                  first == KJ_NULL) ? first : fail(lx, "unexpected token");
    if (lx->err[0])
        return KJ_ERR;
    /* Read as bytes, not tokens (a torch op's shapes, a kernel's grid: bench_kineto --shapes):
     * only the strings' quotes and escapes and the brackets outside strings matter. Brackets
     * counted, not matched by kind, and the scalars between them not read: skipping is lenient
     * (what is skipped is never used), the depth is not. */
    int depth = 1;
    int str = 0; /* 0 outside a string, 1 inside, 2 right after a backslash inside */
    for (;;) {
        if (lx->pos == lx->len && !refill(lx))
            return lx->err[0] ? KJ_ERR : KJ_EOF;
        const uint8_t *p = lx->buf + lx->pos, *end = lx->buf + lx->len;
        while (p < end) {
            if (str == 2) {
                p++, str = 1;
            } else if (str) {
                p = scan_string(p, end);
                if (p < end)
                    str = *p++ == '"' ? 0 : 2;
            } else {
                p = scan_structure(p, end);
                if (p == end)
                    break;
                uint8_t c = *p++;
                if (c == '"') {
                    str = 1;
                } else if ((c | 0x20) == '{') {
                    if (++depth > KJ_MAX_DEPTH) {
                        lx->pos = (size_t)(p - lx->buf);
                        return fail(lx, "nesting deeper than 256");
                    }
                } else if (--depth == 0) {
                    lx->pos = (size_t)(p - lx->buf);
                    return first;
                }
            }
        }
        lx->pos = (size_t)(end - lx->buf);
    }
}

const char *kj_error(const kj_lexer *lx) { return lx->err; }
uint64_t kj_offset(const kj_lexer *lx) { return lx->base + lx->pos; }
uint64_t kj_strings_truncated(const kj_lexer *lx) { return lx->truncated; }
