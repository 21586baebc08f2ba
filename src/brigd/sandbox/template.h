/*
 * template.h - finding the root filesystems sandboxes start from (build.h builds them).
 *
 * A template is templates/<name>/spec plus the shared builder templates/build.
 * Built root filesystems live in the template cache at <cache>/<name>/<key>/rootfs
 * (complete once <cache>/<name>/<key>/ok exists), where key is the first 16 hex
 * digits of SHA-256(spec bytes, NUL, builder bytes): editing either makes a new
 * key, so a stale rootfs is never used.  docs/templates.md describes the builder.
 */
#ifndef BRIG_TEMPLATE_H
#define BRIG_TEMPLATE_H

#include <jansson.h>

#include "core/settings.h"
#include "error.h"

typedef struct brig_template {
    char name[64];
    char key[17];
    char build[64]; /* this build of it: key, rootfs inode, ok's mtime (a forced rebuild keeps the
                       key) */
    char *rootfs;   /* owned; absolute */
    int built;      /* rootfs is complete */
} brig_template;

/* Looks template `name` up: BRIG_E_NOT_FOUND for an unknown name. */
int brig_template_lookup(const brig_config *cfg, const char *name, brig_template *out,
                         brig_error **err);
void brig_template_dispose(brig_template *t);

/* {"name","key","built"} for every template in templates_dir. */
json_t *brig_template_list(const brig_config *cfg);
json_t *brig_template_json(const brig_template *t);

#endif
