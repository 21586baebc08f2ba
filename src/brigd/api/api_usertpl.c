/*
 * api_usertpl.c - the routes of templates declared by users (sandbox/usertpl.h): a build
 * (answered when it ended: 201 built, 200 found built, 422 a step failed; with ?wait=0,
 * 202 at once with its record, followed like the operator's builds), one template,
 * its build's steps, a delete.  Every lookup is the caller's account's: another account's
 * template is not found.  docs/api.md describes them.
 */
#include <string.h>

#include "handlers.h"
#include "sandbox/usertpl.h"
#include "sandbox/usertpl_gc.h"
#include "sandbox/usertpl_build.h"

/* The answer of a build that ended: the template (201), the failed step (422), or why. */
static void reply_ended(brig_req *r, brig_build *rec)
{
    brig_build_info info;
    brig_build_info_get(rec, 0, &info);
    if (info.state == BRIG_BUILD_SUCCEEDED || info.result) {
        json_t *out = json_incref(info.result), *failed = json_object_get(out, "build");
        json_object_set_new(failed ? failed : out, "build_id", json_string(info.id));
        brig_http_json(r, info.state == BRIG_BUILD_SUCCEEDED ? 201 : 422, out);
    } else {
        brig_http_fail(r, (brig_err_kind)info.error_kind, "%s", info.error ? info.error : "failed");
    }
    brig_build_info_dispose(&info);
}

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
    const char *w = brig_http_query(r, "wait");
    bool wait = w == NULL || !(strcmp(w, "0") == 0 || strcmp(w, "false") == 0);
    brig_build *rec = NULL;
    int rc = brig_utpl_build_start(r->d, &r->caller, body, &out, &rec, &err);
    json_decref(body);
    if (rc < 0) {
        brig_http_error(r, err);
    } else if (rc == 0) {
        brig_http_json(r, 200, out); /* built before */
    } else if (!wait) {
        api_reply_build(r, 202, rec); /* followed at its Location */
    } else {
        brig_build_wait(rec);
        reply_ended(r, rec);
    }
    brig_build_put(rec);
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
