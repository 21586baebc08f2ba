/*
 * sandbox.h - sandbox lifecycle: create, look up, delete, reconcile at start-up.
 *
 * States: creating -> running -> deleting -> deleted (in the store), or
 * creating -> failed.  Live sandboxes (creating, running) are in brigd's list;
 * API threads borrow them with a reference (brig_sandbox_get / _put), so a
 * delete never frees a sandbox another thread is still using.  A tenant only
 * ever sees its own sandboxes: any other id is "not found".
 */
#ifndef BRIG_SANDBOX_H
#define BRIG_SANDBOX_H

#include <jansson.h>
#include <stdint.h>

#include "error.h"
#include "id.h"
#include "server.h"

struct brig_sandbox {
    char id[BRIG_ID_MAX];
    char account_id[BRIG_ID_MAX];
    char template[64];
    char template_key[17];
    int64_t created_at;  /* ms since the epoch */
    const char *state;   /* static string; guarded by brigd.lock */
    int refs;            /* list membership + borrowers; guarded by brigd.lock */
    brig_rt_sandbox *rt; /* runtime handle once running */
    int64_t uid_base;    /* its user namespace range (0: none held) */
    char tariff[32];
    json_t *env; /* plain environment of every command (owned; immutable) */
    struct brig_sandbox *next;
};

typedef struct brig_sandbox_opts {
    const char *template; /* NULL: the configured default */
    const char *tariff;   /* NULL: the configured default */
    json_t *env;          /* object of strings or NULL (borrowed) */
} brig_sandbox_opts;

/* Creates a sandbox and waits until it is ready; returns its JSON. */
int brig_sandbox_create(brigd *d, const char *account_id, const brig_sandbox_opts *opts,
                        json_t **out, brig_error **err);

/* Borrows a running sandbox of account_id; BRIG_E_NOT_FOUND otherwise. */
int brig_sandbox_get(brigd *d, const char *account_id, const char *id, brig_sandbox **out,
                     brig_error **err);
void brig_sandbox_put(brigd *d, brig_sandbox *sb);

/* The environment of a command: the sandbox's env overlaid with the request's
 * (either may be NULL); a new object, or NULL when both are empty. */
json_t *brig_sandbox_command_env(const brig_sandbox *sb, json_t *request_env);

/* Opens an agent connection to a borrowed sandbox (the caller closes it). */
int brig_sandbox_connect(brigd *d, brig_sandbox *sb, brig_error **err);

int brig_sandbox_delete(brigd *d, const char *account_id, const char *id, const char *reason,
                        brig_error **err);

json_t *brig_sandbox_json(brigd *d, const brig_sandbox *sb);
json_t *brig_sandbox_list(brigd *d, const char *account_id);

/* Start-up: re-attaches live sandboxes of a previous run and destroys everything
 * else the runtime still holds.  Never fails start-up for one bad sandbox. */
void brig_sandbox_reconcile(brigd *d);

/* Shutdown: forgets every sandbox without destroying it (the next start
 * re-attaches them). */
void brig_sandbox_forget_all(brigd *d);

/* "2026-12-01T10:00:00.123Z" */
void brig_format_time(int64_t ms, char out[32]);

#endif
