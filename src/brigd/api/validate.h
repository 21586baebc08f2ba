/*
 * validate.h - validation of API request bodies, kept apart from the HTTP layer so
 * unit tests can exercise it directly.
 */
#ifndef BRIG_VALIDATE_H
#define BRIG_VALIDATE_H

#include <jansson.h>
#include <stdint.h>

#include "agentc/agentc.h"
#include "error.h"

/* Rejects members of obj not in allowed (NULL-terminated): typos must not pass
 * silently ("timout": 5 would otherwise run with the default timeout). */
int brig_request_only_fields(json_t *obj, const char *const *allowed, brig_error **err);

/* An env object: names non-empty without '=', values strings. */
int brig_request_env(json_t *env, brig_error **err);

/* Validates an exec body ({"cmd"|"argv", "cwd", "env", "timeout", "stdin",
 * "stdin_encoding", "user", "pty", "background", "buffer_bytes"}) into req, which
 * borrows from body (except the decoded stdin: brig_exec_req_dispose).  timeout
 * is in seconds, 0 = none, at most max_ms. */
int brig_request_exec(json_t *body, int64_t default_ms, int64_t max_ms, brig_exec_req *req,
                      brig_error **err);

#endif
