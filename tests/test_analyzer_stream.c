/* test_analyzer_stream.c: the analyzer streams. Its peak memory does not grow with the trace's
 * length, for host traces and for traces with GPU-capture records (the GPU projection keeps a
 * window of ranges, pp_gpu.h), and GPU records that arrive after their launching range has left
 * that window are counted as late, not projected somewhere wrong. Each analysis runs in a
 * forked child whose peak RSS (ru_maxrss) is its own. NCCL's 2-rank communicators still give
 * links between stages when the projection streams. The GPU pass replays what the host pass
 * recorded, and its analysis is the one reading the traces again gives. */
#include "pp_analyzer.h"
#include "pp_report.h"
#include "pp_trace.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[64];

static void setup(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/pp_stream_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(analyzer_stream, .init = setup, .fini = teardown, .timeout = 120);

/* Records of one block, written when full or flushed. */
typedef struct blk {
    pp_trace_writer *w;
    uint8_t buf[1 << 16];
    size_t len;
    uint32_t n, tid;
} blk;

static void blk_flush(blk *b)
{
    if (b->n)
        cr_assert_eq(pp_trace_writer_block(b->w, PP_BLOCK_EVENTS, b->tid, b->buf, b->len, b->n),
                     PP_OK, "%s", pp_error_message());
    b->len = 0;
    b->n = 0;
}

static void blk_rec(blk *b, const void *rec, size_t size)
{
    if (b->len + size > sizeof b->buf)
        blk_flush(b);
    memcpy(b->buf + b->len, rec, size);
    b->len += size;
    b->n++;
}

static void range(blk *b, uint64_t t0, uint64_t t1, uint32_t msg, uint32_t stage, uint64_t pay)
{
    pp_rec_range r;
    memset(&r, 0, sizeof r);
    r.h = (pp_rec_header){PP_REC_PUSH, sizeof r, b->tid, t0};
    r.domain = 1;
    r.message = msg;
    r.category = stage + 1;
    r.payload_type = 1;
    r.payload = pay;
    blk_rec(b, &r, sizeof r);
    pp_rec_pop p = {{PP_REC_POP, sizeof p, b->tid, t1}, 1, 0};
    blk_rec(b, &p, sizeof p);
}

/* The job: 2 stages (threads 100 and 101) run GPipe with M micro-batches per step through the
 * message grammar ("fwd mb3", category = stage + 1); ops take 1 ms. With gpu, every forward and
 * backward launches one 500 us kernel 50 us after it starts (its API call at +10 us); the GPU
 * records of step k are written `lag` steps later (all at the end when lag >= steps), as CUPTI
 * hands them over late. */
enum { MS = 1000000, KINDS = 6 }; /* fwd bwd send_act recv_act send_grad recv_grad */

static const char *const k_kind[KINDS] = {"fwd", "bwd", "send_act", "recv_act", "send_grad",
                                          "recv_grad"};

static uint64_t step_t0(int M, int step)
{
    return UINT64_C(1000) * MS + (uint64_t)(step - 1) * (uint64_t)(2 * M + 4) * MS;
}

static uint32_t msg_id(int M, int kind, int m) { return 3u + (uint32_t)(kind * M + m); }

/* 1: every backward is launched by one thread with no range (PyTorch's autograd engine), on
 * its stage's stream */
static int g_autograd;

static void gpu_launch(blk *g, uint32_t *corr, uint32_t tid, uint64_t t0, int bwd)
{
    pp_rec_api a;
    memset(&a, 0, sizeof a);
    a.h = (pp_rec_header){PP_REC_API, sizeof a, 999, 0};
    a.correlation = ++*corr;
    a.thread = bwd && g_autograd ? 700 : tid;
    a.start = t0 + 10000;
    a.end = t0 + 20000;
    blk_rec(g, &a, sizeof a);
    pp_rec_gpu k;
    memset(&k, 0, sizeof k);
    k.h = (pp_rec_header){PP_REC_GPU, sizeof k, 999, 0};
    k.kind = PP_GPU_KERNEL;
    k.stream = tid - 99;
    k.correlation = *corr;
    k.start = t0 + 50000;
    k.end = k.start + 500000;
    blk_rec(g, &k, sizeof k);
}

/* The GPU records of one step, launched as each compute range starts (write_job's times). */
static void gpu_step(blk *g, uint32_t *corr, int M, int step)
{
    uint64_t b = step_t0(M, step);
    for (int m = 0; m < M; m++) {
        gpu_launch(g, corr, 100, b + (uint64_t)m * MS, 0);                     /* stage 0 F */
        gpu_launch(g, corr, 101, b + (uint64_t)(m + 1) * MS + 20000, 0);       /* stage 1 F */
        gpu_launch(g, corr, 101, b + (uint64_t)(M + 1 + m) * MS, 1);           /* stage 1 B */
        gpu_launch(g, corr, 100, b + (uint64_t)(M + 2 + m) * MS + 20000, 1);   /* stage 0 B */
    }
    blk_flush(g);
}

static void write_job(const char *path, int steps, int M, int gpu, int lag)
{
    static blk t[2], g;
    pp_trace_header h;
    memset(&h, 0, sizeof h);
    h.pid = 7;
    h.rank = -1;
    snprintf(h.host, sizeof h.host, "stream");
    pp_trace_writer *w = NULL;
    cr_assert_eq(pp_trace_writer_open(path, &h, &w), PP_OK, "%s", pp_error_message());
    for (int i = 0; i < 2; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].w = w;
        t[i].tid = 100 + (uint32_t)i;
    }
    memset(&g, 0, sizeof g);
    g.w = w;
    g.tid = 999;
    /* definitions: the domain, "step", and every op's message */
    static blk meta;
    memset(&meta, 0, sizeof meta);
    meta.w = w;
    uint8_t rec[256];
    meta.len += pp_trace_enc_string(meta.buf, sizeof meta.buf, 1, "pipeprof", 8);
    meta.len += pp_trace_enc_string(meta.buf + meta.len, sizeof meta.buf - meta.len, 2, "step", 4);
    meta.n = 2;
    for (int k = 0; k < KINDS; k++)
        for (int m = 0; m < M; m++) {
            char s[32];
            int n = snprintf(s, sizeof s, "%s mb%d", k_kind[k], m);
            meta.len += pp_trace_enc_string(meta.buf + meta.len, sizeof meta.buf - meta.len,
                                            msg_id(M, k, m), s, (size_t)n);
            meta.n++;
        }
    pp_rec_domain d = {{PP_REC_DOMAIN, sizeof d, 0, 0}, 1, 1};
    memcpy(rec, &d, sizeof d);
    memcpy(meta.buf + meta.len, rec, sizeof d);
    meta.len += sizeof d;
    meta.n++;
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_META, 0, meta.buf, meta.len, meta.n), PP_OK,
                 "%s", pp_error_message());
    uint32_t corr = 0;
    for (int step = 1; step <= steps; step++) {
        uint64_t b = step_t0(M, step), end = b + (uint64_t)(2 * M + 3) * MS;
        /* stage 0: F_m at m, send; recv_grad, B_m at M + 2 + m */
        pp_rec_range sr;
        memset(&sr, 0, sizeof sr);
        for (int s = 0; s < 2; s++) {
            sr.h = (pp_rec_header){PP_REC_PUSH, sizeof sr, t[s].tid, b};
            sr.domain = 1;
            sr.message = 2;
            sr.category = (uint32_t)s + 1;
            sr.payload_type = 1;
            sr.payload = (uint64_t)step;
            blk_rec(&t[s], &sr, sizeof sr);
        }
        for (int m = 0; m < M; m++) {
            uint64_t f0 = b + (uint64_t)m * MS;
            range(&t[0], f0, f0 + MS, msg_id(M, 0, m), 0, (uint64_t)m);
            range(&t[0], f0 + MS, f0 + MS + 10000, msg_id(M, 2, m), 0, 4096);
            range(&t[1], f0, f0 + MS + 20000, msg_id(M, 3, m), 1, 4096);
            range(&t[1], f0 + MS + 20000, f0 + 2 * MS, msg_id(M, 0, m), 1, (uint64_t)m);
        }
        for (int m = 0; m < M; m++) {
            uint64_t b1 = b + (uint64_t)(M + 1 + m) * MS;
            range(&t[1], b1, b1 + MS, msg_id(M, 1, m), 1, (uint64_t)m);
            range(&t[1], b1 + MS, b1 + MS + 10000, msg_id(M, 4, m), 1, 4096);
            range(&t[0], b1, b1 + MS + 20000, msg_id(M, 5, m), 0, 4096);
            range(&t[0], b1 + MS + 20000, b1 + 2 * MS, msg_id(M, 1, m), 0, (uint64_t)m);
        }
        for (int s = 0; s < 2; s++) {
            pp_rec_pop p = {{PP_REC_POP, sizeof p, t[s].tid, end}, 1, 0};
            blk_rec(&t[s], &p, sizeof p);
            blk_flush(&t[s]);
        }
        if (gpu && step > lag)
            gpu_step(&g, &corr, M, step - lag);
    }
    for (int k = steps - lag + 1; gpu && k <= steps; k++)
        gpu_step(&g, &corr, M, k);
    pp_trace_writer_close(w);
}

