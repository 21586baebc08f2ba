/*
 * files.c - the `write_file` and `read_file` operations (docs/protocol.md).
 *
 * write_file never lets a reader see a partial file: the content goes to a temporary file
 * `.<name>.brig-tmp-<random>` created with O_EXCL in the target's directory (so the final
 * rename(2) stays within one filesystem and is atomic), is fsync'd, gets its mode, and only
 * then is renamed over the target.  The temporary file is removed on every failure: a write
 * error, the client vanishing mid-upload, or the agent's SIGTERM (a signal handler unlinks
 * it; unlinkat is async-signal-safe).
 *
 * A symlink at the target path is followed when it points to an existing file (the file it
 * points to is replaced, as an editor would do); a dangling one is replaced by the file.
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "util.h"

#define TMP_NAME_KEEP 200 /* bytes of the target's name kept in the temporary name */

/* The temporary file the SIGTERM handler must remove: published before it is created. */
static volatile sig_atomic_t tmp_dirfd = -1;
static char tmp_name[NAME_MAX + 1];

static void on_term(int sig)
{
    (void)sig;
    if (tmp_dirfd >= 0)
        unlinkat(tmp_dirfd, tmp_name, 0);
    _exit(1);
}

int brig_agent_mkdir_parents(const char *dir, brig_error **err)
{
    struct stat st;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
        return 0;
    _cleanup_free_ char *p = brig_xstrdup(dir);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char save = *s;
        *s = '\0';
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return brig_agent_fail(err, errno, "mkdir %s", p);
        if (stat(p, &st) < 0)
            return brig_agent_fail(err, errno, "stat %s", p);
        if (!S_ISDIR(st.st_mode))
            return brig_agent_fail(err, ENOTDIR, "%s", p);
        *s = save;
        if (save == '\0')
            return 0;
    }
}

/* An upload in progress. */
typedef struct upload {
    char *target; /* the path to replace (symlink resolved); owned */
    char *dir;    /* its directory; owned */
    char *name;   /* its last component (points into target) */
    int dirfd;    /* the directory, O_RDONLY: openat/renameat/fsync */
    int fd;       /* the temporary file, -1 once closed */
    bool tmp;     /* the temporary file exists under tmp_name */
    uint64_t size;
} upload;

/* Removes the temporary file if it still exists and releases everything. */
static void upload_dispose(upload *u)
{
    if (u->fd >= 0)
        close(u->fd);
    if (u->tmp)
        unlinkat(u->dirfd, tmp_name, 0);
    tmp_dirfd = -1;
    if (u->dirfd >= 0)
        close(u->dirfd);
    free(u->target);
    free(u->dir);
}

static uint64_t random_u64(void)
{
    static uint64_t counter;
    uint64_t v;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
        return v;
    /* Early boot without entropy: uniqueness is what matters, and O_EXCL guarantees it. */
    return (uint64_t)brig_now_mono_ms() * 1000003u ^ (uint64_t)getpid() << 32 ^ ++counter;
}

