/*
 * procops.c - the handler's half of the proc_* operations.
 *
 * A handler does not know the processes: their supervisors do (super.c), and PID 1 knows
 * which supervisor has which pid (handlers.c).  So a proc_* request other than proc_list is
 * handed on: the handler sends ROUTE with the client's socket to PID 1, which passes both to
 * the supervisor; the supervisor answers the client directly.  After a successful hand-off
 * the handler must not touch the connection any more (it is shared until we exit).
 *
 * proc_list asks PID 1 for the pids, then each supervisor for its process object, through
 * a socketpair routed like a client connection; processes that vanish meanwhile are left out.
 */
#include "agent.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "util.h"

#define GET_TIMEOUT_S 10 /* how long proc_list waits for one supervisor */

/* Hands fd (with q) to the supervisor of q->pid.  Returns 1 when it took it, 0 when there is
 * no such process, -1 with *err otherwise. */
static int route(brig_agent_conn *c, int fd, const brig_proc_req *q, brig_error **err)
{
    brig_ctl_msg m = {.type = BRIG_CTL_ROUTE, .pid = q->pid, .req = *q};
    brig_ctl_msg ans;
    if (brig_ctl_call(c->ctl, &m, fd, &ans, sizeof(ans), err) < 0)
        return -1;
    if (ans.type == BRIG_CTL_ACK)
        return 1;
    if (ans.type == BRIG_CTL_NOT_FOUND)
        return 0;
    return brig_error_set(err, BRIG_E_INTERNAL, 0, "the supervisor of process %d is busy",
                          (int)q->pid);
}

int brig_agent_proc_route(brig_agent_conn *c, json_t *req, const brig_agent_req *q,
                          brig_error **err)
{
    (void)req;
    int r = route(c, c->fd, &q->u.proc, err);
    if (r < 0)
        return -1;
    if (r == 0)
        return brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no process %d", (int)q->u.proc.pid);
    c->handed_off = true;
    c->replied = true;
    return 0;
}

/* The process object of pid from its supervisor, or NULL when it is gone. */
static json_t *get_one(brig_agent_conn *c, int32_t pid, brig_error **err)
{
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
        brig_error_sys(err, "socketpair");
        return NULL;
    }
    brig_proc_req q = {.op = BRIG_OP_PROC_GET, .pid = pid};
    int r = route(c, sp[1], &q, err);
    close(sp[1]);
    json_t *obj = NULL;
    if (r == 1) {
        struct timeval tv = {.tv_sec = GET_TIMEOUT_S};
        setsockopt(sp[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        brig_frame f = {0};
        if (brig_frame_read_json(sp[0], &f, BRIG_FRAME_CONTROL, &obj, NULL) == 0) {
            if (brig_agentproto_reply_type(obj) != BRIG_REPLY_PROCESS) {
                json_decref(obj);
                obj = NULL;
            } else {
                json_object_del(obj, "type");
            }
        }
        brig_frame_dispose(&f);
    }
    close(sp[0]);
    return obj;
}

int brig_agent_proc_list(brig_agent_conn *c, json_t *req, const brig_agent_req *q, brig_error **err)
{
    (void)req;
    (void)q;
    static brig_ctl_pids ans;
    brig_ctl_msg m = {.type = BRIG_CTL_LIST};
    ssize_t n = brig_ctl_call(c->ctl, &m, -1, &ans, sizeof(ans), err);
    if (n < 0)
        return -1;
    if (ans.type != BRIG_CTL_PIDS || (size_t)n < offsetof(brig_ctl_pids, pids) ||
        ans.n > BRIG_CTL_PIDS_MAX ||
        (size_t)n != offsetof(brig_ctl_pids, pids) + ans.n * sizeof(ans.pids[0]))
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "bad process list from the agent");
    json_t *list = json_array();
    for (uint32_t i = 0; i < ans.n; i++) {
        json_t *obj = get_one(c, ans.pids[i], err);
        if (obj == NULL && err != NULL && *err != NULL) {
            json_decref(list);
            return -1;
        }
        if (obj != NULL)
            json_array_append_new(list, obj);
    }
    c->replied = true;
    return brig_agent_send_json(c,
                                json_pack("{s:s, s:o}", "type",
                                          brig_agentproto_reply_name(BRIG_REPLY_PROCESSES),
                                          "processes", list),
                                err);
}
