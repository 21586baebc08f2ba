/*
 * reconcile.c - start-up (see reconcile.h).
 */
#include "reconcile.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "account/billing.h"
#include "attach.h"
#include "ends.h"
#include "log.h"
#include "registry.h"
#include "teardown.h"
#include "timeline.h"
#include "usage.h"
#include "usertpl.h"
#include "util.h"
#include "vault/vault.h"
#include "volumes.h"
#include "watch.h"

#define BOOT_ID "/proc/sys/kernel/random/boot_id"

typedef struct reconcile_ctx {
    brigd *d;
    const char *lost; /* why a sandbox that is not alive ended: lost_on_restart, host_reboot */
    char **kept;      /* ids re-attached */
    size_t n_kept;
} reconcile_ctx;

/* A running or paused sandbox of the previous run whose runtime handle attached (h):
 * listed (paused when its runtime says so, whatever its row says: brigd may have died
 * between the two), watched and holding its capacity again. */
static void readopt(brigd *d, const brig_sandbox_row *row, brig_rt_sandbox *h, bool paused)
{
    brig_sandbox_spec sp = {.created_at = row->created_at,
                            .price = row->price,
                            .uid_base = row->uid_base,
                            .idle_timeout_ms = row->idle_timeout_ms};
    memcpy(sp.id, row->id, sizeof(sp.id));
    memcpy(sp.account_id, row->account_id, sizeof(sp.account_id));
    memcpy(sp.project_id, row->project_id, sizeof(sp.project_id));
    memcpy(sp.template, row->template, sizeof(sp.template));
    memcpy(sp.template_key, row->template_key, sizeof(sp.template_key));
    memcpy(sp.tariff, row->tariff, sizeof(sp.tariff));
    const brig_tariff *t = brig_config_tariff(&d->cfg, row->tariff);
    sp.vcpus = t ? t->vcpus : 1;
    sp.memory_mib = t ? t->memory_mib : 0;
    sp.disk_mib = t ? t->disk_mib : 0;
    int iso = brig_isolation_parse(row->isolation); /* rows before schema 6: containers */
    sp.isolation = iso < 0 ? BRIG_ISO_CONTAINER : (brig_isolation)iso;
    sp.egress_none = row->egress_none;
    brig_utpl_workdir(d, row->account_id, row->template, row->template_key, sp.workdir,
                      sizeof(sp.workdir)); /* a user template's, when it still has that key */
    json_t *env = row->env_json ? json_loads(row->env_json, 0, NULL) : NULL;
    brig_sandbox *sb = brig_sandbox_new(&sp, row->expires_at, env);
    brig_sandbox_set_runtime(sb, h);
    brig_attach_again(d, sb);
    brig_registry_uid_hold(d, row->uid_base);
    brig_registry_add(d, sb, NULL);
    brig_sb_state state = paused ? BRIG_SB_PAUSED : BRIG_SB_RUNNING;
    brig_registry_set_state(d, sb, BRIG_SB_CREATING, state);
    if (brig_sb_state_parse(row->state) != (int)state)
        brig_store_sandbox_set_state(d->store, row->id, brig_sb_state_name(state), NULL,
                                     brig_now_real_ms(), NULL);
    brig_watch_add(d, sb);
    brig_sandbox_put(d, sb); /* the list's reference stays */
    brig_admission_hold(&d->admission, (brig_capacity){sp.memory_mib, sp.disk_mib});
}

/* Its timeline's end (before its secrets go: the event passes its redactor), through a
 * stand-in that is never listed. */
static void ended_event(brigd *d, const brig_sandbox_row *row, const char *reason)
{
    brig_sandbox_spec sp = {0};
    memcpy(sp.id, row->id, sizeof(sp.id));
    memcpy(sp.account_id, row->account_id, sizeof(sp.account_id));
    memcpy(sp.project_id, row->project_id, sizeof(sp.project_id));
    brig_sandbox *sb = brig_sandbox_new(&sp, 0, NULL);
    brig_timeline_record(d, sb, NULL, "sandbox.ended",
                         json_pack("{s:s, s:s, s:s}", "state", "deleted", "reason", reason,
                                   "end_reason", brig_end_code(reason, false)));
    brig_sandbox_unref(d, sb);
}

