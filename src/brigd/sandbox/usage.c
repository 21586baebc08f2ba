/*
 * usage.c - per-sandbox usage rings (see usage.h).
 *
 * Reading a sandbox (a few cgroup files, a statfs, one netlink request) happens
 * outside the lock; the lock only guards the rings.  Rings are found by id in a list:
 * a tick walks at most max_sandboxes of them every few seconds.  A ring is made only
 * for a running sandbox, so a late exec or sample of one that ended makes none.
 *
 * An ended sandbox's ring leaves memory for the store, as its black box: compact JSON
 *   {"v": 1, "interval_ms", "ended_at", "reason", "execs", "samples": [[at, cpu_ns,
 *    cpu_percent, memory, memory_peak, pids, disk, inodes, net_bytes_in, net_bytes_out,
 *    net_packets_in, net_packets_out, execs], ...]}
 * oldest first, -1 for what was unknown: about 1.5 KiB for a minute at 5 s.
 */
#include "usage.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/format.h"
#include "core/metrics.h"
#include "ends.h"
#include "log.h"
#include "net/net.h"
#include "util.h"

#define BLACKBOX_VERSION  1
#define BLACKBOX_FIELDS   13    /* of a sample, as the top of this file lists them */
#define BLACKBOX_PRUNE_MS 60000 /* the store's black boxes past retention go this often */

typedef struct sample {
    int64_t at; /* ms since the epoch */
    brig_rt_stats rt;
    brig_net_counters net;
    double cpu_percent; /* of one CPU since the previous sample; < 0: unknown */
    int64_t execs;
} sample;

typedef struct ring {
    char id[BRIG_ID_MAX];
    sample *s;
    size_t cap, start, n;
    int64_t execs;
    int64_t interval_ms; /* between its samples */
    int64_t ended_at;    /* 0: live */
    char reason[64];     /* an ended one's detail (the store's reason) */
    struct ring *next;
} ring;

