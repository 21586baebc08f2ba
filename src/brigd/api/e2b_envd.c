/*
 * e2b_envd.c - E2B's in-sandbox API ("envd", docs/e2b.md) on brigd's listener: a request
 * names its sandbox in E2b-Sandbox-Id and is allowed by that sandbox's access token
 * (X-Access-Token; /health needs none).  Here: that routing, /health, and the Connect
 * protocol's process service (JSON codec only) on brig's agent: Start runs the command as a
 * background process and follows its output, so Start and Connect are one stream, and a
 * client that goes away leaves the command running, as envd does.  Output is redacted like
 * brig's own exec.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "e2b.h"
#include "exec_event.h"
#include "sandbox/ends.h"
#include "stream.h"
#include "validate.h"
#include "vault/redact.h"
#include "vault/vault.h"

#define KEEPALIVE_DEFAULT_S 50

/* ---- routing ------------------------------------------------------------------------------ */

static const char *header(brig_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

/* on_begin of every envd route: the sandbox, its token, its owner as the caller. */
void e2b_envd_begin(brig_req *r)
{
    if (!e2b_enabled(r))
        return;
    const char *id = header(r, "E2b-Sandbox-Id"), *tok = header(r, "X-Access-Token");
    char token[E2B_TOKEN_LEN + 1], by_token[BRIG_ID_MAX];
    brig_caller owner;
    if ((id == NULL || *id == '\0') && e2b_record_by_token(r->d, tok, by_token))
        id = by_token;
    if (id == NULL || *id == '\0' || strlen(id) >= sizeof(r->params[0])) {
        brig_http_fail(r, BRIG_E_INVALID, "envd requests name their sandbox in E2b-Sandbox-Id");
        return;
    }
    /* envd answers 502 for a sandbox that is not there: the SDK's isRunning() says false. */
    if (!e2b_record_get(r->d, id, token, &owner)) {
        brig_http_fail(r, BRIG_E_PROTOCOL, "sandbox '%.40s' is not running", id);
        return;
    }
    snprintf(r->params[0], sizeof(r->params[0]), "%s", id);
    bool ok = tok && strlen(tok) == E2B_TOKEN_LEN && sodium_memcmp(tok, token, E2B_TOKEN_LEN) == 0;
    sodium_memzero(token, sizeof(token));
    if (r->route->handle == e2b_health)
        return; /* no token needed, nothing shown */
    if (!ok) {
        brig_http_fail(r, BRIG_E_UNAUTHORIZED, "wrong or missing X-Access-Token for sandbox '%s'",
                       id);
        return;
    }
    r->caller = owner;
    brig_sandbox *sb = NULL;
    brig_error *err = NULL;
    if (brig_sandbox_get(r->d, &owner, id, &sb, &err) < 0) {
        brig_error_clear(&err);
        brig_http_fail(r, BRIG_E_PROTOCOL, "sandbox '%.40s' is not running", id);
        return;
    }
    brig_sandbox_put(r->d, sb);
    brig_http_admit(r);
}

void e2b_health(brig_req *r)
{
    brig_sandbox *sb = brig_registry_ref_id(r->d, r->params[0]);
    if (sb == NULL) {
        brig_http_fail(r, BRIG_E_PROTOCOL, "sandbox '%.40s' is not running", r->params[0]);
        return;
    }
    brig_sandbox_unref(r->d, sb);
    brig_http_empty(r, 204);
}

json_t *e2b_rpc_message(brig_req *r, bool streaming)
{
    const uint8_t *p = (const uint8_t *)r->body.data;
    size_t n = r->body.len;
    if (streaming) { /* one envelope: flags, a big-endian length, the message */
        uint32_t len =
            n >= 5 ? ((uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4]) : 0;
        if (n < 5 || p[0] != 0 || len != n - 5) {
            brig_http_fail(r, BRIG_E_INVALID,
                           "a streaming call's body is one uncompressed Connect envelope");
            return NULL;
        }
        p += 5;
        n -= 5;
    }
    json_error_t jerr;
    json_t *j = n ? json_loadb((const char *)p, n, 0, &jerr) : json_object();
    if (!json_is_object(j)) {
        json_decref(j);
        brig_http_fail(r, BRIG_E_INVALID, "the message is not a JSON object");
        return NULL;
    }
    return j;
}

void e2b_call_user(brig_req *r, char *out, size_t size)
{
    const char *a = header(r, "Authorization"), *q = brig_http_query(r, "username");
    snprintf(out, size, "user");
    if (q && *q) { /* /files names it in its query */
        snprintf(out, size, "%s", q);
        return;
    }
    if (a == NULL || strncasecmp(a, "Basic ", 6) != 0)
        return;
    unsigned char dec[128];
    size_t n = 0;
    if (sodium_base642bin(dec, sizeof(dec) - 1, a + 6, strlen(a + 6), NULL, &n, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0)
        return;
    dec[n] = '\0';
    char *colon = strchr((char *)dec, ':');
    if (colon)
        *colon = '\0';
    if (dec[0])
        snprintf(out, size, "%s", (char *)dec);
}

/* ---- the stream of a process -------------------------------------------------------------- */

typedef struct e2b_stream {
    brigd *d;
    brig_sandbox *sb; /* borrowed (brig_sandbox_get) until the end */
    int fd;           /* the agent connection following the process */
    int client_fd;
    int pid;
    int keepalive_ms;
    bool pty; /* its output is one stream, sent as "pty" */
    brig_frame f;
    brig_redactor *red;
    brig_redact_stream rs[3];
    brig_buf out; /* envelopes ready to send */
    size_t off;
    bool done;
} e2b_stream;

void e2b_envelope(brig_buf *out, uint8_t flags, json_t *msg)
{
    char *s = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    size_t n = s ? strlen(s) : 0;
    uint8_t h[5] = {flags, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    brig_buf_append(out, h, 5);
    brig_buf_append(out, s ? s : "", n);
    free(s);
}

void e2b_stream_end(brig_buf *out, unsigned status, const char *msg)
{
    json_t *end = msg ? json_pack("{s:{s:s, s:s}}", "error", "code", brig_connect_code(status),
                                  "message", msg)
                      : json_object();
    e2b_envelope(out, 2, end);
}

static void event(brig_buf *out, const char *kind, json_t *body)
{
    e2b_envelope(out, 0, json_pack("{s:{s:o}}", "event", kind, body));
}

static void data_event(e2b_stream *s, int ch, const brig_buf *clean)
{
    if (clean->len == 0)
        return;
    size_t len = sodium_base64_ENCODED_LEN(clean->len, sodium_base64_VARIANT_ORIGINAL);
    char *b64 = brig_xmalloc(len);
    sodium_bin2base64(b64, len, (const unsigned char *)clean->data, clean->len,
                      sodium_base64_VARIANT_ORIGINAL);
    event(&s->out, "data", json_pack("{s:s}", s->pty ? "pty" : ch == 2 ? "stderr" : "stdout", b64));
    free(b64);
}

/* The agent's exit message as envd's end event, then the stream's end. */
static void exit_event(e2b_stream *s, json_t *msg)
{
    int code = (int)json_integer_value(json_object_get(msg, "exit_code"));
    int sig = (int)json_integer_value(json_object_get(msg, "signal"));
    json_t *end = json_pack("{s:b}", "exited", 1);
    char status[64];
    if (sig) {
        const char *name = sig == SIGKILL ? "killed" : sigdescr_np(sig);
        snprintf(status, sizeof(status), "signal: %s", name ? name : "?");
        code = -1;
    } else {
        snprintf(status, sizeof(status), "exit status %d", code);
    }
    json_object_set_new(end, "status", json_string(status));
    if (code != 0) {
        json_object_set_new(end, "exitCode", json_integer(code));
        json_object_set_new(end, "error", json_string(status));
    }
    event(&s->out, "end", end);
    e2b_stream_end(&s->out, 200, NULL);
    s->done = true;
}

static void flush_channels(e2b_stream *s)
{
    for (int c = 1; c < 3; c++) {
        brig_buf clean = {0};
        brig_redact_flush(&s->rs[c], &clean);
        data_event(s, c, &clean);
        brig_buf_dispose(&clean);
    }
}

/* One step: the agent's next frame as envelopes, or a keepalive; -1 when the client left. */
static int step(e2b_stream *s)
{
    struct pollfd p[2] = {{s->fd, POLLIN, 0}, {s->client_fd, POLLRDHUP, 0}};
    int n = poll(p, s->client_fd >= 0 ? 2 : 1, s->keepalive_ms);
    if (n < 0)
        return errno == EINTR ? 0 : -1;
    if (s->client_fd >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
        return -1;
    if (n == 0) {
        event(&s->out, "keepalive", json_object());
        return 0;
    }
    brig_agent_event ev;
    json_t *msg = NULL;
    brig_error *err = NULL;
    if (brig_agentc_next(s->fd, &s->f, &ev, &msg, &err) < 0) {
        brig_sandbox_explain_end(s->d, NULL, brig_sandbox_id(s->sb), &err);
        e2b_stream_end(&s->out, 503, err ? err->msg : "agent connection lost");
        brig_error_clear(&err);
        s->done = true;
        return 0;
    }
    int ch = s->f.hdr.chan == 2 ? 2 : 1;
    brig_buf clean = {0};
    if (ev == BRIG_EV_DATA)
        brig_redact_feed(&s->rs[ch], s->f.payload, s->f.hdr.len, &clean);
    else if (ev == BRIG_EV_EOF)
        brig_redact_flush(&s->rs[ch], &clean);
    data_event(s, ch, &clean);
    brig_buf_dispose(&clean);
    if (ev == BRIG_EV_MESSAGE) {
        flush_channels(s);
        if (brig_agentproto_reply_type(msg) == BRIG_REPLY_EXIT)
            exit_event(s, msg);
        json_decref(msg);
    }
    return 0;
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    e2b_stream *s = cls;
    while (s->off >= s->out.len) {
        if (s->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        s->out.len = 0;
        s->off = 0;
        if (step(s) < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = s->out.len - s->off < max ? s->out.len - s->off : max;
    memcpy(buf, s->out.data + s->off, n);
    s->off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    e2b_stream *s = cls;
    if (s->fd >= 0)
        close(s->fd); /* detaches: the process keeps running */
    for (int i = 0; i < 3; i++)
        brig_redact_dispose(&s->rs[i]);
    brig_redactor_free(s->red);
    if (s->sb)
        brig_sandbox_put(s->d, s->sb);
    brig_frame_dispose(&s->f);
    brig_buf_dispose(&s->out);
    free(s);
}

int e2b_keepalive_ms(brig_req *r)
{
    const char *ka = header(r, "Keepalive-Ping-Interval");
    int secs = ka ? atoi(ka) : KEEPALIVE_DEFAULT_S;
    return (secs > 0 && secs < 3600 ? secs : KEEPALIVE_DEFAULT_S) * 1000;
}

int e2b_client_fd(brig_req *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* A stream that is only its end (an error, with HTTP 200 as Connect wants it). */
static void stream_error(brig_req *r, unsigned status, const char *msg)
{
    brig_buf out = {0};
    e2b_stream_end(&out, status, msg);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(out.len, out.data, MHD_RESPMEM_MUST_COPY);
    brig_buf_dispose(&out);
    MHD_add_response_header(resp, "Content-Type", "application/connect+json");
    brig_http_response(r, 200, resp);
}

void e2b_stream_fail(brig_req *r, brig_error *err)
{
    stream_error(r, (unsigned)brig_error_http_status(err->kind), err->msg);
    brig_error_clear(&err);
}

/* Follows pid of the borrowed sb (taken) from its first output: on fd (taken), or a new one. */
static void follow(brig_req *r, brig_sandbox *sb, int pid, bool pty, int fd)
{
    brig_error *err = NULL;
    brig_redactor *red = NULL;
    if (brig_sandbox_redactor(r->d, sb, &red, &err) < 0 ||
        (fd < 0 && ((fd = brig_sandbox_connect(r->d, sb, &err)) < 0 ||
                    brig_agentc_proc_output(fd, pid, true, &err) < 0))) {
        if (fd >= 0)
            close(fd);
        brig_redactor_free(red);
        brig_sandbox_put(r->d, sb);
        e2b_stream_fail(r, err);
        return;
    }
    brig_agentc_set_timeout(fd, 0); /* only poll() waits from here on */
    e2b_stream *s = brig_xcalloc(1, sizeof(*s));
    s->d = r->d;
    s->sb = sb;
    s->fd = fd;
    s->pid = pid;
    s->pty = pty;
    s->red = red;
    for (int i = 0; i < 3; i++)
        brig_redact_init(&s->rs[i], red);
    s->keepalive_ms = e2b_keepalive_ms(r);
    s->client_fd = e2b_client_fd(r);
    event(&s->out, "start", json_pack("{s:i}", "pid", pid));
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader, s, stream_free);
    MHD_add_response_header(resp, "Content-Type", "application/connect+json");
    brig_http_response(r, 200, resp);
}

/* ---- process.Process ----------------------------------------------------------------------- */

/* The selector {"process":{"pid":N}}; 0 (replied) when it is not one. */
static int selected_pid(brig_req *r, json_t *m, bool streaming)
{
    json_t *sel = json_object_get(m, "process");
    json_t *pid = json_object_get(sel, "pid");
    json_int_t n = json_is_integer(pid)  ? json_integer_value(pid)
                   : json_is_string(pid) ? strtoll(json_string_value(pid), NULL, 10)
                                         : 0;
    if (n >= 1 && n <= 0x7fffffff)
        return (int)n;
    const char *msg = json_object_get(sel, "tag")
                          ? "process tags are not supported by brig: name the process by its pid"
                          : "'process.pid' must be a process id";
    if (streaming)
        stream_error(r, 400, msg);
    else
        brig_http_fail(r, BRIG_E_INVALID, "%s", msg);
    return 0;
}

/* {"pty":{"size":{"cols","rows"}}} of Start and Update (absent: *cols 0). */
static int pty_size(json_t *m, int *cols, int *rows, brig_error **err)
{
    json_t *pty = json_object_get(m, "pty");
    *cols = *rows = 0;
    if (pty == NULL || json_is_null(pty))
        return 0;
    json_t *size = json_object_get(pty, "size");
    json_int_t c = json_integer_value(json_object_get(size, "cols"));
    json_int_t r = json_integer_value(json_object_get(size, "rows"));
    if (c < 1 || c > 1000 || r < 1 || r > 1000)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'pty.size' needs 'cols' and 'rows' in 1..1000");
    *cols = (int)c;
    *rows = (int)r;
    return 0;
}

/* Start's ProcessConfig as brig's exec request (argv owned by the caller). */
static int start_request(brig_req *r, json_t *m, brig_exec_req *req, char *user, size_t size,
                         brig_error **err)
{
    json_t *p = json_object_get(m, "process"), *cmd = json_object_get(p, "cmd");
    json_t *args = json_object_get(p, "args"), *envs = json_object_get(p, "envs");
    json_t *cwd = json_object_get(p, "cwd"), *a;
    size_t i;
    if (pty_size(m, &req->pty_cols, &req->pty_rows, err) < 0)
        return -1;
    if (!json_is_string(cmd) || (args && !json_is_array(args)) || (cwd && !json_is_string(cwd)))
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'process' needs 'cmd' (a string), 'args' (strings), 'cwd' "
                              "(a string)");
    req->argv = json_array();
    json_array_append(req->argv, cmd);
    json_array_foreach(args, i, a)
    {
        if (!json_is_string(a))
            return brig_error_set(err, BRIG_E_INVALID, 0, "'process.args' must be strings");
        json_array_append(req->argv, a);
    }
    if (envs && json_object_size(envs) > 0) {
        if (brig_request_env(envs, err) < 0)
            return -1;
        req->env = envs;
    }
    req->cwd = cwd && *json_string_value(cwd) ? json_string_value(cwd) : NULL;
    e2b_call_user(r, user, size);
    req->user = user;
    const char *t = header(r, "Connect-Timeout-Ms");
    req->timeout_ms = t ? strtoll(t, NULL, 10) : 0; /* the agent kills the process group */
    if (req->timeout_ms < 0)
        req->timeout_ms = 0;
    req->background = req->follow = true; /* output on this connection (older agents: a second) */
    /* A terminal takes its input through SendInput: its stdin stays open. */
    req->stdin_closed = !json_is_true(json_object_get(m, "stdin")) && req->pty_cols == 0;
    return 0;
}

/* Starts req in sb (its env completed with the sandbox's); the pid, or -1.  *out_fd (with a
 * pid): the connection that carries its output (the agent followed it there), or -1. */
static int start_process(brig_req *r, brig_sandbox *sb, brig_exec_req *req, int *out_fd,
                         brig_error **err)
{
    json_t *secrets = NULL;
    int fd = brig_sandbox_connect(r->d, sb, err);
    if (fd < 0 || brig_sandbox_secrets(r->d, sb, &secrets, err) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    json_t *ev = api_exec_event(req, secrets);
    json_t *env = brig_sandbox_command_env(sb, secrets, req->env), *own = req->env;
    brig_vault_wipe(secrets);
    if (env)
        req->env = env;
    brig_rt_events before;
    brig_sandbox_events(r->d, sb, &before);
    brig_exec_result res;
    int rc = brig_agentc_exec(fd, req, 0, NULL, &res, err);
    *out_fd = rc == 0 && res.following ? fd : -1;
    if (*out_fd < 0)
        close(fd);
    req->env = own;
    brig_vault_wipe(env);
    if (rc == 0) {
        json_object_set_new(ev, "pid", json_integer(res.pid));
        brig_bg_started(sb, res.pid, ev, &before);
    }
    api_exec_event_end(r->d, sb, &r->caller, ev, rc < 0 ? NULL : &res, NULL, NULL, 0,
                       rc < 0 ? (*err)->msg : NULL);
    if (rc < 0)
        return -1;
    brig_exec_result_dispose(&res);
    return res.pid;
}

void e2b_proc_start(brig_req *r)
{
    json_t *m = e2b_rpc_message(r, true);
    if (m == NULL)
        return;
    brig_exec_req req;
    memset(&req, 0, sizeof(req));
    char user[64];
    brig_error *err = NULL;
    brig_sandbox *sb = NULL;
    int pid = -1, fd = -1;
    bool req_pty = false;
    if (start_request(r, m, &req, user, sizeof(user), &err) == 0 &&
        brig_sandbox_get(r->d, &r->caller, r->params[0], &sb, &err) == 0) {
        pid = start_process(r, sb, &req, &fd, &err);
        if (pid < 0 && err->kind == BRIG_E_NOT_FOUND)
            err->kind = BRIG_E_INVALID; /* a cwd that is not there */
    }
    req_pty = req.pty_cols > 0;
    json_decref(req.argv);
    req.argv = NULL;
    brig_exec_req_dispose(&req);
    json_decref(m);
    if (pid < 0) {
        if (sb)
            brig_sandbox_put(r->d, sb);
        e2b_stream_fail(r, err);
        return;
    }
    follow(r, sb, pid, req_pty, fd);
}

void e2b_proc_connect(brig_req *r)
{
    json_t *m = e2b_rpc_message(r, true);
    if (m == NULL)
        return;
    int pid = selected_pid(r, m, true);
    json_decref(m);
    brig_sandbox *sb = NULL;
    brig_error *err = NULL;
    if (pid == 0)
        return;
    json_t *proc = NULL;
    int fd = -1;
    if (brig_sandbox_get(r->d, &r->caller, r->params[0], &sb, &err) < 0 ||
        (fd = brig_sandbox_connect(r->d, sb, &err)) < 0 ||
        brig_agentc_proc_get(fd, pid, &proc, &err) < 0) {
        if (fd >= 0)
            close(fd);
        if (sb)
            brig_sandbox_put(r->d, sb);
        e2b_stream_fail(r, err);
        return;
    }
    close(fd);
    bool pty = json_is_true(json_object_get(proc, "pty"));
    json_decref(proc);
    follow(r, sb, pid, pty, -1);
}

/* A process object of the agent as envd's ProcessInfo. */
static json_t *process_info(json_t *p)
{
    json_t *argv = json_object_get(p, "argv"), *args = json_array();
    const char *cmd = json_string_value(json_array_get(argv, 0));
    for (size_t i = 1; i < json_array_size(argv); i++)
        json_array_append(args, json_array_get(argv, i));
    if (cmd == NULL) { /* a shell command of brig's own API */
        json_array_append_new(args, json_string("-c"));
        json_array_append(args, json_object_get(p, "cmd"));
        cmd = "/bin/sh";
    }
    return json_pack("{s:{s:s, s:o, s:{}}, s:O}", "config", "cmd", cmd, "args", args, "envs", "pid",
                     json_object_get(p, "pid"));
}

void e2b_proc_list(brig_req *r)
{
    json_t *m = e2b_rpc_message(r, false);
    if (m == NULL)
        return;
    json_decref(m);
    api_call c;
    if (api_call_open(r, &c, API_CALL_MS) < 0)
        return;
    json_t *procs = NULL, *out = NULL, *p;
    int rc = brig_agentc_proc_list(c.fd, &procs, &c.err);
    if (rc == 0) {
        json_t *list = json_array();
        size_t i;
        json_array_foreach(procs, i, p) if (json_is_true(json_object_get(p, "running")))
            json_array_append_new(list, process_info(p));
        out = json_pack("{s:o}", "processes", list);
    }
    json_decref(procs);
    api_call_answer(r, &c, rc, 200, out);
}

void e2b_proc_signal(brig_req *r)
{
    json_t *m = e2b_rpc_message(r, false);
    if (m == NULL)
        return;
    int pid = selected_pid(r, m, false);
    json_t *js = json_object_get(m, "signal"); /* the enum's name, or its number */
    const char *name = json_string_value(js);
    json_int_t num = json_integer_value(js);
    int sig = (name && strcmp(name, "SIGNAL_SIGKILL") == 0) || num == SIGKILL   ? SIGKILL
              : (name && strcmp(name, "SIGNAL_SIGTERM") == 0) || num == SIGTERM ? SIGTERM
                                                                                : 0;
    json_decref(m);
    if (pid == 0)
        return;
    if (sig == 0) {
        brig_http_fail(r, BRIG_E_INVALID, "'signal' must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
        return;
    }
    api_call c;
    if (api_call_open(r, &c, API_CALL_MS) < 0)
        return;
    int rc = brig_agentc_proc_signal(c.fd, pid, sig, &c.err);
    if (rc == 0)
        brig_timeline_record(r->d, c.sb, &r->caller, "process.signal",
                             json_pack("{s:i, s:i, s:s}", "pid", pid, "signal", sig, "name",
                                       sig == SIGKILL ? "KILL" : "TERM"));
    if (rc < 0 && c.err->kind == BRIG_E_INVALID) /* it has exited: kill() says false */
        c.err->kind = BRIG_E_NOT_FOUND;
    api_call_answer(r, &c, rc, 200, rc < 0 ? NULL : json_object());
}

void e2b_proc_input(brig_req *r)
{
    json_t *m = e2b_rpc_message(r, false);
    if (m == NULL)
        return;
    int pid = selected_pid(r, m, false);
    json_t *in = json_object_get(m, "input");
    const char *b64 = json_string_value(json_object_get(in, "stdin"));
    if (b64 == NULL && pid)
        b64 = json_string_value(json_object_get(in, "pty"));
    size_t cap = b64 ? strlen(b64) : 0, n = 0;
    unsigned char *bytes = brig_xmalloc(cap + 1);
    bool bad = b64 == NULL || sodium_base642bin(bytes, cap + 1, b64, cap, NULL, &n, NULL,
                                                sodium_base64_VARIANT_ORIGINAL) != 0;
    json_decref(m);
    api_call c;
    if (pid == 0 ||
        (bad && (brig_http_fail(r, BRIG_E_INVALID, "'input.stdin' must be base64 bytes"), true)) ||
        api_call_open(r, &c, API_CALL_MS) < 0) {
        free(bytes);
        return;
    }
    int rc = brig_agentc_proc_stdin_begin(c.fd, pid, &c.err);
    if (rc == 0 && n)
        rc = brig_agentc_write_chunk(c.fd, bytes, n, &c.err);
    int64_t taken = 0;
    if (rc == 0)
        rc = brig_agentc_write_end(c.fd, &taken, &c.err);
    if (rc == 0)
        brig_timeline_record(r->d, c.sb, &r->caller, "process.stdin",
                             json_pack("{s:i, s:I}", "pid", pid, "bytes", (json_int_t)taken));
    free(bytes);
    api_call_answer(r, &c, rc, 200, rc < 0 ? NULL : json_object());
}

void e2b_proc_close_stdin(brig_req *r)
{
    json_t *m = e2b_rpc_message(r, false);
    if (m == NULL)
        return;
    int pid = selected_pid(r, m, false);
    json_decref(m);
    api_call c;
    if (pid == 0 || api_call_open(r, &c, API_CALL_MS) < 0)
        return;
    int rc = brig_agentc_proc_stdin_close(c.fd, pid, &c.err);
    if (rc == 0)
        brig_timeline_record(r->d, c.sb, &r->caller, "process.stdin_close",
                             json_pack("{s:i}", "pid", pid));
    api_call_answer(r, &c, rc, 200, rc < 0 ? NULL : json_object());
}

/* Update: a terminal's new size. */
void e2b_proc_update(brig_req *r)
{
    json_t *m = e2b_rpc_message(r, false);
    if (m == NULL)
        return;
    int pid = selected_pid(r, m, false), cols = 0, rows = 0;
    brig_error *err = NULL;
    int bad = pid ? pty_size(m, &cols, &rows, &err) : 0;
    json_decref(m);
    if (pid == 0)
        return;
    if (bad < 0 || cols == 0) {
        if (err == NULL)
            brig_error_set(&err, BRIG_E_INVALID, 0, "Update changes a terminal's size only");
        brig_http_error(r, err);
        return;
    }
    api_call c;
    if (api_call_open(r, &c, API_CALL_MS) < 0)
        return;
    int rc = brig_agentc_proc_resize(c.fd, pid, cols, rows, &c.err);
    api_call_answer(r, &c, rc, 200, rc < 0 ? NULL : json_object());
}

/* A call brig does not serve: unimplemented, in a stream's end when it is a streaming call
 * (a stream's HTTP error loses its body: the SDK would only say "HTTP 501"). */
void e2b_rpc_unimplemented(brig_req *r)
{
    static const char msg[] = "this envd call is not supported by brig (docs/e2b.md)";
    const char *ct = header(r, "Content-Type");
    if (ct && strncmp(ct, "application/connect+json", 24) == 0)
        stream_error(r, 501, msg);
    else
        brig_http_json(r, 501, json_pack("{s:s, s:s}", "code", "unimplemented", "message", msg));
}
