/* capture_app: an ordinary NVTX-using program (header-only NVTX v3, no tool inside) that
 * tests/test_capture.c runs with libpprof.so injected. Each mode exercises one part of the
 * capture library and, where the test needs it, writes what it did to a text file so the test
 * can compare the trace against it.
 *
 *   capture_app full <expect-file>   threads, domains, nested ranges, start/end across threads,
 *                                    registered and wide strings, payloads, categories, marks,
 *                                    thread names, an extended payload with a schema
 *   capture_app loop                 emit ranges until killed
 *   capture_app burst <pairs>        <pairs> push/pop pairs as fast as possible, then exit 0
 *   capture_app steps <steps>        pipeline-convention step ranges (domain "pipeprof") on the
 *                                    main thread, and one range per step on a helper thread
 *   capture_app fork <expect-file>   ranges before and after a fork, and in the child
 *   capture_app forkchain <depth>    one pair, then at once a fork; the child does the same,
 *                                    <depth> processes deep (each waits for its child)
 *
 * Expect-file lines (fields separated by one space, the message last, so it may hold spaces):
 *   R <domain> <tid> <level> <t0> <t1> <category> <ptype> <pbits> <schema> <message>
 *   S <domain> <tid-start> <tid-end> <t0> <t1> <category> <ptype> <pbits> <schema> <message>
 *   M <domain> <tid> <category> <ptype> <pbits> <schema> <message>
 *   T <tid> <name>      C <domain> <category> <name>     X <schema> <hex bytes>
 *   F <child-pid>       N <events the process made>
 * <domain> is "-" for the default domain; t0/t1 are CLOCK_MONOTONIC ns read just before the
 * opening call and just after the closing one; numbers are decimal except pbits/schema (hex). */
#define _GNU_SOURCE /* syscall(SYS_gettid) */

#define NVTX_POINTER_AS_PAYLOAD_ULLVALUE(p) ((uint64_t)(uintptr_t)(p)) /* CUDA 13.0 C bug */
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t gettid_u32(void) { return (uint32_t)syscall(SYS_gettid); }

static FILE *g_out;
static pthread_mutex_t g_out_mu = PTHREAD_MUTEX_INITIALIZER;

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
    if (!g_out)
        return;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&g_out_mu);
    vfprintf(g_out, fmt, ap);
    fputc('\n', g_out);
    pthread_mutex_unlock(&g_out_mu);
    va_end(ap);
}

static nvtxEventAttributes_t attr(void)
{
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    return a;
}

/* ======================================================================================== */
/* full                                                                                       */
/* ======================================================================================== */

typedef struct comm_payload { /* registered with offsets left 0: natural alignment */
    uint64_t comm;
    size_t bytes;
    int32_t peer;
} comm_payload;

#define COMM_SCHEMA_ID ((uint64_t)NVTX_PAYLOAD_SCHEMA_ID_STATIC_START + 0x4242u)

static nvtxDomainHandle_t g_dom, g_domw;
static nvtxStringHandle_t g_reg_fwd, g_reg_wide;
static const char *const k_reg_wide_utf8 = "wide registered \xe2\x9c\x93";

/* The payload of one range, for the expect line. */
typedef struct pl {
    int32_t type;
    uint64_t bits;
    uint64_t schema;
} pl;

static pl payload_of(const nvtxEventAttributes_t *a)
{
    pl p = {0, 0, 0};
    switch (a->payloadType) {
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT32:
    case NVTX_PAYLOAD_TYPE_INT32:
    case NVTX_PAYLOAD_TYPE_FLOAT: {
        uint32_t v;
        memcpy(&v, &a->payload, 4);
        p.type = a->payloadType;
        p.bits = v;
        break;
    }
    case NVTX_PAYLOAD_TYPE_UNSIGNED_INT64:
    case NVTX_PAYLOAD_TYPE_INT64:
    case NVTX_PAYLOAD_TYPE_DOUBLE:
        p.type = a->payloadType;
        memcpy(&p.bits, &a->payload, 8);
        break;
    case NVTX_PAYLOAD_TYPE_EXT:
        p.schema = ((const nvtxPayloadData_t *)(uintptr_t)a->payload.ullValue)->schemaId;
        break;
    default: break;
    }
    return p;
}

