/*
 * cli.h - what brig's command handlers share: the parsed command line, the
 * command and option tables' row types, the lazily made client, and the edge
 * where errors are printed.
 *
 * Exit codes: 0 success, 1 failure (printed as "brig: <message>"), 2 usage
 * error; exec, run, shell, wait and logs exit with the remote command's code
 * (124: timed out, or still running after wait's --timeout); 128+N after brig
 * itself was interrupted by signal N.
 */
#ifndef BRIG_CLI_H
#define BRIG_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "client.h"
#include "error.h"

#define CLI_EXIT_OK      0
#define CLI_EXIT_FAIL    1
#define CLI_EXIT_USAGE   2
#define CLI_EXIT_TIMEOUT 124

/* brigd refuses a JSON body above this (413): it bounds exec's "stdin". */
#define CLI_JSON_BODY_MAX ((size_t)1 << 20)

/* Client-side limits for one call (the server enforces its own). */
#define CLI_TIMEOUT_MS        (5L * 60 * 1000) /* create, list, get */
#define CLI_DELETE_TIMEOUT_MS (2L * 60 * 1000)
#define CLI_EXEC_DEFAULT_S    55                /* brigd's default command timeout */
#define CLI_EXEC_MARGIN_S     60                /* waited beyond the command's timeout */
#define CLI_EXEC_NO_LIMIT_MS  (10L * 60 * 1000) /* when no --timeout was given */

/* Option keys: a printable key is also the short option. */
enum cli_opt_key {
    OPT_HELP = 'h',
    OPT_ENV = 'e',
    OPT_TEMPLATE = 't',
    OPT_CWD = 'w',
    OPT_USER = 'u',
    OPT_FOLLOW = 'f',
    OPT_SIGNAL = 's',
    OPT_RECURSIVE = 'r',
    OPT_PARENTS = 'p',
    OPT_JSON = 256,
    OPT_TIMEOUT,
    OPT_SHELL,
    OPT_MODE,
    OPT_BACKGROUND,
    OPT_STDIN,
    OPT_PTY,
    OPT_CLOSE,
    OPT_WAIT_TIMEOUT, /* --timeout of wait: how long to wait, not the command's limit */
    OPT_ISOLATION,
    OPT_ON_IDLE,
    OPT_PROJECT, /* the account and project commands' options (cmd_account.c .. cmd_netlog.c) */
    OPT_SCOPE,
    OPT_FILE,
    OPT_NOTE,
    OPT_DAILY,
    OPT_MONTHLY,
    OPT_MAX_LIVE,
    OPT_TARIFFS,
    OPT_ADD,
    OPT_DEFAULT,
    OPT_SINCE,
    OPT_ENDED,
    OPT_DAYS,
    OPT_LIMIT,
    OPT_BEFORE,
    OPT_VOLUME,
    OPT_SIZE,
    OPT_SNAPSHOT,
    OPT_GRANT,
    OPT_CHECKPOINT,
    OPT_SNAPSHOTS,
    OPT_MEMORY,
};

/* Whether a command takes a remote command after its operands. */
enum cli_rest {
    CLI_REST_NONE = 0,
    CLI_REST_REQUIRED, /* "[--] CMD [ARG...]" must follow */
    CLI_REST_OPTIONAL, /* may follow (shell: a default command otherwise) */
};

/* One option row: what getopt needs and what help prints. */
typedef struct cli_opt {
    int key;             /* enum cli_opt_key */
    const char *name;    /* long name, without "--" */
    const char *metavar; /* argument's name in help, NULL for a flag */
    const char *help;
} cli_opt;

/* One option given on the command line. */
typedef struct cli_optval {
    int key;
    const char *val; /* the argument (points into argv); NULL for a flag */
} cli_optval;

struct cli_cmd;

/* A parsed command line.  Every string points into argv. */
typedef struct cli_args {
    const struct cli_cmd *cmd;
    cli_optval *opts; /* owned array, in command-line order */
    int nopts;
    char **pos; /* operands before "--" */
    int npos;
    char **rest; /* the remote command (after "--", or after the operands) */
    int nrest;
} cli_args;

/* One command row. */
typedef struct cli_cmd {
    const char *name;              /* "ls", or two words: "template build" */
    int (*run)(const cli_args *a); /* returns the exit code */
    const char *usage;             /* operands and options, after "brig NAME " */
    const char *summary;           /* one line */
    const char *details;           /* more help (lines ending in newlines), or NULL */
    const int *opts;               /* accepted option keys, 0-terminated (--help implied) */
    int min_pos, max_pos;          /* operand count; max_pos -1: no limit */
    enum cli_rest rest;            /* takes "[--] CMD [ARG...]" after the operands */
} cli_cmd;

/* Commands whose rows live beside their handlers, one table per family; each ends with a
 * row whose name is NULL.  main.c lists them after its own. */
