/*
 * e2b_watch.c - envd's WatchDir (files.watchDir), by polling: brigd lists the directory
 * (and, recursive, its subdirectories) through the agent every WATCH_POLL_MS and sends what
 * changed since the last listing as envd's events: a new path is CREATE, a gone one REMOVE,
 * a changed size or modification time WRITE, changed permissions CHMOD.  What polling
 * cannot tell (docs/e2b.md): a rename is a REMOVE and a CREATE, and several changes of one
 * file between two listings are one event.  The sandbox is borrowed for each listing only,
 * so a watch neither keeps it from its idle timeout nor from its end (the stream then ends
 * with an error, as envd's does when its sandbox goes).
 *
 * Its polling form (CreateWatcher, GetWatcherEvents, RemoveWatcher: E2B's Python SDK) keeps
 * a watcher's last listing here, in memory, and answers what changed since at each
 * GetWatcherEvents; a watcher goes with RemoveWatcher, its sandbox's end, or brigd.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/id.h"
#include "e2b.h"
#include "handlers.h"
#include "sandbox/registry.h"
#include "sandbox/spares.h"
#include "util.h"
#include "vault/redact.h"

#define WATCH_POLL_MS     200
#define WATCH_DEPTH_MAX   16   /* recursive: levels below the watched directory */
#define WATCH_ENTRIES_MAX 4096 /* a listing larger than this ends the watch */
#define WATCHERS_MAX      64   /* polling watchers per sandbox */

typedef struct e2b_watch {
    struct e2b_watch *next; /* the polling form's list */
    char wid[BRIG_ID_MAX];  /* the polling form's watcher id */
    bool busy;              /* a GetWatcherEvents is listing it */
    json_t *collect;        /* the polling form: events appended here, not sent */
    brigd *d;
    brig_caller caller;
    char id[BRIG_ID_MAX];
    char *path; /* the watched directory, absolute */
    bool recursive;
    int client_fd;
    int keepalive_ms;
    int64_t quiet_ms;   /* since the last envelope sent */
    json_t *seen;       /* relative path -> [type, size, mtime, mode] of the last listing */
    brig_redactor *red; /* the sandbox's secrets, redacted out of the names sent */
    brig_buf out;
    size_t off;
    bool done;
} e2b_watch;

/* Adds the entries of dir (rel: its path below the watched one, "" for that one) to snap,
 * and those of its subdirectories down to depth levels. */
static int list_into(e2b_watch *w, brig_sandbox *sb, const char *dir, const char *rel, int depth,
                     json_t *snap, brig_error **err)
{
    int fd = brig_sandbox_connect(w->d, sb, err);
    if (fd < 0)
        return -1;
    brig_agentc_set_timeout(fd, API_CALL_MS);
    json_t *entries = NULL, *e;
    int rc = brig_agentc_list_dir(fd, dir, &entries, err);
    close(fd);
    size_t i;
    json_array_foreach(entries, i, e)
    {
        if (rc < 0)
            break;
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *type = json_string_value(json_object_get(e, "type"));
        if (name == NULL || type == NULL)
            continue;
        if (json_object_size(snap) >= WATCH_ENTRIES_MAX) {
            rc = brig_error_set(err, BRIG_E_INVALID, 0,
                                "more than %d entries to watch: watch a smaller directory",
                                WATCH_ENTRIES_MAX);
            break;
        }
        char *sub = brig_asprintf("%s%s%s", rel, *rel ? "/" : "", name);
        json_object_set_new(snap, sub,
                            json_pack("[s, O?, O?, O?]", type, json_object_get(e, "size"),
                                      json_object_get(e, "mtime"), json_object_get(e, "mode")));
        if (strcmp(type, "dir") == 0 && w->recursive && depth > 1) {
            char *path = brig_asprintf("%s%s%s", dir, strcmp(dir, "/") == 0 ? "" : "/", name);
            rc = list_into(w, sb, path, sub, depth - 1, snap, err);
            free(path);
        }
        free(sub);
    }
    json_decref(entries);
    return rc;
}

/* The directory's entries now (NULL and *err when the sandbox or the directory is gone). */
static json_t *snapshot(e2b_watch *w, brig_error **err)
{
    brig_sandbox *sb = NULL;
    if (brig_sandbox_get(w->d, &w->caller, w->id, &sb, err) < 0)
        return NULL;
    json_t *snap = json_object();
    if (list_into(w, sb, w->path, "", WATCH_DEPTH_MAX + 1, snap, err) < 0) {
        json_decref(snap);
        snap = NULL;
    }
    brig_sandbox_put(w->d, sb);
    return snap;
}

static void fs_event(e2b_watch *w, const char *name, const char *type)
{
    json_t *ev = json_pack("{s:s, s:s}", "name", name, "type", type);
    brig_redact_json(w->red, ev);
    if (w->collect)
        json_array_append_new(w->collect, ev);
    else
        e2b_envelope(&w->out, 0, json_pack("{s:o}", "filesystem", ev));
}

