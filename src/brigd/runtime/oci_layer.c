/*
 * oci_layer.c - a snapshot's layers (oci_snapshot.c has the whole story): their sparse copy
 * and digest, their chain's manifest, and a create's mounts of them.
 *
 * A sandbox made from a snapshot shares the snapshot's layers: each is hard-linked into
 * the sandbox's directory (layers/<k>.img: the file lives as long as one snapshot or one
 * sandbox links it, whoever deletes what), mounted read-only and id-mapped from the range
 * that wrote it into the sandbox's own (layers/<k>), and is a lower layer of its overlay,
 * between the agent's layer and its template.  Nothing is copied: its own writable layer
 * starts empty, like any create's.
 *
 * Verified once: a layer's digest is computed again the first time a snapshot's layer is
 * used and recorded beside it (<file>.verified: its inode, size and modification time),
 * and again whenever the file's size or modification time differ from that record.  A
 * layer is never written after its snapshot was taken (read-only mounts, read-only
 * loop devices), so a change of its data through the file system changes them.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/fs.h>
#include <openssl/evp.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk.h"
#include "idmap.h"
#include "log.h"
#include "oci_internal.h"

#define BLOCK (64 * 1024)

static bool all_zero(const unsigned char *b, size_t n)
{
    return n == 0 || (b[0] == 0 && memcmp(b, b + 1, n - 1) == 0);
}

int brig_oci_layer_copy(int in, int out, char hex[65], int64_t *bytes, brig_error **err)
{
    struct stat st;
    if (fstat(in, &st) < 0 || (out >= 0 && ftruncate(out, st.st_size) < 0))
        return brig_error_sys(err, "size the snapshot image");
    /* OpenSSL's SHA-256: it uses the CPU's SHA instructions (about ten times libsodium's
     * portable one here), and the layer's data is most of a snapshot's cost. */
    EVP_MD_CTX *h = EVP_MD_CTX_new();
    if (h == NULL || EVP_DigestInit_ex(h, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(h);
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "sha256: out of memory");
    }
    unsigned char *buf = brig_xmalloc(BLOCK);
    int64_t n_bytes = 0;
    int r = 0;
    off_t done_to = 0; /* blocks before it are hashed: two data extents may share one */
    for (off_t off = 0;;) {
        off_t data = lseek(in, off, SEEK_DATA);
        if (data < 0)
            break; /* ENXIO: no data after off */
        off_t hole = lseek(in, data, SEEK_HOLE);
        if (hole < 0) {
            r = brig_error_sys(err, "seek the snapshot image");
            break;
        }
        off_t first = data - data % BLOCK;
        for (off_t pos = first > done_to ? first : done_to; pos < hole; pos += BLOCK) {
            done_to = pos + BLOCK;
            ssize_t n = pread(in, buf, BLOCK, pos);
            if (n < 0) {
                r = brig_error_sys(err, "read the snapshot image");
                goto done;
            }
            if (n == 0 || all_zero(buf, (size_t)n))
                continue;
            uint64_t le = htole64((uint64_t)pos);
            EVP_DigestUpdate(h, &le, sizeof(le));
            EVP_DigestUpdate(h, buf, (size_t)n);
            n_bytes += n;
            if (out >= 0 && pwrite(out, buf, (size_t)n, pos) != n) {
                r = brig_error_sys(err, "write the snapshot image");
                goto done;
            }
        }
        off = hole;
    }
done:
    free(buf);
    unsigned char d[crypto_hash_sha256_BYTES];
    EVP_DigestFinal_ex(h, d, NULL);
    EVP_MD_CTX_free(h);
    sodium_bin2hex(hex, 65, d, sizeof(d));
    *bytes = n_bytes;
    return r;
}

/* ---- a chain's manifest ----------------------------------------------------------- */

void brig_oci_chain_digest(const brig_oci_chain *c, char hex[65])
{
    if (c->n == 1) {
        memcpy(hex, c->l[0].digest, 65);
        return;
    }
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    for (size_t i = 0; i < c->n; i++) {
        char line[96];
        int n = snprintf(line, sizeof(line), "%s %u\n", c->l[i].digest, c->l[i].uid_base);
        crypto_hash_sha256_update(&h, (const unsigned char *)line, (size_t)n);
    }
    unsigned char d[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&h, d);
    sodium_bin2hex(hex, 65, d, sizeof(d));
}

json_t *brig_oci_chain_json(const brig_oci_chain *c)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < c->n; i++)
        json_array_append_new(arr,
                              json_pack("{s:s, s:I, s:s}", "file", c->l[i].file, "uid_base",
                                        (json_int_t)c->l[i].uid_base, "digest", c->l[i].digest));
    return arr;
}

