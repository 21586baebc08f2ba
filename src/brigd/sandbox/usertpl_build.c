/*
 * usertpl_build.c - building a user's template in a sandbox (see usertpl_build.h).
 */
#include "usertpl_build.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agentc/agentc.h"
#include "build.h"
#include "core/id.h"
#include "log.h"
#include "orchestrator.h"
#include "registry.h"
#include "runtime/layer.h"
#include "spares.h"
#include "store/store.h"
#include "usertpl.h"
#include "usertpl_gc.h"
#include "usertpl_reap.h"
#include "util.h"

/* The builds' sandboxes, so that a stopping brigd can end them (their HTTP requests
 * must end before the HTTP server can stop).  Per process, like the builds. */
#define LIVE_MAX     256
#define STOP_WAIT_MS 30000 /* how long a stopping brigd waits for its builds' requests */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t live_gone = PTHREAD_COND_INITIALIZER;
static char live[LIVE_MAX][BRIG_ID_MAX];
static bool stopping;

/* Lists a build's sandbox: false when brigd stops (or too many build at once). */
static bool live_add(const char *id)
{
    bool ok = false;
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; !stopping && !ok && i < LIVE_MAX; i++)
        if (live[i][0] == '\0') {
            snprintf(live[i], sizeof(live[i]), "%s", id);
            ok = true;
        }
    pthread_mutex_unlock(&live_lock);
    return ok;
}

static void live_remove(const char *id)
{
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < LIVE_MAX; i++)
        if (strcmp(live[i], id) == 0)
            live[i][0] = '\0';
    pthread_cond_broadcast(&live_gone);
    pthread_mutex_unlock(&live_lock);
}

