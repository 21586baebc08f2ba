/*
 * usage.c - per-sandbox usage rings (see usage.h).
 *
 * Reading a sandbox (a few cgroup files, a statfs, one netlink request) happens
 * outside the lock; the lock only guards the rings.  Rings are found by id in a list:
 * a tick walks at most max_sandboxes of them every few seconds.
 */
#include "usage.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/format.h"
#include "core/metrics.h"
#include "net/net.h"
#include "util.h"

typedef struct sample {
    int64_t at; /* ms since the epoch */
    brig_rt_stats rt;
    brig_net_counters net;
    double cpu_percent; /* of one CPU since the previous sample; < 0: unknown */
    int64_t execs;
} sample;

typedef struct ring {
    char id[BRIG_ID_MAX], account_id[BRIG_ID_MAX], project_id[BRIG_ID_MAX];
    sample *s;
    size_t cap, start, n;
    int64_t execs;
    int64_t ended_at; /* 0: live */
    char reason[64];
    struct ring *next;
} ring;

struct brig_usage {
    pthread_mutex_t lock;
    ring *live;
    ring *ended; /* newest first */
    size_t n_ended;
    int64_t sampled_at;
};

static void ring_free(ring *r)
{
    free(r->s);
    free(r);
}

static void list_free(ring *r)
{
    while (r) {
        ring *next = r->next;
        ring_free(r);
        r = next;
    }
}

void brig_usage_start(brigd *d)
{
    if (d->usage)
        return;
    d->usage = brig_xcalloc(1, sizeof(*d->usage));
    pthread_mutex_init(&d->usage->lock, NULL);
}

void brig_usage_stop(brigd *d)
{
    brig_usage *u = d->usage;
    if (u == NULL)
        return;
    list_free(u->live);
    list_free(u->ended);
    pthread_mutex_destroy(&u->lock);
    free(u);
    d->usage = NULL;
}

static ring *find(ring *r, const char *id)
{
    for (; r; r = r->next)
        if (strcmp(r->id, id) == 0)
            return r;
    return NULL;
}

/* sb's live ring, made when new; NULL once it ended (lock held). */
static ring *live_ring(brigd *d, const brig_sandbox *sb)
{
    brig_usage *u = d->usage;
    const brig_sandbox_spec *sp = brig_sandbox_spec_of(sb);
    ring *r = find(u->live, sp->id);
    if (r || find(u->ended, sp->id))
        return r;
    r = brig_xcalloc(1, sizeof(*r));
    snprintf(r->id, sizeof(r->id), "%s", sp->id);
    snprintf(r->account_id, sizeof(r->account_id), "%s", sp->account_id);
    snprintf(r->project_id, sizeof(r->project_id), "%s", sp->project_id);
    /* The last minute at metrics_interval, and the newest. */
    r->cap = (size_t)(60000 / d->cfg.metrics_interval_ms) + 1;
    r->cap = r->cap < 2 ? 2 : r->cap;
    r->s = brig_xcalloc(r->cap, sizeof(*r->s));
    r->next = u->live;
    u->live = r;
    return r;
}

static sample *newest(ring *r)
{
    return r->n ? &r->s[(r->start + r->n - 1) % r->cap] : NULL;
}

static void push(ring *r, sample *s)
{
    sample *prev = newest(r);
    s->cpu_percent = -1;
    if (prev && prev->rt.cpu_ns >= 0 && s->rt.cpu_ns >= prev->rt.cpu_ns && s->at > prev->at)
        s->cpu_percent =
            (double)(s->rt.cpu_ns - prev->rt.cpu_ns) / ((double)(s->at - prev->at) * 1e4);
    s->execs = r->execs;
    if (r->n == r->cap) {
        r->s[r->start] = *s;
        r->start = (r->start + 1) % r->cap;
    } else {
        r->s[(r->start + r->n++) % r->cap] = *s;
    }
}

/* Reads sb now (no lock held) and adds the sample to its ring. */
static void take(brigd *d, brig_sandbox *sb, int64_t now)
{
    sample s = {.at = now};
    brig_rt_sandbox *h = brig_sandbox_runtime(sb);
    if (h == NULL || d->rt->ops->stats == NULL || d->rt->ops->stats(d->rt, h, &s.rt) < 0)
        s.rt = (brig_rt_stats){-1, -1, -1, -1, -1, -1};
    brig_net_counters_of(d->net, brig_sandbox_id(sb), &s.net);
    pthread_mutex_lock(&d->usage->lock);
    ring *r = live_ring(d, sb);
    if (r)
        push(r, &s);
    pthread_mutex_unlock(&d->usage->lock);
}

static void sample_one(brigd *d, brig_sandbox *sb, void *arg)
{
    take(d, sb, *(int64_t *)arg);
}

/* Ended rings past the retention period go (lock held). */
static void prune(brigd *d, int64_t now)
{
    brig_usage *u = d->usage;
    size_t kept = 0;
    for (ring **pp = &u->ended; *pp;) {
        ring *r = *pp;
        if (kept >= USAGE_ENDED_MAX || r->ended_at < now - d->cfg.retention_ms) {
            *pp = r->next;
            ring_free(r);
            u->n_ended--;
        } else {
            kept++;
            pp = &r->next;
        }
    }
}

void brig_usage_tick(brigd *d, int64_t now)
{
    brig_usage *u = d->usage;
    if (u == NULL || now - u->sampled_at < d->cfg.metrics_interval_ms)
        return;
    u->sampled_at = now; /* the janitor's thread alone ticks */
    brig_registry_each_running(d, NULL, 0, sample_one, &now);
    pthread_mutex_lock(&u->lock);
    prune(d, now);
    pthread_mutex_unlock(&u->lock);
}

