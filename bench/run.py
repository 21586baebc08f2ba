#!/usr/bin/python3
"""brig's benchmark harness: DESIGN.md section 9's speed targets, measured in one
invocation against baselines taken in the same run (see bench/README.md).

Run as root with Debian's python3 (standard library only):

    /usr/bin/python3 bench/run.py --build build --template-cache /var/cache/brig/templates
    ... --quick            a ~15 s smoke run
    ... --write-doc        also replace the results section of docs/benchmarks.md
    ... --density 500      also create 500 idle sandboxes at once and measure memory
    ... --out FILE         also write every figure as JSON

Everything it starts is torn down on exit, also on Ctrl-C, SIGTERM or a failure:
every sandbox is deleted through the API, brigd is stopped with SIGTERM, the
baseline runc containers are deleted and the temporary directory is removed.
"""

import argparse
import contextlib
import datetime
import glob
import http.client
import importlib.util
import json
import os
import platform
import random
import resource
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "benchmarks.md")
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"

TASK_PY = b"""\
import json, sys
data = [i * i for i in range(1000)]
print(json.dumps({"sum": sum(data), "python": sys.version.split()[0]}))
"""
TASK_EXPECT = '"sum": 332833500'

# Default sample sizes: the whole run takes ~2-3 minutes on 2 cores.
# noisy_*: the noisy-neighbour phase, rounds of (idle, CPU hog, I/O hog) blocks of
# noisy_block_s seconds of victim execs each, after noisy_settle_s of hog start-up.
# warm, warm_seed: creates and seed loops that claim a sandbox from the warm pool.
FULL = dict(create=250, exec=1500, exec_fresh=600, py_sandbox=150, seed=150,
            tput_s=10.0, warmup=5, noisy_rounds=3, noisy_block_s=3.0, noisy_settle_s=0.5,
            warm=250, warm_seed=150)
QUICK = dict(create=25, exec=400, exec_fresh=200, py_sandbox=30, seed=15, tput_s=2.0,
             warmup=2, noisy_rounds=1, noisy_block_s=0.7, noisy_settle_s=0.2,
             warm=25, warm_seed=15)

# The id range of the runc-level hardened container: far outside brigd's ranges
# (uid_base 10000000 + uid_ranges × 65536 ≤ 1.08e9 with the bench's config).
BENCH_UID_BASE = 2_000_000_000
UID_RANGE = 65536
# A pool of its own for the bench's brigd, so that its /31s cannot collide with
# those of another brigd (a test run) on the same host.
BENCH_NET_POOL = "10.222.0.0/16"
# The warm-pool phase: sandboxes of each template kept started per template and
# tariff (brigd's `warm_pool`); the harness waits for the pool to be full before
# each create it times, so every one of them can be a hit.
WARM_POOL_COUNT = 1

CPU_HOG = ["sh", "-c", "while :; do :; done"]
IO_HOG = ["sh", "-c", "while :; do dd if=/dev/zero of=/tmp/f bs=1M count=2000 oflag=direct "
          "2>/dev/null; done"]
# The victim's own small I/O: one 4 KiB O_DIRECT write through its overlay to its
# ext4 layer (fsync would be a no-op: the overlay is mounted volatile).
NOISY_KINDS = ("idle", "cpu", "cpu2", "io")
NOISY_NAMES = {"idle": "neighbour idle", "cpu": "CPU hog, 1 sandbox",
               "cpu2": "CPU hog, 2 sandboxes", "io": "I/O hog"}
IO_PROBE = ["dd", "if=/dev/zero", "of=/root/probe", "bs=4k", "count=1", "oflag=direct"]


class Interrupted(Exception):
    """SIGTERM (or SIGHUP) to the harness: unwind through the cleanup."""


# ---- small helpers --------------------------------------------------------------


def link_exists(name):
    """Whether this network namespace has a link called name (asked through a socket, not
    /sys/class/net, which shows the namespace sysfs was mounted in: the host's, under
    `unshare -n`)."""
    try:
        socket.if_nametoindex(name)
        return True
    except OSError:
        return False


def now():
    return time.perf_counter()


def pct(sorted_v, q):
    """Percentile q (0..100) with linear interpolation between closest ranks."""
    if not sorted_v:
        return float("nan")
    k = (len(sorted_v) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(sorted_v) - 1)
    return sorted_v[lo] + (sorted_v[hi] - sorted_v[lo]) * (k - lo)


def summary(seconds):
    """n, p50, p90, p99, mean, min, max in milliseconds of a list of durations in seconds."""
    v = sorted(x * 1000.0 for x in seconds)
    if not v:
        return {"n": 0}
    return {"n": len(v), "p50": pct(v, 50), "p90": pct(v, 90), "p99": pct(v, 99),
            "mean": sum(v) / len(v), "min": v[0], "max": v[-1]}


def spawn_wait(argv, stdout=None, stderr=None):
    """posix_spawn + waitpid: the cheapest fork/exec Python offers.  Returns
    (wall seconds, exit status)."""
    fa = []
    if stdout is not None:
        fa.append((os.POSIX_SPAWN_DUP2, stdout, 1))
    if stderr is not None:
        fa.append((os.POSIX_SPAWN_DUP2, stderr, 2))
    t0 = now()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=fa)
    _, st = os.waitpid(pid, 0)
    return now() - t0, os.waitstatus_to_exitcode(st)


def read_first_line(argv):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "?"


def host_port(url):
    u = url.split("//", 1)[1].split("/", 1)[0]
    host, port = u.rsplit(":", 1)
    return host.strip("[]"), int(port)


