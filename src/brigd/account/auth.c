/*
 * auth.c - API keys (see auth.h).
 */
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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

static int count_row(brig_row *row, void *ctx)
{
    *(int64_t *)ctx = brig_row_int(row, 0);
    return 0;
}

int brig_auth_key_create(brigd *d, const char *account_id, const char *project_id,
                         const char *scope, char key_id[BRIG_ID_MAX], char **key, brig_error **err)
{
    char hash[65];
    brig_id_new("key", key_id);
    *key = brig_key_new();
    brig_key_hash(*key, hash);
    int r =
        brig_store_run(d->store, err, NULL,
                       "INSERT INTO api_keys(id, account_id, project_id, hash, scope,"
                       " created_at) VALUES (?,?,?,?,?,?)",
                       "sssssi", key_id, account_id, project_id, hash, scope, brig_now_real_ms());
    if (r < 0) {
        free(*key);
        *key = NULL;
    }
    return r;
}

/* The operator key: created once, kept in <state>/operator.key. */
static int bootstrap_operator(brigd *d, brig_error **err)
{
    int64_t n = 0;
    if (brig_store_query(d->store, err, count_row, &n, "SELECT count(*) FROM operator_keys", "") <
        0)
        return -1;
    if (n > 0)
        return 0;
    char id[BRIG_ID_MAX], hash[65];
    brig_id_new("key", id);
    char *key = brig_key_new();
    brig_key_hash(key, hash);
    _cleanup_free_ char *path = brig_asprintf("%s/operator.key", d->cfg.state_dir);
    int r = write_key_file(path, key, err);
    if (r == 0)
        r = brig_store_run(d->store, err, NULL,
                           "INSERT INTO operator_keys(id, hash, created_at) VALUES (?,?,?)", "ssi",
                           id, hash, brig_now_real_ms());
    if (r == 0)
        brig_info("created the operator key (saved to %s, mode 0600)", path);
    sodium_memzero(key, strlen(key));
    free(key);
    return r;
}

int brig_auth_bootstrap(brigd *d, brig_error **err)
{
    if (bootstrap_operator(d, err) < 0)
        return -1;
    int64_t n = 0;
    if (brig_store_query(d->store, err, count_row, &n,
                         "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL", "") < 0)
        return -1;
    if (n > 0)
        return 0;
    /* First start: the first account; its admin key lands in admin.key. */
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

typedef struct lookup {
    brig_caller *c;
    int found;
} lookup;

static int key_row(brig_row *row, void *ctx)
{
    lookup *l = ctx;
    const char *f[] = {brig_row_text(row, 0), brig_row_text(row, 1), brig_row_text(row, 2),
                       brig_row_text(row, 3)};
    snprintf(l->c->key_id, sizeof(l->c->key_id), "%s", f[0] ? f[0] : "");
    snprintf(l->c->account_id, sizeof(l->c->account_id), "%s", f[1] ? f[1] : "");
    snprintf(l->c->project_id, sizeof(l->c->project_id), "%s", f[2] ? f[2] : "");
    snprintf(l->c->scope, sizeof(l->c->scope), "%s", f[3] ? f[3] : "");
    l->found = 1;
    return 1;
}

int brig_auth_check(brigd *d, const char *authorization, brig_caller *out, brig_error **err)
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
    memset(out, 0, sizeof(*out));
    lookup l = {out, 0};
    if (brig_store_query(
            d->store, err, key_row, &l,
            "SELECT id, account_id, project_id, scope FROM api_keys"
            " WHERE hash = ? AND revoked_at IS NULL"
            " UNION ALL SELECT id, '', '', 'operator' FROM operator_keys WHERE hash = ?",
            "ss", hash, hash) < 0)
        return -1;
    if (!l.found)
        return brig_error_set(err, BRIG_E_UNAUTHORIZED, 0, "invalid API key");
    return 0;
}

bool brig_caller_sees(const brig_caller *c, const char *account_id, const char *project_id)
{
    if (c->account_id[0] == '\0' || strcmp(c->account_id, account_id) != 0)
        return false; /* the operator sees no account's insides */
    if (strcmp(c->scope, "admin") == 0)
        return true;
    return project_id && strcmp(c->project_id, project_id) == 0;
}
