/*
 * api_exec.c - commands and processes: buffered, streamed and background exec,
 * and the per-process routes (list, output, stdin, signal, wait, resize).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "exec_event.h"
#include "sandbox/injection.h"
#include "handlers.h"
#include "sandbox/ends.h"
#include "log.h"
#include "account/quota.h"
#include "validate.h"
#include "vault/redact.h"
#include "stream.h"
#include "vault/vault.h"
/* The memory a buffered exec's output holds: taken from its account's and brigd's
 * budgets (exec_output_budget_per_account, exec_output_budget) as its buffers grow,
 * given back once its answer is sent. */
#define HOLD_FIRST (64 << 10) /* taken before the command runs: its first buffer */

typedef struct output_hold {
    brigd *d;
    char account[BRIG_ID_MAX];
    int64_t held;  /* taken from the budgets */
    int64_t spare; /* of that, not yet in a buffer */
} output_hold;

static bool hold_grow(void *cls, size_t n)
{
    output_hold *h = cls;
    int64_t more = (int64_t)n - h->spare;
    if (more > 0 && brig_quota_take(h->d->exec_output, h->account, more) != BRIG_QUOTA_OK)
        return false;
    h->held += more > 0 ? more : 0;
    h->spare = more > 0 ? 0 : -more;
    return true;
}

static void hold_release(void *cls)
{
    output_hold *h = cls;
    brig_quota_give(h->d->exec_output, h->account, h->held);
    free(h);
}

/* The first part of the hold, or a 429/503 that says whose budget is full. */
static output_hold *hold_take(brig_req *r)
{
    output_hold *h = brig_xcalloc(1, sizeof(*h));
    h->d = r->d;
    snprintf(h->account, sizeof(h->account), "%s", r->caller.account_id);
    brig_quota_result q = brig_quota_take(r->d->exec_output, h->account, HOLD_FIRST);
    if (q == BRIG_QUOTA_OK) {
        h->held = h->spare = HOLD_FIRST;
        return h;
    }
    free(h);
    if (q == BRIG_QUOTA_ACCOUNT)
        brig_http_fail(r, BRIG_E_LIMIT,
                       "the output of this account's buffered commands in flight fills its "
                       "budget (%lld MiB, exec_output_budget_per_account): retry when some have "
                       "ended, or stream the output (Accept: application/x-ndjson)",
                       (long long)(r->d->cfg.output_budget_per_account >> 20));
    else
        brig_http_fail(r, BRIG_E_UNAVAILABLE,
                       "brigd's memory for buffered command output is in use (%lld MiB, "
                       "exec_output_budget): retry shortly, or stream the output "
                       "(Accept: application/x-ndjson)",
                       (long long)(r->d->cfg.output_budget >> 20));
    return NULL;
}

/* The agent's process object as the API shows it: times as ISO 8601, and why it
 * ended (its end recorded in sb's timeline once, sandbox/ends.h). */
static json_t *proc_json(brigd *d, brig_sandbox *sb, json_t *p)
{
    json_t *o = json_deep_copy(p);
    json_object_set_new(o, "started_at", api_time(json_object_get(p, "started_at")));
    json_object_set_new(o, "ended_at", api_time(json_object_get(p, "ended_at")));
    brig_proc_reason(d, sb, o);
    return o;
}

static bool wants_ndjson(brig_req *r)
{
    const char *a = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Accept");
    return a && strstr(a, "application/x-ndjson") != NULL;
}

static int client_fd(brig_req *r)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* Starts a streamed answer on an agent connection whose first message (read
 * here, so errors before the start are ordinary HTTP errors) is expected. */
