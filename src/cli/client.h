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
 *
 * Bodies are never held whole unless the call returns them as JSON: uploads
 * read from a file descriptor as curl asks for bytes, downloads and streams
 * hand each piece on as it arrives.  An error answer (non-2xx) is never handed
 * to a body callback or written to a file: it becomes the error message.
 *
 * brig_async (at the end) runs several requests at once on a curl multi handle
 * while also waiting on the caller's file descriptors: `brig shell` follows a
 * process's output while it sends keystrokes and window sizes.
 */
#ifndef BRIG_CLI_CLIENT_H
#define BRIG_CLI_CLIENT_H

#include <poll.h>
#include <signal.h>
#include <stddef.h>
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

/* While flag is non-NULL, a transfer in progress is aborted as soon as *flag
 * becomes non-zero (a signal interrupts curl's poll(), so within milliseconds;
 * at worst within a second, from curl's progress callback); the call then fails
 * with errnum EINTR.  NULL (the default) makes transfers uninterruptible.  The
 * flag is not owned; a signal handler may set it. */
void brig_client_set_interrupt(brig_client *c, volatile sig_atomic_t *flag);

/* Told how a transfer goes: the bytes received and sent so far and their totals (0 while
 * unknown).  Called from curl's progress callback: as bytes move, and at least once a second. */
typedef void (*brig_progress_fn)(int64_t down, int64_t down_total, int64_t up, int64_t up_total,
                                 void *ctx);

/* While fn is non-NULL, the client's transfers report to it (NULL, the default: none). */
void brig_client_set_progress(brig_client *c, brig_progress_fn fn, void *ctx);

/* Returns s percent-encoded for a URL path segment or query value (every byte
 * but [A-Za-z0-9._~-] escaped).  Caller frees. */
char *brig_client_escape(const char *s);

/* Receives a 2xx body piece by piece as it arrives.  Returns 0 to go on, or -1
 * with *err set to abort the transfer (the call then fails with that error). */
typedef int (*brig_body_fn)(const char *data, size_t n, void *ctx, brig_error **err);

/* Receives each value of an NDJSON answer (borrowed: incref to keep it), in
 * order.  Returns 0 to go on, or -1 with *err set to abort the transfer. */
typedef int (*brig_event_fn)(json_t *event, void *ctx, brig_error **err);

/* Sends method to path with `body` as JSON (NULL: no body; not consumed) and
 * waits at most timeout_ms (0: no limit) for the whole exchange.  On a 2xx
 * answer returns the HTTP status and sets *out (if out) to the parsed body, or to
 * NULL when the body is empty (204); the caller owns it (json_decref).  A body
 * that is not JSON is an error.  Returns -1 with *err set otherwise. */
int brig_client_call(brig_client *c, const char *method, const char *path, json_t *body,
                     long timeout_ms, json_t **out, brig_error **err);

/* POSTs the n bytes at data as a raw application/octet-stream body (with its
 * Content-Length); otherwise like brig_client_call. */
int brig_client_post_bytes(brig_client *c, const char *path, const void *data, size_t n,
                           long timeout_ms, json_t **out, brig_error **err);

/* PUTs the next `size` bytes of fd (read sequentially, streamed) as the raw body.
 * Returns the 2xx status, or -1 with *err set. */
int brig_client_put_file(brig_client *c, const char *path, int fd, int64_t size, brig_error **err);

/* Called when a streamed upload's fd reached EOF, before the body is completed:
 * 0 completes it, -1 with *err set aborts the transfer instead, so the server
 * sees a cut body (brig upload -r: tar failed). */
typedef int (*brig_eof_fn)(void *ctx, brig_error **err);

/* PUTs everything fd yields until EOF as a chunked body of type content_type
 * (its length is not known in advance: a pipe).  eof (may be NULL) decides at
 * EOF whether the body is completed.  Returns the 2xx status, or -1 with *err. */
int brig_client_put_stream(brig_client *c, const char *path, const char *content_type, int fd,
                           brig_eof_fn eof, void *eof_ctx, brig_error **err);

/* GETs path and streams a 2xx body into fd.  The status is checked before the
 * first byte is written: a non-2xx body is never written to fd (it becomes the
 * error message).  Returns the 2xx status, or -1 with *err set; on failure fd
 * may hold a partial body, which the caller discards. */
int brig_client_get_file(brig_client *c, const char *path, int fd, brig_error **err);

/* GETs path and hands a 2xx body to fn piece by piece (fn is not called for an
 * empty body).  Returns the 2xx status, or -1 with *err set. */
int brig_client_get_body(brig_client *c, const char *path, brig_body_fn fn, void *ctx,
                         brig_error **err);

/* Sends method to path with `body` as JSON (may be NULL), asking for NDJSON
 * (Accept: application/x-ndjson), and hands each value of a 2xx answer to fn as
 * soon as its line is complete.  A 2xx answer of type application/json (a brigd
 * that does not stream this route) is handed to fn as one value.  timeout_ms
 * bounds the whole exchange (0: none; TCP keepalive detects a dead peer).
 * Returns the 2xx status once the answer ended, or -1 with *err set. */
int brig_client_stream(brig_client *c, const char *method, const char *path, json_t *body,
                       long timeout_ms, brig_event_fn fn, void *ctx, brig_error **err);

/* Several requests at once.  A brig_async shares the client's base URL, key
 * and interrupt flag but has its own handles and connections.  Requests are
 * started with brig_async_post/brig_async_stream and make progress only inside
 * brig_async_poll, which also calls their callbacks. */
typedef struct brig_async brig_async;

/* Called once when a request finished: status is the 2xx status, or -1 with err
 * set (borrowed: it is freed after the call).  May start new requests. */
typedef void (*brig_async_done_fn)(int status, brig_error *err, void *ctx);

brig_async *brig_async_new(brig_client *c);
/* Aborts the requests still running (their done callbacks are not called). */
void brig_async_free(brig_async *a);

/* Starts a POST of the n bytes at data (copied) with the given content type
 * ("application/json" for a JSON text).  The answer's body is discarded. */
void brig_async_post(brig_async *a, const char *path, const char *content_type, const void *data,
                     size_t n, brig_async_done_fn done, void *ctx);

/* Starts a GET of path as an NDJSON stream (see brig_client_stream); fn gets
 * the values, done the end. */
void brig_async_stream(brig_async *a, const char *path, brig_event_fn fn, void *fn_ctx,
                       brig_async_done_fn done, void *ctx);

/* Lets the requests make progress and waits until one of them did, one of
 * fds[0..nfds) is ready (revents is set, as poll(2) does), a signal arrived, or
 * timeout_ms passed (-1: no limit).  Callbacks run inside.  Returns the number
 * of requests still running, or -1 with *err set when curl itself failed. */
int brig_async_poll(brig_async *a, struct pollfd *fds, unsigned nfds, int timeout_ms,
                    brig_error **err);

#endif
