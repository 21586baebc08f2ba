/*
 * seccomp.h - the system-call allow-list every sandbox runs under (OCI
 * "linux.seccomp").  docs/security.md lists what it refuses and why.
 */
#ifndef BRIG_SECCOMP_H
#define BRIG_SECCOMP_H

#include <jansson.h>

#include "error.h"

/* A new OCI seccomp object (caller owns it). */
json_t *brig_seccomp_profile(void);

/* The profile compiled once into a classic BPF program (struct sock_filter[]) that
 * the agent loads itself (`--seccomp-fd`): runc would compile the same rules with
 * libseccomp at every start, about 7 ms of each create (docs/benchmarks.md).  The
 * program is a sealed memfd: read-only, read with pread by any number of sandboxes.
 * Syscalls newer than every name of the profile answer ENOSYS, as runc's own stub
 * makes them; a foreign ABI kills the process.  0 and *fd (the caller's), or -1. */
int brig_seccomp_compile(const json_t *profile, int *fd, brig_error **err);

#endif
