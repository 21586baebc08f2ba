/*
 * usertpl.c - templates declared by users: the spec, the key, lookups, the list, a
 * delete (see usertpl.h).
 */
#include "usertpl.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/format.h"
#include "registry.h"
#include "runtime/layer.h"
#include "store/store.h"
#include "util.h"

/* ---- names ------------------------------------------------------------------------- */

static bool valid_word(const char *s, size_t max, bool upper)
{
    size_t n = strlen(s);
    if (n == 0 || n > max || s[0] == '.' || s[0] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.' || (upper && c >= 'A' && c <= 'Z')))
            return false;
    }
    return true;
}

int brig_utpl_ref(const char *ref, char name[40], char tag[32])
{
    const char *colon = strchr(ref, ':');
    size_t n = colon ? (size_t)(colon - ref) : strlen(ref);
    if (n == 0 || n >= 40)
        return -1;
    memcpy(name, ref, n);
    name[n] = '\0';
    snprintf(tag, 32, "%s", colon ? colon + 1 : "latest");
    if (colon && strlen(colon + 1) >= 32)
        return -1;
    return valid_word(name, 32, false) && valid_word(tag, 30, true) ? 0 : -1;
}

char *brig_utpl_dir(brigd *d, const char *account_id, const char *key)
{
    return brig_asprintf("%s/templates/%s/%s", d->cfg.state_dir, account_id, key);
}

/* ---- the spec ---------------------------------------------------------------------- */

static bool in_list(const char *k, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(k, *list) == 0)
            return true;
    return false;
}

/* An array of at most max non-empty strings (absent: empty), each within len bytes and
 * without a NUL or a newline when one_line. */
static int strings(json_t *body, const char *field, size_t max, size_t len, bool one_line,
                   json_t **out, brig_error **err)
{
    json_t *v = json_object_get(body, field);
    *out = json_array();
    if (v == NULL)
        return 0;
    if (!json_is_array(v) || json_array_size(v) > max) {
        json_decref(*out);
        *out = NULL;
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'%s' must be an array of at most %zu strings", field, max);
    }
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s)
    {
        const char *p = json_string_value(s);
        size_t n = p ? json_string_length(s) : 0;
        if (p == NULL || n == 0 || n > len || strlen(p) != n ||
            (one_line && (strchr(p, '\n') || p[0] == '-'))) {
            json_decref(*out);
            *out = NULL;
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "'%s'[%zu] must be a non-empty string of at most %zu bytes%s",
                                  field, i, len, one_line ? " on one line, not an option" : "");
        }
        json_array_append(*out, s);
    }
    return 0;
}

static bool abs_path(const char *p)
{
    if (p == NULL || p[0] != '/' || strlen(p) > 255)
        return false;
    for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == '\0' || s[2] == '/'))
            return false;
    return true;
}

/* The SHA-256 of a file's bytes, as hex, into its canonical entry. */
void brig_utpl_file_hash(brig_utpl_file *f)
{
    uint8_t h[crypto_hash_sha256_BYTES];
    char hex[2 * sizeof(h) + 1];
    crypto_hash_sha256(h, f->data ? f->data : (const uint8_t *)"", f->len);
    sodium_bin2hex(hex, sizeof(hex), h, sizeof(h));
    json_object_set_new(f->canon, "sha256", json_string(hex));
    json_object_set_new(f->canon, "mode", json_integer(f->mode));
}

/* {"path", "from_sandbox", "source"}: read at the build's start. */
static int parse_fetched(json_t *f, size_t i, brig_utpl_file *out, brig_error **err)
{
    const char *sbx = json_string_value(json_object_get(f, "from_sandbox"));
    const char *src = json_string_value(json_object_get(f, "source"));
    if (sbx == NULL || strlen(sbx) >= 64 || !abs_path(src) ||
        json_object_get(f, "content_b64") != NULL)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "files[%zu]: either 'content_b64', or 'from_sandbox' (a sandbox id) "
                              "with 'source' (an absolute path in it, without '..')",
                              i);
    out->from_sandbox = brig_xstrdup(sbx);
    out->source = brig_xstrdup(src);
    return 0;
}

