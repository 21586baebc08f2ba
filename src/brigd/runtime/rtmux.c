/*
 * rtmux.c - the driver brigd runs (runtime.h): a sandbox of isolation "microvm" goes to
 * the microVM driver, every other one to the OCI driver (container, gvisor).  A handle
 * remembers its driver; an op given only an id asks the microVM driver whether it holds
 * that sandbox (its directory), else the OCI driver answers.  Volumes are the OCI
 * driver's (a microVM mounts their images as disks: microvm_vol.c).
 *
 * A handle also keeps the sandbox's spare agent connections (spareconn.h), whatever its
 * driver: connect hands one out before it opens a new one, and none is kept across a pause
 * or past a kill or destroy.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"
#include "spareconn.h"
#include "util.h"

bool brig_microvm_has(brig_runtime *rt, const char *id); /* microvm.c */

typedef struct mux {
    brig_runtime *oci;
    brig_runtime *vm;
} mux;

/* A handle: its driver's own, which driver, and the spare connections. */
typedef struct mux_sb {
    brig_runtime *rt;
    brig_rt_sandbox *sb;
    brig_spareconn spares;
} mux_sb;

#define MUX(rt)       ((mux *)(rt)->priv)
#define INNER(h)      (((mux_sb *)(h))->sb)
#define DRIVER(h)     (((mux_sb *)(h))->rt)
#define SPARES(h)     (&((mux_sb *)(h))->spares)
#define BY_ID(rt, id) (brig_microvm_has(MUX(rt)->vm, id) ? MUX(rt)->vm : MUX(rt)->oci)

static brig_rt_sandbox *wrap(brig_runtime *rt, brig_rt_sandbox *sb)
{
    mux_sb *h = brig_xcalloc(1, sizeof(*h));
    h->rt = rt;
    h->sb = sb;
    brig_spareconn_init(&h->spares);
    return (brig_rt_sandbox *)h;
}

static int x_available(brig_runtime *rt, brig_isolation iso, brig_error **err)
{
    brig_runtime *d = iso == BRIG_ISO_MICROVM ? MUX(rt)->vm : MUX(rt)->oci;
    return d->ops->available(d, iso, err);
}

static int x_create(brig_runtime *rt, const brig_rt_spec *spec, brig_rt_sandbox **out,
                    brig_error **err)
{
    brig_runtime *d = spec->isolation == BRIG_ISO_MICROVM ? MUX(rt)->vm : MUX(rt)->oci;
    brig_rt_sandbox *sb = NULL;
    if (d->ops->create(d, spec, &sb, err) < 0)
        return -1;
    *out = wrap(d, sb);
    return 0;
}

static int x_attach(brig_runtime *rt, const char *id, brig_rt_sandbox **out, brig_error **err)
{
    brig_runtime *d = BY_ID(rt, id);
    brig_rt_sandbox *sb = NULL;
    if (d->ops->attach(d, id, &sb, err) < 0)
        return -1;
    *out = wrap(d, sb);
    return 0;
}

static int x_connect(brig_runtime *rt, brig_rt_sandbox *h, brig_error **err)
{
    (void)rt;
    int fd = brig_spareconn_take(SPARES(h));
    return fd >= 0 ? fd : DRIVER(h)->ops->connect(DRIVER(h), INNER(h), err);
}

static int x_spares(brig_runtime *rt, brig_rt_sandbox *h, int want, brig_error **err)
{
    (void)rt;
    if (want <= 0) {
        brig_spareconn_close(SPARES(h), false);
        return 0;
    }
    if (DRIVER(h)->ops->connect_begin == NULL)
        return 0;
    int n;
    while ((n = brig_spareconn_count(SPARES(h))) < want && n < BRIG_SPARECONN_MAX) {
        int fd = DRIVER(h)->ops->connect_begin(DRIVER(h), INNER(h), err);
        if (fd < 0)
            return -1;
        if (!brig_spareconn_keep(SPARES(h), fd)) { /* paused or ending meanwhile */
            close(fd);
            break;
        }
    }
    return brig_spareconn_count(SPARES(h));
}

