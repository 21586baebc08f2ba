/*
 * oci_snapshot.c - snapshots' layers (docs/snapshots.md): taking and removing them; their
 * digest, chain and a create's mounts of them are oci_layer.c's.
 *
 * A snapshot is a copy of a sandbox's writable layer, its ext4 image (disk.c), under
 * <state>/snapshots/<id>/: disk.img and manifest.json (what it was taken of, its layers and
 * their digests).  Taking one: the sandbox is paused by the caller; its file system is
 * frozen (FIFREEZE: everything written so far reaches the image, nothing more is written)
 * while the image's data is copied, sparse: this host's file system has no reflinks, so
 * the cost is the data the sandbox wrote (plus about a megabyte of ext4 metadata).  The
 * digest is the sha256 of every 64 KiB block of the image that is not all zeros, each
 * after its offset: the same for a file whatever its holes are, and computed while copying.
 *
 * A gVisor sandbox has one where its root's writes reach it (created with "snapshots": true,
 * gvisor.c); runsc's pause stops its tasks, and its writes are in the host's page cache
 * already (gVisor writes a file through the host descriptor the gofer handed it), so the
 * same FIFREEZE and copy hold for it.
 *
 * A sandbox made from a snapshot writes on top of the snapshot's layers (oci_layer.c), so
 * a snapshot of it is its own layer plus those: they are hard-linked into the new
 * snapshot's directory (lower-<k>.img), never copied.  Removing a snapshot removes its
 * names only: a layer's file goes with its last link, a snapshot's or a sandbox's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk.h"
#include "log.h"
#include "oci_internal.h"

/* "<state>/snapshots[/<id>[/<name>]]"; caller frees. */
static char *snap_path(const oci *o, const char *id, const char *name)
{
    if (id == NULL)
        return brig_asprintf("%s/../snapshots", o->sb_dir);
    if (name == NULL)
        return brig_asprintf("%s/../snapshots/%s", o->sb_dir, id);
    return brig_asprintf("%s/../snapshots/%s/%s", o->sb_dir, id, name);
}

static int write_manifest(const oci *o, const char *id, const char *source, const brig_oci_chain *c,
                          int64_t bytes, brig_error **err)
{
    _cleanup_free_ char *path = snap_path(o, id, "manifest.json");
    char digest[65];
    brig_oci_chain_digest(c, digest);
    json_t *m = json_pack("{s:s, s:s, s:s, s:I, s:s, s:o}", "id", id, "source", source, "digest",
                          digest, "bytes", (json_int_t)bytes, "digest_of",
                          "each layer: sha256 of each non-zero 64 KiB block of its image after "
                          "its offset (64-bit little-endian); of several: sha256 of the layers' "
                          "\"<digest> <uid_base>\\n\", top first",
                          "layers", brig_oci_chain_json(c));
    int r = json_dump_file(m, path, JSON_INDENT(2)) < 0 ? brig_error_sys(err, "write %s", path) : 0;
    json_decref(m);
    return r;
}

/* The chain of snapshot id taken of sb: its layer (top, digest set), then the layers sb was
 * made from (its layers/, oci_layer.c), hard-linked into the snapshot's directory. */
static int link_lowers(const oci *o, brig_rt_sandbox *sb, const char *id, brig_oci_chain *c,
                       brig_error **err)
{
    struct stat st;
    if (fstatat(sb->dirfd, "disk/upper", &st, 0) < 0)
        return brig_error_sys(err, "stat the writable layer of %s", sb->id);
    snprintf(c->l[0].file, sizeof(c->l[0].file), "disk.img");
    c->l[0].uid_base = st.st_uid; /* its root: its range's first id */
    c->n = 1;
    _cleanup_free_ char *dir = brig_oci_path(o, sb->id, "layers");
    _cleanup_free_ char *manifest = brig_asprintf("%s/manifest.json", dir);
    if (access(manifest, F_OK) < 0)
        return 0; /* not made from a snapshot */
    brig_oci_chain below;
    if (brig_oci_chain_read(manifest, 0, &below, err) < 0)
        return -1;
    if (below.n + 1 > BRIG_OCI_MAX_LAYERS)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "%s is made from a chain of %zu snapshots already, the most a "
                              "snapshot may have",
                              sb->id, below.n);
    for (size_t k = 0; k < below.n; k++) {
        brig_oci_layer *l = &c->l[c->n++];
        *l = below.l[k];
        snprintf(l->file, sizeof(l->file), "lower-%zu.img", k);
        _cleanup_free_ char *from = brig_asprintf("%s/%s", dir, below.l[k].file);
        _cleanup_free_ char *to = snap_path(o, id, l->file);
        if (link(from, to) < 0)
            return brig_error_sys(err, "link %s", from);
    }
    return 0;
}