void brig_usage_exec(brigd *d, const brig_sandbox *sb)
{
    if (d->usage == NULL)
        return;
    pthread_mutex_lock(&d->usage->lock);
    ring *r = live_ring(d, sb);
    if (r)
        r->execs++;
    pthread_mutex_unlock(&d->usage->lock);
}

void brig_usage_created(brigd *d, const brig_sandbox *sb, bool claimed, int64_t ms)
{
    (void)d;
    char labels[128];
    const char *pool = claimed ? "hit" : "cold";
    brig_metric_add(BRIG_M_SANDBOXES_CREATED,
                    brig_metrics_labels(labels, sizeof(labels), "isolation",
                                        brig_isolation_name(brig_sandbox_spec_of(sb)->isolation),
                                        "pool", pool, NULL),
                    1);
    brig_metric_observe(BRIG_M_CREATE_SECONDS,
                        brig_metrics_labels(labels, sizeof(labels), "pool", pool, NULL),
                        (double)ms / 1000);
}

void brig_usage_refused(brigd *d, const brig_error *err)
{
    (void)d;
    char labels[96];
    brig_metric_add(BRIG_M_ADMISSION_REFUSED,
                    brig_metrics_labels(labels, sizeof(labels), "reason",
                                        err ? brig_error_code(err->kind) : "unknown", NULL),
                    1);
}

void brig_usage_create_failed(brigd *d)
{
    (void)d;
    brig_metric_add(BRIG_M_CREATES_FAILED, NULL, 1);
}

void brig_usage_ended(brigd *d, brig_sandbox *sb, const char *reason)
{
    char labels[128];
    brig_metric_add(BRIG_M_SANDBOXES_ENDED,
                    brig_metrics_labels(labels, sizeof(labels), "reason", reason, NULL), 1);
    brig_usage *u = d->usage;
    if (u == NULL)
        return;
    int64_t now = brig_now_real_ms();
    take(d, sb, now); /* its last: the peak stays in its cgroup until the teardown */
    pthread_mutex_lock(&u->lock);
    for (ring **pp = &u->live; *pp; pp = &(*pp)->next) {
        ring *r = *pp;
        if (strcmp(r->id, brig_sandbox_id(sb)) != 0)
            continue;
        *pp = r->next;
        r->ended_at = now;
        snprintf(r->reason, sizeof(r->reason), "%s", reason);
        r->next = u->ended;
        u->ended = r;
        u->n_ended++;
        break;
    }
    prune(d, now);
    pthread_mutex_unlock(&u->lock);
}

static json_t *count(int64_t v)
{
    return v < 0 ? json_null() : json_integer((json_int_t)v);
}

static json_t *sample_json(const sample *s)
{
    char at[32];
    brig_format_time(s->at, at);
    json_t *j =
        json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "at", at, "cpu_seconds",
                  s->rt.cpu_ns < 0 ? json_null() : json_real((double)s->rt.cpu_ns / 1e9),
                  "cpu_percent", s->cpu_percent < 0 ? json_null() : json_real(s->cpu_percent),
                  "memory_bytes", count(s->rt.memory_bytes), "memory_peak_bytes",
                  count(s->rt.memory_peak_bytes), "pids", count(s->rt.pids), "disk_bytes",
                  count(s->rt.disk_bytes), "disk_inodes", count(s->rt.disk_inodes));
    json_object_set_new(j, "net_bytes_in", count(s->net.bytes_in));
    json_object_set_new(j, "net_bytes_out", count(s->net.bytes_out));
    json_object_set_new(j, "net_packets_in", count(s->net.packets_in));
    json_object_set_new(j, "net_packets_out", count(s->net.packets_out));
    json_object_set_new(j, "execs", json_integer((json_int_t)s->execs));
    return j;
}

/* The JSON of ring r (NULL: a live sandbox not sampled yet) of sandbox id (lock held). */
static json_t *ring_json(brigd *d, const char *id, const ring *r)
{
    json_t *samples = json_array();
    for (size_t i = 0; r && i < r->n; i++)
        json_array_append_new(samples, sample_json(&r->s[(r->start + i) % r->cap]));
    size_t n = json_array_size(samples);
    char ended[32];
    if (r && r->ended_at)
        brig_format_time(r->ended_at, ended);
    return json_pack("{s:s, s:s, s:I, s:o, s:o, s:I, s:O, s:o}", "id", id, "state",
                     r && r->ended_at ? "ended" : "running", "interval",
                     (json_int_t)(d->cfg.metrics_interval_ms / 1000), "ended_at",
                     r && r->ended_at ? json_string(ended) : json_null(), "reason",
                     r && r->ended_at ? json_string(r->reason) : json_null(), "execs",
                     (json_int_t)(r ? r->execs : 0), "latest",
                     n ? json_array_get(samples, n - 1) : json_null(), "samples", samples);
}

int brig_usage_json(brigd *d, const brig_caller *c, const char *id, json_t **out, brig_error **err)
{
    brig_usage *u = d->usage;
    brig_sandbox_view v;
    bool live = brig_registry_view(d, c, id, &v);
    if (live)
        brig_sandbox_view_dispose(&v);
    *out = NULL;
    if (u) {
        pthread_mutex_lock(&u->lock);
        ring *r = find(u->ended, id);
        if (r && !brig_caller_sees(c, r->account_id, r->project_id))
            r = NULL;
        if (r || live)
            *out = ring_json(d, id, r ? r : find(u->live, id));
        pthread_mutex_unlock(&u->lock);
    }
    if (*out == NULL)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s' with metrics", id);
    return 0;
}
