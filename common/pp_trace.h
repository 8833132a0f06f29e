/* pp_trace.h: the .pft trace file (docs/trace-format.md): one file per captured process,
 * written by the capture library (profiler/) and read by pprof-run's summary, the analyzer, the
 * tests and the fuzz target. The writer appends self-contained checksummed blocks, so a process
 * killed at any moment leaves a file whose complete blocks all read back; the reader never
 * crashes on truncated or corrupt input: it recovers every valid block and reports what it
 * skipped.
 *
 * Layout: file header | block | block | ... | footer block. Little-endian throughout.
 * Thread-safety: a writer is used by one thread (the capture library's writer thread); readers
 * are independent objects. */
#ifndef PP_TRACE_H
#define PP_TRACE_H

#include "pp_common.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PP_TRACE_MAGIC "PPFT"
#define PP_TRACE_BLOCK_MAGIC "PPBK"
enum { PP_TRACE_VERSION = 1 };
/* Limits: a block's payload (the reader treats larger sizes as damage), and the longest string
 * and ext payload one record can carry (its 16-bit size field holds at most 65528). */
#define PP_TRACE_MAX_BLOCK_BYTES (64u << 20)
#define PP_TRACE_STRING_MAX (65528u - 24u)
#define PP_TRACE_EXT_MAX (65528u - 32u)

/* ---- file header (fixed 256 bytes, CRC-32C over its first 252) ---- */
typedef struct pp_trace_header {
    char magic[4];        /* "PPFT" */
    uint16_t version;     /* PP_TRACE_VERSION */
    uint16_t header_bytes;/* 256 */
    uint32_t flags;       /* 0 */
    uint32_t pid;
    int32_t rank;         /* -1 when unknown */
    uint32_t reserved0;
    uint64_t mono_ns;     /* CLOCK_MONOTONIC and CLOCK_REALTIME read back to back at start */
    uint64_t real_ns;
    int64_t clock_offset_ns; /* test hook (PPROF_TEST_CLOCK_OFFSET_NS) added to every timestamp;
                                0 in real captures */
    double clock_drift;      /* test hook: timestamps scaled by (1 + drift) around mono_ns */
    char host[64];        /* NUL-padded */
    char exe[96];         /* NUL-padded, basename of the executable */
    char writer[16];      /* NUL-padded: the pipeprof version that wrote the file ("0.1.0");
                             all zero in files of versions before 0.1.0 recorded it */
    /* The process's place in its pipeline's process group, where the job named that group
     * (flags & PP_TRACE_PIPELINE_GROUP; written by the Kineto importer from distributedInfo):
     * its index in the group, the group's size and its lowest global rank (one per pipeline,
     * so data-parallel replicas differ by it). Zero otherwise. */
    int32_t pipe_rank;
    int32_t pipe_size;
    int32_t pipe_first;
    uint8_t reserved[8];
    uint32_t crc;         /* CRC-32C of the 252 bytes before it */
} pp_trace_header;

/* pp_trace_header.flags */
enum {
    PP_TRACE_PIPELINE_GROUP = 1u << 0, /* pipe_rank, pipe_size, pipe_first are set */
    PP_TRACE_OTHER_GROUPS = 1u << 1,   /* the process was in process groups smaller than the
                                          job's, none of them named as the pipeline's */
    PP_TRACE_STAGE_ONLY = 1u << 2      /* pipe_rank is the process's stage, its pipeline (the
                                          other fields) unknown: Paddle's pipeline timeline */
};

/* ---- block header (32 bytes), followed by payload_bytes of records ---- */
typedef enum pp_trace_block_kind {
    PP_BLOCK_EVENTS = 1, /* records of one thread (tid in the header), time-ordered */
    PP_BLOCK_META = 2,   /* definitions: strings, domains, categories, thread names, schemas */
    PP_BLOCK_FOOTER = 3  /* one PP_REC_FOOTER record, written at exit */
} pp_trace_block_kind;

