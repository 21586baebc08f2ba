/*
 * client.h - the CLI's HTTP client for brigd's REST API (libcurl + jansson).
 *
 * One brig_client wraps one curl easy handle, so connections are reused from
 * call to call.  Every call renders its failures into the brig_error, ready for
 * the CLI to print after "brig: ":
 *   - transport failures: "cannot reach brigd at <url>: <curl error>"
 *   - non-2xx answers:    "<server message> (HTTP <status> <code>)", with the
 *     error kind taken from the JSON error code (brig_error_kind_from_code).
 * Paths handed to the calls start with '/' and are already escaped: build them
 * with brig_client_escape().  Not thread-safe (one handle, one caller).
 */
#ifndef BRIG_CLI_CLIENT_H
#define BRIG_CLI_CLIENT_H

#include <signal.h>
#include <stdint.h>

#include <jansson.h>

#include "error.h"

typedef struct brig_client brig_client;

/* Creates a client for base_url (trailing slashes dropped).  api_key may be NULL:
 * requests then carry no Authorization header (enough for /healthz).  Both
 * strings are copied.  Call curl_global_init() first. */
brig_client *brig_client_new(const char *base_url, const char *api_key);
void brig_client_free(brig_client *c);

/* The base URL the client talks to (owned by the client). */
const char *brig_client_url(const brig_client *c);

/* While flag is non-NULL, a transfer in progress is aborted (within about a
 * second, from curl's progress callback) as soon as *flag becomes non-zero; the
 * call then fails with errnum EINTR.  NULL (the default) makes transfers
 * uninterruptible.  The flag is not owned; a signal handler may set it. */
void brig_client_set_interrupt(brig_client *c, volatile sig_atomic_t *flag);

/* Returns s percent-encoded for a URL path segment or query value (every byte
 * but [A-Za-z0-9._~-] escaped).  Caller frees. */
char *brig_client_escape(const char *s);

/* Sends method to path with `body` as JSON (NULL: no body; not consumed) and
 * waits at most timeout_ms (0: no limit) for the whole exchange.  On a 2xx
 * answer returns the HTTP status and sets *out (if out) to the parsed body, or to
 * NULL when the body is empty (204); the caller owns it (json_decref).  A body
 * that is not JSON is an error.  Returns -1 with *err set otherwise. */
int brig_client_call(brig_client *c, const char *method, const char *path, json_t *body,
                     long timeout_ms, json_t **out, brig_error **err);

/* PUTs the next `size` bytes of fd (read sequentially, streamed) as the raw body.
 * Returns the 2xx status, or -1 with *err set. */
int brig_client_put_file(brig_client *c, const char *path, int fd, int64_t size, brig_error **err);

/* GETs path and streams a 2xx body into fd.  The status is checked before the
 * first byte is written: a non-2xx body is never written to fd (it becomes the
 * error message).  Returns the 2xx status, or -1 with *err set; on failure fd
 * may hold a partial body, which the caller discards. */
int brig_client_get_file(brig_client *c, const char *path, int fd, brig_error **err);

#endif
