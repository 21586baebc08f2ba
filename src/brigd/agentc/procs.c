/*
 * procs.c - the agent client's proc_* operations (see agentc.h): processes started before,
 * reached by pid.
 */
#include "agentc_internal.h"

#define PROC_WAIT_MARGIN_MS 30000 /* proc_wait: how much longer than its wait we wait */
#define PROC_OUTPUT_MS      30000 /* proc_output: for its first message */

static brig_agent_req proc_req(brig_agent_op op, int pid)
{
    return (brig_agent_req){.op = op, .u.proc = {.op = (int32_t)op, .pid = pid}};
}

/* A request answered with a process object: *proc, without its "type". */
static int call_process(int fd, const brig_agent_req *q, json_t **proc, brig_error **err)
{
    *proc = NULL;
    if (brig_agentc_call(fd, q, proc, err) < 0)
        return -1;
    json_object_del(*proc, "type");
    return 0;
}

int brig_agentc_proc_list(int fd, json_t **procs, brig_error **err)
{
    brig_agent_req q = proc_req(BRIG_OP_PROC_LIST, 0);
    json_t *reply = NULL;
    *procs = NULL;
    if (brig_agentc_call(fd, &q, &reply, err) < 0)
        return -1;
    json_t *list = json_object_get(reply, "processes");
    *procs = json_is_array(list) ? json_incref(list) : json_array();
    json_decref(reply);
    return 0;
}

int brig_agentc_proc_get(int fd, int pid, json_t **proc, brig_error **err)
{
    brig_agent_req q = proc_req(BRIG_OP_PROC_GET, pid);
    return call_process(fd, &q, proc, err);
}

int brig_agentc_proc_wait(int fd, int pid, int64_t timeout_ms, json_t **proc, brig_error **err)
{
    brig_agent_req q = proc_req(BRIG_OP_PROC_WAIT, pid);
    q.u.proc.timeout_ms = timeout_ms;
    brig_agentc_set_timeout(fd, timeout_ms ? timeout_ms + PROC_WAIT_MARGIN_MS : 0);
    return call_process(fd, &q, proc, err);
}

int brig_agentc_proc_signal(int fd, int pid, int sig, brig_error **err)
{
    brig_agent_req q = proc_req(BRIG_OP_PROC_SIGNAL, pid);
    q.u.proc.signal = sig;
    return brig_agentc_call(fd, &q, NULL, err);
}

int brig_agentc_proc_resize(int fd, int pid, int cols, int rows, brig_error **err)
{
    brig_agent_req q = proc_req(BRIG_OP_PROC_RESIZE, pid);
    q.u.proc.cols = (uint16_t)cols;
    q.u.proc.rows = (uint16_t)rows;
    return brig_agentc_call(fd, &q, NULL, err);
}

int brig_agentc_proc_stdin_close(int fd, int pid, brig_error **err)
{
    brig_agent_req q = proc_req(BRIG_OP_PROC_STDIN_CLOSE, pid);
    return brig_agentc_call(fd, &q, NULL, err);
}

int brig_agentc_proc_stdin_begin(int fd, int pid, brig_error **err)
{
    brig_agent_req q = proc_req(BRIG_OP_PROC_STDIN, pid);
    return brig_agentc_stream_begin(fd, &q, err);
}

int brig_agentc_proc_output(int fd, int pid, bool follow, brig_error **err)
{
    brig_agent_req q = proc_req(BRIG_OP_PROC_OUTPUT, pid);
    q.u.proc.follow = follow;
    if (brig_agentc_send(fd, &q, err) < 0)
        return -1;
    brig_agentc_set_timeout(fd, PROC_OUTPUT_MS);
    return 0;
}
