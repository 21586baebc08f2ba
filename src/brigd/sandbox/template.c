/*
 * template.c - template lookup (see template.h; sandbox/build.c builds them).
 */
#include "template.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/id.h"
#include "log.h"
#include "util.h"

static int valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 32)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
              name[i] == '-' || name[i] == '_'))
            return 0;
    return 1;
}

static int slurp(const char *path, brig_buf *b)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[8192];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        brig_buf_append(b, buf, (size_t)n);
    return n < 0 ? -1 : 0;
}

/* What a file was when it was read: a change of any of these is a new file. */
typedef struct fstamp {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
} fstamp;

static int stamp(const char *path, fstamp *f)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return -1;
    *f = (fstamp){st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
    return 0;
}

static bool same_stamp(const fstamp *a, const fstamp *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* Template keys already hashed, by name, with the stamps of the spec and the builder they
 * were hashed from: every create looks its template up, and hashing the builder (~20 KB)
 * each time was a tenth of a warm-pool claim.  A few templates exist: a small table. */
#define KEYS_MAX 32
static struct {
    char name[33];
    fstamp spec, builder;
    char key[sizeof(((brig_template *)0)->key)];
} keys[KEYS_MAX];
static int n_keys;
static pthread_mutex_t keys_lock = PTHREAD_MUTEX_INITIALIZER;

static bool key_cached(const char *name, const fstamp *sp, const fstamp *bu, char *key)
{
    bool hit = false;
    pthread_mutex_lock(&keys_lock);
    for (int i = 0; i < n_keys && !hit; i++)
        if (strcmp(keys[i].name, name) == 0 && same_stamp(&keys[i].spec, sp) &&
            same_stamp(&keys[i].builder, bu)) {
            memcpy(key, keys[i].key, sizeof(keys[i].key));
            hit = true;
        }
    pthread_mutex_unlock(&keys_lock);
    return hit;
}

static void key_remember(const char *name, const fstamp *sp, const fstamp *bu, const char *key)
{
    pthread_mutex_lock(&keys_lock);
    int i = 0;
    while (i < n_keys && strcmp(keys[i].name, name) != 0)
        i++;
    if (i == n_keys)
        i = n_keys < KEYS_MAX ? n_keys++ : 0; /* more templates than that: the first goes */
    snprintf(keys[i].name, sizeof(keys[i].name), "%s", name);
    keys[i].spec = *sp;
    keys[i].builder = *bu;
    memcpy(keys[i].key, key, sizeof(keys[i].key));
    pthread_mutex_unlock(&keys_lock);
}

/* name's key: the hash of its spec and the builder. */
static int template_key(const char *name, const char *spec, const char *builder, char *key,
                        brig_error **err)
{
    fstamp sp, bu;
    bool stamped = stamp(spec, &sp) == 0 && stamp(builder, &bu) == 0;
    if (stamped && key_cached(name, &sp, &bu, key))
        return 0;
    brig_buf s = {0}, b = {0};
    if (slurp(spec, &s) < 0) {
        int e = errno;
        brig_buf_dispose(&s);
        if (e == ENOENT)
            return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no template named '%s'", name);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "read %s", spec);
    }
    if (slurp(builder, &b) < 0) {
        brig_buf_dispose(&s);
        brig_buf_dispose(&b);
        return brig_error_sys(err, "read %s", builder);
    }
    static const char nul = 0;
    const void *parts[] = {s.data ? s.data : "", &nul, b.data ? b.data : ""};
    size_t lens[] = {s.len, 1, b.len};
    brig_sha256_hex16(parts, lens, 3, key);
    brig_buf_dispose(&s);
    brig_buf_dispose(&b);
    /* Stamped before the read: a file changed meanwhile is read again next time.  A file
     * written in the last seconds is not remembered: its time has a jiffy's resolution,
     * so a second write of the same size in that jiffy would keep the same stamp. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (stamped && now.tv_sec - sp.ctime.tv_sec > 2 && now.tv_sec - bu.ctime.tv_sec > 2)
        key_remember(name, &sp, &bu, key);
    return 0;
}

int brig_template_lookup(const brig_config *cfg, const char *name, brig_template *out,
                         brig_error **err)
{
    memset(out, 0, sizeof(*out));
    if (!valid_name(name))
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no template named '%.40s'", name);
    _cleanup_free_ char *spec = brig_asprintf("%s/%s/spec", cfg->templates_dir, name);
    _cleanup_free_ char *builder = brig_asprintf("%s/build", cfg->templates_dir);
    if (template_key(name, spec, builder, out->key, err) < 0)
        return -1;
    snprintf(out->name, sizeof(out->name), "%s", name);
    out->rootfs = brig_asprintf("%s/%s/%s/rootfs", cfg->template_cache, name, out->key);
    _cleanup_free_ char *ok = brig_asprintf("%s/%s/%s/ok", cfg->template_cache, name, out->key);
    out->built = access(ok, F_OK) == 0;
    struct stat rs, os;
    if (out->built && stat(out->rootfs, &rs) == 0 && stat(ok, &os) == 0)
        snprintf(out->build, sizeof(out->build), "%s.%llx.%llx.%lx", out->key,
                 (unsigned long long)rs.st_ino, (unsigned long long)os.st_mtim.tv_sec,
                 (long)os.st_mtim.tv_nsec);
    else
        snprintf(out->build, sizeof(out->build), "%s", out->key);
    return 0;
}

void brig_template_dispose(brig_template *t)
{
    free(t->rootfs);
    t->rootfs = NULL;
}

json_t *brig_template_json(const brig_template *t)
{
    return json_pack("{s:s, s:s, s:b}", "name", t->name, "key", t->key, "built", t->built);
}

json_t *brig_template_list(const brig_config *cfg)
{
    json_t *arr = json_array();
    DIR *d = opendir(cfg->templates_dir);
    if (d == NULL)
        return arr;
    struct dirent *e;
    char **names = NULL;
    size_t n = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !valid_name(e->d_name))
            continue;
        names = brig_xrealloc(names, (n + 1) * sizeof(*names));
        names[n++] = brig_xstrdup(e->d_name);
    }
    closedir(d);
    /* Sorted, so the listing is stable. */
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *tmp = names[j];
            names[j] = names[j - 1];
            names[j - 1] = tmp;
        }
    for (size_t i = 0; i < n; i++) {
        brig_template t;
        if (brig_template_lookup(cfg, names[i], &t, NULL) == 0) {
            json_array_append_new(arr, brig_template_json(&t));
            brig_template_dispose(&t);
        }
        free(names[i]);
    }
    free(names);
    return arr;
}