static int parse_file(json_t *f, size_t i, brig_utpl_file *out, json_t **canon, brig_error **err)
{
    static const char *const fields[] = {"path",         "content_b64", "mode",
                                         "from_sandbox", "source",      NULL};
    const char *k;
    json_t *v;
    json_object_foreach(f, k, v) if (!in_list(k, fields)) return brig_error_set(
        err, BRIG_E_INVALID, 0, "files[%zu]: unknown field '%.40s'", i, k);
    const char *path = json_string_value(json_object_get(f, "path"));
    const char *b64 = json_string_value(json_object_get(f, "content_b64"));
    json_t *mode = json_object_get(f, "mode");
    if (!abs_path(path))
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "files[%zu]: 'path' must be an absolute path without '..'", i);
    if (mode &&
        (!json_is_integer(mode) || json_integer_value(mode) < 0 || json_integer_value(mode) > 0777))
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "files[%zu]: 'mode' must be permission bits in [0, 0777]", i);
    out->path = brig_xstrdup(path);
    out->mode = mode ? (int)json_integer_value(mode) : -1;
    *canon = json_pack("{s:s}", "path", path);
    out->canon = *canon;
    if (json_object_get(f, "from_sandbox") || json_object_get(f, "source"))
        return parse_fetched(f, i, out, err);
    if (b64 == NULL)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "files[%zu]: 'content_b64' must be the file's bytes in base64", i);
    size_t n = strlen(b64);
    out->data = brig_xmalloc(n + 1);
    if (sodium_base642bin(out->data, n + 1, b64, n, " \n\r", &out->len, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0)
        return brig_error_set(err, BRIG_E_INVALID, 0, "files[%zu]: 'content_b64' is not base64", i);
    if (out->mode < 0)
        out->mode = 0644;
    brig_utpl_file_hash(out);
    return 0;
}

static int parse_files(json_t *body, brig_utpl_spec *s, json_t *canon, brig_error **err)
{
    json_t *files = json_object_get(body, "files"), *arr = json_array();
    json_object_set_new(canon, "files", arr);
    if (files == NULL)
        return 0;
    if (!json_is_array(files) || json_array_size(files) > BRIG_UTPL_FILES_MAX)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'files' must be an array of at most %d objects",
                              BRIG_UTPL_FILES_MAX);
    s->files = brig_xcalloc(json_array_size(files) + 1, sizeof(*s->files));
    size_t i;
    json_t *f;
    json_array_foreach(files, i, f)
    {
        json_t *c = NULL;
        if (!json_is_object(f))
            return brig_error_set(err, BRIG_E_INVALID, 0, "files[%zu] must be an object", i);
        s->n_files++;
        int r = parse_file(f, i, &s->files[i], &c, err);
        if (c)
            json_array_append_new(arr, c);
        if (r < 0)
            return -1;
    }
    return 0;
}

static int parse_env(json_t *body, json_t *canon, brig_error **err)
{
    json_t *env = json_object_get(body, "env");
    if (env == NULL) {
        json_object_set_new(canon, "env", json_object());
        return 0;
    }
    const char *k;
    json_t *v;
    if (!json_is_object(env))
        return brig_error_set(err, BRIG_E_INVALID, 0, "'env' must be an object of strings");
    json_object_foreach(env, k, v)
    {
        bool ok = json_is_string(v) && k[0] && !(k[0] >= '0' && k[0] <= '9') && strlen(k) <= 128;
        for (const char *p = k; ok && *p; p++)
            ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                 *p == '_';
        if (!ok)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "env '%.64s': names are [A-Za-z_][A-Za-z0-9_]*, values strings",
                                  k);
    }
    json_object_set(canon, "env", env);
    return 0;
}

