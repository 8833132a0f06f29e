/* json_write.c: the streaming JSON writer of pp_json.h, through which every JSON output of
 * pipeprof is written (the summary and the Chrome trace in analyzer/, pprof-check's JSON and
 * baselines, cost and plan files in plan/, pprof-run's manifest). It keeps only the open
 * containers, so a long run's steps never sit in memory twice, and the first error sticks:
 * callers write everything and ask once, at pp_json_writer_finish. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#define _DEFAULT_SOURCE         /* fwrite_unlocked: one writer per stream, no lock per piece */
#include "pp_json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void pp_json_writer_init(pp_json_writer *w, FILE *f, const char *what, pp_json_layout layout)
{
    memset(w, 0, sizeof *w);
    w->f = f;
    w->what = what ? what : "JSON";
    w->layout = layout;
    w->status = PP_OK;
}

pp_status pp_json_writer_status(const pp_json_writer *w) { return w->status; }

static void fail_io(pp_json_writer *w)
{
    if (w->status == PP_OK)
        w->status = PP_ERR(PP_ERR_IO, "writing %s: %s", w->what,
                           errno ? strerror(errno) : "write error");
}

static void fail_use(pp_json_writer *w, const char *why)
{
    if (w->status == PP_OK)
        w->status = PP_ERR(PP_ERR_INVALID, "writing %s: %s (a defect in its writer)", w->what,
                           why);
}

static void out(pp_json_writer *w, const char *s, size_t n)
{
    if (w->status == PP_OK && n && fwrite_unlocked(s, 1, n, w->f) != n)
        fail_io(w);
}

static void outs(pp_json_writer *w, const char *s) { out(w, s, strlen(s)); }

/* A newline and the indentation of a line inside `levels` open containers (cJSON_Print counts
 * arrays too, though it writes them on one line; in the pretty layout nothing block-laid sits
 * inside an inline container, so counting every level is the same). */
static void newline(pp_json_writer *w, int levels)
{
    char line[1 + 2 * PP_JSON_MAX_DEPTH];
    size_t unit = w->layout == PP_JSON_TABS ? 1 : 2, n = 1 + unit * (size_t)levels;
    line[0] = '\n';
    memset(line + 1, w->layout == PP_JSON_TABS ? '\t' : ' ', n - 1);
    out(w, line, n);
}

/* The line an inline member continues on: indented one space past the line its outermost
 * inline container started on. */
static void continuation(pp_json_writer *w)
{
    int i = 0;
    while (i < w->depth - 1 && !w->level[i].inl)
        i++;
    newline(w, i);
    outs(w, " ");
}

size_t pp_json_utf8_seq(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    unsigned c = p[0];
    if (c < 0x80)
        return c ? 1 : 0;
    size_t len = c >= 0xf0 && c <= 0xf4   ? 4
                 : c >= 0xe0 && c < 0xf0 ? 3
                 : c >= 0xc2 && c <= 0xdf ? 2
                                          : 0;
    for (size_t k = 1; k < len; k++)
        if ((p[k] & 0xc0) != 0x80)
            return 0;
    if (len == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0)))
        return 0; /* no overlong forms, no surrogates */
    if (len == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] >= 0x90)))
        return 0;
    return len;
}

int pp_json_utf8_valid(const char *s)
{
    for (size_t n; *s; s += n)
        if ((n = pp_json_utf8_seq(s)) == 0)
            return 0;
    return 1;
}

/* The bytes from p on that are written as they are: printable ASCII but the quote and the
 * backslash, and whole valid UTF-8 sequences. */
static size_t plain_run(const unsigned char *p)
{
    const unsigned char *q = p;
    for (;;) {
        unsigned c = *q;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            q++;
        } else if (c >= 0x80) {
            size_t len = pp_json_utf8_seq((const char *)q);
            if (!len)
                break;
            q += len;
        } else {
            break;
        }
    }
    return (size_t)(q - p);
}

static void quote(pp_json_writer *w, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    outs(w, "\"");
    while (*p && w->status == PP_OK) {
        size_t run = plain_run(p);
        if (run) {
            out(w, (const char *)p, run);
            p += run;
            continue;
        }
        unsigned c = *p++;
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f" : NULL;
        if (esc) {
            outs(w, esc);
        } else if (c < 0x20) {
            char u[8];
            snprintf(u, sizeof u, "\\u%04x", c);
            outs(w, u);
        } else {
            outs(w, "\\ufffd"); /* a byte that starts no valid UTF-8 sequence */
        }
    }
    outs(w, "\"");
}

/* Everything before a value: the separator, the line break or space, and the key. Returns 0
 * when nothing may be written (an earlier error, or this misuse). */