extern const cli_cmd cli_account_commands[];
extern const cli_cmd cli_project_commands[];
extern const cli_cmd cli_key_commands[];
extern const cli_cmd cli_secret_commands[];
extern const cli_cmd cli_policy_commands[];
extern const cli_cmd cli_inject_commands[];
extern const cli_cmd cli_tariff_commands[];
extern const cli_cmd cli_timeout_commands[];
extern const cli_cmd cli_pause_commands[];
extern const cli_cmd cli_netlog_commands[];
extern const cli_cmd cli_template_commands[];

/* The last value of option key, NULL when absent ("" for a given flag). */
const char *cli_opt_get(const cli_args *a, int key);
bool cli_opt_has(const cli_args *a, int key);

/* The client for BRIG_URL with the API key (BRIG_API_KEY, else the admin key
 * file); made on first use and freed at exit.  NULL with *err when there is no
 * key and need_key. */
brig_client *cli_client(bool need_key, brig_error **err);
/* Same; without BRIG_API_KEY the key comes from <state dir>/<key_file>
 * (operator commands such as `template build` use operator.key). */
brig_client *cli_client_with(bool need_key, const char *key_file, brig_error **err);

/* Prints "brig: <message>" for *err to stderr, clears it, returns CLI_EXIT_FAIL. */
int cli_fail(brig_error **err);

