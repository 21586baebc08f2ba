"""Typed exceptions: every API or transport failure is a :class:`BrigError`.

A command that exits non-zero is *not* an error (it is an
:class:`~brig.ExecResult`); these exceptions say that brigd refused a call or
could not be reached.
"""

from __future__ import annotations

import builtins
import json
from typing import Any

__all__ = [
    "BrigError",
    "BuildFailed",
    "InvalidRequest",
    "MethodNotAllowed",
    "AuthError",
    "Forbidden",
    "NotFound",
    "Conflict",
    "TooLarge",
    "LimitExceeded",
    "PaymentRequired",
    "ServerError",
    "AgentProtocolError",
    "Unavailable",
    "NoSpace",
    "ConnectionError",
    "Timeout",
    "ProtocolError",
    "error_from_response",
    "error_from_code",
]


class BrigError(Exception):
    """Base class of every error the SDK raises.

    Attributes:
        status: the HTTP status brigd answered (``None`` for transport errors
            and for errors reported inside a stream without a status).
        code: brigd's machine-readable code (``"not_found"``,
            ``"invalid_request"`` …) or, for transport errors, ``"connection"``
            / ``"timeout"``.
        message: the human-readable message, as brigd sent it.
    """

    default_status: int | None = None
    default_code: str | None = None

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status if status is not None else self.default_status
        self.code = code if code is not None else self.default_code

    def __str__(self) -> str:
        parts = [p for p in (str(self.status) if self.status else None, self.code) if p]
        return f"{self.message} ({' '.join(parts)})" if parts else self.message


class InvalidRequest(BrigError):
    """400: malformed or refused input (unknown field, relative path, bad cwd,
    unknown template …)."""

    default_status, default_code = 400, "invalid_request"


class MethodNotAllowed(InvalidRequest):
    """405: the route exists with another method (an SDK/server version mismatch)."""

    default_status, default_code = 405, "method_not_allowed"


class AuthError(BrigError):
    """401: the API key is missing, malformed or unknown."""

    default_status, default_code = 401, "unauthorized"


class Forbidden(BrigError):
    """403: the key's scope does not allow the call, or permission was denied
    inside the sandbox."""

    default_status, default_code = 403, "forbidden"


class NotFound(BrigError):
    """404: no such sandbox (also one of another account), process, file or route."""

    default_status, default_code = 404, "not_found"


class Conflict(BrigError):
    """409: e.g. the template is not built yet, the directory exists or is not empty, or the
    sandbox ended (deleted, timed out) while the request ran."""

    default_status, default_code = 409, "conflict"


class TooLarge(BrigError):
    """413: a JSON body over 1 MiB, or an upload over the server's file size limit."""

    default_status, default_code = 413, "too_large"


class LimitExceeded(BrigError):
    """429: a daily or monthly spend limit, or the account's concurrency
    limit, was reached (the message says which, and when it resets)."""

    default_status, default_code = 429, "limit_exceeded"


class PaymentRequired(LimitExceeded):
    """402: the prepaid balance is used up."""

    default_status, default_code = 402, "payment_required"


class ServerError(BrigError):
    """5xx: brigd or the runtime failed."""

    default_status, default_code = 500, "internal"


class AgentProtocolError(ServerError):
    """502: the sandbox's agent answered something malformed."""

    default_status, default_code = 502, "agent_protocol"


class Unavailable(ServerError):
    """503: the sandbox's agent does not answer, or the host stayed full for
    the create queue's timeout."""

    default_status, default_code = 503, "unavailable"


class NoSpace(ServerError):
    """507: the sandbox's disk is full."""

    default_status, default_code = 507, "no_space"


class BuildFailed(BrigError):
    """A step of a template's build exited non-zero (``422 build_failed`` of
    ``POST /v1/templates``): ``step`` (its number from 1), ``kind`` (apt, pip,
    npm or run), ``command``, ``exit_code``, ``output_tail`` (its last 4 KiB of
    output) and ``steps`` (every step that ran, this one last)."""

    default_status, default_code = 422, "build_failed"
    step: int | None = None
    kind: str | None = None
    command: str | None = None
    exit_code: int | None = None
    output_tail: str = ""
    steps: list = []


