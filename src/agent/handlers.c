/*
 * handlers.c - PID 1's table of handlers and the processes they supervise.
 *
 * Every handler gets a slot when it is forked: PID 1's end of its control channel (ctl.c).
 * A handler that runs `exec` registers its command's pid and from then on is that process's
 * supervisor (super.c); it keeps running after its own connection is done, for as long as
 * the record is kept.  PID 1 knows nothing more about a process than its pid, the channel to
 * its supervisor, and the order it started and ended in: the supervisor holds the rest.
 *
 * What PID 1 does with the table:
 * - Routing.  A handler whose client asked about pid P sends ROUTE with the client's socket;
 *   PID 1 passes socket and request on to P's supervisor (ATTACH) and tells the handler
 *   whether it could.  PID 1 neither reads nor writes the client connection.
 * - Listing.  LIST answers the registered pids, oldest first.
 * - Retention.  When more than BRIG_KEEP_FINISHED registered processes have ended, the
 *   oldest finished one is forgotten: PID 1 closes its channel, which tells its supervisor
 *   to finish what it is doing and exit.  A registration for a pid that is still in the
 *   table (the kernel reused the pid of a finished process) forgets the old record too.
 *
 * Every message is checked for size and type; a channel that sends anything unexpected is
 * closed, which costs that handler its routing and nothing else.  Nothing here blocks:
 * channels are read and written with MSG_DONTWAIT, and a supervisor whose channel is full
 * gets no more connections (BUSY) until it catches up.
 */
#include "agent.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

void brig_handlers_add(brig_handlers *reg, int ctl, pid_t handler)
{
    if (reg->n == reg->cap) {
        reg->cap = reg->cap ? reg->cap * 2 : 64;
        reg->v = brig_xrealloc(reg->v, reg->cap * sizeof(*reg->v));
    }
    reg->v[reg->n++] = (brig_reg_slot){.ctl = ctl, .handler = handler};
}

/* Closes slot i's channel; the slot goes at the next sweep. */
static void slot_close(brig_handlers *reg, size_t i)
{
    if (reg->v[i].ctl >= 0)
        close(reg->v[i].ctl);
    reg->v[i].ctl = -1;
    reg->v[i].pid = 0;
}

/* The live slot registered for pid, or -1. */
static ssize_t find_pid(const brig_handlers *reg, int32_t pid)
{
    for (size_t i = 0; i < reg->n; i++)
        if (reg->v[i].ctl >= 0 && reg->v[i].pid == pid)
            return (ssize_t)i;
    return -1;
}

static void answer(brig_handlers *reg, size_t i, uint32_t type)
{
    brig_ctl_msg m = {.type = type};
    if (brig_ctl_send(reg->v[i].ctl, &m, sizeof(m), -1, true) < 0)
        slot_close(reg, i); /* the handler waits for this answer: without it, it must go */
}

/* Forgets the oldest finished processes beyond BRIG_KEEP_FINISHED. */
static void retain(brig_handlers *reg)
{
    for (;;) {
        size_t finished = 0;
        ssize_t oldest = -1;
        for (size_t i = 0; i < reg->n; i++) {
            if (reg->v[i].ctl < 0 || reg->v[i].pid == 0 || reg->v[i].ended == 0)
                continue;
            finished++;
            if (oldest < 0 || reg->v[i].ended < reg->v[(size_t)oldest].ended)
                oldest = (ssize_t)i;
        }
        if (finished <= BRIG_KEEP_FINISHED)
            return;
        slot_close(reg, (size_t)oldest);
    }
}

static void on_register(brig_handlers *reg, size_t i, const brig_ctl_msg *m)
{
    if (reg->v[i].pid != 0 || m->pid <= 0) {
        slot_close(reg, i);
        return;
    }
    ssize_t old = find_pid(reg, m->pid);
    if (old >= 0)
        slot_close(reg, (size_t)old);
    reg->v[i].pid = m->pid;
    reg->v[i].born = ++reg->seq;
    reg->v[i].ended = 0;
    answer(reg, i, BRIG_CTL_ACK);
}

static void on_exited(brig_handlers *reg, size_t i, const brig_ctl_msg *m)
{
    if (reg->v[i].pid == 0 || reg->v[i].pid != m->pid || reg->v[i].ended != 0) {
        slot_close(reg, i);
        return;
    }
    reg->v[i].ended = ++reg->seq;
    retain(reg);
}

