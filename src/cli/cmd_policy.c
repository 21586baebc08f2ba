/*
 * cmd_policy.c - a project's egress policy (docs/network.md; changing it needs an admin key):
 * `brig policy show`, `policy mode open|allowlist|none`, and `policy add|remove ENTRY...` on the
 * allowlist, for --project (default: the account's default project).  brigd applies a change to
 * the project's running sandboxes at once.
 *
 * brigd takes the whole policy in one PATCH, so add and remove read it, change the lists and
 * send it back: two admins editing one allowlist at the same moment may lose one's change.
 * An ENTRY is a port when it is a number, an address or CIDR block when it has a '/' or a ':'
 * or is an IPv4 address, and a domain otherwise; brigd checks each.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "util.h"

/* The list ENTRY belongs in ("domains", "cidrs" or "ports") and its JSON value, into *v. */
static const char *classify(const cli_args *a, const char *entry, json_t **v)
{
    struct in_addr in;
    size_t digits = strspn(entry, "0123456789");
    if (*entry != '\0' && entry[digits] == '\0') {
        long port = digits <= 5 ? strtol(entry, NULL, 10) : 0;
        if (port < 1 || port > 65535) {
            cli_usage_error(a->cmd, "port %s: not in 1..65535", entry);
            return NULL;
        }
        *v = json_integer(port);
        return "ports";
    }
    if (*entry == '\0') {
        cli_usage_error(a->cmd, "empty ENTRY");
        return NULL;
    }
    *v = json_string(entry);
    if (*v == NULL) {
        cli_usage_error(a->cmd, "ENTRY is not UTF-8 text");
        return NULL;
    }
    if (strchr(entry, '/') || strchr(entry, ':') || inet_pton(AF_INET, entry, &in) == 1)
        return "cidrs";
    return "domains";
}

/* The project's egress policy (a copy) into *egress, and its path into *path. */
static int load(const cli_args *a, char **path, json_t **egress)
{
    return cli_project_read(a, "", "egress", JSON_OBJECT, "the project has no egress policy", path,
                            egress);
}

/* Sends egress (consumed) as the project's policy and prints the policy brigd kept. */
static int store(const cli_args *a, const char *path, json_t *egress)
{
    json_t *p = NULL;
    int rc = cli_call("PATCH", path, json_pack("{s:o}", "egress", egress), NULL, &p);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON))
        cli_print_json(json_object_get(p, "egress"));
    else
        cli_print_egress(json_object_get(p, "egress"));
    json_decref(p);
    return CLI_EXIT_OK;
}

static int policy_show(const cli_args *a)
{
    _cleanup_free_ char *path = NULL;
    json_t *egress = NULL;
    int rc = load(a, &path, &egress);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (cli_opt_has(a, OPT_JSON))
        cli_print_json(egress);
    else
        cli_print_egress(egress);
    json_decref(egress);
    return CLI_EXIT_OK;
}

static int policy_mode(const cli_args *a)
{
    const char *mode = a->pos[0];
    if (strcmp(mode, "open") != 0 && strcmp(mode, "allowlist") != 0 && strcmp(mode, "none") != 0)
        return cli_usage_error(a->cmd, "MODE: open, allowlist or none, not '%s'", mode);
    _cleanup_free_ char *path = NULL;
    json_t *egress = NULL;
    int rc = load(a, &path, &egress);
    if (rc != CLI_EXIT_OK)
        return rc;
    /* an allowlist keeps its lists; any other change starts from none */
    if (strcmp(cli_str(egress, "mode", ""), mode) != 0) {
        json_decref(egress);
        egress = json_pack("{s:s}", "mode", mode);
    }
    return store(a, path, egress);
}

/* Index of v in array list, or -1. */
static long find(json_t *list, json_t *v)
{
    for (size_t i = 0; i < json_array_size(list); i++)
        if (json_equal(json_array_get(list, i), v))
            return (long)i;
    return -1;
}

/* policy add (add) and policy remove (!add): each ENTRY into or out of its list. */
static int edit(const cli_args *a, bool add)
{
    _cleanup_free_ char *path = NULL;
    json_t *egress = NULL;
    int rc = load(a, &path, &egress);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (strcmp(cli_str(egress, "mode", ""), "allowlist") != 0) {
        fprintf(stderr,
                "brig: the project's egress mode is %s, not allowlist: set it first with "
                "'brig policy mode allowlist'\n",
                cli_str(egress, "mode", "unknown"));
        json_decref(egress);
        return CLI_EXIT_FAIL;
    }
    for (int i = 0; i < a->npos && rc == CLI_EXIT_OK; i++) {
        json_t *v = NULL;
        const char *field = classify(a, a->pos[i], &v);
        if (field == NULL) {
            rc = CLI_EXIT_USAGE;
            break;
        }
        json_t *list = json_object_get(egress, field);
        if (!json_is_array(list)) {
            list = json_array();
            json_object_set_new(egress, field, list);
        }
        long at = find(list, v);
        if (add && at < 0) {
            json_array_append(list, v);
        } else if (!add && at >= 0) {
            json_array_remove(list, (size_t)at);
        } else if (!add) {
            fputs("brig: ", stderr);
            cli_print_clean(stderr, a->pos[i]);
            fprintf(stderr, " is not in the allowlist's %s: nothing changed\n", field);
            rc = CLI_EXIT_FAIL;
        }
        json_decref(v);
    }
    if (rc != CLI_EXIT_OK) {
        json_decref(egress);
        return rc;
    }
    return store(a, path, egress);
}

static int policy_add(const cli_args *a)
{
    return edit(a, true);
}

static int policy_remove(const cli_args *a)
{
    return edit(a, false);
}

static const int opts_show[] = {OPT_PROJECT, OPT_JSON, 0};

#define ENTRY_DETAILS                                                                              \
    "ENTRY: a domain (api.example.com, or *.example.com for the names below it), an\n"             \
    "address or CIDR block (203.0.113.7, 198.51.100.0/24), or a port (443: once any\n"             \
    "port is listed, only listed ports may be reached).  The mode must be allowlist.\n"

const cli_cmd cli_policy_commands[] = {
    {"policy show", policy_show, "[--project ID] [--json]", "a project's egress policy", NULL,
     opts_show, 0, 0, CLI_REST_NONE},
    {"policy mode", policy_mode, "[--project ID] [--json] open|allowlist|none",
     "set a project's egress mode (an admin key)",
     "open: anything but the always-denied ranges; none: nothing; allowlist: only the\n"
     "listed domains, addresses and ports (an empty list at first: see policy add).\n"
     "Running sandboxes of the project get the new policy at once.\n",
     opts_show, 1, 1, CLI_REST_NONE},
    {"policy add", policy_add, "[--project ID] [--json] ENTRY...",
     "add domains, CIDRs or ports to a project's allowlist (an admin key)", ENTRY_DETAILS,
     opts_show, 1, -1, CLI_REST_NONE},
    {"policy remove", policy_remove, "[--project ID] [--json] ENTRY...",
     "remove entries from a project's allowlist (an admin key)", ENTRY_DETAILS, opts_show, 1, -1,
     CLI_REST_NONE},
    {0},
};