static int member(pp_json_writer *w, const char *key)
{
    if (w->status != PP_OK)
        return 0;
    if (w->depth == 0) {
        if (w->done || key) {
            fail_use(w, w->done ? "a second top-level value" : "a key at the top level");
            return 0;
        }
        return 1;
    }
    struct pp_json_level *l = &w->level[w->depth - 1];
    int in_object = l->close == '}';
    if (in_object != (key != NULL)) {
        fail_use(w, in_object ? "a value without a key inside an object"
                              : "a key inside an array");
        return 0;
    }
    if (l->n++)
        outs(w, ",");
    if (!l->inl)
        newline(w, w->depth);
    else if (w->wrap && l->n > 1)
        continuation(w);
    else if (l->n > 1)
        outs(w, " ");
    w->wrap = 0;
    if (key) {
        quote(w, key);
        outs(w, w->layout == PP_JSON_TABS ? ":\t" : ": ");
    }
    return 1;
}

static void open_container(pp_json_writer *w, const char *key, char open, char close, int inl)
{
    if (!member(w, key))
        return;
    if (w->depth >= PP_JSON_MAX_DEPTH) {
        fail_use(w, "containers nested too deep");
        return;
    }
    out(w, &open, 1);
    struct pp_json_level *l = &w->level[w->depth];
    l->close = close;
    l->n = 0;
    /* PRETTY: what an inline container holds is inline too */
    l->inl = inl || (w->layout == PP_JSON_PRETTY && w->depth > 0 && w->level[w->depth - 1].inl);
    w->depth++;
}

void pp_json_object(pp_json_writer *w, const char *key) { open_container(w, key, '{', '}', 0); }
void pp_json_object_inline(pp_json_writer *w, const char *key)
{
    open_container(w, key, '{', '}', 1);
}
void pp_json_array(pp_json_writer *w, const char *key) { open_container(w, key, '[', ']', 0); }
void pp_json_array_inline(pp_json_writer *w, const char *key)
{
    open_container(w, key, '[', ']', 1);
}

void pp_json_end(pp_json_writer *w)
{
    if (w->status != PP_OK)
        return;
    if (w->depth == 0) {
        fail_use(w, "a container closed that was not open");
        return;
    }
    const struct pp_json_level *l = &w->level[w->depth - 1];
    if (!l->inl && (l->n > 0 || w->layout == PP_JSON_TABS))
        newline(w, w->depth - 1);
    out(w, &l->close, 1);
    w->depth--;
    w->wrap = 0;
    w->done = w->depth == 0;
}

void pp_json_wrap(pp_json_writer *w) { w->wrap = 1; }

/* A value written whole (not a container). */
static void scalar(pp_json_writer *w, const char *key, const char *text)
{
    if (!member(w, key))
        return;
    outs(w, text);
    w->done = w->depth == 0;
}

void pp_json_put_str(pp_json_writer *w, const char *key, const char *s)
{
    if (!s) {
        scalar(w, key, "null");
        return;
    }
    if (!member(w, key))
        return;
    quote(w, s);
    w->done = w->depth == 0;
}

/* The decimal digits of v, written so that they end at `end` (exclusive); returns the first. */
static char *digits_u64(char *end, uint64_t v)
{
    char *p = end;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return p;
}

