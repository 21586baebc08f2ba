/*
 * view.h - the API's views of sandboxes: a live one (from the registry), an ended one
 * (from its row, within the retention period), the live ones a caller may see, its
 * network log, and why a request's sandbox went away while it ran.
 */
#ifndef BRIG_VIEW_H
#define BRIG_VIEW_H

#include <jansson.h>
#include <stdint.h>

#include "account/auth.h"
#include "error.h"
#include "registry.h"
#include "server.h"

/* The API's view of a live sandbox. */
json_t *brig_sandbox_json(brigd *d, const brig_sandbox *sb);

/* One sandbox (live, or ended within the retention period) / the live ones. */
int brig_sandbox_info(brigd *d, const brig_caller *c, const char *id, json_t **out,
                      brig_error **err);
json_t *brig_sandbox_list(brigd *d, const brig_caller *c);

/* The ended sandboxes the caller may see (a sandbox key: its project's) that ended at or after
 * since (and within the retention period), the last ended first, at most limit of them, after
 * the one named `before` (NULL: from the last ended): {"sandboxes", "next_before"}, the latter
 * the id to pass as `before` for the next page, null on the last.  BRIG_E_INVALID when before
 * is not one of the caller's ended sandboxes. */
int brig_sandbox_list_ended(brigd *d, const brig_caller *c, int64_t since, const char *before,
                            int limit, json_t **out, brig_error **err);

/* The network log of a sandbox (shown through its redactor). */
int brig_sandbox_network_log(brigd *d, const brig_caller *c, const char *id, json_t **out,
                             brig_error **err);

/* A request whose agent connection failed (*err: a protocol or internal error)
 * because the sandbox ended meanwhile: *err becomes a conflict that says so
 * ("sandbox … ended while the request ran (reason)"). */
void brig_sandbox_explain_end(brigd *d, const brig_caller *c, const char *id, brig_error **err);

#endif
