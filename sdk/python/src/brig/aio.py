"""The asyncio flavour of the SDK: the same classes with ``async`` methods.

::

    import asyncio
    from brig.aio import Sandbox

    async def main():
        async with Sandbox.create(template="base") as sb:
            results = await asyncio.gather(*(sb.exec(f"echo {i}") for i in range(10)))
            print([r.stdout for r in results])

    asyncio.run(main())

It runs on its own small HTTP/1.1 client over asyncio streams (standard
library only, no threads per request): every request in flight has a
connection of its own, so any number of execs run concurrently in one event
loop, and cancelling a task closes its connection (a cancelled *streamed*
exec is killed by brigd; a buffered one runs to its end in the sandbox).
Local files are read and written in the default thread executor so the loop
never blocks on disk.  Use one :class:`Client`/:class:`Sandbox` from one event
loop.
"""

from __future__ import annotations

import asyncio
import builtins
import inspect
import os
import tempfile
import time
from types import TracebackType
from typing import Any, AsyncIterator, Awaitable, Callable, Generator, Literal, Mapping, \
    Optional, Sequence, Union, overload

from . import _common as C
from ._async_http import AsyncResponse, AsyncTransport
from ._errors import BrigError, NotFound, ProtocolError, Timeout
from ._models import Chunk, ExecResult, FileEntry, OutputEvent, ProcessInfo, SandboxInfo, \
    VolumeInfo
from ._templates import FileSpec, TemplateInfo, build_outcome, quoted, template_spec

__all__ = ["Client", "Sandbox", "Process", "ExecStream", "OutputStream", "Volume", "Template"]

#: An output callback: a function or a coroutine function taking a chunk.
AsyncOutputCallback = Callable[[Chunk], Union[Any, Awaitable[Any]]]


async def _call(cb: Optional[AsyncOutputCallback], chunk: Optional[Chunk]) -> None:
    if cb is None or chunk is None:
        return
    r = cb(chunk)
    if inspect.isawaitable(r):
        await r


