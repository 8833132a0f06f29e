/* common.c: error reporting, logging, clocks, allocation, number parsing and file helpers used by
 * every pipeprof module. */
#include "pp_common.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The last error of each thread: pipeline workers fail independently and each message must
 * survive until the thread that owns it reports it. */
static _Thread_local char tls_msg[1024];
static _Thread_local char tls_origin[256];

pp_status pp_error_set(pp_status st, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_msg, sizeof tls_msg, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    snprintf(tls_origin, sizeof tls_origin, "%s:%d", base ? base + 1 : file, line);
    if (pp_log_level() >= 2)
        fprintf(stderr, "pipeprof: error at %s: %s\n", tls_origin, tls_msg);
    return st;
}

pp_status pp_error_wrap(pp_status st, const char *fmt, ...)
{
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    /* Shift the old message right and put "prefix: " in front, truncating at the buffer end. */
    size_t pl = strlen(prefix), cap = sizeof tls_msg;
    size_t ol = strlen(tls_msg);
    if (pl + 2 + ol >= cap)
        ol = cap - 1 - (pl + 2);
    memmove(tls_msg + pl + 2, tls_msg, ol);
    tls_msg[pl + 2 + ol] = '\0';
    memcpy(tls_msg, prefix, pl);
    tls_msg[pl] = ':';
    tls_msg[pl + 1] = ' ';
    return st;
}

const char *pp_error_message(void) { return tls_msg; }
const char *pp_error_origin(void) { return tls_origin; }

void pp_error_clear(void)
{
    tls_msg[0] = '\0';
    tls_origin[0] = '\0';
}

const char *pp_status_name(pp_status st)
{
    switch (st) {
    case PP_OK: return "ok";
    case PP_ERR_INVALID: return "invalid input";
    case PP_ERR_IO: return "I/O error";
    case PP_ERR_CORRUPT: return "corrupt file";
    case PP_ERR_NOMEM: return "out of memory";
    case PP_ERR_RUNTIME: return "runtime error";
    }
    return "unknown status";
}

int pp_status_exit_code(pp_status st)
{
    switch (st) {
    case PP_OK: return PP_EXIT_OK;
    case PP_ERR_INVALID:
    case PP_ERR_IO:
    case PP_ERR_CORRUPT: return PP_EXIT_USAGE;
    default: return PP_EXIT_RUNTIME;
    }
}

static int g_log_level = 1;

void pp_log_set_level(int level) { g_log_level = level; }
int pp_log_level(void) { return g_log_level; }

void pp_log(int level, const char *fmt, ...)
{
    if (level > g_log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

void pp_append_linev(char *buf, size_t cap, const char *fmt, va_list ap)
{
    size_t len = strnlen(buf, cap);
    if (len + 2 >= cap)
        return;
    vsnprintf(buf + len, cap - len - 1, fmt, ap);
    len = strlen(buf);
    buf[len] = '\n';
    buf[len + 1] = '\0';
}

void pp_append_line(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pp_append_linev(buf, cap, fmt, ap);
    va_end(ap);
}

uint64_t pp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool pp_size_mul(size_t a, size_t b, size_t *out)
{
    size_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        *out = SIZE_MAX;
        return false;
    }
    *out = r;
    return true;
}

bool pp_size_mul3(size_t a, size_t b, size_t c, size_t *out)
{
    size_t ab;
    return pp_size_mul(a, b, &ab) && pp_size_mul(ab, c, out) ? true : (*out = SIZE_MAX, false);
}

void *pp_alloc_array(size_t n, size_t elem)
{
    size_t bytes;
    return pp_size_mul(n, elem, &bytes) ? pp_alloc(bytes) : NULL;
}

void *pp_realloc_array(void *p, size_t n, size_t elem)
{
    size_t bytes;
    if (!pp_size_mul(n, elem, &bytes))
        return NULL;
    return realloc(p, bytes ? bytes : 1);
}

void *pp_alloc(size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes)
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, rounded) != 0)
        return NULL;
    memset(p, 0, rounded);
    return p;
}

void pp_free(void *p) { free(p); }

pp_status pp_parse_i64(const char *s, const char *what, int64_t min, int64_t max, int64_t *out)
{
    if (!s || !*s)
        return PP_ERR(PP_ERR_INVALID, "%s: empty value (expected an integer in [%lld, %lld])",
                      what, (long long)min, (long long)max);
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || end == s || *end != '\0')
        return PP_ERR(PP_ERR_INVALID, "%s: '%s' is not an integer", what, s);
    if (v < min || v > max)
        return PP_ERR(PP_ERR_INVALID, "%s: %lld is out of range [%lld, %lld]", what, v,
                      (long long)min, (long long)max);
    *out = v;
    return PP_OK;
}

pp_status pp_parse_f64(const char *s, const char *what, double min, double max, double *out)
{
    if (!s || !*s)
        return PP_ERR(PP_ERR_INVALID, "%s: empty value (expected a number in [%g, %g])", what,
                      min, max);
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno == ERANGE || end == s || *end != '\0' || !isfinite(v))
        return PP_ERR(PP_ERR_INVALID, "%s: '%s' is not a finite number", what, s);
    if (v < min || v > max)
        return PP_ERR(PP_ERR_INVALID, "%s: %g is out of range [%g, %g]", what, v, min, max);
    *out = v;
    return PP_OK;
}

