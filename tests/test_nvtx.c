/* test_nvtx.c: unit tests of the runtime's NVTX annotations (runtime/nvtx.c), checked from the
 * tool's side: a small NVTX tool (tests/nvtx_test_tool.c) is statically injected into this
 * executable and records every call. The tests hold the runtime to docs/nvtx-convention.md:
 * domain, category names, message strings, colours, the "pipeprof.event" payload decoded through
 * its registered schema, nesting, lazy one-time string registration, threads, and silence with no
 * tool. Built without the NVTX headers, every test but the build check is skipped. */
#include "nvtx_test_tool.h"
#include "pp_nvtx.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Numbers fixed by docs/nvtx-convention.md (and by the NVTX headers they come from); the schema
 * id is common/pp_convention.h's (tests/test_convention.c checks its value). */
#define SCHEMA_ID PP_NVTX_SCHEMA_ID
#define SCHEMA_SIZE 40u
#define PAYLOAD_TYPE_EXT ((int32_t)0xDFBD0009u)
#define MESSAGE_TYPE_ASCII 1
#define MESSAGE_TYPE_REGISTERED 3
#define COLOR_ARGB 1
#define SCHEMA_TYPE_STATIC 1u
#define ENTRY_INT32 15u
#define ENTRY_UINT32 16u
#define ENTRY_INT64 17u
#define ENTRY_UINT64 18u

#if defined(PP_HAVE_NVTX) && PP_HAVE_NVTX
#define EXPECT_COMPILED_IN 1
#else
#define EXPECT_COMPILED_IN 0
#endif

static const char *const k_layers[] = {"embedding", "block0", "block1", "head"};

/* The environment variable would take precedence over the static tool; NVTX reads it lazily on
 * its first call, which comes after this (Criterion runs each test in a fresh process). */
static void clean_env(void)
{
    unsetenv("NVTX_INJECTION64_PATH");
    unsetenv("NVTX_INJECTION32_PATH");
}

static void no_tool_env(void)
{
    clean_env();
    tt_disable();
}

TestSuite(nvtx, .init = clean_env);
TestSuite(nvtx_notool, .init = no_tool_env);

static void need_nvtx(void)
{
    if (!pp_nvtx_compiled_in())
        cr_skip_test("built without the NVTX headers: annotations are no-ops");
}

static const tt_event *nth(tt_kind kind, int n)
{
    for (int i = 0; i < tt_count(); i++) {
        const tt_event *e = tt_get(i);
        if (e->kind == kind && n-- == 0)
            return e;
    }
    return NULL;
}

static int64_t field_i(const tt_event *e, const char *name)
{
    int64_t v = 0;
    cr_assert(tt_field_i64(e, name, &v), "payload field '%s' missing (message '%s')", name,
              e->text);
    return v;
}

static uint64_t field_u(const tt_event *e, const char *name)
{
    uint64_t v = 0;
    cr_assert(tt_field_u64(e, name, &v), "payload field '%s' missing (message '%s')", name,
              e->text);
    return v;
}

/* Every field of the pipeprof.event payload equals what was pushed. */
static void assert_payload(const tt_event *e, pp_nvtx_kind kind, const pp_nvtx_info *in)
{
    cr_assert_eq(e->payload_type, PAYLOAD_TYPE_EXT, "'%s': payload type", e->text);
    cr_assert_eq(e->schema_id, SCHEMA_ID, "'%s': schema id", e->text);
    cr_assert_eq(e->payload_size, SCHEMA_SIZE, "'%s': payload size", e->text);
    cr_assert_eq(e->n_fields, 8, "'%s': decoded fields", e->text);
    cr_assert_eq(field_u(e, "kind"), (uint64_t)kind, "'%s': kind", e->text);
    cr_assert_eq(field_i(e, "stage"), in->stage, "'%s': stage", e->text);
    cr_assert_eq(field_i(e, "mb"), in->mb, "'%s': mb", e->text);
    cr_assert_eq(field_i(e, "chunk"), in->chunk, "'%s': chunk", e->text);
    cr_assert_eq(field_i(e, "layer"), in->layer, "'%s': layer", e->text);
    cr_assert_eq(field_i(e, "peer"), in->peer, "'%s': peer", e->text);
    cr_assert_eq(field_u(e, "bytes"), in->bytes, "'%s': bytes", e->text);
    cr_assert_eq(field_i(e, "step"), in->step, "'%s': step", e->text);
}

static pp_nvtx_info info(int64_t step, int stage, int mb, int chunk, int layer, int peer,
                         uint64_t bytes)
{
    pp_nvtx_info i = {step, stage, mb, chunk, layer, peer, bytes};
    return i;
}

