/*
 * e2b_rec.c - what brigd keeps of a sandbox made or connected through E2B's API
 * (docs/e2b.md): its metadata and the caller envd acts as (who made or connected it).  A
 * record is kept in the store (one JSON object per sandbox: {"owner": {...}, "metadata":
 * {...}}), so list filters, getInfo and envd's caller survive a restart of brigd, and cached
 * here: a sandbox's record is read from the store once, the first time it is asked for.
 * Records of ended sandboxes are dropped (here and in the store) as the list is walked, and
 * those left in the store by a previous run at the first walk of this one.
 *
 * A sandbox's envd access token is derived from brigd's master key and its id (vault.h):
 * the same after a restart, stored nowhere, handed out only by a create or connect that
 * brig's own key checks allowed.
 */
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "e2b.h"
#include "log.h"
#include "sandbox/registry.h"
#include "store/store.h"
#include "vault/vault.h"

typedef struct e2b_rec {
    struct e2b_rec *next;
    char id[BRIG_ID_MAX];
    bool has_owner; /* false: the store has no record (made by brig's own API) */
    brig_caller owner;
    json_t *metadata; /* object of strings */
} e2b_rec;

static pthread_mutex_t recs_lock = PTHREAD_MUTEX_INITIALIZER;
static e2b_rec *recs;

static const char *const owner_fields[] = {"key_id", "account_id", "project_id", "scope", NULL};

static char *owner_field(brig_caller *c, int i)
{
    char *f[] = {c->key_id, c->account_id, c->project_id, c->scope};
    return f[i];
}

static size_t owner_size(int i)
{
    return i == 3 ? sizeof(((brig_caller *)0)->scope) : BRIG_ID_MAX;
}

static json_t *owner_json(const brig_caller *c)
{
    json_t *o = json_object();
    for (int i = 0; owner_fields[i]; i++)
        json_object_set_new(o, owner_fields[i], json_string(owner_field((brig_caller *)c, i)));
    return o;
}

/* The stored owner into *c: false when it is not one. */
static bool owner_parse(json_t *o, brig_caller *c)
{
    *c = (brig_caller){0};
    for (int i = 0; owner_fields[i]; i++) {
        const char *v = json_string_value(json_object_get(o, owner_fields[i]));
        if (v == NULL || strlen(v) >= owner_size(i))
            return false;
        snprintf(owner_field(c, i), owner_size(i), "%s", v);
    }
    return true;
}

static e2b_rec *rec_find(const char *id)
{
    for (e2b_rec *e = recs; e; e = e->next)
        if (strcmp(e->id, id) == 0)
            return e;
    return NULL;
}

static e2b_rec *rec_new(const char *id)
{
    e2b_rec *e = brig_xcalloc(1, sizeof(*e));
    snprintf(e->id, sizeof(e->id), "%s", id);
    e->metadata = json_object();
    e->next = recs;
    recs = e;
    return e;
}

/* id's record, read from the store the first time (one without an owner when the store has
 * none).  Under recs_lock. */
static e2b_rec *rec_load(brigd *d, const char *id)
{
    e2b_rec *e = rec_find(id);
    if (e)
        return e;
    e = rec_new(id);
    char *text = NULL;
    brig_error *err = NULL;
    if (brig_store_e2b_get(d->store, id, &text, &err) < 0) {
        brig_warn("e2b: the record of %s: %s", id, err->msg);
        brig_error_clear(&err);
    }
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    json_t *meta = json_object_get(j, "metadata");
    e->has_owner = owner_parse(json_object_get(j, "owner"), &e->owner);
    if (e->has_owner && json_is_object(meta))
        json_object_update(e->metadata, meta);
    json_decref(j);
    free(text);
    return e;
}

/* Writes e to the store.  Under recs_lock. */
static void rec_save(brigd *d, const e2b_rec *e)
{
    json_t *j = json_pack("{s:o, s:O}", "owner", owner_json(&e->owner), "metadata", e->metadata);
    char *text = json_dumps(j, JSON_COMPACT);
    brig_error *err = NULL;
    if (text == NULL || brig_store_e2b_put(d->store, e->id, text, &err) < 0) {
        brig_warn("e2b: storing the record of %s: %s", e->id, err ? err->msg : "no memory");
        brig_error_clear(&err);
    }
    free(text);
    json_decref(j);
}

