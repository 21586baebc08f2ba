/*
 * oci_spec.h - the OCI runtime spec (config.json) of a sandbox: namespaces,
 * mounts, capabilities, cgroup resources, masked paths, seccomp.  Why each
 * choice is made is in docs/security.md.  Pure: builds JSON, touches nothing.
 */
#ifndef BRIG_OCI_SPEC_H
#define BRIG_OCI_SPEC_H

#include <jansson.h>
#include <stdint.h>

#include "cgroup.h"
#include "runtime.h"

#define BRIG_GVISOR_RUN_DIR    "/.brig/run"
#define BRIG_GVISOR_AGENT_SOCK "/.brig/run/agent.sock"

/* A new config.json object (caller owns it) for spec: the agent as the
 * process (listening on fd 3), the rootfs/ of the bundle as root, the
 * resources the cgroup flavour can bound, a devpts instance of at most pty_max
 * ptys, and the user namespace at path userns (joined rather than made; NULL:
 * the runtime makes one). */
json_t *brig_oci_spec_new(const brig_rt_spec *spec, const brig_cgroup_ops *cgroup, int64_t pty_max,
                          const char *userns);

/* The same for isolation gvisor: gVisor's kernel is the boundary (docs/security.md),
 * so no user namespace (runsc runs its sandbox as an unprivileged host user itself)
 * and no seccomp list of ours (runsc filters the sentry's own syscalls); the network
 * namespace at path netns, attached before start; the agent listening on
 * /.brig/run/agent.sock, a directory bind-mounted from the bundle's run/ (runsc gives
 * a sandbox no listening socket of the host). */
json_t *brig_oci_spec_gvisor(const brig_rt_spec *spec, const brig_cgroup_ops *cgroup,
                             int64_t pty_max, const char *netns);

#endif
