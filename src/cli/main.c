/*
 * main.c - brig, the command-line client of brigd.
 *
 * The commands and their options are two tables (`commands`, `options`); the
 * parser, the dispatcher and the help text are generated from them.  A command
 * line is `brig NAME [OPTIONS] OPERANDS [-- CMD [ARG...]]`; NAME may be two
 * words ("template build").  Commands that take a remote command (exec, run)
 * split the line at the first "--": options and operands before it, the command
 * after it.  Without "--", option parsing stops at the first operand and what
 * follows the operands is the command, so `brig exec ID ls -l` works too.
 *
 * Handlers live in cmd_*.c and return the exit code; errors are rendered here,
 * at the edge (cli_fail), and nowhere else.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "cli.h"
#include "endpoint.h"
#include "util.h"

/* option rows */

static const cli_opt options[] = {
    {OPT_TEMPLATE, "template", "NAME", "template to start from (brigd's default: base)"},
    {OPT_ISOLATION, "isolation", "MODE",
     "container, gvisor or microvm (default: the project's, else the operator's)"},
    {OPT_SNAPSHOT, "snapshot", "SNAPSHOT", "start from this snapshot's file system (and template)"},
    {OPT_SNAPSHOTS, "snapshots", NULL,
     "gvisor: one that can be snapshotted and forked (its writes in the host's layer)"},
    {OPT_MEMORY, "memory", NULL, "gvisor: with its memory too (its processes go on in each child)"},
    {OPT_CHECKPOINT, "checkpoint", NULL,
     "gvisor: write its memory to disk and free it, not just freeze it (pause)"},
    {OPT_ON_IDLE, "on-idle", "WHAT",
     "what its idle timeout does: delete or pause (default: the project's, else delete)"},
    {OPT_PROJECT, "project", "ID", "the project (default: the account's default project)"},
    {OPT_SCOPE, "scope", "SCOPE", "sandbox (the default) or admin"},
    {OPT_FILE, "file", "PATH", "read the value from this file instead of stdin"},
    {OPT_NOTE, "note", "TEXT", "a note kept in the ledger"},
    {OPT_DAILY, "daily", "USD", "the daily spend limit in dollars, or none"},
    {OPT_MONTHLY, "monthly", "USD", "the monthly spend limit in dollars, or none"},
    {OPT_MAX_LIVE, "max-live", "N", "the most live sandboxes the account may have at once"},
    {OPT_TARIFFS, "tariffs", "LIST", "the tariffs it may use, separated by commas, or all"},
    {OPT_ADD, "add", NULL, "add SECONDS to the time the sandbox has left"},
    {OPT_DEFAULT, "default", "MODE", "the mode of a create that names none (none: no default)"},
    {OPT_JSON, "json", NULL, "print brigd's JSON answer as it is"},
    {OPT_CWD, "cwd", "DIR", "working directory of the command"},
    {OPT_ENV, "env", "K=V", "set a variable for the command (repeatable; K alone: its value here)"},
    {OPT_GRANT, "grant", "NAME:SECONDS[:VAR]",
     "grant credential NAME to the proxy for SECONDS, or NAME:exec for this exec only "
     "(repeatable; VAR: its value here)"},
    {OPT_TIMEOUT, "timeout", "SECONDS", "stop the command after this long (brigd's default: 55)"},
    {OPT_SHELL, "shell", NULL, "join CMD and ARGs with spaces and run them with bash -lc"},
    {OPT_MODE, "mode", "MODE", "octal permission bits of what is created (e.g. 0755)"},
    {OPT_BACKGROUND, "background", NULL, "start the command, print its pid and return at once"},
    {OPT_STDIN, "stdin", NULL, "pass brig's stdin to the command"},
    {OPT_USER, "user", "NAME", "run as this user of the sandbox (default root)"},
    {OPT_PTY, "pty", NULL, "run on a pseudo-terminal (stdout and stderr become one stream)"},
    {OPT_FOLLOW, "follow", NULL, "keep printing new output until the process exits"},
    {OPT_SIGNAL, "signal", "SIG", "signal: a name (TERM, SIGKILL) or a number (default TERM)"},
    {OPT_CLOSE, "close", NULL, "close the process's stdin once brig's stdin ended"},
    {OPT_RECURSIVE, "recursive", NULL, "a whole directory tree"},
    {OPT_PARENTS, "parents", NULL, "create missing parents; no error if the directory exists"},
    {OPT_WAIT_TIMEOUT, "timeout", "SECONDS", "stop waiting after this long (exit 124)"},
    {OPT_SINCE, "since", "TIME", "from this time on (ISO 8601, or ms since the epoch)"},
    {OPT_ENDED, "ended", NULL, "the ended sandboxes (within brigd's retention period)"},
    {OPT_DAYS, "days", "N", "the last N UTC days, today included (default 30)"},
    {OPT_LIMIT, "limit", "N", "at most N entries, newest first (default 100, at most 1000)"},
    {OPT_BEFORE, "before", "SEQ", "only entries older than SEQ (the next page of a listing)"},
    {OPT_VOLUME, "volume", "NAME:/PATH[:ro]",
     "mount a volume of the project at PATH, read-only with :ro (repeatable)"},
    {OPT_SIZE, "size", "MIB", "the volume's size in MiB"},
    {OPT_HELP, "help", NULL, "show this help"},
};

