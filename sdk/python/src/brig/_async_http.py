"""A small HTTP/1.1 client on asyncio streams, for :mod:`brig.aio`.

It speaks exactly what brigd needs: requests with a JSON, bytes or streamed
(``Content-Length`` or chunked) body; answers with ``Content-Length``,
chunked, or read-until-close bodies; keep-alive with a pool of idle
connections.  Each request in flight has a connection of its own, so any
number of requests run concurrently in one event loop.  A request that is
cancelled closes its connection (for a streamed exec, brigd then kills the
command)."""

from __future__ import annotations

import asyncio
import json as _json
import ssl
import time
from typing import Any, AsyncGenerator, Mapping, Optional, cast

from ._common import USER_AGENT, LineDecoder, Source, build_path, parse_json, split_url
from ._http import Response
from ._errors import AuthError, ConnectionError, ProtocolError, Timeout, error_from_response

IDLE_MAX_S = 50.0
MAX_HEADER_BYTES = 64 * 1024
#: Bodies larger than this (and every streamed body) are sent after
#: ``Expect: 100-continue``: brigd can refuse (404, 413 …) before any of it.
EXPECT_MIN_BYTES = 64 * 1024
#: How long to wait for ``100 Continue`` before sending the body anyway.
EXPECT_WAIT_S = 3.0
_RESET = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.since = time.monotonic()

    def dead(self) -> bool:
        return (self.writer.is_closing() or self.reader.at_eof()
                or self.reader.exception() is not None
                or bool(len(getattr(self.reader, "_buffer", b""))))

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:  # noqa: BLE001 - a broken transport is closed anyway
            pass


async def _with_timeout(aw: Any, timeout: Optional[float], what: str) -> Any:
    try:
        return await asyncio.wait_for(aw, timeout)
    except asyncio.TimeoutError:
        raise Timeout(f"{what}: no answer from brigd within {timeout}s") from None


