/*
 * vault.h - secrets at rest: XChaCha20-Poly1305 (libsodium AEAD) under a master
 * key, either BRIG_MASTER_KEY from the environment (base64 of 32 bytes) or the
 * file <state-dir>/master.key (mode 0600, created at first start).  Each value
 * is sealed with a fresh random nonce and bound to its owner and name as
 * associated data, so a sealed value moved to another row does not open.
 * Plaintext only ever lives in memory, briefly, and is wiped after use.
 */
#ifndef BRIG_VAULT_H
#define BRIG_VAULT_H

#include <jansson.h>
#include <stddef.h>

#include "error.h"
#include "store/store.h"

typedef struct brig_vault brig_vault;

int brig_vault_open(brig_vault **out, const char *state_dir, brig_error **err);
void brig_vault_close(brig_vault *v);

/* A secret name: an environment variable name, [A-Za-z_][A-Za-z0-9_]*, <= 64. */
int brig_vault_check_name(const char *name, brig_error **err);
/* A value: 4 bytes (shorter ones would redact ordinary text) to 64 KiB. */
int brig_vault_check_value(const char *value, size_t len, brig_error **err);

/* The caps on one owner's set (max_secrets, max_secret_bytes): n secrets at
 * most max; BRIG_E_INVALID naming the setting otherwise. */
int brig_vault_check_count(size_t n, int64_t max, brig_error **err);
/* The owner's stored secrets: at most max_count, their values at most max_bytes
 * in all; BRIG_E_INVALID naming the setting that is exceeded. */
int brig_vault_check_total(brig_store *st, const char *owner, int64_t max_count, int64_t max_bytes,
                           brig_error **err);

/* Seals and stores value under (owner, name), replacing an older one. */
int brig_vault_put(brig_vault *v, brig_store *st, const char *owner, const char *name,
                   const char *value, size_t len, brig_error **err);
/* Every secret of owner as {"NAME": "value"} (a new object holding plaintext:
 * release it with brig_vault_wipe). */
int brig_vault_open_all(brig_vault *v, brig_store *st, const char *owner, json_t **out,
                        brig_error **err);
/* Copies the named secrets of one owner to another (project refs -> sandbox);
 * BRIG_E_INVALID naming the first that does not exist. */
int brig_vault_copy(brig_vault *v, brig_store *st, const char *from, const char *to, json_t *names,
                    brig_error **err);
/* Names only, sorted. */
json_t *brig_vault_names(brig_store *st, const char *owner);
int brig_vault_delete(brig_store *st, const char *owner, const char *name, brig_error **err);
/* Removes every secret of owner (a deleted sandbox). */
void brig_vault_delete_all(brig_store *st, const char *owner);

/* A 32-byte value only this brigd's master key gives: a keyed BLAKE2b of purpose and subject
 * (e.g. E2B's envd token of a sandbox, the same after a restart, never stored). */
void brig_vault_derive(const brig_vault *v, const char *purpose, const char *subject,
                       unsigned char out[32]);

/* Zeroes the string values of obj, then releases it. */
void brig_vault_wipe(json_t *obj);

/* The stand-in a sandbox holds for its secret name when brigd's egress proxy injects the
 * value instead ("brig-placeholder-" + 32 hex digits of a hash keyed by the master key:
 * the same for the sandbox's life, across restarts).  out gets a NUL-terminated string. */
void brig_vault_placeholder(brig_vault *v, const char *owner, const char *name, char out[64]);

#endif
