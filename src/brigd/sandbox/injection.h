/*
 * injection.h - a project's credential injection rules (docs/secrets.md): stored as
 * JSON, handed to each running sandbox's egress proxy (net/inject.c) with the values
 * of the secrets they name, and the placeholders those secrets become in the
 * sandbox's commands' environment.
 */
#ifndef BRIG_INJECTION_H
#define BRIG_INJECTION_H

#include <jansson.h>

#include "error.h"
#include "registry.h"
#include "server.h"

/* Checks rules: an array of {"host": "api.example.com" | "*.example.com",
 * "headers": {"Name": "value with {{secret:NAME}}"}}; BRIG_E_INVALID naming the
 * problem otherwise. */
int brig_injection_check(json_t *rules, brig_error **err);
/* Stores the project's rules (checked) and applies them to its running sandboxes. */
int brig_injection_put(brigd *d, const char *project_id, json_t *rules, brig_error **err);
/* The project's rules (a new array; empty when it has none). */
json_t *brig_injection_get(brigd *d, const char *project_id, brig_error **err);
/* Hands the project's rules and the secrets they name to the sandbox's proxy. */
int brig_injection_apply(brigd *d, brig_sandbox *sb, brig_error **err);
/* In secrets (a command's, {"NAME": "value"}; may be NULL), replaces the value of every
 * secret a rule of the sandbox's project names by its placeholder (the old value
 * wiped).  Returns what the command's environment needs besides when its project has
 * rules (the variables that point clients at the brig CA: a new object), or NULL. */
json_t *brig_injection_env(brigd *d, const brig_sandbox *sb, json_t *secrets);

/* The egress proxy's CA: made at the first start, its key sealed with the master key
 * (the vault, like a secret), the same one afterwards.  *cert_pem and *key_pem are
 * malloc'd (wipe the key once the proxy has it). */
int brig_injection_ca(brigd *d, char **cert_pem, char **key_pem, brig_error **err);

/* A command's environment (brig_sandbox_command_env) with brig_injection_env's
 * placeholders and variables, and a placeholder for each of creds' names (these where
 * neither the sandbox nor the request set them); secrets' injected values are wiped in
 * it.  A new object, or NULL when empty. */
json_t *brig_injection_command_env(brigd *d, const brig_sandbox *sb, json_t *secrets,
                                   json_t *request_env, json_t *creds);

/* Checks an exec's "credentials" (NULL: none): {"NAME": {"ttl_seconds": 1..86400,
 * "exec_only": true (this exec only; then the TTL is optional), "value": "…" (optional:
 * else the project's secret NAME)}}, at most 16; "exec_only" not for a background
 * command (brigd does not wait for its end). */
int brig_injection_credentials_check(json_t *creds, bool background, brig_error **err);
/* Grants the sandbox's proxy each credential of creds (checked) until its TTL ends: a
 * rule of the project must name it, and the sandbox must hold no secret of that name.
 * BRIG_E_INVALID otherwise (nothing granted then lives on past the exec's refusal
 * unless it had a TTL alone).  *ends: the grants for this exec only, a new object
 * (NULL: none), for brig_injection_end when the exec ends. */
int brig_injection_grant(brigd *d, brig_sandbox *sb, json_t *creds, json_t **ends,
                         brig_error **err);
/* Ends the grants of ends (brig_injection_grant's; may be NULL) now, each unless a
 * later grant of its name replaced it, and records their expiry. */
void brig_injection_end(brigd *d, brig_sandbox *sb, json_t *ends);

#endif
