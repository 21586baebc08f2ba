"""The synchronous client: :class:`Client`, :class:`Sandbox`, :class:`Process`."""

from __future__ import annotations

import builtins
import os
import tempfile
import time
from types import TracebackType
from typing import Any, Iterator, Literal, Mapping, Optional, Sequence, Union, overload

from . import _common as C
from ._errors import BrigError, NotFound, ProtocolError, Timeout
from ._http import StreamResponse, Transport
from ._models import ExecResult, FileEntry, OutputEvent, ProcessInfo, SandboxInfo, VolumeInfo

__all__ = ["Client", "Sandbox", "Process", "ExecStream", "OutputStream", "Volume"]


class Client:
    """A connection to one brigd: base URL, API key, and a pool of keep-alive
    connections (safe to share between threads).

    Args:
        url: brigd's base URL; default ``$BRIG_URL``, else ``http://127.0.0.1:7070``.
        api_key: the API key; default ``$BRIG_API_KEY``.
        timeout: seconds an ordinary call may take (commands get their own
            timeout plus a margin).
        max_idle: idle keep-alive connections kept for reuse.
        ssl_context: for ``https://`` URLs.

    Most programs never make one: :meth:`Sandbox.create` makes its own.
    """

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None, *,
                 timeout: float = C.DEFAULT_REQUEST_TIMEOUT, max_idle: int = 8,
                 ssl_context: Any = None) -> None:
        u, k = C.resolve_config(url, api_key)
        self._t = Transport(u, k, timeout, max_idle, ssl_context)

    @property
    def url(self) -> str:
        return self._t.url

    @property
    def transport(self) -> Transport:
        return self._t

    def health(self) -> dict[str, Any]:
        """``GET /healthz`` (needs no key)."""
        return C.check_json_object(self._t.request("GET", "/healthz", auth=False).json(), "health")

    def templates(self) -> builtins.list[dict[str, Any]]:
        """The templates brigd knows: ``[{"name","key","built"}, …]``."""
        return list(self._t.request("GET", "/v1/templates").json().get("templates", []))

    def tariffs(self) -> dict[str, Any]:
        """``{"tariffs": [{"name", "vcpus", "memory_mib", "disk_mib",
        "price_micro_usd_per_second"}, …], "default": "small"}``."""
        return C.check_json_object(self._t.request("GET", "/v1/tariffs").json(), "tariffs")

    def account(self) -> dict[str, Any]:
        """The caller's account: balance, usage, limits (``GET /v1/account``)."""
        return C.check_json_object(self._t.request("GET", "/v1/account").json(), "account")

    def usage(self, days: int = 30) -> builtins.list[dict[str, Any]]:
        """What the account spent on each of its last ``days`` UTC days (1..366), oldest
        first, today last: ``[{"date", "spent_micro_usd", "spent"}, …]``
        (``GET /v1/account/usage``)."""
        j = self._t.request("GET", "/v1/account/usage", query={"days": days}).json()
        return list(C.check_json_list(j, "days", "usage"))

    def ledger(self, *, limit: int = 100, before: Optional[int] = None) -> dict[str, Any]:
        """One page of the account's ledger, newest first (an admin key):
        ``{"entries": [{"seq", "at", "kind", "amount_micro_usd", "amount", "sandbox_id",
        "seconds", "note"}, …], "next_before"}``; ``next_before`` is the next page's
        ``before``, ``None`` on the last (``GET /v1/account/ledger``)."""
        qry: dict[str, Any] = {"limit": limit}
        if before is not None:
            qry["before"] = before
        j = self._t.request("GET", "/v1/account/ledger", query=qry).json()
        C.check_json_list(j, "entries", "ledger")
        return C.check_json_object(j, "ledger")

    def ledger_entries(self, *, page: int = 1000) -> Iterator[dict[str, Any]]:
        """Every entry of the account's ledger, newest first, fetched a page at a time."""
        before: Optional[int] = None
        while True:
            p = self.ledger(limit=page, before=before)
            yield from p["entries"]
            before = p.get("next_before")
            if before is None:
                return

    def accounts(self) -> builtins.list[dict[str, Any]]:
        """Every account as :meth:`account` shows one, oldest first (``GET /v1/accounts``:
        the operator key)."""
        return list(C.check_json_list(self._t.request("GET", "/v1/accounts").json(),
                                      "accounts", "accounts"))

    def ended_sandboxes(self, *, since: Any = None) -> builtins.list[SandboxInfo]:
        """The caller's ended sandboxes, the last ended first, every page
        (``GET /v1/sandboxes?state=ended``): those that ended at or after ``since`` (a
        datetime, an ISO 8601 string or ms since the epoch; default and earliest: the start
        of brigd's retention period). ``state``, ``reason``, ``end_reason`` and
        ``deleted_at`` say how each ended, ``raw["cost"]`` what it cost."""
        out: builtins.list[SandboxInfo] = []
        before: Optional[str] = None
        while True:
            j = self._t.request("GET", "/v1/sandboxes",
                                query=C.ended_query(since, before, 1000)).json()
            rows = C.check_json_list(j, "sandboxes", "sandboxes")
            out += [SandboxInfo.from_json(s) for s in rows]
            before = j.get("next_before")
            if before is None:
                return out

    def injection_rules(self, project: str) -> builtins.list[dict[str, Any]]:
        """The project's credential injection rules (``GET
        /v1/projects/{id}/injections``; an admin key): each a ``host`` and its
        ``headers`` (docs/secrets.md)."""
        j = self._t.request("GET", f"/v1/projects/{C.q(project)}/injections").json()
        return list(C.check_json_list(j, "rules", "injection rules"))

    def set_injection_rules(self, project: str, rules: Sequence[Mapping[str, Any]]
                            ) -> builtins.list[dict[str, Any]]:
        """Replaces the project's rules (an admin key), e.g. ``[{"host":
        "api.example.com", "headers": {"Authorization": "Bearer
        {{secret:EXAMPLE_KEY}}"}}]``; applies to its running sandboxes at once.
        Returns the rules as stored; a bad rule is :class:`BadRequest`."""
        j = self._t.request("PUT", f"/v1/projects/{C.q(project)}/injections",
                            json=C.injection_rules_body(rules)).json()
        return list(C.check_json_list(j, "rules", "injection rules"))

    def delete_injection_rules(self, project: str) -> None:
        """Removes every rule of the project (an admin key); applies to its
        running sandboxes at once (docs/secrets.md)."""
        self._t.request("PUT", f"/v1/projects/{C.q(project)}/injections", json={"rules": []})

    def call(self, method: str, path: str, *, json: Any = None,
             query: Optional[Mapping[str, Any]] = None) -> Any:
        """Any other JSON route (accounts, projects, keys, secrets …): the
        decoded answer, ``None`` for an empty one; errors raise as usual.
        ``path`` starts with ``/v1/``."""
        resp = self._t.request(method, path, json=json, query=query)
        return resp.json() if resp.body.strip() else None

    def list_sandboxes(self) -> builtins.list["Sandbox"]:
        """The caller's live sandboxes, as handles that use this client."""
        j = self._t.request("GET", "/v1/sandboxes").json()
        return [Sandbox(self, SandboxInfo.from_json(s)) for s in j.get("sandboxes", [])]

    def create_volume(self, name: str, size_mib: int, *,
                      project: Optional[str] = None) -> "Volume":
        """A new, empty volume (``POST /v1/volumes``; an admin key): see
        :meth:`Volume.create`."""
        j = self._t.request("POST", "/v1/volumes", json=C.volume_body(name, size_mib, project))
        return Volume(self, VolumeInfo.from_json(j.json()))

    def volumes(self, *, project: Optional[str] = None) -> builtins.list["Volume"]:
        """The caller's volumes: a sandbox key's project's, an admin key's
        account's (or ``project``'s)."""
        q = {"project": project} if project else None
        j = self._t.request("GET", "/v1/volumes", query=q).json()
        return [Volume(self, VolumeInfo.from_json(v)) for v in j.get("volumes", [])]

    def volume(self, name: str, *, project: Optional[str] = None) -> "Volume":
        """A volume by name or id (:class:`NotFound` when there is none)."""
        q = {"project": project} if project else None
        j = self._t.request("GET", f"/v1/volumes/{C.q(name)}", query=q).json()
        return Volume(self, VolumeInfo.from_json(j))

    def delete_volume(self, name: str, *, project: Optional[str] = None,
                      missing_ok: bool = False) -> None:
        """Deletes a volume and its data (an admin key); :class:`Conflict`
        while a sandbox mounts it."""
        q = {"project": project} if project else None
        try:
            self._t.request("DELETE", f"/v1/volumes/{C.q(name)}", query=q)
        except NotFound:
            if not missing_ok:
                raise

    def snapshots(self) -> builtins.list[dict[str, Any]]:
        """The caller's snapshots (``Sandbox.snapshot``), oldest first."""
        return list(self._t.request("GET", "/v1/snapshots").json().get("snapshots", []))

    def delete_snapshot(self, snapshot_id: str, *, missing_ok: bool = False) -> None:
        """Deletes a snapshot (sandboxes made from it keep their copies)."""
        try:
            self._t.request("DELETE", f"/v1/snapshots/{C.q(snapshot_id)}")
        except NotFound:
            if not missing_ok:
                raise

    def close(self) -> None:
        """Closes idle connections; the client stays usable (new ones open)."""
        self._t.close()
        self._t._closed = False

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"brig.Client({self.url!r})"


