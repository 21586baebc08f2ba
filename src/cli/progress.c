/*
 * progress.c - a long transfer's progress on stderr (upload, download and their --recursive
 * forms): the bytes so far, of how many when the size is known, and the average rate,
 * redrawn in place at most five times a second once bytes move, then one last line with the
 * total (none when the transfer failed: the error follows the last state drawn, if any).
 *
 * Only when stderr is a terminal.  In a pipe, a file or a CI log brig prints nothing: a
 * meter redrawn with '\r' is noise there, and scripts read stderr for errors.  The line is
 * redrawn by padding over the previous one (no escape sequences), so a dumb terminal shows
 * it too.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "util.h"

#define REDRAW_MS 200

/* One meter: brig runs one transfer at a time. */
typedef struct meter {
    bool on;          /* drawing for a transfer now */
    bool up;          /* counting what is sent, else what is received */
    const char *what; /* "upload", "download" */
    int64_t start_ms; /* monotonic */
    int64_t drawn_ms; /* when the line was last drawn; 0: not yet */
    int64_t bytes, total;
    int width; /* of the line drawn last, to pad over */
} meter;

static meter m;

/* n bytes for people: "812 B", "12.3 MiB". */
static void human(int64_t n, char *buf, size_t size)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
    if (n < 1024) {
        snprintf(buf, size, "%lld B", (long long)n);
        return;
    }
    double v = (double)n / 1024;
    size_t u = 0;
    while (v >= 1024 && u + 1 < BRIG_ARRAY_LEN(units)) {
        v /= 1024;
        u++;
    }
    snprintf(buf, size, "%.1f %s", v, units[u]);
}

/* "12.3 MiB/s": the average since the start. */
static void rate(int64_t bytes, int64_t ms, char *buf, size_t size)
{
    char h[32];
    human((int64_t)((double)bytes * 1000 / (double)(ms > 0 ? ms : 1)), h, sizeof(h));
    snprintf(buf, size, "%s/s", h);
}

/* Draws text over the previous line; a newline after it when last. */
static void draw(const char *text, bool last)
{
    int n = (int)strlen(text);
    fprintf(stderr, "\r%s%*s%s", text, m.width > n ? m.width - n : 0, "", last ? "\n" : "");
    fflush(stderr);
    m.width = last ? 0 : n;
}

static void redraw(int64_t now)
{
    char done[32], total[32], r[40], line[160];
    human(m.bytes, done, sizeof(done));
    rate(m.bytes, now - m.start_ms, r, sizeof(r));
    if (m.total > 0) {
        human(m.total, total, sizeof(total));
        snprintf(line, sizeof(line), "brig: %s %s of %s (%d%%), %s", m.what, done, total,
                 (int)(m.bytes * 100 / m.total), r);
    } else {
        snprintf(line, sizeof(line), "brig: %s %s, %s", m.what, done, r);
    }
    draw(line, false);
    m.drawn_ms = now;
}

static void on_progress(int64_t down, int64_t down_total, int64_t up, int64_t up_total, void *ctx)
{
    (void)ctx;
    m.bytes = m.up ? up : down;
    m.total = m.up ? up_total : down_total;
    int64_t now = brig_now_mono_ms();
    if (m.bytes > 0 && now - (m.drawn_ms ? m.drawn_ms : m.start_ms) >= REDRAW_MS)
        redraw(now);
}

void cli_progress_begin(brig_client *c, bool up, const char *what)
{
    if (!isatty(2))
        return;
    m = (meter){.on = true, .up = up, .what = what, .start_ms = brig_now_mono_ms()};
    brig_client_set_progress(c, on_progress, NULL);
}

void cli_progress_end(brig_client *c, bool ok)
{
    if (!m.on)
        return;
    brig_client_set_progress(c, NULL, NULL);
    m.on = false;
    if (!ok) {
        if (m.drawn_ms != 0)
            fputc('\n', stderr); /* keep the last state; a message follows */
        return;
    }
    int64_t ms = brig_now_mono_ms() - m.start_ms;
    char done[32], r[40], line[160];
    human(m.bytes, done, sizeof(done));
    rate(m.bytes, ms, r, sizeof(r));
    snprintf(line, sizeof(line), "brig: %s %s in %.1f s, %s", m.up ? "sent" : "received", done,
             (double)ms / 1000, r);
    draw(line, true);
}
