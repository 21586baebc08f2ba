/*
 * timeline.h - sandboxes' audit timelines (audit/audit.h records; docs/audit.md): the
 * events of sandbox/ and api/, each redacted with its sandbox's redactor, the network
 * log's records (net/'s hook, resolved by the audit writer), and reading them back
 * with the caller's scope.
 */
#ifndef BRIG_TIMELINE_H
#define BRIG_TIMELINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "account/auth.h"
#include "registry.h"
#include "server.h"

/* Before the network attaches any sandbox: the audit writer's resolver and net/'s log
 * hook. */
void brig_timeline_init(brigd *d);

/* Records kind of sb (borrowed or referenced), asked by c (NULL: brigd itself); takes
 * data.  Never fails: an event whose redactor cannot be built keeps only its kind. */
void brig_timeline_record(brigd *d, brig_sandbox *sb, const brig_caller *c, const char *kind,
                          json_t *data);
/* Same for a project's own event (its policy changed), in c's account; takes data. */
void brig_timeline_project(brigd *d, const brig_caller *c, const char *project_id, const char *kind,
                           json_t *data);

/* The events of sandbox id (live, or ended: kept for audit_retention) that c may see,
 * after seq `after`, at most limit: *events (an array).  *ended: it ended (its last
 * event is in, or pruned).  BRIG_E_NOT_FOUND for a sandbox c may not see. */
int brig_timeline_read(brigd *d, const brig_caller *c, const char *id, int64_t after, int64_t limit,
                       json_t **events, bool *ended, brig_error **err);

/* The events c may export (an admin: its account's; the operator: everyone's, or
 * account_id's), since `since` (ms) and after seq `after`, at most limit: *events. */
int brig_timeline_export(brigd *d, const brig_caller *c, const char *account_id, int64_t since,
                         int64_t after, int64_t limit, json_t **events, brig_error **err);

/* Waits up to timeout_ms for any new event past seen (a seq brigd-wide; 0 at first):
 * the newest seq, or -1 at shutdown (a follower ends). */
int64_t brig_timeline_wait(brigd *d, int64_t seen, int64_t timeout_ms);

/* Verifies the chains c may verify (an admin: its account's; the operator: every one). */
int brig_timeline_verify(brigd *d, const brig_caller *c, json_t **out, brig_error **err);

#endif
