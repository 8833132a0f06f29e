/* test_pipeline_files.c: unit tests of what a pipeline run reads besides the schedule
 * (plan/partition.c, costs.c, plan.c): partitions of the layer list, the cost file and the
 * plan file, including every way each can be rejected and the message the user then sees. */
#include "pp_plan.h"

#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every test gets a fresh directory for its files (pp_testkit), removed afterwards. */
static void setup(void) { tk_dir_create("pp_test_pipeline"); }
static void teardown(void) { tk_dir_remove(); }

TestSuite(partition);
TestSuite(costs, .init = setup, .fini = teardown);
TestSuite(plan, .init = setup, .fini = teardown);

static void path_in_dir(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s", tk_path(name));
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    cr_assert_eq(fclose(f), 0);
}

static void assert_bounds(const pp_partition *p, const int *want, int n)
{
    cr_assert_eq(p->P + 1, n);
    cr_assert_eq(p->S * p->v, p->P);
    for (int i = 0; i < n; i++)
        cr_assert_eq(p->bounds[i], want[i], "bounds[%d] = %d, want %d", i, p->bounds[i], want[i]);
}

/* ======================================================================================== */
/* Partition                                                                                  */
/* ======================================================================================== */

Test(partition, even_split_puts_the_remainder_on_later_pieces)
{
    pp_partition p;
    cr_assert_eq(pp_partition_even(14, 4, 1, &p), PP_OK);
    cr_assert_eq(p.L, 14);
    cr_assert_eq(p.S, 4);
    cr_assert_eq(p.v, 1);
    assert_bounds(&p, (const int[]){0, 3, 6, 10, 14}, 5);
    pp_partition_free(&p);

    cr_assert_eq(pp_partition_even(12, 4, 1, &p), PP_OK);
    assert_bounds(&p, (const int[]){0, 3, 6, 9, 12}, 5);
    pp_partition_free(&p);
}

Test(partition, even_split_with_one_layer_per_piece)
{
    pp_partition p;
    cr_assert_eq(pp_partition_even(6, 3, 2, &p), PP_OK);
    assert_bounds(&p, (const int[]){0, 1, 2, 3, 4, 5, 6}, 7);
    pp_partition_free(&p);
    cr_assert_eq(pp_partition_even(1, 1, 1, &p), PP_OK);
    assert_bounds(&p, (const int[]){0, 1}, 2);
    pp_partition_free(&p);
}

Test(partition, even_split_with_virtual_stages_cuts_S_times_v_pieces)
{
    pp_partition p;
    cr_assert_eq(pp_partition_even(14, 2, 2, &p), PP_OK);
    cr_assert_eq(p.S, 2);
    cr_assert_eq(p.v, 2);
    cr_assert_eq(p.P, 4);
    assert_bounds(&p, (const int[]){0, 3, 6, 10, 14}, 5);
    pp_partition_free(&p);
}

Test(partition, even_split_rejects_more_pieces_than_layers)
{
    pp_partition p;
    cr_assert_eq(pp_partition_even(3, 2, 2, &p), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "4 pieces"), "%s", pp_error_message());
    cr_assert(strstr(pp_error_message(), "3 layers"), "%s", pp_error_message());
    cr_assert_null(p.bounds);
    pp_partition_free(&p); /* safe after a failure */
    cr_assert_eq(pp_partition_even(14, 0, 1, &p), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "stages must be >= 1"), "%s", pp_error_message());
    cr_assert_eq(pp_partition_even(14, 2, 0, &p), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "virtual stages must be >= 1"), "%s",
              pp_error_message());
    cr_assert_eq(pp_partition_even(14, 65536, 65536, &p), PP_ERR_INVALID);
}

Test(partition, explicit_bounds_are_kept)
{
    pp_partition p;
    const int b[] = {0, 3, 7, 12, 14};
    cr_assert_eq(pp_partition_from_bounds(b, 5, 14, 4, 1, &p), PP_OK);
    assert_bounds(&p, b, 5);
    pp_partition_free(&p);
    cr_assert_eq(pp_partition_from_bounds(b, 5, 14, 2, 2, &p), PP_OK);
    cr_assert_eq(p.S, 2);
    cr_assert_eq(p.v, 2);
    pp_partition_free(&p);
}

typedef struct bad_bounds {
    int bounds[8];
    int n, L, S, v;
    const char *phrase;
} bad_bounds;

static const bad_bounds k_bad_bounds[] = {
    {{0, 3, 7, 7, 14}, 5, 14, 4, 1, "boundaries not increasing at position 3 (7 after 7)"},
    {{0, 5, 3, 10, 14}, 5, 14, 4, 1, "boundaries not increasing at position 2 (3 after 5)"},
    {{1, 3, 7, 12, 14}, 5, 14, 4, 1, "first boundary 1 must be 0"},
    {{0, 3, 7, 12, 13}, 5, 14, 4, 1, "last boundary 13 must equal the model's 14 layers"},
    {{0, 3, 7, 20, 14}, 5, 14, 4, 1, "boundary 20 at position 3 is out of range [0, 14]"},
    {{0, -1, 7, 12, 14}, 5, 14, 4, 1, "boundary -1 at position 1 is out of range"},
    {{0, 7, 14}, 3, 14, 4, 1, "expected 5 boundaries (4 stages x 1 virtual + 1) but got 3"},
    {{0, 3, 7, 12, 14}, 5, 14, 4, 2, "expected 9 boundaries (4 stages x 2 virtual + 1)"},
    {{0, 1, 2, 3}, 4, 2, 3, 1, "3 pieces (3 stages x 1 virtual) exceed the model's 2 layers"},
};

Test(partition, explicit_bounds_reject_each_bad_list_naming_the_value)
{
    for (size_t i = 0; i < sizeof k_bad_bounds / sizeof k_bad_bounds[0]; i++) {
        const bad_bounds *c = &k_bad_bounds[i];
        pp_partition p;
        pp_error_clear();
        cr_expect_eq(pp_partition_from_bounds(c->bounds, c->n, c->L, c->S, c->v, &p),
                     PP_ERR_INVALID, "case %zu", i);
        cr_expect(strstr(pp_error_message(), c->phrase), "case %zu: '%s' lacks '%s'", i,
                  pp_error_message(), c->phrase);
        cr_expect_null(p.bounds, "case %zu", i);
    }
}