/* start and ready: ready is {"command": "..."} or {"port": N}, with "timeout" seconds. */
static int parse_start(json_t *body, json_t *canon, brig_error **err)
{
    json_t *start = json_object_get(body, "start"), *ready = json_object_get(body, "ready");
    if (start && (!json_is_string(start) || json_string_length(start) == 0))
        return brig_error_set(err, BRIG_E_INVALID, 0, "'start' must be a shell command");
    if (ready && start == NULL)
        return brig_error_set(err, BRIG_E_INVALID, 0, "'ready' needs a 'start' command");
    json_object_set(canon, "start", start ? start : json_null());
    if (ready == NULL) {
        json_object_set_new(canon, "ready", json_null());
        return 0;
    }
    json_t *cmd = json_object_get(ready, "command"), *port = json_object_get(ready, "port");
    json_t *to = json_object_get(ready, "timeout");
    double s = to ? json_number_value(to) : 60;
    if (!json_is_object(ready) || json_object_size(ready) != (size_t)(1 + (to != NULL)) ||
        (cmd == NULL) == (port == NULL) || (cmd && !json_is_string(cmd)) ||
        (port && (!json_is_integer(port) || json_integer_value(port) < 1 ||
                  json_integer_value(port) > 65535)) ||
        (to && !json_is_number(to)) || !(s > 0 && s <= 600))
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'ready' must be {\"command\": \"...\"} or {\"port\": 1-65535}, "
                              "with an optional \"timeout\" in (0, 600] seconds");
    json_object_set_new(canon, "ready", json_deep_copy(ready));
    return 0;
}

static int parse_names(const brig_config *cfg, json_t *body, brig_utpl_spec *s, brig_error **err)
{
    const char *name = json_string_value(json_object_get(body, "name"));
    json_t *tag = json_object_get(body, "tag");
    const char *from = json_string_value(json_object_get(body, "from"));
    char ref[80];
    snprintf(ref, sizeof(ref), "%s%s%s", name ? name : "", tag ? ":" : "",
             tag ? json_string_value(tag) ? json_string_value(tag) : "?" : "");
    if (name == NULL || (tag && !json_is_string(tag)) || strchr(name, ':') ||
        brig_utpl_ref(ref, s->name, s->tag) < 0)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'name' must be 1-32 of [a-z0-9._-] and 'tag' (default latest) "
                              "1-30 of [A-Za-z0-9._-], neither starting with '.' or '-'");
    brig_template t;
    if (brig_template_lookup(cfg, s->name, &t, NULL) == 0) {
        brig_template_dispose(&t);
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'%s' is the name of a built-in template: choose another", s->name);
    }
    char pn[40], pt[32];
    if (from && brig_utpl_ref(from, pn, pt) < 0)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "'from' must name a template: base, minimal or name[:tag]");
    snprintf(s->from, sizeof(s->from), "%s", from ? from : "base");
    return 0;
}