Test(nvtx, built_as_configured)
{
    /* The runtime and this test must agree on whether NVTX was found. */
    cr_assert_eq(pp_nvtx_compiled_in(), EXPECT_COMPILED_IN);
}

Test(nvtx, setup_creates_domain_names_stages_and_registers_schema)
{
    need_nvtx();
    pp_nvtx_setup(4, 8, 1, N_OF(k_layers), k_layers);

    cr_assert_eq(tt_init_calls(), 1);
    cr_assert_eq(tt_count_kind(TT_DOMAIN_CREATE), 1);
    cr_assert_str_eq(nth(TT_DOMAIN_CREATE, 0)->text, "pipeprof");
    cr_assert_eq(tt_count_kind(TT_NAME_CATEGORY), 4);
    for (int s = 0; s < 4; s++) {
        const tt_event *e = nth(TT_NAME_CATEGORY, s);
        char want[32];
        snprintf(want, sizeof want, "stage %d", s);
        cr_assert_str_eq(e->domain, "pipeprof");
        cr_assert_eq(e->id, (uint32_t)s + 1, "stage %d is category %d", s, s + 1);
        cr_assert_str_eq(e->text, want);
    }
    /* Strings are registered on first use, not at setup. */
    cr_assert_eq(tt_count_kind(TT_REGISTER_STRING), 0);
    cr_assert_eq(tt_count_kind(TT_OTHER), 0);

    static const struct {
        const char *name;
        uint64_t type, offset;
    } k_entries[] = {{"kind", ENTRY_UINT32, 0}, {"stage", ENTRY_INT32, 4},
                     {"mb", ENTRY_INT32, 8},     {"chunk", ENTRY_INT32, 12},
                     {"layer", ENTRY_INT32, 16}, {"peer", ENTRY_INT32, 20},
                     {"bytes", ENTRY_UINT64, 24}, {"step", ENTRY_INT64, 32}};
    cr_assert_eq(tt_schema_count(), 1);
    const tt_schema *s = tt_schema_get(0);
    cr_assert_str_eq(s->domain, "pipeprof");
    cr_assert_str_eq(s->name, "pipeprof.event");
    cr_assert_eq(s->id, SCHEMA_ID);
    cr_assert_eq(s->type, SCHEMA_TYPE_STATIC);
    cr_assert_eq(s->static_size, SCHEMA_SIZE);
    cr_assert_eq(s->n_entries, (size_t)N_OF(k_entries));
    for (int i = 0; i < N_OF(k_entries); i++) {
        cr_assert_str_eq(s->entry[i].name, k_entries[i].name);
        cr_assert_eq(s->entry[i].type, k_entries[i].type, "entry %s type", k_entries[i].name);
        cr_assert_eq(s->entry[i].offset, k_entries[i].offset, "entry %s offset",
                     k_entries[i].name);
    }
}

/* One row per kind: what is pushed and what a tool must see (docs/nvtx-convention.md). */
static const struct {
    pp_nvtx_kind kind;
    pp_nvtx_info in;
    const char *message;
    uint32_t color;
} k_rows[] = {
    {PP_NVTX_STEP, {5, 2, -1, -1, -1, -1, 0}, "step", 0xFF607D8Bu},
    {PP_NVTX_FWD, {5, 1, 3, 0, -1, -1, 0}, "fwd mb3", 0xFF1E88E5u},
    {PP_NVTX_BWD, {5, 1, 3, 0, -1, -1, 0}, "bwd mb3", 0xFF43A047u},
    {PP_NVTX_BWD_INPUT, {5, 1, 3, 0, -1, -1, 0}, "bwd_input mb3", 0xFF2E7D32u},
    {PP_NVTX_BWD_WEIGHT, {5, 1, 3, 0, -1, -1, 0}, "bwd_weight mb3", 0xFF00897Bu},
    {PP_NVTX_SEND_ACT, {5, 1, 3, 0, -1, 2, 5ull << 30}, "send_act mb3", 0xFFFB8C00u},
    {PP_NVTX_RECV_ACT, {5, 2, 3, 0, -1, 1, 1u << 20}, "recv_act mb3", 0xFFFFB74Du},
    {PP_NVTX_SEND_GRAD, {5, 2, 3, 0, -1, 1, 1u << 20}, "send_grad mb3", 0xFFF4511Eu},
    {PP_NVTX_RECV_GRAD, {5, 1, 3, 0, -1, 2, 1u << 20}, "recv_grad mb3", 0xFFFF8A65u},
    {PP_NVTX_OPT_STEP, {(int64_t)1 << 33, 3, -1, -1, -1, -1, 0}, "opt_step", 0xFF9E9E9Eu},
    {PP_NVTX_LAYER_FWD, {5, 1, 3, 0, 1, -1, 0}, "block0 fwd", 0xFF90CAF9u},
    {PP_NVTX_LAYER_BWD, {5, 0, 7, 0, 0, -1, 0}, "embedding bwd", 0xFFA5D6A7u},
    {PP_NVTX_LAYER_BWD_WEIGHT, {5, 3, 0, 0, 3, -1, 0}, "head bwd_weight", 0xFF80CBC4u},
    {PP_NVTX_ALLREDUCE, {5, 2, -1, -1, -1, -1, 64ull << 20}, "allreduce", 0xFF8E24AAu},
};