Test(partition, parse_infers_stages_from_virtual_stages)
{
    pp_partition p;
    cr_assert_eq(pp_partition_parse("0,3,7,12,14", 14, 1, &p), PP_OK);
    cr_assert_eq(p.S, 4);
    assert_bounds(&p, (const int[]){0, 3, 7, 12, 14}, 5);
    pp_partition_free(&p);
    cr_assert_eq(pp_partition_parse("0,3,7,12,14", 14, 2, &p), PP_OK);
    cr_assert_eq(p.S, 2);
    cr_assert_eq(p.v, 2);
    pp_partition_free(&p);
    cr_assert_eq(pp_partition_parse("0,14", 14, 1, &p), PP_OK);
    cr_assert_eq(p.S, 1);
    pp_partition_free(&p);
}

typedef struct bad_text {
    const char *text;
    int L, v;
    const char *phrase;
} bad_text;

static const bad_text k_bad_text[] = {
    {"", 14, 1, "empty boundary list"},
    {"0,3,,12,14", 14, 1, "empty field at position 2"},
    {"0,3,7,12,14,", 14, 1, "empty field at position 5"},
    {",0,3,7,14", 14, 1, "empty field at position 0"},
    {"0, 3,7,12,14", 14, 1, "' 3' at position 1 is not an integer"},
    {"0,3 ,7,12,14", 14, 1, "'3 ' at position 1 is not an integer"},
    {"0,3,x,12,14", 14, 1, "'x' at position 2 is not an integer"},
    {"0,3.5,7,12,14", 14, 1, "'3.5' at position 1 is not an integer"},
    {"0,+3,7,12,14", 14, 1, "'+3' at position 1 is not an integer"},
    {"0,-,7,12,14", 14, 1, "'-' at position 1 is not an integer"},
    {"0,99999999999,14", 14, 1, "99999999999 at position 1 is out of range"},
    {"14", 14, 1, "at least 2 are needed"},
    {"0,3,7,12", 14, 1, "last boundary 12 must equal the model's 14 layers"},
    {"0,7,7,14", 14, 1, "boundaries not increasing at position 2 (7 after 7)"},
    {"0,3,7,14", 14, 2, "3 pieces (4 boundaries) is not a multiple of 2 virtual stages"},
    {"0,3,7,14", 14, 0, "virtual stages must be >= 1"},
};

Test(partition, parse_rejects_each_bad_text_naming_the_field)
{
    for (size_t i = 0; i < sizeof k_bad_text / sizeof k_bad_text[0]; i++) {
        const bad_text *c = &k_bad_text[i];
        pp_partition p;
        pp_error_clear();
        cr_expect_eq(pp_partition_parse(c->text, c->L, c->v, &p), PP_ERR_INVALID, "case %zu",
                     i);
        cr_expect(strstr(pp_error_message(), c->phrase), "case %zu ('%s'): '%s' lacks '%s'", i,
                  c->text, pp_error_message(), c->phrase);
        cr_expect_null(p.bounds, "case %zu", i);
    }
    pp_partition p;
    cr_assert_eq(pp_partition_parse(NULL, 14, 1, &p), PP_ERR_INVALID);
}

Test(partition, format_writes_the_parse_form_and_truncates_at_whole_values)
{
    pp_partition p;
    cr_assert_eq(pp_partition_even(14, 4, 1, &p), PP_OK);
    char buf[64];
    pp_partition_format(&p, buf, sizeof buf);
    cr_assert_str_eq(buf, "0,3,6,10,14");
    pp_partition q;
    cr_assert_eq(pp_partition_parse(buf, 14, 1, &q), PP_OK);
    assert_bounds(&q, p.bounds, 5);
    pp_partition_free(&q);
    /* "0,3,6,10" needs 9 bytes with the NUL; with 8 the last whole value that fits is 6. */
    pp_partition_format(&p, buf, 8);
    cr_assert_str_eq(buf, "0,3,6");
    buf[0] = 'x';
    pp_partition_format(&p, buf, 0); /* nothing written */
    cr_assert_eq(buf[0], 'x');
    pp_partition_free(&p);
    pp_partition_free(&p); /* twice is safe */
    pp_partition_free(NULL);
}

/* ======================================================================================== */
/* Cost file                                                                                  */
/* ======================================================================================== */

static const char k_design_costs[] =
    "{\"layers\": [{\"name\": \"block0\", \"fwd_us\": 1000, \"bwd_us\": 2000,\n"
    "              \"bwd_input_us\": 1000, \"bwd_weight_us\": 1000,\n"
    "              \"activation_bytes\": 3145728, \"param_bytes\": 7087872},\n"
    "             {\"name\": \"head\", \"fwd_us\": 250.5, \"bwd_us\": 500}],\n"
    " \"p2p_GBps\": 20.0, \"p2p_latency_us\": 15.0, \"optimizer_us\": 500}\n";

Test(costs, loads_the_documented_example_with_defaults_for_absent_fields)
{
    char path[256];
    path_in_dir(path, sizeof path, "costs.json");
    write_text(path, k_design_costs);
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_load(path, &c), PP_OK, "%s", pp_error_message());
    cr_assert_eq(c->n_layers, 2);
    const pp_layer_cost *l = &c->layers[0];
    cr_assert_str_eq(l->name, "block0");
    cr_assert_eq(l->fwd_us, 1000);
    cr_assert_eq(l->bwd_us, 2000);
    cr_assert_eq(l->has_split, 1);
    cr_assert_eq(l->bwd_input_us, 1000);
    cr_assert_eq(l->bwd_weight_us, 1000);
    cr_assert_eq(l->activation_bytes, 3145728u);
    cr_assert_eq(l->param_bytes, 7087872u);
    l = &c->layers[1];
    cr_assert_str_eq(l->name, "head");
    cr_assert_eq(l->fwd_us, 250.5);
    cr_assert_eq(l->has_split, 0);
    cr_assert_eq(l->bwd_input_us, 0);
    cr_assert_eq(l->bwd_weight_us, 0);
    cr_assert_eq(l->activation_bytes, 0u);
    cr_assert_eq(l->param_bytes, 0u);
    cr_assert_eq(c->p2p_GBps, 20.0);
    cr_assert_eq(c->p2p_latency_us, 15.0);
    cr_assert_eq(c->optimizer_us, 500);
    cr_assert_eq(c->microbatch_size, 0);
    pp_costs_destroy(c);

    cr_assert_eq(pp_costs_parse("{\"version\": 1, \"microbatch_size\": 4, \"layers\": "
                                "[{\"name\": \"a\", \"fwd_us\": 0, \"bwd_us\": 0}]}",
                                "t.json", &c),
                 PP_OK, "%s", pp_error_message());
    cr_assert_eq(c->microbatch_size, 4);
    cr_assert_eq(c->p2p_GBps, 0);
    cr_assert_eq(c->p2p_latency_us, 0);
    cr_assert_eq(c->optimizer_us, 0);
    pp_costs_destroy(c);
    pp_costs_destroy(NULL);
}