class ConnectionError(BrigError, builtins.ConnectionError):  # noqa: A001 - the issue's name
    """brigd could not be reached, or the connection broke mid-answer.

    Also a builtin :class:`ConnectionError` (so an :class:`OSError`)."""

    default_code = "connection"


class Timeout(BrigError, builtins.TimeoutError):
    """No answer in time: a socket timeout (no connection or answer within the
    call's timeout, or one that stalls that long), a ``504`` from a proxy in front
    of brigd (brigd itself has none), or :meth:`Process.wait` returning while the
    process still runs.

    Also a builtin :class:`TimeoutError`. Note that a *command* that runs past
    its ``timeout`` is not an exception: its :class:`ExecResult` has
    ``timed_out=True`` and ``exit_code=137``."""

    default_code = "timeout"


class ProtocolError(BrigError):
    """brigd answered something this SDK cannot understand (not JSON, a
    stream cut short …)."""

    default_code = "protocol"


_BY_STATUS: dict[int, type[BrigError]] = {
    400: InvalidRequest,
    401: AuthError,
    402: PaymentRequired,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    413: TooLarge,
    429: LimitExceeded,
    502: AgentProtocolError,
    503: Unavailable,
    504: Timeout,
    507: NoSpace,
    422: BuildFailed,
}

_BY_CODE: dict[str, type[BrigError]] = {
    "invalid_request": InvalidRequest,
    "method_not_allowed": MethodNotAllowed,
    "unauthorized": AuthError,
    "payment_required": PaymentRequired,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "too_large": TooLarge,
    "limit_exceeded": LimitExceeded,
    "internal": ServerError,
    "agent_protocol": AgentProtocolError,
    "unavailable": Unavailable,
    "timeout": Timeout,
    "no_space": NoSpace,
    "build_failed": BuildFailed,
}

_STATUS_OF_CODE = {code: cls.default_status for code, cls in _BY_CODE.items()}


def _class_for(status: int | None, code: str | None) -> type[BrigError]:
    if status is not None and status in _BY_STATUS:
        return _BY_STATUS[status]
    if code is not None and code in _BY_CODE:
        return _BY_CODE[code]
    if status is not None:
        if status >= 500:
            return ServerError
        if status == 400 or 405 < status < 500:
            return InvalidRequest
    return BrigError


def error_from_code(code: str | None, message: str, status: int | None = None) -> BrigError:
    """The exception for an error reported by code (e.g. a ``{"type":"error"}``
    event in a stream, which has no HTTP status of its own)."""
    cls = _class_for(status, code)
    if status is None and code is not None:
        status = _STATUS_OF_CODE.get(code)
    return cls(message, status=status, code=code)


def error_from_response(status: int, body: bytes, reason: str = "") -> BrigError:
    """The exception for a non-2xx answer: brigd's ``{"error":{"code","message"}}``
    when the body is that, else the status line and the start of the body."""
    code: str | None = None
    message: str | None = None
    build: Any = None
    try:
        whole: Any = json.loads(body)
        err: Any = whole["error"]
        code = err.get("code")
        message = err.get("message")
        build = whole.get("build")
    except Exception:  # noqa: BLE001 - not brigd's error shape (a proxy, a crash page)
        pass
    if not message:
        text = body[:300].decode("utf-8", "replace").strip()
        message = f"HTTP {status} {reason}".strip() + (f": {text}" if text else "")
    e = _class_for(status, code)(message, status=status, code=code)
    if isinstance(e, BuildFailed) and isinstance(build, dict):
        for k in ("step", "kind", "command", "exit_code", "output_tail", "steps"):
            if k in build:
                setattr(e, k, build[k])
    return e