Test(nvtx, every_kind_has_its_message_category_colour_and_payload)
{
    need_nvtx();
    pp_nvtx_setup(4, 8, 1, N_OF(k_layers), k_layers);
    tt_reset();
    for (int r = 0; r < N_OF(k_rows); r++) {
        pp_nvtx_push(k_rows[r].kind, &k_rows[r].in);
        pp_nvtx_pop();
    }
    cr_assert_eq(tt_count_kind(TT_PUSH), N_OF(k_rows));
    cr_assert_eq(tt_count_kind(TT_POP), N_OF(k_rows));
    cr_assert_eq(tt_count_kind(TT_OTHER), 0, "only domain calls, never the default domain");
    for (int r = 0; r < N_OF(k_rows); r++) {
        const tt_event *e = nth(TT_PUSH, r);
        cr_assert_str_eq(e->domain, "pipeprof");
        cr_assert_eq(e->attr_version, 3);
        cr_assert_eq(e->message_type, MESSAGE_TYPE_REGISTERED, "row %d", r);
        cr_assert_str_eq(e->text, k_rows[r].message, "row %d", r);
        cr_assert_eq(e->category, (uint32_t)k_rows[r].in.stage + 1, "'%s': category", e->text);
        cr_assert_eq(e->color_type, COLOR_ARGB);
        cr_assert_eq(e->color, k_rows[r].color, "'%s': colour %08x", e->text, e->color);
        assert_payload(e, k_rows[r].kind, &k_rows[r].in);
        cr_assert_str_eq(nth(TT_POP, r)->domain, "pipeprof");
    }
}

Test(nvtx, chunks_appear_in_messages_when_interleaved)
{
    need_nvtx();
    pp_nvtx_setup(2, 4, 2, 0, NULL);
    static const struct {
        pp_nvtx_kind kind;
        pp_nvtx_info in;
        const char *message;
    } rows[] = {
        {PP_NVTX_FWD, {1, 0, 3, 1, -1, -1, 0}, "fwd mb3 c1"},
        {PP_NVTX_BWD, {1, 1, 0, 0, -1, -1, 0}, "bwd mb0 c0"},
        {PP_NVTX_SEND_ACT, {1, 1, 2, 1, -1, 0, 64}, "send_act mb2 c1"},
        {PP_NVTX_RECV_GRAD, {1, 0, 2, 0, -1, 1, 64}, "recv_grad mb2 c0"},
    };
    for (int r = 0; r < N_OF(rows); r++) {
        pp_nvtx_push(rows[r].kind, &rows[r].in);
        pp_nvtx_pop();
    }
    for (int r = 0; r < N_OF(rows); r++) {
        const tt_event *e = nth(TT_PUSH, r);
        cr_assert_str_eq(e->text, rows[r].message);
        assert_payload(e, rows[r].kind, &rows[r].in);
    }
}

Test(nvtx, out_of_table_ranges_get_the_generic_message_and_keep_their_payload)
{
    need_nvtx();
    pp_nvtx_setup(2, 4, 2, N_OF(k_layers), k_layers);
    static const struct {
        pp_nvtx_kind kind;
        pp_nvtx_info in;
        const char *message;
    } rows[] = {
        {PP_NVTX_FWD, {1, 0, 7, 0, -1, -1, 0}, "fwd"},   /* mb >= M */
        {PP_NVTX_BWD, {1, 0, -1, 0, -1, -1, 0}, "bwd"},  /* mb unset */
        {PP_NVTX_FWD, {1, 0, 1, 2, -1, -1, 0}, "fwd"},   /* chunk >= v */
        {PP_NVTX_FWD, {1, 0, 1, -1, -1, -1, 0}, "fwd"},  /* chunk unset with v > 1 */
        {PP_NVTX_LAYER_FWD, {1, 0, 1, 0, 9, -1, 0}, "layer fwd"},
        {PP_NVTX_LAYER_BWD, {1, 0, 1, 0, -1, -1, 0}, "layer bwd"},
    };
    for (int r = 0; r < N_OF(rows); r++) {
        pp_nvtx_push(rows[r].kind, &rows[r].in);
        pp_nvtx_pop();
    }
    for (int r = 0; r < N_OF(rows); r++) {
        const tt_event *e = nth(TT_PUSH, r);
        cr_assert_str_eq(e->text, rows[r].message, "row %d", r);
        assert_payload(e, rows[r].kind, &rows[r].in);
    }
    cr_assert_eq(tt_count_registered("fwd"), 1);
}

