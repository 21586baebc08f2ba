"""brig: disposable Linux sandboxes for AI agents — the Python SDK.

::

    from brig import Sandbox

    with Sandbox.create(tariff="small") as sb:
        sb.upload("/root/task.py", agent_generated_code)
        result = sb.exec("python3 /root/task.py", timeout=55)
        print(result.exit_code, result.stdout[-2000:])
    # the sandbox is deleted here, also if anything above raised

Configuration: ``BRIG_URL`` (default ``http://127.0.0.1:7070``) and
``BRIG_API_KEY``; explicit ``url=`` / ``api_key=`` arguments win.  The asyncio
flavour is :mod:`brig.aio`.  Standard library only.
"""

from ._errors import (
    AgentProtocolError,
    AuthError,
    BrigError,
    BuildFailed,
    Conflict,
    ConnectionError,
    Forbidden,
    InvalidRequest,
    LimitExceeded,
    MethodNotAllowed,
    NoSpace,
    NotFound,
    PaymentRequired,
    ProtocolError,
    ServerError,
    Timeout,
    TooLarge,
    Unavailable,
)
from ._models import Chunk, ExecResult, FileEntry, OutputEvent, ProcessInfo, SandboxInfo, VolumeInfo
from ._sync import Client, ExecStream, OutputStream, Process, Sandbox, Volume
from ._templates import Template

__version__ = "0.1.0"

__all__ = [
    "Sandbox",
    "Template",
    "Volume",
    "VolumeInfo",
    "Process",
    "Client",
    "ExecStream",
    "OutputStream",
    "ExecResult",
    "SandboxInfo",
    "ProcessInfo",
    "FileEntry",
    "OutputEvent",
    "Chunk",
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
    "__version__",
]
