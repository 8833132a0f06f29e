/* pp_testkit_trace.c: see pp_testkit_trace.h. */
#include "pp_testkit_trace.h"

#include <criterion/criterion.h>
#include <string.h>

void tk_tw_header(pp_trace_header *h)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, PP_TRACE_MAGIC, 4);
    h->version = PP_TRACE_VERSION;
    h->header_bytes = sizeof *h;
    h->rank = -1;
}

void tk_tw_open(tk_tw *t, const char *path, uint32_t pid, int32_t rank)
{
    memset(t, 0, sizeof *t);
    pp_trace_header h;
    tk_tw_header(&h);
    h.pid = pid;
    h.rank = rank;
    cr_assert_eq(pp_trace_writer_open(path, &h, &t->w), PP_OK, "%s", pp_error_message());
}

void tk_tw_rec(tk_tw *t, const void *rec, size_t size)
{
    cr_assert_leq(t->len + size, sizeof t->buf);
    memcpy(t->buf + t->len, rec, size);
    t->len += size;
    t->n++;
}

void tk_tw_flush(tk_tw *t, pp_trace_block_kind kind, uint32_t tid)
{
    if (t->n)
        cr_assert_eq(pp_trace_writer_block(t->w, kind, tid, t->buf, t->len, t->n), PP_OK, "%s",
                     pp_error_message());
    t->len = 0;
    t->n = 0;
}

void tk_tw_room(tk_tw *t, size_t need, pp_trace_block_kind kind, uint32_t tid)
{
    if (t->len + need > sizeof t->buf)
        tk_tw_flush(t, kind, tid);
}

void tk_tw_string(tk_tw *t, uint32_t id, const char *s)
{
    size_t k = pp_trace_enc_string(t->buf + t->len, sizeof t->buf - t->len, id, s, strlen(s));
    cr_assert_gt(k, 0, "string record '%s' does not fit", s);
    t->len += k;
    t->n++;
}

uint32_t tk_tw_sid(tk_tw *t, const char *s)
{
    for (uint32_t i = 1; i <= t->next_str; i++)
        if (strcmp(t->strs[i], s) == 0)
            return i;
    cr_assert_lt(t->next_str + 1, sizeof t->strs / sizeof t->strs[0], "too many strings");
    t->strs[++t->next_str] = s;
    tk_tw_string(t, t->next_str, s);
    return t->next_str;
}

void tk_tw_domain(tk_tw *t, const char *name)
{
    pp_rec_domain d = {{PP_REC_DOMAIN, sizeof d, 0, 0}, 1, tk_tw_sid(t, name)};
    tk_tw_rec(t, &d, sizeof d);
}

pp_rec_range tk_range_rec(uint16_t type, uint32_t tid, uint64_t ts, uint32_t msg)
{
    pp_rec_range r;
    memset(&r, 0, sizeof r);
    r.h.type = type;
    r.h.size = sizeof r;
    r.h.tid = tid;
    r.h.ts = ts;
    r.domain = 1;
    r.message = msg;
    return r;
}

void tk_tw_pop(tk_tw *t, uint32_t tid, uint64_t ts)
{
    pp_rec_pop r;
    memset(&r, 0, sizeof r);
    r.h.type = PP_REC_POP;
    r.h.size = sizeof r;
    r.h.tid = tid;
    r.h.ts = ts;
    r.domain = 1;
    tk_tw_rec(t, &r, sizeof r);
}
