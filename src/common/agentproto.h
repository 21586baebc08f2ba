/*
 * agentproto.h - the agent protocol's requests and replies, declared once for both ends
 * (docs/protocol.md is the normative description; frame.h is the framing under it).
 *
 * Here live the operations (brig_agent_op) with their wire names, the typed requests
 * (brig_agent_req), the types of the agent's messages (brig_agent_reply) with theirs, and the
 * two directions of a request:
 *
 *   - brig_agentproto_encode: a typed request -> the JSON object brigd sends (agentc/);
 *   - brig_agentproto_decode: a JSON object a peer sent -> a typed request, every field checked
 *     (types, ranges, absolute paths, no NUL bytes), for brig-agent.
 *
 * Both are functions of their input only: nothing here touches the file system, the process
 * table or the network, so the fuzz target fuzz_agent runs the decoder on arbitrary input, and
 * checks that decode(encode(decode(x))) is decode(x).  A new operation is a row of the table in
 * agentproto.c (name, decoder, encoder), its fields in the structs below, a handler in the
 * agent's op table (conn.c) and a typed call in brigd's agentc/.
 *
 * Strings and JSON values in a decoded request are borrowed from the request object: it must
 * outlive them.  The one change the decoder makes is to that object: a path sent as
 * "<field>_b64" (bytes that are not UTF-8) is decoded into "<field>" there, for the struct to
 * borrow.  The encoder sends such a path as "<field>_b64" in turn.
 */
#ifndef BRIG_AGENTPROTO_H
#define BRIG_AGENTPROTO_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define BRIG_BUFFER_DEFAULT (4u << 20)  /* exec buffer_bytes default: 4 MiB */
#define BRIG_BUFFER_MAX     (64u << 20) /* ... and its maximum */
#define BRIG_PTY_MAX        1000        /* pty cols and rows: 1 .. this */

/* The operations, in the order of the table in agentproto.c. */
typedef enum brig_agent_op {
    BRIG_OP_PING,
    BRIG_OP_EXEC,
    BRIG_OP_WRITE_FILE,
    BRIG_OP_READ_FILE,
    BRIG_OP_PROC_LIST,
    BRIG_OP_PROC_GET,
    BRIG_OP_PROC_OUTPUT,
    BRIG_OP_PROC_STDIN,
    BRIG_OP_PROC_STDIN_CLOSE,
    BRIG_OP_PROC_SIGNAL,
    BRIG_OP_PROC_WAIT,
    BRIG_OP_PROC_RESIZE,
    BRIG_OP_STAT,
    BRIG_OP_LIST_DIR,
    BRIG_OP_REMOVE,
    BRIG_OP_MOVE,
    BRIG_OP_MKDIR,
    BRIG_OP_TAR_EXTRACT,
    BRIG_OP_TAR_CREATE,
    BRIG_OP_GUEST_SYNC,
    BRIG_OP_FS_FREEZE,
    BRIG_OP__COUNT
} brig_agent_op;

/* `exec` (docs/protocol.md, "exec" and "Processes"). */
typedef struct brig_exec_spec {
    json_t *argv;        /* non-empty array of strings without NUL, or NULL (cmd is used) */
    const char *cmd;     /* the shell command, or NULL */
    const char *cwd;     /* absolute, or NULL: the default (home directory) */
    json_t *env;         /* object of strings (valid names), or NULL */
    int64_t timeout_ms;  /* 0: none (always sent) */
    bool want_stdin;     /* `stdin`: the client streams DATA on channel 0 */
    bool stdin_closed;   /* `stdin_closed`: no stdin pipe kept open for proc_stdin */
    bool background;     /* answer `started` and let the process outlive the connection */
    bool follow;         /* background without `stdin`: then follow its output on this
                          * connection, as proc_output with follow does */
    bool pty;            /* run on a pseudo-terminal of cols x rows */
    uint16_t cols, rows; /* 1 .. BRIG_PTY_MAX when pty */
    const char *user;    /* a user name, or NULL: root without a passwd lookup */
    /* Decoded: 1 .. BRIG_BUFFER_MAX (BRIG_BUFFER_DEFAULT when absent).  Encoded: sent unless 0. */
    uint32_t buffer_bytes;
} brig_exec_spec;

/* The proc_* requests.  Plain data on purpose: the agent's handler passes it, with the
 * connection, to the process's supervisor (its ctl.h). */
typedef struct brig_proc_req {
    int32_t op;          /* brig_agent_op: one of the BRIG_OP_PROC_* (set by the decoder) */
    int32_t pid;         /* > 0 (all but proc_list) */
    int32_t signal;      /* proc_signal: 1 .. 64 */
    uint16_t cols, rows; /* proc_resize: 1 .. BRIG_PTY_MAX */
    int64_t timeout_ms;  /* proc_wait: 0 = no limit (always sent) */
    uint8_t follow;      /* proc_output (always sent) */
    uint8_t pad[7];
} brig_proc_req;

