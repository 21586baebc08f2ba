#!/usr/bin/python3
"""The alternatives to two of brigd's design choices, measured on this host
(issue 4: "measure and choose; document it"; the results and the reasoning are
in docs/benchmarks.md, "Alternatives measured").

(a) Template files readable under each sandbox's id mapping.  brigd mounts the
    template id-mapped (open_tree / mount_setattr / move_mount,
    src/brigd/runtime/idmap.c).  The alternative is a copy of the template rootfs
    per uid range with every owner shifted by +uid_base.  Measured: the `base`
    template's size and file count; `cp -a` of it plus an lchown of every entry
    (+ a chmod where chown cleared a set-id bit), the writeback (syncfs) and the
    `rm -rf`; the same as a reflink copy on XFS; the disk space per copy; against
    the id-mapped mount, timed by bench/prep.c (brigd's calls, compiled at run
    time as bench/run.py does) on the same template.

(b) A bounded disk per sandbox.  brigd copies a golden ext4 image (sparse),
    attaches it to a loop device and mounts it (src/brigd/runtime/disk.c); timed
    again here by bench/prep.c, standalone on a golden image made with brigd's
    mkfs.ext4 options.  The alternative is one XFS for all sandboxes with a
    project quota per sandbox: per create mkdir + a project id
    (FS_IOC_FSSETXATTR with PROJINHERIT, from Python's fcntl.ioctl, as brigd would
    do it in C) + a block and inode hard limit (quotactl Q_XSETQLIM through
    ctypes); per delete `rm -rf` + clearing the limit.  The same through the
    `xfs_quota -x -c 'project -s ...'` / `'limit -p ...'` command line is timed
    too.  Where the kernel has XFS quota support the script also checks that a
    project's block and inode limits end in EDQUOT and that a full shared file
    system hits a sandbox still under its own limit; where it has none (the
    mount with -o prjquota fails) it says so and times what still works.

Needs: root, Debian's python3 (standard library only), cc (for bench/prep.c),
mkfs.ext4, losetup, and xfsprogs (mkfs.xfs, xfs_quota) for part (b) — not a
dependency of brig, install it for this measurement only:
`apt-get install -y xfsprogs` (or pass --install-xfsprogs).

    /usr/bin/python3 bench/alternatives.py                 # ~2 minutes on 2 cores
    /usr/bin/python3 bench/alternatives.py --quick         # small samples
    /usr/bin/python3 bench/alternatives.py --out alt.json  # also every figure as JSON

Everything it creates lives under one temporary directory (brig-alt-*): on exit,
also on an error, Ctrl-C or SIGTERM, it unmounts whatever is mounted below it,
detaches every loop device backed by a file in it and removes it, then checks
that nothing is left (exit status 2 if something is).
"""

import argparse
import ctypes
import ctypes.util
import errno
import fcntl
import glob
import gzip
import json
import os
import platform
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
UID_BASE = 2_000_000_000  # far outside brigd's ranges, as bench/run.py's hardened run
UID_RANGE = 65536
UID_RANGES_DEFAULT = 4096  # brigd's default uid_ranges (src/brigd/core/settings.c)
DISK_MIB = 2048  # the `small` tariff's disk
DISK_INODES = 131072  # what brigd's mkfs.ext4 gives a 2 GiB image
MKFS_EXT4 = ["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-E",
             "lazy_itable_init=1,nodiscard", "-m", "0", "-L", "brig-sandbox"]  # disk.c

# <linux/fs.h>: struct fsxattr and its ioctls
FSXATTR = struct.Struct("=IIIII8s")  # xflags, extsize, nextents, projid, cowextsize, pad
FS_IOC_FSGETXATTR = 0x801C581F
FS_IOC_FSSETXATTR = 0x401C5820
FS_XFLAG_PROJINHERIT = 0x200
# <linux/dqblk_xfs.h>: struct fs_disk_quota, Q_XSETQLIM / Q_XGETQUOTA
FS_DISK_QUOTA = struct.Struct("=bbHIQQQQQQiiHHbbbbQQQiHh8s")
Q_XGETQUOTA = (ord("X") << 8) + 3
Q_XSETQLIM = (ord("X") << 8) + 4
PRJQUOTA = 2
FS_PROJ_QUOTA = 2
FS_DQ_IHARD, FS_DQ_BHARD = 2, 8


