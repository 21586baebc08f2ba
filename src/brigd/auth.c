/*
 * auth.c - API key bootstrap and checks (see auth.h).
 */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "id.h"
#include "log.h"
#include "util.h"

int brig_auth_bootstrap(brigd *d, brig_error **err)
{
    int64_t n = 0;
    if (brig_store_key_count(d->store, &n, err) < 0)
        return -1;
    if (n > 0)
        return 0;
    char account[BRIG_ID_MAX], key_id[BRIG_ID_MAX], hash[65];
    brig_id_new("acc", account);
    brig_id_new("key", key_id);
    char *key = brig_key_new();
    brig_key_hash(key, hash);
    int64_t now = brig_now_real_ms();
    int r = -1;
    _cleanup_free_ char *path = brig_asprintf("%s/admin.key", d->cfg.state_dir);
    _cleanup_free_ char *tmp = brig_asprintf("%s.tmp", path);
    _cleanup_free_ char *line = brig_asprintf("%s\n", key);
    /* Key file first: a key in the store that nobody can read would lock us out. */
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || brig_write_full(fd, line, strlen(line)) < 0 || fsync(fd) < 0) {
        brig_error_sys(err, "write %s", tmp);
        if (fd >= 0)
            close(fd);
        goto out;
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        brig_error_sys(err, "rename %s", tmp);
        goto out;
    }
    if (brig_store_account_create(d->store, account, "default", now, err) < 0 ||
        brig_store_key_insert(d->store, key_id, account, hash, "admin", now, err) < 0)
        goto out;
    printf("brigd: created the admin API key (saved to %s, mode 0600; shown only now):\n"
           "  %s\n"
           "quick start: export BRIG_URL=%s BRIG_API_KEY=$(cat %s); "
           "build/brig run -- python3 -c 'print(\"hello from a sandbox\")'\n",
           path, key, d->base_url ? d->base_url : "http://127.0.0.1:7070", path);
    fflush(stdout);
    r = 0;
out:
    sodium_memzero(key, strlen(key));
    sodium_memzero(line, strlen(line));
    free(key);
    return r;
}

int brig_auth_check(brigd *d, const char *authorization, brig_key_row *out, brig_error **err)
{
    if (authorization == NULL)
        return brig_error_set(err, BRIG_E_UNAUTHORIZED, 0,
                              "missing API key: send 'Authorization: Bearer <key>'");
    if (strncasecmp(authorization, "Bearer ", 7) != 0)
        return brig_error_set(err, BRIG_E_UNAUTHORIZED, 0,
                              "malformed Authorization header: expected 'Bearer <key>'");
    const char *key = authorization + 7;
    while (*key == ' ')
        key++;
    if (*key == '\0' || strlen(key) > 256)
        return brig_error_set(err, BRIG_E_UNAUTHORIZED, 0, "invalid API key");
    char hash[65];
    brig_key_hash(key, hash);
    brig_error *lerr = NULL;
    if (brig_store_key_lookup(d->store, hash, out, &lerr) < 0) {
        int missing = lerr->kind == BRIG_E_NOT_FOUND;
        if (missing) {
            brig_error_clear(&lerr);
            return brig_error_set(err, BRIG_E_UNAUTHORIZED, 0, "invalid API key");
        }
        if (err)
            *err = lerr;
        else
            brig_error_clear(&lerr);
        return -1;
    }
    return 0;
}
