/* registry.c: what NVTX names once and events refer to by id: interned strings (ASCII and wide
 * messages, registered strings), domains, category and thread names, payload schemas. Each
 * definition is appended, encoded, to the meta log, which the writer copies into META blocks
 * before the events that use it (and whole again into a forked child's new file).
 *
 * Lookups of known strings are lock-free (an open-addressing table of atomic pointers, entries
 * never move or die); inserts and every other definition take meta_mu. */
#include "pprof_internal.h"

#include <stdlib.h>
#include <string.h>

#define g g_pprof

static int g_meta_warned;

static uint64_t fnv1a(const char *s, size_t len)
{
    uint64_t h = UINT64_C(1469598103934665603);
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= UINT64_C(1099511628211);
    }
    return h;
}

int pprof_registry_init(void)
{
    g.intern = calloc(PPROF_INTERN_SLOTS, sizeof *g.intern);
    g.meta_cap = 64 * 1024;
    g.meta = malloc(g.meta_cap);
    g.step_offset = PP_NVTX_STEP_OFFSET;
    return g.intern && g.meta;
}

/* Appends one encoded record to the meta log; meta_mu held. Returns the space to fill (size
 * bytes, zeroed) or NULL when memory ran out (the definition is lost, logged once). */
static void *meta_append(size_t size)
{
    if (g.meta_failed)
        return NULL;
    if (g.meta_len + size > g.meta_cap) {
        size_t cap = g.meta_cap * 2;
        while (cap < g.meta_len + size)
            cap *= 2;
        uint8_t *p = realloc(g.meta, cap);
        if (!p) {
            g.meta_failed = 1;
            pprof_log_once(&g_meta_warned, "pprof: out of memory for definitions; later names "
                                           "are missing from the trace");
            return NULL;
        }
        g.meta = p;
        g.meta_cap = cap;
    }
    void *r = g.meta + g.meta_len;
    memset(r, 0, size);
    g.meta_len += size;
    return r;
}

static void meta_header(pp_rec_header *h, uint16_t type, size_t size, uint32_t tid)
{
    h->type = type;
    h->size = (uint16_t)size;
    h->tid = tid;
    h->ts = 0;
}

/* ---- strings ---- */

static struct nvtxStringRegistration_st *intern_find(uint64_t hash, const char *s, size_t len,
                                                      size_t *free_slot)
{
    size_t mask = PPROF_INTERN_SLOTS - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        struct nvtxStringRegistration_st *e =
            atomic_load_explicit(&g.intern[i], memory_order_acquire);
        if (!e) {
            if (free_slot)
                *free_slot = i;
            return NULL;
        }
        if (e->hash == hash && e->len == len && memcmp(e->str, s, len) == 0)
            return e;
    }
}

struct nvtxStringRegistration_st *pprof_intern(const char *s, size_t len)
{
    if (!g.intern)
        return NULL;
    if (len > PPROF_STRING_MAX)
        len = PPROF_STRING_MAX;
    uint64_t hash = fnv1a(s, len);
    struct nvtxStringRegistration_st *e = intern_find(hash, s, len, NULL);
    if (PPROF_LIKELY(e != NULL))
        return e;
    static int full_warned;
    pthread_mutex_lock(&g.meta_mu);
    size_t slot = 0;
    e = intern_find(hash, s, len, &slot);
    if (!e && g.n_strings < PPROF_INTERN_SLOTS / 2) {
        e = malloc(sizeof *e + len + 1);
        size_t rec = sizeof(pp_rec_string) + ((len + 7) & ~(size_t)7);
        void *r = e ? meta_append(rec) : NULL;
        if (!r) {
            free(e);
            e = NULL;
        } else {
            e->hash = hash;
            e->id = ++g.n_strings;
            e->len = (uint32_t)len;
            memcpy(e->str, s, len);
            e->str[len] = '\0';
            const char *step_word = pp_nvtx_kind_word(PP_NVTX_STEP);
            e->is_step = len == strlen(step_word) && memcmp(s, step_word, len) == 0;
            size_t n = pp_trace_enc_string(r, rec, e->id, e->str, len);
            if (n != rec) { /* cannot happen with a well-formed encoder; keep the log parseable */
                pp_rec_string *rs = r;
                meta_header(&rs->h, PP_REC_STRING, rec, 0);
                rs->id = e->id;
                rs->len = (uint32_t)len;
                memcpy(rs + 1, s, len);
            }
            atomic_store_explicit(&g.intern[slot], e, memory_order_release);
        }
    } else if (!e) {
        pprof_log_once(&full_warned, "pprof: more than %d distinct strings; later messages are "
                                     "recorded without text",
                       PPROF_INTERN_SLOTS / 2);
    }
    pthread_mutex_unlock(&g.meta_mu);
    return e;
}

