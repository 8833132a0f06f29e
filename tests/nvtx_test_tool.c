/* nvtx_test_tool.c: the NVTX tool behind tests/nvtx_test_tool.h. Linked into test_nvtx, it
 * attaches through NVTX's static injection: strong definitions of InitializeInjectionNvtx2_fnptr
 * and InitializeInjectionNvtxExtension_fnptr override the weak ones of the NVTX instance that
 * runtime/nvtx.c carries (the same executable), and NVTX calls them on its first call when
 * NVTX_INJECTION64_PATH is unset. Records go to a fixed array under one mutex: this is a test
 * tool, not the profiler, so simplicity wins over speed. */
#define _GNU_SOURCE /* syscall(SYS_gettid) */

#include "nvtx_test_tool.h"

#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

uint32_t tt_gettid(void) { return (uint32_t)syscall(SYS_gettid); }

#if defined(PP_HAVE_NVTX) && PP_HAVE_NVTX

#define NVTX_NO_IMPL /* a tool: types only, no NVTX instance of its own */
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>
#include <nvtx3/nvToolsExtCounters.h>
#include <nvtx3/nvToolsExtSemanticsCounters.h>

enum { TT_EVENTS_MAX = 32768, TT_DOMAINS_MAX = 16, TT_STRINGS_MAX = 8192, TT_SCHEMAS_MAX = 8 };

