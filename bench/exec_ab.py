#!/usr/bin/env python3
"""bench/exec_ab.py - exec `true` through the REST API of two brigd builds side by side (A/B).

    unshare -n sh -c 'ip link set lo up; /usr/bin/python3 bench/exec_ab.py \
        --a /tmp/base-build --b build -n 2000'

Starts one brigd of each build (each on its own state dir, `network = off` for both, since
only one brigd per network namespace may manage sandbox networking), creates a `minimal`
sandbox in each, and then times, interleaved sample by sample so that the host's noise hits
all three alike: a local posix_spawn + waitpid of /bin/true, exec `true` through A, and through
B (each on its own keep-alive connection).  Prints p50/p90/mean of each, B/A ratios and each
one's excess over the local fork/exec.  With --fresh each exec opens a new TCP connection.
With --claim it times create (a warm-pool hit) + exec `true` + delete instead, through both.
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
os.environ.setdefault("BRIG_BUILD", os.path.join(HERE, "..", "build"))
os.environ.setdefault("BRIG_TEMPLATE_CACHE", "/var/cache/brig/templates")
import brigtest  # noqa: E402


class Build(brigtest.Brigd):
    def __init__(self, build, state, conf):
        super().__init__(state, ["--config", conf], default_pool=True)
        self.build = os.path.abspath(build)

    def argv(self):
        a = super().argv()
        a[0] = os.path.join(self.build, "brigd")
        a[a.index("--agent") + 1] = os.path.join(self.build, "brig-agent")
        return a


class Conn:
    def __init__(self, url, key, fresh=False):
        u = url.split("//")[1]
        self.host, self.port = u.split(":")[0], int(u.split(":")[1])
        self.key, self.fresh, self.c = key, fresh, None

    def req(self, method, path, body=None):
        if self.c is None or self.fresh:
            if self.c is not None:
                self.c.close()
            self.c = http.client.HTTPConnection(self.host, self.port, timeout=60)
        h = {"Authorization": f"Bearer {self.key}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        self.c.request(method, path, body=data, headers=h)
        r = self.c.getresponse()
        out = r.read()
        if r.status >= 300:
            raise RuntimeError(f"{method} {path}: {r.status} {out[:200]!r}")
        return json.loads(out) if out else None


def spawn_true():
    t0 = time.perf_counter()
    pid = os.posix_spawn("/bin/true", ["/bin/true"], os.environ)
    os.waitpid(pid, 0)
    return time.perf_counter() - t0


def summary(xs):
    s = sorted(xs)
    return {"p50": s[len(s) // 2] * 1e3, "p90": s[int(len(s) * 0.9)] * 1e3,
            "mean": statistics.fmean(s) * 1e3}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="build dir A (the baseline)")
    ap.add_argument("--b", required=True, help="build dir B")
    ap.add_argument("-n", type=int, default=1000)
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--claim", action="store_true",
                    help="time create (pool hit) + exec + delete instead of exec alone")
    ap.add_argument("--template", default="minimal")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="brig-ab-")
    brigtest.searchable(tmp)
    ds = []
    try:
        for name, build in (("A", args.a), ("B", args.b)):
            conf = os.path.join(tmp, f"{name}.conf")
            with open(conf, "w") as f:
                f.write("[brigd]\nnetwork = off\ninitial_credit_micro_usd = 1000000000000\n"
                        "max_live_per_account = 1000\n"
                        + (f"warm_pool = {args.template}:small:1\n" if args.claim
                           else "warm_pool = off\n"))
            d = Build(build, os.path.join(tmp, name), conf).start()
            ds.append(d)
        conns = [Conn(d.url, d.key, args.fresh) for d in ds]
        sids = [None, None]
        if not args.claim:
            sids = [c.req("POST", "/v1/sandboxes", {"template": args.template})["id"]
                    for c in conns]
        times = {"local": [], "A": [], "B": []}

        def pool_full(c):
            for _ in range(2000):
                h = c.req("GET", "/healthz")
                p = h.get("warm_pool", {}).get(f"{args.template}/small")
                if p and p["ready"] >= p["target"]:
                    return
                time.sleep(0.005)
            raise RuntimeError("pool never full")

        def one(i, c, sid):
            if not args.claim:
                t0 = time.perf_counter()
                r = c.req("POST", f"/v1/sandboxes/{sid}/exec", {"argv": ["true"]})
                assert r["exit_code"] == 0, r
                return time.perf_counter() - t0
            pool_full(c)
            t0 = time.perf_counter()
            s = c.req("POST", "/v1/sandboxes", {"template": args.template})["id"]
            c.req("POST", f"/v1/sandboxes/{s}/exec", {"argv": ["true"]})
            dt = time.perf_counter() - t0
            c.req("DELETE", f"/v1/sandboxes/{s}")
            return dt

        warm = 20 if not args.claim else 3
        for i in range(args.n + warm):
            order = [0, 1] if i % 2 == 0 else [1, 0]
            loc = spawn_true()
            got = {}
            for k in order:
                got[k] = one(i, conns[k], sids[k])
            if i >= warm:
                times["local"].append(loc)
                times["A"].append(got[0])
                times["B"].append(got[1])
        res = {k: summary(v) for k, v in times.items()}
        pairs = sorted(b / a for a, b in zip(times["A"], times["B"]))
        print(f"n={args.n} load={os.getloadavg()[0]:.2f} fresh={args.fresh} claim={args.claim}")
        for k, v in res.items():
            extra = "" if k == "local" else \
                f"  (p50 - local p50: {v['p50'] - res['local']['p50']:+.3f} ms)"
            print(f"  {k:5s} p50 {v['p50']:.3f}  p90 {v['p90']:.3f}  mean {v['mean']:.3f} ms{extra}")
        print(f"  B/A p50 {res['B']['p50'] / res['A']['p50']:.3f}, "
              f"median of paired ratios {pairs[len(pairs) // 2]:.3f}")
        for c, s in zip(conns, sids):
            if s:
                c.req("DELETE", f"/v1/sandboxes/{s}")
    finally:
        for d in ds:
            try:
                d.stop()
            except Exception as e:  # noqa: BLE001
                print("stop:", e, file=sys.stderr)


if __name__ == "__main__":
    main()
