/*
 * auth.h - API keys: bootstrap of the first admin key and request authentication.
 *
 * Keys are "brig_" + 256 random bits; the store keeps only their BLAKE2b hash, so
 * a leaked database file yields no usable key.  Scopes: "admin" (everything) and
 * "sandbox" (sandboxes only; what an agent gets).
 */
#ifndef BRIG_AUTH_H
#define BRIG_AUTH_H

#include "error.h"
#include "server.h"
#include "store.h"

/* On first start (no keys): creates the first account and its admin key, writes
 * the key to <state-dir>/admin.key (0600) and prints it with a quick start. */
int brig_auth_bootstrap(brigd *d, brig_error **err);

/* Checks an Authorization header value; BRIG_E_UNAUTHORIZED when it is missing,
 * malformed or unknown. */
int brig_auth_check(brigd *d, const char *authorization, brig_key_row *out, brig_error **err);

#endif
