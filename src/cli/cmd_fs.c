/*
 * cmd_fs.c - file-system operations in a sandbox: ls-files, stat, rm-file,
 * mkdir, mv.  Each is one JSON call (docs/api.md, File-system operations);
 * remote paths must be absolute.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "util.h"

int cli_check_remote(const cli_args *a, const char *what, const char *path)
{
    if (path[0] != '/')
        return cli_usage_error(a->cmd, "%s must be an absolute path, not '%s'", what, path);
    return 0;
}

const char *cli_check_mode(const char *mode, char *buf, size_t size)
{
    if (*mode == '\0' || strlen(mode) > 5)
        return NULL;
    unsigned long v = 0;
    for (const char *p = mode; *p; p++) {
        if (*p < '0' || *p > '7')
            return NULL;
        v = v * 8 + (unsigned long)(*p - '0');
    }
    if (v > 07777)
        return NULL;
    snprintf(buf, size, "%04lo", v);
    return buf;
}

/* "/v1/sandboxes/<id>/files<suffix>?path=<path><query>"; caller frees. */
static char *fs_path(const char *id, const char *suffix, const char *path, const char *query)
{
    _cleanup_free_ char *tail = brig_asprintf("/files%s", suffix);
    _cleanup_free_ char *base = cli_sandbox_path(id, tail);
    _cleanup_free_ char *esc = brig_client_escape(path);
    return brig_asprintf("%s?path=%s%s", base, esc, query);
}

/* ls-files */

/* "drwxr-xr-x" from an entry's type and octal mode string. */
static void format_mode(json_t *e, char *buf)
{
    const char *type = json_string_value(json_object_get(e, "type"));
    const char *mode = json_string_value(json_object_get(e, "mode"));
    unsigned long m = mode != NULL ? strtoul(mode, NULL, 8) : 0;
    char t = '?';
    if (type != NULL)
        t = strcmp(type, "dir") == 0       ? 'd'
            : strcmp(type, "symlink") == 0 ? 'l'
            : strcmp(type, "file") == 0    ? '-'
                                           : '?';
    static const char rwx[] = "rwxrwxrwx";
    buf[0] = t;
    for (int i = 0; i < 9; i++)
        buf[1 + i] = (m & (0400u >> i)) ? rwx[i] : '-';
    if (m & 04000)
        buf[3] = (m & 0100) ? 's' : 'S';
    if (m & 02000)
        buf[6] = (m & 010) ? 's' : 'S';
    if (m & 01000)
        buf[9] = (m & 01) ? 't' : 'T';
    buf[10] = '\0';
}

/* An entry's mtime: brigd's timestamp string, or one made from milliseconds. */
static void format_mtime(json_t *v, char *buf, size_t size)
{
    if (json_is_string(v)) {
        snprintf(buf, size, "%s", json_string_value(v));
    } else if (json_is_integer(v)) {
        time_t t = (time_t)(json_integer_value(v) / 1000);
        struct tm tm;
        if (gmtime_r(&t, &tm) == NULL || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
            snprintf(buf, size, "-");
    } else {
        snprintf(buf, size, "-");
    }
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
}

int brig_cmd_ls_files(const cli_args *a)
{
    const char *id = a->pos[0], *dir = a->pos[1];
    if (cli_check_id(a, id) != 0 || cli_check_remote(a, "PATH", dir) != 0)
        return CLI_EXIT_USAGE;
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    _cleanup_free_ char *path = fs_path(id, "", dir, "&list=1");
    json_t *list = NULL;
    if (brig_client_call(c, "GET", path, NULL, CLI_TIMEOUT_MS, &list, &err) < 0) {
        brig_error_prefix(&err, "%s", dir);
        return cli_fail(&err);
    }
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(list);
        json_decref(list);
        return CLI_EXIT_OK;
    }
    json_t *rows = json_object_get(list, "entries");
    if (!json_is_array(rows)) {
        json_decref(list);
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no entries");
        return cli_fail(&err);
    }
    int size_width = 4;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        char num[32];
        int n = snprintf(
            num, sizeof(num), "%lld",
            (long long)json_integer_value(json_object_get(json_array_get(rows, i), "size")));
        if (n > size_width)
            size_width = n;
    }
    printf("%-10s %*s %-24s %s\n", "MODE", size_width, "SIZE", "MODIFIED", "NAME");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *e = json_array_get(rows, i);
        char mode[11], mtime[40];
        format_mode(e, mode);
        format_mtime(json_object_get(e, "mtime"), mtime, sizeof(mtime));
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *target = json_string_value(json_object_get(e, "target"));
        printf("%-10s %*lld %-24s ", mode, size_width,
               (long long)json_integer_value(json_object_get(e, "size")), mtime);
        cli_print_clean(stdout, name ? name : "?");
        if (target != NULL) {
            fputs(" -> ", stdout);
            cli_print_clean(stdout, target);
        }
        putchar('\n');
    }
    json_decref(list);
    return CLI_EXIT_OK;
}

