/* trace.c: the .pft trace file writer and reader (format: docs/trace-format.md, API:
 * pp_trace.h). The capture library's writer thread appends blocks; pprof-run, the analyzer, the
 * tests and the fuzz target read them back.
 *
 * The reader is built to take hostile input: every record is copied out with memcpy (no casted
 * pointers into the file), every offset is checked against the bytes present before it is used,
 * no count read from the file sizes an allocation, and nothing recurses. */
#include "pp_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The structs in pp_trace.h are the on-disk layout: records are memcpy'd in and out, which is
 * only right on a little-endian machine with these exact sizes. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the .pft format is little-endian");
_Static_assert(sizeof(pp_trace_header) == 256, "file header is 256 bytes");
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

enum {
    HDR_BYTES = (int)sizeof(pp_trace_header),
    BLK_BYTES = (int)sizeof(pp_trace_block_header),
    /* The largest record: its size field is 16 bits and sizes are multiples of 8. */
    REC_MAX_BYTES = 65528
};

/* ======================================================================================== */
/* Records: the one structural check, shared by the writer (refuses what a reader would      */
/* reject) and the reader.                                                                    */
/* ======================================================================================== */

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
    } else if (h->type == PP_REC_SCHEMA) {
        pp_rec_schema s;
        memcpy(&s, p, sizeof s);
        if ((uint64_t)sizeof s + (uint64_t)s.n_entries * sizeof(pp_rec_schema_entry) > h->size)
            return "schema entries run past their record";
    }
    return NULL;
}

/* Walks a block payload. Returns NULL when every record is well formed and their number is
 * n_records; otherwise the reason, with the failing record's offset in *where. */
static const char *payload_check(const uint8_t *p, size_t bytes, uint32_t n_records,
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

/* ======================================================================================== */
/* Writer                                                                                     */
/* ======================================================================================== */

struct pp_trace_writer {
    int fd;
    uint64_t seq;    /* blocks written so far = the next block's seq */
    uint8_t *buf;    /* header + payload of the block being written */
    size_t cap;
};

static pp_status write_all(int fd, const void *data, size_t n, const char *what)
{
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return PP_ERR(PP_ERR_IO, "trace: writing %s: %s", what, strerror(errno));
        }
        if (k == 0)
            return PP_ERR(PP_ERR_IO, "trace: writing %s: no progress", what);
        p += k;
        n -= (size_t)k;
    }
    return PP_OK;
}

pp_status pp_trace_writer_open(const char *path, const pp_trace_header *h, pp_trace_writer **out)
{
    if (!path || !h || !out)
        return PP_ERR(PP_ERR_INVALID, "trace: writer_open needs a path, a header and an out");
    *out = NULL;
    pp_trace_header hdr = *h;
    memcpy(hdr.magic, PP_TRACE_MAGIC, 4);
    hdr.version = PP_TRACE_VERSION;
    hdr.header_bytes = HDR_BYTES;
    hdr.crc = pp_crc32c(0, &hdr, offsetof(pp_trace_header, crc));

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
    if (kind != PP_BLOCK_EVENTS && kind != PP_BLOCK_META && kind != PP_BLOCK_FOOTER)
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
    const char *why = payload_check(records, bytes, n_records, &where);
    if (why)
        return PP_ERR(PP_ERR_INVALID, "trace: refusing a block a reader would reject: %s "
                      "(payload offset %zu)", why, where);

    size_t total = BLK_BYTES + bytes;
    if (total > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < total)
            cap *= 2;
        uint8_t *nb = realloc(w->buf, cap);
        if (!nb)
            return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for a %zu-byte block", total);
        w->buf = nb;
        w->cap = cap;
    }
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
    uint32_t crc = pp_crc32c(0, w->buf, offsetof(pp_trace_block_header, crc));
    crc = pp_crc32c(crc, w->buf + BLK_BYTES, bytes);
    memcpy(w->buf + offsetof(pp_trace_block_header, crc), &crc, sizeof crc);
    /* One write(2) for the whole block: a kill leaves all of it or a detectably short tail. */
    pp_status st = write_all(w->fd, w->buf, total, "a block");
    if (st != PP_OK)
        return st;
    w->seq++;
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

size_t pp_trace_enc_string(void *buf, size_t cap, uint32_t id, const char *s, size_t len)
{
    if (!s)
        len = 0;
    if (len > PP_TRACE_STRING_MAX)
        len = PP_TRACE_STRING_MAX;
    pp_rec_string r;
    memset(&r, 0, sizeof r);
    r.h.type = PP_REC_STRING;
    r.id = id;
    r.len = (uint32_t)len;
    return enc_var(buf, cap, &r, sizeof r, s, len);
}

