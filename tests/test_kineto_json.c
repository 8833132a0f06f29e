/* test_kineto_json.c: the Kineto importer's JSON tokenizer (analyzer/kineto_json.c) on its own.
 * The importer walks every object's members with kj_key and kj_next_key, which read a key and its
 * colon (and the separator before the next key) in one call, on a fast path where the key lies
 * wholly in the buffer; these tests walk random documents, valid, cut and corrupted, from memory
 * and from files read in 256 KB chunks (plain and gzip), once with those calls and once with
 * kj_next alone, and ask for the same tokens, keys, values, end and error. */
#include "kineto_json.h"
#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static void setup(void) { tk_dir_create("pp_kjson"); }
TestSuite(kineto_json, .init = setup, .fini = tk_dir_remove, .timeout = 300);

/* ---- a transcript of a walk ---- */

typedef struct {
    char *s;
    size_t len, cap;
} text;

static void add(text *t, const char *fmt, ...)
{
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    cr_assert_geq(n, 0);
    if (t->len + (size_t)n + 1 > t->cap) {
        t->cap = (t->len + (size_t)n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        cr_assert_not_null(t->s);
    }
    vsnprintf(t->s + t->len, t->cap - t->len, fmt, aq);
    va_end(aq);
    t->len += (size_t)n;
}

/* Walks the value that begins with token v, recording it; returns what ended it: the value's
 * own token for a scalar, KJ_OBJ_END / KJ_ARR_END for a container, else KJ_EOF or KJ_ERR (the
 * importer's walk, analyzer/kineto.c walk_object and walk_array, with either way of reading keys). */
static kj_tok walk(kj_lexer *lx, kj_tok v, int fused, size_t cap, text *o, int depth);

/* An object's members after its '{', read with kj_next alone, as the importer did before kj_key. */
static kj_tok members_plain(kj_lexer *lx, size_t cap, text *o, int depth)
{
    kj_tok t = kj_next(lx);
    if (t == KJ_OBJ_END)
        return t;
    for (;;) {
        if (t != KJ_STR)
            return t == KJ_EOF ? t : KJ_ERR;
        char key[256];
        size_t n;
        const char *s = kj_str(lx, &n);
        if (n >= cap)
            n = cap - 1;
        memcpy(key, s, n);
        key[n] = '\0';
        if ((t = kj_next(lx)) != KJ_COLON)
            return t == KJ_EOF ? t : KJ_ERR;
        add(o, "K%zu:%s|", strlen(key), key);
        kj_tok v = walk(lx, kj_next(lx), 0, cap, o, depth);
        if (v == KJ_EOF || v == KJ_ERR)
            return v;
        t = kj_next(lx);
        if (t == KJ_OBJ_END)
            return t;
        if (t != KJ_COMMA)
            return t == KJ_EOF ? t : KJ_ERR;
        t = kj_next(lx);
    }
}

/* The same with kj_key and kj_next_key, as analyzer/kineto.c walk_object reads them. The key
 * buffer is filled with a pattern first: the fast path must leave a NUL-terminated key. */
static kj_tok members_fused(kj_lexer *lx, size_t cap, text *o, int depth)
{
    char key[256];
    memset(key, 'Z', sizeof key);
    kj_tok t = kj_key(lx, key, cap);
    if (t == KJ_OBJ_END)
        return t;
    for (;;) {
        if (t != KJ_STR)
            return t == KJ_EOF ? t : KJ_ERR;
        cr_assert_lt(strnlen(key, cap), cap, "a key read by kj_key is not terminated within cap");
        add(o, "K%zu:%s|", strlen(key), key);
        kj_tok v = walk(lx, kj_next(lx), 1, cap, o, depth);
        if (v == KJ_EOF || v == KJ_ERR)
            return v;
        memset(key, 'Z', sizeof key);
        t = kj_next_key(lx, key, cap);
        if (t == KJ_OBJ_END)
            return t;
    }
}

static kj_tok walk(kj_lexer *lx, kj_tok v, int fused, size_t cap, text *o, int depth)
{
    switch (v) {
    case KJ_OBJ: {
        if (depth > 64) {
            kj_tok s = kj_skip(lx, v);
            return s == KJ_OBJ ? KJ_OBJ_END : s;
        }
        add(o, "{");
        kj_tok t = fused ? members_fused(lx, cap, o, depth + 1) : members_plain(lx, cap, o, depth + 1);
        add(o, "}");
        return t;
    }
    case KJ_ARR: {
        add(o, "[");
        kj_tok t = kj_next(lx);
        if (t == KJ_ARR_END)
            return t;
        for (;;) {
            kj_tok e = walk(lx, t, fused, cap, o, depth + 1);
            if (e == KJ_EOF || e == KJ_ERR)
                return e;
            t = kj_next(lx);
            if (t == KJ_ARR_END)
                return t;
            if (t != KJ_COMMA)
                return t == KJ_EOF ? t : KJ_ERR;
            t = kj_next(lx);
        }
    }
    case KJ_STR: {
        size_t n;
        const char *s = kj_str(lx, &n);
        add(o, "S%zu:", n);
        text *t = o;
        if (t->len + n + 2 > t->cap) {
            t->cap = (t->len + n + 2) * 2;
            t->s = realloc(t->s, t->cap);
            cr_assert_not_null(t->s);
        }
        memcpy(t->s + t->len, s, n);
        t->len += n;
        add(o, "|");
        return v;
    }
    case KJ_NUM: add(o, "N%.17g|", kj_num(lx)); return v;
    case KJ_TRUE: add(o, "T|"); return v;
    case KJ_FALSE: add(o, "F|"); return v;
    case KJ_NULL: add(o, "0|"); return v;
    case KJ_EOF: return v;
    default: return KJ_ERR;
    }
}

typedef struct {
    text t;
    kj_tok end;
    char err[256];
    uint64_t offset, truncated;
} result;

/* The whole input's walk: its values one after another (a file of events one after another reads
 * so too) until the end or an error. */
static result walk_all(kj_lexer *lx, int fused, size_t cap)
{
    result r = {0};
    add(&r.t, "");
    kj_tok t;
    while ((t = kj_next(lx)) != KJ_EOF && t != KJ_ERR) {
        t = walk(lx, t, fused, cap, &r.t, 0);
        add(&r.t, "/");
        if (t == KJ_EOF || t == KJ_ERR)
            break;
    }
    r.end = t;
    snprintf(r.err, sizeof r.err, "%s", kj_error(lx));
    r.offset = kj_offset(lx);
    r.truncated = kj_strings_truncated(lx);
    return r;
}

static void expect_same(const result *a, const result *b, const char *what)
{
    cr_assert_eq(a->end, b->end, "%s: kj_next alone ended with %d, kj_key with %d", what,
                 (int)a->end, (int)b->end);
    cr_assert_str_eq(a->err, b->err, "%s: errors differ", what);
    cr_assert_eq(a->truncated, b->truncated, "%s", what);
    if (a->t.len != b->t.len || memcmp(a->t.s, b->t.s, a->t.len) != 0) {
        size_t i = 0;
        while (i < a->t.len && i < b->t.len && a->t.s[i] == b->t.s[i])
            i++;
        size_t from = i > 40 ? i - 40 : 0;
        cr_assert_fail("%s: the walks differ at %zu:\n  kj_next: %.*s\n  kj_key:  %.*s", what, i,
                       (int)((a->t.len > from + 100 ? 100 : a->t.len - from)), a->t.s + from,
                       (int)((b->t.len > from + 100 ? 100 : b->t.len - from)), b->t.s + from);
    }
    if (a->end == KJ_EOF)
        cr_assert_eq(a->offset, b->offset, "%s", what);
}

/* ---- random documents ---- */

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)((rng >> 11) % n);
}

