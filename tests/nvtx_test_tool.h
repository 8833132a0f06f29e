/* nvtx_test_tool.h: a minimal NVTX tool statically injected into test_nvtx (tests/
 * nvtx_test_tool.c). It records what the runtime's annotations (runtime/nvtx.c) hand to NVTX:
 * domains, category names, registered strings, payload schemas, pushes with their decoded
 * extended payload, pops, thread names and counters (registrations, int64 samples), so the tests can check docs/nvtx-convention.md from
 * the tool's side. Without the NVTX headers at build time every query returns 0. */
#ifndef NVTX_TEST_TOOL_H
#define NVTX_TEST_TOOL_H

#include <stddef.h>
#include <stdint.h>

typedef enum tt_kind {
    TT_DOMAIN_CREATE,
    TT_NAME_CATEGORY,
    TT_REGISTER_STRING,
    TT_SCHEMA_REGISTER,
    TT_PUSH,
    TT_POP,
    TT_NAME_THREAD,
    TT_COUNTER_REGISTER, /* text: the name; counter_id, schema_id, unit */
    TT_COUNTER_SAMPLE,   /* counter_id, value (nvtxCounterSampleInt64) */
    TT_OTHER /* any other NVTX call: the runtime should never make one */
} tt_kind;

enum { TT_TEXT_MAX = 160, TT_NAME_MAX = 32, TT_FIELDS_MAX = 16 };

typedef struct tt_field {
    char name[TT_NAME_MAX];
    int is_signed;
    int64_t i; /* signed entry types */
    uint64_t u; /* unsigned entry types */
} tt_field;

typedef struct tt_event {
    tt_kind kind;
    char domain[TT_NAME_MAX]; /* the domain's name; "" for the default domain */
    char text[TT_TEXT_MAX];   /* created domain, category name, registered string, thread name,
                                 or a push's message (registered handles resolved) */
    uint32_t id;              /* category id (TT_NAME_CATEGORY), thread id argument
                                 (TT_NAME_THREAD) */
    uint32_t tid;             /* OS thread id of the caller */
    int level;                /* value returned by push/pop */
    /* TT_PUSH only */
    uint16_t attr_version, attr_size;
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t message_type;
    int32_t payload_type;
    uint64_t schema_id;  /* of the first extended payload */
    size_t payload_size; /* of the first extended payload */
    int n_fields;        /* decoded through the registered schema; 0 if none matched */
    tt_field field[TT_FIELDS_MAX];
    /* counters */
    uint64_t counter_id;
    int64_t value;
    char unit[TT_NAME_MAX];
} tt_event;

typedef struct tt_schema_entry {
    char name[TT_NAME_MAX];
    uint64_t type;
    uint64_t offset;
} tt_schema_entry;

typedef struct tt_schema {
    char domain[TT_NAME_MAX];
    char name[TT_NAME_MAX];
    uint64_t field_mask, type, id;
    size_t static_size, n_entries;
    tt_schema_entry entry[TT_FIELDS_MAX];
} tt_schema;

/* Make the tool's init fail, so NVTX runs with no tool. Call before the first NVTX call. */
void tt_disable(void);
/* Make string registration return no handle (a tool without registered strings). */
void tt_refuse_strings(void);
/* Forget the events recorded so far (registrations stay known to the tool). */
void tt_reset(void);
int tt_init_calls(void);
int tt_ext_init_calls(void);
int tt_count(void);
int tt_dropped(void);
const tt_event *tt_get(int i);
int tt_count_kind(tt_kind kind);
/* How many TT_REGISTER_STRING events had exactly this text. */
int tt_count_registered(const char *text);
int tt_schema_count(void);
const tt_schema *tt_schema_get(int i);
/* A decoded payload field by name; returns 0 when the event has no such field. */
int tt_field_i64(const tt_event *e, const char *name, int64_t *out);
int tt_field_u64(const tt_event *e, const char *name, uint64_t *out);
/* The caller's OS thread id, as NVTX names threads. */
uint32_t tt_gettid(void);

#endif /* NVTX_TEST_TOOL_H */
