"""What the synchronous and asyncio clients share: configuration, request
bodies, upload sources, NDJSON decoding, the exec-stream state machine, and
tar streaming for directory up- and downloads.  No I/O on sockets here."""

from __future__ import annotations

import base64
import datetime as _dt
import io
import json
import os
import posixpath
import stat as _stat
import tarfile
import urllib.parse
from typing import Any, Callable, Generator, Iterable, Iterator, Mapping, Optional, Sequence, \
    Union

from ._errors import ProtocolError, error_from_code
from ._models import Chunk, ExecResult, OutputEvent

DEFAULT_URL = "http://127.0.0.1:7070"
#: Seconds an ordinary API call may take before :class:`brig.Timeout`.
DEFAULT_REQUEST_TIMEOUT = 120.0
#: brigd's default command timeout (used to size the read timeout of an exec
#: that does not set one).
DEFAULT_EXEC_TIMEOUT = 55.0
#: Extra seconds on top of a command's timeout before the client gives up
#: waiting for brigd's answer.
TIMEOUT_MARGIN = 60.0
#: Longest single ``/wait`` request; longer waits are done in slices.
WAIT_SLICE = 300.0
#: Output a streamed exec keeps for its ExecResult, per stream (as brigd's
#: buffered exec does by default).
STREAM_KEEP_BYTES = 10 * 1024 * 1024
CHUNK_SIZE = 256 * 1024
#: Read timeout of tar up/downloads (brigd gives the sandbox's tar 300 s).
TAR_TIMEOUT = 330.0

USER_AGENT = "brig-python/0.1.0"

#: Upload content: ``bytes``-like, ``str`` (sent as UTF-8), a readable file
#: object (binary or text), an iterable of ``bytes`` chunks, or an
#: :class:`os.PathLike` naming a local file (streamed, never read whole).
UploadData = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]", Any]
#: A path of the local machine.
LocalPath = Union[str, "os.PathLike[str]"]
Signal = Union[str, int]
OutputCallback = Callable[[Chunk], Any]


def resolve_config(url: Optional[str], api_key: Optional[str]) -> tuple[str, Optional[str]]:
    """Explicit arguments win over ``BRIG_URL`` / ``BRIG_API_KEY``."""
    u = url or os.environ.get("BRIG_URL") or DEFAULT_URL
    k = api_key if api_key is not None else os.environ.get("BRIG_API_KEY")
    return u.rstrip("/"), (k or None)


def split_url(url: str) -> tuple[str, str, int, str]:
    """scheme, host, port, path prefix of a base URL."""
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"brig URL must be http://HOST[:PORT] or https://…, not {url!r}")
    port = u.port or (443 if u.scheme == "https" else 80)
    return u.scheme, u.hostname, port, u.path.rstrip("/")


def build_path(prefix: str, path: str, query: Optional[Mapping[str, Any]] = None) -> str:
    full = prefix + path
    if query:
        q = {k: v for k, v in query.items() if v is not None}
        if q:
            full += "?" + urllib.parse.urlencode(q, quote_via=urllib.parse.quote)
    return full


def q(segment: str) -> str:
    """One URL path segment (an id or a pid)."""
    return urllib.parse.quote(str(segment), safe="")


def exec_read_timeout(timeout: Optional[float]) -> Optional[float]:
    """How long to wait for an exec's answer (None: for ever)."""
    if timeout is None:
        return DEFAULT_EXEC_TIMEOUT + TIMEOUT_MARGIN
    if timeout <= 0:
        return None
    return float(timeout) + TIMEOUT_MARGIN


# ---- request bodies ------------------------------------------------------------------


