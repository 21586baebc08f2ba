/*
 * settings.c - brigd's settings, each declared once (see settings.h).
 *
 * The table brig_settings[] below has one row per setting: its key in the config file's
 * [brigd] section, its command-line flag (or none), its type, its default (written
 * as the file would write it), its range, where brig_config keeps it and a line of
 * help.  Those rows, and nothing else, fill in the defaults, parse the file and the
 * flags, and write `brigd --help` and `brigd --print-settings` (JSON; the test
 * tests/integration/test_settings.py checks docs/operations.md's table against it).
 * The options that are no setting (--config, --ready-fd, --destroy-all, ...) are the
 * rows of actions[].
 *
 * What a row cannot say stays explicit, each in a function of its own: the
 * [tariff.NAME] sections (apply_tariff), warm_pool's TEMPLATE:TARIFF:COUNT[:ISOLATION] list
 * (parse_warm_pool) and the checks across settings (check_across).
 *
 * A new setting: a field of brig_config, a row here, a row in docs/operations.md.
 */
#include "settings.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "settings_internal.h"
#include "util.h"

static const char *const type_names[] = {"string", "enum", "list",    "int",
                                         "bytes",  "MiB",  "seconds", "ratio"};

/* The options that are no setting. */
enum {
    A_CONFIG = 1000,
    A_READY_FD,
    A_DESTROY_ALL,
    A_PRINT_SETTINGS,
    A_PRINT_ROUTES,
    A_HELP,
    A_VERSION,
    A_SETTING = 2000 /* + the row of brig_settings[] */
};
static const struct action {
    const char *flag, *metavar, *help;
    int id;
} actions[] = {
    {"--config", "FILE", "INI file: [brigd] keys, [tariff.NAME] sections; flags win", A_CONFIG},
    {"--ready-fd", "N", "write \"ready URL\" to descriptor N once serving", A_READY_FD},
    {"--destroy-all", NULL, "end every live sandbox of the state dir and exit", A_DESTROY_ALL},
    {"--print-settings", NULL, "print every setting (default, range, value) as JSON and exit",
     A_PRINT_SETTINGS},
    {"--print-routes", NULL, "print the API's route table and exit", A_PRINT_ROUTES},
    {"--help", NULL, "print this and exit", A_HELP},
    {"--version", NULL, "print brigd's version and exit", A_VERSION},
};

static void set_str(char **slot, const char *v)
{
    free(*slot);
    *slot = brig_xstrdup(v);
}

static int parse_int(const char *v, int64_t min, int64_t max, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < min || n > max)
        return -1;
    *out = n;
    return 0;
}

/* Whether v is one of choices ("a|b|c"). */
static int is_choice(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *c = choices;; c++) {
        size_t len = strcspn(c, "|");
        if (len == n && strncmp(c, v, n) == 0)
            return 1;
        c += len;
        if (*c == '\0')
            return 0;
    }
}

/* "a|b|c" as "a, b or c"; the caller frees it. */
static char *choices_text(const char *choices)
{
    const char *last = strrchr(choices, '|');
    char *out = brig_xcalloc(4 * strlen(choices) + 1, 1), *o = out;
    for (const char *p = choices; *p; p++) {
        if (*p != '|')
            *o++ = *p;
        else
            o += sprintf(o, p == last ? " or " : ", ");
    }
    return out;
}

static const setting *setting_by_key(const char *key)
{
    for (size_t i = 0; i < brig_settings_len; i++)
        if (strcmp(brig_settings[i].key, key) == 0)
            return &brig_settings[i];
    return NULL;
}

/* Sets the setting of row s from v (the file's text, or a flag's); 0 or -1 with *err set. */
static int apply(brig_config *cfg, const setting *s, const char *v, brig_error **err)
{
    void *slot = (char *)cfg + s->at;
    switch (s->type) {
    case T_STRING:
    case T_LIST:
        if (*v == '\0')
            return brig_error_set(err, BRIG_E_INVALID, 0, "%s must not be empty", s->key);
        set_str(slot, v);
        return 0;
    case T_ENUM:
        if (!is_choice(s->choices, v)) {
            _cleanup_free_ char *text = choices_text(s->choices);
            return brig_error_set(err, BRIG_E_INVALID, 0, "%s must be %s", s->key, text);
        }
        set_str(slot, v);
        return 0;
    case T_RATIO: {
        char *end = NULL;
        double r = strtod(v, &end);
        if (end == v || *end != '\0' || !(r == 0 || (r >= s->ratio_min && r <= (double)s->max)))
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "%s: '%s' is not 0 (no bound) or a ratio in [%g, %g]", s->key, v,
                                  s->ratio_min, (double)s->max);
        *(double *)slot = r;
        return 0;
    }
    default: {
        int64_t n;
        if (parse_int(v, s->min, s->max, &n) < 0)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "%s: '%s' is not an integer in [%lld, %lld]", s->key, v,
                                  (long long)s->min, (long long)s->max);
        *(int64_t *)slot = s->type == T_SECONDS ? n * 1000 : n;
        return 0;
    }
    }
}