/* write_file, read_file, tar_* and the file-system operations. */
typedef struct brig_fs_req {
    const char *path; /* absolute (every op but move) */
    const char *from; /* move */
    const char *to;   /* move */
    uint32_t mode;    /* write_file (default 0644), mkdir (default 0755): & 07777 */
    bool mode_set;    /* mode was given (decoded) / is to be sent (encoded) */
    bool recursive;   /* remove (always sent) */
    bool parents;     /* mkdir (always sent) */
} brig_fs_req;

/* `guest_sync` (microVMs only: the agent is the guest's PID 1 with every capability): the
 * host's clock, fresh entropy and, for a VM restored from a memory snapshot, the sandbox's
 * link, which the snapshot's guest did not have. */
typedef struct brig_guest_req {
    int64_t realtime_ns; /* the host's CLOCK_REALTIME, > 0 */
    const char *seed;    /* 64 hex digits mixed into the guest's pool (a reseed), or NULL */
    bool net;            /* the fields below are set */
    const char *nic;     /* the NIC to configure, by its MAC ("52:54:00:00:00:02") */
    const char *mac;     /* the MAC it takes */
    const char *ip, *gw; /* IPv4: its address (a /31) and the default route's gateway */
} brig_guest_req;

typedef struct brig_agent_req {
    brig_agent_op op;
    union {
        brig_exec_spec exec;
        brig_proc_req proc;
        brig_fs_req fs;
        brig_guest_req guest;
        bool freeze; /* `fs_freeze` (microVMs): freeze (sync first) or thaw the guest's root */
    } u;
} brig_agent_req;

/* The "type" of the agent's messages (replies and stream events). */
typedef enum brig_agent_reply {
    BRIG_REPLY_UNKNOWN, /* no "type", or one this table does not know */
    BRIG_REPLY_ERROR,   /* {"code","message"} (brig_proto_error_msg) */
    BRIG_REPLY_PONG,
    BRIG_REPLY_OK,        /* {"size"} for write_file, {"bytes"} for proc_stdin, tar_extract */
    BRIG_REPLY_STARTED,   /* {"pid"} */
    BRIG_REPLY_EXIT,      /* {"exit_code","signal","timed_out","duration_ms"} */
    BRIG_REPLY_FILE,      /* {"size","mode"}: read_file, before the content */
    BRIG_REPLY_TAR,       /* tar_create, before the stream */
    BRIG_REPLY_PROCESSES, /* {"processes":[process objects]} */
    BRIG_REPLY_PROCESS,   /* a process object */
    BRIG_REPLY_OUTPUT,    /* {"dropped_bytes"}: proc_output, before the output */
    BRIG_REPLY_DROPPED,   /* {"bytes"} */
    BRIG_REPLY_END,       /* list_dir's last message; proc_output's without follow ({"running"}) */
    BRIG_REPLY_ENTRY,     /* {"entry"}: stat */
    BRIG_REPLY_ENTRIES,   /* {"entries":[...]}: list_dir, one or more */
    BRIG_REPLY__COUNT
} brig_agent_reply;

/* The wire name of an operation ("?" when out of range). */
const char *brig_agentproto_op_name(brig_agent_op op);

/* The wire name of a message type ("" for BRIG_REPLY_UNKNOWN). */
const char *brig_agentproto_reply_name(brig_agent_reply type);

/* A message of this type and no other field: {"type":"ok"} (caller owns it). */
json_t *brig_agentproto_message(brig_agent_reply type);

/* The type of an agent message: its "type" member looked up (BRIG_REPLY_UNKNOWN when it has
 * none, or one not in the table). */
brig_agent_reply brig_agentproto_reply_type(json_t *msg);

/* The client's HELLO: proto must be BRIG_PROTO_NAME, version an integer, min_version an
 * optional integer (default: version).  Errors are BRIG_E_PROTOCOL. */
int brig_agentproto_decode_hello(json_t *hello, int64_t *version, int64_t *min_version,
                                 brig_error **err);

/* Parses a request object: its `op` and that operation's fields into *out (see the header
 * comment for what it borrows and the one change it makes to req).  Errors are BRIG_E_INVALID
 * (answered as bad_request). */
int brig_agentproto_decode(json_t *req, brig_agent_req *out, brig_error **err);

/* The request object for q (caller owns it): "op" first, then q's fields in the order of
 * docs/protocol.md; optional fields are left out at their zero value, except those marked
 * "always sent" above.  argv and env are shared with q (referenced, not copied). */
json_t *brig_agentproto_encode(const brig_agent_req *q);

#endif
