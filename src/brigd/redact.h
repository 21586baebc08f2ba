/*
 * redact.h - a streaming redactor: every secret value of a sandbox (and, for
 * values of 8 bytes or more, its base64 encodings at any alignment and its
 * URL-encoded forms) is replaced by "[REDACTED:NAME]" in output, also when the
 * value is split across chunks or frames.  An Aho-Corasick automaton over all
 * patterns; a stream holds back only the bytes that could still become a match.
 *
 * Where it cannot help: transformations it does not know (hex, reversed,
 * compressed, encrypted, one character per line with separators), and a secret
 * that overlaps another may leave a fragment of the longer one.  Redaction is a
 * safety net for accidents, not a boundary against a program that wants to
 * exfiltrate: see docs/secrets.md.
 */
#ifndef BRIG_REDACT_H
#define BRIG_REDACT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct brig_redactor brig_redactor;

/* Builds the automaton from {"NAME": "value"}; NULL when there is nothing to
 * redact.  It holds secret-derived bytes: brig_redactor_free wipes them. */
brig_redactor *brig_redactor_new(json_t *secrets);
void brig_redactor_free(brig_redactor *r);

/* One output stream (stdout or stderr of one command). */
typedef struct brig_redact_stream {
    const brig_redactor *r;
    int state;     /* automaton state */
    brig_buf held; /* bytes that may still be the start of a match */
} brig_redact_stream;

void brig_redact_init(brig_redact_stream *s, const brig_redactor *r);
/* Appends to out what can be released after p[0..n). */
void brig_redact_feed(brig_redact_stream *s, const uint8_t *p, size_t n, brig_buf *out);
/* End of stream: releases what is held. */
void brig_redact_flush(brig_redact_stream *s, brig_buf *out);
void brig_redact_dispose(brig_redact_stream *s);

/* Convenience: redacts a whole buffer in place (a buffered result). */
void brig_redact_buf(const brig_redactor *r, brig_buf *b);

#endif