static const char *file_kind(mode_t m)
{
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISDIR(m)) return "a directory";
    return "not a regular file";
}

pp_status pp_file_open_regular(const char *path, int *fd, uint64_t *bytes)
{
    *fd = -1;
    /* O_NONBLOCK: opening a FIFO read-only otherwise waits for a writer, possibly forever */
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f < 0)
        return PP_ERR(PP_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(f, &sb) != 0) {
        pp_status st = PP_ERR(PP_ERR_IO, "cannot stat '%s': %s", path, strerror(errno));
        close(f);
        return st;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(f);
        return PP_ERR(PP_ERR_INVALID, "'%s' is %s, not a regular file: refused", path,
                      file_kind(sb.st_mode));
    }
    /* a regular file reads the same either way; clear the flag for plain blocking reads */
    int fl = fcntl(f, F_GETFL);
    if (fl >= 0)
        (void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
    *fd = f;
    *bytes = (uint64_t)sb.st_size;
    return PP_OK;
}

pp_status pp_read_file(const char *path, char **data, size_t *len)
{
    char *buf = NULL;
    int fd = -1;
    uint64_t size = 0;
    pp_status st = pp_file_open_regular(path, &fd, &size);
    if (st != PP_OK)
        return st;
    if (size >= SIZE_MAX) {
        st = PP_ERR(PP_ERR_NOMEM, "'%s' is too large to read (%llu bytes)", path,
                    (unsigned long long)size);
        goto done;
    }
    size_t n = (size_t)size;
    buf = malloc(n + 1);
    if (!buf) {
        st = PP_ERR(PP_ERR_NOMEM, "cannot allocate %zu bytes to read '%s'", n, path);
        goto done;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            st = PP_ERR(PP_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
            goto done;
        }
        if (r == 0) {
            st = PP_ERR(PP_ERR_IO, "cannot read '%s': it shrank from %zu to %zu bytes while "
                                   "being read", path, n, got);
            goto done;
        }
        got += (size_t)r;
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    buf = NULL;
done:
    free(buf);
    close(fd);
    return st;
}

/* A failed write or flush: a full disk, a quota, the file size limit or a device error is the
 * machine's state, not the user's input (exit 3, not 2). */
static pp_status write_error(const char *what, const char *path, int err)
{
    pp_status kind = err == ENOSPC || err == EDQUOT || err == EFBIG || err == EIO
                         ? PP_ERR_RUNTIME
                         : PP_ERR_IO;
    return PP_ERR(kind, "cannot %s '%s': %s", what, path, strerror(err));
}

int pp_fd_write_all(int fd, const void *data, size_t n)
{
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (k == 0)
            return EIO; /* no progress: retrying would spin */
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static pp_status write_all(int fd, const void *data, size_t len, const char *path)
{
    int err = pp_fd_write_all(fd, data, len);
    return err ? write_error("write", path, err) : PP_OK;
}

/* The temporary files of pp_write_file_atomic are "<target>.tmp" + mkstemp's 6 characters. */
static int is_temp_of(const char *name, const char *base, size_t blen)
{
    if (strncmp(name, base, blen) != 0 || strncmp(name + blen, ".tmp", 4) != 0)
        return 0;
    const char *x = name + blen + 4;
    for (int i = 0; i < 6; i++)
        if (!((x[i] >= 'a' && x[i] <= 'z') || (x[i] >= 'A' && x[i] <= 'Z') ||
              (x[i] >= '0' && x[i] <= '9')))
            return 0;
    return x[6] == '\0';
}

int pp_write_file_atomic_cleanup(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    const char *base = slash ? path + (slash - dir) + 1 : path;
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof dir, ".");
    size_t blen = strlen(base);
    if (blen == 0 || blen + 11 > NAME_MAX)
        return 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return 0;
    }
    int removed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!is_temp_of(e->d_name, base, blen))
            continue;
        /* A writer holds an exclusive flock on its temporary file until it is renamed; the
         * kernel drops the lock when the writer dies (kill -9 included). A lock we can take
         * therefore belongs to nobody: the file was left by an interrupted save. */
        int fd = openat(dfd, e->d_name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat sb;
        if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            unlinkat(dfd, e->d_name, 0) == 0)
            removed++;
        close(fd); /* releases the lock */
    }
    closedir(d);
    return removed;
}

/* The first half of an atomic write: what an interrupted earlier write left is removed (it would
 * stay forever and may hold the very space this write needs), then "<path>.tmpXXXXXX" is created
 * and flock'ed. On success *tmp (malloc'ed) names it and *fd is open on it. */
