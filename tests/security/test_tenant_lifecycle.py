"""A tenant cannot stall, or leak past, the end of sandboxes: its own or anyone else's.

- A sandbox whose processes cannot die (stuck in uninterruptible sleep, here: writing to
  its own disk while the host froze that file system) must not make its DELETE slow, nor
  delay another tenant's DELETE or host-side cleanup; its cleanup is retried in the
  background and completes once the processes can die, leaving nothing behind.
- A cleanup step that fails (a host process holding one of the sandbox's cgroups) is
  retried until it succeeds; the sandbox's user-id range is not handed to a new sandbox
  before that.
- The janitor (lifetimes, idle timeouts, CPU abuse, billing) never waits on a sandbox:
  sandboxes whose agent helpers were SIGSTOPped from inside must not delay another
  tenant's max_lifetime.
- SIGTERM/SIGINT sent to PID 1 from inside the sandbox do not stop brig-agent; an agent
  that dies anyway ends its sandbox at once with reason agent_lost (final charge made).

The stuck states are made by the host side of the test (FIFREEZE on the sandbox's disk,
a host process moved into its cgroup) and always released in a `finally`.  Timings are
compared with a baseline measured in the same test.  Every test runs in both isolation
modes: under gVisor the sandbox's host processes are runsc's (its Sentry, stubs and
gofer), which the same frozen disk, cgroup holder and SIGKILL reach."""

import contextlib
import datetime
import fcntl
import os
import signal
import subprocess
import time

import pytest

import brigtest
import sectest

FIFREEZE = 0xC0045877  # _IOWR('X', 119, int)
FITHAW = 0xC0045878    # _IOWR('X', 120, int)


# ---- helpers ----------------------------------------------------------------------------

def _other_tenant(daemon, name):
    """An Api for a new account (another tenant than the attacker's)."""
    acct = daemon.operator().ok("POST", "/v1/accounts", {"name": name}).json()
    return brigtest.Api(daemon.url, acct["api_key"])


def _proc_state(pid):
    """The host's view of a process's state letter (R, S, D, T, Z...), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _states(sec, sid):
    """{host tid: state} of every thread of a sandbox's host processes (its cgroup's, and
    under gVisor runsc's gofer): a Sentry thread is where a gVisor sandbox's file access
    sleeps."""
    states = {}
    for p in sectest.host_pids(sec.daemon.state_dir, sid):
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            st = _proc_state(f"{p}/task/{t}")
            if st is not None:
                states[int(t)] = st
    return states


def _runtime_containers(sec):
    """What the sandbox's runtime (runc, or runsc under gVisor) still holds state for."""
    return (brigtest.runsc_containers if sec.gvisor else brigtest.runc_containers)(
        sec.daemon.state_dir)


def _ms(ts):
    """brigd's "2026-12-01T10:00:00.123Z" as ms since the epoch."""
    t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(t.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)


def _info(api, sid):
    return api.ok("GET", f"/v1/sandboxes/{sid}").json()


def _ended(api, sid, timeout):
    return brigtest.wait_for(lambda: (i := _info(api, sid))["state"] == "deleted" and i,
                             timeout=timeout, interval=0.05, what=f"{sid} to end")


def _delete_and_clean(api, daemon, sid, timeout=60):
    """DELETE's latency, and the time from the DELETE until nothing of the sandbox is
    left on the host (its teardown), in seconds."""
    t0 = time.monotonic()
    r = api.request("DELETE", f"/v1/sandboxes/{sid}", timeout=timeout)
    answered = time.monotonic() - t0
    assert r.status == 204, (r.status, r.body)
    brigtest.wait_for(lambda: not sectest.sandbox_leaks(daemon.state_dir, [sid]),
                      timeout=timeout, interval=0.02, what=f"the teardown of {sid}")
    return answered, time.monotonic() - t0