size_t pp_trace_enc_ext(void *buf, size_t cap, uint32_t tid, uint64_t ts, uint64_t schema_id,
                        const void *data, uint32_t bytes)
{
    if (!data)
        bytes = 0;
    if (bytes > PP_TRACE_EXT_MAX)
        bytes = PP_TRACE_EXT_MAX;
    pp_rec_ext r;
    memset(&r, 0, sizeof r);
    r.h.type = PP_REC_EXT_PAYLOAD;
    r.h.tid = tid;
    r.h.ts = ts;
    r.schema_id = schema_id;
    r.data_bytes = bytes;
    return enc_var(buf, cap, &r, sizeof r, data, bytes);
}

/* ======================================================================================== */
/* Block reader: header check, then valid blocks one at a time with resync over damage.      */
/* Its memory is bounded by the largest block, whether it reads a buffer or a file.          */
/* ======================================================================================== */

enum { SCAN_CHUNK = 65536 };

/* A view: bytes [off, off+n) of the input, from a buffer or read into one of two scratch
 * buffers (one for blocks, one for the resync scan, so a scan survives checking a candidate).
 * A file is read READ_AHEAD bytes at a time: two small reads per block (its header, then all of
 * it) cost the analyzer more system time than the copy itself. */
enum { READ_AHEAD = 256 << 10 };

typedef struct view_buf {
    uint8_t *p;
    size_t cap;
    uint64_t off; /* input offset of p[0] */
    size_t len;   /* bytes of p holding input from off (0: none) */
} view_buf;

struct pp_trace_reader {
    const uint8_t *mem; /* NULL when reading a file */
    int fd;
    uint64_t len;       /* input length (a file's size when opened) */
    uint64_t pos;       /* next offset to look at */
    view_buf blk, scan;
    pp_trace_header header;
    pp_trace_damage damage;
};

typedef enum { BLK_OK, BLK_UNKNOWN, BLK_BAD, BLK_PAST_EOF } blk_result;

/* Points *out at `n` bytes at `off` (the caller has checked they exist). */
static pp_status src_view(pp_trace_reader *r, view_buf *vb, uint64_t off, size_t n,
                          const uint8_t **out)
{
    if (r->mem) {
        *out = r->mem + off;
        return PP_OK;
    }
    if (vb->len && off >= vb->off && off - vb->off + n <= vb->len) {
        *out = vb->p + (off - vb->off);
        return PP_OK;
    }
    /* n bytes, and as much more up to READ_AHEAD as the file had when opened */
    size_t want = n;
    if (want < READ_AHEAD && off < r->len)
        want = r->len - off < READ_AHEAD ? (size_t)(r->len - off) : READ_AHEAD;
    if (want < n)
        want = n;
    vb->len = 0;
    if (want > vb->cap) {
        size_t cap = vb->cap ? vb->cap : 4096;
        while (cap < want)
            cap *= 2;
        uint8_t *nb = realloc(vb->p, cap);
        if (!nb)
            return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for a %zu-byte read", n);
        vb->p = nb;
        vb->cap = cap;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t k = pread(r->fd, vb->p + got, want - got, (off_t)(off + got));
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return PP_ERR(PP_ERR_IO, "trace: read at offset %llu: %s",
                          (unsigned long long)(off + got), strerror(errno));
        }
        if (k == 0 && got < n)
            return PP_ERR(PP_ERR_IO, "trace: file shrank while being read (offset %llu)",
                          (unsigned long long)(off + got));
        if (k == 0)
            break;
        got += (size_t)k;
    }
    vb->off = off;
    vb->len = got;
    *out = vb->p;
    return PP_OK;
}

/* Judges the would-be block at `off`. On BLK_OK/BLK_UNKNOWN fills *bh and *payload (valid until
 * the next view of the block buffer); otherwise writes the reason into why. */