def load_brigtest(build, cache):
    os.environ["BRIG_BUILD"] = build
    os.environ["BRIG_TEMPLATE_CACHE"] = cache
    path = os.path.join(REPO, "tests", "integration", "brigtest.py")
    spec = importlib.util.spec_from_file_location("brigtest", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.BUILD, mod.TEMPLATE_CACHE = build, cache
    return mod


def template_rootfs(cache, name):
    """The cached rootfs of a template: templates/build prints it as its last line
    (instant when cached).  Falls back to the cache layout."""
    try:
        out = subprocess.run([os.path.join(REPO, "templates", "build"), "--cache", cache, name],
                             capture_output=True, text=True, timeout=1800)
        lines = out.stdout.strip().splitlines()
        if out.returncode == 0 and lines and os.path.isdir(lines[-1]):
            return lines[-1]
    except (OSError, subprocess.SubprocessError):
        pass
    base = os.path.join(cache, name)
    for key in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        d = os.path.join(base, key)
        if os.path.exists(os.path.join(d, "ok")) and os.path.isdir(os.path.join(d, "rootfs")):
            return os.path.join(d, "rootfs")
    raise SystemExit(f"bench: template '{name}' is not built in {cache} (make templates)")


# ---- HTTP ----------------------------------------------------------------------


class HttpError(Exception):
    def __init__(self, method, path, status, body):
        super().__init__(f"{method} {path}: HTTP {status}: {body[:300]!r}")
        self.status = status


class Conn:
    """One persistent (keep-alive) HTTP/1.1 connection to brigd; with fresh=True a
    new TCP connection per request instead.  Counts the TCP connections it opened,
    which shows whether the server kept them alive."""

    IDLE_REOPEN_S = 5.0  # brigd drops a connection whose next request's headers take
    # longer than header_timeout (10 s)

    def __init__(self, host, port, key, fresh=False):
        self.host, self.port, self.key, self.fresh = host, port, key, fresh
        self.c = None
        self.opened = 0
        self.last = 0.0

    def close(self):
        if self.c is not None:
            self.c.close()
            self.c = None

    def request(self, method, path, body=None, ctype=None, expect=(200, 201, 204), timeout=120):
        if self.c is not None and (self.fresh or now() - self.last > self.IDLE_REOPEN_S):
            self.close()
        if self.c is None:
            self.c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            self.opened += 1
        h = {"Authorization": f"Bearer {self.key}"}
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            ctype = "application/json"
        if ctype:
            h["Content-Type"] = ctype
        try:
            self.c.request(method, path, body=body, headers=h)
            r = self.c.getresponse()
            data = r.read()
        except Exception:
            self.close()
            raise
        self.last = now()
        if r.will_close or self.fresh:
            self.close()
        if r.status not in expect:
            raise HttpError(method, path, r.status, data)
        return r.status, data

    def json(self, method, path, body=None, **kw):
        return json.loads(self.request(method, path, body, **kw)[1])


class Live:
    """Ids of the sandboxes this run created and has not deleted yet (and of all it
    ever created: a deleted sandbox's directory stays until brigd's teardown)."""

    def __init__(self):
        self.ids = set()
        self.ever = set()
        self.lock = threading.Lock()

    def add(self, sid):
        with self.lock:
            self.ids.add(sid)
            self.ever.add(sid)

    def discard(self, sid):
        with self.lock:
            self.ids.discard(sid)

    def snapshot(self):
        with self.lock:
            return set(self.ids)

    def created(self):
        with self.lock:
            return set(self.ever)


class Client:
    """The API calls the bench makes, over one Conn, tracking live sandboxes."""

    def __init__(self, conn, live):
        self.conn, self.live = conn, live

    def create(self, template, **opts):
        sb = self.conn.json("POST", "/v1/sandboxes", {"template": template, **opts},
                            expect=(201,))
        self.live.add(sb["id"])
        return sb["id"]

    def delete(self, sid):
        self.conn.request("DELETE", f"/v1/sandboxes/{sid}", expect=(204,))
        self.live.discard(sid)

    def exec(self, sid, argv):
        return self.conn.json("POST", f"/v1/sandboxes/{sid}/exec", {"argv": argv})

    def put_file(self, sid, path, data):
        self.conn.request("PUT", f"/v1/sandboxes/{sid}/files?path={path}", data,
                          ctype="application/octet-stream", expect=(204,))

    def start(self, sid, argv):
        """A background command; its pid."""
        return self.conn.json("POST", f"/v1/sandboxes/{sid}/exec",
                              {"argv": argv, "background": True}, expect=(202,))["pid"]

    def kill(self, sid, pid, timeout=20):
        """SIGKILL a background command (and every descendant) and wait for it."""
        self.conn.request("POST", f"/v1/sandboxes/{sid}/processes/{pid}/signal",
                          {"signal": "SIGKILL"}, expect=(204, 404, 409))
        p = self.conn.json("POST", f"/v1/sandboxes/{sid}/processes/{pid}/wait",
                           {"timeout": timeout}, expect=(200, 404))
        if p.get("running"):
            raise RuntimeError(f"process {pid} in {sid} still runs {timeout} s after SIGKILL")


# ---- the bench ------------------------------------------------------------------


class Bench:
    def __init__(self, args):
        self.args = args
        self.p = dict(QUICK if args.quick else FULL)
        if args.n:
            self.p["create"] = args.n
        if args.duration:
            self.p["tput_s"] = args.duration
        self.build = os.path.abspath(args.build)
        self.cache = os.path.abspath(args.template_cache)
        self.bt = load_brigtest(self.build, self.cache)
        self.tmp = None
        self.brigd = None
        self.live = Live()
        self.runc_root = None
        self.results = {}
        self.notes = []  # odd things seen during the run
        self.extra_keys = []  # API keys of the accounts the bench created
        self.hbundle = None  # the hardened runc bundle, once prepared
        self.variants = []  # (name, bundle): the hardened one less one piece
        self.prep_bin = None  # bench/prep.c, compiled
        self.cg_parent = f"brig-bench-{os.getpid()}"
        self.pool_seen = set()  # ids the warm pool started (its sandbox directories)

    # -- set-up and tear-down

    def setup(self):
        self.tmp = tempfile.mkdtemp(prefix="brig-bench-")
        self.devnull = os.open(os.devnull, os.O_WRONLY)
        self.runc_log = os.open(os.path.join(self.tmp, "runc-baseline.log"),
                                os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.minimal_rootfs = template_rootfs(self.cache, "minimal")
        self.base_rootfs = template_rootfs(self.cache, "base") if not self.args.skip_base else None
        self.setup_runc_bundle()
        if not self.args.skip_hardening:
            self.prep_bin = self.compile_prep()
        self.conf = os.path.join(self.tmp, "brigd.conf")
        self.write_conf()
        self.brigd = self.bt.Brigd(os.path.join(self.tmp, "state"), ["--config", self.conf])
        t0 = now()
        self.start_brigd(self.brigd)
        self.results["brigd_start_ms"] = (now() - t0) * 1000
        self.host, self.port = host_port(self.brigd.url)
        self.key = self.brigd.key

    def write_conf(self, warm_pool=""):
        # Limits that are product features (credit, per-account concurrency) would
        # cap a benchmark account long before the host does: lift them here.  So
        # would the disk budget (every sandbox may fill its disk): the density
        # phase's idle sandboxes write nothing to theirs, and the memory budget (2,000
        # sandboxes' limits are 1 TB; idle, they use a few hundred KiB each).  max_sandboxes stays within
        # what the kernel's ptys allow at the default pty_max (brigd checks), above
        # what the uid ranges allow anyway.
        with open(self.conf, "w") as f:
            f.write("[brigd]\ninitial_credit_micro_usd = 1000000000000\n"
                    "max_live_per_account = 100000\nmax_sandboxes = 16000\n"
                    "disk_overcommit = 0\nmemory_overcommit = 0\n"
                    f"uid_ranges = 16384\nnet_pool = {BENCH_NET_POOL}\n"
                    + (f"warm_pool = {warm_pool}\n" if warm_pool else ""))

    def restart_brigd(self, warm_pool=""):
        """Stops the bench's brigd (SIGTERM: a pool it had is destroyed) and starts
        it again on the same state dir, with `warm_pool` set or without a pool.
        Every sandbox of the bench must have been deleted.  Seconds to ready."""
        left = self.live.snapshot()
        if left:
            raise RuntimeError(f"restart with sandboxes still live: {sorted(left)[:5]}")
        problems = self.stop_brigd(self.brigd)
        if problems:
            raise RuntimeError(f"stopping brigd for a restart: {problems}")
        left = self.bt.leftovers(self.brigd.state_dir)
        if left:
            raise RuntimeError(f"left behind by the stopped brigd: {left[:5]}")
        self.write_conf(warm_pool)
        t0 = now()
        self.start_brigd(self.brigd)
        dt = now() - t0
        self.host, self.port = host_port(self.brigd.url)
        return dt

    def start_brigd(self, d):
        # brigd in its own session: a Ctrl-C at the terminal must reach only us, so
        # that brigd is still there to delete the sandboxes during the cleanup.
        real = subprocess.Popen

        def popen(*a, **kw):
            kw["start_new_session"] = True
            return real(*a, **kw)

        subprocess.Popen = popen
        try:
            d.start()
        finally:
            subprocess.Popen = real

    def client(self, fresh=False):
        return Client(Conn(self.host, self.port, self.key, fresh=fresh), self.live)

    def setup_runc_bundle(self):
        self.runc_root = os.path.join(self.tmp, "runc-root")
        self.bundle = os.path.join(self.tmp, "bundle")
        os.makedirs(self.runc_root, mode=0o700)
        os.makedirs(self.bundle)
        subprocess.run(["runc", "spec", "--bundle", self.bundle], check=True)
        cfg_path = os.path.join(self.bundle, "config.json")
        with open(cfg_path) as f:
            cfg = json.load(f)
        cfg["root"] = {"path": self.minimal_rootfs, "readonly": True}
        cfg["process"]["terminal"] = False
        cfg["process"]["args"] = ["/bin/true"]
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=1)
        self.runc_seq = 0
        self.runc = shutil.which("runc")

    def compile_prep(self):
        """bench/prep.c (brigd's pre-runc steps, timed) compiled with cc; None when
        that is not possible (the phase then skips those figures and says so)."""
        cc = shutil.which("cc") or shutil.which("gcc")
        out = os.path.join(self.tmp, "prep")
        if cc is None:
            self.notes.append("no C compiler: brigd's disk and id-map steps not timed")
            return None
        r = subprocess.run([cc, "-O2", "-o", out, os.path.join(REPO, "bench", "prep.c")],
                           capture_output=True, text=True)
        if r.returncode != 0:
            self.notes.append(f"bench/prep.c did not compile ({r.stderr.strip()[-300:]}): "
                              "brigd's disk and id-map steps not timed")
            return None
        return out

    def runc_once(self, bundle=None):
        """One `runc run` of /bin/true (the bare bundle unless another is given):
        wall seconds."""
        self.runc_seq += 1
        cid = f"bench-{os.getpid()}-{self.runc_seq}"
        dt, rc = spawn_wait([self.runc, "--root", self.runc_root, "run", "--bundle",
                             bundle or self.bundle, cid], stdout=self.devnull,
                            stderr=self.runc_log)
        # runc 1.1's foreground run removes the container when it exits; make sure.
        spawn_wait([self.runc, "--root", self.runc_root, "delete", "--force", cid],
                   stdout=self.devnull, stderr=self.devnull)
        if rc != 0:
            with open(os.path.join(self.tmp, "runc-baseline.log"), errors="replace") as f:
                raise RuntimeError(f"baseline runc run failed ({rc}): {f.read()[-1000:]}")
        return dt

    def setup_hardened(self, c):
        """The hardened runc bundle: the config.json brigd generated for a live
        sandbox (user namespace + id mapping, seccomp allow-list, namespaces, caps,
        masked and read-only paths, cgroup limits), with /bin/true as the process
        instead of the agent, a cgroup path of the bench's own, and a copy of the
        minimal rootfs chowned into an id range of the bench's own as root (brigd
        id-maps the template instead: bench/prep.c times that mount).  Also finds
        brigd's golden disk image and agent layer for bench/prep.c."""
        sid = c.create("minimal")
        try:
            with open(os.path.join(self.brigd.state_dir, "sandboxes", sid, "config.json")) as f:
                cfg = json.load(f)
        finally:
            c.delete(sid)
        lin = cfg["linux"]
        # brigd makes the sandbox's user namespace itself (owned by the sandbox's
        # host uid; bench/prep.c times that) and has runc join it through a
        # /proc/<brigd>/fd path that is gone once the create returns: here runc
        # makes one with the same id maps instead.
        for ns in lin.get("namespaces", []):
            if ns.get("type") == "user" and ns.pop("path", None):
                self.results["hardened_userns_joined"] = True
        if "seccomp" not in lin:
            # brigd compiles its filter once and the agent loads it (runtime/seccomp.c);
            # here runc compiles and loads the same list at every run, as brigd had it do
            # before: the "without seccomp" variant is what brigd's runc does today.
            with open(os.path.join(self.brigd.state_dir, "seccomp.json")) as f:
                lin["seccomp"] = json.load(f)
            self.results["seccomp_by_agent"] = True
        sc = lin.get("seccomp") or {}
        self.results["hardened_config"] = {
            "namespaces": [n["type"] for n in lin.get("namespaces", [])],
            "uid_mapping": lin.get("uidMappings"),
            "seccomp_default": sc.get("defaultAction"),
            "seccomp_rules": len(sc.get("syscalls", [])),
            "seccomp_syscalls": sum(len(x.get("names", [])) for x in sc.get("syscalls", [])),
            "capabilities": len(cfg["process"].get("capabilities", {}).get("bounding", [])),
            "masked_paths": len(lin.get("maskedPaths", [])),
            "readonly_paths": len(lin.get("readonlyPaths", [])),
            "resources": sorted(lin.get("resources", {})),
            "no_new_privileges": cfg["process"].get("noNewPrivileges", False),
        }
        root = os.path.join(self.tmp, "hardened-rootfs")
        subprocess.run(["cp", "-a", self.minimal_rootfs, root], check=True)
        for dirpath, dirnames, filenames in os.walk(root):
            for path in [dirpath] + [os.path.join(dirpath, n) for n in dirnames + filenames]:
                # from the original's owner: hard links must not be shifted twice
                src = os.lstat(os.path.join(self.minimal_rootfs, os.path.relpath(path, root)))
                os.lchown(path, src.st_uid + BENCH_UID_BASE, src.st_gid + BENCH_UID_BASE)
                if not stat.S_ISLNK(src.st_mode):
                    os.chmod(path, stat.S_IMODE(src.st_mode))  # chown drops set-id bits
        self.bt.searchable(root)
        cfg["process"]["args"] = ["/bin/true"]
        cfg["process"]["terminal"] = False
        cfg["root"] = {"path": root, "readonly": cfg.get("root", {}).get("readonly", False)}
        idmap = [{"containerID": 0, "hostID": BENCH_UID_BASE, "size": UID_RANGE}]
        lin["uidMappings"] = idmap
        lin["gidMappings"] = idmap
        lin["cgroupsPath"] = f"/{self.cg_parent}/hardened"
        hb = self.write_bundle("hardened", cfg)
        try:
            self.runc_once(hb)
            self.hbundle = hb
        except RuntimeError as e:
            self.notes.append(f"hardened runc run failed, not measured: {e}")
        if self.hbundle:
            self.setup_variants(cfg)
        self.setup_prep()

    def setup_variants(self, cfg):
        """The hardened config less one piece each, to split the runc-level cost."""
        nosc = json.loads(json.dumps(cfg))
        nosc["linux"].pop("seccomp", None)
        nous = json.loads(json.dumps(cfg))
        nous["linux"]["namespaces"] = [x for x in nous["linux"]["namespaces"]
                                       if x["type"] != "user"]
        nous["linux"].pop("uidMappings", None)
        nous["linux"].pop("gidMappings", None)
        for key, vcfg in (("no_seccomp", nosc), ("no_userns", nous)):
            vcfg["linux"]["cgroupsPath"] = f"/{self.cg_parent}/{key}"
            b = self.write_bundle(key, vcfg)
            try:
                self.runc_once(b)
                self.variants.append((key, b))
            except RuntimeError as e:
                self.notes.append(f"hardened runc variant {key} failed, not measured: {e}")

    def setup_prep(self):
        """bench/prep.c's inputs: brigd's golden disk image and agent layer; one try."""
        if self.prep_bin:
            golden = sorted(glob.glob(os.path.join(self.brigd.state_dir, "disk", "golden-*.img")))
            layers = [d for d in sorted(glob.glob(os.path.join(self.brigd.state_dir, "agent", "*")))
                      if not os.path.basename(d).startswith(".")]
            if not golden or not layers:
                self.notes.append("brigd's golden disk image or agent layer not found: "
                                  "its disk and id-map steps not timed")
                self.prep_bin = None
            else:
                self.golden, self.agent_layer = golden[0], layers[0]
                self.results["golden_image"] = os.path.basename(golden[0])
                try:
                    self.prep_once()
                except RuntimeError as e:
                    self.notes.append(f"{e}: brigd's disk and id-map steps not timed")
                    self.prep_bin = None

    def write_bundle(self, name, cfg):
        b = os.path.join(self.tmp, f"bundle-{name}")
        os.makedirs(b)
        with open(os.path.join(b, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        return b

    def prep_once(self):
        """bench/prep.c once: brigd's steps around runc, seconds per step."""
        r = subprocess.run([self.prep_bin, self.golden, os.path.join(self.tmp, "prep-sb"),
                            self.minimal_rootfs, self.agent_layer, str(BENCH_UID_BASE),
                            str(UID_RANGE)], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"bench/prep failed ({r.returncode}): {r.stderr.strip()[-500:]}")
        return {k: v / 1e9 for k, v in json.loads(r.stdout).items()}

    def cleanup_host(self):
        """What the hardened runs and bench/prep.c may leave on the host after a
        failure or a kill: mounts under the temp dir, loop devices backed by its
        files, the hardened container's cgroups."""
        problems = []
        mine = os.path.join(self.tmp, "prep-sb")  # brigd's own leftovers are reported, not hidden
        for m in sorted(self.bt.mounts_under(mine), key=len, reverse=True):
            r = subprocess.run(["umount", "-l", m], capture_output=True, text=True)
            problems.append(f"unmounted leftover {m}" + (f" (failed: {r.stderr.strip()})"
                                                         if r.returncode else ""))
        for bf in glob.glob("/sys/block/loop*/loop/backing_file"):
            with contextlib.suppress(OSError), open(bf) as f:
                if f.read().strip().startswith(mine + "/"):
                    dev = "/dev/" + bf.split("/")[3]
                    subprocess.run(["losetup", "-d", dev], capture_output=True)
                    problems.append(f"detached leftover {dev}")
        for top in glob.glob(f"/sys/fs/cgroup/*/{self.cg_parent}") + \
                glob.glob(f"/sys/fs/cgroup/{self.cg_parent}"):
            for sub in os.listdir(top):
                if os.path.isdir(os.path.join(top, sub)):
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(top, sub))
            try:
                os.rmdir(top)
            except OSError as e:
                problems.append(f"cgroup {top}: {e}")
        return problems

    def cleanup(self):
        problems = []
        if self.brigd is not None and self.brigd.proc is not None:
            problems += self.delete_all(self.brigd)
            problems += self.stop_brigd(self.brigd)
        if self.brigd is not None:
            left = self.bt.leftovers(self.brigd.state_dir)
            if left:
                # brigd died with sandboxes alive: a fresh brigd on the same state dir
                # re-attaches them (reconcile); delete them through it.
                problems.append(f"after stop: {left[:5]}; restarting brigd to clean up")
                try:
                    self.write_conf()  # without a warm pool
                    self.start_brigd(self.brigd)
                    self.delete_all(self.brigd)
                    self.stop_brigd(self.brigd)
                except Exception as e:  # noqa: BLE001
                    problems.append(f"clean-up brigd: {e}")
                left = self.bt.leftovers(self.brigd.state_dir)
                if left:
                    problems.append(f"still left behind: {left}")
                    self.force_clean(os.path.join(self.brigd.state_dir, "runc"))
            if self.pool_seen:
                problems += self.pool_leftovers()
        if self.runc_root and os.path.isdir(self.runc_root):
            self.force_clean(self.runc_root)
        if self.tmp:
            problems += self.cleanup_host()
            if self.bt.mounts_under(self.tmp):
                problems.append(f"mounts left under {self.tmp}: {self.bt.mounts_under(self.tmp)}"
                                " (directory kept)")
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)
        for fd in ("devnull", "runc_log"):
            with contextlib.suppress(AttributeError, OSError):
                os.close(getattr(self, fd))
        problems = [p if len(p) < 400 else p[:400] + " ..." for p in problems]
        for p in problems:
            print(f"bench: cleanup: {p}", file=sys.stderr)
        return problems

    def delete_all(self, d):
        """Deletes every sandbox of every account the bench used (a key sees only
        its own account's sandboxes)."""
        problems = []
        if d.proc is None or d.proc.poll() is not None:  # never ready, or gone: no one to ask
            return problems
        keys = [d.key] + self.extra_keys
        for key in keys:
            try:
                c = Conn(*host_port(d.url), key)
                # A create or delete still in flight (interrupted client) must finish
                # first: brigd deletes only running sandboxes.
                deadline = now() + 60
                while True:
                    sbs = c.json("GET", "/v1/sandboxes")["sandboxes"]
                    if now() > deadline or all(s["state"] == "running" for s in sbs):
                        break
                    time.sleep(0.05)
                for sid in {s["id"] for s in sbs}:
                    try:
                        c.request("DELETE", f"/v1/sandboxes/{sid}", expect=(204, 404))
                        self.live.discard(sid)
                    except Exception as e:  # noqa: BLE001
                        problems.append(f"delete {sid}: {e}")
                c.close()
            except Exception as e:  # noqa: BLE001
                problems.append(f"listing sandboxes: {e}")
        for sid in self.live.snapshot():  # tracked but not listed: try each account
            for key in keys:
                try:
                    c = Conn(*host_port(d.url), key)
                    st, _ = c.request("DELETE", f"/v1/sandboxes/{sid}", expect=(204, 404))
                    c.close()
                    if st == 204:
                        break
                except Exception as e:  # noqa: BLE001
                    problems.append(f"delete {sid}: {e}")
                    break
            self.live.discard(sid)
        return problems

    def stop_brigd(self, d):
        try:
            d.stop(timeout=60)
            return []
        except Exception as e:  # noqa: BLE001
            if d.proc is not None:
                with contextlib.suppress(OSError):
                    d.proc.kill()
                with contextlib.suppress(Exception):
                    d.proc.wait(10)
                d.proc = None
            return [f"brigd stop: {e}"]

    def force_clean(self, root):
        runc = shutil.which("runc")
        out = subprocess.run([runc, "--root", root, "list", "-q"], capture_output=True, text=True)
        for cid in out.stdout.split():
            subprocess.run([runc, "--root", root, "delete", "--force", cid], capture_output=True)

    # -- phases

    def note_brigd_times(self, ids):
        """brigd's own timing (its log): a create's runtime work, without HTTP,
        store and client; and a delete's teardown, which brigd does on its teardown
        thread after the DELETE was answered (runc delete, unmounts, network, uid
        range), so it is not part of the client's delete time."""
        pat = re.compile(r"sandbox (sbx_\w+): (running|deleted) \((?:[^,()]*, )*(\d+) ms\)")
        deadline = now() + 5.0
        while True:
            with open(self.brigd.log_path, errors="replace") as f:
                log = f.read()
            cr, de = [], []
            # "running (minimal, small, 41 ms)"; "deleted (21 ms)" once the teardown is done
            for m in pat.finditer(log):
                if m.group(1) in ids:
                    (cr if m.group(2) == "running" else de).append(int(m.group(3)) / 1000.0)
            # The last teardown may still be running: wait a little for its line.
            if len(de) >= len(ids) or now() > deadline:
                return cr, de
            time.sleep(0.05)

    def phase_create(self):
        """Cold create -> 201 (and delete) vs a bare `runc run`, and vs a `runc run`
        with brigd's hardened config.json plus brigd's disk and id-map steps timed
        by bench/prep.c; all interleaved so that drift on a noisy machine hits each
        alike."""
        n, w = self.p["create"], self.p["warmup"]
        c = self.client()
        if not self.args.skip_hardening:
            self.setup_hardened(c)
        for _ in range(w):
            self.runc_once()
            if self.hbundle:
                self.runc_once(self.hbundle)
            if self.prep_bin:
                self.prep_once()
            c.delete(c.create("minimal"))
        runc_t, hard_t, prep, create_t, delete_t, ids = [], [], [], [], [], set()
        var_t = {k: [] for k, _ in self.variants}
        var_d = {k: [] for k, _ in self.variants}  # hardened − variant, same iteration
        rng = random.Random(1)
        for i in range(n):
            # The runc runs of an iteration in a random order: no systematic
            # advantage for whichever comes first or after another.
            runs = [("bare", self.bundle)] + ([("hardened", self.hbundle)] if self.hbundle else [])
            if i % 2 == 0:  # the variants on every other iteration: enough to split
                runs += self.variants
            rng.shuffle(runs)
            got = {k: self.runc_once(b) for k, b in runs}
            runc_t.append(got["bare"])
            if self.hbundle:
                hard_t.append(got["hardened"])
            for k, _ in self.variants:
                if k in got:
                    var_t[k].append(got[k])
                    var_d[k].append(got["hardened"] - got[k])
            if self.prep_bin:
                prep.append(self.prep_once())
            t0 = now()
            sid = c.create("minimal")
            t1 = now()
            c.delete(sid)
            t2 = now()
            create_t.append(t1 - t0)
            delete_t.append(t2 - t1)
            ids.add(sid)
        srv_c, srv_d = self.note_brigd_times(ids)
        self.results["runc_run"] = summary(runc_t)
        self.results["create"] = summary(create_t)
        self.results["delete"] = summary(delete_t)
        self.results["create_delete"] = summary([a + b for a, b in zip(create_t, delete_t)])
        self.results["drift"] = {k: [round(summary(v[i * n // 5:(i + 1) * n // 5])["p50"], 1)
                                     for i in range(5)] if n >= 5 else []
                                 for k, v in (("runc_run", runc_t), ("runc_hardened", hard_t),
                                              ("create", create_t), ("delete", delete_t)) if v}
        for k, v in var_t.items():
            if v:
                self.results[f"runc_hardened_{k}"] = summary(v)
                self.results[f"runc_hardened_minus_{k}"] = summary(var_d[k])
        if hard_t:
            self.results["runc_hardened"] = summary(hard_t)
            self.results["runc_hardened_minus_bare"] = summary(
                [h - b for h, b in zip(hard_t, runc_t)])
        if prep:
            steps = {k: summary([x[k] for x in prep]) for k in prep[0]}

            def per_iter(*ks):
                return summary([sum(x[k] for k in ks) for x in prep])
            steps["disk_attach"] = per_iter("disk_copy", "loop_attach", "ext4_mount")
            steps["hardening_before_runc"] = per_iter("disk_copy", "loop_attach", "ext4_mount",
                                                      "idmap_mount")
            steps["disk_teardown"] = per_iter("umount_disk", "unlink_image")
            self.results["prep"] = steps
        self.results["create_brigd_log"] = summary(srv_c)
        self.results["delete_brigd_log"] = summary(srv_d)
        self.results["http_connections"] = {"create_phase": c.conn.opened}
        c.conn.close()

    def phase_exec(self):
        """exec `true` through the REST API (keep-alive and a fresh TCP connection
        per request) vs a local posix_spawn + waitpid of /bin/true."""
        n, nf = self.p["exec"], self.p["exec_fresh"]
        keep, fresh = self.client(), self.client(fresh=True)
        sid = keep.create("minimal")
        try:
            for _ in range(20):
                keep.exec(sid, ["true"])
                spawn_wait(["/bin/true"])
            local_t, keep_t, fresh_t, in_sb = [], [], [], []
            for i in range(n):
                local_t.append(spawn_wait(["/bin/true"])[0])
                t0 = now()
                r = keep.exec(sid, ["true"])
                keep_t.append(now() - t0)
                in_sb.append(r["duration_ms"] / 1000.0)
                if r["exit_code"] != 0:
                    raise RuntimeError(f"exec true: {r}")
                if i < nf:
                    t0 = now()
                    fresh.exec(sid, ["true"])
                    fresh_t.append(now() - t0)
            self.results["local_true"] = summary(local_t)
            self.results["exec_keepalive"] = summary(keep_t)
            self.results["exec_fresh"] = summary(fresh_t)
            self.results["exec_agent_duration"] = summary(in_sb)
            self.results["http_connections"]["exec_keepalive"] = keep.conn.opened
        finally:
            keep.delete(sid)
            keep.conn.close()

    def phase_python(self):
        """python3 start-up (local, and inside a base sandbox) and the seed loop on
        base: create, upload task.py, exec `python3 /root/task.py`, delete."""
        c = self.client()
        py_local = []
        for _ in range(5):
            spawn_wait(["/usr/bin/python3", "-c", "pass"])
        sid = c.create("base")
        try:
            ver = c.exec(sid, ["python3", "-V"])
            self.results["python_in_sandbox"] = (ver["stdout"] + ver["stderr"]).strip()
            for _ in range(5):
                c.exec(sid, ["python3", "-c", "pass"])
            rt, dur = [], []
            for _ in range(self.p["py_sandbox"]):
                py_local.append(spawn_wait(["/usr/bin/python3", "-c", "pass"])[0])
                t0 = now()
                r = c.exec(sid, ["python3", "-c", "pass"])
                rt.append(now() - t0)
                dur.append(r["duration_ms"] / 1000.0)
            self.results["py_sandbox_exec"] = summary(rt)
            self.results["py_sandbox_duration"] = summary(dur)
        finally:
            c.delete(sid)
        for _ in range(3):  # warm the loop
            self.seed_once(c)
        task = os.path.join(self.tmp, "task.py")
        with open(task, "wb") as f:
            f.write(TASK_PY)
        loop, parts = [], {"create": [], "upload": [], "exec": [], "delete": []}
        task_local = []
        for _ in range(self.p["seed"]):
            py_local.append(spawn_wait(["/usr/bin/python3", "-c", "pass"])[0])
            task_local.append(spawn_wait(["/usr/bin/python3", task], stdout=self.devnull)[0])
            tot, p, _ = self.seed_once(c)
            loop.append(tot)
            for k, v in p.items():
                parts[k].append(v)
        self.results["py_local"] = summary(py_local)
        self.results["task_local"] = summary(task_local)
        self.results["seed_loop"] = summary(loop)
        self.results["seed_parts"] = {k: summary(v) for k, v in parts.items()}
        c.conn.close()

    def seed_once(self, c):
        t0 = now()
        sid = c.create("base")
        t1 = now()
        c.put_file(sid, "/root/task.py", TASK_PY)
        t2 = now()
        r = c.exec(sid, ["python3", "/root/task.py"])
        t3 = now()
        c.delete(sid)
        t4 = now()
        if r["exit_code"] != 0 or TASK_EXPECT not in r["stdout"]:
            raise RuntimeError(f"seed loop: task.py gave {r}")
        return t4 - t0, {"create": t1 - t0, "upload": t2 - t1, "exec": t3 - t2,
                         "delete": t4 - t3}, sid

    # -- brigd's default configuration (its adaptive warm pool)

    def phase_default(self):
        """The seed loop as a new user meets it: brigd restarted with no `warm_pool` (its
        default adaptive pool), a few seed loops to warm up, then the timed ones, each
        against python3's local start-up; then 20 creates at once (each 201 timed).  Hits
        and misses are brigd's own counts.  Afterwards brigd is restarted without a pool."""
        self.brigd.default_pool = True
        try:
            self.restart_brigd()
            c = self.client()
            tariff = c.conn.json("GET", "/v1/tariffs")["default"]
            for _ in range(5):
                self.seed_once(c)
            loop, py_local = [], []
            for _ in range(self.p["seed"]):
                py_local.append(spawn_wait(["/usr/bin/python3", "-c", "pass"])[0])
                loop.append(self.seed_once(c)[0])
            burst = self.burst(20, "base")
            pool = self.pool_state(c.conn).get(f"base/{tariff}", {"hits": 0, "misses": 0})
            c.conn.close()
        finally:
            self.brigd.default_pool = False
        self.restart_brigd()
        self.results["default_config"] = {
            "seed_loop": summary(loop), "py_local": summary(py_local), "burst": summary(burst),
            "hits": pool["hits"], "creates": pool["hits"] + pool["misses"]}

    def burst(self, n, template):
        """n creates sent at once, each on its own connection: their times to 201."""
        times, ids, errors = [None] * n, [None] * n, []
        clients = [self.client() for _ in range(n)]
        go = threading.Barrier(n)

        def one(i):
            go.wait()
            t0 = now()
            try:
                ids[i] = clients[i].create(template)
                times[i] = now() - t0
            except Exception as e:  # reported below, after the others finished
                errors.append(repr(e))

        ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for c, sid in zip(clients, ids):
            if sid:
                c.delete(sid)
            c.conn.close()
        if errors:
            raise RuntimeError(f"burst of {n} creates: {errors[:3]}")
        return times

    # -- warm pool

    def pooled_ids(self):
        """Ids of the sandboxes the warm pool has started and nobody has claimed: the
        sandbox directories under the state dir that are not of a sandbox the bench
        created (a pooled sandbox has its directory, runc container, agent and, with
        networking on, its link under egress "none", but no store row; a deleted
        sandbox keeps its directory until brigd's teardown thread is done with it)."""
        sdir = os.path.join(self.brigd.state_dir, "sandboxes")
        return set(os.listdir(sdir) if os.path.isdir(sdir) else []) - self.live.created()

    @staticmethod
    def pool_state(conn):
        """GET /healthz's warm_pool: {"TEMPLATE/TARIFF": {"ready": n, "target": n,
        "hits": n, "misses": n}}; hits and misses count the creates of that template
        and tariff the pool served or found empty since brigd started."""
        wp = conn.json("GET", "/healthz")["warm_pool"]
        for k, v in wp.items():
            if "hits" not in v or "misses" not in v:
                raise RuntimeError(f"GET /healthz: warm_pool[{k!r}] = {v} has no hits/misses "
                                   "counters (a brigd older than 0f32ddf?)")
        return wp

    def wait_pool_full(self, conn, keys, timeout=60.0):
        """Polls GET /healthz until each pool in keys is at its target (waiting on an
        observable state, not for a fixed time).  (warm_pool, polls it took)."""
        deadline, polls = now() + timeout, 0
        while True:
            wp = self.pool_state(conn)
            polls += 1
            if all(wp.get(k, {}).get("ready", -1) >= wp.get(k, {}).get("target", 1)
                   for k in keys):
                return wp, polls
            if now() > deadline:
                log = [ln for ln in self.brigd.log().splitlines() if "pool" in ln]
                raise RuntimeError(f"warm pool not full after {timeout:.0f} s: {wp}; "
                                   f"brigd log: {' | '.join(log[-5:])}")
            time.sleep(0.005)  # poll interval: the pool has no change notification

    def pool_leftovers(self, link_timeout=10.0):
        """Processes, cgroups and host-side links of pooled sandboxes that were never
        claimed (brigd's store does not know them, so bt.leftovers cannot look for
        them).  A destroyed sandbox's veth pair goes with its network namespace, which
        the kernel tears down asynchronously: links are polled for until gone."""
        ids = self.pool_seen
        left = [f"pooled sandbox process {p}" for p in self.bt.sandbox_processes(ids)]
        for i in ids:
            for d in (glob.glob(f"/sys/fs/cgroup/*/brig/{i}")
                      + glob.glob(f"/sys/fs/cgroup/brig/{i}")):
                left.append(f"pooled sandbox cgroup {d}")
        links = {self.bt.host_link(i): i for i in ids}
        deadline = now() + link_timeout
        while True:
            there = [n for n in links if os.path.exists(f"/sys/class/net/{n}")]
            if not there or now() > deadline:
                break
            time.sleep(0.02)  # poll interval: the kernel's netns clean-up notifies nobody
        left += [f"pooled sandbox link {n} ({links[n]})" for n in there]
        return left

    def phase_warm(self):
        """create -> 201 when the create claims a sandbox from brigd's warm pool, and
        the seed loop with such a claim.  brigd is restarted with `warm_pool` for
        minimal (and base) at the default tariff; before each timed create the
        harness polls GET /healthz until the pool is full, so that the create can be
        a hit and no refill is in flight when it starts.  Hit or miss is what brigd
        counts: healthz's `hits` / `misses` of that template and tariff, read before
        the create (the last poll) and right after the 201 (the bench is brigd's only
        client, so exactly one of them must have gone up by one).  Cross-check: a hit
        returns an id that was one of the pool's sandbox directories before the
        request.  Misses are counted and timed apart.  Each sandbox is deleted before
        the next create.  Afterwards brigd is restarted without a pool."""
        c = self.client()
        tariff = c.conn.json("GET", "/v1/tariffs")["default"]
        c.conn.close()
        templates = ["minimal"] + ([] if self.args.skip_base else ["base"])
        spec = ",".join(f"{t}:{tariff}:{WARM_POOL_COUNT}" for t in templates)
        keys = [f"{t}/{tariff}" for t in templates]
        w = {"pool": spec, "tariff": tariff, "count": WARM_POOL_COUNT}
        w["restart_ms"] = self.restart_brigd(spec) * 1000
        c = self.client()
        t0 = now()
        self.wait_pool_full(c.conn, keys, timeout=120)
        w["fill_ms"] = (now() - t0) * 1000
        w["network"] = c.conn.json("GET", "/healthz")["network"]
        if not w["network"]:
            self.notes.append("warm pool: the restarted brigd runs without networking (another "
                              "brigd holds the host's network lock?): its pooled sandboxes have "
                              "no link and a claim applies no egress policy")
        made = {k: 0 for k in keys}  # creates of each template the bench sent
        odd = []  # counter changes that are neither one hit nor one miss
        disagree = 0  # counted a hit, but the id was not a pooled directory (or vice versa)
        unlinked = set()  # pooled sandboxes seen without their host-side link

        def before(template):
            """Waits for a full pool; (pooled ids, (hits, misses) of template's pool, polls)."""
            wp, polls = self.wait_pool_full(c.conn, keys)
            pre = self.pooled_ids()
            self.pool_seen |= pre
            if w["network"]:  # brigd connects a pooled sandbox when it starts it
                unlinked.update(i for i in pre if not link_exists(self.bt.host_link(i)))
            e = wp[f"{template}/{tariff}"]
            return pre, (e["hits"], e["misses"]), polls

        def judge(template, counts, sid, pre):
            """True for a hit, False for a miss, None when the counters say neither."""
            nonlocal disagree
            k = f"{template}/{tariff}"
            made[k] += 1
            e = self.pool_state(c.conn)[k]
            d = (e["hits"] - counts[0], e["misses"] - counts[1])
            if d not in ((1, 0), (0, 1)):
                odd.append(f"{k} hits/misses {counts} -> ({e['hits']}, {e['misses']})")
                return None
            hit = d == (1, 0)
            disagree += hit != (sid in pre)
            return hit

        hit_t, miss_t, del_t, hit_ids, polls = [], [], [], set(), []
        warm = self.p["warmup"]
        for i in range(warm + self.p["warm"]):
            pre, counts, np_ = before("minimal")
            t0 = now()
            sid = c.create("minimal")
            t1 = now()
            hit = judge("minimal", counts, sid, pre)
            t2 = now()
            c.delete(sid)
            t3 = now()
            if i < warm:
                continue
            polls.append(np_)
            if hit:
                hit_t.append(t1 - t0)
                del_t.append(t3 - t2)
                hit_ids.add(sid)
            elif hit is False:
                miss_t.append(t1 - t0)
        srv_c, srv_d = self.note_brigd_times(hit_ids)
        w.update({"create": summary(hit_t), "miss": summary(miss_t), "hits": len(hit_t),
                  "misses": len(miss_t), "delete": summary(del_t),
                  "create_brigd_log": summary(srv_c), "delete_brigd_log": summary(srv_d),
                  "polls_mean": sum(polls) / max(len(polls), 1)})
        if miss_t:
            self.notes.append(f"warm pool: brigd counted {len(miss_t)} of "
                              f"{len(miss_t) + len(hit_t)} timed creates as misses although "
                              "healthz showed the pool full before each")
        if "base" in templates:
            task = os.path.join(self.tmp, "task.py")
            with open(task, "wb") as f:
                f.write(TASK_PY)
            loop, parts = [], {"create": [], "upload": [], "exec": [], "delete": []}
            py_local, task_local, smiss = [], [], 0
            for i in range(3 + self.p["warm_seed"]):
                pre, counts, _ = before("base")
                if i >= 3:  # the first 3 warm the loop
                    py_local.append(spawn_wait(["/usr/bin/python3", "-c", "pass"])[0])
                    task_local.append(spawn_wait(["/usr/bin/python3", task],
                                                 stdout=self.devnull)[0])
                tot, pt, sid = self.seed_once(c)
                hit = judge("base", counts, sid, pre)  # counters do not move on a delete
                if i < 3:
                    continue
                if not hit:
                    smiss += hit is False
                    continue
                loop.append(tot)
                for k, v in pt.items():
                    parts[k].append(v)
            w.update({"seed_loop": summary(loop), "seed_parts": {k: summary(v)
                                                                for k, v in parts.items()},
                      "seed_misses": smiss, "py_local": summary(py_local),
                      "task_local": summary(task_local)})
            if smiss:
                self.notes.append(f"warm pool: brigd counted {smiss} seed loop(s) as misses "
                                  "(not in the seed-loop figures)")
        w["http_connections"] = c.conn.opened
        # No refill in flight when brigd stops: every pooled id is then known.
        wp, _ = self.wait_pool_full(c.conn, keys)
        self.pool_seen |= self.pooled_ids()
        c.conn.close()
        # brigd's totals since the restart must be exactly the creates the bench sent.
        w["counters"] = {k: {"hits": wp[k]["hits"], "misses": wp[k]["misses"],
                             "creates": made[k]} for k in keys}
        for k in keys:
            if wp[k]["hits"] + wp[k]["misses"] != made[k]:
                odd.append(f"{k}: brigd counted {wp[k]['hits']} hits + {wp[k]['misses']} "
                           f"misses for the bench's {made[k]} creates")
        w["odd_counts"], w["dir_disagree"] = len(odd), disagree
        if odd:
            self.notes.append(f"warm pool: healthz's hits/misses did not match the bench's "
                              f"creates ({len(odd)}×; a create whose counters moved otherwise "
                              "than by one hit or one miss is in no figure): "
                              + "; ".join(odd[:3]))
        w["pooled_unlinked"] = len(unlinked)
        if unlinked:
            self.notes.append(f"warm pool: {len(unlinked)} pooled sandbox(es) had no host-side "
                              "link while waiting in the pool (brigd connects them when it "
                              "starts them)")
        if disagree:
            self.notes.append(f"warm pool: for {disagree} create(s) brigd's hit/miss counters "
                              "and the pool's sandbox directories disagree")
        self.results["warm"] = w
        self.restart_brigd("")
        c = self.client()
        if not c.conn.json("GET", "/healthz")["network"]:
            self.notes.append("after the warm-pool phase brigd came back without networking: "
                              "the phases after it ran without")
        c.conn.close()
        left = self.pool_leftovers()
        if left:
            raise RuntimeError(f"the stopped brigd left pooled sandboxes behind: {left[:5]}")

    # -- noisy neighbour

    def cg_cpu_ns(self, sid):
        """CPU time of a sandbox's cgroup (v1 cpuacct or v2 cpu.stat), ns; 0 if unknown."""
        with contextlib.suppress(OSError, ValueError), \
                open(f"/sys/fs/cgroup/cpuacct/brig/{sid}/cpuacct.usage") as f:
            return int(f.read())
        with contextlib.suppress(OSError, ValueError), \
                open(f"/sys/fs/cgroup/brig/{sid}/cpu.stat") as f:
            for line in f:
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) * 1000
        return 0

    def cg_throttled(self, sid):
        """(CFS periods, periods throttled) of a sandbox's cgroup so far."""
        st = {}
        for path in (f"/sys/fs/cgroup/cpu/brig/{sid}/cpu.stat",
                     f"/sys/fs/cgroup/brig/{sid}/cpu.stat"):
            with contextlib.suppress(OSError, ValueError), open(path) as f:
                st = dict((k, int(v)) for k, v in (line.split() for line in f))
                break
        return st.get("nr_periods", 0), st.get("nr_throttled", 0)

    def sandbox_disk_dev(self, sid):
        """The block device (loopN) of a sandbox's writable layer, from mountinfo."""
        mp = os.path.realpath(os.path.join(self.brigd.state_dir, "sandboxes", sid, "disk"))
        with open("/proc/self/mountinfo") as f:
            for line in f:
                parts = line.split()
                if parts[4] == mp:
                    return os.path.basename(parts[parts.index("-") + 2])
        return None

    @staticmethod
    def dev_written(sysdir):
        """Bytes written to a block device so far (its stat's sectors written)."""
        try:
            with open(os.path.join(sysdir, "stat")) as f:
                return int(f.read().split()[6]) * 512
        except (OSError, IndexError, ValueError):
            return 0

    def noisy_counters(self, hogs, victim, hog_dev):
        thr = [self.cg_throttled(h) for h in hogs]
        return {"hog_cpu_ns": sum(self.cg_cpu_ns(h) for h in hogs),
                "hog_periods": sum(t[0] for t in thr), "hog_throttled": sum(t[1] for t in thr),
                "victim_cpu_ns": self.cg_cpu_ns(victim),
                "hog_disk_bytes": self.dev_written(f"/sys/block/{hog_dev}") if hog_dev else 0,
                "dev_bytes": self.dev_written(self.state_blockdev()[0] or "/nonexistent")}

    def state_blockdev(self):
        """(/sys directory of the whole disk holding the state dir, its scheduler line)."""
        st = os.stat(self.brigd.state_dir if self.brigd else self.tmp)
        d = os.path.realpath(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
        if os.path.exists(os.path.join(d, "partition")):
            d = os.path.dirname(d)
        try:
            with open(os.path.join(d, "queue", "scheduler")) as f:
                line = f.read().strip()
            active = re.search(r"\[(\S+)\]", line)
            return d, active.group(1) if active else line
        except OSError:
            return (d if os.path.isdir(d) else None), "?"

    def phase_noisy(self):
        """A victim sandbox's exec `true` (and, every 5th time, a 4 KiB O_DIRECT write
        in its own writable layer) while its neighbour, another account, is idle;
        runs a CPU hog (2 busy loops) in one sandbox; the same in two sandboxes (what
        the per-account concurrency limit still allows); or an I/O hog (dd of 2000 MiB
        with O_DIRECT into its writable layer, in a loop).  Blocks of each, their
        order rotated per round, so drift hits all alike."""
        p = self.p
        op = Conn(self.host, self.port, self.brigd.operator_key)
        try:
            acct = op.json("POST", "/v1/accounts", {"name": "bench-neighbour"}, expect=(201,))
        finally:
            op.close()
        self.extra_keys.append(acct["api_key"])
        vc = self.client()
        hc = Client(Conn(self.host, self.port, acct["api_key"]), self.live)
        kinds = NOISY_KINDS
        lat = {k: [] for k in kinds}
        probe = {k: [] for k in kinds}
        acc = {k: {"seconds": 0.0} for k in kinds}
        running, victim, hogs = [], None, []  # running: (sandbox, pid)
        try:
            victim = vc.create("minimal")
            hogs = [hc.create("minimal") for _ in range(2)]
            hog_dev = self.sandbox_disk_dev(hogs[0])
            for _ in range(20):
                vc.exec(victim, ["true"])
            vc.exec(victim, IO_PROBE)
            for rnd in range(p["noisy_rounds"]):
                r0 = rnd % len(kinds)
                for kind in kinds[r0:] + kinds[:r0]:
                    if kind in ("cpu", "cpu2"):
                        for h in hogs[:1 if kind == "cpu" else 2]:
                            running += [(h, hc.start(h, CPU_HOG)) for _ in range(2)]
                    elif kind == "io":
                        running = [(hogs[0], hc.start(hogs[0], IO_HOG))]
                    time.sleep(p["noisy_settle_s"])
                    c0, t0, i = self.noisy_counters(hogs, victim, hog_dev), now(), 0
                    while now() - t0 < p["noisy_block_s"]:
                        t1 = now()
                        r = vc.exec(victim, ["true"])
                        lat[kind].append(now() - t1)
                        if r["exit_code"] != 0:
                            raise RuntimeError(f"exec true: {r}")
                        i += 1
                        if i % 5 == 0:
                            t1 = now()
                            r = vc.exec(victim, IO_PROBE)
                            probe[kind].append(now() - t1)
                            if r["exit_code"] != 0:
                                raise RuntimeError(f"the victim's I/O probe: {r}")
                    c1, dt = self.noisy_counters(hogs, victim, hog_dev), now() - t0
                    acc[kind]["seconds"] += dt
                    for k in c0:
                        acc[kind][k] = acc[kind].get(k, 0) + c1[k] - c0[k]
                    while running:
                        hc.kill(*running.pop())
        finally:
            for h, pid in running:
                with contextlib.suppress(Exception):
                    hc.kill(h, pid)
            for c, sid in [(vc, victim)] + [(hc, h) for h in hogs]:
                if sid:
                    try:
                        c.delete(sid)
                    except Exception as e:  # noqa: BLE001  (the cleanup retries)
                        self.notes.append(f"noisy neighbour: delete {sid}: {e}")
            vc.conn.close()
            hc.conn.close()
        blocks = {}
        for k in kinds:
            a, sec = acc[k], max(acc[k]["seconds"], 1e-9)
            blocks[k] = {"exec": summary(lat[k]), "probe": summary(probe[k]),
                         "seconds": round(a["seconds"], 1),
                         "hog_throttled_pct": 100.0 * a.get("hog_throttled", 0)
                         / max(a.get("hog_periods", 0), 1),
                         "hog_cpus": a.get("hog_cpu_ns", 0) / 1e9 / sec,
                         "victim_cpus": a.get("victim_cpu_ns", 0) / 1e9 / sec,
                         "hog_write_mib_s": a.get("hog_disk_bytes", 0) / 2**20 / sec,
                         "dev_write_mib_s": a.get("dev_bytes", 0) / 2**20 / sec}
        dev, sched = self.state_blockdev()
        other = blocks["idle"]["dev_write_mib_s"]
        if other > 20:
            self.notes.append(f"noisy neighbour: something else wrote {other:.0f} MiB/s to "
                              f"{os.path.basename(dev or '?')} during the idle blocks (another "
                              "job on this host): the I/O figures are disturbed")
        return {"blocks": blocks, "rounds": p["noisy_rounds"], "block_s": p["noisy_block_s"],
                "disk": os.path.basename(dev or "?"), "scheduler": sched,
                "brigd_io_weight": self.results["machine"].get("io_weight", "?"),
                "hog_loop": hog_dev}

    def phase_throughput(self, threads):
        """Sustained create + exec `true` + delete on minimal with `threads` client
        threads for tput_s seconds; rate = completed loops / elapsed."""
        dur = self.p["tput_s"]
        stop = threading.Event()
        lat, errors, lock = [], [], threading.Lock()

        def worker():
            c = self.client()
            mine = []
            try:
                while not stop.is_set():
                    t0 = now()
                    sid = c.create("minimal")
                    try:
                        r = c.exec(sid, ["true"])
                        if r["exit_code"] != 0:
                            raise RuntimeError(f"exec true: {r}")
                    finally:
                        c.delete(sid)
                    mine.append(now() - t0)
            except Exception as e:  # noqa: BLE001
                with lock:
                    errors.append(repr(e))
            finally:
                c.conn.close()
                with lock:
                    lat.extend(mine)

        ts = [threading.Thread(target=worker, daemon=True) for _ in range(threads)]
        before = self.cpu_reading()
        t0 = now()
        try:
            for t in ts:
                t.start()
            time.sleep(dur)
        finally:
            stop.set()  # also on Ctrl-C: no new creates behind the cleanup's back
            for t in ts:
                if t.is_alive():
                    t.join(120)
        elapsed = now() - t0
        if errors:  # a correct brigd has none: figures from a failing one mean nothing
            raise RuntimeError(f"throughput with {threads} threads: {len(errors)} client "
                               f"error(s), first: {errors[0][:300]}")
        self.wait_teardowns(before["sandboxes"])  # their teardown is part of a loop's cost
        cpu = self.cpu_per_loop(before, self.cpu_reading(), len(lat))
        return {"threads": threads, "seconds": elapsed, "loops": len(lat),
                "rate": len(lat) / elapsed, "latency": summary(lat), "errors": len(errors),
                "cpu_ms_per_loop": cpu}

    SANDBOX_CG = "/sys/fs/cgroup/cpuacct/brig"

    def cpu_reading(self):
        """CPU time so far, ms: the whole host (/proc/stat, busy = not idle or iowait),
        brigd itself, the children brigd waited for (runc, mount helpers), the sandboxes'
        cgroups (cpuacct charges a parent for its removed children too) and this bench."""
        tick = 1000.0 / os.sysconf("SC_CLK_TCK")
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        host = (sum(v[:8]) - v[3] - v[4]) * tick  # user..steal less idle, iowait
        with open(f"/proc/{self.brigd.proc.pid}/stat") as f:
            st = f.read().rsplit(")", 1)[1].split()
        sandboxes_ms, n = 0.0, 0
        try:
            with open(f"{self.SANDBOX_CG}/cpuacct.usage") as f:
                sandboxes_ms = int(f.read()) / 1e6
            n = len(glob.glob(f"{self.SANDBOX_CG}/sbx_*"))
        except OSError:
            pass
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return {"host": host, "brigd": (int(st[11]) + int(st[12])) * tick,
                "children": (int(st[13]) + int(st[14])) * tick, "sandbox_cgroups": sandboxes_ms,
                "client": (ru.ru_utime + ru.ru_stime) * 1000.0, "sandboxes": n}

    def wait_teardowns(self, n, limit_s=60):
        """Until the sandbox cgroups are back to n (brigd's teardowns after the 204s done)."""
        deadline = now() + limit_s * 1000
        while len(glob.glob(f"{self.SANDBOX_CG}/sbx_*")) > n and now() < deadline:
            time.sleep(0.05)

    @staticmethod
    def cpu_per_loop(a, b, loops):
        """CPU ms per completed loop: the host's in all (the figure the ceiling rests on), and
        brigd's, its children's, the sandboxes' cgroups' and this bench's.  These overlap
        (runc's init stages run in the sandbox's cgroup and are reaped by runc) and leave out
        kernel threads (namespace and loop-device cleanup): they say who, not a sum."""
        if loops == 0:
            return {}
        d = {k: (b[k] - a[k]) / loops for k in ("host", "brigd", "children",
                                                  "sandbox_cgroups", "client")}
        d["ceiling_per_s"] = os.cpu_count() * 1000.0 / d["host"] if d["host"] > 0 else 0.0
        return {k: round(x, 2) for k, x in d.items()}

    def phase_density(self, n):
        """n idle minimal sandboxes at once: brigd RSS growth, each sandbox's cgroup
        memory, host memory in use; then delete them all."""
        c = self.client()
        pid = self.brigd.proc.pid

        def rss_kib(p):
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
            return 0

        def meminfo():
            m = {}
            with open("/proc/meminfo") as f:
                for line in f:
                    k, v = line.split(":", 1)
                    m[k] = int(v.split()[0])
            return m

        def host_used_kib():
            m = meminfo()
            return m["MemTotal"] - m["MemAvailable"]

        def settle():
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1\n")  # page cache only: make "used" less noisy
            time.sleep(1.0)

        settle()
        before = {"brigd_rss": rss_kib(pid), "host_used": host_used_kib(),
                  "brigd_fds": len(os.listdir(f"/proc/{pid}/fd")),
                  "brigd_threads": len(os.listdir(f"/proc/{pid}/task"))}
        with open(f"/proc/{pid}/limits") as f:
            nofile = [ln.split()[3] for ln in f if ln.startswith("Max open files")]
        before["brigd_nofile"] = nofile[0] if nofile else "?"
        ids, create_t = [], []
        try:
            for _ in range(n):
                t0 = now()
                ids.append(c.create("minimal", idle_timeout=3600))  # filling up may take minutes
                create_t.append(now() - t0)
            settle()
            after = {"brigd_rss": rss_kib(pid), "host_used": host_used_kib(),
                     "brigd_fds": len(os.listdir(f"/proc/{pid}/fd")),
                     "brigd_threads": len(os.listdir(f"/proc/{pid}/task"))}
            cg = []
            for sid in ids:
                for p in (f"/sys/fs/cgroup/memory/brig/{sid}/memory.usage_in_bytes",
                          f"/sys/fs/cgroup/brig/{sid}/memory.current"):
                    if os.path.exists(p):
                        with open(p) as f:
                            cg.append(int(f.read()) / 1024.0)
                        break
            procs = self.bt.sandbox_processes(ids)
            pss = 0
            for p in procs:
                with contextlib.suppress(OSError), open(f"/proc/{p}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Pss:"):
                            pss += int(line.split()[1])
            runc_at_n = [self.runc_once() for _ in range(10)]
            ex = []
            for sid in random.sample(ids, min(50, len(ids))):
                t0 = now()
                c.exec(sid, ["true"])
                ex.append(now() - t0)
            del_t = []
            while ids:
                sid = ids.pop()
                t0 = now()
                c.delete(sid)
                del_t.append(now() - t0)
            settle()
            end = {"brigd_rss": rss_kib(pid), "host_used": host_used_kib()}
        finally:
            for sid in ids:
                with contextlib.suppress(Exception):
                    c.delete(sid)
            c.conn.close()
        q = max(1, n // 10)
        per = {
            "brigd_rss_delta_kib": (after["brigd_rss"] - before["brigd_rss"]) / n,
            "cgroup_kib_mean": sum(cg) / len(cg) if cg else float("nan"),
            "cgroup_kib_max": max(cg) if cg else float("nan"),
            "pss_kib_mean": pss / n,
            "host_used_delta_kib": (after["host_used"] - before["host_used"]) / n,
            "processes": len(procs) / n,
        }
        per["overhead_kib"] = per["brigd_rss_delta_kib"] + per["cgroup_kib_mean"]
        deciles = [summary(create_t[i * n // 10:(i + 1) * n // 10])["p50"] for i in range(10)] \
            if n >= 10 else []
        return {"n": n, "before": before, "after": after, "end": end, "per_sandbox": per,
                "cgroups_read": len(cg), "create": summary(create_t),
                "create_first": summary(create_t[:q]), "create_last": summary(create_t[-q:]),
                "create_p50_by_decile": deciles,
                "exec_at_n": summary(ex), "runc_run_at_n": summary(runc_at_n),
                "delete": summary(del_t)}

    # -- machine

    def machine(self):
        m = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
             "nproc": os.cpu_count(), "cpus_allowed": len(os.sched_getaffinity(0)),
             "kernel": platform.release(), "runc": read_first_line(["runc", "--version"]),
             "python": platform.python_version(), "cpu": "?", "mem_gib": 0.0,
             "cgroup": "v2" if os.path.exists("/sys/fs/cgroup/cgroup.controllers") else "v1",
             "git": self.build_commit()}
        with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    m["cpu"] = line.split(":", 1)[1].strip()
                    break
        with contextlib.suppress(OSError), open("/proc/meminfo") as f:
            m["mem_gib"] = int(f.readline().split()[1]) / 1024 / 1024
        m["loadavg"] = os.getloadavg()[0]
        log = self.brigd.log() if self.brigd else ""
        rt = re.search(r"runtime: oci via (\S+)", log)
        m["brigd_runtime"] = rt.group(1) if rt else "?"
        net, off = re.search(r"net: pool (\S+?),", log), re.search(r"networking off: (.*)", log)
        m["networking"] = (f"on (pool {net.group(1)})" if net else
                           f"off ({off.group(1).strip()})" if off else "?")
        w = re.search(r"I/O weight: (\w+)", log)
        m["io_weight"] = w.group(1) if w else "?"
        dev, m["scheduler"] = self.state_blockdev()
        m["disk"] = os.path.basename(dev or "?")
        return m

    def build_commit(self):
        """The commit brigd was built from: the build directory's own checkout (a
        worktree of a clean commit, say), else this repository's."""
        top = os.path.dirname(self.build)
        out = subprocess.run(["git", "-C", top, "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True)
        where = top if out.returncode == 0 else REPO
        return read_first_line(["git", "-C", where, "describe", "--always", "--dirty"])

    def run(self):
        self.results["machine"] = self.machine()
        phases = [("cold create vs runc run", self.phase_create),
                  ("exec true vs local fork/exec", self.phase_exec)]
        if not self.args.skip_base:
            phases.append(("python3 start-up and the seed loop (base)", self.phase_python))
        if not self.args.skip_warm:
            phases.append(("warm-pool hits", self.phase_warm))
        if not self.args.skip_base:
            phases.append(("the seed loop, default config", self.phase_default))
        for name, fn in phases:
            t0 = now()
            print(f"bench: {name} ...", file=sys.stderr, flush=True)
            fn()
            self.results.setdefault("phase_seconds", {})[name] = round(now() - t0, 1)
        self.results["throughput"] = []
        t0 = now()
        for th in self.args.threads:
            print(f"bench: throughput, {th} threads, {self.p['tput_s']:.0f} s ...",
                  file=sys.stderr, flush=True)
            self.results["throughput"].append(self.phase_throughput(th))
        self.results.setdefault("phase_seconds", {})["throughput"] = round(now() - t0, 1)
        # before the noisy-neighbour phase, whose own busy loops raise the load
        self.results["machine"]["loadavg_end"] = os.getloadavg()[0]
        if not self.args.skip_noisy:
            print("bench: noisy neighbour (idle / CPU hog / I/O hog) ...", file=sys.stderr,
                  flush=True)
            t0 = now()
            self.results["noisy"] = self.phase_noisy()
            self.results.setdefault("phase_seconds", {})["noisy neighbour"] = round(now() - t0, 1)
        if self.args.density:
            print(f"bench: density, {self.args.density} sandboxes ...", file=sys.stderr,
                  flush=True)
            t0 = now()
            self.results["density"] = self.phase_density(self.args.density)
            self.results.setdefault("phase_seconds", {})["density"] = round(now() - t0, 1)
        self.results["machine"]["loadavg_last"] = os.getloadavg()[0]
        left = [s for s in self.live.snapshot()]
        if left:
            self.notes.append(f"sandboxes still tracked as live after the phases: {left[:5]}")


# ---- verdicts and reports --------------------------------------------------------


def verdicts(r):
    """DESIGN.md section 9, each against its same-run baseline."""
    v = []
    w = r.get("warm", {})
    if w.get("create", {}).get("n"):
        c = w["create"]
        txt = (f"{c['p50']:.2f} ms / {c['p99']:.2f} ms (p90 {c['p90']:.2f} ms; {w['hits']} hits"
               f", {w['misses']} miss{'es' if w['misses'] != 1 else ''}; networking "
               f"{'on' if w.get('network') else 'OFF'})")
        v.append(("create → ready, warm-pool hit, p50 / p99", "≤ 1.5 ms / ≤ 3 ms", txt,
                  c["p50"] <= 1.5 and c["p99"] <= 3.0))
    else:
        v.append(("create → ready, warm-pool hit, p50 / p99", "≤ 1.5 ms / ≤ 3 ms",
                  "not measured (" + ("--skip-warm" if "warm" not in r else "no hit") + ")",
                  None))
    if "create" in r:
        ratio = r["create"]["p50"] / r["runc_run"]["p50"]
        v.append(("create → ready, cold, p50", "≤ 1.3 × bare runc run p50",
                  f"{r['create']['p50']:.1f} ms = {ratio:.2f} × {r['runc_run']['p50']:.1f} ms",
                  ratio <= 1.3))
    if "exec_keepalive" in r:
        d = r["exec_keepalive"]["p50"] - r["local_true"]["p50"]
        df = r["exec_fresh"]["p50"] - r["local_true"]["p50"]
        v.append(("exec `true` round trip, p50", "≤ local fork/exec + 0.5 ms",
                  f"{r['exec_keepalive']['p50']:.2f} ms = local {r['local_true']['p50']:.2f} ms "
                  f"+ {d:.2f} ms (fresh connection: + {df:.2f} ms)", d <= 0.5))
    if "seed_loop" in r:
        d = r["seed_loop"]["p50"] - r["py_local"]["p50"]
        dt = r["seed_loop"]["p50"] - r["task_local"]["p50"]
        v.append(("seed loop (base), no pool, p50", "(no target: cold creates)",
                  f"{r['seed_loop']['p50']:.1f} ms = python3 start-up {r['py_local']['p50']:.1f} ms "
                  f"+ {d:.1f} ms (= the same script run locally, "
                  f"{r['task_local']['p50']:.1f} ms, + {dt:.1f} ms)", None))
    dc = r.get("default_config", {})
    if dc.get("seed_loop", {}).get("n"):
        d = dc["seed_loop"]["p50"] - dc["py_local"]["p50"]
        v.append(("seed loop (base), default config, p50", "≤ python3 start-up + 15 ms",
                  f"{dc['seed_loop']['p50']:.1f} ms = python3 start-up "
                  f"{dc['py_local']['p50']:.1f} ms + {d:.1f} ms ({dc['hits']} pool hits of "
                  f"{dc['creates']} creates)", d <= 15.0))
    if dc.get("burst", {}).get("n"):
        b = dc["burst"]
        v.append(("20 concurrent creates, default config, p99", "≤ 50 ms",
                  f"{b['p99']:.1f} ms (p50 {b['p50']:.1f} ms)", b["p99"] <= 50.0))
    if w.get("seed_loop", {}).get("n"):
        sl, pl = w["seed_loop"]["p50"], w["py_local"]["p50"]
        sp = w["seed_parts"]
        v.append(("seed loop (base), warm-pool hit, p50", "≤ python3 start-up + 15 ms",
                  f"{sl:.1f} ms = python3 start-up {pl:.1f} ms + {sl - pl:.1f} ms (create "
                  f"{sp['create']['p50']:.1f}, upload {sp['upload']['p50']:.1f}, exec "
                  f"{sp['exec']['p50']:.1f}, delete {sp['delete']['p50']:.1f} ms)",
                  sl - pl <= 15.0))
    if r.get("throughput"):
        best = max(r["throughput"], key=lambda t: t["rate"])
        v.append(("sustained create+exec+delete", "≥ 50/s on 2 cores",
                  ", ".join(f"{t['rate']:.1f}/s ({t['threads']} threads)"
                            for t in r["throughput"]) + cpu_bound(best), best["rate"] >= 50.0))
    if r.get("density"):
        d = r["density"]
        per = d["per_sandbox"]["overhead_kib"] / 1024
        host = d["per_sandbox"]["host_used_delta_kib"] / 1024
        ok = max(per, host) <= 1.0
        txt = (f"{d['n']} at once; {per:.2f} MiB each (brigd RSS growth + sandbox cgroup), "
               f"{host:.2f} MiB each counting all host memory in use")
        if d["n"] < 2000:
            txt += "; 2,000 not tried"
            ok = f"meets at {d['n']}" if ok else False
        v.append(("idle density", "2,000 at once, ≤ 1 MiB host overhead each", txt, ok))
    return v


def verdict_word(ok):
    if isinstance(ok, str):
        return ok
    return "—" if ok is None else ("meets" if ok else "MISSES")


def cpu_bound(t):
    """The CPU time a loop cost, and the rate that alone allows on this host's CPUs."""
    c = t.get("cpu_ms_per_loop")
    if not c:
        return ""
    return (f"; the host's CPU time per loop {c['host']:.1f} ms (runc and its helpers "
            f"{c['children']:.1f}, brigd {c['brigd']:.1f}): at most {c['ceiling_per_s']:.0f}/s "
            f"on {os.cpu_count()} CPUs")


def fmt_row(name, s, extra=""):
    if not s or not s.get("n"):
        return None
    return (name, s["n"], f"{s['p50']:.2f}", f"{s['p99']:.2f}", f"{s['mean']:.2f}", extra)


def figure_rows(r):
    rows = []
    add = lambda *a: rows.append(fmt_row(*a))  # noqa: E731
    if "create" in r:
        add("bare `runc run` /bin/true (baseline)", r["runc_run"])
        if "runc_hardened" in r:
            add("hardened `runc run` /bin/true (brigd's config.json)", r["runc_hardened"],
                f"{r['runc_hardened']['p50'] / r['runc_run']['p50']:.2f} × bare p50")
            add("  hardened − bare, per iteration", r["runc_hardened_minus_bare"])
            for k, name in (("no_seccomp", "without seccomp"),
                            ("no_userns", "without user namespace")):
                if f"runc_hardened_{k}" in r:
                    add(f"  hardened `runc run` {name}", r[f"runc_hardened_{k}"],
                        "every other iteration")
        for k, name in PREP_STEPS:
            if k in r.get("prep", {}):
                add(f"  brigd step: {name}", r["prep"][k], PREP_NOTES.get(k, ""))
        add("brig cold create → 201 (minimal)", r["create"],
            f"{r['create']['p50'] / r['runc_run']['p50']:.2f} × runc p50")
        add("  of which brigd runtime create (its log)", r["create_brigd_log"], "1 ms resolution")
        add("brig delete → 204", r["delete"], "kill, final charge, store")
        add("  then brigd's teardown (its log, after the 204)", r["delete_brigd_log"],
            TEARDOWN_NOTE)
        add("brig create + delete (same iteration)", r["create_delete"],
            f"{r['create_delete']['p50'] / r['runc_run']['p50']:.2f} × runc p50; "
            "teardown not included")
    if "exec_keepalive" in r:
        lt = r["local_true"]["p50"]
        add("local posix_spawn+wait /bin/true (baseline)", r["local_true"])
        add("exec `true` via API, keep-alive", r["exec_keepalive"],
            f"+{r['exec_keepalive']['p50'] - lt:.2f} ms vs local p50")
        add("exec `true` via API, fresh TCP connection", r["exec_fresh"],
            f"+{r['exec_fresh']['p50'] - lt:.2f} ms vs local p50")
    if "seed_loop" in r:
        pl = r["py_local"]["p50"]
        add("local `python3 -c pass` (baseline)", r["py_local"])
        add("`python3 -c pass` in sandbox, API round trip", r["py_sandbox_exec"],
            f"+{r['py_sandbox_exec']['p50'] - pl:.2f} ms vs local p50")
        add("`python3 -c pass` in sandbox, agent duration_ms", r["py_sandbox_duration"],
            "1 ms resolution")
        add("local `python3 task.py` (the seed loop's script)", r["task_local"])
        add("seed loop on base (create+upload+exec+delete)", r["seed_loop"],
            f"+{r['seed_loop']['p50'] - pl:.1f} ms vs local python3 p50")
        for k in ("create", "upload", "exec", "delete"):
            add(f"  seed loop: {k}", r["seed_parts"][k])
    w = r.get("warm", {})
    if w.get("create", {}).get("n") or w.get("miss", {}).get("n"):
        add("brig create → 201, warm-pool hit (minimal)", w["create"],
            f"p90 {w['create'].get('p90', float('nan')):.2f} ms")
        add("  of which brigd create (its log)", w["create_brigd_log"], "1 ms resolution")
        add("  create → 201 that missed the pool", w["miss"], "not in the figure above")
        add("brig delete → 204 (a claimed sandbox)", w["delete"], "kill, final charge, store")
        add("  then brigd's teardown (its log, after the 204)", w["delete_brigd_log"],
            TEARDOWN_NOTE)
    if w.get("seed_loop", {}).get("n"):
        pl = w["py_local"]["p50"]
        add("local `python3 -c pass` (baseline, warm-pool phase)", w["py_local"])
        add("local `python3 task.py` (warm-pool phase)", w["task_local"])
        add("seed loop on base, warm-pool hit", w["seed_loop"],
            f"+{w['seed_loop']['p50'] - pl:.1f} ms vs local python3 p50")
        for k in ("create", "upload", "exec", "delete"):
            add(f"  seed loop, warm-pool hit: {k}", w["seed_parts"][k])
    for t in r.get("throughput", []):
        add(f"throughput loop latency, {t['threads']} threads", t["latency"],
            f"{t['rate']:.1f} loops/s over {t['seconds']:.1f} s")
        c = t.get("cpu_ms_per_loop")
        if c:
            rows.append((f"  CPU time per loop, {t['threads']} threads", "", "", "",
                         f"{c['host']:.2f}", f"ms, the host's in all: at most "
                         f"{c['ceiling_per_s']:.0f} loops/s on {os.cpu_count()} CPUs; of it brigd "
                         f"{c['brigd']:.1f}, runc and helpers it ran {c['children']:.1f} (with "
                         f"runc's init stages, also in the sandboxes' cgroups), the sandboxes' "
                         f"cgroups {c['sandbox_cgroups']:.1f}, the bench's client "
                         f"{c['client']:.1f}"))
    return [x for x in rows if x]


TEARDOWN_NOTE = ("runc delete, unmounts, network, uid range: in the background, overlapping "
                 "what follows; 1 ms resolution")

# bench/prep.c's steps, in brigd's order (oci_create, oci_destroy).
PREP_STEPS = [
    ("disk_copy", "copy the golden ext4 image (sparse)"),
    ("loop_attach", "attach a loop device (direct I/O)"),
    ("ext4_mount", "mount ext4 + mkdir upper, work"),
    ("idmap_mount", "id-mapped template mount"),
    ("hardening_before_runc", "= new steps before runc (disk + id-map)"),
    ("userns", "user namespace for the id map"),
    ("overlay_mount", "overlay mount (not new)"),
    ("umount_overlay_lower", "unmount overlay + template"),
    ("umount_disk", "unmount ext4 (loop detaches)"),
    ("unlink_image", "unlink the disk image"),
    ("disk_teardown", "= new steps on delete (disk)"),
]
PREP_NOTES = {"userns": "brigd makes one per create and runc joins it; counted in the "
                       "runc-level figure (the hardened run makes its own)",
              "overlay_mount": "was there before the hardening",
              "disk_attach": ""}


def hardening(r):
    """What the hardening costs a create (and a delete), from the same run's p50s:
    (hardened runc − bare runc) + brigd's new steps before runc."""
    if "runc_hardened" not in r or "create" not in r:
        return None
    bare, hard, cr = r["runc_run"]["p50"], r["runc_hardened"]["p50"], r["create"]["p50"]
    h = {"bare": bare, "hardened": hard, "runc_extra": hard - bare,
         "runc_extra_paired": r["runc_hardened_minus_bare"]["p50"], "create": cr,
         "create_log": r.get("create_brigd_log", {}).get("p50"),
         "delete": r["delete"]["p50"], "delete_log": r.get("delete_brigd_log", {}).get("p50")}
    for k in ("no_seccomp", "no_userns"):
        if f"runc_hardened_minus_{k}" in r:  # median of same-iteration differences
            h[k] = r[f"runc_hardened_minus_{k}"]["p50"]
    pr = r.get("prep", {})
    h["steps"] = pr["hardening_before_runc"]["p50"] if pr else 0.0
    h["disk"] = pr["disk_attach"]["p50"] if pr else None
    h["idmap"] = pr["idmap_mount"]["p50"] if pr else None
    h["teardown"] = pr["disk_teardown"]["p50"] if pr else None
    h["cost"] = h["runc_extra"] + h["steps"]
    h["without"] = cr - h["cost"]
    h["rest"] = cr - hard - h["steps"]
    return h


def hardening_lines(r):
    h = hardening(r)
    if h is None:
        return []
    hc = r.get("hardened_config", {})
    out = [f"**Hardening costs {h['cost']:.1f} ms of the {h['create']:.1f} ms cold create** "
           f"(p50s, {100 * h['cost'] / h['create']:.0f} %); without it a create would take "
           f"about {h['without']:.1f} ms = {h['without'] / h['bare']:.2f} × bare runc, against "
           f"{h['create'] / h['bare']:.2f} × with it.", "",
           f"- **runc level: +{h['runc_extra']:.1f} ms.** Bare `runc run` {h['bare']:.1f} ms; "
           f"the same runc with brigd's config.json {h['hardened']:.1f} ms "
           f"({h['hardened'] / h['bare']:.2f} ×; median of the per-iteration differences "
           f"{h['runc_extra_paired']:+.1f} ms). That config: namespaces "
           f"{', '.join(hc.get('namespaces', []))}; a {UID_RANGE}-id uid/gid map; seccomp "
           f"`{hc.get('seccomp_default', '?')}` by default, {hc.get('seccomp_syscalls', '?')} "
           f"syscalls allowed in {hc.get('seccomp_rules', '?')} rules; "
           f"{hc.get('capabilities', '?')} capabilities; {hc.get('masked_paths', '?')} masked "
           f"and {hc.get('readonly_paths', '?')} read-only paths; no_new_privs; cgroup limits "
           f"on {', '.join(hc.get('resources', []))}."]
    split = []
    if "no_seccomp" in h:
        how = (" (compiled by runc at every start; brigd compiles it once and its agent loads "
               "it, so brigd's own runc run is the one without)") if r.get("seccomp_by_agent") else ""
        split.append(f"the seccomp filter {h['no_seccomp']:+.1f} ms{how}")
    if "no_userns" in h:
        split.append(f"the user namespace and its id map {h['no_userns']:+.1f} ms")
    if split:
        rest = h["runc_extra_paired"] - h.get("no_seccomp", 0) - h.get("no_userns", 0)
        out.append(f"  - Split by leaving one piece out (median of the same-iteration "
                   f"differences, full hardened run − the run without it): {'; '.join(split)}; "
                   f"the rest of the {h['runc_extra_paired']:+.1f} ms (capabilities, masked "
                   f"paths, cgroup namespace and limits, other differences from `runc spec`'s "
                   f"default) {rest:+.1f} ms.")
    if h["disk"] is not None:
        out.append(f"- **brigd's new steps before runc: +{h['steps']:.1f} ms** (bench/prep.c, "
                   f"the same calls as brigd; p50 of their per-iteration sum): the ext4 "
                   f"writable layer {h['disk']:.2f} ms (sparse copy of the golden image + loop "
                   f"device + mount), the id-mapped template mount {h['idmap']:.2f} ms.")
    else:
        out.append("- brigd's own new steps (ext4 layer, id-mapped mount): not timed in this "
                   "run (see the notes); the cost above is the runc part only.")
    out.append(f"- The rest of the create, {h['rest']:.1f} ms (client p50 − hardened runc − "
               f"those steps): the overlay mount, config.json, the agent handshake, the "
               f"network attach (veth, nftables), SQLite, HTTP."
               + (f" brigd's own log puts its create at {h['create_log']:.1f} ms."
                  if h["create_log"] is not None else ""))
    if h["teardown"] is not None:
        out.append(f"- Delete: {h['delete']:.1f} ms at the client (the kill, the final charge, "
                   f"the store); the teardown brigd does after the answer takes "
                   f"{h['delete_log'] if h['delete_log'] is not None else float('nan'):.1f} ms "
                   f"(its log), of which unmounting the ext4 layer and unlinking its image take "
                   f"{h['teardown']:.1f} ms (p50).")
    return out


def noisy_lines(n):
    b = n["blocks"]
    idle = b["idle"]
    kinds = [k for k in NOISY_KINDS if k in b]

    def cell(k, what, q):
        s, base = b[k][what], idle[what]
        if not s.get("n"):
            return "—"
        txt = f"{s[q]:.2f}"
        if k != "idle" and base.get("n"):
            txt += f" ({s[q] / base[q]:.2f} ×)"
        return txt

    out = ["| victim's measurement | " + " | ".join(NOISY_NAMES[k] for k in kinds) + " |",
           "|---|" + "--:|" * len(kinds)]
    for what, name in (("exec", "exec `true`"), ("probe", "4 KiB O_DIRECT write (dd)")):
        for q in ("p50", "p99", "mean"):
            out.append(f"| {name} {q}, ms | " + " | ".join(cell(k, what, q) for k in kinds)
                       + " |")
    out.append("| samples (exec / write) | " + " | ".join(
        f"{b[k]['exec'].get('n', 0)} / {b[k]['probe'].get('n', 0)}" for k in kinds) + " |")
    out.append("| neighbour's CPU use, CPUs | " + " | ".join(
        f"{b[k]['hog_cpus']:.2f}" for k in kinds) + " |")
    out.append("| neighbour's CFS periods throttled (quota used up) | " + " | ".join(
        f"{b[k].get('hog_throttled_pct', 0):.0f} %" for k in kinds) + " |")
    out.append("| victim sandbox's CPU use, CPUs | " + " | ".join(
        f"{b[k]['victim_cpus']:.2f}" for k in kinds) + " |")
    out.append("| neighbour's writes to its loop device, MiB/s | " + " | ".join(
        f"{b[k]['hog_write_mib_s']:.0f}" for k in kinds) + " |")
    out.append(f"| writes to the host disk ({n['disk']}), MiB/s | " + " | ".join(
        f"{b[k]['dev_write_mib_s']:.0f}" for k in kinds) + " |")
    out += ["", f"{n['rounds']} round(s) of a {n['block_s']:g} s block of each (order rotated "
            f"per round); victim and neighbour in different accounts, `minimal`, tariff small "
            f"(1 vCPU each). Host disk {n['disk']}: scheduler `{n['scheduler']}`; brigd's "
            f"cgroup I/O weight: {n['brigd_io_weight']}."]
    return out


def density_lines(d):
    per, b, a, e = d["per_sandbox"], d["before"], d["after"], d["end"]
    return [
        f"{d['n']} idle `minimal` sandboxes at once ({d['cgroups_read']} memory cgroups read):",
        f"- brigd RSS {b['brigd_rss'] / 1024:.1f} → {a['brigd_rss'] / 1024:.1f} MiB "
        f"({per['brigd_rss_delta_kib']:+.1f} KiB per sandbox); after deleting them all "
        f"{e['brigd_rss'] / 1024:.1f} MiB; fds {b['brigd_fds']} → {a['brigd_fds']}, "
        f"threads {b['brigd_threads']} → {a['brigd_threads']} (open-file limit "
        f"{b.get('brigd_nofile', '?')})",
        f"- sandbox memory cgroup: mean {per['cgroup_kib_mean']:.0f} KiB, max "
        f"{per['cgroup_kib_max']:.0f} KiB; PSS of its processes {per['pss_kib_mean']:.0f} KiB; "
        f"{per['processes']:.1f} host processes per sandbox",
        f"- host overhead per sandbox (brigd RSS growth + cgroup): "
        f"**{per['overhead_kib'] / 1024:.2f} MiB**",
        f"- host memory in use (MemTotal − MemAvailable, page cache dropped) grew "
        f"{per['host_used_delta_kib'] / 1024:.2f} MiB per sandbox (includes kernel memory "
        f"outside the cgroups)",
        f"- create p50 {d['create']['p50']:.1f} ms (first {max(1, d['n'] // 10)}: "
        f"{d['create_first']['p50']:.1f} ms, last {max(1, d['n'] // 10)}: "
        f"{d['create_last']['p50']:.1f} ms; p50 per tenth of the way: "
        f"{', '.join(f'{x:.0f}' for x in d.get('create_p50_by_decile', []))}); "
        f"exec `true` with all of them up p50 "
        f"{d['exec_at_n']['p50']:.2f} ms; delete p50 {d['delete']['p50']:.1f} ms",
        f"- bare `runc run` with all of them up: p50 {d['runc_run_at_n']['p50']:.1f} ms "
        f"(n={d['runc_run_at_n']['n']})",
    ]


def warm_line(w):
    """How the warm-pool phase ran and how its hits were checked."""
    n = w["hits"] + w["misses"]
    cnt = w.get("counters", {})
    tot = "; ".join(f"{k} {v['hits']} hits, {v['misses']} misses for {v['creates']} creates"
                    for k, v in cnt.items())
    txt = (f"Warm-pool phase: brigd restarted with `warm_pool = {w['pool']}` (ready in "
           f"{w['restart_ms']:.0f} ms; the pool full {w['fill_ms']:.0f} ms later). Before each "
           f"timed create the harness polled `GET /healthz` until the pool was full again "
           f"({w['polls_mean']:.1f} polls on average, 5 ms apart), so no refill was in flight "
           f"when the create started; the claim makes the pool short, and brigd refills it "
           f"once no request has run for 5 ms (100 ms at most). Hit or miss is "
           f"brigd's own count: healthz's `hits`/`misses` for the pool, read before the create "
           f"and right after the `201` — {w['hits']} hits and {w['misses']} misses of {n} timed "
           f"creates")
    if w.get("odd_counts"):
        txt += f", {w['odd_counts']} with the counters moving otherwise (in no figure)"
    txt += ("; the pool's sandbox directories before each request agree (a hit's id among "
            "them, a miss's not)" if not w.get("dir_disagree") else
            f"; for {w['dir_disagree']} the pool's sandbox directories before the request "
            "disagree")
    txt += f". healthz's totals at the end of the phase (warm-up included): {tot}." if tot else "."
    if w.get("network") and "pooled_unlinked" in w:
        txt += (" Every pooled sandbox had its host-side link while it waited in the pool."
                if not w["pooled_unlinked"] else
                f" {w['pooled_unlinked']} pooled sandbox(es) had no host-side link in the pool.")
    if "seed_loop" in w:
        txt += (f" Seed loops with a hit: {w['seed_loop'].get('n', 0)}, "
                f"{w['seed_misses']} missed.")
    return txt


def text_report(r, notes):
    m = r["machine"]
    out = [f"brig bench  {m['date']}  git {m['git']}",
           f"machine: {m['nproc']} CPUs ({m['cpu']}), {m['mem_gib']:.1f} GiB, kernel "
           f"{m['kernel']}, cgroup {m['cgroup']}; {m['runc']}; brigd runtime {m['brigd_runtime']}",
           f"brigd networking {m.get('networking', '?')}; I/O weight {m.get('io_weight', '?')}; "
           f"state dir on {m.get('disk', '?')} ({m.get('scheduler', '?')})",
           f"load average (1 min) at start {m['loadavg']:.2f}, before the noisy-neighbour "
           f"phase {m.get('loadavg_end', float('nan')):.2f}, at end "
           f"{m.get('loadavg_last', float('nan')):.2f}; brigd start-up: "
           f"{r['brigd_start_ms']:.0f} ms", ""]
    hdr = ("measurement", "n", "p50 ms", "p99 ms", "mean ms", "")
    rows = [hdr] + figure_rows(r)
    w = [max(len(str(row[i])) for row in rows) for i in range(6)]
    for row in rows:
        out.append("  ".join(str(c).ljust(w[i]) if i in (0, 5) else str(c).rjust(w[i])
                             for i, c in enumerate(row)).rstrip())
    if r.get("warm"):
        out += ["", warm_line(r["warm"]).replace("`", "")]
    if hardening(r):
        out += [""] + [x.replace("**", "") for x in hardening_lines(r)]
    if r.get("noisy"):
        out += ["", "Noisy neighbour (victim in one account, neighbour in another):"]
        out += [x.replace("**", "") for x in noisy_lines(r["noisy"])]
    if r.get("density"):
        out += [""] + density_lines(r["density"])
    out += ["", "DESIGN.md §9 targets:"]
    for name, target, got, ok in verdicts(r):
        out.append(f"  [{verdict_word(ok):>6}] {name}: {target} — {got}")
    if r.get("drift"):
        out.append("\np50 per fifth of the create phase (drift check): " + "; ".join(
            f"{k} {', '.join(f'{x:.1f}' for x in v)}" for k, v in r["drift"].items()))
    if "http_connections" in r:
        hc = r["http_connections"]
        out.append(f"\nTCP connections opened: {hc}  (1 each = keep-alive honoured)")
    for n in notes:
        out.append(f"note: {n}")
    return "\n".join(out)


def markdown(r, args, params, notes):
    m = r["machine"]
    mode = "--quick" if args.quick else "default sample sizes"
    cmd = "bench/run.py" + (" --quick" if args.quick else "") + (
        f" --density {args.density}" if args.density else "") + (
        " --skip-hardening" if args.skip_hardening else "") + (
        " --skip-noisy" if args.skip_noisy else "") + (
        " --skip-warm" if args.skip_warm else "")
    out = [BEGIN, "",
           f"Run `{cmd}` ({mode}) on {m['date']}, git `{m['git']}`.  ",
           f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['mem_gib']:.1f} GiB RAM, Linux "
           f"{m['kernel']}, cgroup {m['cgroup']}, {m['runc']} (brigd runtime: "
           f"`{m['brigd_runtime']}`; networking {m.get('networking', '?')}; cgroup I/O weight: "
           f"{m.get('io_weight', '?')}; state dir on `{m.get('disk', '?')}`, scheduler "
           f"`{m.get('scheduler', '?')}`), Python {m['python']}"
           + (f"; in the sandbox {r['python_in_sandbox']}" if r.get("python_in_sandbox") else "")
           + f".  Load average (1 min) {m['loadavg']:.2f} at the start, "
           f"{m.get('loadavg_end', float('nan')):.2f} before the noisy-neighbour phase "
           f"(whose busy loops raise it), {m.get('loadavg_last', float('nan')):.2f} at the end.",
           "", "### Against the targets", "",
           "| target (DESIGN.md §9) | wanted | this run | verdict |", "|---|---|---|---|"]
    for name, target, got, ok in verdicts(r):
        out.append(f"| {name} | {target} | {got} | {verdict_word(ok)} |")
    out += ["", "### All figures (milliseconds)", "",
            "| measurement | n | p50 | p99 | mean | note |", "|---|--:|--:|--:|--:|---|"]
    for row in figure_rows(r):
        name = row[0].replace("  ", "↳ ", 1) if row[0].startswith("  ") else row[0]
        out.append(f"| {name} | {row[1]} | {row[2]} | {row[3]} | {row[4]} | {row[5]} |")
    hc = r.get("http_connections", {})
    out += ["", f"brigd start-up (exec → ready line): {r['brigd_start_ms']:.0f} ms. "
            f"TCP connections the keep-alive client opened: {hc.get('create_phase', '?')} for "
            f"the {r.get('create', {}).get('n', 0) + params['warmup']} create/delete pairs, "
            f"{hc.get('exec_keepalive', '?')} for the {params['exec'] + 20} execs "
            f"(1 = keep-alive honoured)."]
    if r.get("warm"):
        out += ["", warm_line(r["warm"])]
    if r.get("drift"):
        out += ["", "Drift check, p50 per fifth of the create phase (ms): " + "; ".join(
            f"{k} {', '.join(f'{x:.1f}' for x in v)}" for k, v in r["drift"].items()) + "."]
    if r.get("total_seconds"):
        ph = r.get("phase_seconds", {})
        out += ["", f"The whole run took {r['total_seconds']:.0f} s"
                + (" (" + ", ".join(f"{k} {v:.0f} s" for k, v in ph.items()) + ")." if ph else ".")]
    if hardening(r):
        out += ["", "### Hardening, this run", ""] + hardening_lines(r)
    if r.get("noisy"):
        out += ["", "### Noisy neighbour, this run", ""] + noisy_lines(r["noisy"])
    if r.get("density"):
        out += ["", "### Idle density", ""] + density_lines(r["density"])
    if notes:
        out += ["", "Notes from this run:", ""] + [f"- {n}" for n in notes]
    out += ["", END]
    return "\n".join(out)


def write_doc(md):
    with open(DOC) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"bench: {DOC} has no {BEGIN} ... {END} section to replace")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(DOC + ".tmp", "w") as f:
        f.write(head + md + tail)
    os.replace(DOC + ".tmp", DOC)


# ---- main ----------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build"),
                    help="directory with brigd and brig-agent (default: build)")
    ap.add_argument("--template-cache", default="/var/cache/brig/templates",
                    help="template cache with minimal and base built")
    ap.add_argument("--quick", action="store_true", help="small samples: a ~15 s smoke run")
    ap.add_argument("-n", type=int, default=0,
                    help="samples of cold create (and of the runc baseline)")
    ap.add_argument("--duration", type=float, default=0,
                    help="seconds of each throughput run (default 10, --quick 3)")
    ap.add_argument("--threads", default=None,
                    help="client thread counts for throughput, comma-separated (default 2,4;"
                         " --quick 2)")
    ap.add_argument("--density", type=int, default=0, metavar="N",
                    help="also hold N idle minimal sandboxes at once and measure memory")
    ap.add_argument("--skip-base", action="store_true",
                    help="skip what needs the base template (python3, seed loop)")
    ap.add_argument("--skip-hardening", action="store_true",
                    help="no hardened runc run / brigd-side step timings in the create phase")
    ap.add_argument("--skip-noisy", action="store_true", help="no noisy-neighbour phase")
    ap.add_argument("--skip-warm", action="store_true",
                    help="no warm-pool phase (brigd is not restarted with a pool)")
    ap.add_argument("--write-doc", action="store_true",
                    help=f"replace the results section of {os.path.relpath(DOC, REPO)}")
    ap.add_argument("--out", help="write every figure as JSON to this file")
    args = ap.parse_args()
    args.threads = [int(x) for x in (args.threads or ("2" if args.quick else "2,4")).split(",")]
    if os.geteuid() != 0:
        raise SystemExit("bench: run as root (brigd and runc need it)")

    def on_signal(signum, frame):
        raise Interrupted(f"signal {signum}")

    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started ignored
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    b = Bench(args)
    t0 = now()
    failed = None
    try:
        b.setup()
        b.run()
    except (KeyboardInterrupt, Interrupted) as e:
        failed = f"interrupted ({str(e) or 'Ctrl-C'})"
    except Exception as e:  # noqa: BLE001
        failed = f"{type(e).__name__}: {e}"
        import traceback
        traceback.print_exc()
        if b.brigd is not None and b.brigd.proc is not None:
            print(f"--- brigd log (tail) ---\n{b.brigd.log()[-3000:]}", file=sys.stderr)
    finally:
        # No second Ctrl-C half-way through the cleanup.
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        print("bench: cleaning up ...", file=sys.stderr, flush=True)
        problems = b.cleanup()
    if failed:
        print(f"bench: FAILED: {failed}", file=sys.stderr)
        return 1
    b.results["total_seconds"] = round(now() - t0, 1)
    b.results["params"] = b.p
    if problems:
        b.notes.append(f"cleanup problems: {problems}")
    print()
    print(text_report(b.results, b.notes))
    print(f"\n(total {b.results['total_seconds']:.0f} s)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"results": b.results, "verdicts": [
                {"what": n, "target": t, "got": g, "ok": ok}
                for n, t, g, ok in verdicts(b.results)], "notes": b.notes}, f, indent=1)
    if args.write_doc:
        write_doc(markdown(b.results, args, b.p, b.notes))
        print(f"bench: updated {os.path.relpath(DOC, REPO)}", file=sys.stderr)
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
