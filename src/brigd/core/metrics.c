/*
 * metrics.c - the host-level counters and histograms (see metrics.h).
 */
#include "metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SERIES_MAX  512 /* per family: more goes into one {overflow="true"} series */
#define BUCKETS_MAX 16

typedef struct series {
    char *labels;
    double value;                  /* a counter's; a histogram's sum */
    uint64_t count;                /* a histogram's observations */
    uint64_t buckets[BUCKETS_MAX]; /* observations <= each bound (not cumulative here) */
} series;

typedef struct family {
    const char *name, *help;
    const double *bounds; /* a histogram's upper bounds, ascending; NULL: a counter */
    int n_bounds;
    series *s;
    size_t n, cap;
} family;

static const double create_bounds[] = {0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30};
static const double fast_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                     0.25,  0.5,    1,     2.5,  5,     10,   60};
#define HIST(b) .bounds = b, .n_bounds = (int)(sizeof(b) / sizeof(b[0]))
#define FAMILY(n, h, ...)                                                                          \
    {                                                                                              \
        .name = n, .help = h, __VA_ARGS__                                                          \
    }

static family families[BRIG_M_COUNT] = {
    [BRIG_M_SANDBOXES_CREATED] =
        FAMILY("brig_sandboxes_created_total",
               "Sandboxes created (running and answered), by isolation and "
               "whether a warm one was claimed"),
    [BRIG_M_SANDBOXES_ENDED] =
        FAMILY("brig_sandboxes_ended_total",
               "Sandboxes ended, by typed reason (docs/api.md, Why it ended)"),
    [BRIG_M_CREATES_FAILED] = FAMILY("brig_sandbox_creates_failed_total",
                                     "Creates that failed after admission (unwound)"),
    [BRIG_M_CREATE_SECONDS] = FAMILY("brig_sandbox_create_seconds",
                                     "Create latency, request to running sandbox, by warm-pool hit "
                                     "(pool=\"hit\") or cold start (pool=\"cold\")",
                                     HIST(create_bounds)),
    [BRIG_M_EXEC_SECONDS] =
        FAMILY("brig_exec_seconds",
               "Exec latency: a foreground command's run, start to exit, as its "
               "agent measured it",
               HIST(fast_bounds)),
    [BRIG_M_ADMISSION_REFUSED] =
        FAMILY("brig_admission_refused_total",
               "Creates refused: host capacity, or the account's limits (by error code)"),
    [BRIG_M_HTTP_REQUESTS] = FAMILY("brig_http_requests_total",
                                    "API requests answered, by method, route pattern and status"),
    [BRIG_M_HTTP_SECONDS] = FAMILY(
        "brig_http_request_seconds",
        "API request latency, head to answer queued, by method and route", HIST(fast_bounds)),
    [BRIG_M_AGENT_ERRORS] =
        FAMILY("brig_agent_errors_total", "Failed calls to sandbox agents, by kind of failure"),
    [BRIG_M_BILLING_CHARGED] = FAMILY("brig_billing_charged_micro_usd_total",
                                      "Micro-dollars charged to accounts for sandbox time"),
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* The series of f with these labels, made when new (lock held). */
static series *series_of(family *f, const char *labels)
{
    if (labels == NULL)
        labels = "";
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->s[i].labels, labels) == 0)
            return &f->s[i];
    if (f->n >= SERIES_MAX) {
        labels = "overflow=\"true\"";
        for (size_t i = 0; i < f->n; i++)
            if (strcmp(f->s[i].labels, labels) == 0)
                return &f->s[i];
    }
    if (f->n == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 8;
        f->s = brig_xrealloc(f->s, f->cap * sizeof(*f->s));
    }
    series *s = &f->s[f->n++];
    memset(s, 0, sizeof(*s));
    s->labels = brig_xstrdup(labels);
    return s;
}

void brig_metric_add(brig_metric m, const char *labels, double v)
{
    pthread_mutex_lock(&lock);
    series_of(&families[m], labels)->value += v;
    pthread_mutex_unlock(&lock);
}

void brig_metric_observe(brig_metric m, const char *labels, double v)
{
    family *f = &families[m];
    pthread_mutex_lock(&lock);
    series *s = series_of(f, labels);
    s->value += v;
    s->count++;
    for (int i = 0; i < f->n_bounds; i++)
        if (v <= f->bounds[i]) {
            s->buckets[i]++;
            break;
        }
    pthread_mutex_unlock(&lock);
}

char *brig_metrics_labels(char *out, size_t n, ...)
{
    va_list ap;
    va_start(ap, n);
    size_t at = 0;
    const char *k;
    out[0] = '\0';
    while ((k = va_arg(ap, const char *)) != NULL) {
        const char *v = va_arg(ap, const char *);
        at += (size_t)snprintf(out + at, at < n ? n - at : 0, "%s%s=\"", at ? "," : "", k);
        for (; v && *v && at + 3 < n; v++) {
            if (*v == '\\' || *v == '"' || *v == '\n')
                out[at++] = '\\';
            out[at++] = *v == '\n' ? 'n' : *v;
        }
        at += (size_t)snprintf(out + (at < n ? at : n), at < n ? n - at : 0, "\"");
    }
    va_end(ap);
    if (at >= n && n > 0) /* cut: never a half label */
        out[0] = '\0';
    return out;
}

static void number(char out[40], double v)
{
    if (v > -1e15 && v < 1e15 && v == (double)(int64_t)v)
        snprintf(out, 40, "%.0f", v);
    else
        snprintf(out, 40, "%.9g", v);
}

void brig_metrics_family(brig_buf *out, const char *name, const char *type, const char *help)
{
    brig_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void brig_metrics_sample(brig_buf *out, const char *name, const char *labels, double v)
{
    char num[40];
    number(num, v);
    if (labels && *labels)
        brig_buf_printf(out, "%s{%s} %s\n", name, labels, num);
    else
        brig_buf_printf(out, "%s %s\n", name, num);
}

static void render_histogram(brig_buf *out, const family *f, const series *s)
{
    const char *sep = s->labels[0] ? "," : "";
    uint64_t cum = 0;
    for (int i = 0; i < f->n_bounds; i++) {
        cum += s->buckets[i];
        brig_buf_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", f->name, s->labels, sep,
                        f->bounds[i], (unsigned long long)cum);
    }
    brig_buf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", f->name, s->labels, sep,
                    (unsigned long long)s->count);
    _cleanup_free_ char *sum = brig_asprintf("%s_sum", f->name);
    _cleanup_free_ char *count = brig_asprintf("%s_count", f->name);
    brig_metrics_sample(out, sum, s->labels, s->value);
    brig_metrics_sample(out, count, s->labels, (double)s->count);
}

void brig_metrics_render(brig_buf *out)
{
    pthread_mutex_lock(&lock);
    for (int m = 0; m < BRIG_M_COUNT; m++) {
        const family *f = &families[m];
        brig_metrics_family(out, f->name, f->bounds ? "histogram" : "counter", f->help);
        if (f->bounds == NULL && f->n == 0) /* a counter is 0 before its first count */
            brig_metrics_sample(out, f->name, NULL, 0);
        for (size_t i = 0; i < f->n; i++) {
            if (f->bounds)
                render_histogram(out, f, &f->s[i]);
            else
                brig_metrics_sample(out, f->name, f->s[i].labels, f->s[i].value);
        }
    }
    pthread_mutex_unlock(&lock);
}
