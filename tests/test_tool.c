/* test_tool.c: what the command-line tools share (tools/pp_tool.h): the --steps range, the
 * comma-list walker, the option cases every getopt loop hands over, and output directories that
 * keep the previous output as DIR.old. The tools' own tests (test_pprof_run, test_report,
 * test_tune, test_check) run them end to end; these pin the helpers one by one. */
#include "pp_tool.h"

#include "pp_testkit.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void setup(void)
{
    tk_dir_create("pp_tool");
    pp_tool_init("pp-test");
    pp_tool_quiet = 1; /* the -v notes of the rotation stay out of the test log */
}

TestSuite(tool, .init = setup, .fini = tk_dir_remove);

Test(tool, steps_ranges)
{
    int64_t lo = -1, hi = -1;
    cr_assert_eq(pp_tool_parse_steps("10:20", "first and last step", &lo, &hi), PP_OK);
    cr_assert(lo == 10 && hi == 20);
    cr_assert_eq(pp_tool_parse_steps("3:", "first and last step", &lo, &hi), PP_OK);
    cr_assert(lo == 3 && hi == 0, "an open range has hi = 0");
    cr_assert_eq(pp_tool_parse_steps("7:7", "x", &lo, &hi), PP_OK);
    static const struct {
        const char *arg, *msg;
    } k_bad[] = {
        {"10", "expected N:M or N: (first and last step to capture, e.g. 10:20)"},
        {":5", "expected N:M or N:"},
        {"0:5", "--steps first step N"},
        {"5:4", "last step 4 is before first step 5"},
        {"2:x", "--steps last step M"},
        {"123456789012345678901234567890123:4", "first step is not an integer"},
        {"2199023255553:", "--steps first step N"}, /* 2^41 + 1: over the 2^40 bound */
    };
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        cr_assert_eq(pp_tool_parse_steps(k_bad[i].arg, "first and last step to capture", &lo, &hi),
                     PP_ERR_INVALID, "%s", k_bad[i].arg);
        cr_assert(strstr(pp_error_message(), k_bad[i].msg), "%s: %s", k_bad[i].arg,
                  pp_error_message());
    }
}

static pp_status collect(void *ctx, const char *item)
{
    char *out = ctx;
    if (strcmp(item, "stop") == 0)
        return PP_ERR(PP_ERR_INVALID, "stopped at '%s'", item);
    strcat(out, "[");
    strcat(out, item);
    strcat(out, "]");
    return PP_OK;
}

Test(tool, comma_lists)
{
    char got[128] = "";
    cr_assert_eq(pp_tool_list_each("a,bb,c", collect, got), PP_OK);
    cr_assert_str_eq(got, "[a][bb][c]");
    got[0] = '\0';
    cr_assert_eq(pp_tool_list_each("x,stop,y", collect, got), PP_ERR_INVALID);
    cr_assert_str_eq(got, "[x]", "the walk ends at the first failure");
    int items[2];
    pp_tool_int_list l = {.what = "--n item", .opt = "--n", .plural = "items", .lo = 1, .hi = 9,
                          .items = items, .max = 2};
    cr_assert_eq(pp_tool_list_each("3,4", pp_tool_int_item, &l), PP_OK);
    cr_assert(l.n == 2 && items[0] == 3 && items[1] == 4);
    l.n = 0;
    cr_assert_eq(pp_tool_list_each("3,10", pp_tool_int_item, &l), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "--n item"), "%s", pp_error_message());
    l.n = 0;
    cr_assert_eq(pp_tool_list_each("1,2,3", pp_tool_int_item, &l), PP_ERR_INVALID);
    cr_assert_str_eq(pp_error_message(), "--n: more than 2 items");
    cr_assert(pp_tool_list_well_formed("1,2,3", 16));
    cr_assert(!pp_tool_list_well_formed("", 16));
    cr_assert(!pp_tool_list_well_formed("1,,2", 16));
    cr_assert(!pp_tool_list_well_formed(",1", 16));
    cr_assert(!pp_tool_list_well_formed("1,", 16));
    cr_assert(!pp_tool_list_well_formed("1,2,3", 5), "too long for the cap");
}

