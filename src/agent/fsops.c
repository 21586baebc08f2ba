/*
 * fsops.c - the file-system operations stat, list_dir, remove, move and mkdir
 * (docs/protocol.md, "File-system operations").  They run in the handler, as root.
 *
 * remove with `recursive` walks the tree with descriptors (openat with O_NOFOLLOW |
 * O_DIRECTORY, unlinkat), so a symlink is removed and never followed, and a rename racing
 * with the walk cannot redirect it outside the tree.  It does not enter another mount: a
 * directory whose mount id (statx STATX_MNT_ID, or st_dev where statx lacks it) differs from
 * its parent's is left alone, and its removal then fails with EBUSY (`io`).
 */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

#define LIST_CHUNK 1000 /* entries per `entries` message */

/* ---- entries ---- */

static const char *type_name(mode_t m)
{
    return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

/* Sets key to the bytes s[0..n): as a string when they are UTF-8, else as the string for
 * display (U+FFFD for each stray byte) plus "<key>_b64" with the bytes themselves. */
static void set_bytes(json_t *o, const char *key, const char *s, size_t n)
{
    if (brig_utf8_valid(s, n)) {
        json_object_set_new(o, key, json_stringn(s, n));
        return;
    }
    _cleanup_free_ char *shown = brig_utf8_display(s, n);
    json_object_set_new(o, key, json_string(shown));
    size_t len = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    _cleanup_free_ char *enc = brig_xmalloc(len);
    sodium_bin2base64(enc, len, (const unsigned char *)s, n, sodium_base64_VARIANT_ORIGINAL);
    _cleanup_free_ char *k64 = brig_asprintf("%s_b64", key);
    json_object_set_new(o, k64, json_string(enc));
}

/* The entry of `name` in dirfd (the link itself for a symlink) shown as `shown`, or NULL
 * with *err. */
static json_t *entry_at(int dirfd, const char *name, const char *shown, brig_error **err)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        brig_agent_fail(err, errno, "%s", shown);
        return NULL;
    }
    json_t *e = json_object();
    set_bytes(e, "name", shown, strlen(shown));
    json_object_update_new(
        e, json_pack("{s:s, s:I, s:i, s:I}", "type", type_name(st.st_mode), "size",
                     (json_int_t)st.st_size, "mode", (int)(st.st_mode & 07777), "mtime",
                     (json_int_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000));
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        ssize_t n = readlinkat(dirfd, name, target, sizeof(target) - 1);
        if (n >= 0) {
            target[n] = '\0';
            set_bytes(e, "target", target, (size_t)n);
        }
    }
    return e;
}

/* The last component of path ("/" for the root; trailing slashes ignored), owned. */
static char *last_component(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t start = n;
    while (start > 0 && path[start - 1] != '/')
        start--;
    if (start == n)
        return brig_xstrdup("/");
    return brig_xstrndup(path + start, n - start);
}

