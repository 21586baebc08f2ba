/*
 * async.c - brig_async (client.h): several transfers (xfer.c) at once on a curl multi
 * handle, polled together with the caller's file descriptors.
 */
#include "client_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct brig_async {
    brig_client *c; /* not owned */
    CURLM *multi;   /* owned */
    xfer *running;  /* owned list */
};

brig_async *brig_async_new(brig_client *c)
{
    brig_async *a = brig_xcalloc(1, sizeof(*a));
    a->c = c;
    a->multi = curl_multi_init();
    if (a->multi == NULL) {
        fputs("brig: cannot initialise libcurl\n", stderr);
        abort();
    }
    return a;
}

void brig_async_free(brig_async *a)
{
    if (a == NULL)
        return;
    while (a->running != NULL) {
        xfer *x = a->running;
        a->running = x->next;
        curl_multi_remove_handle(a->multi, x->h);
        brig_xfer_dispose(x);
        free(x);
    }
    curl_multi_cleanup(a->multi);
    free(a);
}

/* Starts x (set up on its own handle) on the multi handle. */
static void async_start(brig_async *a, xfer *x)
{
    if (curl_multi_add_handle(a->multi, x->h) != CURLM_OK) {
        fputs("brig: cannot start a transfer\n", stderr);
        abort();
    }
    x->next = a->running;
    a->running = x;
}

static xfer *async_xfer(brig_async *a, const request *rq, brig_async_done_fn done, void *ctx)
{
    xfer *x = brig_xcalloc(1, sizeof(*x));
    CURL *h = curl_easy_init();
    if (h == NULL) {
        fputs("brig: cannot initialise libcurl\n", stderr);
        abort();
    }
    brig_xfer_setup(x, a->c, h, rq, NULL, NULL, ERROR_BODY_MAX);
    x->done = done;
    x->done_ctx = ctx;
    return x;
}

void brig_async_post(brig_async *a, const char *path, const char *content_type, const void *data,
                     size_t n, brig_async_done_fn done, void *ctx)
{
    void *copy = brig_xmalloc(n > 0 ? n : 1);
    if (n > 0)
        memcpy(copy, data, n);
    request rq = {.method = "POST",
                  .path = path,
                  .content_type = content_type,
                  .body = copy,
                  .body_len = n,
                  .timeout_ms = ASYNC_POST_TIMEOUT_MS};
    xfer *x = async_xfer(a, &rq, done, ctx);
    x->body_copy = copy;
    async_start(a, x);
}

void brig_async_stream(brig_async *a, const char *path, brig_event_fn fn, void *fn_ctx,
                       brig_async_done_fn done, void *ctx)
{
    request rq = {
        .method = "GET", .path = path, .accept = "application/x-ndjson", .long_lived = true};
    xfer *x = async_xfer(a, &rq, done, ctx);
    brig_xfer_stream(x, fn, fn_ctx);
    async_start(a, x);
}

/* Lets curl work, then finishes the transfers that are done. */
static int async_progress(brig_async *a, brig_error **err)
{
    int still = 0;
    CURLMcode mc = curl_multi_perform(a->multi, &still);
    if (mc != CURLM_OK)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "curl: %s", curl_multi_strerror(mc));
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(a->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        xfer **pp = &a->running;
        while (*pp != NULL && (*pp)->h != msg->easy_handle)
            pp = &(*pp)->next;
        if (*pp == NULL)
            continue;
        xfer *x = *pp;
        *pp = x->next;
        CURLcode rc = msg->data.result;
        curl_multi_remove_handle(a->multi, x->h);
        brig_error *xerr = NULL;
        int status = brig_xfer_result(x, rc, &xerr);
        brig_async_done_fn done = x->done;
        void *ctx = x->done_ctx;
        brig_xfer_dispose(x);
        free(x);
        if (done != NULL)
            done(status, xerr, ctx);
        brig_error_clear(&xerr);
    }
    int n = 0;
    for (xfer *x = a->running; x != NULL; x = x->next)
        n++;
    return n;
}

int brig_async_poll(brig_async *a, struct pollfd *fds, unsigned nfds, int timeout_ms,
                    brig_error **err)
{
    if (async_progress(a, err) < 0)
        return -1;
    struct curl_waitfd waits[8];
    if (nfds > BRIG_ARRAY_LEN(waits))
        nfds = BRIG_ARRAY_LEN(waits);
    for (unsigned i = 0; i < nfds; i++) {
        waits[i] = (struct curl_waitfd){.fd = fds[i].fd, .events = 0, .revents = 0};
        if (fds[i].events & POLLIN)
            waits[i].events |= CURL_WAIT_POLLIN;
        if (fds[i].events & POLLOUT)
            waits[i].events |= CURL_WAIT_POLLOUT;
        fds[i].revents = 0;
    }
    /* -1 ("forever") is a long wait: curl's own timers still wake it */
    CURLMcode mc =
        curl_multi_poll(a->multi, waits, nfds, timeout_ms < 0 ? 60000 : timeout_ms, NULL);
    if (mc != CURLM_OK)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "curl: %s", curl_multi_strerror(mc));
    /* curl reports POLLIN/POLLOUT/POLLPRI only (not POLLHUP, a pipe's EOF): ask
     * the kernel for the whole truth */
    if (nfds > 0 && poll(fds, nfds, 0) < 0 && errno != EINTR)
        return brig_error_sys(err, "poll");
    return async_progress(a, err);
}
