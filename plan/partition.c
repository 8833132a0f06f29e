/* partition.c: cutting the model's layer list into P = S * v contiguous pieces: an even split,
 * explicit boundaries, and the "0,3,7,12,14" text form of --partition and plan files. Called by
 * pptrain, the executor and the plan loader. */
#include "pp_plan.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* S, v >= 1 and P = S * v fits an int; sets *P. */
static pp_status check_shape(int L, int S, int v, int *P)
{
    if (L < 1)
        return PP_ERR(PP_ERR_INVALID, "partition: the model must have at least 1 layer (got %d)",
                      L);
    if (S < 1)
        return PP_ERR(PP_ERR_INVALID, "partition: stages must be >= 1 (got %d)", S);
    if (v < 1)
        return PP_ERR(PP_ERR_INVALID, "partition: virtual stages must be >= 1 (got %d)", v);
    if (S > INT_MAX / v)
        return PP_ERR(PP_ERR_INVALID, "partition: %d stages x %d virtual stages is too many",
                      S, v);
    *P = S * v;
    if (*P > L)
        return PP_ERR(PP_ERR_INVALID,
                      "partition: %d pieces (%d stages x %d virtual) exceed the model's %d "
                      "layers; every piece needs at least one layer",
                      *P, S, v, L);
    return PP_OK;
}

static pp_status alloc_bounds(int L, int S, int v, int P, pp_partition *out)
{
    out->bounds = pp_alloc(((size_t)P + 1) * sizeof(int));
    if (!out->bounds)
        return PP_ERR(PP_ERR_NOMEM, "partition: cannot allocate %d boundaries", P + 1);
    out->L = L;
    out->S = S;
    out->v = v;
    out->P = P;
    return PP_OK;
}

pp_status pp_partition_even(int L, int S, int v, pp_partition *out)
{
    memset(out, 0, sizeof *out);
    int P = 0;
    pp_status st = check_shape(L, S, v, &P);
    if (st != PP_OK)
        return st;
    st = alloc_bounds(L, S, v, P, out);
    if (st != PP_OK)
        return st;
    /* The first P - rem pieces get `base` layers, the rest one more: the last pieces usually
     * also hold the head and loss, but an even split stays the simple, predictable default. */
    int base = L / P, rem = L % P;
    out->bounds[0] = 0;
    for (int p = 0; p < P; p++)
        out->bounds[p + 1] = out->bounds[p] + base + (p >= P - rem ? 1 : 0);
    return PP_OK;
}

pp_status pp_partition_from_bounds(const int *bounds, int n, int L, int S, int v,
                                   pp_partition *out)
{
    memset(out, 0, sizeof *out);
    int P = 0;
    /* The count is checked before P > L so a wrong list length is reported as such. */
    if (L >= 1 && S >= 1 && v >= 1 && S <= INT_MAX / v && n != (long long)S * v + 1)
        return PP_ERR(PP_ERR_INVALID,
                      "partition: expected %lld boundaries (%d stages x %d virtual + 1) but got "
                      "%d",
                      (long long)S * v + 1, S, v, n);
    pp_status st = check_shape(L, S, v, &P);
    if (st != PP_OK)
        return st;
    if (!bounds)
        return PP_ERR(PP_ERR_INVALID, "partition: no boundaries given");
    if (bounds[0] != 0)
        return PP_ERR(PP_ERR_INVALID, "partition: first boundary %d must be 0", bounds[0]);
    for (int i = 1; i < n; i++) {
        if (bounds[i] < 0 || bounds[i] > L)
            return PP_ERR(PP_ERR_INVALID,
                          "partition: boundary %d at position %d is out of range [0, %d]",
                          bounds[i], i, L);
        if (bounds[i] <= bounds[i - 1])
            return PP_ERR(PP_ERR_INVALID,
                          "partition: boundaries not increasing at position %d (%d after %d)%s", i,
                          bounds[i], bounds[i - 1],
                          bounds[i] == bounds[i - 1] ? "; every piece needs at least one layer"
                                                     : "");
    }
    if (bounds[n - 1] != L)
        return PP_ERR(PP_ERR_INVALID,
                      "partition: last boundary %d must equal the model's %d layers",
                      bounds[n - 1], L);
    st = alloc_bounds(L, S, v, P, out);
    if (st != PP_OK)
        return st;
    memcpy(out->bounds, bounds, (size_t)n * sizeof(int));
    return PP_OK;
}

