/*
 * cmd_file.c - moving files: upload (local → sandbox) and download (sandbox →
 * local).  Both stream: memory stays flat whatever the file size.  Whole
 * directories (--recursive) go through tar: see cmd_tar.c.
 *
 * A download never leaves a partial or wrong file behind: it is written to
 * LOCAL.tmp-PID, renamed over LOCAL only when the whole body arrived with a 2xx
 * status, and removed otherwise (also on SIGINT/SIGTERM).  Error bodies are
 * never written to the file (the client checks the status first).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

/* "/v1/sandboxes/<id>/files?path=<remote>[&mode=<mode>]"; caller frees. */
static char *files_path(const char *id, const char *remote, const char *mode)
{
    _cleanup_free_ char *base = cli_sandbox_path(id, "/files");
    _cleanup_free_ char *esc = brig_client_escape(remote);
    if (mode != NULL)
        return brig_asprintf("%s?path=%s&mode=%s", base, esc, mode);
    return brig_asprintf("%s?path=%s", base, esc);
}

/* The last component of path ("" for "/" or ""), pointing into path. */
static const char *last_name(const char *path, size_t *len)
{
    size_t end = strlen(path);
    while (end > 0 && path[end - 1] == '/')
        end--;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    *len = end - start;
    return path + start;
}

/* Copies fd into an unlinked temporary file and returns that, positioned at
 * its start, with its size in *size; -1 with *err set. */
static int spool(int fd, int64_t *size, brig_error **err)
{
    const char *dir = getenv("TMPDIR");
    _cleanup_free_ char *tmpl = brig_asprintf("%s/brig-upload-XXXXXX", dir && *dir ? dir : "/tmp");
    int tmp = mkostemp(tmpl, O_CLOEXEC);
    if (tmp < 0)
        return brig_error_sys(err, "cannot create a temporary file in %s", tmpl);
    unlink(tmpl);
    char buf[64 * 1024];
    int64_t total = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            brig_error_sys(err, "cannot read the input");
            close(tmp);
            return -1;
        }
        if (n == 0)
            break;
        if (brig_write_full(tmp, buf, (size_t)n) < 0) {
            brig_error_sys(err, "cannot write a temporary copy of the input");
            close(tmp);
            return -1;
        }
        total += n;
    }
    if (lseek(tmp, 0, SEEK_SET) < 0) {
        brig_error_sys(err, "cannot rewind the temporary copy of the input");
        close(tmp);
        return -1;
    }
    *size = total;
    return tmp;
}

/* Opens the upload source: a regular file streams from where it stands, other
 * inputs (pipes, terminals) are spooled first since the size must be known.
 * Returns the fd to read (*owned: close it) with its size, or -1 with *err. */