/* stat */

int brig_cmd_stat(const cli_args *a)
{
    const char *id = a->pos[0], *target = a->pos[1];
    if (cli_check_id(a, id) != 0 || cli_check_remote(a, "PATH", target) != 0)
        return CLI_EXIT_USAGE;
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    _cleanup_free_ char *path = fs_path(id, "", target, "&stat=1");
    json_t *entry = NULL;
    if (brig_client_call(c, "GET", path, NULL, CLI_TIMEOUT_MS, &entry, &err) < 0) {
        brig_error_prefix(&err, "%s", target);
        return cli_fail(&err);
    }
    cli_print_json(entry);
    json_decref(entry);
    return CLI_EXIT_OK;
}

/* rm-file */

int brig_cmd_rm_file(const cli_args *a)
{
    const char *id = a->pos[0], *target = a->pos[1];
    if (cli_check_id(a, id) != 0 || cli_check_remote(a, "PATH", target) != 0)
        return CLI_EXIT_USAGE;
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    _cleanup_free_ char *path =
        fs_path(id, "", target, cli_opt_has(a, OPT_RECURSIVE) ? "&recursive=1" : "");
    if (brig_client_call(c, "DELETE", path, NULL, CLI_TIMEOUT_MS, NULL, &err) < 0) {
        if (err->kind == BRIG_E_CONFLICT && !cli_opt_has(a, OPT_RECURSIVE)) {
            _cleanup_free_ char *why = brig_xstrdup(err->msg);
            brig_error_clear(&err);
            brig_error_set(&err, BRIG_E_CONFLICT, 0, "%s: %s; use --recursive for a directory",
                           target, why);
        } else {
            brig_error_prefix(&err, "%s", target);
        }
        return cli_fail(&err);
    }
    return CLI_EXIT_OK;
}

/* mkdir */

/* Whether target is a directory in the sandbox. */
static bool remote_is_dir(brig_client *c, const char *id, const char *target)
{
    _cleanup_free_ char *path = fs_path(id, "", target, "&stat=1");
    json_t *entry = NULL;
    if (brig_client_call(c, "GET", path, NULL, CLI_TIMEOUT_MS, &entry, NULL) < 0)
        return false;
    const char *type = json_string_value(json_object_get(entry, "type"));
    bool dir = type != NULL && strcmp(type, "dir") == 0;
    json_decref(entry);
    return dir;
}

int brig_cmd_mkdir(const cli_args *a)
{
    const char *id = a->pos[0], *target = a->pos[1];
    if (cli_check_id(a, id) != 0 || cli_check_remote(a, "PATH", target) != 0)
        return CLI_EXIT_USAGE;
    char modebuf[8];
    const char *mode = cli_opt_get(a, OPT_MODE);
    if (mode != NULL && cli_check_mode(mode, modebuf, sizeof(modebuf)) == NULL)
        return cli_usage_error(a->cmd, "--mode '%s': not octal permission bits (e.g. 0755)", mode);
    bool parents = cli_opt_has(a, OPT_PARENTS);
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    json_t *body = json_pack("{s:s, s:b}", "path", target, "parents", parents);
    if (mode != NULL)
        json_object_set_new(body, "mode", json_string(modebuf));
    _cleanup_free_ char *path = cli_sandbox_path(id, "/files/mkdir");
    int rc = brig_client_call(c, "POST", path, body, CLI_TIMEOUT_MS, NULL, &err);
    json_decref(body);
    if (rc < 0 && parents && err->kind == BRIG_E_CONFLICT && remote_is_dir(c, id, target)) {
        brig_error_clear(&err); /* mkdir -p: an existing directory is fine */
        rc = 0;
    }
    if (rc < 0) {
        brig_error_prefix(&err, "%s", target);
        return cli_fail(&err);
    }
    return CLI_EXIT_OK;
}

/* mv */

int brig_cmd_mv(const cli_args *a)
{
    const char *id = a->pos[0], *from = a->pos[1], *to = a->pos[2];
    if (cli_check_id(a, id) != 0 || cli_check_remote(a, "FROM", from) != 0 ||
        cli_check_remote(a, "TO", to) != 0)
        return CLI_EXIT_USAGE;
    brig_error *err = NULL;
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    json_t *body = json_pack("{s:s, s:s}", "from", from, "to", to);
    _cleanup_free_ char *path = cli_sandbox_path(id, "/files/move");
    int rc = brig_client_call(c, "POST", path, body, CLI_TIMEOUT_MS, NULL, &err);
    json_decref(body);
    if (rc < 0) {
        brig_error_prefix(&err, "%s -> %s", from, to);
        return cli_fail(&err);
    }
    return CLI_EXIT_OK;
}
