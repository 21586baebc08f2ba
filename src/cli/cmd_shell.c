/*
 * cmd_shell.c - brig shell: an interactive terminal session in a sandbox.
 *
 * The session is a background process on a pseudo-terminal of our terminal's
 * size.  brig puts its own terminal in raw mode (so Ctrl-C, Ctrl-Z, arrows and
 * the like go to the remote program as bytes) and then runs one loop, single
 * threaded, over a curl multi handle (brig_async) and two file descriptors:
 *
 *   - the process's output, followed as an NDJSON stream, is written to our
 *     stdout as it arrives; its exit event ends the session;
 *   - our stdin: what one read() returns is one stdin request; while a request
 *     is in flight, further keystrokes are batched into the next, so requests
 *     never overlap and bytes stay in order;
 *   - the signal self-pipe: SIGWINCH sends the new size (one resize request at
 *     a time, the latest size wins); SIGINT, SIGTERM and SIGHUP end the session
 *     (the remote process gets SIGHUP, as a hung-up terminal would send).
 *
 * The terminal mode is restored on every way out of the loop, before anything
 * is printed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

/* Without CMD: bash as a login shell, or sh where the template has no bash. */
#define SHELL_DEFAULT "command -v bash >/dev/null 2>&1 && exec bash -l; exec sh -l"
/* Keystrokes waiting for the request in flight; above this brig stops reading. */
#define PENDING_MAX (1u << 20)
/* How long the hang-up of the remote process may take when brig is stopped. */
#define HANGUP_TIMEOUT_MS 10000L

typedef struct shell {
    brig_async *async;
    char *stdin_path;  /* owned */
    char *resize_path; /* owned */
    /* keystrokes */
    brig_buf pending;      /* read from our stdin, not sent yet */
    bool stdin_busy;       /* a stdin request is in flight */
    bool stdin_done;       /* our stdin ended, or sending failed: read no more */
    brig_error *stdin_err; /* why sending failed */
    /* window size */
    bool resize_wanted; /* SIGWINCH came since the last resize request */
    bool resize_busy;   /* a resize request is in flight */
    /* output */
    bool output_done;       /* the output stream ended */
    json_t *exit;           /* its exit event (owned), or NULL */
    brig_error *output_err; /* why the stream failed */
} shell;

static int on_output(json_t *ev, void *ctx, brig_error **err)
{
    shell *sh = ctx;
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (type == NULL)
        return 0;
    if (strcmp(type, "stdout") == 0)
        return cli_write_event(ev, 1, err);
    if (strcmp(type, "stderr") == 0)
        return cli_write_event(ev, 2, err);
    if (strcmp(type, "exit") == 0) {
        json_decref(sh->exit);
        sh->exit = json_incref(ev);
    } else if (strcmp(type, "error") == 0) {
        const char *msg = json_string_value(json_object_get(ev, "message"));
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "%s", msg ? msg : "output stream failed");
    }
    return 0; /* output, dropped (a terminal repaints), end */
}

static void on_output_end(int status, brig_error *err, void *ctx)
{
    shell *sh = ctx;
    sh->output_done = true;
    if (status < 0 && err != NULL)
        brig_error_set(&sh->output_err, err->kind, 0, "%s", err->msg);
}

static void on_stdin_sent(int status, brig_error *err, void *ctx)
{
    shell *sh = ctx;
    sh->stdin_busy = false;
    if (status < 0) {
        /* the process may have exited: its exit event tells; stop sending */
        sh->stdin_done = true;
        if (err != NULL)
            brig_error_set(&sh->stdin_err, err->kind, 0, "stdin: %s", err->msg);
    }
}

static void on_resized(int status, brig_error *err, void *ctx)
{
    (void)status, (void)err; /* a lost resize only misdraws until the next one */
    ((shell *)ctx)->resize_busy = false;
}

/* Starts the requests that are due: pending keystrokes, a new window size. */
static void shell_kick(shell *sh)
{
    if (!sh->stdin_busy && sh->pending.len > 0 && sh->stdin_err == NULL) {
        brig_async_post(sh->async, sh->stdin_path, "application/octet-stream", sh->pending.data,
                        sh->pending.len, on_stdin_sent, sh);
        sh->pending.len = 0;
        sh->stdin_busy = true;
    }
    if (!sh->resize_busy && sh->resize_wanted) {
        json_t *size = cli_pty_size();
        char *body = json_dumps(size, JSON_COMPACT);
        json_decref(size);
        if (body != NULL)
            brig_async_post(sh->async, sh->resize_path, "application/json", body, strlen(body),
                            on_resized, sh);
        free(body);
        sh->resize_wanted = false;
        sh->resize_busy = body != NULL;
    }
}

/* The session loop.  Returns the signal that stopped brig, 0 when the output
 * stream ended, -1 with *err when the loop itself failed. */
