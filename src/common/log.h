/*
 * log.h - one-line log records on stderr: "2026-12-01T10:00:00.123Z brigd info: message".
 * Thread-safe (one write(2) per record).
 *
 * A record is one line whatever its message holds: every byte of the message outside
 * printable ASCII, and the backslash, is escaped (\n \r \t \\ \xHH, as nginx escapes its
 * access log), so text that came from a sandbox (a tar's stderr, an agent's error) can
 * neither forge a record nor reach a terminal as a control sequence.  A record is at most
 * BRIG_LOG_LINE_MAX bytes; a longer one is cut and ends in "...[cut]".
 *
 * Rate limit: a thread names whose behalf it works on with brig_log_set_key (brigd's HTTP
 * threads name the sandbox of the request they serve, or its account).  While a key is
 * set, its records pass at BRIG_LOG_RATE per second after a burst of BRIG_LOG_BURST; the
 * others are counted, and the count is logged once, before the next record of that key
 * that passes.  The agent limits all its records alike (brig_log_limit_all), across its
 * forked connection handlers: its log is one sandbox's.
 */
#ifndef BRIG_LOG_H
#define BRIG_LOG_H

#include <stddef.h>

typedef enum { BRIG_LOG_DEBUG, BRIG_LOG_INFO, BRIG_LOG_WARN, BRIG_LOG_ERROR } brig_log_level;

#define BRIG_LOG_LINE_MAX 2048 /* bytes of a record, its newline included */
#define BRIG_LOG_RATE     5    /* records per second per key, after the burst */
#define BRIG_LOG_BURST    20

/* Sets the program name printed in every record and the minimum level. */
void brig_log_init(const char *prog, brig_log_level min);

/* Puts every record of this process, and of the processes it forks afterwards, under
 * one shared rate limit (the agent). */
void brig_log_limit_all(void);

/* Records of this thread count against key's rate limit from now on (copied; at most
 * 63 bytes are kept); NULL or "" ends that. */
void brig_log_set_key(const char *key);

void brig_log(brig_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* One record that counts against key, whatever this thread's key is. */
void brig_log_keyed(const char *key, brig_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes src[0..n) escaped as a record's message is into dst (cap bytes, NUL-terminated,
 * never a partial escape); returns how many bytes of src fit. */
size_t brig_log_escape(char *dst, size_t cap, const char *src, size_t n);

#define brig_debug(...) brig_log(BRIG_LOG_DEBUG, __VA_ARGS__)
#define brig_info(...)  brig_log(BRIG_LOG_INFO, __VA_ARGS__)
#define brig_warn(...)  brig_log(BRIG_LOG_WARN, __VA_ARGS__)
#define brig_err(...)   brig_log(BRIG_LOG_ERROR, __VA_ARGS__)

#endif
