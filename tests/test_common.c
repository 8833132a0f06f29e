/* test_common.c: the shared helpers every module leans on: checksums, RNG, strict number
 * parsing, atomic file writes and error messages. */
#include "pp_common.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test(common, crc32c_matches_the_standard_check_value)
{
    /* The CRC catalogue's check value of CRC-32C over the ASCII digits 1..9. */
    cr_assert_eq(pp_crc32c(0, "123456789", 9), 0xE3069283u);
    /* Running checksums over pieces equal one pass over the whole. */
    uint32_t part = pp_crc32c(pp_crc32c(0, "12345", 5), "6789", 4);
    cr_assert_eq(part, 0xE3069283u);
    cr_assert_eq(pp_crc32c(0, "", 0), 0u);
}

Test(common, crc32c_hardware_and_table_agree)
{
    /* every length 0..300 at every alignment 0..7, running and in one go */
    unsigned char buf[320];
    for (int i = 0; i < 320; i++)
        buf[i] = (unsigned char)(i * 131 + 7);
    for (int off = 0; off < 8; off++)
        for (size_t n = 0; n <= 300; n++) {
            uint32_t a = pp_crc32c(0, buf + off, n), b = pp_crc32c_sw(0, buf + off, n);
            cr_assert_eq(a, b, "offset %d length %zu", off, n);
            cr_assert_eq(pp_crc32c(pp_crc32c(0, buf + off, n / 3), buf + off + n / 3, n - n / 3),
                         a);
        }
    cr_assert_eq(pp_crc32c_sw(0, "123456789", 9), 0xE3069283u);
    /* long buffers (the hardware path's three interleaved lanes from 3 KiB): lengths around
     * multiples of the 3 KiB stride, running from a non-zero start */
    static unsigned char big[20000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 2654435761u >> 13);
    static const size_t lens[] = {3071, 3072, 3073, 6143, 6144, 6151, 9216, 12345, 19990};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (int off = 0; off < 8; off += 3) {
            uint32_t a = pp_crc32c(0x12345678u, big + off, lens[i]);
            uint32_t b = pp_crc32c_sw(0x12345678u, big + off, lens[i]);
            cr_assert_eq(a, b, "offset %d length %zu", off, lens[i]);
        }
}

Test(common, rng_is_deterministic_per_seed)
{
    pp_rng a, b, c;
    pp_rng_seed(&a, 42);
    pp_rng_seed(&b, 42);
    pp_rng_seed(&c, 43);
    int differ = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t x = pp_rng_u64(&a);
        cr_assert_eq(x, pp_rng_u64(&b));
        differ += x != pp_rng_u64(&c);
    }
    cr_assert_gt(differ, 95);
}

Test(common, rng_ranges_and_moments)
{
    pp_rng r;
    pp_rng_seed(&r, 7);
    double sum = 0, sumsq = 0;
    int counts[5] = {0};
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double u = pp_rng_uniform(&r);
        cr_assert(u >= 0.0 && u < 1.0);
        uint64_t k = pp_rng_below(&r, 5);
        cr_assert_lt(k, 5u);
        counts[k]++;
        double z = pp_rng_normal(&r);
        sum += z;
        sumsq += z * z;
    }
    /* Mean 0 and variance 1 within about 5 standard errors (se of the mean = 1/sqrt(n)). */
    cr_assert_lt(fabs(sum / n), 5.0 / sqrt(n));
    cr_assert_lt(fabs(sumsq / n - 1.0), 5.0 * sqrt(2.0 / n));
    for (int k = 0; k < 5; k++)
        cr_assert_lt(abs(counts[k] - n / 5), 1000); /* ~5.6 sigma for a binomial(n, 1/5) */
}

