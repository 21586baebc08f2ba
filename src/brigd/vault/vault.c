/*
 * vault.c - sealed secrets (see vault.h).
 */
#include "vault.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define KEY_BYTES   crypto_aead_xchacha20poly1305_ietf_KEYBYTES
#define NONCE_BYTES crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
#define TAG_BYTES   crypto_aead_xchacha20poly1305_ietf_ABYTES
#define MAX_VALUE   (64 * 1024)

struct brig_vault {
    unsigned char *key; /* sodium_malloc'd: guarded, locked, never swapped */
};

static int key_from_env(const char *b64, unsigned char *key, brig_error **err)
{
    size_t len = 0;
    if (sodium_base642bin(key, KEY_BYTES, b64, strlen(b64), " \n", &len, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        len != KEY_BYTES)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "BRIG_MASTER_KEY must be the base64 of exactly %d bytes", KEY_BYTES);
    return 0;
}

static int key_from_file(const char *path, unsigned char *key, brig_error **err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        /* First start: a new key, written 0600 before anything is sealed with it. */
        randombytes_buf(key, KEY_BYTES);
        _cleanup_free_ char *tmp = brig_asprintf("%s.tmp", path);
        unlink(tmp);
        int w = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        int r = 0;
        if (w < 0 || brig_write_full(w, key, KEY_BYTES) < 0 || fsync(w) < 0)
            r = brig_error_sys(err, "write %s", tmp);
        if (w >= 0)
            close(w);
        if (r == 0 && rename(tmp, path) < 0)
            r = brig_error_sys(err, "rename %s", tmp);
        if (r == 0)
            brig_info("vault: created the master key %s (0600)", path);
        return r;
    }
    if (fd < 0)
        return brig_error_sys(err, "open %s", path);
    struct stat st;
    int r = 0;
    if (fstat(fd, &st) < 0)
        r = brig_error_sys(err, "stat %s", path);
    else if (st.st_mode & 077)
        r = brig_error_set(err, BRIG_E_INVALID, 0,
                           "%s is readable by others (mode %04o): chmod 600 it", path,
                           (unsigned)(st.st_mode & 07777));
    else if (brig_read_full(fd, key, KEY_BYTES) != KEY_BYTES)
        r = brig_error_set(err, BRIG_E_INVALID, 0, "%s is not a %d-byte key", path, KEY_BYTES);
    close(fd);
    return r;
}

int brig_vault_open(brig_vault **out, const char *state_dir, brig_error **err)
{
    brig_vault *v = brig_xcalloc(1, sizeof(*v));
    v->key = sodium_malloc(KEY_BYTES);
    if (v->key == NULL) {
        free(v);
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "cannot allocate guarded memory");
    }
    const char *env = getenv("BRIG_MASTER_KEY");
    _cleanup_free_ char *path = brig_asprintf("%s/master.key", state_dir);
    int r = env && *env ? key_from_env(env, v->key, err) : key_from_file(path, v->key, err);
    if (r < 0) {
        brig_vault_close(v);
        return -1;
    }
    *out = v;
    return 0;
}

void brig_vault_close(brig_vault *v)
{
    if (v == NULL)
        return;
    sodium_free(v->key);
    free(v);
}

int brig_vault_check_name(const char *name, brig_error **err)
{
    size_t n = strlen(name);
    bool ok = n >= 1 && n <= 64 && !(name[0] >= '0' && name[0] <= '9');
    for (size_t i = 0; ok && i < n; i++) {
        char c = name[i];
        ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    }
    if (!ok)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "secret name '%.64s' must be an environment variable name "
                              "([A-Za-z_][A-Za-z0-9_]*, at most 64)",
                              name);
    return 0;
}

