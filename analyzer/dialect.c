/* dialect.c: naming dialects (pp_dialect.h, docs/dialects.md): the user dialect file (its JSON,
 * its small pattern language) and the built-in torch.distributed.pipelining names. Called by
 * decode.c once per (string id, domain): nothing here is on the per-range path. */
#include "pp_dialect.h"

#include "pp_convention.h"
#include "pp_json.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One piece of a compiled pattern. */
typedef enum seg_type { SEG_LIT, SEG_INT, SEG_WORD, SEG_ANY } seg_type;

typedef struct seg {
    seg_type type;
    int field;        /* SEG_INT: the pp_dialect_field it captures */
    uint16_t off, len; /* SEG_LIT: bytes of rule.lit */
} seg;

enum { MAX_SEGS = 2 * PP_DIALECT_MAX_CAPTURES + 1, KIND_FROM_CAPTURE = -2, FROM_DEFAULT = 255 };

typedef struct kind_entry {
    char word[32];
    int kind; /* pp_nvtx_kind or PP_NVTX_KIND_NONE ("other") */
} kind_entry;

typedef struct rule {
    char domain[64];
    int has_domain;
    seg segs[MAX_SEGS];
    int nseg;
    char lit[PP_DIALECT_MAX_PATTERN + 1];
    int kind; /* pp_nvtx_kind, PP_NVTX_KIND_NONE ("other"), or KIND_FROM_CAPTURE */
    kind_entry kinds[PP_DIALECT_MAX_KINDS];
    int nkinds;
    uint8_t from[PP_DF_COUNT]; /* pp_dialect_from, FROM_DEFAULT when the rule says nothing */
    int64_t val[PP_DF_COUNT];
} rule;

struct pp_dialect {
    char name[48];
    rule *rules;
    int nrules;
    int uses_domains;
};

static const char *const k_field_names[PP_DF_COUNT] = {"stage", "mb", "chunk", "layer", "step"};

/* The largest value each field may take (pp_analyzer.h's caps). */
static const int64_t k_field_max[PP_DF_COUNT] = {4095, (1 << 20) - 1, 63, (1 << 16) - 1,
                                                 INT64_C(1) << 48};

/* Kind words: the convention's words, the layer kinds spelled apart, and "other". */
static int kind_of_word(const char *w)
{
    static const struct {
        const char *w;
        int k;
    } t[] = {{"step", PP_NVTX_STEP},           {"fwd", PP_NVTX_FWD},
             {"bwd", PP_NVTX_BWD},             {"bwd_input", PP_NVTX_BWD_INPUT},
             {"bwd_weight", PP_NVTX_BWD_WEIGHT}, {"send_act", PP_NVTX_SEND_ACT},
             {"recv_act", PP_NVTX_RECV_ACT},   {"send_grad", PP_NVTX_SEND_GRAD},
             {"recv_grad", PP_NVTX_RECV_GRAD}, {"opt_step", PP_NVTX_OPT_STEP},
             {"layer_fwd", PP_NVTX_LAYER_FWD}, {"layer_bwd", PP_NVTX_LAYER_BWD},
             {"layer_bwd_weight", PP_NVTX_LAYER_BWD_WEIGHT},
             {"allreduce", PP_NVTX_ALLREDUCE}, {"other", PP_NVTX_KIND_NONE}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(w, t[i].w) == 0)
            return t[i].k;
    return -3;
}

#define KIND_WORDS                                                                             \
    "step, fwd, bwd, bwd_input, bwd_weight, send_act, recv_act, send_grad, recv_grad, "       \
    "opt_step, layer_fwd, layer_bwd, layer_bwd_weight, allreduce, other"

static int is_word_char(int c) { return isalpha(c) || c == '_'; }

