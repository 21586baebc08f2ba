/*
 * bootstrap.c - the first start's keys and account (see bootstrap.h).
 */
#include "bootstrap.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "keys.h"
#include "log.h"
#include "store/store.h"
#include "tenants.h"
#include "util.h"

/* Writes key + "\n" to path (0600) atomically. */
static int write_key_file(const char *path, const char *key, brig_error **err)
{
    _cleanup_free_ char *tmp = brig_asprintf("%s.tmp", path);
    _cleanup_free_ char *line = brig_asprintf("%s\n", key);
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int r = 0;
    if (fd < 0 || brig_write_full(fd, line, strlen(line)) < 0 || fsync(fd) < 0)
        r = brig_error_sys(err, "write %s", tmp);
    if (fd >= 0)
        close(fd);
    if (r == 0 && rename(tmp, path) < 0)
        r = brig_error_sys(err, "rename %s", tmp);
    sodium_memzero(line, strlen(line));
    return r;
}

/* The operator key: created once, kept in <state>/operator.key. */
static int bootstrap_operator(brigd *d, brig_error **err)
{
    char id[BRIG_ID_MAX], hash[65];
    char *key = NULL;
    brig_keys_mint(id, &key, hash);
    _cleanup_free_ char *path = brig_asprintf("%s/operator.key", d->cfg.state_dir);
    int r = write_key_file(path, key, err);
    if (r == 0)
        r = brig_store_operator_key_insert(d->store, id, hash, brig_now_real_ms(), err);
    if (r == 0)
        brig_info("created the operator key (saved to %s, mode 0600)", path);
    sodium_memzero(key, strlen(key));
    free(key);
    return r;
}

/* The first account; its admin key lands in admin.key. */
static int bootstrap_account(brigd *d, brig_error **err)
{
    char *key = NULL;
    json_t *acc = NULL;
    if (brig_account_create(d, "default", &acc, &key, err) < 0)
        return -1;
    json_decref(acc);
    _cleanup_free_ char *path = brig_asprintf("%s/admin.key", d->cfg.state_dir);
    int r = write_key_file(path, key, err);
    if (r == 0) {
        printf("brigd: created the admin API key (saved to %s, mode 0600; shown only now):\n"
               "  %s\n"
               "quick start: export BRIG_URL=%s BRIG_API_KEY=$(cat %s); "
               "build/brig run -- python3 -c 'print(\"hello from a sandbox\")'\n",
               path, key, d->base_url ? d->base_url : "http://127.0.0.1:7070", path);
        fflush(stdout);
    }
    sodium_memzero(key, strlen(key));
    free(key);
    return r;
}

int brig_bootstrap_run(brigd *d, brig_error **err)
{
    int64_t api_keys = 0, operator_keys = 0;
    if (brig_store_key_counts(d->store, &api_keys, &operator_keys, err) < 0)
        return -1;
    if (operator_keys == 0 && bootstrap_operator(d, err) < 0)
        return -1;
    if (api_keys == 0 && bootstrap_account(d, err) < 0)
        return -1;
    return 0;
}
