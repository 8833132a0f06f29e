/* nvtx.c: the runtime's NVTX v3 annotations (pp_nvtx.h), emitted exactly as
 * docs/nvtx-convention.md specifies: domain "pipeprof", category = stage + 1, registered message
 * strings, and an extended payload with the static schema "pipeprof.event". Called by the
 * executor's stage workers around every step, forward, backward, transfer and layer.
 *
 * Cost model: with no tool attached NVTX hands back a NULL domain, and push/pop then return after
 * one atomic load and a branch. With a tool attached, a push is a lock-free read of the cached
 * string handle plus the NVTX call; only the first use of a (kind, mb, chunk) or (kind, layer)
 * takes a lock to register its string. Built without the NVTX headers every call is a no-op. */
#define _GNU_SOURCE /* syscall(SYS_gettid): NVTX names threads by their OS id */

#include "pp_nvtx.h"

#if defined(PP_HAVE_NVTX) && PP_HAVE_NVTX

#include "pp_common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* CUDA 13.0's nvToolsExtPayload.h has an unbalanced parenthesis in the C branch of this macro,
 * which breaks every NVTX_PAYLOAD_EVTATTR_SET* use; the upstream NVTX repository has this form.
 * The header guards its definition with #ifndef. */
#define NVTX_POINTER_AS_PAYLOAD_ULLVALUE(p) ((uint64_t)(uintptr_t)(p))
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>

/* The convention's numbers (domain, schema id and name, kinds, payload layout, messages) are
 * common/pp_convention.h's; the id must be one of NVTX's static schema ids. */
_Static_assert(PP_NVTX_SCHEMA_ID >= NVTX_PAYLOAD_SCHEMA_ID_STATIC_START,
               "pipeprof.event has a static schema id");

/* Per-kind string tables larger than this fall back to the kind's generic message ("fwd"): the
 * payload still carries mb and chunk, and a table of 8 kinds x 2^16 handles is 4 MiB. */
#define PP_NVTX_MAX_SLOTS_PER_KIND (1 << 16)
#define PP_NVTX_MSG_MAX 160

/* The schema's entries, from the convention's field table (register_schema, under g_lock; NVTX
 * tools copy them, the array stays valid all the same). */
static nvtxPayloadSchemaEntry_t k_schema_entries[PP_NVTX_FIELD_COUNT];

static void schema_entries_fill(void)
{
    for (int i = 0; i < PP_NVTX_FIELD_COUNT; i++) {
        const pp_nvtx_field *f = &pp_nvtx_fields[i];
        uint64_t type = f->size == 8 ? (f->is_signed ? NVTX_PAYLOAD_ENTRY_TYPE_INT64
                                                     : NVTX_PAYLOAD_ENTRY_TYPE_UINT64)
                                     : (f->is_signed ? NVTX_PAYLOAD_ENTRY_TYPE_INT32
                                                     : NVTX_PAYLOAD_ENTRY_TYPE_UINT32);
        k_schema_entries[i] = (nvtxPayloadSchemaEntry_t){
            .type = type, .name = f->name, .description = f->desc, .offset = f->offset};
    }
}

/* One configuration's message cache. Slot values: 0 = not registered yet; k_no_handle = the tool
 * returned no handle (send the message as ASCII); anything else = the tool's string handle. */
typedef struct pp_nvtx_table {
    nvtxDomainHandle_t domain; /* NULL: no tool attached, every call returns at once */
    int S, M, v, n_layers;
    char **layer_names;                    /* owned copies, n_layers entries */
    int count[PP_NVTX_KIND_COUNT];         /* specific slots per kind; slot [count] is generic */
    _Atomic(uintptr_t) *first[PP_NVTX_KIND_COUNT];
    _Atomic(uintptr_t) *slots;
    struct pp_nvtx_table *prev;            /* replaced tables stay reachable, never freed: a */
} pp_nvtx_table;                           /* worker may still hold one across a re-setup */

static char k_no_handle; /* its address marks "registered, but no handle" */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* setup and first registrations */
static _Atomic(pp_nvtx_table *) g_table;
static nvtxDomainHandle_t g_domain; /* under g_lock */
static int g_domain_done;           /* under g_lock */
static int g_named_stages;          /* under g_lock: categories 1..g_named_stages are named */