static void start_stream(brig_req *r, brig_stream *s)
{
    brig_agent_event ev;
    json_t *msg = NULL;
    brig_error *err = NULL;
    if (brig_agentc_next(s->fd, &s->f, &ev, &msg, &err) < 0 || ev != BRIG_EV_MESSAGE) {
        if (err == NULL)
            brig_error_set(&err, BRIG_E_PROTOCOL, 0, "agent sent output before starting");
        else if (err->kind == BRIG_E_NOT_FOUND && s->has_call)
            err->kind = BRIG_E_INVALID; /* exec: a bad cwd */
        brig_stream_free(s);
        brig_http_error(r, err);
        return;
    }
    brig_agent_reply t = brig_agentproto_reply_type(msg);
    if (t == BRIG_REPLY_STARTED) {
        if (s->audit)
            json_object_set(s->audit, "pid", json_object_get(msg, "pid"));
        brig_ndjson_line(
            &s->line, json_pack("{s:s, s:O}", "type", "start", "pid", json_object_get(msg, "pid")));
    } else if (t == BRIG_REPLY_OUTPUT)
        brig_ndjson_line(&s->line, json_deep_copy(msg));
    json_decref(msg);
    /* From here on only poll() waits, so no receive timeout on the agent. */
    brig_agentc_set_timeout(s->fd, 0);
    s->client_fd = client_fd(r);
    brig_http_response(r, 200, brig_stream_response(s));
}

/* Takes red, ev (the timeline's event, recorded at the command's exit) and ends (the
 * credentials for this exec only, ended with the stream). */
static void exec_streamed(brig_req *r, brig_exec_req *req, brig_sandbox *sb, int fd,
                          brig_redactor *red, json_t *ev, json_t *ends)
{
    brig_stream *s = brig_xcalloc(1, sizeof(*s));
    s->grants = ends;
    brig_stream_redact(s, red);
    s->d = r->d;
    s->sb = sb;
    s->fd = fd;
    s->client_fd = -1;
    s->audit = ev;
    s->caller = r->caller;
    s->req = *req; /* takes the stdin buffer */
    memset(req, 0, sizeof(*req));
    brig_sandbox_events(r->d, sb, &s->before);
    brig_error *err = NULL;
    if (brig_agentc_exec_start(&s->call, fd, &s->req, &err) < 0) {
        s->has_call = s->call.has_thread;
        api_exec_event_end(r->d, sb, &r->caller, s->audit, NULL, NULL, NULL, 0, err->msg);
        s->audit = NULL;
        brig_stream_free(s);
        brig_http_error(r, err);
        return;
    }
    s->has_call = true;
    start_stream(r, s);
}

static void exec_background(brig_req *r, brig_exec_req *req, brig_sandbox *sb, int fd, json_t *ev)
{
    brig_exec_result res;
    brig_error *err = NULL;
    brig_rt_events before;
    brig_sandbox_events(r->d, sb, &before);
    int rc = brig_agentc_exec(fd, req, 0, NULL, &res, &err);
    close(fd);
    if (rc == 0) { /* its end is recorded once seen (sandbox/ends.h) */
        json_object_set_new(ev, "pid", json_integer(res.pid));
        brig_bg_started(sb, res.pid, ev, &before);
    }
    api_exec_event_end(r->d, sb, &r->caller, ev, rc < 0 ? NULL : &res, NULL, NULL, 0,
                       rc < 0 ? err->msg : NULL);
    if (rc < 0) {
        brig_sandbox_put(r->d, sb);
        brig_http_error(r, err);
        return;
    }
    brig_exec_result_dispose(&res);
    /* Answer with the whole process object; it exists from "started" on. */
    json_t *reply = NULL;
    int fd2 = brig_sandbox_connect(r->d, sb, &err);
    int ok = fd2 >= 0 && brig_agentc_proc_get(fd2, res.pid, &reply, &err) == 0;
    if (ok) {
        brig_http_json(r, 202, proc_json(r->d, sb, reply));
    } else {
        brig_error_clear(&err);
        brig_http_json(r, 202, json_pack("{s:i, s:b}", "pid", res.pid, "running", 1));
    }
    json_decref(reply);
    if (fd2 >= 0)
        close(fd2);
    brig_sandbox_put(r->d, sb);
}

/* A buffered exec's event: how it ended and why, its output's bytes and redactions. */
static void exec_recorded(brig_req *r, brig_sandbox *sb, json_t *ev, const brig_exec_result *res,
                          const char *reason, const brig_redactor *red, const brig_error *err)
{
    int64_t bytes[2] = {0, 0}, redactions = 0;
    if (res) {
        bytes[0] = (int64_t)res->out.len;
        bytes[1] = (int64_t)res->err.len;
        redactions =
            (int64_t)(brig_redact_count(red, (const uint8_t *)res->out.data, res->out.len) +
                      brig_redact_count(red, (const uint8_t *)res->err.data, res->err.len));
    }
    api_exec_event_end(r->d, sb, &r->caller, ev, res, reason, res ? bytes : NULL, redactions,
                       err ? err->msg : NULL);
}

