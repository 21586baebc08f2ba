/*
 * cmd_tar.c - whole directories in and out of a sandbox (upload -r, download -r)
 * through brigd's tar endpoints.  Nothing is held whole: on upload, this host's
 * tar makes the archive and its output is the PUT body (chunked, read as curl
 * asks for it); on download, the GET body goes through a pipe to a thread that
 * unpacks it with libarchive as it arrives.
 *
 *   upload:   tar -c -f - --owner=0 --group=0 --numeric-owner -C LOCAL .  | PUT files/tar
 *             The body is completed only when tar exited 0: when it fails, the
 *             transfer is aborted, so brigd sees a cut archive.
 *   download: GET files/tar | extract() into LOCAL
 *             The archive comes from the sandbox, which brig does not trust (its
 *             `tar` may be anything), and brig may run as root.  So extract()
 *             creates only regular files, directories and symlinks, and only
 *             inside LOCAL; every other member is skipped with a warning:
 *               - device nodes, FIFOs, sockets (no mknod, whoever runs brig);
 *               - names that are absolute or contain `..`;
 *               - symlinks whose target is absolute, or climbs (leading `..`)
 *                 above LOCAL, or has `..` after a name (a name may itself be a
 *                 symlink, which makes `..` after it escape: `s -> .`, `t -> s/..`);
 *               - hard links, except to a regular file of this same archive;
 *               - anything whose place on disk passes through a symlink
 *                 (libarchive's ARCHIVE_EXTRACT_SECURE_SYMLINKS).
 *             Files belong to whoever runs brig, the umask applies, setuid,
 *             setgid and sticky bits are dropped, and no xattrs, ACLs or file
 *             flags are restored (a file capability is a setuid bit too).
 *             Extraction starts on the first byte of a 2xx answer, so an error
 *             answer extracts nothing.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

extern char **environ;

/* tar, running on one end of a pipe. */
typedef struct tar_proc {
    pid_t pid;  /* -1 once reaped */
    int fd;     /* our end of the pipe; -1 when closed */
    int status; /* wait status, once reaped */
    bool reaped;
} tar_proc;

/* Starts tar with argv; its stdout (upload) or stdin (download) is a pipe whose
 * other end lands in t->fd; its other standard stream is /dev/null, stderr is
 * ours.  Signals brig ignores or catches are reset for tar.  0 or -1 with *err. */
static int tar_spawn(tar_proc *t, char *const argv[], bool to_us, brig_error **err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return brig_error_sys(err, "cannot create a pipe");
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    /* tar's end becomes its stdout (to_us) or stdin; dup2 clears O_CLOEXEC */
    posix_spawn_file_actions_adddup2(&fa, to_us ? p[1] : p[0], to_us ? 1 : 0);
    posix_spawn_file_actions_addopen(&fa, to_us ? 0 : 1, "/dev/null", to_us ? O_RDONLY : O_WRONLY,
                                     0);
    sigset_t def, none;
    sigemptyset(&def);
    sigaddset(&def, SIGPIPE);
    sigaddset(&def, SIGINT);
    sigaddset(&def, SIGTERM);
    sigaddset(&def, SIGHUP);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    int rc = posix_spawnp(&t->pid, "tar", &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(to_us ? p[1] : p[0]);
    if (rc != 0) {
        close(to_us ? p[0] : p[1]);
        t->pid = -1;
        return brig_error_set(err, BRIG_E_INTERNAL, rc, "cannot run tar");
    }
    t->fd = to_us ? p[0] : p[1];
    t->reaped = false;
    return 0;
}

/* Waits for tar (once) and returns 0 when it exited 0, else -1 with *err. */
static int tar_reap(tar_proc *t, brig_error **err)
{
    if (t->pid > 0 && !t->reaped) {
        while (waitpid(t->pid, &t->status, 0) < 0) {
            if (errno != EINTR)
                return brig_error_sys(err, "waitpid(tar)");
        }
        t->reaped = true;
    }
    if (!t->reaped)
        return 0;
    if (WIFEXITED(t->status) && WEXITSTATUS(t->status) == 0)
        return 0;
    if (WIFEXITED(t->status))
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "tar exited with status %d",
                              WEXITSTATUS(t->status));
    return brig_error_set(err, BRIG_E_INTERNAL, 0, "tar was killed by signal %d",
                          WTERMSIG(t->status));
}

/* Stops a tar that is no longer wanted: closes our end, terminates, reaps. */
static void tar_abandon(tar_proc *t)
{
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
    if (t->pid > 0 && !t->reaped) {
        kill(t->pid, SIGTERM);
        tar_reap(t, NULL);
    }
}