int brig_vault_check_value(const char *value, size_t len, brig_error **err)
{
    if (len < 4)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "secret values must be at least 4 bytes: shorter ones would be "
                              "redacted out of ordinary output");
    if (len > MAX_VALUE)
        return brig_error_set(err, BRIG_E_INVALID, 0, "secret values are at most %d bytes",
                              MAX_VALUE);
    if (memchr(value, 0, len))
        return brig_error_set(err, BRIG_E_INVALID, 0, "secret values cannot contain NUL bytes");
    return 0;
}

int brig_vault_check_count(size_t n, int64_t max, brig_error **err)
{
    if ((int64_t)n > max)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "a sandbox has at most %lld secrets (max_secrets); this one would "
                              "have %zu",
                              (long long)max, n);
    return 0;
}

int brig_vault_check_total(brig_store *st, const char *owner, int64_t max_count, int64_t max_bytes,
                           brig_error **err)
{
    int64_t count = 0, box_bytes = 0;
    if (brig_store_secret_totals(st, owner, &count, &box_bytes, err) < 0)
        return -1;
    if (brig_vault_check_count((size_t)count, max_count, err) < 0)
        return -1;
    int64_t bytes = box_bytes - count * (int64_t)TAG_BYTES; /* a box is the value and its tag */
    if (bytes > max_bytes)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "a sandbox's secret values are at most %lld bytes in all "
                              "(max_secret_bytes); these have %lld",
                              (long long)max_bytes, (long long)bytes);
    return 0;
}

/* Associated data: "owner\0name". */
static char *aad(const char *owner, const char *name, size_t *len)
{
    *len = strlen(owner) + 1 + strlen(name);
    char *a = brig_xmalloc(*len + 1);
    memcpy(a, owner, strlen(owner) + 1);
    memcpy(a + strlen(owner) + 1, name, strlen(name) + 1);
    return a;
}

int brig_vault_put(brig_vault *v, brig_store *st, const char *owner, const char *name,
                   const char *value, size_t len, brig_error **err)
{
    if (brig_vault_check_name(name, err) < 0 || brig_vault_check_value(value, len, err) < 0)
        return -1;
    unsigned char nonce[NONCE_BYTES];
    randombytes_buf(nonce, sizeof(nonce));
    size_t alen;
    char *ad = aad(owner, name, &alen);
    unsigned char *box = brig_xmalloc(len + TAG_BYTES);
    unsigned long long blen = 0;
    crypto_aead_xchacha20poly1305_ietf_encrypt(box, &blen, (const unsigned char *)value, len,
                                               (const unsigned char *)ad, alen, NULL, nonce,
                                               v->key);
    brig_secret_row row = {owner, name, nonce, sizeof(nonce), box, (size_t)blen};
    int r = brig_store_secret_put(st, &row, brig_now_real_ms(), err);
    free(ad);
    free(box);
    return r;
}

typedef struct open_ctx {
    brig_vault *v;
    const char *owner;
    json_t *out;
    int bad;
} open_ctx;

static int open_row(const brig_secret_row *row, void *arg)
{
    open_ctx *c = arg;
    const char *name = row->name;
    size_t blen = row->box_len;
    const unsigned char *nonce = row->nonce, *box = row->box;
    if (name == NULL || row->nonce_len != NONCE_BYTES || blen < TAG_BYTES) {
        c->bad = 1;
        return 1;
    }
    size_t alen;
    char *ad = aad(c->owner, name, &alen);
    /* Not sodium_malloc: its guard pages cost an mmap, mprotects and a munmap (with a
     * TLB shootdown on every CPU) per secret and exec, and the value is copied into an
     * ordinary heap string next anyway.  Wiped below like that copy is later. */
    size_t cap = blen - TAG_BYTES + 1;
    char *plain = brig_xmalloc(cap);
    unsigned long long plen = 0;
    int r = crypto_aead_xchacha20poly1305_ietf_decrypt((unsigned char *)plain, &plen, NULL, box,
                                                       blen, (const unsigned char *)ad, alen, nonce,
                                                       c->v->key);
    free(ad);
    if (r == 0)
        json_object_set_new(c->out, name, json_stringn(plain, (size_t)plen));
    else
        c->bad = 1;
    sodium_memzero(plain, cap);
    free(plain);
    return r == 0 ? 0 : 1;
}

