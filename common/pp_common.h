/* pp_common.h: status codes, error reporting, logging, RNG, checksums and small helpers
 * shared by every pipeprof module (runtime, kernels, profiler, analyzer, tools).
 *
 * Errors: library functions return a pp_status. The function where an error starts records a
 * message with pp_error_set() (file:line kept); callers pass the status up unchanged and only a
 * tool's main() prints pp_error_message() and exits with pp_status_exit_code(). The last error is
 * thread-local, so concurrent pipeline workers do not overwrite each other's messages. */
#ifndef PP_COMMON_H
#define PP_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* The project's version (CMake's project(): a compile definition on every target); outputs
 * record it, --version prints it with the git commit (tools/tool.c). Builds outside CMake (the
 * fuzz targets) say "unknown". */
#ifndef PP_VERSION
#define PP_VERSION "unknown"
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pp_status {
    PP_OK = 0,
    PP_ERR_INVALID = 1, /* bad flag, config field or argument: the user's input is wrong */
    PP_ERR_IO = 2,      /* a file could not be opened, read or written */
    PP_ERR_CORRUPT = 3, /* a file exists but its contents are malformed or fail a checksum */
    PP_ERR_NOMEM = 4,   /* an allocation failed */
    PP_ERR_RUNTIME = 5  /* anything else that went wrong while running */
} pp_status;

/* Exit codes of every pipeprof command (see docs/): 0 ok, 1 check failed, 2 usage or bad input,
 * 3 runtime error. */
enum { PP_EXIT_OK = 0, PP_EXIT_CHECK_FAILED = 1, PP_EXIT_USAGE = 2, PP_EXIT_RUNTIME = 3 };

/* Records the message of an error that starts here and returns `st`, so a function can write
 * `return PP_ERR(PP_ERR_INVALID, "...", ...)`. */
