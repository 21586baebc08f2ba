/*
 * alloc.c - allocation that never returns NULL (see alloc.h): the one place where running
 * out of memory is handled, by aborting with a message.
 */
#include "alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void oom(void)
{
    static const char msg[] = "brig: out of memory\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    abort();
}

void *brig_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom();
    return p;
}

void *brig_xcalloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (p == NULL)
        oom();
    return p;
}

void *brig_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom();
    return q;
}

char *brig_xstrdup(const char *s)
{
    char *p = strdup(s);
    if (p == NULL)
        oom();
    return p;
}

char *brig_xstrndup(const char *s, size_t n)
{
    char *p = strndup(s, n);
    if (p == NULL)
        oom();
    return p;
}

char *brig_vasprintf(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        oom();
    return s;
}

char *brig_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = brig_vasprintf(fmt, ap);
    va_end(ap);
    return s;
}