static void reconcile_row(const brig_sandbox_row *row, void *arg)
{
    reconcile_ctx *c = arg;
    brigd *d = c->d;
    brig_error *err = NULL;
    brig_rt_sandbox *h = NULL;
    int state = brig_sb_state_parse(row->state);
    if ((state == BRIG_SB_RUNNING || state == BRIG_SB_PAUSED) &&
        d->rt->ops->attach(d->rt, row->id, &h, &err) == 0) {
        bool paused = d->rt->ops->paused(d->rt, row->id) == 1;
        readopt(d, row, h, paused);
        c->kept = brig_xrealloc(c->kept, (c->n_kept + 1) * sizeof(char *));
        c->kept[c->n_kept++] = brig_xstrdup(row->id);
        brig_info("sandbox %s: re-attached%s", row->id, paused ? " (paused)" : "");
        return;
    }
    const char *why = err ? err->msg : row->state;
    brig_warn("sandbox %s: not usable after restart (%s); cleaning up", row->id, why);
    brig_error_clear(&err);
    if (d->rt->ops->destroy(d->rt, row->id, NULL, &err) < 0) {
        brig_err("sandbox %s: cleanup: %s", row->id, err->msg);
        brig_error_clear(&err);
        brig_registry_uid_hold(d, row->uid_base); /* not clean: keep its ids out of use */
        return; /* stays "deleting"/"creating" so the next start retries */
    }
    /* Charged for its life up to now: it may have run while brigd was down (a paused one
     * at the paused price). */
    const brig_tariff *t = brig_config_tariff(&d->cfg, row->tariff);
    if (state == BRIG_SB_PAUSED &&
        brig_billing_charge_paused(d, row->id, brig_now_real_ms(), false,
                                   brig_billing_paused_price(d, t ? t->disk_mib : 0), NULL,
                                   &err) < 0) {
        brig_err("sandbox %s: paused charge: %s", row->id, err->msg);
        brig_error_clear(&err);
    }
    if (brig_billing_charge(d, row->id, brig_now_real_ms(), true, NULL, &err) < 0) {
        brig_err("sandbox %s: final charge: %s", row->id, err->msg);
        brig_error_clear(&err);
    }
    /* One that was being ended keeps the reason it was ending for. */
    const char *reason = brig_sb_state_parse(row->state) == BRIG_SB_DELETING && row->reason[0]
                             ? row->reason
                             : c->lost;
    ended_event(d, row, reason);
    brig_vault_delete_all(d->store, row->id);
    brig_store_sandbox_set_state(d->store, row->id, brig_sb_state_name(BRIG_SB_DELETED), reason,
                                 brig_now_real_ms(), NULL);
    brig_usage_ended_unseen(d, reason);
}

/* The first line of path into buf (n bytes); "" when it cannot be read. */
static void first_line(const char *path, char *buf, size_t n)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    if (fgets(buf, (int)n, f) == NULL)
        buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

/* Whether the host booted since brigd last ran on this state dir: the boot id it
 * recorded there differs from the kernel's (now: the kernel's).  No record (a first
 * start) or no boot id: no. */
static bool host_rebooted(brigd *d, char *now, size_t n)
{
    char was[64];
    _cleanup_free_ char *path = brig_asprintf("%s/boot_id", d->cfg.state_dir);
    first_line(BOOT_ID, now, n);
    first_line(path, was, sizeof(was));
    return now[0] && was[0] && strcmp(now, was) != 0;
}

/* Records the kernel's boot id for the next start (written whole, then renamed). */
static void record_boot(brigd *d, const char *now)
{
    if (now[0] == '\0')
        return;
    _cleanup_free_ char *path = brig_asprintf("%s/boot_id", d->cfg.state_dir);
    _cleanup_free_ char *tmp = brig_asprintf("%s.new", path);
    FILE *f = fopen(tmp, "we");
    bool ok = f && fprintf(f, "%s\n", now) > 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok || rename(tmp, path) < 0) {
        brig_warn("cannot record the boot id in %s: a reboot will look like a restart", path);
        unlink(tmp);
    }
}

/* A leftover whose cleanup failed: retried in the background like any teardown, with
 * its uid range (from its row, when there is one) kept out of use until it succeeds.
 * It holds no capacity slot in this run. */
static void teardown_leftover(brigd *d, const char *id)
{
    brig_sandbox_spec sp = {0};
    snprintf(sp.id, sizeof(sp.id), "%s", id);
    brig_error *err = NULL;
    brig_sandbox_row row;
    if (brig_store_sandbox_get(d->store, id, &row, &err) > 0)
        sp.uid_base = row.uid_base;
    brig_error_clear(&err);
    brig_registry_uid_hold(d, sp.uid_base);
    brig_teardown_leftover(d, brig_sandbox_new(&sp, 0, NULL));
}

void brig_reconcile(brigd *d)
{
    char boot[64];
    reconcile_ctx c = {.d = d, .lost = "lost_on_restart"};
    brig_volumes_start(d); /* who mounted which volume: released as sandboxes go */
    if (host_rebooted(d, boot, sizeof(boot))) {
        brig_info("reconcile: the host booted since the last run: what did not survive ended "
                  "with it (host_reboot)");
        c.lost = "host_reboot";
    }
    brig_error *err = NULL;
    if (brig_store_sandbox_each_live(d->store, reconcile_row, &c, &err) < 0) {
        brig_err("reconcile: %s", err->msg);
        brig_error_clear(&err);
    }
    /* Whatever the runtime holds that is neither kept nor known goes. */
    char **ids = NULL;
    size_t n = 0;
    if (d->rt->ops->list(d->rt, &ids, &n, &err) < 0) {
        brig_err("reconcile: %s", err->msg);
        brig_error_clear(&err);
    }
    for (size_t i = 0; i < n; i++) {
        int kept = 0;
        for (size_t k = 0; k < c.n_kept; k++)
            kept |= strcmp(c.kept[k], ids[i]) == 0;
        if (!kept) {
            brig_warn("reconcile: removing leftover sandbox %s", ids[i]);
            if (d->rt->ops->destroy(d->rt, ids[i], NULL, &err) < 0) {
                brig_err("reconcile: %s: %s", ids[i], err->msg);
                brig_error_clear(&err);
                teardown_leftover(d, ids[i]);
            }
        }
        free(ids[i]);
    }
    free(ids);
    brig_attach_cleanup(d, c.kept, c.n_kept);
    brig_volumes_reconcile(d); /* volumes no sandbox mounts now let go of */
    for (size_t k = 0; k < c.n_kept; k++)
        free(c.kept[k]);
    free(c.kept);
    record_boot(d, boot);
}
