/*
 * build.c - template builds in the background (see build.h).
 *
 * Each build has a supervising thread: it reads the builder's output until the
 * pipe's end, collects the builder's exit status (brig_proc_wait) and records the
 * end.  The thread is joined when its record is dropped (trim) or at shutdown
 * (brig_builds_stop), never by the thread that ended, so a record outlives its
 * thread and a joiner never waits long: a record that is no longer running has
 * left its thread's last critical section.
 */
#include "build.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/id.h"
#include "log.h"
#include "runtime/spawn.h"
#include "template.h"

struct brig_build {
    brig_builds *bs; /* whose lock guards every field below but the constants */
    char id[BRIG_ID_MAX];
    char account[BRIG_ID_MAX]; /* "" for the operator's builds */
    char template[64];
    char key[17];
    char sandbox[BRIG_ID_MAX]; /* a user's build: its sandbox ("" until made) */
    brig_build_state state;
    char *error;    /* failed: why (owned) */
    int error_kind; /* failed: a brig_err_kind */
    json_t *result; /* a user's build: its outcome (owned; NULL: none) */
    int64_t started_ms, ended_ms, ended_mono;
    pid_t pid;    /* the builder, leader of its process group; 0 once it ended */
    int out_fd;   /* read end of its stdout+stderr: the thread's alone */
    brig_buf log; /* output bytes [log_base, log_base + log.len) */
    uint64_t log_base;
    pthread_t thread;
    bool joinable; /* thread not joined yet */
    int refs;      /* the registry's (while listed) and lookups' */
    brig_build *next;
};

struct brig_builds {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* (monotonic) output arrived, or a build ended */
    brig_build *list;    /* newest first */
    bool stopping;       /* shutdown: no new builds; running ones were signalled */
};

const char *brig_build_state_name(brig_build_state s)
{
    switch (s) {
    case BRIG_BUILD_RUNNING:
        return "running";
    case BRIG_BUILD_SUCCEEDED:
        return "succeeded";
    case BRIG_BUILD_FAILED:
        break;
    }
    return "failed";
}

void brig_builds_init(brigd *d)
{
    brig_builds *bs = brig_xcalloc(1, sizeof(*bs));
    pthread_mutex_init(&bs->lock, NULL);
    brig_cond_init_mono(&bs->cond);
    d->builds = bs;
}

/* Frees b when its last reference goes.  Caller holds the lock. */
static void unref_locked(brig_build *b)
{
    if (--b->refs > 0)
        return;
    free(b->error);
    json_decref(b->result);
    brig_buf_dispose(&b->log);
    free(b);
}

void brig_build_put(brig_build *b)
{
    if (b == NULL)
        return;
    brig_builds *bs = b->bs;
    pthread_mutex_lock(&bs->lock);
    unref_locked(b);
    pthread_cond_broadcast(&bs->cond); /* brig_builds_stop may wait for the last follower */
    pthread_mutex_unlock(&bs->lock);
}

/* Joins a record's thread: it has ended (state is not running), or is about to. */
static void join_locked(brig_build *b)
{
    if (b->joinable && b->state != BRIG_BUILD_RUNNING) {
        pthread_join(b->thread, NULL);
        b->joinable = false;
    }
}

/* How many finished records of b's account are newer than b. */
static int newer_locked(brig_builds *bs, const brig_build *b)
{
    int n = 0;
    for (const brig_build *o = bs->list; o != b; o = o->next)
        n += o->state != BRIG_BUILD_RUNNING && strcmp(o->account, b->account) == 0;
    return n;
}

/* Drops finished records beyond BRIG_BUILD_KEEP (per account), BRIG_BUILD_KEEP_ALL (in
 * all: each holds up to BRIG_BUILD_LOG_MAX of log) or older than BRIG_BUILD_KEEP_MS. */
static void trim_locked(brig_builds *bs)
{
    int64_t now = brig_now_mono_ms();
    int kept = 0;
    for (brig_build **pp = &bs->list; *pp;) {
        brig_build *b = *pp;
        if (b->state == BRIG_BUILD_RUNNING ||
            (newer_locked(bs, b) < BRIG_BUILD_KEEP && ++kept <= BRIG_BUILD_KEEP_ALL &&
             now - b->ended_mono < BRIG_BUILD_KEEP_MS)) {
            pp = &b->next;
            continue;
        }
        *pp = b->next;
        join_locked(b);
        unref_locked(b);
    }
}

/* Keeps the newest output: past BRIG_BUILD_LOG_MAX the oldest half goes. */
static void log_append_locked(brig_build *b, const char *p, size_t n)
{
    brig_buf_append(&b->log, p, n);
    if (b->log.len <= BRIG_BUILD_LOG_MAX)
        return;
    size_t drop = b->log.len - BRIG_BUILD_LOG_MAX / 2;
    memmove(b->log.data, b->log.data + drop, b->log.len - drop);
    b->log.len -= drop;
    b->log.data[b->log.len] = '\0';
    b->log_base += drop;
}