static void space(text *o)
{
    static const char *const ws[] = {"", "", " ", "\n    ", "\n  ", "\t", "\r\n", "   \n\n  "};
    add(o, "%s", ws[rnd(8)]);
}

/* A string's body: plain bytes, escapes of every kind, UTF-8, and now and then a long run (past
 * 16-byte blocks, a 64-byte key buffer and, rarely, the 4096-byte cap). */
static void string_body(text *o, int key)
{
    static const char *const bits[] = {"a", "b", "Z", " ", "_", "#", "0", "\\\"", "\\\\", "\\/",
                                       "\\n", "\\t", "\\u00e9", "\\ud83d\\ude00", "\xc3\xa9", "\\b",
                                       ":", ",", "{", "}"};
    uint32_t len = rnd(8) == 0 ? rnd(90) : rnd(20);
    if (!key && rnd(300) == 0)
        len = 4100;
    int plain = rnd(3) == 0; /* only plain bytes: the fast path's keys */
    for (uint32_t i = 0; i < len; i++)
        add(o, "%s", bits[rnd(plain ? 7 : sizeof bits / sizeof bits[0])]);
}

static void number(text *o)
{
    switch (rnd(8)) {
    case 0: add(o, "%u", rnd(100000)); break;
    case 1: add(o, "-%u.%03u", rnd(1000), rnd(1000)); break;
    case 2: add(o, "5%012u.%03u", rnd(1000000000), rnd(1000)); break;
    case 3: add(o, "%ue%d", rnd(100), (int)rnd(40) - 20); break;
    case 4: add(o, "0.%u", rnd(1000000)); break;
    case 5: add(o, "12345678901234567890%u", rnd(10)); break;
    case 6: add(o, "%s", rnd(2) ? "NaN" : "-Infinity"); break;
    default: add(o, "%u.%u", rnd(100), rnd(100)); break;
    }
}