Test(common, parse_i64_is_strict)
{
    int64_t v = 0;
    cr_assert_eq(pp_parse_i64("42", "--x", 0, 100, &v), PP_OK);
    cr_assert_eq(v, 42);
    cr_assert_eq(pp_parse_i64("42abc", "--x", 0, 100, &v), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "--x") != NULL);
    cr_assert(strstr(pp_error_message(), "not an integer") != NULL);
    cr_assert_eq(pp_parse_i64("", "--x", 0, 100, &v), PP_ERR_INVALID);
    cr_assert_eq(pp_parse_i64("101", "--x", 0, 100, &v), PP_ERR_INVALID);
    cr_assert(strstr(pp_error_message(), "out of range") != NULL);
    cr_assert_eq(pp_parse_i64("99999999999999999999999", "--x", 0, 100, &v), PP_ERR_INVALID);
    double d = 0;
    cr_assert_eq(pp_parse_f64("1e-3", "--lr", 0, 1, &d), PP_OK);
    cr_assert_float_eq(d, 1e-3, 1e-15);
    cr_assert_eq(pp_parse_f64("nan", "--lr", 0, 1, &d), PP_ERR_INVALID);
    cr_assert_eq(pp_parse_f64("inf", "--lr", 0, 1, &d), PP_ERR_INVALID);
    cr_assert_eq(pp_parse_f64("2", "--lr", 0, 1, &d), PP_ERR_INVALID);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* A new directory in dir (a mkdtemp template) and the path of `name` in it. */
static void file_in_new_dir(char *dir, char *path, size_t cap, const char *name)
{
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, cap, "%s/%s", dir, name);
}

Test(common, atomic_write_replaces_whole_file_and_leaves_no_temp)
{
    char dir[] = "/tmp/pp_common_XXXXXX", path[256];
    file_in_new_dir(dir, path, sizeof path, "f.bin");
    cr_assert_eq(pp_write_file_atomic(path, "first version", 13), PP_OK);
    cr_assert_eq(pp_write_file_atomic(path, "second", 6), PP_OK);
    char *data = NULL;
    size_t len = 0;
    cr_assert_eq(pp_read_file(path, &data, &len), PP_OK);
    cr_assert_eq(len, 6u);
    cr_assert_str_eq(data, "second");
    free(data);
    cr_assert_eq(count_entries(dir), 1, "a temporary file was left behind");
    unlink(path);
    rmdir(dir);
}

Test(common, atomic_stream_replaces_on_commit_and_leaves_the_file_on_abort)
{
    char dir[] = "/tmp/pp_common_XXXXXX", path[256];
    file_in_new_dir(dir, path, sizeof path, "summary.json");
    cr_assert_eq(pp_write_file_atomic(path, "old", 3), PP_OK);
    /* written piece by piece, 8 MB in all: nothing of it appears before the commit */
    pp_atomic_stream *as = NULL;
    cr_assert_eq(pp_atomic_stream_open(path, &as), PP_OK, "%s", pp_error_message());
    char line[64];
    memset(line, 'x', sizeof line - 1);
    line[sizeof line - 1] = '\n';
    for (int i = 0; i < 131072; i++)
        cr_assert_eq(fwrite(line, 1, sizeof line, pp_atomic_stream_file(as)), sizeof line);
    char *data = NULL;
    size_t len = 0;
    cr_assert_eq(pp_read_file(path, &data, &len), PP_OK);
    cr_assert_eq(len, 3u, "the output changed before the commit");
    free(data);
    cr_assert_eq(count_entries(dir), 2, "the temporary file beside it");
    cr_assert_eq(pp_atomic_stream_commit(as), PP_OK, "%s", pp_error_message());
    cr_assert_eq(pp_read_file(path, &data, &len), PP_OK);
    cr_assert_eq(len, (size_t)131072 * 64);
    cr_assert(data[0] == 'x' && data[len - 1] == '\n');
    free(data);
    cr_assert_eq(count_entries(dir), 1, "a temporary file was left behind");
    /* an aborted stream leaves the file as it was, and no temporary file */
    cr_assert_eq(pp_atomic_stream_open(path, &as), PP_OK);
    fputs("half a summary", pp_atomic_stream_file(as));
    pp_atomic_stream_abort(as);
    cr_assert_eq(pp_read_file(path, &data, &len), PP_OK);
    cr_assert_eq(len, (size_t)131072 * 64);
    free(data);
    cr_assert_eq(count_entries(dir), 1, "the aborted stream's file was left behind");
    /* a directory that is not there: the error names the path */
    pp_error_clear();
    cr_assert_eq(pp_atomic_stream_open("/tmp/pp_no_such_dir_xyz/s.json", &as), PP_ERR_IO);
    cr_assert_null(as);
    cr_assert(strstr(pp_error_message(), "pp_no_such_dir_xyz") != NULL);
    unlink(path);
    rmdir(dir);
}