typedef struct pp_trace_block_header {
    char magic[4];          /* "PPBK" */
    uint32_t kind;          /* pp_trace_block_kind */
    uint32_t payload_bytes; /* records after this header */
    uint32_t n_records;
    uint64_t seq;           /* 0, 1, 2 ... in file order */
    uint32_t tid;           /* EVENTS: the thread; 0 otherwise */
    uint32_t crc;           /* CRC-32C of the first 28 bytes of this header and the payload */
} pp_trace_block_header;

/* ---- records: every record starts with this 16-byte header; size is the whole record in
 * bytes, a multiple of 8, so a reader can skip kinds it does not know. ---- */
typedef enum pp_trace_rec_type {
    PP_REC_PUSH = 1,        /* pp_rec_range */
    PP_REC_POP = 2,         /* pp_rec_pop */
    PP_REC_START = 3,       /* pp_rec_range (range_id set) */
    PP_REC_END = 4,         /* pp_rec_end */
    PP_REC_MARK = 5,        /* pp_rec_range */
    PP_REC_EXT_PAYLOAD = 6, /* pp_rec_ext: extended payload of the preceding PUSH/START/MARK of
                               the same thread */
    PP_REC_COUNTER = 7,     /* pp_rec_counter: one sample of a counter (NVTX counters
                               extension, or the capture library's own resident memory) */
    PP_REC_MEM = 8,         /* pp_rec_mem: one heap or region call of NVTX's memory extension */
    PP_REC_STRING = 16,     /* pp_rec_string */
    PP_REC_DOMAIN = 17,     /* pp_rec_domain */
    PP_REC_CATEGORY = 18,   /* pp_rec_category */
    PP_REC_THREAD_NAME = 19,/* pp_rec_thread_name */
    PP_REC_SCHEMA = 20,     /* pp_rec_schema */
    PP_REC_COUNTER_DEF = 21,/* pp_rec_counter_def: a registered counter */
    PP_REC_FOOTER = 32,     /* pp_rec_footer */
    /* GPU capture (pprof-run --cuda / --nccl). Their h.ts is 0: the times are in the body, in
     * CLOCK_MONOTONIC ns like every other timestamp of the file. */
    PP_REC_GPU = 40,        /* pp_rec_gpu: a kernel, copy, memset or synchronisation on a GPU */
    PP_REC_API = 41,        /* pp_rec_api: a CUDA runtime/driver call that launched GPU work */
    PP_REC_NCCL = 42,       /* pp_rec_nccl: one NCCL point-to-point or collective operation */
    PP_REC_GPU_MEM = 43     /* pp_rec_gpu_mem: a device memory allocation or release (CUPTI) */
} pp_trace_rec_type;

typedef struct pp_rec_header {
    uint16_t type;
    uint16_t size; /* whole record incl. this header, multiple of 8, >= 16 */
    uint32_t tid;  /* OS thread id of the thread that made the call */
    uint64_t ts;   /* CLOCK_MONOTONIC ns (0 for definitions) */
} pp_rec_header;

/* payload_type values: NVTX's (0 none, 1 uint64, 2 int64, 3 double, 4 uint32, 5 int32, 6 float);
 * the extended payload arrives as a following PP_REC_EXT_PAYLOAD record. */
typedef struct pp_rec_range {
    pp_rec_header h;
    uint32_t domain;   /* 0 = default domain, else a PP_REC_DOMAIN id */
    uint32_t message;  /* string id, 0 = none */
    uint32_t category;
    uint32_t color;    /* ARGB, 0 = none */
    uint32_t payload_type;
    uint32_t reserved;
    uint64_t payload;  /* the value's bits */
    uint64_t range_id; /* START: process-unique id; 0 otherwise */
} pp_rec_range;        /* 56 bytes */

typedef struct pp_rec_pop {
    pp_rec_header h;
    uint32_t domain;
    uint32_t reserved;
} pp_rec_pop;          /* 24 bytes */