/* What a child reports about its analysis. */
typedef struct child_report {
    int ok;
    char why[256];
    long maxrss_kb;
    uint64_t steps, records, projected, late, unattributed, outside, adopted;
    double fwd_gpu_ns;
    uint64_t fwd_ranges, link_messages;
    int late_warned;
} child_report;

/* Analyzes `path` in a fresh child process so that ru_maxrss is that analysis's own. */
static child_report analyze_in_child(const char *path, size_t gpu_window)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        close(fd[0]);
        child_report r;
        memset(&r, 0, sizeof r);
        pp_analysis_options o;
        pp_analysis_options_default(&o);
        o.gpu_window = gpu_window;
        const char *paths[1] = {path};
        pp_analysis *a = NULL;
        if (pp_analyze_files(paths, 1, &o, &a) == PP_OK) {
            r.ok = 1;
            r.steps = a->n_steps;
            r.records = a->gpu.records;
            r.projected = a->gpu.projected;
            r.late = a->gpu.late;
            r.unattributed = a->gpu.unattributed;
            r.outside = a->gpu.outside_steps;
            r.adopted = a->gpu.adopted;
            r.fwd_gpu_ns = a->gpu.S ? a->gpu.stages[0].fwd_median_ns : 0.0;
            r.fwd_ranges = a->S ? a->stages[0].fwd_ns.count : 0;
            r.link_messages = a->n_links ? a->links[0].messages : 0;
            r.late_warned = strstr(a->warnings, "left the projection's window") != NULL;
        } else {
            snprintf(r.why, sizeof r.why, "%s", pp_error_message());
        }
        struct rusage u;
        getrusage(RUSAGE_SELF, &u);
        r.maxrss_kb = u.ru_maxrss;
        pp_analysis_free(a);
        ssize_t k = write(fd[1], &r, sizeof r);
        _exit(k == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    child_report r;
    memset(&r, 0, sizeof r);
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t k = read(fd[0], (char *)&r + got, sizeof r - got);
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    close(fd[0]);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0 && got == sizeof r,
              "the analysis process died (status %d)", status);
    return r;
}

