/*
 * usertpl_gc.c - a user template's delete and its layers' removal (see usertpl_gc.h).
 */
#include "usertpl_gc.h"

#include <string.h>

#include "pool.h"
#include "registry.h"
#include "runtime/layer.h"
#include "store/store.h"
#include "usertpl.h"
#include "util.h"

/* ---- in use, delete ------------------------------------------------------------------ */

typedef struct use_q {
    const char *account_id, *key;
    const char *ref; /* NULL: any name on layer key */
    bool used;
} use_q;

static void use_one(brigd *d, brig_sandbox *sb, void *arg)
{
    (void)d;
    use_q *q = arg;
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(sb);
    if (strcmp(sp->account_id, q->account_id) == 0 && strcmp(sp->template_key, q->key) == 0 &&
        strchr(sp->template, ':') && (q->ref == NULL || strcmp(sp->template, q->ref) == 0))
        q->used = true;
}

bool brig_utpl_in_use(brigd *d, const char *account_id, const char *key)
{
    use_q q = {account_id, key, NULL, false};
    brig_registry_each_running(d, NULL, 0, use_one, &q);
    return q.used;
}

static void named_one(const brig_utpl_row *t, void *arg)
{
    use_q *q = arg;
    if (strcmp(t->key, q->key) == 0)
        q->used = true;
}

void brig_utpl_gc(brigd *d, const char *account_id, const char *key)
{
    use_q q = {account_id, key, NULL, false};
    if (brig_store_utpl_each(d->store, account_id, named_one, &q, NULL) < 0 || q.used ||
        brig_utpl_in_use(d, account_id, key))
        return;
    brig_pool_drop(d, account_id, NULL, key); /* warm sandboxes on it: the layer goes */
    _cleanup_free_ char *dir = brig_utpl_dir(d, account_id, key);
    brig_layer_remove(dir);
}

int brig_utpl_delete(brigd *d, const char *account_id, const char *ref, brig_error **err)
{
    brig_utpl_row row;
    int r = brig_utpl_row_get(d, account_id, ref, &row, err);
    if (r <= 0)
        return r < 0 ? -1
                     : brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no template named '%.80s'", ref);
    brig_utpl_row_dispose(&row);
    _cleanup_free_ char *name = brig_asprintf("%s:%s", row.name, row.tag);
    use_q q = {account_id, row.key, name, false};
    brig_registry_each_running(d, NULL, 0, use_one, &q);
    if (q.used)
        return brig_error_set(err, BRIG_E_CONFLICT, 0,
                              "template '%s:%s' is in use: sandboxes run on it; delete them "
                              "first",
                              row.name, row.tag);
    r = brig_store_utpl_delete(d->store, account_id, row.name, row.tag, err);
    if (r < 0)
        return -1;
    if (r == 0)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no template named '%.80s'", ref);
    brig_pool_drop(d, account_id, name, NULL); /* its warm pool drains (not a refusal) */
    brig_utpl_gc(d, account_id, row.key);
    return 0;
}
