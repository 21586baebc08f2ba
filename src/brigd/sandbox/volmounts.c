/*
 * volmounts.c - which sandbox mounts which volume (see volmounts.h).
 *
 * One table in memory, under one lock, with a row in the store for each mount of a
 * sandbox that was recorded: a restart of brigd finds who still mounts what.  A mount
 * is held from the claim (before the sandbox starts) until its teardown is done: a
 * sandbox that ended still holds its volumes until the runtime unmounted them, and a
 * claim or a delete that finds only such holders waits for them (WAIT_ENDED_MS), so
 * "delete the sandbox, then mount its volume elsewhere" just works.  A holder is live
 * while it is being created (claimed, not recorded yet) or listed and not deleting.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "registry.h"
#include "util.h"
#include "volmounts.h"

#define WAIT_ENDED_MS 30000 /* for ended holders' teardowns */

typedef struct att {
    char vol[BRIG_ID_MAX], sb[BRIG_ID_MAX];
    char name[BRIG_VOLUME_NAME_MAX + 1], path[BRIG_VOLUME_PATH_MAX + 1];
    bool ro, recorded;
    struct att *next;
} att;

struct brig_volmounts {
    pthread_mutex_t lock;
    pthread_cond_t released; /* (monotonic) a sandbox let go of its volumes */
    att *atts;
};

bool brig_volume_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > BRIG_VOLUME_NAME_MAX || strncmp(name, "vol_", 4) == 0) /* ids start so */
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = name[i];
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (!alnum && (i == 0 || (ch != '-' && ch != '_')))
            return false;
    }
    return true;
}

/* ---- checking a request ----------------------------------------------------------------- */

/* Paths a volume may not cover: the agent's, and what the runtime mounts itself. */
static const char *const reserved[] = {"/.brig", "/proc", "/sys", "/dev"};

static bool under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static int path_check(const json_t *p, char *out, brig_error **err)
{
    const char *s = json_string_value(p);
    size_t len = s ? strlen(s) : 0;
    if (s == NULL || len != json_string_length(p) || len < 2 || len > BRIG_VOLUME_PATH_MAX ||
        s[0] != '/')
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "a volume's 'path' must be an absolute path of 2 to %d bytes "
                              "other than /",
                              BRIG_VOLUME_PATH_MAX);
    for (const char *c = s; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "a volume's 'path' must not hold control characters");
    for (const char *c = s; *c;) { /* each component: not empty, not . or .. */
        const char *e = strchr(c + 1, '/');
        size_t n = e ? (size_t)(e - c - 1) : strlen(c + 1);
        if (n == 0 || (n == 1 && c[1] == '.') || (n == 2 && c[1] == '.' && c[2] == '.'))
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "volume path '%.64s' is not normal: no empty, '.' or '..' "
                                  "components, no trailing '/'",
                                  s);
        c = e ? e : c + 1 + n;
    }
    for (size_t i = 0; i < BRIG_ARRAY_LEN(reserved); i++)
        if (under(s, reserved[i]))
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "volume path '%.64s' is under %s, which brig mounts itself", s,
                                  reserved[i]);
    memcpy(out, s, len + 1);
    return 0;
}

static int one_request(const json_t *o, struct brig_volreq *r, brig_error **err)
{
    static const char *const usage =
        "each of 'volumes' must be {\"name\": NAME, \"path\": \"/abs/path\", \"read_only\": bool}";
    if (!json_is_object(o))
        return brig_error_set(err, BRIG_E_INVALID, 0, "%s", usage);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v)
    {
        if (strcmp(key, "name") != 0 && strcmp(key, "path") != 0 && strcmp(key, "read_only") != 0)
            return brig_error_set(err, BRIG_E_INVALID, 0, "unknown field '%.32s' in a volume: %s",
                                  key, usage);
    }
    const char *name = json_string_value(json_object_get(o, "name"));
    json_t *path = json_object_get(o, "path"), *ro = json_object_get(o, "read_only");
    if (name == NULL || !brig_volume_name_ok(name))
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "a volume's 'name' must be 1 to 32 of a-z, 0-9, '-' and '_', a "
                              "letter or digit first");
    if (ro && !json_is_boolean(ro))
        return brig_error_set(err, BRIG_E_INVALID, 0, "a volume's 'read_only' must be a boolean");
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->read_only = ro && json_is_true(ro);
    return path_check(path, r->path, err);
}

