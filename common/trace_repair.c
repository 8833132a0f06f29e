/* trace_repair.c: pp_trace_repair_checksums (pp_trace.h), for the fuzz target and the tests
 * that edit a trace's bytes: recomputes the checksums the writer would have written, so that an
 * edit reaches the records instead of failing the block's checksum. */
#include "trace_internal.h"

#include <string.h>

void pp_trace_repair_checksums(uint8_t *p, size_t size)
{
    if (size < sizeof(pp_trace_header))
        return;
    uint32_t crc = trace_header_crc(p);
    memcpy(p + offsetof(pp_trace_header, crc), &crc, 4);
    size_t pos = sizeof(pp_trace_header);
    while (pos + sizeof(pp_trace_block_header) <= size) {
        pp_trace_block_header bh;
        memcpy(&bh, p + pos, sizeof bh);
        if (memcmp(bh.magic, PP_TRACE_BLOCK_MAGIC, 4) == 0 && bh.payload_bytes % 8 == 0 &&
            bh.payload_bytes <= size - pos - sizeof bh) {
            crc = trace_block_crc(p + pos, bh.payload_bytes);
            memcpy(p + pos + offsetof(pp_trace_block_header, crc), &crc, 4);
            pos += sizeof bh + bh.payload_bytes;
        } else {
            pos += 8;
        }
    }
}
