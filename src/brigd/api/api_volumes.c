/*
 * api_volumes.c - the volume routes (docs/volumes.md): create (an admin key), list, one
 * by name or id, delete (an admin key; 409 while a sandbox mounts it).  A volume is
 * named within its project: `?project=prj_…` names another of the account's projects
 * (an admin key), the key's own project otherwise.  sandbox/volumes.h does the work.
 */
#include <string.h>

#include "handlers.h"
#include "sandbox/volumes.h"

/* ?project=, or NULL for none (an empty one is none too). */
static const char *project_arg(brig_req *r)
{
    const char *p = brig_http_query(r, "project");
    return p && *p ? p : NULL;
}

void api_volume_create(brig_req *r)
{
    static const char *const fields[] = {"name", "size_mib", "project", NULL};
    json_t *body = api_body(r, fields);
    if (body == NULL)
        return;
    json_t *name = json_object_get(body, "name"), *size = json_object_get(body, "size_mib");
    json_t *prj = json_object_get(body, "project");
    brig_error *err = NULL;
    json_t *out = NULL;
    if (!json_is_string(name))
        brig_error_set(&err, BRIG_E_INVALID, 0, "'name' (a string) is required");
    else if (!json_is_integer(size))
        brig_error_set(&err, BRIG_E_INVALID, 0, "'size_mib' (an integer of MiB) is required");
    else if (prj && !json_is_string(prj))
        brig_error_set(&err, BRIG_E_INVALID, 0, "'project' must be a project id");
    else
        brig_volume_create(r->d, &r->caller, json_string_value(name), json_integer_value(size),
                           json_string_value(prj), &out, &err);
    json_decref(body);
    brig_http_answer(r, err, 201, out);
}

void api_volume_list(brig_req *r)
{
    brig_error *err = NULL;
    json_t *l = NULL;
    if (brig_volume_list(r->d, &r->caller, project_arg(r), &l, &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_json(r, 200, json_pack("{s:o}", "volumes", l));
}

void api_volume_get(brig_req *r)
{
    brig_error *err = NULL;
    json_t *out = NULL;
    brig_volume_get(r->d, &r->caller, r->params[0], project_arg(r), &out, &err);
    brig_http_answer(r, err, 200, out);
}

void api_volume_delete(brig_req *r)
{
    brig_error *err = NULL;
    if (brig_volume_delete(r->d, &r->caller, r->params[0], project_arg(r), &err) < 0)
        brig_http_error(r, err);
    else
        brig_http_empty(r, 204);
}