/* Compiles r->lit's source pattern p into segments. */
static pp_status compile_pattern(rule *r, const char *p, const char *ctx)
{
    size_t n = strlen(p);
    if (n == 0)
        return PP_ERR(PP_ERR_INVALID, "%s: \"match\" is empty", ctx);
    if (n > PP_DIALECT_MAX_PATTERN)
        return PP_ERR(PP_ERR_INVALID, "%s: \"match\" is %zu bytes long (at most %d)", ctx, n,
                      PP_DIALECT_MAX_PATTERN);
    size_t lit = 0;
    int captures = 0, anys = 0, seen_field[PP_DF_COUNT] = {0}, seen_kind = 0;
    r->nseg = 0;
    for (size_t i = 0; i < n;) {
        if ((p[i] == '{' && p[i + 1] == '{') || (p[i] == '}' && p[i + 1] == '}') ||
            (p[i] != '{' && p[i] != '}')) {
            /* a literal byte (a doubled brace is one) */
            char c = p[i];
            i += (c == '{' || c == '}') ? 2 : 1;
            seg *last = r->nseg ? &r->segs[r->nseg - 1] : NULL;
            if (!last || last->type != SEG_LIT) {
                if (r->nseg == MAX_SEGS)
                    return PP_ERR(PP_ERR_INVALID, "%s: \"match\" has too many pieces", ctx);
                last = &r->segs[r->nseg++];
                *last = (seg){.type = SEG_LIT, .off = (uint16_t)lit, .len = 0};
            }
            r->lit[lit++] = c;
            last->len++;
            continue;
        }
        if (p[i] == '}')
            return PP_ERR(PP_ERR_INVALID, "%s: \"match\" has a '}' at byte %zu that closes no "
                                          "'{' (write }} for a literal brace)",
                          ctx, i);
        const char *close = strchr(p + i, '}');
        if (!close)
            return PP_ERR(PP_ERR_INVALID, "%s: \"match\" has a '{' at byte %zu that is not "
                                          "closed (write {{ for a literal brace)",
                          ctx, i);
        char name[16];
        size_t nl = (size_t)(close - p - (ptrdiff_t)i - 1);
        if (nl >= sizeof name)
            nl = sizeof name - 1;
        memcpy(name, p + i + 1, nl);
        name[nl] = '\0';
        i = (size_t)(close - p) + 1;
        seg s = {0};
        if (strcmp(name, "*") == 0) {
            s.type = SEG_ANY;
            if (++anys > PP_DIALECT_MAX_ANY)
                return PP_ERR(PP_ERR_INVALID, "%s: \"match\" has more than %d {*}", ctx,
                              PP_DIALECT_MAX_ANY);
        } else if (strcmp(name, "kind") == 0) {
            s.type = SEG_WORD;
            if (seen_kind++)
                return PP_ERR(PP_ERR_INVALID, "%s: \"match\" captures {kind} twice", ctx);
        } else {
            int f = -1;
            for (int k = 0; k < PP_DF_COUNT; k++)
                if (strcmp(name, k_field_names[k]) == 0)
                    f = k;
            if (f < 0)
                return PP_ERR(PP_ERR_INVALID, "%s: \"match\" has an unknown capture {%s} (known: "
                                              "{stage} {mb} {chunk} {layer} {step} {kind} {*})",
                              ctx, name);
            if (seen_field[f]++)
                return PP_ERR(PP_ERR_INVALID, "%s: \"match\" captures {%s} twice", ctx, name);
            s.type = SEG_INT;
            s.field = f;
        }
        if (++captures > PP_DIALECT_MAX_CAPTURES)
            return PP_ERR(PP_ERR_INVALID, "%s: \"match\" has more than %d captures", ctx,
                          PP_DIALECT_MAX_CAPTURES);
        if (r->nseg && r->segs[r->nseg - 1].type != SEG_LIT &&
            (r->segs[r->nseg - 1].type == s.type || s.type == SEG_ANY ||
             r->segs[r->nseg - 1].type == SEG_ANY))
            return PP_ERR(PP_ERR_INVALID, "%s: \"match\" puts two captures side by side that "
                                          "cannot be told apart (put a literal between them)",
                          ctx);
        if (r->nseg == MAX_SEGS)
            return PP_ERR(PP_ERR_INVALID, "%s: \"match\" has too many pieces", ctx);
        r->segs[r->nseg++] = s;
    }
    r->lit[lit] = '\0';
    /* a capture takes the longest run it can: the literal after it must start where it stops */
    for (int k = 0; k + 1 < r->nseg; k++) {
        const seg *a = &r->segs[k], *b = &r->segs[k + 1];
        if (b->type != SEG_LIT)
            continue;
        unsigned char c = (unsigned char)r->lit[b->off];
        if ((a->type == SEG_INT && isdigit(c)) || (a->type == SEG_WORD && is_word_char(c)))
            return PP_ERR(PP_ERR_INVALID, "%s: \"match\": the literal after {%s} starts with "
                                          "'%c', which the capture would take",
                          ctx, a->type == SEG_INT ? k_field_names[a->field] : "kind", c);
    }
    for (int k = 0; k < PP_DF_COUNT; k++)
        if (seen_field[k])
            r->from[k] = PP_DFROM_VALUE;
    r->kind = seen_kind ? KIND_FROM_CAPTURE : r->kind;
    return PP_OK;
}