Test(nvtx, one_chunk_ignores_the_chunk_field)
{
    need_nvtx();
    pp_nvtx_setup(2, 4, 1, 0, NULL);
    pp_nvtx_info a = info(1, 0, 2, -1, -1, -1, 0), b = info(1, 0, 2, 0, -1, -1, 0);
    pp_nvtx_push(PP_NVTX_FWD, &a);
    pp_nvtx_pop();
    pp_nvtx_push(PP_NVTX_FWD, &b);
    pp_nvtx_pop();
    cr_assert_str_eq(nth(TT_PUSH, 0)->text, "fwd mb2");
    cr_assert_str_eq(nth(TT_PUSH, 1)->text, "fwd mb2");
    cr_assert_eq(field_i(nth(TT_PUSH, 0), "chunk"), -1, "the payload keeps what was given");
}

Test(nvtx, unnamed_layers_are_called_by_index)
{
    need_nvtx();
    const char *names[] = {"embedding", NULL, "head"};
    pp_nvtx_setup(1, 1, 1, 3, names);
    pp_nvtx_info in = info(1, 0, 0, 0, 1, -1, 0);
    pp_nvtx_push(PP_NVTX_LAYER_FWD, &in);
    pp_nvtx_pop();
    cr_assert_str_eq(nth(TT_PUSH, 0)->text, "layer1 fwd");

    pp_nvtx_setup(1, 1, 1, 3, NULL);
    in.layer = 2;
    pp_nvtx_push(PP_NVTX_LAYER_BWD_WEIGHT, &in);
    pp_nvtx_pop();
    cr_assert_str_eq(nth(TT_PUSH, 1)->text, "layer2 bwd_weight");
}

Test(nvtx, missing_info_pushes_a_range_with_everything_unset)
{
    need_nvtx();
    pp_nvtx_setup(2, 4, 1, 0, NULL);
    pp_nvtx_push(PP_NVTX_FWD, NULL);
    pp_nvtx_pop();
    const tt_event *e = nth(TT_PUSH, 0);
    cr_assert_not_null(e);
    cr_assert_str_eq(e->text, "fwd");
    cr_assert_eq(e->category, 0u, "category 0: not stage-specific");
    pp_nvtx_info none = pp_nvtx_info_none();
    assert_payload(e, PP_NVTX_FWD, &none);
}

Test(nvtx, ranges_nest_and_every_push_has_its_pop)
{
    need_nvtx();
    pp_nvtx_setup(2, 4, 1, N_OF(k_layers), k_layers);
    pp_nvtx_info in = info(1, 0, 1, 0, 2, -1, 0);
    pp_nvtx_push(PP_NVTX_STEP, &in);
    pp_nvtx_push(PP_NVTX_FWD, &in);
    pp_nvtx_push(PP_NVTX_LAYER_FWD, &in);
    pp_nvtx_pop();
    pp_nvtx_push(PP_NVTX_LAYER_FWD, &in);
    pp_nvtx_pop();
    pp_nvtx_pop();
    pp_nvtx_pop();
    static const struct {
        tt_kind kind;
        int level;
        const char *text;
    } want[] = {{TT_PUSH, 0, "step"},       {TT_PUSH, 1, "fwd mb1"}, {TT_PUSH, 2, "block1 fwd"},
                {TT_POP, 2, ""},            {TT_PUSH, 2, "block1 fwd"}, {TT_POP, 2, ""},
                {TT_POP, 1, ""},            {TT_POP, 0, ""}};
    int at = 0;
    for (int i = 0; i < tt_count(); i++) {
        const tt_event *e = tt_get(i);
        if (e->kind != TT_PUSH && e->kind != TT_POP)
            continue;
        cr_assert_lt(at, N_OF(want));
        cr_assert_eq(e->kind, want[at].kind, "event %d", at);
        cr_assert_eq(e->level, want[at].level, "event %d", at);
        cr_assert_str_eq(e->text, want[at].text, "event %d", at);
        cr_assert_str_eq(e->domain, "pipeprof");
        at++;
    }
    cr_assert_eq(at, N_OF(want));
}