/* A push/pop range around `inner` with the given attributes, measured and written down. */
static void ranged(nvtxDomainHandle_t d, const char *dname, nvtxEventAttributes_t *a,
                   const char *msg_utf8, void (*inner)(void))
{
    pl p = payload_of(a);
    uint64_t t0 = now_ns();
    int level = d ? nvtxDomainRangePushEx(d, a) : nvtxRangePushEx(a);
    if (inner)
        inner();
    if (d)
        nvtxDomainRangePop(d);
    else
        nvtxRangePop();
    uint64_t t1 = now_ns();
    out("R %s %u %d %llu %llu %u %d %llx %llx %s", dname, gettid_u32(), level,
        (unsigned long long)t0, (unsigned long long)t1, a->category, p.type,
        (unsigned long long)p.bits, (unsigned long long)p.schema, msg_utf8);
}

static void leaf_u64(void)
{
    nvtxEventAttributes_t a = attr();
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "inner u64";
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0xFF112233u;
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = UINT64_C(0xFEDCBA9876543210);
    ranged(g_dom, "app.dom", &a, "inner u64", NULL);
}

static void leaf_wide_push(void)
{
    uint64_t t0 = now_ns();
    int level = nvtxRangePushW(L"wide \u2713 range \u00e9");
    nvtxRangePop();
    uint64_t t1 = now_ns();
    out("R - %u %d %llu %llu 0 0 0 0 %s", gettid_u32(), level, (unsigned long long)t0,
        (unsigned long long)t1, "wide \xe2\x9c\x93 range \xc3\xa9");
}

static void leaf_double(void)
{
    nvtxEventAttributes_t a = attr();
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = g_reg_wide;
    a.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
    a.payload.dValue = 3.5;
    a.category = 3;
    ranged(g_domw, "d\xc3\xb6main-w", &a, k_reg_wide_utf8, NULL);
}

static void leaf_small(void)
{
    nvtxEventAttributes_t a = attr();
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "u32";
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT32;
    a.payload.uiValue = 4000000000u;
    ranged(g_dom, "app.dom", &a, "u32", NULL);
    a.message.ascii = "i32";
    a.payloadType = NVTX_PAYLOAD_TYPE_INT32;
    a.payload.iValue = -7;
    ranged(g_dom, "app.dom", &a, "i32", NULL);
    a.message.ascii = "f32";
    a.payloadType = NVTX_PAYLOAD_TYPE_FLOAT;
    a.payload.fValue = 0.25f;
    ranged(g_dom, "app.dom", &a, "f32", NULL);
}

static void leaf_ext(void)
{
    comm_payload cp;
    memset(&cp, 0, sizeof cp); /* the padding after peer is copied too: make it defined */
    cp.comm = UINT64_C(0xC0FFEE);
    cp.bytes = 4096;
    cp.peer = 3;
    nvtxPayloadData_t pd = {COMM_SCHEMA_ID, sizeof cp, &cp};
    nvtxEventAttributes_t a = attr();
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "ext send";
    NVTX_PAYLOAD_EVTATTR_SET_DATA(a, &pd, COMM_SCHEMA_ID, &cp, sizeof cp)
    ranged(g_dom, "app.dom", &a, "ext send", NULL);
    char hex[2 * sizeof cp + 1];
    const uint8_t *b = (const uint8_t *)&cp;
    for (size_t i = 0; i < sizeof cp; i++)
        snprintf(hex + 2 * i, 3, "%02x", b[i]);
    out("X %llx %s", (unsigned long long)COMM_SCHEMA_ID, hex);
}

static void middle(void)
{
    leaf_u64();
    leaf_wide_push();
    leaf_double();
    leaf_small();
    leaf_ext();
}

static void outer_registered(void)
{
    nvtxEventAttributes_t a = attr();
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = g_reg_fwd;
    a.category = 2;
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    a.payload.llValue = -5;
    ranged(g_dom, "app.dom", &a, "fwd mb0", middle);
}

static void marks(void)
{
    nvtxMarkA("mark a");
    out("M - %u 0 0 0 0 mark a", gettid_u32());
    nvtxMarkW(L"mark w \u2713");
    out("M - %u 0 0 0 0 mark w \xe2\x9c\x93", gettid_u32());
    nvtxEventAttributes_t a = attr();
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "dom mark";
    a.category = 9;
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    a.payload.llValue = 123456789;
    nvtxDomainMarkEx(g_dom, &a);
    out("M app.dom %u 9 2 %llx 0 dom mark", gettid_u32(), (unsigned long long)123456789);
}

typedef struct worker_arg {
    int index;
    nvtxRangeId_t cross_id; /* started by main, ended here (worker 0) */
    uint64_t cross_t0;
    uint32_t cross_tid;
} worker_arg;

/* The first event of a thread registers its buffer, and the first use of an ASCII or wide
 * message interns it (a lock and an allocation): one-time costs that fall between the app's t0
 * and the tool's timestamp. Marks made beforehand keep them out of the measured windows. */
