/*
 * isolation.c - the names of the isolation modes (runtime.h).
 */
#include <string.h>

#include "runtime.h"
#include "util.h"

static const char *const names[BRIG_ISO_COUNT] = {"container", "gvisor", "microvm"};

const char *brig_isolation_name(brig_isolation iso)
{
    return (unsigned)iso < BRIG_ARRAY_LEN(names) ? names[iso] : "?";
}

int brig_isolation_parse(const char *name)
{
    for (size_t i = 0; i < BRIG_ARRAY_LEN(names); i++)
        if (name && strcmp(names[i], name) == 0)
            return (int)i;
    return -1;
}
