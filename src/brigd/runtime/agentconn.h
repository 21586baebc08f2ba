/*
 * agentconn.h - the first steps on a new connection to a sandbox's agent, the same for every
 * driver (oci.c over a unix socket, microvm.c over the VMM's forward).
 */
#ifndef BRIG_AGENTCONN_H
#define BRIG_AGENTCONN_H

#include <sys/types.h>

#include "error.h"

/* Bounds fd's sends and receives by timeout_ms (a wedged agent must not hang an API thread)
 * and does the protocol's handshake.  On failure closes fd and returns -1 with a
 * BRIG_E_UNAVAILABLE *err naming sandbox id; else returns fd. */
int brig_agent_handshake(int fd, const char *id, int timeout_ms, brig_error **err);
/* Its first half, for a connection opened ahead of its use (spareconn.h): the same bounds,
 * and our HELLO sent; the agent's answer is read later (brig_proto_client_hello_recv). */
int brig_agent_handshake_begin(int fd, const char *id, int timeout_ms, brig_error **err);
/* Its second half: the agent's answer read (on failure fd is closed, as above). */
int brig_agent_handshake_end(int fd, const char *id, brig_error **err);

/* Waits up to timeout_ms until the process behind pidfd has exited (it may stay a
 * zombie): 0, or -1 when it still runs. */
int brig_pidfd_wait(int pidfd, int timeout_ms);

/* The pid a runtime or a VMM wrote to path (its pid file), or 0 when there is none. */
pid_t brig_pidfile_read(const char *path);

#endif