void pp_json_put_int(pp_json_writer *w, const char *key, long long v)
{
    char buf[32];
    buf[31] = '\0';
    char *p = digits_u64(buf + 31, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
    if (v < 0)
        *--p = '-';
    scalar(w, key, p);
}

void pp_json_put_uint(pp_json_writer *w, const char *key, uint64_t v)
{
    char buf[32];
    buf[31] = '\0';
    scalar(w, key, digits_u64(buf + 31, v));
}

void pp_json_put_bool(pp_json_writer *w, const char *key, int v)
{
    scalar(w, key, v ? "true" : "false");
}

void pp_json_put_null(pp_json_writer *w, const char *key) { scalar(w, key, "null"); }

/* Powers of ten, each a double exactly up to 1e22. */
static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* round(a * 10^d) into *r when a * 10^d < 2^53 and the rounding is certain: the product's one
 * rounding error (half an ulp, at most 2^-53 of it) cannot move it across a half. Returns 0
 * when uncertain (near a tie) or out of range: printf decides then. */
static int scaled_round(double a, int d, uint64_t *r)
{
    double s = a * pow10_exact[d];
    if (!(s < 9007199254740992.0))
        return 0;
    double fl = floor(s), frac = s - fl, margin = s * 0x1p-51 + 0x1p-60;
    if (fabs(frac - 0.5) <= margin)
        return 0;
    *r = (uint64_t)fl + (frac > 0.5);
    return 1;
}

/* r as a decimal with d decimals (d <= 22) after an optional sign, at buf; `strip`: printf's %g,
 * no trailing zeros and no point without decimals. Returns the length. */
static size_t fixed_text(char *buf, int neg, uint64_t r, int d, int strip)
{
    char digits[32];
    char *end = digits + sizeof digits, *p = digits_u64(end, r);
    while (end - p < d + 1) /* at least one digit before the point */
        *--p = '0';
    size_t n = 0, whole = (size_t)(end - p) - (size_t)d;
    if (neg)
        buf[n++] = '-';
    memcpy(buf + n, p, whole);
    n += whole;
    int keep = d;
    if (strip)
        while (keep > 0 && p[whole + (size_t)keep - 1] == '0')
            keep--;
    if (keep > 0) {
        buf[n++] = '.';
        memcpy(buf + n, p + whole, (size_t)keep);
        n += (size_t)keep;
    }
    buf[n] = '\0';
    return n;
}

/* printf's "%.<prec>g" / "%.<prec>f" of a finite v without printf where that is certain: %g of
 * 1e-4 <= |v| < 10^prec with prec <= 15 (printf's fixed notation; the value rounded to prec
 * digits, trailing zeros removed), %f of |v| * 10^prec < 2^53. Returns the length, 0 when
 * printf must decide (its output is then the reference: tests/test_common.c compares both on
 * millions of values). */
static size_t number_text(char *buf, char conv, int prec, double v)
{
    double a = fabs(v);
    int neg = v < 0;
    uint64_t r;
    if (conv == 'f') {
        if (prec > 17 || !scaled_round(a, prec, &r))
            return 0;
        return fixed_text(buf, neg, r, prec, 0);
    }
    if (v == 0) {
        buf[0] = '0';
        buf[1] = '\0';
        return 1;
    }
    if (prec > 15 || !(a >= 1e-4) || !(a < pow10_exact[prec]))
        return 0;
    /* x: the decimal exponent of a (a >= 10^x; the doubles 1e-1 .. 1e-4 lie above the powers
     * they name, the first double at or above each, so comparing with them is exact) */
    static const double neg_pow[] = {1e-1, 1e-2, 1e-3, 1e-4};
    int x = prec - 1;
    while (x >= 0 && a < pow10_exact[x])
        x--;
    if (x < 0) {
        x = -1;
        while (a < neg_pow[-x - 1])
            x--;
    }
    int d = prec - 1 - x; /* decimals: at most prec + 3 */
    if (!scaled_round(a, d, &r))
        return 0;
    if (r >= (uint64_t)pow10_exact[prec]) { /* rounded up to the next power of ten */
        if (x + 1 >= prec)
            return 0; /* printf's exponent notation */
        r /= 10;
        d--;
    }
    return fixed_text(buf, neg, r, d, 1);
}

/* printf's %.<prec><conv> of v, null when not finite, never "-0". */
static void number(pp_json_writer *w, const char *key, char conv, int prec, double v)
{
    if (!isfinite(v)) {
        scalar(w, key, "null");
        return;
    }
    char buf[400]; /* %.3f of 1e308 has 309 digits before the point */
    if (v == 0)
        v = 0.0;
    if (!number_text(buf, conv, prec, v)) {
        char fmt[8] = {'%', '.', '*', conv, '\0'};
        snprintf(buf, sizeof buf, fmt, prec, v);
    }
    scalar(w, key, buf);
}

void pp_json_put_real(pp_json_writer *w, const char *key, double v) { number(w, key, 'g', 10, v); }

void pp_json_put_real_pos(pp_json_writer *w, const char *key, double v)
{
    if (v > 0)
        number(w, key, 'g', 10, v);
    else
        scalar(w, key, "null");
}

void pp_json_put_real_digits(pp_json_writer *w, const char *key, int digits, double v)
{
    number(w, key, 'g', digits < 1 ? 1 : digits > 17 ? 17 : digits, v);
}

void pp_json_put_fixed(pp_json_writer *w, const char *key, int decimals, double v)
{
    number(w, key, 'f', decimals < 0 ? 0 : decimals > 17 ? 17 : decimals, v);
}

void pp_json_put_exact(pp_json_writer *w, const char *key, double v)
{
    if (!isfinite(v)) {
        scalar(w, key, "null");
        return;
    }
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v == 0 ? 0.0 : v);
        if (strtod(buf, NULL) == v)
            break;
    }
    scalar(w, key, buf);
}

pp_status pp_json_writer_finish(pp_json_writer *w)
{
    if (w->status == PP_OK && (w->depth > 0 || !w->done))
        fail_use(w, w->depth > 0 ? "a container left open" : "nothing written");
    outs(w, "\n");
    if (w->status == PP_OK && (fflush(w->f) != 0 || ferror(w->f)))
        fail_io(w);
    return w->status;
}

pp_status pp_json_file_write(const char *path, const char *what, pp_json_layout layout,
                             pp_status (*fill)(pp_json_writer *w, const void *ctx),
                             const void *ctx)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return PP_ERR(PP_ERR_NOMEM, "%s '%s': cannot build the text: %s", what, path,
                      strerror(errno));
    pp_json_writer w;
    pp_json_writer_init(&w, f, what, layout);
    pp_status st = fill(&w, ctx);
    if (st == PP_OK) /* after a failed fill, its message stands */
        st = pp_json_writer_finish(&w);
    if (fclose(f) != 0 && st == PP_OK)
        st = PP_ERR(PP_ERR_NOMEM, "%s '%s': cannot build the text", what, path);
    if (st == PP_OK)
        st = pp_write_file_atomic(path, buf, len);
    free(buf);
    return st;
}
