/*
 * test_net_harness.c - drives src/brigd/net/ directly for
 * tests/integration/test_network.py (needs root; not a unit test).  Reads one
 * command a line on stdin and answers one JSON line on stdout:
 *
 *   attach ID NETNS_PATH POLICY_JSON   -> {"ok":true,"resolv_conf":"...","ms":0.9}
 *   reattach ID NETNS_PATH POLICY_JSON -> {"ok":true}
 *   policy ID POLICY_JSON              -> {"ok":true,"ms":0.3}
 *   log ID                             -> {"ok":true,"log":[...]}
 *   detach ID                          -> {"ok":true}
 *   cleanup [LIVE_ID...]               -> {"ok":true}
 *   restart                            -> {"ok":true}   (brig_net_free + brig_net_new, handles
 * lost) quit
 *
 * Environment: BRIG_NET_STATE (state dir, default /tmp), BRIG_NET_POOL
 * (default 10.201.0.0/16), BRIG_DNS_UPSTREAM (read by the module).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "net/net.h"

#define MAX_SB 256

static struct {
    char *id;
    brig_net_sandbox *s;
} sbs[MAX_SB];

static brig_net *net;
static brig_net_config cfg;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void reply(json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    printf("%s\n", s);
    fflush(stdout);
    free(s);
    json_decref(j);
}

static void fail(brig_error **err)
{
    reply(json_pack("{s:b,s:s}", "ok", 0, "error", *err ? (*err)->msg : "?"));
    brig_error_clear(err);
}

static int find(const char *id)
{
    for (int i = 0; i < MAX_SB; i++)
        if (sbs[i].id && strcmp(sbs[i].id, id) == 0)
            return i;
    return -1;
}

static int slot_free(void)
{
    for (int i = 0; i < MAX_SB; i++)
        if (sbs[i].id == NULL)
            return i;
    return -1;
}

static int parse_policy(const char *text, brig_egress *e, brig_error **err)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (j == NULL)
        return brig_error_set(err, BRIG_E_INVALID, 0, "policy JSON: %s", je.text);
    int rc = brig_egress_from_json(j, e, err);
    json_decref(j);
    return rc;
}

static void cmd_attach(char *args, bool re)
{
    brig_error *err = NULL;
    char *id = strtok(args, " "), *path = strtok(NULL, " "), *pol = strtok(NULL, "");
    if (!id || !path || !pol) {
        brig_error_set(&err, BRIG_E_INVALID, 0, "usage: attach ID NETNS POLICY");
        return fail(&err);
    }
    int k = slot_free();
    brig_egress e;
    if (k < 0 || parse_policy(pol, &e, &err) < 0)
        return fail(&err);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        brig_error_sys(&err, "open %s", path);
        brig_egress_dispose(&e);
        return fail(&err);
    }
    char *resolv = NULL;
    brig_net_sandbox *s = NULL;
    double t0 = now_ms();
    int rc = re ? brig_net_reattach(net, id, fd, &e, &s, &err)
                : brig_net_attach(net, id, fd, &e, &s, &resolv, &err);
    double ms = now_ms() - t0;
    close(fd);
    brig_egress_dispose(&e);
    if (rc < 0)
        return fail(&err);
    sbs[k].id = strdup(id);
    sbs[k].s = s;
    reply(json_pack("{s:b,s:s?,s:f}", "ok", 1, "resolv_conf", resolv, "ms", ms));
    free(resolv);
}

static void cmd_policy(char *args)
{
    brig_error *err = NULL;
    char *id = strtok(args, " "), *pol = strtok(NULL, "");
    int k = id ? find(id) : -1;
    brig_egress e;
    if (k < 0) {
        brig_error_set(&err, BRIG_E_NOT_FOUND, 0, "no sandbox %s", id ? id : "");
        return fail(&err);
    }
    if (!pol || parse_policy(pol, &e, &err) < 0)
        return fail(&err);
    double t0 = now_ms();
    int rc = brig_net_set_policy(net, sbs[k].s, &e, &err);
    double ms = now_ms() - t0;
    brig_egress_dispose(&e);
    if (rc < 0)
        return fail(&err);
    reply(json_pack("{s:b,s:f}", "ok", 1, "ms", ms));
}

static void cmd_detach(char *args, bool log_only)
{
    brig_error *err = NULL;
    char *id = strtok(args, " ");
    int k = id ? find(id) : -1;
    if (k < 0) {
        brig_error_set(&err, BRIG_E_NOT_FOUND, 0, "no sandbox %s", id ? id : "");
        return fail(&err);
    }
    if (log_only) {
        reply(json_pack("{s:b,s:o}", "ok", 1, "log", brig_net_log(net, sbs[k].s)));
        return;
    }
    double t0 = now_ms();
    brig_net_detach(net, sbs[k].s);
    double ms = now_ms() - t0;
    free(sbs[k].id);
    sbs[k].id = NULL;
    reply(json_pack("{s:b,s:f}", "ok", 1, "ms", ms));
}

static void cmd_cleanup(char *args)
{
    char *ids[MAX_SB];
    size_t n = 0;
    for (char *t = strtok(args, " "); t && n < MAX_SB; t = strtok(NULL, " "))
        ids[n++] = t;
    brig_net_cleanup(net, ids, n);
    reply(json_pack("{s:b}", "ok", 1));
}

static int start(brig_error **err)
{
    return brig_net_new(&cfg, &net, err);
}

int main(void)
{
    brig_log_init("test_net_harness", BRIG_LOG_INFO);
    cfg.state_dir = getenv("BRIG_NET_STATE") ? getenv("BRIG_NET_STATE") : "/tmp";
    cfg.pool = getenv("BRIG_NET_POOL") ? getenv("BRIG_NET_POOL") : "10.201.0.0/16";
    brig_error *err = NULL;
    if (start(&err) < 0) {
        fail(&err);
        return 1;
    }
    reply(json_pack("{s:b}", "ok", 1));
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) {
        line[strcspn(line, "\n")] = '\0';
        char *rest = strchr(line, ' ');
        if (rest)
            *rest++ = '\0';
        else
            rest = line + strlen(line);
        if (strcmp(line, "attach") == 0) {
            cmd_attach(rest, false);
        } else if (strcmp(line, "reattach") == 0) {
            cmd_attach(rest, true);
        } else if (strcmp(line, "policy") == 0) {
            cmd_policy(rest);
        } else if (strcmp(line, "log") == 0) {
            cmd_detach(rest, true);
        } else if (strcmp(line, "detach") == 0) {
            cmd_detach(rest, false);
        } else if (strcmp(line, "cleanup") == 0) {
            cmd_cleanup(rest);
        } else if (strcmp(line, "restart") == 0) {
            brig_net_free(net);
            for (int i = 0; i < MAX_SB; i++) {
                free(sbs[i].id);
                sbs[i].id = NULL;
            }
            if (start(&err) < 0)
                fail(&err);
            else
                reply(json_pack("{s:b}", "ok", 1));
        } else if (strcmp(line, "quit") == 0) {
            break;
        } else {
            brig_error_set(&err, BRIG_E_INVALID, 0, "unknown command '%s'", line);
            fail(&err);
        }
    }
    free(line);
    for (int i = 0; i < MAX_SB; i++)
        free(sbs[i].id);
    brig_net_free(net);
    return 0;
}