static bool layer_from_json(json_t *j, brig_oci_layer *l)
{
    const char *file = json_string_value(json_object_get(j, "file"));
    const char *digest = json_string_value(json_object_get(j, "digest"));
    json_t *uid = json_object_get(j, "uid_base");
    if (!file || !digest || strlen(digest) != 64 || !json_is_integer(uid) ||
        strlen(file) >= sizeof(l->file) || strchr(file, '/') || file[0] == '.')
        return false;
    snprintf(l->file, sizeof(l->file), "%s", file);
    memcpy(l->digest, digest, 65);
    l->uid_base = (unsigned)json_integer_value(uid);
    return true;
}

int brig_oci_chain_read(const char *manifest, unsigned uid_base, brig_oci_chain *c,
                        brig_error **err)
{
    json_t *m = json_load_file(manifest, 0, NULL);
    const char *kind = json_string_value(json_object_get(m, "kind"));
    if (kind && strcmp(kind, "microvm") == 0) { /* microvm_snap.c's: a VM's disk */
        json_decref(m);
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "it was taken of a microVM: it restores only to isolation "
                              "'microvm' sandboxes");
    }
    json_t *layers = json_object_get(m, "layers");
    const char *digest = json_string_value(json_object_get(m, "digest"));
    c->n = 0;
    bool ok = m != NULL;
    if (ok && layers == NULL) { /* before chains: its one layer, disk.img */
        ok = digest && strlen(digest) == 64;
        if (ok) {
            c->l[0] = (brig_oci_layer){.file = "disk.img", .uid_base = uid_base};
            memcpy(c->l[0].digest, digest, 65);
            c->n = 1;
        }
    } else if (ok) {
        size_t i;
        json_t *l;
        ok = json_array_size(layers) >= 1 && json_array_size(layers) <= BRIG_OCI_MAX_LAYERS;
        json_array_foreach(layers, i, l) if (ok) ok = layer_from_json(l, &c->l[c->n++]);
    }
    json_decref(m);
    if (!ok)
        return brig_error_set(err, BRIG_E_CONFLICT, 0, "its manifest cannot be read");
    return 0;
}

/* ---- a create's mounts ---------------------------------------------------------- */

/* What path.verified records of the layer file open at fd: its inode, size and
 * modification time, and the host's boot (a fork's layer is not synced: after a crash of
 * the host its data may not be what was hashed); false when it cannot be read. */
static bool stat_line(int fd, char line[160])
{
    struct stat st;
    char boot[40] = "";
    FILE *b = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (b) {
        if (!fgets(boot, sizeof(boot), b))
            boot[0] = '\0';
        fclose(b);
    }
    boot[strcspn(boot, "\n")] = '\0';
    if (fstat(fd, &st) < 0)
        return false;
    snprintf(line, 160, "%llu %lld %lld.%09ld %s\n", (unsigned long long)st.st_ino,
             (long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, boot);
    return true;
}

void brig_oci_layer_mark(int fd, const char *path)
{
    char line[160];
    _cleanup_free_ char *mark = brig_asprintf("%s.verified", path);
    _cleanup_free_ char *tmp = brig_asprintf("%s.tmp", mark);
    FILE *f = stat_line(fd, line) ? fopen(tmp, "we") : NULL;
    if (f == NULL || fputs(line, f) < 0 || fclose(f) != 0 || rename(tmp, mark) < 0)
        brig_warn("%s: record its check: %s", path, strerror(errno)); /* checked next time */
}

/* Checks the layer file open at fd against its digest, unless path.verified says it was
 * since its last change. */
static int verify_once(int fd, const char *path, const brig_oci_layer *l, brig_error **err)
{
    char want[160], have[160] = "";
    if (!stat_line(fd, want))
        return brig_error_sys(err, "stat %s", path);
    _cleanup_free_ char *mark = brig_asprintf("%s.verified", path);
    FILE *f = fopen(mark, "re");
    if (f) {
        if (!fgets(have, sizeof(have), f))
            have[0] = '\0';
        fclose(f);
    }
    if (strcmp(want, have) == 0)
        return 0;
    char digest[65];
    int64_t bytes;
    if (brig_oci_layer_copy(fd, -1, digest, &bytes, err) < 0)
        return -1;
    if (strcmp(digest, l->digest) != 0)
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "its layer %s's digest is %.16s…, its manifest says %.16s…", l->file,
                              digest, l->digest);
    brig_oci_layer_mark(fd, path);
    return 0;
}

/* Layer k of the sandbox's chain: linked, checked, mounted read-only at layers/<k>, its
 * owners moved from l's range into spec's. */