static int x_destroy(brig_runtime *rt, const char *id, brig_rt_sandbox *h, brig_error **err)
{
    brig_runtime *d = h ? DRIVER(h) : BY_ID(rt, id);
    if (h)
        brig_spareconn_close(SPARES(h), true);
    return d->ops->destroy(d, id, h ? INNER(h) : NULL, err);
}

static int x_kill(brig_runtime *rt, brig_rt_sandbox *h, int timeout_ms)
{
    (void)rt;
    if (h == NULL)
        return 0;
    brig_spareconn_close(SPARES(h), true);
    return DRIVER(h)->ops->kill(DRIVER(h), INNER(h), timeout_ms);
}

static int x_exit_fd(brig_runtime *rt, brig_rt_sandbox *h)
{
    (void)rt;
    return h ? DRIVER(h)->ops->exit_fd(DRIVER(h), INNER(h)) : -1;
}

static int x_netns(brig_runtime *rt, brig_rt_sandbox *h, brig_error **err)
{
    (void)rt;
    return DRIVER(h)->ops->netns(DRIVER(h), INNER(h), err);
}

static void x_release(brig_runtime *rt, brig_rt_sandbox *h)
{
    (void)rt;
    if (h == NULL)
        return;
    brig_spareconn_dispose(SPARES(h));
    DRIVER(h)->ops->release(DRIVER(h), INNER(h));
    free(h);
}

static int x_stats(brig_runtime *rt, brig_rt_sandbox *h, brig_rt_stats *out)
{
    (void)rt;
    if (h == NULL) {
        *out = (brig_rt_stats){-1, -1, -1, -1, -1, -1};
        return -1;
    }
    return DRIVER(h)->ops->stats(DRIVER(h), INNER(h), out);
}

static void x_events(brig_runtime *rt, const char *id, brig_rt_events *out)
{
    brig_runtime *d = BY_ID(rt, id);
    d->ops->events(d, id, out);
}

static void x_last_words(brig_runtime *rt, const char *id, char *buf, size_t n)
{
    brig_runtime *d = BY_ID(rt, id);
    d->ops->last_words(d, id, buf, n);
}

static int x_volume_make(brig_runtime *rt, const char *id, int64_t size_mib, brig_error **err)
{
    return MUX(rt)->oci->ops->volume_make(MUX(rt)->oci, id, size_mib, err);
}

static int x_volume_remove(brig_runtime *rt, const char *id, brig_error **err)
{
    return MUX(rt)->oci->ops->volume_remove(MUX(rt)->oci, id, err);
}

static int x_volume_unmount(brig_runtime *rt, const char *id, brig_error **err)
{
    return MUX(rt)->oci->ops->volume_unmount(MUX(rt)->oci, id, err);
}

static int x_volume_list(brig_runtime *rt, char ***ids, size_t *n, brig_error **err)
{
    return MUX(rt)->oci->ops->volume_list(MUX(rt)->oci, ids, n, err);
}

static int x_layer_open(brig_runtime *rt, brig_rt_sandbox *h, brig_error **err)
{
    (void)rt;
    return DRIVER(h)->ops->layer_open(DRIVER(h), INNER(h), err);
}

/* A paused agent answers nothing, and gVisor's checkpoint needs every connection closed
 * (docs/snapshots.md): the spares go first. */
static int x_pause(brig_runtime *rt, brig_rt_sandbox *h, const char **memory, brig_error **err)
{
    (void)rt;
    brig_spareconn_close(SPARES(h), true);
    int r = DRIVER(h)->ops->pause(DRIVER(h), INNER(h), memory, err);
    if (r < 0) /* it runs on */
        brig_spareconn_allow(SPARES(h));
    return r;
}

static int x_resume(brig_runtime *rt, brig_rt_sandbox *h, brig_error **err)
{
    (void)rt;
    int r = DRIVER(h)->ops->resume(DRIVER(h), INNER(h), err);
    if (r == 0)
        brig_spareconn_allow(SPARES(h));
    return r;
}

static int x_paused(brig_runtime *rt, const char *id)
{
    brig_runtime *d = BY_ID(rt, id);
    return d->ops->paused(d, id);
}

static int x_snapshot_take(brig_runtime *rt, brig_rt_sandbox *h, const char *id, bool durable,
                           char digest[65], int64_t *bytes, brig_error **err)
{
    (void)rt;
    return DRIVER(h)->ops->snapshot_take(DRIVER(h), INNER(h), id, durable, digest, bytes, err);
}