def _client(client: Optional[Client], url: Optional[str], api_key: Optional[str]) \
        -> tuple[Client, bool]:
    if client is not None:
        return client, False
    return Client(url, api_key), True


class Sandbox:
    """A sandbox and the operations on it.

    Make one with :meth:`create` (usually in a ``with`` block, which deletes
    it at the end, also when the block raised), attach to an existing one with
    :meth:`connect`, or enumerate them with :meth:`list`."""

    def __init__(self, client: Client, info: SandboxInfo, *, owns_client: bool = False) -> None:
        self.client = client
        self.info = info
        self._owns_client = owns_client

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def template(self) -> Optional[str]:
        return self.info.template

    def __repr__(self) -> str:
        return f"brig.Sandbox({self.id!r}, template={self.template!r})"

    @property
    def _t(self) -> Transport:
        return self.client.transport

    def _p(self, suffix: str = "") -> str:
        return f"/v1/sandboxes/{C.q(self.id)}{suffix}"

    # ---- lifecycle ---------------------------------------------------------------------

    @classmethod
    def create(cls, template: Optional[str] = None, *, tariff: Optional[str] = None,
               env: Optional[Mapping[str, str]] = None,
               secrets: Optional[Mapping[str, str]] = None,
               secret_refs: Optional[Sequence[str]] = None,
               idle_timeout: Optional[float] = None, max_lifetime: Optional[float] = None,
               project: Optional[str] = None, isolation: Optional[str] = None,
               volumes: Any = None, snapshot: Optional[str] = None,
               on_idle: Optional[str] = None, snapshots: Optional[bool] = None,
               url: Optional[str] = None, api_key: Optional[str] = None,
               client: Optional[Client] = None) -> "Sandbox":
        """Creates a sandbox (``POST /v1/sandboxes``) and returns once its
        agent answers.

        Args:
            template: root file system (brigd's default: ``"base"``).
            tariff: ``"small"``, ``"medium"`` or ``"large"``.
            env: environment variables of every command in the sandbox.
            secrets: ``{"NAME": "value"}`` passed as environment variables,
                stored encrypted; the API only ever shows their names.
            secret_refs: names of secrets stored in brigd to pass in.
            idle_timeout: seconds without API use (and no command running)
                before it deletes itself (brigd's default: 300).
            max_lifetime: seconds after which it is deleted whatever happens
                (brigd's default: 3600; see :meth:`set_timeout`).
            project: the project it belongs to (admin keys; default the key's).
            isolation: ``"container"`` (the host kernel, namespaces and a
                seccomp allow-list), ``"gvisor"`` (a user-space kernel of its
                own) or ``"microvm"`` (a virtual machine with its own kernel).
                Default: the project's default, else the operator's; a
                mode the project does not allow raises :class:`Forbidden`, one
                the host cannot run :class:`InvalidRequest` (never another mode).
            volumes: volumes of the project to mount (an admin key):
                ``["data:/data", "refs:/refs:ro"]``, ``{"data": "/data"}``,
                ``[vol.mount("/data")]`` or ``[{"name", "path", "read_only"}]``.
                One sandbox writes a volume at a time, or many read it
                (:class:`Conflict` otherwise); see :class:`Volume`.
            url, api_key: override ``$BRIG_URL`` / ``$BRIG_API_KEY``.
            snapshot: start from this snapshot's file system (``snp_…``, from
                :meth:`snapshot`; its template, a tariff of its disk size):
                :class:`Conflict` for a damaged one (docs/snapshots.md).
            on_idle: what the idle timeout does: ``"delete"`` it, or ``"pause"``
                it (resume with :meth:`resume`; deleted once paused for the
                server's ``paused_max_age``). Default: its project's, else delete.
            snapshots: ``True`` makes a gVisor sandbox one that can be
                snapshotted and forked (its writes go to the host's layer:
                slower on file-heavy work; docs/snapshots.md).
            client: a :class:`Client` to use (then url/api_key are ignored).

        Only the arguments given are sent. brigd refuses fields it does not
        know with :class:`InvalidRequest`.
        """
        cl, owns = _client(client, url, api_key)
        body = C.create_body(template, tariff, env, secrets, secret_refs, idle_timeout,
                             max_lifetime, project, isolation, volumes, snapshot,
                             on_idle, snapshots)
        try:
            j = cl.transport.request("POST", "/v1/sandboxes", json=body).json()
        except BaseException:
            if owns:
                cl.close()
            raise
        try:
            return cls(cl, SandboxInfo.from_json(j), owns_client=owns)
        except BaseException:
            sid = j.get("id") if isinstance(j, dict) else None
            if isinstance(sid, str):
                try:
                    cl.transport.request("DELETE", f"/v1/sandboxes/{C.q(sid)}")
                except BrigError:
                    pass
            if owns:
                cl.close()
            raise

    @classmethod
    def connect(cls, sandbox_id: str, *, url: Optional[str] = None,
                api_key: Optional[str] = None, client: Optional[Client] = None) -> "Sandbox":
        """A handle on an existing sandbox; :class:`NotFound` when there is
        none (or it belongs to another account). A ``with`` block on it
        deletes it at the end too."""
        cl, owns = _client(client, url, api_key)
        try:
            j = cl.transport.request("GET", f"/v1/sandboxes/{C.q(sandbox_id)}").json()
            return cls(cl, SandboxInfo.from_json(j), owns_client=owns)
        except BaseException:
            if owns:
                cl.close()
            raise

    @classmethod
    def list(cls, *, url: Optional[str] = None, api_key: Optional[str] = None,
             client: Optional[Client] = None) -> builtins.list["Sandbox"]:
        """The caller's live sandboxes (handles sharing one client)."""
        cl, owns = _client(client, url, api_key)
        try:
            return cl.list_sandboxes()
        finally:
            if owns:
                cl.close()  # idle connections only: the handles can still be used

    def refresh(self) -> SandboxInfo:
        """Fetches the sandbox again (``GET``). Once it ended, brigd answers
        ``state == "deleted"`` (with ``reason``) for its retention period,
        then :class:`NotFound`."""
        self.info = SandboxInfo.from_json(self._t.request("GET", self._p()).json())
        return self.info

    def delete(self, *, missing_ok: bool = False) -> None:
        """Deletes the sandbox: every process is killed, its files are gone.
        :class:`NotFound` when it was already gone, unless ``missing_ok``."""
        try:
            self._t.request("DELETE", self._p())
        except NotFound:
            if not missing_ok:
                raise
        finally:
            self.close()  # the handle has nothing left to do: drop idle connections

    def set_timeout(self, seconds: float) -> SandboxInfo:
        """Lets the sandbox live until now + ``seconds`` (within the server's
        maximum lifetime); returns the updated sandbox."""
        resp = self._t.request("POST", self._p("/timeout"), json={"timeout": seconds})
        if resp.body.strip():
            self.info = SandboxInfo.from_json(resp.json())
        return self.info

    def pause(self, memory: Optional[str] = None) -> SandboxInfo:
        """Pauses the sandbox: every process stops where it is, its memory stays
        resident (docs/snapshots.md).  ``memory="checkpoint"`` (gVisor sandboxes only):
        its memory is written to disk and its processes end until :meth:`resume`
        restores them; streams open across the pause end.  While paused, commands and
        file calls raise :class:`Conflict` ("paused"); its idle timeout stands still.
        Idempotent."""
        body = {"memory": memory} if memory is not None else None
        self.info = SandboxInfo.from_json(
            self._t.request("POST", self._p("/pause"), json=body).json())
        return self.info

    def resume(self) -> SandboxInfo:
        """Resumes a paused sandbox: its processes go on where they stopped.
        Idempotent."""
        self.info = SandboxInfo.from_json(self._t.request("POST", self._p("/resume")).json())
        return self.info

    def snapshot(self, name: Optional[str] = None) -> dict[str, Any]:
        """Takes a snapshot of its file system (crash-consistent; the sandbox
        goes on) and returns it: ``{"id": "snp_…", "digest", "bytes", …}``.
        ``Sandbox.create(snapshot=...)`` starts new sandboxes from it."""
        body = {"name": name} if name is not None else None
        return dict(self._t.request("POST", self._p("/snapshot"), json=body).json())

    def fork(self, count: int = 1, memory: bool = False) -> builtins.list["Sandbox"]:
        """``count`` new sandboxes that start from its file system as it is now,
        each its own afterwards (docs/snapshots.md).  Fewer than ``count`` when a
        limit stopped the creates (none: the limit's error is raised).  ``memory``:
        a running gVisor sandbox created with ``snapshots=True`` is forked with its
        memory too: its processes go on in every child."""
        body: dict[str, Any] = {"count": count}
        if memory:
            body["memory"] = True
        j = self._t.request("POST", self._p("/fork"), json=body).json()
        return [Sandbox(self.client, SandboxInfo.from_json(x)) for x in j.get("sandboxes", [])]

    def network_log(self) -> builtins.list[dict[str, Any]]:
        """DNS queries and denied connections of the sandbox (see docs/network.md)."""
        j = self._t.request("GET", self._p("/network-log")).json()
        return list(j.get("entries", []))

    def metrics(self) -> dict[str, Any]:
        """Its usage samples, the last minute of them (see docs/metrics.md); after it ended,
        its black box."""
        return dict(self._t.request("GET", self._p("/metrics")).json())

    def timeline(self) -> builtins.list[dict[str, Any]]:
        """The sandbox's audit timeline, oldest first, every page (see docs/audit.md);
        also after it ended."""
        events: builtins.list[dict[str, Any]] = []
        after = 0
        while True:
            j = self._t.request("GET", self._p(f"/timeline?limit=1000&after={after}")).json()
            events += j.get("events", [])
            if j.get("next_after") is None:
                return events
            after = j["next_after"]

    def close(self) -> None:
        """Closes the connections of a client this handle made (does not
        delete the sandbox)."""
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        try:
            self.delete(missing_ok=True)
        except BaseException as e:
            if exc is None:
                raise
            # Never mask the block's own exception: note the failure on it.
            exc.add_note(f"brig: deleting sandbox {self.id} failed too: {e!r}")
        finally:
            self.close()

    # ---- commands ----------------------------------------------------------------------

    @overload
    def exec(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = ...,
             env: Optional[Mapping[str, str]] = ..., timeout: Optional[float] = ...,
             credentials: Optional[Mapping[str, Any]] = ...,
             stdin: Union[bytes, str, None] = ..., user: Optional[str] = ..., pty: Any = ...,
             on_stdout: Optional[C.OutputCallback] = ...,
             on_stderr: Optional[C.OutputCallback] = ...,
             background: Literal[False] = ..., buffer_bytes: Optional[int] = ...) -> ExecResult:
        ...

    @overload
    def exec(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = ...,
             env: Optional[Mapping[str, str]] = ..., timeout: Optional[float] = ...,
             credentials: Optional[Mapping[str, Any]] = ...,
             stdin: Union[bytes, str, None] = ..., user: Optional[str] = ..., pty: Any = ...,
             on_stdout: None = ..., on_stderr: None = ...,
             background: Literal[True], buffer_bytes: Optional[int] = ...) -> "Process":
        ...

    @overload
    def exec(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = ...,
             env: Optional[Mapping[str, str]] = ..., timeout: Optional[float] = ...,
             credentials: Optional[Mapping[str, Any]] = ...,
             stdin: Union[bytes, str, None] = ..., user: Optional[str] = ..., pty: Any = ...,
             on_stdout: Optional[C.OutputCallback] = ...,
             on_stderr: Optional[C.OutputCallback] = ...,
             background: bool = ..., buffer_bytes: Optional[int] = ...
             ) -> Union[ExecResult, "Process"]:
        ...

    def exec(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = None,
             env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
             credentials: Optional[Mapping[str, Any]] = None,
             stdin: Union[bytes, str, None] = None, user: Optional[str] = None, pty: Any = None,
             on_stdout: Optional[C.OutputCallback] = None,
             on_stderr: Optional[C.OutputCallback] = None,
             background: bool = False, buffer_bytes: Optional[int] = None
             ) -> Union[ExecResult, "Process"]:
        """Runs a command and returns its :class:`ExecResult` — whatever its
        exit code (a non-zero exit is a result, not an exception).

        Args:
            cmd: a string, run by ``bash -lc`` (``sh -c`` without bash), or a
                sequence of strings run as argv without a shell.
            cwd: absolute working directory (default ``/root``).
            env: extra environment variables.
            timeout: seconds (fractions allowed) before the command's whole
                process group is killed (``timed_out=True``, exit 137); ``0``
                for none; default brigd's (55 s). Background commands have
                none unless given.
            stdin: bytes or text for the command's stdin (default empty).
            user: ``"root"`` (default) or another account of the template.
            pty: ``True`` or ``(cols, rows)``: run on a pseudo-terminal
                (stdout and stderr are then one stream).
            on_stdout, on_stderr: called with each chunk of output as it
                arrives (the exec is then streamed). A chunk is ``str``, or
                ``bytes`` when it was not valid UTF-8. An exception raised by
                a callback ends the stream, which kills the command, and
                propagates.
            background: start it and return a :class:`Process` at once.
            buffer_bytes: output the agent keeps for a background/streamed
                process (default 4 MiB).
            credentials: per-step credentials for the egress proxy to inject
                (docs/secrets.md): ``{"DEPLOY_TOKEN": 60}`` grants the project's
                secret of that name for 60 s, ``{"DEPLOY_TOKEN": {"ttl_seconds": 60,
                "value": "…"}}`` a value for this grant only, ``{"DEPLOY_TOKEN":
                {"exec_only": True}}`` for this exec only (ended when it does); the
                command sees a placeholder. A rule of the project must use the name.
        """
        body = C.exec_body(cmd, cwd=cwd, env=env, timeout=timeout, stdin=stdin, user=user,
                           pty=pty, background=background, buffer_bytes=buffer_bytes,
                           credentials=credentials)
        if background:
            if on_stdout is not None or on_stderr is not None:
                raise ValueError("background=True returns a Process: read its output() "
                                 "instead of passing callbacks")
            j = self._t.request("POST", self._p("/exec"), json=body).json()
            info = ProcessInfo.from_json(j)
            return Process(self, info.pid, info)
        if on_stdout is None and on_stderr is None:
            j = self._t.request("POST", self._p("/exec"), json=body,
                                timeout=C.exec_read_timeout(timeout)).json()
            return ExecResult.from_json(C.check_json_object(j, "exec"))
        with self._exec_stream(body, timeout) as stream:
            col = C.ExecCollector(on_stdout, on_stderr)
            for ev in stream:
                col.add(ev)
                cb = col.callback_for(ev)
                if cb is not None and ev.data is not None:
                    cb(ev.data)
            return col.result()

    def _exec_stream(self, body: dict[str, Any], timeout: Optional[float]) -> "ExecStream":
        resp = self._t.stream("POST", self._p("/exec"), json=body,
                              headers={"Accept": "application/x-ndjson"},
                              timeout=C.exec_read_timeout(timeout))
        return ExecStream(resp)

    def exec_stream(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = None,
                    env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
                    stdin: Union[bytes, str, None] = None, user: Optional[str] = None,
                    pty: Any = None, buffer_bytes: Optional[int] = None,
                    credentials: Optional[Mapping[str, Any]] = None) -> "ExecStream":
        """Runs a command and iterates its :class:`OutputEvent` s as they
        happen (``start``, ``stdout``/``stderr`` chunks, ``exit``); after the
        loop ``stream.result`` is the :class:`ExecResult`. Closing the stream
        early (``with`` block, ``close()``) kills the command."""
        body = C.exec_body(cmd, cwd=cwd, env=env, timeout=timeout, stdin=stdin, user=user,
                           pty=pty, buffer_bytes=buffer_bytes, credentials=credentials)
        return self._exec_stream(body, timeout)

    def processes(self) -> builtins.list[ProcessInfo]:
        """Running and recently finished processes, oldest first."""
        j = self._t.request("GET", self._p("/processes")).json()
        return [ProcessInfo.from_json(p) for p in j.get("processes", [])]

    def process(self, pid: int) -> "Process":
        """A handle on a process by pid (e.g. after reconnecting)."""
        return Process(self, int(pid))

    # ---- files -------------------------------------------------------------------------

    def upload(self, path: str, data: C.UploadData, *, mode: Union[int, str, None] = None) -> None:
        """Writes a file in the sandbox, atomically (readers never see half a
        file); missing parent directories are created.

        ``data`` is ``bytes``, ``str`` (the *content*, sent as UTF-8), a
        readable file object, an iterable of ``bytes``, or a
        :class:`pathlib.Path` naming a local file. Files and paths are
        streamed, never read whole into memory. ``mode``: ``0o755`` or
        ``"0755"`` (default 0644)."""
        src = C.make_source(data)
        try:
            self._t.request("PUT", self._p("/files"),
                            query={"path": path, "mode": C.mode_text(mode)}, body=src)
        finally:
            src.close()

    def upload_file(self, path: str, local_path: C.LocalPath, *,
                    mode: Union[int, str, None] = None) -> None:
        """Uploads the local file ``local_path`` to ``path`` (streamed)."""
        self.upload(path, _as_pathlike(local_path), mode=mode)

    @overload
    def download(self, path: str) -> bytes:
        ...

    @overload
    def download(self, path: str, dest: Union[C.LocalPath, Any]) -> int:
        ...

    def download(self, path: str, dest: Any = None) -> Union[bytes, int]:
        """Reads a file of the sandbox.

        Without ``dest`` the content is returned as ``bytes``. With ``dest``
        (a local path as ``str``/``PathLike``, or a writable binary file
        object) it is streamed there and the number of bytes is returned; a
        local path is replaced atomically once the download is complete."""
        resp = self._t.stream("GET", self._p("/files"), query={"path": path}, timeout=...)
        with resp:
            if dest is None:
                return resp.read()
            if hasattr(dest, "write"):
                return _copy(resp, dest)
            target = os.fspath(dest)
            d = os.path.dirname(os.path.abspath(target))
            fd, tmp = tempfile.mkstemp(prefix=".brig-", dir=d)
            try:
                with os.fdopen(fd, "wb") as f:
                    n = _copy(resp, f)
                os.chmod(tmp, C.local_file_mode(resp.headers))
                os.replace(tmp, target)
            except BaseException:
                os.unlink(tmp)
                raise
            return n

    def download_file(self, path: str, local_path: C.LocalPath) -> int:
        """Downloads ``path`` to the local file ``local_path``; returns its size."""
        return self.download(path, local_path)

    def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        """A file's content decoded as text."""
        return self.download(path).decode(encoding, errors)

    def ls(self, path: str = "/root") -> builtins.list[FileEntry]:
        """The entries of a directory, in name order."""
        j = self._t.request("GET", self._p("/files"), query={"path": path, "list": 1}).json()
        base = path.rstrip("/")
        return [FileEntry.from_json(e, f"{base}/{e.get('name', '')}")
                for e in j.get("entries", [])]

    def stat(self, path: str) -> FileEntry:
        """The entry of ``path`` (a symlink itself, not its target);
        :class:`NotFound` when it does not exist."""
        j = self._t.request("GET", self._p("/files"), query={"path": path, "stat": 1}).json()
        return FileEntry.from_json(C.check_json_object(j, "stat"), path)

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except NotFound:
            return False

    def mkdir(self, path: str, *, mode: Union[int, str, None] = None,
              parents: bool = False, exist_ok: bool = False) -> None:
        """Creates a directory (:class:`Conflict` when it exists, unless ``exist_ok``)."""
        body: dict[str, Any] = {"path": path}
        if mode is not None:
            body["mode"] = C.mode_text(mode)
        if parents:
            body["parents"] = True
        try:
            self._t.request("POST", self._p("/files/mkdir"), json=body)
        except BrigError as e:
            if not (exist_ok and e.status == 409 and self.stat(path).is_dir):
                raise

    def remove(self, path: str, *, recursive: bool = False) -> None:
        """Removes a file or directory; a non-empty directory needs
        ``recursive=True`` (else :class:`Conflict`)."""
        self._t.request("DELETE", self._p("/files"),
                        query={"path": path, "recursive": 1 if recursive else None}, timeout=330)

    def move(self, src: str, dst: str) -> None:
        """Renames ``src`` to ``dst`` atomically."""
        self._t.request("POST", self._p("/files/move"), json={"from": src, "to": dst})

    def upload_dir(self, local_dir: C.LocalPath, path: str) -> None:
        """Copies a local directory's contents into ``path`` (created if
        missing) as one streamed tar archive."""
        src = C.tar_source(local_dir)
        try:
            self._t.request("PUT", self._p("/files/tar"), query={"path": path}, body=src,
                            headers={"Content-Type": "application/x-tar"}, timeout=C.TAR_TIMEOUT)
        finally:
            src.close()

    def download_dir(self, path: str, local_dir: C.LocalPath) -> int:
        """Copies the sandbox directory ``path`` into ``local_dir`` (streamed
        tar; nothing is written outside ``local_dir``). Returns the number of
        entries written."""
        resp = self._t.stream("GET", self._p("/files/tar"), query={"path": path},
                              timeout=C.TAR_TIMEOUT)
        with resp:
            return C.extract_tar(resp, local_dir)


