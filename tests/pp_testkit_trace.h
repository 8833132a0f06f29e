/* pp_testkit_trace.h: small .pft traces written by hand in the tests (part of pp_testkit):
 * records gathered into a block buffer and written a block at a time, strings given ids. */
#ifndef PP_TESTKIT_TRACE_H
#define PP_TESTKIT_TRACE_H

#include "pp_trace.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tk_tw {
    pp_trace_writer *w;
    uint8_t buf[1 << 16]; /* the block being gathered */
    size_t len;           /* its bytes */
    uint32_t n;           /* its records */
    uint32_t next_str;    /* tk_tw_sid's strings have the ids 1..next_str */
    const char *strs[64];
} tk_tw;

/* A header with the format's fields (magic, version, size) and rank -1, the rest zero. */
void tk_tw_header(pp_trace_header *h);
/* Clears t and opens path with tk_tw_header's header of this pid and rank (asserted). */
void tk_tw_open(tk_tw *t, const char *path, uint32_t pid, int32_t rank);
/* Appends one record to the block (asserted to fit). */
void tk_tw_rec(tk_tw *t, const void *rec, size_t size);
/* Writes the block, if it has records, as one block of this kind and thread, and empties it. */
void tk_tw_flush(tk_tw *t, pp_trace_block_kind kind, uint32_t tid);
/* Flushes first when `need` more bytes would not fit. */
void tk_tw_room(tk_tw *t, size_t need, pp_trace_block_kind kind, uint32_t tid);
/* Appends a string record (id, s) to the block. */
void tk_tw_string(tk_tw *t, uint32_t id, const char *s);
/* The id of s among t's strings; the first time, s (kept by pointer) gets the next id and its
 * string record goes into the block. */
uint32_t tk_tw_sid(tk_tw *t, const char *s);
/* Registers name (tk_tw_sid) and appends the domain record of id 1 with that name. */
void tk_tw_domain(tk_tw *t, const char *name);
/* A range record (type PUSH, START or MARK) of domain 1 with this message, the rest zero; the
 * caller sets any other field and appends it with tk_tw_rec. */
pp_rec_range tk_range_rec(uint16_t type, uint32_t tid, uint64_t ts, uint32_t msg);
/* A POP record of domain 1. */
void tk_tw_pop(tk_tw *t, uint32_t tid, uint64_t ts);

#endif /* PP_TESTKIT_TRACE_H */