int brig_volset_parse(const json_t *in, brig_volset *out, brig_error **err)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_array(in) || json_array_size(in) > BRIG_SANDBOX_VOLUMES_MAX)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'volumes' must be a list of at most %d volumes",
                              BRIG_SANDBOX_VOLUMES_MAX);
    size_t i;
    json_t *o;
    json_array_foreach(in, i, o)
    {
        struct brig_volreq *r = &out->v[i];
        if (one_request(o, r, err) < 0)
            return -1;
        for (size_t k = 0; k < i; k++) {
            const struct brig_volreq *q = &out->v[k];
            if (strcmp(q->name, r->name) == 0)
                return brig_error_set(err, BRIG_E_INVALID, 0,
                                      "volume '%s' is named twice: a sandbox mounts a volume once",
                                      r->name);
            if (under(q->path, r->path) || under(r->path, q->path))
                return brig_error_set(err, BRIG_E_INVALID, 0,
                                      "volume paths '%s' and '%s' overlap: one would hide the "
                                      "other",
                                      q->path, r->path);
        }
        out->n = i + 1;
    }
    return 0;
}

/* Whether path, in the root file system at rootfs, can take a mount: 0 when it is a
 * directory or missing (the runtime makes it), or when a symlink is on the way (the
 * runtime follows it, inside the sandbox's root); BRIG_E_INVALID when it, or a component
 * of it, is a file of the template.  Reads the template only (never a sandbox's files). */
static int mountable(int root, const char *path, brig_error **err)
{
    char buf[BRIG_VOLUME_PATH_MAX + 1];
    snprintf(buf, sizeof(buf), "%s", path + 1);
    int dir = dup(root);
    int r = 0;
    char *save = NULL;
    for (char *c = strtok_r(buf, "/", &save); c && dir >= 0; c = strtok_r(NULL, "/", &save)) {
        struct stat st;
        if (fstatat(dir, c, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISLNK(st.st_mode))
            break; /* missing, or a symlink: the runtime's */
        if (!S_ISDIR(st.st_mode)) {
            r = brig_error_set(err, BRIG_E_INVALID, 0,
                               "volume path '%s' names a file of the template, not a directory",
                               path);
            break;
        }
        int next = openat(dir, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dir);
        dir = next;
    }
    if (dir >= 0)
        close(dir);
    return r;
}

int brig_volset_check_root(const char *rootfs, const brig_volset *vs, brig_error **err)
{
    if (vs->n == 0)
        return 0;
    int root = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return brig_error_sys(err, "open the template %s", rootfs);
    int r = 0;
    for (size_t i = 0; r == 0 && i < vs->n; i++)
        r = mountable(root, vs->v[i].path, err);
    close(root);
    return r;
}

/* ---- who holds what ----------------------------------------------------------------------- */

/* Whether a holder is live (see the header).  Needs the lock (the registry's is taken
 * inside it: never the other way round). */
static bool live(brigd *d, const att *a)
{
    if (!a->recorded)
        return true;
    brig_sandbox_view v;
    if (!brig_registry_view(d, NULL, a->sb, &v))
        return false;
    brig_sandbox_view_dispose(&v);
    return v.state == BRIG_SB_CREATING || v.state == BRIG_SB_RUNNING || v.state == BRIG_SB_PAUSED;
}

/* Who holds volume vol in a way a new mount (read_only; ro < 0: any mount at all, a
 * delete's) cannot share: 0 none, 1 only ended ones, 2 a live one (*who: the first, *rw:
 * whether it writes).  Needs the lock. */
static int conflict(brigd *d, const char *vol, int ro, const att **who)
{
    int found = 0;
    for (const att *a = d->volumes->atts; a; a = a->next) {
        if (strcmp(a->vol, vol) != 0 || (ro == 1 && a->ro))
            continue;
        bool l = live(d, a);
        if (found == 0 || (l && found == 1))
            *who = a;
        found = l ? 2 : found > 1 ? found : 1;
    }
    return found;
}

static int conflict_error(const char *name, int ro, const att *who, brig_error **err)
{
    if (ro < 0)
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "volume '%s' is mounted by sandbox %s: delete the sandboxes that "
                              "mount it first",
                              name, who->sb);
    if (who->ro)
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "volume '%s' is mounted read-only by sandbox %s: it can be mounted "
                              "read-write only when no other sandbox mounts it",
                              name, who->sb);
    return brig_error_set(err, BRIG_E_CONFLICT, 0,
                          "volume '%s' is mounted read-write by sandbox %s: one sandbox may "
                          "write a volume at a time (or many may read it, read-only, when none "
                          "writes it)",
                          name, who->sb);
}

