/*
 * template.c - template lookup (see template.h; sandbox/build.c builds them).
 */
#include "template.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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

int brig_template_lookup(const brig_config *cfg, const char *name, brig_template *out,
                         brig_error **err)
{
    memset(out, 0, sizeof(*out));
    if (!valid_name(name))
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no template named '%.40s'", name);
    _cleanup_free_ char *spec = brig_asprintf("%s/%s/spec", cfg->templates_dir, name);
    _cleanup_free_ char *builder = brig_asprintf("%s/build", cfg->templates_dir);
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
    snprintf(out->name, sizeof(out->name), "%s", name);
    brig_sha256_hex16(parts, lens, 3, out->key);
    brig_buf_dispose(&s);
    brig_buf_dispose(&b);
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
