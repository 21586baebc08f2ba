/*
 * api_metrics.c - metrics (docs/metrics.md): GET /metrics, the host's in the Prometheus
 * text format (an admin or the operator key), the same on metrics_listen without a key
 * (a listener of its own, for a scraper on a private network), and
 * GET /v1/sandboxes/{id}/metrics, one sandbox's usage samples (sandbox/usage.c).
 *
 * The counters and histograms are core/metrics.c's; the gauges are read here from their
 * owners (the registry, the warm pool, admission) at the moment of the scrape.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/metrics.h"
#include "handlers.h"
#include "sandbox/pool.h"
#include "sandbox/sandbox.h"

#define TEXT_FORMAT "text/plain; version=0.0.4; charset=utf-8"

static void gauge(brig_buf *out, const char *name, const char *help, double v)
{
    brig_metrics_family(out, name, "gauge", help);
    brig_metrics_sample(out, name, NULL, v);
}

static void count_one(brigd *d, brig_sandbox *sb, void *arg)
{
    (void)d, (void)sb;
    ++*(int64_t *)arg;
}

static void sandboxes(brigd *d, brig_buf *out)
{
    int64_t running = 0;
    brig_registry_each_running(d, NULL, 0, count_one, &running);
    gauge(out, "brig_sandboxes_live", "Listed sandboxes: creating, running or ending",
          (double)brig_registry_size(d));
    gauge(out, "brig_sandboxes_running", "Running sandboxes", (double)running);
}

/* The warm pool's entries "template/tariff[/isolation]" as labels. */
static void pool_labels(const char *key, char *out, size_t n)
{
    char t[64] = "", f[64] = "", iso[32] = "container";
    sscanf(key, "%63[^/]/%63[^/]/%31s", t, f, iso);
    brig_metrics_labels(out, n, "template", t, "tariff", f, "isolation", iso, NULL);
}

static void warm_pool(brigd *d, brig_buf *out)
{
    static const struct {
        const char *field, *name, *type, *help;
    } rows[] = {
        {"ready", "brig_warm_pool_ready", "gauge", "Warm sandboxes ready to be claimed"},
        {"target", "brig_warm_pool_target", "gauge", "Warm sandboxes the pool keeps ready"},
        {"hits", "brig_warm_pool_hits_total", "counter", "Creates that claimed a warm sandbox"},
        {"misses", "brig_warm_pool_misses_total", "counter",
         "Creates of a pooled kind that found none ready"},
    };
    json_t *stats = brig_pool_stats(d);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        brig_metrics_family(out, rows[i].name, rows[i].type, rows[i].help);
        const char *key;
        json_t *e;
        json_object_foreach(stats, key, e)
        {
            char labels[256];
            pool_labels(key, labels, sizeof(labels));
            brig_metrics_sample(out, rows[i].name, labels,
                                (double)json_integer_value(json_object_get(e, rows[i].field)));
        }
    }
    json_decref(stats);
}

static void capacity(brigd *d, brig_buf *out)
{
    int64_t used = 0, queued = 0;
    brig_capacity in_use;
    brig_admission_stats(&d->admission, &used, &in_use, &queued);
    gauge(out, "brig_admission_queue_length", "Creates waiting for host capacity", (double)queued);
    gauge(out, "brig_capacity_slots_used", "Sandbox slots held", (double)used);
    gauge(out, "brig_capacity_slots", "Sandbox slots of this host (max_sandboxes)",
          (double)d->cfg.max_sandboxes);
    gauge(out, "brig_capacity_memory_mib_used", "MiB of memory limits held",
          (double)in_use.mem_mib);
    gauge(out, "brig_capacity_memory_mib", "MiB of memory limits this host admits (0: no bound)",
          (double)d->admission.mem_capacity);
    gauge(out, "brig_capacity_disk_mib_used", "MiB of disk held", (double)in_use.disk_mib);
    gauge(out, "brig_capacity_disk_mib", "MiB of disk this host admits (0: no bound)",
          (double)d->admission.disk_capacity);
}

char *api_metrics_text(brigd *d, size_t *len)
{
    brig_buf out = {0};
    brig_metrics_render(&out);
    sandboxes(d, &out);
    warm_pool(d, &out);
    capacity(d, &out);
    *len = out.len;
    return out.data ? out.data : brig_xstrdup("");
}

static struct MHD_Response *text_response(brigd *d)
{
    size_t n = 0;
    char *text = api_metrics_text(d, &n);
    struct MHD_Response *resp = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(resp, "Content-Type", TEXT_FORMAT);
    return resp;
}

void api_metrics(brig_req *r)
{
    brig_http_response(r, 200, text_response(r->d));
}

void api_sandbox_metrics(brig_req *r)
{
    json_t *out = NULL;
    brig_error *err = NULL;
    if (brig_usage_json(r->d, &r->caller, r->params[0], &out, &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_json(r, 200, out);
}

/* ---- metrics_listen: /metrics without a key, on an address of its own ---- */

static enum MHD_Result listen_access(void *cls, struct MHD_Connection *conn, const char *url,
                                     const char *method, const char *version,
                                     const char *upload_data, size_t *upload_data_size,
                                     void **req_cls)
{
    (void)version, (void)upload_data, (void)upload_data_size;
    if (*req_cls == NULL) { /* the head: wait for the (empty) body */
        *req_cls = conn;
        return MHD_YES;
    }
    bool found = strcmp(url, "/metrics") == 0;
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    struct MHD_Response *resp;
    unsigned status = 200;
    if (found && get) {
        resp = text_response(cls);
    } else {
        static const char msg[] = "only GET /metrics is served here\n";
        status = found ? 405 : 404;
        resp =
            MHD_create_response_from_buffer(sizeof(msg) - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
    }
    enum MHD_Result ret = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return ret;
}

int api_metrics_listen(brigd *d, brig_error **err)
{
    if (d->cfg.metrics_listen == NULL)
        return 0;
    struct sockaddr_storage ss = {0};
    if (brig_http_parse_listen(d->cfg.metrics_listen, &ss, err) < 0)
        return -1;
    /* One thread: a scrape is quick, and this listener is no way into the API's pool. */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (ss.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    d->metrics_http = MHD_start_daemon(
        flags, 0, NULL, NULL, listen_access, d, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_CONNECTION_LIMIT, 64u,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
    if (d->metrics_http == NULL)
        return brig_error_set(err, BRIG_E_INTERNAL, errno, "cannot listen on %s (metrics_listen)",
                              d->cfg.metrics_listen);
    return 0;
}

void api_metrics_unlisten(brigd *d)
{
    if (d->metrics_http)
        MHD_stop_daemon(d->metrics_http);
    d->metrics_http = NULL;
}
