/* nvtx_inject.c: libpprof's NVTX v3 side: the two exported entry points NVTX looks up after
 * dlopening NVTX_INJECTION64_PATH, and a handler for every CORE and CORE2 call. Handlers run on
 * the application's threads, concurrently and without NVTX taking any lock: each appends one
 * fixed-layout record (plus an optional extended-payload record) to the calling thread's ring,
 * with no lock, no allocation and no system call besides the vDSO clock read. Timestamps are
 * taken last on push/start/mark and first on pop/end, so a range's recorded duration lies inside
 * the interval the application spent between its two calls. */
#include "pprof_internal.h"

#include <string.h>

#define g g_pprof

/* ---- event attributes ---- */

typedef struct attr_info {
    uint32_t message, category, color, payload_type;
    uint64_t payload;
    const nvtxPayloadData_t *ext;
    uint32_t n_ext;
    uint32_t ext_bytes; /* bytes of PP_REC_EXT_PAYLOAD records needed */
} attr_info;

static inline uint32_t msg_id(int32_t type, nvtxMessageValue_t m)
{
    const struct nvtxStringRegistration_st *s = NULL;
    switch (type) {
    case NVTX_MESSAGE_TYPE_REGISTERED: s = m.registered; break;
    case NVTX_MESSAGE_TYPE_ASCII: s = pprof_intern_cstr(m.ascii); break;
    case NVTX_MESSAGE_TYPE_UNICODE: s = pprof_intern_wstr(m.unicode); break;
    default: break;
    }
    return s ? s->id : 0;
}

/* Bytes of ext records for the payload array, data capped at PPROF_EXT_MAX_BYTES in all. */
static inline uint32_t ext_size(const nvtxPayloadData_t *pd, uint32_t n)
{
    uint32_t bytes = 0, budget = PPROF_EXT_MAX_BYTES;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t d = pd[i].payload ? (pd[i].size < budget ? (uint32_t)pd[i].size : budget) : 0;
        budget -= d;
        bytes += (uint32_t)sizeof(pp_rec_ext) + ((d + 7) & ~7u);
    }
    return bytes;
}

static inline void attr_decode(const nvtxEventAttributes_t *a, attr_info *o)
{
    *o = (attr_info){0, 0, 0, 0, 0, NULL, 0, 0};
    if (PPROF_UNLIKELY(!a || a->size < NVTX_EVENT_ATTRIB_STRUCT_SIZE))
        return;
    o->message = msg_id(a->messageType, a->message);
    o->category = a->category;
    o->color = a->colorType == NVTX_COLOR_ARGB ? a->color : 0;
    if (a->payloadType >= NVTX_PAYLOAD_TYPE_UNSIGNED_INT64 &&
        a->payloadType <= NVTX_PAYLOAD_TYPE_FLOAT) {
        o->payload_type = (uint32_t)a->payloadType;
        switch (a->payloadType) {
        case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
        case NVTX_PAYLOAD_TYPE_INT32:
        case NVTX_PAYLOAD_TYPE_FLOAT: {
            uint32_t v;
            memcpy(&v, &a->payload, 4);
            o->payload = v;
            break;
        }
        default: memcpy(&o->payload, &a->payload, 8); break;
        }
    } else if (a->payloadType == NVTX_PAYLOAD_TYPE_EXT && a->payload.ullValue &&
               a->reserved0 > 0) {
        o->ext = (const nvtxPayloadData_t *)(uintptr_t)a->payload.ullValue;
        o->n_ext = a->reserved0 < PPROF_EXT_MAX_ITEMS ? (uint32_t)a->reserved0
                                                       : PPROF_EXT_MAX_ITEMS;
        o->ext_bytes = ext_size(o->ext, o->n_ext);
    }
}

__attribute__((noinline)) static void ext_write(uint8_t *p, const attr_info *ai, uint32_t tid, uint64_t ts)
{
    uint32_t budget = PPROF_EXT_MAX_BYTES;
    for (uint32_t i = 0; i < ai->n_ext; i++) {
        const nvtxPayloadData_t *pd = &ai->ext[i];
        uint32_t d = pd->payload ? (pd->size < budget ? (uint32_t)pd->size : budget) : 0;
        if (pd->payload && pd->size > d)
            atomic_fetch_add_explicit(&g.ext_truncated, 1, memory_order_relaxed);
        budget -= d;
        uint32_t padded = (d + 7) & ~7u;
        pp_rec_ext *r = (pp_rec_ext *)p;
        r->h.type = PP_REC_EXT_PAYLOAD;
        r->h.size = (uint16_t)(sizeof *r + padded);
        r->h.tid = tid;
        r->h.ts = ts;
        r->schema_id = pd->schemaId;
        r->data_bytes = d;
        r->reserved = 0;
        if (d)
            memcpy(r + 1, pd->payload, d);
        memset((uint8_t *)(r + 1) + d, 0, padded - d);
        p += sizeof *r + padded;
    }
}

