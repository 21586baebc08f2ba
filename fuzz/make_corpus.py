#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (fuzz/corpus/<target>/): valid handshakes,
requests and replies of docs/protocol.md, and a few malformed ones; secrets and the output
they hide in for the redactor.  Run it from anywhere; the files are committed, so this is only
needed when the protocol or a target's input format changes."""

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
    "raw_path": req({"op": "stat", "path_b64": "L3RtcC9i/w=="}),  # /tmp/b\xff
    "raw_path_bad": req({"op": "remove", "path_b64": "L3Rt!", "path": "/tmp"}),
    "remove": req({"op": "remove", "path": "/tmp/x", "recursive": True}),
    "move": req({"op": "move", "from": "/tmp/a", "to": "/tmp/b"}),
    "mkdir": req({"op": "mkdir", "path": "/tmp/d", "mode": 493, "parents": True}),
    "tar_extract": req({"op": "tar_extract", "path": "/tmp/d"}, b"\x1f\x8b\x08", b""),
    "tar_create": req({"op": "tar_create", "path": "/tmp/d"}),
    "guest_sync": req({"op": "guest_sync", "realtime_ns": 1764583200123456789, "seed": "ab" * 32,
                       "net": {"nic": "52:54:00:00:00:02", "mac": "02:42:0a:00:00:03",
                               "ip": "10.0.0.3", "gw": "10.0.0.2"}}),
    "fs_freeze": req({"op": "fs_freeze", "freeze": True}),
    "move_raw": req({"op": "move", "from_b64": "L3RtcC9i/w==", "to": "/tmp/c"}),
    "exec_raw_cwd": req({"op": "exec", "cmd": "pwd", "cwd_b64": "L3RtcC9i/w==", "timeout_ms": 0}),
    "write_file_default": req({"op": "write_file", "path": "/tmp/y", "mode": None}, b""),
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
PROC = {"pid": 42, "argv": None, "cmd": "sleep 9", "pty": False, "background": True,
        "user": "root", "started_at": 1764583200123, "running": True, "exit_code": None,
        "signal": None, "timed_out": False, "ended_at": None, "dropped_bytes": 0}
ENTRY = {"name": "f", "type": "file", "size": 3, "mode": 420, "mtime": 1764583200123}
BRIGD = {
    # byte 0 % 16 picks the call (see fuzz_brigd.c): 0 exec, 1 background exec, 2 read_file,
    # 3 ping, 4 stat, 5 list_dir, 6 proc_list, 7 proc_get, 8 proc_wait, 9 tar_create,
    # 10 write_file, 11 proc_output, 12 remove, 13 mkdir, 14 proc_signal, 15 streamed exec
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
    "stat_ok": b"\x04" + ctl({"type": "entry", "entry": ENTRY}),
    "list_ok": b"\x05" + ctl({"type": "entries", "entries": [ENTRY, dict(ENTRY, name="g")]})
    + ctl({"type": "entries", "entries": []}) + ctl({"type": "end"}),
    "list_data": b"\x05" + frame(DATA, b"x", chan=1),
    "procs_ok": b"\x06" + ctl({"type": "processes", "processes": [PROC, dict(PROC, pid=43)]}),
    "proc_get_ok": b"\x07" + ctl(dict(PROC, type="process")),
    "proc_wait_error": b"\x08" + ctl({"type": "error", "code": "not_found", "message": "no 42"}),
    "tar_ok": b"\x09" + ctl({"type": "tar"}) + frame(DATA, b"tar bytes") + frame(DATA, b"")
    + ctl({"type": "ok"}),
    "tar_fail": b"\x09" + ctl({"type": "tar"}) + frame(DATA, b"t") + frame(DATA, b"")
    + ctl({"type": "error", "code": "io", "message": "tar failed"}),
    "write_ok": b"\x0a" + ctl({"type": "ok", "size": 3}),
    "write_error": b"\x0a" + ctl({"type": "error", "code": "no_space", "message": "full"}),
    "output_follow": b"\x0b" + ctl({"type": "output", "dropped_bytes": 0})
    + frame(DATA, b"o", chan=1) + ctl({"type": "dropped", "bytes": 5}) + frame(DATA, b"", chan=1)
    + frame(DATA, b"", chan=2) + ctl(EXIT),
    "remove_ok": b"\x0c" + ctl({"type": "ok"}),
    "mkdir_exists": b"\x0d" + ctl({"type": "error", "code": "exists", "message": "/d"}),
    "signal_ok": b"\x0e" + ctl({"type": "ok"}),
    "exec_streamed": b"\x0f" + ctl({"type": "started", "pid": 42}) + frame(DATA, b"out", chan=1)
    + frame(DATA, b"", chan=1) + frame(DATA, b"", chan=2) + ctl(EXIT),
}