class Volume:
    """A persistent volume: a project's named file system of a bounded size,
    mounted into sandboxes at their create, outliving them (docs/volumes.md).

    ::

        vol = Volume.create("data", size_mib=1024)
        with Sandbox.create(volumes=[vol.mount("/data")]) as sb:
            sb.exec("echo hello > /data/greeting")
        with Sandbox.create(volumes=[vol.mount("/data", read_only=True)]) as sb:
            print(sb.read_text("/data/greeting"))
        vol.delete()

    Making, mounting and deleting volumes takes an admin key; a sandbox key
    lists and reads its project's."""

    def __init__(self, client: Client, info: VolumeInfo, *, owns_client: bool = False) -> None:
        self.client = client
        self.info = info
        self._owns_client = owns_client

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def name(self) -> str:
        return self.info.name

    def __repr__(self) -> str:
        return f"brig.Volume({self.name!r}, id={self.id!r}, size_mib={self.info.size_mib})"

    def _query(self) -> Optional[dict[str, str]]:
        return {"project": self.info.project_id} if self.info.project_id else None

    @classmethod
    def create(cls, name: str, size_mib: int, *, project: Optional[str] = None,
               url: Optional[str] = None, api_key: Optional[str] = None,
               client: Optional[Client] = None) -> "Volume":
        """A new, empty volume of ``size_mib`` MiB (16 up to the server's
        ``volume_max_mib``) in the key's project, or ``project``.
        :class:`Conflict` for a name the project has; :class:`NoSpace` when
        the host's disk budget is full; :class:`LimitExceeded` past the
        account's volumes' total."""
        cl, owns = _client(client, url, api_key)
        try:
            v = cl.create_volume(name, size_mib, project=project)
        except BaseException:
            if owns:
                cl.close()
            raise
        v._owns_client = owns
        return v

    @classmethod
    def get(cls, name: str, *, project: Optional[str] = None, url: Optional[str] = None,
            api_key: Optional[str] = None, client: Optional[Client] = None) -> "Volume":
        """A volume by name or id; :class:`NotFound` when there is none."""
        cl, owns = _client(client, url, api_key)
        try:
            v = cl.volume(name, project=project)
        except BaseException:
            if owns:
                cl.close()
            raise
        v._owns_client = owns
        return v

    @classmethod
    def list(cls, *, project: Optional[str] = None, url: Optional[str] = None,
             api_key: Optional[str] = None,
             client: Optional[Client] = None) -> builtins.list["Volume"]:
        """The caller's volumes (handles sharing one client)."""
        cl, owns = _client(client, url, api_key)
        try:
            return cl.volumes(project=project)
        finally:
            if owns:
                cl.close()

    def mount(self, path: str, *, read_only: bool = False) -> dict[str, Any]:
        """An entry of :meth:`Sandbox.create`'s ``volumes``."""
        return {"name": self.name, "path": path, "read_only": read_only}

    def refresh(self) -> VolumeInfo:
        """Fetches it again: its ``mounted_by``, its ``cost_micro_usd``."""
        j = self.client.transport.request("GET", f"/v1/volumes/{C.q(self.id)}",
                                          query=self._query()).json()
        self.info = VolumeInfo.from_json(j)
        return self.info

    def delete(self, *, missing_ok: bool = False) -> None:
        """Deletes the volume and its data for good. :class:`Conflict` while a
        sandbox mounts it (one that ended is waited for)."""
        try:
            self.client.delete_volume(self.id, project=self.info.project_id,
                                      missing_ok=missing_ok)
        finally:
            if self._owns_client:
                self.client.close()