/* "/v1/sandboxes/<id>/files/tar?path=<remote>"; caller frees. */
static char *tar_path(const char *id, const char *remote)
{
    _cleanup_free_ char *base = cli_sandbox_path(id, "/files/tar");
    _cleanup_free_ char *esc = brig_client_escape(remote);
    return brig_asprintf("%s?path=%s", base, esc);
}

/* upload -r */

/* At the end of tar's output: complete the body only if tar succeeded. */
static int upload_eof(void *ctx, brig_error **err)
{
    tar_proc *t = ctx;
    if (tar_reap(t, err) < 0) {
        brig_error_prefix(err, "tar -c");
        return -1;
    }
    return 0;
}

int cli_upload_tree(const cli_args *a)
{
    const char *id = a->pos[0], *local = a->pos[1], *remote = a->pos[2];
    if (cli_check_id(a, id) != 0 || cli_check_remote(a, "REMOTE", remote) != 0)
        return CLI_EXIT_USAGE;
    if (cli_opt_has(a, OPT_MODE))
        return cli_usage_error(a->cmd, "--mode is for single files: a tree keeps its own modes");
    brig_error *err = NULL;
    struct stat st;
    if (stat(local, &st) < 0) {
        brig_error_sys(&err, "%s", local);
        return cli_fail(&err);
    }
    if (!S_ISDIR(st.st_mode)) {
        brig_error_set(&err, BRIG_E_INVALID, 0, "%s is not a directory (drop --recursive)", local);
        return cli_fail(&err);
    }
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);

    char *argv[] = {"tar", "-c",          "-f", "-", "--owner=0", "--group=0", "--numeric-owner",
                    "-C",  (char *)local, ".",  NULL};
    tar_proc t = {.pid = -1, .fd = -1};
    cli_catch_signals();
    if (tar_spawn(&t, argv, true, &err) < 0)
        return cli_fail(&err);
    _cleanup_free_ char *path = tar_path(id, remote);
    brig_client_set_interrupt(c, &cli_interrupted);
    cli_progress_begin(c, true, "upload");
    int rc = brig_client_put_stream(c, path, "application/x-tar", t.fd, upload_eof, &t, &err);
    cli_progress_end(c, rc >= 0);
    brig_client_set_interrupt(c, NULL);
    tar_abandon(&t);
    if (cli_interrupted) {
        brig_error_clear(&err);
        fprintf(stderr, "brig: interrupted (%s); %s may hold part of the tree\n",
                strsignal(cli_interrupted), remote);
        return 128 + cli_interrupted;
    }
    if (rc < 0) {
        brig_error_prefix(&err, "upload %s to %s", local, remote);
        return cli_fail(&err);
    }
    return CLI_EXIT_OK;
}

/* download -r */

/* A member name made relative: leading "./" and "/" removed ("" for the root).
 * NULL when it is absolute or has a ".." component (it would leave LOCAL). */
static char *member_name(const char *name, const char **why)
{
    if (name[0] == '/') {
        *why = "an absolute name";
        return NULL;
    }
    while (name[0] == '.' && (name[1] == '/' || name[1] == '\0'))
        name += name[1] ? 2 : 1;
    while (name[0] == '/')
        name++;
    for (const char *p = name; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            *why = "a name with '..'";
            return NULL;
        }
        p += n;
        while (*p == '/')
            p++;
    }
    size_t n = strlen(name);
    while (n > 0 && name[n - 1] == '/')
        n--;
    return brig_xstrndup(name, n);
}

/* Whether a symlink at `name` (relative, cleaned) pointing to target stays inside:
 * relative, its leading ".." climb no higher than name's directory, and no ".."
 * after a name (see the header). */
static bool target_inside(const char *name, const char *target)
{
    if (target[0] == '\0' || target[0] == '/')
        return false;
    int depth = 0; /* of name's directory */
    for (const char *p = name; *p; p++)
        depth += *p == '/';
    bool climbing = true;
    for (const char *p = target; *p;) {
        size_t n = strcspn(p, "/");
        bool dotdot = n == 2 && p[0] == '.' && p[1] == '.';
        if (dotdot && (!climbing || --depth < 0))
            return false;
        if (!dotdot && !(n == 1 && p[0] == '.') && n > 0)
            climbing = false;
        p += n;
        while (*p == '/')
            p++;
    }
    return true;
}

static const char *type_words(mode_t t)
{
    switch (t) {
    case AE_IFCHR:
        return "a character device";
    case AE_IFBLK:
        return "a block device";
    case AE_IFIFO:
        return "a FIFO";
    case AE_IFSOCK:
        return "a socket";
    default:
        return "not a file, directory or symlink";
    }
}

/* The extraction's state, owned by its thread until joined. */
typedef struct extract {
    int fd;          /* the read end of the pipe (the thread closes it) */
    char *root;      /* LOCAL, resolved (no symlinks in it) */
    json_t *files;   /* names of regular files extracted: targets hard links may have */
    size_t skipped;  /* members left out */
    brig_error *err; /* why it stopped, or NULL */
} extract;