static pp_status blk_check(pp_trace_reader *r, uint64_t off, blk_result *res,
                           pp_trace_block_header *bh, const uint8_t **payload, char *why,
                           size_t why_cap)
{
    uint64_t rem = r->len - off;
    const uint8_t *p;
    pp_status st;
    *res = BLK_BAD;
    if (rem < 4) {
        st = src_view(r, &r->blk, off, (size_t)rem, &p);
        if (st != PP_OK)
            return st;
        /* A kill can cut a block anywhere, even inside its magic; writers start blocks at
         * 8-byte aligned offsets, which keeps this from matching stray bytes of garbage. */
        if (off % 8 == 0 && memcmp(p, PP_TRACE_BLOCK_MAGIC, (size_t)rem) == 0) {
            *res = BLK_PAST_EOF;
            snprintf(why, why_cap, "file ends %llu bytes into a block header",
                     (unsigned long long)rem);
        } else {
            snprintf(why, why_cap, "no block magic");
        }
        return PP_OK;
    }
    size_t hn = rem < BLK_BYTES ? (size_t)rem : BLK_BYTES;
    st = src_view(r, &r->blk, off, hn, &p);
    if (st != PP_OK)
        return st;
    if (memcmp(p, PP_TRACE_BLOCK_MAGIC, 4) != 0) {
        snprintf(why, why_cap, "no block magic");
        return PP_OK;
    }
    if (rem < BLK_BYTES) {
        *res = BLK_PAST_EOF;
        snprintf(why, why_cap, "file ends %llu bytes into a block header",
                 (unsigned long long)rem);
        return PP_OK;
    }
    memcpy(bh, p, sizeof *bh);
    if (bh->payload_bytes % 8 != 0) {
        snprintf(why, why_cap, "payload size %u is not a multiple of 8", bh->payload_bytes);
        return PP_OK;
    }
    if (bh->payload_bytes > PP_TRACE_MAX_BLOCK_BYTES) {
        snprintf(why, why_cap, "payload size %u over the %u-byte limit", bh->payload_bytes,
                 (unsigned)PP_TRACE_MAX_BLOCK_BYTES);
        return PP_OK;
    }
    uint64_t total = (uint64_t)BLK_BYTES + bh->payload_bytes;
    if (total > rem) {
        *res = BLK_PAST_EOF;
        snprintf(why, why_cap, "file ends inside the block (it needs %llu bytes, %llu remain)",
                 (unsigned long long)total, (unsigned long long)rem);
        return PP_OK;
    }
    st = src_view(r, &r->blk, off, (size_t)total, &p);
    if (st != PP_OK)
        return st;
    uint32_t crc = pp_crc32c(0, p, offsetof(pp_trace_block_header, crc));
    crc = pp_crc32c(crc, p + BLK_BYTES, bh->payload_bytes);
    if (crc != bh->crc) {
        snprintf(why, why_cap, "block checksum mismatch");
        return PP_OK;
    }
    *payload = p + BLK_BYTES;
    if (bh->kind != PP_BLOCK_EVENTS && bh->kind != PP_BLOCK_META &&
        bh->kind != PP_BLOCK_FOOTER) {
        /* A newer writer's block: intact, but its records may not be ours to parse. */
        *res = BLK_UNKNOWN;
        return PP_OK;
    }
    size_t where = 0;
    const char *bad = payload_check(*payload, bh->payload_bytes, bh->n_records, &where);
    if (bad) {
        snprintf(why, why_cap, "%s (payload offset %zu)", bad, where);
        return PP_OK;
    }
    *res = BLK_OK;
    return PP_OK;
}

static void damage_note(pp_trace_damage *d, uint64_t off, const char *why)
{
    if (d->first_problem[0])
        return;
    snprintf(d->first_problem, sizeof d->first_problem, "block at offset %llu: %s",
             (unsigned long long)off, why);
}

/* Finds the next offset >= from where a valid block starts (r->len when none). *trunc is set
 * when the last candidate before the end was a block cut short by the end of the file. The
 * scan goes byte by byte: writers align blocks to 8, but inserted bytes of any length must not
 * hide the blocks after them. */
static pp_status blk_resync(pp_trace_reader *r, uint64_t from, uint64_t *found, int *trunc)
{
    char why[160];
    uint64_t q = from;
    while (q < r->len) {
        uint64_t rem = r->len - q;
        size_t n = rem < SCAN_CHUNK + 3 ? (size_t)rem : SCAN_CHUNK + 3;
        size_t limit = n < SCAN_CHUNK ? n : SCAN_CHUNK; /* candidate starts in this chunk */
        const uint8_t *p;
        pp_status st = src_view(r, &r->scan, q, n, &p);
        if (st != PP_OK)
            return st;
        size_t i = 0;
        while (i < limit) {
            const uint8_t *hit = memchr(p + i, 'P', limit - i);
            if (!hit)
                break;
            i = (size_t)(hit - p);
            size_t avail = n - i;
            size_t cmp = avail < 4 ? avail : 4;
            if (memcmp(hit, PP_TRACE_BLOCK_MAGIC, cmp) == 0) {
                blk_result res;
                pp_trace_block_header bh;
                const uint8_t *payload;
                st = blk_check(r, q + i, &res, &bh, &payload, why, sizeof why);
                if (st != PP_OK)
                    return st;
                if (res == BLK_OK || res == BLK_UNKNOWN) {
                    *found = q + i;
                    return PP_OK;
                }
                if (res == BLK_PAST_EOF)
                    *trunc = 1;
                /* In file mode blk_check read into the block buffer, so p (the scan
                 * buffer) is still this chunk. */
            }
            i++;
        }
        q += limit;
    }
    *found = r->len;
    return PP_OK;
}