class Client:
    """Async connection to one brigd (see :class:`brig.Client`); the pool of
    keep-alive connections belongs to the event loop it is used in."""

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None, *,
                 timeout: float = C.DEFAULT_REQUEST_TIMEOUT, max_idle: int = 8,
                 ssl_context: Any = None) -> None:
        u, k = C.resolve_config(url, api_key)
        self._t = AsyncTransport(u, k, timeout, max_idle, ssl_context)

    @property
    def url(self) -> str:
        return self._t.url

    @property
    def transport(self) -> AsyncTransport:
        return self._t

    async def health(self) -> dict[str, Any]:
        """``GET /healthz`` (needs no key)."""
        return C.check_json_object((await self._t.request("GET", "/healthz", auth=False)).json(),
                                   "health")

    async def templates(self) -> builtins.list[dict[str, Any]]:
        return list((await self._t.request("GET", "/v1/templates")).json().get("templates", []))

    async def tariffs(self) -> dict[str, Any]:
        return C.check_json_object((await self._t.request("GET", "/v1/tariffs")).json(),
                                   "tariffs")

    async def account(self) -> dict[str, Any]:
        return C.check_json_object((await self._t.request("GET", "/v1/account")).json(),
                                   "account")

    async def usage(self, days: int = 30) -> builtins.list[dict[str, Any]]:
        """See :meth:`brig.Client.usage`."""
        j = (await self._t.request("GET", "/v1/account/usage", query={"days": days})).json()
        return list(C.check_json_list(j, "days", "usage"))

    async def ledger(self, *, limit: int = 100, before: Optional[int] = None) -> dict[str, Any]:
        """See :meth:`brig.Client.ledger`."""
        qry: dict[str, Any] = {"limit": limit}
        if before is not None:
            qry["before"] = before
        j = (await self._t.request("GET", "/v1/account/ledger", query=qry)).json()
        C.check_json_list(j, "entries", "ledger")
        return C.check_json_object(j, "ledger")

    async def ledger_entries(self, *, page: int = 1000) -> AsyncIterator[dict[str, Any]]:
        """See :meth:`brig.Client.ledger_entries`."""
        before: Optional[int] = None
        while True:
            p = await self.ledger(limit=page, before=before)
            for e in p["entries"]:
                yield e
            before = p.get("next_before")
            if before is None:
                return

    async def accounts(self) -> builtins.list[dict[str, Any]]:
        """See :meth:`brig.Client.accounts` (the operator key)."""
        j = (await self._t.request("GET", "/v1/accounts")).json()
        return list(C.check_json_list(j, "accounts", "accounts"))

    async def ended_sandboxes(self, *, since: Any = None) -> builtins.list[SandboxInfo]:
        """See :meth:`brig.Client.ended_sandboxes`."""
        out: builtins.list[SandboxInfo] = []
        before: Optional[str] = None
        while True:
            j = (await self._t.request("GET", "/v1/sandboxes",
                                       query=C.ended_query(since, before, 1000))).json()
            rows = C.check_json_list(j, "sandboxes", "sandboxes")
            out += [SandboxInfo.from_json(s) for s in rows]
            before = j.get("next_before")
            if before is None:
                return out

    async def injection_rules(self, project: str) -> builtins.list[dict[str, Any]]:
        """The project's injection rules (see :meth:`brig.Client.injection_rules`)."""
        j = (await self._t.request("GET", f"/v1/projects/{C.q(project)}/injections")).json()
        return list(C.check_json_list(j, "rules", "injection rules"))

    async def set_injection_rules(self, project: str, rules: Sequence[Mapping[str, Any]]
                                  ) -> builtins.list[dict[str, Any]]:
        """Replaces the project's rules (see :meth:`brig.Client.set_injection_rules`)."""
        j = (await self._t.request("PUT", f"/v1/projects/{C.q(project)}/injections",
                                   json=C.injection_rules_body(rules))).json()
        return list(C.check_json_list(j, "rules", "injection rules"))

    async def delete_injection_rules(self, project: str) -> None:
        """Removes every rule of the project."""
        await self._t.request("PUT", f"/v1/projects/{C.q(project)}/injections",
                              json={"rules": []})

    async def call(self, method: str, path: str, *, json: Any = None,
                   query: Optional[Mapping[str, Any]] = None) -> Any:
        """Any other JSON route (see :meth:`brig.Client.call`)."""
        resp = await self._t.request(method, path, json=json, query=query)
        return resp.json() if resp.body.strip() else None

    async def list_sandboxes(self) -> builtins.list["Sandbox"]:
        j = (await self._t.request("GET", "/v1/sandboxes")).json()
        return [Sandbox(self, SandboxInfo.from_json(s)) for s in j.get("sandboxes", [])]

    async def create_volume(self, name: str, size_mib: int, *,
                            project: Optional[str] = None) -> "Volume":
        """A new, empty volume (see :meth:`brig.Client.create_volume`)."""
        r = await self._t.request("POST", "/v1/volumes",
                                  json=C.volume_body(name, size_mib, project))
        return Volume(self, VolumeInfo.from_json(r.json()))

    async def volumes(self, *, project: Optional[str] = None) -> builtins.list["Volume"]:
        q = {"project": project} if project else None
        j = (await self._t.request("GET", "/v1/volumes", query=q)).json()
        return [Volume(self, VolumeInfo.from_json(v)) for v in j.get("volumes", [])]

    async def volume(self, name: str, *, project: Optional[str] = None) -> "Volume":
        q = {"project": project} if project else None
        j = (await self._t.request("GET", f"/v1/volumes/{C.q(name)}", query=q)).json()
        return Volume(self, VolumeInfo.from_json(j))

    async def delete_volume(self, name: str, *, project: Optional[str] = None,
                            missing_ok: bool = False) -> None:
        q = {"project": project} if project else None
        try:
            await self._t.request("DELETE", f"/v1/volumes/{C.q(name)}", query=q)
        except NotFound:
            if not missing_ok:
                raise

    async def aclose(self) -> None:
        """Closes idle connections; the client stays usable."""
        await self._t.aclose()
        self._t.reopen()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


def _client(client: Optional[Client], url: Optional[str], api_key: Optional[str]) \
        -> tuple[Client, bool]:
    if client is not None:
        return client, False
    return Client(url, api_key), True


_BACKGROUND: set["asyncio.Task[Any]"] = set()


def _delete_orphan(cl: Client, fut: "asyncio.Future[Any]") -> None:
    """Deletes a sandbox whose creator was cancelled before it got the answer."""
    if fut.cancelled() or fut.exception() is not None:
        return
    try:
        sid = fut.result().json().get("id")
    except Exception:  # noqa: BLE001 - nothing usable to delete
        return
    if not isinstance(sid, str):
        return

    async def delete() -> None:
        try:
            await cl.transport.request("DELETE", f"/v1/sandboxes/{C.q(sid)}")
        except BrigError:
            pass
        await cl.aclose()

    task = asyncio.get_running_loop().create_task(delete())
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


