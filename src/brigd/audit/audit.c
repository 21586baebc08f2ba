/*
 * audit.c - the audit timeline (see audit.h): the queue, its worker, the chain and
 * verify.
 *
 * Invariants: only the worker appends, so each account's head (cached in heads, read
 * from the store at its first record) is the store's; seq and n grow together.  A
 * batch the store refuses is logged and lost, and the heads are read again.
 */
#include "audit.h"

#include <pthread.h>
#include <stdarg.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

#include "core/format.h"
#include "core/worker.h"
#include "log.h"
#include "util.h"

#define ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"
#define BATCH_MAX 512 /* records per transaction */
/* A record waits this long for more (and for the request that made it to be answered):
 * one transaction for a burst of them, and none competing with that request for the CPU
 * and the store's lock; a reader's brig_audit_sync does not wait for it. */
#define DEFER_MS 10

typedef struct pending {
    struct pending *next;
    int64_t queued_at;  /* mono ms */
    brig_audit_row row; /* data still empty */
    json_t *data;       /* to redact */
    brig_redactor *red; /* a reference, or NULL */
    bool resolve;       /* account, project and red come from the resolver */
} pending;

struct brig_audit {
    brig_store *st;
    brig_worker *worker;
    brig_audit_resolve_fn resolve;
    void *resolve_ctx;
    pthread_mutex_t lock; /* the queue, the counters, closed */
    pthread_cond_t moved; /* a batch was stored */
    pending *head, **tail;
    uint64_t queued, stored; /* events ever queued; of those, stored (or dropped) */
    int syncing;             /* readers in brig_audit_sync: no record waits */
    int64_t last_seq;        /* the newest stored */
    bool closed;
    bool no_followers;          /* shutdown: brig_audit_wait says -1 */
    json_t *heads;              /* worker only: account -> [n, "hash"] */
    pthread_mutex_t maint_lock; /* verify and prune, one at a time */
};

/* ---- the chain ------------------------------------------------------------------------ */

void brig_audit_hash(const brig_audit_row *row, char out[65])
{
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    char num[64];
    int k = snprintf(num, sizeof(num), "\n%lld\n%lld\n", (long long)row->n, (long long)row->at);
    const char *parts[] = {
        row->account_id, "\n", row->sandbox_id, "\n", row->project_id,           "\n",
        row->kind,       "\n", row->actor,      "\n", row->data ? row->data : ""};
    crypto_hash_sha256_update(&h, (const uint8_t *)row->prev, strlen(row->prev));
    crypto_hash_sha256_update(&h, (const uint8_t *)num, (size_t)k);
    for (size_t i = 0; i < BRIG_ARRAY_LEN(parts); i++)
        crypto_hash_sha256_update(&h, (const uint8_t *)parts[i], strlen(parts[i]));
    uint8_t bin[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&h, bin);
    sodium_bin2hex(out, 65, bin, sizeof(bin));
}

/* The account's head, from the cache or the store; -1 when the store fails. */
static int head_of(brig_audit *a, const char *account, int64_t *n, char hash[65])
{
    json_t *h = json_object_get(a->heads, account);
    if (h == NULL) {
        brig_audit_chain ch;
        brig_error *err = NULL;
        int r = brig_store_audit_chain(a->st, account, &ch, &err);
        if (r < 0) {
            brig_err("audit: %s", err->msg);
            brig_error_clear(&err);
            return -1;
        }
        h = r ? json_pack("[I, s]", (json_int_t)ch.head_n, ch.head_hash)
              : json_pack("[i, s]", 0, ZERO_HASH);
        json_object_set_new(a->heads, account, h);
    }
    *n = json_integer_value(json_array_get(h, 0));
    snprintf(hash, 65, "%s", json_string_value(json_array_get(h, 1)));
    return 0;
}

/* Redacts, serialises and chains one event into its row; false to drop it. */
static bool seal_one(brig_audit *a, pending *p)
{
    brig_audit_row *w = &p->row;
    if (p->resolve && (a->resolve == NULL || !a->resolve(a->resolve_ctx, w->sandbox_id,
                                                         w->account_id, w->project_id, &p->red)))
        return false;
    if (p->red) {
        brig_redact_json(p->red, p->data);
        if (strcmp(w->kind, "dns") == 0) /* names: lower case, split by dots */
            brig_redact_json(brig_redactor_dns(p->red), p->data);
    }
    w->data = json_dumps(p->data, JSON_COMPACT | JSON_SORT_KEYS);
    int64_t n;
    if (w->data == NULL || head_of(a, w->account_id, &n, w->prev) < 0)
        return false;
    w->n = n + 1;
    brig_audit_hash(w, w->hash);
    json_object_set_new(a->heads, w->account_id, json_pack("[I, s]", (json_int_t)w->n, w->hash));
    return true;
}