@contextlib.contextmanager
def _frozen_disk(daemon, sid):
    """Freezes the file system of a sandbox's writable layer (FIFREEZE, as fsfreeze(8)
    does) through a descriptor the test holds, and always thaws it again: a process
    writing to it meanwhile sleeps uninterruptibly, and not even SIGKILL ends it."""
    fd = os.open(os.path.join(daemon.state_dir, "sandboxes", sid, "disk"),
                 os.O_RDONLY | os.O_DIRECTORY)

    def thaw():
        """Thaws it and closes our descriptor (which keeps the file system busy)."""
        nonlocal fd
        if fd >= 0:
            try:
                fcntl.ioctl(fd, FITHAW, 0)
            finally:
                os.close(fd)
                fd = -1
    try:
        fcntl.ioctl(fd, FIFREEZE, 0)
        yield thaw
    finally:
        thaw()


@contextlib.contextmanager
def _cgroup_holder(sid, ctrl="pids"):
    """A host process moved into one of the sandbox's cgroups: the cgroup cannot be
    removed while it is there.  Killed on release (and at the end, in any case)."""
    p = subprocess.Popen(["sleep", "3600"])
    try:
        with open(f"/sys/fs/cgroup/{ctrl}/brig/{sid}/cgroup.procs", "w") as f:
            f.write(str(p.pid))

        def release():
            if p.poll() is None:
                p.kill()
                p.wait()
        yield release
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


# ---- a teardown that cannot finish ---------------------------------------------------------

def test_stuck_teardown_delays_no_one_and_is_retried(sec, daemon):
    """The attacked sandbox's last process sleeps uninterruptibly (a write to its frozen
    disk) when it is deleted.  Its DELETE answers within a few seconds (not after the
    10 s kill timeout); another tenant's DELETE and host-side cleanup, measured while it
    is stuck, are as fast as that tenant's baseline; once the file system thaws, the
    stuck cleanup is retried and leaves no runc state, mount, directory, process, cgroup
    or loop device behind."""
    other = _other_tenant(daemon, "lifecycle-teardown-bystander")
    base = [_delete_and_clean(other, daemon, other.create("minimal")["id"]) for _ in range(2)]
    base_answer = max(b[0] for b in base)
    base_clean = max(b[1] for b in base)

    sid = sec.sandbox("minimal")
    # Under gVisor / is its overlay in memory; /tmp is the disk, written by the Sentry.
    stuck = sec.mode("/root/stuck", "/tmp/stuck")
    with _frozen_disk(daemon, sid) as thaw:
        sectest.background(sec.api, sid, cmd=f"echo stuck > {stuck}")
        brigtest.wait_for(lambda: "D" in _states(sec, sid).values(), timeout=10,
                          what="the writer to sleep uninterruptibly")
        t0 = time.monotonic()
        r = sec.api.request("DELETE", f"/v1/sandboxes/{sid}", timeout=60)
        stuck_answer = time.monotonic() - t0
        assert r.status == 204, (r.status, r.body)
        assert stuck_answer < 5, (
            f"DELETE of a sandbox with an unkillable process took {stuck_answer:.1f} s")
        assert _info(sec.api, sid)["state"] == "deleted"

        # Another tenant, while the first cleanup is stuck.
        tid = other.create("minimal")["id"]
        answer, clean = _delete_and_clean(other, daemon, tid)
        assert _states(sec, sid), "the stuck sandbox ended before the measurement"
        assert answer < 3 * base_answer + 1, (answer, base_answer)
        assert clean < 3 * base_clean + 3, (
            f"another tenant's teardown took {clean:.1f} s while one was stuck "
            f"(baseline {base_clean:.1f} s)")
        sec.victim.check()

        # Still stuck: nothing of it may be considered gone yet.
        assert sectest.sandbox_leaks(daemon.state_dir, [sid])
        thaw()
        brigtest.wait_for(lambda: not sectest.sandbox_leaks(daemon.state_dir, [sid]),
                          timeout=30, interval=0.1,
                          what="the stuck teardown to be retried once the disk thawed")
    ended = _info(sec.api, sid)
    assert ended["reason"] == "deleted_by_api", ended


