"""Helpers for brig's attack suite: run attack programs inside real sandboxes and
check, after every attack, that the host, brigd and a bystander sandbox are
unharmed and that the attacked sandbox leaves nothing behind.

Attack programs are python3 (the `base` template; it has no compiler, so system
calls go through ctypes' syscall(2) with x86-64 numbers) or busybox shell (the
`minimal` template).  A python attack prints one JSON object: what each attempt
returned (an errno name, or "OK")."""

import errno
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "integration"))
import brigtest  # noqa: E402

# Prepended to every python attack program.
PRELUDE = r'''
import ctypes, errno, json, os, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def _arg(x):
    if x is None: return ctypes.c_void_p(0)
    if isinstance(x, int): return ctypes.c_long(x)
    return x
def sc(nr, *args):
    """A raw system call: its result, or the name of its errno."""
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[_arg(a) for a in args])
    if r == -1:
        return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
    return r
def err(fn, *a, **kw):
    """Runs fn: "OK", or the errno's name of the OSError it raised."""
    try:
        fn(*a, **kw)
        return "OK"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def fork_call(nr, *args):
    """clone-like calls: a child that is born exits at once; parent reaps it."""
    r = sc(nr, *args)
    if r == 0:
        os._exit(0)
    if isinstance(r, int) and r > 0:
        try: os.waitpid(r, 0x40000000)
        except OSError: pass
        return "OK"
    return r
out = {}
'''

EPILOGUE = "\nprint(json.dumps(out))\n"

# x86-64 system call numbers used by the attacks.
NR = {
    "ptrace": 101, "syslog": 103, "clone": 56, "umount2": 166, "mount": 165, "pivot_root": 155,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "keyctl": 250,
    "add_key": 248, "request_key": 249, "bpf": 321, "perf_event_open": 298,
    "userfaultfd": 323, "io_uring_setup": 425, "open_by_handle_at": 304,
    "name_to_handle_at": 303, "unshare": 272, "clone3": 435, "setns": 308, "fsopen": 430,
    "fsmount": 432, "fspick": 433, "open_tree": 428, "move_mount": 429, "mount_setattr": 442,
    "sethostname": 170, "setdomainname": 171, "settimeofday": 164, "clock_settime": 227,
    "adjtimex": 159, "clock_adjtime": 305, "reboot": 169, "kexec_load": 246,
    "kexec_file_load": 320, "iopl": 172, "ioperm": 173, "swapon": 167, "swapoff": 168,
    "acct": 163, "quotactl": 179, "pidfd_open": 434, "pidfd_getfd": 438,
    "process_vm_readv": 310, "mknod": 133, "chroot": 161,
}

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080
SIGCHLD = 17


def py(api, sid, body, user="root", timeout=30, env=None):
    """Runs a python attack in the sandbox; returns (the JSON it printed, the exec result)."""
    kw = {"timeout": timeout, "user": user}
    if env:
        kw["env"] = env
    r = api.exec(sid, argv=["python3", "-c", PRELUDE + body + EPILOGUE], **kw)
    assert r["exit_code"] == 0, f"attack program failed: {r}"
    lines = r["stdout"].strip().splitlines()
    assert lines, f"attack program printed nothing: {r}"
    return json.loads(lines[-1]), r


def sh(api, sid, cmd, user="root", timeout=30):
    return api.exec(sid, cmd, user=user, timeout=timeout)


def file_digest(path):
    st = os.lstat(path)
    h = hashlib.sha256()
    if os.path.isfile(path) and not os.path.islink(path):
        with open(path, "rb") as f:
            h.update(f.read())
    return (st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns, h.hexdigest())


def tree_snapshot(root):
    """Every entry below root with its mode, owner, size, mtime and content hash."""
    snap = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            snap[os.path.relpath(p, root)] = file_digest(p)
    snap["."] = file_digest(root)[:3]
    return snap


def sandbox_leaks(state_dir, ids):
    """What the deleted sandboxes `ids` left on the host: runc state, mounts,
    directories, processes, cgroups, loop devices."""
    ids = set(ids)
    if not ids:
        return []
    left = [f"runc container {c}" for c in brigtest.runc_containers(state_dir) if c in ids]
    left += [f"runsc sandbox {c}" for c in brigtest.runsc_containers(state_dir) if c in ids]
    left += [f"runsc gofer {p}" for i in ids for p in _gofers(state_dir, i)]
    left += [f"mount {m}" for m in brigtest.mounts_under(os.path.join(state_dir, "sandboxes"))
             if any(i in m for i in ids)]
    sdir = os.path.join(state_dir, "sandboxes")
    if os.path.isdir(sdir):
        left += [f"sandbox dir {d}" for d in os.listdir(sdir) if d in ids]
    left += [f"process {p}" for p in brigtest.sandbox_processes(ids)]
    for ctrl in os.listdir("/sys/fs/cgroup"):
        for i in ids:
            if os.path.isdir(f"/sys/fs/cgroup/{ctrl}/brig/{i}"):
                left.append(f"cgroup {ctrl}/brig/{i}")
    for dev in os.listdir("/sys/block"):
        try:
            with open(f"/sys/block/{dev}/loop/backing_file") as f:
                backing = f.read().strip()
        except OSError:
            continue
        if any(i in backing for i in ids):
            left.append(f"loop device {dev} -> {backing}")
    return left


def _cmdlines():
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/cmdline", "rb") as f:
                    yield int(p), f.read().split(b"\0")
            except OSError:
                pass