struct nvtxStringRegistration_st *pprof_intern_cstr(const char *s)
{
    if (!s)
        return NULL;
    return pprof_intern(s, strnlen(s, PPROF_STRING_MAX));
}

/* wchar_t is UTF-32 on the platforms NVTX injection exists on; invalid code points become
 * U+FFFD. Output is truncated at a character boundary to fit cap. */
size_t pprof_utf8_from_wide(const wchar_t *w, char *out, size_t cap)
{
    size_t n = 0;
    for (; w && *w; w++) {
        uint32_t c = (uint32_t)*w;
        if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
            c = 0xFFFD;
        uint8_t b[4];
        size_t k;
        if (c < 0x80) {
            b[0] = (uint8_t)c;
            k = 1;
        } else if (c < 0x800) {
            b[0] = (uint8_t)(0xC0 | (c >> 6));
            b[1] = (uint8_t)(0x80 | (c & 0x3F));
            k = 2;
        } else if (c < 0x10000) {
            b[0] = (uint8_t)(0xE0 | (c >> 12));
            b[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
            b[2] = (uint8_t)(0x80 | (c & 0x3F));
            k = 3;
        } else {
            b[0] = (uint8_t)(0xF0 | (c >> 18));
            b[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
            b[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
            b[3] = (uint8_t)(0x80 | (c & 0x3F));
            k = 4;
        }
        if (n + k > cap)
            break;
        memcpy(out + n, b, k);
        n += k;
    }
    return n;
}

struct nvtxStringRegistration_st *pprof_intern_wstr(const wchar_t *s)
{
    if (!s)
        return NULL;
    char buf[1024];
    size_t n = pprof_utf8_from_wide(s, buf, sizeof buf);
    return pprof_intern(buf, n);
}

/* ---- domains, categories, threads ---- */

nvtxDomainHandle_t pprof_domain_create(const char *name)
{
    struct nvtxStringRegistration_st *s = pprof_intern_cstr(name ? name : "");
    if (!s)
        return NULL; /* NVTX treats NULL as the default domain: events stay recorded */
    pthread_mutex_lock(&g.meta_mu);
    struct nvtxDomainRegistration_st *d = g.domains;
    while (d && d->name != s->id)
        d = d->next;
    if (!d) {
        pp_rec_domain *r = NULL;
        d = malloc(sizeof *d);
        if (d)
            r = meta_append(sizeof *r);
        if (!r) {
            free(d);
            d = NULL;
        } else {
            d->id = ++g.n_domains;
            d->name = s->id;
            d->is_pipeprof = strcmp(s->str, PP_NVTX_DOMAIN) == 0;
            d->next = g.domains;
            g.domains = d;
            meta_header(&r->h, PP_REC_DOMAIN, sizeof *r, 0);
            r->id = d->id;
            r->name = s->id;
        }
    }
    pthread_mutex_unlock(&g.meta_mu);
    return d;
}

void pprof_name_category(nvtxDomainHandle_t d, uint32_t category, const char *name)
{
    struct nvtxStringRegistration_st *s = pprof_intern_cstr(name);
    if (!s)
        return;
    pthread_mutex_lock(&g.meta_mu);
    pp_rec_category *r = meta_append(sizeof *r);
    if (r) {
        meta_header(&r->h, PP_REC_CATEGORY, sizeof *r, 0);
        r->domain = d ? d->id : 0;
        r->category = category;
        r->name = s->id;
    }
    pthread_mutex_unlock(&g.meta_mu);
}

void pprof_name_thread(uint32_t os_tid, const char *name)
{
    struct nvtxStringRegistration_st *s = pprof_intern_cstr(name);
    if (!s)
        return;
    pprof_thread *t = pprof_tls_self;
    uint32_t caller = t ? atomic_load_explicit(&t->tid, memory_order_relaxed) : 0;
    pthread_mutex_lock(&g.meta_mu);
    pp_rec_thread_name *r = meta_append(sizeof *r);
    if (r) {
        meta_header(&r->h, PP_REC_THREAD_NAME, sizeof *r, caller);
        r->os_tid = os_tid;
        r->name = s->id;
    }
    pthread_mutex_unlock(&g.meta_mu);
}

/* ---- counters ---- */

void pprof_counter_define(uint32_t domain, uint64_t counter_id, const char *name,
                          const char *unit, uint32_t schema)
{
    struct nvtxStringRegistration_st *n = pprof_intern_cstr(name);
    struct nvtxStringRegistration_st *u = unit ? pprof_intern_cstr(unit) : NULL;
    pprof_thread *t = pprof_tls_self;
    uint32_t caller = t ? atomic_load_explicit(&t->tid, memory_order_relaxed) : 0;
    pthread_mutex_lock(&g.meta_mu);
    pp_rec_counter_def *r = meta_append(sizeof *r);
    if (r) {
        meta_header(&r->h, PP_REC_COUNTER_DEF, sizeof *r, caller);
        r->counter_id = counter_id;
        r->domain = domain;
        r->name = n ? n->id : 0;
        r->unit = u ? u->id : 0;
        r->schema = schema;
    }
    pthread_mutex_unlock(&g.meta_mu);
}

/* ---- payload schemas ---- */

/* Size and alignment of one schema entry, for entries whose offset is left 0 ("natural
 * alignment", as NVTX's payload helper and NCCL's schemas expect). Unknown types (nested
 * schemas, unions) get 0: their successors must then carry explicit offsets. */
static void entry_layout(const nvtxPayloadSchemaEntry_t *e, size_t *size, size_t *align)
{
    size_t s = 0;
    switch (e->type) {
    case NVTX_PAYLOAD_ENTRY_TYPE_CHAR:
    case NVTX_PAYLOAD_ENTRY_TYPE_UCHAR:
    case NVTX_PAYLOAD_ENTRY_TYPE_INT8:
    case NVTX_PAYLOAD_ENTRY_TYPE_UINT8:
    case NVTX_PAYLOAD_ENTRY_TYPE_CHAR8:
    case NVTX_PAYLOAD_ENTRY_TYPE_BYTE:
    case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING:
    case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF8: s = 1; break;
    case NVTX_PAYLOAD_ENTRY_TYPE_SHORT:
    case NVTX_PAYLOAD_ENTRY_TYPE_USHORT:
    case NVTX_PAYLOAD_ENTRY_TYPE_INT16:
    case NVTX_PAYLOAD_ENTRY_TYPE_UINT16:
    case NVTX_PAYLOAD_ENTRY_TYPE_CHAR16:
    case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT16:
    case NVTX_PAYLOAD_ENTRY_TYPE_BF16:
    case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF16: s = 2; break;
    case NVTX_PAYLOAD_ENTRY_TYPE_INT:
    case NVTX_PAYLOAD_ENTRY_TYPE_UINT:
    case NVTX_PAYLOAD_ENTRY_TYPE_INT32:
    case NVTX_PAYLOAD_ENTRY_TYPE_UINT32:
    case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT:
    case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT32:
    case NVTX_PAYLOAD_ENTRY_TYPE_TF32:
    case NVTX_PAYLOAD_ENTRY_TYPE_CHAR32:
    case NVTX_PAYLOAD_ENTRY_TYPE_WCHAR:
    case NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF32:
    case NVTX_PAYLOAD_ENTRY_TYPE_CATEGORY:
    case NVTX_PAYLOAD_ENTRY_TYPE_COLOR_ARGB:
    case NVTX_PAYLOAD_ENTRY_TYPE_PID_UINT32:
    case NVTX_PAYLOAD_ENTRY_TYPE_TID_UINT32: s = 4; break;
    case NVTX_PAYLOAD_ENTRY_TYPE_LONG:
    case NVTX_PAYLOAD_ENTRY_TYPE_ULONG: s = sizeof(long); break;
    case NVTX_PAYLOAD_ENTRY_TYPE_LONGLONG:
    case NVTX_PAYLOAD_ENTRY_TYPE_ULONGLONG:
    case NVTX_PAYLOAD_ENTRY_TYPE_INT64:
    case NVTX_PAYLOAD_ENTRY_TYPE_UINT64:
    case NVTX_PAYLOAD_ENTRY_TYPE_DOUBLE:
    case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT64:
    case NVTX_PAYLOAD_ENTRY_TYPE_SCOPE_ID:
    case NVTX_PAYLOAD_ENTRY_TYPE_PID_UINT64:
    case NVTX_PAYLOAD_ENTRY_TYPE_TID_UINT64: s = 8; break;
    case NVTX_PAYLOAD_ENTRY_TYPE_SIZE: s = sizeof(size_t); break;
    case NVTX_PAYLOAD_ENTRY_TYPE_ADDRESS:
    case NVTX_PAYLOAD_ENTRY_TYPE_NVTX_REGISTERED_STRING_HANDLE: s = sizeof(void *); break;
    case NVTX_PAYLOAD_ENTRY_TYPE_LONGDOUBLE: s = sizeof(long double); break;
    case NVTX_PAYLOAD_ENTRY_TYPE_INT128:
    case NVTX_PAYLOAD_ENTRY_TYPE_UINT128:
    case NVTX_PAYLOAD_ENTRY_TYPE_FLOAT128: s = 16; break;
    default: s = 0; break;
    }
    size_t a = s ? s : 1;
    if (a > 16)
        a = 16;
    if (e->flags & NVTX_PAYLOAD_ENTRY_FLAG_POINTER) {
        s = sizeof(void *);
        a = sizeof(void *);
    } else if (NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_TYPE(e->flags) ==
                   NVTX_PAYLOAD_ENTRY_FLAG_ARRAY_FIXED_SIZE ||
               ((e->type >= NVTX_PAYLOAD_ENTRY_TYPE_CSTRING &&
                 e->type <= NVTX_PAYLOAD_ENTRY_TYPE_CSTRING_UTF32) &&
                e->arrayOrUnionDetail > 0)) {
        s *= (size_t)e->arrayOrUnionDetail;
    }
    *size = s;
    *align = a;
}

uint64_t pprof_schema_register(nvtxDomainHandle_t d, const nvtxPayloadSchemaAttr_t *a)
{
    if (!a)
        return 0;
    uint64_t mask = a->fieldMask;
    size_t n = 0;
    const nvtxPayloadSchemaEntry_t *ents = NULL;
    if ((mask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES) &&
        (mask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES) && a->entries) {
        ents = a->entries;
        n = a->numEntries > PPROF_SCHEMA_MAX_ENTRIES ? PPROF_SCHEMA_MAX_ENTRIES : a->numEntries;
    }
    /* Intern every name first (each takes meta_mu on its own). */
    struct nvtxStringRegistration_st *sname =
        (mask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME) ? pprof_intern_cstr(a->name) : NULL;
    uint32_t *names = n ? calloc(n, sizeof *names) : NULL;
    if (n && !names)
        return 0;
    int32_t step_field = -1;
    for (size_t i = 0; i < n; i++) {
        struct nvtxStringRegistration_st *s = pprof_intern_cstr(ents[i].name);
        names[i] = s ? s->id : 0;
        if (s && strcmp(s->str, pp_nvtx_fields[PP_NVTX_F_STEP].name) == 0)
            step_field = (int32_t)i;
    }
    size_t rec = sizeof(pp_rec_schema) + n * sizeof(pp_rec_schema_entry);
    uint64_t id = 0;
    pthread_mutex_lock(&g.meta_mu);
    if (mask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID)
        id = a->schemaId;
    else
        id = NVTX_PAYLOAD_SCHEMA_ID_DYNAMIC_START + ++g.n_dyn_schemas;
    pp_rec_schema *r = meta_append(rec);
    if (r) {
        meta_header(&r->h, PP_REC_SCHEMA, rec, 0);
        r->schema_id = id;
        r->domain = d ? d->id : 0;
        r->name = sname ? sname->id : 0;
        r->n_entries = (uint32_t)n;
        pp_rec_schema_entry *re = (pp_rec_schema_entry *)(r + 1);
        /* Resolve offsets: 0 after the first entry means "next naturally aligned position". */
        size_t end = 0, max_align = 1;
        for (size_t i = 0; i < n; i++) {
            size_t sz, al;
            entry_layout(&ents[i], &sz, &al);
            size_t off = ents[i].offset;
            if (off == 0 && i > 0)
                off = (end + al - 1) / al * al;
            re[i].type = ents[i].type;
            re[i].offset = off;
            re[i].name = names[i];
            end = off + sz;
            if (al > max_align)
                max_align = al;
        }
        size_t static_size = (mask & NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE)
                                 ? a->payloadStaticSize
                                 : (end + max_align - 1) / max_align * max_align;
        r->static_size = (uint32_t)static_size;
        if (d && d->is_pipeprof && id == PP_NVTX_SCHEMA_ID && step_field >= 0 &&
            re[step_field].type == NVTX_PAYLOAD_ENTRY_TYPE_INT64)
            g.step_offset = re[step_field].offset;
    }
    pthread_mutex_unlock(&g.meta_mu);
    free(names);
    return r ? id : 0;
}

/* ---- meta flush ---- */

int pprof_meta_flush(pprof_emit_fn emit)
{
    for (;;) {
        size_t bytes = 0;
        uint32_t n = 0;
        pthread_mutex_lock(&g.meta_mu);
        while (g.meta_written + bytes < g.meta_len) {
            const pp_rec_header *h = (const pp_rec_header *)(g.meta + g.meta_written + bytes);
            if (bytes + h->size > PPROF_BLOCK_CAP)
                break;
            memcpy(g.stage + bytes, h, h->size);
            bytes += h->size;
            n++;
        }
        g.meta_written += bytes;
        pthread_mutex_unlock(&g.meta_mu);
        if (!n)
            return 1;
        if (!emit(g.stage, bytes, n))
            return 0;
    }
}