/* Prints "brig: <message>" and the command's usage to stderr, returns CLI_EXIT_USAGE. */
int cli_usage_error(const cli_cmd *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints `v` as indented JSON followed by a newline on stdout (stdio). */
void cli_print_json(json_t *v);

/* Writes n bytes to fd, bypassing stdio; EPIPE is ignored (a reader that went
 * away).  0 or -1 with errno. */
int cli_write(int fd, const void *p, size_t n);

/* The signal that asked brig to stop, 0 if none; set once cli_catch_signals()
 * ran.  Hand it to brig_client_set_interrupt() to abort a transfer. */
extern volatile sig_atomic_t cli_interrupted;

/* Catches SIGINT, SIGTERM and SIGHUP (recording them in cli_interrupted) and
 * ignores SIGPIPE, for commands that must clean up before they exit. */
void cli_catch_signals(void);

/* Catches one more signal (SIGWINCH): it only goes into the signal fd. */
void cli_catch_signal(int sig);

/* The read end of a non-blocking self-pipe that receives the number of every
 * caught signal as one byte, for poll loops; made on first call. */
int cli_signal_fd(void);

/* "/v1/sandboxes/<id escaped><suffix>"; caller frees. */
char *cli_sandbox_path(const char *id, const char *suffix);

/* A usage error (printed) when id is empty: 0 or CLI_EXIT_USAGE. */
int cli_check_id(const cli_args *a, const char *id);
/* GET /v1/sandboxes/{a->pos[0]}{suffix} into *out; an exit code (CLI_EXIT_OK, or the
 * usage or failure it printed). */
int cli_get_sandbox(const cli_args *a, const char *suffix, json_t **out);

/* output.c: prints s for a table cell or a message: control characters become '?'. */
void cli_print_clean(FILE *f, const char *s);

/* Prints rows (a JSON array of objects) as a table: the n heads, then per row its fields keys
 * (a string as it is, an integer in decimal, anything else "-"), each column as wide as its
 * widest cell; control characters become '?'. */
void cli_print_table(json_t *rows, const char *const *keys, const char *const *heads, size_t n);

/* output.c: field key of v when it is a string, else def. */
const char *cli_str(json_t *v, const char *key, const char *def);

/* output.c: prints the answer v as JSON (--json), else as a table of its array `field` (a
 * malformed answer is a failure); consumes v.  An exit code. */
int cli_print_rows(const cli_args *a, json_t *v, const char *field, const char *const *keys,
                   const char *const *heads, size_t n);

/* output.c: an egress policy for people: "egress MODE", then for an allowlist its domains,
 * cidrs and ports, one line each. */
void cli_print_egress(json_t *egress);

/* request.c: sends method to path with body as JSON (consumed; NULL: none) with the client of
 * key_file (NULL: the admin key's, cli_client) and sets *out (if out) to the answer (NULL
 * when empty).  Prints a failure; returns an exit code. */
int cli_call(const char *method, const char *path, json_t *body, const char *key_file,
             json_t **out);

/* request.c: the project the command is about: --project, else the account's default project
 * (GET /v1/account).  Sets *id (caller frees); an exit code, the failure printed. */
int cli_project_id(const cli_args *a, char **id);

/* request.c: "/v1/projects/<id escaped><suffix>"; caller frees. */
char *cli_project_path(const char *id, const char *suffix);
/* DELETE /v1/projects/<project>/<collection>/<a->pos[0]>: a key or a secret of the
 * project --project names (or the account's default); what names the item in errors. */
int cli_project_item_delete(const cli_args *a, const char *collection, const char *what);
/* request.c: reads a part of the project's resource for a change: GETs the project's path + suffix
 * (--project, or the account's default) into *path, and a copy of the answer's member key,
 * which must be of JSON type `type`, into *out (the caller's).  A CLI exit code; on a missing
 * or mistyped member it says the answer was malformed, naming `what`. */
int cli_project_read(const cli_args *a, const char *suffix, const char *key, json_type type,
                     const char *what, char **path, json_t **out);

/* progress.c: while a transfer of c runs, its bytes so far (of how many, when known) and
 * its rate on stderr, redrawn in place; at the end a line with the total.  Only when
 * stderr is a terminal: otherwise nothing is printed.  up: count what is sent, else what
 * is received; what names the transfer ("upload", "download"). */
void cli_progress_begin(brig_client *c, bool up, const char *what);
/* Stops the meter of c: ok prints the last line (total and average rate); otherwise the line
 * drawn so far is ended, so a message can follow. */
void cli_progress_end(brig_client *c, bool ok);

/* "/v1/sandboxes/<id>/processes/<pid><suffix>"; caller frees. */
char *cli_process_path(const char *id, const char *pid, const char *suffix);

/* A usage error (printed) unless pid is a positive decimal number: 0 or CLI_EXIT_USAGE. */
int cli_check_pid(const cli_args *a, const char *pid);

/* A usage error (printed) unless path is absolute: 0 or CLI_EXIT_USAGE. */
int cli_check_remote(const cli_args *a, const char *what, const char *path);

/* Checks octal permission bits (at most 07777) and writes them normalised
 * ("0755") into buf.  Returns buf, or NULL when invalid. */
const char *cli_check_mode(const char *mode, char *buf, size_t size);

/* brig's exit code for a finished command or process (an exec result, an exit
 * event, a process object): exit_code 0-255 as it is, a negative -N or a
 * "signal" N as 128+N, larger codes as 255.  -1 when v says neither. */
int cli_exit_code(json_t *v);

/* Writes the "data" of a stdout/stderr event to fd, decoded when its
 * "encoding" is "base64".  0, or -1 with *err set; its errnum is EPIPE when the
 * reader went away (the caller then stops, as a process in a pipe would). */
int cli_write_event(json_t *event, int fd, brig_error **err);
/* Writes a JSON string (base64 when encoding says so) to fd byte-exact; `what` names it in
 * errors; EPIPE is an error only when epipe_fails. */
int cli_write_text(json_t *s, json_t *encoding, int fd, const char *what, bool epipe_fails,
                   brig_error **err);

/* The exec request's "pty" object: this terminal's size (stdout's, else
 * stdin's), 80x24 without one.  Caller owns. */
json_t *cli_pty_size(void);

/* Sends everything brig reads from its stdin to process pid's stdin, each
 * read() as one request, until EOF; then closes the process's stdin when
 * close.  0, or -1 with *err set. */
int cli_feed_stdin(brig_client *c, const char *id, const char *pid, bool close, brig_error **err);

/* The --volume NAME:/PATH[:ro] options of create and run into body's "volumes"
 * (cmd_volume.c): 0, or CLI_EXIT_USAGE (printed). */
int cli_add_volumes(const cli_args *a, json_t *body);

/* upload --recursive and download --recursive (cmd_tar.c) */
int cli_upload_tree(const cli_args *a);
int cli_download_tree(const cli_args *a);

/* command handlers (cmd_*.c) */
int brig_cmd_create(const cli_args *a);
int brig_cmd_ls(const cli_args *a);
int brig_cmd_inspect(const cli_args *a);
int brig_cmd_rm(const cli_args *a);
int brig_cmd_exec(const cli_args *a);
int brig_cmd_run(const cli_args *a);
int brig_cmd_upload(const cli_args *a);
int brig_cmd_download(const cli_args *a);
int brig_cmd_ps(const cli_args *a);
int brig_cmd_logs(const cli_args *a);
int brig_cmd_timeline(const cli_args *a);
int brig_cmd_metrics(const cli_args *a);
int brig_cmd_audit_export(const cli_args *a);
int brig_cmd_audit_verify(const cli_args *a);
int brig_cmd_wait(const cli_args *a);
int brig_cmd_kill(const cli_args *a);
int brig_cmd_stdin(const cli_args *a);
int brig_cmd_shell(const cli_args *a);
int brig_cmd_ls_files(const cli_args *a);
int brig_cmd_stat(const cli_args *a);
int brig_cmd_rm_file(const cli_args *a);
int brig_cmd_mkdir(const cli_args *a);
int brig_cmd_mv(const cli_args *a);
int brig_cmd_template_ls(const cli_args *a);
int brig_cmd_template_build(const cli_args *a);
int brig_cmd_health(const cli_args *a);
int brig_cmd_account_show(const cli_args *a);
int brig_cmd_account_usage(const cli_args *a);
int brig_cmd_account_ledger(const cli_args *a);
int brig_cmd_account_ls(const cli_args *a);
int brig_cmd_volume_create(const cli_args *a);
int brig_cmd_volume_ls(const cli_args *a);
int brig_cmd_volume_inspect(const cli_args *a);
int brig_cmd_volume_rm(const cli_args *a);

#endif