/* Matches segments [k, nseg) of r against s (len bytes), captures into m; 1 on a match. Each
 * piece tried costs one of *budget: at 0 nothing matches (a hostile name cannot make {*}'s
 * backtracking long). */
static int match_from(const rule *r, int k, const char *s, size_t len, pp_dialect_match *m,
                      char *word, size_t word_cap, int *budget)
{
    for (; k < r->nseg; k++) {
        if (--*budget <= 0)
            return 0;
        const seg *g = &r->segs[k];
        switch (g->type) {
        case SEG_LIT:
            if (len < g->len || memcmp(s, r->lit + g->off, g->len) != 0)
                return 0;
            s += g->len, len -= g->len;
            break;
        case SEG_INT: {
            size_t d = 0;
            int64_t x = 0;
            while (d < len && isdigit((unsigned char)s[d])) {
                if (d == 18)
                    return 0; /* more digits than any bound: not a value of ours */
                x = x * 10 + (s[d] - '0');
                d++;
            }
            if (d == 0)
                return 0;
            m->v[g->field] = x;
            s += d, len -= d;
            break;
        }
        case SEG_WORD: {
            size_t d = 0;
            while (d < len && is_word_char((unsigned char)s[d]))
                d++;
            if (d == 0 || d >= word_cap)
                return 0;
            memcpy(word, s, d);
            word[d] = '\0';
            s += d, len -= d;
            break;
        }
        case SEG_ANY:
            for (size_t skip = 0; skip <= len && *budget > 0; skip++)
                if (match_from(r, k + 1, s + skip, len - skip, m, word, word_cap, budget))
                    return 1;
            return 0;
        }
    }
    return len == 0;
}

static int kind_has_mb(int kind)
{
    return kind >= PP_NVTX_FWD && kind <= PP_NVTX_RECV_GRAD;
}

int pp_dialect_match_name(const pp_dialect *d, const char *domain, const char *name,
                          pp_dialect_match *m)
{
    size_t len = strlen(name);
    int budget = PP_DIALECT_MATCH_BUDGET;
    if (!d || len > PP_DIALECT_MAX_NAME)
        return 0;
    for (int i = 0; i < d->nrules; i++) {
        const rule *r = &d->rules[i];
        if (r->has_domain && strcmp(r->domain, domain) != 0)
            continue;
        pp_dialect_match x = {.kind = PP_NVTX_KIND_NONE, .rule = i, .torch_stage_id = -1};
        for (int k = 0; k < PP_DF_COUNT; k++)
            x.v[k] = -1;
        char word[32];
        if (!match_from(r, 0, name, len, &x, word, sizeof word, &budget))
            continue;
        int kind = r->kind;
        if (kind == KIND_FROM_CAPTURE) {
            kind = -3;
            for (int k = 0; k < r->nkinds; k++)
                if (strcmp(r->kinds[k].word, word) == 0)
                    kind = r->kinds[k].kind;
            if (kind == -3)
                continue; /* a word the map does not name: the next rule may */
        }
        x.kind = kind;
        for (int k = 0; k < PP_DF_COUNT; k++) {
            if (r->from[k] == FROM_DEFAULT)
                x.from[k] = k == PP_DF_STAGE                  ? PP_DFROM_RANK
                            : k == PP_DF_MB && kind_has_mb(kind) ? PP_DFROM_SEQUENCE
                                                               : PP_DFROM_UNSET;
            else
                x.from[k] = r->from[k];
            if (r->from[k] == PP_DFROM_VALUE && x.v[k] < 0)
                x.v[k] = r->val[k]; /* a constant (a captured value is set already) */
            if (x.from[k] == PP_DFROM_VALUE && x.v[k] > k_field_max[k]) {
                x.kind = PP_NVTX_KIND_NONE; /* a captured value past the bounds: not ours */
                break;
            }
        }
        *m = x;
        return 1;
    }
    return 0;
}

/* ---- the dialect file ---- */