/* ---- the step window (PPROF_STEPS) ---- */

static int is_step_push(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    if (!d || !d->is_pipeprof || !a || a->size < NVTX_EVENT_ATTRIB_STRUCT_SIZE)
        return 0;
    if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED)
        return a->message.registered && a->message.registered->is_step;
    if (a->messageType == NVTX_MESSAGE_TYPE_ASCII)
        return a->message.ascii && strcmp(a->message.ascii, pp_nvtx_kind_word(PP_NVTX_STEP)) == 0;
    return 0;
}

/* The step number of a step range, by the convention's decoding rule: the pipeprof.event
 * payload's "step", else an integer payload, else this thread's count of step ranges. */
static int64_t step_number(const pprof_thread *t, const nvtxEventAttributes_t *a)
{
    if (a->payloadType == NVTX_PAYLOAD_TYPE_EXT && a->payload.ullValue) {
        const nvtxPayloadData_t *pd = (const nvtxPayloadData_t *)(uintptr_t)a->payload.ullValue;
        uint64_t off = g.step_offset;
        for (int32_t i = 0; i < a->reserved0 && i < PPROF_EXT_MAX_ITEMS; i++) {
            if (pd[i].schemaId == PP_NVTX_SCHEMA_ID && pd[i].payload &&
                pd[i].size >= off + 8) {
                int64_t s;
                memcpy(&s, (const uint8_t *)pd[i].payload + off, 8);
                return s;
            }
        }
    }
    switch (a->payloadType) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64: return (int64_t)a->payload.ullValue;
    case NVTX_PAYLOAD_TYPE_INT64: return a->payload.llValue;
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32: return a->payload.uiValue;
    case NVTX_PAYLOAD_TYPE_INT32: return a->payload.iValue;
    default: return (t->cur_step < 0 ? 0 : t->cur_step) + 1;
    }
}

/* Called on every event when PPROF_STEPS is set; returns whether to record it. A thread that
 * has opened step ranges follows its own latest step; the others follow the process's. */
static int step_window(pprof_thread *t, nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    if (a && is_step_push(d, a)) {
        t->cur_step = step_number(t, a);
        t->has_steps = 1;
        atomic_store_explicit(&g.last_step, t->cur_step, memory_order_relaxed);
    }
    int64_t s = t->has_steps ? t->cur_step
                             : atomic_load_explicit(&g.last_step, memory_order_relaxed);
    if (s >= g.step_lo && s <= g.step_hi)
        return 1;
    pprof_count(&t->filtered);
    return 0;
}

/* ---- records ---- */

/* PUSH, START and MARK: one pp_rec_range (+ ext records); ts taken last. */
__attribute__((always_inline)) static inline void emit_range(pprof_thread *t, unsigned flags, uint16_t type, uint32_t domain,
                              const attr_info *ai, uint64_t range_id)
{
    uint32_t size = (uint32_t)sizeof(pp_rec_range) + ai->ext_bytes;
    uint8_t *p = pprof_ring_reserve(t, size);
    if (PPROF_UNLIKELY(!p)) {
        pprof_drop(t);
        return;
    }
    pp_rec_range *r = (pp_rec_range *)p;
    uint32_t tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
    r->h.type = type;
    r->h.size = sizeof *r;
    r->h.tid = tid;
    r->domain = domain;
    r->message = ai->message;
    r->category = ai->category;
    r->color = ai->color;
    r->payload_type = ai->payload_type;
    r->reserved = 0;
    r->payload = ai->payload;
    r->range_id = range_id;
    uint64_t ts = pprof_now(flags);
    r->h.ts = ts;
    if (ai->n_ext)
        ext_write(p + sizeof *r, ai, tid, ts);
    pprof_ring_commit(t, size);
}

/* Checks shared by every event; returns 0 when the event is not to be recorded (and counts
 * it). */
static inline int want(pprof_thread *t, unsigned flags, nvtxDomainHandle_t d,
                       const nvtxEventAttributes_t *a)
{
    if (PPROF_UNLIKELY(!(flags & PPROF_F_CAPTURE) || !t->ring)) {
        pprof_drop(t);
        return 0;
    }
    if (PPROF_UNLIKELY(flags & PPROF_F_STEPS))
        return step_window(t, d, a);
    return 1;
}

