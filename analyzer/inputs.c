/* inputs.c: what a tool's input path names, resolved into the .pft files the analysis reads
 * (pp_analyzer.h, "Inputs"): a pprof-run directory, a .pft file, a directory of PyTorch
 * profiler (Kineto) traces or such traces themselves. Kineto traces are converted (kineto.c)
 * into a private temporary directory, removed by pp_inputs_close, or into a directory the
 * caller keeps (pprof-report --import). Called by pp_analyze_dir, so every tool gains it. */
#include "analyzer_internal.h"
#include "pp_kineto.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

struct pp_inputs {
    vec paths;    /* char*: the .pft files to analyze */
    vec sources;  /* char*: for each, what it came from (itself, or the Kineto trace) */
    vec made;     /* char*: the files this resolution wrote (removed at close unless kept) */
    char tmpdir[4096]; /* "" when none was made */
    int keep;     /* the import directory's files stay */
    size_t converted;
    int32_t ranks[64];    /* the first converted traces' ranks, for the duplicate check */
    char notes[2048];
};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_strs(vec *v)
{
    for (size_t i = 0; i < v->n; i++)
        free(((char **)v->data)[i]);
    vec_free(v);
}

static pp_status push_str(vec *v, const char *s)
{
    char **slot = vec_push(v);
    if (!slot || !(*slot = strdup(s))) {
        if (slot)
            v->n--;
        return PP_ERR(PP_ERR_NOMEM, "out of memory resolving the inputs");
    }
    return PP_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The entries of dir ending in `.pft` (pft = 1) or named like Kineto traces (pft = 0), sorted,
 * as dir/name. */
static pp_status list_dir(const char *dir, int pft, vec *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return PP_ERR(PP_ERR_IO, "cannot open run directory '%s'", dir);
    pp_status st = PP_OK;
    for (struct dirent *e; st == PP_OK && (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        int match = pft ? len >= 5 && strcmp(e->d_name + len - 4, ".pft") == 0
                        : pp_kineto_name_matches(e->d_name);
        if (!match)
            continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
            continue;
        st = push_str(out, path);
    }
    closedir(d);
    if (out->n)
        qsort(out->data, out->n, sizeof(char *), cmp_str);
    return st;
}

/* The directory converted traces go to: the import directory, else a new temporary one. */
static pp_status out_dir(pp_inputs *in, const char *import_dir, char *dir, size_t cap)
{
    if (import_dir) {
        snprintf(dir, cap, "%s", import_dir);
        return PP_OK;
    }
    if (!in->tmpdir[0]) {
        const char *t = getenv("TMPDIR");
        if (!t || !t[0])
            t = "/tmp";
        snprintf(in->tmpdir, sizeof in->tmpdir, "%s/pprof-kineto-XXXXXX", t);
        if (!mkdtemp(in->tmpdir)) {
            int err = errno;
            pp_status st = PP_ERR(PP_ERR_IO, "cannot create a temporary directory '%s' for the "
                                             "converted PyTorch traces: %s",
                                  in->tmpdir, strerror(err));
            in->tmpdir[0] = '\0';
            return st;
        }
    }
    snprintf(dir, cap, "%s", in->tmpdir);
    return PP_OK;
}

/* Converts one Kineto trace (rank: its number among the inputs' traces, used when the trace
 * names none) into the output directory and adds it. */
static pp_status convert_one(pp_inputs *in, const char *src, int32_t rank, const char *import_dir)
{
    char dir[4096], base[256], out[4096 + 300];
    pp_status st = out_dir(in, import_dir, dir, sizeof dir);
    if (st != PP_OK)
        return st;
    const char *b = strrchr(src, '/');
    snprintf(base, sizeof base, "%s", b ? b + 1 : src);
    static const char *const k_ext[] = {".pt.trace.json.gz", ".pt.trace.json", ".json.gz",
                                        ".json"};
    for (size_t k = 0; k < sizeof k_ext / sizeof k_ext[0]; k++)
        if (ends_with(base, k_ext[k])) {
            base[strlen(base) - strlen(k_ext[k])] = '\0';
            break;
        }
    snprintf(out, sizeof out, "%s/%s.pft", dir, base);
    for (int i = 2; access(out, F_OK) == 0 && i < 10000; i++) /* two inputs of one name */
        snprintf(out, sizeof out, "%s/%s-%d.pft", dir, base, i);
    pp_kineto_options o;
    pp_kineto_options_default(&o);
    o.default_rank = rank;
    pp_kineto_stats s;
    if ((st = pp_kineto_convert(src, out, &o, &s)) != PP_OK)
        return st;
    if ((st = push_str(&in->made, out)) != PP_OK) {
        unlink(out);
        return st;
    }
    /* tensorboard_trace_handler writes a trace per profiling cycle: two of one rank are two
     * cycles, not two stages */
    for (size_t i = 0; s.rank >= 0 && i < in->converted && i < 64; i++)
        if (in->ranks[i] == s.rank) {
            pp_append_line(in->notes, sizeof in->notes,
                           "%s: rank %d again (another trace states it too): one trace per rank "
                           "is expected; analyze one profiling cycle's traces at a time",
                           src, (int)s.rank);
            break;
        }
    if (in->converted < 64)
        in->ranks[in->converted] = s.rank;
    in->converted++;
    if (s.any_category)
        pp_append_line(in->notes, sizeof in->notes,
                       "%s: no event of a category torch's or Paddle's profiler writes: read as "
                       "another tool's Chrome trace, every complete, instant, begin/end and async "
                       "event a range or mark of its process's thread, every counter a series "
                       "(docs/kineto.md)",
                       src);
    if (s.problem[0])
        pp_append_line(in->notes, sizeof in->notes, "%s: %s", src, s.problem);
    if (s.skipped_memory)
        pp_append_line(in->notes, sizeof in->notes,
                       "%s: %llu memory events without \"Total Allocated\" not read", src,
                       (unsigned long long)s.skipped_memory);
    if ((st = push_str(&in->paths, out)) != PP_OK)
        return st;
    return push_str(&in->sources, src);
}

static pp_status add_pft(pp_inputs *in, const char *path)
{
    pp_status st = push_str(&in->paths, path);
    return st != PP_OK ? st : push_str(&in->sources, path);
}

/* Why a file of a directory of traces repeats others beside it, and is not read (NULL: it does
 * not). paddle_lines: Paddle's pipeline timeline files are there; host_traces: JAX's (TensorBoard's)
 * <host>.trace.json.gz, one per host. */
static const char *repeated_by(const char *p, int paddle_lines, int host_traces)
{
    /* Paddle's profiler_helper.py merges the timeline files into this one, beside them */
    if (paddle_lines && ends_with(p, "/pipeline_profile.json"))
        return "the profile_record_tmp_file_for_rank_* files it merges are read instead";
    /* jax.profiler.trace(create_perfetto_trace=True) writes the same trace twice */
    if (host_traces && ends_with(p, "/perfetto_trace.json.gz"))
        return "the same trace as the *.trace.json.gz beside it (JAX writes both)";
    return NULL;
}

/* Whether the file at path begins as a Perfetto protobuf trace does (what Chrome's tracing and
 * Perfetto record unless told to write JSON): a Trace message, whose first field is a packet
 * (field 1, length-delimited: byte 0x0a), its length a varint that fits in the file, the packet
 * starting with a field's tag (a known wire type, field number 1 or more). */
static int perfetto_proto(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    uint8_t b[16];
    size_t n = fread(b, 1, sizeof b, f);
    int seek = fseek(f, 0, SEEK_END);
    long size = seek == 0 ? ftell(f) : -1;
    fclose(f);
    if (n < 3 || b[0] != 0x0a || size < 0)
        return 0;
    uint64_t len = 0;
    size_t i = 1;
    for (int shift = 0; i < n && shift < 35; shift += 7, i++) {
        len |= (uint64_t)(b[i] & 0x7f) << shift;
        if (!(b[i] & 0x80))
            break;
    }
    if (i >= n - 1 || len == 0 || len > (uint64_t)size - i - 1)
        return 0;
    unsigned tag = b[i + 1], wire = tag & 7;
    return tag >> 3 != 0 && (wire == 0 || wire == 1 || wire == 2 || wire == 5);
}

/* One argument: a directory (its .pft files, else its Kineto traces) or a file. Kineto traces
 * go to `kineto` for conversion in order. */
static pp_status resolve_one(pp_inputs *in, const char *arg, vec *kineto)
{
    struct stat sb;
    if (stat(arg, &sb) != 0)
        return PP_ERR(PP_ERR_IO, "cannot open run directory '%s'", arg);
    pp_status st = PP_OK;
    if (S_ISDIR(sb.st_mode)) {
        vec pft = {.elem = sizeof(char *)}, js = {.elem = sizeof(char *)};
        if ((st = list_dir(arg, 1, &pft)) == PP_OK && pft.n == 0)
            st = list_dir(arg, 0, &js);
        for (size_t i = 0; st == PP_OK && i < pft.n; i++)
            st = add_pft(in, ((char **)pft.data)[i]);
        size_t found = 0;
        int paddle_lines = 0, host_traces = 0; /* repeated_by's */
        for (size_t i = 0; i < js.n; i++) {
            const char *p = ((char **)js.data)[i];
            paddle_lines |= strstr(p, "/profile_record_tmp_file_for_rank_") != NULL;
            host_traces |= ends_with(p, ".trace.json.gz") && !ends_with(p, ".pt.trace.json.gz");
        }
        for (size_t i = 0; st == PP_OK && i < js.n; i++) {
            const char *p = ((char **)js.data)[i];
            const char *why = repeated_by(p, paddle_lines, host_traces);
            if (why) {
                pp_append_line(in->notes, sizeof in->notes, "%s: not read, %s", p, why);
                continue;
            }
            if (pp_kineto_sniff(p)) {
                st = push_str(kineto, p);
                found++;
            }
        }
        if (st == PP_OK && pft.n == 0 && found == 0)
            st = PP_ERR(PP_ERR_INVALID, "'%s' holds no trace files (*.pft, or PyTorch profiler "
                                        "traces *.json, *.json.gz): is it a pprof-run directory?",
                        arg);
        free_strs(&pft);
        free_strs(&js);
        return st;
    }
    if (!S_ISREG(sb.st_mode))
        return PP_ERR(PP_ERR_INVALID, "'%s' is neither a directory nor a trace file", arg);
    if (ends_with(arg, ".pft"))
        return add_pft(in, arg);
    if (pp_kineto_sniff(arg))
        return push_str(kineto, arg);
    if (perfetto_proto(arg))
        return PP_ERR(PP_ERR_INVALID, "'%s' is a Perfetto protobuf trace (what Chrome's tracing "
                                      "and Perfetto record by default), which is not read: "
                                      "record JSON instead (Chrome: --trace-startup-format=json) "
                                      "or convert it with Perfetto's traceconv (traceconv json "
                                      "IN OUT)",
                      arg);
    return PP_ERR(PP_ERR_INVALID, "'%s' is not a run directory, a .pft trace or a Chrome JSON "
                                  "trace (PyTorch's profiler, Kineto, or another tool's)",
                  arg);
}

pp_status pp_inputs_open(const char *const *args, size_t n, const char *import_dir,
                         pp_inputs **out)
{
    *out = NULL;
    pp_inputs *in = calloc(1, sizeof *in);
    if (!in)
        return PP_ERR(PP_ERR_NOMEM, "out of memory resolving the inputs");
    in->paths.elem = in->sources.elem = in->made.elem = sizeof(char *);
    in->keep = import_dir != NULL;
    vec kineto = {.elem = sizeof(char *)};
    pp_status st = PP_OK;
    for (size_t i = 0; st == PP_OK && i < n; i++)
        st = resolve_one(in, args[i], &kineto);
    /* ranks in the traces' order, for those that state none */
    for (size_t i = 0; st == PP_OK && i < kineto.n; i++)
        st = convert_one(in, ((char **)kineto.data)[i], (int32_t)i, import_dir);
    free_strs(&kineto);
    if (st == PP_OK && in->paths.n == 0)
        st = PP_ERR(PP_ERR_INVALID, "no trace to analyze");
    if (st != PP_OK) {
        pp_inputs_close(in);
        return st;
    }
    *out = in;
    return PP_OK;
}

size_t pp_inputs_count(const pp_inputs *in) { return in->paths.n; }
const char *const *pp_inputs_paths(const pp_inputs *in)
{
    return (const char *const *)in->paths.data;
}
const char *pp_inputs_source(const pp_inputs *in, size_t i)
{
    return i < in->sources.n ? ((char **)in->sources.data)[i] : "";
}
size_t pp_inputs_converted(const pp_inputs *in) { return in->converted; }
const char *pp_inputs_notes(const pp_inputs *in) { return in->notes; }

void pp_inputs_close(pp_inputs *in)
{
    if (!in)
        return;
    for (size_t i = 0; !in->keep && i < in->made.n; i++)
        unlink(((char **)in->made.data)[i]);
    if (in->tmpdir[0])
        rmdir(in->tmpdir);
    free_strs(&in->paths);
    free_strs(&in->sources);
    free_strs(&in->made);
    free(in);
}

/* The converted files' scratch paths in a's files and warnings, replaced by their sources. */
static void name_sources(pp_analysis *a, const pp_inputs *in)
{
    for (size_t i = 0; i < a->n_files && i < in->paths.n; i++) {
        const char *p = ((char **)in->paths.data)[i], *s = ((char **)in->sources.data)[i];
        if (strcmp(p, s) == 0)
            continue;
        snprintf(a->files[i].trace_path, sizeof a->files[i].trace_path, "%s", p);
        snprintf(a->files[i].path, sizeof a->files[i].path, "%s", s);
        char buf[sizeof a->warnings];
        size_t pl = strlen(p), o = 0;
        for (const char *w = a->warnings; *w && o + 1 < sizeof buf;) {
            if (strncmp(w, p, pl) == 0) {
                o += (size_t)snprintf(buf + o, sizeof buf - o, "%s", s);
                if (o >= sizeof buf)
                    o = sizeof buf - 1;
                w += pl;
            } else {
                buf[o++] = *w++;
            }
        }
        buf[o] = '\0';
        memcpy(a->warnings, buf, o + 1);
    }
}

pp_status pp_analyze_inputs(const char *const *args, size_t n, const pp_analysis_options *o,
                            pp_analysis **out)
{
    return pp_analyze_inputs_held(args, n, o, out, NULL);
}

pp_status pp_analyze_inputs_held(const char *const *args, size_t n,
                                 const pp_analysis_options *o, pp_analysis **out,
                                 pp_inputs **held)
{
    pp_inputs *in = NULL;
    if (held)
        *held = NULL;
    pp_status st = pp_inputs_open(args, n, NULL, &in);
    if (st != PP_OK)
        return st;
    st = pp_analyze_files(pp_inputs_paths(in), pp_inputs_count(in), o, out);
    if (st == PP_OK) {
        name_sources(*out, in);
        if (in->notes[0]) {
            size_t len = strlen((*out)->warnings);
            snprintf((*out)->warnings + len, sizeof (*out)->warnings - len, "%s", in->notes);
        }
    }
    if (held && st == PP_OK)
        *held = in;
    else
        pp_inputs_close(in);
    return st;
}