static pp_status parse_field(const cJSON *it, const char *ctx, int f, rule *r)
{
    if (!it || cJSON_IsNull(it))
        return PP_OK;
    if (r->from[f] == PP_DFROM_VALUE)
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" is given and captured by \"match\" too", ctx,
                      k_field_names[f]);
    if (cJSON_IsNumber(it)) {
        double x;
        pp_status st = pp_json_get_int(it, ctx, k_field_names[f], 0, (double)k_field_max[f], &x);
        if (st != PP_OK)
            return st;
        r->from[f] = PP_DFROM_VALUE;
        r->val[f] = (int64_t)x;
        return PP_OK;
    }
    const char *s = cJSON_IsString(it) ? it->valuestring : NULL;
    if (s && strcmp(s, "rank") == 0 && f == PP_DF_STAGE)
        r->from[f] = PP_DFROM_RANK;
    else if (s && strcmp(s, "sequence") == 0 && f != PP_DF_STAGE && f != PP_DF_CHUNK)
        r->from[f] = PP_DFROM_SEQUENCE;
    else if (s && strcmp(s, "enclosing") == 0 && f != PP_DF_CHUNK && f != PP_DF_LAYER)
        r->from[f] = PP_DFROM_UNSET;
    else
        return PP_ERR(PP_ERR_INVALID, "%s: \"%s\" must be a whole number in [0, %lld]%s (got "
                                      "%s%.40s%s)",
                      ctx, k_field_names[f], (long long)k_field_max[f],
                      f == PP_DF_STAGE   ? ", \"rank\" or \"enclosing\""
                      : f == PP_DF_CHUNK ? ""
                      : f == PP_DF_LAYER ? " or \"sequence\""
                                         : ", \"sequence\" or \"enclosing\"",
                      s ? "\"" : "", s ? s : pp_json_type_name(it), s ? "\"" : "");
    return PP_OK;
}

static pp_status parse_rule(const cJSON *obj, const char *ctx, rule *r)
{
    static const char *const keys[] = {"match", "domain", "kind", "kinds", "stage", "mb",
                                       "chunk", "layer", "step", "comment"};
    enum { N_KEYS = sizeof keys / sizeof keys[0] };
    const cJSON *f[N_KEYS] = {0};
    if (!cJSON_IsObject(obj))
        return PP_ERR(PP_ERR_INVALID, "%s: a rule must be an object (got %s)", ctx,
                      pp_json_type_name(obj));
    pp_status st = pp_json_collect_keys(obj, keys, N_KEYS, f, ctx);
    if (st != PP_OK)
        return st;
    memset(r, 0, sizeof *r);
    for (int k = 0; k < PP_DF_COUNT; k++)
        r->from[k] = FROM_DEFAULT;
    r->kind = -3;
    if (!f[0] || !cJSON_IsString(f[0]))
        return PP_ERR(PP_ERR_INVALID, "%s: \"match\" (a string) is required", ctx);
    if ((st = compile_pattern(r, f[0]->valuestring, ctx)) != PP_OK)
        return st;
    if (f[1] && !cJSON_IsNull(f[1])) {
        if (!cJSON_IsString(f[1]) || strlen(f[1]->valuestring) >= sizeof r->domain)
            return PP_ERR(PP_ERR_INVALID, "%s: \"domain\" must be a string of at most %zu bytes",
                          ctx, sizeof r->domain - 1);
        snprintf(r->domain, sizeof r->domain, "%s", f[1]->valuestring);
        r->has_domain = 1;
    }
    if (r->kind == KIND_FROM_CAPTURE) {
        if (f[2])
            return PP_ERR(PP_ERR_INVALID, "%s: \"match\" captures {kind}: give \"kinds\" (word "
                                          "-> kind), not \"kind\"",
                          ctx);
        if (!f[3] || !cJSON_IsObject(f[3]) || !f[3]->child)
            return PP_ERR(PP_ERR_INVALID, "%s: \"match\" captures {kind}: \"kinds\" must be a "
                                          "non-empty object mapping the captured word to a kind",
                          ctx);
        for (const cJSON *e = f[3]->child; e; e = e->next) {
            if (r->nkinds == PP_DIALECT_MAX_KINDS)
                return PP_ERR(PP_ERR_INVALID, "%s: \"kinds\" has more than %d entries", ctx,
                              PP_DIALECT_MAX_KINDS);
            int kk = cJSON_IsString(e) ? kind_of_word(e->valuestring) : -3;
            if (kk == -3)
                return PP_ERR(PP_ERR_INVALID, "%s: \"kinds\".\"%.31s\" must be one of " KIND_WORDS,
                              ctx, e->string);
            if (strlen(e->string) >= sizeof r->kinds[0].word || !*e->string)
                return PP_ERR(PP_ERR_INVALID, "%s: \"kinds\" key \"%.31s\" must be 1 to %zu bytes",
                              ctx, e->string, sizeof r->kinds[0].word - 1);
            kind_entry *ke = &r->kinds[r->nkinds++];
            snprintf(ke->word, sizeof ke->word, "%s", e->string);
            ke->kind = kk;
        }
    } else {
        if (f[3])
            return PP_ERR(PP_ERR_INVALID, "%s: \"kinds\" needs a {kind} capture in \"match\"",
                          ctx);
        if (!f[2] || !cJSON_IsString(f[2]) || (r->kind = kind_of_word(f[2]->valuestring)) == -3)
            return PP_ERR(PP_ERR_INVALID, "%s: \"kind\" is required, one of " KIND_WORDS, ctx);
    }
    for (int k = 0; k < PP_DF_COUNT; k++)
        if ((st = parse_field(f[4 + k], ctx, k, r)) != PP_OK)
            return st;
    if (f[9] && !cJSON_IsString(f[9]))
        return PP_ERR(PP_ERR_INVALID, "%s: \"comment\" must be a string", ctx);
    return PP_OK;
}