/* Peak RSS of an analysis 10x as long, against a short one. The short trace is long enough
 * that the order statistics' reservoirs (4096 samples) and the GPU window are full; what is
 * left to grow is the one pp_astep per step the analysis returns (about 0.25 KB here). */
static void memory_is_flat(int gpu)
{
    enum { M = 16, SHORT = 300 };
    char small[128], large[128];
    snprintf(small, sizeof small, "%s/short.pft", g_dir);
    snprintf(large, sizeof large, "%s/long.pft", g_dir);
    write_job(small, SHORT, M, gpu, 1);
    write_job(large, 10 * SHORT, M, gpu, 1);
    child_report s = analyze_in_child(small, 0), l = analyze_in_child(large, 0);
    cr_assert(s.ok, "short trace: %s", s.why);
    cr_assert(l.ok, "long trace: %s", l.why);
    cr_log_info("%s: peak RSS %ld KiB for %d steps, %ld KiB for %d steps (%.2fx)",
                gpu ? "with GPU records" : "host only", s.maxrss_kb, SHORT, l.maxrss_kb,
                10 * SHORT, (double)l.maxrss_kb / (double)s.maxrss_kb);
    /* the analyses are whole: every step (one warm-up), every transfer, every launch */
    cr_assert_eq(s.steps, SHORT - 1);
    cr_assert_eq(l.steps, 10 * SHORT - 1);
    cr_assert_eq(l.fwd_ranges, (uint64_t)(10 * SHORT - 1) * M);
    cr_assert_eq(l.link_messages, (uint64_t)(10 * SHORT - 1) * M);
    if (gpu) {
        cr_assert_eq(l.records, (uint64_t)10 * SHORT * M * 4);
        cr_assert_eq(l.projected, (uint64_t)(10 * SHORT - 1) * M * 4, "%llu projected",
                     (unsigned long long)l.projected);
        cr_assert_eq(l.outside, (uint64_t)M * 4, "the warm-up step's");
        cr_assert_eq(l.late + l.unattributed, 0);
        cr_assert_float_eq(l.fwd_gpu_ns, 500000.0, 1e-6);
    }
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer keeps freed memory in quarantine: RSS says nothing about the analysis */
    cr_log_info("sanitizer build: the peak RSS comparison is skipped");
#else
    cr_assert_leq(l.maxrss_kb, s.maxrss_kb + s.maxrss_kb / 2,
                  "peak RSS %ld KiB for a 10x longer trace, %ld KiB for the short one",
                  l.maxrss_kb, s.maxrss_kb);
#endif
}