Test(common, atomic_write_into_missing_directory_fails_cleanly)
{
    pp_status st = pp_write_file_atomic("/tmp/pp_no_such_dir_xyz/f.bin", "x", 1);
    cr_assert_eq(st, PP_ERR_IO);
    cr_assert(strstr(pp_error_message(), "pp_no_such_dir_xyz") != NULL);
    cr_assert_eq(pp_status_exit_code(st), PP_EXIT_USAGE);
}

Test(common, read_missing_file_names_it)
{
    char *data = NULL;
    size_t len = 0;
    cr_assert_eq(pp_read_file("/tmp/pp_missing_file_abc", &data, &len), PP_ERR_IO);
    cr_assert(strstr(pp_error_message(), "/tmp/pp_missing_file_abc") != NULL);
}

Test(common, error_wrap_prefixes_context)
{
    PP_ERR(PP_ERR_CORRUPT, "bad magic");
    cr_assert_eq(pp_error_wrap(PP_ERR_CORRUPT, "file '%s'", "x.bin"), PP_ERR_CORRUPT);
    cr_assert_str_eq(pp_error_message(), "file 'x.bin': bad magic");
    cr_assert(strstr(pp_error_origin(), "test_common.c") != NULL);
    cr_assert_eq(pp_status_exit_code(PP_ERR_NOMEM), PP_EXIT_RUNTIME);
}

Test(common, checked_sizes_refuse_products_that_overflow)
{
    size_t r = 0;
    cr_assert(pp_size_mul(1u << 20, 4096, &r));
    cr_assert_eq(r, (size_t)1 << 32);
    cr_assert_not(pp_size_mul(SIZE_MAX / 2 + 1, 2, &r), "2^63 x 2 wraps to 0");
    cr_assert_eq(r, SIZE_MAX);
    cr_assert(pp_size_mul(0, SIZE_MAX, &r));
    cr_assert_eq(r, 0u);
    /* the heap overflow of issue 14: 2 x 2^30 micro-batches x 2^30 pieces x 8 bytes */
    cr_assert_not(pp_size_mul3(2, (size_t)1 << 30, (size_t)1 << 34, &r));
    cr_assert(pp_size_mul3(2, 3, 7, &r));
    cr_assert_eq(r, 42u);
    cr_assert_null(pp_alloc_array(SIZE_MAX / 8 + 1, 16), "an overflowing count allocates nothing");
    double *d = pp_alloc_array(1000, sizeof *d);
    cr_assert_not_null(d);
    for (int i = 0; i < 1000; i++)
        cr_assert_eq(d[i], 0.0, "zeroed");
    pp_free(d);
    int *p = pp_realloc_array(NULL, 4, sizeof *p);
    cr_assert_not_null(p);
    cr_assert_null(pp_realloc_array(p, SIZE_MAX / 2, sizeof *p), "overflow: p left as it was");
    p[3] = 7;
    free(p);
}

/* ---- the JSON writer (pp_json.h) ------------------------------------------------------------ */

#include "pp_json.h"

/* A writer on a temporary file. */
static FILE *writer_on_tmpfile(pp_json_writer *w, pp_json_layout layout)
{
    FILE *f = tmpfile();
    cr_assert(f);
    pp_json_writer_init(w, f, "a test", layout);
    return f;
}

/* What a writer wrote to a temporary file, as a string (the caller frees it). */
static char *written(FILE *f)
{
    long n = ftell(f);
    cr_assert(n >= 0);
    rewind(f);
    char *s = calloc((size_t)n + 1, 1);
    cr_assert(s);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return s;
}

/* Finishes w and compares what it wrote to f with want. */
static void expect_written(pp_json_writer *w, FILE *f, const char *want)
{
    cr_assert_eq(pp_json_writer_finish(w), PP_OK);
    char *s = written(f);
    cr_assert_str_eq(s, want);
    free(s);
}

