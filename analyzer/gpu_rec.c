/* gpu_rec.c: the GPU pass's inputs, recorded by the host pass (docs/metrics.md "GPU time").
 * The projection (gpu.c) needs the analyzed steps, which only the end of the host pass knows, so
 * it runs after it. It used to read and decode every trace a second time; now the host pass
 * records what that second reading handed the projection, in the same order: each pipeline
 * range it projects onto (file, thread, step, stage, kind, start and end on the reference
 * clock), each GPU, API and NCCL record (on the reference clock), and gpu_pass.c replays them.
 *
 * Bounded: the records stay in memory up to REC_MEM_BYTES, then go to an anonymous scratch file
 * (pp_scratch_file) of at most REC_FILE_BYTES and half the free space of its filesystem. A trace
 * that has no GPU-capture record by the time the memory is full (a host-only trace: nothing to
 * project), a scratch file that cannot be made or written, or one that reaches its bound stops
 * the recording, and the GPU pass, if there is one, reads the traces again as before. */
#include "analyzer_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

enum { REC_MEM_BYTES = 1 << 20 }; /* also the parts in which the file is written and read */
#define REC_FILE_BYTES (UINT64_C(16) << 30)

/* The records' kinds: a pipeline range of each pp_gpu_op, or the trace record types. */
enum { REC_RANGE = 1 /* + pp_gpu_op */ };

/* A record's header: its kind (REC_RANGE + its op, or the trace record type PP_REC_GPU,
 * PP_REC_API, PP_REC_NCCL), its body's size and its file. */
typedef struct rec_head {
    uint16_t kind, size;
    int32_t file;
} rec_head;

typedef struct rec_range {
    uint32_t tid;
    int32_t stage;
    int64_t step;
    uint64_t t0, t1;
} rec_range;

/* Of a GPU and an API record, what the projection reads (pp_gpu_proj_gpu, pp_gpu_proj_api): the
 * body from its first field to its end time, 32 of their 64 and 48 bytes (with whole records the
 * scratch file was 96 MB for bench_analyzer's 423 MB GPU trace, 70 MB so). A field read there
 * beyond these must be kept here too: the_gpu_pass_replays_the_host_pass_and_gets_the_same_analysis
 * and the analysis fuzz target compare the two ways. */
#define GPU_KEPT_LO offsetof(pp_rec_gpu, kind)
#define GPU_KEPT_HI (offsetof(pp_rec_gpu, end) + sizeof(uint64_t))
#define API_KEPT_LO offsetof(pp_rec_api, correlation)
#define API_KEPT_HI (offsetof(pp_rec_api, end) + sizeof(uint64_t))

typedef enum { REC_MEM, REC_FILE, REC_OFF } rec_mode;

struct an_gpu_rec {
    rec_mode mode;
    int gpu_seen;      /* a GPU-capture record was recorded */
    uint8_t *mem;      /* the records not yet in the file (all of them in REC_MEM) */
    size_t len, cap;
    FILE *file;
    uint64_t written, limit;
};

an_gpu_rec *an_gpu_rec_open(void)
{
    return calloc(1, sizeof(an_gpu_rec));
}

void an_gpu_rec_close(an_gpu_rec *r)
{
    if (!r)
        return;
    if (r->file)
        fclose(r->file);
    free(r->mem);
    free(r);
}

/* The recording given up: the GPU pass reads the traces again. */
static void rec_stop(an_gpu_rec *r)
{
    if (r->file)
        fclose(r->file);
    r->file = NULL;
    free(r->mem);
    r->mem = NULL;
    r->len = r->cap = 0;
    r->mode = REC_OFF;
}

/* The memory's records appended to the scratch file (made at the first call), the memory
 * emptied. 0: stopped. */
static int rec_spill(an_gpu_rec *r)
{
    if (!r->file) {
        struct statvfs vs;
        if (!(r->file = pp_scratch_file("pprof-gpu")) || fstatvfs(fileno(r->file), &vs) != 0) {
            rec_stop(r);
            return 0;
        }
        uint64_t half = (uint64_t)vs.f_bavail / 2 * (uint64_t)vs.f_frsize;
        r->limit = half < REC_FILE_BYTES ? half : REC_FILE_BYTES;
        r->mode = REC_FILE;
    }
    if (r->written + r->len > r->limit || fwrite(r->mem, 1, r->len, r->file) != r->len) {
        rec_stop(r);
        return 0;
    }
    r->written += r->len;
    r->len = 0;
    return 1;
}

static void rec_put(an_gpu_rec *r, uint16_t kind, int32_t file, const void *body, size_t size)
{
    rec_head h = {.kind = kind, .size = (uint16_t)size, .file = file};
    size_t need = sizeof h + size;
    if (r->len + need > REC_MEM_BYTES) {
        /* nothing to project so far: most likely a host-only trace */
        if ((!r->gpu_seen && !r->file) ? (rec_stop(r), 1) : !rec_spill(r))
            return;
    }
    if (r->len + need > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64 << 10;
        while (cap < r->len + need)
            cap *= 2;
        cap = cap < REC_MEM_BYTES ? cap : REC_MEM_BYTES;
        uint8_t *m = realloc(r->mem, cap);
        if (!m) {
            rec_stop(r);
            return;
        }
        r->mem = m;
        r->cap = cap;
    }
    memcpy(r->mem + r->len, &h, sizeof h);
    memcpy(r->mem + r->len + sizeof h, body, size);
    r->len += need;
}

