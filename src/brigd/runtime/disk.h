/*
 * disk.h - the bounded writable layer: each sandbox writes into its own ext4
 * file system on a loop device, so filling it (bytes or inodes) stops at the
 * sandbox's disk size and the host's disk does not notice.
 *
 * One "golden" image per size is formatted once (mkfs.ext4, no journal: the
 * layer is thrown away with the sandbox); a sandbox gets a sparse copy of it
 * (about a megabyte of metadata), attached with LOOP_CONFIGURE and auto-clear,
 * so unmounting it also frees the loop device.
 */
#ifndef BRIG_DISK_H
#define BRIG_DISK_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* Path of the golden image for size_mib under dir, formatting it if needed
 * (caller frees *path). */
int brig_disk_golden(const char *dir, int64_t size_mib, char **path, brig_error **err);

/* Copies golden to img, attaches it to a free loop device and mounts it at mnt
 * (nosuid, nodev), then creates mnt/upper (owned by owner:owner) and mnt/work. */
int brig_disk_attach(const char *golden, const char *img, const char *mnt, unsigned owner,
                     brig_error **err);

/* Attaches the image img (a copy of a golden image, or of a snapshot's layer) to a free
 * loop device and mounts it at mnt, then makes mnt/upper (owned by owner:owner) unless it
 * exists and a fresh mnt/work. */
int brig_disk_mount(const char *img, const char *mnt, unsigned owner, brig_error **err);

/* Attaches the image img read-only (a snapshot's layer, never written again) to a free
 * loop device and mounts it read-only at mnt. */
int brig_disk_mount_ro(const char *img, const char *mnt, brig_error **err);

/* Binds the image open at img to a free loop device (direct I/O when asked and the
 * file system allows it) and returns an open fd of it, its path in dev.  Auto-clear:
 * the device detaches itself when its last user goes, so the caller keeps this fd
 * open until the file system is mounted.  Volumes use it too (volume.c). */
int brig_disk_loop(int img, bool direct, char dev[32], brig_error **err);

/* Whether a loop device still has the image img open (its name into dev): a file system
 * instance over it may still live (a lazy unmount).  Volumes check it before a second
 * one (volume.c, microvm_vol.c). */
bool brig_disk_attached(const char *img, char dev[32]);

#endif