Test(nvtx, each_message_is_registered_once_on_first_use)
{
    need_nvtx();
    pp_nvtx_setup(2, 8, 1, N_OF(k_layers), k_layers);
    cr_assert_eq(tt_count_kind(TT_REGISTER_STRING), 0);
    for (int i = 0; i < 100; i++) {
        pp_nvtx_info in = info(i + 1, 0, 3 + (i & 1), 0, 0, -1, 0);
        pp_nvtx_push(PP_NVTX_STEP, &in);
        pp_nvtx_push(PP_NVTX_FWD, &in);
        pp_nvtx_push(PP_NVTX_LAYER_FWD, &in);
        pp_nvtx_pop();
        pp_nvtx_pop();
        pp_nvtx_pop();
    }
    cr_assert_eq(tt_count_kind(TT_PUSH), 300);
    cr_assert_eq(tt_count_registered("step"), 1);
    cr_assert_eq(tt_count_registered("fwd mb3"), 1);
    cr_assert_eq(tt_count_registered("fwd mb4"), 1);
    cr_assert_eq(tt_count_registered("embedding fwd"), 1);
    cr_assert_eq(tt_count_kind(TT_REGISTER_STRING), 4);
    for (int i = 0; i < tt_count(); i++)
        cr_assert_str_eq(tt_get(i)->domain, "pipeprof");
}

Test(nvtx, setup_again_keeps_or_replaces_the_configuration)
{
    need_nvtx();
    pp_nvtx_setup(2, 4, 1, 0, NULL);
    pp_nvtx_info in = info(1, 0, 3, 0, -1, -1, 0);
    pp_nvtx_push(PP_NVTX_FWD, &in);
    pp_nvtx_pop();
    /* The same configuration: nothing is registered again. */
    pp_nvtx_setup(2, 4, 1, 0, NULL);
    pp_nvtx_push(PP_NVTX_FWD, &in);
    pp_nvtx_pop();
    cr_assert_eq(tt_count_registered("fwd mb3"), 1);
    /* More stages, micro-batches and chunks: new messages, new categories named once. */
    pp_nvtx_setup(4, 8, 2, 0, NULL);
    pp_nvtx_info in2 = info(1, 3, 7, 1, -1, -1, 0);
    pp_nvtx_push(PP_NVTX_FWD, &in2);
    pp_nvtx_pop();
    cr_assert_str_eq(nth(TT_PUSH, 2)->text, "fwd mb7 c1");
    cr_assert_eq(nth(TT_PUSH, 2)->category, 4u);
    cr_assert_eq(tt_count_kind(TT_DOMAIN_CREATE), 1);
    cr_assert_eq(tt_count_kind(TT_NAME_CATEGORY), 4);
    for (int s = 0; s < 4; s++)
        cr_assert_eq(nth(TT_NAME_CATEGORY, s)->id, (uint32_t)s + 1);
    cr_assert_eq(tt_schema_count(), 1);
}

Test(nvtx, a_tool_without_registered_strings_gets_ascii_messages)
{
    need_nvtx();
    tt_refuse_strings();
    pp_nvtx_setup(2, 4, 2, N_OF(k_layers), k_layers);
    pp_nvtx_info in = info(1, 1, 3, 1, 2, -1, 0);
    for (int i = 0; i < 3; i++) {
        pp_nvtx_push(PP_NVTX_FWD, &in);
        pp_nvtx_push(PP_NVTX_LAYER_FWD, &in);
        pp_nvtx_pop();
        pp_nvtx_pop();
    }
    for (int i = 0; i < 6; i++) {
        const tt_event *e = nth(TT_PUSH, i);
        cr_assert_eq(e->message_type, MESSAGE_TYPE_ASCII);
        cr_assert_str_eq(e->text, i % 2 ? "block1 fwd" : "fwd mb3 c1");
        assert_payload(e, i % 2 ? PP_NVTX_LAYER_FWD : PP_NVTX_FWD, &in);
    }
    /* Asked once per message, not on every range. */
    cr_assert_eq(tt_count_registered("fwd mb3 c1"), 1);
    cr_assert_eq(tt_count_registered("block1 fwd"), 1);
}

Test(nvtx, name_thread_passes_the_os_thread_id)
{
    need_nvtx();
    pp_nvtx_name_thread("stage 3");
    const tt_event *e = nth(TT_NAME_THREAD, 0);
    cr_assert_not_null(e);
    cr_assert_str_eq(e->text, "stage 3");
    cr_assert_eq(e->id, tt_gettid(), "NVTX wants the OS thread id (gettid)");
    cr_assert_eq(e->id, e->tid);
}

