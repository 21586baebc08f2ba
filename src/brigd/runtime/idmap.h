/*
 * idmap.h - id-mapped mounts: the template's files, owned by host root, appear
 * owned by root inside a sandbox whose root is an unprivileged host uid.
 *
 * Each live sandbox gets its own range of host ids (allocated by brigd), so
 * the processes of two sandboxes are strangers to each other even outside their
 * namespaces.  The template is shared, read-only, and mapped per sandbox with
 * an id-mapped bind mount (mount_setattr(MOUNT_ATTR_IDMAP), Linux >= 5.12), which
 * costs well under a millisecond instead of a chown'd copy per range.
 */
#ifndef BRIG_IDMAP_H
#define BRIG_IDMAP_H

#include "error.h"

/* A new user namespace mapping 0..size-1 to base.., owned by host uid base (so
 * per-user kernel counters are the sandbox's own); the caller closes the fd.
 * The sandbox's container joins this namespace, and its template is id-mapped
 * through it. */
int brig_idmap_userns(unsigned base, unsigned size, int *fd, brig_error **err);

/* A user namespace mapping from..from+size-1 to base.. (owned by host uid base): an
 * id-mapped mount through it moves files of one range into another. */
int brig_idmap_userns_from(unsigned from, unsigned base, unsigned size, int *fd, brig_error **err);

/* Attaches a read-only, nosuid, nodev, id-mapped recursive bind mount of src
 * at dst (an existing directory). */
int brig_idmap_mount(const char *src, const char *dst, int userns_fd, brig_error **err);

#endif