def create_body(
    template: Optional[str] = None,
    tariff: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    secrets: Optional[Mapping[str, str]] = None,
    secret_refs: Optional[Sequence[str]] = None,
    idle_timeout: Optional[float] = None,
    max_lifetime: Optional[float] = None,
    project: Optional[str] = None,
    isolation: Optional[str] = None,
    volumes: Any = None,
    snapshot: Optional[str] = None,
    on_idle: Optional[str] = None,
    snapshots: Optional[bool] = None,
) -> dict[str, Any]:
    """``POST /v1/sandboxes``: only the fields the caller set."""
    body: dict[str, Any] = {}
    if template is not None:
        body["template"] = template
    if tariff is not None:
        body["tariff"] = tariff
    if env is not None:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    if secrets is not None:
        body["secrets"] = {str(k): str(v) for k, v in secrets.items()}
    if secret_refs is not None:
        if isinstance(secret_refs, str):
            secret_refs = [secret_refs]
        body["secret_refs"] = [str(s) for s in secret_refs]
    if idle_timeout is not None:
        body["idle_timeout"] = idle_timeout
    if max_lifetime is not None:
        body["max_lifetime"] = max_lifetime
    if project is not None:
        body["project"] = project
    if isolation is not None:
        body["isolation"] = isolation
    if volumes is not None:
        body["volumes"] = volume_mounts(volumes)
    if snapshot is not None:
        body["snapshot"] = snapshot
    if on_idle is not None:
        body["on_idle"] = on_idle
    if snapshots is not None:
        body["snapshots"] = bool(snapshots)
    return body


def volume_mounts(volumes: Any) -> list[dict[str, Any]]:
    """The ``volumes`` of a create from what a caller may write: a mapping
    ``{"data": "/data"}``, or a list of ``"name:/path[:ro]"`` strings, of
    ``{"name", "path", "read_only"}`` objects or of :class:`Volume` handles
    with a ``path`` (``(volume, "/data")`` or ``(volume, "/data", True)``)."""
    if isinstance(volumes, Mapping):
        return [{"name": str(k), "path": str(v)} for k, v in volumes.items()]
    out: list[dict[str, Any]] = []
    for v in volumes:
        if isinstance(v, str):
            name, sep, path = v.partition(":")
            ro = path.endswith(":ro")
            if ro or path.endswith(":rw"):
                path = path[:-3]
            if not sep or not name or not path.startswith("/"):
                raise ValueError(f"a volume is 'NAME:/PATH[:ro]', not {v!r}")
            out.append({"name": name, "path": path, "read_only": ro})
        elif isinstance(v, Mapping):
            out.append(dict(v))
        elif isinstance(v, tuple) and len(v) in (2, 3):
            name = getattr(v[0], "name", v[0])
            m = {"name": str(name), "path": str(v[1])}
            if len(v) == 3:
                m["read_only"] = bool(v[2])
            out.append(m)
        else:
            raise TypeError(f"not a volume mount: {v!r:.100}")
    return out


def volume_body(name: str, size_mib: int, project: Optional[str]) -> dict[str, Any]:
    """``POST /v1/volumes``."""
    body: dict[str, Any] = {"name": name, "size_mib": int(size_mib)}
    if project is not None:
        body["project"] = project
    return body


def pty_size(pty: Any) -> Optional[dict[str, int]]:
    if pty is None or pty is False:
        return None
    if pty is True:
        return {"cols": 120, "rows": 40}
    if isinstance(pty, Mapping):
        return {"cols": int(pty["cols"]), "rows": int(pty["rows"])}
    cols, rows = pty
    return {"cols": int(cols), "rows": int(rows)}


def exec_body(
    cmd: Union[str, Sequence[str]],
    *,
    cwd: Optional[str] = None,
    env: Optional[Mapping[str, str]] = None,
    timeout: Optional[float] = None,
    stdin: Union[bytes, str, None] = None,
    user: Optional[str] = None,
    pty: Any = None,
    background: bool = False,
    buffer_bytes: Optional[int] = None,
    credentials: Optional[Mapping[str, Any]] = None,
) -> dict[str, Any]:
    """``POST /v1/sandboxes/{id}/exec``: a string runs in the shell, a
    sequence is an argv (no shell)."""
    body: dict[str, Any] = {}
    if isinstance(cmd, str):
        body["cmd"] = cmd
    elif isinstance(cmd, (bytes, bytearray)):
        raise TypeError("cmd must be a str (shell command) or a sequence of str (argv)")
    else:
        argv = [str(a) for a in cmd]
        if not argv:
            raise ValueError("argv must not be empty")
        body["argv"] = argv
    if cwd is not None:
        body["cwd"] = cwd
    if env is not None:
        body["env"] = {str(k): str(v) for k, v in env.items()}
    if timeout is not None:
        body["timeout"] = timeout
    if stdin is not None:
        if isinstance(stdin, str):
            body["stdin"] = stdin
        else:
            raw = bytes(stdin)
            try:
                body["stdin"] = raw.decode("utf-8")
            except UnicodeDecodeError:
                body["stdin"] = base64.b64encode(raw).decode("ascii")
                body["stdin_encoding"] = "base64"
    if user is not None:
        body["user"] = user
    size = pty_size(pty)
    if size is not None:
        body["pty"] = size
    if background:
        body["background"] = True
    if buffer_bytes is not None:
        body["buffer_bytes"] = int(buffer_bytes)
    if credentials is not None:
        body["credentials"] = credentials_body(credentials)
    return body


