/* json_write.c: the streaming JSON writer of pp_json.h, through which every JSON output of
 * pipeprof is written (the summary and the Chrome trace in analyzer/, pprof-check's JSON and
 * baselines, cost and plan files in plan/, pprof-run's manifest). It keeps only the open
 * containers, so a long run's steps never sit in memory twice, and the first error sticks:
 * callers write everything and ask once, at pp_json_writer_finish. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
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
    if (w->status == PP_OK && n && fwrite(s, 1, n, w->f) != n)
        fail_io(w);
}

static void outs(pp_json_writer *w, const char *s) { out(w, s, strlen(s)); }

/* A newline and the indentation of a line inside `levels` open containers (cJSON_Print counts
 * arrays too, though it writes them on one line; in the pretty layout nothing block-laid sits
 * inside an inline container, so counting every level is the same). */
static void newline(pp_json_writer *w, int levels)
{
    const char *unit = w->layout == PP_JSON_TABS ? "\t" : "  ";
    outs(w, "\n");
    for (int i = 0; i < levels; i++)
        outs(w, unit);
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

static void quote(pp_json_writer *w, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    outs(w, "\"");
    while (*p && w->status == PP_OK) {
        unsigned c = *p;
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n"
                          : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b"
                          : c == '\f' ? "\\f" : NULL;
        if (esc) {
            outs(w, esc);
            p++;
        } else if (c < 0x20) {
            char u[8];
            snprintf(u, sizeof u, "\\u%04x", c);
            outs(w, u);
            p++;
        } else if (c < 0x80) {
            out(w, (const char *)p, 1);
            p++;
        } else {
            size_t len = pp_json_utf8_seq((const char *)p);
            if (len) {
                out(w, (const char *)p, len);
                p += len;
            } else {
                outs(w, "\\ufffd");
                p++;
            }
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

void pp_json_put_int(pp_json_writer *w, const char *key, long long v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    scalar(w, key, buf);
}

void pp_json_put_uint(pp_json_writer *w, const char *key, uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    scalar(w, key, buf);
}

void pp_json_put_bool(pp_json_writer *w, const char *key, int v)
{
    scalar(w, key, v ? "true" : "false");
}

void pp_json_put_null(pp_json_writer *w, const char *key) { scalar(w, key, "null"); }

/* printf's %.<prec><conv> of v, null when not finite, never "-0". */
static void number(pp_json_writer *w, const char *key, char conv, int prec, double v)
{
    if (!isfinite(v)) {
        scalar(w, key, "null");
        return;
    }
    char buf[400]; /* %.3f of 1e308 has 309 digits before the point */
    char fmt[8] = {'%', '.', '*', conv, '\0'};
    snprintf(buf, sizeof buf, fmt, prec, v == 0 ? 0.0 : v);
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