static void warm_up(void)
{
    static const char *const ascii[] = {"outer ascii \xc3\xa9", "inner u64", "u32", "i32", "f32",
                                        "ext send", "dom mark", "dom start", "cross thread",
                                        "main start ex", "mark a"};
    for (size_t i = 0; i < sizeof ascii / sizeof ascii[0]; i++) {
        nvtxMarkA(ascii[i]);
        out("M - %u 0 0 0 0 %s", gettid_u32(), ascii[i]);
    }
    nvtxMarkW(L"wide \u2713 range \u00e9");
    out("M - %u 0 0 0 0 wide \xe2\x9c\x93 range \xc3\xa9", gettid_u32());
    nvtxMarkW(L"start w \u2713");
    out("M - %u 0 0 0 0 start w \xe2\x9c\x93", gettid_u32());
}

static void *worker(void *p)
{
    worker_arg *w = p;
    uint32_t tid = gettid_u32();
    nvtxMarkA("mark a"); /* registers this thread's buffer before anything is timed */
    out("M - %u 0 0 0 0 mark a", tid);
    if (w->index == 1) {
        nvtxNameOsThreadW(tid, L"w\u00f6rker \u2603");
        out("T %u w\xc3\xb6rker \xe2\x98\x83", tid);
    } else {
        char name[32];
        snprintf(name, sizeof name, "worker %d", w->index);
        nvtxNameOsThreadA(tid, name);
        out("T %u %s", tid, name);
    }
    for (int rep = 0; rep < 3; rep++) {
        uint64_t t0 = now_ns();
        int level = nvtxRangePushA("outer ascii \xc3\xa9");
        outer_registered();
        nvtxRangePop();
        uint64_t t1 = now_ns();
        out("R - %u %d %llu %llu 0 0 0 0 outer ascii \xc3\xa9", tid, level,
            (unsigned long long)t0, (unsigned long long)t1);
    }
    marks();
    /* start/end on this thread, in a domain, and through the W and Ex APIs */
    nvtxEventAttributes_t a = attr();
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "dom start";
    a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
    a.payload.ullValue = 1048576;
    uint64_t t0 = now_ns();
    nvtxRangeId_t id = nvtxDomainRangeStartEx(g_dom, &a);
    nvtxDomainRangeEnd(g_dom, id);
    uint64_t t1 = now_ns();
    out("S app.dom %u %u %llu %llu 0 1 100000 0 dom start", tid, tid, (unsigned long long)t0,
        (unsigned long long)t1);
    t0 = now_ns();
    id = nvtxRangeStartW(L"start w \u2713");
    nvtxRangeEnd(id);
    t1 = now_ns();
    out("S - %u %u %llu %llu 0 0 0 0 start w \xe2\x9c\x93", tid, tid, (unsigned long long)t0,
        (unsigned long long)t1);
    if (w->index == 0) {
        nvtxRangeEnd(w->cross_id);
        t1 = now_ns();
        out("S - %u %u %llu %llu 0 0 0 0 cross thread", w->cross_tid, tid,
            (unsigned long long)w->cross_t0, (unsigned long long)t1);
    }
    return NULL;
}