Test(analyzer_stream, peak_memory_does_not_grow_with_the_trace_length)
{
    memory_is_flat(0);
}

Test(analyzer_stream, gpu_projection_memory_does_not_grow_with_the_trace_length)
{
    memory_is_flat(1);
}

/* The same long job with every backward launched by a thread of its own (PyTorch's autograd
 * engine), CUPTI's records a step late: all of them still projected, the backward's adopted by
 * the stage's range, none late, with a window of 256 ranges per file (2 steps' ranges: the
 * adoption must come before the range leaves, not after the record's whole wait). */
Test(analyzer_stream, gpu_work_of_an_autograd_thread_is_adopted_in_a_narrow_window)
{
    enum { M = 16, STEPS = 400 };
    char path[128];
    snprintf(path, sizeof path, "%s/autograd.pft", g_dir);
    g_autograd = 1;
    write_job(path, STEPS, M, 1, 1);
    g_autograd = 0;
    child_report r = analyze_in_child(path, 256);
    cr_assert(r.ok, "%s", r.why);
    cr_assert_eq(r.records, (uint64_t)STEPS * M * 4);
    cr_assert_eq(r.projected, (uint64_t)(STEPS - 1) * M * 4, "%llu projected, %llu late, %llu "
                 "unattributed", (unsigned long long)r.projected, (unsigned long long)r.late,
                 (unsigned long long)r.unattributed);
    cr_assert_eq(r.adopted, (uint64_t)(STEPS - 1) * M * 2);
    cr_assert_eq(r.late + r.unattributed, 0);
    cr_assert_float_eq(r.fwd_gpu_ns, 500000.0, 1e-6);
}

