/*
 * netlog.c - a sandbox's network log: the DNS queries its proxy saw and the
 * packets its firewall denied (nflog.c), oldest first, at most
 * BRIG_NET_LOG_MAX records (the oldest make room).  docs/network.md shows a
 * record's fields.  Written by the proxy thread and read by the API, both
 * under n->lock.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <time.h>

#include "netshared.h"

json_t *brig_net_time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char b[40];
    size_t k = strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(b + k, sizeof(b) - k, ".%03ldZ", ts.tv_nsec / 1000000);
    return json_string(b);
}

void brig_net_log_add(brig_net_sandbox *s, json_t *rec)
{
    if (s->log_hook)
        s->log_hook(s->log_hook_ctx, s->id, rec);
    if (s->log == NULL)
        s->log = brig_xcalloc(BRIG_NET_LOG_MAX, sizeof(json_t *));
    if (s->log_len == BRIG_NET_LOG_MAX) {
        json_decref(s->log[s->log_start]);
        s->log[s->log_start] = rec;
        s->log_start = (s->log_start + 1) % BRIG_NET_LOG_MAX;
    } else {
        s->log[(s->log_start + s->log_len++) % BRIG_NET_LOG_MAX] = rec;
    }
}

static const char *rcode_name(int rc)
{
    static const char *const names[] = {"NOERROR",  "FORMERR", "SERVFAIL",
                                        "NXDOMAIN", "NOTIMP",  "REFUSED"};
    return rc >= 0 && rc < (int)BRIG_ARRAY_LEN(names) ? names[rc] : "OTHER";
}

void brig_net_log_dns(brig_net_sandbox *s, const brig_dns_question *q, bool allowed, int rcode,
                      const brig_dns_answer *a, const char *proto)
{
    json_t *r = json_object();
    json_object_set_new(r, "time", brig_net_time_now());
    json_object_set_new(r, "kind", json_string("dns"));
    json_object_set_new(r, "name", json_string(q->name[0] ? q->name : "?"));
    json_object_set_new(r, "type", json_string(q->type[0] ? q->type : "?"));
    json_object_set_new(r, "proto", json_string(proto));
    json_object_set_new(r, "allowed", json_boolean(allowed));
    json_object_set_new(r, "rcode", json_string(rcode_name(rcode)));
    json_t *ans = json_array();
    for (size_t i = 0; a && i < a->n_a; i++) {
        char b[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &a->a[i], b, sizeof(b));
        json_array_append_new(ans, json_string(b));
    }
    for (size_t i = 0; a && i < a->n_aaaa; i++) {
        char b[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, &a->aaaa[i], b, sizeof(b));
        json_array_append_new(ans, json_string(b));
    }
    json_object_set_new(r, "answer", ans);
    brig_net_log_add(s, r);
}

json_t *brig_net_host_log(brig_net *net, brig_net_sandbox *s)
{
    brig_net_host *n = brig_net_host_of(net);
    json_t *a = json_array();
    pthread_mutex_lock(&n->lock);
    for (size_t i = 0; i < s->log_len; i++)
        json_array_append_new(a, json_deep_copy(s->log[(s->log_start + i) % BRIG_NET_LOG_MAX]));
    pthread_mutex_unlock(&n->lock);
    return a;
}

void brig_net_log_dispose(brig_net_sandbox *s)
{
    for (size_t i = 0; i < s->log_len; i++)
        json_decref(s->log[(s->log_start + i) % BRIG_NET_LOG_MAX]);
    free(s->log);
    s->log = NULL;
    s->log_start = s->log_len = 0;
}