static const cli_opt *option_row(int key)
{
    for (size_t i = 0; i < BRIG_ARRAY_LEN(options); i++)
        if (options[i].key == key)
            return &options[i];
    return NULL;
}

/* command rows */

static const int opts_none[] = {0};
static const int opts_create[] = {OPT_TEMPLATE,  OPT_SNAPSHOT, OPT_ISOLATION, OPT_ON_IDLE,
                                  OPT_SNAPSHOTS, OPT_VOLUME,   OPT_JSON,      0};
static const int opts_json[] = {OPT_JSON, 0};
static const int opts_tbuild[] = {OPT_FILE, OPT_JSON, 0};
static const int opts_exec[] = {OPT_CWD,   OPT_ENV,  OPT_GRANT, OPT_TIMEOUT,
                                OPT_SHELL, OPT_USER, OPT_STDIN, OPT_BACKGROUND,
                                OPT_PTY,   OPT_JSON, 0};
static const int opts_run[] = {
    OPT_TEMPLATE, OPT_ISOLATION, OPT_VOLUME, OPT_CWD,   OPT_ENV, OPT_GRANT,
    OPT_TIMEOUT,  OPT_SHELL,     OPT_USER,   OPT_STDIN, 0};
static const int opts_volume_create[] = {OPT_SIZE, OPT_PROJECT, OPT_JSON, 0};
static const int opts_upload[] = {OPT_MODE, OPT_RECURSIVE, 0};
static const int opts_download[] = {OPT_RECURSIVE, 0};
static const int opts_logs[] = {OPT_FOLLOW, 0};
static const int opts_timeline[] = {OPT_FOLLOW, OPT_JSON, 0};
static const int opts_export[] = {OPT_SINCE, 0};
static const int opts_ls[] = {OPT_ENDED, OPT_SINCE, OPT_JSON, 0};
static const int opts_usage[] = {OPT_DAYS, OPT_JSON, 0};
static const int opts_ledger[] = {OPT_LIMIT, OPT_BEFORE, OPT_JSON, 0};
static const int opts_kill[] = {OPT_SIGNAL, 0};
static const int opts_wait[] = {OPT_WAIT_TIMEOUT, OPT_JSON, 0};
static const int opts_stdin[] = {OPT_CLOSE, 0};
static const int opts_shell[] = {OPT_USER, 0};
static const int opts_rm_file[] = {OPT_RECURSIVE, 0};
static const int opts_mkdir[] = {OPT_PARENTS, OPT_MODE, 0};

static int cmd_version(const cli_args *a);
static int cmd_help(const cli_args *a);

/* Longer help, printed after the summary. */
#define EXEC_DETAILS                                                                               \
    "The command runs as an argv vector (no shell) unless --shell is given.  Its stdout\n"         \
    "and stderr are written here byte for byte as they come, and brig exits with its\n"            \
    "exit code; 124 (and \"brig: command timed out\") when it ran past its timeout, 130\n"         \
    "after Ctrl-C (brigd then kills the command).\n\n"                                             \
    "--stdin sends brig's stdin along (read to its end first; at most 1 MiB once encoded\n"        \
    "in the request).  With --background the command keeps running on its own: brig\n"             \
    "prints its pid (see ps, logs, wait, kill, stdin), and --stdin streams brig's stdin\n"         \
    "to it, then closes its stdin.\n\n"                                                            \
    "--grant NAME:SECONDS grants a credential for SECONDS (docs/secrets.md): brigd's egress\n"     \
    "proxy injects the project's secret NAME (with :VAR, brig's environment variable VAR's\n"      \
    "value, for this grant only) where an injection rule names it; the command holds a\n"          \
    "placeholder, never the value.  --grant NAME:exec[:VAR] grants it for this exec only:\n"       \
    "the proxy stops injecting it when the command ends.\n"