/* envd's access token of sandbox id. */
static void token_of(brigd *d, const char *id, char token[E2B_TOKEN_LEN + 1])
{
    unsigned char raw[E2B_TOKEN_LEN / 2];
    brig_vault_derive(d->vault, "brig e2b envd token", id, raw);
    sodium_bin2hex(token, E2B_TOKEN_LEN + 1, raw, sizeof(raw));
    sodium_memzero(raw, sizeof(raw));
}

void e2b_record_make(brigd *d, const char *id, bool fresh, const brig_caller *owner,
                     json_t *metadata, char token[E2B_TOKEN_LEN + 1])
{
    pthread_mutex_lock(&recs_lock);
    e2b_rec *e = fresh ? rec_find(id) : rec_load(d, id);
    if (e == NULL) /* a new sandbox: the store has nothing of it to read */
        e = rec_new(id);
    if (!e->has_owner) {
        e->has_owner = true;
        e->owner = *owner;
        if (metadata)
            json_object_update(e->metadata, metadata);
        rec_save(d, e);
    }
    pthread_mutex_unlock(&recs_lock);
    token_of(d, id, token);
}

bool e2b_record_get(brigd *d, const char *id, char token[E2B_TOKEN_LEN + 1], brig_caller *owner)
{
    brig_sandbox *sb = brig_registry_ref_id(d, id);
    if (sb == NULL)
        return false;
    pthread_mutex_lock(&recs_lock);
    e2b_rec *e = rec_load(d, id);
    if (e->has_owner) {
        *owner = e->owner;
    } else { /* made by brig's own API: a sandbox key of its project */
        const brig_sandbox_spec *sp = brig_sandbox_spec_of(sb);
        *owner = (brig_caller){.scope = "sandbox"};
        snprintf(owner->account_id, sizeof(owner->account_id), "%s", sp->account_id);
        snprintf(owner->project_id, sizeof(owner->project_id), "%s", sp->project_id);
    }
    pthread_mutex_unlock(&recs_lock);
    brig_sandbox_unref(d, sb);
    token_of(d, id, token);
    return true;
}

bool e2b_record_by_token(brigd *d, const char *token, char id[BRIG_ID_MAX])
{
    if (token == NULL || strlen(token) != E2B_TOKEN_LEN)
        return false;
    size_t n = 0;
    char **ids = brig_registry_ids(d, &n);
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        char t[E2B_TOKEN_LEN + 1];
        token_of(d, ids[i], t);
        if (!found && sodium_memcmp(t, token, E2B_TOKEN_LEN) == 0) {
            snprintf(id, BRIG_ID_MAX, "%s", ids[i]);
            found = true;
        }
        sodium_memzero(t, sizeof(t));
        free(ids[i]);
    }
    free(ids);
    return found;
}

json_t *e2b_record_metadata(brigd *d, const char *id)
{
    pthread_mutex_lock(&recs_lock);
    json_t *m = json_deep_copy(rec_load(d, id)->metadata);
    pthread_mutex_unlock(&recs_lock);
    return m;
}

void e2b_records_prune(brigd *d)
{
    pthread_mutex_lock(&recs_lock);
    /* Once a run: the records of sandboxes that ended while brigd was down, or whose end no
     * list, create or kill saw before it stopped. */
    static bool swept;
    int64_t pruned = 0;
    brig_error *err = NULL;
    if (!swept && brig_store_e2b_prune(d->store, &pruned, &err) < 0) {
        brig_warn("e2b: pruning the records of ended sandboxes: %s", err->msg);
        brig_error_clear(&err);
    }
    swept = true;
    for (e2b_rec **p = &recs; *p;) {
        brig_sandbox *sb = brig_registry_ref_id(d, (*p)->id);
        if (sb) {
            brig_sandbox_unref(d, sb);
            p = &(*p)->next;
            continue;
        }
        e2b_rec *gone = *p;
        *p = gone->next;
        brig_error *err = NULL;
        if (gone->has_owner && brig_store_e2b_delete(d->store, gone->id, &err) < 0) {
            brig_warn("e2b: deleting the record of %s: %s", gone->id, err->msg);
            brig_error_clear(&err);
        }
        json_decref(gone->metadata);
        free(gone);
    }
    pthread_mutex_unlock(&recs_lock);
}
