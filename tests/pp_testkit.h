/* pp_testkit.h: helpers shared by the tests that run pipeprof's command-line tools: a temporary
 * directory per test, small file helpers, and running a tool with its output captured. */
#ifndef PP_TESTKIT_H
#define PP_TESTKIT_H

#include <stddef.h>

/* The current test's temporary directory (tk_dir_create). */
extern char tk_dir[256];

/* Creates /tmp/<prefix>_XXXXXX as tk_dir (a Criterion .init); tk_dir_remove deletes it (.fini). */
void tk_dir_create(const char *prefix);
void tk_dir_remove(void);
/* tk_dir/name, in one of 16 rotating buffers. */
const char *tk_path(const char *name);
int tk_exists(const char *path);
void tk_write_text(const char *path, const char *text);
/* The whole file, NUL-terminated, malloc'ed (NULL when it cannot be read); len may be NULL. */
char *tk_slurp(const char *path, size_t *len);

typedef struct tk_result {
    int code; /* exit status; -signal when killed */
    char *out, *err;
} tk_result;

/* Runs exe (absolute path) with args (NULL-terminated, without argv[0]) in tk_dir, stdout and
 * stderr captured. PPROF_LIB and PPROF_PLAN are removed from its environment (tests state what
 * they want); `env` (NULL-terminated "NAME=VALUE" strings, or NULL) is added. */
tk_result tk_run(const char *exe, const char *const *args, const char *const *env);
void tk_result_free(tk_result *r);

#endif /* PP_TESTKIT_H */