#define PS_DETAILS                                                                                 \
    "STATE is running, exited(CODE) or killed(SIGNAL).  brigd keeps finished processes\n"          \
    "for a while (the last 64).\n"
#define LOGS_DETAILS                                                                               \
    "Prints the output brigd still holds (its last 4 MiB by default): stdout here to\n"            \
    "stdout, stderr to stderr; with --follow also new output until the process exits.\n"           \
    "Exits with the process's exit code once it ended, 0 for a running one.\n"
#define WAIT_DETAILS                                                                               \
    "Exits with the process's exit code (128+N when killed by signal N), or 124 when\n"            \
    "it is still running after --timeout.\n"
#define STDIN_DETAILS                                                                              \
    "Sends what brig reads from its stdin to the process as it comes (each read is one\n"          \
    "request), until EOF.\n"
#define SHELL_DETAILS                                                                              \
    "Runs CMD (default: bash -l, or sh -l where the template has no bash) on a\n"                  \
    "pseudo-terminal of this terminal's size, with this terminal in raw mode until\n"              \
    "it exits; brig then exits with its exit code.  Needs a terminal on stdin.\n"
#define TIMELINE_DETAILS                                                                           \
    "Prints TIME KIND ACTOR DATA per event, oldest first (--json: each event as brigd\n"           \
    "sends it).  With --follow it keeps printing new events and ends with the sandbox.\n"
#define RM_FILE_DETAILS "A directory needs --recursive unless it is empty.\n"
#define LS_DETAILS                                                                                 \
    "--ended lists the sandboxes that ended (every page), the last ended first, from\n"            \
    "--since on, within brigd's retention period (7 days by default), with why they\n"             \
    "ended and what they cost.\n"
#define LEDGER_DETAILS                                                                             \
    "Credits and charges, newest first, one page (an admin key).  When there are older\n"          \
    "entries brig says on stderr which --before shows the next page.\n"
#define TEMPLATE_BUILD_DETAILS                                                                     \
    "brigd builds in the background; brig prints the build's output on stderr as it\n"             \
    "comes, then 'built NAME (key KEY)' (--json: the build's record).  Exits 0 once\n"             \
    "built, 1 when the build failed.  Ctrl-C stops following, not the build.\n"                    \
    "With --file SPEC.json (- for stdin), an account's own template instead: the spec\n"           \
    "(docs/templates.md) is built in a sandbox of its parent; brig prints\n"                       \
    "'built NAME:TAG (key KEY)' when done, or the failed step and its exit code.\n"
#define ACCOUNT_SHOW_DETAILS                                                                       \
    "With ACCOUNT: that account, as the operator sees it (the operator key: BRIG_API_KEY,\n"       \
    "else $BRIG_STATE_DIR/operator.key).\n"
#define VOLUME_DETAILS                                                                             \
    "A volume is a project's file system of a bounded size that outlives sandboxes:\n"             \
    "mount it at create with `brig create --volume NAME:/PATH[:ro]` (one sandbox\n"                \
    "writes it at a time, or many read it).  NAME, inspect and rm also take its id.\n"
#define RUN_DETAILS                                                                                \
    "The sandbox is deleted whatever happens: when the command fails, when brigd\n"                \
    "cannot run it, and on SIGINT, SIGTERM or SIGHUP.  Exits with the command's exit code.\n"
#define UPLOAD_DETAILS                                                                             \
    "The file is streamed; REMOTE is an absolute path in the sandbox (a REMOTE\n"                  \
    "ending in '/' gets LOCAL's file name appended).  With --recursive, LOCAL is a\n"              \
    "directory whose contents are copied into the directory REMOTE (made if missing)\n"            \
    "as a tar stream made by this host's tar.\n"
