/*
 * secrets.c - a sandbox's secrets and the environment of its commands (see secrets.h).
 */
#include "secrets.h"

#include "log.h"
#include "vault/vault.h"

int brig_sandbox_seal_secrets(brigd *d, const char *id, const char *project_id, json_t *secrets,
                              json_t *secret_refs, brig_error **err)
{
    /* The count first: nothing is sealed for a create that must be refused. */
    if (brig_vault_check_count(json_object_size(secrets) + json_array_size(secret_refs),
                               d->cfg.max_secrets, err) < 0)
        return -1;
    const char *name;
    json_t *v;
    json_object_foreach(secrets, name, v)
    {
        if (!json_is_string(v))
            return brig_error_set(err, BRIG_E_INVALID, 0, "secret '%.64s' must be a string", name);
        if (brig_vault_put(d->vault, d->store, id, name, json_string_value(v),
                           json_string_length(v), err) < 0)
            return -1;
    }
    if (secret_refs && brig_vault_copy(d->vault, d->store, project_id, id, secret_refs, err) < 0)
        return -1;
    /* Their bytes, referenced ones included (the create's cleanup removes them). */
    return brig_vault_check_total(d->store, id, d->cfg.max_secrets, d->cfg.max_secret_bytes, err);
}

int brig_sandbox_secrets(brigd *d, const brig_sandbox *sb, json_t **out, brig_error **err)
{
    const char *id = brig_sandbox_id(sb);
    json_t *secrets = NULL;
    *out = NULL;
    if (brig_sandbox_secretless(d, sb)) /* its redactor knows: the vault need not be read */
        return 0;
    if (brig_vault_open_all(d->vault, d->store, id, &secrets, err) < 0) {
        brig_err("sandbox %s: %s", id, (*err)->msg);
        brig_error_prefix(err, "sandbox %s: its secrets cannot be used", id);
        return -1;
    }
    if (json_object_size(secrets) == 0)
        json_decref(secrets);
    else
        *out = secrets;
    return 0;
}

int brig_sandbox_redactor(brigd *d, brig_sandbox *sb, brig_redactor **out, brig_error **err)
{
    *out = NULL;
    if (brig_sandbox_redactor_cached(d, sb, out))
        return 0;
    /* Built outside the lock; two first uses at once (after a restart) may both
     * build, and the second one's is dropped. */
    json_t *secrets = NULL;
    if (brig_sandbox_secrets(d, sb, &secrets, err) < 0)
        return -1;
    brig_redactor *r = brig_redactor_new(secrets);
    brig_vault_wipe(secrets);
    brig_sandbox_redactor_keep(d, sb, r, out);
    return 0;
}

json_t *brig_sandbox_command_env(const brig_sandbox *sb, json_t *secrets, json_t *request_env)
{
    const json_t *own = brig_sandbox_env(sb);
    if (json_object_size(own) == 0 && json_object_size(secrets) == 0 &&
        json_object_size(request_env) == 0)
        return NULL;
    /* Deep copies: the caller wipes this object, which must not scrub the
     * strings of the sandbox's env or of the request it came from. */
    json_t *env = own ? json_deep_copy(own) : json_object();
    json_t *layers[] = {secrets, request_env};
    for (size_t i = 0; i < 2; i++) {
        const char *k;
        json_t *v;
        json_object_foreach(layers[i], k, v) json_object_set_new(env, k, json_deep_copy(v));
    }
    return env;
}
