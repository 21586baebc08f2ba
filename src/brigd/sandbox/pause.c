/*
 * pause.c - pausing and resuming a sandbox (see pause.h).
 *
 * Pause: listed paused first (new requests answer 409 from here on), charged up to now
 * at its price, then frozen by the driver, then stored paused.  Resume: thawed first,
 * its paused time charged at the paused price, then listed and stored running.  A
 * freeze that fails puts it back to running.  One pause or resume at a time (they are
 * rare and quick): a pause and a resume of the same sandbox never interleave.  A delete
 * may end a sandbox meanwhile: the driver's kill thaws what it kills.
 */
#include "pause.h"

#include <pthread.h>

#include "account/billing.h"
#include "log.h"
#include "registry.h"
#include "timeline.h"
#include "util.h"
#include "view.h"
#include "watch.h"

static pthread_mutex_t pause_lock = PTHREAD_MUTEX_INITIALIZER;

/* A plain reference to the listed sandbox id the caller may see, and its state now. */
static brig_sandbox *find(brigd *d, const brig_caller *c, const char *id, brig_sb_state *state,
                          brig_error **err)
{
    brig_sandbox_view v;
    if (!brig_registry_view(d, c, id, &v)) {
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
        return NULL;
    }
    brig_sandbox_view_dispose(&v);
    *state = v.state;
    brig_sandbox *sb = brig_registry_ref_id(d, id);
    if (sb == NULL)
        brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s'", id);
    return sb;
}

static int wrong_state(const char *id, brig_sb_state state, const char *verb, brig_error **err)
{
    return brig_error_set(err, BRIG_E_CONFLICT, 0, "sandbox '%.40s' is %s: only a %s one can be %s",
                          id, brig_sb_state_name(state),
                          verb[0] == 'p' ? "running (or paused)" : "paused (or running)", verb);
}

static json_t *answer(brigd *d, brig_sandbox *sb, const char *memory)
{
    json_t *j = brig_sandbox_json(d, sb);
    json_object_set_new(j, "memory", json_string(memory));
    return j;
}

/* why: what paused it, for its timeline ("idle_timeout"), or NULL: a request.  memory: what
 * is asked of its memory ("checkpoint"), or NULL: frozen. */
static int pause_locked(brigd *d, const brig_caller *c, const char *id, const char *why,
                        const char *memory, json_t **out, brig_error **err)
{
    brig_sb_state state;
    brig_sandbox *sb = find(d, c, id, &state, err);
    if (sb == NULL)
        return -1;
    int rc = 0;
    if (state == BRIG_SB_PAUSED) { /* idempotent: as it was paused */
        memory = NULL;
        d->rt->ops->pause(d->rt, brig_sandbox_runtime(sb), &memory, NULL);
        goto done;
    }
    if (state != BRIG_SB_RUNNING ||
        !brig_registry_set_state(d, sb, BRIG_SB_RUNNING, BRIG_SB_PAUSED)) {
        rc = wrong_state(id, state == BRIG_SB_RUNNING ? BRIG_SB_DELETING : state, "paused", err);
        goto done;
    }
    int64_t now = brig_now_real_ms();
    brig_error *berr = NULL;
    if (brig_billing_charge(d, id, now, false, NULL, &berr) < 0) { /* its running time */
        brig_err("sandbox %s: charge at pause: %s", id, berr->msg);
        brig_error_clear(&berr);
    }
    if (d->rt->ops->pause(d->rt, brig_sandbox_runtime(sb), &memory, err) < 0) {
        brig_registry_set_state(d, sb, BRIG_SB_PAUSED, BRIG_SB_RUNNING);
        brig_watch_add(d, sb); /* armed again: a failed checkpoint may have ended it */
        brig_error_prefix(err, "pause %s", id);
        rc = -1;
        goto done;
    }
    brig_store_sandbox_set_state(d->store, id, brig_sb_state_name(BRIG_SB_PAUSED), NULL, now, NULL);
    if (memory == NULL)
        memory = "resident";
    json_t *ev = json_pack("{s:s}", "memory", memory);
    if (why)
        json_object_set_new(ev, "by", json_string(why));
    brig_timeline_record(d, sb, c, "sandbox.paused", ev);
    brig_info("sandbox %s: paused%s%s", id, why ? " by its " : "", why ? why : "");
done:
    if (rc == 0 && out)
        *out = answer(d, sb, memory ? memory : "resident");
    brig_sandbox_unref(d, sb);
    return rc;
}