static int mode_full(const char *path)
{
    g_out = fopen(path, "w");
    if (!g_out)
        return 1;
    uint32_t tid = gettid_u32();
    nvtxNameOsThreadA(tid, "main thread");
    out("T %u main thread", tid);
    g_dom = nvtxDomainCreateA("app.dom");
    g_domw = nvtxDomainCreateW(L"d\u00f6main-w");
    g_reg_fwd = nvtxDomainRegisterStringA(g_dom, "fwd mb0");
    g_reg_wide = nvtxDomainRegisterStringW(g_domw, L"wide registered \u2713");
    nvtxNameCategoryA(1, "cat one");
    out("C - 1 cat one");
    nvtxDomainNameCategoryA(g_dom, 2, "stage 1");
    out("C app.dom 2 stage 1");
    nvtxDomainNameCategoryW(g_domw, 3, L"k\u00e4tegorie");
    out("C d\xc3\xb6main-w 3 k\xc3\xa4tegorie");
    static const nvtxPayloadSchemaEntry_t entries[] = {
        {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "comm", NULL, 0, 0, NULL, NULL},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_SIZE, "bytes", NULL, 0, 0, NULL, NULL},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "peer", NULL, 0, 0, NULL, NULL}};
    nvtxPayloadSchemaAttr_t sa;
    memset(&sa, 0, sizeof sa);
    sa.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID;
    sa.name = "comm payload";
    sa.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
    sa.entries = entries;
    sa.numEntries = 3;
    sa.payloadStaticSize = sizeof(comm_payload);
    sa.schemaId = COMM_SCHEMA_ID;
    uint64_t sid = nvtxPayloadSchemaRegister(g_dom, &sa);
    fprintf(stderr, "capture_app: schema id %llx\n", (unsigned long long)sid);

    warm_up();
    enum { W = 3 };
    pthread_t th[W];
    worker_arg args[W];
    memset(args, 0, sizeof args);
    args[0].cross_t0 = now_ns();
    args[0].cross_id = nvtxRangeStartA("cross thread");
    args[0].cross_tid = tid;
    for (int i = 0; i < W; i++) {
        args[i].index = i;
        if (pthread_create(&th[i], NULL, worker, &args[i]) != 0)
            return 1;
    }
    /* the main thread emits too, with a mark carrying the Ex attributes */
    nvtxEventAttributes_t a = attr();
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "main start ex";
    a.category = 1;
    uint64_t t0 = now_ns();
    nvtxRangeId_t id = nvtxRangeStartEx(&a);
    nvtxRangeEnd(id);
    uint64_t t1 = now_ns();
    out("S - %u %u %llu %llu 1 0 0 0 main start ex", tid, tid, (unsigned long long)t0,
        (unsigned long long)t1);
    for (int i = 0; i < W; i++)
        pthread_join(th[i], NULL);
    fclose(g_out);
    return 0;
}

/* ======================================================================================== */
/* loop, burst                                                                               */
/* ======================================================================================== */

static int mode_loop(void)
{
    nvtxDomainHandle_t d = nvtxDomainCreateA("loop");
    nvtxStringHandle_t s = nvtxDomainRegisterStringA(d, "tick");
    nvtxEventAttributes_t a = attr();
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = s;
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    struct timespec pause = {0, 1000000};
    for (int64_t i = 0;; i++) {
        a.payload.llValue = i;
        nvtxDomainRangePushEx(d, &a);
        nvtxDomainRangePop(d);
        if (i % 100 == 99)
            nanosleep(&pause, NULL);
    }
    return 0;
}

static int mode_burst(long pairs)
{
    nvtxDomainHandle_t d = nvtxDomainCreateA("burst");
    nvtxStringHandle_t s = nvtxDomainRegisterStringA(d, "b");
    nvtxEventAttributes_t a = attr();
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = s;
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    for (long i = 0; i < pairs; i++) {
        a.payload.llValue = i;
        nvtxDomainRangePushEx(d, &a);
        nvtxDomainRangePop(d);
    }
    return 0;
}

/* ======================================================================================== */
/* steps, fork                                                                                */
/* ======================================================================================== */

typedef struct pipeprof_event { /* docs/nvtx-convention.md */
    uint32_t kind;
    int32_t stage, mb, chunk, layer, peer;
    uint64_t bytes;
    int64_t step;
} pipeprof_event;

static pthread_mutex_t g_step_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_step_cv = PTHREAD_COND_INITIALIZER;
static int g_step_req, g_step_done, g_step_quit;

static void *side_thread(void *p)
{
    (void)p;
    pthread_mutex_lock(&g_step_mu);
    for (;;) {
        while (g_step_req == g_step_done && !g_step_quit)
            pthread_cond_wait(&g_step_cv, &g_step_mu);
        if (g_step_quit)
            break;
        int s = g_step_req;
        pthread_mutex_unlock(&g_step_mu);
        char msg[32];
        snprintf(msg, sizeof msg, "side %d", s);
        nvtxRangePushA(msg);
        nvtxRangePop();
        pthread_mutex_lock(&g_step_mu);
        g_step_done = s;
        pthread_cond_broadcast(&g_step_cv);
    }
    pthread_mutex_unlock(&g_step_mu);
    return NULL;
}

static void conv_push(nvtxDomainHandle_t d, nvtxStringHandle_t msg, uint32_t kind, int64_t step)
{
    pipeprof_event ev = {kind, 0, kind == 0 ? -1 : 0, -1, -1, -1, 0, step};
    nvtxPayloadData_t pd;
    nvtxEventAttributes_t a = attr();
    a.category = 1;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = msg;
    NVTX_PAYLOAD_EVTATTR_SET_DATA(a, &pd, 0x01007070, &ev, sizeof ev)
    nvtxDomainRangePushEx(d, &a);
}

