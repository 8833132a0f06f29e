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
/* An object member's key and the colon after it, read in one call (the walk of every member of
 * every event: bench_kineto): the key's bytes, cut to cap - 1, NUL-terminated into key[cap]
 * (cap >= 1), and KJ_STR when both were read. Otherwise the token found instead of the key
 * (KJ_OBJ_END for the '}' of an empty object, KJ_EOF, KJ_ERR, or any other token, which the
 * caller takes for a syntax error), or, after a key, KJ_EOF when the input ends before its colon
 * and KJ_ERR when something else follows it. The same tokens, bytes and counts as kj_next for
 * the key, then for the colon. */
kj_tok kj_key(kj_lexer *lx, char *key, size_t cap);
/* What follows a member's value: KJ_STR with the next member's key and colon read as kj_key
 * reads them, KJ_OBJ_END at the object's '}', KJ_EOF when the input ends first, KJ_ERR for
 * anything else (a '}' after a comma among them). One call for the separator and the key. */
kj_tok kj_next_key(kj_lexer *lx, char *key, size_t cap);
/* Skips the value that begins with token `first` (already read); KJ_ERR on nesting deeper than
 * KJ_MAX_DEPTH (or a read error), KJ_EOF when the input ends inside it. An object or array is
 * read as bytes, its strings and brackets only: what lies between them is not checked (nor
 * counted among the truncated strings), what is skipped being never used. A scalar (or KJ_EOF /
 * KJ_ERR) is its own value, returned without a call: most members' values are. */
kj_tok kj_skip_value(kj_lexer *lx, kj_tok first);
static inline kj_tok kj_skip(kj_lexer *lx, kj_tok first)
{
    return (first >= KJ_STR || first <= KJ_ERR) ? first : kj_skip_value(lx, first);
}
/* The error of the last KJ_ERR ("" when none), with the byte offset where it was seen. */
const char *kj_error(const kj_lexer *lx);
uint64_t kj_offset(const kj_lexer *lx);
uint64_t kj_strings_truncated(const kj_lexer *lx);

#endif /* PP_KINETO_JSON_H */
