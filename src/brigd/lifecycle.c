/*
 * lifecycle.c - the janitor (see lifecycle.h).
 */
#include "lifecycle.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agentc.h"
#include "billing.h"
#include "cgroup.h"
#include "log.h"
#include "sandbox.h"

#define TICK_MS         500
#define CPU_ABUSE_SHARE 0.95

typedef struct verdict {
    char id[BRIG_ID_MAX];
    const char *reason;
} verdict;

/* Does the sandbox run a command right now?  Asks its agent (a background
 * process counts; so does a command started by a request still in flight). */
static bool has_running_process(brigd *d, brig_sandbox *sb)
{
    brig_error *err = NULL;
    int fd = brig_sandbox_connect(d, sb, &err);
    if (fd < 0) {
        brig_error_clear(&err);
        return false;
    }
    json_t *req = json_pack("{s:s}", "op", "proc_list"), *reply = NULL;
    brig_agentc_set_timeout(fd, 5000);
    bool running = false;
    if (brig_agentc_call(fd, req, &reply, &err) == 0) {
        size_t i;
        json_t *p;
        json_array_foreach(json_object_get(reply, "processes"), i, p) running |=
            json_is_true(json_object_get(p, "running"));
    }
    brig_error_clear(&err);
    json_decref(req);
    json_decref(reply);
    close(fd);
    return running;
}

/* CPU abuse: at >= 95 % of the quota since cpu_busy_since for the whole window. */
static bool cpu_abusive(brigd *d, brig_sandbox *sb, int64_t now)
{
    int64_t ns = d->cgroup->cpu_ns(sb->id);
    if (ns < 0)
        return false;
    bool abusive = false;
    if (sb->cpu_last_at > 0 && now > sb->cpu_last_at) {
        double share = (double)(ns - sb->cpu_last_ns) / ((double)(now - sb->cpu_last_at) * 1e6) /
                       (sb->vcpus > 0 ? sb->vcpus : 1);
        if (share >= CPU_ABUSE_SHARE) {
            if (sb->cpu_busy_since == 0)
                sb->cpu_busy_since = sb->cpu_last_at;
            abusive = now - sb->cpu_busy_since >= d->cfg.cpu_abuse_window_ms;
        } else {
            sb->cpu_busy_since = 0;
        }
    }
    sb->cpu_last_ns = ns;
    sb->cpu_last_at = now;
    return abusive;
}

/* TCP buffers past what the kernel lets a bound stop: over its limit (cgroup.c) a socket
 * still gets a minimum the kernel charges regardless (about one segment, 64 KiB on a
 * loopback), so thousands of stuck sockets add up past any limit, and past the host's
 * net.ipv4.tcp_mem, where every TCP socket of the host stalls.  cgroup v2 counts them
 * as memory, whose limit then OOM-kills; on v1 the janitor stops the sandbox once its
 * TCP memory is twice its bound (legitimate use stays under the bound itself). */
static bool tcp_overrun(brigd *d, brig_sandbox *sb)
{
    int64_t bytes = d->cgroup->tcp_bytes(sb->id);
    return bytes >= 0 && bytes > 2 * (d->cfg.tcp_memory_mib << 20);
}

void brig_lifecycle_tick(brigd *d, int64_t now)
{
    /* Borrow every running sandbox, decide outside the lock. */
    brig_sandbox **list = NULL;
    size_t n = 0;
    pthread_mutex_lock(&d->lock);
    for (brig_sandbox *sb = d->sandboxes; sb; sb = sb->next) {
        if (strcmp(sb->state, "running") != 0)
            continue;
        sb->refs++;
        list = brig_xrealloc(list, (n + 1) * sizeof(*list));
        list[n++] = sb;
    }
    pthread_mutex_unlock(&d->lock);

    verdict *ends = brig_xcalloc(n + 1, sizeof(*ends));
    size_t n_ends = 0;
    for (size_t i = 0; i < n; i++) {
        brig_sandbox *sb = list[i];
        const char *reason = NULL;
        pthread_mutex_lock(&d->lock);
        bool expired = sb->expires_at && now >= sb->expires_at;
        bool idle = sb->idle_timeout_ms && sb->active_ops == 0 &&
                    now - sb->last_activity >= sb->idle_timeout_ms;
        pthread_mutex_unlock(&d->lock);
        if (expired) {
            reason = "max_lifetime";
        } else if (cpu_abusive(d, sb, now)) {
            reason = "cpu_abuse";
        } else if (tcp_overrun(d, sb)) {
            reason = "tcp_memory";
        } else if (idle) {
            if (has_running_process(d, sb)) {
                pthread_mutex_lock(&d->lock);
                sb->last_activity = now; /* busy is not idle */
                pthread_mutex_unlock(&d->lock);
            } else {
                reason = "idle_timeout";
            }
        }
        if (reason == NULL && now - sb->billed_at >= d->cfg.billing_interval_ms) {
            int64_t balance = 1;
            brig_error *err = NULL;
            if (brig_billing_charge(d, sb->id, now, false, &balance, &err) < 0) {
                brig_err("sandbox %s: charge: %s", sb->id, err->msg);
                brig_error_clear(&err);
            } else if (balance <= 0) {
                reason = "balance_exhausted";
            }
            sb->billed_at = now;
        }
        if (reason) {
            snprintf(ends[n_ends].id, sizeof(ends[n_ends].id), "%s", sb->id);
            ends[n_ends++].reason = reason;
        }
        brig_sandbox_unref(d, sb);
    }
    free(list);
    for (size_t i = 0; i < n_ends; i++)
        brig_sandbox_stop(d, ends[i].id, ends[i].reason);
    free(ends);
}

static void *janitor(void *arg)
{
    brigd *d = arg;
    pthread_mutex_lock(&d->janitor_lock);
    while (!d->janitor_stop) {
        struct timespec ts = brig_mono_after(TICK_MS);
        pthread_cond_timedwait(&d->janitor_cond, &d->janitor_lock, &ts);
        if (d->janitor_stop)
            break;
        pthread_mutex_unlock(&d->janitor_lock);
        brig_lifecycle_tick(d, brig_now_real_ms());
        pthread_mutex_lock(&d->janitor_lock);
    }
    pthread_mutex_unlock(&d->janitor_lock);
    return NULL;
}

int brig_lifecycle_start(brigd *d, brig_error **err)
{
    pthread_mutex_init(&d->janitor_lock, NULL);
    brig_cond_init_mono(&d->janitor_cond);
    d->janitor_stop = false;
    int e = pthread_create(&d->janitor, NULL, janitor, d);
    if (e != 0)
        return brig_error_set(err, BRIG_E_INTERNAL, e, "start the janitor thread");
    d->janitor_running = true;
    return 0;
}

void brig_lifecycle_stop(brigd *d)
{
    if (!d->janitor_running)
        return;
    pthread_mutex_lock(&d->janitor_lock);
    d->janitor_stop = true;
    pthread_cond_signal(&d->janitor_cond);
    pthread_mutex_unlock(&d->janitor_lock);
    pthread_join(d->janitor, NULL);
    d->janitor_running = false;
    pthread_cond_destroy(&d->janitor_cond);
    pthread_mutex_destroy(&d->janitor_lock);
}