Test(json_write, strings_are_escaped_and_invalid_utf8_replaced)
{
    pp_json_writer w;
    FILE *f = writer_on_tmpfile(&w, PP_JSON_PRETTY);
    pp_json_array_inline(&w, NULL);
    pp_json_put_str(&w, NULL, "q\"b\\n\nt\tr\rb\bf\f\x01\x1f");
    pp_json_put_str(&w, NULL, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"); /* kept as they are */
    pp_json_put_str(&w, NULL, "bad\xff end\xc3"); /* a stray byte and a cut sequence */
    pp_json_put_str(&w, NULL, "\xed\xa0\x80"); /* a surrogate encoded as UTF-8 */
    pp_json_put_str(&w, NULL, NULL);
    pp_json_end(&w);
    cr_assert_eq(pp_json_writer_finish(&w), PP_OK);
    char *s = written(f);
    cr_assert_str_eq(s, "[\"q\\\"b\\\\n\\nt\\tr\\rb\\bf\\f\\u0001\\u001f\", "
                        "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\", \"bad\\ufffd end\\ufffd\", "
                        "\"\\ufffd\\ufffd\\ufffd\", null]\n");
    /* and what cJSON reads back is the text that went in (where it was valid) */
    cJSON *root = cJSON_Parse(s);
    cr_assert(root);
    cr_assert_str_eq(cJSON_GetArrayItem(root, 0)->valuestring, "q\"b\\n\nt\tr\rb\bf\f\x01\x1f");
    cJSON_Delete(root);
    free(s);
}

Test(json_write, numbers_have_fixed_formats_and_non_finite_is_null)
{
    pp_json_writer w;
    FILE *f = writer_on_tmpfile(&w, PP_JSON_PRETTY);
    pp_json_object_inline(&w, NULL);
    pp_json_put_real(&w, "a", 1.0 / 3);
    pp_json_put_real(&w, "neg0", -0.0);
    pp_json_put_real(&w, "nan", NAN);
    pp_json_put_real(&w, "inf", -INFINITY);
    pp_json_put_real_pos(&w, "zero", 0);
    pp_json_put_real_pos(&w, "pos", 2.5);
    pp_json_put_real_digits(&w, "g", 6, 0.001234567);
    pp_json_put_fixed(&w, "us", 3, -0.0004);
    pp_json_put_exact(&w, "x", 0.1 + 0.2);
    pp_json_put_exact(&w, "big", 9007199254740993.0);
    pp_json_put_int(&w, "i", -42);
    pp_json_put_uint(&w, "u", UINT64_MAX);
    pp_json_put_bool(&w, "t", 1);
    pp_json_put_null(&w, "n");
    pp_json_end(&w);
    expect_written(&w, f,
                   "{\"a\": 0.3333333333, \"neg0\": 0, \"nan\": null, \"inf\": null, "
                   "\"zero\": null, \"pos\": 2.5, \"g\": 0.00123457, \"us\": -0.000, "
                   "\"x\": 0.30000000000000004, \"big\": 9007199254740992, \"i\": -42, "
                   "\"u\": 18446744073709551615, \"t\": true, \"n\": null}\n");
}

/* The writer formats most numbers itself (printf's %g and %f cost a fifth of a long summary's
 * writing); what it writes must be printf's text, digit for digit, including at ties, at the
 * powers of ten where %g's digits roll over, the negative values that round to zero and the
 * edges of the ranges it leaves to printf. */
Test(json_write, numbers_are_printfs_text_wherever_they_lie)
{
    enum { N = 120000, CHUNK = 3000, PRECS = 18 };
    pp_rng rng;
    pp_rng_seed(&rng, 20261205);
    double *vals = malloc(N * sizeof *vals);
    cr_assert(vals);
    for (int i = 0; i < N; i++) {
        double v;
        switch (i % 6) {
        case 0: /* any magnitude */
            v = ldexp(pp_rng_uniform(&rng) + 0.5, (int)(pp_rng_u64(&rng) % 140) - 70);
            break;
        case 1: /* what the summaries write: milliseconds from nanoseconds */
            v = (double)(pp_rng_u64(&rng) % 100000000000ull) * 1e-6;
            break;
        case 2: /* short decimals, many of them halfway for some precision */
            v = (double)(pp_rng_u64(&rng) % 2000000) / pow(10, (double)(pp_rng_u64(&rng) % 8));
            break;
        case 3: /* just below and above a power of ten */
            v = nextafter(pow(10, (double)((int)(pp_rng_u64(&rng) % 24) - 6)),
                          pp_rng_u64(&rng) % 2 ? 0.0 : INFINITY);
            break;
        case 4: /* exact binary halves at some digit */
            v = (double)(pp_rng_u64(&rng) % 1000000) +
                0.5 / (double)(1u << (pp_rng_u64(&rng) % 12));
            break;
        default: /* integers, and 0.999... that round up */
            v = pp_rng_u64(&rng) % 2
                    ? (double)(pp_rng_u64(&rng) % 10000000000ull)
                    : 1.0 - pow(10, -(double)(pp_rng_u64(&rng) % 17)) * pp_rng_uniform(&rng);
            break;
        }
        vals[i] = pp_rng_u64(&rng) % 3 == 0 ? -v : v;
    }
    vals[0] = 0.0;
    vals[1] = -0.0;
    long checked = 0;
    for (int c0 = 0; c0 < N; c0 += CHUNK) {
        pp_json_writer w;
        FILE *f = writer_on_tmpfile(&w, PP_JSON_PRETTY);
        pp_json_array_inline(&w, NULL);
        for (int i = c0; i < c0 + CHUNK; i++)
            for (int p = 0; p < PRECS; p++) {
                pp_json_put_fixed(&w, NULL, p, vals[i]);
                pp_json_put_real_digits(&w, NULL, p ? p : 1, vals[i]);
            }
        pp_json_end(&w);
        cr_assert_eq(pp_json_writer_finish(&w), PP_OK);
        char *text = written(f), *save = NULL;
        cr_assert(text[0] == '[');
        char *tok = strtok_r(text + 1, ",]\n ", &save);
        for (int i = c0; i < c0 + CHUNK; i++)
            for (int p = 0; p < PRECS; p++)
                for (int g = 0; g < 2; g++) {
                    char want[512];
                    double v = vals[i] == 0 ? 0.0 : vals[i];
                    if (g)
                        snprintf(want, sizeof want, "%.*g", p ? p : 1, v);
                    else
                        snprintf(want, sizeof want, "%.*f", p, v);
                    cr_assert(tok, "the output ended early");
                    cr_assert_str_eq(tok, want, "%%.%d%c of %.17g", g && !p ? 1 : p,
                                     g ? 'g' : 'f', vals[i]);
                    checked++;
                    tok = strtok_r(NULL, ",]\n ", &save);
                }
        cr_assert_null(tok);
        free(text);
    }
    cr_assert_eq(checked, (long)N * PRECS * 2);
    free(vals);
}

Test(json_write, pretty_layout_nests_blocks_inline_records_and_wraps)
{
    pp_json_writer w;
    FILE *f = writer_on_tmpfile(&w, PP_JSON_PRETTY);
    pp_json_object(&w, NULL);
    pp_json_put_int(&w, "version", 1);
    pp_json_array(&w, "rows");
    for (int i = 0; i < 2; i++) {
        pp_json_object_inline(&w, NULL);
        pp_json_put_int(&w, "i", i);
        pp_json_object(&w, "inner"); /* inside an inline record: inline too */
        pp_json_put_int(&w, "k", 7);
        pp_json_end(&w);
        pp_json_wrap(&w);
        pp_json_array(&w, "xs");
        pp_json_end(&w);
        pp_json_end(&w);
    }
    pp_json_end(&w);
    pp_json_object(&w, "empty");
    pp_json_end(&w);
    pp_json_end(&w);
    expect_written(&w, f,
                   "{\n  \"version\": 1,\n  \"rows\": [\n"
                   "    {\"i\": 0, \"inner\": {\"k\": 7},\n     \"xs\": []},\n"
                   "    {\"i\": 1, \"inner\": {\"k\": 7},\n     \"xs\": []}\n  ],\n"
                   "  \"empty\": {}\n}\n");
}

Test(json_write, tabs_layout_is_what_cjson_print_gives)
{
    /* the plan file and the manifest keep the bytes cJSON_Print gave them */
    cJSON *root = cJSON_CreateObject();
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON *arr = cJSON_AddArrayToObject(root, "bounds");
    for (int i = 0; i < 3; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateNumber(i * 2));
    cJSON *objs = cJSON_AddArrayToObject(root, "files");
    for (int i = 0; i < 2; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", i ? "b" : "a");
        cJSON_AddNullToObject(o, "rank");
        cJSON_AddItemToArray(objs, o);
    }
    cJSON_AddArrayToObject(root, "lost");
    cJSON *pred = cJSON_AddObjectToObject(root, "predicted");
    cJSON_AddNumberToObject(pred, "step_ms", 2.5);
    cJSON_AddObjectToObject(pred, "none");
    char *want = cJSON_Print(root);

    pp_json_writer w;
    FILE *f = writer_on_tmpfile(&w, PP_JSON_TABS);
    pp_json_object(&w, NULL);
    pp_json_put_int(&w, "version", 1);
    pp_json_array_inline(&w, "bounds");
    for (int i = 0; i < 3; i++)
        pp_json_put_int(&w, NULL, i * 2);
    pp_json_end(&w);
    pp_json_array_inline(&w, "files");
    for (int i = 0; i < 2; i++) {
        pp_json_object(&w, NULL);
        pp_json_put_str(&w, "name", i ? "b" : "a");
        pp_json_put_null(&w, "rank");
        pp_json_end(&w);
    }
    pp_json_end(&w);
    pp_json_array_inline(&w, "lost");
    pp_json_end(&w);
    pp_json_object(&w, "predicted");
    pp_json_put_exact(&w, "step_ms", 2.5);
    pp_json_object(&w, "none");
    pp_json_end(&w);
    pp_json_end(&w);
    pp_json_end(&w);
    cr_assert_eq(pp_json_writer_finish(&w), PP_OK);
    char *s = written(f);
    size_t n = strlen(want);
    cr_assert_eq(strlen(s), n + 1);
    cr_assert_eq(s[n], '\n');
    s[n] = '\0';
    cr_assert_str_eq(s, want);
    free(s);
    cJSON_free(want);
    cJSON_Delete(root);
}

Test(json_write, misuse_is_an_error_that_sticks)
{
    const char *what[] = {"key in array", "no key in object", "closed twice", "left open",
                          "two values", "too deep"};
    for (int c = 0; c < 6; c++) {
        FILE *f = tmpfile();
        cr_assert(f);
        pp_json_writer w;
        pp_json_writer_init(&w, f, "the test output", PP_JSON_PRETTY);
        switch (c) {
        case 0: pp_json_array(&w, NULL); pp_json_put_int(&w, "k", 1); pp_json_end(&w); break;
        case 1: pp_json_object(&w, NULL); pp_json_put_int(&w, NULL, 1); pp_json_end(&w); break;
        case 2: pp_json_object(&w, NULL); pp_json_end(&w); pp_json_end(&w); break;
        case 3: pp_json_object(&w, NULL); break;
        case 4: pp_json_put_int(&w, NULL, 1); pp_json_put_int(&w, NULL, 2); break;
        case 5:
            for (int d = 0; d <= PP_JSON_MAX_DEPTH; d++)
                pp_json_array(&w, NULL);
            break;
        }
        pp_status first = pp_json_writer_status(&w);
        pp_json_put_int(&w, NULL, 3); /* ignored after the error */
        cr_assert_eq(pp_json_writer_finish(&w), PP_ERR_INVALID, "%s", what[c]);
        cr_assert(c == 3 || first == PP_ERR_INVALID, "%s", what[c]);
        cr_assert(strstr(pp_error_message(), "writing the test output"), "%s: %s", what[c],
                  pp_error_message());
        fclose(f);
    }
}

Test(json_write, a_failing_stream_is_an_io_error)
{
    FILE *f = fopen("/dev/full", "w");
    if (!f)
        cr_skip_test("no /dev/full");
    pp_json_writer w;
    pp_json_writer_init(&w, f, "the summary JSON", PP_JSON_PRETTY);
    pp_json_array(&w, NULL);
    for (int i = 0; i < 100000; i++) /* more than stdio buffers: fails while writing */
        pp_json_put_int(&w, NULL, i);
    cr_assert_eq(pp_json_writer_status(&w), PP_ERR_IO);
    pp_json_end(&w);
    cr_assert_eq(pp_json_writer_finish(&w), PP_ERR_IO);
    cr_assert(strstr(pp_error_message(), "writing the summary JSON: No space left"), "%s",
              pp_error_message());
    fclose(f);
}

static pp_status fill_small(pp_json_writer *w, const void *ctx)
{
    pp_json_object(w, NULL);
    pp_json_put_str(w, "name", ctx);
    pp_json_end(w);
    return pp_json_writer_status(w);
}

static pp_status fill_refuses(pp_json_writer *w, const void *ctx)
{
    (void)ctx;
    pp_json_object(w, NULL);
    return PP_ERR(PP_ERR_INVALID, "refused by the caller");
}

Test(json_write, files_are_written_whole_or_not_at_all)
{
    char dir[] = "/tmp/pp_json_write.XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/out.json", dir);
    cr_assert_eq(pp_json_file_write(path, "a test file", PP_JSON_PRETTY, fill_small, "x"), PP_OK);
    char *text = NULL;
    cr_assert_eq(pp_json_file_read(path, "a test file", &text), PP_OK);
    cr_assert_str_eq(text, "{\n  \"name\": \"x\"\n}\n");
    free(text);
    cr_assert_eq(unlink(path), 0);
    cr_assert_eq(pp_json_file_write(path, "a test file", PP_JSON_PRETTY, fill_refuses, NULL),
                 PP_ERR_INVALID);
    cr_assert_str_eq(pp_error_message() + strlen(pp_error_message()) -
                         strlen("refused by the caller"),
                     "refused by the caller");
    cr_assert_neq(access(path, F_OK), 0);
    /* a NUL byte is named with its offset */
    FILE *f = fopen(path, "wb");
    cr_assert(f);
    fwrite("{\"a\"\0}", 1, 6, f);
    fclose(f);
    cr_assert_eq(pp_json_file_read(path, "cost file", &text), PP_ERR_INVALID);
    cr_assert_null(text);
    cr_assert(strstr(pp_error_message(), "contains a NUL byte at offset 4"), "%s",
              pp_error_message());
    unlink(path);
    rmdir(dir);
}

