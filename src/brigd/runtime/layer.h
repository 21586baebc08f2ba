/*
 * layer.h - a template's root filesystem made from a sandbox's writable layer
 * (docs/templates.md, "Templates declared by users").
 *
 * The new root filesystem is the parent's, hard-linked (its files are never written
 * again: a template is read-only, and every file the layer changes is replaced, not
 * written through the link), with the sandbox's overlay upper directory applied on top:
 * whiteouts remove, opaque directories replace, everything else is copied with its
 * owners shifted from the sandbox's host id range back to the template's (0, 1000...).
 * Only regular files, directories, symlinks and FIFOs are taken: no device nodes, no
 * sockets, no set-id bits.  The walk goes by file descriptors (O_NOFOLLOW everywhere), so
 * a process of the sandbox that still runs cannot turn it outside the layer.
 */
#ifndef BRIG_LAYER_H
#define BRIG_LAYER_H

#include <stdint.h>

#include "error.h"

/* Makes dest (must not exist; its parent must) from parent_rootfs and the upper
 * directory open at upper_fd, whose owners are host ids [uid_base, uid_base + uid_size).
 * *own_bytes = the bytes of the files taken from the layer.  On failure the caller
 * removes dest. */
int brig_layer_flatten(const char *parent_rootfs, int upper_fd, unsigned uid_base,
                       unsigned uid_size, const char *dest, int64_t *own_bytes, brig_error **err);

/* Removes the tree at path (no symlink followed, no file system boundary crossed). */
void brig_layer_remove(const char *path);

#endif
