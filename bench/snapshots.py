#!/usr/bin/python3
"""Pause, resume, snapshot, create-from-snapshot and fork, timed against a real brigd
(issue 16; results and what they mean in docs/benchmarks.md, "Pause, snapshots, fork").

For each amount of state (MiB written into the sandbox's writable layer before the
timings; default 1 and 100; 1024 fits the small tariff's 2 GiB disk) and each isolation
mode (gVisor: pause and resume of a default sandbox, the rest of one created with
"snapshots": true, docs/snapshots.md): `-n` samples of each operation, as the API's
caller sees it (one HTTP request), median and p90 in ms.  fork x1 and x10 are timed
per fork and per child (gVisor: also with its memory, {"memory": true}).

As root, with Debian's python3 (standard library only), after `make build templates`,
inside a network namespace of its own like the tests:

    unshare -n sh -c 'ip link set lo up; /usr/bin/python3 bench/snapshots.py'
    ... bench/snapshots.py --mib 1,100,1024 -n 5 --out snap.json

Everything runs in one brigd with a temporary state directory, stopped (and its
sandboxes and snapshots deleted) at the end.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import brigtest  # noqa: E402


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t) * 1000, out


def stats(ms):
    ms = sorted(ms)
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 1),
            "p90_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.9))], 1)}


def fill(api, sid, mib):
    r = api.exec(sid, f"head -c {mib * 1048576} /dev/urandom > /root/state", timeout=600)
    assert r["exit_code"] == 0, r


def bench_pause(api, iso, mib, n):
    sid = api.create("minimal", isolation=iso)["id"]
    try:
        fill(api, sid, mib)
        p, r = [], []
        for _ in range(n):
            p.append(timed(lambda: api.ok("POST", f"/v1/sandboxes/{sid}/pause"))[0])
            r.append(timed(lambda: api.ok("POST", f"/v1/sandboxes/{sid}/resume"))[0])
        return {"pause": stats(p), "resume": stats(r)}
    finally:
        api.delete(sid)


def bench_snapshots(api, iso, mib, n):
    extra = {"snapshots": True} if iso == "gvisor" else {}
    sid = api.create("minimal", isolation=iso, **extra)["id"]
    out = {}
    try:
        fill(api, sid, mib)
        snaps, take, make = [], [], []
        for _ in range(n):
            ms, r = timed(lambda: api.ok("POST", f"/v1/sandboxes/{sid}/snapshot", expect=(201,)))
            take.append(ms)
            snaps.append(r.json()["id"])
        for _ in range(n):
            ms, r = timed(lambda: api.ok("POST", "/v1/sandboxes",
                                         {"snapshot": snaps[0], "isolation": iso}))
            make.append(ms)
            api.delete(r.json()["id"])
        out["snapshot"] = stats(take)
        out["create_from_snapshot"] = stats(make)
        for memory in (False, True) if iso == "gvisor" else (False,):
            for count in (1, 10):
                per_fork, per_child = [], []
                for _ in range(max(1, n // count)):
                    ms, r = timed(lambda: api.ok("POST", f"/v1/sandboxes/{sid}/fork",
                                                 {"count": count, "memory": memory},
                                                 expect=(201,)))
                    kids = r.json()["sandboxes"]
                    assert len(kids) == count, r.json()
                    per_fork.append(ms)
                    per_child.append(ms / count)
                    for k in kids:
                        api.delete(k["id"])
                name = f"fork{'_memory' if memory else ''}_x{count}"
                out[name] = stats(per_fork)
                out[f"{name}_per_child"] = stats(per_child)
        for s in snaps:
            api.ok("DELETE", f"/v1/snapshots/{s}", expect=(204,))
        return out
    finally:
        api.delete(sid)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", default="1,100", help="MiB written before the timings (list)")
    ap.add_argument("-n", type=int, default=5, help="samples of each operation")
    ap.add_argument("--skip-gvisor", action="store_true")
    ap.add_argument("--out", help="also write the figures as JSON here")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="brig-snapbench-")
    cfg = os.path.join(tmp, "brigd.conf")
    with open(cfg, "w") as f:  # fork x10: eleven live sandboxes of one account
        f.write("[brigd]\nmax_live_per_account = 40\n")
    d = brigtest.Brigd(os.path.join(tmp, "state"), ["--config", cfg]).start()
    res = {}
    try:
        api = d.api()
        gvisor = not a.skip_gvisor and brigtest.gvisor_refusal(api) is None
        for mib in [int(x) for x in a.mib.split(",")]:
            row = {"container": bench_pause(api, "container", mib, a.n)}
            row["container"].update(bench_snapshots(api, "container", mib, a.n))
            if gvisor:
                row["gvisor"] = bench_pause(api, "gvisor", mib, a.n)
                row["gvisor"].update(bench_snapshots(api, "gvisor", mib, a.n))
            res[f"{mib}MiB"] = row
            print(json.dumps({f"{mib}MiB": row}, indent=1), flush=True)
    finally:
        d.stop()
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    left = brigtest.leftovers(d.state_dir)
    assert not left, left


if __name__ == "__main__":
    main()
