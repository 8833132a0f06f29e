/* trace_write.c: the .pft trace writer and the record encoders (API: pp_trace.h, format:
 * docs/trace-format.md). The capture library's writer thread (profiler/capture.c) appends
 * blocks; the registry (profiler/registry.c), the tests and the benchmarks encode records. */
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pp_trace_writer {
    int fd;
    uint64_t seq;    /* blocks written so far = the next block's seq */
    uint8_t *buf;    /* header + payload of the block being written */
    size_t cap;
};

static pp_status write_all(int fd, const void *data, size_t n, const char *what)
{
    int err = pp_fd_write_all(fd, data, n);
    return err ? PP_ERR(PP_ERR_IO, "trace: writing %s: %s", what, strerror(err)) : PP_OK;
}

/* The header as written: the caller's fields, the format's magic, version and size, this
 * build's version, the checksum. */
static void header_fill(pp_trace_header *hdr, const pp_trace_header *h)
{
    *hdr = *h;
    memcpy(hdr->magic, PP_TRACE_MAGIC, 4);
    hdr->version = PP_TRACE_VERSION;
    hdr->header_bytes = HDR_BYTES;
    memset(hdr->writer, 0, sizeof hdr->writer);
    memcpy(hdr->writer, PP_VERSION, strnlen(PP_VERSION, sizeof hdr->writer - 1));
    hdr->crc = trace_header_crc(hdr);
}

pp_status pp_trace_writer_open(const char *path, const pp_trace_header *h, pp_trace_writer **out)
{
    if (!path || !h || !out)
        return PP_ERR(PP_ERR_INVALID, "trace: writer_open needs a path, a header and an out");
    *out = NULL;
    pp_trace_header hdr;
    header_fill(&hdr, h);

    pp_trace_writer *w = calloc(1, sizeof *w);
    if (!w)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory opening '%s'", path);
    w->fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        pp_status st = PP_ERR(PP_ERR_IO, "trace: cannot create '%s': %s", path, strerror(errno));
        free(w);
        return st;
    }
    pp_status st = write_all(w->fd, &hdr, sizeof hdr, "the header");
    if (st != PP_OK) {
        /* A file without a complete header is unreadable: do not leave it behind. */
        close(w->fd);
        unlink(path);
        free(w);
        return pp_error_wrap(st, "%s", path);
    }
    *out = w;
    return PP_OK;
}

pp_status pp_trace_writer_block(pp_trace_writer *w, pp_trace_block_kind kind, uint32_t tid,
                                const void *records, size_t bytes, uint32_t n_records)
{
    if (!w)
        return PP_ERR(PP_ERR_INVALID, "trace: no writer");
    if (!trace_block_kind_known((uint32_t)kind))
        return PP_ERR(PP_ERR_INVALID, "trace: unknown block kind %d", (int)kind);
    if (bytes % 8 != 0)
        return PP_ERR(PP_ERR_INVALID, "trace: block payload of %zu bytes is not a multiple of 8",
                      bytes);
    if (bytes > PP_TRACE_MAX_BLOCK_BYTES)
        return PP_ERR(PP_ERR_INVALID, "trace: block payload of %zu bytes over the %u-byte limit",
                      bytes, (unsigned)PP_TRACE_MAX_BLOCK_BYTES);
    if (kind == PP_BLOCK_EVENTS && bytes == 0)
        return PP_ERR(PP_ERR_INVALID, "trace: empty events block");
    if (bytes > 0 && !records)
        return PP_ERR(PP_ERR_INVALID, "trace: block of %zu bytes without records", bytes);
    size_t where = 0;
    const char *why = pp_trace_payload_check(records, bytes, n_records, &where);
    if (why)
        return PP_ERR(PP_ERR_INVALID, "trace: refusing a block a reader would reject: %s "
                      "(payload offset %zu)", why, where);

    size_t total = BLK_BYTES + bytes;
    if (trace_buf_reserve(&w->buf, &w->cap, total) != 0)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for a %zu-byte block", total);
    pp_trace_block_header bh;
    memset(&bh, 0, sizeof bh);
    memcpy(bh.magic, PP_TRACE_BLOCK_MAGIC, 4);
    bh.kind = (uint32_t)kind;
    bh.payload_bytes = (uint32_t)bytes;
    bh.n_records = n_records;
    bh.seq = w->seq;
    bh.tid = tid;
    memcpy(w->buf, &bh, sizeof bh);
    if (bytes)
        memcpy(w->buf + BLK_BYTES, records, bytes);
    uint32_t crc = trace_block_crc(w->buf, (uint32_t)bytes);
    memcpy(w->buf + offsetof(pp_trace_block_header, crc), &crc, sizeof crc);
    /* One write(2) for the whole block: a kill leaves all of it or a detectably short tail. */
    pp_status st = write_all(w->fd, w->buf, total, "a block");
    if (st != PP_OK)
        return st;
    w->seq++;
    return PP_OK;
}