const brig_tariff *brig_config_tariff(const brig_config *cfg, const char *name)
{
    for (int i = 0; name && i < cfg->n_tariffs; i++)
        if (strcmp(cfg->tariffs[i].name, name) == 0)
            return &cfg->tariffs[i];
    return NULL;
}

/* [tariff.NAME]: vcpus, memory_mib, disk_mib, price_micro_usd_per_second.  A
 * section for an existing name changes it; a new name adds a tariff. */
static int apply_tariff(brig_config *cfg, const char *tname, const char *key, const char *v,
                        brig_error **err)
{
    size_t n = strlen(tname);
    if (n == 0 || n >= sizeof(cfg->tariffs[0].name) ||
        strspn(tname, "abcdefghijklmnopqrstuvwxyz"
                      "0123456789-_") != n)
        return brig_error_set(err, BRIG_E_INVALID, 0, "bad tariff name '%s'", tname);
    brig_tariff *t = (brig_tariff *)brig_config_tariff(cfg, tname);
    if (t == NULL) {
        if (cfg->n_tariffs == BRIG_MAX_TARIFFS)
            return brig_error_set(err, BRIG_E_INVALID, 0, "at most %d tariffs", BRIG_MAX_TARIFFS);
        t = &cfg->tariffs[cfg->n_tariffs++];
        *t = (brig_tariff){.vcpus = 1, .memory_mib = 512, .disk_mib = 2048};
        snprintf(t->name, sizeof(t->name), "%s", tname);
    }
    if (strcmp(key, "vcpus") == 0) {
        char *end = NULL;
        double d = strtod(v, &end);
        if (end == v || *end != '\0' || !(d >= 0.01 && d <= 1024))
            return brig_error_set(err, BRIG_E_INVALID, 0, "vcpus: '%s' is not in [0.01, 1024]", v);
        t->vcpus = d;
        return 0;
    }
    struct {
        const char *name;
        int64_t *slot, min, max;
    } ints[] = {
        {"memory_mib", &t->memory_mib, 16, 1 << 22},
        {"disk_mib", &t->disk_mib, 64, 1 << 24},
        {"price_micro_usd_per_second", &t->price_micro_usd, 0, INT64_C(1) << 40},
    };
    for (size_t i = 0; i < BRIG_ARRAY_LEN(ints); i++) {
        if (strcmp(key, ints[i].name) == 0) {
            if (parse_int(v, ints[i].min, ints[i].max, ints[i].slot) < 0)
                return brig_error_set(err, BRIG_E_INVALID, 0, "%s: '%s' is not in [%lld, %lld]",
                                      key, v, (long long)ints[i].min, (long long)ints[i].max);
            return 0;
        }
    }
    return brig_error_set(err, BRIG_E_INVALID, 0, "unknown tariff setting '%s'", key);
}

/* How long warm_pool item's TEMPLATE is: up to its first ':', or, for a user's template
 * (ACCOUNT/NAME:TAG, a '/' before that ':'), up to its second. */
static size_t pool_template_len(const char *item)
{
    const char *c1 = strchr(item, ':'), *slash = strchr(item, '/');
    if (c1 == NULL)
        return strlen(item);
    const char *c2 = slash && slash < c1 ? strchr(c1 + 1, ':') : c1;
    return c2 ? (size_t)(c2 - item) : strlen(item);
}

/* warm_pool = auto | off | TEMPLATE:TARIFF:COUNT[:ISOLATION][,…], auto beside pinned entries
 * allowed (after the tariffs are known).  TEMPLATE is a built-in template or a user's,
 * ACCOUNT/NAME:TAG (pooled for that account only).  The isolation is checked by name here
 * (core/ is below the runtime that knows the modes); whether this host runs it, and
 * whether the template exists, is the pool's business at start. */