static void register_schema(nvtxDomainHandle_t domain)
{
    nvtxPayloadSchemaAttr_t a;
    memset(&a, 0, sizeof a);
    a.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE |
                  NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES |
                  NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                  NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE |
                  NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID;
    a.name = PP_NVTX_SCHEMA_NAME;
    a.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
    a.entries = k_schema_entries;
    a.numEntries = sizeof k_schema_entries / sizeof k_schema_entries[0];
    a.payloadStaticSize = sizeof(pp_nvtx_event);
    schema_entries_fill();
    a.schemaId = PP_NVTX_SCHEMA_ID;
    /* The id is fixed by the convention; a tool without the payload extension returns 0 and
     * simply ignores extended payloads. */
    (void)nvtxPayloadSchemaRegister(domain, &a);
}

static void table_free(pp_nvtx_table *t)
{
    if (!t)
        return;
    for (int i = 0; t->layer_names && i < t->n_layers; i++)
        free(t->layer_names[i]);
    free(t->layer_names);
    free(t->slots);
    free(t);
}

static int same_config(const pp_nvtx_table *t, int S, int M, int v, int n_layers,
                       const char *const *names)
{
    if (t->S != S || t->M != M || t->v != v || t->n_layers != n_layers)
        return 0;
    for (int i = 0; i < n_layers; i++) {
        const char *want = names && names[i] ? names[i] : "";
        if (strcmp(t->layer_names[i], want) != 0)
            return 0;
    }
    return 1;
}

static pp_nvtx_table *table_create(int S, int M, int v, int n_layers, const char *const *names)
{
    pp_nvtx_table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->S = S;
    t->M = M;
    t->v = v;
    t->n_layers = n_layers;
    if (n_layers > 0) {
        t->layer_names = calloc((size_t)n_layers, sizeof *t->layer_names);
        if (!t->layer_names)
            goto fail;
        for (int i = 0; i < n_layers; i++) {
            /* "" stands for "no name given"; messages then say "layer<i>". */
            const char *src = names && names[i] ? names[i] : "";
            size_t n = strlen(src) + 1;
            t->layer_names[i] = malloc(n);
            if (!t->layer_names[i])
                goto fail;
            memcpy(t->layer_names[i], src, n);
        }
    }
    size_t mbv = (size_t)M * (size_t)v;
    size_t total = 0;
    for (int k = 0; k < PP_NVTX_KIND_COUNT; k++) {
        size_t n = 0;
            switch (pp_nvtx_kind_class((pp_nvtx_kind)k)) {
        case PP_NVTX_CLASS_MB: n = mbv; break;
        case PP_NVTX_CLASS_LAYER: n = (size_t)n_layers; break;
        case PP_NVTX_CLASS_PLAIN: n = 0; break;
        }
        if (n > PP_NVTX_MAX_SLOTS_PER_KIND)
            n = 0;
        t->count[k] = (int)n;
        total += n + 1;
    }
    t->slots = malloc(total * sizeof *t->slots);
    if (!t->slots)
        goto fail;
    for (size_t i = 0; i < total; i++)
        atomic_init(&t->slots[i], (uintptr_t)0);
    size_t at = 0;
    for (int k = 0; k < PP_NVTX_KIND_COUNT; k++) {
        t->first[k] = t->slots + at;
        at += (size_t)t->count[k] + 1;
    }
    return t;
fail:
    table_free(t);
    return NULL;
}

void pp_nvtx_setup(int S, int M, int v, int n_layers, const char *const *layer_names)
{
    S = S > 0 ? S : 0;
    M = M > 0 ? M : 0;
    v = v > 1 ? v : 1;
    n_layers = n_layers > 0 ? n_layers : 0;

    pthread_mutex_lock(&g_lock);
    if (!g_domain_done) {
        /* The first NVTX call of this instance: NVTX loads the tool (if any) here. */
        g_domain = nvtxDomainCreateA(PP_NVTX_DOMAIN);
        if (g_domain)
            register_schema(g_domain);
        g_domain_done = 1;
    }
    if (g_domain) {
        for (int s = g_named_stages; s < S; s++) {
            char name[32];
            snprintf(name, sizeof name, "stage %d", s);
            nvtxDomainNameCategoryA(g_domain, (uint32_t)s + 1u, name);
        }
        if (S > g_named_stages)
            g_named_stages = S;
    }
    pp_nvtx_table *cur = atomic_load_explicit(&g_table, memory_order_acquire);
    if (!cur || !same_config(cur, S, M, v, n_layers, layer_names)) {
        pp_nvtx_table *t = table_create(S, M, v, n_layers, layer_names);
        if (t) {
            t->domain = g_domain;
            t->prev = cur;
            atomic_store_explicit(&g_table, t, memory_order_release);
        } else {
            /* Annotations must never stop the job: keep the previous table (or none). */
            pp_log(0, "pp_nvtx: out of memory for the message table (S=%d M=%d v=%d L=%d); "
                      "annotations keep their previous configuration\n",
                   S, M, v, n_layers);
        }
    }
    pthread_mutex_unlock(&g_lock);
}