#define DOWNLOAD_DETAILS                                                                           \
    "LOCAL is written as LOCAL.tmp-PID and renamed when complete, so a failed\n"                   \
    "download leaves nothing behind.  An existing directory LOCAL receives the\n"                  \
    "file under REMOTE's name.  With --recursive, REMOTE is a directory whose\n"                   \
    "contents are extracted into the directory LOCAL (made if missing) by tar.\n"

static const cli_cmd commands[] = {
    {"create", brig_cmd_create,
     "[--template NAME] [--snapshot SNAPSHOT] [--isolation MODE] [--on-idle delete|pause] "
     "[--snapshots] [--volume NAME:/PATH[:ro]]... [--json]",
     "create a sandbox and print its id", NULL, opts_create, 0, 0, CLI_REST_NONE},
    {"ls", brig_cmd_ls, "[--ended [--since TIME]] [--json]",
     "list the live sandboxes, or (--ended) the ended ones", LS_DETAILS, opts_ls, 0, 0,
     CLI_REST_NONE},
    {"inspect", brig_cmd_inspect, "ID", "print a sandbox as JSON", NULL, opts_none, 1, 1,
     CLI_REST_NONE},
    {"exec", brig_cmd_exec,
     "[--cwd DIR] [--env K=V]... [--grant NAME:SECONDS[:VAR]]... [--timeout SECONDS] [--shell] "
     "[--user NAME] [--stdin] [--background] [--pty] [--json] ID -- CMD [ARG...]",
     "run a command in a sandbox; exits with its exit code", EXEC_DETAILS, opts_exec, 1, 1,
     CLI_REST_REQUIRED},
    {"shell", brig_cmd_shell, "[--user NAME] ID [-- CMD [ARG...]]",
     "an interactive terminal session in a sandbox", SHELL_DETAILS, opts_shell, 1, 1,
     CLI_REST_OPTIONAL},
    {"ps", brig_cmd_ps, "[--json] ID", "list a sandbox's processes", PS_DETAILS, opts_json, 1, 1,
     CLI_REST_NONE},
    {"logs", brig_cmd_logs, "[--follow] ID PID", "print a process's output", LOGS_DETAILS,
     opts_logs, 2, 2, CLI_REST_NONE},
    {"wait", brig_cmd_wait, "[--timeout SECONDS] [--json] ID PID",
     "wait for a process to exit; exits with its exit code", WAIT_DETAILS, opts_wait, 2, 2,
     CLI_REST_NONE},
    {"kill", brig_cmd_kill, "[--signal SIG] ID PID", "send a signal to a process", NULL, opts_kill,
     2, 2, CLI_REST_NONE},
    {"stdin", brig_cmd_stdin, "[--close] ID PID", "pipe brig's stdin to a process", STDIN_DETAILS,
     opts_stdin, 2, 2, CLI_REST_NONE},
    {"upload", brig_cmd_upload, "[--mode MODE] [--recursive] ID LOCAL REMOTE",
     "copy a local file (- for stdin) or directory into a sandbox", UPLOAD_DETAILS, opts_upload, 3,
     3, CLI_REST_NONE},
    {"download", brig_cmd_download, "[--recursive] ID REMOTE LOCAL",
     "copy a file (LOCAL - for stdout) or directory out of a sandbox", DOWNLOAD_DETAILS,
     opts_download, 3, 3, CLI_REST_NONE},
    {"ls-files", brig_cmd_ls_files, "[--json] ID PATH", "list a directory in a sandbox", NULL,
     opts_json, 2, 2, CLI_REST_NONE},
    {"stat", brig_cmd_stat, "ID PATH", "print a file's entry as JSON (a symlink itself)", NULL,
     opts_none, 2, 2, CLI_REST_NONE},
    {"rm-file", brig_cmd_rm_file, "[--recursive] ID PATH", "remove a file or directory",
     RM_FILE_DETAILS, opts_rm_file, 2, 2, CLI_REST_NONE},
    {"mkdir", brig_cmd_mkdir, "[--parents] [--mode MODE] ID PATH", "make a directory", NULL,
     opts_mkdir, 2, 2, CLI_REST_NONE},
    {"mv", brig_cmd_mv, "ID FROM TO", "rename a file or directory (atomically)", NULL, opts_none, 3,
     3, CLI_REST_NONE},
    {"rm", brig_cmd_rm, "ID [ID...]", "delete sandboxes", NULL, opts_none, 1, -1, CLI_REST_NONE},
    {"run", brig_cmd_run,
     "[--template NAME] [--isolation MODE] [--volume NAME:/PATH[:ro]]... [--cwd DIR] "
     "[--env K=V]... [--grant NAME:SECONDS[:VAR]]... [--timeout SECONDS] [--shell] "
     "[--user NAME] [--stdin] -- CMD [ARG...]",
     "create a sandbox, run one command in it, delete it", RUN_DETAILS, opts_run, 0, 0,
     CLI_REST_REQUIRED},
    {"template ls", brig_cmd_template_ls, "[--json]", "list templates", NULL, opts_json, 0, 0,
     CLI_REST_NONE},
    {"template build", brig_cmd_template_build, "[--json] NAME | --file SPEC.json",
     "build a template (may take minutes)", TEMPLATE_BUILD_DETAILS, opts_tbuild, 0, 1,
     CLI_REST_NONE},
    {"timeline", brig_cmd_timeline, "[--follow] [--json] ID",
     "print a sandbox's audit timeline (kept after it ended)", TIMELINE_DETAILS, opts_timeline, 1,
     1, CLI_REST_NONE},
    {"metrics", brig_cmd_metrics, "[--json] ID",
     "print a sandbox's usage over the last minute (kept a while after it ended)", NULL, opts_json,
     1, 1, CLI_REST_NONE},
    {"audit export", brig_cmd_audit_export, "[--since TIME]",
     "print the account's audit events as JSON Lines (the operator key: everyone's)", NULL,
     opts_export, 0, 0, CLI_REST_NONE},
    {"audit verify", brig_cmd_audit_verify, "[--json]",
     "recompute the audit hash chains; exits 1 naming the first broken record", NULL, opts_json, 0,
     0, CLI_REST_NONE},
    {"account show", brig_cmd_account_show, "[--json] [ACCOUNT]",
     "the account: balance, spend today and this month against the limits", ACCOUNT_SHOW_DETAILS,
     opts_json, 0, 1, CLI_REST_NONE},
    {"account usage", brig_cmd_account_usage, "[--days N] [--json]",
     "what the account spent on each of its last N UTC days", NULL, opts_usage, 0, 0,
     CLI_REST_NONE},
    {"account ledger", brig_cmd_account_ledger, "[--limit N] [--before SEQ] [--json]",
     "the account's credits and charges, newest first", LEDGER_DETAILS, opts_ledger, 0, 0,
     CLI_REST_NONE},
    {"account ls", brig_cmd_account_ls, "[--json]",
     "every account (the operator key: BRIG_API_KEY, else operator.key)", NULL, opts_json, 0, 0,
     CLI_REST_NONE},
    {"volume create", brig_cmd_volume_create, "--size MIB [--project ID] [--json] NAME",
     "create a volume (prints its id)", VOLUME_DETAILS, opts_volume_create, 1, 1, CLI_REST_NONE},
    {"volume ls", brig_cmd_volume_ls, "[--json]", "list volumes", NULL, opts_json, 0, 0,
     CLI_REST_NONE},
    {"volume inspect", brig_cmd_volume_inspect, "NAME", "print a volume as JSON", NULL, opts_none,
     1, 1, CLI_REST_NONE},
    {"volume rm", brig_cmd_volume_rm, "NAME [NAME...]", "delete volumes and their data", NULL,
     opts_none, 1, -1, CLI_REST_NONE},
    {"health", brig_cmd_health, "", "check that brigd answers (no key needed)", NULL, opts_none, 0,
     0, CLI_REST_NONE},
    {"version", cmd_version, "", "print brig's version", NULL, opts_none, 0, 0, CLI_REST_NONE},
    {"help", cmd_help, "[COMMAND]", "show help for brig or a command", NULL, opts_none, 0, 2,
     CLI_REST_NONE},
};

