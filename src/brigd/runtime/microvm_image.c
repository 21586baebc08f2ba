/*
 * microvm_image.c - the files a microVM boots from (microvm_internal.h): its initramfs,
 * the template's root disk image and each VM's copy-on-write disk over it.
 *
 * The initramfs holds busybox (busybox-static), the guest kernel's virtio modules
 * (scripts/setup-vm unpacks them) and brig-agent; its /init loads the modules, mounts the
 * VM's disk, gives it /dev, /proc, /sys and the agent (a tmpfs at /.brig, the path it has
 * in a container), mounts its volumes (microvm_vol.c), sets up the link the agent listens on
 * and becomes the agent: PID 1 of the guest.  Disks are told apart by their serial: brigroot,
 * brigvol<n>.  Made with busybox's own cpio (Debian 12 has no cpio by default).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "microvm_internal.h"
#include "spawn.h"
#include "util.h"

#define BUSYBOX "/bin/busybox"

/* The modules' load order (their dependencies first: scripts/setup-vm copies them). */
#define VM_MODULES                                                                                 \
    "virtio_ring virtio virtio_mmio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci "       \
    "virtio_blk virtio_console failover net_failover virtio_net virtio-rng"

/* The guest's /init.  eth0 is QEMU's user-mode link, the agent's only way in. */
static const char init_script[] =
    "#!/bin/busybox sh\n"
    "export PATH=/bin\n"
    "/bin/busybox --install -s /bin\n"
    "mkdir -p /proc /sys /dev /newroot\n"
    "mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev\n"
    "for m in " VM_MODULES "; do insmod /lib/modules/$m.ko || echo \"brig-init: no $m\"; done\n"
    "vdev() { for b in /sys/block/vd*; do [ \"$(cat $b/serial 2>/dev/null)\" = \"$1\" ] && "
    "echo /dev/${b##*/}; done; }\n"
    "i=0; while [ -z \"$(vdev brigroot)\" ] && [ $i -lt 1000 ]; do usleep 10000; i=$((i+1)); "
    "done\n"
    "ip link set lo up\n"
    "nic() { for d in /sys/class/net/*; do [ \"$(cat $d/address)\" = \"$1\" ] && "
    "basename $d; done; }\n"
    "ag=$(nic 52:54:00:00:00:01); ip link set $ag up; ip addr add 10.0.2.15/24 dev $ag\n"
    "for w in $(cat /proc/cmdline); do case $w in brig.ip=*) bip=${w#*=};; "
    "brig.gw=*) bgw=${w#*=};; brig.mac=*) bmac=${w#*=};; brig.vol=*) vols=\"$vols ${w#*=}\";; "
    "esac; done\n"
    "if [ -n \"$bip\" ]; then sb=$(nic $bmac); ip link set $sb up; "
    "ip addr add $bip/31 dev $sb; ip route add default via $bgw dev $sb; fi\n"
    "mount -t ext4 -o noatime $(vdev brigroot) /newroot || { echo 'brig-init: no root disk'; "
    "poweroff -f; }\n"
    /* volumes: <n>:<rw|ro>:<path, %-escaped>; the file system's data/ at the path */
    "for v in $vols; do n=${v%%:*}; r=${v#*:}; o=${r%%:*}; p=$(printf \"$(echo \"${r#*:}\" | "
    "sed 's/%/\\\\x/g')\"); d=/vol$n; mkdir -p $d \"/newroot$p\"; "
    "if [ $o = ro ]; then o=ro,noload,noatime; else o=noatime,sync,errors=remount-ro; fi; "
    "mount -t ext4 -o $o $(vdev brigvol$n) $d || { echo \"brig-init: no volume $n\"; "
    "poweroff -f; }; [ -d $d/data ] || mkdir -m 0755 $d/data 2>/dev/null; "
    "if [ -d $d/data ]; then mount --bind $d/data \"/newroot$p\"; else mount -t tmpfs -o "
    "ro,size=4k,mode=0755 vol \"/newroot$p\"; fi || { echo \"brig-init: volume $n at $p\"; "
    "poweroff -f; }; umount -l $d; done\n"
    "mkdir -p /newroot/.brig /newroot/proc /newroot/sys /newroot/dev /newroot/tmp\n"
    "mount -t tmpfs -o mode=0755,size=32m brig /newroot/.brig\n"
    "cp /brig-agent /newroot/.brig/brig-agent\n"
    "mount --move /dev /newroot/dev; mount --move /proc /newroot/proc; "
    "mount --move /sys /newroot/sys\n"
    "mkdir -p /newroot/dev/pts /newroot/dev/shm\n"
    "mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts /newroot/dev/pts\n"
    "ln -sf pts/ptmx /newroot/dev/ptmx 2>/dev/null\n"
    "mount -t tmpfs -o mode=1777 shm /newroot/dev/shm\n"
    "exec switch_root /newroot /.brig/brig-agent --listen-tcp " BRIG_VM_AGENT_PORT_S "\n";

