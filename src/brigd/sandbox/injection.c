/*
 * injection.c - a project's credential injection rules (see injection.h).  The rules
 * name secrets, never hold them: a rule's header value is text with {{secret:NAME}}
 * in it, filled by the proxy from the sandbox's own sealed secrets.
 */
#include "injection.h"

#include <string.h>
#include <unistd.h>

#include "agentc/agentc.h"
#include "log.h"
#include "secrets.h"
#include "vault/vault.h"

#define RULES_MAX   64
#define HEADERS_MAX 16

static bool host_ok(const char *h)
{
    const char *p = strncmp(h, "*.", 2) == 0 ? h + 2 : h;
    size_t n = strlen(p);
    if (n == 0 || n > 253 || p[0] == '.' || p[n - 1] == '.' || strstr(p, ".."))
        return false;
    for (; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
            return false;
    return true;
}

static bool header_name_ok(const char *n)
{
    static const char *const reserved[] = {
        "host",    "connection", "content-length",   "transfer-encoding", "keep-alive",
        "upgrade", "te",         "proxy-connection", "accept-encoding"};
    if (n[0] == 0 || strlen(n) > 64)
        return false;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '-' || *p == '_'))
            return false;
    for (size_t i = 0; i < BRIG_ARRAY_LEN(reserved); i++)
        if (strcasecmp(n, reserved[i]) == 0)
            return false;
    return true;
}

/* A header value: printable ASCII, each {{secret:NAME}} well formed. */
static int value_check(const char *v, brig_error **err)
{
    if (strlen(v) > 4096)
        return brig_error_set(err, BRIG_E_INVALID, 0, "a header value is longer than 4096 bytes");
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
            return brig_error_set(err, BRIG_E_INVALID, 0, "header values must be printable ASCII");
    for (const char *p = strstr(v, "{{"); p; p = strstr(p + 2, "{{")) {
        const char *close = strstr(p, "}}");
        if (strncmp(p, "{{secret:", 9) != 0 || close == NULL)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'{{' in a header value must start {{secret:NAME}}");
        _cleanup_free_ char *name = brig_asprintf("%.*s", (int)(close - p - 9), p + 9);
        if (brig_vault_check_name(name, err) < 0)
            return -1;
    }
    return 0;
}

int brig_injection_check(json_t *rules, brig_error **err)
{
    if (!json_is_array(rules) || json_array_size(rules) > RULES_MAX)
        return brig_error_set(err, BRIG_E_INVALID, 0, "'rules' must be an array of at most %d",
                              RULES_MAX);
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        json_t *host = json_object_get(r, "host"), *headers = json_object_get(r, "headers");
        if (!json_is_object(r) || json_object_size(r) != 2 || !json_is_string(host) ||
            !host_ok(json_string_value(host)))
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "rule %zu: needs \"host\" (a lower-case name or *.suffix) "
                                  "and \"headers\", nothing else",
                                  i);
        if (!json_is_object(headers) || json_object_size(headers) == 0 ||
            json_object_size(headers) > HEADERS_MAX)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "rule %zu: 'headers' must be an object of 1 to %d strings", i,
                                  HEADERS_MAX);
        const char *k;
        json_t *v;
        json_object_foreach(headers, k, v)
        {
            if (!header_name_ok(k))
                return brig_error_set(err, BRIG_E_INVALID, 0,
                                      "rule %zu: header '%.64s' cannot be set", i, k);
            if (!json_is_string(v) || value_check(json_string_value(v), err) < 0) {
                if (err && *err == NULL)
                    brig_error_set(err, BRIG_E_INVALID, 0, "rule %zu: header values are strings",
                                   i);
                return -1;
            }
        }
    }
    return 0;
}

json_t *brig_injection_get(brigd *d, const char *project_id, brig_error **err)
{
    char *text = NULL;
    int r = brig_store_injections_get(d->store, project_id, &text, err);
    if (r < 0)
        return NULL;
    json_t *rules = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return json_is_array(rules) ? rules : (json_decref(rules), json_array());
}