pp_status pp_error_set(pp_status st, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define PP_ERR(st, ...) pp_error_set((st), __FILE__, __LINE__, __VA_ARGS__)

/* Prepends "<prefix>: " to this thread's last error message (to add context such as a file
 * name while passing an error up) and returns st. */
pp_status pp_error_wrap(pp_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The message of the last error recorded on this thread ("" when none). */
const char *pp_error_message(void);
/* file:line where the last error on this thread was recorded ("" when none). */
const char *pp_error_origin(void);
void pp_error_clear(void);
const char *pp_status_name(pp_status st);
/* Bad input (invalid, corrupt, unreadable input file) maps to 2, everything else to 3. */
int pp_status_exit_code(pp_status st);

/* Logging to stderr. Level 0 = errors only, 1 = info (default), 2 = verbose. */
void pp_log_set_level(int level);
int pp_log_level(void);
void pp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Appends one formatted line (and '\n') to the NUL-terminated text in buf[cap], as far as it
 * fits: for lists of warnings and notes that reports print. */
void pp_append_line(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void pp_append_linev(char *buf, size_t cap, const char *fmt, va_list ap);

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC). */
uint64_t pp_now_ns(void);

/* Allocation helpers: zeroed, 64-byte aligned; NULL on failure. pp_free(NULL) is a no-op. */
void *pp_alloc(size_t bytes);
void pp_free(void *p);

/* Checked sizes for allocations whose counts come from outside data (a trace, a file, a flag):
 * pp_size_mul stores a * b in *out and returns true, or returns false (leaving *out SIZE_MAX)
 * when the product does not fit in size_t; pp_size_mul3 does a * b * c. pp_alloc_array is
 * calloc(n, elem) for pp_free()'s allocator (zeroed, 64-byte aligned): NULL when n * elem
 * overflows or the memory is not there. pp_realloc_array is realloc(p, n * elem) for malloc'ed
 * memory (not pp_alloc's), NULL on overflow or failure with p left untouched. */
bool pp_size_mul(size_t a, size_t b, size_t *out);
bool pp_size_mul3(size_t a, size_t b, size_t c, size_t *out);
void *pp_alloc_array(size_t n, size_t elem);
void *pp_realloc_array(void *p, size_t n, size_t elem);

/* Deterministic pseudo-random numbers: xoshiro256** seeded through splitmix64. The state is plain
 * data so checkpoints can save and restore it. */
typedef struct pp_rng {
    uint64_t s[4];
} pp_rng;

void pp_rng_seed(pp_rng *r, uint64_t seed);
uint64_t pp_rng_u64(pp_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double pp_rng_uniform(pp_rng *r);
/* Uniform integer in [0, n), n > 0, without modulo bias. */
uint64_t pp_rng_below(pp_rng *r, uint64_t n);
/* Standard normal (Box-Muller). */
double pp_rng_normal(pp_rng *r);

/* CRC-32C (Castagnoli) of a buffer; pass the previous value to continue a running checksum
 * (start with 0). */
uint32_t pp_crc32c(uint32_t crc, const void *data, size_t n);
/* The portable table implementation (tests compare the two). */
uint32_t pp_crc32c_sw(uint32_t crc, const void *data, size_t n);

/* Strict number parsing for flags and config values: the whole string must be a number in
 * [min, max]. On failure records an error naming `what` and returns PP_ERR_INVALID. */
pp_status pp_parse_i64(const char *s, const char *what, int64_t min, int64_t max, int64_t *out);
pp_status pp_parse_f64(const char *s, const char *what, double min, double max, double *out);

/* Opens `path` read-only (close-on-exec) and returns the descriptor in *fd and the file's size
 * in *bytes. Anything but a regular file (a FIFO, a socket, a device, a directory) is refused
 * with PP_ERR_INVALID naming what it is: the open never blocks, even on a FIFO without a
 * writer, and nothing is read from an endless source. */
pp_status pp_file_open_regular(const char *path, int *fd, uint64_t *bytes);

/* Reads a whole regular file into a NUL-terminated heap buffer (caller frees with free()).
 * Missing or unreadable files give PP_ERR_IO naming the path; non-regular ones are refused as
 * pp_file_open_regular does. */
pp_status pp_read_file(const char *path, char **data, size_t *len);

/* Writes all `n` bytes to the descriptor, going on after short writes and EINTR. Returns 0, or
 * the errno of the write(2) that failed (EIO for one that wrote nothing); the caller names the
 * file in its error. */
int pp_fd_write_all(int fd, const void *data, size_t n);

/* Writes `len` bytes to `path` atomically: a temporary file in the same directory
 * ("<path>.tmpXXXXXX", flock'ed while in use), fsync, rename over `path`, fsync of the
 * directory. On any failure the temporary file is removed and `path` is left as it was. A full
 * disk, a quota, the file size limit or a device error is PP_ERR_RUNTIME; other failures are
 * PP_ERR_IO. Before writing it removes the temporary files of `path` that an interrupted
 * earlier write left behind (pp_write_file_atomic_cleanup). */
pp_status pp_write_file_atomic(const char *path, const void *data, size_t len);
/* Removes "<path>.tmpXXXXXX" files no live writer holds (a process killed mid-write, even by
 * SIGKILL, leaves one whose lock the kernel has dropped); returns how many. Files of writers
 * still running are left alone. */
int pp_write_file_atomic_cleanup(const char *path);

/* An anonymous scratch file, "w+b", in $TMPDIR (else /tmp), named "<prefix>-XXXXXX" until it is
 * unlinked at once: gone when closed, whatever ends the process. NULL when none can be made. */
FILE *pp_scratch_file(const char *prefix);

/* The same atomic replacement, written as a stream: what is written to the FILE of
 * pp_atomic_stream_file goes to "<path>.tmpXXXXXX" and replaces `path` only at
 * pp_atomic_stream_commit (flush, fsync, rename, fsync of the directory; errors as
 * pp_write_file_atomic's, the temporary file removed). pp_atomic_stream_abort removes it and
 * leaves `path` as it was. Either frees the stream. For outputs that grow with the input (a
 * summary of every step): nothing of them is held in memory. */
typedef struct pp_atomic_stream pp_atomic_stream;
pp_status pp_atomic_stream_open(const char *path, pp_atomic_stream **out);
FILE *pp_atomic_stream_file(pp_atomic_stream *s);
pp_status pp_atomic_stream_commit(pp_atomic_stream *s);
void pp_atomic_stream_abort(pp_atomic_stream *s);

#ifdef __cplusplus
}
#endif
#endif /* PP_COMMON_H */