Test(costs, missing_file_is_an_io_error_naming_the_path)
{
    char path[256];
    path_in_dir(path, sizeof path, "absent.json");
    pp_costs *c = (pp_costs *)1;
    cr_assert_eq(pp_costs_load(path, &c), PP_ERR_IO);
    cr_assert_null(c);
    cr_assert(strstr(pp_error_message(), "cost file"), "%s", pp_error_message());
    cr_assert(strstr(pp_error_message(), path), "%s", pp_error_message());
}

Test(costs, bad_content_in_a_file_names_the_file)
{
    char path[256];
    path_in_dir(path, sizeof path, "bad.json");
    write_text(path, "{\"layers\": [{\"name\": \"a\", \"fwd_us\": -1, \"bwd_us\": 0}]}");
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_load(path, &c), PP_ERR_INVALID);
    cr_assert_null(c);
    char want[320];
    snprintf(want, sizeof want, "cost file '%s': layer 0 (\"a\"): \"fwd_us\"", path);
    cr_assert(strstr(pp_error_message(), want), "%s", pp_error_message());
}

typedef struct bad_json {
    const char *json;
    const char *phrase;
} bad_json;

#define LAYER_A "{\"name\": \"a\", \"fwd_us\": 1, \"bwd_us\": 2}"

static const bad_json k_bad_costs[] = {
    {"{\"layers\": [", "cost file 't.json': invalid JSON at line 1"},
    {"{\"layers\": [" LAYER_A "]}\n\n  x", "invalid JSON at line 3, column 3"},
    {"", "invalid JSON"},
    {"[]", "cost file 't.json': must be a JSON object (got an array)"},
    {"{}", "cost file 't.json': missing \"layers\""},
    {"{\"layers\": []}", "\"layers\" must hold 1 to 100000 layers (got 0)"},
    {"{\"layers\": {}}", "\"layers\" must be an array (got an object)"},
    {"{\"layers\": [1]}", "layer 0: must be an object (got a number)"},
    {"{\"layers\": [{\"name\": \"a\", \"fwd_us\": -1, \"bwd_us\": 2}]}",
     "cost file 't.json': layer 0 (\"a\"): \"fwd_us\" must be a number >= 0 (got -1)"},
    {"{\"layers\": [" LAYER_A ", {\"name\": \"b\", \"fwd_us\": \"1\", \"bwd_us\": 2}]}",
     "layer 1 (\"b\"): \"fwd_us\" must be a number >= 0 (got a string)"},
    {"{\"layers\": [{\"name\": \"a\", \"fwd_us\": 1e999, \"bwd_us\": 2}]}",
     "\"fwd_us\" must be a finite number"},
    {"{\"layers\": [{\"name\": \"a\", \"fwd_us\": 1}]}", "layer 0 (\"a\"): missing \"bwd_us\""},
    {"{\"layers\": [{\"name\": \"a\", \"bwd_us\": 1}]}", "layer 0 (\"a\"): missing \"fwd_us\""},
    {"{\"layers\": [{\"fwd_us\": 1, \"bwd_us\": 1}]}", "layer 0: missing \"name\""},
    {"{\"layers\": [{\"name\": \"a\", \"fwd_us\": 1, \"bwd_us\": 2, \"bwd_input_us\": 1}]}",
     "layer 0 (\"a\"): \"bwd_input_us\" without \"bwd_weight_us\""},
    {"{\"layers\": [{\"name\": \"a\", \"fwd_us\": 1, \"bwd_us\": 2, \"bwd_weight_us\": 1}]}",
     "\"bwd_weight_us\" without \"bwd_input_us\""},
    {"{\"layers\": [{\"name\": \"a\", \"fwd_us\": 1, \"bwd_us\": 2, \"bwd_input_us\": -1, "
     "\"bwd_weight_us\": 1}]}",
     "\"bwd_input_us\" must be a number >= 0"},
    {"{\"layers\": [" LAYER_A "], \"p2p_gbps\": 20}",
     "cost file 't.json': unknown key \"p2p_gbps\""},
    {"{\"layers\": [" LAYER_A ", {\"name\": \"b\", \"fwd\": 1, \"fwd_us\": 1, \"bwd_us\": 2}]}",
     "layer 1 (\"b\"): unknown key \"fwd\""},
    {"{\"layers\": [" LAYER_A "], \"layers\": [" LAYER_A "]}", "duplicate key \"layers\""},
    {"{\"version\": 2, \"layers\": [" LAYER_A "]}", "unsupported version 2"},
    {"{\"version\": \"1\", \"layers\": [" LAYER_A "]}", "\"version\" must be an integer"},
    {"{\"layers\": [{\"name\": \"a234567890123456789012345678901234567890123456789012345678901234\""
     ", \"fwd_us\": 1, \"bwd_us\": 2}]}",
     "layer 0: \"name\" must have 1 to 63 characters (got 64)"},
    {"{\"layers\": [{\"name\": \"\", \"fwd_us\": 1, \"bwd_us\": 2}]}",
     "\"name\" must have 1 to 63 characters (got 0)"},
    {"{\"layers\": [{\"name\": 7, \"fwd_us\": 1, \"bwd_us\": 2}]}",
     "\"name\" must be a string (got a number)"},
    {"{\"layers\": [{\"name\": \"a\", \"fwd_us\": 1, \"bwd_us\": 2, \"activation_bytes\": 1.5}]}",
     "\"activation_bytes\" must be an integer (got 1.5)"},
    {"{\"layers\": [{\"name\": \"a\", \"fwd_us\": 1, \"bwd_us\": 2, \"activation_bytes\": -1}]}",
     "\"activation_bytes\" -1 is out of range"},
    {"{\"layers\": [{\"name\": \"a\", \"fwd_us\": 1, \"bwd_us\": 2, \"param_bytes\": 1e17}]}",
     "\"param_bytes\" 1e+17 is out of range"},
    {"{\"layers\": [{\"name\": \"a\", \"fwd_us\": 1, \"bwd_us\": 2, \"kept_bytes\": 10}]}",
     "\"kept_bytes\" without \"input_bytes\" (give both memory sizes or neither)"},
    {"{\"layers\": [{\"name\": \"a\", \"fwd_us\": 1, \"bwd_us\": 2, \"kept_bytes\": 10, "
     "\"input_bytes\": -2}]}",
     "\"input_bytes\" -2 is out of range"},
    {"{\"layers\": [" LAYER_A "], \"p2p_GBps\": -1}", "\"p2p_GBps\" must be a number >= 0"},
    {"{\"layers\": [" LAYER_A "], \"p2p_latency_us\": null}",
     "\"p2p_latency_us\" must be a number >= 0 (got null)"},
    {"{\"layers\": [" LAYER_A "], \"optimizer_us\": true}",
     "\"optimizer_us\" must be a number >= 0 (got a boolean)"},
    {"{\"layers\": [" LAYER_A "], \"optimizer_us_per_MB\": -1}", "optimizer_us_per_MB"},
    {"{\"layers\": [" LAYER_A "], \"grad_norm_us\": \"1\"}", "grad_norm_us"},
    {"{\"layers\": [" LAYER_A "], \"step_fixed_us\": 1e999}", "step_fixed_us"},
    {"{\"layers\": [" LAYER_A "], \"send_act_us\": -0.5}", "\"send_act_us\" must be a number >= 0"},
    {"{\"layers\": [" LAYER_A "], \"send_grad_us\": [1]}", "send_grad_us"},
    {"{\"layers\": [" LAYER_A "], \"recv_act_us\": -2}", "\"recv_act_us\" must be a number >= 0"},
    {"{\"layers\": [" LAYER_A "], \"recv_grad_us\": \"5\"}", "recv_grad_us"},
    {"{\"layers\": [" LAYER_A "], \"dp_allreduce_us\": -3}",
     "\"dp_allreduce_us\" must be a number >= 0"},
    {"{\"layers\": [" LAYER_A "], \"dp_allreduce_us_per_MB\": {}}", "dp_allreduce_us_per_MB"},
    {"{\"layers\": [" LAYER_A "], \"op_gap_us\": -1}", "\"op_gap_us\" must be a number >= 0"},
    {"{\"layers\": [" LAYER_A "], \"microbatch_size\": 0}",
     "\"microbatch_size\" 0 is out of range"},
    /* the writer would write U+FFFD for the byte (tests/fuzz_costs.c found it) */
    {"{\"layers\": [{\"name\": \"b\xfc\", \"fwd_us\": 1, \"bwd_us\": 2}]}",
     "layer 0: \"name\" is not valid UTF-8"},
};

