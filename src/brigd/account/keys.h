/*
 * keys.h - API keys: minting them, storing a new one, revoking one.
 *
 * A key is "brig_" + 256 random bits (core/id.h); the store keeps only its
 * BLAKE2b hash, so a leaked database file yields no usable key.  The secret is
 * shown once, to whoever created the key.  Checking a presented key is auth.h's.
 */
#ifndef BRIG_KEYS_H
#define BRIG_KEYS_H

#include "error.h"
#include <jansson.h>

#include "core/id.h"
#include "server.h"

/* A new key: its id, its secret (*key, caller frees: wipe it) and its hash. */
void brig_keys_mint(char key_id[BRIG_ID_MAX], char **key, char hash[65]);

/* Creates a key of scope ("admin" | "sandbox") for project_id of account_id;
 * *key is the secret (shown once, caller frees). */
int brig_keys_create(brigd *d, const char *account_id, const char *project_id, const char *scope,
                     char key_id[BRIG_ID_MAX], char **key, brig_error **err);

/* Revokes key_id of project_id; BRIG_E_NOT_FOUND when the project has no such
 * key (or it was revoked already). */
int brig_keys_revoke(brigd *d, const char *project_id, const char *key_id, brig_error **err);
/* {"keys": [{"id", "scope", "created_at", "revoked_at" (null while in force)}, …]} of
 * project_id, oldest first: never a key or its hash. */
json_t *brig_keys_list(brigd *d, const char *project_id, brig_error **err);

#endif
