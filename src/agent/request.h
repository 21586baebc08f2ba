/*
 * request.h - the agent's requests, parsed and validated without side effects.
 *
 * Every operation of docs/protocol.md has a parser here that checks the request object's
 * fields (types, ranges, absolute paths, no NUL bytes) and fills a plain struct; nothing here
 * touches the file system, the process table or the network, so the fuzz target fuzz_agent
 * can run every parser on arbitrary input.  The operations (conn.c and the modules it
 * dispatches to) act on the parsed structs only.
 *
 * Strings in the parsed structs are borrowed from the request object: it must outlive them.
 * The one change a parser makes is to that object: a path sent as "<field>_b64" (bytes that
 * are not UTF-8) is decoded into "<field>" there, for the struct to borrow.
 */
#ifndef BRIG_AGENT_REQUEST_H
#define BRIG_AGENT_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define BRIG_BUFFER_DEFAULT (4u << 20)  /* exec buffer_bytes default: 4 MiB */
#define BRIG_BUFFER_MAX     (64u << 20) /* ... and its maximum */
#define BRIG_PTY_MAX        1000        /* pty cols and rows: 1 .. this */

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
    BRIG_OP__COUNT
} brig_agent_op;

/* `exec` (docs/protocol.md, "exec" and "Processes"). */
typedef struct brig_exec_spec {
    json_t *argv;          /* non-empty array of strings without NUL, or NULL (cmd is used) */
    const char *cmd;       /* the shell command, or NULL */
    const char *cwd;       /* absolute, or NULL: the default (home directory) */
    json_t *env;           /* object of strings (valid names), or NULL */
    int64_t timeout_ms;    /* 0: none */
    bool want_stdin;       /* `stdin`: the client streams DATA on channel 0 */
    bool stdin_closed;     /* `stdin_closed`: no stdin pipe kept open for proc_stdin */
    bool background;       /* answer `started` and let the process outlive the connection */
    bool pty;              /* run on a pseudo-terminal of cols x rows */
    uint16_t cols, rows;   /* 1 .. BRIG_PTY_MAX when pty */
    const char *user;      /* a user name, or NULL: root without a passwd lookup */
    uint32_t buffer_bytes; /* 1 .. BRIG_BUFFER_MAX */
} brig_exec_spec;

/* The proc_* requests.  Plain data on purpose: the handler passes it, with the connection,
 * to the process's supervisor (ctl.h). */
typedef struct brig_proc_req {
    int32_t op;          /* brig_agent_op: one of the BRIG_OP_PROC_* but PROC_LIST */
    int32_t pid;         /* > 0 */
    int32_t signal;      /* proc_signal: 1 .. 64 */
    uint16_t cols, rows; /* proc_resize: 1 .. BRIG_PTY_MAX */
    int64_t timeout_ms;  /* proc_wait: 0 = no limit */
    uint8_t follow;      /* proc_output */
    uint8_t pad[7];
} brig_proc_req;

/* write_file, read_file and the file-system operations. */
typedef struct brig_fs_req {
    const char *path; /* absolute (every op but move) */
    const char *from; /* move */
    const char *to;   /* move */
    uint32_t mode;    /* write_file (default 0644), mkdir (default 0755): & 07777 */
    bool recursive;   /* remove */
    bool parents;     /* mkdir */
} brig_fs_req;

typedef struct brig_agent_req {
    brig_agent_op op;
    union {
        brig_exec_spec exec;
        brig_proc_req proc;
        brig_fs_req fs;
    } u;
} brig_agent_req;

/* The client's HELLO: proto must be "brig-agent", version an integer, min_version an optional
 * integer (default: version). */
int brig_agent_parse_hello(json_t *hello, int64_t *version, int64_t *min_version, brig_error **err);

/* Parses a request object: its `op` and that operation's fields.  Errors are BRIG_E_INVALID
 * (answered as bad_request). */
int brig_agent_parse_request(json_t *req, brig_agent_req *out, brig_error **err);

/* The name of an operation, for messages. */
const char *brig_agent_op_name(brig_agent_op op);

/* Returns the member `key` of o, or NULL when missing or JSON null (optional request fields
 * treat null as absent). */
json_t *brig_agent_field(json_t *o, const char *key);

/* The value of a JSON string, or NULL when j is not a string or holds a NUL byte. */
const char *brig_agent_cstring(json_t *j);

#endif
