/*
 * microvm_host.c - what this host offers the microVM driver, found once at start-up: the
 * VMM, the guest kernel (scripts/setup-vm), hardware KVM or not, the TSC's frequency; and,
 * at the first microVM, the initramfs built from them (microvm_image.c).  What is missing becomes
 * the reason isolation "microvm" is refused (available), never a failed start of brigd.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "microvm_internal.h"
#include "util.h"

#define KERNEL_DIR_DEFAULT "/usr/lib/brig/vm" /* scripts/setup-vm */

/* Hardware KVM: /dev/kvm, and a CPU with virtualisation extensions, and not PVM (a
 * paravirtual KVM inside a VM that cannot run an ordinary guest kernel: vm-probe.md). */
static bool host_kvm(void)
{
    if (access("/dev/kvm", R_OK | W_OK) != 0 || access("/sys/module/kvm_pvm", F_OK) == 0)
        return false;
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (f == NULL)
        return false;
    char line[4096];
    bool ext = false;
    while (!ext && fgets(line, sizeof(line), f))
        if (strncmp(line, "flags", 5) == 0)
            ext = strstr(line, " vmx") || strstr(line, " svm");
    fclose(f);
    return ext;
}

/* The TSC's kHz: cpu MHz of /proc/cpuinfo (constant_tsc hosts: the TSC's rate). */
static long tsc_khz(void)
{
    FILE *f = fopen("/proc/cpuinfo", "re");
    if (f == NULL)
        return 0;
    char line[4096];
    double mhz = 0;
    while (mhz == 0 && fgets(line, sizeof(line), f))
        if (strncmp(line, "cpu MHz", 7) == 0 && strchr(line, ':'))
            mhz = strtod(strchr(line, ':') + 1, NULL);
    fclose(f);
    return (long)(mhz * 1000);
}

static void host_probe(microvm *m)
{
    char *why = NULL;
    _cleanup_free_ char *kernel = brig_asprintf("%s/vmlinuz", m->kernel_dir);
    _cleanup_free_ char *mods = brig_asprintf("%s/modules", m->kernel_dir);
    if (m->vmm->probe(m, &why) < 0) {
        m->missing = why;
    } else if (access(kernel, R_OK) != 0 || access(mods, R_OK) != 0) {
        m->missing = brig_asprintf("isolation 'microvm' needs its guest kernel in %s, which is "
                                   "not there (scripts/setup-vm unpacks Debian's cloud kernel)",
                                   m->kernel_dir);
    } else if (access(m->agent_path, R_OK) != 0 || access("/bin/busybox", X_OK) != 0) {
        m->missing = brig_asprintf("isolation 'microvm' needs brig-agent (%s) and busybox-static",
                                   m->agent_path);
    }
    if (m->missing)
        brig_info("runtime: %s", m->missing);
    else
        brig_info("runtime: microvm via %s (%s), guest kernel in %s%s", m->vmm_path, m->accel,
                  m->kernel_dir,
                  strcmp(m->accel, "tcg") == 0 ? "; emulated (microvm_accel = tcg): slow" : "");
}

/* The initramfs, built at the first microVM this brigd starts (not at start-up: most brigds
 * never run one); a failure is said each time and tried again. */
int brig_vm_ready(microvm *m, brig_error **err)
{
    pthread_mutex_lock(&m->lock);
    int r = m->initrd_built ? 0 : brig_vm_initrd_build(m, err);
    if (r == 0 && !m->initrd_built)
        brig_vm_memsnap_clear(m); /* taken with another brigd's initramfs and agent */
    if (r == 0)
        m->initrd_built = true;
    else
        brig_error_prefix(err, "isolation 'microvm': no initramfs");
    pthread_mutex_unlock(&m->lock);
    return r;
}

int brig_runtime_microvm_new(const brig_runtime_config *cfg, brig_runtime **out, brig_error **err)
{
    microvm *m = brig_xcalloc(1, sizeof(*m));
    m->cgroup = cfg->cgroup;
    m->vmm = &brig_vmm_qemu;
    m->state_dir = brig_xstrdup(cfg->state_dir);
    m->dir = brig_asprintf("%s/microvm", cfg->state_dir);
    m->kernel_dir = brig_xstrdup(cfg->microvm_kernel && *cfg->microvm_kernel ? cfg->microvm_kernel
                                                                             : KERNEL_DIR_DEFAULT);
    m->agent_path = brig_xstrdup(cfg->agent_path);
    m->accel = brig_xstrdup(cfg->microvm_accel ? cfg->microvm_accel : "kvm");
    m->host_kvm = host_kvm();
    m->tsc_khz = tsc_khz();
    m->memsnap = cfg->microvm_memsnap;
    pthread_mutex_init(&m->lock, NULL);
    pthread_mutex_init(&m->memsnap_lock, NULL);
    brig_runtime *rt = brig_xcalloc(1, sizeof(*rt));
    rt->ops = &brig_microvm_ops;
    rt->priv = m;
    _cleanup_free_ char *vms = brig_asprintf("%s/vms", m->dir);
    if ((mkdir(m->dir, 0700) < 0 && errno != EEXIST) || (mkdir(vms, 0711) < 0 && errno != EEXIST)) {
        brig_error_sys(err, "mkdir %s", vms);
        brig_runtime_free(rt);
        return -1;
    }
    host_probe(m);
    *out = rt;
    return 0;
}
