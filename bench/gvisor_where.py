"""bench/gvisor_where.py [--build DIR] [-n N] [--rounds R] - where a gVisor sandbox's time goes.

One brigd per runsc variant (networking off in all, so that they are alike), all started
at once and measured in turn, round after round, so that a change of the host's speed
hits every variant alike.  The variants differ in one runsc setting each from brigd's
default (docs/operations.md): the platform (systrap, ptrace), where the root's writes
live (gVisor's overlay with its store on the sandbox's disk, in memory, or none: through
the gofer into the host layer), directfs (on, off); and container mode as the baseline.

Per variant: cold create -> 201 (minimal), exec `true` and `python3 -c pass` round trips,
writing 2000 small files inside (python), an 8 MiB upload; wall time (median) and the
sandbox's CPU time (its cgroup's cpuacct.usage: the Sentry, its stubs and its programs),
which a loaded host inflates far less than wall time.  docs/benchmarks.md records a run.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))

VARIANTS = [
    ("container", None),
    ("gvisor default (systrap, overlay self, directfs)", {}),
    ("gvisor ptrace", {"runsc_platform": "ptrace"}),
    ("gvisor overlay none (gofer)", {"runsc_overlay": "none"}),
    ("gvisor overlay memory", {"runsc_overlay": "memory"}),
    ("gvisor directfs off", {"runsc_directfs": "off"}),
]

FILES = ("import os\nos.makedirs('/root/w', exist_ok=True)\n"
         "for i in range(2000):\n    open(f'/root/w/{i}', 'w').write('x' * 100)\n")


def cpu_ms(sid):
    try:
        with open(f"/sys/fs/cgroup/cpuacct/brig/{sid}/cpuacct.usage") as f:
            return int(f.read()) / 1e6
    except OSError:
        with open(f"/sys/fs/cgroup/brig/{sid}/cpu.stat") as f:
            return int(f.read().split()[1]) / 1e3


def timed(fn, sid):
    c0, t0 = cpu_ms(sid), time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000, cpu_ms(sid) - c0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("-n", type=int, default=10, help="samples of each step per round")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    os.environ["BRIG_BUILD"] = os.path.abspath(args.build)
    os.environ.setdefault("BRIG_TEMPLATE_CACHE", "/var/cache/brig/templates")
    import brigtest
    root = tempfile.mkdtemp(prefix="brig-bench-gv-")
    daemons = []
    try:
        for i, (name, sets) in enumerate(VARIANTS):
            cfg = os.path.join(root, f"v{i}.conf")
            with open(cfg, "w") as f:
                f.write("[brigd]\nnetwork = off\n")
                for k, v in (sets or {}).items():
                    f.write(f"{k} = {v}\n")
            d = brigtest.Brigd(os.path.join(root, f"v{i}"), ["--config", cfg]).start()
            daemons.append(d)
        res = {name: {} for name, _ in VARIANTS}
        payload = os.urandom(8 << 20)
        for _ in range(args.rounds):
            for (name, sets), d in zip(VARIANTS, daemons):
                a = d.api()
                iso = "container" if sets is None else "gvisor"
                r = res[name]
                for _ in range(max(1, args.n // 3)):
                    t0 = time.perf_counter()
                    sid = a.create("minimal", isolation=iso)["id"]
                    r.setdefault("create", []).append(((time.perf_counter() - t0) * 1000, 0))
                    a.delete(sid)
                sid = a.create("base", isolation=iso)["id"]
                ex = lambda argv: a.ok("POST", f"/v1/sandboxes/{sid}/exec", {"argv": argv})
                ex(["true"])
                for _ in range(args.n):
                    r.setdefault("exec true", []).append(timed(lambda: ex(["true"]), sid))
                for _ in range(max(1, args.n // 2)):
                    r.setdefault("python3 -c pass", []).append(
                        timed(lambda: ex(["python3", "-c", "pass"]), sid))
                r.setdefault("2000 small files", []).append(
                    timed(lambda: ex(["python3", "-c", FILES]), sid))
                r.setdefault("8 MiB upload", []).append(timed(
                    lambda: a.ok("PUT", f"/v1/sandboxes/{sid}/files?path=/root/up", payload),
                    sid))
                a.delete(sid)
        steps = ["create", "exec true", "python3 -c pass", "2000 small files", "8 MiB upload"]
        print("| variant | " + " | ".join(steps) + " |")
        print("|---|" + "---|" * len(steps))
        for name, _ in VARIANTS:
            cells = []
            for s in steps:
                w = statistics.median(x[0] for x in res[name][s])
                c = statistics.median(x[1] for x in res[name][s])
                cells.append(f"{w:.1f}" + (f" ({c:.1f})" if s != "create" else ""))
            print(f"| {name} | " + " | ".join(cells) + " |")
        print("\nms, median: wall (the sandbox's CPU time); create: wall only")
    finally:
        for d in daemons:
            try:
                d.stop()
            except Exception as e:  # a variant that failed to start
                print(f"stop: {e}", file=sys.stderr)


if __name__ == "__main__":
    main()