void brig_utpl_builds_stop(brigd *d)
{
    char ids[LIVE_MAX][BRIG_ID_MAX];
    size_t n = 0;
    pthread_mutex_lock(&live_lock);
    stopping = true;
    for (size_t i = 0; i < LIVE_MAX; i++)
        if (live[i][0])
            memcpy(ids[n++], live[i], BRIG_ID_MAX);
    pthread_mutex_unlock(&live_lock);
    for (size_t i = 0; i < n; i++) {
        brig_warn("template build in sandbox %s: stopped with brigd", ids[i]);
        brig_sandbox_stop(d, ids[i], "host_shutdown");
    }
    /* Their requests answer before the HTTP server closes every connection. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += STOP_WAIT_MS / 1000;
    pthread_mutex_lock(&live_lock);
    for (;;) {
        bool any = false;
        for (size_t i = 0; i < LIVE_MAX && !any; i++)
            any = live[i][0] != '\0';
        if (!any || pthread_cond_timedwait(&live_gone, &live_lock, &until) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&live_lock);
}

/* A build on its way. */
typedef struct build {
    brigd *d;
    brig_caller c;   /* a copy: the build outlives its request */
    brig_build *rec; /* its record (build.h): the log, the outcome */
    brig_utpl_spec spec;
    brig_template parent;
    char parent_key[17];
    char key[17];
    brig_sandbox *sb; /* the build's sandbox, borrowed */
    char sbx[BRIG_ID_MAX];
    json_t *steps; /* the log: one object per step */
    int64_t t0;    /* mono ms */
} build;

/* A file of the spec fetched from a sandbox of the caller's (another account's is not
 * found, like one that never existed): its bytes, and its source's mode unless given. */
static int fetch_one(build *b, brig_utpl_file *f, brig_error **err)
{
    brig_sandbox *sb = NULL;
    if (brig_sandbox_get(b->d, &b->c, f->from_sandbox, &sb, err) < 0)
        return -1;
    int64_t size = 0;
    int mode = 0;
    brig_frame fr = {0};
    brig_buf got = {0};
    _cleanup_close_ int fd = brig_sandbox_connect(b->d, sb, err);
    int r = fd < 0 ? -1 : brig_agentc_read_begin(fd, f->source, &size, &mode, err);
    if (r == 0 && size > BRIG_UTPL_FETCH_MAX)
        r = brig_error_set(err, BRIG_E_INVALID, 0, "%s has %lld bytes, more than %lld", f->source,
                           (long long)size, (long long)BRIG_UTPL_FETCH_MAX);
    while (r == 0) {
        r = brig_agentc_read_chunk(fd, &fr, err);
        if (r <= 0) /* the end, or an error */
            break;
        r = 0;
        if (got.len + fr.hdr.len > (size_t)BRIG_UTPL_FETCH_MAX)
            r = brig_error_set(err, BRIG_E_INVALID, 0, "%s grew past %lld bytes", f->source,
                               (long long)BRIG_UTPL_FETCH_MAX);
        else
            brig_buf_append(&got, fr.payload, fr.hdr.len);
    }
    brig_frame_dispose(&fr);
    brig_sandbox_put(b->d, sb);
    if (r < 0) {
        brig_buf_dispose(&got);
        if ((*err)->kind == BRIG_E_NOT_FOUND) /* the sandbox is there: its path is not */
            (*err)->kind = BRIG_E_INVALID;
        return -1;
    }
    f->data = (uint8_t *)got.data;
    f->len = got.len;
    if (f->mode < 0)
        f->mode = mode & 0777;
    brig_utpl_file_hash(f);
    return 0;
}

/* The spec's files from sandboxes, read before the key is known (it hashes their bytes). */
static int fetch_files(build *b, brig_error **err)
{
    for (size_t i = 0; i < b->spec.n_files; i++) {
        brig_utpl_file *f = &b->spec.files[i];
        if (f->from_sandbox && fetch_one(b, f, err) < 0) {
            brig_error_prefix(err, "files[%zu] (from %s:%s)", i, f->from_sandbox, f->source);
            return -1;
        }
    }
    return 0;
}

/* The parent: a built-in template or one of the account's, built. */
static int resolve_parent(build *b, brig_error **err)
{
    brigd *d = b->d;
    const char *from = b->spec.from;
    if (brig_template_lookup(&d->cfg, from, &b->parent, NULL) == 0) {
        memcpy(b->parent_key, b->parent.key, sizeof(b->parent_key));
    } else if (brig_utpl_lookup(d, b->c.account_id, from, &b->parent, NULL, err) == 0) {
        memcpy(b->parent_key, b->parent.key, sizeof(b->parent_key));
    } else {
        (*err)->kind = BRIG_E_INVALID;
        brig_error_prefix(err, "'from'");
        return -1;
    }
    if (!b->parent.built)
        return brig_error_set(err, BRIG_E_CONFLICT, 0, "template '%s' is not built yet", from);
    /* the parent's build (a forced rebuild of a built-in one keeps its key) */
    _cleanup_free_ char *canon = json_dumps(b->spec.canon, JSON_COMPACT | JSON_SORT_KEYS);
    static const char nul = 0;
    const void *parts[] = {canon, &nul, b->parent.build};
    size_t lens[] = {strlen(canon), 1, strlen(b->parent.build)};
    brig_sha256_hex16(parts, lens, 3, b->key);
    return 0;
}

static bool layer_built(build *b, const char *key)
{
    _cleanup_free_ char *dir = brig_utpl_dir(b->d, b->c.account_id, key);
    _cleanup_free_ char *ok = brig_asprintf("%s/ok", dir);
    return access(ok, F_OK) == 0;
}

typedef struct find_q {
    const char *key;
    brig_utpl_row found;
    bool any;
} find_q;

static void find_one(const brig_utpl_row *t, void *arg)
{
    find_q *q = arg;
    if (!q->any && strcmp(t->key, q->key) == 0) {
        q->found = *t;
        q->any = true;
    }
}

static json_t *answer(build *b, bool cached)
{
    json_t *out = NULL;
    _cleanup_free_ char *ref = brig_asprintf("%s:%s", b->spec.name, b->spec.tag);
    if (brig_utpl_get(b->d, b->c.account_id, ref, &out, NULL) < 0)
        out = json_object();
    json_object_set_new(out, "cached", json_boolean(cached));
    return out;
}

/* The same key built before: under this name (nothing to do) or another (named here
 * too, with that build's record).  1 when so. */
static int cache_hit(build *b, brig_error **err)
{
    if (!layer_built(b, b->key))
        return 0;
    find_q q = {.key = b->key};
    brig_utpl_row own;
    int r = brig_store_utpl_get(b->d->store, b->c.account_id, b->spec.name, b->spec.tag, &own, err);
    if (r < 0)
        return -1;
    bool same = r == 1 && strcmp(own.key, b->key) == 0;
    brig_utpl_row_dispose(&own);
    if (same)
        return 1;
    if (brig_store_utpl_each(b->d->store, b->c.account_id, find_one, &q, err) < 0)
        return -1;
    if (!q.any)
        return 0; /* a layer left by a crash: built again */
    brig_utpl_row full;
    if (brig_store_utpl_get(b->d->store, b->c.account_id, q.found.name, q.found.tag, &full, err) !=
        1)
        return -1;
    char old_key[17];
    snprintf(old_key, sizeof(old_key), "%s", r == 1 ? own.key : "");
    snprintf(full.name, sizeof(full.name), "%s", b->spec.name);
    snprintf(full.tag, sizeof(full.tag), "%s", b->spec.tag);
    r = brig_store_utpl_put(b->d->store, &full, err);
    brig_utpl_row_dispose(&full);
    if (r == 0 && old_key[0])
        brig_utpl_gc(b->d, b->c.account_id, old_key);
    return r < 0 ? -1 : 1;
}

typedef struct count_q {
    const char *name, *tag;
    int n;
    bool same; /* name:tag is one of them */
} count_q;

static void count_one(const brig_utpl_row *t, void *arg)
{
    count_q *q = arg;
    q->n++;
    q->same |= strcmp(t->name, q->name) == 0 && strcmp(t->tag, q->tag) == 0;
}

/* An account has at most BRIG_UTPL_PER_ACCOUNT names (each may hold a layer). */
static int room_for(build *b, brig_error **err)
{
    count_q q = {b->spec.name, b->spec.tag, 0, false};
    if (brig_store_utpl_each(b->d->store, b->c.account_id, count_one, &q, err) < 0)
        return -1;
    if (!q.same && q.n >= BRIG_UTPL_PER_ACCOUNT)
        return brig_error_set(err, BRIG_E_LIMIT, 0,
                              "the account has %d templates, the most it may have: delete one "
                              "first",
                              q.n);
    return 0;
}

/* ---- in the sandbox ---------------------------------------------------------------- */

static int put_file(build *b, const brig_utpl_file *f, brig_error **err)
{
    _cleanup_free_ char *dir = brig_xstrdup(f->path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        _cleanup_close_ int fd = brig_sandbox_connect(b->d, b->sb, err);
        if (fd < 0 || brig_agentc_mkdir(fd, dir, 0755, true, err) < 0)
            return -1;
    }
    _cleanup_close_ int fd = brig_sandbox_connect(b->d, b->sb, err);
    if (fd < 0 || brig_agentc_write_begin(fd, f->path, f->mode, err) < 0)
        return -1;
    for (size_t off = 0; off < f->len;) {
        size_t n = f->len - off < 65536 ? f->len - off : 65536;
        if (brig_agentc_write_chunk(fd, f->data + off, n, err) < 0)
            return -1;
        off += n;
    }
    return brig_agentc_write_end(fd, NULL, err);
}

/* "'a' 'b'": each word in single quotes, for sh. */
static char *quoted(json_t *words)
{
    brig_buf q = {0};
    size_t i;
    json_t *w;
    json_array_foreach(words, i, w)
    {
        brig_buf_append(&q, i ? " '" : "'", i ? 2 : 1);
        for (const char *p = json_string_value(w); *p; p++)
            if (*p == '\'')
                brig_buf_append(&q, "'\\''", 4);
            else
                brig_buf_append(&q, p, 1);
        brig_buf_append(&q, "'", 1);
    }
    return q.data ? q.data : brig_xstrdup("");
}

/* apt: `apt-get update` unless every package is a file of the build. */
static char *apt_command(json_t *pkgs)
{
    bool files_only = true;
    size_t i;
    json_t *p;
    json_array_foreach(pkgs, i, p) files_only &= json_string_value(p)[0] == '/';
    _cleanup_free_ char *q = quoted(pkgs);
    return brig_asprintf("export DEBIAN_FRONTEND=noninteractive; %sapt-get install -y "
                         "--no-install-recommends %s && rm -rf /var/lib/apt/lists/*",
                         files_only ? "" : "apt-get update && ", q);
}

/* The last BRIG_UTPL_TAIL bytes of out, as a JSON string (not UTF-8: U+FFFD). */
static json_t *tail_json(const brig_buf *out)
{
    size_t start = out->len > BRIG_UTPL_TAIL ? out->len - BRIG_UTPL_TAIL : 0;
    _cleanup_free_ char *s =
        brig_utf8_display(out->data ? out->data + start : "", out->len - start);
    return json_string(s);
}

/* A step's output as it comes, into the build's log (stderr is in stdout). */
static void tap(void *cls, int chan, const uint8_t *p, size_t n)
{
    (void)chan;
    brig_build_log(cls, (const char *)p, n);
}

/* Runs one step (a shell command, stderr into stdout) and logs it; 1 when it failed. */
static int run_step(build *b, const char *kind, const char *cmd, brig_error **err)
{
    int n = (int)json_array_size(b->steps) + 1;
    brig_build_logf(b->rec, "==> step %d (%s): %s\n", n, kind, cmd);
    _cleanup_free_ char *wrapped = brig_asprintf("exec 2>&1\n%s", cmd);
    json_t *env = json_object_get(b->spec.canon, "env");
    const char *wd = json_string_value(json_object_get(b->spec.canon, "workdir"));
    brig_exec_req req = {.cmd = wrapped,
                         .cwd = wd,
                         .env = json_object_size(env) ? env : NULL,
                         .timeout_ms = BRIG_UTPL_STEP_MS};
    brig_exec_result res = {0};
    int64_t t0 = brig_now_mono_ms();
    _cleanup_close_ int fd = brig_sandbox_connect(b->d, b->sb, err);
    if (fd < 0 || brig_agentc_exec_tap(fd, &req, 1u << 20, NULL, tap, b->rec, &res, err) < 0) {
        brig_exec_result_dispose(&res);
        return -1;
    }
    int code = res.timed_out ? -1 : res.signal ? 128 + res.signal : res.exit_code;
    int64_t ms = brig_now_mono_ms() - t0;
    const char *nl = res.out.len && res.out.data[res.out.len - 1] != '\n' ? "\n" : "";
    brig_build_logf(b->rec, "%s==> step %d: %s %d (%lld ms)\n", nl, n,
                    res.timed_out ? "timed out, exit code" : "exit code", code, (long long)ms);
    json_t *step = json_pack("{s:i, s:s, s:s, s:i, s:b, s:I, s:o}", "step", n, "kind", kind,
                             "command", cmd, "exit_code", code, "timed_out", res.timed_out,
                             "duration_ms", (json_int_t)ms, "output", tail_json(&res.out));
    json_array_append_new(b->steps, step);
    brig_exec_result_dispose(&res);
    return code != 0 ? 1 : 0;
}

/* Every step in order: the files, apt, pip, npm, then run.  1 at the first that failed. */
static int run_steps(build *b, brig_error **err)
{
    json_t *canon = b->spec.canon;
    const char *wd = json_string_value(json_object_get(canon, "workdir"));
    if (wd) {
        _cleanup_close_ int fd = brig_sandbox_connect(b->d, b->sb, err);
        if (fd < 0 || brig_agentc_mkdir(fd, wd, 0755, true, err) < 0)
            return -1;
    }
    for (size_t i = 0; i < b->spec.n_files; i++)
        if (put_file(b, &b->spec.files[i], err) < 0) {
            brig_error_prefix(err, "files[%zu] (%s)", i, b->spec.files[i].path);
            return -1;
        }
    int r = 0;
    json_t *apt = json_object_get(canon, "apt"), *pip = json_object_get(canon, "pip");
    json_t *npm = json_object_get(canon, "npm");
    if (r == 0 && json_array_size(apt)) {
        _cleanup_free_ char *cmd = apt_command(apt);
        r = run_step(b, "apt", cmd, err);
    }
    if (r == 0 && json_array_size(pip)) {
        _cleanup_free_ char *q = quoted(pip);
        _cleanup_free_ char *cmd = brig_asprintf("python3 -m pip install --no-cache-dir %s", q);
        r = run_step(b, "pip", cmd, err);
    }
    if (r == 0 && json_array_size(npm)) {
        _cleanup_free_ char *q = quoted(npm);
        _cleanup_free_ char *cmd =
            brig_asprintf("npm install -g --no-audit --no-fund --no-update-notifier %s", q);
        r = run_step(b, "npm", cmd, err);
    }
    size_t i;
    json_t *cmd;
    json_array_foreach(json_object_get(canon, "run"), i, cmd)
    {
        if (r != 0)
            break;
        r = run_step(b, "run", json_string_value(cmd), err);
    }
    return r;
}

/* The sandbox's writable layer over the parent becomes layer key: built in a temporary
 * directory, published by one rename. */
static int snapshot(build *b, int64_t *size, brig_error **err)
{
    brigd *d = b->d;
    _cleanup_free_ char *top = brig_asprintf("%s/templates", d->cfg.state_dir);
    _cleanup_free_ char *acct = brig_asprintf("%s/%s", top, b->c.account_id);
    _cleanup_free_ char *dir = brig_utpl_dir(d, b->c.account_id, b->key);
    char rnd[BRIG_ID_MAX];
    brig_id_new("tmp", rnd);
    _cleanup_free_ char *tmp = brig_asprintf("%s/.%s-%s", acct, b->key, rnd);
    _cleanup_free_ char *rootfs = brig_asprintf("%s/rootfs", tmp);
    _cleanup_free_ char *ok = brig_asprintf("%s/ok", tmp);
    if ((mkdir(top, 0711) < 0 && errno != EEXIST) || (mkdir(acct, 0711) < 0 && errno != EEXIST) ||
        mkdir(tmp, 0711) < 0)
        return brig_error_sys(err, "mkdir %s", tmp);
    int fd = d->rt->ops->layer_open(d->rt, brig_sandbox_runtime(b->sb), err);
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(b->sb);
    int r = fd < 0 ? -1
                   : brig_layer_flatten(b->parent.rootfs, fd, (unsigned)sp->uid_base,
                                        BRIG_UID_RANGE, rootfs, size, err);
    if (fd >= 0)
        close(fd);
    int okfd = r < 0 ? -1 : open(ok, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (r == 0 && (okfd < 0 || (rename(tmp, dir) < 0 && errno != EEXIST && errno != ENOTEMPTY)))
        r = brig_error_sys(err, "publish %s", dir);
    if (okfd >= 0)
        close(okfd);
    brig_layer_remove(tmp); /* a failure's, or a twin build's that published first */
    return r;
}

/* The template's row: its spec, its steps, who built it. */
static int record(build *b, int64_t size, brig_error **err)
{
    brig_utpl_row row = {
        .size_bytes = size, .build_ms = brig_now_mono_ms() - b->t0, .built_at = brig_now_real_ms()};
    snprintf(row.account_id, sizeof(row.account_id), "%s", b->c.account_id);
    snprintf(row.name, sizeof(row.name), "%s", b->spec.name);
    snprintf(row.tag, sizeof(row.tag), "%s", b->spec.tag);
    memcpy(row.key, b->key, sizeof(row.key));
    snprintf(row.parent, sizeof(row.parent), "%s", b->spec.from);
    memcpy(row.parent_key, b->parent_key, sizeof(row.parent_key));
    snprintf(row.built_by, sizeof(row.built_by), "%s", b->c.key_id);
    brig_utpl_row old;
    int had = brig_store_utpl_get(b->d->store, row.account_id, row.name, row.tag, &old, NULL);
    brig_utpl_row_dispose(&old);
    row.spec = json_dumps(b->spec.canon, JSON_COMPACT | JSON_SORT_KEYS);
    row.log = json_dumps(b->steps, JSON_COMPACT);
    int r = brig_store_utpl_put(b->d->store, &row, err);
    brig_utpl_row_dispose(&row);
    if (r == 0 && had == 1 && strcmp(old.key, b->key) != 0)
        brig_utpl_gc(b->d, b->c.account_id, old.key); /* the name's previous layer */
    return r;
}

/* The failed step's answer. */
static json_t *failure(build *b)
{
    json_t *last = json_array_get(b->steps, json_array_size(b->steps) - 1);
    int step = (int)json_integer_value(json_object_get(last, "step"));
    int code = (int)json_integer_value(json_object_get(last, "exit_code"));
    const char *kind = json_string_value(json_object_get(last, "kind"));
    bool timed_out = json_is_true(json_object_get(last, "timed_out"));
    json_t *err =
        json_pack("{s:s, s:o}", "code", "build_failed", "message",
                  json_sprintf("the template's build failed: step %d (%s) %s %d", step, kind,
                               timed_out ? "timed out, exit code" : "exited with", code));
    json_t *build = json_pack("{s:i, s:s, s:O, s:i, s:O, s:O}", "step", step, "kind", kind,
                              "command", json_object_get(last, "command"), "exit_code", code,
                              "output_tail", json_object_get(last, "output"), "steps", b->steps);
    return json_pack("{s:o, s:o}", "error", err, "build", build);
}

/* The build proper: its sandbox, the steps, the snapshot, the row; the sandbox goes. */
static int build_in_sandbox(build *b, json_t **out, brig_error **err)
{
    brig_sandbox_opts opts = {.template = b->spec.from,
                              .isolation = b->spec.isolation[0] ? b->spec.isolation : NULL,
                              .host_layer = true,
                              .idle_timeout_ms = b->d->cfg.idle_timeout_max_ms,
                              .max_lifetime_ms = b->d->cfg.lifetime_max_ms};
    json_t *sbj = NULL;
    if (brig_sandbox_create(b->d, &b->c, &opts, &sbj, err) < 0) {
        brig_error_prefix(err, "the build's sandbox");
        return -1;
    }
    snprintf(b->sbx, sizeof(b->sbx), "%s", json_string_value(json_object_get(sbj, "id")));
    brig_utpl_build_mark(b->d, b->sbx, true); /* ended at the next start if brigd dies */
    brig_build_set_sandbox(b->rec, b->sbx);
    const char *iso = json_string_value(json_object_get(sbj, "isolation"));
    brig_build_logf(b->rec, "==> sandbox %s of %s (%s)\n", b->sbx, b->spec.from, iso ? iso : "?");
    json_decref(sbj);
    int r = live_add(b->sbx)
                ? 0
                : brig_error_set(err, BRIG_E_UNAVAILABLE, 0,
                                 "brigd is shutting down (or runs %d builds)", LIVE_MAX);
    if (r == 0)
        r = brig_sandbox_get(b->d, &b->c, b->sbx, &b->sb, err);
    if (r == 0)
        r = run_steps(b, err);
    int64_t size = 0;
    if (r == 0)
        r = snapshot(b, &size, err);
    if (r == 0)
        brig_build_logf(b->rec, "==> layer %s: %lld bytes of its own\n", b->key, (long long)size);
    if (b->sb)
        brig_sandbox_put(b->d, b->sb);
    b->sb = NULL;
    brig_sandbox_delete(b->d, &b->c, b->sbx, "deleted_by_api", NULL);
    brig_utpl_build_mark(b->d, b->sbx, false);
    live_remove(b->sbx);
    pthread_mutex_lock(&live_lock);
    bool stopped = stopping;
    pthread_mutex_unlock(&live_lock);
    if (stopped && r != 0) { /* its sandbox was ended under it */
        brig_error_clear(err);
        return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "brigd stopped during the build");
    }
    if (r == 1) {
        *out = failure(b);
        brig_info("template %s:%s: build failed (%s)", b->spec.name, b->spec.tag,
                  json_string_value(json_object_get(json_object_get(*out, "error"), "message")));
        return 1;
    }
    if (r < 0 || record(b, size, err) < 0)
        return -1;
    brig_info("template %s:%s: built (key %s, %lld bytes of its own, %lld ms)", b->spec.name,
              b->spec.tag, b->key, (long long)size, (long long)(brig_now_mono_ms() - b->t0));
    *out = answer(b, false);
    return 0;
}

static void build_dispose(build *b)
{
    brig_template_dispose(&b->parent);
    brig_utpl_spec_dispose(&b->spec);
    json_decref(b->steps);
    free(b);
}

/* The build's thread: its outcome goes into its record, as the last thing. */
static void build_main(brig_build *rec, void *arg)
{
    build *b = arg;
    b->rec = rec;
    json_t *out = NULL;
    brig_error *err = NULL;
    int r = build_in_sandbox(b, &out, &err);
    build_dispose(b);
    if (r < 0)
        brig_build_logf(rec, "==> failed: %s\n", err->msg);
    else if (r == 1)
        brig_build_logf(
            rec, "==> %s\n",
            json_string_value(json_object_get(json_object_get(out, "error"), "message")));
    if (r < 0)
        brig_build_end(rec, err->kind, err->msg, NULL);
    else if (r == 1)
        brig_build_end(rec, BRIG_E_INVALID,
                       json_string_value(json_object_get(json_object_get(out, "error"), "message")),
                       out);
    else
        brig_build_end(rec, 0, NULL, out);
    brig_error_clear(&err);
}

int brig_utpl_build_start(brigd *d, const brig_caller *c, json_t *body, json_t **out,
                          brig_build **rec, brig_error **err)
{
    *out = NULL;
    *rec = NULL;
    if (c->account_id[0] == '\0')
        return brig_error_set(err, BRIG_E_FORBIDDEN, 0,
                              "templates belong to an account: build them with an account's key");
    build *b = brig_xcalloc(1, sizeof(*b));
    *b = (build){.d = d, .c = *c, .t0 = brig_now_mono_ms(), .steps = json_array()};
    int r = brig_utpl_spec_parse(&d->cfg, body, &b->spec, err);
    if (r == 0)
        r = fetch_files(b, err);
    if (r == 0)
        r = resolve_parent(b, err);
    if (r == 0)
        r = room_for(b, err);
    if (r == 0)
        r = cache_hit(b, err);
    if (r == 1)
        *out = answer(b, true);
    if (r == 0) {
        _cleanup_free_ char *ref = brig_asprintf("%s:%s", b->spec.name, b->spec.tag);
        r = brig_build_run(d, c->account_id, ref, b->key, build_main, b, rec, err);
        if (r == 0)
            return 2; /* b is the thread's */
    }
    build_dispose(b);
    return r < 0 ? -1 : 0;
}