/* The families' tables (cli.h), listed after this file's. */
static const cli_cmd *const families[] = {
    cli_account_commands, cli_project_commands, cli_key_commands,      cli_secret_commands,
    cli_policy_commands,  cli_tariff_commands,  cli_timeout_commands,  cli_netlog_commands,
    cli_inject_commands,  cli_pause_commands,   cli_template_commands,
};

/* The i-th command row of all tables, NULL past the last. */
static const cli_cmd *command_at(size_t i)
{
    if (i < BRIG_ARRAY_LEN(commands))
        return &commands[i];
    i -= BRIG_ARRAY_LEN(commands);
    for (size_t f = 0; f < BRIG_ARRAY_LEN(families); f++)
        for (const cli_cmd *c = families[f]; c->name != NULL; c++)
            if (i-- == 0)
                return c;
    return NULL;
}

/* shared helpers (cli.h) */

static brig_client *client;

brig_client *cli_client(bool need_key, brig_error **err)
{
    return cli_client_with(need_key, "admin.key", err);
}

brig_client *cli_client_with(bool need_key, const char *key_file, brig_error **err)
{
    if (client != NULL)
        return client;
    _cleanup_free_ char *key = NULL;
    if (brig_config_api_key_from(&key, key_file, need_key ? err : NULL) < 0 && need_key)
        return NULL;
    client = brig_client_new(brig_config_url(), key);
    if (key != NULL)
        memset(key, 0, strlen(key));
    return client;
}