int brig_agent_stat(brig_agent_conn *c, json_t *req, const brig_agent_req *q, brig_error **err)
{
    (void)req;
    _cleanup_free_ char *name = last_component(q->u.fs.path);
    json_t *e = entry_at(AT_FDCWD, q->u.fs.path, name, err);
    if (e == NULL)
        return -1;
    /* The name shown is the last component, though the entry was taken of the whole path. */
    c->replied = true;
    return brig_agent_send_json(
        c,
        json_pack("{s:s, s:o}", "type", brig_agentproto_reply_name(BRIG_REPLY_ENTRY), "entry", e),
        err);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int brig_agent_list_dir(brig_agent_conn *c, json_t *req, const brig_agent_req *q, brig_error **err)
{
    (void)req;
    const char *path = q->u.fs.path;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return brig_agent_fail(err, errno, "%s", path);
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return brig_error_sys(err, "opendir %s", path);
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = brig_xrealloc(names, cap * sizeof(*names));
        }
        names[n++] = brig_xstrdup(de->d_name);
    }
    int ret = 0;
    if (errno != 0)
        ret = brig_agent_fail(err, errno, "readdir %s", path);
    if (ret == 0 && n > 0)
        qsort(names, n, sizeof(*names), cmp_names);
    c->replied = ret == 0;
    /* At least one `entries` message, even for an empty directory. */
    json_t *chunk = json_array();
    size_t sent = 0;
    for (size_t i = 0; ret == 0 && i < n; i++) {
        /* An entry that vanished since readdir is left out. */
        json_t *e = entry_at(dirfd(d), names[i], names[i], NULL);
        if (e == NULL)
            continue;
        json_array_append_new(chunk, e);
        if (json_array_size(chunk) == LIST_CHUNK) {
            ret = brig_agent_send_json(c,
                                       json_pack("{s:s, s:o}", "type",
                                                 brig_agentproto_reply_name(BRIG_REPLY_ENTRIES),
                                                 "entries", chunk),
                                       err);
            chunk = json_array();
            sent++;
        }
    }
    if (ret == 0 && (json_array_size(chunk) > 0 || sent == 0)) {
        ret = brig_agent_send_json(c,
                                   json_pack("{s:s, s:O}", "type",
                                             brig_agentproto_reply_name(BRIG_REPLY_ENTRIES),
                                             "entries", chunk),
                                   err);
    }
    json_decref(chunk);
    if (ret == 0)
        ret = brig_agent_send_json(c, brig_agentproto_message(BRIG_REPLY_END), err);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    closedir(d);
    return ret;
}

/* ---- remove ---- */

/* The mount a file is on: statx's mount id where the kernel has it (5.8), else st_dev (which
 * misses bind mounts of the same file system). */
static uint64_t mount_of(int dirfd, const char *name)
{
    struct statx sx;
    if (statx(dirfd, name, AT_SYMLINK_NOFOLLOW, STATX_MNT_ID | STATX_INO, &sx) == 0) {
        if (sx.stx_mask & STATX_MNT_ID)
            return sx.stx_mnt_id;
        return (uint64_t)sx.stx_dev_major << 32 | sx.stx_dev_minor;
    }
    return UINT64_MAX;
}

static int empty_pass(DIR *d, uint64_t mnt, const char *shown, int depth, size_t *removed,
                      brig_error **err);

/* Empties the directory fd (which is on mount `mnt`); takes ownership of fd. */
static int empty_dir(int fd, uint64_t mnt, const char *shown, int depth, brig_error **err)
{
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return brig_agent_fail(err, errno, "%s", shown);
    }
    if (depth > 4096) {
        closedir(d);
        return brig_agent_fail(err, ELOOP, "%s: too deep", shown);
    }
    int ret = 0;
    /* Whether readdir still returns the entries after one that was removed is unspecified
     * (POSIX): passes repeat until one removes nothing. */
    size_t removed = 1;
    while (ret == 0 && removed > 0) {
        removed = 0;
        rewinddir(d);
        ret = empty_pass(d, mnt, shown, depth, &removed, err);
    }
    closedir(d);
    return ret;
}

static int empty_pass(DIR *d, uint64_t mnt, const char *shown, int depth, size_t *removed,
                      brig_error **err)
{
    int ret = 0;
    struct dirent *de;
    for (;;) {
        errno = 0;
        if ((de = readdir(d)) == NULL) {
            if (errno != 0)
                ret = brig_agent_fail(err, errno, "readdir %s", shown);
            break;
        }
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        if (unlinkat(dirfd(d), name, 0) == 0 || errno == ENOENT) {
            (*removed)++;
            continue;
        }
        if (errno != EISDIR && errno != EPERM) {
            ret = brig_agent_fail(err, errno, "remove %s/%s", shown, name);
            break;
        }
        /* A directory (EISDIR on Linux; EPERM by POSIX): empty it, unless it is a mount. */
        if (mount_of(dirfd(d), name) == mnt) {
            int sub = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                ret = brig_agent_fail(err, errno, "open %s/%s", shown, name);
                break;
            }
            _cleanup_free_ char *sub_shown = brig_asprintf("%s/%s", shown, name);
            if (empty_dir(sub, mnt, sub_shown, depth + 1, err) < 0) {
                ret = -1;
                break;
            }
        }
        if (unlinkat(dirfd(d), name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
            ret = brig_agent_fail(err, errno, "remove %s/%s%s", shown, name,
                                  errno == EBUSY ? " (a mount point)" : "");
            break;
        }
        (*removed)++;
    }
    return ret;
}