pp_status pp_trace_writer_rewrite_header(pp_trace_writer *w, const pp_trace_header *h)
{
    if (!w || !h)
        return PP_ERR(PP_ERR_INVALID, "trace: rewrite_header needs a writer and a header");
    pp_trace_header hdr;
    header_fill(&hdr, h);
    const uint8_t *p = (const uint8_t *)&hdr;
    for (size_t done = 0; done < sizeof hdr;) {
        ssize_t k = pwrite(w->fd, p + done, sizeof hdr - done, (off_t)done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return PP_ERR(PP_ERR_IO, "trace: rewriting the header: %s",
                          k < 0 ? strerror(errno) : "nothing written");
        done += (size_t)k;
    }
    return PP_OK;
}

pp_status pp_trace_writer_footer(pp_trace_writer *w, const pp_rec_footer *f)
{
    if (!w || !f)
        return PP_ERR(PP_ERR_INVALID, "trace: writer_footer needs a writer and a footer");
    pp_rec_footer rec = *f;
    rec.h.type = PP_REC_FOOTER;
    rec.h.size = sizeof rec;
    rec.blocks = w->seq;
    return pp_trace_writer_block(w, PP_BLOCK_FOOTER, 0, &rec, sizeof rec, 1);
}

uint64_t pp_trace_writer_blocks(const pp_trace_writer *w) { return w ? w->seq : 0; }

void pp_trace_writer_close(pp_trace_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    free(w->buf);
    free(w);
}

/* Writes a record header, `fixed` bytes of fixed part from `rec`, then `n` data bytes and zero
 * padding to 8. `n` is already clamped so the size fits the 16-bit field. */
static size_t enc_var(void *buf, size_t cap, void *rec, size_t fixed, const void *data, size_t n)
{
    size_t size = (fixed + n + 7) & ~(size_t)7;
    if (!buf || cap < size)
        return 0;
    pp_rec_header h;
    memcpy(&h, rec, sizeof h);
    h.size = (uint16_t)size;
    memcpy(rec, &h, sizeof h);
    uint8_t *p = buf;
    memcpy(p, rec, fixed);
    if (n)
        memcpy(p + fixed, data, n);
    memset(p + fixed + n, 0, size - fixed - n);
    return size;
}

/* The bytes of a variable part that fit: none without data, at most max. */
static size_t var_len(const void *data, size_t n, size_t max)
{
    return !data ? 0 : n > max ? max : n;
}

/* The records below have no padding (their sizes are asserted in trace_format.c), so an
 * initializer zeroes every byte a designated field does not set. */
size_t pp_trace_enc_string(void *buf, size_t cap, uint32_t id, const char *s, size_t len)
{
    len = var_len(s, len, PP_TRACE_STRING_MAX);
    pp_rec_string r = {.h.type = PP_REC_STRING, .id = id, .len = (uint32_t)len};
    return enc_var(buf, cap, &r, sizeof r, s, len);
}

size_t pp_trace_enc_ext(void *buf, size_t cap, uint32_t tid, uint64_t ts, uint64_t schema_id,
                        const void *data, uint32_t bytes)
{
    bytes = (uint32_t)var_len(data, bytes, PP_TRACE_EXT_MAX);
    pp_rec_ext r = {.h = {.type = PP_REC_EXT_PAYLOAD, .tid = tid, .ts = ts},
                    .schema_id = schema_id,
                    .data_bytes = bytes};
    return enc_var(buf, cap, &r, sizeof r, data, bytes);
}
