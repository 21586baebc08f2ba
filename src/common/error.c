/*
 * error.c - creating, wrapping and rendering brig_error values.
 */
#include "error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

static const struct {
    int status;
    const char *code;
} kinds[BRIG_E__COUNT] = {
    [BRIG_E_INTERNAL] = {500, "internal"},         [BRIG_E_INVALID] = {400, "invalid_request"},
    [BRIG_E_UNAUTHORIZED] = {401, "unauthorized"}, [BRIG_E_PAYMENT] = {402, "payment_required"},
    [BRIG_E_FORBIDDEN] = {403, "forbidden"},       [BRIG_E_NOT_FOUND] = {404, "not_found"},
    [BRIG_E_METHOD] = {405, "method_not_allowed"}, [BRIG_E_CONFLICT] = {409, "conflict"},
    [BRIG_E_TOO_LARGE] = {413, "too_large"},       [BRIG_E_LIMIT] = {429, "limit_exceeded"},
    [BRIG_E_UNAVAILABLE] = {503, "unavailable"},   [BRIG_E_TIMEOUT] = {504, "timeout"},
    [BRIG_E_NO_SPACE] = {507, "no_space"},         [BRIG_E_PROTOCOL] = {502, "agent_protocol"},
};

int brig_error_set(brig_error **err, brig_err_kind kind, int errnum, const char *fmt, ...)
{
    if (err == NULL || *err != NULL)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    char *base = brig_vasprintf(fmt, ap);
    va_end(ap);
    brig_error *e = brig_xcalloc(1, sizeof(*e));
    e->kind = kind < 0 || kind >= BRIG_E__COUNT ? BRIG_E_INTERNAL : kind;
    e->errnum = errnum;
    if (errnum != 0) {
        e->msg = brig_asprintf("%s: %s", base, strerror(errnum));
        free(base);
    } else {
        e->msg = base;
    }
    *err = e;
    return -1;
}

void brig_error_prefix(brig_error **err, const char *fmt, ...)
{
    if (err == NULL || *err == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *ctx = brig_vasprintf(fmt, ap);
    va_end(ap);
    char *msg = brig_asprintf("%s: %s", ctx, (*err)->msg);
    free(ctx);
    free((*err)->msg);
    (*err)->msg = msg;
}

void brig_error_clear(brig_error **err)
{
    if (err == NULL || *err == NULL)
        return;
    free((*err)->msg);
    free(*err);
    *err = NULL;
}

int brig_error_http_status(brig_err_kind kind)
{
    if (kind < 0 || kind >= BRIG_E__COUNT)
        return 500;
    return kinds[kind].status;
}

const char *brig_error_code(brig_err_kind kind)
{
    if (kind < 0 || kind >= BRIG_E__COUNT)
        return "internal";
    return kinds[kind].code;
}

brig_err_kind brig_error_kind_from_code(const char *code)
{
    for (int k = 0; code != NULL && k < BRIG_E__COUNT; k++)
        if (strcmp(kinds[k].code, code) == 0)
            return (brig_err_kind)k;
    return BRIG_E_INTERNAL;
}

const char *brig_connect_code(unsigned status)
{
    switch (status) {
    case 400:
        return "invalid_argument";
    case 401:
        return "unauthenticated";
    case 403:
        return "permission_denied";
    case 404:
        return "not_found";
    case 409:
        return "already_exists";
    case 413:
    case 429:
    case 507:
        return "resource_exhausted";
    case 501:
        return "unimplemented";
    case 502:
    case 503:
        return "unavailable";
    case 504:
        return "deadline_exceeded";
    default:
        return "internal";
    }
}
