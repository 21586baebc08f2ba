/*
 * api_snapshots.c - the snapshot routes (docs/snapshots.md): take one of a sandbox, list,
 * one by id, delete.  A sandbox starts from one with "snapshot" on create (routes.c).
 * Forking a sandbox too (a snapshot and creates from it).  sandbox/snapshots.h and
 * sandbox/fork.h do the work.
 */
#include <string.h>

#include "handlers.h"
#include "sandbox/fork.h"
#include "sandbox/snapshots.h"

#define NAME_MAX_LEN 63

void api_snapshot_take(brig_req *r)
{
    static const char *const fields[] = {"name", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    json_t *name = json_object_get(body, "name");
    brig_error *err = NULL;
    json_t *out = NULL;
    if (name && (!json_is_string(name) || json_string_length(name) == 0 ||
                 json_string_length(name) > NAME_MAX_LEN ||
                 strlen(json_string_value(name)) != json_string_length(name)))
        brig_error_set(&err, BRIG_E_INVALID, 0, "'name' must be a string of 1 to %d bytes",
                       NAME_MAX_LEN);
    else
        brig_snapshot_take(r->d, &r->caller, r->params[0], json_string_value(name), true, &out,
                           &err);
    json_decref(body);
    brig_http_answer(r, err, 201, out);
}

void api_snapshot_list(brig_req *r)
{
    json_t *out = NULL;
    brig_error *err = NULL;
    brig_snapshot_list(r->d, &r->caller, &out, &err);
    brig_http_answer(r, err, 200, out);
}

void api_snapshot_get(brig_req *r)
{
    json_t *out = NULL;
    brig_error *err = NULL;
    brig_snapshot_get(r->d, &r->caller, r->params[0], &out, &err);
    brig_http_answer(r, err, 200, out);
}

void api_snapshot_delete(brig_req *r)
{
    brig_error *err = NULL;
    if (brig_snapshot_delete(r->d, &r->caller, r->params[0], &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_empty(r, 204);
}

void api_sandbox_fork(brig_req *r)
{
    static const char *const fields[] = {"count", "memory", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    json_t *count = json_object_get(body, "count"), *memory = json_object_get(body, "memory");
    json_int_t n = count ? json_integer_value(count) : 1;
    brig_error *err = NULL;
    json_t *out = NULL;
    if ((count && !json_is_integer(count)) || n < 1 || n > BRIG_FORK_MAX)
        brig_error_set(&err, BRIG_E_INVALID, 0, "'count' must be an integer in [1, %d]",
                       BRIG_FORK_MAX);
    else if (memory && !json_is_boolean(memory))
        brig_error_set(&err, BRIG_E_INVALID, 0, "'memory' must be true or false");
    else
        brig_sandbox_fork(r->d, &r->caller, r->params[0], n, json_is_true(memory), &out, &err);
    json_decref(body);
    brig_http_answer(r, err, 201, out);
}