Test(common, fd_write_all_goes_on_after_short_writes_and_returns_errno)
{
    enum { N = 1 << 20 };
    uint8_t *buf = malloc(N), *back = malloc(N);
    cr_assert(buf && back);
    for (size_t i = 0; i < N; i++)
        buf[i] = (uint8_t)(i * 7 + 3);
    /* a file takes all of it */
    char path[] = "/tmp/pp_test_fd_write_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(pp_fd_write_all(fd, buf, N), 0);
    cr_assert_eq(pread(fd, back, N, 0), (ssize_t)N);
    cr_assert_eq(memcmp(buf, back, N), 0);
    close(fd);
    unlink(path);
    /* a non-blocking pipe takes a first part (a short write), then refuses with EAGAIN */
    int p[2];
    cr_assert_eq(pipe(p), 0);
    cr_assert_eq(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
    cr_assert_eq(pp_fd_write_all(p[1], buf, N), EAGAIN);
    cr_assert_eq(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
    ssize_t got = read(p[0], back, N);
    cr_assert_gt(got, 0);
    cr_assert_lt(got, (ssize_t)N);
    cr_assert_eq(memcmp(buf, back, (size_t)got), 0, "the part written is the start, in order");
    close(p[0]);
    close(p[1]);
    cr_assert_eq(pp_fd_write_all(-1, buf, 1), EBADF);
    cr_assert_eq(pp_fd_write_all(-1, buf, 0), 0, "nothing to write is no error");
    free(buf);
    free(back);
}