class _Creating:
    """What :meth:`Sandbox.create` returns: await it for the sandbox, or use
    it directly as ``async with Sandbox.create(...) as sb``."""

    def __init__(self, coro_fn: Callable[[], Awaitable["Sandbox"]]) -> None:
        self._fn = coro_fn
        self._sb: Optional[Sandbox] = None

    def __await__(self) -> Generator[Any, None, "Sandbox"]:
        return self._fn().__await__()

    async def __aenter__(self) -> "Sandbox":
        self._sb = await self._fn()
        return self._sb

    async def __aexit__(self, exc_type: Optional[type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        if self._sb is not None:
            await self._sb.__aexit__(exc_type, exc, tb)


class Sandbox:
    """Async twin of :class:`brig.Sandbox`; every method is a coroutine."""

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
        return f"brig.aio.Sandbox({self.id!r}, template={self.template!r})"

    @property
    def _t(self) -> AsyncTransport:
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
               client: Optional[Client] = None) -> _Creating:
        """Creates a sandbox (arguments as :meth:`brig.Sandbox.create`).
        ``sb = await Sandbox.create(...)``, or ``async with
        Sandbox.create(...) as sb:`` to delete it at the end of the block,
        also when the block raised."""

        async def make() -> "Sandbox":
            cl, owns = _client(client, url, api_key)
            body = C.create_body(template, tariff, env, secrets, secret_refs, idle_timeout,
                                 max_lifetime, project, isolation, volumes, snapshot,
                                 on_idle, snapshots)
            post = asyncio.ensure_future(cl.transport.request("POST", "/v1/sandboxes", json=body))
            try:
                # shielded: if this task is cancelled (asyncio.wait_for …) while
                # brigd creates the sandbox, the creation still completes and the
                # sandbox is deleted in the background instead of leaking
                j = (await asyncio.shield(post)).json()
            except asyncio.CancelledError:
                post.add_done_callback(lambda f: _delete_orphan(cl, f))
                raise
            except BaseException:
                if owns:
                    await cl.aclose()
                raise
            try:
                return cls(cl, SandboxInfo.from_json(j), owns_client=owns)
            except BaseException:
                sid = j.get("id") if isinstance(j, dict) else None
                if isinstance(sid, str):
                    try:
                        await cl.transport.request("DELETE", f"/v1/sandboxes/{C.q(sid)}")
                    except BrigError:
                        pass
                if owns:
                    await cl.aclose()
                raise

        return _Creating(make)

    @classmethod
    async def connect(cls, sandbox_id: str, *, url: Optional[str] = None,
                      api_key: Optional[str] = None, client: Optional[Client] = None
                      ) -> "Sandbox":
        """A handle on an existing sandbox; :class:`NotFound` when there is none."""
        cl, owns = _client(client, url, api_key)
        try:
            j = (await cl.transport.request("GET", f"/v1/sandboxes/{C.q(sandbox_id)}")).json()
            return cls(cl, SandboxInfo.from_json(j), owns_client=owns)
        except BaseException:
            if owns:
                await cl.aclose()
            raise

    @classmethod
    async def list(cls, *, url: Optional[str] = None, api_key: Optional[str] = None,
                   client: Optional[Client] = None) -> builtins.list["Sandbox"]:
        """The caller's live sandboxes."""
        cl, owns = _client(client, url, api_key)
        try:
            return await cl.list_sandboxes()
        finally:
            if owns:
                await cl.aclose()  # idle connections only: the handles can still be used

    async def refresh(self) -> SandboxInfo:
        self.info = SandboxInfo.from_json((await self._t.request("GET", self._p())).json())
        return self.info

    async def delete(self, *, missing_ok: bool = False) -> None:
        try:
            await self._t.request("DELETE", self._p())
        except NotFound:
            if not missing_ok:
                raise
        finally:
            await self.aclose()  # the handle has nothing left to do: drop idle connections

    async def set_timeout(self, seconds: float) -> SandboxInfo:
        """Lets the sandbox live until now + ``seconds``; returns it updated."""
        resp = await self._t.request("POST", self._p("/timeout"), json={"timeout": seconds})
        if resp.body.strip():
            self.info = SandboxInfo.from_json(resp.json())
        return self.info

    async def pause(self, memory: Optional[str] = None) -> SandboxInfo:
        """Pauses the sandbox (see the sync :meth:`brig.Sandbox.pause`)."""
        body = {"memory": memory} if memory is not None else None
        resp = await self._t.request("POST", self._p("/pause"), json=body)
        self.info = SandboxInfo.from_json(resp.json())
        return self.info

    async def resume(self) -> SandboxInfo:
        """Resumes a paused sandbox (see the sync :meth:`brig.Sandbox.resume`)."""
        resp = await self._t.request("POST", self._p("/resume"))
        self.info = SandboxInfo.from_json(resp.json())
        return self.info

    async def snapshot(self, name: Optional[str] = None) -> dict[str, Any]:
        """Takes a snapshot of its file system (see the sync :meth:`brig.Sandbox.snapshot`)."""
        body = {"name": name} if name is not None else None
        return dict((await self._t.request("POST", self._p("/snapshot"), json=body)).json())

    async def fork(self, count: int = 1, memory: bool = False) -> builtins.list["Sandbox"]:
        """``count`` new sandboxes from its file system now (see the sync
        :meth:`brig.Sandbox.fork`)."""
        body: dict[str, Any] = {"count": count}
        if memory:
            body["memory"] = True
        j = (await self._t.request("POST", self._p("/fork"), json=body)).json()
        return [Sandbox(self.client, SandboxInfo.from_json(x)) for x in j.get("sandboxes", [])]

    async def network_log(self) -> builtins.list[dict[str, Any]]:
        """DNS queries and denied connections of the sandbox."""
        j = (await self._t.request("GET", self._p("/network-log"))).json()
        return list(j.get("entries", []))

    async def metrics(self) -> dict[str, Any]:
        """Its usage samples, the last minute of them (see docs/metrics.md)."""
        return dict((await self._t.request("GET", self._p("/metrics"))).json())

    async def timeline(self) -> builtins.list[dict[str, Any]]:
        """The sandbox's audit timeline, oldest first, every page (see docs/audit.md)."""
        events: builtins.list[dict[str, Any]] = []
        after = 0
        while True:
            resp = await self._t.request("GET", self._p(f"/timeline?limit=1000&after={after}"))
            j = resp.json()
            events += j.get("events", [])
            if j.get("next_after") is None:
                return events
            after = j["next_after"]

    async def aclose(self) -> None:
        """Closes the connections of a client this handle made (does not delete)."""
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> "Sandbox":
        return self

    async def __aexit__(self, exc_type: Optional[type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        try:
            # shielded: a cancelled task still deletes its sandbox
            await asyncio.shield(self.delete(missing_ok=True))
        except BaseException as e:
            if exc is None:
                raise
            exc.add_note(f"brig: deleting sandbox {self.id} failed too: {e!r}")
        finally:
            await self.aclose()

    # ---- commands ----------------------------------------------------------------------

    @overload
    async def exec(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = ...,
                   env: Optional[Mapping[str, str]] = ..., timeout: Optional[float] = ...,
                   credentials: Optional[Mapping[str, Any]] = ...,
                   stdin: Union[bytes, str, None] = ..., user: Optional[str] = ...,
                   pty: Any = ..., on_stdout: Optional[AsyncOutputCallback] = ...,
                   on_stderr: Optional[AsyncOutputCallback] = ...,
                   background: Literal[False] = ..., buffer_bytes: Optional[int] = ...
                   ) -> ExecResult:
        ...

    @overload
    async def exec(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = ...,
                   env: Optional[Mapping[str, str]] = ..., timeout: Optional[float] = ...,
                   credentials: Optional[Mapping[str, Any]] = ...,
                   stdin: Union[bytes, str, None] = ..., user: Optional[str] = ...,
                   pty: Any = ..., on_stdout: None = ..., on_stderr: None = ...,
                   background: Literal[True], buffer_bytes: Optional[int] = ...) -> "Process":
        ...

    @overload
    async def exec(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = ...,
                   env: Optional[Mapping[str, str]] = ..., timeout: Optional[float] = ...,
                   credentials: Optional[Mapping[str, Any]] = ...,
                   stdin: Union[bytes, str, None] = ..., user: Optional[str] = ...,
                   pty: Any = ..., on_stdout: Optional[AsyncOutputCallback] = ...,
                   on_stderr: Optional[AsyncOutputCallback] = ...,
                   background: bool = ..., buffer_bytes: Optional[int] = ...
                   ) -> Union[ExecResult, "Process"]:
        ...

    async def exec(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = None,
                   env: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None,
                   credentials: Optional[Mapping[str, Any]] = None,
                   stdin: Union[bytes, str, None] = None, user: Optional[str] = None,
                   pty: Any = None, on_stdout: Optional[AsyncOutputCallback] = None,
                   on_stderr: Optional[AsyncOutputCallback] = None,
                   background: bool = False, buffer_bytes: Optional[int] = None
                   ) -> Union[ExecResult, "Process"]:
        """Runs a command (see :meth:`brig.Sandbox.exec`, ``credentials`` too). Callbacks
        may be plain functions or coroutine functions (awaited in order)."""
        body = C.exec_body(cmd, cwd=cwd, env=env, timeout=timeout, stdin=stdin, user=user,
                           pty=pty, background=background, buffer_bytes=buffer_bytes,
                           credentials=credentials)
        if background:
            if on_stdout is not None or on_stderr is not None:
                raise ValueError("background=True returns a Process: read its output() "
                                 "instead of passing callbacks")
            j = (await self._t.request("POST", self._p("/exec"), json=body)).json()
            info = ProcessInfo.from_json(j)
            return Process(self, info.pid, info)
        if on_stdout is None and on_stderr is None:
            j = (await self._t.request("POST", self._p("/exec"), json=body,
                                       timeout=C.exec_read_timeout(timeout))).json()
            return ExecResult.from_json(C.check_json_object(j, "exec"))
        stream = await self._exec_stream(body, timeout)
        async with stream:
            col = C.ExecCollector()
            async for ev in stream:
                col.add(ev)
                if ev.type == "stdout":
                    await _call(on_stdout, ev.data)
                elif ev.type == "stderr":
                    await _call(on_stderr, ev.data)
            return col.result()

    async def _exec_stream(self, body: dict[str, Any], timeout: Optional[float]) -> "ExecStream":
        resp = await self._t.stream("POST", self._p("/exec"), json=body,
                                    headers={"Accept": "application/x-ndjson"},
                                    timeout=C.exec_read_timeout(timeout))
        return ExecStream(resp)

    async def exec_stream(self, cmd: Union[str, Sequence[str]], *, cwd: Optional[str] = None,
                          env: Optional[Mapping[str, str]] = None,
                          timeout: Optional[float] = None,
                          stdin: Union[bytes, str, None] = None, user: Optional[str] = None,
                          pty: Any = None, buffer_bytes: Optional[int] = None,
                          credentials: Optional[Mapping[str, Any]] = None) -> "ExecStream":
        """Runs a command; ``async for ev in stream`` gives its events, then
        ``stream.result``. Closing the stream early kills the command."""
        body = C.exec_body(cmd, cwd=cwd, env=env, timeout=timeout, stdin=stdin, user=user,
                           pty=pty, buffer_bytes=buffer_bytes, credentials=credentials)
        return await self._exec_stream(body, timeout)

    async def processes(self) -> builtins.list[ProcessInfo]:
        j = (await self._t.request("GET", self._p("/processes"))).json()
        return [ProcessInfo.from_json(p) for p in j.get("processes", [])]

    def process(self, pid: int) -> "Process":
        return Process(self, int(pid))

    # ---- files -------------------------------------------------------------------------

    async def upload(self, path: str, data: C.UploadData, *,
                     mode: Union[int, str, None] = None) -> None:
        """Writes a file atomically (see :meth:`brig.Sandbox.upload`); files
        and paths are read in chunks in the default executor."""
        src = await asyncio.get_running_loop().run_in_executor(None, C.make_source, data)
        try:
            await self._t.request("PUT", self._p("/files"),
                                  query={"path": path, "mode": C.mode_text(mode)}, body=src)
        finally:
            src.close()

    async def upload_file(self, path: str, local_path: C.LocalPath, *,
                          mode: Union[int, str, None] = None) -> None:
        import pathlib

        lp = local_path if isinstance(local_path, os.PathLike) else pathlib.Path(local_path)
        await self.upload(path, lp, mode=mode)

    @overload
    async def download(self, path: str) -> bytes:
        ...

    @overload
    async def download(self, path: str, dest: Union[C.LocalPath, Any]) -> int:
        ...

    async def download(self, path: str, dest: Any = None) -> Union[bytes, int]:
        """Reads a file: ``bytes`` without ``dest``; with ``dest`` (local path
        or binary file object) streams it there and returns the size."""
        resp = await self._t.stream("GET", self._p("/files"), query={"path": path})
        loop = asyncio.get_running_loop()
        async with resp:
            if dest is None:
                return await resp.read()
            if hasattr(dest, "write"):
                return await _copy(resp, dest)
            target = os.fspath(dest)
            d = os.path.dirname(os.path.abspath(target))
            fd, tmp = tempfile.mkstemp(prefix=".brig-", dir=d)
            try:
                with os.fdopen(fd, "wb") as f:
                    n = await _copy(resp, f)
                os.chmod(tmp, C.local_file_mode(resp.headers))
                await loop.run_in_executor(None, os.replace, tmp, target)
            except BaseException:
                os.unlink(tmp)
                raise
            return n

    async def download_file(self, path: str, local_path: C.LocalPath) -> int:
        return await self.download(path, local_path)

    async def read_text(self, path: str, encoding: str = "utf-8", errors: str = "strict") -> str:
        return (await self.download(path)).decode(encoding, errors)

    async def ls(self, path: str = "/root") -> builtins.list[FileEntry]:
        j = (await self._t.request("GET", self._p("/files"),
                                   query={"path": path, "list": 1})).json()
        base = path.rstrip("/")
        return [FileEntry.from_json(e, f"{base}/{e.get('name', '')}")
                for e in j.get("entries", [])]

    async def stat(self, path: str) -> FileEntry:
        j = (await self._t.request("GET", self._p("/files"),
                                   query={"path": path, "stat": 1})).json()
        return FileEntry.from_json(C.check_json_object(j, "stat"), path)

    async def exists(self, path: str) -> bool:
        try:
            await self.stat(path)
            return True
        except NotFound:
            return False

    async def mkdir(self, path: str, *, mode: Union[int, str, None] = None,
                    parents: bool = False, exist_ok: bool = False) -> None:
        body: dict[str, Any] = {"path": path}
        if mode is not None:
            body["mode"] = C.mode_text(mode)
        if parents:
            body["parents"] = True
        try:
            await self._t.request("POST", self._p("/files/mkdir"), json=body)
        except BrigError as e:
            if not (exist_ok and e.status == 409 and (await self.stat(path)).is_dir):
                raise

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        await self._t.request("DELETE", self._p("/files"),
                              query={"path": path, "recursive": 1 if recursive else None},
                              timeout=330)

    async def move(self, src: str, dst: str) -> None:
        await self._t.request("POST", self._p("/files/move"), json={"from": src, "to": dst})

    async def upload_dir(self, local_dir: C.LocalPath, path: str) -> None:
        """Copies a local directory's contents into ``path`` (a tar stream
        made chunk by chunk in the executor)."""
        src = C.tar_source(local_dir)
        try:
            await self._t.request("PUT", self._p("/files/tar"), query={"path": path}, body=src,
                                  headers={"Content-Type": "application/x-tar"},
                                  timeout=C.TAR_TIMEOUT)
        finally:
            src.close()

    async def download_dir(self, path: str, local_dir: C.LocalPath) -> int:
        """Copies the sandbox directory ``path`` into ``local_dir``. The tar
        stream is spooled to a temporary file, then extracted in the executor."""
        loop = asyncio.get_running_loop()
        resp = await self._t.stream("GET", self._p("/files/tar"), query={"path": path},
                                    timeout=C.TAR_TIMEOUT)
        with tempfile.TemporaryFile() as spool:
            async with resp:
                await _copy(resp, spool)
            spool.seek(0)
            return await loop.run_in_executor(None, C.extract_tar, spool, local_dir)


async def _copy(resp: AsyncResponse, f: Any) -> int:
    loop = asyncio.get_running_loop()
    n = 0
    while True:
        c = await resp.read_chunk(C.CHUNK_SIZE)
        if not c:
            return n
        await loop.run_in_executor(None, f.write, c)
        n += len(c)


class Volume:
    """Async twin of :class:`brig.Volume`: ``await Volume.create("data", 1024)``,
    ``Sandbox.create(volumes=[vol.mount("/data")])``, ``await vol.delete()``."""

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
        return f"brig.aio.Volume({self.name!r}, id={self.id!r}, size_mib={self.info.size_mib})"

    @classmethod
    async def create(cls, name: str, size_mib: int, *, project: Optional[str] = None,
                     url: Optional[str] = None, api_key: Optional[str] = None,
                     client: Optional[Client] = None) -> "Volume":
        cl, owns = _client(client, url, api_key)
        try:
            v = await cl.create_volume(name, size_mib, project=project)
        except BaseException:
            if owns:
                await cl.aclose()
            raise
        v._owns_client = owns
        return v

    @classmethod
    async def get(cls, name: str, *, project: Optional[str] = None,
                  url: Optional[str] = None, api_key: Optional[str] = None,
                  client: Optional[Client] = None) -> "Volume":
        cl, owns = _client(client, url, api_key)
        try:
            v = await cl.volume(name, project=project)
        except BaseException:
            if owns:
                await cl.aclose()
            raise
        v._owns_client = owns
        return v

    @classmethod
    async def list(cls, *, project: Optional[str] = None, url: Optional[str] = None,
                   api_key: Optional[str] = None,
                   client: Optional[Client] = None) -> builtins.list["Volume"]:
        cl, owns = _client(client, url, api_key)
        try:
            return await cl.volumes(project=project)
        finally:
            if owns:
                await cl.aclose()

    def mount(self, path: str, *, read_only: bool = False) -> dict[str, Any]:
        """An entry of :meth:`Sandbox.create`'s ``volumes``."""
        return {"name": self.name, "path": path, "read_only": read_only}

    async def refresh(self) -> VolumeInfo:
        q = {"project": self.info.project_id} if self.info.project_id else None
        r = await self.client.transport.request("GET", f"/v1/volumes/{C.q(self.id)}", query=q)
        self.info = VolumeInfo.from_json(r.json())
        return self.info

    async def delete(self, *, missing_ok: bool = False) -> None:
        try:
            await self.client.delete_volume(self.id, project=self.info.project_id,
                                            missing_ok=missing_ok)
        finally:
            if self._owns_client:
                await self.client.aclose()


class ExecStream:
    """``async for`` over a streamed exec's :class:`OutputEvent` s; then
    ``result``. ``await stream.aclose()`` (or ``async with``) stops early,
    which kills the command."""

    def __init__(self, resp: AsyncResponse) -> None:
        self._resp = resp
        self._lines = resp.json_lines()
        self._buffered: Optional[builtins.list[dict[str, Any]]] = None
        self._col = C.ExecCollector()
        self.pid: Optional[int] = None

    def __aiter__(self) -> AsyncIterator[OutputEvent]:
        return self

    async def __anext__(self) -> OutputEvent:
        if self._col.done:
            await self.aclose()
            raise StopAsyncIteration
        if self._buffered is None and not C.is_ndjson(self._resp.headers):
            # a brigd that answers a streamed exec in one piece
            self._buffered = C.events_of_buffered(await self._resp.read())
        try:
            if self._buffered is not None:
                if not self._buffered:
                    raise StopAsyncIteration
                obj = self._buffered.pop(0)
            else:
                obj = await self._lines.__anext__()
        except StopAsyncIteration:
            await self.aclose()
            raise ProtocolError("the stream ended before the command's exit event") from None
        ev = C.event_or_raise(obj)
        self._col.add(ev)
        if ev.type == "start":
            self.pid = ev.pid
        return ev

    @property
    def result(self) -> ExecResult:
        return self._col.result()

    async def wait(self) -> ExecResult:
        async for _ in self:
            pass
        return self.result

    async def aclose(self) -> None:
        await self._lines.aclose()
        await self._resp.aclose()

    async def __aenter__(self) -> "ExecStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class OutputStream:
    """``async for`` over a process's :class:`OutputEvent` s."""

    def __init__(self, resp: AsyncResponse) -> None:
        self._resp = resp
        self._lines = resp.json_lines()
        self._done = False

    def __aiter__(self) -> AsyncIterator[OutputEvent]:
        return self

    async def __anext__(self) -> OutputEvent:
        if self._done:
            raise StopAsyncIteration
        try:
            obj = await self._lines.__anext__()
        except StopAsyncIteration:
            await self.aclose()
            raise
        ev = C.event_or_raise(obj)
        if ev.type in ("exit", "end"):
            self._done = True
        return ev

    async def aclose(self) -> None:
        self._done = True
        await self._lines.aclose()
        await self._resp.aclose()

    async def __aenter__(self) -> "OutputStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class Process:
    """Async twin of :class:`brig.Process`."""

    def __init__(self, sandbox: Sandbox, pid: int, info: Optional[ProcessInfo] = None) -> None:
        self.sandbox = sandbox
        self.pid = pid
        self.last_info = info

    def __repr__(self) -> str:
        return f"brig.aio.Process(pid={self.pid}, sandbox={self.sandbox.id!r})"

    def _p(self, suffix: str = "") -> str:
        return self.sandbox._p(f"/processes/{C.q(str(self.pid))}{suffix}")

    @property
    def _t(self) -> AsyncTransport:
        return self.sandbox._t

    async def info(self) -> ProcessInfo:
        self.last_info = ProcessInfo.from_json((await self._t.request("GET", self._p())).json())
        return self.last_info

    async def wait(self, timeout: Optional[float] = None) -> ProcessInfo:
        """Waits for the exit; :class:`brig.Timeout` if it still runs after ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = C.WAIT_SLICE if deadline is None else max(0.0, deadline - time.monotonic())
            s = min(left, C.WAIT_SLICE)
            j = (await self._t.request("POST", self._p("/wait"), json={"timeout": max(s, 0.001)},
                                       timeout=s + C.TIMEOUT_MARGIN)).json()
            info = ProcessInfo.from_json(j)
            self.last_info = info
            if not info.running:
                return info
            if deadline is not None and time.monotonic() >= deadline:
                raise Timeout(f"process {self.pid} still runs after {timeout}s")

    async def send_signal(self, signal: C.Signal) -> None:
        await self._t.request("POST", self._p("/signal"), json={"signal": C.signal_value(signal)})

    async def kill(self, signal: C.Signal = "SIGKILL") -> None:
        await self.send_signal(signal)

    async def terminate(self) -> None:
        await self.send_signal("SIGTERM")

    async def send_stdin(self, data: C.UploadData) -> int:
        src = await asyncio.get_running_loop().run_in_executor(None, C.make_source, data)
        try:
            j = (await self._t.request("POST", self._p("/stdin"), body=src)).json()
        finally:
            src.close()
        return int(j.get("bytes", 0))

    async def close_stdin(self) -> None:
        await self._t.request("POST", self._p("/stdin/close"))

    async def resize(self, cols: int, rows: int) -> None:
        await self._t.request("POST", self._p("/resize"), json={"cols": cols, "rows": rows})

    async def output(self, follow: bool = True) -> OutputStream:
        """The process's output events (see :meth:`brig.Process.output`)."""
        resp = await self._t.stream("GET", self._p("/output"),
                                    query={"follow": None if follow else 0}, timeout=None)
        return OutputStream(resp)

    async def collect(self, on_stdout: Optional[AsyncOutputCallback] = None,
                      on_stderr: Optional[AsyncOutputCallback] = None) -> ExecResult:
        """Follows the output until the exit; returns it as an :class:`ExecResult`."""
        col = C.ExecCollector()
        async with await self.output(follow=True) as out:
            async for ev in out:
                col.add(ev)
                if ev.type == "stdout":
                    await _call(on_stdout, ev.data)
                elif ev.type == "stderr":
                    await _call(on_stderr, ev.data)
        if not col.done:
            info = await self.wait()
            col.exit = {"exit_code": info.exit_code, "signal": info.signal,
                        "timed_out": info.timed_out, "reason": info.reason}
        col.pid = self.pid
        return col.result()


async def _follow_build(cl: Client, location: str,
                        on_log: Callable[[str], Union[Any, Awaitable[Any]]],
                        timeout: Optional[float]) -> dict[str, Any]:
    """Follows a build started with ``?wait=0`` (its NDJSON log), handing each
    log piece to ``on_log``; the template, or the build's error raised."""
    end = None
    resp = await cl.transport.stream("GET", location, query={"follow": "1"}, timeout=timeout)
    async with resp:
        async for ev in resp.json_lines():
            if ev.get("type") == "log":
                r = on_log(ev.get("data", ""))
                if inspect.isawaitable(r):
                    await r
            elif ev.get("type") == "end":
                end = ev
    return build_outcome(end)


class Template(TemplateInfo):
    """The asyncio twin of :class:`brig.Template`; every call is awaited."""

    _name = "brig.aio.Template"

    @classmethod
    async def build(cls, name: str, *, tag: Optional[str] = None, from_: str = "base",
                    apt: Sequence[str] = (), pip: Sequence[str] = (), npm: Sequence[str] = (),
                    files: Optional[Mapping[str, FileSpec]] = None, run: Sequence[str] = (),
                    env: Optional[Mapping[str, str]] = None, workdir: Optional[str] = None,
                    start: Optional[str] = None, ready: Optional[Mapping[str, Any]] = None,
                    timeout: Optional[float] = None, url: Optional[str] = None,
                    api_key: Optional[str] = None, client: Optional[Client] = None,
                    on_log: Optional[Callable[[str], Union[Any, Awaitable[Any]]]] = None
                    ) -> "Template":
        """See :meth:`brig.Template.build`; ``on_log`` may be a function or a
        coroutine function, handed the build's log piece by piece (whole lines)."""
        spec = template_spec(name, tag=tag, from_=from_, apt=apt, pip=pip, npm=npm, files=files,
                             run=run, env=env, workdir=workdir, start=start, ready=ready)
        cl, owns = _client(client, url, api_key)
        try:
            query = {"wait": "0"} if on_log is not None else None
            r = await cl.transport.request("POST", "/v1/templates", query=query, json=spec,
                                           timeout=timeout)
            j = r.json()
            if on_log is not None and r.status == 202:
                j = await _follow_build(cl, r.headers["location"], on_log, timeout)
        except BaseException:
            if owns:
                await cl.aclose()
            raise
        return cls(cl, j, owns_client=owns)

    @classmethod
    async def get(cls, ref: str, *, url: Optional[str] = None, api_key: Optional[str] = None,
                  client: Optional[Client] = None) -> "Template":
        cl, owns = _client(client, url, api_key)
        try:
            r = await cl.transport.request("GET", f"/v1/templates/{quoted(ref)}")
        except BaseException:
            if owns:
                await cl.aclose()
            raise
        return cls(cl, r.json(), owns_client=owns)

    async def log(self) -> builtins.list[dict[str, Any]]:
        r = await self.client.transport.request("GET", f"/v1/templates/{quoted(self.ref)}/log")
        return list(r.json().get("steps", []))

    async def delete(self, *, missing_ok: bool = False) -> None:
        try:
            await self.client.transport.request("DELETE", f"/v1/templates/{quoted(self.ref)}")
        except NotFound:
            if not missing_ok:
                raise
        finally:
            if self._owns_client:
                await self.client.aclose()
                self._owns_client = False
