/*
 * endpoint.h - where the CLI finds brigd and its API key: the environment
 * (BRIG_URL, BRIG_API_KEY) and, for root on the brigd host, the admin key file
 * in brigd's state directory ($BRIG_STATE_DIR, default /var/lib/brig).
 */
#ifndef BRIG_CLI_ENDPOINT_H
#define BRIG_CLI_ENDPOINT_H

#include "error.h"

#define BRIG_CONFIG_DEFAULT_URL       "http://127.0.0.1:7070"
#define BRIG_CONFIG_DEFAULT_STATE_DIR "/var/lib/brig"

/* brigd's base URL: $BRIG_URL when set and non-empty, else the default.
 * Points into the environment or static storage. */
const char *brig_config_url(void);

/* Sets *key (caller frees) to $BRIG_API_KEY when set and non-empty, else to the
 * whitespace-trimmed content of $BRIG_STATE_DIR/admin.key when that is readable.
 * Fails naming BRIG_API_KEY when neither gives a key, and refuses a key with
 * control characters (it goes into an HTTP header). */
int brig_config_api_key(char **key, brig_error **err);
/* Same, falling back to <state dir>/<file> (operator commands use operator.key). */
int brig_config_api_key_from(char **key, const char *file, brig_error **err);

#endif
