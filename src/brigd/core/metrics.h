/*
 * metrics.h - brigd's host-level counters and histograms, written out in the
 * Prometheus text format (docs/metrics.md lists every metric).
 *
 * The families are fixed (brig_metric, a table in metrics.c); a family's series are
 * told apart by their labels, given as Prometheus writes them ("reason=\"idle\""; made
 * with brig_metrics_labels, which escapes).  Counts live in the process, like the
 * log's rates: one brigd per process, and every layer above core/ may count without
 * carrying a handle.  One mutex guards them: a count is a few hundred nanoseconds.
 *
 * Gauges (live sandboxes, capacity, the warm pool ...) are not kept here: whoever
 * writes the exposition reads them from their owners at that moment and writes them
 * with brig_metrics_family / brig_metrics_sample.
 */
#ifndef BRIG_METRICS_H
#define BRIG_METRICS_H

#include <stddef.h>

#include "util.h"

typedef enum brig_metric {
    BRIG_M_SANDBOXES_CREATED, /* counter {isolation, pool} */
    BRIG_M_SANDBOXES_ENDED,   /* counter {reason} */
    BRIG_M_CREATES_FAILED,    /* counter */
    BRIG_M_CREATE_SECONDS,    /* histogram {pool="hit"|"cold"} */
    BRIG_M_EXEC_SECONDS,      /* histogram: an exec's command, start to end */
    BRIG_M_ADMISSION_REFUSED, /* counter {reason} */
    BRIG_M_HTTP_REQUESTS,     /* counter {method, route, status} */
    BRIG_M_HTTP_SECONDS,      /* histogram {method, route} */
    BRIG_M_AGENT_ERRORS,      /* counter {kind} */
    BRIG_M_BILLING_CHARGED,   /* counter: micro-dollars charged */
    BRIG_M_COUNT
} brig_metric;

/* Adds v (> 0) to a counter's series. labels: NULL or "" for none. */
void brig_metric_add(brig_metric m, const char *labels, double v);
/* Counts one observation v of a histogram's series. */
void brig_metric_observe(brig_metric m, const char *labels, double v);

/* Writes "k1=\"v1\",k2=\"v2\"" into out (n bytes) from the NULL-ended pairs k, v, ...,
 * escaping the values; returns out. */
char *brig_metrics_labels(char *out, size_t n, ...) __attribute__((sentinel));

/* Appends every family of the table, in the text format. */
void brig_metrics_render(brig_buf *out);
/* Appends a family's # HELP and # TYPE lines ... */
void brig_metrics_family(brig_buf *out, const char *name, const char *type, const char *help);
/* ... and one of its samples (labels: NULL or ""). */
void brig_metrics_sample(brig_buf *out, const char *name, const char *labels, double v);

#endif