int brig_vault_open_all(brig_vault *v, brig_store *st, const char *owner, json_t **out,
                        brig_error **err)
{
    open_ctx c = {v, owner, json_object(), 0};
    if (brig_store_secret_each(st, owner, open_row, &c, err) < 0) {
        brig_vault_wipe(c.out);
        return -1;
    }
    if (c.bad) {
        brig_vault_wipe(c.out);
        return brig_error_set(err, BRIG_E_INTERNAL, 0,
                              "a stored secret of %s does not open with this master key", owner);
    }
    *out = c.out;
    return 0;
}

int brig_vault_copy(brig_vault *v, brig_store *st, const char *from, const char *to, json_t *names,
                    brig_error **err)
{
    json_t *all = NULL;
    if (brig_vault_open_all(v, st, from, &all, err) < 0)
        return -1;
    size_t i;
    json_t *n;
    int r = 0;
    json_array_foreach(names, i, n)
    {
        const char *name = json_string_value(n);
        json_t *val = name ? json_object_get(all, name) : NULL;
        if (val == NULL) {
            r = brig_error_set(err, BRIG_E_INVALID, 0, "the project has no secret '%.64s'",
                               name ? name : "?");
            break;
        }
        if ((r = brig_vault_put(v, st, to, name, json_string_value(val), json_string_length(val),
                                err)) < 0)
            break;
    }
    brig_vault_wipe(all);
    return r;
}

static int name_row(const brig_secret_row *row, void *arg)
{
    json_array_append_new(arg, json_string(row->name));
    return 0;
}

json_t *brig_vault_names(brig_store *st, const char *owner)
{
    json_t *a = json_array();
    brig_store_secret_each(st, owner, name_row, a, NULL);
    return a;
}

int brig_vault_delete(brig_store *st, const char *owner, const char *name, brig_error **err)
{
    int r = brig_store_secret_delete(st, owner, name, err);
    if (r == 0)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no secret '%.64s'", name);
    return r < 0 ? -1 : 0;
}

void brig_vault_delete_all(brig_store *st, const char *owner)
{
    brig_store_secret_delete_all(st, owner, NULL);
}

void brig_vault_derive(const brig_vault *v, const char *purpose, const char *subject,
                       unsigned char out[32])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, v->key, KEY_BYTES, 32);
    crypto_generichash_update(&st, (const unsigned char *)purpose, strlen(purpose) + 1);
    crypto_generichash_update(&st, (const unsigned char *)subject, strlen(subject));
    crypto_generichash_final(&st, out, 32);
    sodium_memzero(&st, sizeof(st));
}

void brig_vault_wipe(json_t *obj)
{
    const char *k;
    json_t *val;
    json_object_foreach(obj, k, val)
    {
        /* jansson owns the buffer; it is ours to scrub before it is freed. */
        char *s = (char *)json_string_value(val);
        if (s)
            sodium_memzero(s, json_string_length(val));
    }
    json_decref(obj);
}

void brig_vault_placeholder(brig_vault *v, const char *owner, const char *name, char out[64])
{
    /* A keyed hash: stable for the sandbox's life (across restarts), and nothing
     * about the value nor a guessable string. */
    unsigned char h[16];
    crypto_generichash_state st;
    crypto_generichash_init(&st, v->key, KEY_BYTES, sizeof(h));
    crypto_generichash_update(&st, (const unsigned char *)"placeholder", 12);
    crypto_generichash_update(&st, (const unsigned char *)owner, strlen(owner) + 1);
    crypto_generichash_update(&st, (const unsigned char *)name, strlen(name) + 1);
    crypto_generichash_final(&st, h, sizeof(h));
    memcpy(out, "brig-placeholder-", 17);
    sodium_bin2hex(out + 17, 64 - 17, h, sizeof(h));
}
