/*
 * redact.h - a streaming redactor: every secret value of a sandbox (and, for
 * values of 8 bytes or more, its base64 encodings at any alignment and its
 * URL-encoded forms) is replaced in output, also when the value is split
 * across chunks or frames.  An Aho-Corasick automaton over all patterns,
 * built in time linear in their total length; a stream holds back only the
 * bytes that could still become a match, and costs amortised O(1) per byte.
 *
 * Two kinds of replacement: "[REDACTED:NAME]" (command output), or a mask of
 * the match's own length ("[REDACTED:NAME]" cut or padded with '*', line
 * breaks kept where they were) for downloads, where sizes must not change.
 *
 * A redactor is immutable once built and reference-counted: a sandbox keeps
 * one for its life (its secrets never change) and requests share it.
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
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

typedef struct brig_redactor brig_redactor;

/* Builds the automaton from {"NAME": "value"}; NULL when there is nothing to
 * redact.  The result holds one reference.  It holds secret-derived bytes: the
 * last brig_redactor_free wipes them. */
brig_redactor *brig_redactor_new(json_t *secrets);
/* Another reference to r (NULL-safe); returns r. */
brig_redactor *brig_redactor_ref(brig_redactor *r);
/* Drops one reference; the last one wipes and frees (NULL-safe). */
void brig_redactor_free(brig_redactor *r);
/* r's twin for DNS names (the network log): the same values and forms, matched
 * in text folded to lower case (resolvers and our log lower-case names) with
 * dots ignored like line breaks (a value split across labels).  Built at the
 * first call and kept with r; borrowed: valid while the caller holds r. */
brig_redactor *brig_redactor_dns(brig_redactor *r);
/* Bytes of memory the automaton holds (for limits and logs). */
size_t brig_redactor_size(const brig_redactor *r);

/* One output stream (stdout or stderr of one command, one download). */
typedef struct brig_redact_stream {
    const brig_redactor *r;
    int state;     /* automaton state */
    bool mask;     /* same-length masks instead of "[REDACTED:NAME]" */
    brig_buf held; /* held.data[head .. len): bytes that may still be the start of a match */
    size_t head;
    size_t solid;   /* bytes of the held part that are not line breaks */
    size_t matches; /* replacements made so far (the audit timeline counts them) */
} brig_redact_stream;

void brig_redact_init(brig_redact_stream *s, const brig_redactor *r);
/* Same, replacing each match by a mask of its own length (see above). */
void brig_redact_init_mask(brig_redact_stream *s, const brig_redactor *r);
/* Appends to out what can be released after p[0..n). */
void brig_redact_feed(brig_redact_stream *s, const uint8_t *p, size_t n, brig_buf *out);
/* End of stream: releases what is held. */
void brig_redact_flush(brig_redact_stream *s, brig_buf *out);
void brig_redact_dispose(brig_redact_stream *s);
/* Bytes held back right now (*p: where they start). */
size_t brig_redact_held(const brig_redact_stream *s, const uint8_t **p);

/* How many matches r finds in p[0..n), without making the redacted copy (the audit
 * timeline's count of a buffered result's redactions). */
size_t brig_redact_count(const brig_redactor *r, const uint8_t *p, size_t n);

/* Convenience: redacts a whole buffer in place (a buffered result). */
void brig_redact_buf(const brig_redactor *r, brig_buf *b);
/* Redacts every string inside j (objects and arrays, recursively) in place,
 * with "[REDACTED:NAME]" markers. */
void brig_redact_json(const brig_redactor *r, json_t *j);

#endif
