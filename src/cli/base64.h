/*
 * base64.h - the base64 that brigd uses for bytes that are not valid UTF-8:
 * command output ("stdout_encoding": "base64", stream events) and exec's
 * "stdin" ("stdin_encoding": "base64").  RFC 4648 standard alphabet.
 */
#ifndef BRIG_CLI_BASE64_H
#define BRIG_CLI_BASE64_H

#include <stddef.h>

#include "error.h"
#include "util.h"

/* Appends the bytes that the len characters at in encode to *out.  Padding is
 * optional, ASCII whitespace (line breaks) is skipped; any other character
 * outside the alphabet, or a stray trailing character, fails with *err set and
 * *out holding the bytes decoded so far. */
int brig_base64_decode(const char *in, size_t len, brig_buf *out, brig_error **err);

/* Returns the n bytes at data base64-encoded with padding, NUL-terminated.
 * Caller frees. */
char *brig_base64_encode(const void *data, size_t n);

#endif