/* Resolves the target, creates its parents and the temporary file. */
static int upload_prepare(upload *u, const char *path, brig_error **err)
{
    size_t n = strlen(path);
    if (path[n - 1] == '/')
        return brig_agent_fail(err, EISDIR, "%s", path);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && stat(path, &st) == 0) {
        u->target = realpath(path, NULL);
        if (u->target == NULL)
            return brig_agent_fail(err, errno, "realpath %s", path);
    } else {
        u->target = brig_xstrdup(path);
    }
    char *slash = strrchr(u->target, '/');
    u->dir = slash == u->target ? brig_xstrdup("/")
                                : brig_xstrndup(u->target, (size_t)(slash - u->target));
    u->name = slash + 1;
    if (u->name[0] == '\0')
        return brig_agent_fail(err, EISDIR, "%s", path);

    if (brig_agent_mkdir_parents(u->dir, err) < 0)
        return -1;
    if (stat(u->target, &st) == 0 && S_ISDIR(st.st_mode))
        return brig_agent_fail(err, EISDIR, "%s", path);
    u->dirfd = open(u->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (u->dirfd < 0)
        return brig_agent_fail(err, errno, "open %s", u->dir);

    for (int tries = 0;; tries++) {
        tmp_dirfd = -1;
        snprintf(tmp_name, sizeof(tmp_name), ".%.*s.brig-tmp-%016llx", TMP_NAME_KEEP, u->name,
                 (unsigned long long)random_u64());
        tmp_dirfd = u->dirfd;
        u->fd = openat(u->dirfd, tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (u->fd >= 0)
            break;
        if (errno != EEXIST || tries == 8) {
            tmp_dirfd = -1;
            return brig_agent_fail(err, errno, "create a temporary file in %s", u->dir);
        }
    }
    u->tmp = true;
    return 0;
}

/* Makes the content durable and puts it in place. */
static int upload_commit(upload *u, mode_t mode, brig_error **err)
{
    if (fsync(u->fd) < 0)
        return brig_agent_fail(err, errno, "fsync %s", u->target);
    if (fchmod(u->fd, mode) < 0)
        return brig_agent_fail(err, errno, "chmod %s", u->target);
    int fd = u->fd;
    u->fd = -1;
    if (close(fd) < 0) /* NFS and friends report late write errors here */
        return brig_agent_fail(err, errno, "close %s", u->target);
    if (renameat(u->dirfd, tmp_name, u->dirfd, u->name) < 0)
        return brig_agent_fail(err, errno, "rename into %s", u->target);
    u->tmp = false;
    tmp_dirfd = -1;
    fsync(u->dirfd); /* the rename itself; best effort */
    return 0;
}

/* Everything up to the answer.  *in_sync stays true while the client's DATA stream is
 * still framed correctly (so the remaining frames can be discarded after an error). */
static int upload_run(brig_agent_conn *c, const brig_fs_req *q, upload *u, bool *in_sync,
                      brig_error **err)
{
    mode_t mode = (mode_t)q->mode;
    if (upload_prepare(u, q->path, err) < 0)
        return -1;
    for (;;) {
        if (brig_frame_read(c->fd, &c->frame, NULL, err) < 0) {
            *in_sync = false;
            brig_error_prefix(err, "upload of %s", u->target);
            return -1;
        }
        brig_frame *f = &c->frame;
        if (f->hdr.type != BRIG_FRAME_DATA || f->hdr.chan != BRIG_CHAN_IN) {
            *in_sync = false;
            return brig_error_set(err, BRIG_E_PROTOCOL, 0,
                                  "expected DATA on channel 0 during upload, got type %u",
                                  f->hdr.type);
        }
        if (f->hdr.len == 0)
            break;
        if (brig_write_full(u->fd, f->payload, f->hdr.len) < 0)
            return brig_agent_fail(err, errno, "write %s", u->target);
        u->size += f->hdr.len;
    }
    if (upload_commit(u, mode, err) < 0)
        return -1;
    c->replied = true;
    return brig_agent_send_json(c,
                                json_pack("{s:s, s:I}", "type",
                                          brig_agentproto_reply_name(BRIG_REPLY_OK), "size",
                                          (json_int_t)u->size),
                                err);
}

int brig_agent_write_file(brig_agent_conn *c, json_t *req, const brig_agent_req *q,
                          brig_error **err)
{
    (void)req;
    struct sigaction sa = {.sa_handler = on_term};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    upload u = {.dirfd = -1, .fd = -1};
    bool in_sync = true;
    int r = upload_run(c, &q->u.fs, &u, &in_sync, err);
    upload_dispose(&u);
    if (r < 0 && !c->replied) {
        brig_agent_reply_error(c, *err);
        if (in_sync)
            brig_agent_discard_input(c);
    }
    return r;
}

int brig_agent_read_file(brig_agent_conn *c, json_t *req, const brig_agent_req *q, brig_error **err)
{
    (void)req;
    const char *path = q->u.fs.path;
    /* O_NONBLOCK: opening a FIFO must not hang; it is refused below anyway. */
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return brig_agent_fail(err, errno, "open %s", path);
    struct stat st;
    if (fstat(fd, &st) < 0)
        return brig_agent_fail(err, errno, "stat %s", path);
    if (S_ISDIR(st.st_mode))
        return brig_agent_fail(err, EISDIR, "%s", path);
    if (!S_ISREG(st.st_mode))
        return brig_agent_bad_request(err, "%s is not a regular file", path);

    c->replied = true;
    if (brig_agent_send_json(c,
                             json_pack("{s:s, s:I, s:i}", "type",
                                       brig_agentproto_reply_name(BRIG_REPLY_FILE), "size",
                                       (json_int_t)st.st_size, "mode", (int)(st.st_mode & 07777)),
                             err) < 0)
        return -1;
    /* At most `size` bytes: the client relies on it.  A file that shrinks ends early. */
    static uint8_t buf[BRIG_DATA_CHUNK];
    off_t left = st.st_size;
    int ret = 0;
    while (left > 0) {
        ssize_t n = read(fd, buf, left < (off_t)sizeof(buf) ? (size_t)left : sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            ret = brig_error_sys(err, "read %s", path);
            break;
        }
        if (n == 0)
            break;
        if (brig_agent_send(c, BRIG_FRAME_DATA, BRIG_CHAN_IN, buf, (size_t)n, err) < 0)
            return -1;
        left -= n;
    }
    /* The end of the content, also after a read error (the client sees a short file). */
    if (brig_agent_send(c, BRIG_FRAME_DATA, BRIG_CHAN_IN, NULL, 0, err) < 0)
        return -1;
    return ret;
}
