/*
 * api_inject.c - a project's credential injection rules (docs/secrets.md):
 * GET and PUT /v1/projects/{id}/injections, admin keys only (the route table's
 * ROUTE_ADMIN: a sandbox key gets 403 before these run).
 */
#include "account/tenants.h"
#include "handler.h"
#include "handlers.h"
#include "http.h"
#include "sandbox/injection.h"

void api_injections_get(brig_req *r)
{
    brig_error *err = NULL;
    json_t *p = NULL, *rules = NULL;
    if (brig_project_get(r->d, &r->caller, r->params[0], &p, &err) == 0)
        rules = brig_injection_get(r->d, r->params[0], &err);
    json_decref(p);
    if (rules == NULL)
        brig_http_error(r, err);
    else
        brig_http_json(r, 200, json_pack("{s:o}", "rules", rules));
}

void api_injections_put(brig_req *r)
{
    static const char *const fields[] = {"rules", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    brig_error *err = NULL;
    json_t *p = NULL, *rules = json_object_get(body, "rules");
    if (rules == NULL)
        brig_error_set(&err, BRIG_E_INVALID, 0, "'rules' (an array) is required");
    else if (brig_project_get(r->d, &r->caller, r->params[0], &p, &err) == 0)
        brig_injection_put(r->d, r->params[0], rules, &err);
    json_decref(p);
    if (err) {
        json_decref(body);
        brig_http_error(r, err);
        return;
    }
    brig_http_json(r, 200, json_pack("{s:O}", "rules", rules));
    json_decref(body);
}
