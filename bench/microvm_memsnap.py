#!/usr/bin/env python3
"""bench/microvm_memsnap.py - what a microVM memory snapshot costs, measured beside brig
(brig starts VMs so with microvm_memsnap = on: bench/microvm.py --memsnap; docs/snapshots.md):
a VM booted the way brigd boots one (QEMU's microvm
machine, Debian's cloud kernel, brigd's initramfs, the template's disk image under a qcow2
overlay, -sandbox on), its agent answering; then QMP stop, the RAM migrated to a file through
a descriptor passed over QMP (getfd + migrate fd:), QEMU killed; then a new QEMU with the same
line and -incoming defer, migrate-incoming from the file, cont, until the agent answers a
HELLO again.  Prints boot, save, restore times and the file's size, N times.

  bench/microvm_memsnap.py --initrd <state>/microvm/initrd.cpio [--accel tcg] [-n 3]

The initramfs is the one brigd built (it builds it at its first microVM).  Run as root in a
network namespace of its own (unshare -n): the agent's port is 127.0.0.1:5000 there."""
import argparse
import glob
import json
import os
import socket
import statistics
import struct
import subprocess
import tempfile
import time

KERNEL = "/usr/lib/brig/vm/vmlinuz"


def tsc_khz():
    for line in open("/proc/cpuinfo"):
        if line.startswith("cpu MHz"):
            return int(float(line.split(":")[1]) * 1000)
    return 0


def qemu(a, d, qmp, extra):
    tcg = a.accel == "tcg"
    accel = ["-accel", "tcg,thread=multi,tb-size=64"] if tcg else ["-accel", "kvm", "-cpu", "host"]
    return ["qemu-system-x86_64", "-M", "microvm"] + accel + [
        "-m", str(a.memory_mib), "-smp", "1", "-nodefaults", "-no-user-config", "-no-reboot",
        "-display", "none", "-monitor", "none",
        "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
        "-kernel", KERNEL, "-initrd", a.initrd,
        "-append", "console=ttyS0 reboot=t panic=-1 quiet"
        + (f" tsc_early_khz={tsc_khz()}" if tcg else ""),
        "-chardev", f"file,id=con,path={d}/console.log", "-serial", "chardev:con",
        "-chardev", f"socket,id=qmp,path={qmp},server=on,wait=off",
        "-mon", "chardev=qmp,mode=control",
        "-drive", f"id=root,file={d}/disk.qcow2,format=qcow2,if=none,cache=unsafe",
        "-device", "virtio-blk-device,drive=root,serial=brigroot",
        "-device", "virtio-rng-device",
        "-netdev", "user,id=agent,restrict=on,hostfwd=tcp:127.0.0.1:5000-:5000",
        "-device", "virtio-net-device,netdev=agent,mac=52:54:00:00:00:01"] + extra


class Qmp:
    def __init__(self, path):
        for _ in range(400):
            try:
                self.s = socket.socket(socket.AF_UNIX)
                self.s.connect(path)
                break
            except OSError:
                time.sleep(0.025)
        self.f = self.s.makefile("r")
        self.read()
        self.cmd("qmp_capabilities")

    def read(self):
        while True:
            m = json.loads(self.f.readline())
            if "event" not in m:
                return m

    def cmd(self, name, fds=None, **args):
        msg = json.dumps({"execute": name, "arguments": args} if args else
                         {"execute": name}).encode()
        if fds:
            socket.send_fds(self.s, [msg], fds)
        else:
            self.s.sendall(msg)
        m = self.read()
        if "error" in m:
            raise RuntimeError(f"{name}: {m['error']}")
        return m["return"]


def agent_answers(timeout):
    """A HELLO answered by a HELLO (docs/protocol.md)."""
    hello = json.dumps({"proto": "brig-agent", "version": 1, "min_version": 1}).encode()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", 5000), timeout=0.5) as c:
                c.settimeout(0.5)
                c.sendall(struct.pack(">IBBH", len(hello), 1, 0, 0) + hello)
                got = c.recv(8)
                if len(got) >= 5 and got[4] == 1:
                    return True
        except OSError:
            pass
        time.sleep(0.02)
    return False


def once(a, d):
    image = sorted(glob.glob(f"{a.cache}/{a.template}/*/rootfs.*M.ext4"))[0]
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", image,
                    f"{d}/disk.qcow2"], check=True)
    t = time.monotonic()
    p = subprocess.Popen(qemu(a, d, f"{d}/q1.sock", []))
    q = Qmp(f"{d}/q1.sock")
    assert agent_answers(120), "the VM did not boot"
    boot = time.monotonic() - t
    t = time.monotonic()
    q.cmd("stop")
    fd = os.open(f"{d}/mem.img", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    q.cmd("getfd", fds=[fd], fdname="out")
    os.close(fd)
    q.cmd("migrate", uri="fd:out")
    while (st := q.cmd("query-migrate").get("status")) not in ("completed", "failed"):
        time.sleep(0.01)
    assert st == "completed", st
    save = time.monotonic() - t
    p.kill()
    p.wait()
    t = time.monotonic()
    p = subprocess.Popen(qemu(a, d, f"{d}/q2.sock", ["-incoming", "defer"]))
    q = Qmp(f"{d}/q2.sock")
    fd = os.open(f"{d}/mem.img", os.O_RDONLY)
    q.cmd("getfd", fds=[fd], fdname="in")
    os.close(fd)
    q.cmd("migrate-incoming", uri="fd:in")
    while q.cmd("query-status")["status"] == "inmigrate":
        time.sleep(0.01)
    q.cmd("cont")
    assert agent_answers(60), "the restored VM's agent did not answer"
    restore = time.monotonic() - t
    size = os.path.getsize(f"{d}/mem.img") >> 20
    p.kill()
    p.wait()
    return boot, save, restore, size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--initrd", required=True)
    ap.add_argument("--accel", default="kvm", choices=("kvm", "tcg"))
    ap.add_argument("--cache", default="/var/cache/brig/templates")
    ap.add_argument("--template", default="minimal")
    ap.add_argument("--memory-mib", type=int, default=512)
    ap.add_argument("-n", type=int, default=3)
    a = ap.parse_args()
    runs = []
    for _ in range(a.n):
        with tempfile.TemporaryDirectory(prefix="brig-memsnap-") as d:
            runs.append(once(a, d))
    for i, name in enumerate(["boot to agent, s", "save (stop + RAM to file), s",
                              "restore to agent, s", "RAM file, MiB"]):
        xs = sorted(r[i] for r in runs)
        print(f"{name:32} {xs[0]:8.2f} {statistics.median(xs):8.2f} {xs[-1]:8.2f}   (n={len(xs)})")


if __name__ == "__main__":
    main()