/* Why a buffered exec ended (sandbox/ends.h).  The limits' counters are read again only
 * for a command that did not exit 0: one that did "exited", whatever they did. */
static const char *exec_reason(brigd *d, brig_sandbox *sb, const brig_rt_events *before,
                               const brig_exec_result *res)
{
    bool clean = res->exit_code == 0 && res->signal == 0 && !res->timed_out;
    brig_rt_events after;
    if (!clean)
        brig_sandbox_events(d, sb, &after);
    return brig_exec_reason(before, clean ? NULL : &after, res->exit_code, res->signal,
                            res->timed_out);
}

/* A buffered exec's answer but its output. */
static json_t *exec_meta(const brig_exec_result *res, const char *reason)
{
    json_t *meta = json_pack("{s:i, s:b, s:I}", "exit_code", res->exit_code, "timed_out",
                             res->timed_out, "duration_ms", (json_int_t)res->duration_ms);
    json_object_set_new(meta, "signal", res->signal ? json_integer(res->signal) : json_null());
    json_object_set_new(meta, "reason", json_string(reason));
    if (res->out_truncated)
        json_object_set_new(meta, "stdout_truncated", json_true());
    if (res->err_truncated)
        json_object_set_new(meta, "stderr_truncated", json_true());
    if (res->budget_exceeded)
        json_object_set_new(meta, "output_budget_exceeded", json_true());
    return meta;
}

/* Takes red and ev; ends (the credentials for this exec only) are ended when the command
 * has, before the answer goes out. */
static void exec_buffered(brig_req *r, brig_exec_req *req, brig_sandbox *sb, int fd,
                          brig_redactor *red, json_t *ev, json_t *ends)
{
    brig_error *err = NULL;
    output_hold *hold = hold_take(r);
    if (hold == NULL) {
        json_decref(ev);
        close(fd);
        brig_injection_end(r->d, sb, ends);
        brig_sandbox_put(r->d, sb);
        brig_redactor_free(red);
        return;
    }
    brig_exec_budget budget = {hold_grow, hold};
    brig_exec_result res;
    brig_rt_events before;
    brig_sandbox_events(r->d, sb, &before);
    int rc = brig_agentc_exec(fd, req, (size_t)r->d->cfg.output_limit_bytes, &budget, &res, &err);
    close(fd);
    brig_injection_end(r->d, sb, ends);
    const char *reason = rc < 0 ? NULL : exec_reason(r->d, sb, &before, &res);
    exec_recorded(r, sb, ev, rc < 0 ? NULL : &res, reason, red, err);
    brig_sandbox_put(r->d, sb);
    if (rc < 0) {
        hold_release(hold);
        brig_redactor_free(red);
        if (err->kind == BRIG_E_PROTOCOL || err->kind == BRIG_E_UNAVAILABLE)
            brig_error_prefix(&err, "sandbox %s", r->params[0]);
        brig_http_error(r, err);
        return;
    }
    json_t *meta = exec_meta(&res, reason);
    /* The answer owns the output, the redactor and the hold from here on. */
    brig_http_response(r, 200, brig_exec_reply_response(meta, &res, red, hold_release, hold));
    brig_exec_result_dispose(&res);
}