int brig_utpl_spec_parse(const brig_config *cfg, json_t *body, brig_utpl_spec *out,
                         brig_error **err)
{
    static const char *const fields[] = {"name",  "tag",   "from",      "apt", "pip",
                                         "npm",   "files", "run",       "env", "workdir",
                                         "start", "ready", "isolation", NULL};
    memset(out, 0, sizeof(*out));
    const char *k;
    json_t *v;
    json_object_foreach(body, k, v) if (!in_list(k, fields)) return brig_error_set(
        err, BRIG_E_INVALID, 0, "unknown field '%.40s'", k);
    out->canon = json_object();
    json_t *apt, *pip, *npm, *run;
    int r = parse_names(cfg, body, out, err);
    if (r == 0)
        r = strings(body, "apt", BRIG_UTPL_PACKAGES_MAX, 200, true, &apt, err);
    json_object_set_new(out->canon, "apt", r == 0 ? apt : json_array());
    if (r == 0)
        r = strings(body, "pip", BRIG_UTPL_PACKAGES_MAX, 200, true, &pip, err);
    json_object_set_new(out->canon, "pip", r == 0 ? pip : json_array());
    if (r == 0)
        r = strings(body, "npm", BRIG_UTPL_PACKAGES_MAX, 200, true, &npm, err);
    json_object_set_new(out->canon, "npm", r == 0 ? npm : json_array());
    if (r == 0)
        r = strings(body, "run", BRIG_UTPL_STEPS_MAX, 16384, false, &run, err);
    json_object_set_new(out->canon, "run", r == 0 ? run : json_array());
    /* where it is built: not the template's key (the same layer either way) */
    json_t *iso = json_object_get(body, "isolation");
    const char *isos = json_string_value(iso);
    if (r == 0 && iso && (isos == NULL || (strcmp(isos, "container") && strcmp(isos, "gvisor"))))
        r = brig_error_set(err, BRIG_E_INVALID, 0,
                           "'isolation' (the build's) must be \"container\" or \"gvisor\"");
    if (r == 0 && isos)
        snprintf(out->isolation, sizeof(out->isolation), "%s", isos);
    json_t *wd = json_object_get(body, "workdir");
    if (r == 0 && wd && !abs_path(json_string_value(wd)))
        r = brig_error_set(err, BRIG_E_INVALID, 0,
                           "'workdir' must be an absolute path without '..'");
    json_object_set_new(out->canon, "from", json_string(out->from));
    json_object_set(out->canon, "workdir", wd ? wd : json_null());
    if (r == 0)
        r = parse_files(body, out, out->canon, err);
    if (r == 0)
        r = parse_env(body, out->canon, err);
    if (r == 0)
        r = parse_start(body, out->canon, err);
    if (r < 0)
        brig_utpl_spec_dispose(out);
    return r;
}

void brig_utpl_spec_dispose(brig_utpl_spec *s)
{
    for (size_t i = 0; i < s->n_files; i++) {
        free(s->files[i].path);
        free(s->files[i].data);
        free(s->files[i].from_sandbox);
        free(s->files[i].source);
    }
    free(s->files);
    json_decref(s->canon);
    memset(s, 0, sizeof(*s));
}

static char *dup_or_null(json_t *v)
{
    return json_is_string(v) ? brig_xstrdup(json_string_value(v)) : NULL;
}

void brig_utpl_run_of(const json_t *canon, brig_utpl_run *out)
{
    memset(out, 0, sizeof(*out));
    json_t *env = json_object_get(canon, "env"), *ready = json_object_get(canon, "ready");
    out->env = json_object_size(env) ? json_deep_copy(env) : NULL;
    out->workdir = dup_or_null(json_object_get(canon, "workdir"));
    out->start = dup_or_null(json_object_get(canon, "start"));
    out->ready_cmd = dup_or_null(json_object_get(ready, "command"));
    out->ready_port = (int)json_integer_value(json_object_get(ready, "port"));
    json_t *to = json_object_get(ready, "timeout");
    out->ready_ms = to ? (int64_t)(json_number_value(to) * 1000) : BRIG_UTPL_READY_MS;
}

void brig_utpl_run_dispose(brig_utpl_run *r)
{
    json_decref(r->env);
    free(r->workdir);
    free(r->start);
    free(r->ready_cmd);
    memset(r, 0, sizeof(*r));
}

/* ---- lookups ----------------------------------------------------------------------- */

int brig_utpl_row_get(brigd *d, const char *account_id, const char *ref, brig_utpl_row *t,
                      brig_error **err)
{
    char name[40], tag[32];
    memset(t, 0, sizeof(*t));
    if (brig_utpl_ref(ref, name, tag) < 0)
        return 0;
    return brig_store_utpl_get(d->store, account_id, name, tag, t, err);
}

static int not_found(brig_error **err, const char *ref)
{
    return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no template named '%.80s'", ref);
}