/* CUPTI hands its records over late: all of them at the end here. A window wide enough for the
 * whole job projects them all; a window of 64 ranges per file keeps only the last steps' ranges,
 * and the older launches are counted late, with a warning, instead of being attributed. */
Test(analyzer_stream, gpu_records_later_than_the_window_are_counted_late)
{
    enum { M = 4, STEPS = 20 };
    char path[128];
    snprintf(path, sizeof path, "%s/late.pft", g_dir);
    write_job(path, STEPS, M, 1, STEPS);
    uint64_t records = (uint64_t)STEPS * M * 4, analyzed = (uint64_t)(STEPS - 1) * M * 4;
    child_report wide = analyze_in_child(path, 4096);
    cr_assert(wide.ok, "%s", wide.why);
    cr_assert_eq(wide.records, records);
    cr_assert_eq(wide.projected, analyzed);
    cr_assert_eq(wide.late, 0);
    cr_assert(!wide.late_warned);
    child_report narrow = analyze_in_child(path, 64);
    cr_assert(narrow.ok, "%s", narrow.why);
    cr_assert_eq(narrow.records, records);
    cr_assert_gt(narrow.late, 0);
    cr_assert_lt(narrow.projected, analyzed);
    /* every record is accounted for, once */
    cr_assert_eq(narrow.projected + narrow.late + narrow.unattributed + narrow.outside, records,
                 "%llu projected, %llu late, %llu unattributed, %llu outside",
                 (unsigned long long)narrow.projected, (unsigned long long)narrow.late,
                 (unsigned long long)narrow.unattributed, (unsigned long long)narrow.outside);
    /* 64 ranges are the last 2 steps' (32 per step, 16 of them compute): those project */
    cr_assert_geq(narrow.projected, (uint64_t)2 * M * 4);
    cr_assert(narrow.late_warned);
}

/* One process per stage, its NCCL sends over 2-rank communicators (rank 0 to peer 1, whatever
 * the stages, as pptrain's NCCL transport has them): the host pass finds each file's stage and
 * which file holds each communicator rank, so the streaming projection reports the links
 * between stages, 0 -> 1 and 1 -> 2, not twice 0 -> 1. */
