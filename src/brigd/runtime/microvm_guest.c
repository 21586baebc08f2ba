/*
 * microvm_guest.c - the agent's `guest_sync` (docs/protocol.md), sent by the microVM driver
 * when a guest comes back from a pause (its clock stood still) or from a memory snapshot (its
 * clock, entropy pool and link are the snapshot's): microvm_internal.h.
 */
#include <arpa/inet.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agentproto.h"
#include "frame.h"
#include "microvm_internal.h"
#include "util.h"

static void fmt_mac(const unsigned char m[6], char out[18])
{
    snprintf(out, 18, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

/* Sends q and reads its answer: 0 on {"type":"ok"}. */
static int ask(int fd, const brig_agent_req *q, brig_error **err)
{
    json_t *msg = brig_agentproto_encode(q);
    int rc = brig_frame_write_json(fd, BRIG_FRAME_CONTROL, msg, err);
    json_decref(msg);
    brig_frame f = {0};
    json_t *ans = NULL;
    if (rc == 0 && brig_frame_read_json(fd, &f, BRIG_FRAME_CONTROL, &ans, err) == 0) {
        if (brig_agentproto_reply_type(ans) != BRIG_REPLY_OK) {
            const char *m = json_string_value(json_object_get(ans, "message"));
            rc = brig_error_set(err, BRIG_E_INTERNAL, 0, "the guest's agent refused %s: %s",
                                brig_agentproto_op_name(q->op), m ? m : "no answer");
        }
    } else {
        rc = -1;
    }
    json_decref(ans);
    brig_frame_dispose(&f);
    return rc;
}

int brig_vm_guest_sync(int fd, const brig_vm_net *net, brig_error **err)
{
    unsigned char raw[32];
    char seed[65], mac[18], ip[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN];
    randombytes_buf(raw, sizeof(raw));
    sodium_bin2hex(seed, sizeof(seed), raw, sizeof(raw));
    sodium_memzero(raw, sizeof(raw));
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    brig_agent_req q = {.op = BRIG_OP_GUEST_SYNC};
    q.u.guest = (brig_guest_req){.realtime_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec,
                                 .seed = seed};
    if (net && net->tap_fd >= 0) {
        fmt_mac(net->mac, mac);
        inet_ntop(AF_INET, &net->addr, ip, sizeof(ip));
        inet_ntop(AF_INET, &net->gw, gw, sizeof(gw));
        q.u.guest.net = true;
        q.u.guest.nic = BRIG_VM_NIC_MAC;
        q.u.guest.mac = mac;
        q.u.guest.ip = ip;
        q.u.guest.gw = gw;
    }
    int rc = ask(fd, &q, err);
    sodium_memzero(seed, sizeof(seed));
    return rc;
}

int brig_vm_fs_freeze(int fd, bool freeze, brig_error **err)
{
    brig_agent_req q = {.op = BRIG_OP_FS_FREEZE, .u.freeze = freeze};
    return ask(fd, &q, err);
}
