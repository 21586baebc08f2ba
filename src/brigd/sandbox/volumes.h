/*
 * volumes.h - volumes (docs/volumes.md): a project's named file systems of a bounded
 * size, that outlive the sandboxes that mount them, brigd's restarts included.
 *
 * volumes.c makes, lists, deletes and bills them; volmounts.c keeps which live sandbox
 * mounts which: one sandbox that writes, or any number that read, at a time.  The
 * runtime driver holds their bytes (runtime.h, volume_*), mounted into a sandbox at its
 * create.  A volume is deleted only while no sandbox mounts it.
 */
#ifndef BRIG_VOLUMES_H
#define BRIG_VOLUMES_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "account/auth.h"
#include "core/id.h"
#include "error.h"
#include "server.h"
#include "volmounts.h"

/* ---- volumes.c ---------------------------------------------------------------------- */

/* A new volume of size_mib in project (NULL: the caller's; an admin key may name another
 * of its account's), empty; *out its JSON.  BRIG_E_FORBIDDEN for a sandbox key,
 * BRIG_E_INVALID for a bad name or size (naming volume_max_mib), BRIG_E_CONFLICT for a
 * name the project has, BRIG_E_LIMIT past volume_mib_per_account, BRIG_E_NO_SPACE past
 * the host's disk budget, BRIG_E_PAYMENT and BRIG_E_LIMIT as a create's balance and
 * spend limits. */
int brig_volume_create(brigd *d, const brig_caller *c, const char *name, int64_t size_mib,
                       const char *project, json_t **out, brig_error **err);
/* The caller's volumes: a sandbox key's project's; an admin key's account's, or only
 * project's when it names one. */
int brig_volume_list(brigd *d, const brig_caller *c, const char *project, json_t **out,
                     brig_error **err);
/* A volume by name (or id) in project (NULL: the caller's); BRIG_E_NOT_FOUND when the
 * caller may not see it. */
int brig_volume_get(brigd *d, const brig_caller *c, const char *name, const char *project,
                    json_t **out, brig_error **err);
/* Deletes a volume no sandbox mounts (BRIG_E_CONFLICT naming the ones that do, once
 * those that ended are torn down): its final charge, its row, its bytes. */
int brig_volume_delete(brigd *d, const brig_caller *c, const char *name, const char *project,
                       brig_error **err);

/* Start-up, before the sandboxes are reconciled: what sandboxes mounted before (volmounts),
 * the volumes' disk held in the admission.  After: what no live sandbox mounts let go,
 * bytes of volumes that have no row removed. */
void brig_volumes_start(brigd *d);
void brig_volumes_reconcile(brigd *d);
void brig_volumes_stop(brigd *d);
/* The janitor's tick: every volume charged once per billing_interval (when they cost). */
void brig_volumes_bill(brigd *d, int64_t now);

#endif