static void on_route(brig_handlers *reg, size_t i, const brig_ctl_msg *m, int fd)
{
    if (fd < 0) { /* it did not reach us (descriptor limit) */
        answer(reg, i, BRIG_CTL_BUSY);
        return;
    }
    ssize_t to = reg->quiet ? -1 : find_pid(reg, m->pid); /* quiet: no client stays */
    uint32_t ans = BRIG_CTL_NOT_FOUND;
    if (to >= 0) {
        brig_ctl_msg fwd = {.type = BRIG_CTL_ATTACH, .pid = m->pid, .req = m->req};
        ans = brig_ctl_send(reg->v[to].ctl, &fwd, sizeof(fwd), fd, true) == 0 ? BRIG_CTL_ACK
                                                                              : BRIG_CTL_BUSY;
    }
    close(fd);
    answer(reg, i, ans);
}

static void on_list(brig_handlers *reg, size_t i)
{
    static brig_ctl_pids ans;
    ans.type = BRIG_CTL_PIDS;
    ans.n = 0;
    /* Oldest first: by registration order, a small selection sort over a small table. */
    uint64_t after = 0;
    while (ans.n < BRIG_CTL_PIDS_MAX) {
        ssize_t next = -1;
        for (size_t j = 0; j < reg->n; j++) {
            const brig_reg_slot *s = &reg->v[j];
            if (s->ctl >= 0 && s->pid != 0 && s->born > after &&
                (next < 0 || s->born < reg->v[(size_t)next].born))
                next = (ssize_t)j;
        }
        if (next < 0)
            break;
        ans.pids[ans.n++] = reg->v[(size_t)next].pid;
        after = reg->v[(size_t)next].born;
    }
    size_t size = offsetof(brig_ctl_pids, pids) + ans.n * sizeof(ans.pids[0]);
    if (brig_ctl_send(reg->v[i].ctl, &ans, size, -1, true) < 0)
        slot_close(reg, i);
}

void brig_handlers_serve(brig_handlers *reg, size_t i)
{
    while (reg->v[i].ctl >= 0) {
        brig_ctl_msg m;
        int fd = -1;
        ssize_t r = brig_ctl_recv(reg->v[i].ctl, &m, sizeof(m), &fd, true);
        if (r < 0 && errno == EAGAIN)
            return;
        if (r != (ssize_t)sizeof(m)) { /* EOF, an error, or a malformed message */
            if (fd >= 0)
                close(fd);
            slot_close(reg, i);
            return;
        }
        if (m.type != BRIG_CTL_ROUTE && fd >= 0) {
            close(fd);
            fd = -1;
        }
        switch (m.type) {
        case BRIG_CTL_REGISTER:
            on_register(reg, i, &m);
            break;
        case BRIG_CTL_EXITED:
            on_exited(reg, i, &m);
            break;
        case BRIG_CTL_ROUTE:
            on_route(reg, i, &m, fd);
            break;
        case BRIG_CTL_LIST:
            on_list(reg, i);
            break;
        case BRIG_CTL_ACK: /* a supervisor dropped its clients (quiesce) */
            reg->v[i].pending = false;
            break;
        default:
            brig_warn("control channel: unexpected message %u", m.type);
            slot_close(reg, i);
            break;
        }
    }
}

void brig_handlers_sweep(brig_handlers *reg)
{
    size_t k = 0;
    for (size_t i = 0; i < reg->n; i++)
        if (reg->v[i].ctl >= 0)
            reg->v[k++] = reg->v[i];
    reg->n = k;
}

void brig_handlers_close_all(brig_handlers *reg)
{
    for (size_t i = 0; i < reg->n; i++)
        slot_close(reg, i);
    reg->n = 0;
}

void brig_handlers_quiesce(brig_handlers *reg)
{
    reg->quiet = true;
    for (size_t i = 0; i < reg->n; i++) {
        brig_reg_slot *s = &reg->v[i];
        if (s->ctl < 0)
            continue;
        s->pending = true;
        brig_ctl_msg m = {.type = BRIG_CTL_QUIESCE};
        /* A handler holds a client connection only while it serves it: it goes (its
         * channel's EOF says it is gone).  A supervisor keeps its process and its output. */
        if (s->pid == 0 || brig_ctl_send(s->ctl, &m, sizeof(m), -1, true) < 0) {
            if (s->handler > 0)
                kill(s->handler, SIGKILL);
            if (s->pid != 0) /* a supervisor we cannot tell: not waited for past its death */
                slot_close(reg, i);
        }
    }
}

bool brig_handlers_quiet(const brig_handlers *reg)
{
    for (size_t i = 0; i < reg->n; i++)
        if (reg->v[i].ctl >= 0 && reg->v[i].pending)
            return false;
    return true;
}

void brig_handlers_wake(brig_handlers *reg)
{
    reg->quiet = false;
    for (size_t i = 0; i < reg->n; i++)
        reg->v[i].pending = false;
}
