/*
 * tenants.h - accounts (tenants) and their projects.
 *
 * An account holds money (see billing.h), spend limits and projects; a project
 * owns an egress policy, secrets and sandboxes; API keys belong to a project
 * and carry a scope (keys.h, auth.h).  Every account has a default project,
 * where its first admin key lives.
 */
#ifndef BRIG_TENANTS_H
#define BRIG_TENANTS_H

#include <jansson.h>
#include <stdbool.h>

#include "auth.h"
#include "error.h"
#include "runtime/runtime.h"
#include "server.h"

/* Creates an account with its default project, an admin key (*key, shown once,
 * caller frees) and the configured initial credit; *out is the account JSON. */
int brig_account_create(brigd *d, const char *name, json_t **out, char **key, brig_error **err);

/* The account as the API shows it: balance, limits, usage, and `live`, its live
 * sandboxes (which the caller counts: the sandbox layer knows them). */
int brig_account_json(brigd *d, const char *account_id, int live, json_t **out, brig_error **err);

/* Calls fn with each account's id, oldest first (the operator's list). */
int brig_account_each(brigd *d, void (*fn)(const char *id, void *), void *ctx, brig_error **err);

/* Spend limits and the concurrency limit of an account (-1: no limit). */
typedef struct brig_account_limits {
    int64_t balance;       /* micro-dollars */
    int64_t daily_limit;   /* -1: none */
    int64_t monthly_limit; /* -1: none */
    int64_t max_live;      /* live sandboxes at once */
} brig_account_limits;
int brig_account_limits_get(brigd *d, const char *account_id, brig_account_limits *out,
                            brig_error **err);

/* 0 when the account may create sandboxes of `tariff`; BRIG_E_FORBIDDEN (naming
 * the tariffs it may use) when the operator restricted it to others. */
int brig_account_tariff_allowed(brigd *d, const char *account_id, const char *tariff,
                                brig_error **err);

/* What the operator sets on an account (PATCH /v1/accounts/{id}). */
#define BRIG_MAX_LIVE_LIMIT (1 << 20)
typedef struct brig_account_settings {
    bool set_max_live;
    int64_t max_live; /* the concurrency limit, 0..BRIG_MAX_LIVE_LIMIT */
    bool set_tariffs;
    json_t *tariffs; /* names of configured tariffs (borrowed); NULL: every tariff */
} brig_account_settings;
/* Applies the settings that are set, all or none; BRIG_E_INVALID for a bad
 * value, BRIG_E_NOT_FOUND for no such account. */
int brig_account_configure(brigd *d, const char *account_id, const brig_account_settings *s,
                           brig_error **err);

/* The spend limits an account's admin sets (PATCH /v1/account): each, when set,
 * micro-dollars in [0, BRIG_MONEY_MAX] (checked by the caller) or -1 for none. */
typedef struct brig_spend_limits {
    bool set_daily;
    int64_t daily;
    bool set_monthly;
    int64_t monthly;
} brig_spend_limits;
int brig_account_set_limits(brigd *d, const char *account_id, const brig_spend_limits *l,
                            brig_error **err);

int brig_project_create(brigd *d, const char *account_id, const char *name, json_t **out,
                        brig_error **err);
/* A project the caller may see; BRIG_E_NOT_FOUND otherwise. */
int brig_project_get(brigd *d, const brig_caller *c, const char *id, json_t **out,
                     brig_error **err);
json_t *brig_project_list(brigd *d, const brig_caller *c, brig_error **err);
/* Sets name, egress (already validated JSON) and/or the isolation policy (as the PATCH
 * sent it: null, or {"allowed": [modes], "default": mode}; BRIG_E_INVALID when it is
 * not) of a project; NULL leaves one as is.  Returns the new JSON. */
int brig_project_update(brigd *d, const brig_caller *c, const char *id, const char *name,
                        json_t *egress, json_t *isolation, json_t **out, brig_error **err);

/* The isolation of a new sandbox of the project: `requested` (NULL: none asked) if the
 * project allows it, else the project's default, else the operator's
 * (isolation_default) if the project allows it, else the first mode it allows.
 * BRIG_E_INVALID for an unknown name, BRIG_E_FORBIDDEN (naming the allowed modes) for
 * a mode the project does not allow.  Whether this host can run it is the runtime's
 * question (available()). */
int brig_project_isolation(brigd *d, const char *project_id, const char *requested,
                           brig_isolation *out, brig_error **err);
/* What an idle timeout does to a new sandbox of the project: `requested` ("pause",
 * "delete"; NULL: none asked), else the project's default, else delete.  *pause: true
 * for pause.  BRIG_E_INVALID for another word. */
int brig_project_on_idle(brigd *d, const char *project_id, const char *requested, bool *pause,
                         brig_error **err);
/* Sets a project's default for its new sandboxes (a PATCH's "on_idle": "pause", "delete");
 * BRIG_E_INVALID for another value. */
int brig_project_set_on_idle(brigd *d, const brig_caller *c, const char *id, json_t *on_idle,
                             brig_error **err);
/* The egress policy of a project as JSON (new reference), or NULL. */
json_t *brig_project_egress(brigd *d, const char *project_id);

#endif