/* The message of a slot, per docs/nvtx-convention.md "Messages". idx == count[kind] is the
 * kind's generic message, used when mb, chunk or layer is outside the configured table. */
static void message_format(const pp_nvtx_table *t, pp_nvtx_kind kind, int idx, char *buf,
                           size_t size)
{
    int generic = idx >= t->count[kind];
    switch (pp_nvtx_kind_class(kind)) {
    case PP_NVTX_CLASS_MB:
        pp_nvtx_message_format(buf, size, kind, generic ? -1 : idx / t->v,
                               t->v > 1 ? idx % t->v : -1, -1, NULL);
        break;
    case PP_NVTX_CLASS_LAYER:
        pp_nvtx_message_format(buf, size, kind, -1, -1, generic ? -1 : idx,
                               generic ? NULL : t->layer_names[idx]);
        break;
    case PP_NVTX_CLASS_PLAIN: pp_nvtx_message_format(buf, size, kind, -1, -1, -1, NULL); break;
    }
}

/* Which slot a range uses: its specific one when the table has it, else the generic one. */
static int slot_index(const pp_nvtx_table *t, pp_nvtx_kind kind, const pp_nvtx_info *in)
{
    int n = t->count[kind];
    switch (pp_nvtx_kind_class(kind)) {
    case PP_NVTX_CLASS_MB: {
        /* With one chunk the chunk field is ignored; with several it must name one. */
        int chunk = t->v > 1 ? in->chunk : 0;
        if (n > 0 && in->mb >= 0 && in->mb < t->M && chunk >= 0 && chunk < t->v)
            return in->mb * t->v + chunk;
        return n;
    }
    case PP_NVTX_CLASS_LAYER: return in->layer >= 0 && in->layer < n ? in->layer : n;
    case PP_NVTX_CLASS_PLAIN: return n;
    }
    return n;
}

/* First use of a slot: register its string under the lock (double-checked), publish it. */
static uintptr_t slot_register(const pp_nvtx_table *t, pp_nvtx_kind kind, int idx)
{
    _Atomic(uintptr_t) *slot = t->first[kind] + idx;
    pthread_mutex_lock(&g_lock);
    uintptr_t h = atomic_load_explicit(slot, memory_order_acquire);
    if (!h) {
        char msg[PP_NVTX_MSG_MAX];
        message_format(t, kind, idx, msg, sizeof msg);
        nvtxStringHandle_t sh = nvtxDomainRegisterStringA(t->domain, msg);
        h = sh ? (uintptr_t)sh : (uintptr_t)&k_no_handle;
        atomic_store_explicit(slot, h, memory_order_release);
    }
    pthread_mutex_unlock(&g_lock);
    return h;
}

/* Event attributes of this NVTX version with nothing set. */
static inline nvtxEventAttributes_t attrs_empty(void)
{
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    return a;
}