volatile sig_atomic_t cli_interrupted;

/* The self-pipe: on_signal writes each signal's number into it. */
static int signal_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
        cli_interrupted = sig;
    if (signal_pipe[1] >= 0) {
        unsigned char b = (unsigned char)sig;
        ssize_t n = write(signal_pipe[1], &b, 1); /* full pipe: the reader is behind anyway */
        (void)n;
    }
    errno = saved;
}

void cli_catch_signal(int sig)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: blocking calls see EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

void cli_catch_signals(void)
{
    cli_catch_signal(SIGINT);
    cli_catch_signal(SIGTERM);
    cli_catch_signal(SIGHUP);
    /* a reader that goes away must not kill us before we cleaned up */
    signal(SIGPIPE, SIG_IGN);
}

int cli_signal_fd(void)
{
    if (signal_pipe[0] < 0 && pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        fprintf(stderr, "brig: cannot create a pipe: %s\n", strerror(errno));
        abort();
    }
    return signal_pipe[0];
}

int cli_fail(brig_error **err)
{
    fprintf(stderr, "brig: %s\n", *err != NULL ? (*err)->msg : "unknown error");
    brig_error_clear(err);
    return CLI_EXIT_FAIL;
}

static void print_usage_line(FILE *f, const cli_cmd *cmd)
{
    fprintf(f, "usage: brig %s%s%s\n", cmd->name, *cmd->usage ? " " : "", cmd->usage);
}

int cli_usage_error(const cli_cmd *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("brig: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (cmd != NULL) {
        print_usage_line(stderr, cmd);
        fprintf(stderr, "Run 'brig help %s' for details.\n", cmd->name);
    } else {
        fputs("Run 'brig help' for the list of commands.\n", stderr);
    }
    return CLI_EXIT_USAGE;
}

void cli_print_json(json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    if (s != NULL)
        printf("%s\n", s);
    free(s);
}

int cli_write(int fd, const void *p, size_t n)
{
    if (brig_write_full(fd, p, n) < 0)
        return errno == EPIPE ? 0 : -1;
    return 0;
}

const char *cli_opt_get(const cli_args *a, int key)
{
    const char *val = NULL;
    for (int i = 0; i < a->nopts; i++)
        if (a->opts[i].key == key)
            val = a->opts[i].val != NULL ? a->opts[i].val : "";
    return val;
}

bool cli_opt_has(const cli_args *a, int key)
{
    return cli_opt_get(a, key) != NULL;
}

/* help */

static void print_overview(FILE *f)
{
    fputs("usage: brig COMMAND [OPTIONS] [ARGS]\n\n"
          "brig drives brigd, the sandbox service, from a shell.\n\nCommands:\n",
          f);
    /* in table order, but a group's rows together (some live in the families' tables) */
    const cli_cmd *c, *d;
    for (size_t i = 0; (c = command_at(i)) != NULL; i++) {
        size_t wl = strcspn(c->name, " ");
        if (c->name[wl] == '\0') {
            fprintf(f, "  %-18s %s\n", c->name, c->summary);
            continue;
        }
        size_t first = 0; /* the group's first row prints the whole group */
        while (strncmp(command_at(first)->name, c->name, wl + 1) != 0)
            first++;
        for (size_t j = i; first == i && (d = command_at(j)) != NULL; j++)
            if (strncmp(d->name, c->name, wl + 1) == 0)
                fprintf(f, "  %-18s %s\n", d->name, d->summary);
    }
    fputs(
        "\nEnvironment:\n"
        "  BRIG_URL         brigd's address (default " BRIG_CONFIG_DEFAULT_URL ")\n"
        "  BRIG_API_KEY     API key; when unset, the key in $BRIG_STATE_DIR/admin.key is\n"
        "                   used if readable (BRIG_STATE_DIR default " BRIG_CONFIG_DEFAULT_STATE_DIR
        ")\n"
        "\nRun 'brig help COMMAND' (or 'brig COMMAND --help') for a command's options.\n",
        f);
}