void api_exec(brig_req *r)
{
    json_t *body = NULL, *env = NULL, *secrets = NULL, *ends = NULL;
    brig_redactor *red = NULL;
    brig_error *err = NULL;
    brig_exec_req req;
    memset(&req, 0, sizeof(req));
    if (brig_http_body_json(r, &body, &err) < 0 ||
        brig_request_exec(body, r->d->cfg.exec_timeout_default_ms, r->d->cfg.exec_timeout_max_ms,
                          &req, &err) < 0) {
        json_decref(body);
        brig_http_error(r, err);
        return;
    }
    brig_sandbox *sb = NULL;
    int fd = api_open_agent(r, &sb);
    if (fd < 0)
        goto out;
    /* The redactor is the sandbox's own, built once (not per exec). */
    if (brig_sandbox_secrets(r->d, sb, &secrets, &err) < 0 ||
        brig_sandbox_redactor(r->d, sb, &red, &err) < 0 ||
        brig_injection_grant(r->d, sb, json_object_get(body, "credentials"), &ends, &err) < 0) {
        /* Neither the command's env nor the redaction of its output can be right. */
        brig_vault_wipe(secrets);
        close(fd);
        brig_sandbox_put(r->d, sb);
        brig_http_error(r, err);
        goto out;
    }
    json_t *ev = api_exec_event(&req, secrets); /* names only, before env holds values */
    env = brig_injection_command_env(
        r->d, sb, secrets, req.env,
        json_object_get(body, "credentials")); /* injected: placeholders */
    brig_vault_wipe(secrets);
    if (env)
        req.env = env;
    if (req.cwd == NULL && brig_sandbox_spec_of(sb)->workdir[0]) /* its template's */
        req.cwd = brig_sandbox_spec_of(sb)->workdir;
    if (req.background) {
        exec_background(r, &req, sb, fd, ev);
        goto out;
    }
    if (wants_ndjson(r)) {
        exec_streamed(r, &req, sb, fd, red, ev, ends);
        red = NULL; /* the stream owns it, and ends */
        ends = NULL;
        goto out;
    }
    exec_buffered(r, &req, sb, fd, red, ev, ends);
    red = NULL;
out:
    brig_exec_req_dispose(&req);
    brig_redactor_free(red);
    brig_vault_wipe(env);
    json_decref(ends);
    json_decref(body);
}

/* ---- processes --------------------------------------------------------------- */

/* The {pid} path segment; replies 404 when it is not a pid. */
static int path_pid(brig_req *r)
{
    char *end = NULL;
    errno = 0;
    long pid = strtol(r->params[1], &end, 10);
    if (errno || end == r->params[1] || *end || pid < 1 || pid > 0x3fffffff) {
        brig_http_fail(r, BRIG_E_NOT_FOUND, "no process '%.20s'", r->params[1]);
        return -1;
    }
    return (int)pid;
}

void api_proc_list(brig_req *r)
{
    api_call c;
    if (api_call_open(r, &c, API_CALL_MS) < 0)
        return;
    json_t *procs = NULL, *out = NULL;
    int rc = brig_agentc_proc_list(c.fd, &procs, &c.err);
    if (rc == 0) {
        json_t *list = json_array();
        for (size_t i = 0; i < json_array_size(procs); i++)
            json_array_append_new(list, proc_json(r->d, c.sb, json_array_get(procs, i)));
        out = json_pack("{s:o}", "processes", list);
    }
    json_decref(procs);
    api_call_answer(r, &c, rc, 200, out);
}

void api_proc_get(brig_req *r)
{
    api_call c;
    int pid = path_pid(r);
    if (pid < 0 || api_call_open(r, &c, API_CALL_MS) < 0)
        return;
    json_t *proc = NULL;
    int rc = brig_agentc_proc_get(c.fd, pid, &proc, &c.err);
    api_call_answer(r, &c, rc, 200, rc < 0 ? NULL : proc_json(r->d, c.sb, proc));
    json_decref(proc);
}

void api_proc_output(brig_req *r)
{
    int pid = path_pid(r);
    if (pid < 0)
        return;
    const char *f = brig_http_query(r, "follow");
    bool follow = !(f && (strcmp(f, "0") == 0 || strcmp(f, "false") == 0));
    brig_sandbox *sb = NULL;
    int fd = api_open_agent(r, &sb);
    if (fd < 0)
        return;
    brig_error *err = NULL;
    brig_redactor *red = NULL;
    if (brig_sandbox_redactor(r->d, sb, &red, &err) < 0) {
        /* Output read without its secrets could not be redacted. */
        close(fd);
        brig_sandbox_put(r->d, sb);
        brig_http_error(r, err);
        return;
    }
    brig_stream *s = brig_xcalloc(1, sizeof(*s));
    s->d = r->d;
    s->sb = sb;
    s->fd = fd;
    s->client_fd = -1;
    s->proc_pid = pid;
    brig_stream_redact(s, red);
    if (brig_agentc_proc_output(fd, pid, follow, &err) < 0) {
        brig_stream_free(s);
        brig_http_error(r, err);
        return;
    }
    start_stream(r, s);
}