Test(costs, rejects_each_bad_file_naming_origin_layer_and_field)
{
    for (size_t i = 0; i < sizeof k_bad_costs / sizeof k_bad_costs[0]; i++) {
        const bad_json *c = &k_bad_costs[i];
        pp_costs *out = NULL;
        pp_error_clear();
        cr_expect_eq(pp_costs_parse(c->json, "t.json", &out), PP_ERR_INVALID, "case %zu", i);
        cr_expect_null(out, "case %zu", i);
        cr_expect(strstr(pp_error_message(), c->phrase), "case %zu: '%s' lacks '%s'", i,
                  pp_error_message(), c->phrase);
        cr_expect(strstr(pp_error_message(), "cost file 't.json'"), "case %zu: '%s'", i,
                  pp_error_message());
        pp_costs_destroy(out);
    }
}

Test(costs, rejects_more_than_the_layer_cap)
{
    const char *layer = "{\"name\":\"a\",\"fwd_us\":0,\"bwd_us\":0},";
    size_t n = 100001, ll = strlen(layer);
    char *text = malloc(n * ll + 64);
    cr_assert_not_null(text);
    char *w = text + sprintf(text, "{\"layers\":[");
    for (size_t i = 0; i < n; i++, w += ll)
        memcpy(w, layer, ll);
    strcpy(w - 1, "]}"); /* over the last comma */
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_parse(text, "big.json", &c), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "(got 100001)"), "%s", pp_error_message());
    free(text);
}

Test(costs, transfer_time_is_latency_plus_bytes_over_bandwidth)
{
    pp_costs c = {.p2p_GBps = 20.0, .p2p_latency_us = 15.0};
    /* 3145728 B at 20e9 B/s = 157.2864 us; the tolerance covers one rounding of the divide. */
    cr_assert_float_eq(pp_costs_transfer_us(&c, 3145728), 15.0 + 157.2864, 1e-9);
    cr_assert_eq(pp_costs_transfer_us(&c, 0), 15.0);
    c = (pp_costs){.p2p_GBps = 1.0};
    cr_assert_float_eq(pp_costs_transfer_us(&c, 1000000000u), 1e6, 1e-6); /* 1 GB at 1 GB/s */
    c = (pp_costs){.p2p_GBps = 0, .p2p_latency_us = 7};
    cr_assert_eq(pp_costs_transfer_us(&c, 1u << 30), 7.0); /* no bandwidth term */
}

/* The one cost rule: a layer without split costs gives each backward half bwd_us / 2; a piece
 * sums its layers; the optimizer step is optimizer_us plus its per-MB and per-step terms; a boundary carries
 * the activation of the layer before it, nothing at the ends. */