static void skip(extract *x, const char *name, const char *why)
{
    _cleanup_free_ char *shown = brig_utf8_display(name, strlen(name));
    fprintf(stderr, "brig: skipped %s: %s\n", shown, why);
    x->skipped++;
}

static int copy_data(struct archive *in, struct archive *out)
{
    const void *buf;
    size_t n;
    la_int64_t off;
    for (;;) {
        int r = archive_read_data_block(in, &buf, &n, &off);
        if (r == ARCHIVE_EOF)
            return ARCHIVE_OK;
        if (r < ARCHIVE_OK)
            return r;
        if (archive_write_data_block(out, buf, n, off) < ARCHIVE_OK)
            return ARCHIVE_WARN;
    }
}

/* One member: skipped (with a warning), or written under x->root. -1 when the
 * archive cannot be read on (x->err set). */
static int extract_entry(extract *x, struct archive *in, struct archive *out,
                         struct archive_entry *e)
{
    const char *raw = archive_entry_pathname(e);
    const char *why = NULL;
    if (raw == NULL) {
        skip(x, "?", "a name that cannot be read");
        return 0;
    }
    _cleanup_free_ char *name = member_name(raw, &why);
    if (name == NULL) {
        skip(x, raw, why);
        return 0;
    }
    if (name[0] == '\0')
        return 0; /* "./": LOCAL itself, which exists */
    mode_t type = archive_entry_filetype(e);
    const char *hard = archive_entry_hardlink(e);
    _cleanup_free_ char *hard_name = NULL;
    if (hard != NULL) {
        hard_name = member_name(hard, &why);
        if (hard_name == NULL || json_object_get(x->files, hard_name) == NULL) {
            _cleanup_free_ char *w =
                brig_asprintf("a hard link to %s, not a file of this archive", hard);
            skip(x, raw, w);
            return 0;
        }
        _cleanup_free_ char *full = brig_asprintf("%s/%s", x->root, hard_name);
        archive_entry_set_hardlink(e, full);
    } else if (type == AE_IFLNK) {
        const char *t = archive_entry_symlink(e);
        if (t == NULL || !target_inside(name, t)) {
            _cleanup_free_ char *w = brig_asprintf("a symlink to %s, outside", t ? t : "?");
            skip(x, raw, w);
            return 0;
        }
    } else if (type != AE_IFREG && type != AE_IFDIR) {
        skip(x, raw, type_words(type));
        return 0;
    }
    _cleanup_free_ char *full = brig_asprintf("%s/%s", x->root, name);
    archive_entry_set_pathname(e, full);
    archive_entry_set_perm(e, archive_entry_perm(e) & 0777); /* no setuid/setgid/sticky */
    int r = archive_write_header(out, e);
    if (r < ARCHIVE_WARN) {
        skip(x, raw, archive_error_string(out));
    } else {
        if (archive_entry_size(e) > 0 && (r = copy_data(in, out)) < ARCHIVE_WARN) {
            if (r == ARCHIVE_FATAL) {
                brig_error_set(&x->err, BRIG_E_PROTOCOL, 0, "reading the archive: %s",
                               archive_error_string(in));
                return -1;
            }
            skip(x, raw, archive_error_string(out));
        }
        if (type == AE_IFREG && hard == NULL)
            json_object_set_new(x->files, name, json_true());
    }
    if (archive_write_finish_entry(out) < ARCHIVE_WARN)
        skip(x, raw, archive_error_string(out));
    return 0;
}

static void *extract_main(void *arg)
{
    extract *x = arg;
    struct archive *in = archive_read_new(), *out = archive_write_disk_new();
    archive_read_support_format_tar(in);
    archive_read_support_format_gnutar(in);
    archive_write_disk_set_options(out, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                            ARCHIVE_EXTRACT_SECURE_NODOTDOT);
    if (archive_read_open_fd(in, x->fd, 64 * 1024) != ARCHIVE_OK) {
        brig_error_set(&x->err, BRIG_E_PROTOCOL, 0, "%s", archive_error_string(in));
    } else {
        for (;;) {
            struct archive_entry *e = NULL;
            int r = archive_read_next_header(in, &e);
            if (r == ARCHIVE_EOF)
                break;
            if (r < ARCHIVE_WARN) {
                brig_error_set(&x->err, BRIG_E_PROTOCOL, 0, "reading the archive: %s",
                               archive_error_string(in));
                break;
            }
            if (extract_entry(x, in, out, e) < 0)
                break;
        }
    }
    if (archive_write_close(out) < ARCHIVE_WARN && x->err == NULL)
        brig_error_set(&x->err, BRIG_E_INTERNAL, 0, "%s", archive_error_string(out));
    archive_write_free(out);
    archive_read_free(in);
    close(x->fd); /* a writer still writing gets EPIPE */
    x->fd = -1;
    return NULL;
}