/* The opaque handle types of NVTX are the tool's to define. */
struct nvtxDomainRegistration_st {
    char name[TT_NAME_MAX];
};
struct nvtxStringRegistration_st {
    char text[TT_TEXT_MAX];
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static tt_event g_events[TT_EVENTS_MAX];
static int g_n_events, g_dropped;
static struct nvtxDomainRegistration_st g_domains[TT_DOMAINS_MAX];
static int g_n_domains;
static struct nvtxStringRegistration_st g_strings[TT_STRINGS_MAX];
static int g_n_strings;
static tt_schema g_schemas[TT_SCHEMAS_MAX];
static int g_n_schemas;
static int g_disabled, g_refuse_strings, g_init_calls, g_ext_init_calls;
static _Thread_local int tl_depth; /* push/pop nesting of the calling thread */

static void copy_text(char *dst, size_t size, const char *src)
{
    if (!src)
        src = "";
    size_t n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static const char *domain_name(nvtxDomainHandle_t d) { return d ? d->name : ""; }

/* Appends a zeroed event of `kind` for the calling thread; NULL (and counted) when full. Call
 * with g_mu held. */
static tt_event *event_new(tt_kind kind, nvtxDomainHandle_t d)
{
    if (g_n_events >= TT_EVENTS_MAX) {
        g_dropped++;
        return NULL;
    }
    tt_event *e = &g_events[g_n_events++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->tid = tt_gettid();
    copy_text(e->domain, sizeof e->domain, domain_name(d));
    return e;
}

static void record_other(void)
{
    pthread_mutex_lock(&g_mu);
    event_new(TT_OTHER, NULL);
    pthread_mutex_unlock(&g_mu);
}

static const tt_schema *schema_find(const char *domain, uint64_t id)
{
    for (int i = 0; i < g_n_schemas; i++)
        if (g_schemas[i].id == id && strcmp(g_schemas[i].domain, domain) == 0)
            return &g_schemas[i];
    return NULL;
}

/* Decodes an extended payload through the schema registered for it, entry by entry, the way a
 * profiler would: by offset and type, never by knowing the struct. */
static void decode_payload(tt_event *e, const nvtxPayloadData_t *pd)
{
    e->schema_id = pd->schemaId;
    e->payload_size = pd->size;
    const tt_schema *s = schema_find(e->domain, pd->schemaId);
    if (!s || !pd->payload)
        return;
    const unsigned char *base = pd->payload;
    for (size_t i = 0; i < s->n_entries && e->n_fields < TT_FIELDS_MAX; i++) {
        const tt_schema_entry *en = &s->entry[i];
        tt_field *f = &e->field[e->n_fields];
        size_t width = 0;
        switch (en->type) {
        case NVTX_PAYLOAD_ENTRY_TYPE_INT32:
        case NVTX_PAYLOAD_ENTRY_TYPE_UINT32: width = 4; break;
        case NVTX_PAYLOAD_ENTRY_TYPE_INT64:
        case NVTX_PAYLOAD_ENTRY_TYPE_UINT64: width = 8; break;
        default: continue; /* not used by the convention: skip */
        }
        if (en->offset + width > pd->size)
            continue;
        copy_text(f->name, sizeof f->name, en->name);
        switch (en->type) {
        case NVTX_PAYLOAD_ENTRY_TYPE_INT32: {
            int32_t x;
            memcpy(&x, base + en->offset, 4);
            f->is_signed = 1;
            f->i = x;
            f->u = (uint64_t)(int64_t)x;
            break;
        }
        case NVTX_PAYLOAD_ENTRY_TYPE_UINT32: {
            uint32_t x;
            memcpy(&x, base + en->offset, 4);
            f->u = x;
            f->i = (int64_t)x;
            break;
        }
        case NVTX_PAYLOAD_ENTRY_TYPE_INT64: {
            int64_t x;
            memcpy(&x, base + en->offset, 8);
            f->is_signed = 1;
            f->i = x;
            f->u = (uint64_t)x;
            break;
        }
        default: {
            uint64_t x;
            memcpy(&x, base + en->offset, 8);
            f->u = x;
            f->i = (int64_t)x;
            break;
        }
        }
        e->n_fields++;
    }
}

/* ---- CORE2 (domain) handlers ---- */

static nvtxDomainHandle_t h_domain_create_a(const char *name)
{
    pthread_mutex_lock(&g_mu);
    nvtxDomainHandle_t d = NULL;
    for (int i = 0; i < g_n_domains && !d; i++)
        if (strcmp(g_domains[i].name, name ? name : "") == 0)
            d = &g_domains[i];
    if (!d && g_n_domains < TT_DOMAINS_MAX) {
        d = &g_domains[g_n_domains++];
        copy_text(d->name, sizeof d->name, name);
    }
    tt_event *e = event_new(TT_DOMAIN_CREATE, d);
    if (e)
        copy_text(e->text, sizeof e->text, name);
    pthread_mutex_unlock(&g_mu);
    return d;
}

static nvtxStringHandle_t h_register_string_a(nvtxDomainHandle_t d, const char *s)
{
    pthread_mutex_lock(&g_mu);
    nvtxStringHandle_t h = NULL;
    if (!g_refuse_strings && g_n_strings < TT_STRINGS_MAX) {
        h = &g_strings[g_n_strings++];
        copy_text(h->text, sizeof h->text, s);
    }
    tt_event *e = event_new(TT_REGISTER_STRING, d);
    if (e)
        copy_text(e->text, sizeof e->text, s);
    pthread_mutex_unlock(&g_mu);
    return h;
}

static void h_name_category_a(nvtxDomainHandle_t d, uint32_t id, const char *name)
{
    pthread_mutex_lock(&g_mu);
    tt_event *e = event_new(TT_NAME_CATEGORY, d);
    if (e) {
        e->id = id;
        copy_text(e->text, sizeof e->text, name);
    }
    pthread_mutex_unlock(&g_mu);
}

static int h_domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    int level = tl_depth++;
    pthread_mutex_lock(&g_mu);
    tt_event *e = event_new(TT_PUSH, d);
    if (e && a) {
        e->level = level;
        e->attr_version = a->version;
        e->attr_size = a->size;
        if (a->size >= NVTX_EVENT_ATTRIB_STRUCT_SIZE) {
            e->category = a->category;
            e->color_type = a->colorType;
            e->color = a->color;
            e->message_type = a->messageType;
            e->payload_type = a->payloadType;
            if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED && a->message.registered)
                copy_text(e->text, sizeof e->text, a->message.registered->text);
            else if (a->messageType == NVTX_MESSAGE_TYPE_ASCII)
                copy_text(e->text, sizeof e->text, a->message.ascii);
            if (a->payloadType == NVTX_PAYLOAD_TYPE_EXT && a->reserved0 >= 1 && a->payload.ullValue)
                decode_payload(e, (const nvtxPayloadData_t *)(uintptr_t)a->payload.ullValue);
        }
    }
    pthread_mutex_unlock(&g_mu);
    return level;
}

static int h_domain_pop(nvtxDomainHandle_t d)
{
    int level = tl_depth > 0 ? --tl_depth : -1;
    pthread_mutex_lock(&g_mu);
    tt_event *e = event_new(TT_POP, d);
    if (e)
        e->level = level;
    pthread_mutex_unlock(&g_mu);
    return level;
}

static void h_domain_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    (void)d, (void)a;
    record_other();
}
static nvtxRangeId_t h_domain_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    (void)d, (void)a;
    record_other();
    return 1;
}
static void h_domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    (void)d, (void)id;
    record_other();
}

