/*
 * handler.c - what every REST handler uses (see handler.h).
 */
#include "handler.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/format.h"
#include "validate.h"

int api_open_agent(brig_req *r, brig_sandbox **sb)
{
    brig_error *err = NULL;
    if (brig_sandbox_get(r->d, &r->caller, r->params[0], sb, &err) < 0) {
        brig_http_error(r, err);
        return -1;
    }
    int fd = brig_sandbox_connect(r->d, *sb, &err);
    if (fd < 0) {
        brig_sandbox_put(r->d, *sb);
        *sb = NULL;
        brig_http_error(r, err);
    }
    return fd;
}

int api_call_open(brig_req *r, api_call *c, int64_t timeout_ms)
{
    c->sb = NULL;
    c->err = NULL;
    c->fd = api_open_agent(r, &c->sb);
    if (c->fd < 0)
        return -1;
    brig_agentc_set_timeout(c->fd, timeout_ms);
    return 0;
}

void api_call_answer(brig_req *r, api_call *c, int rc, unsigned status, json_t *body)
{
    close(c->fd);
    c->fd = -1;
    brig_sandbox_put(r->d, c->sb);
    c->sb = NULL;
    if (rc < 0) {
        json_decref(body);
        brig_http_error(r, c->err);
    } else if (body) {
        brig_error_clear(&c->err);
        brig_http_json(r, status, body);
    } else {
        brig_error_clear(&c->err);
        brig_http_empty(r, status);
    }
    c->err = NULL;
}

json_t *api_body(brig_req *r, const char *const *fields)
{
    json_t *body = NULL;
    brig_error *err = NULL;
    if (brig_http_body_json(r, &body, &err) < 0 ||
        brig_request_only_fields(body, fields, &err) < 0) {
        json_decref(body);
        brig_http_error(r, err);
        return NULL;
    }
    return body;
}

json_t *api_time(json_t *ms)
{
    if (!json_is_integer(ms))
        return json_null();
    char buf[32];
    brig_format_time(json_integer_value(ms), buf);
    return json_string(buf);
}

int64_t api_query_int(brig_req *r, const char *name, int64_t def, int64_t max)
{
    const char *v = brig_http_query(r, name);
    if (v == NULL || *v == '\0')
        return def;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || *end || n < 0 || n > max)
        return -1;
    return n;
}

int64_t api_query_time(brig_req *r, const char *name)
{
    const char *v = brig_http_query(r, name);
    if (v == NULL || *v == '\0')
        return 0;
    if (strchr(v, 'T') == NULL)
        return api_query_int(r, name, 0, INT64_MAX / 2);
    struct tm tm = {0};
    const char *rest = strptime(v, "%Y-%m-%dT%H:%M:%S", &tm);
    if (rest == NULL)
        return -1;
    int64_t ms = 0;
    if (*rest == '.') {
        char *end = NULL;
        double frac = strtod(rest, &end);
        ms = (int64_t)(frac * 1000);
        rest = end;
    }
    if (strcmp(rest, "Z") != 0 && *rest != '\0')
        return -1;
    return (int64_t)timegm(&tm) * 1000 + ms;
}