static int mode_steps(int steps)
{
    static const nvtxPayloadSchemaEntry_t e[] = {
        {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT32, "kind", NULL, 0, offsetof(pipeprof_event, kind), NULL, NULL},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "stage", NULL, 0, offsetof(pipeprof_event, stage), NULL, NULL},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "mb", NULL, 0, offsetof(pipeprof_event, mb), NULL, NULL},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "chunk", NULL, 0, offsetof(pipeprof_event, chunk), NULL, NULL},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "layer", NULL, 0, offsetof(pipeprof_event, layer), NULL, NULL},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT32, "peer", NULL, 0, offsetof(pipeprof_event, peer), NULL, NULL},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_UINT64, "bytes", NULL, 0, offsetof(pipeprof_event, bytes), NULL, NULL},
        {0, NVTX_PAYLOAD_ENTRY_TYPE_INT64, "step", NULL, 0, offsetof(pipeprof_event, step), NULL, NULL}};
    nvtxPayloadSchemaAttr_t sa;
    memset(&sa, 0, sizeof sa);
    sa.fieldMask = NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NAME | NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_TYPE |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_ENTRIES |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_NUM_ENTRIES |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_STATIC_SIZE |
                   NVTX_PAYLOAD_SCHEMA_ATTR_FIELD_SCHEMA_ID;
    sa.name = "pipeprof.event";
    sa.type = NVTX_PAYLOAD_SCHEMA_TYPE_STATIC;
    sa.entries = e;
    sa.numEntries = 8;
    sa.payloadStaticSize = sizeof(pipeprof_event);
    sa.schemaId = 0x01007070;
    nvtxDomainHandle_t d = nvtxDomainCreateA("pipeprof");
    nvtxPayloadSchemaRegister(d, &sa);
    nvtxStringHandle_t s_step = nvtxDomainRegisterStringA(d, "step");
    nvtxStringHandle_t s_fwd = nvtxDomainRegisterStringA(d, "fwd mb0");
    pthread_t side;
    if (pthread_create(&side, NULL, side_thread, NULL) != 0)
        return 1;
    for (int s = 1; s <= steps; s++) {
        conv_push(d, s_step, 0, s);
        conv_push(d, s_fwd, 1, s);
        nvtxDomainRangePop(d);
        pthread_mutex_lock(&g_step_mu); /* the helper's range falls inside this step */
        g_step_req = s;
        pthread_cond_broadcast(&g_step_cv);
        while (g_step_done != s)
            pthread_cond_wait(&g_step_cv, &g_step_mu);
        pthread_mutex_unlock(&g_step_mu);
        nvtxDomainRangePop(d);
    }
    pthread_mutex_lock(&g_step_mu);
    g_step_quit = 1;
    pthread_cond_broadcast(&g_step_cv);
    pthread_mutex_unlock(&g_step_mu);
    pthread_join(side, NULL);
    return 0;
}

static void pairs_named(const char *msg, int n)
{
    for (int i = 0; i < n; i++) {
        nvtxRangePushA(msg);
        nvtxRangePop();
    }
}

static int mode_fork(const char *path)
{
    g_out = fopen(path, "w");
    if (!g_out)
        return 1;
    pairs_named("parent before", 10);
    fflush(g_out);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        g_out = NULL; /* the parent writes the expect file */
        pairs_named("child", 20);
        exit(0);
    }
    out("F %d", (int)pid);
    int status = 0;
    waitpid(pid, &status, 0);
    pairs_named("parent after", 10);
    fclose(g_out);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* Each process forks right after its first event (the init, or its own fork), so the fork
 * lands while the writer thread just started (at init, or by the fork handler) may still be in
 * its thread start-up: the window of the hang fixed in profiler/capture.c writer_start. */
static int mode_forkchain(int depth)
{
    pairs_named("chain", 1);
    if (depth <= 0)
        return 0;
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0)
        exit(mode_forkchain(depth - 1));
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "full") == 0)
        return mode_full(argv[2]);
    if (argc >= 2 && strcmp(argv[1], "loop") == 0)
        return mode_loop();
    if (argc >= 3 && strcmp(argv[1], "burst") == 0)
        return mode_burst(atol(argv[2]));
    if (argc >= 3 && strcmp(argv[1], "steps") == 0)
        return mode_steps(atoi(argv[2]));
    if (argc >= 3 && strcmp(argv[1], "fork") == 0)
        return mode_fork(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "forkchain") == 0)
        return mode_forkchain(atoi(argv[2]));
    fprintf(stderr, "usage: capture_app full FILE|loop|burst N|steps N|fork FILE|forkchain N\n");
    return 2;
}
