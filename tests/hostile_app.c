/* hostile_app: a plain NVTX job (header-only NVTX v3, no tool inside) that follows the pipeline
 * convention and, on top, emits ranges whose values no pipeline has: what a foreign or buggy
 * job may legally pass to NVTX. tests/test_hostile.c runs it under pprof-run and the analysis
 * tools must survive it.
 *
 *   hostile_app [-r RANKS] [-s STEPS] [-m MB] [-c CONFIG] [-x] [-t STEP] [SPEC...]
 *
 * RANKS processes (default 1), process r being stage r (PPROF_RANK=r), connected by pipes: a
 * GPipe schedule of MB micro-batches (default 2) for STEPS steps (default 4), each op a short
 * sleep. CONFIG, when given, is emitted as the configuration mark (e.g. "config S=2 M=2").
 * With -x the pipeline's ranges carry the pipeprof.event extended payload as pptrain's do;
 * without, the message grammar and one integer payload (the fallback).
 * Each SPEC is one more range that stage 0 emits inside its step STEP (default 2):
 *   "MESSAGE"                 ASCII message, category 1, no payload
 *   "MESSAGE|CATEGORY"        the category given (an unsigned 32-bit number)
 *   "MESSAGE|CATEGORY|VALUE"  and a signed 64-bit integer payload
 *   "ext:K,S,MB,C,L,P,B,STEP" the pipeprof.event extended payload with these fields (message
 *                             "fwd"), the convention's schema registered as pptrain does */
#define _GNU_SOURCE

#define NVTX_POINTER_AS_PAYLOAD_ULLVALUE(p) ((uint64_t)(uintptr_t)(p)) /* CUDA 13.0 C bug */
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtPayload.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct pipeprof_event { /* docs/nvtx-convention.md */
    uint32_t kind;
    int32_t stage, mb, chunk, layer, peer;
    uint64_t bytes;
    int64_t step;
} pipeprof_event;

enum { K_STEP = 0, K_FWD = 1, K_BWD = 2, K_SEND_ACT = 5, K_RECV_ACT = 6, K_SEND_GRAD = 7,
       K_RECV_GRAD = 8, K_OPT = 9 };

static nvtxDomainHandle_t g_dom;
static int g_rank, g_ranks, g_ext;
static int64_t g_step;
static int g_spec_step = 2;

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static nvtxEventAttributes_t attr(const char *msg, uint32_t category)
{
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof a);
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = category;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = msg;
    return a;
}

/* A convention range of `kind` pushed: the fallback payload `value` (mb, bytes or step), or
 * with -x the extended payload of every field. */
static void push(uint32_t kind, const char *msg, int mb, int64_t value)
{
    nvtxEventAttributes_t a = attr(msg, (uint32_t)g_rank + 1);
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    a.payload.llValue = value;
    nvtxPayloadData_t pd;
    pipeprof_event ev = {kind, g_rank, mb, kind == K_STEP || kind == K_OPT ? -1 : 0, -1, -1, 0,
                         g_step};
    if (kind >= K_SEND_ACT && kind <= K_RECV_GRAD) {
        ev.bytes = (uint64_t)value;
        ev.peer = kind == K_SEND_ACT || kind == K_RECV_GRAD ? g_rank + 1 : g_rank - 1;
    }
    if (g_ext) { /* the macro is several statements */
        NVTX_PAYLOAD_EVTATTR_SET_DATA(a, &pd, 0x01007070, &ev, sizeof ev)
    }
    nvtxDomainRangePushEx(g_dom, &a);
}

static void pop(void) { nvtxDomainRangePop(g_dom); }

static void register_schema(void)
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
    nvtxPayloadSchemaRegister(g_dom, &sa);
}

/* One SPEC (see the header), emitted as a pushed and popped range. */
static int emit_spec(const char *spec)
{
    if (strncmp(spec, "ext:", 4) == 0) {
        long long f[8];
        if (sscanf(spec + 4, "%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld", &f[0], &f[1], &f[2],
                   &f[3], &f[4], &f[5], &f[6], &f[7]) != 8)
            return 2;
        pipeprof_event ev = {(uint32_t)f[0], (int32_t)f[1], (int32_t)f[2], (int32_t)f[3],
                             (int32_t)f[4], (int32_t)f[5], (uint64_t)f[6], (int64_t)f[7]};
        nvtxPayloadData_t pd;
        nvtxEventAttributes_t a = attr("fwd", 1);
        NVTX_PAYLOAD_EVTATTR_SET_DATA(a, &pd, 0x01007070, &ev, sizeof ev)
        nvtxDomainRangePushEx(g_dom, &a);
        sleep_us(100);
        pop();
        return 0;
    }
    char msg[256];
    snprintf(msg, sizeof msg, "%s", spec);
    char *bar = strchr(msg, '|');
    uint32_t category = 1;
    int has_value = 0;
    long long value = 0;
    if (bar) {
        *bar = '\0';
        char *bar2 = strchr(bar + 1, '|');
        if (bar2) {
            *bar2 = '\0';
            value = strtoll(bar2 + 1, NULL, 10);
            has_value = 1;
        }
        category = (uint32_t)strtoul(bar + 1, NULL, 10);
    }
    nvtxEventAttributes_t a = attr(msg, category);
    if (has_value) {
        a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
        a.payload.llValue = value;
    }
    nvtxDomainRangePushEx(g_dom, &a);
    sleep_us(100);
    pop();
    return 0;
}

