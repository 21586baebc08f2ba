/*
 * secrets.h - a sandbox's secrets and the environment of its commands.
 *
 * Secrets are sealed under the sandbox's id at create (inline values and copies of
 * project secrets) and opened only for what needs them: a command's environment and
 * the redaction of everything the sandbox sends out (its output, files listings, DNS
 * log).  The redactor is built once per sandbox and kept by the registry.
 */
#ifndef BRIG_SECRETS_H
#define BRIG_SECRETS_H

#include <jansson.h>

#include "error.h"
#include "registry.h"
#include "server.h"
#include "vault/redact.h"

/* Seals the secrets of sandbox id of project_id: secrets ({"NAME": "value"}) and
 * secret_refs (["NAME"] of project secrets), either NULL; within the counts and bytes
 * of the configuration.  On failure some may be sealed: the caller removes them
 * (brig_vault_delete_all). */
int brig_sandbox_seal_secrets(brigd *d, const char *id, const char *project_id, json_t *secrets,
                              json_t *secret_refs, brig_error **err);

/* The sandbox's secrets, decrypted, in *out ({"NAME": "value"}, or NULL when it has
 * none): the caller releases them with brig_vault_wipe as soon as possible.  -1 when
 * they exist but do not open (another master key): what needs them (a command's env,
 * the redaction of output) must not go on. */
int brig_sandbox_secrets(brigd *d, const brig_sandbox *sb, json_t **out, brig_error **err);

/* The redactor of the sandbox's secrets (redact.h): a new reference in *out
 * (brig_redactor_free it), or NULL when it has none.  Built once per sandbox.  -1 like
 * brig_sandbox_secrets when they do not open: output must not go out. */
int brig_sandbox_redactor(brigd *d, brig_sandbox *sb, struct brig_redactor **out, brig_error **err);

/* The environment of a command: the sandbox's env, then its secrets, then the
 * request's own (any may be NULL); a new object (holding secret values: wipe it), or
 * NULL when all are empty. */
json_t *brig_sandbox_command_env(const brig_sandbox *sb, json_t *secrets, json_t *request_env);

#endif
