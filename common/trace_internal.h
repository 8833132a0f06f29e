/* trace_internal.h: what the .pft trace modules of common/ share and nobody else sees: the
 * fixed sizes, the header and block checksums, the known block kinds and the structural check of
 * a block's records. Included by trace_format.c (the check), trace_write.c (the writer),
 * trace_read.c (the streaming reader), trace_load.c (the whole-trace loader) and trace_repair.c.
 * The public API is pp_trace.h; the format is docs/trace-format.md. */
#ifndef PP_TRACE_INTERNAL_H
#define PP_TRACE_INTERNAL_H

#include "pp_trace.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

enum {
    HDR_BYTES = (int)sizeof(pp_trace_header),
    BLK_BYTES = (int)sizeof(pp_trace_block_header)
};

/* The file header's checksum: CRC-32C of its bytes before the crc field. */
static inline uint32_t trace_header_crc(const void *header)
{
    return pp_crc32c(0, header, offsetof(pp_trace_header, crc));
}

/* A block's checksum: CRC-32C of its header's bytes before the crc field, then of the
 * payload_bytes of records that follow the 32-byte header at blk. */
static inline uint32_t trace_block_crc(const uint8_t *blk, uint32_t payload_bytes)
{
    uint32_t crc = pp_crc32c(0, blk, offsetof(pp_trace_block_header, crc));
    return pp_crc32c(crc, blk + BLK_BYTES, payload_bytes);
}

/* The block kinds this version writes and reads; a reader skips an intact block of another
 * kind (a newer writer's). */
static inline int trace_block_kind_known(uint32_t kind)
{
    return kind == PP_BLOCK_EVENTS || kind == PP_BLOCK_META || kind == PP_BLOCK_FOOTER;
}

/* Grows a scratch buffer (the writer's block, the reader's views) to at least `need` bytes,
 * doubling from 4 KiB; what it held is kept. Returns 0, or -1 when out of memory (the buffer is
 * then unchanged). */
static inline int trace_buf_reserve(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    uint8_t *nb = realloc(*buf, c);
    if (!nb)
        return -1;
    *buf = nb;
    *cap = c;
    return 0;
}

/* The one structural check of a block's records (trace_format.c), shared by the writer (it
 * refuses what a reader would reject) and the reader. Returns NULL when every record is well
 * formed and their number is n_records; otherwise the reason, with the failing record's offset
 * in the payload in *where. Called once per block. */
const char *pp_trace_payload_check(const uint8_t *p, size_t bytes, uint32_t n_records,
                                   size_t *where);

#endif /* PP_TRACE_INTERNAL_H */
