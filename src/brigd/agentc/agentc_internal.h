/*
 * agentc_internal.h - what the files of src/brigd/agentc/ share, and nothing else includes
 * (the module's parts are listed in agentc.h).
 */
#ifndef BRIG_AGENTC_INTERNAL_H
#define BRIG_AGENTC_INTERNAL_H

#include "agentc.h"

/* The receive timeout of the calls that stream (file and tar transfers, stdin). */
#define BRIG_AGENTC_STREAM_MS 300000

/* Sends the request q (encoded by agentproto.c) as the connection's CONTROL frame. */
int brig_agentc_send(int fd, const brig_agent_req *q, brig_error **err);

/* Reads the next message, which must be a CONTROL frame; an agent error becomes -1 with
 * *err.  *out: the message (caller frees). */
int brig_agentc_reply(int fd, json_t **out, brig_error **err);

/* One request, one reply: brig_agentc_send, then brig_agentc_reply into *reply (NULL: the
 * reply is only checked for an error). */
int brig_agentc_call(int fd, const brig_agent_req *q, json_t **reply, brig_error **err);

/* Sends q, the request of a stream of DATA to the agent, and sets the stream's timeout. */
int brig_agentc_stream_begin(int fd, const brig_agent_req *q, brig_error **err);

/* A reply of the wrong type: BRIG_E_PROTOCOL "unexpected agent reply '<type>'" (-1). */
int brig_agentc_unexpected(json_t *msg, brig_error **err);

#endif