/* What changed from w->seen to now, as events; now becomes w->seen. */
static void diff(e2b_watch *w, json_t *now)
{
    const char *k;
    json_t *v;
    json_object_foreach(w->seen, k, v) if (!json_object_get(now, k))
        fs_event(w, k, "EVENT_TYPE_REMOVE");
    json_object_foreach(now, k, v)
    {
        json_t *was = json_object_get(w->seen, k);
        if (was == NULL || !json_equal(json_array_get(was, 0), json_array_get(v, 0))) {
            if (was)
                fs_event(w, k, "EVENT_TYPE_REMOVE"); /* replaced by another kind */
            fs_event(w, k, "EVENT_TYPE_CREATE");
            continue;
        }
        /* a directory's own size and time change with its entries, which have their events */
        bool dir = strcmp(json_string_value(json_array_get(v, 0)), "dir") == 0;
        if (!dir && (!json_equal(json_array_get(was, 1), json_array_get(v, 1)) ||
                     !json_equal(json_array_get(was, 2), json_array_get(v, 2))))
            fs_event(w, k, "EVENT_TYPE_WRITE");
        if (!json_equal(json_array_get(was, 3), json_array_get(v, 3)))
            fs_event(w, k, "EVENT_TYPE_CHMOD");
    }
    json_decref(w->seen);
    w->seen = now;
}

