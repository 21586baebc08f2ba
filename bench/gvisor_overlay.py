#!/usr/bin/python3
"""What a gVisor sandbox made to be snapshotted ("snapshots": true: runsc --overlay2=none,
its root's writes through the gofer into its writable layer on the host) costs on
file-heavy work, against gVisor's default (--overlay2=root:self: the writes in gVisor's
own overlay) and a container (issue 16; figures in docs/benchmarks.md, "gVisor
snapshots").

Each workload runs in the `base` template, timed as one exec request seen by the caller
(median of -n runs, each in a fresh directory, after one untimed run):

  untar     tar xf of a tarball of /usr/lib/python3.13 (1,257 files, 28 MB)
  clone     git clone --no-local of a repository of 2,000 small files
  compile   python3 -m compileall of the untarred tree (its .pyc are there: a walk
            that stats every module and its .pyc)
  smallfile 10,000 files of 1 KiB written and then deleted by one Python process
  bigfile   256 MiB written with dd, then fsync'd

As root, with Debian's python3, after `make build templates`, in a network namespace:

    unshare -n sh -c 'ip link set lo up; /usr/bin/python3 bench/gvisor_overlay.py -n 3'
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

SETUP = ("cd /root && tar cf py.tar -C /usr/lib python3.13 && mkdir -p src && cd src && "
         "git init -q && python3 -c \"\nfor i in range(2000):\n"
         "    open(f'f{i}.txt', 'w').write(str(i) * 200)\" && git add . && "
         "git -c user.email=b@b -c user.name=b commit -qm init")

WORK = {
    "untar": "mkdir -p /root/u{i} && tar xf /root/py.tar -C /root/u{i}",
    "clone": "git clone -q --no-local /root/src /root/c{i}",
    "compile": "python3 -m compileall -q /root/u{i} >/dev/null; true",
    "smallfile": ("python3 -c \"import os\nos.mkdir('/root/s{i}')\nfor k in range(10000):\n"
                  "    open(f'/root/s{i}/{{k}}', 'w').write('x' * 1024)\n"
                  "for k in range(10000):\n    os.unlink(f'/root/s{i}/{{k}}')\""),
    "bigfile": "dd if=/dev/zero of=/root/b{i} bs=1M count=256 conv=fsync 2>/dev/null; rm /root/b{i}",
}

MODES = {
    "container": {"isolation": "container"},
    "gvisor (root:self)": {"isolation": "gvisor"},
    "gvisor, snapshots: true (none)": {"isolation": "gvisor", "snapshots": True},
}


def run(api, sid, cmd):
    t = time.perf_counter()
    r = api.exec(sid, cmd, timeout=900)
    ms = (time.perf_counter() - t) * 1000
    assert r["exit_code"] == 0, (cmd, r)
    return ms


def bench_mode(api, create, n):
    sid = api.create("base", tariff="medium", **create)["id"]
    try:
        run(api, sid, SETUP)
        out = {}
        for name, cmd in WORK.items():
            ms = [run(api, sid, cmd.format(i=i)) for i in range(n + 1)][1:]
            out[name] = round(statistics.median(ms))
        return out
    finally:
        api.delete(sid)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=3, help="timed runs of each workload")
    ap.add_argument("--out", help="also write the figures as JSON here")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="brig-ovlbench-")
    d = brigtest.Brigd(os.path.join(tmp, "state")).start()
    res = {}
    try:
        api = d.api()
        assert brigtest.gvisor_refusal(api) is None, "this brigd cannot run gvisor"
        for mode, create in MODES.items():
            res[mode] = bench_mode(api, create, a.n)
            print(json.dumps({mode: res[mode]}), flush=True)
    finally:
        d.stop()
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)
    left = brigtest.leftovers(d.state_dir)
    assert not left, left


if __name__ == "__main__":
    main()
