/* trace_format.c: the rules of the .pft layout itself (docs/trace-format.md): the sizes the
 * structs of pp_trace.h must have, and the structural check of a block's records that the
 * writer (trace_write.c) applies before writing a block and the reader (trace_read.c) before
 * handing one out. */
#include "trace_internal.h"

#include <string.h>

/* The structs in pp_trace.h are the on-disk layout: records are memcpy'd in and out, which is
 * only right on a little-endian machine with these exact sizes. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the .pft format is little-endian");
_Static_assert(sizeof(pp_trace_header) == 256, "file header is 256 bytes");
_Static_assert(offsetof(pp_trace_header, pipe_rank) == 232, "pipeline fields at 232");
_Static_assert(offsetof(pp_trace_header, crc) == 252, "header crc covers the first 252 bytes");
_Static_assert(sizeof(pp_trace_block_header) == 32, "block header is 32 bytes");
_Static_assert(offsetof(pp_trace_block_header, crc) == 28, "block crc covers the first 28 bytes");
_Static_assert(sizeof(pp_rec_header) == 16, "record header is 16 bytes");
_Static_assert(sizeof(pp_rec_range) == 56, "range record is 56 bytes");
_Static_assert(sizeof(pp_rec_pop) == 24, "pop record is 24 bytes");
_Static_assert(sizeof(pp_rec_end) == 24, "end record is 24 bytes");
_Static_assert(sizeof(pp_rec_ext) == 32, "ext record is 32 bytes before its data");
_Static_assert(sizeof(pp_rec_string) == 24, "string record is 24 bytes before its text");
_Static_assert(sizeof(pp_rec_domain) == 24, "domain record is 24 bytes");
_Static_assert(sizeof(pp_rec_category) == 32, "category record is 32 bytes");
_Static_assert(sizeof(pp_rec_thread_name) == 24, "thread name record is 24 bytes");
_Static_assert(sizeof(pp_rec_schema) == 40, "schema record is 40 bytes before its entries");
_Static_assert(sizeof(pp_rec_schema_entry) == 24, "schema entry is 24 bytes");
_Static_assert(sizeof(pp_rec_footer) == 64, "footer record is 64 bytes");
_Static_assert(sizeof(pp_rec_gpu) == 64, "GPU record is 64 bytes");
_Static_assert(sizeof(pp_rec_api) == 48, "API record is 48 bytes");
_Static_assert(sizeof(pp_rec_nccl) == 88, "NCCL record is 88 bytes");
_Static_assert(sizeof(pp_rec_counter_def) == 40, "counter definition record is 40 bytes");
_Static_assert(sizeof(pp_rec_counter) == 40, "counter sample record is 40 bytes");
_Static_assert(sizeof(pp_rec_mem) == 56, "memory record is 56 bytes");
_Static_assert(sizeof(pp_rec_gpu_mem) == 56, "GPU memory record is 56 bytes");

/* Checks the record at p (avail bytes left in the block). Returns NULL when well formed, else
 * why not; fills *h. Unknown types only need a sane size. */
static const char *rec_check(const uint8_t *p, size_t avail, pp_rec_header *h, int *known)
{
    *known = 1;
    if (avail < sizeof(pp_rec_header))
        return "record header cut off by the end of the block";
    memcpy(h, p, sizeof *h);
    if (h->size < sizeof(pp_rec_header))
        return "record size below 16";
    if (h->size % 8 != 0)
        return "record size not a multiple of 8";
    if (h->size > avail)
        return "record runs past the end of the block";
    size_t fixed = 0;
    switch (h->type) {
    case PP_REC_PUSH:
    case PP_REC_START:
    case PP_REC_MARK: fixed = sizeof(pp_rec_range); break;
    case PP_REC_POP: fixed = sizeof(pp_rec_pop); break;
    case PP_REC_END: fixed = sizeof(pp_rec_end); break;
    case PP_REC_EXT_PAYLOAD: fixed = sizeof(pp_rec_ext); break;
    case PP_REC_STRING: fixed = sizeof(pp_rec_string); break;
    case PP_REC_DOMAIN: fixed = sizeof(pp_rec_domain); break;
    case PP_REC_CATEGORY: fixed = sizeof(pp_rec_category); break;
    case PP_REC_THREAD_NAME: fixed = sizeof(pp_rec_thread_name); break;
    case PP_REC_SCHEMA: fixed = sizeof(pp_rec_schema); break;
    case PP_REC_FOOTER: fixed = sizeof(pp_rec_footer); break;
    case PP_REC_GPU: fixed = sizeof(pp_rec_gpu); break;
    case PP_REC_API: fixed = sizeof(pp_rec_api); break;
    case PP_REC_NCCL: fixed = sizeof(pp_rec_nccl); break;
    case PP_REC_COUNTER_DEF: fixed = sizeof(pp_rec_counter_def); break;
    case PP_REC_COUNTER: fixed = sizeof(pp_rec_counter); break;
    case PP_REC_MEM: fixed = sizeof(pp_rec_mem); break;
    case PP_REC_GPU_MEM: fixed = sizeof(pp_rec_gpu_mem); break;
    default: *known = 0; return NULL;
    }
    if (h->size < fixed)
        return "record smaller than its type's fixed part";
    /* Variable parts: 64-bit arithmetic, so no count from the file can wrap. */
    if (h->type == PP_REC_EXT_PAYLOAD) {
        pp_rec_ext e;
        memcpy(&e, p, sizeof e);
        if ((uint64_t)sizeof e + e.data_bytes > h->size)
            return "ext payload data runs past its record";
    } else if (h->type == PP_REC_STRING) {
        pp_rec_string s;
        memcpy(&s, p, sizeof s);
        if ((uint64_t)sizeof s + s.len > h->size)
            return "string runs past its record";
    } else if (h->type == PP_REC_COUNTER) {
        pp_rec_counter c;
        memcpy(&c, p, sizeof c);
        if (c.kind != PP_COUNTER_INT64 && c.kind != PP_COUNTER_FLOAT64)
            return "counter sample of an unknown value kind";
    } else if (h->type == PP_REC_MEM) {
        pp_rec_mem m;
        memcpy(&m, p, sizeof m);
        if (m.op < PP_MEM_HEAP_REGISTER || m.op > PP_MEM_REGION_UNREGISTER)
            return "memory record of an unknown operation";
    } else if (h->type == PP_REC_GPU_MEM) {
        if (p[16] != PP_GPU_MEM_ALLOC && p[16] != PP_GPU_MEM_RELEASE)
            return "GPU memory record of an unknown operation";
    } else if (h->type == PP_REC_SCHEMA) {
        pp_rec_schema s;
        memcpy(&s, p, sizeof s);
        if ((uint64_t)sizeof s + (uint64_t)s.n_entries * sizeof(pp_rec_schema_entry) > h->size)
            return "schema entries run past their record";
    }
    return NULL;
}

/* Walks a block payload (trace_internal.h). rec_check is static here so that the walk over
 * the records stays one loop with no call per record. */
const char *pp_trace_payload_check(const uint8_t *p, size_t bytes, uint32_t n_records,
                                   size_t *where)
{
    size_t off = 0;
    uint64_t n = 0;
    while (off < bytes) {
        pp_rec_header h;
        int known;
        const char *why = rec_check(p + off, bytes - off, &h, &known);
        if (why) {
            *where = off;
            return why;
        }
        off += h.size;
        n++;
    }
    *where = 0;
    if (n != n_records)
        return "record count in the block header does not match its payload";
    return NULL;
}
