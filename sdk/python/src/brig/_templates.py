"""Templates declared by users (docs/templates.md, "Templates declared by users")."""

from __future__ import annotations

import base64
import builtins
import json
import urllib.parse
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from ._errors import BrigError, NotFound, error_from_response
from ._sync import Client, _client

FileSpec = Union[bytes, str, tuple]  # content, or (content, mode)


def _files(files: Optional[Mapping[str, FileSpec]]) -> builtins.list[dict[str, Any]]:
    out = []
    for path, v in (files or {}).items():
        data, mode = (v if isinstance(v, tuple) else (v, None))
        if isinstance(data, str):
            data = data.encode()
        f: dict[str, Any] = {"path": path, "content_b64": base64.b64encode(data).decode()}
        if mode is not None:
            f["mode"] = mode
        out.append(f)
    return out


def template_spec(name: str, *, tag: Optional[str], from_: str, apt: Sequence[str],
                  pip: Sequence[str], npm: Sequence[str], files: Optional[Mapping[str, FileSpec]],
                  run: Sequence[str], env: Optional[Mapping[str, str]], workdir: Optional[str],
                  start: Optional[str], ready: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON spec of ``POST /v1/templates`` (docs/templates.md)."""
    spec: dict[str, Any] = {"name": name, "from": from_, "apt": list(apt), "pip": list(pip),
                            "npm": list(npm), "files": _files(files), "run": list(run)}
    for k, v in (("tag", tag), ("env", dict(env) if env else None), ("workdir", workdir),
                 ("start", start), ("ready", dict(ready) if ready else None)):
        if v is not None:
            spec[k] = v
    return spec


def quoted(ref: str) -> str:
    return urllib.parse.quote(ref, safe=":")


def build_outcome(end: Optional[dict[str, Any]]) -> dict[str, Any]:
    """A followed build's end event: the template, or the error the waiting request
    would have raised (BuildFailed with the step...)."""
    if end is None:
        raise BrigError("the build's log ended before its end event")
    result = end.get("result")
    if end.get("state") == "succeeded" and isinstance(result, dict):
        return result
    body = result if isinstance(result, dict) else {
        "error": {"code": None, "message": end.get("error") or "the build failed"}}
    raise error_from_response(int(end.get("status") or 500), json.dumps(body).encode())


class TemplateInfo:
    """What both flavours of Template hold: the client and the template's JSON."""

    _name = "brig.Template"

    def __init__(self, client: Any, info: dict[str, Any], *, owns_client: bool = False) -> None:
        self.client = client
        self.info = info
        self._owns_client = owns_client

    ref = property(lambda self: self.info.get("ref") or self.info["name"])
    key = property(lambda self: self.info["key"])
    cached = property(lambda self: bool(self.info.get("cached")))

    def __repr__(self) -> str:
        return f"{self._name}({self.ref!r}, key={self.key!r})"


class Template(TemplateInfo):
    """A template of the account, built from a spec inside a sandbox of its
    parent; sandboxes start from it like from ``base``::

        t = Template.build("py-api", from_="base", pip=["/opt/w/mylib-1.0-py3-none-any.whl"],
                           files={"/opt/w/mylib-1.0-py3-none-any.whl": wheel_bytes},
                           run=["python3 -c 'import mylib'"], workdir="/app")
        with Sandbox.create(t.ref) as sb:
            ...

    The same spec on the same parent is built once (``t.cached`` on a later
    build).  A failing step raises :class:`BuildFailed` with the step, its exit
    code and its output's tail."""

    @classmethod
    def build(cls, name: str, *, tag: Optional[str] = None, from_: str = "base",
              apt: Sequence[str] = (), pip: Sequence[str] = (), npm: Sequence[str] = (),
              files: Optional[Mapping[str, FileSpec]] = None, run: Sequence[str] = (),
              env: Optional[Mapping[str, str]] = None, workdir: Optional[str] = None,
              start: Optional[str] = None, ready: Optional[Mapping[str, Any]] = None,
              timeout: Optional[float] = None, url: Optional[str] = None,
              api_key: Optional[str] = None, client: Optional[Client] = None,
              on_log: Optional[Callable[[str], None]] = None) -> "Template":
        """Builds (or finds built) the template: ``POST /v1/templates``.  Waits
        for the build's end (``timeout`` seconds; None: no limit).  ``files``
        maps absolute paths to bytes, or to ``(bytes, mode)``.  With ``on_log``,
        the build's log is handed to it piece by piece (whole lines) as the
        build writes it (``?wait=0``, then its ``…/builds/ID?follow=1``)."""
        spec = template_spec(name, tag=tag, from_=from_, apt=apt, pip=pip, npm=npm, files=files,
                             run=run, env=env, workdir=workdir, start=start, ready=ready)
        cl, owns = _client(client, url, api_key)
        try:
            query = {"wait": "0"} if on_log is not None else None
            r = cl.transport.request("POST", "/v1/templates", query=query, json=spec,
                                     timeout=timeout)
            j = r.json()
            if on_log is not None and r.status == 202:
                end = None
                events = cl.transport.stream("GET", r.headers["location"],
                                             query={"follow": "1"}, timeout=timeout)
                for ev in events.json_lines():
                    if ev.get("type") == "log":
                        on_log(ev.get("data", ""))
                    elif ev.get("type") == "end":
                        end = ev
                j = build_outcome(end)
        except BaseException:
            if owns:
                cl.close()
            raise
        return cls(cl, j, owns_client=owns)

    @classmethod
    def get(cls, ref: str, *, url: Optional[str] = None, api_key: Optional[str] = None,
            client: Optional[Client] = None) -> "Template":
        """A template by ``name[:tag]``; :class:`NotFound` when the account has none."""
        cl, owns = _client(client, url, api_key)
        try:
            j = cl.transport.request("GET", f"/v1/templates/{quoted(ref)}")
        except BaseException:
            if owns:
                cl.close()
            raise
        return cls(cl, j.json(), owns_client=owns)

    def log(self) -> builtins.list[dict[str, Any]]:
        """Its build's steps: command, exit code, duration, output's tail."""
        path = f"/v1/templates/{quoted(self.ref)}/log"
        return list(self.client.transport.request("GET", path).json().get("steps", []))

    def delete(self, *, missing_ok: bool = False) -> None:
        """Deletes it; :class:`Conflict` while sandboxes of it run."""
        try:
            self.client.transport.request(
                "DELETE", f"/v1/templates/{quoted(self.ref)}")
        except NotFound:
            if not missing_ok:
                raise
        finally:
            if self._owns_client:
                self.client.close()
                self._owns_client = False