/* Copies sandbox sb's image, its file system frozen meanwhile, into snapshot id. */
static int copy_frozen(const oci *o, brig_rt_sandbox *sb, const char *dst, bool durable,
                       char digest[65], int64_t *bytes, brig_error **err)
{
    _cleanup_free_ char *mnt = brig_oci_path(o, sb->id, "disk");
    _cleanup_free_ char *src = brig_oci_path(o, sb->id, "disk.img");
    int mfd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (mfd < 0)
        return brig_error_sys(err, "open %s", mnt);
    if (ioctl(mfd, FIFREEZE, 0) < 0) {
        close(mfd);
        return brig_error_sys(err, "freeze the file system of %s", sb->id);
    }
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int out = in < 0 ? -1 : open(dst, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int r = out < 0 ? brig_error_sys(err, "copy %s", src)
                    : brig_oci_layer_copy(in, out, digest, bytes, err);
    if (ioctl(mfd, FITHAW, 0) < 0)
        brig_warn("%s: thaw its file system: %s", sb->id, strerror(errno));
    close(mfd);
    if (r == 0 && durable && fsync(out) < 0)
        r = brig_error_sys(err, "sync %s", dst);
    if (r == 0) /* hashed from the very blocks written: checked */
        brig_oci_layer_mark(out, dst);
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    return r;
}

int brig_oci_snapshot_take(brig_runtime *rt, brig_rt_sandbox *sb, const char *id, bool durable,
                           char digest[65], int64_t *bytes, brig_error **err)
{
    oci *o = rt->priv;
    if (sb->iso != BRIG_ISO_CONTAINER && !sb->host_layer)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "%s keeps its writes in gVisor's own overlay, where the host cannot "
                              "copy them: a gVisor sandbox can be snapshotted or forked when it "
                              "is created with \"snapshots\": true (its writes then go to its "
                              "writable layer on the host, as a container's do)",
                              sb->id);
    _cleanup_free_ char *top = snap_path(o, NULL, NULL);
    _cleanup_free_ char *dir = snap_path(o, id, NULL);
    _cleanup_free_ char *img = snap_path(o, id, "disk.img");
    if (brig_oci_mkdir_p(top, 0700, err) < 0)
        return -1;
    if (mkdir(dir, 0700) < 0)
        return brig_error_sys(err, "create %s", dir);
    brig_oci_chain c;
    if (copy_frozen(o, sb, img, durable, c.l[0].digest, bytes, err) < 0 ||
        link_lowers(o, sb, id, &c, err) < 0 || write_manifest(o, id, sb->id, &c, *bytes, err) < 0) {
        brig_oci_rm_rf(dir);
        return -1;
    }
    brig_oci_chain_digest(&c, digest);
    return 0;
}

/* A fork with memory's source (paused by the caller) runs while its agent closes its
 * connections (gvisor_ckpt.c), then is paused again. */
static int quiet(brig_runtime *rt, brig_rt_sandbox *sb, brig_error **err)
{
    oci *o = rt->priv;
    if (brig_gvisor_checkpointed(o, sb->id))
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "%s's memory is checkpointed: resume it before a fork with memory",
                              sb->id);
    if (brig_oci_resume(rt, sb, err) < 0 || brig_gvisor_agent_quiet(o, sb, err) < 0)
        return -1;
    return brig_oci_pause(rt, sb, NULL, err);
}

/* It runs on, listening again (a frozen sandbox cannot be signalled: resumed first). */
static void listen_again(brig_runtime *rt, brig_rt_sandbox *sb)
{
    brig_error *err = NULL;
    if (brig_oci_resume(rt, sb, &err) < 0 || brig_gvisor_agent_listen(rt->priv, sb->id, &err) < 0) {
        brig_warn("%s: listening again after a fork with memory: %s", sb->id, err->msg);
        brig_error_clear(&err);
    }
}

/* Its memory too: the agent quiet while the sandbox runs, then (paused again) the layer
 * and the image of its memory, of the same instant; it runs on, listening again. */
int brig_oci_snapshot_memory(brig_runtime *rt, brig_rt_sandbox *sb, const char *id, bool durable,
                             char digest[65], int64_t *bytes, brig_error **err)
{
    oci *o = rt->priv;
    if (sb->iso != BRIG_ISO_GVISOR)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "only a gVisor sandbox's memory can go into a fork (%s is a "
                              "container)",
                              sb->id);
    if (!sb->host_layer) /* refused, saying why */
        return brig_oci_snapshot_take(rt, sb, id, durable, digest, bytes, err);
    _cleanup_free_ char *mem = snap_path(o, id, "memory");
    int rc = quiet(rt, sb, err) < 0
                 ? -1
                 : brig_oci_snapshot_take(rt, sb, id, durable, digest, bytes, err);
    if (rc == 0 && brig_gvisor_image(o, sb, mem, err) < 0) {
        brig_oci_snapshot_remove(rt, id, NULL);
        rc = -1;
    }
    listen_again(rt, sb); /* also after a quiet that failed half-way */
    return rc;
}

char *brig_oci_snapshot_file(const oci *o, const char *id, const char *name)
{
    return snap_path(o, id, name);
}

int brig_oci_snapshot_remove(brig_runtime *rt, const char *id, brig_error **err)
{
    (void)err;
    _cleanup_free_ char *dir = snap_path(rt->priv, id, NULL);
    brig_oci_rm_rf(dir);
    return 0;
}

int brig_oci_snapshot_list(brig_runtime *rt, char ***ids, size_t *n, brig_error **err)
{
    *ids = NULL;
    *n = 0;
    _cleanup_free_ char *top = snap_path(rt->priv, NULL, NULL);
    DIR *dir = opendir(top);
    if (dir == NULL)
        return errno == ENOENT ? 0 : brig_error_sys(err, "open %s", top);
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (strncmp(e->d_name, "snp_", 4) != 0 || strlen(e->d_name) >= BRIG_ID_MAX)
            continue;
        *ids = brig_xrealloc(*ids, (*n + 1) * sizeof(**ids));
        (*ids)[(*n)++] = brig_xstrdup(e->d_name);
    }
    closedir(dir);
    return 0;
}
