#!/usr/bin/env python3
"""bench/isolation.py - the isolation modes side by side, in one run on one brigd:
container (runc) and gvisor (runsc), each against its bare runtime and local baselines.

Per mode: a cold create (a tariff the warm pool does not keep), a warm-pool hit, exec
`true`, `python3 -c pass` in a base sandbox, the seed loop with a pool hit (create,
upload task.py, run it, delete) and a 1 GiB upload.  Baselines in the same run: local
fork/exec of `true`, local `python3 -c pass`, bare `runsc do true` and `runsc do python3
-c pass` (gVisor's own start-up, no brigd).  The modes alternate sample by sample, so a
change in the host's load hits both alike.

  bench/isolation.py --build build --template-cache /var/cache/brig/templates [-n 30]

Needs the base and minimal templates and runsc (scripts/setup).  Prints a table and,
with --out, every figure as JSON.  docs/benchmarks.md records a run."""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("benchrun", os.path.join(HERE, "run.py"))
run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run)

MODES = ("container", "gvisor")
RUNSC = "/usr/lib/brig/bin/runsc"
POOL = "minimal:small:1,minimal:small:1:gvisor,base:small:1,base:small:1:gvisor"
GIB = 1 << 30


def pool_key(template, mode):
    return f"{template}/small" if mode == "container" else f"{template}/small/{mode}"