pp_status pp_dialect_parse(const char *text, const char *ctx, pp_dialect **out)
{
    static const char *const keys[] = {"name", "rules", "comment"};
    const cJSON *f[3] = {0};
    cJSON *root = NULL;
    char rctx[256];
    snprintf(rctx, sizeof rctx, "dialect file '%.200s'", ctx);
    *out = NULL;
    if (strlen(text) > PP_DIALECT_MAX_FILE)
        return PP_ERR(PP_ERR_INVALID, "%s: larger than %d bytes", rctx, PP_DIALECT_MAX_FILE);
    pp_status st = pp_json_parse_object(text, rctx, keys, 3, f, &root);
    pp_dialect *d = NULL;
    if (st != PP_OK)
        goto done;
    if (!f[0] || !cJSON_IsString(f[0]) || !*f[0]->valuestring ||
        strlen(f[0]->valuestring) >= sizeof d->name) {
        st = PP_ERR(PP_ERR_INVALID, "%s: \"name\" must be a string of 1 to 47 bytes", rctx);
        goto done;
    }
    if ((st = pp_json_need_array(f[1], rctx, "rules")) != PP_OK)
        goto done;
    int n = cJSON_GetArraySize(f[1]);
    if (n < 1 || n > PP_DIALECT_MAX_RULES) {
        st = PP_ERR(PP_ERR_INVALID, "%s: \"rules\" must hold 1 to %d rules (it holds %d)", rctx,
                    PP_DIALECT_MAX_RULES, n);
        goto done;
    }
    d = calloc(1, sizeof *d);
    if (!d || !(d->rules = calloc((size_t)n, sizeof *d->rules))) {
        st = PP_ERR(PP_ERR_NOMEM, "%s: out of memory", rctx);
        goto done;
    }
    snprintf(d->name, sizeof d->name, "%s", f[0]->valuestring);
    int i = 0;
    for (const cJSON *r = f[1]->child; r; r = r->next, i++) {
        char c[400];
        const cJSON *m = cJSON_IsObject(r) ? pp_json_member(r, "match") : NULL;
        snprintf(c, sizeof c, "%s: rule %d%s%.60s%s", rctx, i, m && cJSON_IsString(m) ? " (\"" : "",
                 m && cJSON_IsString(m) ? m->valuestring : "", m && cJSON_IsString(m) ? "\")" : "");
        if ((st = parse_rule(r, c, &d->rules[i])) != PP_OK)
            goto done;
        d->uses_domains |= d->rules[i].has_domain;
        d->nrules = i + 1;
    }
done:
    cJSON_Delete(root);
    if (st != PP_OK) {
        pp_dialect_destroy(d);
        return st;
    }
    *out = d;
    return PP_OK;
}

pp_status pp_dialect_load(const char *path, pp_dialect **out)
{
    char *text = NULL;
    *out = NULL;
    pp_status st = pp_json_file_read(path, "dialect file", &text);
    if (st == PP_OK)
        st = pp_dialect_parse(text, path, out);
    free(text);
    return st;
}