/* Whether a rule of rules names secret name. */
static bool named(json_t *rules, const char *name)
{
    _cleanup_free_ char *ref = brig_asprintf("{{secret:%s}}", name);
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(r, "headers"), k,
                            v) if (strstr(json_string_value(v), ref)) return true;
    }
    return false;
}

/* The proxy's view of rules and secrets (the arrays malloc'd; strings lent). */
static void view(brigd *d, const char *id, json_t *rules, json_t *secrets, brig_inject *out,
                 char (*ph)[64])
{
    size_t nr = json_array_size(rules), ns = 0;
    brig_inject_rule *rv = brig_xcalloc(nr ? nr : 1, sizeof(*rv));
    for (size_t i = 0; i < nr; i++) {
        json_t *r = json_array_get(rules, i), *hs = json_object_get(r, "headers");
        brig_inject_header *h = brig_xcalloc(json_object_size(hs) + 1, sizeof(*h));
        size_t k = 0;
        const char *name;
        json_t *v;
        json_object_foreach(hs, name, v) h[k++] = (brig_inject_header){name, json_string_value(v)};
        rv[i] = (brig_inject_rule){json_string_value(json_object_get(r, "host")), h, k};
    }
    brig_inject_secret *sv = brig_xcalloc(json_object_size(secrets) + 1, sizeof(*sv));
    const char *name;
    json_t *v;
    json_object_foreach(secrets, name, v)
    {
        if (!named(rules, name))
            continue;
        brig_vault_placeholder(d->vault, id, name, ph[ns]);
        sv[ns] = (brig_inject_secret){name, json_string_value(v), ph[ns], 0, false};
        ns++;
    }
    *out = (brig_inject){rv, nr, sv, ns};
}

static void view_dispose(brig_inject *in)
{
    for (size_t i = 0; i < in->n_rules; i++)
        free((void *)in->rules[i].headers);
    free((void *)in->rules);
    free((void *)in->secrets);
}

static int install_ca(brigd *d, brig_sandbox *sb, brig_error **err);

int brig_injection_apply(brigd *d, brig_sandbox *sb, brig_error **err)
{
    brig_net_sandbox *net = brig_sandbox_net(sb);
    if (net == NULL)
        return 0;
    json_t *rules = brig_injection_get(d, brig_sandbox_spec_of(sb)->project_id, err);
    if (rules == NULL)
        return -1;
    json_t *secrets = NULL;
    if (json_array_size(rules) && brig_sandbox_secrets(d, sb, &secrets, err) < 0) {
        json_decref(rules);
        return -1;
    }
    char(*ph)[64] = brig_xcalloc(json_object_size(secrets) + 1, 64);
    brig_inject in;
    view(d, brig_sandbox_id(sb), rules, secrets, &in, ph);
    int rc = in.n_rules && d->ca_pem ? install_ca(d, sb, err) : 0;
    if (rc == 0)
        rc = brig_net_set_inject(d->net, net, &in, err);
    view_dispose(&in);
    free(ph);
    brig_vault_wipe(secrets);
    json_decref(rules);
    return rc;
}

static void apply_one(brigd *d, brig_sandbox *sb, void *arg)
{
    (void)arg;
    brig_error *err = NULL;
    if (brig_injection_apply(d, sb, &err) < 0) {
        brig_err("sandbox %s: injection rules: %s", brig_sandbox_id(sb), err->msg);
        brig_error_clear(&err);
    }
}

int brig_injection_put(brigd *d, const char *project_id, json_t *rules, brig_error **err)
{
    if (brig_injection_check(rules, err) < 0)
        return -1;
    _cleanup_free_ char *text = json_dumps(rules, JSON_COMPACT | JSON_SORT_KEYS);
    if (brig_store_injections_put(d->store, project_id, text, err) < 0)
        return -1;
    brig_registry_each_running(d, project_id, BRIG_EACH_USE | BRIG_EACH_NETWORKED, apply_one, NULL);
    return 0;
}