/* The last non-empty line of the output (at most 300 bytes of it), for the error. */
static char *last_line_locked(const brig_build *b)
{
    size_t end = b->log.len;
    while (end > 0 && (b->log.data[end - 1] == '\n' || b->log.data[end - 1] == '\r'))
        end--;
    size_t start = end;
    while (start > 0 && b->log.data[start - 1] != '\n' && end - start < 300)
        start--;
    return brig_utf8_display(b->log.data ? b->log.data + start : "", end - start);
}

static void *supervise(void *arg)
{
    brig_build *b = arg;
    brig_builds *bs = b->bs;
    char buf[8192];
    for (;;) {
        ssize_t n = read(b->out_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        pthread_mutex_lock(&bs->lock);
        log_append_locked(b, buf, (size_t)n);
        pthread_cond_broadcast(&bs->cond);
        pthread_mutex_unlock(&bs->lock);
    }
    close(b->out_fd);
    b->out_fd = -1;
    int st = brig_proc_wait(b->pid);
    char how[64];
    brig_proc_describe(st, how, sizeof(how));
    pthread_mutex_lock(&bs->lock);
    b->pid = 0;
    b->ended_ms = brig_now_real_ms();
    b->ended_mono = brig_now_mono_ms();
    if (st == 0) {
        b->state = BRIG_BUILD_SUCCEEDED;
        brig_info("template %s: build %s succeeded", b->template, b->id);
    } else {
        _cleanup_free_ char *last = last_line_locked(b);
        if (bs->stopping)
            b->error = brig_asprintf("brigd stopped during the build (the builder %s)", how);
        else
            b->error = brig_asprintf("building template %s failed (%s)%s%s", b->template, how,
                                     *last ? ": " : "", last);
        b->state = BRIG_BUILD_FAILED;
        b->error_kind = BRIG_E_INTERNAL;
        brig_warn("template %s: build %s: %s", b->template, b->id, b->error);
    }
    pthread_cond_broadcast(&bs->cond);
    pthread_mutex_unlock(&bs->lock);
    return NULL;
}

/* Spawns the builder for b and its thread.  Caller holds the lock. */
static int launch_locked(brigd *d, brig_build *b, brig_error **err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return brig_error_sys(err, "pipe");
    _cleanup_free_ char *builder = brig_asprintf("%s/build", d->cfg.templates_dir);
    const char *argv[] = {builder, "--cache", d->cfg.template_cache, "--force", b->template, NULL};
    brig_spawn s = {
        .argv = argv, .stdin_fd = -1, .stdout_fd = p[1], .stderr_fd = p[1], .own_group = 1};
    int r = brig_proc_spawn(&s, &b->pid, err);
    close(p[1]);
    if (r < 0) {
        close(p[0]);
        return -1;
    }
    b->out_fd = p[0];
    r = pthread_create(&b->thread, NULL, supervise, b);
    if (r != 0) {
        killpg(b->pid, SIGKILL);
        close(p[0]);
        brig_proc_wait(b->pid);
        return brig_error_set(err, BRIG_E_INTERNAL, r, "start a template build thread");
    }
    b->joinable = true;
    return 0;
}

int brig_build_start(brigd *d, const char *name, brig_build **out, bool *started, brig_error **err)
{
    brig_builds *bs = d->builds;
    *out = NULL;
    *started = false;
    brig_template t;
    if (brig_template_lookup(&d->cfg, name, &t, err) < 0)
        return -1;
    brig_template_dispose(&t);
    pthread_mutex_lock(&bs->lock);
    trim_locked(bs);
    brig_build *b = bs->list;
    while (b && !(b->state == BRIG_BUILD_RUNNING && b->account[0] == '\0' &&
                  strcmp(b->template, t.name) == 0))
        b = b->next;
    int r = 0;
    if (bs->stopping) {
        r = brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "brigd is shutting down");
    } else if (b && strcmp(b->key, t.key) != 0) {
        /* Joining it would give a rootfs of the previous key, which nothing uses. */
        r = brig_error_set(err, BRIG_E_CONFLICT, 0,
                           "template '%s' changed since its build %s started; build it again "
                           "once that one ended",
                           t.name, b->id);
    } else if (b) {
        b->refs++;
        *out = b;
    } else {
        b = brig_xcalloc(1, sizeof(*b));
        b->bs = bs;
        brig_id_new("bld", b->id);
        snprintf(b->template, sizeof(b->template), "%s", t.name);
        memcpy(b->key, t.key, sizeof(b->key));
        b->started_ms = brig_now_real_ms();
        b->out_fd = -1;
        b->refs = 2; /* the registry's and the caller's */
        r = launch_locked(d, b, err);
        if (r < 0) {
            free(b);
        } else {
            b->next = bs->list;
            bs->list = b;
            *out = b;
            *started = true;
            brig_info("template %s: build %s started (key %s)", b->template, b->id, b->key);
        }
    }
    pthread_mutex_unlock(&bs->lock);
    return r;
}