static void print_command_help(FILE *f, const cli_cmd *cmd)
{
    print_usage_line(f, cmd);
    fprintf(f, "\n%c%s.\n",
            cmd->summary[0] >= 'a' && cmd->summary[0] <= 'z' ? cmd->summary[0] - 'a' + 'A'
                                                             : cmd->summary[0],
            cmd->summary + 1);
    if (cmd->details != NULL)
        fprintf(f, "\n%s", cmd->details);
    fputs("\nOptions:\n", f);
    for (const int *k = cmd->opts;; k++) {
        const cli_opt *o = option_row(*k == 0 ? OPT_HELP : *k);
        char left[64];
        char shortopt[8] = "    ";
        if (o->key < 128)
            snprintf(shortopt, sizeof(shortopt), "-%c, ", o->key);
        snprintf(left, sizeof(left), "%s--%s%s%s", shortopt, o->name, o->metavar ? " " : "",
                 o->metavar ? o->metavar : "");
        fprintf(f, "  %-24s %s\n", left, o->help);
        if (*k == 0)
            break;
    }
}

/* Rows whose first word is word; *exact set when one is named just word. */
static const cli_cmd *find_command(const char *word, const char *next, bool *is_group)
{
    size_t wl = strlen(word);
    const cli_cmd *c;
    *is_group = false;
    for (size_t i = 0; (c = command_at(i)) != NULL; i++) {
        if (strcmp(c->name, word) == 0)
            return c;
        if (strncmp(c->name, word, wl) == 0 && c->name[wl] == ' ') {
            *is_group = true;
            if (next != NULL && strcmp(c->name + wl + 1, next) == 0)
                return c;
        }
    }
    return NULL;
}

static void print_group(FILE *f, const char *group)
{
    size_t gl = strlen(group);
    const cli_cmd *c;
    fprintf(f, "usage: brig %s COMMAND\n\nCommands:\n", group);
    for (size_t i = 0; (c = command_at(i)) != NULL; i++)
        if (strncmp(c->name, group, gl) == 0 && c->name[gl] == ' ')
            fprintf(f, "  %-18s %s\n", c->name, c->summary);
}

static int cmd_help(const cli_args *a)
{
    if (a->npos == 0) {
        print_overview(stdout);
        return CLI_EXIT_OK;
    }
    bool group;
    const cli_cmd *cmd = find_command(a->pos[0], a->npos > 1 ? a->pos[1] : NULL, &group);
    if (cmd != NULL) {
        print_command_help(stdout, cmd);
        return CLI_EXIT_OK;
    }
    if (group && a->npos == 1) {
        print_group(stdout, a->pos[0]);
        return CLI_EXIT_OK;
    }
    return cli_usage_error(NULL, "unknown command '%s%s%s'", a->pos[0], a->npos > 1 ? " " : "",
                           a->npos > 1 ? a->pos[1] : "");
}

static int cmd_version(const cli_args *a)
{
    (void)a;
    printf("brig %s\n", BRIG_VERSION);
    return CLI_EXIT_OK;
}

/* parsing */

/* Parses argv (argv[0] is the command's name) for cmd into *a.  Returns -1 when
 * parsing is done and the command should run, or an exit code: 0 after --help,
 * CLI_EXIT_USAGE after a usage error (already printed). */