typedef struct download {
    extract x;
    int wfd; /* our end of the pipe; -1 when closed */
    pthread_t thread;
    bool started; /* the thread runs (until joined) */
    bool began;   /* an archive came: LOCAL may hold part of it */
} download;

/* Starts the extraction on the first piece of a 2xx body. */
static int download_start(download *d, brig_error **err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return brig_error_sys(err, "cannot create a pipe");
    d->x.fd = p[0];
    d->wfd = p[1];
    int rc = pthread_create(&d->thread, NULL, extract_main, &d->x);
    if (rc != 0) {
        close(p[0]);
        close(p[1]);
        d->wfd = -1;
        return brig_error_set(err, BRIG_E_INTERNAL, rc, "cannot start the extraction");
    }
    d->started = d->began = true;
    return 0;
}

/* Ends the input and waits for the extraction; -1 when it failed, its error then
 * moved to *err (err NULL: dropped, another one is reported). */
static int download_join(download *d, brig_error **err)
{
    if (d->wfd >= 0)
        close(d->wfd);
    d->wfd = -1;
    if (d->started) {
        pthread_join(d->thread, NULL);
        d->started = false;
    }
    if (d->x.err == NULL)
        return 0;
    if (err) {
        brig_error_clear(err);
        *err = d->x.err;
    } else {
        brig_error_clear(&d->x.err);
    }
    d->x.err = NULL;
    return -1;
}

/* The 2xx body, piece by piece, into the extraction (started on the first piece). */
static int download_write(const char *data, size_t n, void *ctx, brig_error **err)
{
    download *d = ctx;
    if (!d->started && download_start(d, err) < 0)
        return -1;
    if (brig_write_full(d->wfd, data, n) < 0) {
        if (errno != EPIPE)
            return brig_error_sys(err, "cannot write to the extraction");
        /* it stopped reading: its error says why */
        if (download_join(d, err) == 0)
            brig_error_set(err, BRIG_E_INTERNAL, 0, "the extraction stopped reading the archive");
        return -1;
    }
    return 0;
}

int cli_download_tree(const cli_args *a)
{
    const char *id = a->pos[0], *remote = a->pos[1], *local = a->pos[2];
    if (cli_check_id(a, id) != 0 || cli_check_remote(a, "REMOTE", remote) != 0)
        return CLI_EXIT_USAGE;
    if (*local == '\0' || strcmp(local, "-") == 0)
        return cli_usage_error(a->cmd, "--recursive needs a LOCAL directory");
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    struct stat st;
    bool made = mkdir(local, 0777) == 0;
    if (!made && errno != EEXIST) {
        brig_error_sys(&err, "cannot create %s", local);
        return cli_fail(&err);
    }
    if (stat(local, &st) < 0 || !S_ISDIR(st.st_mode)) {
        brig_error_set(&err, BRIG_E_INVALID, 0, "%s is not a directory", local);
        return cli_fail(&err);
    }
    download d = {.x = {.fd = -1, .files = json_object()}, .wfd = -1};
    d.x.root = realpath(local, NULL);
    if (d.x.root == NULL) {
        json_decref(d.x.files);
        brig_error_sys(&err, "%s", local);
        return cli_fail(&err);
    }
    _cleanup_free_ char *path = tar_path(id, remote);
    cli_catch_signals();
    brig_client_set_interrupt(c, &cli_interrupted);
    cli_progress_begin(c, false, "download");
    int rc = brig_client_get_body(c, path, download_write, &d, &err);
    cli_progress_end(c, rc >= 0);
    brig_client_set_interrupt(c, NULL);
    bool extracted = d.began;
    if (rc >= 0 && !extracted) {
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "brigd sent an empty archive");
        rc = -1;
    }
    /* The archive is complete (or abandoned): the extraction reads EOF and ends. */
    if (download_join(&d, rc < 0 ? NULL : &err) < 0)
        rc = -1;
    size_t skipped = d.x.skipped;
    free(d.x.root);
    json_decref(d.x.files);
    if (rc < 0 && made && !extracted)
        rmdir(local); /* nothing came: leave nothing behind */
    if (cli_interrupted) {
        brig_error_clear(&err);
        fprintf(stderr, "brig: interrupted (%s); %s may hold part of the tree\n",
                strsignal(cli_interrupted), local);
        return 128 + cli_interrupted;
    }
    if (rc < 0) {
        brig_error_prefix(&err, "download %s to %s", remote, local);
        return cli_fail(&err);
    }
    if (skipped)
        fprintf(stderr, "brig: %zu member%s of the archive skipped (see above)\n", skipped,
                skipped == 1 ? "" : "s");
    return CLI_EXIT_OK;
}
