/*
 * bootstrap.h - what a first start creates: the operator key and the first
 * account.
 */
#ifndef BRIG_BOOTSTRAP_H
#define BRIG_BOOTSTRAP_H

#include "error.h"
#include "server.h"

/* On first start: the operator key (<state>/operator.key), and, while no API key
 * is in force, the first account ("default") with its default project and admin
 * key (<state>/admin.key, printed once with a quick start).  Both files 0600.
 * Nothing on later starts. */
int brig_bootstrap_run(brigd *d, brig_error **err);

#endif
