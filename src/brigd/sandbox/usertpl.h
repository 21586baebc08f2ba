/*
 * usertpl.h - templates declared by users (docs/templates.md, "Templates declared by
 * users"): a spec (JSON), validated and reduced to its canonical form, whose key is
 * SHA-256(canonical spec, NUL, the parent's key): the same spec on the same parent is the
 * same template, built once.  An account's templates are named name:tag (tag "latest"
 * unless given); their layers live under <state>/templates/<account>/<key>/rootfs (a full
 * root filesystem, the parent's files hard-linked, complete once ok exists beside it).
 * Another account never sees them: every lookup is by the caller's account.
 *
 * usertpl_build.c builds them (in a sandbox of the parent); usertpl_start.c starts a
 * sandbox's start command and waits for its ready check.
 */
#ifndef BRIG_USERTPL_H
#define BRIG_USERTPL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "server.h"
#include "store/store.h"
#include "template.h"

#define BRIG_UTPL_FILES_MAX    64
#define BRIG_UTPL_STEPS_MAX    64
#define BRIG_UTPL_PACKAGES_MAX 100
#define BRIG_UTPL_READY_MS     (60LL * 1000) /* the ready check's default time limit */

#define BRIG_UTPL_FETCH_MAX (64LL << 20) /* bytes a file fetched from a sandbox may have */

/* A file of the spec: uploaded (content_b64), or fetched from a sandbox of the account
 * (from_sandbox, source: its bytes are read at the build's start, usertpl_build.c). */
typedef struct brig_utpl_file {
    char *path;
    int mode; /* -1: not given (a fetched file keeps its source's) */
    uint8_t *data;
    size_t len;
    char *from_sandbox, *source; /* NULL for an uploaded file */
    json_t *canon;               /* its entry of the canonical spec (borrowed) */
} brig_utpl_file;

/* A parsed, valid spec (brig_utpl_spec_dispose). */
typedef struct brig_utpl_spec {
    char name[40], tag[32];
    char from[80];         /* "base", "minimal" or "name:tag" of the account */
    char isolation[16];    /* the build sandbox's: "container", "gvisor"; "": the default */
    json_t *canon;         /* the canonical spec (owned): files by path, mode and sha256 */
    brig_utpl_file *files; /* n_files, with their bytes */
    size_t n_files;
} brig_utpl_spec;

/* What a sandbox of a user template starts with (brig_utpl_run_dispose). */
typedef struct brig_utpl_run {
    json_t *env;      /* object of strings, or NULL */
    char *workdir;    /* NULL: the agent's default */
    char *start;      /* NULL: none */
    char *ready_cmd;  /* NULL: none */
    int ready_port;   /* 0: none */
    int64_t ready_ms; /* the ready check's time limit */
} brig_utpl_run;

int brig_utpl_spec_parse(const brig_config *cfg, json_t *body, brig_utpl_spec *out,
                         brig_error **err);
void brig_utpl_spec_dispose(brig_utpl_spec *s);
/* Sets f's "sha256" and "mode" in its canonical entry (once its bytes are known). */
void brig_utpl_file_hash(brig_utpl_file *f);
/* The run-time part of a canonical spec. */
void brig_utpl_run_of(const json_t *canon, brig_utpl_run *out);
void brig_utpl_run_dispose(brig_utpl_run *r);

/* Splits "name[:tag]" (tag "latest" when absent); -1 when it is no valid reference. */
int brig_utpl_ref(const char *ref, char name[40], char tag[32]);

/* The account's template ref: *t as template.h's lookup fills it (name "name:tag", key,
 * rootfs, built) and, when run is not NULL, what its sandboxes start with.
 * BRIG_E_NOT_FOUND when the account has none of that name (another's never counts). */
int brig_utpl_lookup(brigd *d, const char *account_id, const char *ref, brig_template *t,
                     brig_utpl_run *run, brig_error **err);

/* The workdir of the account's template ref while its key is still `key` (a sandbox
 * re-attached after a restart), into buf; "" otherwise. */
void brig_utpl_workdir(brigd *d, const char *account_id, const char *ref, const char *key,
                       char *buf, size_t n);

/* The account's row of ref (store.h; brig_utpl_row_dispose): 1, 0 when it has none (or
 * ref is no valid reference), -1. */
int brig_utpl_row_get(brigd *d, const char *account_id, const char *ref, brig_utpl_row *t,
                      brig_error **err);

/* Where the account's layer `key` lives (caller frees). */
char *brig_utpl_dir(brigd *d, const char *account_id, const char *key);

/* GET /v1/templates: the built-in ones and the account's. */
json_t *brig_utpl_list(brigd *d, const char *account_id);
/* GET /v1/templates/{name[:tag]}: the account's (with its spec), or a built-in one. */
int brig_utpl_get(brigd *d, const char *account_id, const char *ref, json_t **out,
                  brig_error **err);
/* Its build's steps (GET .../log). */
int brig_utpl_log(brigd *d, const char *account_id, const char *ref, json_t **out,
                  brig_error **err);
#endif