Test(costs, the_cost_rule_halves_bwd_without_a_split_and_sums_a_piece)
{
    pp_layer_cost lay[3] = {
        {.fwd_us = 10, .bwd_us = 30, .activation_bytes = 100},
        {.fwd_us = 20, .bwd_us = 50, .bwd_input_us = 35, .bwd_weight_us = 5, .has_split = 1,
         .activation_bytes = 200},
        {.fwd_us = 40, .bwd_us = 80, .activation_bytes = 300},
    };
    pp_costs c = {.n_layers = 3, .layers = lay, .optimizer_us = 7};
    cr_assert_eq(pp_costs_layer_us(&lay[0], PP_OP_BWD_INPUT), 15.0);
    cr_assert_eq(pp_costs_layer_us(&lay[0], PP_OP_BWD_WEIGHT), 15.0);
    cr_assert_eq(pp_costs_layer_us(&lay[1], PP_OP_BWD_INPUT), 35.0);
    cr_assert_eq(pp_costs_layer_us(&lay[1], PP_OP_BWD_WEIGHT), 5.0);
    cr_assert_eq(pp_costs_layer_us(&lay[1], PP_OP_BWD), 50.0);
    cr_assert_eq(pp_costs_layer_us(&lay[2], PP_OP_SEND_ACT), 0.0);
    cr_assert_eq(pp_costs_op_us(&c, PP_OP_FWD, 0, 3), 70.0);
    cr_assert_eq(pp_costs_op_us(&c, PP_OP_BWD_INPUT, 0, 2), 50.0);
    cr_assert_eq(pp_costs_op_us(&c, PP_OP_BWD_WEIGHT, 1, 3), 45.0);
    cr_assert_eq(pp_costs_op_us(&c, PP_OP_OPT_STEP, 1, 2), 7.0);
    /* the optimizer's named terms: per MB of the piece's parameters, and the two per-step ones */
    lay[1].param_bytes = 2000000;
    lay[2].param_bytes = 500000;
    c.optimizer_us_per_MB = 4;
    c.grad_norm_us = 0.5;
    c.step_fixed_us = 0.25;
    cr_assert_eq(pp_costs_param_bytes(&c, 0, 3), 2500000);
    cr_assert_eq(pp_costs_op_us(&c, PP_OP_OPT_STEP, 1, 2), 7 + 8 + 0.5 + 0.25);
    cr_assert_eq(pp_costs_opt_us(&c, 2500000), 7 + 10 + 0.5 + 0.25);
    cr_assert_eq(pp_costs_op_us(&c, PP_OP_OPT_STEP, 0, 1), 7 + 0.5 + 0.25);
    c.send_act_us = 1.5;
    c.send_grad_us = 20;
    cr_assert_eq(pp_costs_send_us(&c, 0), 1.5);
    cr_assert_eq(pp_costs_send_us(&c, 1), 20);
    cr_assert_eq(pp_costs_op_us(&c, PP_OP_SEND_ACT, 0, 3), 0); /* a message is not an op's cost */
    c.recv_act_us = 2.5;
    c.recv_grad_us = 30;
    cr_assert_eq(pp_costs_recv_us(&c, 0), 2.5);
    cr_assert_eq(pp_costs_recv_us(&c, 1), 30);
    cr_assert_eq(pp_costs_op_us(&c, PP_OP_RECV_GRAD, 0, 3), 0);
    /* the data-parallel all-reduce before the barrier: apart from the optimizer step */
    cr_assert(!pp_costs_has_dp_allreduce(&c));
    c.dp_allreduce_us = 30;
    c.dp_allreduce_us_per_MB = 6;
    cr_assert(pp_costs_has_dp_allreduce(&c));
    cr_assert_eq(pp_costs_dp_allreduce_us(&c, 2500000), 30 + 15);
    cr_assert_eq(pp_costs_opt_us(&c, 2500000), 7 + 10 + 0.5 + 0.25);
    cr_assert_eq(pp_costs_boundary_bytes(&c, 0), 0);
    cr_assert_eq(pp_costs_boundary_bytes(&c, 1), 100);
    cr_assert_eq(pp_costs_boundary_bytes(&c, 2), 200);
    cr_assert_eq(pp_costs_boundary_bytes(&c, 3), 0);
}

Test(costs, write_then_load_gives_back_exactly_the_same_values)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(3, 1.0, 2.0, 10, &c), PP_OK);
    c->p2p_GBps = 0.1;
    c->p2p_latency_us = 1.0 / 3.0;
    c->optimizer_us = 123456789.123456789;
    c->optimizer_us_per_MB = 1.0 / 7.0;
    c->grad_norm_us = 0.1 + 0.7;
    c->step_fixed_us = 3e-5;
    c->send_act_us = 1.0 / 9.0;
    c->send_grad_us = 16.25;
    c->recv_act_us = 1.0 / 13.0;
    c->recv_grad_us = 4e-6;
    c->dp_allreduce_us = 2.0 / 3.0;
    c->dp_allreduce_us_per_MB = 1e-9;
    c->op_gap_us = 1.0 / 11.0;
    c->microbatch_size = 8;
    snprintf(c->layers[0].name, sizeof c->layers[0].name, "q\"uote\\back\nline\tt");
    c->layers[0].fwd_us = 1e-7;
    c->layers[0].bwd_us = 2.0 / 3.0;
    c->layers[0].bwd_input_us = 0.1 + 0.2;
    c->layers[0].bwd_weight_us = 5e300;
    c->layers[0].activation_bytes = 9007199254740992u; /* 2^53, the largest allowed */
    c->layers[0].param_bytes = 4294967297u;
    c->layers[1].has_split = 0;
    c->layers[1].bwd_input_us = 0;
    c->layers[1].bwd_weight_us = 0;
    c->layers[2].fwd_us = 0;
    c->layers[2].has_kept = 1; /* the memory model's keys (issue 17) */
    c->layers[2].kept_bytes = 9007199254740992u;
    c->layers[2].input_bytes = 0;
    char path[256];
    path_in_dir(path, sizeof path, "rt.json");
    cr_assert_eq(pp_costs_write(c, path), PP_OK, "%s", pp_error_message());
    pp_costs *d = NULL;
    cr_assert_eq(pp_costs_load(path, &d), PP_OK, "%s", pp_error_message());
    cr_assert_eq(d->n_layers, c->n_layers);
    cr_assert_eq(d->p2p_GBps, c->p2p_GBps);
    cr_assert_eq(d->p2p_latency_us, c->p2p_latency_us);
    cr_assert_eq(d->optimizer_us, c->optimizer_us);
    cr_assert_eq(d->optimizer_us_per_MB, c->optimizer_us_per_MB);
    cr_assert_eq(d->grad_norm_us, c->grad_norm_us);
    cr_assert_eq(d->step_fixed_us, c->step_fixed_us);
    cr_assert_eq(d->send_act_us, c->send_act_us);
    cr_assert_eq(d->send_grad_us, c->send_grad_us);
    cr_assert_eq(d->recv_act_us, c->recv_act_us);
    cr_assert_eq(d->recv_grad_us, c->recv_grad_us);
    cr_assert_eq(d->dp_allreduce_us, c->dp_allreduce_us);
    cr_assert_eq(d->dp_allreduce_us_per_MB, c->dp_allreduce_us_per_MB);
    cr_assert_eq(d->op_gap_us, c->op_gap_us);
    cr_assert_eq(d->microbatch_size, 8);
    for (int i = 0; i < c->n_layers; i++) {
        const pp_layer_cost *a = &c->layers[i], *b = &d->layers[i];
        cr_assert_str_eq(b->name, a->name);
        cr_assert_eq(b->fwd_us, a->fwd_us, "layer %d", i);
        cr_assert_eq(b->bwd_us, a->bwd_us, "layer %d", i);
        cr_assert_eq(b->has_split, a->has_split, "layer %d", i);
        cr_assert_eq(b->bwd_input_us, a->bwd_input_us, "layer %d", i);
        cr_assert_eq(b->bwd_weight_us, a->bwd_weight_us, "layer %d", i);
        cr_assert_eq(b->activation_bytes, a->activation_bytes, "layer %d", i);
        cr_assert_eq(b->param_bytes, a->param_bytes, "layer %d", i);
        cr_assert_eq(b->has_kept, a->has_kept, "layer %d", i);
        cr_assert_eq(b->kept_bytes, a->kept_bytes, "layer %d", i);
        cr_assert_eq(b->input_bytes, a->input_bytes, "layer %d", i);
    }
    pp_costs_destroy(d);
    pp_costs_destroy(c);
}