int brig_build_get(brigd *d, const char *account, const char *name, const char *id,
                   brig_build **out, brig_error **err)
{
    brig_builds *bs = d->builds;
    pthread_mutex_lock(&bs->lock);
    trim_locked(bs);
    brig_build *b = bs->list;
    while (b && !(strcmp(b->id, id) == 0 && strcmp(b->template, name) == 0 &&
                  strcmp(b->account, account) == 0))
        b = b->next;
    if (b)
        b->refs++;
    pthread_mutex_unlock(&bs->lock);
    *out = b;
    if (b == NULL)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no build '%.40s' of template '%.40s'", id,
                              name);
    return 0;
}

void brig_build_info_get(brig_build *b, size_t tail_max, brig_build_info *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&b->bs->lock);
    snprintf(out->id, sizeof(out->id), "%s", b->id);
    snprintf(out->template, sizeof(out->template), "%s", b->template);
    memcpy(out->key, b->key, sizeof(out->key));
    snprintf(out->account, sizeof(out->account), "%s", b->account);
    snprintf(out->sandbox, sizeof(out->sandbox), "%s", b->sandbox);
    out->state = b->state;
    out->error = b->error ? brig_xstrdup(b->error) : NULL;
    out->error_kind = b->error_kind;
    out->result = b->result ? json_deep_copy(b->result) : NULL;
    out->started_ms = b->started_ms;
    out->ended_ms = b->ended_ms;
    out->log_bytes = b->log_base + b->log.len;
    if (tail_max > 0 && b->log.len > 0) {
        size_t start = b->log.len > tail_max ? b->log.len - tail_max : 0;
        if (start > 0 || b->log_base > 0) { /* cut: begin at a line's start */
            const char *nl = memchr(b->log.data + start, '\n', b->log.len - start);
            start = nl ? (size_t)(nl + 1 - b->log.data) : b->log.len;
        }
        brig_buf_append(&out->tail, b->log.data + start, b->log.len - start);
    }
    pthread_mutex_unlock(&b->bs->lock);
}

void brig_build_info_dispose(brig_build_info *info)
{
    free(info->error);
    info->error = NULL;
    json_decref(info->result);
    info->result = NULL;
    brig_buf_dispose(&info->tail);
}

bool brig_build_read(brig_build *b, uint64_t *pos, size_t max, int64_t wait_ms, brig_buf *out,
                     uint64_t *dropped)
{
    brig_builds *bs = b->bs;
    struct timespec until = brig_mono_after(wait_ms);
    bool ended = false;
    *dropped = 0;
    pthread_mutex_lock(&bs->lock);
    for (;;) {
        if (*pos < b->log_base) {
            *dropped += b->log_base - *pos;
            *pos = b->log_base;
        }
        uint64_t end = b->log_base + b->log.len;
        if (*pos < end) {
            size_t n = end - *pos < max ? (size_t)(end - *pos) : max;
            brig_buf_append(out, b->log.data + (*pos - b->log_base), n);
            *pos += n;
            break;
        }
        if (b->state != BRIG_BUILD_RUNNING) {
            ended = true;
            break;
        }
        if (wait_ms <= 0 || pthread_cond_timedwait(&bs->cond, &bs->lock, &until) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&bs->lock);
    return ended;
}

/* ---- builds run by a function of brigd's (templates declared by users) ------------- */

typedef struct run_ctx {
    brig_build *b;
    brig_build_fn fn;
    void *arg;
} run_ctx;

static void *run_main(void *arg)
{
    run_ctx *x = arg;
    x->fn(x->b, x->arg); /* ends with brig_build_end: b is not touched after */
    free(x);
    return NULL;
}

int brig_build_run(brigd *d, const char *account, const char *name, const char *key,
                   brig_build_fn fn, void *arg, brig_build **out, brig_error **err)
{
    brig_builds *bs = d->builds;
    *out = NULL;
    brig_build *b = brig_xcalloc(1, sizeof(*b));
    b->bs = bs;
    brig_id_new("bld", b->id);
    snprintf(b->account, sizeof(b->account), "%s", account);
    snprintf(b->template, sizeof(b->template), "%s", name);
    snprintf(b->key, sizeof(b->key), "%s", key);
    b->started_ms = brig_now_real_ms();
    b->out_fd = -1;
    b->refs = 2; /* the registry's and the caller's */
    run_ctx *x = brig_xcalloc(1, sizeof(*x));
    *x = (run_ctx){b, fn, arg};
    pthread_mutex_lock(&bs->lock);
    trim_locked(bs);
    int r = bs->stopping ? brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "brigd is shutting down")
                         : pthread_create(&b->thread, NULL, run_main, x);
    if (r > 0)
        r = brig_error_set(err, BRIG_E_INTERNAL, r, "start a template build thread");
    if (r < 0) {
        free(x);
        free(b);
    } else {
        b->joinable = true;
        b->next = bs->list;
        bs->list = b;
        *out = b;
    }
    pthread_mutex_unlock(&bs->lock);
    return r;
}

