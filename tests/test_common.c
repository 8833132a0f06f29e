/* test_common.c: the shared helpers every module leans on: checksums, RNG, strict number
 * parsing, atomic file writes and error messages. */
#include "pp_common.h"

#include <criterion/criterion.h>
#include <dirent.h>
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

Test(common, atomic_write_replaces_whole_file_and_leaves_no_temp)
{
    char dir[] = "/tmp/pp_common_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/f.bin", dir);
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
