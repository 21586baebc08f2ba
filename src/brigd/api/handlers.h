/*
 * handlers.h - the REST handlers of api_exec.c, api_files.c, api_accounts.c, api_audit.c and
 * api_volumes.c, which
 * the route table (routes.c) names; what they all use is in handler.h.  Not a public interface.
 */
#ifndef BRIG_HANDLERS_H
#define BRIG_HANDLERS_H

#include "handler.h"
#include "sandbox/build.h"

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
/* A file of the request's sandbox as the answer (redacted like every download). */
void api_file_download(brig_req *r, const char *path);
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
/* api_usertpl.c: templates declared by users */
void api_utpl_build(brig_req *r);
/* A build's record as JSON (api_templates.c); with_tail adds "log_tail". */
json_t *api_build_json(const brig_build_info *in, bool with_tail);
/* Answers status with b's record (202: and its Location). */
void api_reply_build(brig_req *r, unsigned status, brig_build *b);
void api_utpl_get(brig_req *r);
void api_utpl_log(brig_req *r);
void api_utpl_delete(brig_req *r);

void api_account_create(brig_req *r);
void api_account_credit(brig_req *r);
void api_account_configure(brig_req *r);
void api_account_get(brig_req *r);
void api_account_list(brig_req *r);
void api_account_ledger(brig_req *r);
void api_account_usage(brig_req *r);
void api_account_patch(brig_req *r);
void api_project_create(brig_req *r);
void api_project_list(brig_req *r);
void api_project_get(brig_req *r);
void api_project_patch(brig_req *r);
void api_key_create(brig_req *r);
void api_key_list(brig_req *r);
void api_key_delete(brig_req *r);
void api_secret_list(brig_req *r);
void api_secret_put(brig_req *r);
void api_secret_delete(brig_req *r);
void api_injections_get(brig_req *r);
void api_injections_put(brig_req *r);

/* api_volumes.c */
void api_volume_create(brig_req *r);
void api_volume_list(brig_req *r);
void api_volume_get(brig_req *r);
void api_volume_delete(brig_req *r);

/* api_snapshots.c */
void api_snapshot_take(brig_req *r);
void api_snapshot_list(brig_req *r);
void api_snapshot_get(brig_req *r);
void api_snapshot_delete(brig_req *r);
void api_sandbox_fork(brig_req *r);

void api_timeline(brig_req *r);

/* api_metrics.c */
void api_metrics(brig_req *r);
void api_sandbox_metrics(brig_req *r);
/* The exposition's text (*len bytes; caller frees). */
char *api_metrics_text(brigd *d, size_t *len);
void api_audit_export(brig_req *r);
void api_audit_verify(brig_req *r);

/* ui.c: the dashboard's files (no key: they hold no data) */
void api_ui_index(brig_req *r);
void api_ui_file(brig_req *r);
void api_ui_redirect(brig_req *r);

/* Shared by uploads (files, tar, process stdin): a body streamed to the agent. */
void api_upload_body(brig_req *r, const char *data, size_t n);
void api_upload_end(brig_req *r);

#endif
