/*
 * seccomp.h - the system-call allow-list every sandbox runs under (OCI
 * "linux.seccomp").  docs/security.md lists what it refuses and why.
 */
#ifndef BRIG_SECCOMP_H
#define BRIG_SECCOMP_H

#include <jansson.h>

/* A new OCI seccomp object (caller owns it). */
json_t *brig_seccomp_profile(void);

#endif