static int parse_warm_pool(brig_config *cfg, brig_error **err)
{
    _cleanup_free_ char *s = brig_xstrdup(cfg->warm_pool);
    char *save = NULL;
    cfg->n_pool = 0;
    cfg->pool_auto = false;
    for (char *item = strtok_r(s, ", ", &save); item; item = strtok_r(NULL, ", ", &save)) {
        if (strcmp(item, "auto") == 0 || strcmp(item, "off") == 0) {
            cfg->pool_auto = cfg->pool_auto || item[0] == 'a';
            continue;
        }
        char tariff[32], iso[16] = "container";
        int n = 0, used = 0, got = 0;
        size_t tlen = pool_template_len(item);
        if (tlen > 0 && tlen < sizeof(cfg->pool[0].template) && item[tlen] == ':')
            got = sscanf(item + tlen + 1, "%31[^:]:%d%n:%15[^:]%n", tariff, &n, &used, iso, &used);
        if (got < 2 || item[tlen + 1 + used] != '\0' || n < 0 || n > 1000)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "warm_pool: '%s' is not TEMPLATE:TARIFF:COUNT[:ISOLATION] "
                                  "(TEMPLATE: a built-in one or ACCOUNT/NAME:TAG)",
                                  item);
        if (strcmp(iso, "container") != 0 && strcmp(iso, "gvisor") != 0 &&
            strcmp(iso, "microvm") != 0)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "warm_pool: '%s': the isolation must be container, gvisor or "
                                  "microvm",
                                  item);
        if (brig_config_tariff(cfg, tariff) == NULL)
            return brig_error_set(err, BRIG_E_INVALID, 0, "warm_pool: no tariff '%s'", tariff);
        if (cfg->n_pool == (int)BRIG_ARRAY_LEN(cfg->pool))
            return brig_error_set(err, BRIG_E_INVALID, 0, "warm_pool: at most %zu entries",
                                  BRIG_ARRAY_LEN(cfg->pool));
        snprintf(cfg->pool[cfg->n_pool].template, sizeof(cfg->pool[0].template), "%.*s", (int)tlen,
                 item);
        snprintf(cfg->pool[cfg->n_pool].tariff, sizeof(cfg->pool[0].tariff), "%s", tariff);
        snprintf(cfg->pool[cfg->n_pool].isolation, sizeof(cfg->pool[0].isolation), "%s", iso);
        cfg->pool[cfg->n_pool++].count = n;
    }
    return 0;
}

/* What no one row can check: settings that bound each other, and names that must exist. */
static int check_across(brig_config *cfg, brig_error **err)
{
    if (cfg->idle_timeout_default_ms > cfg->idle_timeout_max_ms ||
        cfg->lifetime_default_ms > cfg->lifetime_max_ms)
        return brig_error_set(err, BRIG_E_INVALID, 0, "a default exceeds its maximum");
    if (parse_warm_pool(cfg, err) < 0)
        return -1;
    if (brig_config_tariff(cfg, cfg->default_tariff) == NULL)
        return brig_error_set(err, BRIG_E_INVALID, 0, "default_tariff '%s' is not a tariff",
                              cfg->default_tariff);
    if (cfg->uid_base + cfg->uid_ranges * 65536 > (INT64_C(1) << 32) - 2)
        return brig_error_set(err, BRIG_E_INVALID, 0, "uid_base + uid_ranges * 65536 exceeds 2^32");
    if (cfg->exec_timeout_default_ms > cfg->exec_timeout_max_ms)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "exec_timeout_default exceeds exec_timeout_max");
    /* The pool's reserve for authenticated requests, and a share that fits the whole. */
    if (cfg->max_waiting_connections >= cfg->max_connections)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "max_waiting_connections must be below max_connections (the rest "
                              "is kept for authenticated requests)");
    if (cfg->max_waiting_per_address > cfg->max_waiting_connections)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "max_waiting_per_address exceeds max_waiting_connections");
    if (cfg->max_requests_per_account > cfg->max_connections)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "max_requests_per_account exceeds max_connections");
    if (cfg->output_budget_per_account > cfg->output_budget)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "exec_output_budget_per_account exceeds exec_output_budget");
    return 0;
}

struct ini_ctx {
    brig_config *cfg;
    brig_error **err;
};

static int ini_cb(void *user, const char *section, const char *name, const char *value)
{
    struct ini_ctx *c = user;
    if (strncmp(section, "tariff.", 7) == 0)
        return apply_tariff(c->cfg, section + 7, name, value, c->err) == 0;
    if (strcmp(section, "brigd") != 0)
        return brig_error_set(c->err, BRIG_E_INVALID, 0, "unknown section [%s]", section), 0;
    const setting *s = setting_by_key(name);
    if (s == NULL)
        return brig_error_set(c->err, BRIG_E_INVALID, 0, "unknown setting '%s'", name), 0;
    return apply(c->cfg, s, value, c->err) == 0;
}

