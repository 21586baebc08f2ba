/*
 * audit.h - the audit timeline: what crossed a sandbox's boundary, recorded in order,
 * tamper-evident, kept after the sandbox ended (docs/audit.md).
 *
 * Recording costs the caller a JSON object and a queue append: a worker (core/worker.c)
 * takes the queue, redacts each event with its sandbox's redactor, chains it and
 * appends the whole batch to the store in one transaction.  It takes the queue 10 ms
 * after its first record (audit.c, DEFER_MS), not at once: the request that recorded it
 * is answered meanwhile without the store's write beside it, and a burst is one
 * transaction.  Readers call brig_audit_sync first, which takes the queue at once, so
 * what was recorded before their request is there; live followers see it up to 10 ms
 * later.
 *
 * The chain: one per account.  Record n of an account carries prev = the hash of its
 * record n - 1 (64 zeros for n = 1) and hash = hex SHA-256 of
 *   prev "\n" n "\n" at "\n" account "\n" sandbox "\n" project "\n" kind "\n" actor "\n" data
 * (data: the event's fields as stored, compact JSON).  The store keeps each chain's head
 * (its last record) and checkpoint (where the kept records begin after a prune), so a
 * record edited, deleted in the middle, at the start or at the end fails verify.
 *
 * Threading: every function may be called from any thread.
 */
#ifndef BRIG_AUDIT_H
#define BRIG_AUDIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "store/store.h"
#include "vault/redact.h"

typedef struct brig_audit brig_audit;

/* One event.  account_id NULL: the resolver fills in account, project and redactor
 * from sandbox_id (an event of brigd's lower layers, the network log). */
typedef struct brig_audit_event {
    const char *kind;       /* "exec", "file.write", ... (docs/audit.md) */
    const char *account_id; /* whose chain */
    const char *project_id; /* NULL: none */
    const char *sandbox_id; /* NULL: a project's event */
    const char *actor;      /* the key id that asked; NULL: "brigd" */
    json_t *data;           /* the fields (taken; NULL: {}) */
    brig_redactor *red;     /* the sandbox's secrets to redact (a reference is taken) */
} brig_audit_event;

/* Fills in an event's account, project (BRIG_ID_MAX each) and *red (a reference, or
 * NULL) from its sandbox id; false to drop the event (no such sandbox, or its secrets
 * cannot be redacted any more). */
typedef bool (*brig_audit_resolve_fn)(void *ctx, const char *sandbox_id, char *account,
                                      char *project, brig_redactor **red);

int brig_audit_start(brig_store *st, brig_audit **out, brig_error **err);
void brig_audit_set_resolver(brig_audit *a, brig_audit_resolve_fn fn, void *ctx);
/* Flushes what is queued and ends the worker; later events are dropped.  Then free. */
void brig_audit_stop(brig_audit *a);
void brig_audit_free(brig_audit *a);

/* Queues ev (its data taken, its strings copied).  Never fails, never blocks on I/O. */
void brig_audit_record(brig_audit *a, const brig_audit_event *ev);

/* Waits until everything queued before the call is in the store. */
void brig_audit_sync(brig_audit *a);
/* Waits up to timeout_ms for a record with a seq above seen; returns the newest seq, or
 * -1 once followers were told to stop. */
int64_t brig_audit_wait(brig_audit *a, int64_t seen, int64_t timeout_ms);
/* Shutdown: every brig_audit_wait returns -1 from now on (live followers end). */
void brig_audit_stop_followers(brig_audit *a);

/* A record as the API shows it: {seq, n, at, kind, account_id, sandbox_id, project_id,
 * actor, data, prev, hash}. */
json_t *brig_audit_row_json(const brig_audit_row *row);

/* Recomputes the chain of account_id (NULL: every account's) and names the first broken
 * record: *out = {"ok", "accounts", "records", "broken": null | {"account_id", "n",
 * "seq", "problem"}}. */
int brig_audit_verify(brig_audit *a, const char *account_id, json_t **out, brig_error **err);

/* Deletes records older than before (ms since the epoch), keeping every chain
 * verifiable (checkpoints); *pruned = how many. */
int brig_audit_prune(brig_audit *a, int64_t before, int64_t *pruned, brig_error **err);

/* hex SHA-256 of a record (see above) into out. */
void brig_audit_hash(const brig_audit_row *row, char out[65]);

#endif