typedef struct pp_rec_end {
    pp_rec_header h;
    uint64_t range_id;
} pp_rec_end;          /* 24 bytes */

typedef struct pp_rec_ext {
    pp_rec_header h;
    uint64_t schema_id;
    uint32_t data_bytes; /* bytes of data that follow, then zero padding to a multiple of 8 */
    uint32_t reserved;
    /* uint8_t data[data_bytes]; */
} pp_rec_ext;          /* 32 bytes + data */

typedef struct pp_rec_string {
    pp_rec_header h;
    uint32_t id;    /* >= 1 */
    uint32_t len;   /* bytes (UTF-8, no NUL), then zero padding to a multiple of 8 */
} pp_rec_string;

typedef struct pp_rec_domain {
    pp_rec_header h;
    uint32_t id;    /* >= 1 */
    uint32_t name;  /* string id */
} pp_rec_domain;

typedef struct pp_rec_category {
    pp_rec_header h;
    uint32_t domain;
    uint32_t category;
    uint32_t name;  /* string id */
    uint32_t reserved;
} pp_rec_category;

typedef struct pp_rec_thread_name {
    pp_rec_header h;
    uint32_t os_tid; /* the thread named (h.tid is the caller) */
    uint32_t name;   /* string id */
} pp_rec_thread_name;

typedef struct pp_rec_schema_entry {
    uint64_t type;   /* NVTX_PAYLOAD_ENTRY_TYPE_* */
    uint64_t offset; /* byte offset in the payload (resolved: never 0 for entries after the
                        first unless the field really is at 0) */
    uint32_t name;   /* string id */
    uint32_t reserved;
} pp_rec_schema_entry;

typedef struct pp_rec_schema {
    pp_rec_header h;
    uint64_t schema_id;
    uint32_t domain;
    uint32_t name;        /* string id */
    uint32_t n_entries;
    uint32_t static_size; /* bytes of one payload */
    /* pp_rec_schema_entry entries[n_entries]; */
} pp_rec_schema;       /* 40 bytes + 24 per entry */

/* Counters (nvtxCounterRegister / nvtxCounterSampleInt64 / Float64). A counter is named by
 * (domain, counter_id); its samples sit in the EVENTS block of the thread that sampled. The
 * capture library's own resident-memory counter is PP_COUNTER_RSS_ID in domain 0, named
 * PP_COUNTER_RSS_NAME, sampled by its writer thread at every flush. */
#define PP_COUNTER_RSS_ID 1u
#define PP_COUNTER_RSS_NAME "pprof.rss"
typedef enum pp_counter_value_kind {
    PP_COUNTER_INT64 = 1, /* value holds an int64_t */
    PP_COUNTER_FLOAT64 = 2 /* value holds a double's bits */
} pp_counter_value_kind;

typedef struct pp_rec_counter_def {
    pp_rec_header h;      /* ts 0; tid: the registering thread */
    uint64_t counter_id;  /* unique within the domain */
    uint32_t domain;
    uint32_t name;        /* string id */
    uint32_t unit;        /* string id of the unit (counter semantics), 0 none */
    uint32_t schema;      /* the registration's schemaId when a predefined NVTX payload type
                             (NVTX_PAYLOAD_ENTRY_TYPE_*, < 2^32), else 0 */
} pp_rec_counter_def;  /* 40 bytes */

typedef struct pp_rec_counter {
    pp_rec_header h;      /* tid, ts: the sampling thread and time */
    uint64_t counter_id;
    uint32_t domain;
    uint32_t kind;        /* pp_counter_value_kind */
    uint64_t value;       /* the value's bits */
} pp_rec_counter;      /* 40 bytes */

/* Memory extension (nvToolsExtMem.h) calls, one record per heap call and per region of a
 * batch. A heap is a process-unique id the capture library handed out; a region is named by
 * its address (the handle libpprof returns for a region is its address too). */
