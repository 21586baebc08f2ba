/*
 * spares.c - the filler of spare agent connections (see spares.h).
 *
 * One worker thread: wanted sandboxes are queued by id (each at most once), and the thread
 * opens their spares through the driver's `spares` op, holding a plain reference (no use:
 * filling is not activity for the idle timeout, nor a request for the pool's quiet time).
 * Every TRIM_EVERY_MS it also closes the spares of sandboxes idle for BRIG_SPARES_IDLE_MS.
 * A connect that fails (the sandbox is ending or pausing meanwhile) only means no spare:
 * the next request opens its own connection, as it always could.
 */
#include "spares.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/worker.h"
#include "log.h"
#include "registry.h"
#include "util.h"

#define QUEUE_MAX     1024  /* sandboxes waiting for their spares; a want beyond is dropped */
#define TRIM_EVERY_MS 10000 /* how often idle sandboxes' spares are looked for */

typedef struct brig_spares {
    pthread_mutex_t lock;
    char (*queue)[BRIG_ID_MAX]; /* ids wanting spares, oldest first */
    size_t n;
    brig_worker *worker;
    int64_t trimmed_at; /* mono ms of the last trim */
} brig_spares;

/* The oldest wanted id into id; false when none is queued. */
static bool pop(brig_spares *s, char id[BRIG_ID_MAX])
{
    pthread_mutex_lock(&s->lock);
    bool any = s->n > 0;
    if (any) {
        memcpy(id, s->queue[0], BRIG_ID_MAX);
        memmove(s->queue, s->queue + 1, (s->n - 1) * sizeof(*s->queue));
        s->n--;
    }
    pthread_mutex_unlock(&s->lock);
    return any;
}

/* Whether sb runs and was used within BRIG_SPARES_IDLE_MS of now (ms since the epoch). */
static bool in_use(brigd *d, brig_sandbox *sb, int64_t now)
{
    brig_sandbox_view v;
    brig_registry_view_of(d, sb, &v);
    bool used = v.state == BRIG_SB_RUNNING && now - v.last_activity < BRIG_SPARES_IDLE_MS;
    brig_sandbox_view_dispose(&v);
    return used;
}

static void fill(brigd *d, const char *id)
{
    brig_sandbox *sb = brig_registry_ref_id(d, id);
    if (sb == NULL)
        return;
    brig_rt_sandbox *rt = brig_sandbox_runtime(sb);
    if (rt != NULL && in_use(d, sb, brig_now_real_ms())) {
        brig_error *err = NULL;
        if (d->rt->ops->spares(d->rt, rt, BRIG_SPARES_KEEP, &err) < 0)
            brig_debug("sandbox %s: no spare agent connection: %s", id, err->msg);
        brig_error_clear(&err);
    }
    brig_sandbox_unref(d, sb);
}

static void trim_one(brigd *d, brig_sandbox *sb, void *arg)
{
    const int64_t *now = arg;
    brig_rt_sandbox *rt = brig_sandbox_runtime(sb);
    if (rt != NULL && !in_use(d, sb, *now))
        d->rt->ops->spares(d->rt, rt, 0, NULL);
}

static int64_t run(void *arg)
{
    brigd *d = arg;
    brig_spares *s = d->spares;
    char id[BRIG_ID_MAX];
    if (pop(s, id)) {
        fill(d, id);
        return BRIG_WORKER_AGAIN;
    }
    int64_t mono = brig_now_mono_ms();
    if (mono - s->trimmed_at >= TRIM_EVERY_MS) {
        int64_t now = brig_now_real_ms();
        brig_registry_each_running(d, NULL, 0, trim_one, &now);
        s->trimmed_at = mono;
    }
    return BRIG_WORKER_IDLE;
}

int brig_spares_start(brigd *d, brig_error **err)
{
    if (d->rt->ops->spares == NULL)
        return 0;
    brig_spares *s = brig_xcalloc(1, sizeof(*s));
    pthread_mutex_init(&s->lock, NULL);
    s->queue = brig_xcalloc(QUEUE_MAX, sizeof(*s->queue));
    s->trimmed_at = brig_now_mono_ms();
    d->spares = s;
    brig_worker_spec spec = {.name = "the spare connections' filler",
                             .threads = 1,
                             .period_ms = TRIM_EVERY_MS,
                             .run = run,
                             .arg = d};
    if (brig_worker_start(&spec, &s->worker, err) < 0) {
        d->spares = NULL;
        free(s->queue);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return -1;
    }
    return 0;
}

void brig_spares_stop(brigd *d)
{
    brig_spares *s = d->spares;
    if (s == NULL)
        return;
    brig_worker_stop(s->worker);
    d->spares = NULL;
    free(s->queue);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

void brig_spares_want(brigd *d, brig_sandbox *sb)
{
    brig_spares *s = d->spares;
    if (s == NULL)
        return;
    const char *id = brig_sandbox_id(sb);
    pthread_mutex_lock(&s->lock);
    bool queued = false;
    for (size_t i = 0; i < s->n && !queued; i++)
        queued = strcmp(s->queue[i], id) == 0;
    bool add = !queued && s->n < QUEUE_MAX;
    if (add)
        snprintf(s->queue[s->n++], BRIG_ID_MAX, "%s", id);
    pthread_mutex_unlock(&s->lock);
    if (add)
        brig_worker_kick(s->worker);
}

int brig_sandbox_connect(brigd *d, brig_sandbox *sb, brig_error **err)
{
    int fd = d->rt->ops->connect(d->rt, brig_sandbox_runtime(sb), err);
    if (fd >= 0)
        brig_spares_want(d, sb);
    return fd;
}