/* --config FILE: its settings over the defaults (and under the other flags). */
static int read_file(brig_config *cfg, const char *path, brig_error **err)
{
    struct ini_ctx ctx = {cfg, err};
    int r = ini_parse(path, ini_cb, &ctx);
    if (r == 0)
        return 0;
    if (err && *err)
        brig_error_prefix(err, "%s line %d", path, r);
    else if (r < 0)
        brig_error_set(err, BRIG_E_INVALID, errno, "cannot read config %s", path);
    else
        brig_error_set(err, BRIG_E_INVALID, 0, "%s line %d: syntax error", path, r);
    return -1;
}

/* Directory of the running executable, for defaults next to it. */
static char *exe_dir(void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0)
        return brig_xstrdup(".");
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    return brig_xstrdup(buf);
}

/* Every row's default, and the tariffs small, medium and large. */
static void set_defaults(brig_config *cfg)
{
    static const brig_tariff tariffs[] = {
        {"small", 1, 512, 2048, 10},
        {"medium", 2, 2048, 8192, 40},
        {"large", 4, 8192, 32768, 160},
    };
    _cleanup_free_ char *dir = exe_dir();
    memset(cfg, 0, sizeof(*cfg));
    for (const setting *s = brig_settings; s < brig_settings + brig_settings_len; s++) {
        char **str = (char **)((char *)cfg + s->at);
        if (s->type > T_LIST) {
            if (apply(cfg, s, s->def, NULL) < 0)
                abort(); /* a default out of its own range: the table is wrong */
        } else if (s->def && strncmp(s->def, EXE_DIR, strlen(EXE_DIR)) == 0) {
            *str = brig_asprintf("%s%s", dir, s->def + strlen(EXE_DIR));
        } else if (s->def) {
            *str = brig_xstrdup(s->def);
        }
    }
    memcpy(cfg->tariffs, tariffs, sizeof(tariffs));
    cfg->n_tariffs = (int)BRIG_ARRAY_LEN(tariffs);
    cfg->ready_fd = -1;
}

/* One line of --help: the flag, its help, the key where it is not the flag's name with
 * '_' for '-', and the default. */
static void print_option(FILE *f, const char *flag, const char *metavar, const char *help,
                         const setting *s)
{
    char left[64], key[64];
    snprintf(left, sizeof(left), "%s%s%s", flag, metavar ? " " : "", metavar ? metavar : "");
    snprintf(key, sizeof(key), "%s", flag + 2);
    for (char *k = key; *k; k++)
        *k = *k == '-' ? '_' : *k;
    fprintf(f, "  %-24s %s", left, help);
    if (s && strcmp(s->key, key) != 0)
        fprintf(f, " (key %s; default %s)\n", s->key, s->def);
    else if (s)
        fprintf(f, " (default %s)\n", s->def);
    else
        fputc('\n', f);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: brigd [OPTION]...\n"
               "       brigd --destroy-all [--state-dir DIR] [--config FILE]\n"
               "Runs the brig sandbox daemon.  --destroy-all ends every live sandbox of\n"
               "the state dir (a brigd must not be serving it) and exits.\n\n");
    size_t keys_only = 0;
    for (const setting *s = brig_settings; s < brig_settings + brig_settings_len; s++) {
        if (s->flag)
            print_option(f, s->flag, s->metavar, s->help, s);
        else
            keys_only++;
    }
    for (const struct action *a = actions; a < actions + BRIG_ARRAY_LEN(actions); a++)
        print_option(f, a->flag, a->metavar, a->help, NULL);
    fprintf(f,
            "\nThe settings above are keys of the config file's [brigd] section too (the flag's\n"
            "name with '_' for '-'); %zu more are keys only, and tariffs are [tariff.NAME]\n"
            "sections.  brigd --print-settings lists every setting with its default and range;\n"
            "docs/operations.md explains them.\n",
            keys_only);
}

/* One row of --print-settings: what the table says, and the value brigd would run with. */
static json_t *setting_json(const brig_config *cfg, const setting *s)
{
    const void *slot = (const char *)cfg + s->at;
    json_t *o = json_pack("{s:s, s:s?, s:s, s:s?, s:s}", "key", s->key, "flag", s->flag, "type",
                          type_names[s->type], "default", s->def && *s->def ? s->def : NULL, "help",
                          s->help);
    if (s->type <= T_LIST) {
        const char *v = *(char *const *)slot;
        json_object_set_new(o, "value", v && *v ? json_string(v) : json_null());
        if (s->type == T_ENUM)
            json_object_set_new(o, "choices", json_string(s->choices));
    } else if (s->type == T_RATIO) {
        json_object_set_new(o, "min", json_real(s->ratio_min));
        json_object_set_new(o, "max", json_integer(s->max));
        json_object_set_new(o, "value", json_real(*(const double *)slot));
    } else {
        int64_t v = *(const int64_t *)slot;
        json_object_set_new(o, "min", json_integer(s->min));
        json_object_set_new(o, "max", json_integer(s->max));
        json_object_set_new(o, "value", json_integer(s->type == T_SECONDS ? v / 1000 : v));
    }
    return o;
}