def credentials_body(credentials: Mapping[str, Any]) -> dict[str, Any]:
    """An exec's per-step credentials (docs/secrets.md): a name maps to a TTL in
    seconds (the project's secret of that name) or to ``{"ttl_seconds": …, "value":
    …}`` (a value given for this grant only), ``{"exec_only": True}`` (for this exec
    only) or both."""
    out: dict[str, Any] = {}
    for name, c in credentials.items():
        if isinstance(c, bool):
            raise TypeError(f"credentials[{name!r}]: a TTL in seconds or a mapping")
        if isinstance(c, (int, float)):
            out[str(name)] = {"ttl_seconds": int(c)}
        elif isinstance(c, Mapping):
            out[str(name)] = dict(c)
        else:
            raise TypeError(f"credentials[{name!r}]: a TTL in seconds or a mapping")
    return out


def injection_rules_body(rules: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``PUT /v1/projects/{id}/injections``: each rule a ``host`` and its
    ``headers`` (values may hold ``{{secret:NAME}}``)."""
    if isinstance(rules, Mapping):
        raise TypeError("rules must be a sequence of rules, not one rule")
    return {"rules": [dict(r) for r in rules]}


def signal_value(sig: Signal) -> Union[str, int]:
    if isinstance(sig, int):  # also signal.Signals
        return int(sig)
    return str(sig)


def mode_text(mode: Union[int, str, None]) -> Optional[str]:
    """0o755 / "755" / "0755" → "0755"."""
    if mode is None:
        return None
    if isinstance(mode, int):
        return f"{mode & 0o7777:04o}"
    int(mode, 8)  # ValueError for anything that is not octal
    return mode if mode.startswith("0") else "0" + mode


def parse_json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError as e:
        raise ProtocolError(f"brigd answered something that is not JSON: {body[:200]!r} ({e})") \
            from None


# ---- upload sources ------------------------------------------------------------------


class Source:
    """An upload body: ``data`` (bytes, replayable) or chunks read one at a
    time by :meth:`read_chunk` (``b""`` at the end); ``length`` when known."""

    def __init__(self, data: Optional[bytes] = None, *, reader: Optional[Callable[[], Any]] = None,
                 length: Optional[int] = None, closer: Optional[Callable[[], None]] = None) -> None:
        self.data = data
        self._reader = reader
        self.length = len(data) if data is not None else length
        self._closer = closer

    @property
    def replayable(self) -> bool:
        return self.data is not None

    def read_chunk(self) -> bytes:
        if self._reader is None:
            return b""
        chunk = self._reader()
        if isinstance(chunk, str):
            chunk = chunk.encode("utf-8")
        return bytes(chunk) if chunk else b""

    def chunks(self) -> Iterator[bytes]:
        """All chunks (closes the source at the end)."""
        try:
            if self.data is not None:
                yield self.data
                return
            while True:
                c = self.read_chunk()
                if not c:
                    return
                yield c
        finally:
            self.close()

    def close(self) -> None:
        if self._closer is not None:
            closer, self._closer = self._closer, None
            closer()


def _file_length(f: Any) -> Optional[int]:
    try:
        if not f.seekable():
            return None
        st = os.fstat(f.fileno())
        if not _stat.S_ISREG(st.st_mode):
            return None
        return int(st.st_size - f.tell())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        pass
    if isinstance(f, io.BytesIO):
        return int(len(f.getbuffer()) - f.tell())
    return None


def make_source(data: UploadData) -> Source:
    """Normalises upload content (see :data:`UploadData`)."""
    if data is None:
        return Source(b"")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return Source(bytes(data))
    if isinstance(data, str):
        return Source(data.encode("utf-8"))
    if isinstance(data, os.PathLike):
        f = open(os.fspath(data), "rb")  # noqa: SIM115 - closed by the Source
        try:
            length = os.fstat(f.fileno()).st_size
        except OSError:
            length = None
        return Source(reader=lambda: f.read(CHUNK_SIZE), length=length, closer=f.close)
    if hasattr(data, "read"):
        fo: Any = data
        if isinstance(fo, io.TextIOBase):
            return Source(reader=lambda: fo.read(CHUNK_SIZE // 4))
        return Source(reader=lambda: fo.read(CHUNK_SIZE), length=_file_length(fo))
    if isinstance(data, Iterable):
        it = iter(data)
        return Source(reader=lambda: next(it, b""))
    raise TypeError(f"cannot upload a {type(data).__name__}: give bytes, str, a file object, "
                    "an iterable of bytes, or a pathlib.Path")


# ---- NDJSON ----------------------------------------------------------------------------


class LineDecoder:
    """Splits a byte stream into JSON objects, one per line."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buf += data
        out: list[dict[str, Any]] = []
        while True:
            i = self._buf.find(b"\n")
            if i < 0:
                return out
            line = bytes(self._buf[:i])
            del self._buf[: i + 1]
            if line.strip():
                obj = parse_json(line)
                if not isinstance(obj, dict):
                    raise ProtocolError(f"stream line is not an object: {line[:200]!r}")
                out.append(obj)

    def finish(self) -> list[dict[str, Any]]:
        rest, self._buf = bytes(self._buf), bytearray()
        return self.feed(rest + b"\n") if rest.strip() else []


def event_or_raise(obj: Mapping[str, Any]) -> OutputEvent:
    """An event; a ``{"type":"error"}`` line raises its typed exception."""
    if obj.get("type") == "error":
        raise error_from_code(obj.get("code"), str(obj.get("message") or "stream failed"))
    return OutputEvent.from_json(obj)


def is_ndjson(headers: Mapping[str, str]) -> bool:
    return "ndjson" in headers.get("content-type", "")


def events_of_buffered(body: bytes) -> list[dict[str, Any]]:
    """A buffered exec answer (a brigd that does not stream) as the events
    a stream would have carried."""
    j = check_json_object(parse_json(body), "exec")
    evs: list[dict[str, Any]] = [{"type": "start", "pid": j.get("pid")}]
    for name in ("stdout", "stderr"):
        if j.get(name):
            ev = {"type": name, "data": j[name]}
            if j.get(f"{name}_encoding"):
                ev["encoding"] = j[f"{name}_encoding"]
            evs.append(ev)
    evs.append({"type": "exit", **{k: j.get(k) for k in
                                   ("exit_code", "signal", "timed_out", "duration_ms",
                                    "reason")}})
    return evs


class ExecCollector:
    """Turns the events of a streamed exec (or a followed process) into an
    :class:`ExecResult`, calling the output callbacks as chunks arrive."""

    def __init__(self, on_stdout: Optional[OutputCallback] = None,
                 on_stderr: Optional[OutputCallback] = None,
                 keep_bytes: int = STREAM_KEEP_BYTES) -> None:
        self.on_stdout = on_stdout
        self.on_stderr = on_stderr
        self.keep = keep_bytes
        self.out = bytearray()
        self.err = bytearray()
        self.out_trunc = False
        self.err_trunc = False
        self.pid: Optional[int] = None
        self.exit: Optional[Mapping[str, Any]] = None

    def callback_for(self, ev: OutputEvent) -> Optional[OutputCallback]:
        if ev.type == "stdout":
            return self.on_stdout
        if ev.type == "stderr":
            return self.on_stderr
        return None

    def add(self, ev: OutputEvent) -> None:
        """Records one event (callbacks are the caller's business: the async
        flavour awaits coroutine callbacks)."""
        if ev.type == "start":
            self.pid = ev.pid
        elif ev.type in ("stdout", "stderr"):
            buf = self.out if ev.type == "stdout" else self.err
            raw = ev.data_bytes
            room = self.keep - len(buf)
            if len(raw) > room:
                if ev.type == "stdout":
                    self.out_trunc = True
                else:
                    self.err_trunc = True
                raw = raw[: max(room, 0)]
            buf += raw
        elif ev.type == "exit":
            self.exit = ev.raw

    @property
    def done(self) -> bool:
        return self.exit is not None

    def result(self) -> ExecResult:
        if self.exit is None:
            raise ProtocolError("the output stream ended before the command's exit event")
        e = self.exit
        out, err = bytes(self.out), bytes(self.err)
        code = e.get("exit_code")
        return ExecResult(
            exit_code=int(code) if code is not None else -1,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            timed_out=bool(e.get("timed_out", False)),
            duration_ms=int(e.get("duration_ms") or 0),
            signal=e.get("signal"),
            reason=e.get("reason"),
            stdout_bytes=out,
            stderr_bytes=err,
            stdout_truncated=self.out_trunc,
            stderr_truncated=self.err_trunc,
            pid=self.pid,
            raw=dict(e),
        )


# ---- tar: directory uploads and downloads ----------------------------------------------


def tar_chunks(local_dir: LocalPath) -> Generator[bytes, None, None]:
    """A tar stream of local_dir's contents (paths relative to it), produced
    file by file in chunks: never more than one chunk in memory.  Regular
    files, directories and symlinks; owned by root in the archive."""
    root = os.fspath(local_dir)
    if not os.path.isdir(root):
        raise NotADirectoryError(root)

    def info(rel: str, st: os.stat_result) -> tarfile.TarInfo:
        ti = tarfile.TarInfo(rel)
        ti.mode = _stat.S_IMODE(st.st_mode)
        ti.mtime = int(st.st_mtime)
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        return ti

    def header(ti: tarfile.TarInfo) -> bytes:
        return ti.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")

    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, root)
        entries = sorted(dirnames + filenames)
        for name in entries:
            full = os.path.join(dirpath, name)
            rel = name if rel_dir == "." else posixpath.join(*rel_dir.split(os.sep), name)
            try:
                st = os.lstat(full)
            except FileNotFoundError:
                continue
            ti = info(rel, st)
            if _stat.S_ISLNK(st.st_mode):
                ti.type = tarfile.SYMTYPE
                ti.linkname = os.readlink(full)
                yield header(ti)
            elif _stat.S_ISDIR(st.st_mode):
                ti.type = tarfile.DIRTYPE
                yield header(ti)
            elif _stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    ti.size = size
                    yield header(ti)
                    left = size
                    while left > 0:
                        c = f.read(min(CHUNK_SIZE, left))
                        if not c:  # shrank while read: pad with zeros to the header's size
                            c = b"\0" * min(CHUNK_SIZE, left)
                        left -= len(c)
                        yield c
                    if size % tarfile.BLOCKSIZE:
                        yield b"\0" * (tarfile.BLOCKSIZE - size % tarfile.BLOCKSIZE)
            # sockets, fifos, devices: skipped
    yield b"\0" * (2 * tarfile.BLOCKSIZE)


