/* test_convention.c: the NVTX convention module (common/pp_convention.h): its numbers as
 * docs/nvtx-convention.md states them, and the message grammar both ways, the formatter the
 * runtime registers its strings with against the parser the analyzer decodes them with. */
#include "pp_convention.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

Test(convention, numbers_are_the_documented_ones)
{
    /* docs/nvtx-convention.md, "At a glance": id 16806000, 40 bytes, domain "pipeprof" */
    cr_assert_eq(PP_NVTX_SCHEMA_ID, UINT64_C(16806000));
    cr_assert_str_eq(PP_NVTX_DOMAIN, "pipeprof");
    cr_assert_str_eq(PP_NVTX_SCHEMA_NAME, "pipeprof.event");
    cr_assert_eq(sizeof(pp_nvtx_event), 40);
    cr_assert_eq(PP_NVTX_STEP_OFFSET, 32);
    static const char *const names[] = {"kind", "stage", "mb",    "chunk",
                                        "layer", "peer", "bytes", "step"};
    static const uint32_t offsets[] = {0, 4, 8, 12, 16, 20, 24, 32};
    for (int i = 0; i < PP_NVTX_FIELD_COUNT; i++) {
        cr_assert_str_eq(pp_nvtx_fields[i].name, names[i]);
        cr_assert_eq(pp_nvtx_fields[i].offset, offsets[i], "%s", names[i]);
        cr_assert_eq(pp_nvtx_fields[i].size, i >= PP_NVTX_F_BYTES ? 8u : 4u, "%s", names[i]);
    }
    cr_assert_eq(pp_nvtx_fields[PP_NVTX_F_KIND].is_signed, 0);
    cr_assert_eq(pp_nvtx_fields[PP_NVTX_F_BYTES].is_signed, 0);
    cr_assert_eq(pp_nvtx_fields[PP_NVTX_F_STEP].is_signed, 1);
    cr_assert_eq(PP_NVTX_ALLREDUCE, 13);
    cr_assert_eq(PP_NVTX_KIND_COUNT, 14);
    cr_assert_eq(pp_nvtx_kind_color(PP_NVTX_FWD), 0xFF1E88E5u);
    cr_assert_str_eq(pp_nvtx_kind_word((pp_nvtx_kind)99), "unknown");
}

/* Every kind, formatted with a micro-batch, a chunk and a layer as its class takes them, reads
 * back as itself with the same numbers. */
Test(convention, every_kind_formats_and_parses_back)
{
    for (int k = 0; k < PP_NVTX_KIND_COUNT; k++) {
        for (int chunk = -1; chunk <= 2; chunk++) {
            char buf[160];
            pp_nvtx_message_format(buf, sizeof buf, (pp_nvtx_kind)k, 7, chunk, 3, NULL);
            pp_nvtx_message m;
            pp_nvtx_message_parse(buf, &m);
            cr_assert_eq(m.kind, k, "'%s'", buf);
            pp_nvtx_class c = pp_nvtx_kind_class((pp_nvtx_kind)k);
            cr_assert_eq(m.mb, c == PP_NVTX_CLASS_MB ? 7 : -1, "'%s'", buf);
            cr_assert_eq(m.chunk, c == PP_NVTX_CLASS_MB ? chunk : -1, "'%s'", buf);
            cr_assert_eq(m.layer, c == PP_NVTX_CLASS_LAYER ? 3 : -1, "'%s'", buf);
            cr_assert_eq(m.peer, -1, "'%s'", buf);
        }
    }
}

