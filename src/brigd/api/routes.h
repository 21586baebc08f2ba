/*
 * routes.h - the REST API: the route table and its handlers.  docs/api.md documents
 * every route; the table here is the single list of what brigd serves.
 */
#ifndef BRIG_ROUTES_H
#define BRIG_ROUTES_H

#include "http.h"

extern const brig_route brig_api_routes[];

/* The explain hook of brig_http_start: an agent route whose sandbox ended while the
 * request ran answers 409 "sandbox … ended while the request ran (reason)". */
void brig_api_explain(brig_req *r, brig_error **err);

/* The unauthenticated GET /metrics on metrics_listen (api_metrics.c; nothing when it is
 * unset) / its end. */
int api_metrics_listen(brigd *d, brig_error **err);
void api_metrics_unlisten(brigd *d);

#endif