def test_failed_teardown_is_retried_and_keeps_its_uid_range(sec, daemon):
    """A host process sits in the attacked sandbox's pids cgroup when it is deleted, so
    its cgroup cannot be removed.  The cleanup must not count as done: its user-id range
    is not given to the next sandbox while the cleanup is incomplete, and once the host
    process is gone the cleanup is retried and removes every cgroup of it.  (Under gVisor
    the uid is runsc's Sentry's, which runs as the sandbox's range too.)"""
    sid = sec.sandbox("minimal")
    uid = sectest.host_uid(sec.init_pid(sid))
    with _cgroup_holder(sid) as release:
        sec.api.delete(sid)
        # The cleanup got as far as the runtime (runc or runsc forgot the sandbox) ...
        brigtest.wait_for(lambda: sid not in _runtime_containers(sec),
                          timeout=15, what="the runtime to forget the sandbox")
        # ... but is not done: the range stays taken.
        nxt = sec.sandbox("minimal")
        nxt_uid = sectest.host_uid(sec.init_pid(nxt))
        assert os.path.isdir(f"/sys/fs/cgroup/pids/brig/{sid}")
        release()
        brigtest.wait_for(lambda: not sectest.sandbox_leaks(daemon.state_dir, [sid]),
                          timeout=30, interval=0.1,
                          what="the failed teardown to be retried once the cgroup is free")
    # Returned now: the lowest free range is its range again.
    again = sec.sandbox("minimal")
    assert nxt_uid != uid, (
        "a new sandbox got the user-id range of one whose cleanup had not finished")
    assert sectest.host_uid(sec.init_pid(again)) == uid


# ---- the janitor --------------------------------------------------------------------------

STOP_SUPERVISOR = "sleep 0.2; kill -STOP $PPID; exec sleep 3600"


def _stopped_inside(sec, sid):
    """A stopped process in the sandbox: seen on the host for a container; under gVisor
    its processes are gVisor's, so its /proc says (a new command still runs there)."""
    if not sec.gvisor:
        return "T" in _states(sec, sid).values()
    r = sec.api.exec(sid, "grep -l '^[0-9]* ([^)]*) T' /proc/[0-9]*/stat", timeout=10)
    return r["exit_code"] == 0 and "/stat" in r["stdout"]


def _lateness(api, sid, created):
    ended = _ended(api, sid, timeout=60)
    assert ended["reason"] == "max_lifetime", ended
    return (_ms(ended["deleted_at"]) - _ms(created["expires_at"])) / 1000


def test_stopped_agent_helpers_do_not_stall_the_janitor(sec, daemon):
    """Four sandboxes with a 3 s idle timeout each SIGSTOP the supervisor of their own
    background process (its parent, an agent helper), so a process list from their
    agents never completes.  Another tenant's sandbox with a 4 s max_lifetime must
    still end within about a second of its deadline, as it does without the attack."""
    other = _other_tenant(daemon, "lifecycle-janitor-bystander")
    base = other.create("minimal", max_lifetime=2)
    base_late = _lateness(other, base["id"], base)

    attackers = []
    for _ in range(4):
        attackers.append(sec.api.create("minimal", idle_timeout=3)["id"])
        sec.created.append(attackers[-1])
        sectest.background(sec.api, attackers[-1], cmd=STOP_SUPERVISOR)
    for sid in attackers:
        brigtest.wait_for(lambda: _stopped_inside(sec, sid), timeout=10,
                          what=f"a stopped supervisor in {sid}")
    victim = other.create("minimal", max_lifetime=4)
    late = _lateness(other, victim["id"], victim)
    assert late < base_late + 1.5, (
        f"max_lifetime enforced {late:.1f} s late during the attack "
        f"(baseline {base_late:.1f} s)")
    # The attackers' own idle timeouts still apply (a process list that does not
    # complete is no proof of activity).
    for sid in attackers:
        assert _ended(sec.api, sid, timeout=30)["reason"] == "idle_timeout"