static pp_status reader_init(pp_trace_reader *r)
{
    if (r->len < HDR_BYTES)
        return PP_ERR(PP_ERR_CORRUPT, "trace: shorter than the 256-byte header (%llu bytes)",
                      (unsigned long long)r->len);
    const uint8_t *p = NULL;
    pp_status st = src_view(r, &r->blk, 0, HDR_BYTES, &p);
    if (st != PP_OK)
        return st;
    memcpy(&r->header, p, sizeof r->header);
    const pp_trace_header *h = &r->header;
    if (memcmp(h->magic, PP_TRACE_MAGIC, 4) != 0)
        return PP_ERR(PP_ERR_CORRUPT, "trace: bad magic (not a .pft trace file)");
    int crc_ok = pp_crc32c(0, h, offsetof(pp_trace_header, crc)) == h->crc;
    if (h->version != PP_TRACE_VERSION)
        return PP_ERR(PP_ERR_CORRUPT, "trace: unsupported version %u (this reader knows %d)%s",
                      h->version, PP_TRACE_VERSION,
                      crc_ok ? "" : "; the header checksum does not match either");
    if (h->header_bytes != HDR_BYTES)
        return PP_ERR(PP_ERR_CORRUPT, "trace: header size %u, expected 256%s", h->header_bytes,
                      crc_ok ? "" : "; the header checksum does not match either");
    if (!crc_ok)
        return PP_ERR(PP_ERR_CORRUPT, "trace: header checksum mismatch");
    r->damage.header_ok = 1;
    r->pos = HDR_BYTES;
    return PP_OK;
}

pp_status pp_trace_reader_open_mem(const void *data, size_t len, pp_trace_reader **out)
{
    if (!out || (!data && len))
        return PP_ERR(PP_ERR_INVALID, "trace: reader_open_mem needs data and an out");
    *out = NULL;
    static const uint8_t empty[1];
    pp_trace_reader *r = calloc(1, sizeof *r);
    if (!r)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory");
    r->mem = data ? data : empty;
    r->fd = -1;
    r->len = len;
    pp_status st = reader_init(r);
    if (st != PP_OK) {
        pp_trace_reader_close(r);
        return st;
    }
    *out = r;
    return PP_OK;
}

pp_status pp_trace_reader_open(const char *path, pp_trace_reader **out)
{
    if (!path || !out)
        return PP_ERR(PP_ERR_INVALID, "trace: reader_open needs a path and an out");
    *out = NULL;
    pp_trace_reader *r = calloc(1, sizeof *r);
    if (!r)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory");
    pp_status st = PP_OK;
    /* never waits on a FIFO: non-regular files are refused before any read */
    if ((st = pp_file_open_regular(path, &r->fd, &r->len)) != PP_OK)
        goto fail;
    st = reader_init(r);
    if (st != PP_OK) {
        st = pp_error_wrap(st, "%s", path);
        goto fail;
    }
    *out = r;
    return PP_OK;
fail:
    pp_trace_reader_close(r);
    return st;
}

const pp_trace_header *pp_trace_reader_header(const pp_trace_reader *r)
{
    return r ? &r->header : NULL;
}

const pp_trace_damage *pp_trace_reader_damage(const pp_trace_reader *r)
{
    return r ? &r->damage : NULL;
}

pp_status pp_trace_reader_next(pp_trace_reader *r, pp_trace_block *b, bool *got)
{
    if (!r || !b || !got)
        return PP_ERR(PP_ERR_INVALID, "trace: reader_next needs a reader, a block and got");
    *got = false;
    char why[160];
    pp_trace_damage *d = &r->damage;
    while (r->pos < r->len) {
        uint64_t off = r->pos;
        blk_result res;
        pp_trace_block_header bh;
        const uint8_t *payload = NULL;
        pp_status st = blk_check(r, off, &res, &bh, &payload, why, sizeof why);
        if (st != PP_OK)
            return st;
        if (res == BLK_OK || res == BLK_UNKNOWN) {
            r->pos = off + BLK_BYTES + bh.payload_bytes;
            if (res == BLK_UNKNOWN) {
                d->blocks_unknown++;
                continue;
            }
            d->blocks_ok++;
            b->h = bh;
            b->offset = off;
            b->payload = payload;
            *got = true;
            return PP_OK;
        }
        /* Damage from here to the next valid block (or the end). */
        int trunc = res == BLK_PAST_EOF;
        uint64_t next = r->len;
        st = blk_resync(r, off + 1, &next, &trunc);
        if (st != PP_OK)
            return st;
        d->bytes_skipped += next - off;
        r->pos = next;
        if (next < r->len || res != BLK_PAST_EOF)
            d->blocks_bad++; /* a real block was damaged (or garbage), not just cut short */
        if (next >= r->len && trunc)
            d->truncated = 1;
        damage_note(d, off, why);
    }
    return PP_OK;
}

void pp_trace_reader_close(pp_trace_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    free(r->blk.p);
    free(r->scan.p);
    free(r);
}

/* ======================================================================================== */
/* Whole-trace loader                                                                         */
/* ======================================================================================== */

/* Storage that never moves: chunks holding copied strings, ext data and schema fields. */
typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    _Alignas(16) uint8_t data[];
} arena_chunk;