static inline int32_t *depth_of(pprof_thread *t, nvtxDomainHandle_t d)
{
    return &t->depth[(d ? d->id : 0) & (PPROF_DEPTH_SLOTS - 1)];
}

static int push_common(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    pprof_thread *t = pprof_self();
    int32_t *dp = depth_of(t, d);
    int level = (*dp)++;
    unsigned flags = atomic_load_explicit(&g.flags, memory_order_relaxed);
    if (!want(t, flags, d, a))
        return level;
    attr_info ai;
    attr_decode(a, &ai);
    emit_range(t, flags, PP_REC_PUSH, d ? d->id : 0, &ai, 0);
    return level;
}

static int pop_common(nvtxDomainHandle_t d)
{
    unsigned flags = atomic_load_explicit(&g.flags, memory_order_relaxed);
    uint64_t ts = pprof_now(flags);
    pprof_thread *t = pprof_self();
    int32_t *dp = depth_of(t, d);
    int level = *dp > 0 ? --*dp : -1;
    if (!want(t, flags, NULL, NULL))
        return level;
    pp_rec_pop *r = (pp_rec_pop *)pprof_ring_reserve(t, sizeof *r);
    if (PPROF_UNLIKELY(!r)) {
        pprof_drop(t);
        return level;
    }
    r->h.type = PP_REC_POP;
    r->h.size = sizeof *r;
    r->h.tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
    r->h.ts = ts;
    r->domain = d ? d->id : 0;
    r->reserved = 0;
    pprof_ring_commit(t, sizeof *r);
    return level;
}

static nvtxRangeId_t start_common(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    pprof_thread *t = pprof_self();
    /* (thread index + 1) << 40 | counter: unique in the process without atomics. */
    nvtxRangeId_t id = ((t->index + 1) << 40) | (++t->range_counter & ((UINT64_C(1) << 40) - 1));
    unsigned flags = atomic_load_explicit(&g.flags, memory_order_relaxed);
    if (!want(t, flags, d, a))
        return id;
    attr_info ai;
    attr_decode(a, &ai);
    emit_range(t, flags, PP_REC_START, d ? d->id : 0, &ai, id);
    return id;
}

static void end_common(nvtxRangeId_t id)
{
    unsigned flags = atomic_load_explicit(&g.flags, memory_order_relaxed);
    uint64_t ts = pprof_now(flags);
    pprof_thread *t = pprof_self();
    if (!want(t, flags, NULL, NULL))
        return;
    pp_rec_end *r = (pp_rec_end *)pprof_ring_reserve(t, sizeof *r);
    if (PPROF_UNLIKELY(!r)) {
        pprof_drop(t);
        return;
    }
    r->h.type = PP_REC_END;
    r->h.size = sizeof *r;
    r->h.tid = atomic_load_explicit(&t->tid, memory_order_relaxed);
    r->h.ts = ts;
    r->range_id = id;
    pprof_ring_commit(t, sizeof *r);
}

static void mark_common(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    pprof_thread *t = pprof_self();
    unsigned flags = atomic_load_explicit(&g.flags, memory_order_relaxed);
    if (!want(t, flags, d, a))
        return;
    attr_info ai;
    attr_decode(a, &ai);
    emit_range(t, flags, PP_REC_MARK, d ? d->id : 0, &ai, 0);
}

/* Attributes carrying only a message, for the A and W variants. */
static inline nvtxEventAttributes_t attr_ascii(const char *m)
{
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = m;
    return a;
}

static inline nvtxEventAttributes_t attr_wide(const wchar_t *m)
{
    nvtxEventAttributes_t a = attr_ascii(NULL);
    a.messageType = NVTX_MESSAGE_TYPE_UNICODE;
    a.message.unicode = m;
    return a;
}

/* A wide name as UTF-8 in buf (1024 bytes, truncated), for the W variants. */
static const char *utf8_name(const wchar_t *name, char buf[1024])
{
    size_t n = pprof_utf8_from_wide(name, buf, 1023);
    buf[n] = '\0';
    return buf;
}

/* ---- CORE: the default domain ---- */

/* The A and W variants of a CORE handler: the message as attributes, then what the Ex variant
 * does with them. */
#define AW_HANDLERS(ret, name, call)                                                           \
    static ret h_##name##_a(const char *m)                                                     \
    {                                                                                          \
        nvtxEventAttributes_t a = attr_ascii(m);                                               \
        call;                                                                                  \
    }                                                                                          \
    static ret h_##name##_w(const wchar_t *m)                                                  \
    {                                                                                          \
        nvtxEventAttributes_t a = attr_wide(m);                                                \
        call;                                                                                  \
    }