typedef enum pp_mem_op {
    PP_MEM_HEAP_REGISTER = 1,   /* heap, addr/bytes: its range (0 when not given), name */
    PP_MEM_HEAP_UNREGISTER = 2, /* heap: it and its regions are gone */
    PP_MEM_HEAP_RESET = 3,      /* heap (0: every heap): its regions are gone */
    PP_MEM_REGION_REGISTER = 4, /* heap, addr, bytes */
    PP_MEM_REGION_RESIZE = 5,   /* addr, bytes: the region's new size */
    PP_MEM_REGION_UNREGISTER = 6 /* addr */
} pp_mem_op;

typedef struct pp_rec_mem {
    pp_rec_header h;      /* tid, ts: the calling thread and time */
    uint32_t op;          /* pp_mem_op */
    uint32_t domain;
    uint64_t heap;        /* 0: the process-wide heap */
    uint64_t addr;
    uint64_t bytes;
    uint32_t name;        /* HEAP_REGISTER: string id of the heap's message, 0 none */
    uint32_t usage;       /* HEAP_REGISTER: NVTX_MEM_HEAP_USAGE_* bits */
} pp_rec_mem;          /* 56 bytes */

typedef struct pp_rec_footer {
    pp_rec_header h;       /* ts = CLOCK_MONOTONIC at close */
    uint64_t real_ns;      /* CLOCK_REALTIME at close */
    uint64_t events;       /* records captured and written */
    uint64_t dropped;      /* records lost because a buffer was full */
    uint64_t filtered;     /* records not captured because of the step window */
    uint64_t blocks;       /* blocks written before the footer */
    uint64_t threads;      /* threads that recorded */
} pp_rec_footer;       /* 64 bytes */

typedef enum pp_gpu_kind {
    PP_GPU_KERNEL = 1,
    PP_GPU_MEMCPY = 2,
    PP_GPU_MEMSET = 3,
    PP_GPU_SYNC = 4
} pp_gpu_kind;

typedef struct pp_rec_gpu {
    pp_rec_header h;      /* ts 0; tid: the thread that delivered the record */
    uint8_t kind;         /* pp_gpu_kind */
    uint8_t copy_kind;    /* memcpy: CUPTI's CUpti_ActivityMemcpyKind (1 HtoD, 2 DtoH, 8 DtoD,
                             10 PtoP ...), else 0 */
    uint16_t reserved0;
    uint32_t device;
    uint32_t stream;
    uint32_t correlation; /* the API call that launched it (pp_rec_api), 0 unknown */
    uint64_t start, end;  /* CLOCK_MONOTONIC ns */
    uint64_t bytes;       /* memcpy, memset; 0 for kernels */
    uint32_t name;        /* string id of the kernel's (mangled) name, 0 none */
    uint32_t reserved1;
} pp_rec_gpu;          /* 64 bytes */

typedef struct pp_rec_api {
    pp_rec_header h;      /* ts 0 */
    uint32_t correlation;
    uint32_t thread;      /* OS thread id that made the call */
    uint32_t cbid;        /* CUPTI callback id of the call */
    uint32_t driver;      /* 1: driver API, 0: runtime API */
    uint64_t start, end;  /* CLOCK_MONOTONIC ns */
} pp_rec_api;          /* 48 bytes */

typedef enum pp_nccl_func {
    PP_NCCL_SEND = 1,
    PP_NCCL_RECV = 2,
    PP_NCCL_COLL = 3
} pp_nccl_func;