static int open_source(const char *local, bool *owned, int64_t *size, brig_error **err)
{
    int fd = 0;
    *owned = false;
    if (strcmp(local, "-") != 0) {
        fd = open(local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
            return brig_error_sys(err, "cannot open %s", local);
        *owned = true;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        brig_error_sys(err, "cannot stat %s", local);
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        brig_error_set(err, BRIG_E_INVALID, 0, "%s is a directory", local);
        goto fail;
    }
    if (S_ISREG(st.st_mode)) {
        off_t at = lseek(fd, 0, SEEK_CUR);
        *size = at > 0 && at <= st.st_size ? st.st_size - at : st.st_size;
        return fd;
    }
    int tmp = spool(fd, size, err);
    if (*owned)
        close(fd);
    *owned = true;
    if (tmp < 0)
        brig_error_prefix(err, "%s", local);
    return tmp;
fail:
    if (*owned)
        close(fd);
    return -1;
}

int brig_cmd_upload(const cli_args *a)
{
    if (cli_opt_has(a, OPT_RECURSIVE))
        return cli_upload_tree(a);
    const char *id = a->pos[0], *local = a->pos[1], *remote = a->pos[2];
    if (cli_check_id(a, id) != 0)
        return CLI_EXIT_USAGE;
    if (remote[0] != '/')
        return cli_usage_error(a->cmd, "REMOTE must be an absolute path, not '%s'", remote);
    char modebuf[8];
    const char *mode = cli_opt_get(a, OPT_MODE);
    if (mode != NULL && cli_check_mode(mode, modebuf, sizeof(modebuf)) == NULL)
        return cli_usage_error(a->cmd, "--mode '%s': not octal permission bits (e.g. 0755)", mode);
    _cleanup_free_ char *target = NULL;
    if (remote[strlen(remote) - 1] == '/') {
        size_t n;
        const char *name = last_name(local, &n);
        if (strcmp(local, "-") == 0 || n == 0)
            return cli_usage_error(a->cmd, "REMOTE '%s' names a directory: add a file name",
                                   remote);
        target = brig_asprintf("%s%.*s", remote, (int)n, name);
        remote = target;
    }

    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    bool owned;
    int64_t size = 0;
    int fd = open_source(local, &owned, &size, &err);
    if (fd < 0)
        return cli_fail(&err);
    _cleanup_free_ char *path = files_path(id, remote, mode ? modebuf : NULL);
    cli_progress_begin(c, true, "upload");
    int rc = brig_client_put_file(c, path, fd, size, &err);
    cli_progress_end(c, rc >= 0);
    if (owned)
        close(fd);
    if (rc < 0) {
        brig_error_prefix(&err, "upload to %s", remote);
        return cli_fail(&err);
    }
    return CLI_EXIT_OK;
}

int brig_cmd_download(const cli_args *a)
{
    if (cli_opt_has(a, OPT_RECURSIVE))
        return cli_download_tree(a);
    const char *id = a->pos[0], *remote = a->pos[1], *local = a->pos[2];
    if (cli_check_id(a, id) != 0)
        return CLI_EXIT_USAGE;
    if (remote[0] != '/')
        return cli_usage_error(a->cmd, "REMOTE must be an absolute path, not '%s'", remote);
    if (*local == '\0')
        return cli_usage_error(a->cmd, "empty LOCAL path");

    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    _cleanup_free_ char *path = files_path(id, remote, NULL);
    if (strcmp(local, "-") == 0) {
        if (!isatty(1)) /* not over the data on the same terminal */
            cli_progress_begin(c, false, "download");
        int rc = brig_client_get_file(c, path, 1, &err);
        cli_progress_end(c, rc >= 0);
        if (rc < 0) {
            brig_error_prefix(&err, "download %s", remote);
            return cli_fail(&err);
        }
        return CLI_EXIT_OK;
    }

    /* an existing directory receives the file under its remote name */
    _cleanup_free_ char *dest = NULL;
    struct stat st;
    if (stat(local, &st) == 0 && S_ISDIR(st.st_mode)) {
        size_t n;
        const char *name = last_name(remote, &n);
        if (n == 0)
            return cli_usage_error(a->cmd, "REMOTE '%s' has no file name", remote);
        dest = brig_asprintf("%s%s%.*s", local, local[strlen(local) - 1] == '/' ? "" : "/", (int)n,
                             name);
    } else {
        dest = brig_xstrdup(local);
    }
    _cleanup_free_ char *tmp = brig_asprintf("%s.tmp-%ld", dest, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0666);
    if (fd < 0) {
        brig_error_sys(&err, "cannot create %s", tmp);
        return cli_fail(&err);
    }
    cli_catch_signals();
    brig_client_set_interrupt(c, &cli_interrupted);
    cli_progress_begin(c, false, "download");
    int rc = brig_client_get_file(c, path, fd, &err);
    cli_progress_end(c, rc >= 0);
    brig_client_set_interrupt(c, NULL);
    if (rc < 0)
        brig_error_prefix(&err, "download %s", remote);
    if (close(fd) < 0 && rc >= 0)
        rc = brig_error_sys(&err, "cannot write %s", tmp);
    if (rc >= 0 && rename(tmp, dest) < 0)
        rc = brig_error_sys(&err, "cannot rename %s to %s", tmp, dest);
    if (rc < 0) {
        unlink(tmp);
        if (cli_interrupted) {
            brig_error_clear(&err);
            fprintf(stderr, "brig: interrupted (%s)\n", strsignal(cli_interrupted));
            return 128 + cli_interrupted;
        }
        return cli_fail(&err);
    }
    return CLI_EXIT_OK;
}
