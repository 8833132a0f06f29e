/* recompute.c: the activation recomputation choice as text (pptrain --recompute, the plan file's
 * "recompute", the config mark's recompute=; docs/pptrain.md): its parser, shared by pptrain, the
 * plan loader and the analyzer, and the writer the tuner uses. */
#include "pp_plan.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* A decimal index of at most 7 digits at *p; advances p. -1 when there is none. */
static long parse_index(const char **p)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s))
        return -1;
    long v = 0;
    int n = 0;
    while (isdigit((unsigned char)*s)) {
        if (++n > 7)
            return -2;
        v = v * 10 + (*s - '0');
        s++;
    }
    *p = s;
    return v;
}

/* One item, "N", "N-M", "sN" or "sN-M", of length len at item. */
static pp_status parse_item(const char *spec, const char *item, size_t len,
                            const pp_partition *part, uint8_t *mask)
{
    char buf[32];
    if (len == 0)
        return PP_ERR(PP_ERR_INVALID, "--recompute '%s': an empty item (two commas, or a comma "
                                      "at an end)", spec);
    if (len >= sizeof buf)
        return PP_ERR(PP_ERR_INVALID, "--recompute '%s': item '%.*s...' is too long", spec, 20,
                      item);
    memcpy(buf, item, len);
    buf[len] = '\0';
    const char *p = buf;
    int stages = *p == 's';
    if (stages)
        p++;
    long lo = parse_index(&p), hi = lo;
    if (lo >= 0 && *p == '-') {
        p++;
        hi = parse_index(&p);
    }
    if (lo < 0 || hi < 0 || *p != '\0')
        return PP_ERR(PP_ERR_INVALID,
                      "--recompute '%s': item '%s' is not a layer index, a layer range (1-4) or "
                      "a stage (s0, s1-2); the value is none, full or a comma-separated list of "
                      "those", spec, buf);
    if (hi < lo)
        return PP_ERR(PP_ERR_INVALID, "--recompute '%s': range '%s' ends before it starts", spec,
                      buf);
    if (!part)
        return PP_OK;
    if (stages) {
        if (hi >= part->S)
            return PP_ERR(PP_ERR_INVALID, "--recompute '%s': stage %ld does not exist (%d "
                                          "stages, s0-%d)", spec, hi, part->S, part->S - 1);
        for (int piece = 0; piece < part->P; piece++)
            if (piece % part->S >= lo && piece % part->S <= hi)
                for (int l = part->bounds[piece]; l < part->bounds[piece + 1]; l++)
                    mask[l] = 1;
        return PP_OK;
    }
    if (hi >= part->L)
        return PP_ERR(PP_ERR_INVALID, "--recompute '%s': layer %ld does not exist (the model has "
                                      "%d layers, 0-%d: embedding, blocks, head)",
                      spec, hi, part->L, part->L - 1);
    for (long l = lo; l <= hi; l++)
        mask[l] = 1;
    return PP_OK;
}

pp_status pp_recompute_parse(const char *spec, const pp_partition *part, uint8_t *mask)
{
    if (part && mask)
        memset(mask, 0, (size_t)part->L);
    if (!spec || strcmp(spec, "none") == 0)
        return PP_OK;
    if (strcmp(spec, "full") == 0) {
        if (part && mask)
            memset(mask, 1, (size_t)part->L);
        return PP_OK;
    }
    if (!*spec)
        return PP_ERR(PP_ERR_INVALID, "--recompute needs none, full or a list (e.g. 1-4,7 or "
                                      "s0,s2)");
    const char *item = spec;
    for (;;) {
        const char *comma = strchr(item, ',');
        size_t len = comma ? (size_t)(comma - item) : strlen(item);
        pp_status st = parse_item(spec, item, len, mask ? part : NULL, mask);
        if (st != PP_OK)
            return st;
        if (!comma)
            return PP_OK;
        item = comma + 1;
    }
}


pp_status pp_recompute_format(const pp_partition *part, const uint8_t *mask, char *buf,
                              size_t cap)
{
    int any = 0, all = 1;
    for (int l = 0; l < part->L; l++) {
        any |= mask[l] != 0;
        all &= mask[l] != 0;
    }
    const char *word = !any ? "none" : all ? "full" : NULL;
    size_t n = 0;
    if (word) {
        n = (size_t)snprintf(buf, cap, "%s", word);
        return n < cap ? PP_OK : PP_ERR(PP_ERR_INVALID, "recompute text longer than %zu", cap);
    }
    /* whole stages as sN items, else layer ranges lo-hi */
    int stages = 1;
    for (int s = 0; s < part->S && stages; s++) {
        int first = mask[part->bounds[s]] != 0;
        for (int j = s; j < part->P && stages; j += part->S)
            for (int l = part->bounds[j]; l < part->bounds[j + 1]; l++)
                stages &= (mask[l] != 0) == first;
    }
    buf[0] = '\0';
    if (stages) {
        for (int s = 0; s < part->S; s++) {
            if (!mask[part->bounds[s]])
                continue;
            n += (size_t)snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, "%ss%d",
                                  n ? "," : "", s);
        }
    } else {
        for (int l = 0; l < part->L;) {
            if (!mask[l]) {
                l++;
                continue;
            }
            int e = l;
            while (e + 1 < part->L && mask[e + 1])
                e++;
            if (e > l)
                n += (size_t)snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0,
                                      "%s%d-%d", n ? "," : "", l, e);
            else
                n += (size_t)snprintf(buf + (n < cap ? n : cap), n < cap ? cap - n : 0, "%s%d",
                                      n ? "," : "", l);
            l = e + 1;
        }
    }
    return n < cap ? PP_OK : PP_ERR(PP_ERR_INVALID, "recompute text longer than %zu", cap);
}