static void pending_free(pending *p)
{
    json_decref(p->data);
    brig_redactor_free(p->red);
    free(p->row.data);
    free(p);
}

/* One batch: at most BATCH_MAX events off the queue, sealed and stored. */
static int64_t flush(void *arg)
{
    brig_audit *a = arg;
    pthread_mutex_lock(&a->lock);
    if (a->head && a->syncing == 0 && !a->closed && a->queued - a->stored < BATCH_MAX &&
        brig_now_mono_ms() < a->head->queued_at + DEFER_MS) {
        int64_t due = a->head->queued_at + DEFER_MS;
        pthread_mutex_unlock(&a->lock);
        return due;
    }
    pending *list = a->head;
    size_t taken = 0;
    pending **cut = &a->head;
    while (*cut && taken < BATCH_MAX) {
        cut = &(*cut)->next;
        taken++;
    }
    a->head = *cut;
    *cut = NULL;
    if (a->head == NULL)
        a->tail = &a->head;
    pthread_mutex_unlock(&a->lock);
    if (taken == 0)
        return BRIG_WORKER_IDLE;

    brig_audit_row *rows = brig_xcalloc(taken, sizeof(*rows));
    size_t n = 0;
    for (pending *p = list; p; p = p->next)
        if (seal_one(a, p))
            rows[n++] = p->row; /* its data stays p's */
    brig_error *err = NULL;
    if (n && brig_store_audit_append(a->st, rows, n, &err) < 0) {
        brig_err("audit: %zu records lost: %s", n, err->msg);
        brig_error_clear(&err);
        json_object_clear(a->heads); /* read again from the store */
        n = 0;
    }
    int64_t last = n ? rows[n - 1].seq : 0;
    for (pending *p = list, *next; p; p = next) {
        next = p->next;
        pending_free(p);
    }
    free(rows);
    pthread_mutex_lock(&a->lock);
    a->stored += taken;
    if (last > a->last_seq)
        a->last_seq = last;
    pthread_cond_broadcast(&a->moved);
    bool more = a->head != NULL;
    pthread_mutex_unlock(&a->lock);
    return more ? BRIG_WORKER_AGAIN : BRIG_WORKER_IDLE;
}

/* ---- life ------------------------------------------------------------------------------ */

int brig_audit_start(brig_store *st, brig_audit **out, brig_error **err)
{
    brig_audit *a = brig_xcalloc(1, sizeof(*a));
    a->st = st;
    a->tail = &a->head;
    a->heads = json_object();
    pthread_mutex_init(&a->lock, NULL);
    pthread_mutex_init(&a->maint_lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&a->moved, &ca);
    pthread_condattr_destroy(&ca);
    brig_worker_spec spec = {.name = "the audit writer", .threads = 1, .run = flush, .arg = a};
    if (brig_worker_start(&spec, &a->worker, err) < 0) {
        brig_audit_free(a);
        return -1;
    }
    *out = a;
    return 0;
}

void brig_audit_set_resolver(brig_audit *a, brig_audit_resolve_fn fn, void *ctx)
{
    a->resolve = fn;
    a->resolve_ctx = ctx;
}

void brig_audit_stop(brig_audit *a)
{
    if (a == NULL || a->worker == NULL)
        return;
    pthread_mutex_lock(&a->lock);
    a->closed = true;
    pthread_mutex_unlock(&a->lock);
    brig_worker_drain(a->worker);
    a->worker = NULL;
    pthread_mutex_lock(&a->lock);
    pthread_cond_broadcast(&a->moved);
    pthread_mutex_unlock(&a->lock);
}

void brig_audit_free(brig_audit *a)
{
    if (a == NULL)
        return;
    brig_audit_stop(a);
    for (pending *p = a->head, *next; p; p = next) {
        next = p->next;
        pending_free(p);
    }
    json_decref(a->heads);
    pthread_cond_destroy(&a->moved);
    pthread_mutex_destroy(&a->lock);
    pthread_mutex_destroy(&a->maint_lock);
    free(a);
}

