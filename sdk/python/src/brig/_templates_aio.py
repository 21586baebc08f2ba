"""brig.aio.Template: the asyncio twin of :class:`brig.Template`."""

from __future__ import annotations

import builtins
from typing import Any, Mapping, Optional, Sequence

from ._errors import NotFound
from ._templates import FileSpec, quoted, template_spec
from .aio import Client, _client


class Template:
    """See :class:`brig.Template`; every call is awaited."""

    def __init__(self, client: Client, info: dict[str, Any], *, owns_client: bool = False) -> None:
        self.client = client
        self.info = info
        self._owns_client = owns_client

    ref = property(lambda self: self.info.get("ref") or self.info["name"])
    key = property(lambda self: self.info["key"])
    cached = property(lambda self: bool(self.info.get("cached")))

    def __repr__(self) -> str:
        return f"brig.aio.Template({self.ref!r}, key={self.key!r})"

    @classmethod
    async def build(cls, name: str, *, tag: Optional[str] = None, from_: str = "base",
                    apt: Sequence[str] = (), pip: Sequence[str] = (), npm: Sequence[str] = (),
                    files: Optional[Mapping[str, FileSpec]] = None, run: Sequence[str] = (),
                    env: Optional[Mapping[str, str]] = None, workdir: Optional[str] = None,
                    start: Optional[str] = None, ready: Optional[Mapping[str, Any]] = None,
                    timeout: Optional[float] = None, url: Optional[str] = None,
                    api_key: Optional[str] = None,
                    client: Optional[Client] = None) -> "Template":
        spec = template_spec(name, tag=tag, from_=from_, apt=apt, pip=pip, npm=npm, files=files,
                             run=run, env=env, workdir=workdir, start=start, ready=ready)
        cl, owns = _client(client, url, api_key)
        try:
            r = await cl.transport.request("POST", "/v1/templates", json=spec, timeout=timeout)
        except BaseException:
            if owns:
                await cl.aclose()
            raise
        return cls(cl, r.json(), owns_client=owns)

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
