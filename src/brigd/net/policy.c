/*
 * policy.c - egress policies: parsing, validation and serialisation, and the
 * copies and normalised CIDR lists the rest of the module works from.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "netshared.h"
#include "util.h"

#define MAX_ITEMS 256

/* A DNS name, optionally with a leading "*." wildcard: labels of [a-z0-9-],
 * 1..63 characters, not starting or ending with '-', total <= 253. */
static bool valid_domain(const char *d)
{
    if (strncmp(d, "*.", 2) == 0)
        d += 2;
    size_t n = strlen(d);
    if (n == 0 || n > 253 || d[n - 1] == '.')
        return false;
    size_t label = 0;
    for (size_t i = 0; i <= n; i++) {
        char c = d[i];
        if (c == '.' || c == '\0') {
            if (label == 0 || label > 63 || d[i - 1] == '-' || d[i - label] == '-')
                return false;
            label = 0;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return false;
        label++;
    }
    return strchr(d, '.') != NULL; /* no bare TLDs */
}

static bool valid_cidr(const char *c)
{
    char addr[64];
    const char *slash = strchr(c, '/');
    size_t alen = slash ? (size_t)(slash - c) : strlen(c);
    if (alen == 0 || alen >= sizeof(addr))
        return false;
    memcpy(addr, c, alen);
    addr[alen] = '\0';
    unsigned char buf[16];
    int max;
    if (inet_pton(AF_INET, addr, buf) == 1)
        max = 32;
    else if (inet_pton(AF_INET6, addr, buf) == 1)
        max = 128;
    else
        return false;
    if (!slash)
        return true;
    char *end = NULL;
    long p = strtol(slash + 1, &end, 10);
    return end != slash + 1 && *end == '\0' && p >= 0 && p <= max;
}

static int strings(json_t *j, const char *what, bool (*ok)(const char *), char ***out, size_t *n,
                   bool lower, brig_error **err)
{
    if (j == NULL)
        return 0;
    if (!json_is_array(j) || json_array_size(j) > MAX_ITEMS)
        return brig_error_set(err, BRIG_E_INVALID, 0, "'%s' must be an array of at most %d strings",
                              what, MAX_ITEMS);
    *out = brig_xcalloc(json_array_size(j) + 1, sizeof(char *));
    size_t i;
    json_t *v;
    json_array_foreach(j, i, v)
    {
        const char *s = json_string_value(v);
        if (s == NULL || strlen(s) > 253)
            return brig_error_set(err, BRIG_E_INVALID, 0, "'%s' must contain strings", what);
        char *c = brig_xstrdup(s);
        for (char *p = c; lower && *p; p++)
            if (*p >= 'A' && *p <= 'Z')
                *p = (char)(*p - 'A' + 'a');
        (*out)[(*n)++] = c;
        if (!ok(c))
            return brig_error_set(err, BRIG_E_INVALID, 0, "'%s' has an invalid entry '%.64s'", what,
                                  s);
    }
    return 0;
}

int brig_egress_from_json(json_t *j, brig_egress *out, brig_error **err)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(j))
        return brig_error_set(err, BRIG_E_INVALID, 0, "'egress' must be an object");
    const char *k;
    json_t *v;
    json_object_foreach(j, k, v)
    {
        if (strcmp(k, "mode") && strcmp(k, "domains") && strcmp(k, "cidrs") && strcmp(k, "ports"))
            return brig_error_set(err, BRIG_E_INVALID, 0, "unknown egress field '%.64s'", k);
    }
    const char *mode = json_string_value(json_object_get(j, "mode"));
    if (mode == NULL)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "egress 'mode' must be \"open\", \"allowlist\" or \"none\"");
    json_t *domains = json_object_get(j, "domains"), *cidrs = json_object_get(j, "cidrs");
    json_t *ports = json_object_get(j, "ports");
    if (strcmp(mode, "open") == 0 || strcmp(mode, "none") == 0) {
        out->mode = mode[0] == 'o' ? BRIG_EGRESS_OPEN : BRIG_EGRESS_NONE;
        if (domains || cidrs || ports)
            return brig_error_set(err, BRIG_E_INVALID, 0,
                                  "domains, cidrs and ports belong to mode \"allowlist\"");
        return 0;
    }
    if (strcmp(mode, "allowlist") != 0)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "egress 'mode' must be \"open\", \"allowlist\" or \"none\"");
    out->mode = BRIG_EGRESS_ALLOWLIST;
    if (strings(domains, "domains", valid_domain, &out->domains, &out->n_domains, true, err) < 0 ||
        strings(cidrs, "cidrs", valid_cidr, &out->cidrs, &out->n_cidrs, false, err) < 0) {
        brig_egress_dispose(out);
        return -1;
    }
    if (ports) {
        if (!json_is_array(ports) || json_array_size(ports) > MAX_ITEMS) {
            brig_egress_dispose(out);
            return brig_error_set(err, BRIG_E_INVALID, 0, "'ports' must be an array of ports");
        }
        out->ports = brig_xcalloc(json_array_size(ports) + 1, sizeof(int));
        size_t i;
        json_array_foreach(ports, i, v)
        {
            json_int_t p = json_integer_value(v);
            if (!json_is_integer(v) || p < 1 || p > 65535) {
                brig_egress_dispose(out);
                return brig_error_set(err, BRIG_E_INVALID, 0, "ports must be integers 1..65535");
            }
            out->ports[out->n_ports++] = (int)p;
        }
    }
    return 0;
}