static void copy_id(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

void brig_audit_record(brig_audit *a, const brig_audit_event *ev)
{
    if (a == NULL) {
        json_decref(ev->data);
        return;
    }
    pending *p = brig_xcalloc(1, sizeof(*p));
    brig_audit_row *w = &p->row;
    w->at = brig_now_real_ms();
    copy_id(w->kind, sizeof(w->kind), ev->kind);
    copy_id(w->account_id, sizeof(w->account_id), ev->account_id);
    copy_id(w->project_id, sizeof(w->project_id), ev->project_id);
    copy_id(w->sandbox_id, sizeof(w->sandbox_id), ev->sandbox_id);
    copy_id(w->actor, sizeof(w->actor), ev->actor && ev->actor[0] ? ev->actor : "brigd");
    p->data = ev->data ? ev->data : json_object();
    p->red = brig_redactor_ref(ev->red);
    p->resolve = ev->account_id == NULL;
    p->queued_at = brig_now_mono_ms();
    pthread_mutex_lock(&a->lock);
    bool closed = a->closed;
    /* The first of a batch wakes the writer, which then waits DEFER_MS for the rest. */
    bool first = a->head == NULL;
    if (!closed) {
        *a->tail = p;
        a->tail = &p->next;
        a->queued++;
    }
    pthread_mutex_unlock(&a->lock);
    if (closed)
        pending_free(p);
    else if (first)
        brig_worker_kick(a->worker);
}

static void deadline_in(struct timespec *ts, int64_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

void brig_audit_sync(brig_audit *a)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->lock);
    uint64_t want = a->queued;
    bool behind = a->stored < want && !a->closed;
    a->syncing++;
    pthread_mutex_unlock(&a->lock);
    if (behind)
        brig_worker_kick(a->worker); /* what waits (DEFER_MS) goes now */
    pthread_mutex_lock(&a->lock);
    while (a->stored < want && !(a->closed && a->worker == NULL))
        pthread_cond_wait(&a->moved, &a->lock);
    a->syncing--;
    pthread_mutex_unlock(&a->lock);
}

int64_t brig_audit_wait(brig_audit *a, int64_t seen, int64_t timeout_ms)
{
    struct timespec ts;
    deadline_in(&ts, timeout_ms);
    pthread_mutex_lock(&a->lock);
    while (a->last_seq <= seen && !a->closed && !a->no_followers)
        if (pthread_cond_timedwait(&a->moved, &a->lock, &ts) != 0)
            break;
    int64_t last = a->no_followers ? -1 : a->last_seq;
    pthread_mutex_unlock(&a->lock);
    return last;
}

void brig_audit_stop_followers(brig_audit *a)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->lock);
    a->no_followers = true;
    pthread_cond_broadcast(&a->moved);
    pthread_mutex_unlock(&a->lock);
}

/* ---- reading and verifying ---------------------------------------------------------- */

json_t *brig_audit_row_json(const brig_audit_row *row)
{
    char at[32];
    brig_format_time(row->at, at);
    json_t *data = row->data ? json_loads(row->data, 0, NULL) : NULL;
    return json_pack("{s:I, s:I, s:s, s:I, s:s, s:s, s:o, s:o, s:s, s:o, s:s, s:s}", "seq",
                     (json_int_t)row->seq, "n", (json_int_t)row->n, "at", at, "at_ms",
                     (json_int_t)row->at, "kind", row->kind, "account_id", row->account_id,
                     "sandbox_id", row->sandbox_id[0] ? json_string(row->sandbox_id) : json_null(),
                     "project_id", row->project_id[0] ? json_string(row->project_id) : json_null(),
                     "actor", row->actor, "data", data ? data : json_object(), "prev", row->prev,
                     "hash", row->hash);
}

/* One chain's walk. */
typedef struct walk {
    const brig_audit_chain *ch;
    int64_t next_n; /* the n the next record must have */
    char prev[65];  /* ... and its prev */
    int64_t records;
    json_t *broken; /* the first problem, or NULL */
} walk;