static int shell_loop(shell *sh, brig_error **err)
{
    int sigfd = cli_signal_fd();
    char buf[16 * 1024];
    while (!sh->output_done) {
        struct pollfd fds[2] = {{.fd = sigfd, .events = POLLIN}, {.fd = 0, .events = POLLIN}};
        unsigned nfds = !sh->stdin_done && sh->pending.len < PENDING_MAX ? 2 : 1;
        if (brig_async_poll(sh->async, fds, nfds, -1, err) < 0)
            return -1;
        if (fds[0].revents & POLLIN) {
            unsigned char sigs[64];
            ssize_t n = read(sigfd, sigs, sizeof(sigs));
            for (ssize_t i = 0; i < n; i++) {
                if (sigs[i] == SIGWINCH)
                    sh->resize_wanted = true;
                else
                    return sigs[i];
            }
        }
        if (nfds > 1 && fds[1].revents != 0) {
            ssize_t n = read(0, buf, sizeof(buf));
            if (n > 0) {
                brig_buf_append(&sh->pending, buf, (size_t)n);
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                /* the terminal went away: let the remote side read EOF */
                sh->stdin_done = true;
                char *path = brig_asprintf("%s/close", sh->stdin_path);
                brig_async_post(sh->async, path, "application/octet-stream", "", 0, NULL, NULL);
                free(path);
            }
        }
        shell_kick(sh);
    }
    return 0;
}

/* Starts the session's process; writes its pid into pid.  0 or -1 with *err. */
static int shell_start(const cli_args *a, brig_client *c, const char *id, char *pid, size_t size,
                       brig_error **err)
{
    json_t *argv = json_array();
    if (a->nrest > 0) {
        for (int i = 0; i < a->nrest; i++)
            json_array_append_new(argv, json_string(a->rest[i]));
    } else {
        json_array_append_new(argv, json_string("/bin/sh"));
        json_array_append_new(argv, json_string("-c"));
        json_array_append_new(argv, json_string(SHELL_DEFAULT));
    }
    json_t *body =
        json_pack("{s:o, s:b, s:o}", "argv", argv, "background", 1, "pty", cli_pty_size());
    const char *user = cli_opt_get(a, OPT_USER);
    if (user != NULL)
        json_object_set_new(body, "user", json_string(user));
    _cleanup_free_ char *path = cli_sandbox_path(id, "/exec");
    json_t *proc = NULL;
    int rc = brig_client_call(c, "POST", path, body, CLI_TIMEOUT_MS, &proc, err);
    json_decref(body);
    if (rc < 0)
        return -1;
    json_t *jpid = json_object_get(proc, "pid");
    if (!json_is_integer(jpid) || json_integer_value(jpid) <= 0) {
        json_decref(proc);
        return brig_error_set(err, BRIG_E_PROTOCOL, 0, "malformed answer from brigd: no pid");
    }
    snprintf(pid, size, "%lld", (long long)json_integer_value(jpid));
    json_decref(proc);
    return 0;
}

int brig_cmd_shell(const cli_args *a)
{
    const char *id = a->pos[0];
    if (cli_check_id(a, id) != 0)
        return CLI_EXIT_USAGE;
    const char *user = cli_opt_get(a, OPT_USER);
    if (user != NULL && *user == '\0')
        return cli_usage_error(a->cmd, "--user: empty user name");
    brig_error *err = NULL;
    struct termios saved;
    if (!isatty(0) || tcgetattr(0, &saved) < 0) {
        brig_error_set(&err, BRIG_E_INVALID, 0,
                       "shell needs a terminal on stdin; for a script use 'brig exec' "
                       "(--stdin, --pty), or 'brig exec --background' with 'brig stdin'");
        return cli_fail(&err);
    }
    brig_client *c = cli_client(true, &err);
    if (c == NULL)
        return cli_fail(&err);
    char pid[24];
    if (shell_start(a, c, id, pid, sizeof(pid), &err) < 0)
        return cli_fail(&err);

    shell sh = {.async = brig_async_new(c),
                .stdin_path = cli_process_path(id, pid, "/stdin"),
                .resize_path = cli_process_path(id, pid, "/resize")};
    _cleanup_free_ char *out_path = cli_process_path(id, pid, "/output");
    cli_catch_signals();
    cli_catch_signal(SIGWINCH);
    brig_async_stream(sh.async, out_path, on_output, &sh, on_output_end, &sh);

    struct termios raw = saved;
    cfmakeraw(&raw);
    tcsetattr(0, TCSADRAIN, &raw);
    int stopped = shell_loop(&sh, &err);
    tcsetattr(0, TCSADRAIN, &saved); /* every way out of the loop passes here */

    brig_async_free(sh.async);
    int code;
    if (stopped > 0 || stopped < 0 || sh.exit == NULL) {
        /* the session ends without its process: hang it up, as a terminal would */
        _cleanup_free_ char *sig_path = cli_process_path(id, pid, "/signal");
        json_t *body = json_pack("{s:s}", "signal", "SIGHUP");
        brig_client_call(c, "POST", sig_path, body, HANGUP_TIMEOUT_MS, NULL, NULL);
        json_decref(body);
    }
    if (stopped > 0) {
        fprintf(stderr, "brig: interrupted (%s); sent SIGHUP to process %s\n", strsignal(stopped),
                pid);
        code = 128 + stopped;
    } else if (stopped < 0) {
        code = cli_fail(&err);
    } else if (sh.exit != NULL) {
        code = cli_exit_code(sh.exit);
        if (code < 0)
            code = CLI_EXIT_FAIL;
    } else {
        if (sh.output_err == NULL)
            brig_error_set(&sh.output_err, BRIG_E_PROTOCOL, 0,
                           "the output stream from brigd ended before the process exited");
        if (sh.stdin_err != NULL)
            fprintf(stderr, "brig: %s\n", sh.stdin_err->msg);
        code = cli_fail(&sh.output_err);
    }
    json_decref(sh.exit);
    brig_error_clear(&sh.output_err);
    brig_error_clear(&sh.stdin_err);
    brig_buf_dispose(&sh.pending);
    free(sh.stdin_path);
    free(sh.resize_path);
    return code;
}
