/*
 * log.c - see log.h.
 *
 * The rate limit is GCRA (the "virtual scheduling" form of a token bucket): a key's one
 * number is the time its next record is due; a record passes when that time is at most
 * the burst's worth of intervals ahead of now, and moves it one interval on.  One number
 * fits one atomic compare-and-swap, which is what lets the agent's forked connection
 * handlers share their limit through a MAP_SHARED page without a lock.
 */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define KEY_MAX   64  /* bytes of a key, its NUL included */
#define KEY_SLOTS 256 /* keys tracked at once; the least recently used one makes room */
#define INTERVAL  (1000000 / BRIG_LOG_RATE) /* microseconds between records */
#define TOLERANCE ((BRIG_LOG_BURST - 1) * INTERVAL)

static const char *log_prog = "brig";
static brig_log_level log_min = BRIG_LOG_INFO;

typedef struct bucket {
    int64_t due;         /* CLOCK_MONOTONIC µs when the next record is due */
    uint64_t suppressed; /* records not written since the last one that was */
} bucket;

/* brig_log_limit_all: one bucket for the process and its forks. */
static bucket *all_bucket;

/* Per-key buckets (brigd's threads). */
static struct slot {
    char key[KEY_MAX];
    bucket b;
    int64_t used; /* µs of the last record, for the eviction */
} slots[KEY_SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread char thread_key[KEY_MAX];

void brig_log_init(const char *prog, brig_log_level min)
{
    log_prog = prog;
    log_min = min;
}

void brig_log_limit_all(void)
{
    if (all_bucket)
        return;
    void *p = mmap(NULL, sizeof(bucket), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED)
        all_bucket = p; /* zeroed: nothing due yet */
}

void brig_log_set_key(const char *key)
{
    snprintf(thread_key, sizeof(thread_key), "%s", key ? key : "");
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Whether a record may pass now; when it does, *dropped takes (and resets) the count of
 * those that did not since the last one. */
static bool take(bucket *b, int64_t now, uint64_t *dropped)
{
    int64_t due = __atomic_load_n(&b->due, __ATOMIC_RELAXED);
    for (;;) {
        int64_t start = due > now ? due : now;
        if (start - now > TOLERANCE) {
            __atomic_add_fetch(&b->suppressed, 1, __ATOMIC_RELAXED);
            return false;
        }
        if (__atomic_compare_exchange_n(&b->due, &due, start + INTERVAL, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            break;
    }
    *dropped = __atomic_exchange_n(&b->suppressed, 0, __ATOMIC_RELAXED);
    return true;
}

/* The bucket check for key; *evicted/evicted_key name a key pushed out with records
 * still uncounted, for the caller to report. */
static bool take_keyed(const char *key, int64_t now, uint64_t *dropped, uint64_t *evicted,
                       char evicted_key[KEY_MAX])
{
    pthread_mutex_lock(&slots_lock);
    struct slot *s = NULL, *lru = &slots[0];
    for (int i = 0; i < KEY_SLOTS; i++) {
        if (strcmp(slots[i].key, key) == 0) {
            s = &slots[i];
            break;
        }
        if (slots[i].used < lru->used)
            lru = &slots[i];
    }
    if (s == NULL) {
        s = lru;
        *evicted = s->b.suppressed;
        snprintf(evicted_key, KEY_MAX, "%s", s->key);
        memset(s, 0, sizeof(*s));
        snprintf(s->key, sizeof(s->key), "%s", key);
    }
    s->used = now;
    bool ok = take(&s->b, now, dropped);
    pthread_mutex_unlock(&slots_lock);
    return ok;
}

size_t brig_log_escape(char *dst, size_t cap, const char *src, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i = 0;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        char e[4];
        size_t k = 0;
        switch (c) {
        case '\n':
            e[k++] = '\\', e[k++] = 'n';
            break;
        case '\r':
            e[k++] = '\\', e[k++] = 'r';
            break;
        case '\t':
            e[k++] = '\\', e[k++] = 't';
            break;
        case '\\':
            e[k++] = '\\', e[k++] = '\\';
            break;
        default:
            if (c < 0x20 || c >= 0x7f) {
                e[k++] = '\\', e[k++] = 'x', e[k++] = hex[c >> 4], e[k++] = hex[c & 15];
            } else {
                e[k++] = (char)c;
            }
        }
        if (o + k + 1 > cap)
            break;
        memcpy(dst + o, e, k);
        o += k;
    }
    if (cap > 0)
        dst[o] = '\0';
    return i;
}

/* Writes one record: prefix, escaped message, newline, in one write(2). */
static void emit(brig_log_level level, const char *msg, size_t n, bool cut)
{
    static const char *names[] = {"debug", "info", "warn", "error"};
    static const char cut_mark[] = "...[cut]";
    char line[BRIG_LOG_LINE_MAX];
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    int p = snprintf(line, sizeof(line),
                     "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ %s %s: ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (int)(tv.tv_usec / 1000), log_prog, names[level]);
    size_t len = p < 0 ? 0 : (size_t)p;
    if (len > sizeof(line) / 2)
        len = sizeof(line) / 2;
    /* Room for the message: all but the cut mark and the newline. */
    size_t room = sizeof(line) - len - (sizeof(cut_mark) - 1) - 1;
    size_t used = brig_log_escape(line + len, room + 1, msg, n);
    len += strlen(line + len);
    if (used < n || cut) {
        memcpy(line + len, cut_mark, sizeof(cut_mark) - 1);
        len += sizeof(cut_mark) - 1;
    }
    line[len++] = '\n';
    (void)!write(STDERR_FILENO, line, len);
}

static void notice(const char *who, uint64_t n)
{
    char msg[160];
    int m = snprintf(msg, sizeof(msg), "log: %llu records%s%s suppressed (more than %d a second)",
                     (unsigned long long)n, *who ? " of " : "", who, BRIG_LOG_RATE);
    if (m > 0)
        emit(BRIG_LOG_WARN, msg, (size_t)m < sizeof(msg) ? (size_t)m : sizeof(msg) - 1, false);
}

static void vlog(const char *whose, brig_log_level level, const char *fmt, va_list ap)
{
    if (level < log_min)
        return;
    char key[KEY_MAX];
    snprintf(key, sizeof(key), "%s", whose); /* as the table keeps it */
    uint64_t dropped = 0, evicted = 0;
    char evicted_key[KEY_MAX] = "";
    if (all_bucket && !take(all_bucket, now_us(), &dropped))
        return;
    if (!all_bucket && key[0] && !take_keyed(key, now_us(), &dropped, &evicted, evicted_key))
        goto report_evicted;
    if (dropped)
        notice(key, dropped);
    char msg[2 * BRIG_LOG_LINE_MAX];
    int m = vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = m < 0 ? 0 : (size_t)m;
    emit(level, msg, n < sizeof(msg) ? n : sizeof(msg) - 1, n >= sizeof(msg));
report_evicted:
    if (evicted)
        notice(evicted_key, evicted);
}

void brig_log(brig_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(thread_key, level, fmt, ap);
    va_end(ap);
}

void brig_log_keyed(const char *key, brig_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(key ? key : "", level, fmt, ap);
    va_end(ap);
}