static void write_stage_process(const char *path, int stage, int S)
{
    static blk t, meta;
    pp_trace_header h;
    memset(&h, 0, sizeof h);
    h.pid = 100 + (uint32_t)stage;
    h.rank = stage;
    snprintf(h.host, sizeof h.host, "stream");
    pp_trace_writer *w = NULL;
    cr_assert_eq(pp_trace_writer_open(path, &h, &w), PP_OK, "%s", pp_error_message());
    memset(&meta, 0, sizeof meta);
    meta.w = w;
    meta.len += pp_trace_enc_string(meta.buf, sizeof meta.buf, 1, "pipeprof", 8);
    meta.len += pp_trace_enc_string(meta.buf + meta.len, sizeof meta.buf - meta.len, 2, "step", 4);
    meta.len += pp_trace_enc_string(meta.buf + meta.len, sizeof meta.buf - meta.len, 3,
                                    "fwd mb0", 7);
    pp_rec_domain d = {{PP_REC_DOMAIN, sizeof d, 0, 0}, 1, 1};
    memcpy(meta.buf + meta.len, &d, sizeof d);
    meta.len += sizeof d;
    meta.n = 4;
    cr_assert_eq(pp_trace_writer_block(w, PP_BLOCK_META, 0, meta.buf, meta.len, meta.n), PP_OK);
    memset(&t, 0, sizeof t);
    t.w = w;
    t.tid = 100 + (uint32_t)stage;
    for (int step = 1; step <= 3; step++) {
        uint64_t b = step_t0(1, step) + (uint64_t)stage * MS;
        pp_rec_range sr;
        memset(&sr, 0, sizeof sr);
        sr.h = (pp_rec_header){PP_REC_PUSH, sizeof sr, t.tid, b};
        sr.domain = 1;
        sr.message = 2;
        sr.category = (uint32_t)stage + 1;
        sr.payload_type = 1;
        sr.payload = (uint64_t)step;
        blk_rec(&t, &sr, sizeof sr);
        range(&t, b, b + MS, 3, (uint32_t)stage, 0);
        pp_rec_pop p = {{PP_REC_POP, sizeof p, t.tid, b + 2 * MS}, 1, 0};
        blk_rec(&t, &p, sizeof p);
        blk_flush(&t);
        /* the send to the next stage, the receive from the previous one */
        for (int dir = 0; dir < 2; dir++) {
            int peer_stage = dir == 0 ? stage + 1 : stage - 1;
            if (peer_stage < 0 || peer_stage >= S)
                continue;
            pp_rec_nccl n;
            memset(&n, 0, sizeof n);
            n.h = (pp_rec_header){PP_REC_NCCL, sizeof n, 999, 0};
            n.func = dir == 0 ? PP_NCCL_SEND : PP_NCCL_RECV;
            n.timed = 1;
            n.comm = 0xa0u + (uint64_t)(dir == 0 ? stage : peer_stage); /* one per link */
            n.rank = dir == 0 ? 0 : 1;
            n.peer = dir == 0 ? 1 : 0;
            n.nranks = 2;
            n.bytes = 1u << 20;
            n.start = b + MS;
            n.end = n.start + 1000;
            n.gpu_start = n.start + 2000;
            n.gpu_end = n.gpu_start + 500000;
            blk_rec(&t, &n, sizeof n);
            t.tid = 999;
            blk_flush(&t);
            t.tid = 100 + (uint32_t)stage;
        }
    }
    pp_trace_writer_close(w);
}

Test(analyzer_stream, nccl_links_between_stages_from_per_process_traces)
{
    enum { S = 3 };
    char paths[S][128];
    const char *p[S];
    for (int s = 0; s < S; s++) {
        snprintf(paths[s], sizeof paths[s], "%s/stage%d.pft", g_dir, s);
        write_stage_process(paths[s], s, S);
        p[s] = paths[s];
    }
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_files(p, S, NULL, &a), PP_OK, "%s", pp_error_message());
    cr_assert(a->gpu.present);
    cr_assert_eq(a->gpu.n_links, 2, "%zu links", a->gpu.n_links);
    int seen = 0;
    for (size_t i = 0; i < a->gpu.n_links; i++) {
        const pp_gpu_link *l = &a->gpu.links[i];
        cr_assert_eq(l->dst, l->src + 1, "link %d -> %d", l->src, l->dst);
        cr_assert_eq(l->messages, 3, "link %d -> %d: %llu messages", l->src, l->dst,
                     (unsigned long long)l->messages);
        seen |= 1 << l->src;
    }
    cr_assert_eq(seen, 3, "links from stages 0 and 1");
    pp_analysis_free(a);
}

static int g_rank1; /* report_of analyzes rank 1 only */

/* The report JSON of the analysis of paths[0 .. n) with a GPU window of `window` ranges, its GPU
 * pass replaying the host pass's recording or (reread) reading the traces again; *replayed: how
 * it went. malloc'd. */
static char *report_of(const char *const *paths, size_t n, size_t window, int reread,
                       int *replayed)
{
    pp_analysis_options o;
    pp_analysis_options_default(&o);
    o.gpu_window = window;
    o.gpu_reread = reread;
    static const int only_rank1[] = {1};
    if (g_rank1) {
        o.rank_filter = only_rank1;
        o.rank_filter_n = 1;
    }
    pp_analysis *a = NULL;
    cr_assert_eq(pp_analyze_files(paths, n, &o, &a), PP_OK, "%s", pp_error_message());
    *replayed = a->gpu.replayed;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    cr_assert_eq(pp_report_json(a, f), PP_OK);
    fclose(f);
    pp_analysis_free(a);
    return text;
}

