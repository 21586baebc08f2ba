/*
 * util.c - strings, time and I/O helpers (see util.h; allocation is alloc.c).
 */
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>

#include "error.h"

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t brig_now_mono_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

int brig_lock_exclusive(const char *path, const char *held, brig_error **err)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return brig_error_sys(err, "open %s", path);
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(fd);
        if (e == EWOULDBLOCK)
            return brig_error_set(err, BRIG_E_UNAVAILABLE, 0, "%s (%s is locked)", held, path);
        return brig_error_set(err, BRIG_E_INTERNAL, e, "lock %s", path);
    }
    return fd;
}

void brig_cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

struct timespec brig_mono_after(int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    return ts;
}

int64_t brig_now_real_ms(void)
{
    return clock_ms(CLOCK_REALTIME);
}

ssize_t brig_read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

int brig_write_full(int fd, const void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(fd, (const char *)buf + done, n - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        done += (size_t)w;
    }
    return 0;
}

void brig_buf_append(brig_buf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->data = brig_xrealloc(b->data, cap);
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void brig_buf_printf(brig_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = brig_vasprintf(fmt, ap);
    va_end(ap);
    brig_buf_append(b, s, strlen(s));
    free(s);
}

void brig_buf_dispose(brig_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* The length of the valid UTF-8 sequence at p[0..n) (what jansson accepts: no
 * overlong forms, surrogates or code points above U+10FFFF), or 0. */
static size_t utf8_seq(const uint8_t *p, size_t n)
{
    uint8_t c = p[0];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

bool brig_utf8_valid(const char *s, size_t n)
{
    const uint8_t *p = (const uint8_t *)s;
    for (size_t i = 0, k; i < n; i += k)
        if ((k = utf8_seq(p + i, n - i)) == 0)
            return false;
    return true;
}

char *brig_utf8_display(const char *s, size_t n)
{
    const uint8_t *p = (const uint8_t *)s;
    brig_buf b = {0};
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(p + i, n - i);
        if (k == 0) {
            brig_buf_append(&b, "\xEF\xBF\xBD", 3); /* U+FFFD */
            i++;
        } else {
            brig_buf_append(&b, p + i, k);
            i += k;
        }
    }
    if (b.data == NULL)
        return brig_xstrdup("");
    return b.data;
}