static int parse_args(const cli_cmd *cmd, int argc, char **argv, cli_args *a)
{
    struct option longopts[BRIG_ARRAY_LEN(options) + 1];
    char shortopts[2 * BRIG_ARRAY_LEN(options) + 3];
    int nl = 0, ns = 0;

    /* Commands that take a remote command: split at the first "--". */
    int end = argc, dashdash = -1;
    if (cmd->rest != CLI_REST_NONE) {
        for (int i = 1; i < argc; i++) {
            if (strcmp(argv[i], "--") == 0) {
                dashdash = i;
                end = i;
                break;
            }
        }
        if (dashdash < 0)
            shortopts[ns++] = '+'; /* stop at the first operand */
    }
    shortopts[ns++] = ':'; /* report a missing argument as ':' */
    for (const int *k = cmd->opts;; k++) {
        const cli_opt *o = option_row(*k == 0 ? OPT_HELP : *k);
        longopts[nl++] =
            (struct option){o->name, o->metavar ? required_argument : no_argument, NULL, o->key};
        if (o->key < 128) {
            shortopts[ns++] = (char)o->key;
            if (o->metavar)
                shortopts[ns++] = ':';
        }
        if (*k == 0)
            break;
    }
    longopts[nl] = (struct option){NULL, 0, NULL, 0};
    shortopts[ns] = '\0';

    a->cmd = cmd;
    a->opts = brig_xcalloc((size_t)end, sizeof(*a->opts));
    opterr = 0;
    optind = 0; /* glibc: full re-initialisation */
    int ch;
    while ((ch = getopt_long(end, argv, shortopts, longopts, NULL)) != -1) {
        if (ch == OPT_HELP) {
            print_command_help(stdout, cmd);
            return CLI_EXIT_OK;
        }
        if (ch == '?') {
            if (optopt != 0)
                return cli_usage_error(cmd, "unknown option '-%c'", optopt);
            return cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
        }
        if (ch == ':') {
            const cli_opt *o = option_row(optopt);
            return cli_usage_error(cmd, "option '--%s' needs an argument",
                                   o != NULL ? o->name : "?");
        }
        a->opts[a->nopts++] = (cli_optval){ch, optarg};
    }

    a->pos = argv + optind;
    if (cmd->rest != CLI_REST_NONE && dashdash < 0) {
        /* operands, then the command */
        int avail = end - optind;
        a->npos = avail < cmd->max_pos ? avail : cmd->max_pos;
        a->rest = a->pos + a->npos;
        a->nrest = avail - a->npos;
    } else {
        a->npos = end - optind;
        if (dashdash >= 0) {
            a->rest = argv + dashdash + 1;
            a->nrest = argc - dashdash - 1;
        }
    }
    if (a->npos < cmd->min_pos)
        return cli_usage_error(cmd, "missing operand");
    if (cmd->max_pos >= 0 && a->npos > cmd->max_pos)
        return cli_usage_error(cmd, "unexpected operand '%s'", a->pos[cmd->max_pos]);
    if (cmd->rest == CLI_REST_REQUIRED && a->nrest == 0)
        return cli_usage_error(cmd, "missing the command to run (after --)");
    return -1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_overview(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *word = argv[1];
    if (strcmp(word, "--help") == 0 || strcmp(word, "-h") == 0)
        word = "help";
    else if (strcmp(word, "--version") == 0)
        word = "version";

    bool group;
    const cli_cmd *cmd = find_command(word, argc > 2 ? argv[2] : NULL, &group);
    if (cmd == NULL) {
        if (!group)
            return cli_usage_error(NULL, "unknown command '%s'", argv[1]);
        if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
            print_group(stdout, word);
            return CLI_EXIT_OK;
        }
        if (argc > 2)
            fprintf(stderr, "brig: unknown command '%s %s'\n", word, argv[2]);
        print_group(stderr, word);
        return CLI_EXIT_USAGE;
    }
    /* the command's argv: argv[0] is its name, then its own arguments */
    int skip = strchr(cmd->name, ' ') != NULL ? 2 : 1;
    int cargc = argc - skip;
    char **cargv = argv + skip;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        fputs("brig: cannot initialise libcurl\n", stderr);
        return CLI_EXIT_FAIL;
    }
    cli_args a = {0};
    int rc = parse_args(cmd, cargc, cargv, &a);
    if (rc < 0)
        rc = cmd->run(&a);
    free(a.opts);
    brig_client_free(client);
    client = NULL;
    curl_global_cleanup();
    if (fflush(stdout) != 0 && errno != EPIPE) {
        fprintf(stderr, "brig: cannot write output: %s\n", strerror(errno));
        if (rc == CLI_EXIT_OK)
            rc = CLI_EXIT_FAIL;
    }
    return rc;
}
