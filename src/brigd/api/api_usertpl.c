/*
 * api_usertpl.c - the routes of templates declared by users (sandbox/usertpl.h): a build
 * (answered when it ended: 201 built, 200 found built, 422 a step failed), one template,
 * its build's steps, a delete.  Every lookup is the caller's account's: another account's
 * template is not found.  docs/api.md describes them.
 */
#include <string.h>

#include "handlers.h"
#include "sandbox/usertpl.h"
#include "sandbox/usertpl_build.h"

void api_utpl_build(brig_req *r)
{
    json_t *body = NULL, *out = NULL;
    brig_error *err = NULL;
    if (brig_http_body_json(r, &body, &err) < 0) {
        brig_http_error(r, err);
        return;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        brig_error_set(&err, BRIG_E_INVALID, 0, "the body must be a template spec (an object)");
        brig_http_error(r, err);
        return;
    }
    int rc = brig_utpl_build(r->d, &r->caller, body, &out, &err);
    json_decref(body);
    if (rc < 0)
        brig_http_error(r, err);
    else if (rc == 1)
        brig_http_json(r, 422, out);
    else
        brig_http_json(r, json_is_true(json_object_get(out, "cached")) ? 200 : 201, out);
}

void api_utpl_get(brig_req *r)
{
    json_t *out = NULL;
    brig_error *err = NULL;
    if (brig_utpl_get(r->d, r->caller.account_id, r->params[0], &out, &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_json(r, 200, out);
}

void api_utpl_log(brig_req *r)
{
    json_t *out = NULL;
    brig_error *err = NULL;
    if (brig_utpl_log(r->d, r->caller.account_id, r->params[0], &out, &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_json(r, 200, out);
}

void api_utpl_delete(brig_req *r)
{
    brig_error *err = NULL;
    if (brig_utpl_delete(r->d, r->caller.account_id, r->params[0], &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_empty(r, 204);
}
