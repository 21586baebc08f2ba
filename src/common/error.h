/*
 * error.h - brig's one error convention.
 *
 * Fallible functions return int (negative on failure) and take `brig_error **err`
 * last.  The error is created where the failure happens (with errno and a message),
 * callers may add context with brig_error_prefix(), and only the edges (CLI,
 * HTTP, agent protocol) render it.  `err` may be NULL when the caller does not
 * care; the message is then dropped.
 */
#ifndef BRIG_ERROR_H
#define BRIG_ERROR_H

#include <stdarg.h>

/* What kind of failure: decides the HTTP status and the JSON error code. */
typedef enum brig_err_kind {
    BRIG_E_INTERNAL = 0, /* 500 internal */
    BRIG_E_INVALID,      /* 400 invalid_request */
    BRIG_E_UNAUTHORIZED, /* 401 unauthorized */
    BRIG_E_PAYMENT,      /* 402 payment_required */
    BRIG_E_FORBIDDEN,    /* 403 forbidden */
    BRIG_E_NOT_FOUND,    /* 404 not_found */
    BRIG_E_METHOD,       /* 405 method_not_allowed */
    BRIG_E_CONFLICT,     /* 409 conflict */
    BRIG_E_TOO_LARGE,    /* 413 too_large */
    BRIG_E_LIMIT,        /* 429 limit_exceeded */
    BRIG_E_UNAVAILABLE,  /* 503 unavailable */
    BRIG_E_TIMEOUT,      /* 504 timeout */
    BRIG_E_NO_SPACE,     /* 507 no_space */
    BRIG_E_PROTOCOL,     /* 502 agent protocol violation */
    BRIG_E__COUNT
} brig_err_kind;

typedef struct brig_error {
    brig_err_kind kind;
    int errnum; /* errno at the failure, 0 if none */
    char *msg;  /* owned; never NULL once set */
} brig_error;

/* Sets *err (if err and *err is NULL) and returns -1, so callers can
 * `return brig_error_set(err, ...)`.  errnum != 0 appends strerror(errnum). */
int brig_error_set(brig_error **err, brig_err_kind kind, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Like brig_error_set with errnum = errno. */
#define brig_error_sys(err, ...) brig_error_set((err), BRIG_E_INTERNAL, errno, __VA_ARGS__)

/* Prepends "context: " to the message of *err (no-op when there is none). */
void brig_error_prefix(brig_error **err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Frees *err and sets it to NULL. */
void brig_error_clear(brig_error **err);

/* HTTP status and stable JSON code for a kind (e.g. 404, "not_found"). */
int brig_error_http_status(brig_err_kind kind);
const char *brig_error_code(brig_err_kind kind);

/* Parses a stable code back into a kind (unknown codes map to BRIG_E_INTERNAL). */
brig_err_kind brig_error_kind_from_code(const char *code);

/* The Connect protocol's code of an HTTP status ("not_found" for 404, "internal" for
 * what it has no code of): E2B's envd answers (brigd's api/e2b_*.c). */
const char *brig_connect_code(unsigned status);

#endif