/* ---- CORE (default domain) handlers: the runtime must not use these, except thread names ---- */

static void h_name_os_thread_a(uint32_t tid, const char *name)
{
    pthread_mutex_lock(&g_mu);
    tt_event *e = event_new(TT_NAME_THREAD, NULL);
    if (e) {
        e->id = tid;
        copy_text(e->text, sizeof e->text, name);
    }
    pthread_mutex_unlock(&g_mu);
}
static void h_mark_ex(const nvtxEventAttributes_t *a)
{
    (void)a;
    record_other();
}
static void h_mark_a(const char *m)
{
    (void)m;
    record_other();
}
static nvtxRangeId_t h_start_ex(const nvtxEventAttributes_t *a)
{
    (void)a;
    record_other();
    return 1;
}
static nvtxRangeId_t h_start_a(const char *m)
{
    (void)m;
    record_other();
    return 1;
}
static void h_end(nvtxRangeId_t id)
{
    (void)id;
    record_other();
}
static int h_push_ex(const nvtxEventAttributes_t *a)
{
    (void)a;
    record_other();
    return 0;
}
static int h_push_a(const char *m)
{
    (void)m;
    record_other();
    return 0;
}
static int h_pop(void)
{
    record_other();
    return 0;
}

/* ---- payload extension ---- */

static uint64_t h_schema_register(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t *a)
{
    if (!a)
        return 0;
    pthread_mutex_lock(&g_mu);
    uint64_t id = 0;
    if (g_n_schemas < TT_SCHEMAS_MAX) {
        tt_schema *s = &g_schemas[g_n_schemas++];
        memset(s, 0, sizeof *s);
        /* Deep copy: the attribute and its entries belong to the caller. */
        copy_text(s->domain, sizeof s->domain, domain_name(d));
        s->field_mask = a->fieldMask;
        if (a->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME)
            copy_text(s->name, sizeof s->name, a->name);
        if (a->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE)
            s->type = a->type;
        if (a->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE)
            s->static_size = a->payloadStaticSize;
        if ((a->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES) &&
            (a->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES) && a->entries) {
            for (size_t i = 0; i < a->numEntries && i < TT_FIELDS_MAX; i++) {
                copy_text(s->entry[i].name, sizeof s->entry[i].name, a->entries[i].name);
                s->entry[i].type = a->entries[i].type;
                s->entry[i].offset = a->entries[i].offset;
                s->n_entries++;
            }
        }
        s->id = (a->fieldMask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID)
                    ? a->schemaId
                    : NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START + (uint64_t)g_n_schemas;
        id = s->id;
        tt_event *e = event_new(TT_SCHEMA_REGISTER, d);
        if (e)
            copy_text(e->text, sizeof e->text, s->name);
    }
    pthread_mutex_unlock(&g_mu);
    return id;
}

/* ---- counters extension ---- */