static void h_mark_ex(const nvtxEventAttributes_t *a) { mark_common(NULL, a); }
AW_HANDLERS(void, mark, mark_common(NULL, &a))
static nvtxRangeId_t h_start_ex(const nvtxEventAttributes_t *a) { return start_common(NULL, a); }
AW_HANDLERS(nvtxRangeId_t, start, return start_common(NULL, &a))
static void h_end(nvtxRangeId_t id) { end_common(id); }
static int h_push_ex(const nvtxEventAttributes_t *a) { return push_common(NULL, a); }
AW_HANDLERS(int, push, return push_common(NULL, &a))
static int h_pop(void) { return pop_common(NULL); }
static void h_name_category_a(uint32_t c, const char *name) { pprof_name_category(NULL, c, name); }
static void h_name_category_w(uint32_t c, const wchar_t *name)
{
    char buf[1024];
    pprof_name_category(NULL, c, utf8_name(name, buf));
}
static void h_name_thread_a(uint32_t tid, const char *name) { pprof_name_thread(tid, name); }
static void h_name_thread_w(uint32_t tid, const wchar_t *name)
{
    char buf[1024];
    pprof_name_thread(tid, utf8_name(name, buf));
}

/* ---- CORE2: domains ---- */

static void h_domain_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    mark_common(d, a);
}
static nvtxRangeId_t h_domain_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    return start_common(d, a);
}
static void h_domain_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    (void)d;
    end_common(id);
}
static int h_domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)
{
    return push_common(d, a);
}
static int h_domain_pop(nvtxDomainHandle_t d) { return pop_common(d); }

/* Resources (names of OS or CUDA objects) are not recorded; NVTX only needs a handle back. */
static char g_resource_dummy;
static nvtxResourceHandle_t h_resource_create(nvtxDomainHandle_t d, nvtxResourceAttributes_t *a)
{
    (void)d, (void)a;
    return (nvtxResourceHandle_t)(void *)&g_resource_dummy;
}
static void h_resource_destroy(nvtxResourceHandle_t r) { (void)r; }
static void h_domain_name_category_a(nvtxDomainHandle_t d, uint32_t c, const char *name)
{
    pprof_name_category(d, c, name);
}
static void h_domain_name_category_w(nvtxDomainHandle_t d, uint32_t c, const wchar_t *name)
{
    char buf[1024];
    pprof_name_category(d, c, utf8_name(name, buf));
}
static nvtxStringHandle_t h_register_string_a(nvtxDomainHandle_t d, const char *s)
{
    (void)d; /* string ids are process-wide */
    return pprof_intern_cstr(s);
}
static nvtxStringHandle_t h_register_string_w(nvtxDomainHandle_t d, const wchar_t *s)
{
    (void)d;
    return pprof_intern_wstr(s);
}
static nvtxDomainHandle_t h_domain_create_a(const char *name) { return pprof_domain_create(name); }
static nvtxDomainHandle_t h_domain_create_w(const wchar_t *name)
{
    char buf[1024];
    return pprof_domain_create(utf8_name(name, buf));
}
/* Domains live as long as the process: records written before the destroy refer to them. */
static void h_domain_destroy(nvtxDomainHandle_t d) { (void)d; }
static void h_initialize(const void *reserved) { (void)reserved; }

/* ---- payload extension ---- */

static uint64_t h_schema_register(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t *a)
{
    return pprof_schema_register(d, a);
}

/* ---- entry points ---- */

static void install(NvtxFunctionTable t, unsigned size, unsigned cbid, NvtxFunctionPointer fn)
{
    if (t && cbid < size && t[cbid])
        *t[cbid] = fn;
}

#define FN(f) ((NvtxFunctionPointer)(void *)(f))

/* Called once per NVTX instance (the application's, each library's own copy), possibly
 * concurrently and before main. The process-wide state is set up once; every instance gets its
 * tables filled. Returning 0 makes NVTX unload us and no-op that instance: done only when
 * capture is impossible (PPROF_DIR unset, the file cannot be created). */