typedef struct pp_rec_nccl {
    pp_rec_header h;      /* ts 0; tid: the thread that stopped the event */
    uint8_t func;         /* pp_nccl_func */
    uint8_t timed;        /* 1: gpu_start/gpu_end hold the operation's GPU-side span */
    uint16_t channels;
    int32_t peer;         /* point-to-point: the peer's rank in the communicator, else -1 */
    int32_t rank;         /* this process's rank in the communicator */
    int32_t nranks;
    uint64_t comm;        /* the communicator's hash */
    uint64_t bytes;       /* count x datatype size */
    uint64_t start, end;  /* host: the operation's profiler event, CLOCK_MONOTONIC ns */
    uint64_t gpu_start, gpu_end; /* GPU-side span (kernel channel timers), CLOCK_MONOTONIC ns */
    uint32_t name;        /* string id: "Send", "Recv", "AllReduce" ... */
    uint32_t reserved;
} pp_rec_nccl;         /* 88 bytes */

/* CUPTI memory activity (CUPTI_ACTIVITY_KIND_MEMORY2), --cuda: one allocation or release. */
typedef enum pp_gpu_mem_op { PP_GPU_MEM_ALLOC = 1, PP_GPU_MEM_RELEASE = 2 } pp_gpu_mem_op;

typedef struct pp_rec_gpu_mem {
    pp_rec_header h;      /* ts 0 (the time is in the body); tid: the delivering thread */
    uint8_t op;           /* pp_gpu_mem_op */
    uint8_t memory_kind;  /* CUPTI's CUpti_ActivityMemoryKind (1 pageable, 2 pinned, 3 device,
                             4 array, 5 managed, 6 device static, 7 managed static) */
    uint16_t reserved0;
    uint32_t device;
    uint32_t stream;
    uint32_t correlation; /* the API call that made it, 0 unknown */
    uint64_t address;
    uint64_t bytes;
    uint64_t ts;          /* CLOCK_MONOTONIC ns */
} pp_rec_gpu_mem;      /* 56 bytes */

/* ======================================================================================== */
/* Writer                                                                                     */
/* ======================================================================================== */

typedef struct pp_trace_writer pp_trace_writer;

/* For fuzzers and tests that edit a trace's bytes: recomputes, in place, the checksum of the
 * header and of every block found at an 8-aligned offset whose sizes fit, as the writer would
 * have, so that an edit reaches the records instead of failing their checksum. */
void pp_trace_repair_checksums(uint8_t *p, size_t size);

/* Creates `path` (O_EXCL: never overwrites) and writes the header (crc filled in). */
pp_status pp_trace_writer_open(const char *path, const pp_trace_header *h, pp_trace_writer **out);
/* Appends one block of `n_records` already-encoded records (bytes a multiple of 8) with one
 * write(2) call, so a killed process leaves either the whole block or a detectably short one. */
pp_status pp_trace_writer_block(pp_trace_writer *w, pp_trace_block_kind kind, uint32_t tid,
                                const void *records, size_t bytes, uint32_t n_records);
/* Writes the header again, in place (crc filled in), for a writer that learns the header's
 * fields only once the records are written (the Kineto importer: the rank, the pipeline, the
 * first timestamp). The blocks are untouched. */
pp_status pp_trace_writer_rewrite_header(pp_trace_writer *w, const pp_trace_header *h);
/* Appends the footer block. The writer fills in f's h.type, h.size and blocks (the blocks
 * written before it); the caller sets the rest. */
pp_status pp_trace_writer_footer(pp_trace_writer *w, const pp_rec_footer *f);
uint64_t pp_trace_writer_blocks(const pp_trace_writer *w);
/* Closes the file (fsync is the caller's choice). NULL is a no-op. */
void pp_trace_writer_close(pp_trace_writer *w);

/* Record encoders into a caller buffer; each returns the bytes written (0 if cap is too small).
 * Strings and ext data are copied and zero-padded; a string longer than PP_TRACE_STRING_MAX or
 * ext data longer than PP_TRACE_EXT_MAX is truncated to that length (the record's size field is
 * 16 bits). */
size_t pp_trace_enc_string(void *buf, size_t cap, uint32_t id, const char *s, size_t len);
size_t pp_trace_enc_ext(void *buf, size_t cap, uint32_t tid, uint64_t ts, uint64_t schema_id,
                        const void *data, uint32_t bytes);