def _as_pathlike(p: C.LocalPath) -> "os.PathLike[str]":
    import pathlib

    return p if isinstance(p, os.PathLike) else pathlib.Path(p)


def _copy(resp: StreamResponse, f: Any) -> int:
    n = 0
    while True:
        c = resp.read_chunk(C.CHUNK_SIZE)
        if not c:
            return n
        f.write(c)
        n += len(c)


class ExecStream:
    """Iterator of a streamed exec's :class:`OutputEvent` s. ``result`` is
    the :class:`ExecResult` once the ``exit`` event was read. Close it (or use
    ``with``) to stop early, which kills the command."""

    def __init__(self, resp: StreamResponse) -> None:
        self._resp = resp
        self._lines: Iterator[dict[str, Any]]
        if C.is_ndjson(resp.headers):
            self._lines = resp.json_lines()
        else:  # a brigd that answers a streamed exec in one piece
            with resp:
                self._lines = iter(C.events_of_buffered(resp.read()))
        self._col = C.ExecCollector()
        self.pid: Optional[int] = None

    def __iter__(self) -> Iterator[OutputEvent]:
        return self

    def __next__(self) -> OutputEvent:
        if self._col.done:
            self.close()
            raise StopIteration
        try:
            obj = next(self._lines)
        except StopIteration:
            self.close()
            raise ProtocolError("the stream ended before the command's exit event") from None
        ev = C.event_or_raise(obj)
        self._col.add(ev)
        if ev.type == "start":
            self.pid = ev.pid
        return ev

    @property
    def result(self) -> ExecResult:
        """The result (raises :class:`ProtocolError` before the exit event)."""
        return self._col.result()

    def wait(self) -> ExecResult:
        """Reads the rest of the stream and returns the result."""
        for _ in self:
            pass
        return self.result

    def close(self) -> None:
        close = getattr(self._lines, "close", None)
        if close is not None:
            close()
        self._resp.close()

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class OutputStream:
    """Iterator of a process's :class:`OutputEvent` s (see
    :meth:`Process.output`); close it (or use ``with``) to stop reading —
    the process goes on."""

    def __init__(self, resp: StreamResponse) -> None:
        self._resp = resp
        self._lines = resp.json_lines()
        self._done = False

    def __iter__(self) -> Iterator[OutputEvent]:
        return self

    def __next__(self) -> OutputEvent:
        if self._done:
            raise StopIteration
        try:
            obj = next(self._lines)
        except StopIteration:
            self._done = True
            self.close()
            raise
        ev = C.event_or_raise(obj)
        if ev.type in ("exit", "end"):
            self._done = True
        return ev

    def close(self) -> None:
        self._done = True
        self._lines.close()
        self._resp.close()

    def __enter__(self) -> "OutputStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Process:
    """A process in a sandbox, by pid: started with ``exec(...,
    background=True)`` or found again with :meth:`Sandbox.process`. It runs
    on whether or not anyone holds this handle."""

    def __init__(self, sandbox: Sandbox, pid: int, info: Optional[ProcessInfo] = None) -> None:
        self.sandbox = sandbox
        self.pid = pid
        self.last_info = info

    def __repr__(self) -> str:
        return f"brig.Process(pid={self.pid}, sandbox={self.sandbox.id!r})"

    def _p(self, suffix: str = "") -> str:
        return self.sandbox._p(f"/processes/{C.q(str(self.pid))}{suffix}")

    @property
    def _t(self) -> Transport:
        return self.sandbox._t

    def info(self) -> ProcessInfo:
        """The process now (running, exit code …)."""
        self.last_info = ProcessInfo.from_json(self._t.request("GET", self._p()).json())
        return self.last_info

    def wait(self, timeout: Optional[float] = None) -> ProcessInfo:
        """Waits until the process exits and returns its final
        :class:`ProcessInfo`; with ``timeout`` (seconds), raises
        :class:`brig.Timeout` if it still runs by then."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = C.WAIT_SLICE if deadline is None else max(0.0, deadline - time.monotonic())
            s = min(left, C.WAIT_SLICE)
            # /wait with 0 means "no limit": ask for a millisecond instead
            j = self._t.request("POST", self._p("/wait"), json={"timeout": max(s, 0.001)},
                                timeout=s + C.TIMEOUT_MARGIN).json()
            info = ProcessInfo.from_json(j)
            self.last_info = info
            if not info.running:
                return info
            if deadline is not None and time.monotonic() >= deadline:
                raise Timeout(f"process {self.pid} still runs after {timeout}s")

    def send_signal(self, signal: C.Signal) -> None:
        """Sends a signal (``"SIGTERM"``, ``"TERM"``, ``15``, ``signal.SIGTERM``)
        to the process group; ``SIGKILL`` also kills every descendant."""
        self._t.request("POST", self._p("/signal"), json={"signal": C.signal_value(signal)})

    def kill(self, signal: C.Signal = "SIGKILL") -> None:
        """Sends ``signal`` (default ``SIGKILL``)."""
        self.send_signal(signal)

    def terminate(self) -> None:
        """Sends ``SIGTERM``."""
        self.send_signal("SIGTERM")

    def send_stdin(self, data: C.UploadData) -> int:
        """Writes to the process's stdin (bytes, str, file object, Path …);
        returns the number of bytes written."""
        src = C.make_source(data)
        try:
            j = self._t.request("POST", self._p("/stdin"), body=src).json()
        finally:
            src.close()
        return int(j.get("bytes", 0))

    def close_stdin(self) -> None:
        """Closes stdin: the process reads EOF."""
        self._t.request("POST", self._p("/stdin/close"))

    def resize(self, cols: int, rows: int) -> None:
        """Resizes the pseudo-terminal of a process started with ``pty``."""
        self._t.request("POST", self._p("/resize"), json={"cols": cols, "rows": rows})

    def output(self, follow: bool = True) -> OutputStream:
        """The process's output as :class:`OutputEvent` s: first
        ``{"type":"output","dropped_bytes":n}``, then ``stdout``/``stderr``
        chunks from the oldest byte still buffered, then (``follow=True``)
        live ones until ``exit``; with ``follow=False`` a snapshot that ends
        with an ``end`` event."""
        resp = self._t.stream("GET", self._p("/output"),
                              query={"follow": None if follow else 0}, timeout=None)
        return OutputStream(resp)

    def collect(self, on_stdout: Optional[C.OutputCallback] = None,
                on_stderr: Optional[C.OutputCallback] = None) -> ExecResult:
        """Follows the output until the process exits and returns it as an
        :class:`ExecResult` (stdout/stderr from the oldest buffered byte)."""
        col = C.ExecCollector(on_stdout, on_stderr)
        with self.output(follow=True) as out:
            for ev in out:
                col.add(ev)
                cb = col.callback_for(ev)
                if cb is not None and ev.data is not None:
                    cb(ev.data)
        if not col.done:
            info = self.wait()
            col.exit = {"exit_code": info.exit_code, "signal": info.signal,
                        "timed_out": info.timed_out, "reason": info.reason}
        col.pid = self.pid
        return col.result()
