/*
 * fuzz_brigd.c - libFuzzer target for brigd's side of the agent protocol: the decoder of
 * what an agent (possibly a compromised sandbox) sends back (src/brigd/agentc/agentc.c).
 *
 * The input is the agent's side of a socketpair: it is written into one end, which is then
 * shut for writing, and brigd's functions run on the other end.  Byte 0 picks the call:
 * brig_agentc_exec (foreground or background), brig_agentc_read_begin + read_chunk, or
 * brig_agentc_call.  Inputs stay at most 64 KiB, so the socket buffer holds them whole.
 */
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentc/agentc.h"

#define MAX_INPUT (64u << 10)

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
    switch (data[0] % 4) {
    case 0:
    case 1: {
        brig_exec_req req = {.cmd = "true", .background = data[0] % 4 == 1};
        brig_exec_result res;
        if (brig_agentc_exec(sp[0], &req, 1024, NULL, &res, &err) == 0)
            brig_exec_result_dispose(&res);
        break;
    }
    case 2: {
        int64_t fsize = 0;
        int mode = 0;
        if (brig_agentc_read_begin(sp[0], "/x", &fsize, &mode, &err) == 0) {
            brig_frame f = {0};
            while (brig_agentc_read_chunk(sp[0], &f, &err) == 1)
                ;
            brig_frame_dispose(&f);
        }
        break;
    }
    default: {
        json_t *req = json_pack("{s:s}", "op", "ping"), *reply = NULL;
        if (brig_agentc_call(sp[0], req, &reply, &err) == 0)
            json_decref(reply);
        json_decref(req);
        break;
    }
    }
    brig_error_clear(&err);
out:
    close(sp[0]);
    close(sp[1]);
    return 0;
}
