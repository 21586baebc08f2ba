#!/usr/bin/env python3
"""bench/microvm.py - isolation "microvm" on one brigd: a cold create (boot to agent
ready: brigd's own "VM ready in N ms" log line beside the API's whole create), exec
`true`, a warm-pool hit (a booted VM waiting in the pool), each N times.

  bench/microvm.py --build build [--accel tcg] [--memsnap] [-n 5]

--memsnap: microvm_memsnap = on, so creates start from a memory snapshot of a booted VM; the
first create of the tariff (which boots, saves and then starts from it) is printed apart.

--accel tcg on a host without hardware KVM (QEMU's emulation: the figures are TCG's, not
a microVM's on KVM).  scripts/verify-kvm runs it with kvm.  Prints min / median / max."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))


def row(name, xs):
    xs = sorted(xs)
    print(f"{name:32} {xs[0]:9.1f} {statistics.median(xs):9.1f} {xs[-1]:9.1f}   (n={len(xs)})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--template-cache", default="/var/cache/brig/templates")
    ap.add_argument("--accel", default="kvm", choices=("kvm", "tcg"))
    ap.add_argument("--memsnap", action="store_true")
    ap.add_argument("-n", type=int, default=5)
    a = ap.parse_args()
    os.environ["BRIG_BUILD"] = os.path.abspath(a.build)
    os.environ["BRIG_TEMPLATE_CACHE"] = a.template_cache
    import brigtest
    tmp = tempfile.mkdtemp(prefix="brig-bench-microvm-")
    conf = os.path.join(tmp, "brigd.conf")
    with open(conf, "w") as f:
        f.write(f"[brigd]\nmicrovm_accel = {a.accel}\nwarm_pool = minimal:small:1:microvm\n"
                f"microvm_memsnap = {'on' if a.memsnap else 'off'}\n")
    d = brigtest.Brigd(os.path.join(tmp, "state"), ["--config", conf], default_pool=True).start()
    api = d.api()
    cold, ready, exec_true, hit, first = [], [], [], [], []
    try:
        for i in range(a.n + (1 if a.memsnap else 0)):
            t = time.monotonic()
            sid = api.ok("POST", "/v1/sandboxes", {"template": "minimal", "tariff": "medium",
                                                   "isolation": "microvm"}).json()["id"]
            took = (time.monotonic() - t) * 1000
            m = re.findall(rf"{sid}: VM ready in (\d+) ms", d.log())
            if a.memsnap and i == 0:  # boots, saves the snapshot, starts from it
                first.append(took)
                api.delete(sid)
                continue
            cold.append(took)
            ready.append(float(m[-1]))
            for _ in range(10):
                t = time.monotonic()
                api.exec(sid, argv=["true"])
                exec_true.append((time.monotonic() - t) * 1000)
            api.delete(sid)
        for _ in range(a.n):
            def warm():
                h = api.request("GET", "/healthz", key=None).json()["warm_pool"]
                return any(v.get("ready", 0) >= 1 for k, v in h.items() if "microvm" in k)
            brigtest.wait_for(warm, timeout=120, what="a warm microVM")
            t = time.monotonic()
            sid = api.ok("POST", "/v1/sandboxes", {"template": "minimal",
                                                   "isolation": "microvm"}).json()["id"]
            hit.append((time.monotonic() - t) * 1000)
            api.delete(sid)
    finally:
        d.stop()
        d.destroy_all()
    print(f"isolation microvm, accel {a.accel}{', memsnap' if a.memsnap else ''}; "
          "milliseconds      min    median       max")
    if first:
        row("first create (takes snapshot)", first)
    row("start to agent ready (driver)" if a.memsnap else "boot to agent ready (driver)", ready)
    row("cold create (API)", cold)
    row("exec true", exec_true)
    row("warm-pool hit (create)", hit)
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
