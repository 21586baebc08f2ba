/*
 * auth.h - who is calling (the presented API key), and what they may see.
 *
 * Keys are made and revoked by keys.h; the store keeps only their hash.  Scopes:
 *   operator  the server's own key (operator.key): manages accounts, credits and
 *             account settings (concurrency limit, tariffs),
 *             nothing inside an account
 *   admin     an account's administrator: every project of the account, its
 *             policies, secrets and keys
 *   sandbox   what an agent gets: create, use and delete the sandboxes of one
 *             project; never policies, secrets or keys
 */
#ifndef BRIG_AUTH_H
#define BRIG_AUTH_H

#include <stdbool.h>

#include "error.h"
#include "core/id.h"
#include "server.h"

typedef struct brig_caller {
    char key_id[BRIG_ID_MAX];
    char account_id[BRIG_ID_MAX]; /* "" for the operator */
    char project_id[BRIG_ID_MAX]; /* the key's project ("" for the operator) */
    char scope[16];               /* "operator" | "admin" | "sandbox" */
} brig_caller;

/* Checks an Authorization header value; BRIG_E_UNAUTHORIZED when it is missing,
 * malformed or unknown. */
int brig_auth_check(brigd *d, const char *authorization, brig_caller *out, brig_error **err);

/* May this caller see a thing of account_id / project_id? */
bool brig_caller_sees(const brig_caller *c, const char *account_id, const char *project_id);

static inline bool brig_caller_is(const brig_caller *c, const char *scope)
{
    return __builtin_strcmp(c->scope, scope) == 0;
}

#endif