#define CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define CA_FILE   "/usr/local/share/ca-certificates/brig-egress-ca.crt"

json_t *brig_injection_env(brigd *d, const brig_sandbox *sb, json_t *secrets)
{
    if (d->ca_pem == NULL && json_object_size(secrets) == 0)
        return NULL; /* no secret to replace, no CA to name: the rules need not be read */
    json_t *rules = brig_injection_get(d, brig_sandbox_spec_of(sb)->project_id, NULL);
    if (rules && json_array_size(rules) == 0) {
        json_decref(rules);
        return NULL;
    }
    const char *name;
    json_t *v;
    json_object_foreach(secrets, name, v)
    {
        /* Rules that cannot be read (the store failed): no value goes in, fail closed. */
        if (rules && !named(rules, name))
            continue;
        char ph[64];
        brig_vault_placeholder(d->vault, brig_sandbox_id(sb), name, ph);
        char *s = (char *)json_string_value(v);
        explicit_bzero(s, strlen(s));
        json_string_set(v, ph);
    }
    json_decref(rules);
    if (d->ca_pem == NULL)
        return NULL;
    /* The brig CA, for the clients that do not read the system store (or not only). */
    return json_pack("{ss ss ss ss ss ss}", "SSL_CERT_FILE", CA_BUNDLE, "REQUESTS_CA_BUNDLE",
                     CA_BUNDLE, "CURL_CA_BUNDLE", CA_BUNDLE, "PIP_CERT", CA_BUNDLE,
                     "NPM_CONFIG_CAFILE", CA_BUNDLE, "NODE_EXTRA_CA_CERTS", CA_FILE);
}

json_t *brig_injection_command_env(brigd *d, const brig_sandbox *sb, json_t *secrets,
                                   json_t *request_env, json_t *creds)
{
    json_t *ca_env = brig_injection_env(d, sb, secrets);
    const char *name;
    json_t *c;
    json_object_foreach(creds, name, c)
    {
        char ph[64];
        brig_vault_placeholder(d->vault, brig_sandbox_id(sb), name, ph);
        if (ca_env == NULL)
            ca_env = json_object();
        json_object_set_new(ca_env, name, json_string(ph));
    }
    json_t *env = brig_sandbox_command_env(sb, secrets, request_env);
    if (ca_env) {
        if (env == NULL)
            env = json_object();
        json_object_update_missing(env, ca_env);
        json_decref(ca_env);
    }
    return env;
}

/* The sandbox's system CA bundle (empty when it has none). */
static void bundle_read(brigd *d, brig_sandbox *sb, brig_buf *b)
{
    int fd = d->rt->ops->connect(d->rt, brig_sandbox_runtime(sb), NULL);
    int64_t size = 0;
    int mode = 0;
    if (fd >= 0 && brig_agentc_read_begin(fd, CA_BUNDLE, &size, &mode, NULL) == 0) {
        brig_frame f = {0};
        while (b->len < (4u << 20) && brig_agentc_read_chunk(fd, &f, NULL) > 0)
            brig_buf_append(b, f.payload, f.hdr.len);
        brig_frame_dispose(&f);
    }
    if (fd >= 0)
        close(fd);
    brig_buf_append(b, "", 0);
}

static int file_write(brigd *d, brig_sandbox *sb, const char *path, const char *text,
                      brig_error **err)
{
    int fd = d->rt->ops->connect(d->rt, brig_sandbox_runtime(sb), err);
    if (fd < 0)
        return -1;
    _cleanup_free_ char *dir = brig_xstrdup(path);
    *strrchr(dir, '/') = 0;
    int r = brig_agentc_mkdir(fd, dir, 0755, true, NULL);
    close(fd);
    fd = d->rt->ops->connect(d->rt, brig_sandbox_runtime(sb), err);
    r = fd < 0 ? -1 : brig_agentc_write_begin(fd, path, 0644, err);
    if (r == 0)
        r = brig_agentc_write_chunk(fd, text, strlen(text), err);
    if (r == 0)
        r = brig_agentc_write_end(fd, NULL, err);
    if (fd >= 0)
        close(fd);
    return r;
}

