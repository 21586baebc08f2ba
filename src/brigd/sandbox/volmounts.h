/*
 * volmounts.h - which live sandbox mounts which volume (volumes.h has the rest): one
 * sandbox that writes a volume, or any number that read it, at a time; a mount held from
 * a create's claim until its sandbox's teardown is done, remembered in the store across
 * restarts.  Also the checks of a create's "volumes".
 */
#ifndef BRIG_VOLMOUNTS_H
#define BRIG_VOLMOUNTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/id.h"
#include "error.h"
#include "server.h"

#define BRIG_VOLUME_MIN_MIB      16 /* the smallest volume (ext4 and its journal need room) */
#define BRIG_VOLUME_NAME_MAX     32
#define BRIG_VOLUME_PATH_MAX     255
#define BRIG_SANDBOX_VOLUMES_MAX 8 /* volumes one sandbox mounts */

/* Whether name is a volume name: 1 to 32 of a-z, 0-9, '-', '_', a letter or digit first. */
bool brig_volume_name_ok(const char *name);

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