static void value(text *o, int depth)
{
    uint32_t k = depth > 3 ? 3 + rnd(5) : rnd(8);
    switch (k) {
    case 0:
    case 1: { /* an object, most often an event's shape */
        add(o, "{");
        uint32_t n = rnd(9);
        for (uint32_t i = 0; i < n; i++) {
            space(o);
            add(o, "%s\"", i ? "," : "");
            string_body(o, 1);
            add(o, "\"");
            space(o);
            add(o, ":");
            space(o);
            value(o, depth + 1);
            space(o);
        }
        add(o, "}");
        break;
    }
    case 2: {
        add(o, "[");
        uint32_t n = rnd(5);
        for (uint32_t i = 0; i < n; i++) {
            space(o);
            add(o, "%s", i ? "," : "");
            value(o, depth + 1);
        }
        space(o);
        add(o, "]");
        break;
    }
    case 3:
    case 4:
        add(o, "\"");
        string_body(o, 0);
        add(o, "\"");
        break;
    case 5: number(o); break;
    case 6: add(o, "%s", rnd(3) == 0 ? "true" : rnd(2) ? "false" : "null"); break;
    default: number(o); break;
    }
}

static result walk_mem(const char *s, size_t len, int fused, size_t cap)
{
    kj_lexer *lx = NULL;
    cr_assert_eq(kj_open_mem(s, len, &lx), PP_OK);
    result r = walk_all(lx, fused, cap);
    kj_close(lx);
    return r;
}

static result walk_file(const char *path, int fused, size_t cap)
{
    kj_lexer *lx = NULL;
    cr_assert_eq(kj_open_file(path, &lx), PP_OK);
    result r = walk_all(lx, fused, cap);
    kj_close(lx);
    return r;
}

static void same_from_mem(const char *s, size_t len, size_t cap, const char *what)
{
    result a = walk_mem(s, len, 0, cap), b = walk_mem(s, len, 1, cap);
    expect_same(&a, &b, what);
    free(a.t.s);
    free(b.t.s);
}

Test(kineto_json, keys_read_in_one_call_read_as_token_by_token)
{
    static const char corrupt[] = "\"{}[],: x\\1-e.";
    static const size_t caps[] = {64, 1, 8, 16, 17, 200};
    for (int doc = 0; doc < 3000; doc++) {
        text d = {0};
        add(&d, "");
        space(&d);
        value(&d, rnd(4) ? 0 : 1);
        space(&d);
        size_t cap = caps[rnd(sizeof caps / sizeof caps[0])];
        char what[64];
        snprintf(what, sizeof what, "document %d (key buffer %zu)", doc, cap);
        same_from_mem(d.s, d.len, cap, what);
        /* cut anywhere: a key, its colon or a separator at the end of the input */
        size_t cut = d.len ? rnd((uint32_t)d.len) : 0;
        snprintf(what, sizeof what, "document %d cut at %zu", doc, cut);
        same_from_mem(d.s, cut, cap, what);
        /* a byte changed: errors at the same place, with the same message */
        if (d.len) {
            char *c = malloc(d.len);
            memcpy(c, d.s, d.len);
            size_t at = rnd((uint32_t)d.len);
            c[at] = corrupt[rnd(sizeof corrupt - 1)];
            snprintf(what, sizeof what, "document %d with byte %zu changed", doc, at);
            same_from_mem(c, d.len, cap, what);
            free(c);
        }
        free(d.s);
    }
}

/* Events as torch writes them, many, in a file read in 256 KB chunks: keys, colons and separators
 * fall across every chunk boundary somewhere; a gzip copy's chunks end elsewhere. */
