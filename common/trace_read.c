/* trace_read.c: the streaming .pft reader (API: pp_trace.h, format: docs/trace-format.md):
 * checks the file header, then hands out one valid block at a time, resynchronising over
 * damage and counting it. Its memory is bounded by the largest block, whether it reads a buffer
 * or a file. The analyzer and pprof-run's summary read traces through it; pp_trace_load
 * (trace_load.c) is built on it.
 *
 * The reader is built to take hostile input: every record is copied out with memcpy (no casted
 * pointers into the file), every offset is checked against the bytes present before it is used,
 * no count read from the file sizes an allocation, and nothing recurses. It is also the
 * analyzer's hot path: one checksum and one structural walk per block, reads of READ_AHEAD. */
#include "trace_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    /* the file as opened (pp_trace_reader_reopen compares it) */
    int have_id;
    struct stat id;
    /* the blocks' checksums were verified by an earlier reader of the same, unchanged file */
    int verified;
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
    if (trace_buf_reserve(&vb->p, &vb->cap, want) != 0)
        return PP_ERR(PP_ERR_NOMEM, "trace: out of memory for a %zu-byte read", n);
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
    if (!r->verified && trace_block_crc(p, bh->payload_bytes) != bh->crc) {
        snprintf(why, why_cap, "block checksum mismatch");
        return PP_OK;
    }
    *payload = p + BLK_BYTES;
    if (!trace_block_kind_known(bh->kind)) {
        /* A newer writer's block: intact, but its records may not be ours to parse. */
        *res = BLK_UNKNOWN;
        return PP_OK;
    }
    size_t where = 0;
    const char *bad = pp_trace_payload_check(*payload, bh->payload_bytes, bh->n_records, &where);
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
    int crc_ok = trace_header_crc(h) == h->crc;
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
    r->have_id = fstat(r->fd, &r->id) == 0;
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

/* Whether a and b are the same file with the same contents as far as the file system tells:
 * device, inode, size, and the modification and status-change times (any write moves the
 * latter, and utimensat cannot set it back). */
static int same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

pp_status pp_trace_reader_reopen(const char *path, const pp_trace_reader *done,
                                 pp_trace_reader **out)
{
    pp_status st = pp_trace_reader_open(path, out);
    if (st != PP_OK || !done)
        return st;
    pp_trace_reader *r = *out;
    const pp_trace_damage *d = &done->damage;
    /* every byte after the header was a valid block: none bad, none skipped, none cut short */
    int clean = done->fd >= 0 && done->pos >= done->len && d->header_ok && !d->blocks_bad &&
                !d->bytes_skipped && !d->truncated;
    r->verified = clean && done->have_id && r->have_id && same_file(&done->id, &r->id) &&
                  r->len == done->len;
    return PP_OK;
}

int pp_trace_reader_verified(const pp_trace_reader *r)
{
    return r ? r->verified : 0;
}

const pp_trace_header *pp_trace_reader_header(const pp_trace_reader *r)
{
    return r ? &r->header : NULL;
}

const pp_trace_damage *pp_trace_reader_damage(const pp_trace_reader *r)
{
    return r ? &r->damage : NULL;
}

/* Bytes of valid blocks handed out by every reader of the process (the tools' progress line). */
static _Atomic uint64_t g_bytes_read;

uint64_t pp_trace_bytes_read(void)
{
    return atomic_load_explicit(&g_bytes_read, memory_order_relaxed);
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
            atomic_fetch_add_explicit(&g_bytes_read, BLK_BYTES + bh.payload_bytes,
                                      memory_order_relaxed);
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