Test(tool, common_option_cases)
{
    int quiet = 0, verbose = 0;
    char a0[] = "pp-test", a1[] = "--bogus";
    char *argv[] = {a0, a1, NULL};
    cr_assert_eq(pp_tool_option_common('q', argv, "", &quiet, &verbose), PP_TOOL_GO_ON);
    cr_assert_eq(pp_tool_option_common('v', argv, "", &quiet, &verbose), PP_TOOL_GO_ON);
    cr_assert(quiet && verbose);
    optind = 2;
    optopt = 0;
    cr_assert_eq(pp_tool_option_common('?', argv, "", &quiet, &verbose), PP_EXIT_USAGE);
    cr_assert_eq(pp_tool_option_common(':', argv, "", &quiet, &verbose), PP_EXIT_USAGE);
    int64_t v = 0;
    cr_assert_eq(pp_tool_option_i64("12", "--n", 1, 100, &v), PP_TOOL_GO_ON);
    cr_assert_eq(v, 12);
    cr_assert_eq(pp_tool_option_i64("0", "--n", 1, 100, &v), PP_EXIT_USAGE);
    double d = 0;
    cr_assert_eq(pp_tool_option_f64("0.5", "--x", 0, 1, &d), PP_TOOL_GO_ON);
    cr_assert_float_eq(d, 0.5, 0);
    cr_assert_eq(pp_tool_option_status(PP_ERR(PP_ERR_INVALID, "bad")), PP_EXIT_USAGE);
}

static int is_marker(const char *name) { return strcmp(name, "marker") == 0; }

static const pp_tool_outdir k_kind = {
    .is_ours = is_marker,
    .lacks = "no marker",
    .noun = "output",
    .old_is_not = "is not one",
    .say_why = 1,
};

Test(tool, output_directories_keep_the_previous_one)
{
    char why[512];
    const char *dir = tk_path("out/deeper");
    cr_assert_eq(pp_tool_dir_classify(dir, &k_kind, why, sizeof why), PP_TOOL_DIR_MISSING);
    cr_assert_eq(pp_tool_mkdir_p(dir, "directory", PP_ERR_IO), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_tool_dir_classify(dir, &k_kind, why, sizeof why), PP_TOOL_DIR_EMPTY);
    char f[600];
    snprintf(f, sizeof f, "%s/marker", dir);
    tk_write_text(f, "1");
    cr_assert_eq(pp_tool_dir_classify(dir, &k_kind, why, sizeof why), PP_TOOL_DIR_OURS);
    cr_assert_eq(pp_tool_dir_keep_old(dir, &k_kind), PP_OK, "%s", pp_error_message());
    cr_assert(!tk_exists(dir) && tk_exists(tk_path("out/deeper.old/marker")));
    /* again: the older .old is removed, the newer output takes its place */
    cr_assert_eq(pp_tool_mkdir_p(dir, "directory", PP_ERR_IO), PP_OK);
    tk_write_text(f, "2");
    cr_assert_eq(pp_tool_dir_keep_old(dir, &k_kind), PP_OK, "%s", pp_error_message());
    char *text = tk_slurp(tk_path("out/deeper.old/marker"), NULL);
    cr_assert(text && strcmp(text, "2") == 0);
    free(text);
    /* a .old that is not ours is never removed */
    cr_assert_eq(pp_tool_mkdir_p(dir, "directory", PP_ERR_IO), PP_OK);
    tk_write_text(f, "3");
    cr_assert_eq(remove(tk_path("out/deeper.old/marker")), 0);
    tk_write_text(tk_path("out/deeper.old/notes.txt"), "mine");
    cr_assert_eq(pp_tool_dir_classify(tk_path("out/deeper.old"), &k_kind, why, sizeof why),
                 PP_TOOL_DIR_OTHER);
    cr_assert_str_eq(why, "it holds 'notes.txt' and no marker");
    cr_assert_eq(pp_tool_dir_keep_old(dir, &k_kind), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "cannot keep the previous output of") &&
                  strstr(pp_error_message(), "exists and is not one (it holds 'notes.txt'"),
              "%s", pp_error_message());
    cr_assert(tk_exists(tk_path("out/deeper.old/notes.txt")) && tk_exists(f));
    /* a file is not a directory */
    cr_assert_eq(pp_tool_dir_classify(f, &k_kind, why, sizeof why), PP_TOOL_DIR_NOT_DIR);
    cr_assert_eq(pp_tool_mkdir_p(f, "run directory", PP_ERR_INVALID), PP_ERR_INVALID);
    char buf[16];
    cr_assert(pp_tool_path_trim("run//", buf, sizeof buf) && strcmp(buf, "run") == 0);
    cr_assert(pp_tool_path_trim("/", buf, sizeof buf) && strcmp(buf, "/") == 0);
    cr_assert(!pp_tool_path_trim("a-name-that-is-too-long", buf, sizeof buf));
}