json_t *brig_egress_to_json(const brig_egress *e)
{
    static const char *const modes[] = {"open", "allowlist", "none"};
    json_t *j = json_pack("{s:s}", "mode", modes[e->mode]);
    if (e->mode != BRIG_EGRESS_ALLOWLIST)
        return j;
    json_t *d = json_array(), *c = json_array(), *p = json_array();
    for (size_t i = 0; i < e->n_domains; i++)
        json_array_append_new(d, json_string(e->domains[i]));
    for (size_t i = 0; i < e->n_cidrs; i++)
        json_array_append_new(c, json_string(e->cidrs[i]));
    for (size_t i = 0; i < e->n_ports; i++)
        json_array_append_new(p, json_integer(e->ports[i]));
    json_object_set_new(j, "domains", d);
    json_object_set_new(j, "cidrs", c);
    json_object_set_new(j, "ports", p);
    return j;
}

void brig_egress_dispose(brig_egress *e)
{
    for (size_t i = 0; i < e->n_domains; i++)
        free(e->domains[i]);
    for (size_t i = 0; i < e->n_cidrs; i++)
        free(e->cidrs[i]);
    free(e->domains);
    free(e->cidrs);
    free(e->ports);
    memset(e, 0, sizeof(*e));
}

void brig_egress_copy(brig_egress *dst, const brig_egress *src)
{
    memset(dst, 0, sizeof(*dst));
    dst->mode = src->mode;
    dst->domains = brig_xcalloc(src->n_domains + 1, sizeof(char *));
    for (size_t i = 0; i < src->n_domains; i++)
        dst->domains[dst->n_domains++] = brig_xstrdup(src->domains[i]);
    dst->cidrs = brig_xcalloc(src->n_cidrs + 1, sizeof(char *));
    for (size_t i = 0; i < src->n_cidrs; i++)
        dst->cidrs[dst->n_cidrs++] = brig_xstrdup(src->cidrs[i]);
    dst->ports = brig_xcalloc(src->n_ports + 1, sizeof(int));
    for (size_t i = 0; i < src->n_ports; i++)
        dst->ports[dst->n_ports++] = src->ports[i];
}

static uint32_t mask_of(int len)
{
    return len == 0 ? 0 : htonl(0xffffffffu << (32 - len));
}

size_t brig_egress_cidrs4(const brig_egress *e, uint32_t **addrs, int **lens)
{
    *addrs = brig_xcalloc(e->n_cidrs + 1, sizeof(uint32_t));
    *lens = brig_xcalloc(e->n_cidrs + 1, sizeof(int));
    size_t n = 0;
    for (size_t i = 0; i < e->n_cidrs; i++) {
        char addr[64];
        const char *c = e->cidrs[i], *slash = strchr(c, '/');
        size_t alen = slash ? (size_t)(slash - c) : strlen(c);
        if (alen >= sizeof(addr))
            continue;
        memcpy(addr, c, alen);
        addr[alen] = '\0';
        uint32_t a;
        if (inet_pton(AF_INET, addr, &a) != 1)
            continue; /* IPv6: sandboxes have no IPv6 route (docs/network.md) */
        int len = slash ? atoi(slash + 1) : 32;
        if (len < 0 || len > 32)
            continue;
        (*addrs)[n] = a & mask_of(len);
        (*lens)[n++] = len;
    }
    /* Drop those inside another (nftables refuses overlapping intervals) and
     * exact repeats (keep the first). */
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool inside = false;
        for (size_t j = 0; j < n && !inside; j++) {
            if (j == i || (*lens)[j] > (*lens)[i])
                continue;
            bool covers = ((*addrs)[i] & mask_of((*lens)[j])) == (*addrs)[j];
            inside = covers && ((*lens)[j] < (*lens)[i] || j < i);
        }
        if (!inside) {
            (*addrs)[k] = (*addrs)[i];
            (*lens)[k++] = (*lens)[i];
        }
    }
    return k;
}