PPROF_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get)
{
    if (!get || !pprof_global_init())
        return 0;
    const NvtxExportTableVersionInfo *vi =
        (const NvtxExportTableVersionInfo *)get(NVTX_ETID_VERSIONINFO);
    if (vi && vi->struct_size >= sizeof *vi && vi->SetInjectionNvtxVersion)
        vi->SetInjectionNvtxVersion(NVTX_VERSION);
    const NvtxExportTableCallbacks *cb = (const NvtxExportTableCallbacks *)get(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable)
        return 0;
    NvtxFunctionTable core = NULL, core2 = NULL;
    unsigned n1 = 0, n2 = 0;
    if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &n1) ||
        !cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &n2))
        return 0;
    install(core, n1, NVTX_CBID_CORE_MarkEx, FN(h_mark_ex));
    install(core, n1, NVTX_CBID_CORE_MarkA, FN(h_mark_a));
    install(core, n1, NVTX_CBID_CORE_MarkW, FN(h_mark_w));
    install(core, n1, NVTX_CBID_CORE_RangeStartEx, FN(h_start_ex));
    install(core, n1, NVTX_CBID_CORE_RangeStartA, FN(h_start_a));
    install(core, n1, NVTX_CBID_CORE_RangeStartW, FN(h_start_w));
    install(core, n1, NVTX_CBID_CORE_RangeEnd, FN(h_end));
    install(core, n1, NVTX_CBID_CORE_RangePushEx, FN(h_push_ex));
    install(core, n1, NVTX_CBID_CORE_RangePushA, FN(h_push_a));
    install(core, n1, NVTX_CBID_CORE_RangePushW, FN(h_push_w));
    install(core, n1, NVTX_CBID_CORE_RangePop, FN(h_pop));
    install(core, n1, NVTX_CBID_CORE_NameCategoryA, FN(h_name_category_a));
    install(core, n1, NVTX_CBID_CORE_NameCategoryW, FN(h_name_category_w));
    install(core, n1, NVTX_CBID_CORE_NameOsThreadA, FN(h_name_thread_a));
    install(core, n1, NVTX_CBID_CORE_NameOsThreadW, FN(h_name_thread_w));
    install(core2, n2, NVTX_CBID_CORE2_DomainMarkEx, FN(h_domain_mark_ex));
    install(core2, n2, NVTX_CBID_CORE2_DomainRangeStartEx, FN(h_domain_start_ex));
    install(core2, n2, NVTX_CBID_CORE2_DomainRangeEnd, FN(h_domain_end));
    install(core2, n2, NVTX_CBID_CORE2_DomainRangePushEx, FN(h_domain_push_ex));
    install(core2, n2, NVTX_CBID_CORE2_DomainRangePop, FN(h_domain_pop));
    install(core2, n2, NVTX_CBID_CORE2_DomainResourceCreate, FN(h_resource_create));
    install(core2, n2, NVTX_CBID_CORE2_DomainResourceDestroy, FN(h_resource_destroy));
    install(core2, n2, NVTX_CBID_CORE2_DomainNameCategoryA, FN(h_domain_name_category_a));
    install(core2, n2, NVTX_CBID_CORE2_DomainNameCategoryW, FN(h_domain_name_category_w));
    install(core2, n2, NVTX_CBID_CORE2_DomainRegisterStringA, FN(h_register_string_a));
    install(core2, n2, NVTX_CBID_CORE2_DomainRegisterStringW, FN(h_register_string_w));
    install(core2, n2, NVTX_CBID_CORE2_DomainCreateA, FN(h_domain_create_a));
    install(core2, n2, NVTX_CBID_CORE2_DomainCreateW, FN(h_domain_create_w));
    install(core2, n2, NVTX_CBID_CORE2_DomainDestroy, FN(h_domain_destroy));
    install(core2, n2, NVTX_CBID_CORE2_Initialize, FN(h_initialize));
    return 1;
}

/* Extension modules (payload schemas: module 2, compat 0x0103 in NCCL's bundled copy, 0x0104
 * in CUDA 13.0; same slots; counters, module 4, and memory, module 1, in nvtx_ext.c). Returning 1 for modules we do not handle keeps them working as
 * no-ops. */
PPROF_EXPORT int InitializeInjectionNvtxExtension(nvtxExtModuleInfo_t *mi)
{
    if (!mi || !pprof_global_init())
        return 1;
    if (pprof_ext_install(mi)) /* counters, memory: nvtx_ext.c */
        return 1;
    if (mi->moduleId == NVTX_EXT_PAYLOAD_MODULEID && mi->segmentsCount >= 1 && mi->segments &&
        mi->segments[0].slotCount > NVTX3EXT_CBID_nvtxPayloadSchemaRegister &&
        mi->segments[0].functionSlots)
        mi->segments[0].functionSlots[NVTX3EXT_CBID_nvtxPayloadSchemaRegister] =
            (intptr_t)(void *)h_schema_register;
    return 1;
}
