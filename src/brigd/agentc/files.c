/*
 * files.c - the agent client's files (see agentc.h): stat, list_dir, remove, move, mkdir, and
 * the streams of write_file, read_file, tar_extract and tar_create.
 */
#include "agentc_internal.h"

#include <string.h>

static brig_agent_req fs_req(brig_agent_op op, const char *path)
{
    return (brig_agent_req){.op = op, .u.fs = {.path = path}};
}

int brig_agentc_stat(int fd, const char *path, json_t **entry, brig_error **err)
{
    brig_agent_req q = fs_req(BRIG_OP_STAT, path);
    json_t *reply = NULL;
    *entry = NULL;
    if (brig_agentc_call(fd, &q, &reply, err) < 0)
        return -1;
    json_t *e = json_object_get(reply, "entry");
    *entry = json_incref(e ? e : reply);
    json_decref(reply);
    return 0;
}

int brig_agentc_list_dir(int fd, const char *path, json_t **entries, brig_error **err)
{
    brig_agent_req q = fs_req(BRIG_OP_LIST_DIR, path);
    json_t *all = json_array();
    brig_frame f = {0};
    int rc = brig_agentc_send(fd, &q, err);
    /* One or more "entries" messages, then "end". */
    while (rc == 0) {
        brig_agent_event ev;
        json_t *msg = NULL;
        rc = brig_agentc_next(fd, &f, &ev, &msg, err);
        if (rc < 0)
            break;
        if (ev != BRIG_EV_MESSAGE || json_string_value(json_object_get(msg, "type")) == NULL) {
            json_decref(msg);
            rc = brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected agent reply to list_dir");
            break;
        }
        bool end = brig_agentproto_reply_type(msg) == BRIG_REPLY_END;
        if (!end)
            json_array_extend(all, json_object_get(msg, "entries"));
        json_decref(msg);
        if (end)
            break;
    }
    brig_frame_dispose(&f);
    if (rc < 0) {
        json_decref(all);
        all = NULL;
    }
    *entries = all;
    return rc;
}

int brig_agentc_remove(int fd, const char *path, bool recursive, brig_error **err)
{
    brig_agent_req q = {.op = BRIG_OP_REMOVE, .u.fs = {.path = path, .recursive = recursive}};
    return brig_agentc_call(fd, &q, NULL, err);
}

int brig_agentc_move(int fd, const char *from, const char *to, brig_error **err)
{
    brig_agent_req q = {.op = BRIG_OP_MOVE, .u.fs = {.from = from, .to = to}};
    return brig_agentc_call(fd, &q, NULL, err);
}

int brig_agentc_mkdir(int fd, const char *path, int mode, bool parents, brig_error **err)
{
    brig_agent_req q = {
        .op = BRIG_OP_MKDIR,
        .u.fs = {.path = path, .mode = (uint32_t)mode, .mode_set = true, .parents = parents}};
    return brig_agentc_call(fd, &q, NULL, err);
}

/* ---- streams ----------------------------------------------------------------------- */

int brig_agentc_write_begin(int fd, const char *path, int mode, brig_error **err)
{
    brig_agent_req q = fs_req(BRIG_OP_WRITE_FILE, path);
    if (mode >= 0) {
        q.u.fs.mode = (uint32_t)mode;
        q.u.fs.mode_set = true;
    }
    return brig_agentc_stream_begin(fd, &q, err);
}

int brig_agentc_tar_extract_begin(int fd, const char *path, brig_error **err)
{
    brig_agent_req q = fs_req(BRIG_OP_TAR_EXTRACT, path);
    return brig_agentc_stream_begin(fd, &q, err);
}

int brig_agentc_read_begin(int fd, const char *path, int64_t *size, int *mode, brig_error **err)
{
    brig_agent_req q = fs_req(BRIG_OP_READ_FILE, path);
    if (brig_agentc_send(fd, &q, err) < 0)
        return -1;
    brig_agentc_set_timeout(fd, BRIG_AGENTC_STREAM_MS);
    json_t *msg = NULL;
    if (brig_agentc_reply(fd, &msg, err) < 0)
        return -1;
    int r = 0;
    if (brig_agentproto_reply_type(msg) != BRIG_REPLY_FILE) {
        r = brig_agentc_unexpected(msg, err);
    } else {
        *size = json_integer_value(json_object_get(msg, "size"));
        *mode = (int)json_integer_value(json_object_get(msg, "mode"));
        if (*size < 0)
            r = brig_error_set(err, BRIG_E_PROTOCOL, 0, "agent sent a negative size");
    }
    json_decref(msg);
    return r;
}

int brig_agentc_read_chunk(int fd, brig_frame *f, brig_error **err)
{
    if (brig_frame_read(fd, f, NULL, err) < 0)
        return -1;
    if (f->hdr.type == BRIG_FRAME_DATA && f->hdr.chan == BRIG_CHAN_IN)
        return f->hdr.len > 0 ? 1 : 0;
    if (f->hdr.type == BRIG_FRAME_CONTROL) {
        json_t *msg = NULL;
        if (brig_frame_parse_json(f->payload, f->hdr.len, &msg, err) == 0) {
            if (brig_agentproto_reply_type(msg) == BRIG_REPLY_ERROR)
                brig_agentc_error(msg, err);
            else
                brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected agent message");
            json_decref(msg);
        }
        return -1;
    }
    return brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected frame while reading a file");
}

int brig_agentc_tar_create_begin(int fd, const char *path, brig_error **err)
{
    brig_agent_req q = fs_req(BRIG_OP_TAR_CREATE, path);
    brig_agentc_set_timeout(fd, BRIG_AGENTC_STREAM_MS);
    /* {"type":"tar"}, then the stream. */
    return brig_agentc_call(fd, &q, NULL, err);
}

int brig_agentc_tar_create_end(int fd, brig_frame *f, brig_error **err)
{
    /* After the stream's end: "ok", or the error of a tar that failed part way. */
    brig_agent_event ev;
    json_t *msg = NULL;
    int r = brig_agentc_next(fd, f, &ev, &msg, err);
    json_decref(msg);
    if (r == 0 && ev != BRIG_EV_MESSAGE)
        r = brig_error_set(err, BRIG_E_PROTOCOL, 0, "unexpected agent data after a tar stream");
    return r;
}