typedef struct def_string {
    uint32_t id;
    uint64_t order;
    const char *s;
} def_string;

typedef struct def_pair { /* domains (a = id), thread names (a = tid) */
    uint32_t a, name;
    uint64_t order;
} def_pair;

typedef struct def_cat {
    uint32_t domain, category, name;
    uint64_t order;
} def_cat;

typedef struct def_schema {
    pp_trace_schema s;
    uint32_t name;
    uint32_t *field_names;
    uint64_t order;
} def_schema;

/* A growable array: v points at n elements of `size` bytes, room for cap. */
typedef struct vec {
    void *v;
    size_t n, cap;
} vec;

typedef struct trace_impl {
    arena_chunk *arena;
    vec strings; /* def_string, sorted by id at the end, first definition kept */
    vec domains, threads, cats, schemas;
    vec msg;     /* uint32_t message id per event, resolved at the end */
    vec gpu, api, nccl; /* pp_trace_gpu, pp_rec_api, pp_trace_nccl (names resolved at the end) */
    uint64_t order;
} trace_impl;

static void *arena_alloc(trace_impl *im, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    arena_chunk *c = im->arena;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        c = calloc(1, sizeof *c + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        /* A big allocation gets its own chunk behind the current one, so the current chunk's
         * free space stays usable. */
        if (im->arena && n > 65536) {
            c->next = im->arena->next;
            im->arena->next = c;
        } else {
            c->next = im->arena;
            im->arena = c;
        }
    }
    void *p = c->data + c->used;
    c->used += n;
    return p;
}

static void *vec_push(vec *a, size_t size)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        void *nv = pp_realloc_array(a->v, cap, size);
        if (!nv)
            return NULL;
        a->v = nv;
        a->cap = cap;
    }
    void *p = (uint8_t *)a->v + a->n * size;
    a->n++;
    memset(p, 0, size);
    return p;
}

