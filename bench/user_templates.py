#!/usr/bin/env python3
"""bench/user_templates.py - what a template declared by a user costs (issue 15): a cold
create from it against one from its parent, alternating sample by sample on one brigd (no
warm pool: every create is cold), a build that hits the cache, and then, on a brigd with its
default adaptive pool, a warm-pool hit from each (every create waits until both pools have
a sandbox ready, and counts only if healthz's hits went up by one).

  BRIG_BUILD=build BRIG_TEMPLATE_CACHE=/var/cache/brig/templates \\
      /usr/bin/python3 bench/user_templates.py [-n 20] [--parent base]

Run it in a network namespace of its own like the tests (unshare -n, lo up).  Prints
p50/p99 per case; docs/benchmarks.md records a run."""
import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import brigtest  # noqa: E402


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def timed(f):
    t0 = time.monotonic()
    v = f()
    return (time.monotonic() - t0) * 1000, v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--parent", default="base")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="brig-bench-utpl-")
    d = brigtest.Brigd(os.path.join(tmp, "state")).start()
    try:
        api = d.api()
        spec = {"name": "bench", "from": args.parent, "env": {"A": "b"}, "workdir": "/w",
                "run": ["echo x > /w/x"]}
        build_ms, _ = timed(lambda: api.ok("POST", "/v1/templates", spec))
        hits = [timed(lambda: api.ok("POST", "/v1/templates", spec, expect=(200,)))[0]
                for _ in range(args.n)]
        times = {args.parent: [], "bench:latest": []}
        for _ in range(args.n):
            for t in times:
                ms, sb = timed(lambda: api.create(t))
                times[t].append(ms)
                api.delete(sb["id"])
        print(f"build from {args.parent}: {build_ms:.0f} ms")
        print(f"cache hit (POST /v1/templates again): p50 {pct(hits, 50):.1f} ms, "
              f"p99 {pct(hits, 99):.1f} ms")
        for t, xs in times.items():
            print(f"cold create from {t}: p50 {pct(xs, 50):.0f} ms, p99 {pct(xs, 99):.0f} ms, "
                  f"mean {statistics.mean(xs):.0f} ms")
        api.ok("DELETE", "/v1/templates/bench", expect=(204,))
    finally:
        d.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    pool_hits(args, spec)


def pool_of(api, key):
    return api.request("GET", "/healthz", key=None).json()["warm_pool"].get(key, {})


def pool_hits(args, spec):
    """Warm-pool hits from the parent and from the user template, alternating, on a brigd
    with its default (adaptive) pool, which learns both from the first creates."""
    tmp = tempfile.mkdtemp(prefix="brig-bench-utpl-pool-")
    d = brigtest.Brigd(os.path.join(tmp, "state"), default_pool=True).start()
    try:
        api = d.api()
        api.ok("POST", "/v1/templates", spec)
        keys = {args.parent: f"{args.parent}/small", "bench:latest": "user/small"}
        times = {t: [] for t in keys}
        for i in range(args.n + 3):  # the first creates teach the pool both templates
            for t, key in keys.items():
                brigtest.wait_for(lambda: all(pool_of(api, k).get("ready", 0) >= 1
                                              for k in keys.values()) or i < 3,
                                  timeout=60, what="both pools to fill")
                before = pool_of(api, key).get("hits", 0)
                ms, sb = timed(lambda: api.create(t))
                api.delete(sb["id"])
                if i >= 3 and pool_of(api, key).get("hits", 0) == before + 1:
                    times[t].append(ms)
        for t, xs in times.items():
            if xs:
                print(f"warm-pool hit from {t}: p50 {pct(xs, 50):.1f} ms, "
                      f"p99 {pct(xs, 99):.1f} ms ({len(xs)} hits)")
        api.ok("DELETE", "/v1/templates/bench", expect=(204,))
    finally:
        d.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