/* --print-settings: {"settings": [rows], "options": [the flags that are no setting]}. */
static void print_settings(const brig_config *cfg, FILE *f)
{
    json_t *rows = json_array(), *opts = json_array();
    for (const setting *s = brig_settings; s < brig_settings + brig_settings_len; s++)
        json_array_append_new(rows, setting_json(cfg, s));
    for (const struct action *a = actions; a < actions + BRIG_ARRAY_LEN(actions); a++)
        json_array_append_new(opts, json_pack("{s:s, s:s?, s:s}", "flag", a->flag, "metavar",
                                              a->metavar, "help", a->help));
    json_t *all = json_pack("{s:o, s:o}", "settings", rows, "options", opts);
    json_dumpf(all, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    fputc('\n', f);
    json_decref(all);
}

/* getopt's table: the rows with a flag, then the actions. */
static const struct option *long_options(void)
{
    static struct option opts[BRIG_SETTINGS_MAX + BRIG_ARRAY_LEN(actions) + 1];
    size_t n = 0;
    for (size_t i = 0; i < brig_settings_len; i++)
        if (brig_settings[i].flag)
            opts[n++] = (struct option){brig_settings[i].flag + 2, required_argument, NULL,
                                        A_SETTING + (int)i};
    for (size_t i = 0; i < BRIG_ARRAY_LEN(actions); i++)
        opts[n++] = (struct option){actions[i].flag + 2,
                                    actions[i].metavar ? required_argument : no_argument, NULL,
                                    actions[i].id};
    opts[n] = (struct option){NULL, 0, NULL, 0};
    return opts;
}

/* The flags over the file: every setting's flag, and --ready-fd. */
static int apply_flags(brig_config *cfg, int argc, char **argv, brig_error **err)
{
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", long_options(), NULL)) != -1) {
        int64_t fd;
        if (c == A_READY_FD) {
            if (parse_int(optarg, 0, INT_MAX, &fd) < 0)
                return brig_error_set(err, BRIG_E_INVALID, 0, "--ready-fd: bad descriptor");
            cfg->ready_fd = (int)fd;
        } else if (c >= A_SETTING && apply(cfg, &brig_settings[c - A_SETTING], optarg, err) < 0) {
            return -1;
        }
    }
    return 0;
}

int brig_config_load(brig_config *cfg, int argc, char **argv, brig_error **err)
{
    set_defaults(cfg);
    /* Pass 1: --config, and what answers at once; the file goes under the flags. */
    optind = 1;
    opterr = 0;
    int c, print = 0;
    while ((c = getopt_long(argc, argv, "", long_options(), NULL)) != -1) {
        switch (c) {
        case A_HELP:
            usage(stdout);
            return 1;
        case A_VERSION:
            printf("brigd %s\n", BRIG_VERSION);
            return 1;
        case A_PRINT_SETTINGS:
            print = 1;
            break;
        case A_PRINT_ROUTES:
            cfg->print_routes = 1;
            break;
        case A_DESTROY_ALL:
            cfg->destroy_all = 1;
            break;
        case A_CONFIG:
            if (read_file(cfg, optarg, err) < 0)
                return -1;
            break;
        case '?':
            return brig_error_set(err, BRIG_E_INVALID, 0, "unknown or incomplete option '%s'",
                                  argv[optind - 1]);
        }
    }
    if (optind < argc)
        return brig_error_set(err, BRIG_E_INVALID, 0, "unexpected argument '%s'", argv[optind]);
    if (apply_flags(cfg, argc, argv, err) < 0 || check_across(cfg, err) < 0)
        return -1;
    if (print) {
        print_settings(cfg, stdout);
        return 1;
    }
    return 0;
}

void brig_config_dispose(brig_config *cfg)
{
    for (const setting *s = brig_settings; s < brig_settings + brig_settings_len; s++)
        if (s->type <= T_LIST)
            free(*(char **)((char *)cfg + s->at));
    memset(cfg, 0, sizeof(*cfg));
}
