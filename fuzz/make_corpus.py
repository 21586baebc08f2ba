#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (fuzz/corpus/<target>/): valid handshakes,
requests and replies of docs/protocol.md, and a few malformed ones.  Run it from anywhere;
the files are committed, so this is only needed when the protocol grows."""

import json
import os
import struct

HELLO, CONTROL, DATA = 1, 2, 3
HERE = os.path.dirname(os.path.abspath(__file__))


def frame(ftype, payload=b"", chan=0, flags=0, length=None):
    if isinstance(payload, (dict, list)):
        payload = json.dumps(payload).encode()
    n = len(payload) if length is None else length
    return struct.pack(">IBBH", n, ftype, flags, chan) + payload


def hello():
    return frame(HELLO, {"proto": "brig-agent", "version": 1, "min_version": 1})


def req(obj, *data):
    out = hello() + frame(CONTROL, obj)
    for d in data:
        out += frame(DATA, d, chan=0)
    return out


AGENT = {
    "ping": req({"op": "ping"}),
    "exec_argv": req({"op": "exec", "argv": ["python3", "-c", "print(1)"], "cwd": "/root",
                      "env": {"A": "b"}, "timeout_ms": 55000, "stdin": False}),
    "exec_all": req({"op": "exec", "cmd": "npm run build", "background": True,
                     "pty": {"cols": 120, "rows": 40}, "user": "user", "buffer_bytes": 4194304,
                     "stdin": True, "stdin_closed": True, "env": None, "cwd": None},
                    b"some stdin", b""),
    "exec_bad": req({"op": "exec", "argv": [], "cmd": 5, "pty": {"cols": 0}}),
    "write_file": req({"op": "write_file", "path": "/tmp/x", "mode": 420}, b"hello", b""),
    "read_file": req({"op": "read_file", "path": "/etc/hostname"}),
    "proc_list": req({"op": "proc_list"}),
    "proc_get": req({"op": "proc_get", "pid": 42}),
    "proc_output": req({"op": "proc_output", "pid": 42, "follow": True}),
    "proc_stdin": req({"op": "proc_stdin", "pid": 42}, b"input\n", b""),
    "proc_stdin_close": req({"op": "proc_stdin_close", "pid": 42}),
    "proc_signal": req({"op": "proc_signal", "pid": 42, "signal": 15}),
    "proc_wait": req({"op": "proc_wait", "pid": 42, "timeout_ms": 5000}),
    "proc_resize": req({"op": "proc_resize", "pid": 42, "cols": 100, "rows": 30}),
    "stat": req({"op": "stat", "path": "/"}),
    "list_dir": req({"op": "list_dir", "path": "/tmp"}),
    "remove": req({"op": "remove", "path": "/tmp/x", "recursive": True}),
    "move": req({"op": "move", "from": "/tmp/a", "to": "/tmp/b"}),
    "mkdir": req({"op": "mkdir", "path": "/tmp/d", "mode": 493, "parents": True}),
    "tar_extract": req({"op": "tar_extract", "path": "/tmp/d"}, b"\x1f\x8b\x08", b""),
    "tar_create": req({"op": "tar_create", "path": "/tmp/d"}),
    "data_channels": hello() + frame(DATA, b"out", chan=1) + frame(DATA, b"err", chan=2)
    + frame(DATA, b"x" * 3000, chan=1) + frame(DATA, b"", chan=1),
    "bad_flags": frame(CONTROL, {"op": "ping"}, flags=1),
    "oversized": frame(CONTROL, b"", length=0xFFFFFFFF),
    "bad_json": hello() + frame(CONTROL, b'{"op":"ping","op":"ping"}') + frame(CONTROL, b"{x"),
    "nul_in_key": hello() + frame(CONTROL, b'{"op":"exec","cmd":"x","env":{"A\\u0000B":"1"}}'),
}


def exec_reply(*frames):
    return b"".join(frames)


def ctl(obj):
    return frame(CONTROL, obj)


EXIT = {"type": "exit", "exit_code": 0, "signal": None, "timed_out": False, "duration_ms": 5}
BRIGD = {
    # byte 0 % 4: 0 exec, 1 background exec, 2 read_file, 3 call
    "exec_ok": b"\x00" + ctl({"type": "started", "pid": 42}) + frame(DATA, b"out\n", chan=1)
    + frame(DATA, b"err\n", chan=2) + frame(DATA, b"", chan=1) + frame(DATA, b"", chan=2) + ctl(EXIT),
    "exec_big": b"\x00" + ctl({"type": "started", "pid": 42}) + frame(DATA, b"y\n" * 1000, chan=1)
    + ctl(dict(EXIT, exit_code=137, signal=9, timed_out=True)),
    "exec_error": b"\x00" + ctl({"type": "error", "code": "not_found", "message": "cwd"}),
    "exec_output_first": b"\x00" + frame(DATA, b"early", chan=1),
    "exec_bg": b"\x01" + ctl({"type": "started", "pid": 7}),
    "read_ok": b"\x02" + ctl({"type": "file", "size": 5, "mode": 420}) + frame(DATA, b"hello")
    + frame(DATA, b""),
    "read_error": b"\x02" + ctl({"type": "error", "code": "is_directory", "message": "/"}),
    "read_negative": b"\x02" + ctl({"type": "file", "size": -1, "mode": 420}),
    "call_pong": b"\x03" + ctl({"type": "pong"}),
    "call_error": b"\x03" + ctl({"type": "error", "code": "bad_request", "message": "no"}),
    "garbage": b"\x00\x00\x00\x00\x04\x77\x13\x37\x00abcd",
    "truncated": b"\x02" + ctl({"type": "file", "size": 5, "mode": 420})[:-3],
}


def main():
    for target, seeds in (("fuzz_agent", AGENT), ("fuzz_brigd", BRIGD)):
        d = os.path.join(HERE, "corpus", target)
        os.makedirs(d, exist_ok=True)
        for name, blob in seeds.items():
            if target == "fuzz_agent":
                # byte 0: how the stream is cut into reads, and the ring's size
                blob = bytes([len(name) * 7 % 256]) + blob
            with open(os.path.join(d, name), "wb") as f:
                f.write(blob)


if __name__ == "__main__":
    main()