def _gofers(state_dir, sid):
    """runsc's gofer of a gVisor sandbox (it lives outside the sandbox's cgroup)."""
    bundle = f"--bundle={os.path.realpath(state_dir)}/sandboxes/{sid}".encode()
    return [p for p, argv in _cmdlines() if bundle in argv and not brigtest.reaped_by_init(p)]


def host_pids(state_dir, sid):
    """Every host process of a sandbox: its cgroup's (a container's processes; under
    gVisor runsc's sandbox process, the Sentry, and its stubs) and a gVisor gofer."""
    return sorted(set(brigtest.sandbox_processes([sid]) + _gofers(state_dir, sid)))


def host_view(state_dir, sid):
    """What the host kernel holds for a sandbox's processes: the namespaces they are in,
    the kernel objects they hold descriptors of (devices, anonymous inodes: perf events,
    userfaultfds, io_urings, bpf objects...), their mount table, scheduling policy and
    nice value per thread.  An attack that gVisor answers in its own kernel leaves it
    as it was (new stub processes of the same kinds aside)."""
    ns, fds, sched, mounts = set(), set(), set(), set()
    for p in host_pids(state_dir, sid):
        try:
            for n in os.listdir(f"/proc/{p}/ns"):
                ns.add(os.readlink(f"/proc/{p}/ns/{n}"))
            for fd in os.listdir(f"/proc/{p}/fd"):
                t = os.readlink(f"/proc/{p}/fd/{fd}")
                if t.startswith("anon_inode:") or "/dev/" in t:  # kernel objects, devices
                    fds.add(t)
            with open(f"/proc/{p}/mountinfo") as f:
                mounts |= {" ".join(line.split()[3:5]) for line in f}
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/stat") as f:
                    st = f.read().rsplit(")", 1)[1].split()
                sched.add((int(st[16]), int(st[38])))  # nice, policy
        except OSError:
            continue  # a stub that just ended
    return {"ns": ns, "fds": fds, "mounts": mounts, "sched": sched}


def host_view_kept(before, after):
    """Asserts the host kernel gave the sandbox nothing new (see host_view)."""
    for k in before:
        assert after[k] <= before[k], f"host {k} of the sandbox grew: {after[k] - before[k]}"


def init_pid(state_dir, sid):
    """The host pid of a sandbox's init (its brig-agent)."""
    with open(os.path.join(state_dir, "sandboxes", sid, "init.pid")) as f:
        return int(f.read())


def proc_status(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return line.split(":", 1)[1].split()
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def host_uid(pid):
    return int(proc_status(pid, "Uid")[0])



def as_uid(uid, paths):
    """Opens paths for reading and for writing as host uid/gid `uid` (a forked child);
    returns {path: (read result, write result)}, each "OK" or the errno's name."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            res = {}
            for p in paths:
                one = []
                for flags in (os.O_RDONLY, os.O_WRONLY):
                    try:
                        os.close(os.open(p, flags))
                        one.append("OK")
                    except OSError as e:
                        one.append(errno.errorcode.get(e.errno, str(e.errno)))
                res[p] = one
            os.write(w, json.dumps(res).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return {k: tuple(v) for k, v in json.loads(data).items()}

def ended_by_oom(api, sid, timeout=20):
    """A gVisor sandbox that its host memory cgroup's OOM killer ended: runsc's Sentry
    holds every program's memory, so the killer takes the sandbox, not one program.
    brigd names the end from the cgroup's oom_kill count (a host-side fact); the
    sandbox's record is returned."""
    sb = brigtest.wait_for(
        lambda: (s := api.ok("GET", f"/v1/sandboxes/{sid}").json())["state"]
        not in ("running", "deleting") and s,
        timeout=timeout, interval=0.05, what=f"{sid} to end")
    assert sb["state"] == "deleted" and sb["reason"] == "oom_killed", sb
    return sb


def memory_charged(sid):
    """The sandbox's memory cgroup's anonymous and shared memory (memory.stat rss +
    shmem): under gVisor the Sentry's heap and its memory file, which hold everything
    the sandbox's kernel keeps (files of its own file systems, sockets, ptys...)."""
    st = dict(line.split() for line in cgroup_file("memory", sid, "memory.stat").splitlines())
    return int(st["rss"]) + int(st["shmem"])


def cgroup_file(ctrl, sid, name):
    with open(f"/sys/fs/cgroup/{ctrl}/brig/{sid}/{name}") as f:
        return f.read()


def background(api, sid, argv=None, cmd=None, **kw):
    """Starts a background process in the sandbox; returns its pid (in the sandbox)."""
    body = dict(kw, background=True)
    if argv is not None:
        body["argv"] = argv
    if cmd is not None:
        body["cmd"] = cmd
    return api.ok("POST", f"/v1/sandboxes/{sid}/exec", body, expect=(202,)).json()["pid"]


def output(api, sid, pid):
    """The buffered stdout of a background process so far (a snapshot)."""
    r = api.ok("GET", f"/v1/sandboxes/{sid}/processes/{pid}/output?follow=0")
    text = ""
    for line in r.body.decode().splitlines():
        ev = json.loads(line)
        if ev.get("type") == "stdout":
            text += ev["data"]
    return text


def wait_output(api, sid, pid, needle, timeout=20):
    """Polls a background process's output until it contains needle; returns it."""
    return brigtest.wait_for(lambda: needle in (o := output(api, sid, pid)) and o,
                             timeout=timeout, interval=0.05, what=f"{needle!r} from pid {pid}")


def py_program(body):
    return PRELUDE + body + EPILOGUE


def vm_hwm_kib(pid):
    return int(proc_status(pid, "VmHWM")[0])