def pct(v, q):
    """Percentile q of sorted v, linear interpolation between ranks (as bench/run.py)."""
    if not v:
        return float("nan")
    k = (len(v) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def summary(seconds):
    v = sorted(x * 1000.0 for x in seconds)
    if not v:
        return {"n": 0}
    return {"n": len(v), "p50": pct(v, 50), "p90": pct(v, 90), "mean": sum(v) / len(v),
            "min": v[0], "max": v[-1]}


def run(argv, check=True, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()[-500:]}")
    return r


def timed(argv):
    t = time.perf_counter()
    run(argv)
    return time.perf_counter() - t


def mib(n):
    return n / (1 << 20)


def kernel_config(name):
    """'y', 'm', None (not set) or '?' (no /proc/config.gz)."""
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            for line in f:
                if line.startswith(name + "="):
                    return line.split("=", 1)[1].strip()
        return None
    except OSError:
        return "?"


def kmsg_tail(match, n=3):
    r = run(["dmesg"], check=False)
    return [ln for ln in r.stdout.splitlines() if match in ln][-n:]


class Host:
    """The temporary directory and everything mounted or attached under it."""

    def __init__(self, parent):
        self.tmp = tempfile.mkdtemp(prefix="brig-alt-", dir=parent)
        os.chmod(self.tmp, 0o755)
        self.loops = []

    def path(self, *p):
        return os.path.join(self.tmp, *p)

    def mounts(self):
        out = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                mp = line.split()[4].encode().decode("unicode_escape")
                if mp == self.tmp or mp.startswith(self.tmp + "/"):
                    out.append(mp)
        return out

    def loops_backed_here(self):
        out = []
        for bf in glob.glob("/sys/block/loop*/loop/backing_file"):
            try:
                with open(bf) as f:
                    b = f.read().strip()
            except OSError:
                continue
            if b.startswith(self.tmp + "/"):
                out.append("/dev/" + bf.split("/")[3])
        return out

    def losetup(self, img):
        dev = run(["losetup", "--find", "--show", img]).stdout.strip()
        self.loops.append(dev)
        return dev

    def cleanup(self):
        """Unmount, detach, remove; returns what could not be cleaned."""
        problems = []
        for _ in range(3):
            ms = sorted(self.mounts(), key=len, reverse=True)
            if not ms:
                break
            for m in ms:
                if run(["umount", m], check=False).returncode != 0:
                    run(["umount", "-l", m], check=False)
        for dev in set(self.loops) | set(self.loops_backed_here()):
            bf = f"/sys/block/{os.path.basename(dev)}/loop/backing_file"
            if os.path.exists(bf):
                with open(bf) as f:
                    if not f.read().strip().startswith(self.tmp + "/"):
                        continue  # detached already and reused by someone else
                run(["losetup", "-d", dev], check=False)
        for _ in range(50):  # autoclear / lazy unmounts finish asynchronously
            if not self.mounts() and not self.loops_backed_here():
                break
            time.sleep(0.1)
        problems += [f"still mounted: {m}" for m in self.mounts()]
        problems += [f"loop device still attached: {d}" for d in self.loops_backed_here()]
        if not problems:
            shutil.rmtree(self.tmp, ignore_errors=True)
            if os.path.exists(self.tmp):
                problems.append(f"could not remove {self.tmp}")
        return problems


def tree_stats(root):
    """Entries, kinds, bytes and what a chown'd copy has to take care of."""
    s = dict(entries=0, files=0, dirs=0, symlinks=0, other=0, apparent_bytes=0,
             allocated_bytes=0, hardlinked_inodes=0, setid=0, xattr_entries=0,
             file_caps=0, acls=0, non_root_owned=0)
    seen = set()
    for dirpath, dirnames, filenames in os.walk(root):
        names = [dirpath] if dirpath == root else []
        names += [os.path.join(dirpath, n) for n in dirnames + filenames]
        for p in names:
            st = os.lstat(p)
            s["entries"] += 1
            if stat.S_ISREG(st.st_mode):
                s["files"] += 1
            elif stat.S_ISDIR(st.st_mode):
                s["dirs"] += 1
            elif stat.S_ISLNK(st.st_mode):
                s["symlinks"] += 1
            else:
                s["other"] += 1
            if st.st_uid or st.st_gid:
                s["non_root_owned"] += 1
            if st.st_mode & (stat.S_ISUID | stat.S_ISGID) and not stat.S_ISDIR(st.st_mode):
                s["setid"] += 1
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                s["hardlinked_inodes"] += 1
            if stat.S_ISREG(st.st_mode):
                s["apparent_bytes"] += st.st_size
            s["allocated_bytes"] += st.st_blocks * 512
            try:
                xs = os.listxattr(p, follow_symlinks=False)
            except OSError:
                xs = []
            if xs:
                s["xattr_entries"] += 1
                s["file_caps"] += "security.capability" in xs
                s["acls"] += any(x.startswith("system.posix_acl") for x in xs)
    return s


def allocated(root):
    """Bytes allocated under root, each inode once."""
    seen, total = set(), 0
    for dirpath, dirnames, filenames in os.walk(root):
        for p in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
            st = os.lstat(p)
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def shift_owners(src, dst, base):
    """lchown every entry of dst (a copy of src) to src's owner + base; the owner
    is read from src so that hard links are not shifted twice; chown clears the
    set-id bits of non-directories, so those get their mode back.  Returns the
    number of entries."""
    n = 0
    for dirpath, dirnames, filenames in os.walk(dst):
        names = [dirpath] if dirpath == dst else []
        names += [os.path.join(dirpath, x) for x in dirnames + filenames]
        for p in names:
            st = os.lstat(os.path.join(src, os.path.relpath(p, dst)))
            os.lchown(p, st.st_uid + base, st.st_gid + base)
            if st.st_mode & (stat.S_ISUID | stat.S_ISGID) and not stat.S_ISDIR(st.st_mode) \
                    and not stat.S_ISLNK(st.st_mode):
                os.chmod(p, stat.S_IMODE(st.st_mode))
            n += 1
    return n


def syncfs(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        t = time.perf_counter()
        if LIBC.syncfs(fd) != 0:
            raise OSError(ctypes.get_errno(), "syncfs")
        return time.perf_counter() - t
    finally:
        os.close(fd)


LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
LIBC.quotactl.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_void_p]


def set_projid(path, projid):
    """FS_IOC_FSSETXATTR: project id + PROJINHERIT (new entries below inherit it)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        buf = bytearray(FSXATTR.size)
        fcntl.ioctl(fd, FS_IOC_FSGETXATTR, buf)
        xflags, extsize, nextents, _, cow, pad = FSXATTR.unpack(buf)
        fcntl.ioctl(fd, FS_IOC_FSSETXATTR,
                    FSXATTR.pack(xflags | FS_XFLAG_PROJINHERIT, extsize, nextents, projid, cow,
                                 pad))
    finally:
        os.close(fd)


def get_projid(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        buf = bytearray(FSXATTR.size)
        fcntl.ioctl(fd, FS_IOC_FSGETXATTR, buf)
        return FSXATTR.unpack(buf)[3]
    finally:
        os.close(fd)


def quota_limit(dev, projid, bhard_bytes, ihard):
    """quotactl(Q_XSETQLIM, PRJQUOTA): block (512-byte units) and inode hard limits;
    0 and 0 clear them.  Raises OSError."""
    q = ctypes.create_string_buffer(FS_DISK_QUOTA.pack(
        1, FS_PROJ_QUOTA, FS_DQ_BHARD | FS_DQ_IHARD, projid, bhard_bytes // 512, 0, ihard, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, b""), FS_DISK_QUOTA.size)
    if LIBC.quotactl((Q_XSETQLIM << 8) | PRJQUOTA, dev.encode(), projid, q) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"quotactl(Q_XSETQLIM) on {dev}: {os.strerror(e)}")


def quota_get(dev, projid):
    q = ctypes.create_string_buffer(FS_DISK_QUOTA.size)
    if LIBC.quotactl((Q_XGETQUOTA << 8) | PRJQUOTA, dev.encode(), projid, q) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"quotactl(Q_XGETQUOTA) on {dev}: {os.strerror(e)}")
    f = FS_DISK_QUOTA.unpack(q.raw)
    return {"bhard_bytes": f[4] * 512, "ihard": f[6], "used_bytes": f[8] * 512, "inodes": f[9]}


def fill(path, limit_bytes, chunk=1 << 20):
    """Write zeros into path until an error or limit_bytes; (errno name, bytes)."""
    buf = b"\0" * chunk
    n = 0
    try:
        with open(path, "wb", buffering=0) as f:
            while n < limit_bytes:
                n += f.write(buf)
                if n % (64 << 20) == 0:
                    os.fsync(f.fileno())  # delayed allocation: find the limit early
            os.fsync(f.fileno())
        return None, n
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno)), n


def touch_until(dirpath, limit):
    n = 0
    try:
        while n < limit:
            os.close(os.open(os.path.join(dirpath, f"f{n}"), os.O_CREAT | os.O_WRONLY, 0o644))
            n += 1
        return None, n
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno)), n


class Bench:
    def __init__(self, args, host):
        self.a, self.h = args, host
        self.r = {"figures": {}, "facts": {}, "notes": []}
        self.quota = False  # the XFS enforces project quotas

    def fig(self, key, name, seconds, note=""):
        self.r["figures"][key] = dict(summary(seconds), name=name, note=note)

    def note(self, s):
        self.r["notes"].append(s)
        print("  note:", s, flush=True)

    # -- the template ---------------------------------------------------------------
    def find_rootfs(self, name):
        cands = [d for d in glob.glob(os.path.join(self.a.template_cache, name, "*"))
                 if os.path.exists(os.path.join(d, "ok"))
                 and os.path.isdir(os.path.join(d, "rootfs"))]
        if not cands:
            raise RuntimeError(f"no built `{name}` template under {self.a.template_cache} "
                               "(make templates)")
        return os.path.join(max(cands, key=os.path.getmtime), "rootfs")

    # -- (a) the id-mapped mount and (b) the ext4 steps: bench/prep.c ------------------
    def setup_prep(self):
        """bench/prep.c compiled, a golden image made as brigd makes it, an empty
        agent layer; False when there is no C compiler."""
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            self.note("no C compiler: the id-mapped mount and the ext4 steps are not timed")
            return False
        self.prep_exe = self.h.path("prep")
        run([cc, "-O2", "-o", self.prep_exe, os.path.join(REPO, "bench", "prep.c")])
        self.golden = self.h.path(f"golden-{DISK_MIB}m.img")
        with open(self.golden, "wb") as f:
            f.truncate(DISK_MIB << 20)
        run(MKFS_EXT4 + [self.golden])
        self.agent = self.h.path("agent-layer")
        os.mkdir(self.agent, 0o755)
        st = os.stat(self.golden)
        self.r["facts"]["golden_image"] = {"size_mib": DISK_MIB,
                                           "allocated_kib": st.st_blocks * 512 // 1024}
        return True

    def prep_once(self, rootfs):
        r = run([self.prep_exe, self.golden, self.h.path("prep-sb"), rootfs, self.agent,
                 str(UID_BASE), str(UID_RANGE)], timeout=120)
        return {k: v / 1e9 for k, v in json.loads(r.stdout).items()}

    def prep_figures(self, steps):
        for tname in ("base", "minimal"):
            self.fig(f"idmap_{tname}", f"id-mapped mount of the `{tname}` template",
                     steps[(tname, "idmap_mount")])
        both = lambda k: steps[("base", k)] + steps[("minimal", k)]
        self.fig("userns", "user namespace for the id map", both("userns"),
                 "brigd makes one per sandbox; with a chown'd copy runc would make it")
        self.fig("ext4_copy", "ext4: copy the golden image (sparse)", both("disk_copy"))
        self.fig("ext4_loop", "ext4: attach a loop device (direct I/O)", both("loop_attach"))
        self.fig("ext4_mount", "ext4: mount + mkdir upper, work", both("ext4_mount"))
        add = lambda ks: [sum(x) for x in zip(*[both(k) for k in ks])]
        self.fig("ext4_create", "ext4: = per create", add(("disk_copy", "loop_attach",
                                                              "ext4_mount")))
        self.fig("ext4_umount", "ext4: unmount (the loop device detaches)", both("umount_disk"))
        self.fig("ext4_unlink", "ext4: unlink the image", both("unlink_image"))
        self.fig("ext4_delete", "ext4: = per delete", add(("umount_disk", "unlink_image")))

    # -- (b) XFS with project quotas ------------------------------------------------------
    def setup_xfs(self):
        """One XFS for all sandboxes, on a loop device, -o prjquota if the kernel can;
        False when xfsprogs is missing."""
        if not shutil.which("mkfs.xfs") and self.a.install_xfsprogs:
            print("installing xfsprogs (apt-get install -y xfsprogs)", flush=True)
            run(["apt-get", "install", "-y", "xfsprogs"])
        if not shutil.which("mkfs.xfs") or not shutil.which("xfs_quota"):
            self.note("xfsprogs not installed: the XFS part is skipped "
                      "(apt-get install -y xfsprogs, or --install-xfsprogs)")
            return False
        f = self.r["facts"]
        f["kernel_CONFIG_XFS_QUOTA"] = kernel_config("CONFIG_XFS_QUOTA")
        f["kernel_CONFIG_QFMT_V2"] = kernel_config("CONFIG_QFMT_V2")
        img, mnt = self.h.path("xfs.img"), self.h.path("xfs")
        os.mkdir(mnt)
        with open(img, "wb") as fh:
            fh.truncate(self.a.xfs_mib << 20)
        t = time.perf_counter()
        run(["mkfs.xfs", "-q", "-f", img])
        f["xfs_mkfs_ms"] = (time.perf_counter() - t) * 1000
        dev = self.h.losetup(img)
        r = run(["mount", "-o", "prjquota", dev, mnt], check=False)
        self.quota = r.returncode == 0
        if self.quota:
            f["xfs_prjquota_mount"] = "ok"
        else:
            err = r.stderr.strip().splitlines()[0] if r.stderr.strip() else r.returncode
            kern = "; ".join(kmsg_tail("XFS (" + os.path.basename(dev) + ")", 1))
            f["xfs_prjquota_mount"] = f"failed ({err}); kernel: {kern}"
            self.note("this kernel cannot enforce XFS project quotas (CONFIG_XFS_QUOTA="
                      f"{f['kernel_CONFIG_XFS_QUOTA']}): the limit calls are not timed, only "
                      "mkdir + project id and the teardown; ext4 project quotas need "
                      f"CONFIG_QFMT_V2 (={f['kernel_CONFIG_QFMT_V2']}), so neither works here")
            run(["mount", dev, mnt])
            try:
                quota_limit(dev, 1, DISK_MIB << 20, DISK_INODES)
            except OSError as e:
                f["xfs_limit_error"] = str(e)
        print(f"XFS on {dev}, mount -o prjquota: {f['xfs_prjquota_mount']}", flush=True)
        self.xfs_dev, self.xfs_mnt = dev, mnt
        return True

    def xfs_sandbox(self, i):
        """One sandbox's directory on the shared XFS, in-process (ioctl + quotactl,
        what brigd would do in C): seconds of (mkdir + project id, limit, rm -rf, clear)."""
        dev, projid = self.xfs_dev, 1000 + i
        d = os.path.join(self.xfs_mnt, f"sb{i}")
        t0 = time.perf_counter()
        os.mkdir(d, 0o711)
        set_projid(d, projid)
        os.mkdir(os.path.join(d, "upper"), 0o755)
        os.mkdir(os.path.join(d, "work"), 0o700)
        os.chown(os.path.join(d, "upper"), UID_BASE, UID_BASE)
        t1 = time.perf_counter()
        if self.quota:
            quota_limit(dev, projid, DISK_MIB << 20, DISK_INODES)
        t2 = time.perf_counter()
        if i == 0:
            assert get_projid(os.path.join(d, "upper")) == projid, "PROJINHERIT"
        for k in range(3):  # empty-ish: what a sandbox that did little leaves
            with open(os.path.join(d, "upper", f"file{k}"), "wb") as fh:
                fh.write(b"x" * 4096)
        t3 = time.perf_counter()
        shutil.rmtree(d)
        t4 = time.perf_counter()
        if self.quota:
            quota_limit(dev, projid, 0, 0)
        t5 = time.perf_counter()
        return t1 - t0, t2 - t1, t4 - t3, t5 - t4

    def xfs_figures(self, xs):
        mk, lim, rm_, clr = (list(x) for x in zip(*xs))
        self.fig("xfs_mkdir_projid", "XFS: mkdir + project id (ioctl) + upper, work", mk)
        if self.quota:
            self.fig("xfs_limit", "XFS: set bhard 2 GiB + ihard 131072 (quotactl)", lim)
            self.fig("xfs_create", "XFS: = per create", [a + b for a, b in zip(mk, lim)])
        self.fig("xfs_rm", "XFS: rm -rf the sandbox dir (3 files of 4 KiB)", rm_)
        if self.quota:
            self.fig("xfs_clear", "XFS: clear the limit (quotactl)", clr)
            self.fig("xfs_delete", "XFS: = per delete", [a + b for a, b in zip(rm_, clr)])

    def fast_loop(self, prep, xfs):
        """bench/prep.c on base and minimal and the XFS per-sandbox steps, interleaved,
        so that whatever else the host does hits both alike."""
        n, warm = self.a.n, 2
        print(f"interleaved: bench/prep.c {n} x base + {n} x minimal"
              + (f", XFS sandbox dirs {2 * n}" if xfs else ""), flush=True)
        steps, xs = {}, []
        for i in range(n + warm):
            for j, (tname, rootfs) in enumerate((("base", self.base),
                                                 ("minimal", self.minimal))):
                if prep:
                    p = self.prep_once(rootfs)
                    if i >= warm:
                        for k, v in p.items():
                            steps.setdefault((tname, k), []).append(v)
                if xfs:
                    x = self.xfs_sandbox(2 * i + j)
                    if i >= warm:
                        xs.append(x)
        if prep:
            self.prep_figures(steps)
        if xfs:
            self.xfs_figures(xs)

    def xfs_cli(self):
        """The same through xfs_quota, a process per call."""
        mnt, cli_p, cli_l, cli_err = self.xfs_mnt, [], [], None
        for i in range(self.a.cli + 2):
            projid = 500000 + i
            d = os.path.join(mnt, f"cli{i}")
            os.mkdir(d, 0o711)
            t0 = time.perf_counter()
            run(["xfs_quota", "-x", "-c", f"project -s -p {d} {projid}", mnt])
            t1 = time.perf_counter()
            r = run(["xfs_quota", "-x", "-c", f"limit -p bhard=2g ihard={DISK_INODES} {projid}",
                     mnt], check=False)
            t2 = time.perf_counter()
            if r.returncode != 0 or r.stderr.strip():
                cli_err = r.stderr.strip() or f"exit {r.returncode}"
            if self.quota:
                run(["xfs_quota", "-x", "-c", f"limit -p bhard=0 ihard=0 {projid}", mnt])
            if i >= 2:
                cli_p.append(t1 - t0)
                cli_l.append(t2 - t1)
            shutil.rmtree(d)
        self.fig("xfs_cli_project", "XFS: `xfs_quota -x -c 'project -s -p DIR ID'`", cli_p)
        self.fig("xfs_cli_limit", "XFS: `xfs_quota -x -c 'limit -p bhard=2g ihard=N ID'`", cli_l,
                 "" if self.quota else f"fails here: {cli_err}")
        if cli_err and self.quota:
            raise RuntimeError(f"xfs_quota limit failed: {cli_err}")

    def xfs_copies(self):
        """The chown'd copy on XFS: with reflinks (data shared) and without."""
        mnt, f = self.xfs_mnt, self.r["facts"]
        src = os.path.join(mnt, "template")
        t = time.perf_counter()
        run(["cp", "-a", self.base, src])
        f["xfs_template_copy_ms"] = (time.perf_counter() - t) * 1000
        r = run(["cp", "-a", "--reflink=always", os.path.join(src, "etc"),
                 os.path.join(mnt, "probe")], check=False)
        shutil.rmtree(os.path.join(mnt, "probe"), ignore_errors=True)
        work = os.path.join(mnt, "copies")
        os.mkdir(work)
        if r.returncode != 0:
            self.note(f"no reflinks on this XFS ({r.stderr.strip()[-200:]})")
        else:
            print(f"reflink copy + chown of base on XFS: {self.a.copies} + 1 warm-up",
                  flush=True)
            self.copy_chown(src, work, "copy on XFS (reflink)", "xfs_reflink", reflink=True)
        print(f"plain copy + chown of base on XFS: {self.a.copies} + 1 warm-up", flush=True)
        self.copy_chown(src, work, "copy on XFS (no reflink)", "xfs_plain")
        shutil.rmtree(src)

    # -- (a) the chown'd copy -----------------------------------------------------------
    def copy_chown(self, src, where, label, key, reflink=False):
        # coreutils >= 9 reflinks by default where it can: say which one is meant
        cp = ["cp", "-a", "--reflink=" + ("always" if reflink else "never"), src]
        t_cp, t_own, t_sync, t_rm, space = [], [], [], [], []
        for i in range(self.a.copies + 1):
            dst = os.path.join(where, "copy")
            free0 = os.statvfs(where)
            t_cp.append(timed(cp + [dst]))
            t = time.perf_counter()
            shift_owners(src, dst, UID_BASE)
            t_own.append(time.perf_counter() - t)
            t_sync.append(syncfs(dst))
            free1 = os.statvfs(where)
            space.append((free0.f_bfree - free1.f_bfree) * free1.f_frsize)
            if i == 0:
                self.r["facts"][f"{key}_allocated_bytes"] = allocated(dst)
            t_rm.append(timed(["rm", "-rf", dst]))
            if i == 0:  # warm-up: the source into the page cache
                t_cp, t_own, t_sync, t_rm = [], [], [], []
        self.fig(f"{key}_cp", f"{label}: `{' '.join(cp[:3])}`", t_cp)
        self.fig(f"{key}_chown", f"{label}: lchown every entry +uid_base", t_own)
        self.fig(f"{key}_create", f"{label}: = copy + chown",
                 [a + b for a, b in zip(t_cp, t_own)], "page cache; writeback below")
        self.fig(f"{key}_sync", f"{label}: then syncfs (writeback)", t_sync,
                 "the whole file system's dirty data, others' included")
        self.fig(f"{key}_rm", f"{label}: `rm -rf` of the copy", t_rm)
        self.r["facts"][f"{key}_statvfs_bytes_per_copy"] = sorted(space)[len(space) // 2]

    def quota_checks(self, dev, mnt):
        """Only where the kernel enforces project quotas: blocks and inodes end in
        EDQUOT; a full shared file system hits a sandbox under its own limit."""
        c = self.r["facts"].setdefault("xfs_quota_checks", {})
        d = os.path.join(mnt, "qb")
        os.mkdir(d)
        set_projid(d, 900)
        quota_limit(dev, 900, 64 << 20, 1000)
        c["blocks"] = fill(os.path.join(d, "big"), 256 << 20)
        os.unlink(os.path.join(d, "big"))
        c["inodes"] = touch_until(d, 5000)
        sv = os.statvfs(d)  # XFS reports the project's limits in a PROJINHERIT dir
        c["statvfs_in_project"] = {"total_mib": mib(sv.f_blocks * sv.f_frsize),
                                   "files": sv.f_files}
        c["usage_after"] = quota_get(dev, 900)
        shutil.rmtree(d)
        quota_limit(dev, 900, 0, 0)
        # a small shared XFS of its own, two sandboxes each limited to 3/4 of it: the
        # limits add up past its size, as sandboxes' limits would on a host
        img, small = self.h.path("xfs-small.img"), self.h.path("xfs-small")
        os.mkdir(small)
        with open(img, "wb") as fh:
            fh.truncate(512 << 20)
        run(["mkfs.xfs", "-q", "-f", img])
        sdev = self.h.losetup(img)
        run(["mount", "-o", "prjquota", sdev, small])
        each = os.statvfs(small).f_blocks * os.statvfs(small).f_frsize * 3 // 4
        for pid_, name in ((901, "A"), (902, "B")):
            os.mkdir(os.path.join(small, name))
            set_projid(os.path.join(small, name), pid_)
            quota_limit(sdev, pid_, each, 100000)
        c["shared_full_A"] = fill(os.path.join(small, "A", "big"), each + (64 << 20))
        c["shared_full_B"] = fill(os.path.join(small, "B", "big"), each + (64 << 20))
        c["shared_full_limit_mib_each"] = mib(each)
        run(["umount", small])
        run(["losetup", "-d", sdev])

    def main(self):
        a = self.a
        f = self.r["facts"]
        f["host"] = {"kernel": platform.release(), "cpus": os.cpu_count(),
                     "loadavg_start": os.getloadavg()[0]}
        self.base = self.find_rootfs(a.template)
        self.minimal = self.find_rootfs("minimal")
        f["template"] = self.base
        print(f"template {self.base}: walking", flush=True)
        f["template_stats"] = tree_stats(self.base)
        f["template_fs"] = run(["findmnt", "-n", "-o", "FSTYPE", "--target",
                                self.base]).stdout.strip()
        prep = not a.skip_prep and self.setup_prep()
        xfs = not a.skip_xfs and self.setup_xfs()
        self.fast_loop(prep, xfs)
        if xfs:
            self.xfs_cli()
            if self.quota:
                try:
                    self.quota_checks(self.xfs_dev, self.xfs_mnt)
                except (OSError, RuntimeError) as e:
                    self.note(f"project quota checks failed: {e}")
        if a.copies:
            print(f"cp + chown of {a.template} next to the template cache: {a.copies} + 1 "
                  "warm-up", flush=True)
            where = self.h.path("host-copies")
            os.mkdir(where)
            r = run(["cp", "-a", "--reflink=always", os.path.join(self.base, "etc"),
                     self.h.path("reflink-probe")], check=False)
            shutil.rmtree(self.h.path("reflink-probe"), ignore_errors=True)
            f["host_fs_reflink"] = r.returncode == 0
            self.copy_chown(self.base, where, f"copy on the host fs ({f['template_fs']})",
                            "host")
            if xfs:
                self.xfs_copies()
        f["host"]["loadavg_end"] = os.getloadavg()[0]


def report(r, uid_ranges):
    f, figs = r["facts"], r["figures"]
    print("\n== results (milliseconds) ==")
    print(f"{'measurement':62} {'n':>4} {'p50':>9} {'p90':>9} {'mean':>9}")
    for v in figs.values():
        if v.get("n"):
            print(f"{v['name'][:62]:62} {v['n']:>4} {v['p50']:>9.3f} {v['p90']:>9.3f} "
                  f"{v['mean']:>9.3f}" + (f"  ({v['note']})" if v["note"] else ""))
    s = f.get("template_stats", {})
    print("\n== facts ==")
    print(f"host: {f['host']}")
    if s:
        print(f"template {f['template']} on {f.get('template_fs')}: {s['entries']} entries "
              f"({s['files']} files, {s['dirs']} dirs, {s['symlinks']} symlinks, {s['other']} "
              f"other), {mib(s['apparent_bytes']):.0f} MiB in files, "
              f"{mib(s['allocated_bytes']):.0f} MiB allocated; {s['hardlinked_inodes']} "
              f"hard-linked inodes, {s['setid']} set-id files, {s['file_caps']} with file "
              f"capabilities, {s['acls']} with ACLs, "
              f"{s['non_root_owned']} not owned by root")
        per = f.get("host_allocated_bytes", s["allocated_bytes"])
        print(f"a chown'd copy per uid range: {mib(per):.0f} MiB each (allocated, measured on "
              f"the copy); x {uid_ranges} ranges (brigd's default uid_ranges) = "
              f"{per * uid_ranges / (1 << 40):.2f} TiB; statvfs drop per copy "
              f"{mib(f.get('host_statvfs_bytes_per_copy', 0)):.0f} MiB (noisy on a shared fs)")
    for k in ("xfs_reflink", "xfs_plain"):
        if f"{k}_statvfs_bytes_per_copy" in f:
            print(f"{k}: statvfs drop per copy on the private XFS "
                  f"{mib(f[k + '_statvfs_bytes_per_copy']):.1f} MiB")
    for k in ("host_fs_reflink", "golden_image", "kernel_CONFIG_XFS_QUOTA", "kernel_CONFIG_QFMT_V2",
              "xfs_mkfs_ms", "xfs_prjquota_mount", "xfs_limit_error", "xfs_template_copy_ms",
              "xfs_quota_checks"):
        if k in f:
            print(f"{k}: {f[k]}")
    for n in r["notes"]:
        print("note:", n)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--template-cache", default="/var/cache/brig/templates")
    p.add_argument("--template", default="base")
    p.add_argument("-n", type=int, default=200, help="samples of the fast steps (default 200)")
    p.add_argument("--copies", type=int, default=8,
                   help="samples of each rootfs copy + chown (default 8; 0 skips them)")
    p.add_argument("--cli", type=int, default=30, help="samples of the xfs_quota commands")
    p.add_argument("--xfs-mib", type=int, default=4096, help="size of the sparse XFS image")
    p.add_argument("--tmp", default="/var/tmp", help="where the temporary directory goes "
                   "(default /var/tmp: the host disk, like brigd's state dir)")
    p.add_argument("--uid-ranges", type=int, default=UID_RANGES_DEFAULT)
    p.add_argument("--skip-prep", action="store_true")
    p.add_argument("--skip-xfs", action="store_true")
    p.add_argument("--install-xfsprogs", action="store_true",
                   help="apt-get install -y xfsprogs if mkfs.xfs is missing")
    p.add_argument("--quick", action="store_true", help="-n 30 --copies 2 --cli 5")
    p.add_argument("--out", help="also write every figure as JSON")
    a = p.parse_args()
    if a.quick:
        a.n, a.copies, a.cli = 30, 2, 5
    if os.geteuid() != 0:
        sys.exit("bench/alternatives.py: run as root")

    def on_term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    host = Host(a.tmp)
    b = Bench(a, host)
    rc = 0
    t0 = time.time()
    try:
        b.main()
    except (Exception, KeyboardInterrupt) as e:
        print(f"bench/alternatives.py: {type(e).__name__}: {e}", file=sys.stderr)
        rc = 1
    finally:
        problems = host.cleanup()
        for pr in problems:
            print(f"LEFT BEHIND: {pr}", file=sys.stderr)
        if problems:
            rc = 2
    b.r["facts"]["wall_s"] = time.time() - t0
    report(b.r, a.uid_ranges)
    print(f"\ncleanup: {'nothing left behind' if not problems else problems}; "
          f"took {b.r['facts']['wall_s']:.0f} s")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(b.r, fh, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