# ---- PID 1 and its death ------------------------------------------------------------------

SIGNAL_PID1 = r"""
import signal, fcntl

os.kill(1, signal.SIGTERM)
os.kill(1, signal.SIGINT)
libc.sigqueue.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
out['sigqueue'] = libc.sigqueue(1, signal.SIGTERM, None)
# SIGIO with another signal number: the kernel sends it (si_code POLL_IN) to the owner.
r, w = os.pipe()
fcntl.fcntl(r, fcntl.F_SETOWN, 1)
fcntl.fcntl(r, 10, signal.SIGTERM)  # F_SETSIG
fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)
os.write(w, b'x')
out['sent'] = True
"""


def test_sigterm_from_inside_does_not_stop_the_agent(sec):
    """SIGTERM and SIGINT to PID 1 from the sandbox's root (kill, sigqueue, and a SIGIO
    redirected to SIGTERM with F_SETSIG): brig-agent reads them from its signalfd like
    the runtime's stop, but only a stop from outside the sandbox may end it.  The agent
    must live on (same host pid) and keep serving."""
    sid = sec.sandbox()
    init = sec.init_pid(sid)
    r = sec.api.request("POST", f"/v1/sandboxes/{sid}/exec",
                        {"argv": ["python3", "-c", sectest.py_program(SIGNAL_PID1)]},
                        timeout=30)
    assert r.status == 200, (r.status, r.body)
    assert r.json()["exit_code"] == 0, r.json()
    for _ in range(3):  # a stop would take the agent a few polls to act on
        out = sec.api.request("POST", f"/v1/sandboxes/{sid}/exec",
                              {"argv": ["echo", "alive"]}, timeout=30)
        assert out.status == 200 and out.json()["stdout"] == "alive\n", (out.status, out.body)
    assert _proc_state(init) not in (None, "Z"), "the agent (PID 1) exited"
    assert sec.init_pid(sid) == init
    assert _info(sec.api, sid)["state"] == "running"


def test_dead_agent_ends_the_sandbox_as_agent_lost(sec, daemon):
    """The agent (the sandbox's init) dies without a DELETE (here: SIGKILL from the
    host, as the OOM killer could do): the sandbox ends at once with reason agent_lost,
    charged (the 60 s minimum), its row deleted and its host side cleaned up.  A DELETE
    kills the agent too, and still reports deleted_by_api; the janitor's own stops keep
    their reasons."""
    sid = sec.sandbox("minimal")
    price = _info(sec.api, sid)["price_micro_usd_per_second"]
    t0 = time.monotonic()
    os.kill(sec.init_pid(sid), signal.SIGKILL)
    ended = _ended(sec.api, sid, timeout=30)
    took = time.monotonic() - t0
    assert ended["reason"] == "agent_lost", ended
    assert took < 3, f"a dead agent was noticed after {took:.1f} s"
    assert ended["cost_micro_usd"] >= 60 * price, ended
    live = [s["id"] for s in sec.api.ok("GET", "/v1/sandboxes").json()["sandboxes"]]
    assert sid not in live
    r = sec.api.request("POST", f"/v1/sandboxes/{sid}/exec", {"argv": ["true"]})
    assert r.status == 404, (r.status, r.body)
    brigtest.wait_for(lambda: not sectest.sandbox_leaks(daemon.state_dir, [sid]),
                      timeout=15, what="the lost sandbox's teardown")

    deleted = sec.sandbox("minimal")
    sec.api.delete(deleted)
    assert _info(sec.api, deleted)["reason"] == "deleted_by_api"
    expiring = sec.api.create("minimal", max_lifetime=1)["id"]
    sec.created.append(expiring)
    assert _ended(sec.api, expiring, timeout=15)["reason"] == "max_lifetime"
