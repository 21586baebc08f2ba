/*
 * handler.h - what every REST handler uses (routes.c, api_exec.c, api_files.c,
 * api_accounts.c): the request's body and times, and the agent of the request's sandbox.
 * Not a public interface; the handlers themselves are listed in handlers.h.
 */
#ifndef BRIG_HANDLER_H
#define BRIG_HANDLER_H

#include "agentc/agentc.h"
#include "http.h"
#include "sandbox/sandbox.h"

/* A non-negative integer query argument (absent or empty: def); -1 when it is not one or is
 * above max. */
int64_t api_query_int(brig_req *r, const char *name, int64_t def, int64_t max);

/* A time query argument: ms since the epoch, or "2026-12-01T10:00:00[.123]Z" (absent or
 * empty: 0); -1 when it is neither. */
int64_t api_query_time(brig_req *r, const char *name);

/* Borrows the request's sandbox ({id}) and opens an agent connection to it.
 * On failure replies (404, 503…) and returns -1; on success the caller owns
 * *sb (brig_sandbox_put) and the fd. */
int api_open_agent(brig_req *r, brig_sandbox **sb);

/* One call to the agent of the request's sandbox, answered when it is done:
 *
 *     api_call c;
 *     if (api_call_open(r, &c, API_CALL_MS) < 0)
 *         return;
 *     int rc = brig_agentc_proc_signal(c.fd, pid, sig, &c.err);
 *     api_call_answer(r, &c, rc, 204, NULL);
 */
typedef struct api_call {
    brig_sandbox *sb; /* borrowed until api_call_answer */
    int fd;           /* the agent connection, closed by api_call_answer */
    brig_error *err;  /* the call's error (taken by api_call_answer) */
} api_call;

/* How long a quick agent call (stat, mkdir, the proc_* calls) may take to answer. */
#define API_CALL_MS 30000

/* api_open_agent, and the connection's receive timeout (0: none).  On failure replies and
 * returns -1. */
int api_call_open(brig_req *r, api_call *c, int64_t timeout_ms);

/* Closes the connection, gives the sandbox back, then replies: c->err when rc < 0, else
 * status with body (taken; NULL: no body). */
void api_call_answer(brig_req *r, api_call *c, int rc, unsigned status, json_t *body);

/* Parses the buffered body as a JSON object with only these fields; replies
 * 400 and returns NULL on failure. */
json_t *api_body(brig_req *r, const char *const *fields);

/* "2026-12-01T10:00:00.123Z" from ms since the epoch (JSON null for null). */
json_t *api_time(json_t *ms);

#endif
