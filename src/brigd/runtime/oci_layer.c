/*
 * oci_layer.c - a snapshot's layer (oci_snapshot.c has the whole story): its sparse copy
 * and digest, and a create's restore from it.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk.h"
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
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
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
            crypto_hash_sha256_update(&h, (const unsigned char *)&le, sizeof(le));
            crypto_hash_sha256_update(&h, buf, (size_t)n);
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
    crypto_hash_sha256_final(&h, d);
    sodium_bin2hex(hex, 65, d, sizeof(d));
    *bytes = n_bytes;
    return r;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

/* The owners' shift of a restore (nftw has no context argument). */
static __thread unsigned shift_from, shift_to;

static int shift_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)flag;
    (void)ftw;
    uid_t u = st->st_uid;
    gid_t g = st->st_gid;
    bool mine_u = u >= shift_from && u - shift_from < 65536;
    bool mine_g = g >= shift_from && g - shift_from < 65536;
    if (!mine_u && !mine_g)
        return 0;
    if (lchown(path, mine_u ? u - shift_from + shift_to : u,
               mine_g ? g - shift_from + shift_to : g) < 0)
        return -1;
    /* chown clears set-user-id and set-group-id bits: put them back. */
    if (!S_ISLNK(st->st_mode) && (st->st_mode & (S_ISUID | S_ISGID)) &&
        chmod(path, st->st_mode) < 0)
        return -1;
    return 0;
}

int brig_oci_snapshot_restore(const oci *o, const brig_rt_spec *spec, const char *img,
                              const char *mnt, brig_error **err)
{
    _cleanup_free_ char *src =
        brig_asprintf("%s/../snapshots/%s/disk.img", o->sb_dir, spec->snapshot);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return brig_error_set(err, BRIG_E_CONFLICT, errno,
                              "snapshot %s is damaged: its image cannot be opened", spec->snapshot);
    int out = open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0) {
        close(in);
        return brig_error_sys(err, "create %s", img);
    }
    char digest[65];
    int64_t bytes = 0;
    int r = brig_oci_layer_copy(in, out, digest, &bytes, err);
    close(in);
    close(out);
    if (r < 0)
        return -1;
    if (strcmp(digest, spec->snapshot_digest) != 0)
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "snapshot %s is damaged: its layer's digest is %.16s…, its manifest "
                              "says %.16s…; it cannot be used (delete it)",
                              spec->snapshot, digest, spec->snapshot_digest);
    if (brig_disk_mount(img, mnt, spec->uid_base, err) < 0)
        return -1;
    _cleanup_free_ char *work = brig_asprintf("%s/work", mnt);
    _cleanup_free_ char *upper = brig_asprintf("%s/upper", mnt);
    /* its overlay's, marked volatile: overlayfs refuses it again */
    if (nftw(work, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0 || mkdir(work, 0700) < 0)
        return brig_error_sys(err, "create %s", work);
    shift_from = spec->snapshot_uid_base;
    shift_to = spec->uid_base;
    if (shift_from != shift_to && nftw(upper, shift_one, 16, FTW_PHYS | FTW_MOUNT) != 0)
        return brig_error_sys(err, "move the owners of snapshot %s's files", spec->snapshot);
    return 0;
}