static int resume_locked(brigd *d, const brig_caller *c, const char *id, json_t **out,
                         brig_error **err)
{
    brig_sb_state state;
    brig_sandbox *sb = find(d, c, id, &state, err);
    if (sb == NULL)
        return -1;
    int rc = 0;
    if (state == BRIG_SB_RUNNING)
        goto done; /* idempotent */
    if (state != BRIG_SB_PAUSED) {
        rc = wrong_state(id, state, "resumed", err);
        goto done;
    }
    if (d->rt->ops->resume(d->rt, brig_sandbox_runtime(sb), err) < 0) {
        brig_error_prefix(err, "resume %s", id);
        rc = -1;
        goto done;
    }
    int64_t now = brig_now_real_ms(), since = brig_sandbox_paused_at(d, sb);
    brig_error *berr = NULL;
    int64_t price = brig_billing_paused_price(d, brig_sandbox_spec_of(sb)->disk_mib);
    if (brig_billing_charge_paused(d, id, now, false, price, NULL, &berr) < 0) {
        brig_err("sandbox %s: charge at resume: %s", id, berr->msg);
        brig_error_clear(&berr);
    }
    if (!brig_registry_set_state(d, sb, BRIG_SB_PAUSED, BRIG_SB_RUNNING)) {
        rc = brig_error_set(err, BRIG_E_CONFLICT, 0, "sandbox '%.40s' ended while it resumed", id);
        goto done;
    }
    brig_store_sandbox_set_state(d->store, id, brig_sb_state_name(BRIG_SB_RUNNING), NULL, now,
                                 NULL);
    brig_watch_add(d, sb); /* a restored checkpoint's new init (a thawed one: armed again) */
    brig_timeline_record(d, sb, c, "sandbox.resumed",
                         json_pack("{s:I}", "paused_ms", (json_int_t)(since ? now - since : 0)));
    brig_info("sandbox %s: resumed", id);
done:
    if (rc == 0)
        *out = answer(d, sb, "resident");
    brig_sandbox_unref(d, sb);
    return rc;
}

int brig_sandbox_pause(brigd *d, const brig_caller *c, const char *id, const char *memory,
                       json_t **out, brig_error **err)
{
    pthread_mutex_lock(&pause_lock);
    int rc = pause_locked(d, c, id, NULL, memory, out, err);
    pthread_mutex_unlock(&pause_lock);
    return rc;
}

int brig_sandbox_pause_idle(brigd *d, const char *id, brig_error **err)
{
    pthread_mutex_lock(&pause_lock);
    int rc = pause_locked(d, NULL, id, "idle_timeout", NULL, NULL, err);
    pthread_mutex_unlock(&pause_lock);
    return rc;
}

int brig_sandbox_resume(brigd *d, const brig_caller *c, const char *id, json_t **out,
                        brig_error **err)
{
    pthread_mutex_lock(&pause_lock);
    int rc = resume_locked(d, c, id, out, err);
    pthread_mutex_unlock(&pause_lock);
    return rc;
}

int brig_sandbox_frozen_do(brigd *d, brig_sandbox *sb,
                           int (*fn)(void *arg, brig_rt_sandbox *rt, brig_error **err), void *arg,
                           brig_error **err)
{
    const char *id = brig_sandbox_id(sb);
    brig_rt_sandbox *rt = brig_sandbox_runtime(sb);
    pthread_mutex_lock(&pause_lock);
    brig_sandbox_view v;
    brig_registry_view_of(d, sb, &v);
    brig_sandbox_view_dispose(&v);
    int rc = -1;
    if (v.state != BRIG_SB_RUNNING && v.state != BRIG_SB_PAUSED)
        wrong_state(id, v.state, "frozen", err);
    else if (v.state == BRIG_SB_PAUSED)
        rc = fn(arg, rt, err);
    else if (d->rt->ops->pause(d->rt, rt, NULL, err) == 0) {
        rc = fn(arg, rt, err);
        brig_error *terr = NULL;
        if (d->rt->ops->resume(d->rt, rt, &terr) < 0) { /* a delete meanwhile: no matter */
            brig_warn("sandbox %s: thaw after a snapshot: %s", id, terr->msg);
            brig_error_clear(&terr);
        }
    }
    pthread_mutex_unlock(&pause_lock);
    return rc;
}