/* Waits until no live holder is in the way of a mount (ro) of vol and the ended ones
 * let go, up to deadline (mono ms).  Needs the lock. */
static int wait_free(brigd *d, const char *vol, const char *name, int ro, int64_t deadline,
                     brig_error **err)
{
    struct brig_volmounts *m = d->volumes;
    for (;;) {
        const att *who = NULL;
        int c = conflict(d, vol, ro, &who);
        if (c == 0)
            return 0;
        if (c == 2)
            return conflict_error(name, ro, who, err);
        int64_t left = deadline - brig_now_mono_ms();
        if (left <= 0) {
            brig_error_set(err, BRIG_E_CONFLICT, 0,
                           "volume '%s' is still held by sandbox %s, which ended: its teardown "
                           "has not let go of it yet; try again",
                           name, who->sb);
            return -1;
        }
        struct timespec ts = brig_mono_after(left);
        pthread_cond_timedwait(&m->released, &m->lock, &ts);
    }
}

int brig_volmounts_resolve(brigd *d, const char *project_id, brig_volset *vs, brig_error **err)
{
    for (size_t i = 0; i < vs->n; i++) {
        brig_volume_row row;
        int found = brig_store_volume_get(d->store, project_id, vs->v[i].name, &row, err);
        if (found < 0)
            return -1;
        if (found == 0 || strcmp(row.name, vs->v[i].name) != 0) /* by name, not by id */
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "project %s has no volume named '%s' (POST /v1/volumes makes "
                                  "one)",
                                  project_id, vs->v[i].name);
        memcpy(vs->v[i].id, row.id, sizeof(row.id));
    }
    struct brig_volmounts *m = d->volumes;
    int r = 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; r == 0 && i < vs->n; i++) {
        const att *who = NULL;
        if (conflict(d, vs->v[i].id, vs->v[i].read_only, &who) == 2)
            r = conflict_error(vs->v[i].name, vs->v[i].read_only, who, err);
    }
    pthread_mutex_unlock(&m->lock);
    return r;
}

int brig_volmounts_claim(brigd *d, const char *sandbox_id, const brig_volset *vs, brig_error **err)
{
    struct brig_volmounts *m = d->volumes;
    int64_t deadline = brig_now_mono_ms() + WAIT_ENDED_MS;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < vs->n; i++) {
        if (wait_free(d, vs->v[i].id, vs->v[i].name, vs->v[i].read_only, deadline, err) < 0) {
            pthread_mutex_unlock(&m->lock);
            return -1;
        }
    }
    for (size_t i = 0; i < vs->n; i++) { /* all free now, under one hold of the lock */
        att *a = brig_xcalloc(1, sizeof(*a));
        snprintf(a->vol, sizeof(a->vol), "%s", vs->v[i].id);
        snprintf(a->sb, sizeof(a->sb), "%s", sandbox_id);
        snprintf(a->name, sizeof(a->name), "%s", vs->v[i].name);
        snprintf(a->path, sizeof(a->path), "%s", vs->v[i].path);
        a->ro = vs->v[i].read_only;
        a->next = m->atts;
        m->atts = a;
    }
    pthread_mutex_unlock(&m->lock);
    return 0;
}