static int broken(walk *w, const brig_audit_row *row, int64_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int broken(walk *w, const brig_audit_row *row, int64_t n, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    w->broken =
        json_pack("{s:s, s:I, s:o, s:s}", "account_id", w->ch->account_id, "n", (json_int_t)n,
                  "seq", row ? json_integer((json_int_t)row->seq) : json_null(), "problem", msg);
    return 1;
}

static int walk_row(const brig_audit_row *row, void *ctx)
{
    walk *w = ctx;
    if (row->n > w->ch->head_n) /* appended after verify began */
        return 1;
    char h[65];
    brig_audit_hash(row, h);
    if (strcmp(h, row->hash) != 0)
        return broken(w, row, row->n,
                      "record %lld was altered: its hash does not match its content",
                      (long long)row->n);
    if (row->n != w->next_n)
        return broken(w, row, w->next_n, "record %lld is missing (the next one kept is %lld)",
                      (long long)w->next_n, (long long)row->n);
    if (strcmp(row->prev, w->prev) != 0)
        return broken(
            w, row, row->n, "record %lld does not follow %s: its prev hash does not match",
            (long long)row->n, row->n == w->ch->base_n ? "the checkpoint" : "the record before it");
    w->next_n++;
    memcpy(w->prev, row->hash, sizeof(w->prev));
    w->records++;
    return 0;
}

/* Walks one chain; adds to the totals in out, sets "broken" at the first problem. */
static int verify_chain(brig_audit *a, const brig_audit_chain *ch, json_t *out, brig_error **err)
{
    walk w = {.ch = ch, .next_n = ch->base_n};
    snprintf(w.prev, sizeof(w.prev), "%s", ch->base_prev);
    brig_audit_query q = {.account_id = ch->account_id};
    if (brig_store_audit_each(a->st, &q, walk_row, &w, err) < 0)
        return -1;
    if (w.broken == NULL && w.next_n != ch->head_n + 1)
        broken(&w, NULL, w.next_n, "records %lld to %lld are missing (the chain's head is %lld)",
               (long long)w.next_n, (long long)ch->head_n, (long long)ch->head_n);
    else if (w.broken == NULL && strcmp(w.prev, ch->head_hash) != 0)
        broken(&w, NULL, ch->head_n, "record %lld is not the chain's head: its hash differs",
               (long long)ch->head_n);
    json_object_set_new(
        out, "records",
        json_integer(json_integer_value(json_object_get(out, "records")) + (json_int_t)w.records));
    json_object_set_new(out, "accounts",
                        json_integer(json_integer_value(json_object_get(out, "accounts")) + 1));
    if (w.broken) {
        json_object_set_new(out, "ok", json_false());
        json_object_set_new(out, "broken", w.broken);
    }
    return 0;
}

typedef struct chains {
    brig_audit_chain *v;
    size_t n;
} chains;

static void collect_chain(const brig_audit_chain *ch, void *ctx)
{
    chains *cs = ctx;
    cs->v = brig_xrealloc(cs->v, (cs->n + 1) * sizeof(*cs->v));
    cs->v[cs->n++] = *ch;
}

int brig_audit_verify(brig_audit *a, const char *account_id, json_t **out, brig_error **err)
{
    brig_audit_sync(a);
    pthread_mutex_lock(&a->maint_lock);
    chains cs = {0};
    int r;
    if (account_id) {
        cs.v = brig_xcalloc(1, sizeof(*cs.v));
        r = brig_store_audit_chain(a->st, account_id, cs.v, err);
        cs.n = r == 1;
    } else {
        r = brig_store_audit_chains(a->st, collect_chain, &cs, err);
    }
    json_t *res = json_pack("{s:b, s:i, s:i, s:n}", "ok", 1, "accounts", 0, "records", 0, "broken");
    for (size_t i = 0; r >= 0 && i < cs.n; i++) {
        r = verify_chain(a, &cs.v[i], res, err);
        if (json_is_false(json_object_get(res, "ok")))
            break;
    }
    pthread_mutex_unlock(&a->maint_lock);
    free(cs.v);
    if (r < 0) {
        json_decref(res);
        return -1;
    }
    *out = res;
    return 0;
}

int brig_audit_prune(brig_audit *a, int64_t before, int64_t *pruned, brig_error **err)
{
    brig_audit_sync(a);
    pthread_mutex_lock(&a->maint_lock);
    int r = brig_store_audit_prune(a->st, before, pruned, err);
    pthread_mutex_unlock(&a->maint_lock);
    return r;
}
