/*
 * fork.c - forking a sandbox (see fork.h): a snapshot (snapshots.h) and creates from it
 * (orchestrator.h), in that order; the snapshot goes when they are done.
 */
#include "fork.h"

#include <pthread.h>
#include <string.h>

#include "log.h"
#include "orchestrator.h"
#include "registry.h"
#include "secrets.h"
#include "snapshots.h"
#include "util.h"
#include "vault/vault.h"

/* What the children copy of their source. */
typedef struct source {
    char tariff[32];
    char project_id[BRIG_ID_MAX];
    brig_isolation iso;
    bool egress_none; /* a fork of a sandbox with no egress has none either */
    json_t *env;      /* a copy, or NULL */
    json_t *secrets;  /* a fork with memory's: its running processes hold them (wiped) */
} source;

static int source_of(brigd *d, const brig_caller *c, const char *id, bool memory, source *s,
                     brig_error **err)
{
    brig_sandbox_view v;
    if (!brig_registry_view(d, c, id, &v))
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
    brig_sandbox_view_dispose(&v);
    snprintf(s->tariff, sizeof(s->tariff), "%s", v.spec.tariff);
    snprintf(s->project_id, sizeof(s->project_id), "%s", v.spec.project_id);
    s->iso = v.spec.isolation;
    s->egress_none = v.spec.egress_none;
    brig_sandbox *sb = brig_registry_ref_id(d, id);
    if (sb == NULL)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
    const json_t *env = brig_sandbox_env(sb);
    s->env = env ? json_deep_copy(env) : NULL;
    /* Its processes go on in the children with their env and memory: the children's output
     * is redacted of the same secrets. */
    int rc = memory ? brig_sandbox_secrets(d, sb, &s->secrets, err) : 0;
    brig_sandbox_unref(d, sb);
    if (rc < 0)
        json_decref(s->env);
    return rc;
}

/* The children's creates, run side by side by up to MAKERS threads: a create spends
 * most of its time waiting (runc, the agent's handshake), not on a CPU. */
#define MAKERS 4

typedef struct makers {
    brigd *d;
    const brig_caller *c;
    const brig_sandbox_opts *o;
    pthread_mutex_t lock;
    int64_t left;      /* creates not started yet */
    json_t *made;      /* the children made */
    brig_error *first; /* the first refusal: no more are started after it */
} makers;

static void *maker(void *arg)
{
    makers *m = arg;
    brig_sandbox_opts o = *m->o;
    pthread_mutex_lock(&m->lock);
    o.env = o.env ? json_deep_copy(o.env) : NULL; /* a create takes references: its own */
    o.secrets = o.secrets ? json_deep_copy(o.secrets) : NULL;
    pthread_mutex_unlock(&m->lock);
    for (;;) {
        pthread_mutex_lock(&m->lock);
        bool go = m->left > 0 && m->first == NULL;
        m->left -= go;
        pthread_mutex_unlock(&m->lock);
        if (!go)
            break;
        json_t *child = NULL;
        brig_error *e = NULL;
        int rc = brig_sandbox_create(m->d, m->c, &o, &child, &e);
        pthread_mutex_lock(&m->lock);
        if (rc == 0)
            json_array_append_new(m->made, child);
        else if (m->first == NULL)
            m->first = e;
        else
            brig_error_clear(&e);
        pthread_mutex_unlock(&m->lock);
    }
    json_decref(o.env);
    brig_vault_wipe(o.secrets);
    return NULL;
}

/* Makes count children; *first: the first refusal (NULL: none). */
static json_t *make_children(brigd *d, const brig_caller *c, const brig_sandbox_opts *o,
                             int64_t count, brig_error **first)
{
    makers m = {.d = d, .c = c, .o = o, .left = count, .made = json_array()};
    pthread_mutex_init(&m.lock, NULL);
    pthread_t t[MAKERS];
    int n = 0;
    for (; n < MAKERS && n < count; n++)
        if (pthread_create(&t[n], NULL, maker, &m) != 0)
            break;
    if (n == 0) /* no thread: this one makes them */
        maker(&m);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    pthread_mutex_destroy(&m.lock);
    *first = m.first;
    return m.made;
}

static json_t *error_json(const brig_error *e)
{
    return json_pack("{s:s, s:s}", "code", brig_error_code(e->kind), "message", e->msg);
}

int brig_sandbox_fork(brigd *d, const brig_caller *c, const char *id, int64_t count, bool memory,
                      json_t **out, brig_error **err)
{
    source s = {0};
    json_t *snap = NULL;
    if (source_of(d, c, id, memory, &s, err) < 0)
        return -1;
    if ((memory ? brig_snapshot_take_memory(d, c, id, &snap, err)
                : brig_snapshot_take(d, c, id, "fork", false, &snap, err)) < 0) {
        json_decref(s.env);
        brig_vault_wipe(s.secrets);
        return -1;
    }
    const char *snap_id = json_string_value(json_object_get(snap, "id"));
    brig_sandbox_opts o = {.tariff = s.tariff,
                           .project_id = s.project_id,
                           .isolation = brig_isolation_name(s.iso),
                           .env = s.env,
                           .secrets = s.secrets,
                           .snapshot = snap_id,
                           .snapshot_memory = memory,
                           .host_layer = s.iso == BRIG_ISO_GVISOR, /* forked again, in turn */
                           .egress_none = s.egress_none};
    brig_error *first = NULL;
    json_t *made = make_children(d, c, &o, count, &first);
    brig_error *derr = NULL;
    if (brig_snapshot_delete(d, c, snap_id, &derr) < 0) {
        brig_err("fork of %s: delete its snapshot %s: %s", id, snap_id, derr->msg);
        brig_error_clear(&derr);
    }
    json_decref(snap);
    json_decref(s.env);
    brig_vault_wipe(s.secrets);
    size_t n = json_array_size(made);
    brig_info("sandbox %s: forked %zu of %lld", id, n, (long long)count);
    if (n == 0) {
        json_decref(made);
        if (err)
            *err = first;
        else
            brig_error_clear(&first);
        return -1;
    }
    *out = json_pack("{s:s, s:o, s:I, s:o}", "source_id", id, "sandboxes", made, "refused",
                     (json_int_t)(count - (int64_t)n), "error",
                     first ? error_json(first) : json_null());
    brig_error_clear(&first);
    return 0;
}