def tar_source(local_dir: LocalPath) -> Source:
    gen = tar_chunks(local_dir)
    return Source(reader=lambda: next(gen, b""), closer=gen.close)


def _inside(base: str, target: str) -> bool:
    return target == base or target.startswith(base.rstrip(os.sep) + os.sep)


def extract_tar(stream: Any, local_dir: LocalPath) -> int:
    """Extracts a tar stream (read sequentially from a binary file object) into
    local_dir, refusing anything that would land outside it (absolute names,
    ``..``, links pointing out); devices and fifos are skipped; set-id bits are
    dropped.  Returns the number of entries written."""
    dest = os.path.realpath(os.fspath(local_dir))
    os.makedirs(dest, exist_ok=True)
    n = 0
    with tarfile.open(fileobj=stream, mode="r|*") as tar:
        for m in tar:
            name = m.name
            while name.startswith("./"):
                name = name[2:]
            name = name.rstrip("/")
            if not name or name == ".":
                continue
            parts = name.split("/")
            if name.startswith("/") or ".." in parts:
                raise ProtocolError(f"unsafe path in tar stream: {m.name!r}")
            target = os.path.join(dest, *parts)
            parent = os.path.realpath(os.path.dirname(target))
            if not _inside(dest, parent):
                raise ProtocolError(f"tar entry {m.name!r} would be written outside {dest}")
            mode = m.mode & 0o777
            if m.isdir():
                os.makedirs(target, exist_ok=True)
                os.chmod(target, mode | 0o700)
            elif m.isreg():
                os.makedirs(parent, exist_ok=True)
                if os.path.islink(target) or (os.path.exists(target) and not os.path.isfile(target)):
                    raise ProtocolError(f"tar entry {m.name!r} would replace a non-file")
                src = tar.extractfile(m)
                with open(target, "wb") as out:
                    while src is not None:
                        c = src.read(CHUNK_SIZE)
                        if not c:
                            break
                        out.write(c)
                os.chmod(target, mode)
                os.utime(target, (m.mtime, m.mtime))
            elif m.issym():
                link = m.linkname
                resolved = os.path.realpath(os.path.join(parent, link))
                if os.path.isabs(link) or not _inside(dest, resolved):
                    continue  # a link out of the tree: not recreated
                os.makedirs(parent, exist_ok=True)
                if os.path.lexists(target):
                    os.remove(target)
                os.symlink(link, target)
            elif m.islnk():
                lparts = m.linkname.lstrip("./").split("/") if m.linkname else []
                src_path = os.path.join(dest, *lparts)
                if ".." in lparts or not _inside(dest, os.path.realpath(src_path)) \
                        or not os.path.isfile(src_path):
                    continue
                if os.path.lexists(target):
                    os.remove(target)
                os.link(src_path, target)
            else:
                continue
            n += 1
    return n