/* One poll: the client's hang-up (-1), or the changes since the last one, or a keepalive. */
static int step(e2b_watch *w)
{
    struct pollfd p = {w->client_fd, POLLRDHUP, 0};
    int n = w->client_fd >= 0 ? poll(&p, 1, WATCH_POLL_MS) : (usleep(WATCH_POLL_MS * 1000), 0);
    if (n < 0)
        return errno == EINTR ? 0 : -1;
    if (n > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
        return -1;
    brig_error *err = NULL;
    json_t *now = snapshot(w, &err);
    if (now == NULL) {
        e2b_stream_end(&w->out, 503, err->msg);
        brig_error_clear(&err);
        w->done = true;
        return 0;
    }
    diff(w, now);
    w->quiet_ms = w->out.len ? 0 : w->quiet_ms + WATCH_POLL_MS;
    if (w->quiet_ms >= w->keepalive_ms) {
        e2b_envelope(&w->out, 0, json_pack("{s:{}}", "keepalive"));
        w->quiet_ms = 0;
    }
    return 0;
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    e2b_watch *w = cls;
    while (w->off >= w->out.len) {
        if (w->done)
            return MHD_CONTENT_READER_END_OF_STREAM;
        w->out.len = 0;
        w->off = 0;
        if (step(w) < 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = w->out.len - w->off < max ? w->out.len - w->off : max;
    memcpy(buf, w->out.data + w->off, n);
    w->off += n;
    return (ssize_t)n;
}

static void watch_free(void *cls)
{
    e2b_watch *w = cls;
    json_decref(w->seen);
    brig_redactor_free(w->red);
    brig_buf_dispose(&w->out);
    free(w->path);
    free(w);
}

/* The watched path: a directory, or the stream's error; the sandbox's redactor. */
static int watched_dir(e2b_watch *w, brig_error **err)
{
    brig_sandbox *sb = NULL;
    if (brig_sandbox_get(w->d, &w->caller, w->id, &sb, err) < 0)
        return -1;
    json_t *e = NULL;
    int fd = brig_sandbox_redactor(w->d, sb, &w->red, err) < 0
                 ? -1
                 : brig_sandbox_connect(w->d, sb, err);
    int rc = fd < 0 ? -1 : brig_agentc_stat(fd, w->path, &e, err);
    if (fd >= 0)
        close(fd);
    brig_sandbox_put(w->d, sb);
    const char *type = json_string_value(json_object_get(e, "type"));
    if (rc == 0 && (type == NULL || strcmp(type, "dir") != 0))
        rc = brig_error_set(err, BRIG_E_INVALID, 0, "'%s' is not a directory", w->path);
    json_decref(e);
    return rc;
}

/* The watch the request's message m asks for ({path, recursive}), its first listing taken;
 * NULL and *err when its directory is not one. */
static e2b_watch *watch_new(brig_req *r, json_t *m, brig_error **err)
{
    e2b_watch *w = brig_xcalloc(1, sizeof(*w));
    w->d = r->d;
    w->caller = r->caller;
    snprintf(w->id, sizeof(w->id), "%.*s", (int)sizeof(w->id) - 1, r->params[0]);
    w->path = e2b_abs_path(r, json_string_value(json_object_get(m, "path")), err);
    w->recursive = json_is_true(json_object_get(m, "recursive"));
    if (w->path == NULL || watched_dir(w, err) < 0 || (w->seen = snapshot(w, err)) == NULL) {
        watch_free(w);
        return NULL;
    }
    return w;
}

/* The watch a request asks for, or NULL when it was answered already (its message did not
 * parse, or the watch was refused: as a stream's error, or as an HTTP one). */
static e2b_watch *watch_of(brig_req *r, bool stream)
{
    json_t *m = e2b_rpc_message(r, stream);
    if (m == NULL)
        return NULL;
    brig_error *err = NULL;
    e2b_watch *w = watch_new(r, m, &err);
    json_decref(m);
    if (w == NULL && stream)
        e2b_stream_fail(r, err);
    else if (w == NULL)
        brig_http_error(r, err);
    return w;
}

void e2b_fs_watch_dir(brig_req *r)
{
    e2b_watch *w = watch_of(r, true);
    if (w == NULL)
        return;
    w->client_fd = e2b_client_fd(r);
    w->keepalive_ms = e2b_keepalive_ms(r);
    e2b_envelope(&w->out, 0, json_pack("{s:{}}", "start"));
    struct MHD_Response *resp =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader, w, watch_free);
    MHD_add_response_header(resp, "Content-Type", "application/connect+json");
    brig_http_response(r, 200, resp);
}

/* ---- the polling form ----------------------------------------------------------------------- */

static pthread_mutex_t watchers_lock = PTHREAD_MUTEX_INITIALIZER;
static e2b_watch *watchers;

/* Drops the watchers of sandboxes no longer listed (not one being listed).  Under the lock. */
static void watchers_prune(brigd *d)
{
    for (e2b_watch **p = &watchers; *p;) {
        brig_sandbox *sb = (*p)->busy ? NULL : brig_registry_ref_id(d, (*p)->id);
        if (sb || (*p)->busy) {
            if (sb)
                brig_sandbox_unref(d, sb);
            p = &(*p)->next;
            continue;
        }
        e2b_watch *gone = *p;
        *p = gone->next;
        watch_free(gone);
    }
}

void e2b_fs_create_watcher(brig_req *r)
{
    e2b_watch *w = watch_of(r, false);
    if (w == NULL)
        return;
    brig_id_new("wch", w->wid);
    pthread_mutex_lock(&watchers_lock);
    watchers_prune(r->d);
    int n = 0;
    for (e2b_watch *e = watchers; e; e = e->next)
        n += strcmp(e->id, w->id) == 0;
    if (n < WATCHERS_MAX) {
        w->next = watchers;
        watchers = w;
    }
    pthread_mutex_unlock(&watchers_lock);
    if (n >= WATCHERS_MAX) {
        watch_free(w);
        brig_http_fail(r, BRIG_E_LIMIT, "a sandbox has at most %d watchers", WATCHERS_MAX);
        return;
    }
    brig_http_json(r, 200, json_pack("{s:s}", "watcherId", w->wid));
}

/* The request's watcher of its sandbox, taken (busy) or unlinked (remove); NULL replied. */
static e2b_watch *watcher_take(brig_req *r, bool remove)
{
    json_t *m = e2b_rpc_message(r, false);
    if (m == NULL)
        return NULL;
    const char *wid = json_string_value(json_object_get(m, "watcherId"));
    e2b_watch *w = NULL;
    bool busy = false;
    pthread_mutex_lock(&watchers_lock);
    for (e2b_watch **p = &watchers; *p && wid; p = &(*p)->next) {
        if (strcmp((*p)->wid, wid) != 0 || strcmp((*p)->id, r->params[0]) != 0)
            continue;
        busy = (*p)->busy;
        if (!busy) {
            w = *p;
            w->busy = true;
            if (remove)
                *p = w->next;
        }
        break;
    }
    pthread_mutex_unlock(&watchers_lock);
    if (w == NULL)
        brig_http_fail(r, busy ? BRIG_E_CONFLICT : BRIG_E_NOT_FOUND,
                       busy ? "watcher '%.40s' is being read already" : "no watcher '%.40s'",
                       wid ? wid : "");
    json_decref(m);
    return w;
}

void e2b_fs_get_watcher_events(brig_req *r)
{
    e2b_watch *w = watcher_take(r, false);
    if (w == NULL)
        return;
    brig_error *err = NULL;
    json_t *now = snapshot(w, &err), *events = json_array();
    if (now) {
        w->collect = events;
        diff(w, now);
        w->collect = NULL;
    }
    pthread_mutex_lock(&watchers_lock);
    w->busy = false;
    for (e2b_watch **p = &watchers; *p && now == NULL; p = &(*p)->next)
        if (*p == w) { /* its sandbox or directory is gone: so is the watcher */
            *p = w->next;
            break;
        }
    pthread_mutex_unlock(&watchers_lock);
    if (now) {
        brig_http_json(r, 200, json_pack("{s:o}", "events", events));
        return;
    }
    json_decref(events);
    watch_free(w);
    brig_http_error(r, err);
}

void e2b_fs_remove_watcher(brig_req *r)
{
    e2b_watch *w = watcher_take(r, true);
    if (w == NULL)
        return;
    watch_free(w);
    brig_http_json(r, 200, json_object());
}