Test(convention, messages_read_as_documented)
{
    static const struct {
        const char *msg;
        int kind;
        int64_t mb, chunk, layer, peer;
    } cases[] = {
        {"fwd mb3", PP_NVTX_FWD, 3, -1, -1, -1},
        {"recv_grad mb0 c1 peer2", PP_NVTX_RECV_GRAD, 0, 1, -1, 2},
        {"send_act", PP_NVTX_SEND_ACT, -1, -1, -1, -1},
        {"block0 fwd", PP_NVTX_LAYER_FWD, -1, -1, -1, -1},
        {"layer12 bwd_weight", PP_NVTX_LAYER_BWD_WEIGHT, -1, -1, 12, -1},
        {"embedding bwd", PP_NVTX_LAYER_BWD, -1, -1, -1, -1},
        {"opt_step", PP_NVTX_OPT_STEP, -1, -1, -1, -1},
        {"allreduce", PP_NVTX_ALLREDUCE, -1, -1, -1, -1},
        {"step", PP_NVTX_STEP, -1, -1, -1, -1},
        {"fwd mb99999999999999999999", PP_NVTX_FWD, INT64_MAX, -1, -1, -1},
        {"fwd mbx c-1", PP_NVTX_FWD, -1, -1, -1, -1},
        {"block0 forward", PP_NVTX_KIND_NONE, -1, -1, -1, -1},
        /* the first token decides, and a layer name is one token */
        {"step fwd", PP_NVTX_STEP, -1, -1, -1, -1},
        {"my block fwd", PP_NVTX_KIND_NONE, -1, -1, -1, -1},
        {"hello", PP_NVTX_KIND_NONE, -1, -1, -1, -1},
        {"", PP_NVTX_KIND_NONE, -1, -1, -1, -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pp_nvtx_message m;
        pp_nvtx_message_parse(cases[i].msg, &m);
        cr_assert_eq(m.kind, cases[i].kind, "'%s'", cases[i].msg);
        cr_assert_eq(m.mb, cases[i].mb, "'%s'", cases[i].msg);
        cr_assert_eq(m.chunk, cases[i].chunk, "'%s'", cases[i].msg);
        cr_assert_eq(m.layer, cases[i].layer, "'%s'", cases[i].msg);
        cr_assert_eq(m.peer, cases[i].peer, "'%s'", cases[i].msg);
    }
    char name[8];
    pp_nvtx_message_layer_name("embedding fwd", name, sizeof name);
    cr_assert_str_eq(name, "embeddi"); /* cut to the buffer */
}

Test(convention, generic_and_named_messages)
{
    char buf[64];
    pp_nvtx_message_format(buf, sizeof buf, PP_NVTX_BWD, -1, 2, -1, NULL);
    cr_assert_str_eq(buf, "bwd");
    pp_nvtx_message_format(buf, sizeof buf, PP_NVTX_LAYER_FWD, -1, -1, -1, "block0");
    cr_assert_str_eq(buf, "layer fwd");
    pp_nvtx_message_format(buf, sizeof buf, PP_NVTX_LAYER_BWD, -1, -1, 4, "block3");
    cr_assert_str_eq(buf, "block3 bwd");
    pp_nvtx_message_format(buf, sizeof buf, PP_NVTX_LAYER_BWD, -1, -1, 4, "");
    cr_assert_str_eq(buf, "layer4 bwd");
    pp_nvtx_message_format(buf, sizeof buf, PP_NVTX_SEND_GRAD, 5, 0, -1, NULL);
    cr_assert_str_eq(buf, "send_grad mb5 c0");
}

static void count_kv(void *ctx, const char *k, const char *v)
{
    char *out = ctx;
    size_t n = strlen(out);
    snprintf(out + n, 128 - n, "[%s=%s]", k, v);
}

Test(convention, marks)
{
    cr_assert_eq(pp_nvtx_mark_kind("config S=2"), PP_NVTX_MARK_CONFIG);
    cr_assert_eq(pp_nvtx_mark_kind("layer index=0"), PP_NVTX_MARK_LAYER);
    cr_assert_eq(pp_nvtx_mark_kind("clocksync send peer=1 phase=0 seq=3"),
                 PP_NVTX_MARK_CLOCKSYNC);
    cr_assert_eq(pp_nvtx_mark_kind("layers"), PP_NVTX_MARK_NONE);
    char kv[128] = "";
    pp_nvtx_mark_each("config schedule=1f1b S=4 junk M=8", count_kv, kv);
    cr_assert_str_eq(kv, "[schedule=1f1b][S=4][M=8]");

    pp_nvtx_layer_info li;
    cr_assert(pp_nvtx_layer_mark_parse(
        "layer index=3 name=block2 param_bytes=197376 activation_bytes=262144", &li));
    cr_assert_eq(li.index, 3);
    cr_assert_str_eq(li.name, "block2");
    cr_assert_eq(li.param_bytes, 197376);
    cr_assert_eq(li.activation_bytes, 262144);
    cr_assert(!li.has_kept && !li.has_input); /* a mark from before the memory keys */
    cr_assert_not(pp_nvtx_layer_mark_parse("config S=2", &li));
    cr_assert_eq(li.index, -1);

    pp_nvtx_clocksync cs;
    cr_assert(pp_nvtx_clocksync_parse("clocksync recv peer=2 phase=1 seq=7", &cs));
    cr_assert(cs.recv == 1 && cs.peer == 2 && cs.phase == 1 && cs.seq == 7);
    cr_assert(pp_nvtx_clocksync_parse("clocksync send peer=0 phase=0 seq=0", &cs));
    cr_assert_eq(cs.recv, 0);
    cr_assert_not(pp_nvtx_clocksync_parse("clocksync both peer=0 phase=0 seq=0", &cs));
    cr_assert_not(pp_nvtx_clocksync_parse("clocksync send peer=0 phase=0", &cs));
    char buf[96];
    pp_nvtx_clocksync out = {.recv = 1, .peer = 3, .phase = 1, .seq = 12};
    pp_nvtx_clocksync_format(buf, sizeof buf, &out);
    cr_assert_str_eq(buf, "clocksync recv peer=3 phase=1 seq=12");
    cr_assert(pp_nvtx_clocksync_parse(buf, &cs));
    cr_assert(cs.recv == 1 && cs.peer == 3 && cs.phase == 1 && cs.seq == 12);

    /* the trainer's marks are written by the module and read back by it */
    char mark[320];
    pp_nvtx_layer_mark_format(mark, sizeof mark, 5, "block4", 7087872, 3145728, 0, 0, 0);
    cr_assert_str_eq(mark, "layer index=5 name=block4 param_bytes=7087872 activation_bytes=3145728");
    cr_assert(pp_nvtx_layer_mark_parse(mark, &li));
    cr_assert(li.index == 5 && li.param_bytes == 7087872 && li.activation_bytes == 3145728);
    cr_assert_str_eq(li.name, "block4");
    pp_nvtx_layer_mark_format(mark, sizeof mark, 5, "block4", 7087872, 3145728, 1, 94371840,
                              3145728);
    cr_assert_str_eq(mark, "layer index=5 name=block4 param_bytes=7087872 activation_bytes=3145728 "
                           "kept_bytes=94371840 input_bytes=3145728");
    cr_assert(pp_nvtx_layer_mark_parse(mark, &li));
    cr_assert(li.has_kept && li.kept_bytes == 94371840 && li.has_input &&
              li.input_bytes == 3145728);
    pp_nvtx_config_info ci = {.schedule = "zb-h1", .S = 4, .M = 8, .v = 1, .layers = 8,
                              .samples_per_step = 16, .tokens_per_step = 0, .backend = "sim",
                              .dp = 1, .replica = 0, .schedules = "gpipe,1f1b"};
    pp_nvtx_config_mark_format(mark, sizeof mark, &ci);
    cr_assert_str_eq(mark, "config schedule=zb-h1 S=4 M=8 v=1 layers=8 samples_per_step=16 "
                           "tokens_per_step=0 backend=sim dp=1 replica=0 schedules=gpipe,1f1b");
    cr_assert_eq(pp_nvtx_mark_kind(mark), PP_NVTX_MARK_CONFIG);
}

/* docs/nvtx-convention.md, decoding rule: send_act and recv_grad go to stage + 1, recv_act and
 * send_grad to stage - 1, wrapping over the stages. */
Test(convention, implied_peers)
{
    cr_assert_eq(pp_nvtx_implied_peer(PP_NVTX_SEND_ACT, 1, 4), 2);
    cr_assert_eq(pp_nvtx_implied_peer(PP_NVTX_RECV_GRAD, 3, 4), 0);
    cr_assert_eq(pp_nvtx_implied_peer(PP_NVTX_RECV_ACT, 0, 4), 3);
    cr_assert_eq(pp_nvtx_implied_peer(PP_NVTX_SEND_GRAD, 2, 4), 1);
}