/* ======================================================================================== */
/* Reader                                                                                     */
/* ======================================================================================== */

/* One decoded event (PUSH, POP, START, END, MARK), strings resolved. */
typedef struct pp_trace_event {
    uint16_t type;
    uint32_t tid;
    uint64_t ts;
    uint32_t domain;
    const char *message; /* "" when none or unknown id */
    uint32_t category;
    uint32_t color;
    uint32_t payload_type;
    uint64_t payload;
    uint64_t range_id;
    uint64_t schema_id;    /* of the attached extended payload, 0 = none */
    const uint8_t *ext;    /* its bytes (valid while the trace lives), NULL = none */
    uint32_t ext_bytes;
} pp_trace_event;

typedef struct pp_trace_schema_field {
    const char *name;
    uint64_t type;
    uint64_t offset;
} pp_trace_schema_field;

typedef struct pp_trace_schema {
    uint64_t id;
    uint32_t domain;
    const char *name;
    uint32_t static_size;
    uint32_t n_fields;
    pp_trace_schema_field *fields;
} pp_trace_schema;

/* What the reader could not use, for the "what was skipped" report. */
typedef struct pp_trace_damage {
    uint64_t blocks_ok;
    uint64_t blocks_bad;       /* damaged regions: each run of bytes between valid blocks that
                                  is not just the cut-short last block counts once */
    uint64_t blocks_unknown;   /* valid blocks of a kind this reader does not know, skipped */
    uint64_t bytes_skipped;    /* bytes not covered by valid blocks */
    uint64_t records_unknown;  /* records of unknown type, skipped by size */
    int header_ok;
    int truncated;             /* the file ends inside a block */
    int has_footer;
    char first_problem[256];   /* human-readable description of the first problem, "" if none */
} pp_trace_damage;

/* GPU records as pp_trace_load keeps them (names resolved). */
typedef struct pp_trace_gpu {
    pp_rec_gpu r;
    const char *name; /* "" when none */
} pp_trace_gpu;

typedef struct pp_trace_nccl {
    pp_rec_nccl r;
    const char *name;
} pp_trace_nccl;

/* Counter definitions as pp_trace_load keeps them (names resolved; sorted by domain, id; the
 * first definition of a (domain, id) wins). */
typedef struct pp_trace_counter_def {
    pp_rec_counter_def r;
    const char *name; /* "" when none */
    const char *unit; /* "" when none */
} pp_trace_counter_def;

typedef struct pp_trace_mem {
    pp_rec_mem r;
    const char *name;
} pp_trace_mem;

typedef struct pp_trace {
    pp_trace_header header;
    pp_rec_footer footer;      /* valid when damage.has_footer */
    pp_trace_damage damage;
    size_t n_events;
    pp_trace_event *events;    /* in file order; per thread in time order */
    /* definitions */
    size_t n_domains;
    struct { uint32_t id; const char *name; } *domains;
    size_t n_categories;
    struct { uint32_t domain, category; const char *name; } *categories;
    size_t n_threads;
    struct { uint32_t tid; const char *name; } *threads;
    size_t n_schemas;
    pp_trace_schema *schemas;
    /* GPU capture, in file order */
    size_t n_gpu;
    pp_trace_gpu *gpu;
    size_t n_api;
    pp_rec_api *api;
    size_t n_nccl;
    pp_trace_nccl *nccl;
    /* counters and the memory extension: samples and calls in file order */
    size_t n_counter_defs;
    pp_trace_counter_def *counter_defs;
    size_t n_counters;
    pp_rec_counter *counters;
    size_t n_mem;
    pp_trace_mem *mem;
    size_t n_gpu_mem;
    pp_rec_gpu_mem *gpu_mem;
    void *impl; /* owned storage */
} pp_trace;