void api_proc_stdin_close(brig_req *r)
{
    api_call c;
    int pid = path_pid(r);
    if (pid < 0 || api_call_open(r, &c, API_CALL_MS) < 0)
        return;
    int rc = brig_agentc_proc_stdin_close(c.fd, pid, &c.err);
    if (rc == 0)
        brig_timeline_record(r->d, c.sb, &r->caller, "process.stdin_close",
                             json_pack("{s:i}", "pid", pid));
    api_call_answer(r, &c, rc, 204, NULL);
}

/* "SIGTERM", "TERM", "term" or "15". */
static int parse_signal(json_t *v)
{
    static const struct {
        const char *name;
        int sig;
    } sigs[] = {
        {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
        {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},
        {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
        {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
        {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
        {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
        {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
        {"PWR", SIGPWR},       {"SYS", SIGSYS},
    };
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        return n >= 1 && n <= 64 ? (int)n : -1;
    }
    const char *s = json_string_value(v);
    if (s == NULL)
        return -1;
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < BRIG_ARRAY_LEN(sigs); i++)
        if (strcasecmp(sigs[i].name, s) == 0)
            return sigs[i].sig;
    return -1;
}

void api_proc_signal(brig_req *r)
{
    static const char *const fields[] = {"signal", NULL};
    int pid = path_pid(r);
    if (pid < 0)
        return;
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    int sig = parse_signal(json_object_get(body, "signal"));
    json_decref(body);
    if (sig < 0) {
        brig_http_fail(r, BRIG_E_INVALID,
                       "'signal' must be a signal name (\"SIGTERM\", \"KILL\") or number 1..64");
        return;
    }
    api_call c;
    if (api_call_open(r, &c, API_CALL_MS) < 0)
        return;
    int rc = brig_agentc_proc_signal(c.fd, pid, sig, &c.err);
    if (rc == 0)
        brig_timeline_record(r->d, c.sb, &r->caller, "process.signal",
                             json_pack("{s:i, s:i, s:s}", "pid", pid, "signal", sig, "name",
                                       sigabbrev_np(sig) ? sigabbrev_np(sig) : "?"));
    api_call_answer(r, &c, rc, 204, NULL);
}

void api_proc_wait(brig_req *r)
{
    static const char *const fields[] = {"timeout", NULL};
    int pid = path_pid(r);
    if (pid < 0)
        return;
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    json_t *to = json_object_get(body, "timeout");
    double secs = to ? json_number_value(to) : 0;
    int bad = to && (!json_is_number(to) || secs < 0 ||
                     secs * 1000 > (double)r->d->cfg.exec_timeout_max_ms);
    json_decref(body);
    if (bad) {
        brig_http_fail(r, BRIG_E_INVALID, "'timeout' must be seconds in [0, %lld] (0: no limit)",
                       (long long)(r->d->cfg.exec_timeout_max_ms / 1000));
        return;
    }
    api_call c;
    if (api_call_open(r, &c, 0) < 0) /* proc_wait sets the timeout of its wait */
        return;
    json_t *proc = NULL;
    int rc = brig_agentc_proc_wait(c.fd, pid, (int64_t)(secs * 1000), &proc, &c.err);
    api_call_answer(r, &c, rc, 200, rc < 0 ? NULL : proc_json(r->d, c.sb, proc));
    json_decref(proc);
}

void api_proc_resize(brig_req *r)
{
    static const char *const fields[] = {"cols", "rows", NULL};
    int pid = path_pid(r);
    if (pid < 0)
        return;
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    json_t *jc = json_object_get(body, "cols"), *jr = json_object_get(body, "rows");
    json_int_t cols = json_integer_value(jc), rows = json_integer_value(jr);
    int bad = !json_is_integer(jc) || !json_is_integer(jr) || cols < 1 || cols > 1000 || rows < 1 ||
              rows > 1000;
    json_decref(body);
    if (bad) {
        brig_http_fail(r, BRIG_E_INVALID, "'cols' and 'rows' must be integers in 1..1000");
        return;
    }
    api_call c;
    if (api_call_open(r, &c, API_CALL_MS) < 0)
        return;
    int rc = brig_agentc_proc_resize(c.fd, pid, (int)cols, (int)rows, &c.err);
    api_call_answer(r, &c, rc, 204, NULL);
}