/* One field of the list: an optional '-' and decimal digits, nothing else (no spaces, no '+'),
 * within int. */
static pp_status parse_field(const char *s, size_t len, int pos, int *out)
{
    char tmp[32];
    if (len == 0)
        return PP_ERR(PP_ERR_INVALID,
                      "partition: empty field at position %d (expected comma-separated "
                      "integers without spaces, e.g. 0,3,7,12,14)",
                      pos);
    size_t shown = len < sizeof tmp ? len : sizeof tmp - 1;
    memcpy(tmp, s, shown);
    tmp[shown] = '\0';
    size_t i = s[0] == '-' ? 1 : 0;
    int ok = len < sizeof tmp && i < len;
    for (; ok && i < len; i++)
        ok = s[i] >= '0' && s[i] <= '9';
    if (!ok)
        return PP_ERR(PP_ERR_INVALID,
                      "partition: '%s%s' at position %d is not an integer (expected "
                      "comma-separated integers without spaces, e.g. 0,3,7,12,14)",
                      tmp, len < sizeof tmp ? "" : "...", pos);
    errno = 0;
    long long v = strtoll(tmp, NULL, 10);
    if (errno == ERANGE || v < INT_MIN || v > INT_MAX)
        return PP_ERR(PP_ERR_INVALID, "partition: %s at position %d is out of range", tmp, pos);
    *out = (int)v;
    return PP_OK;
}

pp_status pp_partition_parse(const char *text, int L, int v, pp_partition *out)
{
    memset(out, 0, sizeof *out);
    if (!text || !*text)
        return PP_ERR(PP_ERR_INVALID, "partition: empty boundary list (expected e.g. 0,3,7,12,14)");
    if (v < 1)
        return PP_ERR(PP_ERR_INVALID, "partition: virtual stages must be >= 1 (got %d)", v);
    size_t n = 1;
    for (const char *c = text; *c; c++)
        n += *c == ',';
    if (n < 2)
        return PP_ERR(PP_ERR_INVALID,
                      "partition: '%s' has %zu value; at least 2 are needed (first 0, last %d)",
                      text, n, L);
    if (n - 1 > (size_t)INT_MAX)
        return PP_ERR(PP_ERR_INVALID, "partition: too many boundaries");
    int P = (int)(n - 1);
    if (P % v != 0)
        return PP_ERR(PP_ERR_INVALID,
                      "partition: %d pieces (%zu boundaries) is not a multiple of %d virtual "
                      "stages",
                      P, n, v);
    int *vals = malloc(n * sizeof(int));
    if (!vals)
        return PP_ERR(PP_ERR_NOMEM, "partition: cannot allocate %zu boundaries", n);
    pp_status st = PP_OK;
    const char *field = text;
    for (size_t i = 0; i < n; i++) {
        const char *end = strchr(field, ',');
        size_t len = end ? (size_t)(end - field) : strlen(field);
        st = parse_field(field, len, (int)i, &vals[i]);
        if (st != PP_OK)
            goto done;
        field += len + 1;
    }
    st = pp_partition_from_bounds(vals, (int)n, L, P / v, v, out);
done:
    free(vals);
    return st;
}

void pp_partition_free(pp_partition *p)
{
    if (!p)
        return;
    pp_free(p->bounds);
    memset(p, 0, sizeof *p);
}

void pp_partition_format(const pp_partition *p, char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return;
    buf[0] = '\0';
    if (!p || !p->bounds)
        return;
    size_t used = 0;
    for (int i = 0; i <= p->P; i++) {
        int w = snprintf(buf + used, cap - used, i ? ",%d" : "%d", p->bounds[i]);
        if (w < 0 || (size_t)w >= cap - used) {
            /* Truncated: cut back to the last whole value so the text never shows a
             * misleading partial number. */
            buf[used] = '\0';
            return;
        }
        used += (size_t)w;
    }
}