void pp_dialect_destroy(pp_dialect *d)
{
    if (!d)
        return;
    free(d->rules);
    free(d);
}

const char *pp_dialect_name(const pp_dialect *d) { return d ? d->name : ""; }

int pp_dialect_uses_domains(const pp_dialect *d) { return d ? d->uses_domains : 0; }

/* ---- torch.distributed.pipelining ---- */

/* A decimal number of 1 to max_digits digits at *s (moved past it) into *out; 0 when none. */
static int read_num(const char **s, int max_digits, int64_t *out)
{
    int64_t x = 0;
    int d = 0;
    while (isdigit((unsigned char)(*s)[d])) {
        if (d == max_digits)
            return 0;
        x = x * 10 + ((*s)[d] - '0');
        d++;
    }
    *s += d;
    *out = x;
    return d > 0;
}

static void torch_init(pp_dialect_match *m, int kind)
{
    *m = (pp_dialect_match){.kind = kind, .rule = -1, .torch_stage_id = -1, .torch = 1};
    for (int k = 0; k < PP_DF_COUNT; k++)
        m->v[k] = -1;
    m->from[PP_DF_STAGE] = PP_DFROM_RANK;
}

/* "<stage id><action><mb>" at *s (schedules.py's _Action without its "PP:"), *s moved past it:
 * 1 with a pipeline action, 0 otherwise (UNSHARD, WAIT_SEND_F1, REDUCE_GRAD, ... are none). */
static int torch_action(const char **s, int64_t *sid, int *kind, int64_t *mb)
{
    static const struct {
        const char *a;
        int k;
    } acts[] = {{"F", PP_NVTX_FWD},           {"B", PP_NVTX_BWD},
                {"I", PP_NVTX_BWD_INPUT},     {"W", PP_NVTX_BWD_WEIGHT},
                {"RECV_F", PP_NVTX_RECV_ACT}, {"SEND_F", PP_NVTX_SEND_ACT},
                {"RECV_B", PP_NVTX_RECV_GRAD}, {"SEND_B", PP_NVTX_SEND_GRAD}};
    if (!read_num(s, 6, sid) || *sid >= 4096 * 64)
        return 0;
    size_t al = 0;
    while ((*s)[al] == '_' || isupper((unsigned char)(*s)[al]))
        al++;
    *kind = -3;
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (strlen(acts[i].a) == al && strncmp(*s, acts[i].a, al) == 0)
            *kind = acts[i].k;
    *s += al;
    return *kind != -3 && read_num(s, 7, mb) && *mb < 1 << 20;
}

/* The match of torch action (kind, stage id, mb). */
static void torch_action_match(pp_dialect_match *m, int kind, int64_t sid, int64_t mb)
{
    torch_init(m, kind);
    m->from[PP_DF_MB] = PP_DFROM_VALUE;
    m->v[PP_DF_MB] = mb;
    m->torch_stage_id = sid;
}

int pp_dialect_torch_sub(const pp_dialect_match *m, int k, pp_dialect_match *out)
{
    if (!m->torch_overlap || k < 0 || k > 1 || m->torch_sub_kind[k] == PP_NVTX_KIND_NONE)
        return 0;
    torch_action_match(out, m->torch_sub_kind[k], m->torch_sub_sid[k], m->torch_sub_mb[k]);
    return 1;
}

/* ---- PaddlePaddle's pipeline timeline ---- */

int pp_dialect_paddle_match(int virtual_chunks, const char *name, pp_dialect_match *m)
{
    int kind = name[0] == 'F' ? PP_NVTX_FWD : name[0] == 'B' ? PP_NVTX_BWD : -1;
    const char *s = name + 1;
    int64_t mb, chunk = 0;
    if (kind < 0 || !read_num(&s, 7, &mb) || mb > k_field_max[PP_DF_MB])
        return 0;
    if (virtual_chunks && (strncmp(s, "_VP", 3) != 0 || (s += 3, !read_num(&s, 2, &chunk)) ||
                           chunk > k_field_max[PP_DF_CHUNK]))
        return 0;
    if (*s)
        return 0;
    *m = (pp_dialect_match){.kind = kind, .rule = -1, .torch_stage_id = -1};
    for (int k = 0; k < PP_DF_COUNT; k++)
        m->v[k] = -1;
    m->from[PP_DF_STAGE] = PP_DFROM_THREAD;
    m->from[PP_DF_MB] = m->from[PP_DF_CHUNK] = PP_DFROM_VALUE;
    m->v[PP_DF_MB] = mb;
    m->v[PP_DF_CHUNK] = chunk;
    return 1;
}