void brig_build_log(brig_build *b, const char *p, size_t n)
{
    pthread_mutex_lock(&b->bs->lock);
    log_append_locked(b, p, n);
    pthread_cond_broadcast(&b->bs->cond);
    pthread_mutex_unlock(&b->bs->lock);
}

void brig_build_logf(brig_build *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n > 0)
        brig_build_log(b, s, (size_t)n);
    free(s);
}

void brig_build_set_sandbox(brig_build *b, const char *id)
{
    pthread_mutex_lock(&b->bs->lock);
    snprintf(b->sandbox, sizeof(b->sandbox), "%s", id);
    pthread_mutex_unlock(&b->bs->lock);
}

void brig_build_end(brig_build *b, int error_kind, const char *error, json_t *result)
{
    brig_builds *bs = b->bs;
    pthread_mutex_lock(&bs->lock);
    b->ended_ms = brig_now_real_ms();
    b->ended_mono = brig_now_mono_ms();
    b->state = error ? BRIG_BUILD_FAILED : BRIG_BUILD_SUCCEEDED;
    b->error = error ? brig_xstrdup(error) : NULL;
    b->error_kind = error ? error_kind : 0;
    b->result = result;
    pthread_cond_broadcast(&bs->cond);
    pthread_mutex_unlock(&bs->lock);
}

void brig_build_wait(brig_build *b)
{
    pthread_mutex_lock(&b->bs->lock);
    while (b->state == BRIG_BUILD_RUNNING)
        pthread_cond_wait(&b->bs->cond, &b->bs->lock);
    pthread_mutex_unlock(&b->bs->lock);
}

static bool any_running_locked(brig_builds *bs)
{
    for (brig_build *b = bs->list; b; b = b->next)
        if (b->state == BRIG_BUILD_RUNNING)
            return true;
    return false;
}

/* Whether someone but the registry holds a record (a follower). */
static bool borrowed_locked(brig_builds *bs)
{
    for (brig_build *b = bs->list; b; b = b->next)
        if (b->refs > 1)
            return true;
    return false;
}

static void signal_running_locked(brig_builds *bs, int sig)
{
    for (brig_build *b = bs->list; b; b = b->next)
        if (b->state == BRIG_BUILD_RUNNING && b->pid > 0)
            killpg(b->pid, sig);
}

void brig_builds_stop(brigd *d)
{
    brig_builds *bs = d->builds;
    if (bs == NULL)
        return;
    pthread_mutex_lock(&bs->lock);
    bs->stopping = true;
    if (any_running_locked(bs)) {
        brig_info("stopping the template builds that run");
        signal_running_locked(bs, SIGTERM);
        struct timespec until = brig_mono_after(BRIG_BUILD_STOP_MS);
        bool killed = false;
        while (any_running_locked(bs)) {
            if (killed) {
                pthread_cond_wait(&bs->cond, &bs->lock);
            } else if (pthread_cond_timedwait(&bs->cond, &bs->lock, &until) == ETIMEDOUT) {
                signal_running_locked(bs, SIGKILL);
                killed = true;
            }
        }
    }
    for (brig_build *b = bs->list; b; b = b->next)
        join_locked(b);
    /* A follower still sends the end of its build: it must, before the HTTP server
     * closes every connection.  Its reference goes once MHD sent all of it. */
    struct timespec until = brig_mono_after(BRIG_BUILD_STOP_MS);
    while (borrowed_locked(bs) && pthread_cond_timedwait(&bs->cond, &bs->lock, &until) == 0)
        ;
    pthread_mutex_unlock(&bs->lock);
}

void brig_builds_free(brigd *d)
{
    brig_builds *bs = d->builds;
    if (bs == NULL)
        return;
    brig_builds_stop(d);
    pthread_mutex_lock(&bs->lock);
    while (bs->list) {
        brig_build *b = bs->list;
        bs->list = b->next;
        unref_locked(b);
    }
    pthread_mutex_unlock(&bs->lock);
    pthread_mutex_destroy(&bs->lock);
    pthread_cond_destroy(&bs->cond);
    free(bs);
    d->builds = NULL;
}