Test(nvtx, push_and_pop_before_setup_do_nothing)
{
    need_nvtx();
    pp_nvtx_info in = info(1, 0, 0, 0, -1, -1, 0);
    pp_nvtx_push(PP_NVTX_FWD, &in);
    pp_nvtx_pop();
    pp_nvtx_pop(); /* an unmatched pop is harmless too */
    cr_assert_eq(tt_count_kind(TT_PUSH), 0);
    cr_assert_eq(tt_count_kind(TT_POP), 0);
}

enum { N_THREADS = 4, N_ITERS = 1000, N_MB = 64 };

/* All workers start together and walk the same micro-batches, so that they race on the first
 * use of every message. */
static pthread_barrier_t g_start;

typedef struct worker_arg {
    int stage;
    uint32_t tid;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *w = p;
    char name[32];
    snprintf(name, sizeof name, "stage %d", w->stage);
    w->tid = tt_gettid();
    pp_nvtx_name_thread(name);
    pthread_barrier_wait(&g_start);
    for (int j = 0; j < N_ITERS; j++) {
        pp_nvtx_info in = info(1, w->stage, j % N_MB, 0, j % N_OF(k_layers), -1, 0);
        pp_nvtx_push(PP_NVTX_FWD, &in);
        pp_nvtx_push(PP_NVTX_LAYER_FWD, &in);
        pp_nvtx_pop();
        pp_nvtx_pop();
    }
    return NULL;
}