def redact(block, stream, flags=0, plan=(), sep=0):
    """fuzz_redact's input (see fuzz_redact.c): secret values split on sep, the chunk sizes,
    then the stream, where sep + j inserts value j & 7 in form (j >> 3) & 3 with j >> 5 as
    the form's parameter."""
    assert len(block) <= 48 and len(plan) < 16
    return bytes([sep, flags, len(block)]) + block + bytes([len(plan), *plan]) + stream


def ins(j, form=0, param=0, sep=0):
    return bytes([sep, j | form << 3 | param << 5])


REDACT = {
    "two_values": redact(b"s3cr3t-VALUE-42\0hunter2-is-not-a-password",
                         b"before " + ins(0) + b" after s3cr3t-VALUE-4 end " + ins(1) + b"\n",
                         plan=(1, 5, 64)),
    "forms": redact(b"tok_9f8e7d6c5b4a3f2e1d0c",
                    b"raw " + ins(0) + b" wrapped " + ins(0, 1, 3) + b" b64 " + ins(0, 2, 0)
                    + ins(0, 2, 1) + ins(0, 2, 6) + b" url " + ins(0, 3, 0) + ins(0, 3, 1),
                    plan=(0, 3, 0xC0)),
    "overlaps": redact(b"alpha-secret\0beta-secret-longer", flags=0x0F,
                       stream=b"alpha-secre " + ins(0) + ins(1) + ins(2) + ins(3) + ins(4)
                       + ins(5) + b" zzz", plan=(2, 7)),
    "short": redact(b"9931\0zzzz\0\0a b&c=d/e?f", b"pin 9931, b64 OTkzMQ== zzzzz "
                    + ins(3, 3) + b" GET /?q=a%20b%26c%3Dd%2Fe%3Ff", plan=(1,)),
    "lookalike": redact(b"correct-horse-battery", b"correct horse battery staple, "
                        b"correct-horse-batter, orrect-horse-battery\r\n" * 3),
    "line_breaks": redact(b"PEM-----BEGIN\nKEY-----END", flags=0x08,
                          stream=b"a\nb\r\n\nc " + ins(0) + b" " + ins(0, 1, 1) + ins(1)
                          + b"\n" * 300 + b"tok" + ins(0), plan=(4, 1, 0xC1)),
    "binary": redact(b"\xff\x00\x01secret\xfe", sep=0x01,
                     stream=b"\x00\xff" + ins(0, sep=0x01) + ins(1, 2, 2, sep=0x01) + b"\x01\x01"),
}



def client_hello(name):
    """A TLS 1.2 record holding a ClientHello with name as its SNI."""
    sni = struct.pack(">HBH", len(name) + 3, 0, len(name)) + name
    ext = struct.pack(">HH", 0, len(sni)) + sni + struct.pack(">HH", 0x10, 5) + b"\x00\x03\x02h2"
    body = (b"\x03\x03" + b"\x11" * 32 + b"\x00" + struct.pack(">H", 2) + b"\x13\x01" + b"\x01\x00"
            + struct.pack(">H", len(ext)) + ext)
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs


# The egress proxy's parsers: request heads (good, keep-alive with a body, and the kinds it
# refuses) and ClientHellos.
HTTP = {
    "get": b"GET /v1/x?q=1 HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer brig-placeholder-"
           b"00112233445566778899aabbccddeeff\r\nAccept: */*\r\n\r\n",
    "post": b"POST /up HTTP/1.1\r\nHost: api.test:8080\r\nContent-Length: 5\r\n\r\nhello",
    "chunked": b"PUT / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "http10": b"GET / HTTP/1.0\r\n\r\n",
    "smuggle": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
    "fold": b"GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n 2\r\n\r\n",
    "bare_lf": b"GET / HTTP/1.1\nHost: a\n\n",
    "two_hosts": b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "sni": client_hello(b"api.test"),
    "sni_upper": client_hello(b"API.Example.COM"),
}


def main():
    for target, seeds in (("fuzz_agent", AGENT), ("fuzz_brigd", BRIGD), ("fuzz_redact", REDACT),
                          ("fuzz_http", HTTP)):
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