Test(kineto_json, keys_across_the_reads_of_a_file_read_as_token_by_token)
{
    text d = {0};
    add(&d, "{\"schemaVersion\": 1, \"traceEvents\": [\n");
    for (int i = 0; d.len < 1600 * 1024; i++) {
        add(&d, "%s  {\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::op%d\", \"pid\": %d, "
                "\"tid\": %d,\n    \"ts\": 5279665373%03d.758, \"dur\": %d.082,\n    \"args\": {\n"
                "      \"External id\": %d,\"Record function id\": 0, \"Ev Idx\": %d",
            i ? ",\n" : "", i % 50, 6000 + i % 3, 6000 + i % 7, i % 1000, i % 90, i, i);
        /* keys of other lengths now and then, so the boundaries fall at every offset of a key */
        if (i % 3 == 0) {
            add(&d, ", \"");
            for (int k = 0; k < 1 + i % 70; k++)
                add(&d, "%c", 'a' + (i + k) % 26);
            add(&d, "\"%*s: %d", i % 4, "", i);
        }
        if (i % 11 == 0)
            add(&d, ", \"esc\\\"aped\": \"\\u00e9\"");
        add(&d, "\n    }\n  }");
    }
    add(&d, "\n]}\n");
    const char *plain = tk_path("events.json");
    FILE *f = fopen(plain, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(d.s, 1, d.len, f), d.len);
    fclose(f);
    const char *gz = tk_path("events.json.gz");
    gzFile g = gzopen(gz, "wb");
    cr_assert_not_null(g);
    cr_assert_eq(gzwrite(g, d.s, (unsigned)d.len), (int)d.len);
    gzclose(g);
    for (int shift = 0; shift < 3; shift++) {
        /* the same events moved by a few bytes: other keys meet the boundaries */
        const char *p = shift == 0 ? plain : shift == 1 ? gz : tk_path("shifted.json");
        if (shift == 2) {
            f = fopen(p, "wb");
            cr_assert_not_null(f);
            fprintf(f, "%*s", 7, "");
            cr_assert_eq(fwrite(d.s, 1, d.len, f), d.len);
            fclose(f);
        }
        result a = walk_file(p, 0, 64), b = walk_file(p, 1, 64);
        cr_assert_eq(a.end, KJ_EOF, "%s: %s", p, a.err);
        expect_same(&a, &b, p);
        cr_assert_eq(a.offset, d.len + (shift == 2 ? 7 : 0));
        result m = walk_mem(d.s, d.len, 1, 64);
        cr_assert(m.t.len == b.t.len && memcmp(m.t.s, b.t.s, m.t.len) == 0,
                  "%s read from memory and from the file differ", p);
        free(a.t.s);
        free(b.t.s);
        free(m.t.s);
    }
    free(d.s);
}

