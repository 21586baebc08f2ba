#!/usr/bin/python3
"""bench/inject_proxy.py [BUILD_DIR] [-n N] - what the egress proxy of credential injection
(docs/secrets.md) adds, measured in one run: per HTTP(S) request from Python in a sandbox,
on a kept-alive connection and on a new connection each time, through the proxy with
injection against the same request from a sandbox of a project without rules (direct);
and brigd's memory for the proxy of an idle sandbox (RSS before and after rules are given
to the project of 20 running sandboxes).

It runs tests/integration/test_injection.py's test_bench_proxy_latency (BRIG_BENCH_INJECT=1)
in a private network namespace: the test "internet" (a netns with DNS and an HTTP(S)
server that records what it receives, its own test CA) and a brigd of BUILD_DIR (default
build/, a release build) in a netns of its own, all torn down afterwards.  Run as root with
Debian's python3.  Prints a table (ms; added = proxied p50 - direct p50) with the host's
load average before and after (`uptime`): the host may be shared, so say it with the
figures (docs/benchmarks.md)."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default=os.path.join(REPO, "build"))
    ap.add_argument("-n", type=int, default=400, help="requests per figure (4 rounds)")
    ap.add_argument("--idle", type=int, default=20,
                    help="idle sandboxes for the memory figure (an account may have 20)")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    env = dict(os.environ, BRIG_BUILD=build, BRIG_BENCH_INJECT="1", BRIG_BENCH_N=str(args.n),
               BRIG_BENCH_IDLE=str(args.idle))
    env.setdefault("BRIG_TEMPLATE_CACHE", "/var/cache/brig/templates")
    base = tempfile.mkdtemp(prefix="brig-bench-inject-")
    before = load()
    cmd = ("ip link set lo up; exec /usr/bin/python3 -m pytest -q -s -p no:cacheprovider "
           f"tests/integration/test_injection.py -k test_bench_proxy_latency --basetemp={base}")
    try:
        r = subprocess.run(["unshare", "-n", "sh", "-c", cmd], cwd=REPO, env=env,
                           capture_output=True, text=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    after = load()
    line = next((ln for ln in r.stdout.splitlines() if ln.startswith("BENCH ")), None)
    if r.returncode != 0 or line is None:
        sys.stderr.write(r.stdout[-6000:] + r.stderr[-3000:])
        return 1
    out = json.loads(line[6:])
    print(f"build {build}; load average before {before}, after {after}")
    print(f"{'request':<22} {'n':>5} {'direct p50':>11} {'proxied p50':>12} {'added p50':>10} "
          f"{'direct p90':>11} {'proxied p90':>12}")
    for scheme in ("http", "https"):
        for mode, name in (("keep", "kept-alive"), ("new", "new connection")):
            d, p = out[f"{scheme} {mode} direct"], out[f"{scheme} {mode} proxied"]
            print(f"{scheme + ', ' + name:<22} {p['n']:>5} {d['p50']:>11.2f} {p['p50']:>12.2f} "
                  f"{p['p50'] - d['p50']:>10.2f} {d['p90']:>11.2f} {p['p90']:>12.2f}")
    i = out["idle"]
    print(f"idle sandboxes: {i['sandboxes']}, brigd RSS {i['rss_before_kib']} -> "
          f"{i['rss_after_kib']} KiB: {i['per_sandbox_kib']} KiB per sandbox "
          f"(+ {i['listeners_per_sandbox']} listening sockets in the kernel)")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