static int write_file(const char *path, const char *data, brig_error **err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (fd < 0)
        return brig_error_sys(err, "create %s", path);
    size_t n = strlen(data);
    ssize_t w = write(fd, data, n);
    close(fd);
    if (w != (ssize_t)n)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "write %s", path);
    return 0;
}

/* Runs sh -c script with args; its output, when it fails, becomes the error. */
static int run_sh(const char *what, const char *const *argv, brig_error **err)
{
    brig_buf out = {0};
    int st = 0;
    if (brig_proc_run(argv, &out, 4096, &st, err) < 0) {
        brig_buf_dispose(&out);
        return -1;
    }
    if (st != 0) {
        brig_error_set(err, BRIG_E_INTERNAL, 0, "%s failed: %.*s", what, (int)out.len,
                       out.data ? out.data : "");
        brig_buf_dispose(&out);
        return -1;
    }
    brig_buf_dispose(&out);
    return 0;
}

int brig_vm_initrd_build(microvm *m, brig_error **err)
{
    _cleanup_free_ char *tree = brig_asprintf("%s/initrd.d", m->dir);
    _cleanup_free_ char *out = brig_asprintf("%s/initrd.cpio", m->dir);
    _cleanup_free_ char *init = brig_asprintf("%s/init", tree);
    const char *build[] = {
        "/bin/sh",
        "-c",
        "set -e; rm -rf \"$1\"; mkdir -p \"$1/bin\" \"$1/lib/modules\"; "
        "cp \"$2\" \"$1/bin/busybox\"; cp \"$3\"/modules/*.ko \"$1/lib/modules/\"; "
        "cp \"$4\" \"$1/brig-agent\"; chmod 0755 \"$1/brig-agent\"",
        "sh",
        tree,
        BUSYBOX,
        m->kernel_dir,
        m->agent_path,
        NULL};
    if (run_sh("initramfs tree", build, err) < 0)
        return -1;
    if (write_file(init, init_script, err) < 0)
        return -1;
    const char *pack[] = {"/bin/sh",
                          "-c",
                          "set -e; cd \"$1\"; find . | " BUSYBOX " cpio -o -H newc >\"$2.tmp\" "
                          "2>/dev/null; chmod 0644 \"$2.tmp\"; mv \"$2.tmp\" \"$2\"; rm -rf \"$1\"",
                          "sh",
                          tree,
                          out,
                          NULL};
    return run_sh("initramfs", pack, err);
}

/* Made under an exclusive lock (several brigds may share the template cache), into a
 * temporary file renamed into place: a reader sees a whole image or none.  Its free space
 * is the VM's room to write: the tariff's disk (docs/operations.md). */
char *brig_vm_template_image(const char *rootfs, int64_t disk_mib, brig_error **err)
{
    char *image = brig_asprintf("%s.%lldM.ext4", rootfs, (long long)disk_mib);
    if (access(image, R_OK) == 0)
        return image;
    _cleanup_free_ char *lock = brig_asprintf("%s.ext4.lock", rootfs);
    _cleanup_free_ char *room = brig_asprintf("%lld", (long long)disk_mib);
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lfd < 0 || flock(lfd, LOCK_EX) < 0) {
        brig_error_sys(err, "lock %s", lock);
        if (lfd >= 0)
            close(lfd);
        free(image);
        return NULL;
    }
    const char *mk[] = {"/bin/sh",
                        "-c",
                        "set -e; [ -e \"$2\" ] && exit 0; used=$(du -sxm \"$1\" | cut -f1); "
                        "size=$((used + used / 8 + 64 + $3)); rm -f \"$2.tmp\"; "
                        "mkfs.ext4 -q -F -m 0 -L brig-root -E root_owner=0:0 -d \"$1\" \"$2.tmp\" "
                        "\"${size}M\" 2>&1; "
                        "chmod 0644 \"$2.tmp\"; mv \"$2.tmp\" \"$2\"",
                        "sh",
                        rootfs,
                        image,
                        room,
                        NULL};
    int64_t t0 = brig_now_mono_ms();
    int r = run_sh("the template's disk image", mk, err);
    close(lfd);
    if (r < 0) {
        free(image);
        return NULL;
    }
    brig_info("microvm: disk image %s made in %lld ms", image,
              (long long)(brig_now_mono_ms() - t0));
    return image;
}

int brig_vm_overlay(const char *image, const char *fmt, const char *path, unsigned uid,
                    brig_error **err)
{
    const char *argv[] = {"qemu-img", "create", "-q",  "-f", "qcow2", "-F",
                          fmt,        "-b",     image, path, NULL};
    if (run_sh("qemu-img create", argv, err) < 0)
        return -1;
    if (chown(path, uid, uid) < 0 || chmod(path, 0600) < 0)
        return brig_error_sys(err, "chown %s", path);
    return 0;
}
