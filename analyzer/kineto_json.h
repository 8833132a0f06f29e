/* kineto_json.h: the streaming JSON tokenizer under the Kineto importer (kineto.c), private to
 * analyzer/. A pull lexer over a file read in 256 KB chunks (gzip or plain, through zlib) or over
 * a buffer: no document is ever built. Strings longer than KJ_STR_CAP are truncated (counted),
 * numbers longer than 63 characters are an error, and the nesting kj_skip can walk is capped at
 * KJ_MAX_DEPTH: memory is fixed whatever the input. Not thread-safe: one lexer, one user. */
#ifndef PP_KINETO_JSON_H
#define PP_KINETO_JSON_H

#include "pp_common.h"

#include <stddef.h>
#include <stdint.h>

enum { KJ_STR_CAP = 4096, KJ_MAX_DEPTH = 256 };

typedef enum kj_tok {
    KJ_EOF = 0,
    KJ_ERR,
    KJ_OBJ, /* { */
    KJ_OBJ_END,
    KJ_ARR, /* [ */
    KJ_ARR_END,
    KJ_COLON,
    KJ_COMMA,
    KJ_STR,  /* in str[0..str_len), NUL-terminated */
    KJ_NUM,  /* in num (NaN and Infinity literals too: bounds are the caller's) */
    KJ_TRUE,
    KJ_FALSE,
    KJ_NULL
} kj_tok;

typedef struct kj_lexer kj_lexer;

/* Opens a file (gzip-compressed or not: zlib reads both) or a buffer that must outlive it. */
pp_status kj_open_file(const char *path, kj_lexer **out);
pp_status kj_open_mem(const void *data, size_t len, kj_lexer **out);
void kj_close(kj_lexer *lx);

kj_tok kj_next(kj_lexer *lx);
/* The current string token, its length, and whether it was cut at KJ_STR_CAP. */
const char *kj_str(const kj_lexer *lx, size_t *len);
double kj_num(const kj_lexer *lx);
/* Skips the value that begins with token `first` (already read); KJ_ERR on a syntax error or
 * nesting deeper than KJ_MAX_DEPTH, KJ_EOF when the input ends inside it. */
kj_tok kj_skip(kj_lexer *lx, kj_tok first);
/* The error of the last KJ_ERR ("" when none), with the byte offset where it was seen. */
const char *kj_error(const kj_lexer *lx);
uint64_t kj_offset(const kj_lexer *lx);
uint64_t kj_strings_truncated(const kj_lexer *lx);

#endif /* PP_KINETO_JSON_H */
