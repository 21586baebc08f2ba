/*
 * handlers.h - what the REST handler files (routes.c, api_exec.c, api_files.c, api_accounts.c)
 * share.  Not a public interface.
 */
#ifndef BRIG_HANDLERS_H
#define BRIG_HANDLERS_H

#include "agentc/agentc.h"
#include "http.h"
#include "sandbox/sandbox.h"

/* Borrows the request's sandbox ({id}) and opens an agent connection to it.
 * On failure replies (404, 503…) and returns -1; on success the caller owns
 * *sb (brig_sandbox_put) and the fd. */
int api_open_agent(brig_req *r, brig_sandbox **sb);

/* Borrows the sandbox, sends req, replies with the agent's answer passed
 * through conv (NULL: 204 on success) or with the error.  Takes req. */
void api_simple_call(brig_req *r, json_t *req, json_t *(*conv)(json_t *reply), unsigned status,
                     int64_t timeout_ms);

/* Parses the buffered body as a JSON object with only these fields; replies
 * 400 and returns NULL on failure. */
json_t *api_body(brig_req *r, const char *const *fields);

/* "2026-12-01T10:00:00.123Z" from ms since the epoch (JSON null for null). */
json_t *api_time(json_t *ms);

/* Handlers. */
void api_exec(brig_req *r);
void api_proc_list(brig_req *r);
void api_proc_get(brig_req *r);
void api_proc_output(brig_req *r);
void api_proc_stdin_begin(brig_req *r);
void api_proc_stdin_body(brig_req *r, const char *data, size_t n);
void api_proc_stdin(brig_req *r);
void api_proc_stdin_close(brig_req *r);
void api_proc_signal(brig_req *r);
void api_proc_wait(brig_req *r);
void api_proc_resize(brig_req *r);

void api_files_get(brig_req *r);
void api_files_put_begin(brig_req *r);
void api_files_put_body(brig_req *r, const char *data, size_t n);
void api_files_put(brig_req *r);
void api_files_delete(brig_req *r);
void api_files_move(brig_req *r);
void api_files_mkdir(brig_req *r);
void api_tar_put_begin(brig_req *r);
void api_tar_get(brig_req *r);

void api_template_list(brig_req *r);
void api_template_build(brig_req *r);
void api_template_build_get(brig_req *r);

void api_account_create(brig_req *r);
void api_account_credit(brig_req *r);
void api_account_configure(brig_req *r);
void api_account_get(brig_req *r);
void api_account_patch(brig_req *r);
void api_project_create(brig_req *r);
void api_project_list(brig_req *r);
void api_project_get(brig_req *r);
void api_project_patch(brig_req *r);
void api_key_create(brig_req *r);
void api_key_delete(brig_req *r);
void api_secret_list(brig_req *r);
void api_secret_put(brig_req *r);
void api_secret_delete(brig_req *r);

/* Shared by uploads (files, tar, process stdin): a body streamed to the agent. */
void api_upload_body(brig_req *r, const char *data, size_t n);
void api_upload_end(brig_req *r);

#endif
