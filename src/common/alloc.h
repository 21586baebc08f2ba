/*
 * alloc.h - allocation for every brig binary: these never return NULL; running out of
 * memory aborts with a message.  Formatted strings too, since they allocate.  util.h
 * includes it; error.c uses it alone (error.c and util.c would otherwise need each other).
 */
#ifndef BRIG_ALLOC_H
#define BRIG_ALLOC_H

#include <stdarg.h>
#include <stddef.h>

void *brig_xmalloc(size_t n);
void *brig_xcalloc(size_t nmemb, size_t size);
void *brig_xrealloc(void *p, size_t n);
char *brig_xstrdup(const char *s);
char *brig_xstrndup(const char *s, size_t n);
char *brig_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *brig_vasprintf(const char *fmt, va_list ap);

#endif
