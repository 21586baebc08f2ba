/*
 * auth.c - who is calling (see auth.h).
 */
#include "auth.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "store/store.h"

int brig_auth_check(brigd *d, const char *authorization, brig_caller *out, brig_error **err)
{
    if (authorization == NULL)
        return brig_error_set(err, BRIG_E_UNAUTHORIZED, 0,
                              "missing API key: send 'Authorization: Bearer <key>'");
    if (strncasecmp(authorization, "Bearer ", 7) != 0)
        return brig_error_set(err, BRIG_E_UNAUTHORIZED, 0,
                              "malformed Authorization header: expected 'Bearer <key>'");
    const char *key = authorization + 7;
    while (*key == ' ')
        key++;
    if (*key == '\0' || strlen(key) > 256)
        return brig_error_set(err, BRIG_E_UNAUTHORIZED, 0, "invalid API key");
    char hash[65];
    brig_key_hash(key, hash);
    memset(out, 0, sizeof(*out));
    brig_key_row k;
    int found = brig_store_key_lookup(d->store, hash, &k, err);
    if (found < 0)
        return -1;
    if (found == 0)
        return brig_error_set(err, BRIG_E_UNAUTHORIZED, 0, "invalid API key");
    snprintf(out->key_id, sizeof(out->key_id), "%s", k.id);
    snprintf(out->account_id, sizeof(out->account_id), "%s", k.account_id);
    snprintf(out->project_id, sizeof(out->project_id), "%s", k.project_id);
    snprintf(out->scope, sizeof(out->scope), "%s", k.scope);
    return 0;
}

bool brig_caller_sees(const brig_caller *c, const char *account_id, const char *project_id)
{
    if (c->account_id[0] == '\0' || strcmp(c->account_id, account_id) != 0)
        return false; /* the operator sees no account's insides */
    if (strcmp(c->scope, "admin") == 0)
        return true;
    return project_id && strcmp(c->project_id, project_id) == 0;
}
