/*
 * output.c - what exec, logs and wait share (cli.h): an event's output written
 * byte-exact to stdout or stderr (base64 chunks decoded, NUL bytes kept), and the exit
 * code brig itself ends with for a command's exit event; and the tables that ls, account
 * and the like print (cli_print_rows: the answer as JSON with --json, else its rows).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base64.h"
#include "cli.h"
#include "util.h"

void cli_print_clean(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, f);
}

int cli_exit_code(json_t *v)
{
    json_t *code = json_object_get(v, "exit_code");
    if (json_is_number(code)) {
        double num = json_number_value(code);
        if (num != floor(num) || num < -1e9 || num > 1e9)
            return -1;
        long n = (long)num;
        if (n >= 0 && n <= 255)
            return (int)n;
        if (n < 0 && n >= -127)
            return 128 + (int)-n;
        return 255;
    }
    json_t *sig = json_object_get(v, "signal");
    if (json_is_integer(sig) && json_integer_value(sig) > 0 && json_integer_value(sig) < 128)
        return 128 + (int)json_integer_value(sig);
    return -1;
}

/* Writes n bytes to fd; a reader that went away (EPIPE) is ignored unless
 * epipe_fails. */
static int write_out(int fd, const void *p, size_t n, bool epipe_fails)
{
    if (epipe_fails)
        return brig_write_full(fd, p, n);
    return cli_write(fd, p, n);
}

/* Writes the string s (n bytes) to fd, decoding it when encoding is "base64"
 * (NULL, JSON null and "utf-8" mean text).  what names it in errors.  With
 * epipe_fails, a closed reader is an error whose errnum is EPIPE. */
int cli_write_text(json_t *s, json_t *encoding, int fd, const char *what, bool epipe_fails,
                   brig_error **err)
{
    if (s == NULL || json_is_null(s))
        return 0;
    if (!json_is_string(s))
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: %s", what);
    const char *enc = json_string_value(encoding);
    int rc;
    if (encoding == NULL || json_is_null(encoding) || (enc != NULL && strcmp(enc, "utf-8") == 0)) {
        rc = write_out(fd, json_string_value(s), json_string_length(s), epipe_fails);
    } else if (enc != NULL && strcmp(enc, "base64") == 0) {
        brig_buf raw = {0};
        if (brig_base64_decode(json_string_value(s), json_string_length(s), &raw, err) < 0) {
            brig_buf_dispose(&raw);
            brig_error_prefix(err, "malformed %s from brigd", what);
            return -1;
        }
        rc = write_out(fd, raw.data, raw.len, epipe_fails);
        brig_buf_dispose(&raw);
    } else {
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "%s: unknown encoding from brigd", what);
    }
    if (rc < 0)
        return brig_error_set(err, BRIG_E_INTERNAL, errno, "cannot write the command's %s", what);
    return 0;
}

int cli_write_event(json_t *event, int fd, brig_error **err)
{
    return cli_write_text(json_object_get(event, "data"), json_object_get(event, "encoding"), fd,
                          fd == 2 ? "stderr" : "stdout", true, err);
}

/* A table cell: field key of row, a string as it is, a number in decimal, else "-". */
static const char *cell(json_t *row, const char *key, char *buf, size_t size)
{
    json_t *v = json_object_get(row, key);
    if (json_is_integer(v)) {
        snprintf(buf, size, "%lld", (long long)json_integer_value(v));
        return buf;
    }
    if (json_is_real(v)) {
        snprintf(buf, size, "%g", json_real_value(v));
        return buf;
    }
    const char *s = json_string_value(v);
    return s != NULL && *s ? s : "-";
}

const char *cli_str(json_t *v, const char *key, const char *def)
{
    const char *s = json_string_value(json_object_get(v, key));
    return s ? s : def;
}

int cli_print_rows(const cli_args *a, json_t *v, const char *field, const char *const *keys,
                   const char *const *heads, size_t n)
{
    json_t *rows = json_object_get(v, field);
    int rc = CLI_EXIT_OK;
    if (cli_opt_has(a, OPT_JSON)) {
        cli_print_json(v);
    } else if (!json_is_array(rows)) {
        brig_error *err = NULL;
        brig_error_set(&err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no '%s'", field);
        rc = cli_fail(&err);
    } else {
        cli_print_table(rows, keys, heads, n);
    }
    json_decref(v);
    return rc;
}

/* One line of an allowlist: label, then the array's items separated by ", " ("-" if none). */
static void list_line(const char *label, json_t *items)
{
    char buf[32];
    printf("%-12s", label);
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *v = json_array_get(items, i);
        if (json_is_integer(v))
            snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
        fputs(i ? ", " : "", stdout);
        cli_print_clean(stdout, json_is_integer(v)  ? buf
                                : json_is_string(v) ? json_string_value(v)
                                                    : "?");
    }
    puts(json_array_size(items) ? "" : "-");
}

void cli_print_egress(json_t *egress)
{
    const char *mode = cli_str(egress, "mode", "-");
    printf("%-12s", "egress");
    cli_print_clean(stdout, mode);
    putchar('\n');
    if (strcmp(mode, "allowlist") != 0)
        return;
    list_line("domains", json_object_get(egress, "domains"));
    list_line("cidrs", json_object_get(egress, "cidrs"));
    list_line("ports", json_object_get(egress, "ports"));
}

void cli_print_table(json_t *rows, const char *const *keys, const char *const *heads, size_t n)
{
    size_t *width = brig_xcalloc(n, sizeof(*width));
    char buf[32];
    for (size_t k = 0; k < n; k++)
        width[k] = strlen(heads[k]);
    for (size_t i = 0; i < json_array_size(rows); i++)
        for (size_t k = 0; k < n; k++) {
            size_t len = strlen(cell(json_array_get(rows, i), keys[k], buf, sizeof(buf)));
            width[k] = len > width[k] ? len : width[k];
        }
    for (size_t k = 0; k < n; k++)
        printf("%-*s%s", k + 1 < n ? (int)width[k] : 0, heads[k], k + 1 < n ? "  " : "\n");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        for (size_t k = 0; k < n; k++) {
            const char *s = cell(json_array_get(rows, i), keys[k], buf, sizeof(buf));
            cli_print_clean(stdout, s);
            if (k + 1 < n)
                printf("%*s", (int)(width[k] - strlen(s) + 2), "");
        }
        putchar('\n');
    }
    free(width);
}