/* Whether both ways to the GPU pass's input give the same report, byte for byte; the default
 * replayed (want_replay) or read again. */
static void same_either_way(const char *what, const char *const *paths, size_t n, size_t window,
                            int want_replay)
{
    int replayed = 0, reread_replayed = 0;
    char *replay = report_of(paths, n, window, 0, &replayed);
    char *reread = report_of(paths, n, window, 1, &reread_replayed);
    cr_expect_eq(replayed, want_replay, "%s: replayed %d", what, replayed);
    cr_expect_eq(reread_replayed, 0, "%s", what);
    cr_expect(strstr(replay, "\"gpu\"") != NULL, "%s", what);
    size_t i = 0;
    while (replay[i] && replay[i] == reread[i])
        i++;
    cr_expect(replay[i] == reread[i], "%s: the reports differ at byte %zu: ...%.80s against "
              "...%.80s", what, i, replay + (i > 40 ? i - 40 : 0), reread + (i > 40 ? i - 40 : 0));
    free(replay);
    free(reread);
}

/* The GPU pass needs the analyzed steps, known at the end of the host pass; instead of reading
 * and decoding every trace a second time it replays what the host pass recorded for it (the
 * ranges it projects onto, the GPU, API and NCCL records, in order: analyzer/gpu_rec.c), in
 * memory up to 1 MiB and in a scratch file beyond. The analysis is the same either way, byte for
 * byte in the report: a long job whose recording goes to the file, the autograd thread's
 * launches adopted in a narrow window, records arriving late (some past a 64-range window),
 * NCCL links across per-process traces, all of them or one rank's. A trace whose first GPU
 * record comes after 1 MiB of ranges is not recorded (a host-only trace never is: nothing to
 * project) and is read again, as is one whose scratch file cannot be made. */
Test(analyzer_stream, the_gpu_pass_replays_the_host_pass_and_gets_the_same_analysis)
{
    char path[5][128];
    const char *p[3];
    for (int i = 0; i < 5; i++)
        snprintf(path[i], sizeof path[i], "%s/replay_%d.pft", g_dir, i);
    p[0] = path[0];
    write_job(path[0], 2000, 16, 1, 1); /* about 4 MiB of records: the scratch file */
    same_either_way("long job", p, 1, 0, 1);
    /* no scratch file can be made: read again */
    const char *tmp = getenv("TMPDIR");
    char *saved = tmp ? strdup(tmp) : NULL;
    setenv("TMPDIR", "/nonexistent/pprof", 1);
    same_either_way("long job, no scratch file", p, 1, 0, 0);
    if (saved)
        setenv("TMPDIR", saved, 1);
    else
        unsetenv("TMPDIR");
    free(saved);
    p[0] = path[1];
    g_autograd = 1;
    write_job(path[1], 200, 16, 1, 1);
    g_autograd = 0;
    same_either_way("autograd thread", p, 1, 256, 1);
    p[0] = path[2];
    write_job(path[2], 20, 4, 1, 20);
    same_either_way("late records, wide window", p, 1, 4096, 1);
    same_either_way("late records, narrow window", p, 1, 64, 1);
    p[0] = path[3];
    write_job(path[3], 1000, 16, 1, 1000); /* every GPU record after all the ranges */
    same_either_way("records after 1 MiB of ranges", p, 1, 0, 0);

    char stages[3][128];
    for (int s = 0; s < 3; s++) {
        snprintf(stages[s], sizeof stages[s], "%s/replay%d.pft", g_dir, s);
        write_stage_process(stages[s], s, 3);
        p[s] = stages[s];
    }
    same_either_way("NCCL links of per-process traces", p, 3, 0, 1);
    g_rank1 = 1; /* the other ranks' records are not the GPU pass's */
    same_either_way("rank 1 of per-process traces", p, 3, 0, 1);
    g_rank1 = 0;
}
