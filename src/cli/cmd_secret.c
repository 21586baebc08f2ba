/*
 * cmd_secret.c - a project's secrets (docs/api.md "Projects, keys and secrets", docs/secrets.md;
 * an admin key): `brig secret set NAME` (the value from stdin or --file), `secret ls` (names
 * only: brigd never shows a value again) and `secret rm NAME`, on --project (default: the
 * account's default project).
 *
 * The value never comes from the command line, where ps, /proc and shell history would show
 * it.  From a file or a pipe it is taken byte for byte (a trailing newline included: `echo`
 * adds one, `printf %s` does not); from a terminal brig prompts and reads one line without
 * echo.  brig's copy is wiped once sent.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

/* Read at most this much: brigd takes values up to 64 KiB; more is surely a wrong file. */
#define SECRET_READ_MAX ((size_t)1 << 20)

/* Reads fd to its end into buf (SECRET_READ_MAX + 1 bytes).  The length, or -1 with *err. */
static ssize_t read_all(int fd, char *buf, const char *what, brig_error **err)
{
    ssize_t n = brig_read_full(fd, buf, SECRET_READ_MAX + 1);
    if (n < 0)
        return brig_error_sys(err, "cannot read %s", what);
    if ((size_t)n > SECRET_READ_MAX)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "%s holds more than 1 MiB: not a secret's value", what);
    return n;
}

/* Prompts on stderr and reads one line from the terminal on fd without echo (the newline is
 * not part of the value).  Ctrl-C restores the terminal and fails with EINTR. */
static ssize_t read_prompted(int fd, const char *name, char *buf, brig_error **err)
{
    struct termios saved, quiet;
    if (tcgetattr(fd, &saved) < 0)
        return brig_error_sys(err, "cannot read the terminal's mode");
    quiet = saved;
    quiet.c_lflag &= ~(tcflag_t)ECHO;
    quiet.c_lflag |= ECHONL;
    cli_catch_signals();              /* no SA_RESTART: read() returns at Ctrl-C */
    tcsetattr(fd, TCSAFLUSH, &quiet); /* what was typed before the prompt is dropped */
    fprintf(stderr, "value of %s (not echoed): ", name);
    fflush(stderr);
    size_t n = 0;
    int rc = 0;
    while (n <= SECRET_READ_MAX) {
        ssize_t r = read(fd, buf + n, 1);
        if (r < 0 && errno == EINTR && !cli_interrupted)
            continue;
        if (r < 0) {
            rc = brig_error_sys(err, "cannot read the value");
            break;
        }
        if (r == 0 || buf[n] == '\n')
            break;
        n++;
    }
    tcsetattr(fd, TCSANOW, &saved);
    return rc < 0 ? -1 : (ssize_t)n;
}

/* The value into buf (SECRET_READ_MAX + 1 bytes): --file, else stdin.  Its length, or -1. */
static ssize_t read_value(const cli_args *a, char *buf, brig_error **err)
{
    const char *file = cli_opt_get(a, OPT_FILE);
    if (file != NULL && strcmp(file, "-") != 0) {
        int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
            return brig_error_sys(err, "cannot open %s", file);
        ssize_t n = read_all(fd, buf, file, err);
        close(fd);
        return n;
    }
    if (isatty(0))
        return read_prompted(0, a->pos[0], buf, err);
    return read_all(0, buf, "stdin", err);
}

static int secret_set(const cli_args *a)
{
    const char *name = a->pos[0];
    if (*name == '\0')
        return cli_usage_error(a->cmd, "empty secret name");
    _cleanup_free_ char *project = NULL;
    int rc = cli_project_id(a, &project);
    if (rc != CLI_EXIT_OK)
        return rc;
    brig_error *err = NULL;
    char *buf = brig_xmalloc(SECRET_READ_MAX + 1);
    ssize_t n = read_value(a, buf, &err);
    json_t *value = NULL;
    if (n >= 0 && (memchr(buf, '\0', (size_t)n) != NULL || !brig_utf8_valid(buf, (size_t)n)))
        brig_error_set(&err, BRIG_E_INVALID, 0,
                       "the value must be UTF-8 text without NUL bytes (encode binary data, e.g. "
                       "with base64)");
    else if (n >= 0)
        value = json_stringn(buf, (size_t)n);
    memset(buf, 0, SECRET_READ_MAX + 1);
    free(buf);
    if (cli_interrupted) {
        brig_error_clear(&err);
        json_decref(value);
        fprintf(stderr, "\nbrig: interrupted (%s)\n", strsignal(cli_interrupted));
        return 128 + cli_interrupted;
    }
    if (value == NULL)
        return cli_fail(&err);
    _cleanup_free_ char *esc = brig_client_escape(name);
    _cleanup_free_ char *suffix = brig_asprintf("/secrets/%s", esc);
    _cleanup_free_ char *path = cli_project_path(project, suffix);
    return cli_call("PUT", path, json_pack("{s:o}", "value", value), NULL, NULL);
}

static int secret_ls(const cli_args *a)
{
    _cleanup_free_ char *project = NULL;
    int rc = cli_project_id(a, &project);
    if (rc != CLI_EXIT_OK)
        return rc;
    _cleanup_free_ char *path = cli_project_path(project, "/secrets");
    json_t *v = NULL;
    if ((rc = cli_call("GET", path, NULL, NULL, &v)) != CLI_EXIT_OK)
        return rc;
    json_t *names = json_object_get(v, "names");
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(v);
    } else if (!json_is_array(names)) {
        brig_error *err = NULL;
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no 'names'");
        rc = cli_fail(&err);
    } else {
        for (size_t i = 0; i < json_array_size(names); i++) {
            const char *s = json_string_value(json_array_get(names, i));
            cli_print_clean(stdout, s ? s : "-");
            putchar('\n');
        }
    }
    json_decref(v);
    return rc;
}

static int secret_rm(const cli_args *a)
{
    return cli_project_item_delete(a, "secrets", "secret name");
}

static const int opts_set[] = {OPT_PROJECT, OPT_FILE, 0};
static const int opts_ls[] = {OPT_PROJECT, OPT_JSON, 0};
static const int opts_rm[] = {OPT_PROJECT, 0};

const cli_cmd cli_secret_commands[] = {
    {"secret set", secret_set, "[--project ID] [--file PATH] NAME",
     "set a project secret from stdin or a file (an admin key)",
     "The value is read from --file, else from stdin, byte for byte (a trailing newline\n"
     "too: use printf %s, not echo); on a terminal brig asks for it without echo.  Never\n"
     "from the command line.  Sandboxes get it with secret_refs; brigd never shows it again.\n",
     opts_set, 1, 1, CLI_REST_NONE},
    {"secret ls", secret_ls, "[--project ID] [--json]",
     "list the names of a project's secrets (values are never shown)", NULL, opts_ls, 0, 0,
     CLI_REST_NONE},
    {"secret rm", secret_rm, "[--project ID] NAME", "delete a project secret (an admin key)", NULL,
     opts_rm, 1, 1, CLI_REST_NONE},
    {0},
};
