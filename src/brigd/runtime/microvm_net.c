/*
 * microvm_net.c - a microVM's network: the sandbox's own, unchanged.
 *
 * The sandbox's network namespace gets its link from brigd's network layer as any sandbox's
 * does (runtime.h's net_first, before the VM starts): eth0, sb/31, default route via gw, the
 * veth whose host end carries the firewall, the DNS proxy and the network log.  Here a tap
 * device joins eth0 in a bridge inside that namespace, and eth0's address moves to the guest:
 * the guest's NIC takes eth0's MAC address and the guest's /init its IPv4 address and route
 * (the kernel command line), so what the host side sees is what it saw of a container.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "microvm_internal.h"
#include "spawn.h"
#include "util.h"

typedef struct net_job {
    int netns;
    brig_vm_net *out;
    int err; /* errno; ENODEV: the namespace has no eth0 (networking off) */
} net_job;

/* The default route's gateway of this thread's namespace, or 0. */
static uint32_t default_gw(void)
{
    FILE *f = fopen("/proc/thread-self/net/route", "re");
    if (f == NULL)
        return 0;
    char line[256], ifn[32];
    unsigned dst, gw;
    uint32_t found = 0;
    while (!found && fgets(line, sizeof(line), f))
        if (sscanf(line, "%31s %x %x", ifn, &dst, &gw) == 3 && dst == 0 && gw != 0)
            found = gw; /* network byte order, as the kernel prints it */
    fclose(f);
    return found;
}

static void *net_thread(void *arg)
{
    net_job *j = arg;
    if (setns(j->netns, CLONE_NEWNET) < 0) {
        j->err = errno;
        return NULL;
    }
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = {0};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "eth0");
    if (s < 0 || ioctl(s, SIOCGIFADDR, &ifr) < 0) {
        j->err = errno;
        goto out;
    }
    j->out->addr = ((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr.s_addr;
    if (ioctl(s, SIOCGIFHWADDR, &ifr) < 0) {
        j->err = errno;
        goto out;
    }
    memcpy(j->out->mac, ifr.ifr_hwaddr.sa_data, 6);
    j->out->gw = default_gw();
    /* The tap, made here so that it lives in the namespace; its fd goes to the VMM. */
    j->out->tap_fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
    struct ifreq t = {.ifr_flags = IFF_TAP | IFF_NO_PI};
    snprintf(t.ifr_name, sizeof(t.ifr_name), "tap0");
    if (j->out->tap_fd < 0 || ioctl(j->out->tap_fd, TUNSETIFF, &t) < 0)
        j->err = errno;
out:
    if (s >= 0)
        close(s);
    return NULL;
}

/* eth0 and tap0 in a bridge, eth0 without its address and with another MAC (the guest takes
 * eth0's); run inside the namespace by nsenter. */
static const char bridge_script[] =
    "set -e; ip addr flush dev eth0; ip link set eth0 down; "
    "ip link set eth0 address 02:00:00:00:00:01; ip link add br0 type bridge; "
    "ip link set eth0 master br0; ip link set tap0 master br0; "
    "ip link set tap0 up; ip link set eth0 up; ip link set br0 up";

int brig_vm_net_setup(int netns, brig_vm_net *out, brig_error **err)
{
    *out = (brig_vm_net){.tap_fd = -1};
    net_job j = {netns, out, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, net_thread, &j) != 0)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "start a thread");
    pthread_join(t, NULL);
    if (j.err == ENODEV && out->tap_fd < 0) {
        brig_debug("microvm: no eth0 in the sandbox's namespace: the guest gets no network");
        return 0; /* no link: networking is off, the guest gets none */
    }
    if (j.err != 0 || out->gw == 0) {
        brig_vm_net_dispose(out);
        return brig_error_set(err, BRIG_E_INTERNAL, j.err, "the VM's network: %s",
                              j.err ? strerror(j.err) : "no default route");
    }
    const char *argv[] = {"nsenter", "--net=/proc/self/fd/3", "--", "/bin/sh",
                          "-c",      bridge_script,           NULL};
    int extra[] = {netns};
    brig_spawn s = {.argv = argv,
                    .stdin_fd = -1,
                    .stdout_fd = -1,
                    .stderr_fd = -1,
                    .extra_fds = extra,
                    .n_extra = 1};
    pid_t pid;
    if (brig_proc_spawn(&s, &pid, err) < 0) {
        brig_vm_net_dispose(out);
        return -1;
    }
    int st = brig_proc_wait(pid);
    if (st != 0) {
        brig_vm_net_dispose(out);
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "the VM's network: bridging failed");
    }
    return 0;
}

void brig_vm_net_dispose(brig_vm_net *n)
{
    if (n->tap_fd >= 0)
        close(n->tap_fd);
    n->tap_fd = -1;
}

char *brig_vm_net_cmdline(const brig_vm_net *n)
{
    if (n->tap_fd < 0)
        return brig_xstrdup("");
    char a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &n->addr, a, sizeof(a));
    inet_ntop(AF_INET, &n->gw, g, sizeof(g));
    return brig_asprintf(" brig.ip=%s brig.gw=%s brig.mac=%02x:%02x:%02x:%02x:%02x:%02x", a, g,
                         n->mac[0], n->mac[1], n->mac[2], n->mac[3], n->mac[4], n->mac[5]);
}

/* ---- the sandbox's namespace itself ---------------------------------------------------- */

typedef struct ns_job {
    int netns; /* in: enter this one; -1: make a new one (lo up) */
    int fd;    /* out: the new namespace's fd, or a TCP socket made inside it; -errno */
} ns_job;

/* A thread of its own: unshare/setns(CLONE_NEWNET) moves only the calling thread. */
static void *ns_thread(void *arg)
{
    ns_job *j = arg;
    if (j->netns >= 0) {
        if (setns(j->netns, CLONE_NEWNET) < 0)
            j->fd = -errno;
        else if ((j->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
            j->fd = -errno;
        return NULL;
    }
    if (unshare(CLONE_NEWNET) < 0) {
        j->fd = -errno;
        return NULL;
    }
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr = {.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING};
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    if (s < 0 || ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
        j->fd = -errno;
    else if ((j->fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0)
        j->fd = -errno;
    if (s >= 0)
        close(s);
    return NULL;
}

int brig_vm_netns_run(int netns, brig_error **err)
{
    ns_job j = {netns, -EAGAIN};
    pthread_t t;
    if (pthread_create(&t, NULL, ns_thread, &j) != 0)
        return brig_error_set(err, BRIG_E_INTERNAL, 0, "start a thread");
    pthread_join(t, NULL);
    if (j.fd < 0)
        return brig_error_set(err, BRIG_E_INTERNAL, -j.fd, "network namespace: %s",
                              strerror(-j.fd));
    return j.fd;
}
