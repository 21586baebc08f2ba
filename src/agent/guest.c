/*
 * guest.c - the `guest_sync` operation (docs/protocol.md): what brigd tells the agent of a
 * microVM when the guest comes back from a pause or starts from a memory snapshot.
 *
 * A guest's clock stands still while its VM is stopped (its virtual time stops with its
 * vCPUs), and a VM restored from a memory snapshot wakes with the snapshot's clock, entropy
 * pool and (none of the) sandbox's network: so the host's time is set (CLOCK_REALTIME), fresh
 * bytes are mixed into the kernel's pool and a reseed forced (every VM restored from one
 * snapshot would otherwise draw the same random numbers), and the sandbox's link is given its
 * MAC, address and default route.  Inside a container the agent has none of the capabilities
 * this needs: the answer is then `permission` (brigd sends it to microVMs only).
 */
#include "agent.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/random.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static int set_clock(int64_t ns, brig_error **err)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    if (clock_settime(CLOCK_REALTIME, &ts) < 0)
        return brig_error_sys(err, "clock_settime");
    return 0;
}

static int hexval(char c)
{
    return c <= '9' ? c - '0' : c - 'a' + 10;
}

/* The seed (64 hex digits, checked by the decoder) credited to the pool, then a reseed. */
static int reseed(const char *seed, brig_error **err)
{
    uint32_t words[2 + 8]; /* struct rand_pool_info: two ints, then 32 bytes */
    struct rand_pool_info *info = (struct rand_pool_info *)words;
    unsigned char bytes[32];
    for (size_t i = 0; i < sizeof(bytes); i++)
        bytes[i] = (unsigned char)(hexval(seed[2 * i]) << 4 | hexval(seed[2 * i + 1]));
    info->entropy_count = 8 * (int)sizeof(bytes);
    info->buf_size = (int)sizeof(bytes);
    memcpy(info->buf, bytes, sizeof(bytes));
    int fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
    int rc = 0;
    if (fd < 0)
        rc = brig_error_sys(err, "open /dev/urandom");
    else if (ioctl(fd, RNDADDENTROPY, info) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0)
        rc = brig_error_sys(err, "reseed the guest's random pool");
    if (fd >= 0)
        close(fd);
    sodium_memzero(words, sizeof(words));
    sodium_memzero(bytes, sizeof(bytes));
    return rc;
}

/* The name of the interface whose MAC is mac, into name[IFNAMSIZ]. */
static int nic_by_mac(const char *mac, char *name, brig_error **err)
{
    DIR *d = opendir("/sys/class/net");
    if (d == NULL)
        return brig_error_sys(err, "open /sys/class/net");
    struct dirent *e;
    bool found = false;
    while (!found && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= IFNAMSIZ)
            continue;
        char path[320], addr[32] = {0};
        snprintf(path, sizeof(path), "/sys/class/net/%s/address", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t r = fd >= 0 ? read(fd, addr, sizeof(addr) - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (r >= 17 && strncmp(addr, mac, 17) == 0) {
            snprintf(name, IFNAMSIZ, "%s", e->d_name);
            found = true;
        }
    }
    closedir(d);
    return found ? 0 : brig_error_set(err, BRIG_E_NOT_FOUND, 0, "no NIC has MAC %s", mac);
}

static void put_in(struct sockaddr *sa, const char *ip)
{
    struct sockaddr_in *in = (struct sockaddr_in *)sa;
    *in = (struct sockaddr_in){.sin_family = AF_INET};
    inet_pton(AF_INET, ip, &in->sin_addr);
}

/* The link as the guest's /init sets it at a boot (microvm_image.c): ip/31, up, default
 * route via gw; first its MAC, while it is down. */
static int set_net(const brig_guest_req *g, brig_error **err)
{
    struct ifreq ifr = {0};
    if (nic_by_mac(g->nic, ifr.ifr_name, err) < 0)
        return -1;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return brig_error_sys(err, "socket");
    ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
    for (int i = 0; i < 6; i++)
        ifr.ifr_hwaddr.sa_data[i] = (char)(hexval(g->mac[3 * i]) << 4 | hexval(g->mac[3 * i + 1]));
    int rc = -1;
    struct rtentry rt = {.rt_flags = RTF_UP | RTF_GATEWAY};
    if (ioctl(s, SIOCSIFHWADDR, &ifr) < 0) {
        brig_error_sys(err, "set the MAC of %s", ifr.ifr_name);
        goto out;
    }
    put_in(&ifr.ifr_addr, g->ip);
    if (ioctl(s, SIOCSIFADDR, &ifr) < 0) {
        brig_error_sys(err, "set the address of %s", ifr.ifr_name);
        goto out;
    }
    put_in(&ifr.ifr_netmask, "255.255.255.254");
    if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
        brig_error_sys(err, "set the netmask of %s", ifr.ifr_name);
        goto out;
    }
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) {
        brig_error_sys(err, "bring %s up", ifr.ifr_name);
        goto out;
    }
    put_in(&rt.rt_dst, "0.0.0.0");
    put_in(&rt.rt_genmask, "0.0.0.0");
    put_in(&rt.rt_gateway, g->gw);
    rt.rt_dev = ifr.ifr_name;
    if (ioctl(s, SIOCADDRT, &rt) < 0 && errno != EEXIST) {
        brig_error_sys(err, "the default route via %s", g->gw);
        goto out;
    }
    rc = 0;
out:
    close(s);
    return rc;
}

int brig_agent_guest_sync(brig_agent_conn *c, json_t *req, const brig_agent_req *q,
                          brig_error **err)
{
    (void)req;
    const brig_guest_req *g = &q->u.guest;
    if ((g->seed && reseed(g->seed, err) < 0) || set_clock(g->realtime_ns, err) < 0 ||
        (g->net && set_net(g, err) < 0))
        return -1;
    c->replied = true;
    return brig_agent_send_json(c, brig_agentproto_message(BRIG_REPLY_OK), err);
}

/* fs_freeze: the guest's root file system flushed and frozen (FIFREEZE: every write so far
 * on its disk, none more until the thaw) while brigd copies the VM's disk, or thawed.  Again
 * is fine: a frozen root stays frozen, a thawed one thawed. */
int brig_agent_fs_freeze(brig_agent_conn *c, json_t *req, const brig_agent_req *q, brig_error **err)
{
    (void)req;
    if (q->u.freeze)
        sync();
    int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return brig_error_sys(err, "open /");
    int r = ioctl(fd, q->u.freeze ? FIFREEZE : FITHAW, 0);
    int e = errno;
    close(fd);
    if (r < 0 && !(q->u.freeze ? e == EBUSY : e == EINVAL)) {
        errno = e;
        return brig_error_sys(err, "%s /", q->u.freeze ? "freeze" : "thaw");
    }
    c->replied = true;
    return brig_agent_send_json(c, brig_agentproto_message(BRIG_REPLY_OK), err);
}