class Harness:
    def __init__(self, args):
        self.args = args
        self.n = args.n
        self.bt = run.load_brigtest(os.path.abspath(args.build), os.path.abspath(args.template_cache))
        self.tmp = tempfile.mkdtemp(prefix="brig-bench-iso-")
        self.live = run.Live()
        self.samples = {}  # name -> [seconds]

    def add(self, name, seconds):
        self.samples.setdefault(name, []).append(seconds)

    def start(self):
        conf = os.path.join(self.tmp, "brigd.conf")
        with open(conf, "w") as f:
            f.write("[brigd]\ninitial_credit_micro_usd = 1000000000000\n"
                    "max_live_per_account = 100000\nmax_sandboxes = 16000\n"
                    f"disk_overcommit = 0\nnet_pool = {run.BENCH_NET_POOL}\n"
                    f"warm_pool = {POOL}\n")
        self.d = self.bt.Brigd(os.path.join(self.tmp, "state"), ["--config", conf])
        self.d.start()
        host, port = run.host_port(self.d.url)
        self.conn = run.Conn(host, port, self.d.key)
        self.c = run.Client(self.conn, self.live)
        for mode in MODES:
            for t in ("minimal", "base"):
                self.wait_pool(t, mode)

    def healthz_pool(self):
        return self.conn.json("GET", "/healthz")["warm_pool"]

    def wait_pool(self, template, mode, timeout=120.0):
        key = pool_key(template, mode)
        deadline = time.monotonic() + timeout
        while self.healthz_pool()[key]["ready"] < 1:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {key} pool did not fill in {timeout} s")
            time.sleep(0.005)  # polling brigd's own state, not synchronising on time

    def create(self, template, mode, tariff="small"):
        sb = self.conn.json("POST", "/v1/sandboxes",
                            {"template": template, "tariff": tariff, "isolation": mode},
                            expect=(201,))
        if sb["isolation"] != mode:
            raise RuntimeError(f"asked for {mode}, got {sb['isolation']}")
        self.live.add(sb["id"])
        return sb["id"]

    def timed(self, name, fn):
        t0 = run.now()
        out = fn()
        self.add(name, run.now() - t0)
        return out

    # -- the phases; each alternates the modes sample by sample

    def phase_create(self):
        for _ in range(self.n):
            for mode in MODES:
                sid = self.timed(f"{mode}: cold create (minimal)",
                                 lambda: self.create("minimal", mode, tariff="medium"))
                self.c.delete(sid)
                self.wait_pool("minimal", mode)
                hits = self.healthz_pool()[pool_key("minimal", mode)]["hits"]
                sid = self.timed(f"{mode}: warm-pool hit (minimal)",
                                 lambda: self.create("minimal", mode))
                if self.healthz_pool()[pool_key("minimal", mode)]["hits"] != hits + 1:
                    raise RuntimeError(f"{mode}: a timed warm create was no hit")
                self.c.delete(sid)

    def phase_exec(self):
        sids = {m: self.create("base", m) for m in MODES}
        for _ in range(self.n * 5):
            for mode in MODES:
                r = self.timed(f"{mode}: exec true", lambda: self.c.exec(sids[mode], ["true"]))
                assert r["exit_code"] == 0, r
        for _ in range(self.n):
            for mode in MODES:
                r = self.timed(f"{mode}: python3 -c pass",
                               lambda: self.c.exec(sids[mode], ["python3", "-c", "pass"]))
                assert r["exit_code"] == 0, r
        data = os.urandom(1 << 20) * 1024  # 1 GiB
        for _ in range(max(2, self.n // 10)):
            for mode in MODES:
                self.timed(f"{mode}: upload 1 GiB",
                           lambda: self.c.put_file(sids[mode], "/tmp/big", data))
                self.c.exec(sids[mode], ["rm", "-f", "/tmp/big"])
        for sid in sids.values():
            self.c.delete(sid)

    def phase_seed(self):
        for _ in range(self.n):
            for mode in MODES:
                self.wait_pool("base", mode)

                def loop():
                    sid = self.create("base", mode)
                    self.c.put_file(sid, "/root/task.py", run.TASK_PY)
                    r = self.c.exec(sid, ["python3", "/root/task.py"])
                    self.c.delete(sid)
                    if r["exit_code"] != 0 or run.TASK_EXPECT not in r["stdout"]:
                        raise RuntimeError(f"seed loop: {r}")

                self.timed(f"{mode}: seed loop, warm-pool hit", loop)

    def phase_baselines(self):
        dn = subprocess.DEVNULL
        runsc = [RUNSC, "--platform=systrap", "--network=none", "--root",
                 os.path.join(self.tmp, "runsc-root"), "do"]
        for _ in range(self.n):
            self.timed("local: true", lambda: subprocess.run(["true"], check=True))
            self.timed("local: python3 -c pass",
                       lambda: subprocess.run(["/usr/bin/python3", "-c", "pass"], check=True))
        for _ in range(max(5, self.n // 3)):
            self.timed("bare runsc do true",
                       lambda: subprocess.run(runsc + ["/bin/true"], check=True, stdout=dn))
            self.timed("bare runsc do python3 -c pass",
                       lambda: subprocess.run(runsc + ["/usr/bin/python3", "-c", "pass"], check=True,
                                              stdout=dn))

    def stop(self):
        for sid in self.live.snapshot():
            self.conn.request("DELETE", f"/v1/sandboxes/{sid}", expect=(204, 404))
        self.d.stop()
        left = self.bt.leftovers(self.d.state_dir)
        shutil.rmtree(self.tmp, ignore_errors=True)
        if left:
            raise RuntimeError(f"left behind: {left}")

    def report(self):
        rows = {}
        print(f"{'':44} {'n':>5} {'p50 ms':>9} {'p99 ms':>9} {'mean ms':>9}")
        for name, v in self.samples.items():
            s = sorted(v)
            row = dict(n=len(s), p50=run.pct(s, 50) * 1000, p99=run.pct(s, 99) * 1000,
                       mean=sum(s) / len(s) * 1000)
            rows[name] = row
            print(f"{name:44} {row['n']:5d} {row['p50']:9.2f} {row['p99']:9.2f} "
                  f"{row['mean']:9.2f}")
        p = {k: r["p50"] for k, r in rows.items()}
        print("\nTargets (issue 12):")
        hit = p["gvisor: warm-pool hit (minimal)"]
        print(f"  gvisor warm-pool hit p50 <= 5 ms: {hit:.2f} ms "
              f"({'meets' if hit <= 5 else 'MISSES'})")
        ex = p["gvisor: exec true"] - p["local: true"]
        print(f"  gvisor exec true <= local + 5 ms: local + {ex:.2f} ms "
              f"({'meets' if ex <= 5 else 'MISSES'})")
        sl, sc = p["gvisor: seed loop, warm-pool hit"], p["container: seed loop, warm-pool hit"]
        print(f"  gvisor seed loop (hit) <= 2 x container's: {sl:.1f} ms = {sl / sc:.2f} x "
              f"{sc:.1f} ms ({'meets' if sl <= 2 * sc else 'MISSES'})")
        return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--template-cache", default="/var/cache/brig/templates")
    ap.add_argument("-n", type=int, default=30, help="samples per figure (exec: 5 x n)")
    ap.add_argument("--out", help="write the figures as JSON here")
    args = ap.parse_args()
    if not os.access(RUNSC, os.X_OK):
        raise SystemExit(f"bench/isolation.py: {RUNSC} missing (scripts/setup installs it)")
    h = Harness(args)
    t0 = time.monotonic()
    try:
        h.start()
        h.phase_baselines()
        h.phase_create()
        h.phase_exec()
        h.phase_seed()
    finally:
        h.stop()
    rows = h.report()
    print(f"\n(total {time.monotonic() - t0:.0f} s, load average {os.getloadavg()[0]:.1f})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