static int xfer(int fd, int send)
{
    char b[8] = {0};
    ssize_t n = send ? write(fd, b, sizeof b) : read(fd, b, sizeof b);
    return n == (ssize_t)sizeof b ? 0 : 1;
}

/* Stage g_rank's GPipe steps; act_in/grad_out talk to the previous stage, act_out/grad_in to
 * the next (-1 where there is none). */
static int run_stage(int steps, int M, const char *config, char **specs, int n_specs,
                     int act_in, int act_out, int grad_in, int grad_out)
{
    g_dom = nvtxDomainCreateA("pipeprof");
    register_schema();
    if (config) {
        nvtxEventAttributes_t a = attr(config, 0);
        nvtxDomainMarkEx(g_dom, &a);
    }
    char msg[64];
    for (int s = 1; s <= steps; s++) {
        g_step = s;
        push(K_STEP, "step", -1, s);
        for (int m = 0; m < M; m++) {
            if (act_in >= 0) {
                snprintf(msg, sizeof msg, "recv_act mb%d", m);
                push(K_RECV_ACT, msg, m, 4096);
                if (xfer(act_in, 0))
                    return 1;
                pop();
            }
            snprintf(msg, sizeof msg, "fwd mb%d", m);
            push(K_FWD, msg, m, m);
            sleep_us(300);
            pop();
            if (act_out >= 0) {
                snprintf(msg, sizeof msg, "send_act mb%d", m);
                push(K_SEND_ACT, msg, m, 4096);
                if (xfer(act_out, 1))
                    return 1;
                pop();
            }
        }
        for (int m = 0; m < M; m++) {
            if (grad_in >= 0) {
                snprintf(msg, sizeof msg, "recv_grad mb%d", m);
                push(K_RECV_GRAD, msg, m, 4096);
                if (xfer(grad_in, 0))
                    return 1;
                pop();
            }
            snprintf(msg, sizeof msg, "bwd mb%d", m);
            push(K_BWD, msg, m, m);
            sleep_us(600);
            pop();
            if (grad_out >= 0) {
                snprintf(msg, sizeof msg, "send_grad mb%d", m);
                push(K_SEND_GRAD, msg, m, 4096);
                if (xfer(grad_out, 1))
                    return 1;
                pop();
            }
        }
        if (s == g_spec_step && g_rank == 0)
            for (int i = 0; i < n_specs; i++)
                if (emit_spec(specs[i]))
                    return 2;
        push(K_OPT, "opt_step", -1, 0);
        sleep_us(100);
        pop();
        pop();
    }
    return 0;
}

int main(int argc, char **argv)
{
    int steps = 4, M = 2, opt;
    const char *config = NULL;
    g_ranks = 1;
    while ((opt = getopt(argc, argv, "r:s:m:c:xt:")) != -1) {
        switch (opt) {
        case 'r': g_ranks = atoi(optarg); break;
        case 's': steps = atoi(optarg); break;
        case 'm': M = atoi(optarg); break;
        case 'c': config = optarg; break;
        case 'x': g_ext = 1; break;
        case 't': g_spec_step = atoi(optarg); break;
        default: return 2;
        }
    }
    if (g_ranks < 1 || g_ranks > 16 || steps < 1 || M < 1) {
        fprintf(stderr, "hostile_app: bad arguments\n");
        return 2;
    }
    char **specs = argv + optind;
    int n_specs = argc - optind;
    if (g_ranks == 1)
        return run_stage(steps, M, config, specs, n_specs, -1, -1, -1, -1);
    /* pipes between neighbours: act[r] carries r -> r+1, grad[r] carries r+1 -> r */
    int act[16][2], grad[16][2];
    for (int r = 0; r + 1 < g_ranks; r++)
        if (pipe(act[r]) != 0 || pipe(grad[r]) != 0)
            return 3;
    pid_t pids[16];
    for (int r = 0; r < g_ranks; r++) {
        pids[r] = fork();
        if (pids[r] < 0)
            return 3;
        if (pids[r] == 0) {
            /* before the first NVTX call: the capture library reads the rank at its start */
            char rank[16];
            snprintf(rank, sizeof rank, "%d", r);
            setenv("PPROF_RANK", rank, 1);
            g_rank = r;
            int rc = run_stage(steps, M, config, specs, n_specs, r > 0 ? act[r - 1][0] : -1,
                               r + 1 < g_ranks ? act[r][1] : -1,
                               r + 1 < g_ranks ? grad[r][0] : -1, r > 0 ? grad[r - 1][1] : -1);
            exit(rc);
        }
    }
    int worst = 0;
    for (int r = 0; r < g_ranks; r++) {
        int status = 0;
        if (waitpid(pids[r], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
            worst = 1;
    }
    return worst;
}
