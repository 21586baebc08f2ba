#!/usr/bin/env python3
"""The seed loop (create `base`, upload task.py, exec `python3 /root/task.py`, delete) of two
or more builds of brigd, in turns in one run, each against python3's local start-up measured
beside it: brigd's default adaptive warm pool (then 20 creates at once), or with `--pinned` a
pool of one `base` sandbox that the loop waits to be full before each create (bench/run.py's
warm-pool phase).  Hits are brigd's own counts (GET /healthz).

    unshare -n sh -c 'ip link set lo up; bench/seed_ab.py BUILD_A BUILD_B [--rounds 2] [-n 100]'

Each BUILD is a directory with brigd and brig-agent (e.g. build/, or a copy of an older one).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.join(REPO, "bench"))
os.environ.setdefault("BRIG_TEMPLATE_CACHE", "/var/cache/brig/templates")

import brigtest  # noqa: E402
from run import TASK_PY  # noqa: E402


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def pool_ready(api):
    return api.ok("GET", "/healthz").json()["warm_pool"].get("base/small", {}).get("ready", 0)


def one_build(build, state, n, pinned, out):
    brigtest.BUILD = build
    args = []
    if pinned:
        conf = state + ".conf"
        with open(conf, "w") as f:
            f.write("[brigd]\nwarm_pool = base:small:1\n")
        args = ["--config", conf]
    d = brigtest.Brigd(state, args, default_pool=not pinned).start()
    try:
        api = d.api()

        def once():
            t = [time.perf_counter()]
            sid = api.create("base")["id"]
            t.append(time.perf_counter())
            api.put_file(sid, "/root/task.py", TASK_PY)
            t.append(time.perf_counter())
            r = api.exec(sid, argv=["python3", "/root/task.py"])
            t.append(time.perf_counter())
            api.delete(sid)
            t.append(time.perf_counter())
            if r["exit_code"] != 0:
                raise RuntimeError(f"task.py gave {r}")
            out["parts"].append([(b - a) * 1000 for a, b in zip(t, t[1:])])
            return (t[-1] - t[0]) * 1000

        brigtest.wait_for(lambda: pool_ready(api) >= 1, timeout=60, what="the first warm sandbox")
        for _ in range(5):
            once()
        for _ in range(n):
            t0 = time.perf_counter()
            subprocess.run(["/usr/bin/python3", "-c", "pass"], check=True)
            out["py"].append((time.perf_counter() - t0) * 1000)
            if pinned:
                brigtest.wait_for(lambda: pool_ready(api) >= 1, timeout=60, interval=0.005,
                                  what="the pool full again")
            out["loop"].append(once())
        wp = api.ok("GET", "/healthz").json()["warm_pool"]["base/small"]
        out["hits"] += wp["hits"]
        out["creates"] += wp["hits"] + wp["misses"]
        if not pinned:
            out["burst"] += burst(d, api, 20)
    finally:
        d.stop()


def burst(d, api, n):
    apis = [d.api() for _ in range(n)]
    times, ids = [None] * n, [None] * n
    go = threading.Barrier(n)

    def one(i):
        go.wait()
        t0 = time.perf_counter()
        ids[i] = apis[i].create("base")["id"]
        times[i] = (time.perf_counter() - t0) * 1000

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for sid in ids:
        if sid:
            api.delete(sid)
    if None in times:
        raise RuntimeError("a create of the burst failed")
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("builds", nargs="+", help="directories with brigd and brig-agent")
    ap.add_argument("--rounds", type=int, default=2, help="turns of every build")
    ap.add_argument("-n", type=int, default=100, help="timed loops per build per round")
    ap.add_argument("--pinned", action="store_true", help="a pinned pool of one, waited for")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="brig-seed-ab-")
    res = {b: {"loop": [], "py": [], "parts": [], "hits": 0, "creates": 0, "burst": []}
           for b in a.builds}
    try:
        for r in range(a.rounds):
            for i, b in enumerate(a.builds):
                one_build(os.path.abspath(b), os.path.join(tmp, f"r{r}b{i}"), a.n, a.pinned,
                          res[b])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for b in a.builds:
        x = res[b]
        loop, py = statistics.median(x["loop"]), statistics.median(x["py"])
        line = (f"{b}: seed loop p50 {loop:.1f} ms = python3 {py:.1f} + {loop - py:.1f} ms, "
                f"p90 {pct(x['loop'], 0.9):.1f}; hits {x['hits']} of {x['creates']}")
        hits = [p for p in x["parts"] if p[0] < 8]  # a claim answers in a few ms
        if hits:
            med = [statistics.median(p[k] for p in hits) for k in range(4)]
            line += (f"; a hit loop: create {med[0]:.1f}, upload {med[1]:.1f}, exec {med[2]:.1f},"
                     f" delete {med[3]:.1f} ms")
        if x["burst"]:
            line += (f"; 20 at once: p50 {statistics.median(x['burst']):.0f},"
                     f" p99 {pct(x['burst'], 0.99):.0f} ms")
        print(line)


if __name__ == "__main__":
    main()