def _umask() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def local_file_mode(headers: Mapping[str, str]) -> int:
    """The mode a downloaded file gets locally: the sandbox file's permission
    bits (``X-Brig-File-Mode``), less set-id bits and the process's umask."""
    try:
        mode = int(headers.get("x-brig-file-mode", "0644"), 8) & 0o777
    except ValueError:
        mode = 0o644
    return mode & ~_umask()


def check_json_object(j: Any, what: str) -> dict[str, Any]:
    if not isinstance(j, dict):
        raise ProtocolError(f"{what}: expected a JSON object, got {j!r:.200}")
    return j



def check_json_list(j: Any, field: str, what: str) -> list[Any]:
    """j[field] of an answer object, which must be a list."""
    v = check_json_object(j, what).get(field)
    if not isinstance(v, list):
        raise ProtocolError(f"{what}: expected a list in {field!r}, got {v!r:.200}")
    return v


def time_param(t: Union[str, int, float, _dt.datetime, None]) -> Optional[str]:
    """A time for a query: an ISO 8601 string as it is, a number as ms since the epoch, a
    datetime (naive: UTC) as ms; None stays None."""
    if t is None or isinstance(t, str):
        return t
    if isinstance(t, _dt.datetime):
        if t.tzinfo is None:
            t = t.replace(tzinfo=_dt.timezone.utc)
        return str(int(t.timestamp() * 1000))
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise TypeError(f"a time must be a datetime, an ISO 8601 string or ms, not {t!r:.60}")
    return str(int(t))


def ended_query(since: Any, before: Optional[str], limit: int) -> dict[str, Any]:
    """The query of GET /v1/sandboxes?state=ended."""
    qry: dict[str, Any] = {"state": "ended", "limit": limit}
    if since is not None:
        qry["since"] = time_param(since)
    if before is not None:
        qry["before"] = before
    return qry