int brig_volmounts_record(brigd *d, const char *sandbox_id, const brig_volset *vs, brig_error **err)
{
    for (size_t i = 0; i < vs->n; i++) {
        brig_volume_mount_row row = {.read_only = vs->v[i].read_only};
        snprintf(row.sandbox_id, sizeof(row.sandbox_id), "%s", sandbox_id);
        snprintf(row.volume_id, sizeof(row.volume_id), "%s", vs->v[i].id);
        snprintf(row.path, sizeof(row.path), "%s", vs->v[i].path);
        if (brig_store_volume_mount_insert(d->store, &row, err) < 0)
            return -1;
    }
    struct brig_volmounts *m = d->volumes;
    pthread_mutex_lock(&m->lock);
    for (att *a = m->atts; a; a = a->next)
        if (strcmp(a->sb, sandbox_id) == 0)
            a->recorded = true;
    pthread_mutex_unlock(&m->lock);
    return 0;
}

/* Lets go of volume vol's host mount when no sandbox mounts it any more.  Needs the
 * lock: a claim of it waits until the runtime is done. */
static void unmount_unused(brigd *d, const char *vol)
{
    for (const att *a = d->volumes->atts; a; a = a->next)
        if (strcmp(a->vol, vol) == 0)
            return;
    brig_error *err = NULL;
    if (d->rt->ops->volume_unmount(d->rt, vol, &err) < 0) {
        brig_err("volume %s: unmount: %s", vol, err->msg);
        brig_error_clear(&err);
    }
}

void brig_volmounts_release(brigd *d, const char *sandbox_id)
{
    struct brig_volmounts *m = d->volumes;
    if (m == NULL)
        return;
    pthread_mutex_lock(&m->lock);
    att *gone = NULL;
    bool recorded = false;
    for (att **pp = &m->atts; *pp;) {
        att *a = *pp;
        if (strcmp(a->sb, sandbox_id) != 0) {
            pp = &a->next;
            continue;
        }
        *pp = a->next;
        a->next = gone;
        gone = a;
        recorded |= a->recorded;
    }
    brig_error *err = NULL;
    if (recorded && brig_store_volume_mount_delete(d->store, sandbox_id, &err) < 0) {
        brig_err("sandbox %s: forget its volumes: %s", sandbox_id, err->msg);
        brig_error_clear(&err);
    }
    while (gone) {
        att *a = gone;
        gone = a->next;
        unmount_unused(d, a->vol);
        free(a);
    }
    pthread_cond_broadcast(&m->released);
    pthread_mutex_unlock(&m->lock);
}

json_t *brig_volmounts_of(brigd *d, const char *sandbox_id)
{
    json_t *arr = json_array();
    struct brig_volmounts *m = d->volumes;
    pthread_mutex_lock(&m->lock);
    for (const att *a = m->atts; a; a = a->next)
        if (strcmp(a->sb, sandbox_id) == 0)
            json_array_insert_new(arr, 0,
                                  json_pack("{s:s, s:s, s:s, s:b}", "name", a->name, "id", a->vol,
                                            "path", a->path, "read_only", a->ro));
    pthread_mutex_unlock(&m->lock);
    return arr;
}

json_t *brig_volmounts_users(brigd *d, const char *volume_id)
{
    json_t *arr = json_array();
    struct brig_volmounts *m = d->volumes;
    pthread_mutex_lock(&m->lock);
    for (const att *a = m->atts; a; a = a->next)
        if (strcmp(a->vol, volume_id) == 0)
            json_array_insert_new(arr, 0,
                                  json_pack("{s:s, s:s, s:b}", "sandbox_id", a->sb, "path", a->path,
                                            "read_only", a->ro));
    pthread_mutex_unlock(&m->lock);
    return arr;
}