int an_gpu_rec_range(an_gpu_rec *r, int32_t file, uint32_t tid, int64_t step, int32_t stage,
                     int32_t kind, uint64_t t0, uint64_t t1)
{
    if (!r || r->mode == REC_OFF)
        return 0;
    rec_range x = {.tid = tid, .stage = stage, .step = step, .t0 = t0, .t1 = t1};
    rec_put(r, (uint16_t)(REC_RANGE + kind), file, &x, sizeof x);
    return r->mode != REC_OFF;
}

int an_gpu_rec_record(an_gpu_rec *r, int32_t file, uint16_t type, const void *rec, size_t size)
{
    if (!r || r->mode == REC_OFF)
        return 0;
    r->gpu_seen = 1;
    const uint8_t *b = rec;
    if (type == PP_REC_GPU && size == sizeof(pp_rec_gpu))
        rec_put(r, type, file, b + GPU_KEPT_LO, GPU_KEPT_HI - GPU_KEPT_LO);
    else if (type == PP_REC_API && size == sizeof(pp_rec_api))
        rec_put(r, type, file, b + API_KEPT_LO, API_KEPT_HI - API_KEPT_LO);
    else if (type == PP_REC_NCCL && size == sizeof(pp_rec_nccl))
        rec_put(r, type, file, rec, size);
    else
        rec_stop(r); /* not a record the projection is handed */
    return r->mode != REC_OFF;
}

int an_gpu_rec_usable(const an_gpu_rec *r)
{
    return r && r->mode != REC_OFF;
}

/* A GPU or API record's kept bytes [lo, hi) back into rec (`size` bytes, the rest zero); 0 when
 * the body is not that long. */
static int unslice(void *rec, size_t size, size_t lo, size_t hi, const rec_head *h,
                   const uint8_t *body)
{
    if (h->size != hi - lo)
        return 0;
    memset(rec, 0, size);
    memcpy((uint8_t *)rec + lo, body, hi - lo);
    return 1;
}

/* One record to the projection; 0 for one that is not a record of ours (a corrupt scratch
 * file: the caller reads the traces again). */
static int replay_one(pp_gpu_proj *p, const rec_head *h, const uint8_t *body)
{
    if (h->kind >= REC_RANGE && h->kind < REC_RANGE + PP_GOP_COUNT) {
        rec_range x;
        if (h->size != sizeof x)
            return 0;
        memcpy(&x, body, sizeof x);
        pp_gpu_proj_range(p, h->file, x.tid, x.step, x.stage, (pp_gpu_op)(h->kind - REC_RANGE),
                          x.t0, x.t1);
        return 1;
    }
    switch (h->kind) {
    case PP_REC_GPU: {
        pp_rec_gpu g;
        if (!unslice(&g, sizeof g, GPU_KEPT_LO, GPU_KEPT_HI, h, body))
            return 0;
        pp_gpu_proj_gpu(p, h->file, &g);
        return 1;
    }
    case PP_REC_API: {
        pp_rec_api a;
        if (!unslice(&a, sizeof a, API_KEPT_LO, API_KEPT_HI, h, body))
            return 0;
        pp_gpu_proj_api(p, h->file, &a);
        return 1;
    }
    case PP_REC_NCCL: {
        pp_rec_nccl n;
        if (h->size != sizeof n)
            return 0;
        memcpy(&n, body, sizeof n);
        pp_gpu_proj_nccl(p, h->file, &n);
        return 1;
    }
    default:
        return 0;
    }
}

/* The records of buf[0 .. len) to the projection; the bytes of a record cut at the end are
 * left (*used: those replayed). 0 for a record that is not ours. */
static int replay_buf(pp_gpu_proj *p, const uint8_t *buf, size_t len, size_t *used)
{
    size_t off = 0;
    rec_head h;
    while (off + sizeof h <= len) {
        memcpy(&h, buf + off, sizeof h);
        if (off + sizeof h + h.size > len)
            break;
        if (!replay_one(p, &h, buf + off + sizeof h))
            return 0;
        off += sizeof h + h.size;
    }
    *used = off;
    return 1;
}

int an_gpu_rec_replay(an_gpu_rec *r, pp_gpu_proj *p)
{
    if (!an_gpu_rec_usable(r))
        return 0;
    size_t used = 0;
    if (r->mode == REC_MEM)
        return replay_buf(p, r->mem, r->len, &used) && used == r->len;
    /* the file, read back into the memory buffer a part at a time */
    if (!rec_spill(r) || fflush(r->file) != 0 || fseek(r->file, 0, SEEK_SET) != 0)
        return 0;
    size_t keep = 0; /* bytes of a record cut at the end of the last part */
    for (uint64_t left = r->written; left > 0 || keep > 0;) {
        size_t want = r->cap - keep < left ? r->cap - keep : (size_t)left;
        if (want && fread(r->mem + keep, 1, want, r->file) != want)
            return 0;
        left -= want;
        size_t len = keep + want;
        if (!replay_buf(p, r->mem, len, &used) || (used == 0 && len > 0 && !want))
            return 0;
        keep = len - used;
        memmove(r->mem, r->mem + used, keep);
        if (!left && keep)
            return 0; /* a record cut by the end of the file */
    }
    return 1;
}
