/*
 * e2b.h - E2B's API on brigd's own listener (docs/e2b.md), so that E2B's unmodified SDK
 * drives brig sandboxes: the control plane (e2b_api.c: X-API-KEY is a brig key), and the
 * in-sandbox API "envd" (e2b_envd.c: the Connect process service; e2b_fs.c: the filesystem
 * service and /files), routed by the E2b-Sandbox-Id header and allowed by the sandbox's
 * access token.  Not a public interface.
 */
#ifndef BRIG_E2B_H
#define BRIG_E2B_H

#include <stdbool.h>

#include "handler.h"

/* What envd version brigd claims: the SDK gates features on it (0.5.7: octet-stream
 * uploads; file metadata, 0.6.2, is not served). */
#define E2B_ENVD_VERSION "0.5.7"
#define E2B_TOKEN_LEN    64 /* hex characters */

/* e2b_rec.c: what is kept of a sandbox made or connected through E2B's API (in the store).
 *
 * Makes id's record, unless it has one: owner is who envd acts as, metadata (may be NULL)
 * an object of strings; its access token in token.  fresh: id was made by this very request
 * (a create), so the store holds no record of it and is not asked. */
void e2b_record_make(brigd *d, const char *id, bool fresh, const brig_caller *owner,
                     json_t *metadata, char token[E2B_TOKEN_LEN + 1]);
/* The envd access token of listed sandbox id and the caller envd acts as (who created or
 * connected it, else a sandbox key of its project); false when it is not listed. */
bool e2b_record_get(brigd *d, const char *id, char token[E2B_TOKEN_LEN + 1], brig_caller *owner);

/* The sandbox whose token this is (SDKs before 2.8 send no E2b-Sandbox-Id on /files and
 * /health: the token alone names the sandbox there). */
bool e2b_record_by_token(brigd *d, const char *token, char id[BRIG_ID_MAX]);
/* A copy of id's metadata ({} when it has none). */
json_t *e2b_record_metadata(brigd *d, const char *id);
/* Drops the records of sandboxes no longer listed. */
void e2b_records_prune(brigd *d);

/* Replies {"code":status,"message"} (the control plane's and /files' errors). */
void e2b_fail(brig_req *r, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Whether e2b_api is on; when off replies 404 and returns false. */
bool e2b_enabled(brig_req *r);

/* e2b_api.c: the control plane. */
void e2b_sandbox_create(brig_req *r);
void e2b_sandbox_list(brig_req *r);
void e2b_sandbox_get(brig_req *r);
void e2b_sandbox_kill(brig_req *r);
void e2b_sandbox_timeout(brig_req *r);
void e2b_sandbox_connect(brig_req *r);
void e2b_sandbox_pause(brig_req *r);
void e2b_sandbox_resume(brig_req *r);
void e2b_unsupported(brig_req *r);
void e2b_api_begin(brig_req *r);

/* e2b_envd.c: envd's routing and the process service. */
void e2b_envd_begin(brig_req *r);
void e2b_health(brig_req *r);
void e2b_proc_start(brig_req *r);
void e2b_proc_connect(brig_req *r);
void e2b_proc_list(brig_req *r);
void e2b_proc_signal(brig_req *r);
void e2b_proc_input(brig_req *r);
void e2b_proc_close_stdin(brig_req *r);
void e2b_proc_update(brig_req *r);
void e2b_rpc_unimplemented(brig_req *r);
/* The request's message: the JSON body (unary) or its one envelope (streaming); replies
 * and returns NULL when it is not one. */
json_t *e2b_rpc_message(brig_req *r, bool streaming);
/* The user a call runs as: /files' ?username, Authorization's Basic user, else "user" (E2B's
 * default). */
void e2b_call_user(brig_req *r, char *out, size_t size);

/* Streams (server-streaming Connect calls): appends one envelope (flags 0: a message; 2: the
 * end of the stream; takes msg); appends the stream's end (msg NULL: a clean end); answers a
 * stream that is only its end (an error, with HTTP 200 as Connect wants it; takes err). */
void e2b_envelope(brig_buf *out, uint8_t flags, json_t *msg);
void e2b_stream_end(brig_buf *out, unsigned status, const char *msg);
void e2b_stream_fail(brig_req *r, brig_error *err);
/* The client's keepalive interval (Keepalive-Ping-Interval, seconds) in ms; its socket. */
int e2b_keepalive_ms(brig_req *r);
int e2b_client_fd(brig_req *r);

/* e2b_fs.c: the filesystem service and /files. */
/* A path of the request as an absolute one (relative: under the user's home); NULL and
 * *err when it is empty or too long. */
char *e2b_abs_path(brig_req *r, const char *p, brig_error **err);
void e2b_fs_stat(brig_req *r);
void e2b_fs_make_dir(brig_req *r);
void e2b_fs_list_dir(brig_req *r);
void e2b_fs_move(brig_req *r);
void e2b_fs_remove(brig_req *r);
void e2b_files_get(brig_req *r);
void e2b_files_post_begin(brig_req *r);
void e2b_files_post_body(brig_req *r, const char *data, size_t n);
void e2b_files_post(brig_req *r);

/* e2b_watch.c: WatchDir, by polling, and its polling form. */
void e2b_fs_watch_dir(brig_req *r);
void e2b_fs_create_watcher(brig_req *r);
void e2b_fs_get_watcher_events(brig_req *r);
void e2b_fs_remove_watcher(brig_req *r);

#endif