int pp_dialect_is_torch_profiler(const char *dialect)
{
    return dialect && (strcmp(dialect, PP_DIALECT_TORCH) == 0 ||
                       strcmp(dialect, PP_DIALECT_DEEPSPEED) == 0 ||
                       strcmp(dialect, PP_DIALECT_MEGATRON) == 0);
}

int pp_dialect_torch_match(const char *name, pp_dialect_match *m)
{
    int64_t x;
    const char *s = name;
    if (strncmp(s, "ProfilerStep#", 13) == 0) {
        s += 13;
        if (!read_num(&s, 15, &x) || *s)
            return 0;
        torch_init(m, PP_NVTX_STEP);
        m->from[PP_DF_STEP] = PP_DFROM_VALUE;
        m->v[PP_DF_STEP] = x;
        return 1;
    }
    if (strncmp(s, "PP:(", 4) == 0) {
        /* DualPipeV's "PP:(<s>F<m>;<s'>B<m'>)OVERLAP_F_B": two compute actions in one range, run
         * one after the other; decode.c splits it where the backward starts. A name whose
         * sub-actions do not parse is still recognised (what opens inside it is its own). */
        size_t len = strlen(s), ol = strlen(")OVERLAP_F_B");
        if (len <= 4 + ol || strcmp(s + len - ol, ")OVERLAP_F_B") != 0)
            return 0;
        torch_init(m, PP_NVTX_KIND_NONE);
        m->torch_overlap = 1;
        const char *p = s + 4;
        int64_t sid[2], mb[2];
        int kind[2];
        if (torch_action(&p, &sid[0], &kind[0], &mb[0]) && *p++ == ';' &&
            torch_action(&p, &sid[1], &kind[1], &mb[1]) && p == s + len - ol &&
            kind[0] >= PP_NVTX_FWD && kind[0] <= PP_NVTX_BWD_WEIGHT && kind[1] >= PP_NVTX_FWD &&
            kind[1] <= PP_NVTX_BWD_WEIGHT) {
            for (int k = 0; k < 2; k++) {
                m->torch_sub_kind[k] = kind[k];
                m->torch_sub_sid[k] = sid[k];
                m->torch_sub_mb[k] = mb[k];
            }
        } else {
            m->torch_sub_kind[0] = m->torch_sub_kind[1] = PP_NVTX_KIND_NONE;
        }
        return 1;
    }
    if (strncmp(s, "PP:", 3) == 0) {
        /* PP:<stage id><action><mb>: schedules.py's _Action, as its profiler names show it */
        int64_t sid, mb;
        int kind;
        s += 3;
        if (!torch_action(&s, &sid, &kind, &mb) || *s)
            return 0; /* UNSHARD, RESHARD, WAIT_SEND_F, REDUCE_GRAD, ...: not pipeline ops */
        torch_action_match(m, kind, sid, mb);
        return 1;
    }
    /* torch.optim's step, as Optimizer's profile hook names it ("Optimizer.step#SGD.step",
     * "Optimizer.step#AdamW.step"): the stage's optimizer step */
    if (strncmp(s, "Optimizer.step#", 15) == 0) {
        size_t len = strlen(s);
        if (len <= 15 + 5 || strcmp(s + len - 5, ".step") != 0 || strchr(s + 15, '#'))
            return 0;
        torch_init(m, PP_NVTX_OPT_STEP);
        return 1;
    }
    /* the process group's point-to-point operations (record_function in ProcessGroupGloo /
     * ProcessGroupNCCL): async, posted inside an action */
    if (strcmp(s, "gloo:recv") == 0 || strcmp(s, "nccl:recv") == 0 ||
        strcmp(s, "gloo:send") == 0 || strcmp(s, "nccl:send") == 0) {
        int recv = s[5] == 'r';
        torch_init(m, recv ? PP_NVTX_RECV_ACT : PP_NVTX_SEND_ACT);
        m->torch_comm = recv ? PP_DCOMM_RECV : PP_DCOMM_SEND;
        return 1;
    }
    /* the data-parallel replicas' gradient all-reduce (DDP, FSDP's and torch_pipe.py's): on the
     * process group's own thread (gloo), its step by time (an_file_step_at) */
    if (strcmp(s, "gloo:all_reduce") == 0 || strcmp(s, "nccl:all_reduce") == 0) {
        torch_init(m, PP_NVTX_ALLREDUCE);
        return 1;
    }
    if (strncmp(s, "nn.Module: ", 11) == 0 && s[11]) {
        torch_init(m, PP_NVTX_LAYER_FWD);
        m->torch_module = 1;
        return 1;
    }
    /* Schedule1F1B's calls, seen with with_stack=True: "torch/distributed/pipelining/
     * stage.py(<line>): forward_one_chunk" (the line varies by version) */
    const char *py = strstr(s, "pipelining/stage.py(");
    const char *fn = py ? strstr(py, "): ") : NULL;
    if (fn && (strcmp(fn, "): forward_one_chunk") == 0 || strcmp(fn, "): backward_one_chunk") == 0)) {
        torch_init(m, fn[3] == 'f' ? PP_NVTX_FWD : PP_NVTX_BWD);
        m->from[PP_DF_MB] = PP_DFROM_SEQUENCE;
        m->torch_stack = 1;
        return 1;
    }
    /* DeepSpeed's PipelineEngine, seen the same way: its instructions' methods "deepspeed/
     * runtime/pipe/engine.py(<line>): _exec_forward_pass" / "_exec_backward_pass" (one
     * micro-batch each, in order: its TrainSchedule's 1F1B); the p2p inside its
     * _exec_send_* / _exec_recv_* methods are the gloo/nccl ranges above */
    py = strstr(s, "deepspeed/runtime/pipe/engine.py(");
    fn = py ? strstr(py, "): ") : NULL;
    if (fn && strcmp(fn, "): _exec_optimizer_step") == 0) {
        /* no op of its own (torch.optim's step inside it is the optimizer op); the collectives
         * in it are the optimizer's (decode.c, deepspeed_opt_collective) */
        torch_init(m, PP_NVTX_KIND_NONE);
        m->torch_deepspeed = 2;
        return 1;
    }
    if (fn && (strcmp(fn, "): _exec_forward_pass") == 0 ||
               strcmp(fn, "): _exec_backward_pass") == 0)) {
        torch_init(m, fn[9] == 'f' ? PP_NVTX_FWD : PP_NVTX_BWD);
        m->from[PP_DF_MB] = PP_DFROM_SEQUENCE;
        m->torch_stack = 1;
        m->torch_deepspeed = 1;
        return 1;
    }
    /* Megatron-LM's schedules (megatron/core/pipeline_parallel/schedules.py: 1F1B, interleaved,
     * no pipelining) run each micro-batch's forward in forward_step and its backward in
     * backward_step, in the schedule's order; the p2p between them (p2p_communication.py's
     * send_forward_recv_backward, ...) post the gloo/nccl ranges above, outside the calls */
    py = strstr(s, "megatron/core/pipeline_parallel/schedules.py(");
    fn = py ? strstr(py, "): ") : NULL;
    if (fn && (strcmp(fn, "): forward_step") == 0 || strcmp(fn, "): backward_step") == 0)) {
        torch_init(m, fn[3] == 'f' ? PP_NVTX_FWD : PP_NVTX_BWD);
        m->from[PP_DF_MB] = PP_DFROM_SEQUENCE;
        m->torch_stack = 1;
        m->torch_megatron = 1;
        return 1;
    }
    if (fn && strcmp(fn, "): forward_backward_pipelining_with_interleaving") == 0) {
        /* the interleaved schedule, whose forward_step calls do not say which model chunk they
         * run (decode.c counts it; the analysis warns) */
        torch_init(m, PP_NVTX_KIND_NONE);
        m->torch_megatron = 2;
        return 1;
    }
    int kind = strncmp(s, "Forward ", 8) == 0    ? PP_NVTX_FWD
               : strncmp(s, "Backward ", 9) == 0 ? PP_NVTX_BWD
                                                 : -3;
    if (kind != -3) {
        /* ScheduleGPipe's record_function names */
        s += kind == PP_NVTX_FWD ? 8 : 9;
        if (!read_num(&s, 7, &x) || *s || x >= 1 << 20)
            return 0;
        torch_init(m, kind);
        m->from[PP_DF_MB] = PP_DFROM_VALUE;
        m->v[PP_DF_MB] = x;
        return 1;
    }
    return 0;
}