int brig_utpl_lookup(brigd *d, const char *account_id, const char *ref, brig_template *t,
                     brig_utpl_run *run, brig_error **err)
{
    memset(t, 0, sizeof(*t));
    if (run)
        memset(run, 0, sizeof(*run));
    brig_utpl_row row;
    int r = brig_utpl_row_get(d, account_id, ref, &row, err);
    if (r <= 0)
        return r < 0 ? -1 : not_found(err, ref);
    snprintf(t->name, sizeof(t->name), "%.32s:%.30s", row.name, row.tag);
    memcpy(t->key, row.key, sizeof(t->key));
    memcpy(t->build, row.key, sizeof(t->key));
    _cleanup_free_ char *dir = brig_utpl_dir(d, account_id, row.key);
    t->rootfs = brig_asprintf("%s/rootfs", dir);
    _cleanup_free_ char *ok = brig_asprintf("%s/ok", dir);
    t->built = access(ok, F_OK) == 0;
    if (run) {
        json_t *canon = json_loads(row.spec ? row.spec : "{}", 0, NULL);
        brig_utpl_run_of(canon, run);
        json_decref(canon);
    }
    brig_utpl_row_dispose(&row);
    return 0;
}

void brig_utpl_workdir(brigd *d, const char *account_id, const char *ref, const char *key,
                       char *buf, size_t n)
{
    buf[0] = '\0';
    brig_template t;
    brig_utpl_run run;
    if (strchr(ref, ':') == NULL || brig_utpl_lookup(d, account_id, ref, &t, &run, NULL) < 0)
        return;
    if (strcmp(t.key, key) == 0 && run.workdir)
        snprintf(buf, n, "%s", run.workdir);
    brig_utpl_run_dispose(&run);
    brig_template_dispose(&t);
}

static json_t *row_json(const brig_utpl_row *t)
{
    char at[32];
    brig_format_time(t->built_at, at);
    _cleanup_free_ char *ref = brig_asprintf("%s:%s", t->name, t->tag);
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:s, s:I, s:I, s:s, s:s}", "name", t->name,
                     "tag", t->tag, "ref", ref, "key", t->key, "built", 1, "parent", t->parent,
                     "parent_key", t->parent_key, "size_bytes", (json_int_t)t->size_bytes,
                     "build_ms", (json_int_t)t->build_ms, "built_at", at, "built_by", t->built_by);
}

static void list_one(const brig_utpl_row *t, void *arg)
{
    json_array_append_new(arg, row_json(t));
}

json_t *brig_utpl_list(brigd *d, const char *account_id)
{
    json_t *arr = brig_template_list(&d->cfg);
    brig_store_utpl_each(d->store, account_id, list_one, arr, NULL);
    return arr;
}

int brig_utpl_get(brigd *d, const char *account_id, const char *ref, json_t **out, brig_error **err)
{
    brig_template bt;
    if (brig_template_lookup(&d->cfg, ref, &bt, NULL) == 0) {
        *out = brig_template_json(&bt);
        brig_template_dispose(&bt);
        return 0;
    }
    brig_utpl_row row;
    int r = brig_utpl_row_get(d, account_id, ref, &row, err);
    if (r <= 0)
        return r < 0 ? -1 : not_found(err, ref);
    *out = row_json(&row);
    json_object_set_new(*out, "spec", json_loads(row.spec ? row.spec : "{}", 0, NULL));
    brig_utpl_row_dispose(&row);
    return 0;
}

int brig_utpl_log(brigd *d, const char *account_id, const char *ref, json_t **out, brig_error **err)
{
    brig_utpl_row row;
    int r = brig_utpl_row_get(d, account_id, ref, &row, err);
    if (r <= 0)
        return r < 0 ? -1 : not_found(err, ref);
    json_t *steps = row.log ? json_loads(row.log, 0, NULL) : NULL;
    _cleanup_free_ char *name = brig_asprintf("%s:%s", row.name, row.tag);
    *out = json_pack("{s:s, s:s, s:o}", "template", name, "key", row.key, "steps",
                     steps ? steps : json_array());
    brig_utpl_row_dispose(&row);
    return 0;
}
