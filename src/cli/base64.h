/*
 * base64.h - decoding the base64 that brigd uses for command output that is not
 * valid UTF-8 ("stdout_encoding": "base64"; RFC 4648 standard alphabet).
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

#endif
