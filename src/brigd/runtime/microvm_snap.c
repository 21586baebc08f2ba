/*
 * microvm_snap.c - the API's snapshots of a microVM (docs/snapshots.md): its file system,
 * kept as a qcow2 image, from which microVMs start (microvm_internal.h).
 *
 * A snapshot of a VM is <state>/snapshots/<id>/vm.qcow2 (beside the container's layers'
 * snapshots, so that listing and removing them is the same) and manifest.json ("kind":
 * "microvm", its digest, the template image under it).  Taking one, the VM paused: it runs
 * for a moment so that its agent flushes and freezes the guest's root (fs_freeze), is stopped
 * again (QEMU writes its disk's metadata out when it stops), the disk's layers above the
 * template's image are flattened into vm.qcow2 (qemu-img convert -B: what the VM wrote, not
 * the template), and the guest is thawed and paused again.  Its digest is the sha256 of
 * vm.qcow2, checked at every create from it.  A create from it boots a VM whose disk is a
 * new qcow2 over a hard link of vm.qcow2 in its own directory (microvm_boot.c), so deleting
 * the snapshot harms none of them.  A container's snapshot does not start a VM, nor a VM's a
 * container (BRIG_E_INVALID: 400).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "microvm_internal.h"
#include "spawn.h"
#include "util.h"

static char *snap_path(const microvm *m, const char *id, const char *name)
{
    return brig_asprintf("%s/snapshots/%s/%s", m->state_dir, id, name);
}

/* sha256 of the file at path, hex; -1 with *err. */
static int file_digest(const char *path, char hex[65], brig_error **err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return brig_error_sys(err, "open %s", path);
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    static __thread unsigned char buf[1 << 16];
    ssize_t r;
    while ((r = read(fd, buf, sizeof(buf))) > 0)
        crypto_hash_sha256_update(&st, buf, (size_t)r);
    close(fd);
    if (r < 0)
        return brig_error_sys(err, "read %s", path);
    unsigned char h[32];
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(hex, 65, h, sizeof(h));
    return 0;
}

/* The guest's root frozen (true) or thawed, the VM running meanwhile and paused after. */
static int guest_freeze(microvm *m, brig_vm_sb *sb, bool freeze, brig_error **err)
{
    _cleanup_free_ char *dir = brig_vm_path(m, sb->id, NULL);
    if (brig_vm_qmp(dir, "cont", NULL, 0, err) < 0)
        return -1;
    int fd = brig_vm_agent_open(sb, err);
    int rc = fd >= 0 ? brig_vm_fs_freeze(fd, freeze, err) : -1;
    if (fd >= 0)
        close(fd);
    brig_error *e = NULL;
    if (brig_vm_qmp(dir, "stop", NULL, 0, rc < 0 ? &e : err) < 0 && rc == 0)
        rc = -1;
    brig_error_clear(&e);
    return rc;
}

/* What the VM wrote above the template's image, into out (a qcow2 over that image). */
static int flatten(microvm *m, const char *id, const char *out, brig_error **err)
{
    _cleanup_free_ char *disk = brig_vm_path(m, id, "disk.qcow2");
    _cleanup_free_ char *imgf = brig_vm_path(m, id, "image");
    char image[4096] = {0};
    int fd = open(imgf, O_RDONLY | O_CLOEXEC);
    ssize_t r = fd >= 0 ? read(fd, image, sizeof(image) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (r <= 0)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "%s: no record of its template's image", id);
    const char *argv[] = {"qemu-img", "convert", "-U",  "-O", "qcow2", "-B",
                          image,      "-F",      "raw", disk, out,     NULL};
    brig_buf o = {0};
    int st = 0;
    int rc = brig_proc_run(argv, &o, 4096, &st, err);
    if (rc == 0 && st != 0)
        rc = brig_error_set(err, BRIG_E_INTERNAL, 0, "qemu-img convert failed: %.*s", (int)o.len,
                            o.data ? o.data : "");
    brig_buf_dispose(&o);
    return rc;
}

int brig_vm_snapshot_take(microvm *m, brig_vm_sb *sb, const char *id, bool durable, char digest[65],
                          int64_t *bytes, brig_error **err)
{
    _cleanup_free_ char *top = brig_asprintf("%s/snapshots", m->state_dir);
    _cleanup_free_ char *dir = brig_asprintf("%s/%s", top, id);
    _cleanup_free_ char *img = snap_path(m, id, "vm.qcow2");
    _cleanup_free_ char *man = snap_path(m, id, "manifest.json");
    if ((mkdir(top, 0700) < 0 && errno != EEXIST) || mkdir(dir, 0700) < 0)
        return brig_error_sys(err, "mkdir %s", dir);
    int64_t t0 = brig_now_mono_ms();
    int rc = guest_freeze(m, sb, true, err);
    if (rc == 0)
        rc = flatten(m, sb->id, img, err);
    brig_error *e = NULL;
    if (guest_freeze(m, sb, false, rc < 0 ? &e : err) < 0 && rc == 0)
        rc = -1;
    brig_error_clear(&e);
    struct stat st = {0};
    if (rc == 0 && (file_digest(img, digest, err) < 0 || stat(img, &st) < 0))
        rc = -1;
    json_t *j = json_pack("{s:s, s:s, s:s, s:I}", "id", id, "kind", "microvm", "digest", digest,
                          "bytes", (json_int_t)st.st_blocks * 512);
    if (rc == 0 && json_dump_file(j, man, JSON_INDENT(2)) < 0)
        rc = brig_error_sys(err, "write %s", man);
    json_decref(j);
    if (rc == 0 && durable) {
        int fd = open(img, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fsync(fd) < 0)
            rc = brig_error_sys(err, "fsync %s", img);
        if (fd >= 0)
            close(fd);
    }
    if (rc < 0) {
        unlink(img);
        unlink(man);
        rmdir(dir);
        return -1;
    }
    *bytes = (int64_t)st.st_blocks * 512;
    brig_info("%s: snapshot %s of its VM's disk in %lld ms (%lld KiB)", sb->id, id,
              (long long)(brig_now_mono_ms() - t0), (long long)(*bytes >> 10));
    return 0;
}

char *brig_vm_snapshot_disk(microvm *m, const brig_rt_spec *spec, brig_error **err)
{
    char *img = snap_path(m, spec->snapshot, "vm.qcow2");
    char hex[65];
    if (access(img, F_OK) != 0) {
        brig_error_set(err, BRIG_E_INVALID, 0,
                       "snapshot %s was taken of a container sandbox: it restores only to "
                       "container sandboxes, not to isolation 'microvm'",
                       spec->snapshot);
    } else if (file_digest(img, hex, err) == 0) {
        if (spec->snapshot_digest && strcmp(hex, spec->snapshot_digest) == 0)
            return img;
        brig_error_set(err, BRIG_E_CONFLICT, 0,
                       "its disk vm.qcow2's digest is %.16s…, its record says %.16s…", hex,
                       spec->snapshot_digest ? spec->snapshot_digest : "");
        brig_error_prefix(err, "snapshot %s is damaged (it cannot be used: delete it)",
                          spec->snapshot);
    }
    free(img);
    return NULL;
}
