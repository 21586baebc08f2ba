/*
 * cmd_tar.c - whole directories in and out of a sandbox (upload -r, download -r)
 * through brigd's tar endpoints, with this host's tar making or unpacking the
 * archive on the other end of a pipe.  Nothing is held whole: tar's output is
 * the PUT body (chunked, read as curl asks for it), and the GET body is written
 * into tar's stdin as it arrives.
 *
 *   upload:   tar -c -f - --owner=0 --group=0 --numeric-owner -C LOCAL .  | PUT files/tar
 *             The body is completed only when tar exited 0: when it fails, the
 *             transfer is aborted, so brigd sees a cut archive.
 *   download: GET files/tar | tar -x -f - --no-same-owner --no-same-permissions -C LOCAL
 *             tar starts on the first byte of a 2xx answer, so an error answer
 *             extracts nothing.  The archive comes from the sandbox, which brig
 *             does not trust: files belong to whoever runs brig, the umask
 *             applies and setuid/setgid bits are dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
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
    int rc = brig_client_put_stream(c, path, "application/x-tar", t.fd, upload_eof, &t, &err);
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

typedef struct download {
    tar_proc tar;
    char *const *argv;
} download;

/* The 2xx body, piece by piece, into tar (started on the first piece). */
static int download_write(const char *data, size_t n, void *ctx, brig_error **err)
{
    download *d = ctx;
    if (d->tar.pid < 0 && tar_spawn(&d->tar, d->argv, false, err) < 0)
        return -1;
    if (brig_write_full(d->tar.fd, data, n) < 0) {
        if (errno != EPIPE)
            return brig_error_sys(err, "cannot write to tar");
        /* tar stopped reading: its status says why */
        close(d->tar.fd);
        d->tar.fd = -1;
        if (tar_reap(&d->tar, err) == 0)
            brig_error_set(err, BRIG_E_INTERNAL, 0, "tar stopped reading the archive");
        brig_error_prefix(err, "tar -x");
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

    char *argv[] = {"tar", "-x",          "-f", "-", "--no-same-owner", "--no-same-permissions",
                    "-C",  (char *)local, NULL};
    download d = {.tar = {.pid = -1, .fd = -1}, .argv = argv};
    _cleanup_free_ char *path = tar_path(id, remote);
    cli_catch_signals();
    brig_client_set_interrupt(c, &cli_interrupted);
    int rc = brig_client_get_body(c, path, download_write, &d, &err);
    brig_client_set_interrupt(c, NULL);
    if (rc >= 0 && d.tar.pid < 0) {
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "brigd sent an empty archive");
        rc = -1;
    }
    if (rc >= 0) {
        /* the archive is complete: tar reads EOF and must succeed */
        close(d.tar.fd);
        d.tar.fd = -1;
        if (tar_reap(&d.tar, &err) < 0) {
            brig_error_prefix(&err, "tar -x");
            rc = -1;
        }
    }
    bool extracted = d.tar.pid > 0;
    tar_abandon(&d.tar);
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
    return CLI_EXIT_OK;
}
