/*
 * cmdends.c - what brigd keeps of a sandbox's commands until it saw them end (see
 * cmdends.h).
 */
#include "cmdends.h"

#include <pthread.h>
#include <string.h>

#include "util.h"

#define MAX_KEPT 1024 /* background commands kept per sandbox; the oldest go beyond */

typedef struct entry {
    int pid;
    json_t *ev;
    brig_rt_events before;
} entry;

struct brig_cmdends {
    pthread_mutex_t lock;
    entry *e; /* oldest first */
    size_t n;
    int64_t oom_kills; /* the janitor's last reading (-1: none yet) */
    int64_t oom_rose_at;
};

brig_cmdends *brig_cmdends_new(void)
{
    brig_cmdends *c = brig_xcalloc(1, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    c->oom_kills = -1;
    return c;
}

void brig_cmdends_free(brig_cmdends *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++)
        json_decref(c->e[i].ev);
    free(c->e);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Index of pid, or -1.  Needs the lock. */
static ssize_t find(const brig_cmdends *c, int pid)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->e[i].pid == pid)
            return (ssize_t)i;
    return -1;
}

/* Removes entry i, returning its event.  Needs the lock. */
static json_t *drop(brig_cmdends *c, size_t i)
{
    json_t *ev = c->e[i].ev;
    memmove(&c->e[i], &c->e[i + 1], (c->n - i - 1) * sizeof(*c->e));
    c->n--;
    return ev;
}

void brig_cmdends_add(brig_cmdends *c, int pid, json_t *ev, const brig_rt_events *before)
{
    pthread_mutex_lock(&c->lock);
    ssize_t i = find(c, pid);
    if (i >= 0)
        json_decref(drop(c, (size_t)i));
    else if (c->n >= MAX_KEPT)
        json_decref(drop(c, 0));
    c->e = brig_xrealloc(c->e, (c->n + 1) * sizeof(*c->e));
    c->e[c->n++] = (entry){.pid = pid, .ev = ev, .before = *before};
    pthread_mutex_unlock(&c->lock);
}

bool brig_cmdends_before(brig_cmdends *c, int pid, brig_rt_events *before)
{
    pthread_mutex_lock(&c->lock);
    ssize_t i = find(c, pid);
    if (i >= 0)
        *before = c->e[i].before;
    pthread_mutex_unlock(&c->lock);
    return i >= 0;
}

json_t *brig_cmdends_take(brig_cmdends *c, int pid)
{
    pthread_mutex_lock(&c->lock);
    ssize_t i = find(c, pid);
    json_t *ev = i >= 0 ? drop(c, (size_t)i) : NULL;
    pthread_mutex_unlock(&c->lock);
    return ev;
}

json_t *brig_cmdends_take_all(brig_cmdends *c)
{
    json_t *all = json_array();
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n; i++)
        json_array_append_new(all, c->e[i].ev);
    free(c->e);
    c->e = NULL;
    c->n = 0;
    pthread_mutex_unlock(&c->lock);
    return all;
}

void brig_cmdends_oom_note(brig_cmdends *c, int64_t oom_kills, int64_t now)
{
    pthread_mutex_lock(&c->lock);
    if (c->oom_kills >= 0 && oom_kills > c->oom_kills)
        c->oom_rose_at = now;
    if (oom_kills >= 0)
        c->oom_kills = oom_kills;
    pthread_mutex_unlock(&c->lock);
}

void brig_cmdends_oom_seen(brig_cmdends *c, int64_t *oom_kills, int64_t *rose_at)
{
    pthread_mutex_lock(&c->lock);
    *oom_kills = c->oom_kills;
    *rose_at = c->oom_rose_at;
    pthread_mutex_unlock(&c->lock);
}
