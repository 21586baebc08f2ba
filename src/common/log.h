/*
 * log.h - one-line log records on stderr: "2026-12-01T10:00:00.123Z brigd info: message".
 * Thread-safe (one write(2) per record).
 */
#ifndef BRIG_LOG_H
#define BRIG_LOG_H

typedef enum { BRIG_LOG_DEBUG, BRIG_LOG_INFO, BRIG_LOG_WARN, BRIG_LOG_ERROR } brig_log_level;

/* Sets the program name printed in every record and the minimum level. */
void brig_log_init(const char *prog, brig_log_level min);

void brig_log(brig_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define brig_debug(...) brig_log(BRIG_LOG_DEBUG, __VA_ARGS__)
#define brig_info(...)  brig_log(BRIG_LOG_INFO, __VA_ARGS__)
#define brig_warn(...)  brig_log(BRIG_LOG_WARN, __VA_ARGS__)
#define brig_err(...)   brig_log(BRIG_LOG_ERROR, __VA_ARGS__)

#endif
