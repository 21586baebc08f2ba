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

#define BRIG_VOLUME_MIN_MIB      16 /* the smallest volume (ext4 and its journal need room) */
#define BRIG_VOLUME_NAME_MAX     32
#define BRIG_VOLUME_PATH_MAX     255
#define BRIG_SANDBOX_VOLUMES_MAX 8 /* volumes one sandbox mounts */

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

/* Whether name is a volume name: 1 to 32 of a-z, 0-9, '-', '_', a letter or digit first. */
bool brig_volume_name_ok(const char *name);

/* ---- volmounts.c --------------------------------------------------------------------- */

/* The volumes a create asks for ("volumes" of POST /v1/sandboxes), checked. */
typedef struct brig_volset {
    size_t n;
    struct brig_volreq {
        char name[BRIG_VOLUME_NAME_MAX + 1];
        char path[BRIG_VOLUME_PATH_MAX + 1];
        bool read_only;
        char id[BRIG_ID_MAX]; /* resolved in the sandbox's project */
    } v[BRIG_SANDBOX_VOLUMES_MAX];
} brig_volset;

/* [{"name", "path", "read_only"}] into *out; BRIG_E_INVALID naming what is wrong (an
 * unknown field, a bad name, a path that is relative, not normal ("..", "."), under /.brig,
 * /proc, /sys or /dev, or nested in another). */
int brig_volset_parse(const json_t *in, brig_volset *out, brig_error **err);
/* BRIG_E_INVALID when a path of vs is a file (not a directory) in the template's root
 * file system rootfs: a mount there would fail the create. */
int brig_volset_check_root(const char *rootfs, const brig_volset *vs, brig_error **err);
/* The ids of vs's volumes in project_id (BRIG_E_INVALID for a name it has not), and a
 * first look for a sandbox that holds one of them the way this one cannot share
 * (BRIG_E_CONFLICT). */
int brig_volmounts_resolve(brigd *d, const char *project_id, brig_volset *vs, brig_error **err);
/* Sandbox sandbox_id mounts vs's volumes, all or none: BRIG_E_CONFLICT when a live sandbox
 * holds one the way this one cannot share; one that ended is waited for (its teardown
 * lets go of it) for a bounded time.  Then _record stores it (after the sandbox's row);
 * _release, once its teardown is done (or it never started), lets go of its volumes and
 * of each volume's host mount that no sandbox uses any more. */
int brig_volmounts_claim(brigd *d, const char *sandbox_id, const brig_volset *vs, brig_error **err);
int brig_volmounts_record(brigd *d, const char *sandbox_id, const brig_volset *vs,
                          brig_error **err);
void brig_volmounts_release(brigd *d, const char *sandbox_id);
/* [{"name", "id", "path", "read_only"}]: the volumes sandbox_id mounts. */
json_t *brig_volmounts_of(brigd *d, const char *sandbox_id);
/* [{"sandbox_id", "path", "read_only"}]: who mounts volume_id. */
json_t *brig_volmounts_users(brigd *d, const char *volume_id);
/* Runs fn(d, arg, err) while no sandbox mounts volume_id and none can start to (what
 * ended is waited for, as by a claim); BRIG_E_CONFLICT naming the live ones. */
int brig_volmounts_exclusive(brigd *d, const char *volume_id, const char *name,
                             int (*fn)(brigd *, void *, brig_error **), void *arg,
                             brig_error **err);
/* Start-up: the mounts the store remembers (sandboxes of the last run); after the
 * sandboxes were reconciled, those of sandboxes that are gone are let go of.  *ids: the
 * volumes some sandbox still mounts (caller frees each and the array). */
void brig_volmounts_load(brigd *d);
void brig_volmounts_sweep(brigd *d, char ***ids, size_t *n);
void brig_volmounts_free(brigd *d);

#endif