/* Reads a whole trace file. Fails only when the file cannot be read (PP_ERR_IO) or has no valid
 * header (PP_ERR_CORRUPT, message says why); any later damage is recovered and described in
 * trace->damage. */
pp_status pp_trace_load(const char *path, pp_trace **out);
/* The same over a buffer (fuzz target, tests). */
pp_status pp_trace_load_mem(const void *data, size_t len, pp_trace **out);
void pp_trace_free(pp_trace *t);
/* Lookups (NULL when unknown). */
const char *pp_trace_domain_name(const pp_trace *t, uint32_t domain);
const char *pp_trace_category_name(const pp_trace *t, uint32_t domain, uint32_t category);
const char *pp_trace_thread_name(const pp_trace *t, uint32_t tid);
const pp_trace_schema *pp_trace_schema_find(const pp_trace *t, uint64_t schema_id);
const pp_trace_counter_def *pp_trace_counter_find(const pp_trace *t, uint32_t domain,
                                                  uint64_t counter_id);
/* The definition arrays (domains, categories, threads, schemas) are sorted by their ids. A
 * string, domain or schema id defined twice keeps its first definition; thread and category
 * names keep the last (programs may rename them). */

/* ---- Streaming: one valid block at a time, memory bounded by the largest block ----
 * pp_trace_load is built on this; the analyzer can use it to read traces bigger than memory.
 * Damage is recovered and counted exactly as pp_trace_load does (records_unknown and
 * has_footer are the caller's to count: the reader does not decode records). */
typedef struct pp_trace_reader pp_trace_reader;

typedef struct pp_trace_block {
    pp_trace_block_header h;
    uint64_t offset;        /* of the block header in the file */
    const uint8_t *payload; /* h.payload_bytes bytes, valid until the next call on the reader.
                               Checked: crc, and every record's size is >= 16, a multiple of 8,
                               within the payload and at least its known type's fixed part
                               (strings, ext data and schema entries within their record);
                               h.n_records records. Copy records out with memcpy: the payload
                               is not necessarily aligned. */
} pp_trace_block;

/* Opens and checks the header: PP_ERR_IO / PP_ERR_CORRUPT as pp_trace_load. The _mem variant
 * reads `data` in place (it must outlive the reader). */
pp_status pp_trace_reader_open(const char *path, pp_trace_reader **out);
pp_status pp_trace_reader_open_mem(const void *data, size_t len, pp_trace_reader **out);
/* Opens `path` again for another pass over a file that `done` has read to its end. When `done`
 * found nothing but valid blocks after the header and the file is unchanged since `done` opened
 * it (device, inode, size, modification and status-change times), the new reader does not
 * compute the blocks' checksums again: `done` verified these bytes (the analyzer's GPU pass;
 * about 8% of its time). Every other check stays, so a file rewritten under the same times can
 * mislead that pass, never crash it. Otherwise, or with done == NULL, pp_trace_reader_open. */
pp_status pp_trace_reader_reopen(const char *path, const pp_trace_reader *done,
                                 pp_trace_reader **out);
/* Whether r skips the checksums (pp_trace_reader_reopen). */
int pp_trace_reader_verified(const pp_trace_reader *r);
const pp_trace_header *pp_trace_reader_header(const pp_trace_reader *r);
/* The next valid block of a known kind (*got = true), or the end (*got = false). Fails only
 * on a read error. */
pp_status pp_trace_reader_next(pp_trace_reader *r, pp_trace_block *b, bool *got);
/* Damage seen so far (final once next reports the end). */
const pp_trace_damage *pp_trace_reader_damage(const pp_trace_reader *r);
/* Bytes of valid blocks all readers of this process have handed out so far (several passes over a
 * file count each time): what the tools' progress line shows. */
uint64_t pp_trace_bytes_read(void);
void pp_trace_reader_close(pp_trace_reader *r);

#ifdef __cplusplus
}
#endif
#endif /* PP_TRACE_H */
