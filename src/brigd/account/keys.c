/*
 * keys.c - API keys (see keys.h).
 */
#include "keys.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/format.h"
#include "store/store.h"
#include "util.h"

void brig_keys_mint(char key_id[BRIG_ID_MAX], char **key, char hash[65])
{
    brig_id_new("key", key_id);
    *key = brig_key_new();
    brig_key_hash(*key, hash);
}

int brig_keys_create(brigd *d, const char *account_id, const char *project_id, const char *scope,
                     char key_id[BRIG_ID_MAX], char **key, brig_error **err)
{
    brig_key_row k = {0};
    brig_keys_mint(k.id, key, k.hash);
    snprintf(k.account_id, sizeof(k.account_id), "%s", account_id);
    snprintf(k.project_id, sizeof(k.project_id), "%s", project_id);
    snprintf(k.scope, sizeof(k.scope), "%s", scope);
    snprintf(key_id, BRIG_ID_MAX, "%s", k.id);
    if (brig_store_key_insert(d->store, &k, brig_now_real_ms(), err) < 0) {
        free(*key);
        *key = NULL;
        return -1;
    }
    return 0;
}

static void add_key(const brig_key_listed *k, void *arr)
{
    char created[32], revoked[32];
    brig_format_time(k->created_at, created);
    if (k->revoked_at)
        brig_format_time(k->revoked_at, revoked);
    json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:o}", "id", k->id, "scope", k->scope,
                                         "created_at", created, "revoked_at",
                                         k->revoked_at ? json_string(revoked) : json_null()));
}

json_t *brig_keys_list(brigd *d, const char *project_id, brig_error **err)
{
    json_t *arr = json_array();
    if (brig_store_key_each(d->store, project_id, add_key, arr, err) < 0) {
        json_decref(arr);
        return NULL;
    }
    return json_pack("{s:o}", "keys", arr);
}

int brig_keys_revoke(brigd *d, const char *project_id, const char *key_id, brig_error **err)
{
    int r = brig_store_key_revoke(d->store, project_id, key_id, brig_now_real_ms(), err);
    if (r == 0)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no key '%.40s' in this project", key_id);
    return r < 0 ? -1 : 0;
}