struct brig_usage {
    pthread_mutex_t lock;
    ring *live;
    int64_t sampled_at, pruned_at; /* the janitor's thread alone */
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

static ring *ring_new(const char *id, size_t cap, int64_t interval_ms)
{
    ring *r = brig_xcalloc(1, sizeof(*r));
    snprintf(r->id, sizeof(r->id), "%s", id);
    r->cap = cap < 2 ? 2 : cap;
    r->s = brig_xcalloc(r->cap, sizeof(*r->s));
    r->interval_ms = interval_ms;
    return r;
}

/* sb's live ring, made when new while sb runs (or, made, when it ends); NULL once it
 * ended (lock held: its end, brig_usage_ended, comes after it left the running state,
 * and takes the lock). */
static ring *live_ring(brigd *d, const brig_sandbox *sb, bool ending)
{
    brig_usage *u = d->usage;
    const char *id = brig_sandbox_id(sb);
    ring *r = find(u->live, id);
    char running[BRIG_ID_MAX];
    if (r)
        return r->ended_at ? NULL : r;
    if (!ending && !brig_registry_running_id(d, brig_sandbox_serial(sb), running))
        return NULL;
    /* The last minute at metrics_interval, and the newest. */
    r = ring_new(id, (size_t)(60000 / d->cfg.metrics_interval_ms) + 1, d->cfg.metrics_interval_ms);
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

/* Reads sb now (no lock held) and adds the sample to its ring (ending: its last). */
static void take(brigd *d, brig_sandbox *sb, int64_t now, bool ending)
{
    sample s = {.at = now};
    brig_rt_sandbox *h = brig_sandbox_runtime(sb);
    if (h == NULL || d->rt->ops->stats == NULL || d->rt->ops->stats(d->rt, h, &s.rt) < 0)
        s.rt = (brig_rt_stats){-1, -1, -1, -1, -1, -1};
    brig_net_counters_of(d->net, brig_sandbox_id(sb), &s.net);
    pthread_mutex_lock(&d->usage->lock);
    ring *r = live_ring(d, sb, ending);
    if (r)
        push(r, &s);
    pthread_mutex_unlock(&d->usage->lock);
}

static void sample_one(brigd *d, brig_sandbox *sb, void *arg)
{
    take(d, sb, *(int64_t *)arg, false);
}

/* The store's black boxes past the retention period go, at most once a minute. */
static void prune(brigd *d, int64_t now)
{
    brig_usage *u = d->usage;
    if (u->pruned_at && now - u->pruned_at < BLACKBOX_PRUNE_MS)
        return;
    u->pruned_at = now;
    int64_t pruned = 0;
    brig_error *err = NULL;
    if (brig_store_blackbox_prune(d->store, now - d->cfg.retention_ms, &pruned, &err) < 0) {
        brig_err("usage: prune black boxes: %s", err->msg);
        brig_error_clear(&err);
    }
}

void brig_usage_tick(brigd *d, int64_t now)
{
    brig_usage *u = d->usage;
    if (u == NULL || now - u->sampled_at < d->cfg.metrics_interval_ms)
        return;
    u->sampled_at = now;
    brig_registry_each_running(d, NULL, 0, sample_one, &now);
    prune(d, now);
}

void brig_usage_exec(brigd *d, const brig_sandbox *sb)
{
    if (d->usage == NULL)
        return;
    pthread_mutex_lock(&d->usage->lock);
    ring *r = live_ring(d, sb, false);
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

/* The black box text of ended ring r (see the top of this file). */
static char *encode(const ring *r)
{
    json_t *samples = json_array();
    for (size_t i = 0; i < r->n; i++) {
        const sample *s = &r->s[(r->start + i) % r->cap];
        json_t *row = json_pack(
            "[I, I, f, I, I, I, I, I, I, I, I, I, I]", (json_int_t)s->at, (json_int_t)s->rt.cpu_ns,
            s->cpu_percent, (json_int_t)s->rt.memory_bytes, (json_int_t)s->rt.memory_peak_bytes,
            (json_int_t)s->rt.pids, (json_int_t)s->rt.disk_bytes, (json_int_t)s->rt.disk_inodes,
            (json_int_t)s->net.bytes_in, (json_int_t)s->net.bytes_out,
            (json_int_t)s->net.packets_in, (json_int_t)s->net.packets_out, (json_int_t)s->execs);
        json_array_append_new(samples, row);
    }
    json_t *j = json_pack("{s:i, s:I, s:I, s:s, s:I, s:o}", "v", BLACKBOX_VERSION, "interval_ms",
                          (json_int_t)r->interval_ms, "ended_at", (json_int_t)r->ended_at, "reason",
                          r->reason, "execs", (json_int_t)r->execs, "samples", samples);
    char *text = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return text;
}

/* The ring a black box's text holds; NULL for one this version cannot read. */
static ring *decode(const char *id, const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    json_t *samples = json_object_get(j, "samples");
    if (json_integer_value(json_object_get(j, "v")) != BLACKBOX_VERSION ||
        !json_is_array(samples)) {
        json_decref(j);
        return NULL;
    }
    ring *r = ring_new(id, json_array_size(samples),
                       json_integer_value(json_object_get(j, "interval_ms")));
    r->ended_at = json_integer_value(json_object_get(j, "ended_at"));
    r->execs = json_integer_value(json_object_get(j, "execs"));
    const char *reason = json_string_value(json_object_get(j, "reason"));
    snprintf(r->reason, sizeof(r->reason), "%s", reason ? reason : "");
    size_t i;
    json_t *row;
    json_array_foreach(samples, i, row)
    {
        int64_t v[BLACKBOX_FIELDS];
        for (size_t k = 0; k < BLACKBOX_FIELDS; k++)
            v[k] = (int64_t)json_integer_value(json_array_get(row, k));
        r->s[r->n++] = (sample){
            .at = v[0],
            .rt = {v[1], v[3], v[4], v[5], v[6], v[7]},
            .net = {v[8], v[9], v[10], v[11]},
            .cpu_percent = json_number_value(json_array_get(row, 2)),
            .execs = v[12],
        };
    }
    json_decref(j);
    return r;
}

void brig_usage_ended(brigd *d, brig_sandbox *sb, const char *reason)
{
    char labels[128];
    brig_metric_add(
        BRIG_M_SANDBOXES_ENDED,
        brig_metrics_labels(labels, sizeof(labels), "reason", brig_end_code(reason, false), NULL),
        1);
    brig_usage *u = d->usage;
    if (u == NULL)
        return;
    int64_t now = brig_now_real_ms();
    take(d, sb, now, true); /* its last: the peak stays in its cgroup until the teardown */
    /* Stored before it leaves memory: a reader finds it in one place or the other. */
    pthread_mutex_lock(&u->lock);
    ring *r = find(u->live, brig_sandbox_id(sb));
    char *text = NULL;
    if (r && r->ended_at == 0) {
        r->ended_at = now;
        snprintf(r->reason, sizeof(r->reason), "%s", reason);
        text = encode(r);
    }
    pthread_mutex_unlock(&u->lock);
    if (text == NULL)
        return;
    brig_error *err = NULL;
    if (brig_store_blackbox_put(d->store, brig_sandbox_id(sb), now, text, &err) < 0) {
        brig_err("sandbox %s: keep its black box: %s", brig_sandbox_id(sb), err->msg);
        brig_error_clear(&err);
    }
    free(text);
    pthread_mutex_lock(&u->lock);
    for (ring **pp = &u->live; *pp; pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            ring_free(r);
            break;
        }
    }
    pthread_mutex_unlock(&u->lock);
}

void brig_usage_ended_unseen(brigd *d, const char *reason)
{
    (void)d;
    char labels[128];
    brig_metric_add(
        BRIG_M_SANDBOXES_ENDED,
        brig_metrics_labels(labels, sizeof(labels), "reason", brig_end_code(reason, false), NULL),
        1);
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

/* The JSON of ring r (NULL: a live sandbox not sampled yet) of sandbox id. */
static json_t *ring_json(brigd *d, const char *id, const ring *r)
{
    json_t *samples = json_array();
    for (size_t i = 0; r && i < r->n; i++)
        json_array_append_new(samples, sample_json(&r->s[(r->start + i) % r->cap]));
    size_t n = json_array_size(samples);
    bool ended = r && r->ended_at;
    char at[32];
    if (ended)
        brig_format_time(r->ended_at, at);
    const char *code = ended ? brig_end_code(r->reason, false) : NULL;
    int64_t interval = r ? r->interval_ms : d->cfg.metrics_interval_ms;
    json_t *j = json_pack("{s:s, s:s, s:I, s:o, s:o, s:I, s:O, s:o}", "id", id, "state",
                          ended ? "ended" : "running", "interval", (json_int_t)(interval / 1000),
                          "ended_at", ended ? json_string(at) : json_null(), "reason",
                          ended ? json_string(r->reason) : json_null(), "execs",
                          (json_int_t)(r ? r->execs : 0), "latest",
                          n ? json_array_get(samples, n - 1) : json_null(), "samples", samples);
    json_object_set_new(j, "end_reason", code ? json_string(code) : json_null());
    return j;
}

/* An ended sandbox's black box, from the store: *out, or 0 when the caller may not see
 * it, it has none (or none any more: past the retention period), or it cannot be read. */
static int stored_json(brigd *d, const brig_caller *c, const char *id, json_t **out,
                       brig_error **err)
{
    brig_sandbox_row row;
    int found = brig_store_sandbox_get(d->store, id, &row, err);
    if (found <= 0 || !brig_caller_sees(c, row.account_id, row.project_id))
        return found;
    char *text = NULL;
    int64_t at = 0;
    found = brig_store_blackbox_get(d->store, id, &text, &at, err);
    if (found <= 0 || at < brig_now_real_ms() - d->cfg.retention_ms) {
        free(text);
        return found < 0 ? -1 : 0;
    }
    ring *r = decode(id, text);
    free(text);
    if (r == NULL) {
        brig_warn("sandbox %s: its black box is in a format this brigd cannot read", id);
        return 0;
    }
    *out = ring_json(d, id, r);
    ring_free(r);
    return 1;
}

int brig_usage_json(brigd *d, const brig_caller *c, const char *id, json_t **out, brig_error **err)
{
    brig_usage *u = d->usage;
    brig_sandbox_view v;
    bool live = brig_registry_view(d, c, id, &v), running = live && v.state == BRIG_SB_RUNNING;
    if (live)
        brig_sandbox_view_dispose(&v);
    *out = NULL;
    if (live && u) {
        pthread_mutex_lock(&u->lock);
        ring *r = find(u->live, id);
        if (r || running) /* else ending: its ring is on its way to the store */
            *out = ring_json(d, id, r);
        pthread_mutex_unlock(&u->lock);
    }
    if (*out == NULL && stored_json(d, c, id, out, err) < 0)
        return -1;
    if (*out == NULL)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no sandbox '%.40s' with metrics", id);
    return 0;
}