static int cmp_string(const void *a, const void *b)
{
    const def_string *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_pair(const void *a, const void *b)
{
    const def_pair *x = a, *y = b;
    if (x->a != y->a)
        return x->a < y->a ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_cat(const void *a, const void *b)
{
    const def_cat *x = a, *y = b;
    if (x->domain != y->domain)
        return x->domain < y->domain ? -1 : 1;
    if (x->category != y->category)
        return x->category < y->category ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_schema(const void *a, const void *b)
{
    const def_schema *x = a, *y = b;
    if (x->s.id != y->s.id)
        return x->s.id < y->s.id ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The string for id, "" when none or unknown. strings must be sorted and deduplicated. */
static const char *string_of(const trace_impl *im, uint32_t id)
{
    const def_string *s = im->strings.v;
    size_t lo = 0, hi = im->strings.n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid].id == id)
            return s[mid].s;
        if (s[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return "";
}

/* Decodes one checked block's records into the trace. */
static pp_status load_block(pp_trace *t, trace_impl *im, vec *events, const pp_trace_block *b)
{
    const uint8_t *p = b->payload;
    size_t bytes = b->h.payload_bytes, off = 0;
    /* The event an EXT_PAYLOAD attaches to: the block's latest PUSH/START/MARK (-1 = none). */
    size_t attach = (size_t)-1;
    while (off < bytes) {
        pp_rec_header h;
        memcpy(&h, p + off, sizeof h);
        const uint8_t *rec = p + off;
        off += h.size; /* checked by payload_check before the block was handed out */
        switch (h.type) {
        case PP_REC_PUSH:
        case PP_REC_START:
        case PP_REC_MARK:
        case PP_REC_POP:
        case PP_REC_END: {
            pp_trace_event *e = vec_push(events, sizeof *e);
            uint32_t *msg = vec_push(&im->msg, sizeof *msg);
            if (!e || !msg)
                return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for events");
            e->type = h.type;
            e->tid = h.tid;
            e->ts = h.ts;
            if (h.type == PP_REC_POP) {
                pp_rec_pop r;
                memcpy(&r, rec, sizeof r);
                e->domain = r.domain;
                attach = (size_t)-1;
            } else if (h.type == PP_REC_END) {
                pp_rec_end r;
                memcpy(&r, rec, sizeof r);
                e->range_id = r.range_id;
                attach = (size_t)-1;
            } else {
                pp_rec_range r;
                memcpy(&r, rec, sizeof r);
                e->domain = r.domain;
                *msg = r.message;
                e->category = r.category;
                e->color = r.color;
                e->payload_type = r.payload_type;
                e->payload = r.payload;
                e->range_id = r.range_id;
                attach = events->n - 1;
            }
            break;
        }
        case PP_REC_EXT_PAYLOAD: {
            pp_rec_ext r;
            memcpy(&r, rec, sizeof r);
            if (attach == (size_t)-1)
                break; /* nothing to attach to: dropped (documented) */
            pp_trace_event *e = (pp_trace_event *)events->v + attach;
            attach = (size_t)-1; /* one extended payload per event */
            uint8_t *data = arena_alloc(im, r.data_bytes ? r.data_bytes : 1);
            if (!data)
                return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for ext payloads");
            memcpy(data, rec + sizeof r, r.data_bytes);
            e->schema_id = r.schema_id;
            e->ext = data;
            e->ext_bytes = r.data_bytes;
            break;
        }
        case PP_REC_STRING: {
            pp_rec_string r;
            memcpy(&r, rec, sizeof r);
            if (r.id == 0)
                break; /* 0 means "no string" */
            char *s = arena_alloc(im, (size_t)r.len + 1);
            def_string *d = vec_push(&im->strings, sizeof *d);
            if (!s || !d)
                return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for strings");
            memcpy(s, rec + sizeof r, r.len);
            s[r.len] = '\0';
            d->id = r.id;
            d->order = im->order++;
            d->s = s;
            break;
        }
        case PP_REC_DOMAIN:
        case PP_REC_THREAD_NAME: {
            pp_rec_domain r; /* same layout as pp_rec_thread_name */
            memcpy(&r, rec, sizeof r);
            def_pair *d = vec_push(h.type == PP_REC_DOMAIN ? &im->domains : &im->threads,
                                   sizeof *d);
            if (!d)
                return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for definitions");
            d->a = r.id;
            d->name = r.name;
            d->order = im->order++;
            break;
        }
        case PP_REC_CATEGORY: {
            pp_rec_category r;
            memcpy(&r, rec, sizeof r);
            def_cat *d = vec_push(&im->cats, sizeof *d);
            if (!d)
                return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for definitions");
            d->domain = r.domain;
            d->category = r.category;
            d->name = r.name;
            d->order = im->order++;
            break;
        }
        case PP_REC_SCHEMA: {
            pp_rec_schema r;
            memcpy(&r, rec, sizeof r);
            def_schema *d = vec_push(&im->schemas, sizeof *d);
            /* n_entries was checked against the record's size (<= 65535 bytes), so this
             * allocation is bounded by bytes really present. */
            size_t n = r.n_entries;
            pp_trace_schema_field *f = arena_alloc(im, (n ? n : 1) * sizeof *f);
            uint32_t *names = arena_alloc(im, (n ? n : 1) * sizeof *names);
            if (!d || !f || !names)
                return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for schemas");
            for (size_t i = 0; i < n; i++) {
                pp_rec_schema_entry en;
                memcpy(&en, rec + sizeof r + i * sizeof en, sizeof en);
                f[i].type = en.type;
                f[i].offset = en.offset;
                f[i].name = "";
                names[i] = en.name;
            }
            d->s.id = r.schema_id;
            d->s.domain = r.domain;
            d->s.name = "";
            d->s.static_size = r.static_size;
            d->s.n_fields = r.n_entries;
            d->s.fields = f;
            d->name = r.name;
            d->field_names = names;
            d->order = im->order++;
            break;
        }
        case PP_REC_GPU: {
            pp_trace_gpu *g = vec_push(&im->gpu, sizeof *g);
            if (!g)
                return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for GPU records");
            memcpy(&g->r, rec, sizeof g->r);
            break;
        }
        case PP_REC_API: {
            pp_rec_api *a = vec_push(&im->api, sizeof *a);
            if (!a)
                return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for API records");
            memcpy(a, rec, sizeof *a);
            break;
        }
        case PP_REC_NCCL: {
            pp_trace_nccl *c = vec_push(&im->nccl, sizeof *c);
            if (!c)
                return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for NCCL records");
            memcpy(&c->r, rec, sizeof c->r);
            break;
        }
        case PP_REC_FOOTER: {
            /* The last footer wins; a well-formed file has one, at its end. */
            memcpy(&t->footer, rec, sizeof t->footer);
            t->damage.has_footer = 1;
            break;
        }
        default:
            t->damage.records_unknown++;
            break;
        }
    }
    return PP_OK;
}

/* Sorts a definition vector by key then file order and keeps one per key: the first
 * (keep_last = 0) or the last (keep_last = 1) definition in file order. */
static void defs_dedupe(vec *a, size_t size, int (*cmp)(const void *, const void *),
                        int (*same)(const void *, const void *), int keep_last)
{
    if (a->n == 0)
        return;
    qsort(a->v, a->n, size, cmp);
    uint8_t *base = a->v;
    size_t out = 0;
    for (size_t i = 0; i < a->n; i++) {
        uint8_t *cur = base + i * size;
        if (out > 0 && same(base + (out - 1) * size, cur)) {
            if (keep_last)
                memmove(base + (out - 1) * size, cur, size);
            continue;
        }
        if (out != i)
            memmove(base + out * size, cur, size);
        out++;
    }
    a->n = out;
}

static int same_string(const void *a, const void *b)
{
    return ((const def_string *)a)->id == ((const def_string *)b)->id;
}
static int same_pair(const void *a, const void *b)
{
    return ((const def_pair *)a)->a == ((const def_pair *)b)->a;
}
static int same_cat(const void *a, const void *b)
{
    const def_cat *x = a, *y = b;
    return x->domain == y->domain && x->category == y->category;
}
static int same_schema(const void *a, const void *b)
{
    return ((const def_schema *)a)->s.id == ((const def_schema *)b)->s.id;
}

/* Resolves string ids and moves the definitions into the public arrays. */
static pp_status load_finish(pp_trace *t, trace_impl *im, vec *events)
{
    /* Strings, domains and schemas are defined once by a writer, so a second definition of an
     * id is damage and the first one (already used by what came before) stays. Thread and
     * category names may be renamed by the program (nvtxNameOsThread, nvtxNameCategory): the
     * last name given wins. */
    defs_dedupe(&im->strings, sizeof(def_string), cmp_string, same_string, 0);
    defs_dedupe(&im->domains, sizeof(def_pair), cmp_pair, same_pair, 0);
    defs_dedupe(&im->threads, sizeof(def_pair), cmp_pair, same_pair, 1);
    defs_dedupe(&im->cats, sizeof(def_cat), cmp_cat, same_cat, 1);
    defs_dedupe(&im->schemas, sizeof(def_schema), cmp_schema, same_schema, 0);

    t->n_events = events->n;
    t->events = events->v;
    events->v = NULL;
    t->n_gpu = im->gpu.n;
    t->gpu = im->gpu.v;
    im->gpu.v = NULL;
    for (size_t i = 0; i < t->n_gpu; i++)
        t->gpu[i].name = string_of(im, t->gpu[i].r.name);
    t->n_api = im->api.n;
    t->api = im->api.v;
    im->api.v = NULL;
    t->n_nccl = im->nccl.n;
    t->nccl = im->nccl.v;
    im->nccl.v = NULL;
    for (size_t i = 0; i < t->n_nccl; i++)
        t->nccl[i].name = string_of(im, t->nccl[i].r.name);
    const uint32_t *msg = im->msg.v;
    for (size_t i = 0; i < t->n_events; i++)
        t->events[i].message = string_of(im, msg[i]);

    size_t nd = im->domains.n, nt = im->threads.n, nc = im->cats.n, ns = im->schemas.n;
    t->domains = calloc(nd ? nd : 1, sizeof *t->domains);
    t->threads = calloc(nt ? nt : 1, sizeof *t->threads);
    t->categories = calloc(nc ? nc : 1, sizeof *t->categories);
    t->schemas = calloc(ns ? ns : 1, sizeof *t->schemas);
    if (!t->domains || !t->threads || !t->categories || !t->schemas)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for definitions");
    const def_pair *dp = im->domains.v;
    for (size_t i = 0; i < nd; i++) {
        t->domains[i].id = dp[i].a;
        t->domains[i].name = string_of(im, dp[i].name);
    }
    t->n_domains = nd;
    dp = im->threads.v;
    for (size_t i = 0; i < nt; i++) {
        t->threads[i].tid = dp[i].a;
        t->threads[i].name = string_of(im, dp[i].name);
    }
    t->n_threads = nt;
    const def_cat *dc = im->cats.v;
    for (size_t i = 0; i < nc; i++) {
        t->categories[i].domain = dc[i].domain;
        t->categories[i].category = dc[i].category;
        t->categories[i].name = string_of(im, dc[i].name);
    }
    t->n_categories = nc;
    const def_schema *ds = im->schemas.v;
    for (size_t i = 0; i < ns; i++) {
        t->schemas[i] = ds[i].s;
        t->schemas[i].name = string_of(im, ds[i].name);
        for (uint32_t k = 0; k < ds[i].s.n_fields; k++)
            t->schemas[i].fields[k].name = string_of(im, ds[i].field_names[k]);
    }
    t->n_schemas = ns;
    return PP_OK;
}

static void impl_free(trace_impl *im)
{
    if (!im)
        return;
    arena_chunk *c = im->arena;
    while (c) {
        arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(im->strings.v);
    free(im->domains.v);
    free(im->threads.v);
    free(im->cats.v);
    free(im->schemas.v);
    free(im->msg.v);
    free(im->gpu.v);
    free(im->api.v);
    free(im->nccl.v);
    free(im);
}

static pp_status load_from(pp_trace_reader *r, pp_trace **out)
{
    pp_status st = PP_OK;
    vec events = {0};
    pp_trace *t = calloc(1, sizeof *t);
    trace_impl *im = calloc(1, sizeof *im);
    if (!t || !im) {
        free(t);
        free(im);
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory");
    }
    t->impl = im;
    t->header = *pp_trace_reader_header(r);
    for (;;) {
        pp_trace_block b;
        bool got;
        st = pp_trace_reader_next(r, &b, &got);
        if (st != PP_OK || !got)
            break;
        st = load_block(t, im, &events, &b);
        if (st != PP_OK)
            break;
    }
    /* Damage counters are final only after the last block; footer flag is the loader's. */
    int has_footer = t->damage.has_footer;
    uint64_t unknown = t->damage.records_unknown;
    t->damage = *pp_trace_reader_damage(r);
    t->damage.has_footer = has_footer;
    t->damage.records_unknown = unknown;
    if (st == PP_OK)
        st = load_finish(t, im, &events);
    free(events.v);
    if (st != PP_OK) {
        pp_trace_free(t);
        return st;
    }
    /* The resolution tables are no longer needed; the arena stays (strings, ext, fields). */
    free(im->strings.v);
    free(im->domains.v);
    free(im->threads.v);
    free(im->cats.v);
    free(im->schemas.v);
    free(im->msg.v);
    im->strings = im->domains = im->threads = im->cats = im->schemas = im->msg = (vec){0};
    *out = t;
    return PP_OK;
}

pp_status pp_trace_load_mem(const void *data, size_t len, pp_trace **out)
{
    if (!out)
        return PP_ERR(PP_ERR_INVALID, "trace: load_mem needs an out");
    *out = NULL;
    pp_trace_reader *r;
    pp_status st = pp_trace_reader_open_mem(data, len, &r);
    if (st != PP_OK)
        return st;
    st = load_from(r, out);
    pp_trace_reader_close(r);
    return st;
}

pp_status pp_trace_load(const char *path, pp_trace **out)
{
    if (!out)
        return PP_ERR(PP_ERR_INVALID, "trace: load needs an out");
    *out = NULL;
    pp_trace_reader *r;
    pp_status st = pp_trace_reader_open(path, &r);
    if (st != PP_OK)
        return st;
    st = load_from(r, out);
    pp_trace_reader_close(r);
    if (st != PP_OK)
        return pp_error_wrap(st, "%s", path);
    return PP_OK;
}

void pp_trace_free(pp_trace *t)
{
    if (!t)
        return;
    free(t->events);
    free(t->gpu);
    free(t->api);
    free(t->nccl);
    free(t->domains);
    free(t->threads);
    free(t->categories);
    free(t->schemas);
    impl_free(t->impl);
    free(t);
}

/* ---- lookups: the public arrays are sorted by their key, so binary search ---- */

const char *pp_trace_domain_name(const pp_trace *t, uint32_t domain)
{
    if (!t)
        return NULL;
    size_t lo = 0, hi = t->n_domains;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->domains[mid].id == domain)
            return t->domains[mid].name;
        if (t->domains[mid].id < domain)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *pp_trace_category_name(const pp_trace *t, uint32_t domain, uint32_t category)
{
    if (!t)
        return NULL;
    size_t lo = 0, hi = t->n_categories;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint32_t d = t->categories[mid].domain, c = t->categories[mid].category;
        if (d == domain && c == category)
            return t->categories[mid].name;
        if (d < domain || (d == domain && c < category))
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const char *pp_trace_thread_name(const pp_trace *t, uint32_t tid)
{
    if (!t)
        return NULL;
    size_t lo = 0, hi = t->n_threads;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->threads[mid].tid == tid)
            return t->threads[mid].name;
        if (t->threads[mid].tid < tid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

const pp_trace_schema *pp_trace_schema_find(const pp_trace *t, uint64_t schema_id)
{
    if (!t)
        return NULL;
    size_t lo = 0, hi = t->n_schemas;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->schemas[mid].id == schema_id)
            return &t->schemas[mid];
        if (t->schemas[mid].id < schema_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void pp_trace_repair_checksums(uint8_t *p, size_t size)
{
    if (size < sizeof(pp_trace_header))
        return;
    uint32_t crc = pp_crc32c(0, p, offsetof(pp_trace_header, crc));
    memcpy(p + offsetof(pp_trace_header, crc), &crc, 4);
    size_t pos = sizeof(pp_trace_header);
    while (pos + sizeof(pp_trace_block_header) <= size) {
        pp_trace_block_header bh;
        memcpy(&bh, p + pos, sizeof bh);
        if (memcmp(bh.magic, PP_TRACE_BLOCK_MAGIC, 4) == 0 && bh.payload_bytes % 8 == 0 &&
            bh.payload_bytes <= size - pos - sizeof bh) {
            crc = pp_crc32c(0, p + pos, offsetof(pp_trace_block_header, crc));
            crc = pp_crc32c(crc, p + pos + sizeof bh, bh.payload_bytes);
            memcpy(p + pos + offsetof(pp_trace_block_header, crc), &crc, 4);
            pos += sizeof bh + bh.payload_bytes;
        } else {
            pos += 8;
        }
    }
}
