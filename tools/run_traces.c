/* run_traces.c: the trace files a run left (pprof_run.h), as pprof-run's manifest and summary
 * report them: header, footer counts and damage of each, read block by block; under a launcher
 * only this instance's own files. */
#define _GNU_SOURCE /* scandir, alphasort */
#include "pprof_run.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int prun_ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static int pft_filter(const struct dirent *e)
{
    return prun_ends_with(e->d_name, ".pft");
}

/* <host>.<pid>.pft -> pid, 0 when the name has another form. */
static uint32_t pid_from_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    const char *p = dot;
    while (p && p > name && p[-1] >= '0' && p[-1] <= '9')
        p--;
    if (p && p < dot && p > name && p[-1] == '.')
        return (uint32_t)strtoul(p, NULL, 10);
    return 0;
}

/* Under a launcher: is this file of our rank? Decided from the 256-byte header alone, so an
 * instance does not read every other rank's whole trace. */
static int header_rank_is(const char *dir, const char *name, int rank)
{
    char path[PATH_MAX + NAME_MAX + 2];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    pp_trace_header h;
    int fd = -1;
    uint64_t bytes = 0;
    if (pp_file_open_regular(path, &fd, &bytes) != PP_OK) { /* a FIFO is not waited on */
        pp_error_clear();
        return 0;
    }
    ssize_t got = read(fd, &h, sizeof h);
    close(fd);
    pp_trace *t = NULL;
    if (got != (ssize_t)sizeof h || pp_trace_load_mem(&h, sizeof h, &t) != PP_OK) {
        pp_error_clear();
        return 0;
    }
    int same = t->header.rank == rank;
    pp_trace_free(t);
    return same;
}

/* What the manifest says about one trace, read block by block as the analyzer reads it (memory
 * bounded by the largest block, not the trace): header, footer, damage, and the events counted
 * the way pp_trace_load counts them when there is no footer. Unknown record kinds are counted as
 * the loader does. */
static pp_status scan_trace(const char *path, trace_info *ti)
{
    pp_trace_reader *r = NULL;
    pp_status st = pp_trace_reader_open(path, &r);
    if (st != PP_OK)
        return st;
    const pp_trace_header *h = pp_trace_reader_header(r);
    ti->loaded = 1;
    ti->pid = h->pid;
    ti->rank = h->rank;
    memcpy(ti->host, h->host, sizeof h->host);
    ti->host[sizeof ti->host - 1] = '\0';
    pp_rec_footer footer;
    memset(&footer, 0, sizeof footer);
    uint64_t events = 0, unknown = 0;
    int has_footer = 0;
    for (;;) {
        pp_trace_block b;
        bool got = false;
        if ((st = pp_trace_reader_next(r, &b, &got)) != PP_OK || !got)
            break;
        /* the reader has checked every record's size against the block */
        for (uint32_t off = 0; off + sizeof(pp_rec_header) <= b.h.payload_bytes;) {
            pp_rec_header rh;
            memcpy(&rh, b.payload + off, sizeof rh);
            if (rh.size < sizeof rh || off + rh.size > b.h.payload_bytes)
                break;
            switch (rh.type) {
            case PP_REC_PUSH: case PP_REC_POP: case PP_REC_START: case PP_REC_END:
            case PP_REC_MARK:
                events++;
                break;
            case PP_REC_FOOTER:
                if (rh.size >= sizeof footer) {
                    memcpy(&footer, b.payload + off, sizeof footer); /* the last one wins */
                    has_footer = 1;
                }
                break;
            case PP_REC_EXT_PAYLOAD: case PP_REC_STRING: case PP_REC_DOMAIN:
            case PP_REC_CATEGORY: case PP_REC_THREAD_NAME: case PP_REC_SCHEMA: case PP_REC_GPU:
            case PP_REC_API: case PP_REC_NCCL:
                break;
            default:
                unknown++;
                break;
            }
            off += rh.size;
        }
    }
    ti->damage = *pp_trace_reader_damage(r);
    ti->damage.has_footer = has_footer;
    ti->damage.records_unknown = unknown;
    ti->has_footer = has_footer;
    ti->events = has_footer ? footer.events : events;
    ti->dropped = has_footer ? footer.dropped : 0;
    ti->filtered = has_footer ? footer.filtered : 0;
    pp_trace_reader_close(r);
    return st;
}

static void load_trace_info(const char *dir, const char *name, trace_info *ti)
{
    memset(ti, 0, sizeof *ti);
    snprintf(ti->name, sizeof ti->name, "%s", name);
    ti->rank = -1;
    char path[PATH_MAX + NAME_MAX + 2];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    if (stat(path, &sb) == 0)
        ti->bytes = (uint64_t)sb.st_size;
    if (scan_trace(path, ti) != PP_OK) {
        snprintf(ti->problem, sizeof ti->problem, "%s: %s", ti->loaded ? "read error" :
                 "unreadable", pp_error_message());
        pp_error_clear();
        if (!ti->loaded)
            ti->pid = pid_from_name(name); /* the name still tells whose file it is */
        return;
    }
    const pp_trace_damage *d = &ti->damage;
    ti->damaged = d->blocks_bad || d->bytes_skipped || d->truncated || d->records_unknown;
    if (ti->damaged) {
        snprintf(ti->problem, sizeof ti->problem,
                 "%llu bad block(s), %llu byte(s) skipped%s%s%s",
                 (unsigned long long)d->blocks_bad, (unsigned long long)d->bytes_skipped,
                 d->truncated ? ", truncated" : "", d->first_problem[0] ? ": " : "",
                 d->first_problem);
    }
}

static int reaped_has(const child_result *r, uint32_t pid)
{
    for (size_t i = 0; i < r->n_reaped; i++)
        if ((uint32_t)r->reaped[i] == pid)
            return 1;
    return 0;
}

pp_status prun_collect_traces(const char *dir, int rank, const child_result *r,
                              trace_info **out, size_t *n_out)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, pft_filter, alphasort);
    *out = NULL;
    *n_out = 0;
    if (n < 0)
        return PP_ERR(PP_ERR_IO, "cannot list '%s': %s", dir, strerror(errno));
    trace_info *ti = n ? calloc((size_t)n, sizeof *ti) : NULL;
    if (n && !ti) {
        for (int i = 0; i < n; i++)
            free(names[i]);
        free(names);
        return PP_ERR(PP_ERR_NOMEM, "out of memory listing '%s'", dir);
    }
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        const char *name = names[i]->d_name;
        if (rank < 0 || reaped_has(r, pid_from_name(name)) || header_rank_is(dir, name, rank))
            load_trace_info(dir, name, &ti[k++]);
        free(names[i]);
    }
    free(names);
    *out = ti;
    *n_out = k;
    return PP_OK;
}
