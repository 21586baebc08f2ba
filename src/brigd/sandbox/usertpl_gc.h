/*
 * usertpl_gc.h - deleting a user's template (usertpl.h) and removing the layers nothing
 * names or runs on any more.  A warm pool's sandboxes of a template are no use: a delete
 * drains the name's pool, and a layer's removal destroys the pooled sandboxes on it
 * first (pool.h), never refusing because of them.
 */
#ifndef BRIG_USERTPL_GC_H
#define BRIG_USERTPL_GC_H

#include <stdbool.h>

#include "error.h"
#include "server.h"

/* DELETE: refused (BRIG_E_CONFLICT) while a sandbox of the account runs on its layer. */
int brig_utpl_delete(brigd *d, const char *account_id, const char *ref, brig_error **err);
/* Whether a sandbox of the account runs on layer key. */
bool brig_utpl_in_use(brigd *d, const char *account_id, const char *key);
/* Removes layer key of the account when no template names it and no sandbox uses it. */
void brig_utpl_gc(brigd *d, const char *account_id, const char *key);

#endif