int brig_agent_remove(brig_agent_conn *c, json_t *req, const brig_agent_req *q, brig_error **err)
{
    (void)req;
    const char *path = q->u.fs.path;
    struct stat st, root;
    if (lstat(path, &st) < 0)
        return brig_agent_fail(err, errno, "%s", path);
    if (stat("/", &root) == 0 && st.st_dev == root.st_dev && st.st_ino == root.st_ino)
        return brig_agent_bad_request(err, "refusing to remove /");
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) < 0)
            return brig_agent_fail(err, errno, "remove %s", path);
    } else {
        if (q->u.fs.recursive) {
            int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0)
                return brig_agent_fail(err, errno, "open %s", path);
            if (empty_dir(fd, mount_of(AT_FDCWD, path), path, 0, err) < 0)
                return -1;
        }
        if (rmdir(path) < 0) {
            if (errno == ENOTEMPTY || errno == EEXIST)
                return brig_error_set(err, BRIG_E_CONFLICT, ENOTEMPTY, "%s", path);
            return brig_agent_fail(err, errno, "remove %s%s", path,
                                   errno == EBUSY ? " (a mount point)" : "");
        }
    }
    c->replied = true;
    return brig_agent_send_json(c, brig_agentproto_message(BRIG_REPLY_OK), err);
}

/* ---- move, mkdir ---- */

int brig_agent_move(brig_agent_conn *c, json_t *req, const brig_agent_req *q, brig_error **err)
{
    (void)req;
    const char *from = q->u.fs.from, *to = q->u.fs.to;
    if (rename(from, to) < 0) {
        int e = errno;
        if (e == EINVAL)
            return brig_agent_bad_request(err, "cannot move %s into itself (%s)", from, to);
        if (e == EXDEV)
            return brig_error_set(err, BRIG_E_INTERNAL, e,
                                  "move %s to %s: not on the same file system", from, to);
        return brig_agent_fail(err, e, "move %s to %s", from, to);
    }
    c->replied = true;
    return brig_agent_send_json(c, brig_agentproto_message(BRIG_REPLY_OK), err);
}

int brig_agent_mkdir(brig_agent_conn *c, json_t *req, const brig_agent_req *q, brig_error **err)
{
    (void)req;
    const char *path = q->u.fs.path;
    struct stat st;
    if (q->u.fs.parents && stat(path, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return brig_agent_fail(err, EEXIST, "%s", path);
    } else {
        if (q->u.fs.parents) {
            _cleanup_free_ char *parent = brig_xstrdup(path);
            char *slash = strrchr(parent, '/');
            /* Trailing slashes: "/a/b/" has the parent "/a". */
            while (slash != NULL && slash != parent && slash[1] == '\0') {
                *slash = '\0';
                slash = strrchr(parent, '/');
            }
            if (slash != NULL && slash != parent) {
                *slash = '\0';
                if (brig_agent_mkdir_parents(parent, err) < 0)
                    return -1;
            }
        }
        if (mkdir(path, 0700) < 0)
            return brig_agent_fail(err, errno, "mkdir %s", path);
        /* The exact mode, whatever the umask. */
        if (chmod(path, q->u.fs.mode) < 0)
            return brig_agent_fail(err, errno, "chmod %s", path);
    }
    c->replied = true;
    return brig_agent_send_json(c, brig_agentproto_message(BRIG_REPLY_OK), err);
}