void pp_nvtx_push(pp_nvtx_kind kind, const pp_nvtx_info *info)
{
    pp_nvtx_table *t = atomic_load_explicit(&g_table, memory_order_acquire);
    if (!t || !t->domain)
        return;
    pp_nvtx_info none = pp_nvtx_info_none();
    const pp_nvtx_info *in = info ? info : &none;

    pp_nvtx_event ev;
    ev.kind = (uint32_t)kind;
    ev.stage = in->stage;
    ev.mb = in->mb;
    ev.chunk = in->chunk;
    ev.layer = in->layer;
    ev.peer = in->peer;
    ev.bytes = in->bytes;
    ev.step = in->step;
    nvtxPayloadData_t pd;

    nvtxEventAttributes_t a = attrs_empty();
    a.category = in->stage >= 0 ? (uint32_t)in->stage + 1u : 0u;
    NVTX_PAYLOAD_EVTATTR_SET_DATA(a, &pd, PP_NVTX_SCHEMA_ID, &ev, sizeof ev)

    char msg[PP_NVTX_MSG_MAX];
    if ((unsigned)kind >= PP_NVTX_KIND_COUNT) {
        /* Still push, so that the caller's pop stays paired. */
        a.messageType = NVTX_MESSAGE_TYPE_ASCII;
        a.message.ascii = "unknown";
    } else {
        a.colorType = NVTX_COLOR_ARGB;
        a.color = pp_nvtx_kind_color(kind);
        int idx = slot_index(t, kind, in);
        uintptr_t h = atomic_load_explicit(t->first[kind] + idx, memory_order_acquire);
        if (!h)
            h = slot_register(t, kind, idx);
        if (h != (uintptr_t)&k_no_handle) {
            a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
            a.message.registered = (nvtxStringHandle_t)h;
        } else {
            /* The tool keeps no registered strings: pay for formatting instead. */
            message_format(t, kind, idx, msg, sizeof msg);
            a.messageType = NVTX_MESSAGE_TYPE_ASCII;
            a.message.ascii = msg;
        }
    }
    nvtxDomainRangePushEx(t->domain, &a);
}

void pp_nvtx_pop(void)
{
    pp_nvtx_table *t = atomic_load_explicit(&g_table, memory_order_acquire);
    if (!t || !t->domain)
        return;
    nvtxDomainRangePop(t->domain);
}

void pp_nvtx_name_thread(const char *name)
{
    if (!name)
        return;
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), name);
}

void pp_nvtx_mark_config(const char *text)
{
    pp_nvtx_table *t = atomic_load_explicit(&g_table, memory_order_acquire);
    if (!t || !t->domain || !text)
        return;
    nvtxEventAttributes_t a = attrs_empty();
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = text;
    nvtxDomainMarkEx(t->domain, &a);
}

uint64_t pp_nvtx_counter_register(const char *name, uint64_t id)
{
    pp_nvtx_table *t = atomic_load_explicit(&g_table, memory_order_acquire);
    if (!t || !t->domain || !name)
        return 0;
    nvtxSemanticsCounter_t sem;
    memset(&sem, 0, sizeof sem);
    sem.header.structSize = (uint32_t)sizeof sem;
    sem.header.semanticId = NVTX_SEMANTIC_ID_COUNTERS_V1;
    sem.header.version = NVTX_COUNTER_SEMANTIC_VERSION;
    sem.flags = NVTX_COUNTER_FLAG_VALUETYPE_ABSOLUTE | NVTX_COUNTER_FLAG_INTERPOLATION_UNTIL_NEXT;
    sem.unit = "bytes";
    sem.unitScaleNumerator = 1;
    sem.unitScaleDenominator = 1;
    nvtxCounterAttr_t a;
    memset(&a, 0, sizeof a);
    a.structSize = sizeof a;
    a.schemaId = NVTX_PAYLOAD_ENTRY_TYPE_INT64;
    a.name = name;
    a.scopeId = NVTX_SCOPE_NONE;
    a.semantics = &sem.header;
    a.counterId = id;
    uint64_t got = nvtxCounterRegister(t->domain, &a);
    /* A tool without the counters module answers 0; the static id is ours to sample with
     * (the samples are then no-ops as well). */
    return got ? got : id;
}

void pp_nvtx_counter_sample(uint64_t id, int64_t value)
{
    if (!id)
        return;
    pp_nvtx_table *t = atomic_load_explicit(&g_table, memory_order_acquire);
    if (!t || !t->domain)
        return;
    nvtxCounterSampleInt64(t->domain, id, value);
}

int pp_nvtx_compiled_in(void) { return 1; }

#else /* no NVTX headers at build time: every call is a no-op */

void pp_nvtx_setup(int S, int M, int v, int n_layers, const char *const *layer_names)
{
    (void)S, (void)M, (void)v, (void)n_layers, (void)layer_names;
}
void pp_nvtx_push(pp_nvtx_kind kind, const pp_nvtx_info *info) { (void)kind, (void)info; }
void pp_nvtx_pop(void) {}
void pp_nvtx_name_thread(const char *name) { (void)name; }
void pp_nvtx_mark_config(const char *text) { (void)text; }
uint64_t pp_nvtx_counter_register(const char *name, uint64_t id)
{
    (void)name, (void)id;
    return 0;
}
void pp_nvtx_counter_sample(uint64_t id, int64_t value) { (void)id, (void)value; }
int pp_nvtx_compiled_in(void) { return 0; }

#endif