/* What the importer's walk relies on, spelled out. */
Test(kineto_json, a_key_read_with_its_colon)
{
    static const struct {
        const char *in;
        size_t cap;
        kj_tok tok;
        const char *key;
    } cases[] = {
        {"\"ph\": \"X\"", 64, KJ_STR, "ph"},
        {"  \n \"ph\"\n\t:1", 64, KJ_STR, "ph"},
        {"\"\":1", 64, KJ_STR, ""},
        {"\"a\\\"b\":1", 64, KJ_STR, "a\"b"},
        {"\"Record function id\":0", 8, KJ_STR, "Record "},
        {"\"0123456789abcdef0123456789\":0", 17, KJ_STR, "0123456789abcdef"},
        {"\"0123456789abcdef\":0", 16, KJ_STR, "0123456789abcde"},
        {"}", 64, KJ_OBJ_END, NULL},
        {"\"ph\" 1", 64, KJ_ERR, NULL},
        {"\"ph\"", 64, KJ_EOF, NULL},
        {"\"ph", 64, KJ_EOF, NULL},
        {"", 64, KJ_EOF, NULL},
        {"1", 64, KJ_NUM, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kj_lexer *lx = NULL;
        cr_assert_eq(kj_open_mem(cases[i].in, strlen(cases[i].in), &lx), PP_OK);
        char key[256];
        kj_tok t = kj_key(lx, key, cases[i].cap);
        cr_expect_eq(t, cases[i].tok, "case %zu (%s): %d", i, cases[i].in, (int)t);
        if (cases[i].key && t == KJ_STR) {
            cr_expect_str_eq(key, cases[i].key, "case %zu", i);
            kj_tok v = kj_next(lx);
            cr_expect(v == KJ_NUM || v == KJ_STR, "case %zu: the value follows the colon", i);
        }
        kj_close(lx);
    }
    /* after a value: the separator and the next key, or the end, or an error */
    static const struct {
        const char *in;
        kj_tok tok;
    } next[] = {{", \"b\": 2", KJ_STR}, {" }", KJ_OBJ_END}, {",}", KJ_ERR}, {"\"b\":2", KJ_ERR},
                {",", KJ_EOF},          {"", KJ_EOF},        {"]", KJ_ERR},  {", 1", KJ_ERR},
                {",\n  \"b\"", KJ_EOF}};
    for (size_t i = 0; i < sizeof next / sizeof next[0]; i++) {
        kj_lexer *lx = NULL;
        cr_assert_eq(kj_open_mem(next[i].in, strlen(next[i].in), &lx), PP_OK);
        char key[64];
        kj_tok t = kj_next_key(lx, key, sizeof key);
        cr_expect_eq(t, next[i].tok, "after a value, %s: %d", next[i].in, (int)t);
        if (t == KJ_STR)
            cr_expect_str_eq(key, "b");
        kj_close(lx);
    }
}

/* ---- skipping a value: bytes, not tokens ---- */

/* Where the token walk ends the value at the start of s[0..len) (its offset, or KJ_EOF / KJ_ERR
 * when it does not end), and where kj_skip ends it. */
static void skip_as_walked(const char *s, size_t len, const char *what)
{
    kj_lexer *lx = NULL;
    cr_assert_eq(kj_open_mem(s, len, &lx), PP_OK);
    text o = {0};
    kj_tok first = kj_next(lx);
    kj_tok w = walk(lx, first, 0, 64, &o, 0);
    uint64_t w_off = kj_offset(lx);
    kj_close(lx);
    free(o.s);
    cr_assert_eq(kj_open_mem(s, len, &lx), PP_OK);
    kj_tok f2 = kj_next(lx);
    kj_tok k = kj_skip(lx, f2);
    uint64_t k_off = kj_offset(lx);
    kj_close(lx);
    if (first != KJ_OBJ && first != KJ_ARR)
        return; /* a scalar is its own value */
    if (w == KJ_OBJ_END || w == KJ_ARR_END) {
        cr_assert_eq(k, first, "%s: the walk ended the value at %llu, the skip with %d", what,
                     (unsigned long long)w_off, (int)k);
        cr_assert_eq(k_off, w_off, "%s: the walk ended at %llu, the skip at %llu", what,
                     (unsigned long long)w_off, (unsigned long long)k_off);
    } else if (w == KJ_EOF) {
        cr_assert_eq(k, KJ_EOF, "%s: the input ends inside the value, the skip read %d", what,
                     (int)k);
    }
}

/* kj_skip reads an object or array as bytes (its strings' quotes and escapes, its brackets):
 * on random documents, whole and cut anywhere, it ends each where the token walk ends it. */
Test(kineto_json, a_skipped_value_ends_where_its_tokens_end)
{
    for (int doc = 0; doc < 4000; doc++) {
        text d = {0};
        add(&d, "");
        space(&d);
        value(&d, rnd(4) ? 0 : 1);
        space(&d);
        add(&d, ", 7");
        char what[64];
        snprintf(what, sizeof what, "document %d", doc);
        skip_as_walked(d.s, d.len, what);
        size_t cut = d.len ? rnd((uint32_t)d.len) : 0;
        snprintf(what, sizeof what, "document %d cut at %zu", doc, cut);
        skip_as_walked(d.s, cut, what);
        free(d.s);
    }
    /* spelled out: brackets and escaped quotes inside strings, kinds mismatched, the depth */
    static const struct {
        const char *in;
        kj_tok tok;
        size_t end; /* the offset after the value */
    } cases[] = {
        {"[\"]\", \"[[\", \"\\\"]\", \"\\\\\"], 1", KJ_ARR, 24},
        {"{\"a}\": [1, {\"b\": \"}\"}]} 1", KJ_OBJ, 23},
        {"[1, 2}", KJ_ARR, 6}, /* counted, not matched by kind: lenient */
        {"[\"\\\\\\\"]\"]", KJ_ARR, 9},
        {"[\"abc", KJ_EOF, 0},
        {"[\"abc\\", KJ_EOF, 0},
        {"[[[]]", KJ_EOF, 0},
        {"[tru, @, 1e]", KJ_ARR, 12}, /* what lies between is not read */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kj_lexer *lx = NULL;
        cr_assert_eq(kj_open_mem(cases[i].in, strlen(cases[i].in), &lx), PP_OK);
        kj_tok t = kj_skip(lx, kj_next(lx));
        cr_expect_eq(t, cases[i].tok, "case %zu (%s): %d", i, cases[i].in, (int)t);
        if (t != KJ_EOF)
            cr_expect_eq(kj_offset(lx), cases[i].end, "case %zu (%s): ended at %llu", i,
                         cases[i].in, (unsigned long long)kj_offset(lx));
        kj_close(lx);
    }
    for (int depth = 255; depth <= 257; depth++) {
        text d = {0};
        add(&d, "");
        for (int k = 0; k < depth; k++)
            add(&d, k % 2 ? "{\"k\":" : "[");
        for (int k = depth - 1; k >= 0; k--)
            add(&d, k % 2 ? "}" : "]");
        kj_lexer *lx = NULL;
        cr_assert_eq(kj_open_mem(d.s, d.len, &lx), PP_OK);
        kj_tok t = kj_skip(lx, kj_next(lx));
        if (depth <= KJ_MAX_DEPTH) {
            cr_expect_eq(t, KJ_ARR, "depth %d: %d (%s)", depth, (int)t, kj_error(lx));
            cr_expect_eq(kj_offset(lx), d.len, "depth %d", depth);
        } else {
            cr_expect_eq(t, KJ_ERR, "depth %d: %d", depth, (int)t);
            cr_expect(strstr(kj_error(lx), "nesting deeper than 256") != NULL, "%s",
                      kj_error(lx));
        }
        kj_close(lx);
        free(d.s);
    }
}

/* A skipped value that spans the file's 256 KB reads: a string's escape, its quotes and the
 * brackets fall on every side of a boundary (the file shifted byte by byte), plain and gzip. */
Test(kineto_json, a_skipped_value_across_the_reads_of_a_file)
{
    text body = {0};
    add(&body, "");
    for (int i = 0; body.len < 600 * 1024; i++) /* shapes as torch writes them, and worse */
        add(&body, "%s[[%d, 64], [], \"float\", \"x\\\"]\\\\\", {\"k\": \"}\\\\\\\"[\"}, %d]",
            i ? ", " : "", i, i % 9);
    for (int shift = 0; shift < 24; shift++) {
        char name[32];
        snprintf(name, sizeof name, "skip%d.json%s", shift, shift % 5 == 4 ? ".gz" : "");
        const char *p = tk_path(name);
        text d = {0};
        add(&d, "{\"pad\": \"%*s\", \"skip\": [", shift, "");
        add(&d, "%s", body.s);
        add(&d, "], \"after\": 42}");
        if (shift % 5 == 4) {
            gzFile g = gzopen(p, "wb");
            cr_assert_not_null(g);
            cr_assert_eq(gzwrite(g, d.s, (unsigned)d.len), (int)d.len);
            gzclose(g);
        } else {
            FILE *f = fopen(p, "wb");
            cr_assert_not_null(f);
            cr_assert_eq(fwrite(d.s, 1, d.len, f), d.len);
            fclose(f);
        }
        kj_lexer *lx = NULL;
        cr_assert_eq(kj_open_file(p, &lx), PP_OK);
        char key[64];
        cr_assert_eq(kj_next(lx), KJ_OBJ);
        cr_assert_eq(kj_key(lx, key, sizeof key), KJ_STR);
        cr_assert_eq(kj_next(lx), KJ_STR);
        cr_assert_eq(kj_next_key(lx, key, sizeof key), KJ_STR);
        cr_assert_str_eq(key, "skip");
        cr_assert_eq(kj_skip(lx, kj_next(lx)), KJ_ARR, "shift %d: %s", shift, kj_error(lx));
        cr_assert_eq(kj_next_key(lx, key, sizeof key), KJ_STR, "shift %d: %s", shift,
                     kj_error(lx));
        cr_assert_str_eq(key, "after", "shift %d", shift);
        cr_assert_eq(kj_next(lx), KJ_NUM);
        cr_assert_eq(kj_num(lx), 42);
        cr_assert_eq(kj_next(lx), KJ_OBJ_END);
        cr_assert_eq(kj_offset(lx), d.len, "shift %d", shift);
        kj_close(lx);
        free(d.s);
    }
    free(body.s);
}
