/*
 * microvm_memsnap.c - microVMs started from a memory snapshot (setting microvm_memsnap;
 * docs/snapshots.md, "Memory snapshots of microVMs"): microvm_internal.h.
 *
 * Per template image (template and disk size), memory size, vCPUs and whether VMs have a
 * network, one snapshot under <state>/microvm/memsnap/<key>: mem.img, the booted VM's
 * memory and devices (QEMU's migration stream), and disk.qcow2, its disk at that instant.
 * The first create of a key boots its VM as usual, but with the snapshot's device line
 * (nothing of the sandbox on the kernel's command line, its NIC's MAC BRIG_VM_NIC_MAC), waits
 * for its agent, stops it and saves it (QMP migrate to a descriptor), kills that VMM and keeps
 * its disk as the snapshot's; then it starts from the snapshot like every later create.
 *
 * A start from it: the VM's disk is a new qcow2 over the snapshot's disk (so disk and memory
 * are the same instant's; the snapshot's disk is never written again), QEMU starts with the
 * same device line and -incoming, reads mem.img back and runs, and the agent is told what
 * the boot would have given it: the host's time, fresh entropy (every VM of one snapshot
 * would otherwise share its random state) and the sandbox's link (guest_sync).  Volumes are
 * extra disks on the device line: a create with volumes boots.  The snapshots are made
 * with this brigd's initramfs and agent: they are removed when it builds its initramfs.
 */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "microvm_internal.h"
#include "util.h"

/* <dir>/memsnap/<key>: the key a hash of what must match for a VM to start from it. */
static char *snap_dir(microvm *m, const brig_rt_spec *spec, const char *image, bool net)
{
    int cpus = spec->cpus >= 1 ? (int)(spec->cpus + 0.999) : 1;
    _cleanup_free_ char *what =
        brig_asprintf("%s|%lld|%d|%d|%s|%ld", image, (long long)spec->memory_mib, cpus, net,
                      m->accel, m->tsc_khz);
    unsigned char h[16];
    char hex[33];
    crypto_generichash(h, sizeof(h), (const unsigned char *)what, strlen(what), NULL, 0);
    sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
    return brig_asprintf("%s/memsnap/%s", m->dir, hex);
}

