/*
 * fuzz_brigd.c - libFuzzer target for brigd's side of the agent protocol: the typed client's
 * decoding of what an agent (possibly a compromised sandbox) sends back (src/brigd/agentc/).
 *
 * The input is the agent's side of a socketpair: it is written into one end, which is then
 * shut for writing, and brigd's functions run on the other end.  Byte 0 picks the call (% 16):
 * 0 exec, 1 background exec, 2 read_file, 3 ping, 4 stat, 5 list_dir, 6 proc_list, 7 proc_get,
 * 8 proc_wait, 9 tar_create, 10 write_file, 11 proc_output, 12 remove, 13 mkdir,
 * 14 proc_signal, 15 a streamed exec (exec_start, then every event).  Inputs stay at most
 * 64 KiB, so the socket buffer holds them whole.
 */
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentc/agentc.h"
#include "agentc/agentc_internal.h"

#define MAX_INPUT (64u << 10)

/* Reads a stream's events until it ends or fails. */
static void drain(int fd, brig_error **err)
{
    brig_frame f = {0};
    for (int i = 0; i < 4096; i++) {
        brig_agent_event ev;
        json_t *msg = NULL;
        if (brig_agentc_next(fd, &f, &ev, &msg, err) < 0)
            break;
        json_decref(msg);
    }
    brig_frame_dispose(&f);
}

/* A read stream: read_file or tar_create. */
static void read_stream(int fd, int tar, brig_error **err)
{
    int64_t size = 0;
    int mode = 0;
    if ((tar ? brig_agentc_tar_create_begin(fd, "/d", err)
             : brig_agentc_read_begin(fd, "/x", &size, &mode, err)) < 0)
        return;
    brig_frame f = {0};
    int r;
    while ((r = brig_agentc_read_chunk(fd, &f, err)) == 1)
        ;
    if (r == 0 && tar)
        brig_agentc_tar_create_end(fd, &f, err);
    brig_frame_dispose(&f);
}

static void exec_call(int fd, int how, brig_error **err)
{
    brig_exec_req req = {.cmd = "true", .background = how == 1};
    if (how == 2) {
        brig_exec_call call;
        if (brig_agentc_exec_start(&call, fd, &req, err) == 0)
            drain(fd, err);
        brig_agentc_exec_finish(&call);
        return;
    }
    brig_exec_result res;
    if (brig_agentc_exec(fd, &req, 1024, NULL, &res, err) == 0)
        brig_exec_result_dispose(&res);
}

static void call(int fd, int which, brig_error **err)
{
    json_t *j = NULL;
    int64_t n = 0;
    brig_agent_req ping = {.op = BRIG_OP_PING};
    switch (which) {
    case 0:
    case 1:
        exec_call(fd, which, err);
        break;
    case 2:
        read_stream(fd, 0, err);
        break;
    case 3:
        brig_agentc_call(fd, &ping, &j, err);
        break;
    case 4:
        brig_agentc_stat(fd, "/x", &j, err);
        break;
    case 5:
        brig_agentc_list_dir(fd, "/d", &j, err);
        break;
    case 6:
        brig_agentc_proc_list(fd, &j, err);
        break;
    case 7:
        brig_agentc_proc_get(fd, 42, &j, err);
        break;
    case 8:
        brig_agentc_proc_wait(fd, 42, 1000, &j, err);
        break;
    case 9:
        read_stream(fd, 1, err);
        break;
    case 10:
        if (brig_agentc_write_begin(fd, "/x", 0600, err) == 0 &&
            brig_agentc_write_chunk(fd, "abc", 3, err) == 0)
            brig_agentc_write_end(fd, &n, err);
        break;
    case 11:
        if (brig_agentc_proc_output(fd, 42, true, err) == 0)
            drain(fd, err);
        break;
    case 12:
        brig_agentc_remove(fd, "/x", true, err);
        break;
    case 13:
        brig_agentc_mkdir(fd, "/d", 0755, true, err);
        break;
    case 14:
        brig_agentc_proc_signal(fd, 42, 15, err);
        break;
    default:
        exec_call(fd, 2, err);
        break;
    }
    json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > MAX_INPUT)
        return 0;
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
        return 0;
    int big = 4 * MAX_INPUT;
    setsockopt(sp[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    setsockopt(sp[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
    if (size > 1 && write(sp[1], data + 1, size - 1) != (ssize_t)(size - 1))
        goto out;
    shutdown(sp[1], SHUT_WR);

    brig_error *err = NULL;
    call(sp[0], data[0] % 16, &err);
    brig_error_clear(&err);
out:
    close(sp[0]);
    close(sp[1]);
    return 0;
}
