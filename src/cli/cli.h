/*
 * cli.h - what brig's command handlers share: the parsed command line, the
 * command and option tables' row types, the lazily made client, and the edge
 * where errors are printed.
 *
 * Exit codes: 0 success, 1 failure (printed as "brig: <message>"), 2 usage
 * error; exec and run exit with the remote command's code (124: timed out).
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
    OPT_JSON = 256,
    OPT_TIMEOUT,
    OPT_SHELL,
    OPT_MODE,
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
    bool rest;                     /* takes "[--] CMD [ARG...]" after the operands */
} cli_cmd;

/* The last value of option key, NULL when absent ("" for a given flag). */
const char *cli_opt_get(const cli_args *a, int key);
bool cli_opt_has(const cli_args *a, int key);

/* The client for BRIG_URL with the API key (BRIG_API_KEY, else the admin key
 * file); made on first use and freed at exit.  NULL with *err when there is no
 * key and need_key. */
brig_client *cli_client(bool need_key, brig_error **err);

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

/* "/v1/sandboxes/<id escaped><suffix>"; caller frees. */
char *cli_sandbox_path(const char *id, const char *suffix);

/* A usage error (printed) when id is empty: 0 or CLI_EXIT_USAGE. */
int cli_check_id(const cli_args *a, const char *id);

/* Prints s for a table cell or a message: control characters become '?'. */
void cli_print_clean(FILE *f, const char *s);

/* command handlers (cmd_*.c) */
int brig_cmd_create(const cli_args *a);
int brig_cmd_ls(const cli_args *a);
int brig_cmd_inspect(const cli_args *a);
int brig_cmd_rm(const cli_args *a);
int brig_cmd_exec(const cli_args *a);
int brig_cmd_run(const cli_args *a);
int brig_cmd_upload(const cli_args *a);
int brig_cmd_download(const cli_args *a);
int brig_cmd_template_ls(const cli_args *a);
int brig_cmd_template_build(const cli_args *a);
int brig_cmd_health(const cli_args *a);

#endif