class AsyncResponse:
    """An answer whose body is read on demand.  Read it to the end (or call
    :meth:`aclose`) to give the connection back."""

    def __init__(self, transport: "AsyncTransport", conn: _Conn, status: int, reason: str,
                 headers: dict[str, str], keep_alive: bool, no_body: bool,
                 timeout: Optional[float]) -> None:
        self._t = transport
        self._conn: Optional[_Conn] = conn
        self.status = status
        self.reason = reason
        self.headers = headers
        self._keep = keep_alive
        self._timeout = timeout
        te = headers.get("transfer-encoding", "").lower()
        self._chunked = "chunked" in te
        cl = headers.get("content-length")
        self._left: Optional[int] = None
        if not self._chunked and cl is not None:
            try:
                self._left = int(cl)
            except ValueError:
                raise ProtocolError(f"bad Content-Length {cl!r}") from None
        elif not self._chunked:
            self._keep = False  # body runs until the connection closes
        self._chunk_left = 0
        self._eof = False
        if no_body or self._left == 0:
            self._finish()  # nothing to read: the connection is free again

    async def _read(self, coro: Any) -> Any:
        try:
            return await _with_timeout(coro, self._timeout, "reading brigd's answer")
        except (asyncio.IncompleteReadError, *_RESET, OSError) as e:
            if isinstance(e, Timeout):
                self._close()
                raise
            self._close()
            raise ConnectionError(f"the connection to brigd broke mid-answer: {e!r}") from None
        except BaseException:
            self._close()
            raise

    async def read_chunk(self, size: int = 65536) -> bytes:
        """Some bytes as soon as they arrive; b"" at the end."""
        if self._eof or self._conn is None:
            return b""
        r = self._conn.reader
        if self._chunked:
            if self._chunk_left == 0:
                line = await self._read(r.readuntil(b"\r\n"))
                try:
                    n = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    self._close()
                    raise ProtocolError(f"bad chunk size line {line[:40]!r}") from None
                if n == 0:
                    while True:  # trailers, then the empty line
                        t = await self._read(r.readuntil(b"\r\n"))
                        if t == b"\r\n":
                            break
                    self._finish()
                    return b""
                self._chunk_left = n
            data = cast(bytes, await self._read(r.read(min(size, self._chunk_left))))
            if not data:
                self._close()
                raise ConnectionError("the connection to brigd broke mid-answer")
            self._chunk_left -= len(data)
            if self._chunk_left == 0:
                await self._read(r.readexactly(2))
            return data
        if self._left is not None:
            data = cast(bytes, await self._read(r.read(min(size, self._left))))
            if not data:
                self._close()
                raise ConnectionError("the connection to brigd broke mid-answer")
            self._left -= len(data)
            if self._left == 0:
                self._finish()
            return data
        data = cast(bytes, await self._read(r.read(size)))
        if not data:
            self._finish()
        return data

    async def read(self, size: int = -1) -> bytes:
        parts = bytearray()
        while size < 0 or len(parts) < size:
            c = await self.read_chunk(65536 if size < 0 else min(65536, size - len(parts)))
            if not c:
                break
            parts += c
        return bytes(parts)

    async def json(self) -> Any:
        return parse_json(await self.read())

    async def chunks(self) -> AsyncGenerator[bytes, None]:
        try:
            while True:
                c = await self.read_chunk()
                if not c:
                    return
                yield c
        finally:
            await self.aclose()

    async def json_lines(self) -> AsyncGenerator[dict[str, Any], None]:
        dec = LineDecoder()
        try:
            while True:
                c = await self.read_chunk()
                if not c:
                    for obj in dec.finish():
                        yield obj
                    return
                for obj in dec.feed(c):
                    yield obj
        finally:
            await self.aclose()

    def _finish(self) -> None:
        self._eof = True
        conn, self._conn = self._conn, None
        if conn is not None:
            if self._keep:
                self._t._release(conn)
            else:
                conn.close()

    def _close(self) -> None:
        self._eof = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def aclose(self) -> None:
        """Stops reading: the connection is closed unless the body was read whole."""
        self._close()

    async def __aenter__(self) -> "AsyncResponse":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class AsyncTransport:
    """HTTP/1.1 to one brigd on asyncio streams, with a pool of idle keep-alive
    connections.  Use it from one event loop."""

    def __init__(self, url: str, api_key: Optional[str], timeout: float, max_idle: int = 8,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.max_idle = max_idle
        self.scheme, self.host, self.port, self.prefix = split_url(url)
        self._ssl: Any = ssl_context if ssl_context is not None else (self.scheme == "https")
        self._idle: list[_Conn] = []
        self._closed = False

    async def _connect(self, timeout: Optional[float]) -> _Conn:
        try:
            r, w = await _with_timeout(
                asyncio.open_connection(self.host, self.port, ssl=self._ssl or None,
                                        limit=MAX_HEADER_BYTES * 16),
                timeout, f"connecting to {self.url}")
        except Timeout:
            raise
        except (OSError, ssl.SSLError) as e:
            raise ConnectionError(f"cannot reach brigd at {self.url}: {e}") from None
        return _Conn(r, w)

    async def _acquire(self, timeout: Optional[float], fresh: bool = False
                       ) -> tuple[_Conn, bool]:
        now = time.monotonic()
        while self._idle and not fresh:
            c = self._idle.pop()
            if now - c.since > IDLE_MAX_S or c.dead():
                c.close()
                continue
            return c, True
        return await self._connect(timeout), False

    def _release(self, conn: _Conn) -> None:
        if self._closed or len(self._idle) >= self.max_idle or conn.dead():
            conn.close()
            return
        conn.since = time.monotonic()
        self._idle.append(conn)

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()

    def reopen(self) -> None:
        self._closed = False

    def _headers(self, extra: Optional[Mapping[str, str]], auth: bool) -> dict[str, str]:
        h = {"Host": f"{self.host}:{self.port}", "User-Agent": USER_AGENT,
             "Accept-Encoding": "identity"}
        if auth:
            if not self.api_key:
                raise AuthError("no API key: set BRIG_API_KEY or pass api_key=", status=None)
            h["Authorization"] = f"Bearer {self.api_key}"
        if extra:
            h.update(extra)
        return h

    async def _write_body(self, w: asyncio.StreamWriter, body: Source, chunked: bool) -> None:
        loop = asyncio.get_running_loop()
        while True:
            # files are read in a thread: the event loop never blocks on disk
            chunk = await loop.run_in_executor(None, body.read_chunk)
            if not chunk:
                break
            if chunked:
                w.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            else:
                w.write(chunk)
            await w.drain()
        if chunked:
            w.write(b"0\r\n\r\n")
        await w.drain()

    @staticmethod
    def _parse_head(head: bytes) -> tuple[int, str, dict[str, str], bool]:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ProtocolError(f"not an HTTP answer: {lines[0][:80]!r}")
        try:
            status = int(parts[1])
        except ValueError:
            raise ProtocolError(f"bad status line: {lines[0][:80]!r}") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            k, _, v = line.partition(":")
            k = k.strip().lower()
            v = v.strip()
            headers[k] = f"{headers[k]}, {v}" if k in headers else v
        keep = parts[0] == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        return status, (parts[2] if len(parts) > 2 else ""), headers, keep

    @staticmethod
    async def _head_bytes(r: asyncio.StreamReader) -> bytes:
        try:
            return await r.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise ProtocolError("brigd's answer headers are too long") from None

    async def _read_head(self, conn: _Conn) -> tuple[int, str, dict[str, str], bool]:
        while True:
            answer = self._parse_head(await self._head_bytes(conn.reader))
            if not 100 <= answer[0] < 200:
                return answer  # (100 Continue and friends are skipped)

    @staticmethod
    def _salvage(conn: _Conn) -> None:
        """The server closed while we were sending (it answered early): let
        the answer already received be read despite the reset."""
        r = conn.reader
        if r.exception() is not None and len(getattr(r, "_buffer", b"")):
            r._exception = None  # type: ignore[attr-defined]
            r.feed_eof()

    async def _once(self, conn: _Conn, method: str, url: str, h: dict[str, str],
                    payload: Optional[bytes], body: Optional[Source], timeout: Optional[float]
                    ) -> tuple[int, str, dict[str, str], bool]:
        w = conn.writer
        chunked = False
        if payload is not None:
            h["Content-Length"] = str(len(payload))
        elif body is not None:
            if body.length is not None:
                h["Content-Length"] = str(body.length)
            else:
                h["Transfer-Encoding"] = "chunked"
                chunked = True
        expect = body is not None or (payload is not None and len(payload) > EXPECT_MIN_BYTES)
        if expect:
            h["Expect"] = "100-continue"
        head = f"{method} {url} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
        try:
            if expect:
                w.write(head.encode("latin-1") + b"\r\n")
                await w.drain()
                try:
                    first = await asyncio.wait_for(self._head_bytes(conn.reader), EXPECT_WAIT_S)
                except asyncio.TimeoutError:
                    first = None  # no 100 Continue: send the body anyway (RFC 9110 10.1.1)
                if first is not None:
                    answer = self._parse_head(first)
                    if answer[0] >= 200:  # refused before the body: never sent
                        return answer[0], answer[1], answer[2], False
            if payload:
                w.write(payload if expect else head.encode("latin-1") + b"\r\n" + payload)
            elif not expect:
                w.write(head.encode("latin-1") + b"\r\n")
            if body is not None:
                await self._write_body(w, body, chunked)
            else:
                await w.drain()
        except _RESET:
            self._salvage(conn)  # refused before the body was read: the answer may be there
        answer = await _with_timeout(self._read_head(conn), timeout, f"{method} {url}")
        return answer

    async def send(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
                   json: Any = None, body: Optional[Source] = None,
                   headers: Optional[Mapping[str, str]] = None, timeout: Any = ...,
                   auth: bool = True) -> AsyncResponse:
        """Sends a request and reads the answer's head; the body is left to
        the caller (see :meth:`request` for an answer read whole)."""
        h = self._headers(headers, auth)
        payload: Optional[bytes] = None
        src: Optional[Source] = None
        if json is not None:
            payload = _json.dumps(json, separators=(",", ":")).encode()
            h["Content-Type"] = "application/json"
        elif body is not None:
            h.setdefault("Content-Type", "application/octet-stream")
            if body.data is not None:
                payload = body.data
            else:
                src = body
        elif method in ("POST", "PUT"):
            payload = b""
        url = build_path(self.prefix, path, query)
        t = self.timeout if timeout is ... else timeout
        for attempt in (0, 1):
            # a body that cannot be sent twice goes on a new connection
            conn, reused = await self._acquire(t, fresh=src is not None)
            try:
                status, reason, rh, keep = await self._once(conn, method, url, dict(h), payload,
                                                            src, t)
            except Timeout:
                conn.close()
                raise
            except (asyncio.IncompleteReadError, *_RESET) as e:
                conn.close()
                if reused and src is None and attempt == 0:
                    continue
                raise ConnectionError(f"{method} {path}: brigd closed the connection ({e!r})") \
                    from None
            except OSError as e:
                conn.close()
                raise ConnectionError(f"{method} {path}: {e}") from None
            except BaseException:
                conn.close()
                raise
            return AsyncResponse(self, conn, status, reason, rh, keep,
                                 method == "HEAD" or status in (204, 304), t)
        raise AssertionError("unreachable")

    async def request(self, method: str, path: str, **kw: Any) -> Response:
        """One call, its answer read whole; a non-2xx answer raises its
        :class:`BrigError`."""
        resp = await self.send(method, path, **kw)
        data = await resp.read()
        if resp.status >= 400:
            raise error_from_response(resp.status, data, resp.reason)
        return Response(resp.status, resp.headers, data)

    async def stream(self, method: str, path: str, **kw: Any) -> AsyncResponse:
        """A call whose answer is read as it comes (errors before it are raised)."""
        resp = await self.send(method, path, **kw)
        if resp.status >= 400:
            data = await resp.read()
            raise error_from_response(resp.status, data, resp.reason)
        return resp