Test(nvtx, threads_annotate_concurrently_and_share_registrations)
{
    need_nvtx();
    pp_nvtx_setup(N_THREADS, N_MB, 1, N_OF(k_layers), k_layers);
    pthread_t th[N_THREADS];
    worker_arg args[N_THREADS];
    cr_assert_eq(pthread_barrier_init(&g_start, NULL, N_THREADS), 0);
    for (int i = 0; i < N_THREADS; i++) {
        args[i].stage = i;
        cr_assert_eq(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&g_start);

    cr_assert_eq(tt_dropped(), 0);
    cr_assert_eq(tt_count_kind(TT_PUSH), 2 * N_THREADS * N_ITERS);
    cr_assert_eq(tt_count_kind(TT_POP), 2 * N_THREADS * N_ITERS);
    /* Threads raced on the first use of each message: still one registration each. */
    for (int mb = 0; mb < N_MB; mb++) {
        char want[32];
        snprintf(want, sizeof want, "fwd mb%d", mb);
        cr_assert_eq(tt_count_registered(want), 1, "%s", want);
    }
    for (int l = 0; l < N_OF(k_layers); l++) {
        char want[64];
        snprintf(want, sizeof want, "%s fwd", k_layers[l]);
        cr_assert_eq(tt_count_registered(want), 1, "%s", want);
    }
    cr_assert_eq(tt_count_kind(TT_REGISTER_STRING), N_MB + N_OF(k_layers));

    cr_assert_eq(tt_count_kind(TT_NAME_THREAD), N_THREADS);
    for (int i = 0; i < N_THREADS; i++) {
        const tt_event *e = nth(TT_NAME_THREAD, i);
        int found = 0;
        for (int t = 0; t < N_THREADS; t++) {
            char want[32];
            snprintf(want, sizeof want, "stage %d", args[t].stage);
            if (args[t].tid == e->id) {
                found = 1;
                cr_assert_str_eq(e->text, want);
            }
        }
        cr_assert(found, "thread name '%s' carries a worker's OS thread id", e->text);
    }
    /* Every push carries its own thread's stage and a message matching its payload; nesting is
     * per thread. */
    for (int i = 0; i < tt_count(); i++) {
        const tt_event *e = tt_get(i);
        if (e->kind != TT_PUSH)
            continue;
        int t = -1;
        for (int k = 0; k < N_THREADS; k++)
            if (args[k].tid == e->tid)
                t = k;
        cr_assert_geq(t, 0);
        cr_assert_eq(field_i(e, "stage"), args[t].stage);
        cr_assert_eq(e->category, (uint32_t)args[t].stage + 1);
        char want[64];
        if (field_u(e, "kind") == PP_NVTX_FWD) {
            snprintf(want, sizeof want, "fwd mb%d", (int)field_i(e, "mb"));
            cr_assert_eq(e->level, 0);
        } else {
            snprintf(want, sizeof want, "%s fwd", k_layers[field_i(e, "layer")]);
            cr_assert_eq(e->level, 1);
        }
        cr_assert_str_eq(e->text, want);
    }
}

Test(nvtx_notool, without_a_tool_every_call_is_silent)
{
    need_nvtx();
    pp_nvtx_setup(4, 8, 2, N_OF(k_layers), k_layers);
    pp_nvtx_name_thread("stage 0");
    for (int i = 0; i < 1000; i++) {
        pp_nvtx_info in = info(1, i % 4, i % 8, i % 2, i % 4, -1, 0);
        pp_nvtx_push((pp_nvtx_kind)(i % PP_NVTX_KIND_COUNT), &in);
        pp_nvtx_pop();
    }
    cr_assert_eq(tt_init_calls(), 1, "NVTX asked the tool once, which declined");
    cr_assert_eq(tt_count(), 0);
    cr_assert_eq(tt_schema_count(), 0);
}

/* ---------------------------------------------------------------------------------------- */
/* The executor's annotations: one real pipeline step, seen from the tool                   */
/* ---------------------------------------------------------------------------------------- */

#include "pp_exec.h"

static int count_pushes(const char *text, int stage)
{
    int n = 0;
    for (int i = 0; i < tt_count(); i++) {
        const tt_event *e = tt_get(i);
        if (e->kind == TT_PUSH && strcmp(e->text, text) == 0 &&
            (stage < 0 || (int)e->category == stage + 1))
            n++;
    }
    return n;
}

Test(nvtx, a_pipeline_step_is_annotated_per_the_convention)
{
    need_nvtx();
    enum { S = 2, M = 4 };
    pp_costs *c = NULL;
    /* 4 layers, 2 per stage, 20 us each; 4096-byte activations */
    cr_assert_eq(pp_costs_uniform(4, 20, 40, 4096, &c), PP_OK);
    pp_pipe_config pc;
    memset(&pc, 0, sizeof pc);
    pc.train.microbatches = M;
    pp_adamw_config_default(&pc.train.opt);
    pc.backend = PP_BACKEND_SIM;
    pc.schedule = PP_SCHED_1F1B;
    pc.v = 1;
    pc.costs = c;
    pc.slow_stage = -1;
    cr_assert_eq(pp_partition_even(4, S, 1, &pc.partition), PP_OK);
    pp_pipe_trainer *t = NULL;
    tt_reset();
    cr_assert_eq(pp_pipe_trainer_create(&pc, NULL, &t), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_pipe_trainer_step(t, NULL, NULL), PP_OK);
    pp_pipe_trainer_destroy(t);

    /* every push has its pop */
    cr_assert_eq(tt_count_kind(TT_PUSH), tt_count_kind(TT_POP));
    for (int s = 0; s < S; s++) {
        cr_assert_eq(count_pushes("step", s), 1, "stage %d step ranges", s);
        cr_assert_eq(count_pushes("opt_step", s), 1, "stage %d opt_step ranges", s);
        for (int mb = 0; mb < M; mb++) {
            char name[32];
            snprintf(name, sizeof name, "fwd mb%d", mb);
            cr_assert_eq(count_pushes(name, s), 1, "stage %d '%s'", s, name);
            snprintf(name, sizeof name, "bwd mb%d", mb);
            cr_assert_eq(count_pushes(name, s), 1, "stage %d '%s'", s, name);
        }
    }
    /* every layer inside every forward and backward: 4 micro-batches each */
    cr_assert_eq(count_pushes("layer0 fwd", 0), M);
    cr_assert_eq(count_pushes("layer3 bwd", 1), M);
    cr_assert_eq(count_pushes("layer3 fwd", 0), 0, "layer 3 belongs to stage 1");
    /* sends and receives carry bytes and peer */
    int sends = 0;
    for (int i = 0; i < tt_count(); i++) {
        const tt_event *e = tt_get(i);
        if (e->kind != TT_PUSH || strncmp(e->text, "send_act", 8) != 0)
            continue;
        sends++;
        cr_assert_eq(e->category, 1u, "activations leave stage 0");
        cr_assert_eq(field_i(e, "peer"), 1);
        cr_assert_eq(field_u(e, "bytes"), 4096u);
        cr_assert_eq(field_i(e, "step"), 1);
    }
    cr_assert_eq(sends, M);
    cr_assert_eq(count_pushes("recv_act mb2", 1), 1);
    cr_assert_eq(count_pushes("send_grad mb2", 1), 1);
    cr_assert_eq(count_pushes("recv_grad mb2", 0), 1);
    /* worker threads are named after their stage */
    int named = 0;
    for (int i = 0; i < tt_count(); i++) {
        const tt_event *e = tt_get(i);
        named += e->kind == TT_NAME_THREAD &&
                 (strcmp(e->text, "stage 0") == 0 || strcmp(e->text, "stage 1") == 0);
    }
    cr_assert_eq(named, S);
    pp_partition_free(&pc.partition);
    pp_costs_destroy(c);
}

/* Issue 17's contract (docs/nvtx-convention.md "Memory counters"): one int64 counter of unit
 * "bytes" per (stage, purpose) named pp.mem.stage<S>.<purpose>, registered and first sampled
 * on the stage's thread, sampled there at every change; the samples are the accounting. */
Test(nvtx, memory_counters_follow_the_contract)
{
    need_nvtx();
    enum { S = 2, M = 4, NP = PP_STAGE_MEM_N_PURPOSES };
    pp_pipe_config pc;
    memset(&pc, 0, sizeof pc);
    pc.train.model = (pp_model_config){.vocab_size = 32, .seq_len = 8, .d_model = 16,
                                       .n_heads = 2, .n_layers = 2};
    pp_adamw_config_default(&pc.train.opt);
    pc.train.batch = 4;
    pc.train.microbatches = M;
    pc.train.steps = 2;
    pc.train.seed = 3;
    pc.backend = PP_BACKEND_CPU;
    pc.schedule = PP_SCHED_GPIPE;
    pc.v = 1;
    pc.slow_stage = -1;
    pc.recompute = "s1";
    cr_assert_eq(pp_partition_even(4, S, 1, &pc.partition), PP_OK);
    pp_data *d = NULL;
    cr_assert_eq(pp_data_markov_create(32, 4, 5, &d), PP_OK);
    pp_pipe_trainer *t = NULL;
    tt_reset();
    cr_assert_eq(pp_pipe_trainer_create(&pc, d, &t), PP_OK, "%s", pp_error_message());
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pp_pipe_trainer_step(t, NULL, NULL), PP_OK, "%s", pp_error_message());
    pp_stage_mem mem[S];
    for (int s = 0; s < S; s++)
        cr_assert_eq(pp_pipe_trainer_memory(t, s, &mem[s]), PP_OK);
    pp_pipe_trainer_destroy(t);

    for (int s = 0; s < S; s++) {
        /* the stage's worker thread: the one named "stage s" */
        char thread[16];
        snprintf(thread, sizeof thread, "stage %d", s);
        uint32_t tid = 0;
        for (int i = 0; i < tt_count(); i++)
            if (tt_get(i)->kind == TT_NAME_THREAD && strcmp(tt_get(i)->text, thread) == 0)
                tid = tt_get(i)->tid;
        cr_assert_neq(tid, 0u);
        for (int p = 0; p < NP; p++) {
            char name[64];
            snprintf(name, sizeof name, "pp.mem.stage%d.%s", s,
                     pp_stage_mem_purpose_name((pp_stage_mem_purpose)p));
            int reg = -1, n_reg = 0;
            for (int i = 0; i < tt_count(); i++)
                if (tt_get(i)->kind == TT_COUNTER_REGISTER && strcmp(tt_get(i)->text, name) == 0) {
                    reg = reg < 0 ? i : reg;
                    n_reg++;
                }
            cr_assert_eq(n_reg, 1, "%s registered once", name);
            const tt_event *r = tt_get(reg);
            cr_assert_str_eq(r->domain, "pipeprof");
            cr_assert_str_eq(r->unit, "bytes");
            cr_assert_eq(r->schema_id, 17u /* NVTX_PAYLOAD_ENTRY_TYPE_INT64 */, "%s", name);
            cr_assert_eq(r->tid, tid, "%s registered on its stage's thread", name);
            /* samples: the first right after registration, all on the stage's thread, the
             * largest the peak, the last the value now */
            int64_t first = -1, last = -1, most = -1;
            int n = 0;
            for (int i = reg + 1; i < tt_count(); i++) {
                const tt_event *e = tt_get(i);
                if (e->kind != TT_COUNTER_SAMPLE || e->counter_id != r->counter_id)
                    continue;
                cr_assert_eq(e->tid, tid, "%s sampled on its stage's thread", name);
                if (n++ == 0)
                    first = e->value;
                last = e->value;
                most = e->value > most ? e->value : most;
            }
            cr_assert_geq(n, 1, "%s sampled", name);
            cr_assert_eq(last, mem[s].cur[p], "%s ends at the accounting's value", name);
            cr_assert_eq(most, mem[s].peak[p], "%s peaks at the accounting's peak", name);
            if (p != PP_STAGE_MEM_ACTIVATIONS) {
                cr_assert_eq(n, 1, "%s is static: one sample", name);
                cr_assert_eq(first, mem[s].cur[p]);
            } else {
                cr_assert_eq(first, 0, "no activations before the first step");
                /* gpipe, 2 steps: each micro-batch's forward adds and its backward releases,
                 * and stage 1 (recomputed) also takes and gives a workspace in each */
                cr_assert_eq(n, 1 + (s == 0 ? 2 * 2 * M : 2 * 6 * M), "%s: %d samples", name, n);
                cr_assert_gt(most, 0);
            }
        }
    }
    pp_partition_free(&pc.partition);
}
