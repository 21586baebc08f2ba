"""A scripted HTTP/1.1 server for tests that need answers brigd cannot be
made to give (402, 429, 5xx, garbage, stalls) and to see exactly what the
SDK sends.  Standard library only."""

from __future__ import annotations

import http.server
import json
import threading
import time
from typing import Callable, Optional


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):  # quiet
        pass

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                if n == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(n)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _handle(self):
        srv: FakeServer = self.server.fake  # type: ignore[attr-defined]
        body = self._body()
        srv.requests.append({"method": self.command, "path": self.path,
                             "headers": dict(self.headers), "body": body,
                             "client": self.client_address})
        srv.route(self, body)

    do_GET = do_POST = do_PUT = do_DELETE = _handle

    # helpers for routes
    def send(self, status: int, body: bytes = b"", ctype: str = "application/json",
             headers: Optional[dict] = None, close: bool = False):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, status: int, obj) -> None:
        self.send(status, json.dumps(obj).encode())

    def send_error_json(self, status: int, code: str, message: str) -> None:
        self.send_json(status, {"error": {"code": code, "message": message}})

    def send_chunked(self, status: int, chunks, ctype="application/x-ndjson", delay=0.0):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for c in chunks:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(c), c))
            self.wfile.flush()
            if delay:
                time.sleep(delay)
        self.wfile.write(b"0\r\n\r\n")

    def send_until_close(self, status: int, body: bytes, ctype="application/json"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True


class FakeServer:
    """``route(handler, body)`` answers each request; ``requests`` records them."""

    def __init__(self, route: Callable[[Handler, bytes], None]):
        self.route = route
        self.requests: list[dict] = []
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        # a client that gave up (timeout tests) breaks the pipe: not worth a traceback
        self.httpd.handle_error = lambda request, client_address: None  # type: ignore
        self.httpd.fake = self  # type: ignore[attr-defined]
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,),
                                       daemon=True)

    def __enter__(self) -> "FakeServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
