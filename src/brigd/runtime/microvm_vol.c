/*
 * microvm_vol.c - a microVM's volumes (microvm_internal.h; docs/volumes.md).
 *
 * A volume is the OCI driver's ext4 image, <state>/volumes/<id>.img (volume.c), whose
 * data/ directory is what a sandbox sees, its files stored with the ids a sandbox uses (0:
 * its root), which are the guest's own ids in a VM.  The VM gets the image as one more
 * virtio-blk disk (serial brigvol<n>), read-only when asked; the guest's /init mounts it and
 * binds its data/ at the volume's path, told which by the kernel command line
 * (brig.vol=<n>:<rw|ro>:<path, %-escaped>).
 *
 * One file system instance over an image at a time: the guest's mount is one, the host's
 * (for container sandboxes, <state>/volumes/<id>.mnt) another.  So a VM refuses a volume
 * the host has mounted (a container sandbox uses it), and the host refuses to mount one a
 * VMM holds (QEMU's lock on the image: volume.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "disk.h"
#include "microvm_internal.h"
#include "spawn.h"
#include "util.h"

#define CMDLINE_ROOM 1800 /* of the guest kernel's 2048 bytes, what volumes may take */

/* One volume: refused while a loop device (a host mount) holds it; its journal replayed
 * first, since a VM that used it ended with SIGKILL (its commits are in the journal) and a
 * read-only mount in the guest cannot replay it (noload: it reads what was checkpointed). */
static int vol_open(const char *state_dir, const brig_rt_volume *v, brig_vm_vol *out,
                    brig_error **err)
{
    _cleanup_free_ char *img = brig_asprintf("%s/volumes/%s.img", state_dir, v->id);
    out->ro = v->read_only;
    out->path = v->path;
    char dev[32];
    if (brig_disk_attached(img, dev))
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "volume %s is mounted by a container sandbox: a microVM mounts a "
                              "volume only when no container sandbox does",
                              v->id);
    const char *fsck[] = {"e2fsck", "-p", "-E", "journal_only", img, NULL};
    brig_buf said = {0};
    int st = 0;
    int r = brig_proc_run(fsck, &said, 4096, &st, err);
    if (r == 0 && (!WIFEXITED(st) || WEXITSTATUS(st) >= 4)) /* 1: replayed */
        r = brig_error_set(err, BRIG_E_INTERNAL, 0, "volume %s: e2fsck: %s", v->id,
                           said.data ? said.data : "failed");
    brig_buf_dispose(&said);
    if (r < 0)
        return -1;
    out->fd = open(img, (v->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
    if (!v->read_only && out->fd >= 0)
        out->ro_fd = open(img, O_RDONLY | O_CLOEXEC);
    if (out->fd < 0 || (!v->read_only && out->ro_fd < 0))
        return brig_error_sys(err, "open volume image %s", img);
    return 0;
}

int brig_vm_vols_open(const char *state_dir, const brig_rt_spec *spec, brig_vm_vol *out,
                      brig_error **err)
{
    for (size_t i = 0; i < spec->n_volumes; i++)
        out[i].fd = out[i].ro_fd = -1;
    for (size_t i = 0; i < spec->n_volumes; i++) {
        if (vol_open(state_dir, &spec->volumes[i], &out[i], err) < 0) {
            brig_vm_vols_close(out, spec->n_volumes);
            return -1;
        }
    }
    return 0;
}

void brig_vm_vols_close(brig_vm_vol *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i].fd >= 0)
            close(v[i].fd);
        if (v[i].ro_fd >= 0)
            close(v[i].ro_fd);
        v[i].fd = v[i].ro_fd = -1;
    }
}

/* path with every byte but [A-Za-z0-9/._-] as %HH: one word of the command line. */
static void escape(const char *path, brig_buf *b)
{
    for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
        bool plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                     (*c >= '0' && *c <= '9') || strchr("/._-", *c);
        if (plain)
            brig_buf_append(b, c, 1);
        else
            brig_buf_printf(b, "%%%02X", *c);
    }
}

char *brig_vm_vols_cmdline(const brig_vm_vol *v, size_t n, brig_error **err)
{
    brig_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        brig_buf_printf(&b, " brig.vol=%zu:%s:", i, v[i].ro ? "ro" : "rw");
        escape(v[i].path, &b);
    }
    if (b.data == NULL)
        return brig_xstrdup("");
    if (b.len > CMDLINE_ROOM) {
        brig_buf_dispose(&b);
        brig_error_set(err, BRIG_E_INVALID, 0,
                       "the volumes' paths are too long for a microVM (its kernel's command "
                       "line holds them: at most %d bytes in all)",
                       CMDLINE_ROOM);
        return NULL;
    }
    return b.data;
}