Test(costs, write_refuses_values_the_loader_would_reject)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(2, 1.0, 2.0, 0, &c), PP_OK);
    c->layers[1].fwd_us = NAN;
    char path[256];
    path_in_dir(path, sizeof path, "nan.json");
    cr_assert_eq(pp_costs_write(c, path), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "layer 1 (\"layer1\")"), "%s", pp_error_message());
    cr_assert_eq(access(path, F_OK), -1); /* nothing written */
    c->layers[1].fwd_us = 1;
    c->layers[0].param_bytes = 9007199254740993u;
    cr_assert_eq(pp_costs_write(c, path), PP_ERR_INVALID);
    pp_costs_destroy(c);
}

Test(costs, uniform_names_layers_and_splits_backward_in_halves)
{
    pp_costs *c = NULL;
    cr_assert_eq(pp_costs_uniform(12, 100.0, 300.0, 4096, &c), PP_OK);
    cr_assert_eq(c->n_layers, 12);
    for (int i = 0; i < 12; i++) {
        char want[16];
        snprintf(want, sizeof want, "layer%d", i);
        cr_assert_str_eq(c->layers[i].name, want);
        cr_assert_eq(c->layers[i].fwd_us, 100.0);
        cr_assert_eq(c->layers[i].bwd_us, 300.0);
        cr_assert_eq(c->layers[i].has_split, 1);
        cr_assert_eq(c->layers[i].bwd_input_us, 150.0);
        cr_assert_eq(c->layers[i].bwd_weight_us, 150.0);
        cr_assert_eq(c->layers[i].activation_bytes, 4096u);
        cr_assert_eq(c->layers[i].param_bytes, 0u);
    }
    cr_assert_eq(c->p2p_GBps, 0);
    cr_assert_eq(c->p2p_latency_us, 0);
    pp_costs_destroy(c);
    cr_assert_eq(pp_costs_uniform(0, 1, 1, 0, &c), PP_ERR_INVALID);
    cr_assert_null(c);
    cr_assert_eq(pp_costs_uniform(2, -1, 1, 0, &c), PP_ERR_INVALID);
}

/* ======================================================================================== */
/* Plan file                                                                                  */
/* ======================================================================================== */

static const char k_example_plan[] =
    "{\"version\": 1, \"num_layers\": 14, \"stages\": 4, \"virtual_stages\": 1,\n"
    " \"boundaries\": [0,3,7,12,14], \"schedule\": \"1f1b\", \"microbatches\": 8,\n"
    " \"microbatch_size\": 2, \"memory_limit_bytes\": 0,\n"
    " \"predicted\": {\"step_ms\": 66.0, \"bubble_ratio\": 0.27}, \"baseline\": \"runs/run1\"}\n";

Test(plan, loads_the_documented_example)
{
    char path[256];
    path_in_dir(path, sizeof path, "plan.json");
    write_text(path, k_example_plan);
    pp_plan p;
    cr_assert_eq(pp_plan_load(path, &p), PP_OK, "%s", pp_error_message());
    cr_assert_eq(p.version, 1);
    cr_assert_eq(p.num_layers, 14);
    cr_assert_eq(p.partition.L, 14);
    cr_assert_eq(p.partition.S, 4);
    cr_assert_eq(p.partition.v, 1);
    assert_bounds(&p.partition, (const int[]){0, 3, 7, 12, 14}, 5);
    cr_assert_str_eq(p.schedule, "1f1b");
    cr_assert_eq(p.microbatches, 8);
    cr_assert_eq(p.microbatch_size, 2);
    cr_assert_eq(p.memory_limit_bytes, 0u);
    cr_assert_eq(p.predicted_step_ms, 66.0);
    cr_assert_eq(p.predicted_bubble, 0.27);
    cr_assert_str_eq(p.baseline, "runs/run1");
    pp_plan_free(&p);
    pp_plan_free(&p);
    pp_plan_free(NULL);
}

Test(plan, absent_optional_fields_take_their_defaults)
{
    pp_plan p;
    cr_assert_eq(pp_plan_parse("{\"version\": 1, \"num_layers\": 6, \"stages\": 2, "
                               "\"boundaries\": [0, 3, 6], \"schedule\": \"gpipe\", "
                               "\"microbatches\": 4}",
                               "p.json", &p),
                 PP_OK, "%s", pp_error_message());
    cr_assert_eq(p.partition.v, 1);
    cr_assert_eq(p.microbatch_size, 0);
    cr_assert_eq(p.memory_limit_bytes, 0u);
    cr_assert_lt(p.predicted_step_ms, 0);
    cr_assert_lt(p.predicted_bubble, 0);
    cr_assert_str_eq(p.baseline, "");
    pp_plan_free(&p);
}

