"""Plain data returned by the API: results, sandboxes, processes, file entries,
output events.  All are immutable dataclasses that keep the raw JSON object in
``raw`` (fields a newer brigd adds are there before this SDK knows them)."""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Union

from ._errors import ProtocolError

__all__ = ["ExecResult", "SandboxInfo", "ProcessInfo", "FileEntry", "OutputEvent", "Chunk"]

#: What an output callback or event carries: text, or bytes when the chunk was
#: not valid UTF-8 (brigd then sends it base64-encoded).
Chunk = Union[str, bytes]


def parse_time(value: Any) -> Optional[_dt.datetime]:
    """ISO 8601 from brigd (``2026-12-01T10:00:00.123Z``) → an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def decode_output(data: Any, encoding: Any) -> bytes:
    """The bytes of an output field: text as UTF-8, or base64 when ``encoding``
    says so."""
    if data is None:
        return b""
    if not isinstance(data, str):
        raise ProtocolError(f"output is not a string: {data!r:.80}")
    if encoding == "base64":
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as e:
            raise ProtocolError(f"bad base64 output: {e}") from None
    return data.encode("utf-8")


def chunk_of(data: Any, encoding: Any) -> Chunk:
    """An event's payload as given to callbacks: ``str`` for text; for a
    base64 chunk the decoded bytes as ``str`` when they are valid UTF-8, else
    ``bytes``."""
    if encoding != "base64":
        return data if isinstance(data, str) else ""
    raw = decode_output(data, encoding)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


@dataclass(frozen=True)
class ExecResult:
    """The outcome of a command. A non-zero ``exit_code`` is a normal result.

    Attributes:
        exit_code: the command's status; ``128 + n`` when killed by signal
            ``n``; ``127`` program not found, ``126`` not executable, ``137``
            with ``timed_out`` after the timeout.
        stdout, stderr: the output as text. Output that is not valid UTF-8 is
            decoded with replacement characters; the exact bytes are in
            ``stdout_bytes`` / ``stderr_bytes``.
        timed_out: the command ran past its timeout and was killed.
        duration_ms: wall-clock run time.
        signal: the signal number that ended it, or ``None``.
        reason: why it ended: ``"exited"``, ``"signal"``, ``"timeout"``,
            ``"oom_killed"`` (the sandbox's memory limit), ``"pids_limit"``,
            ``"disk_full"``; ``None`` from a brigd that does not say.
        stdout_truncated, stderr_truncated: output beyond the server's limit
            (10 MiB per stream by default) was discarded.
        pid: the process id in the sandbox (streamed execs only, else ``None``).
    """

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    duration_ms: int = 0
    signal: Optional[int] = None
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    pid: Optional[int] = None
    reason: Optional[str] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """``exit_code == 0`` and not timed out."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def output(self) -> str:
        """stdout followed by stderr (convenient for showing an agent what happened)."""
        return self.stdout + self.stderr

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "ExecResult":
        out = decode_output(j.get("stdout", ""), j.get("stdout_encoding"))
        err = decode_output(j.get("stderr", ""), j.get("stderr_encoding"))
        return cls(
            exit_code=int(j["exit_code"]) if j.get("exit_code") is not None else -1,
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            timed_out=bool(j.get("timed_out", False)),
            duration_ms=int(j.get("duration_ms") or 0),
            signal=j.get("signal"),
            stdout_bytes=out,
            stderr_bytes=err,
            stdout_truncated=bool(j.get("stdout_truncated", False)),
            stderr_truncated=bool(j.get("stderr_truncated", False)),
            pid=j.get("pid"),
            reason=j.get("reason"),
            raw=dict(j),
        )


@dataclass(frozen=True)
class SandboxInfo:
    """A sandbox as brigd describes it (``GET /v1/sandboxes/{id}``).

    ``state`` is ``"running"`` while it lives (``"paused"`` while paused); after it ended brigd keeps
    answering for a retention period with ``state == "deleted"``, the
    ``reason`` (the detail: ``deleted_by_api``, ``idle_timeout``, ``max_lifetime`` …),
    ``end_reason`` (the typed reason: ``deleted``, ``idle``, ``lifetime``,
    ``oom_killed``, ``agent_lost`` …; docs/api.md "Why it ended"),
    ``deleted_at`` and its cost (in ``raw``). ``env`` and ``secrets`` are
    names only: the API never shows their values."""

    id: str
    template: Optional[str] = None
    state: Optional[str] = None
    created_at: Optional[_dt.datetime] = None
    tariff: Optional[str] = None
    env: Optional[list[str]] = None
    isolation: Optional[str] = None
    on_idle: Optional[str] = None
    reason: Optional[str] = None
    end_reason: Optional[str] = None
    deleted_at: Optional[_dt.datetime] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def deleted(self) -> bool:
        """The sandbox has ended (its record is kept for a while)."""
        return self.state == "deleted"

    @property
    def paused(self) -> bool:
        """The sandbox is paused (``Sandbox.pause``; docs/snapshots.md)."""
        return self.state == "paused"

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "SandboxInfo":
        if not isinstance(j, Mapping) or not isinstance(j.get("id"), str):
            raise ProtocolError(f"not a sandbox object: {j!r:.200}")
        env = j.get("env")
        return cls(
            id=j["id"],
            template=j.get("template"),
            state=j.get("state"),
            created_at=parse_time(j.get("created_at")),
            tariff=j.get("tariff"),
            env=list(env) if isinstance(env, list) else None,
            isolation=j.get("isolation"),
            on_idle=j.get("on_idle"),
            reason=j.get("reason"),
            end_reason=j.get("end_reason"),
            deleted_at=parse_time(j.get("deleted_at")),
            raw=dict(j),
        )


@dataclass(frozen=True)
class VolumeInfo:
    """A volume as brigd describes it (``GET /v1/volumes/{name}``): a project's
    named file system of ``size_mib``, outliving the sandboxes that mount it.
    ``mounted_by`` lists ``{"sandbox_id", "path", "read_only"}`` of each sandbox
    that mounts it now (docs/volumes.md)."""

    id: str
    name: str
    project_id: Optional[str] = None
    size_mib: int = 0
    created_at: Optional[_dt.datetime] = None
    cost_micro_usd: int = 0
    mounted_by: list[dict[str, Any]] = field(default_factory=list)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "VolumeInfo":
        if not isinstance(j, Mapping) or not isinstance(j.get("id"), str) \
                or not isinstance(j.get("name"), str):
            raise ProtocolError(f"not a volume object: {j!r:.200}")
        users = j.get("mounted_by")
        return cls(
            id=j["id"],
            name=j["name"],
            project_id=j.get("project_id"),
            size_mib=int(j.get("size_mib") or 0),
            created_at=parse_time(j.get("created_at")),
            cost_micro_usd=int(j.get("cost_micro_usd") or 0),
            mounted_by=[dict(u) for u in users] if isinstance(users, list) else [],
            raw=dict(j),
        )


@dataclass(frozen=True)
class ProcessInfo:
    """A (background, streamed or finished) process in a sandbox."""

    pid: int
    running: bool
    exit_code: Optional[int] = None
    signal: Optional[int] = None
    timed_out: bool = False
    reason: Optional[str] = None  # why it ended (ExecResult.reason); None while it runs
    cmd: Optional[str] = None
    argv: Optional[list[str]] = None
    pty: bool = False
    background: bool = False
    user: Optional[str] = None
    started_at: Optional[_dt.datetime] = None
    ended_at: Optional[_dt.datetime] = None
    dropped_bytes: int = 0
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "ProcessInfo":
        if not isinstance(j, Mapping) or not isinstance(j.get("pid"), int):
            raise ProtocolError(f"not a process object: {j!r:.200}")
        return cls(
            pid=j["pid"],
            running=bool(j.get("running", False)),
            exit_code=j.get("exit_code"),
            signal=j.get("signal"),
            timed_out=bool(j.get("timed_out", False)),
            reason=j.get("reason"),
            cmd=j.get("cmd"),
            argv=j.get("argv"),
            pty=bool(j.get("pty", False)),
            background=bool(j.get("background", False)),
            user=j.get("user"),
            started_at=parse_time(j.get("started_at")),
            ended_at=parse_time(j.get("ended_at")),
            dropped_bytes=int(j.get("dropped_bytes") or 0),
            raw=dict(j),
        )


@dataclass(frozen=True)
class FileEntry:
    """A file-system entry (``ls`` / ``stat``).

    ``mode`` is the permission bits as an int (``0o644``), ``type`` one of
    ``"file"``, ``"dir"``, ``"symlink"``, ``"other"``; ``target`` is set for
    symlinks. ``path`` is the full path when known (``stat``, ``ls``)."""

    name: str
    type: str
    size: int = 0
    mode: int = 0
    mtime: Optional[_dt.datetime] = None
    target: Optional[str] = None
    path: Optional[str] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_dir(self) -> bool:
        return self.type == "dir"

    @property
    def is_file(self) -> bool:
        return self.type == "file"

    @property
    def is_symlink(self) -> bool:
        return self.type == "symlink"

    @classmethod
    def from_json(cls, j: Mapping[str, Any], path: Optional[str] = None) -> "FileEntry":
        if not isinstance(j, Mapping):
            raise ProtocolError(f"not a file entry: {j!r:.200}")
        mode = j.get("mode", 0)
        if isinstance(mode, str):
            try:
                mode = int(mode, 8)
            except ValueError:
                mode = 0
        return cls(
            name=str(j.get("name", "")),
            type=str(j.get("type", "other")),
            size=int(j.get("size") or 0),
            mode=int(mode or 0),
            mtime=parse_time(j.get("mtime")),
            target=j.get("target"),
            path=path,
            raw=dict(j),
        )


@dataclass(frozen=True)
class OutputEvent:
    """One event of a streamed exec or of a process's output.

    ``type`` is brigd's event type: ``"start"`` (``pid``), ``"stdout"`` /
    ``"stderr"`` (``data``), ``"exit"`` (``exit_code``, ``signal``,
    ``timed_out``, ``duration_ms``, ``reason``), ``"output"`` (``dropped_bytes``, first
    event of a process's output), ``"dropped"`` (``bytes`` missed by a slow
    reader), ``"end"`` (a snapshot's end, ``running``).  ``data`` is ``str``,
    or ``bytes`` when the chunk was not valid UTF-8; ``data_bytes`` always
    has the exact bytes."""

    type: str
    data: Optional[Chunk] = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def data_bytes(self) -> bytes:
        if self.data is None:
            return b""
        return self.data if isinstance(self.data, bytes) else self.data.encode("utf-8")

    @property
    def pid(self) -> Optional[int]:
        return self.raw.get("pid")

    @property
    def exit_code(self) -> Optional[int]:
        return self.raw.get("exit_code")

    @property
    def signal(self) -> Optional[int]:
        return self.raw.get("signal")

    @property
    def timed_out(self) -> bool:
        return bool(self.raw.get("timed_out", False))

    @property
    def reason(self) -> Optional[str]:
        """Why the command ended (an ``"exit"`` event): see ``ExecResult.reason``."""
        return self.raw.get("reason")

    @property
    def duration_ms(self) -> Optional[int]:
        return self.raw.get("duration_ms")

    @classmethod
    def from_json(cls, j: Mapping[str, Any]) -> "OutputEvent":
        if not isinstance(j, Mapping) or not isinstance(j.get("type"), str):
            raise ProtocolError(f"not an output event: {j!r:.200}")
        t = j["type"]
        data = chunk_of(j.get("data"), j.get("encoding")) if t in ("stdout", "stderr") else None
        return cls(type=t, data=data, raw=dict(j))