static void snap_remove(const char *dir)
{
    const char *names[] = {"mem.img", "disk.qcow2"};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(names); i++) {
        _cleanup_free_ char *p = brig_asprintf("%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* The booted VM's memory into tmp/mem.img and its disk into tmp/disk.qcow2, synced. */
static int snap_save(microvm *m, const char *id, brig_vm_sb *sb, const char *tmp, brig_error **err)
{
    _cleanup_free_ char *vmdir = brig_asprintf("%s/vms/%s", m->dir, id);
    _cleanup_free_ char *vmdisk = brig_asprintf("%s/disk.qcow2", vmdir);
    _cleanup_free_ char *mem = brig_asprintf("%s/mem.img", tmp);
    _cleanup_free_ char *disk = brig_asprintf("%s/disk.qcow2", tmp);
    int fd = open(mem, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return brig_error_sys(err, "create %s", mem);
    int rc = brig_vm_qmp_save(vmdir, fd, err);
    brig_vm_kill(sb); /* its disk is complete: QEMU flushed it when the migration ended */
    if (rc == 0 && fsync(fd) < 0)
        rc = brig_error_sys(err, "fsync %s", mem);
    close(fd);
    if (rc < 0)
        return -1;
    if (rename(vmdisk, disk) < 0 || chown(disk, 0, 0) < 0 || chmod(disk, 0644) < 0)
        return brig_error_sys(err, "keep %s", vmdisk);
    /* 0644: each VM's QEMU, as that sandbox's uid, reopens it through its descriptor */
    int dfd = open(disk, O_RDONLY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) < 0)
        rc = brig_error_sys(err, "fsync %s", disk);
    if (dfd >= 0)
        close(dfd);
    return rc;
}

/* Boots sandbox spec's VM with a snapshot's device line and saves it as snapshot snap (its
 * VMM is gone after). */
static int snap_take(microvm *m, const brig_rt_spec *spec, brig_vm_parts *p, brig_vm_sb *sb,
                     const char *snap, brig_error **err)
{
    int64_t t0 = brig_now_mono_ms();
    _cleanup_free_ char *root = brig_asprintf("%s/memsnap", m->dir);
    _cleanup_free_ char *tmp = brig_asprintf("%s.tmp", snap);
    snap_remove(tmp); /* a crash's leftover */
    if ((mkdir(root, 0700) < 0 && errno != EEXIST) || mkdir(tmp, 0700) < 0)
        return brig_error_sys(err, "mkdir %s", tmp);
    brig_vm_start boot = {.memsnap = true, .backing_fd = -1};
    int rc = -1;
    if (brig_vm_launch(m, spec, p, &boot, sb, err) == 0 && brig_vm_agent_ready(sb, err) == 0 &&
        snap_save(m, spec->id, sb, tmp, err) == 0)
        rc = rename(tmp, snap) < 0 ? brig_error_sys(err, "rename %s", tmp) : 0;
    brig_vm_kill(sb);
    if (rc < 0) {
        brig_error_prefix(err, "a memory snapshot");
        snap_remove(tmp);
        return -1;
    }
    struct stat st = {0};
    _cleanup_free_ char *mem = brig_asprintf("%s/mem.img", snap);
    stat(mem, &st);
    brig_info("microvm: memory snapshot %s taken in %lld ms (%lld MiB)", snap,
              (long long)(brig_now_mono_ms() - t0), (long long)(st.st_size >> 20));
    return 0;
}

/* Starts the VM from snapshot snap until its agent took guest_sync. */
static int snap_restore(microvm *m, const brig_rt_spec *spec, brig_vm_parts *p, brig_vm_sb *sb,
                        const char *snap, bool *bad, brig_error **err)
{
    _cleanup_free_ char *disk = brig_asprintf("%s/disk.qcow2", snap);
    _cleanup_free_ char *mem = brig_asprintf("%s/mem.img", snap);
    _cleanup_free_ char *vmdir = brig_asprintf("%s/vms/%s", m->dir, spec->id);
    int bfd = open(disk, O_RDONLY | O_CLOEXEC);
    int mfd = open(mem, O_RDONLY | O_CLOEXEC);
    int rc = -1, fd = -1;
    brig_vm_start how = {.image = disk, .memsnap = true, .incoming = true, .backing_fd = bfd};
    if (bfd < 0 || mfd < 0)
        brig_error_sys(err, "open the memory snapshot %s", snap);
    else if (brig_vm_launch(m, spec, p, &how, sb, err) < 0)
        ;
    else if (brig_vm_qmp_restore(vmdir, mfd, err) < 0 || brig_vm_agent_ready(sb, err) < 0)
        *bad = true;
    else if ((fd = brig_vm_agent_open(sb, err)) >= 0 &&
             brig_vm_guest_sync(fd, brig_vm_parts_link(p), err) == 0)
        rc = 0;
    if (fd >= 0)
        close(fd);
    if (bfd >= 0)
        close(bfd);
    if (mfd >= 0)
        close(mfd);
    if (rc < 0)
        brig_error_prefix(err, "a start from the memory snapshot");
    return rc;
}

int brig_vm_memsnap_start(microvm *m, const brig_rt_spec *spec, brig_vm_parts *p, brig_vm_sb *sb,
                          brig_error **err)
{
    _cleanup_free_ char *image = brig_vm_template_image(spec->rootfs, spec->disk_mib, err);
    if (image == NULL)
        return -1;
    _cleanup_free_ char *snap = snap_dir(m, spec, image, brig_vm_parts_link(p)->tap_fd >= 0);
    _cleanup_free_ char *mem = brig_asprintf("%s/mem.img", snap);
    int rc = 0;
    if (access(mem, R_OK) != 0) { /* taken once: creates of other keys do not wait on it */
        pthread_mutex_lock(&m->memsnap_lock);
        rc = access(mem, R_OK) == 0 ? 0 : snap_take(m, spec, p, sb, snap, err);
        pthread_mutex_unlock(&m->memsnap_lock);
    }
    bool bad = false;
    if (rc < 0 || snap_restore(m, spec, p, sb, snap, &bad, err) < 0) {
        if (bad) { /* not started from it: the next create takes it again */
            brig_warn("microvm: memory snapshot %s removed: a VM did not start from it", snap);
            pthread_mutex_lock(&m->memsnap_lock);
            snap_remove(snap);
            pthread_mutex_unlock(&m->memsnap_lock);
        }
        return -1;
    }
    return 0;
}

void brig_vm_memsnap_clear(microvm *m)
{
    _cleanup_free_ char *root = brig_asprintf("%s/memsnap", m->dir);
    brig_vm_rm_rf(root);
}
