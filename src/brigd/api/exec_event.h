/*
 * exec_event.h - the audit timeline's "exec" event (docs/audit.md), shared by the
 * buffered, background and streamed exec (api_exec.c, stream.c).
 */
#ifndef BRIG_EXEC_EVENT_H
#define BRIG_EXEC_EVENT_H

#include <jansson.h>

#include "agentc/agentc.h"
#include "sandbox/sandbox.h"

/* The event of a command about to run: its command line, cwd, user, background, pty,
 * timeout, the names of the request's env and of the secrets injected (never a value),
 * its start.  secrets: {"NAME": value} or NULL. */
json_t *api_exec_event(const brig_exec_req *req, json_t *secrets);

/* How it ended, added to ev (taken), which is then recorded for sb asked by c: res
 * (exit code, signal, timed_out, duration; NULL: it did not end here) and its typed
 * reason (sandbox/ends.h), the bytes it wrote, the redactions made in them, or the
 * error that ended the request. */
void api_exec_event_end(brigd *d, brig_sandbox *sb, const brig_caller *c, json_t *ev,
                        const brig_exec_result *res, const char *reason, const int64_t bytes[2],
                        int64_t redactions, const char *error);

#endif
