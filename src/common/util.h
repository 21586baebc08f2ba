/*
 * util.h - small helpers shared by every brig binary: allocation that aborts on
 * out-of-memory (the one place OOM is handled), formatted strings, scope-cleanup
 * attributes, monotonic time and EINTR-safe I/O.
 */
#ifndef BRIG_UTIL_H
#define BRIG_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"

#define BRIG_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Scope cleanup (crun style): `_cleanup_free_ char *p = NULL;` */
static inline void brig_freep(void *p)
{
    free(*(void **)p);
}
static inline void brig_closep(int *fd)
{
    if (*fd >= 0)
        close(*fd);
}
#define _cleanup_free_  __attribute__((cleanup(brig_freep)))
#define _cleanup_close_ __attribute__((cleanup(brig_closep)))

/* Milliseconds from CLOCK_MONOTONIC / CLOCK_REALTIME. */
int64_t brig_now_mono_ms(void);
int64_t brig_now_real_ms(void);

/* Opens (creating, 0600) and flocks path exclusively without waiting; the fd
 * holds the lock for as long as it is open.  -1 with BRIG_E_UNAVAILABLE
 * "<held> (<path> is locked)" when another process holds it. */
struct brig_error;
int brig_lock_exclusive(const char *path, const char *held, struct brig_error **err);

/* Condition variables timed on CLOCK_MONOTONIC (a wall-clock step neither
 * shortens nor stretches a wait): init one, and the absolute time ms from now
 * to give pthread_cond_timedwait. */
void brig_cond_init_mono(pthread_cond_t *c);
struct timespec brig_mono_after(int64_t ms);

/* Read/write exactly n bytes, retrying on EINTR and short transfers.
 * brig_read_full returns the bytes read (< n only at EOF) or -1 with errno. */
ssize_t brig_read_full(int fd, void *buf, size_t n);
int brig_write_full(int fd, const void *buf, size_t n);

/* A growable byte buffer. */
typedef struct brig_buf {
    char *data; /* owned; NUL-terminated after every append for convenience */
    size_t len;
    size_t cap;
} brig_buf;

void brig_buf_append(brig_buf *b, const void *p, size_t n);
/* Appends printf-formatted text. */
void brig_buf_printf(brig_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void brig_buf_dispose(brig_buf *b);

/* Whether s[0..n) is valid UTF-8 (what a JSON string may hold). */
bool brig_utf8_valid(const char *s, size_t n);
/* s[0..n) for display: each byte that does not begin a valid UTF-8 sequence
 * becomes U+FFFD.  Always valid UTF-8; caller frees. */
char *brig_utf8_display(const char *s, size_t n);

#endif