/* The brig CA into the sandbox's system store (once) and a file of its own. */
static int install_ca(brigd *d, brig_sandbox *sb, brig_error **err)
{
    brig_buf b = {0};
    bundle_read(d, sb, &b);
    int r = 0;
    if (strstr(b.data, d->ca_pem) == NULL) {
        if (b.len && b.data[b.len - 1] != '\n')
            brig_buf_append(&b, "\n", 1);
        brig_buf_printf(&b, "%s", d->ca_pem);
        r = file_write(d, sb, CA_BUNDLE, b.data, err);
        if (r == 0)
            r = file_write(d, sb, CA_FILE, d->ca_pem, err);
    }
    brig_buf_dispose(&b);
    return r;
}

#define CA_OWNER "brigd-ca" /* the vault's owner of the CA (never a project or sandbox id) */

int brig_injection_ca(brigd *d, char **cert_pem, char **key_pem, brig_error **err)
{
    *cert_pem = *key_pem = NULL;
    json_t *kept = NULL;
    if (brig_vault_open_all(d->vault, d->store, CA_OWNER, &kept, err) < 0)
        return -1;
    const char *c = json_string_value(json_object_get(kept, "CERT"));
    const char *k = json_string_value(json_object_get(kept, "KEY"));
    if (c && k) {
        *cert_pem = brig_xstrdup(c);
        *key_pem = brig_xstrdup(k);
        brig_vault_wipe(kept);
        return 0;
    }
    brig_vault_wipe(kept);
    if (brig_net_ca_make(cert_pem, key_pem, err) < 0)
        return -1;
    if (brig_vault_put(d->vault, d->store, CA_OWNER, "CERT", *cert_pem, strlen(*cert_pem), err) <
            0 ||
        brig_vault_put(d->vault, d->store, CA_OWNER, "KEY", *key_pem, strlen(*key_pem), err) < 0) {
        free(*cert_pem);
        explicit_bzero(*key_pem, strlen(*key_pem));
        free(*key_pem);
        *cert_pem = *key_pem = NULL;
        return -1;
    }
    brig_info("egress proxy: a new CA, its key sealed in the store");
    return 0;
}

#define CREDENTIAL_TTL_MAX 86400

int brig_injection_credentials_check(json_t *creds, bool background, brig_error **err)
{
    if (creds == NULL)
        return 0;
    if (!json_is_object(creds) || json_object_size(creds) > 16)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'credentials' must be an object of at most 16 names");
    const char *name;
    json_t *c;
    json_object_foreach(creds, name, c)
    {
        json_t *ttl = json_object_get(c, "ttl_seconds"), *v = json_object_get(c, "value");
        json_t *once = json_object_get(c, "exec_only");
        if (brig_vault_check_name(name, err) < 0)
            return -1;
        /* A TTL, or this exec only (a TTL then ends it sooner if it comes first). */
        bool ok = json_is_object(c) && (once == NULL || json_is_boolean(once)) &&
                  json_object_size(c) == (size_t)(!!ttl + !!v + !!once) &&
                  (ttl ? json_is_integer(ttl) && json_integer_value(ttl) >= 1 &&
                             json_integer_value(ttl) <= CREDENTIAL_TTL_MAX
                       : json_is_true(once));
        if (!ok)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "credential %s: {\"ttl_seconds\": 1..%d} or "
                                  "{\"exec_only\": true} (or both), and an optional "
                                  "\"value\", nothing else",
                                  name, CREDENTIAL_TTL_MAX);
        if (background && json_is_true(once))
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "credential %s: \"exec_only\" needs a command brigd waits for, "
                                  "not a background one (give it a \"ttl_seconds\")",
                                  name);
        if (v && (!json_is_string(v) ||
                  brig_vault_check_value(json_string_value(v), json_string_length(v), err) < 0))
            return err && *err ? -1
                               : brig_error_set(err, BRIG_E_INVALID, 0,
                                                "credential %s: 'value' must be a string", name);
    }
    return 0;
}