int brig_volmounts_exclusive(brigd *d, const char *volume_id, const char *name,
                             int (*fn)(brigd *, void *, brig_error **), void *arg, brig_error **err)
{
    struct brig_volmounts *m = d->volumes;
    pthread_mutex_lock(&m->lock);
    int r = wait_free(d, volume_id, name, -1, brig_now_mono_ms() + WAIT_ENDED_MS, err);
    if (r == 0)
        r = fn(d, arg, err);
    pthread_mutex_unlock(&m->lock);
    return r;
}

/* ---- start-up ----------------------------------------------------------------------------- */

static void load_row(const brig_volume_mount_row *row, void *arg)
{
    struct brig_volmounts *m = arg;
    att *a = brig_xcalloc(1, sizeof(*a));
    memcpy(a->sb, row->sandbox_id, sizeof(a->sb));
    memcpy(a->vol, row->volume_id, sizeof(a->vol));
    snprintf(a->path, sizeof(a->path), "%s", row->path);
    a->ro = row->read_only;
    a->recorded = true;
    a->next = m->atts;
    m->atts = a;
}

void brig_volmounts_load(brigd *d)
{
    struct brig_volmounts *m = brig_xcalloc(1, sizeof(*m));
    pthread_mutex_init(&m->lock, NULL);
    brig_cond_init_mono(&m->released);
    d->volumes = m;
    brig_error *err = NULL;
    if (brig_store_volume_mount_each(d->store, load_row, m, &err) < 0) {
        brig_err("volumes: read who mounts them: %s", err->msg);
        brig_error_clear(&err);
    }
    /* Names, for the views: from each volume's row (a deleted one's is kept). */
    for (att *a = m->atts; a; a = a->next) {
        brig_sandbox_row sb;
        brig_volume_row v;
        if (brig_store_sandbox_get(d->store, a->sb, &sb, NULL) == 1 &&
            brig_store_volume_get(d->store, sb.project_id, a->vol, &v, NULL) == 1)
            snprintf(a->name, sizeof(a->name), "%.32s", v.name);
    }
}

void brig_volmounts_sweep(brigd *d, char ***ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    char **held = NULL;
    size_t n_held = 0;
    brig_error *err = NULL;
    if (d->rt->ops->list(d->rt, &held, &n_held, &err) < 0) {
        brig_err("volumes: %s", err->msg);
        brig_error_clear(&err);
    }
    struct brig_volmounts *m = d->volumes;
    char **gone = NULL;
    size_t n_gone = 0;
    pthread_mutex_lock(&m->lock);
    for (const att *a = m->atts; a; a = a->next) {
        bool kept = false;
        for (size_t i = 0; i < n_held && !kept; i++)
            kept = strcmp(held[i], a->sb) == 0;
        if (!kept) { /* neither re-attached nor left for a teardown */
            gone = brig_xrealloc(gone, (n_gone + 1) * sizeof(char *));
            gone[n_gone++] = brig_xstrdup(a->sb);
        }
    }
    pthread_mutex_unlock(&m->lock);
    for (size_t i = 0; i < n_gone; i++) {
        brig_volmounts_release(d, gone[i]);
        free(gone[i]);
    }
    free(gone);
    for (size_t i = 0; i < n_held; i++)
        free(held[i]);
    free(held);
    pthread_mutex_lock(&m->lock);
    for (const att *a = m->atts; a; a = a->next) {
        *ids = brig_xrealloc(*ids, (*n + 1) * sizeof(char *));
        (*ids)[(*n)++] = brig_xstrdup(a->vol);
    }
    pthread_mutex_unlock(&m->lock);
}

void brig_volmounts_free(brigd *d)
{
    struct brig_volmounts *m = d->volumes;
    if (m == NULL)
        return;
    while (m->atts) {
        att *a = m->atts;
        m->atts = a->next;
        free(a);
    }
    pthread_cond_destroy(&m->released);
    pthread_mutex_destroy(&m->lock);
    free(m);
    d->volumes = NULL;
}