static pp_status atomic_begin(const char *path, char **tmp, int *fd)
{
    size_t plen = strlen(path);
    *fd = -1;
    if (!(*tmp = malloc(plen + 16)))
        return PP_ERR(PP_ERR_NOMEM, "out of memory writing '%s'", path);
    (void)pp_write_file_atomic_cleanup(path);
    snprintf(*tmp, plen + 16, "%s.tmpXXXXXX", path);
    if ((*fd = mkstemp(*tmp)) < 0) {
        pp_status st = PP_ERR(PP_ERR_IO, "cannot create a temporary file next to '%s': %s", path,
                              strerror(errno));
        free(*tmp);
        *tmp = NULL;
        return st;
    }
    /* held until the rename: marks the temporary file as in use (see the cleanup) */
    if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
        pp_status st = PP_ERR(PP_ERR_IO, "cannot lock '%s': %s", *tmp, strerror(errno));
        close(*fd);
        *fd = -1;
        unlink(*tmp);
        free(*tmp);
        *tmp = NULL;
        return st;
    }
    return PP_OK;
}

/* The second half, once everything is written to fd: mode, fsync, rename over path, fsync of the
 * directory. The caller closes fd afterwards (the lock goes with it, after the rename: until then
 * the file is ours) and, on failure, removes tmp. */
static pp_status atomic_finish(int fd, const char *tmp, const char *path)
{
    if (fchmod(fd, 0644) != 0)
        return PP_ERR(PP_ERR_IO, "cannot set the mode of '%s': %s", tmp, strerror(errno));
    if (fsync(fd) != 0)
        return write_error("flush", tmp, errno);
    if (rename(tmp, path) != 0)
        return PP_ERR(PP_ERR_IO, "cannot rename '%s' to '%s': %s", tmp, path, strerror(errno));
    /* The rename is durable only once the directory entry is on disk. */
    size_t plen = strlen(path);
    char *dir = malloc(plen + 2);
    if (!dir)
        return PP_OK; /* renamed: the data is there, only the directory's fsync is skipped */
    memcpy(dir, path, plen + 1);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        strcpy(dir, ".");
    int dfd = open(dir, O_RDONLY);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(dir);
    return PP_OK;
}

pp_status pp_write_file_atomic(const char *path, const void *data, size_t len)
{
    char *tmp = NULL;
    int fd = -1;
    pp_status st = atomic_begin(path, &tmp, &fd);
    if (st == PP_OK && (st = write_all(fd, data, len, tmp)) == PP_OK &&
        (st = atomic_finish(fd, tmp, path)) == PP_OK)
        tmp[0] = '\0'; /* renamed: nothing to remove */
    if (fd >= 0)
        close(fd); /* after the successful fsync a close cannot lose data; the lock goes with it */
    if (tmp && tmp[0])
        unlink(tmp);
    free(tmp);
    return st;
}

struct pp_atomic_stream {
    FILE *f;
    char *tmp;
    char *path;
};

pp_status pp_atomic_stream_open(const char *path, pp_atomic_stream **out)
{
    *out = NULL;
    pp_atomic_stream *s = calloc(1, sizeof *s);
    char *copy = strdup(path);
    if (!s || !copy) {
        free(s);
        free(copy);
        return PP_ERR(PP_ERR_NOMEM, "out of memory writing '%s'", path);
    }
    int fd = -1;
    pp_status st = atomic_begin(path, &s->tmp, &fd);
    if (st == PP_OK && !(s->f = fdopen(fd, "w"))) {
        st = PP_ERR(PP_ERR_NOMEM, "cannot write '%s': %s", s->tmp, strerror(errno));
        close(fd);
        unlink(s->tmp);
    }
    if (st != PP_OK) {
        free(s->tmp);
        free(s);
        free(copy);
        return st;
    }
    s->path = copy;
    *out = s;
    return PP_OK;
}

FILE *pp_atomic_stream_file(pp_atomic_stream *s) { return s ? s->f : NULL; }

static void stream_free(pp_atomic_stream *s)
{
    free(s->tmp);
    free(s->path);
    free(s);
}

pp_status pp_atomic_stream_commit(pp_atomic_stream *s)
{
    if (!s)
        return PP_ERR(PP_ERR_INVALID, "no atomic stream to commit");
    pp_status st = PP_OK;
    errno = 0;
    if (fflush(s->f) != 0 || ferror(s->f))
        st = write_error("write", s->tmp, errno ? errno : EIO);
    if (st == PP_OK && (st = atomic_finish(fileno(s->f), s->tmp, s->path)) == PP_OK)
        s->tmp[0] = '\0';
    (void)fclose(s->f); /* flushed and synced (or failed): the lock goes with it */
    if (s->tmp[0])
        unlink(s->tmp);
    stream_free(s);
    return st;
}

void pp_atomic_stream_abort(pp_atomic_stream *s)
{
    if (!s)
        return;
    (void)fclose(s->f);
    unlink(s->tmp);
    stream_free(s);
}

FILE *pp_scratch_file(const char *prefix)
{
    const char *dir = getenv("TMPDIR");
    char path[4096];
    if (!dir || !*dir)
        dir = "/tmp";
    if ((size_t)snprintf(path, sizeof path, "%s/%s-XXXXXX", dir, prefix) >= sizeof path)
        return NULL;
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    unlink(path);
    FILE *f = fdopen(fd, "w+b");
    if (!f)
        close(fd);
    return f;
}