Test(plan, missing_file_is_an_io_error_naming_the_path)
{
    char path[256];
    path_in_dir(path, sizeof path, "absent.json");
    pp_plan p;
    cr_assert_eq(pp_plan_load(path, &p), PP_ERR_IO);
    cr_assert_null(p.partition.bounds);
    cr_assert(strstr(pp_error_message(), path), "%s", pp_error_message());
}

/* Fields of a valid plan, so each bad case changes one thing. */
#define PLAN_TAIL "\"schedule\": \"1f1b\", \"microbatches\": 8"
#define PLAN_HEAD "\"version\": 1, \"num_layers\": 14, \"stages\": 4"
#define PLAN_B "\"boundaries\": [0, 3, 7, 12, 14]"

static const bad_json k_bad_plans[] = {
    {"{\"version\": 1", "plan 'p.json': invalid JSON at line 1"},
    {"7", "must be a JSON object (got a number)"},
    {"{\"num_layers\": 14, \"stages\": 4, " PLAN_B ", " PLAN_TAIL "}", "missing \"version\""},
    {"{\"version\": 1, \"stages\": 4, " PLAN_B ", " PLAN_TAIL "}", "missing \"num_layers\""},
    {"{\"version\": 1, \"num_layers\": 14, " PLAN_B ", " PLAN_TAIL "}", "missing \"stages\""},
    {"{" PLAN_HEAD ", " PLAN_TAIL "}", "missing \"boundaries\""},
    {"{" PLAN_HEAD ", " PLAN_B ", \"microbatches\": 8}", "missing \"schedule\""},
    {"{" PLAN_HEAD ", " PLAN_B ", \"schedule\": \"1f1b\"}", "missing \"microbatches\""},
    {"{\"version\": 2, \"num_layers\": 14, \"stages\": 4, " PLAN_B ", " PLAN_TAIL "}",
     "plan 'p.json': unsupported version 2"},
    {"{\"version\": 1, \"num_layers\": 14, \"stages\": 3, " PLAN_B ", " PLAN_TAIL "}",
     "plan 'p.json': \"boundaries\": partition: expected 4 boundaries (3 stages x 1 virtual + 1) "
     "but got 5"},
    {"{" PLAN_HEAD ", \"virtual_stages\": 2, " PLAN_B ", " PLAN_TAIL "}",
     "expected 9 boundaries (4 stages x 2 virtual + 1) but got 5"},
    {"{\"version\": 1, \"num_layers\": 16, \"stages\": 4, " PLAN_B ", " PLAN_TAIL "}",
     "last boundary 14 must equal the model's 16 layers"},
    {"{" PLAN_HEAD ", \"boundaries\": [0, 3, 3, 12, 14], " PLAN_TAIL "}",
     "boundaries not increasing at position 2 (3 after 3)"},
    {"{" PLAN_HEAD ", \"boundaries\": [0, 3, \"7\", 12, 14], " PLAN_TAIL "}",
     "\"boundaries[2]\" must be an integer (got a string)"},
    {"{" PLAN_HEAD ", \"boundaries\": 5, " PLAN_TAIL "}", "\"boundaries\" must be an array"},
    {"{" PLAN_HEAD ", " PLAN_B ", \"schedule\": \"pipedream\", \"microbatches\": 8}",
     "unknown schedule \"pipedream\" (known: gpipe, 1f1b, interleaved, zb-h1)"},
    {"{" PLAN_HEAD ", " PLAN_B ", \"schedule\": \"1F1B\", \"microbatches\": 8}",
     "unknown schedule \"1F1B\""},
    {"{" PLAN_HEAD ", " PLAN_B ", \"schedule\": 1, \"microbatches\": 8}",
     "\"schedule\" must be a string (got a number)"},
    {"{" PLAN_HEAD ", " PLAN_B ", \"schedule\": \"1f1b\", \"microbatches\": 0}",
     "\"microbatches\" 0 is out of range"},
    {"{" PLAN_HEAD ", " PLAN_B ", " PLAN_TAIL ", \"stage\": 4}",
     "plan 'p.json': unknown key \"stage\""},
    {"{" PLAN_HEAD ", " PLAN_B ", " PLAN_TAIL ", \"predicted\": {\"step\": 1}}",
     "\"predicted\": unknown key \"step\""},
    {"{" PLAN_HEAD ", " PLAN_B ", " PLAN_TAIL ", \"predicted\": {\"bubble_ratio\": 1.5}}",
     "\"bubble_ratio\" 1.5 is out of range [0, 1]"},
    {"{" PLAN_HEAD ", " PLAN_B ", " PLAN_TAIL ", \"predicted\": 3}",
     "\"predicted\" must be an object"},
    {"{" PLAN_HEAD ", " PLAN_B ", " PLAN_TAIL ", \"baseline\": 3}",
     "\"baseline\" must be a string (got a number)"},
    {"{" PLAN_HEAD ", " PLAN_B ", " PLAN_TAIL ", \"pipeprof_version\": [0, 1]}",
     "\"pipeprof_version\" must be a string (got an array)"},
    {"{" PLAN_HEAD ", " PLAN_B ", " PLAN_TAIL ", \"baseline\": \"runs/\xed\xa0\x80\"}",
     "\"baseline\" is not valid UTF-8"},
    {"{" PLAN_HEAD ", " PLAN_B ", " PLAN_TAIL ", \"memory_limit_bytes\": -1}",
     "\"memory_limit_bytes\" -1 is out of range"},
    {"{" PLAN_HEAD ", " PLAN_B ", " PLAN_TAIL ", \"microbatch_size\": 2.5}",
     "\"microbatch_size\" must be an integer (got 2.5)"},
    {"{\"version\": 1, \"num_layers\": 14, \"stages\": 0, " PLAN_B ", " PLAN_TAIL "}",
     "\"stages\" 0 is out of range"},
    {"{" PLAN_HEAD ", \"virtual_stages\": 0, " PLAN_B ", " PLAN_TAIL "}",
     "\"virtual_stages\" 0 is out of range"},
    {"{" PLAN_HEAD ", \"stages\": 4, " PLAN_B ", " PLAN_TAIL "}", "duplicate key \"stages\""},
    {"{" PLAN_HEAD ", " PLAN_B ", " PLAN_TAIL ", \"recompute\": 1}",
     "\"recompute\" must be a string (got a number)"},
    {"{" PLAN_HEAD ", " PLAN_B ", " PLAN_TAIL ", \"recompute\": \"s0;rm\"}",
     "\"recompute\" \"s0;rm\" is not none, full or a list"},
    {"{" PLAN_HEAD ", " PLAN_B ", " PLAN_TAIL ", \"recompute\": \"\"}",
     "\"recompute\" \"\" is not none, full or a list"},
};