static int x_snapshot_memory(brig_runtime *rt, brig_rt_sandbox *h, const char *id, bool durable,
                             char digest[65], int64_t *bytes, brig_error **err)
{
    (void)rt;
    if (DRIVER(h)->ops->snapshot_memory == NULL)
        return brig_error_set(err, BRIG_E_INVALID, 0,
                              "only a gVisor sandbox's memory can go into a fork");
    /* runsc's checkpoint, like a pause's, needs every agent connection closed */
    brig_spareconn_close(SPARES(h), true);
    int r = DRIVER(h)->ops->snapshot_memory(DRIVER(h), INNER(h), id, durable, digest, bytes, err);
    brig_spareconn_allow(SPARES(h)); /* it runs on either way */
    return r;
}

/* Snapshots are the OCI driver's alone (a microVM refuses to take one). */
static int x_snapshot_remove(brig_runtime *rt, const char *id, brig_error **err)
{
    return MUX(rt)->oci->ops->snapshot_remove(MUX(rt)->oci, id, err);
}

static int x_snapshot_list(brig_runtime *rt, char ***ids, size_t *n, brig_error **err)
{
    return MUX(rt)->oci->ops->snapshot_list(MUX(rt)->oci, ids, n, err);
}

/* Both drivers' ids (a sandbox is held by one of them only). */
static int x_list(brig_runtime *rt, char ***ids, size_t *n, brig_error **err)
{
    char **a = NULL, **b = NULL;
    size_t na = 0, nb = 0;
    if (MUX(rt)->oci->ops->list(MUX(rt)->oci, &a, &na, err) < 0)
        return -1;
    if (MUX(rt)->vm->ops->list(MUX(rt)->vm, &b, &nb, err) < 0) {
        for (size_t i = 0; i < na; i++)
            free(a[i]);
        free(a);
        return -1;
    }
    a = brig_xrealloc(a, (na + nb + 1) * sizeof(char *));
    for (size_t i = 0; i < nb; i++)
        a[na + i] = b[i];
    free(b);
    *ids = a;
    *n = na + nb;
    return 0;
}

static const char *x_accel(brig_runtime *rt, brig_isolation iso)
{
    brig_runtime *d = iso == BRIG_ISO_MICROVM ? MUX(rt)->vm : MUX(rt)->oci;
    return d->ops->accel ? d->ops->accel(d, iso) : NULL;
}

static void x_free(brig_runtime *rt)
{
    brig_runtime_free(MUX(rt)->oci);
    brig_runtime_free(MUX(rt)->vm);
    free(rt->priv);
    free(rt);
}

static const brig_runtime_ops mux_ops = {
    .name = "mux",
    .available = x_available,
    .create = x_create,
    .attach = x_attach,
    .connect = x_connect,
    .spares = x_spares,
    .destroy = x_destroy,
    .kill = x_kill,
    .exit_fd = x_exit_fd,
    .netns = x_netns,
    .release = x_release,
    .stats = x_stats,
    .events = x_events,
    .last_words = x_last_words,
    .volume_make = x_volume_make,
    .volume_remove = x_volume_remove,
    .volume_unmount = x_volume_unmount,
    .volume_list = x_volume_list,
    .layer_open = x_layer_open,
    .pause = x_pause,
    .resume = x_resume,
    .paused = x_paused,
    .snapshot_take = x_snapshot_take,
    .snapshot_memory = x_snapshot_memory,
    .snapshot_remove = x_snapshot_remove,
    .snapshot_list = x_snapshot_list,
    .list = x_list,
    .accel = x_accel,
    .free = x_free,
};

int brig_runtime_mux_new(const brig_runtime_config *cfg, brig_runtime **out, brig_error **err)
{
    mux *m = brig_xcalloc(1, sizeof(*m));
    if (brig_runtime_oci_new(cfg, &m->oci, err) < 0 ||
        brig_runtime_microvm_new(cfg, &m->vm, err) < 0) {
        brig_runtime_free(m->oci);
        free(m);
        return -1;
    }
    brig_runtime *rt = brig_xcalloc(1, sizeof(*rt));
    rt->ops = &mux_ops;
    rt->priv = m;
    *out = rt;
    return 0;
}