static uint64_t h_counter_register(nvtxDomainHandle_t d, const nvtxCounterAttr_t *a)
{
    if (!a)
        return 0;
    pthread_mutex_lock(&g_mu);
    tt_event *e = event_new(TT_COUNTER_REGISTER, d);
    if (e) {
        copy_text(e->text, sizeof e->text, a->name);
        e->counter_id = a->counterId;
        e->schema_id = a->schemaId;
        for (const nvtxSemanticsHeader_t *h = a->semantics; h; h = h->next)
            if (h->semanticId == NVTX_SEMANTIC_ID_COUNTERS_V1)
                copy_text(e->unit, sizeof e->unit, ((const nvtxSemanticsCounter_t *)h)->unit);
    }
    pthread_mutex_unlock(&g_mu);
    return a->counterId;
}

static void h_counter_sample_i64(nvtxDomainHandle_t d, uint64_t id, int64_t value)
{
    pthread_mutex_lock(&g_mu);
    tt_event *e = event_new(TT_COUNTER_SAMPLE, d);
    if (e) {
        e->counter_id = id;
        e->value = value;
    }
    pthread_mutex_unlock(&g_mu);
}

/* ---- entry points ---- */

static int install(NvtxFunctionTable t, unsigned size, unsigned cbid, NvtxFunctionPointer fn)
{
    if (cbid >= size || !t[cbid])
        return 0;
    *t[cbid] = fn;
    return 1;
}

#define FN(f) ((NvtxFunctionPointer)(f))

static int tool_init(NvtxGetExportTableFunc_t get)
{
    pthread_mutex_lock(&g_mu);
    g_init_calls++;
    int disabled = g_disabled;
    pthread_mutex_unlock(&g_mu);
    if (disabled || !get)
        return 0;
    const NvtxExportTableCallbacks *cb = get(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable)
        return 0;
    NvtxFunctionTable core = NULL, core2 = NULL;
    unsigned n_core = 0, n_core2 = 0;
    if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &n_core) ||
        !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &n_core2))
        return 0;
    int ok = 1;
    ok &= install(core2, n_core2, NVTX_CBID_CORE2_DomainCreateA, FN(h_domain_create_a));
    ok &= install(core2, n_core2, NVTX_CBID_CORE2_DomainRegisterStringA, FN(h_register_string_a));
    ok &= install(core2, n_core2, NVTX_CBID_CORE2_DomainNameCategoryA, FN(h_name_category_a));
    ok &= install(core2, n_core2, NVTX_CBID_CORE2_DomainRangePushEx, FN(h_domain_push_ex));
    ok &= install(core2, n_core2, NVTX_CBID_CORE2_DomainRangePop, FN(h_domain_pop));
    ok &= install(core2, n_core2, NVTX_CBID_CORE2_DomainMarkEx, FN(h_domain_mark_ex));
    ok &= install(core2, n_core2, NVTX_CBID_CORE2_DomainRangeStartEx, FN(h_domain_start_ex));
    ok &= install(core2, n_core2, NVTX_CBID_CORE2_DomainRangeEnd, FN(h_domain_end));
    ok &= install(core, n_core, NVTX_CBID_CORE_NameOsThreadA, FN(h_name_os_thread_a));
    ok &= install(core, n_core, NVTX_CBID_CORE_MarkEx, FN(h_mark_ex));
    ok &= install(core, n_core, NVTX_CBID_CORE_MarkA, FN(h_mark_a));
    ok &= install(core, n_core, NVTX_CBID_CORE_RangeStartEx, FN(h_start_ex));
    ok &= install(core, n_core, NVTX_CBID_CORE_RangeStartA, FN(h_start_a));
    ok &= install(core, n_core, NVTX_CBID_CORE_RangeEnd, FN(h_end));
    ok &= install(core, n_core, NVTX_CBID_CORE_RangePushEx, FN(h_push_ex));
    ok &= install(core, n_core, NVTX_CBID_CORE_RangePushA, FN(h_push_a));
    ok &= install(core, n_core, NVTX_CBID_CORE_RangePop, FN(h_pop));
    return ok;
}