/* One credential's value: given, or the project's secret of that name (wipe it). */
static char *credential_value(brigd *d, const brig_sandbox *sb, const char *name, json_t *c,
                              brig_error **err)
{
    json_t *v = json_object_get(c, "value");
    if (v)
        return brig_xstrdup(json_string_value(v));
    json_t *all = NULL;
    if (brig_vault_open_all(d->vault, d->store, brig_sandbox_spec_of(sb)->project_id, &all, err) <
        0)
        return NULL;
    const char *pv = json_string_value(json_object_get(all, name));
    char *out = pv ? brig_xstrdup(pv) : NULL;
    brig_vault_wipe(all);
    if (out == NULL)
        brig_error_set(err, BRIG_E_INVALID, 0,
                       "credential %s: no 'value' given and the project has no secret of that name",
                       name);
    return out;
}

int brig_injection_grant(brigd *d, brig_sandbox *sb, json_t *creds, json_t **ends, brig_error **err)
{
    *ends = NULL;
    if (json_object_size(creds) == 0)
        return 0;
    json_t *rules = brig_injection_get(d, brig_sandbox_spec_of(sb)->project_id, err);
    json_t *own = brig_vault_names(d->store, brig_sandbox_id(sb));
    int rc = rules ? 0 : -1;
    const char *name;
    json_t *c;
    json_object_foreach(creds, name, c)
    {
        bool held = false;
        for (size_t i = 0; i < json_array_size(own) && !held; i++)
            held = strcmp(json_string_value(json_array_get(own, i)), name) == 0;
        if (rc == 0 && !named(rules, name))
            rc = brig_error_set(err, BRIG_E_INVALID, 0,
                                "credential %s: no rule of the project "
                                "names it",
                                name);
        else if (rc == 0 && held)
            rc = brig_error_set(err, BRIG_E_INVALID, 0,
                                "credential %s: a secret of the sandbox "
                                "(injected for its whole life) has that name",
                                name);
        char *value = rc == 0 ? credential_value(d, sb, name, c, err) : NULL;
        if (value == NULL) {
            rc = -1;
            break;
        }
        char ph[64];
        brig_vault_placeholder(d->vault, brig_sandbox_id(sb), name, ph);
        json_t *ttl = json_object_get(c, "ttl_seconds");
        int64_t secs = ttl ? json_integer_value(ttl) : CREDENTIAL_TTL_MAX;
        brig_inject_secret g = {name, value, ph, brig_now_real_ms() + secs * 1000, false};
        rc = brig_net_inject_grant(d->net, brig_sandbox_net(sb), &g, err);
        explicit_bzero(value, strlen(value));
        free(value);
        if (rc < 0)
            break;
        if (json_is_true(json_object_get(c, "exec_only"))) { /* ended with the exec */
            if (*ends == NULL)
                *ends = json_object();
            json_object_set_new(*ends, name, json_integer(g.expires_ms));
        }
    }
    json_object_foreach(creds, name, c)
    {
        json_t *v = json_object_get(c, "value"); /* the request's copy: wiped */
        if (json_is_string(v))
            explicit_bzero((char *)json_string_value(v), json_string_length(v));
    }
    json_decref(own);
    json_decref(rules);
    if (rc < 0) { /* the exec does not run: what it was granted ends */
        brig_injection_end(d, sb, *ends);
        json_decref(*ends);
        *ends = NULL;
    }
    return rc;
}

void brig_injection_end(brigd *d, brig_sandbox *sb, json_t *ends)
{
    const char *name;
    json_t *at;
    json_object_foreach(ends, name, at)
    {
        brig_net_inject_end(d->net, brig_sandbox_net(sb), name, json_integer_value(at),
                            "its exec ended");
    }
}