static int mount_layer(const oci *o, const brig_rt_spec *spec, const char *snap_dir, size_t k,
                       const brig_oci_layer *l, brig_error **err)
{
    _cleanup_free_ char *src = brig_asprintf("%s/%s", snap_dir, l->file);
    _cleanup_free_ char *name = brig_asprintf("layers/%zu", k);
    _cleanup_free_ char *dst = brig_asprintf("%s/%s/%s", o->sb_dir, spec->id, name);
    _cleanup_free_ char *img = brig_asprintf("%s.img", dst);
    _cleanup_free_ char *ro = brig_asprintf("%s.ro", dst);
    _cleanup_free_ char *upper = brig_asprintf("%s/upper", ro);
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return brig_error_set(err, BRIG_E_CONFLICT, errno, "its layer %s cannot be opened",
                              l->file);
    int r = verify_once(fd, src, l, err);
    close(fd);
    if (r < 0)
        return -1;
    int ns = -1;
    if (link(src, img) < 0 || mkdir(dst, 0755) < 0 || mkdir(ro, 0700) < 0)
        return brig_error_sys(err, "link %s", src);
    if (brig_disk_mount_ro(img, ro, err) < 0)
        return -1;
    r = brig_idmap_userns_from(l->uid_base, spec->uid_base, spec->uid_size, &ns, err) < 0 ||
                brig_idmap_mount(upper, dst, ns, err) < 0
            ? -1
            : 0;
    if (ns >= 0)
        close(ns);
    if (umount2(ro, MNT_DETACH) < 0 || rmdir(ro) < 0) /* the id-mapped clone keeps it */
        brig_warn("%s: unmount %s: %s", spec->id, ro, strerror(errno));
    return r;
}

int brig_oci_snapshot_layers(const oci *o, const brig_rt_spec *spec, char **lowers,
                             brig_error **err)
{
    *lowers = NULL;
    _cleanup_free_ char *snap_dir = brig_asprintf("%s/../snapshots/%s", o->sb_dir, spec->snapshot);
    _cleanup_free_ char *manifest = brig_asprintf("%s/manifest.json", snap_dir);
    brig_oci_chain c;
    char digest[65];
    int r = brig_oci_chain_read(manifest, spec->snapshot_uid_base, &c, err);
    if (r == 0) {
        brig_oci_chain_digest(&c, digest);
        if (strcmp(digest, spec->snapshot_digest) != 0)
            r = brig_error_set(err, BRIG_E_CONFLICT, 0,
                               "its layers' digest is %.16s…, its record says %.16s…", digest,
                               spec->snapshot_digest);
    }
    _cleanup_free_ char *dir = brig_asprintf("%s/%s/layers", o->sb_dir, spec->id);
    if (r == 0 && mkdir(dir, 0700) < 0)
        r = brig_error_sys(err, "create %s", dir);
    brig_buf lo = {0};
    for (size_t k = 0; r == 0 && k < c.n; k++) {
        r = mount_layer(o, spec, snap_dir, k, &c.l[k], err);
        brig_buf_printf(&lo, "%s%s/%zu", k ? ":" : "", dir, k);
    }
    if (r < 0) {
        if (err && *err && (*err)->kind == BRIG_E_CONFLICT)
            brig_error_prefix(err, "snapshot %s is damaged (it cannot be used: delete it)",
                              spec->snapshot);
        free(lo.data);
        return -1;
    }
    /* The sandbox's own record of its chain, for a snapshot of it (oci_snapshot.c). */
    for (size_t k = 0; k < c.n; k++)
        snprintf(c.l[k].file, sizeof(c.l[k].file), "%zu.img", k);
    json_t *m = json_pack("{s:o}", "layers", brig_oci_chain_json(&c));
    _cleanup_free_ char *mine = brig_asprintf("%s/manifest.json", dir);
    r = json_dump_file(m, mine, 0) < 0 ? brig_error_sys(err, "write %s", mine) : 0;
    json_decref(m);
    if (r < 0) {
        free(lo.data);
        return -1;
    }
    *lowers = lo.data;
    return 0;
}

int brig_oci_layers_unmount(const oci *o, const char *id, brig_error **err)
{
    int failed = 0;
    for (size_t k = 0; k < BRIG_OCI_MAX_LAYERS; k++) {
        _cleanup_free_ char *name = brig_asprintf("layers/%zu", k);
        _cleanup_free_ char *m = brig_asprintf("%s/%s/%s", o->sb_dir, id, name);
        _cleanup_free_ char *ro = brig_asprintf("%s.ro", m);
        umount2(ro, MNT_DETACH); /* a create cut short between the two */
        if (umount2(m, MNT_DETACH) < 0 && errno != EINVAL) {
            if (errno == ENOENT)
                break;
            brig_error_sys(err, "unmount %s", m);
            failed = 1;
        }
    }
    return failed ? -1 : 0;
}

void brig_oci_disk_thaw(const oci *o, const char *id)
{
    _cleanup_free_ char *mnt = brig_asprintf("%s/%s/disk", o->sb_dir, id);
    _cleanup_free_ char *dir = brig_asprintf("%s/%s", o->sb_dir, id);
    struct stat in, at;
    int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    /* its own file system only, never the state directory's */
    if (fstat(fd, &in) == 0 && stat(dir, &at) == 0 && in.st_dev != at.st_dev &&
        ioctl(fd, FITHAW, 0) == 0)
        brig_warn("%s: its file system was left frozen (a snapshot cut short): thawed", id);
    close(fd);
}
