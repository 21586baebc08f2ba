/*
 * ui.c - the dashboard's static files under /ui/ (docs/dashboard.md).  They are embedded in
 * brigd (ui_assets.h): a URL names an entry of that table or nothing, so no path from a client
 * ever reaches the file system.  The pages hold no data: everything they show they fetch from
 * the REST API with the key the user signs in with, so these routes need no key.
 */
#include <string.h>

#include "handlers.h"
#include "ui_assets.h"

/* Scripts, styles, fonts and images from brigd itself; nothing inline, no other origin, no
 * framing.  blob: images and downloads are what the page makes from fetched bytes. */
#define UI_CSP                                                                                     \
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob:; "              \
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "                    \
    "form-action 'self'; frame-ancestors 'none'"

static const brig_ui_asset *asset(const char *name)
{
    for (const brig_ui_asset *a = brig_ui_assets; a->name; a++)
        if (strcmp(a->name, name) == 0)
            return a;
    return NULL;
}

/* Does If-None-Match name etag (a list of tags, or "*")? */
static bool not_modified(brig_req *r, const char *etag)
{
    const char *inm = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "If-None-Match");
    return inm && (strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL);
}

static void serve(brig_req *r, const char *name)
{
    const brig_ui_asset *a = asset(name);
    if (a == NULL) {
        brig_http_fail(r, BRIG_E_NOT_FOUND, "no such file of the dashboard: /ui/%s", name);
        return;
    }
    bool same = not_modified(r, a->etag);
    struct MHD_Response *resp =
        same ? MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT)
             : MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!same)
        MHD_add_response_header(resp, "Content-Type", a->content_type);
    /* Revalidated at each use (the ETag makes that a 304): a new brigd's files show at once. */
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "ETag", a->etag);
    MHD_add_response_header(resp, "Content-Security-Policy", UI_CSP);
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(resp, "X-Frame-Options", "DENY");
    brig_http_response(r, same ? 304 : 200, resp);
}

void api_ui_index(brig_req *r)
{
    serve(r, "index.html");
}

void api_ui_file(brig_req *r)
{
    serve(r, r->params[0]);
}

/* GET /ui and GET /: to the dashboard's page.  /ui is /ui/ spelt without its slash, for good
 * (301); / only for now (302), so that a later use of / is not held in browsers' caches. */
void api_ui_redirect(brig_req *r)
{
    bool root = strcmp(r->route->pattern, "/") == 0;
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(resp, "Location", "/ui/");
    brig_http_response(r, root ? 302 : 301, resp);
}
