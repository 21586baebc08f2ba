"""The synchronous transport: http.client with a small pool of keep-alive
connections per client.

Thread safety: a request takes an idle connection from the pool (or opens a
new one) and gives it back once its answer is read whole, so one client may
be used from many threads at once; each concurrent request has a connection of
its own.  At most ``max_idle`` idle connections are kept.  An idle connection
that brigd has closed (or that idled longer than ``IDLE_MAX_S``) is dropped
before use; a request on a reused connection that fails before any answer is
sent again once when its body can be replayed."""

from __future__ import annotations

import http.client
import json as _json
import select
import socket
import ssl
import threading
import time
from typing import Any, Generator, Mapping, Optional

from ._common import USER_AGENT, LineDecoder, Source, build_path, split_url
from ._errors import AuthError, BrigError, ConnectionError, ProtocolError, Timeout, \
    error_from_response

IDLE_MAX_S = 50.0
_RESET = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


def _fresh_is_dead(conn: http.client.HTTPConnection) -> bool:
    """An idle connection brigd closed shows as readable (EOF) before use."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        r, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(r)


class StreamResponse:
    """A streamed answer (NDJSON, a download): read it, then close it.  The
    connection returns to the pool only when the body was read to its end."""

    def __init__(self, transport: "Transport", conn: http.client.HTTPConnection,
                 resp: http.client.HTTPResponse) -> None:
        self._t = transport
        self._conn: Optional[http.client.HTTPConnection] = conn
        self.resp = resp
        self.status = resp.status
        self.headers = {k.lower(): v for k, v in resp.getheaders()}
        self._eof = False

    def read_chunk(self, size: int = 65536) -> bytes:
        """Some bytes as soon as they arrive; b"" at the end."""
        if self._eof:
            return b""
        try:
            data = self.resp.read1(size)
        except (socket.timeout, TimeoutError) as e:
            self.close()
            raise Timeout(f"no data from brigd in time: {e}") from None
        except (http.client.IncompleteRead, http.client.HTTPException, OSError) as e:
            self.close()
            raise ConnectionError(f"the connection to brigd broke mid-answer: {e!r}") from None
        if not data:
            self._eof = True
            self.close()
        return data

    def read(self, size: int = -1) -> bytes:
        """File-object style read (for tarfile): ``size`` bytes unless at the end."""
        if size is None or size < 0:
            parts: list[bytes] = []
            while True:
                c = self.read_chunk()
                if not c:
                    return b"".join(parts)
                parts.append(c)
        out = bytearray()
        while len(out) < size:
            c = self.read_chunk(size - len(out))
            if not c:
                break
            out += c
        return bytes(out)

    def chunks(self) -> Generator[bytes, None, None]:
        try:
            while True:
                c = self.read_chunk()
                if not c:
                    return
                yield c
        finally:
            self.close()

    def json_lines(self) -> Generator[dict[str, Any], None, None]:
        dec = LineDecoder()
        try:
            while True:
                c = self.read_chunk()
                if not c:
                    yield from dec.finish()
                    return
                yield from dec.feed(c)
        finally:
            self.close()

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._eof and not self.resp.will_close:
            self.resp.close()  # marks the answer done for http.client
            self._t._release(conn)
        else:
            conn.close()

    def __enter__(self) -> "StreamResponse":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Response:
    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        from ._common import parse_json

        return parse_json(self.body)


class Transport:
    """HTTP/1.1 to one brigd with a pool of keep-alive connections."""

    def __init__(self, url: str, api_key: Optional[str], timeout: float, max_idle: int = 8,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.url = url
        self.api_key = api_key
        self.timeout = timeout
        self.max_idle = max_idle
        self.scheme, self.host, self.port, self.prefix = split_url(url)
        self._ssl = ssl_context
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []
        self._lock = threading.Lock()
        self._closed = False

    # -- pool --------------------------------------------------------------------------

    def _new_conn(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                               context=self._ssl, blocksize=65536)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout,
                                          blocksize=65536)

    def _acquire(self, fresh: bool = False) -> tuple[http.client.HTTPConnection, bool]:
        now = time.monotonic()
        while not fresh:
            with self._lock:
                if not self._idle:
                    break
                conn, since = self._idle.pop()
            if now - since > IDLE_MAX_S or _fresh_is_dead(conn):
                conn.close()
                continue
            return conn, True
        return self._new_conn(), False

    def _release(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.max_idle and conn.sock is not None:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def close(self) -> None:
        """Closes the idle connections (streams still open close on their own)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    # -- requests ------------------------------------------------------------------------

    def _headers(self, extra: Optional[Mapping[str, str]], auth: bool) -> dict[str, str]:
        h = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        if auth:
            if not self.api_key:
                raise AuthError("no API key: set BRIG_API_KEY or pass api_key=", status=None)
            h["Authorization"] = f"Bearer {self.api_key}"
        if extra:
            h.update(extra)
        return h

    def _send(self, method: str, path: str, *, query: Optional[Mapping[str, Any]],
              json: Any, body: Optional[Source], headers: Optional[Mapping[str, str]],
              timeout: Any, auth: bool) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        h = self._headers(headers, auth)
        payload: Any = None
        replayable = True
        if json is not None:
            payload = _json.dumps(json, separators=(",", ":")).encode()
            h["Content-Type"] = "application/json"
        elif body is not None:
            if body.data is not None:
                payload = body.data
            else:
                payload = body.chunks()
                replayable = False
                if body.length is not None:
                    h["Content-Length"] = str(body.length)
            h.setdefault("Content-Type", "application/octet-stream")
        elif method in ("POST", "PUT"):
            payload = b""
        url = build_path(self.prefix, path, query)
        t = self.timeout if timeout is ... else timeout
        try:
            return self._attempts(method, path, url, payload, h, t, replayable)
        finally:
            if not replayable:
                payload.close()  # the source's file, if the send stopped half-way

    def _attempts(self, method: str, path: str, url: str, payload: Any, h: dict[str, str],
                  t: Optional[float], replayable: bool
                  ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        for attempt in (0, 1):
            # a body that cannot be sent twice goes on a new connection
            conn, reused = self._acquire(fresh=not replayable)
            conn.timeout = t
            if conn.sock is not None:
                conn.sock.settimeout(t)
            try:
                try:
                    conn.request(method, url, body=payload, headers=h)
                except _RESET:
                    # brigd may have refused before reading the body and closed:
                    # its answer can still be read.
                    pass
                resp = conn.getresponse()
                return conn, resp
            except (socket.timeout, TimeoutError) as e:
                conn.close()
                raise Timeout(f"{method} {path}: no answer from brigd within {t}s ({e})") from None
            except (http.client.RemoteDisconnected, *_RESET) as e:
                conn.close()
                if reused and replayable and attempt == 0:
                    continue
                raise ConnectionError(f"{method} {path}: brigd closed the connection ({e!r})") \
                    from None
            except ssl.SSLError as e:
                conn.close()
                raise ConnectionError(f"TLS to {self.url}: {e}") from None
            except OSError as e:
                conn.close()
                raise ConnectionError(f"cannot reach brigd at {self.url}: {e}") from None
            except http.client.HTTPException as e:
                conn.close()
                raise ProtocolError(f"{method} {path}: bad HTTP answer: {e!r}") from None
            except BaseException:
                conn.close()
                raise
        raise AssertionError("unreachable")

    def _read_all(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse,
                  what: str) -> bytes:
        try:
            data = resp.read()
        except (socket.timeout, TimeoutError) as e:
            conn.close()
            raise Timeout(f"{what}: brigd's answer stalled ({e})") from None
        except (http.client.HTTPException, OSError) as e:
            conn.close()
            raise ConnectionError(f"{what}: the connection broke mid-answer ({e!r})") from None
        except BaseException:
            conn.close()
            raise
        if resp.will_close:
            conn.close()
        else:
            self._release(conn)
        return data

    def request(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
                json: Any = None, body: Optional[Source] = None,
                headers: Optional[Mapping[str, str]] = None, timeout: Any = ...,
                auth: bool = True) -> Response:
        """One call; a non-2xx answer raises its :class:`BrigError`."""
        conn, resp = self._send(method, path, query=query, json=json, body=body,
                                headers=headers, timeout=timeout, auth=auth)
        data = self._read_all(conn, resp, f"{method} {path}")
        if resp.status >= 400:
            raise error_from_response(resp.status, data, resp.reason)
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)

    def stream(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
               json: Any = None, body: Optional[Source] = None,
               headers: Optional[Mapping[str, str]] = None, timeout: Any = ...) -> StreamResponse:
        """A call whose answer is read as it comes (errors before it are raised)."""
        conn, resp = self._send(method, path, query=query, json=json, body=body,
                                headers=headers, timeout=timeout, auth=True)
        if resp.status >= 400:
            data = self._read_all(conn, resp, f"{method} {path}")
            raise error_from_response(resp.status, data, resp.reason)
        return StreamResponse(self, conn, resp)


__all__ = ["Transport", "Response", "StreamResponse", "BrigError"]
