/* plain_nvtx_app: an ordinary NVTX3 C program that knows nothing of pipeprof's convention, for
 * tests/test_generic.c: two domains plus the default one, registered strings, named categories,
 * nested push/pop, a start/end range that ends on another thread, marks, three named threads.
 * It writes what it did to the file named by argv[1], its truth, one line per event:
 *   R <domain> <tid> <t0> <t1> <name>   a range: t0 read just before the opening call, t1 just
 *                                       after the closing one (CLOCK_MONOTONIC ns), so the
 *                                       capture's own timestamps lie inside [t0, t1]
 *   M <domain> <tid> <name>             a mark
 *   T <tid> <name>                      a thread's name
 * <domain> is "-" for the default domain; the name is last (it may hold spaces).
 * Usage: plain_nvtx_app TRUTH-FILE [ROUNDS] (default 20 rounds). */
#define _GNU_SOURCE /* syscall(SYS_gettid) */

#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static FILE *g_out;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static nvtxDomainHandle_t g_io, g_model;
static nvtxStringHandle_t g_reg_load;
static int g_rounds = 20;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static unsigned tid_now(void) { return (unsigned)syscall(SYS_gettid); }

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&g_mu);
    vfprintf(g_out, fmt, ap);
    fputc('\n', g_out);
    pthread_mutex_unlock(&g_mu);
    va_end(ap);
}

static void spin_us(unsigned us)
{
    uint64_t end = now_ns() + us * 1000ull;
    while (now_ns() < end)
        ;
}

static nvtxEventAttributes_t attr_ascii(const char *msg, uint32_t category)
{
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = msg;
    a.category = category;
    return a;
}

/* One round of a thread: nested ranges in three domains and a mark. */
static void round_of(const char *who)
{
    unsigned tid = tid_now();
    uint64_t t0 = now_ns();
    nvtxRangePushA("step");
    {
        nvtxEventAttributes_t a = attr_ascii(NULL, 1);
        a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        a.message.registered = g_reg_load;
        uint64_t l0 = now_ns();
        nvtxDomainRangePushEx(g_io, &a);
        spin_us(30);
        nvtxDomainRangePop(g_io);
        uint64_t l1 = now_ns();
        out("R io %u %llu %llu load batch", tid, (unsigned long long)l0, (unsigned long long)l1);
        for (int k = 0; k < 2; k++) {
            nvtxEventAttributes_t m = attr_ascii("forward", 2);
            m.payloadType = NVTX_PAYLOAD_TYPE_INT32;
            m.payload.iValue = k;
            uint64_t f0 = now_ns();
            nvtxDomainRangePushEx(g_model, &m);
            spin_us(50);
            nvtxDomainRangePop(g_model);
            uint64_t f1 = now_ns();
            out("R model %u %llu %llu forward", tid, (unsigned long long)f0,
                (unsigned long long)f1);
        }
        nvtxEventAttributes_t mk = attr_ascii(who, 0);
        nvtxDomainMarkEx(g_model, &mk);
        out("M model %u %s", tid, who);
    }
    nvtxRangePop();
    uint64_t t1 = now_ns();
    out("R - %u %llu %llu step", tid, (unsigned long long)t0, (unsigned long long)t1);
}

typedef struct handoff {
    nvtxRangeId_t id;
    uint64_t t0;
    int ready;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} handoff;

static handoff g_hand = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *worker(void *arg)
{
    const char *name = arg;
    unsigned tid = tid_now();
    nvtxNameOsThreadA(tid, name);
    out("T %u %s", tid, name);
    for (int i = 0; i < g_rounds; i++)
        round_of(name);
    if (strcmp(name, "loader") == 0) {
        /* ends the range the main thread started */
        pthread_mutex_lock(&g_hand.mu);
        while (!g_hand.ready)
            pthread_cond_wait(&g_hand.cv, &g_hand.mu);
        pthread_mutex_unlock(&g_hand.mu);
        spin_us(20);
        nvtxDomainRangeEnd(g_io, g_hand.id);
        uint64_t t1 = now_ns();
        out("R io %u %llu %llu handoff", tid, (unsigned long long)g_hand.t0,
            (unsigned long long)t1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: plain_nvtx_app TRUTH-FILE [ROUNDS]\n");
        return 2;
    }
    if (argc > 2)
        g_rounds = atoi(argv[2]);
    if (g_rounds < 1 || g_rounds > 100000)
        g_rounds = 20;
    g_out = fopen(argv[1], "w");
    if (!g_out)
        return 3;
    unsigned tid = tid_now();
    nvtxNameOsThreadA(tid, "main");
    out("T %u main", tid);
    g_io = nvtxDomainCreateA("io");
    g_model = nvtxDomainCreateA("model");
    g_reg_load = nvtxDomainRegisterStringA(g_io, "load batch");
    nvtxDomainNameCategoryA(g_io, 1, "input");
    nvtxDomainNameCategoryA(g_model, 2, "compute");
    pthread_t th[2];
    static char n0[] = "loader", n1[] = "trainer";
    pthread_create(&th[0], NULL, worker, n0);
    pthread_create(&th[1], NULL, worker, n1);
    for (int i = 0; i < g_rounds; i++)
        round_of("main");
    nvtxMarkA("done");
    out("M - %u done", tid);
    /* a start/end range across threads: started here, ended by the loader */
    nvtxEventAttributes_t h = attr_ascii("handoff", 1);
    pthread_mutex_lock(&g_hand.mu);
    g_hand.t0 = now_ns();
    g_hand.id = nvtxDomainRangeStartEx(g_io, &h);
    g_hand.ready = 1;
    pthread_cond_signal(&g_hand.cv);
    pthread_mutex_unlock(&g_hand.mu);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    return fclose(g_out) == 0 ? 0 : 3;
}