static int tool_ext_init(nvtxExtModuleInfo_t *mi)
{
    pthread_mutex_lock(&g_mu);
    g_ext_init_calls++;
    pthread_mutex_unlock(&g_mu);
    if (mi && mi->moduleId == NVTX_EXT_COUNTERS_MODULEID) {
        if (mi->segmentsCount < 1 || !mi->segments ||
            mi->segments[0].slotCount <= NVTX3EXT_CBID_nvtxCounterSampleInt64)
            return 0;
        mi->segments[0].functionSlots[NVTX3EXT_CBID_nvtxCounterRegister] =
            (intptr_t)h_counter_register;
        mi->segments[0].functionSlots[NVTX3EXT_CBID_nvtxCounterSampleInt64] =
            (intptr_t)h_counter_sample_i64;
        return 1;
    }
    if (!mi || mi->moduleId != NVTX_EXT_PAYLOAD_MODULEID)
        return 1; /* other extension modules: not handled, not an error */
    if (mi->segmentsCount < 1 || !mi->segments ||
        mi->segments[0].slotCount <= NVTX3EXT_CBID_nvtxPayloadSchemaRegister)
        return 0;
    mi->segments[0].functionSlots[NVTX3EXT_CBID_nvtxPayloadSchemaRegister] =
        (intptr_t)h_schema_register;
    return 1;
}

/* Strong definitions: they replace NVTX's weak, zero-initialised ones in this executable. */
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = tool_init;
NvtxExtInitializeInjectionFunc_t InitializeInjectionNvtxExtension_fnptr = tool_ext_init;

/* ---- queries ---- */

void tt_disable(void)
{
    pthread_mutex_lock(&g_mu);
    g_disabled = 1;
    pthread_mutex_unlock(&g_mu);
}

void tt_refuse_strings(void)
{
    pthread_mutex_lock(&g_mu);
    g_refuse_strings = 1;
    pthread_mutex_unlock(&g_mu);
}

void tt_reset(void)
{
    pthread_mutex_lock(&g_mu);
    g_n_events = 0;
    g_dropped = 0;
    pthread_mutex_unlock(&g_mu);
}

int tt_init_calls(void) { return g_init_calls; }
int tt_ext_init_calls(void) { return g_ext_init_calls; }
int tt_count(void) { return g_n_events; }
int tt_dropped(void) { return g_dropped; }
const tt_event *tt_get(int i) { return i >= 0 && i < g_n_events ? &g_events[i] : NULL; }
int tt_schema_count(void) { return g_n_schemas; }
const tt_schema *tt_schema_get(int i) { return i >= 0 && i < g_n_schemas ? &g_schemas[i] : NULL; }

#else /* no NVTX headers: nothing is recorded */

void tt_disable(void) {}
void tt_refuse_strings(void) {}
void tt_reset(void) {}
int tt_init_calls(void) { return 0; }
int tt_ext_init_calls(void) { return 0; }
int tt_count(void) { return 0; }
int tt_dropped(void) { return 0; }
const tt_event *tt_get(int i)
{
    (void)i;
    return NULL;
}
int tt_schema_count(void) { return 0; }
const tt_schema *tt_schema_get(int i)
{
    (void)i;
    return NULL;
}

#endif

int tt_count_kind(tt_kind kind)
{
    int n = 0;
    for (int i = 0; i < tt_count(); i++)
        n += tt_get(i)->kind == kind;
    return n;
}

int tt_count_registered(const char *text)
{
    int n = 0;
    for (int i = 0; i < tt_count(); i++) {
        const tt_event *e = tt_get(i);
        n += e->kind == TT_REGISTER_STRING && strcmp(e->text, text) == 0;
    }
    return n;
}

static const tt_field *field_find(const tt_event *e, const char *name)
{
    for (int i = 0; e && i < e->n_fields; i++)
        if (strcmp(e->field[i].name, name) == 0)
            return &e->field[i];
    return NULL;
}

int tt_field_i64(const tt_event *e, const char *name, int64_t *out)
{
    const tt_field *f = field_find(e, name);
    if (!f)
        return 0;
    *out = f->i;
    return 1;
}

int tt_field_u64(const tt_event *e, const char *name, uint64_t *out)
{
    const tt_field *f = field_find(e, name);
    if (!f)
        return 0;
    *out = f->u;
    return 1;
}