Test(plan, rejects_each_bad_plan_naming_origin_and_field)
{
    for (size_t i = 0; i < sizeof k_bad_plans / sizeof k_bad_plans[0]; i++) {
        const bad_json *c = &k_bad_plans[i];
        pp_plan p;
        pp_error_clear();
        cr_expect_eq(pp_plan_parse(c->json, "p.json", &p), PP_ERR_INVALID, "case %zu", i);
        cr_expect_null(p.partition.bounds, "case %zu", i);
        cr_expect(strstr(pp_error_message(), c->phrase), "case %zu: '%s' lacks '%s'", i,
                  pp_error_message(), c->phrase);
        cr_expect(strstr(pp_error_message(), "plan 'p.json'"), "case %zu: '%s'", i,
                  pp_error_message());
        pp_plan_free(&p);
    }
}

static void assert_plans_equal(const pp_plan *a, const pp_plan *b)
{
    cr_assert_eq(b->version, 1);
    cr_assert_eq(b->num_layers, a->num_layers);
    cr_assert_eq(b->partition.L, a->partition.L);
    cr_assert_eq(b->partition.S, a->partition.S);
    cr_assert_eq(b->partition.v, a->partition.v);
    assert_bounds(&b->partition, a->partition.bounds, a->partition.P + 1);
    cr_assert_str_eq(b->schedule, a->schedule);
    cr_assert_eq(b->microbatches, a->microbatches);
    cr_assert_eq(b->microbatch_size, a->microbatch_size);
    cr_assert_eq(b->memory_limit_bytes, a->memory_limit_bytes);
    cr_assert_eq(b->predicted_step_ms < 0, a->predicted_step_ms < 0);
    if (a->predicted_step_ms >= 0)
        cr_assert_eq(b->predicted_step_ms, a->predicted_step_ms);
    cr_assert_eq(b->predicted_bubble < 0, a->predicted_bubble < 0);
    if (a->predicted_bubble >= 0)
        cr_assert_eq(b->predicted_bubble, a->predicted_bubble);
    cr_assert_str_eq(b->baseline, a->baseline);
    cr_assert_str_eq(b->recompute, a->recompute);
}

Test(plan, write_then_load_gives_back_the_same_plan)
{
    pp_plan a;
    cr_assert_eq(pp_plan_parse(k_example_plan, "example", &a), PP_OK, "%s", pp_error_message());
    a.memory_limit_bytes = 80ull << 30; /* above 2^32, stays an exact integer */
    a.predicted_step_ms = 66.123456789012345;
    a.predicted_bubble = 1.0 / 3.0;
    snprintf(a.baseline, sizeof a.baseline, "runs/\"quoted\" \\ dir");
    snprintf(a.recompute, sizeof a.recompute, "s0,s2-3");
    char path[256];
    path_in_dir(path, sizeof path, "plan.json");
    cr_assert_eq(pp_plan_write(&a, path), PP_OK, "%s", pp_error_message());
    pp_plan b;
    cr_assert_eq(pp_plan_load(path, &b), PP_OK, "%s", pp_error_message());
    assert_plans_equal(&a, &b);
    pp_plan_free(&b);
    pp_plan_free(&a);

    /* Interleaved with every optional field absent. */
    pp_plan c = {.version = 1, .num_layers = 8, .microbatches = 4, .predicted_step_ms = -1,
                 .predicted_bubble = -1};
    cr_assert_eq(pp_partition_even(8, 2, 2, &c.partition), PP_OK);
    snprintf(c.schedule, sizeof c.schedule, "interleaved");
    cr_assert_eq(pp_plan_write(&c, path), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_plan_load(path, &b), PP_OK, "%s", pp_error_message());
    assert_plans_equal(&c, &b);
    pp_plan_free(&b);

    /* A predicted median and p95 without the step and bubble are kept (tests/fuzz_plan.c
     * found them dropped). */
    c.predicted_median_ms = 7.5;
    c.predicted_p95_ms = 8.25;
    cr_assert_eq(pp_plan_write(&c, path), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_plan_load(path, &b), PP_OK, "%s", pp_error_message());
    cr_assert_eq(b.predicted_median_ms, 7.5);
    cr_assert_eq(b.predicted_p95_ms, 8.25);
    cr_assert(b.predicted_step_ms < 0 && b.predicted_bubble < 0);
    pp_plan_free(&b);
    pp_plan_free(&c);
}

Test(plan, write_refuses_plans_the_loader_would_reject)
{
    pp_plan a;
    cr_assert_eq(pp_plan_parse(k_example_plan, "example", &a), PP_OK, "%s", pp_error_message());
    char path[256];
    path_in_dir(path, sizeof path, "bad.json");
    snprintf(a.schedule, sizeof a.schedule, "pipedream");
    cr_assert_eq(pp_plan_write(&a, path), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "pipedream"), "%s", pp_error_message());
    snprintf(a.schedule, sizeof a.schedule, "1f1b");
    a.num_layers = 15; /* boundaries end at 14 */
    cr_assert_eq(pp_plan_write(&a, path), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "last boundary 14 must equal the model's 15 layers"),
              "%s", pp_error_message());
    a.num_layers = 14;
    a.microbatches = 0;
    cr_assert_eq(pp_plan_write(&a, path), PP_ERR_INVALID);
    cr_assert_eq(access(path, F_OK), -1);
    pp_plan_free(&a);
}
