"""The host end of the kernel → host bridge.

Why a local socket and not Jupyter's stdin channel: stdin carries one pending request at a time
and only for ``input()``, so concurrent calls from kernel threads could not work, and answers would
interleave with real user input. The bridge listens on a Unix socket inside a private directory
(mode 0700; 127.0.0.1 TCP where Unix sockets are missing), every request carries a random
per-instance token, and only JSON lines cross: one request line, one reply line, per connection.

Calls are served while a cell runs (the server runs inside the cell's task group), which is when
kernel code can make them; a call from a background thread between cells waits in the listen
backlog until the next cell starts or its timeout expires. A primitive may start work that
outlives its call but not the cell: :func:`current_cell` gives it the cell's task group (whose
tasks are cancelled when the cell ends) and the cell's event emitter.
"""

from __future__ import annotations

import contextlib
import hmac
import inspect
import json
import os
import secrets
import shutil
import socket
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import ByteStream, Listener, SocketAttribute, TaskGroup
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic_core import to_jsonable_python

from ._pack import (
    Primitive,
    PrimitiveCallContext,
    PrimitivePack,
    pack_backends,
    primitive_entry,
)
from ._reaper import make_private_dir

__all__ = ["BridgeServer", "CellScope", "current_cell"]

_MAX_LINE = 16 * 1024 * 1024
_KERNEL_MARGIN = 5.0


@dataclass(frozen=True, slots=True)
class CellScope:
    """The cell whose primitive call is running.

    Attributes:
        task_group: Work started here runs beside the cell and is cancelled when it ends.
        emitter: The cell's event emitter (``execute(..., event_emitter=)``), if any.
    """

    task_group: TaskGroup
    emitter: Any = None


_CELL: ContextVar[CellScope | None] = ContextVar("simplellmfunc_pyrepl_cell", default=None)


def current_cell() -> CellScope | None:
    """The cell whose primitive call is running in this context (None outside one)."""
    return _CELL.get()


class BridgeServer:
    """Answers kernel calls to the primitives of ``packs()`` (looked up at call time)."""

    def __init__(self, packs: Callable[[], Mapping[str, PrimitivePack]]) -> None:
        self._packs = packs
        self._token = secrets.token_hex(32)
        self._listener: Listener[Any] | None = None
        self._dir: str | None = None
        self._address: dict[str, Any] = {}
        self._within: str | None = None

    async def open(self, directory: str | None = None) -> None:
        """Bind the listening socket (idempotent).

        Args:
            directory: Where to put the socket (a sandboxed kernel's private directory, the one
                place the kernel can reach); default: a private directory of the bridge's own.
        """
        if self._listener is not None and directory == self._within:
            return
        if self._listener is not None:
            await self.close()
        self._within = directory
        if hasattr(socket, "AF_UNIX"):
            if directory is None:
                self._dir = await anyio.to_thread.run_sync(make_private_dir, "slf-bridge-")
            path = os.path.join(directory or self._dir or "", "bridge.sock")
            self._listener = await anyio.create_unix_listener(path, mode=0o600)
            self._address = {"family": "unix", "address": path}
        else:
            tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
            port = tcp.extra(SocketAttribute.local_port)
            self._listener = tcp
            self._address = {"family": "tcp", "host": "127.0.0.1", "port": port}

    def kernel_config(self) -> dict[str, Any]:
        """What the kernel-side ``runtime`` needs to call back (address, token, timeout)."""
        timeouts = [30.0]
        for pack in self._packs().values():
            timeouts.append(pack.timeout)
            timeouts.extend(p.timeout for p in pack.primitives if p.timeout is not None)
        return {**self._address, "token": self._token, "timeout": max(timeouts) + _KERNEL_MARGIN}

    async def serve(self, emitter: Any = None) -> None:
        """Accept and answer calls until cancelled; ``emitter`` is the cell's (see
        :func:`current_cell`)."""
        if self._listener is not None:
            try:
                async with anyio.create_task_group() as tg:
                    # Set here, so that every call's task (started from here) sees the cell.
                    _CELL.set(CellScope(tg, emitter))
                    await self._listener.serve(self._handle, task_group=tg)
            except anyio.ClosedResourceError:
                # close() ran while a cell was executing: nothing left to serve.
                return

    async def close(self) -> None:
        """Close the socket and remove its directory."""
        listener, self._listener = self._listener, None
        with anyio.CancelScope(shield=True):
            if listener is not None:
                await listener.aclose()
            if self._dir is not None:
                await anyio.to_thread.run_sync(shutil.rmtree, self._dir, True)
                self._dir = None

    def close_now(self) -> None:
        """:meth:`close` without an event loop (blocking)."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(Exception):
                listener.extra(SocketAttribute.raw_socket).close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    async def _handle(self, stream: ByteStream) -> None:
        async with stream:
            try:
                line = await BufferedByteReceiveStream(stream).receive_until(b"\n", _MAX_LINE)
                reply = await self._answer(line)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound):
                return
            await stream.send(reply.encode() + b"\n")

    async def _answer(self, line: bytes) -> str:
        try:
            request = json.loads(line)
            token = str(request.get("token", ""))
        except (ValueError, AttributeError):
            return _error(None, "ValueError", "malformed request")
        call_id = request.get("id")
        if not hmac.compare_digest(token, self._token):
            return _error(call_id, "PermissionError", "bad bridge token")
        target = str(request.get("target", ""))
        args = request.get("args") or []
        kwargs = request.get("kwargs") or {}
        try:
            result = await self._dispatch(target, list(args), dict(kwargs), str(call_id))
            payload = json.dumps({"id": call_id, "ok": True, "result": to_jsonable_python(result)})
        except Exception as exc:  # boundary: the primitive's failure goes back to kernel code
            return _error(call_id, type(exc).__name__, str(exc))
        return payload

    async def _dispatch(
        self, target: str, args: list[Any], kwargs: dict[str, Any], call_id: str
    ) -> Any:
        if target == "__list__":
            return self._listing(args[0] if args else None)
        if target == "__backends__":
            return sorted(pack_backends(self._packs()))
        namespace, _, name = target.partition(".")
        packs = self._packs()
        pack = packs.get(namespace)
        primitive = pack.get(name) if pack is not None else None
        if pack is None or primitive is None:
            raise AttributeError(f"no host primitive runtime.{target}; see runtime.help()")
        if pack.pass_context:
            backends = pack_backends(packs)
            ctx = PrimitiveCallContext(target, namespace, pack.backend, call_id, backends)
            args = [ctx, *args]
        primitive.check_arguments(args, kwargs, target)
        return await _call(primitive, pack.timeout, args, kwargs)

    def _listing(self, namespace: str | None) -> list[dict[str, Any]]:
        listing: list[dict[str, Any]] = []
        for pack in self._packs().values():
            if namespace is not None and pack.namespace != namespace:
                continue
            listing.extend(primitive_entry(pack, primitive) for primitive in pack.primitives)
        return listing


async def _call(primitive: Primitive, default_timeout: float, args: list[Any], kw: Any) -> Any:
    timeout = primitive.timeout if primitive.timeout is not None else default_timeout
    with anyio.move_on_after(timeout):
        result = primitive.func(*args, **kw)
        if inspect.isawaitable(result):
            result = await result
        return result
    raise TimeoutError(f"{primitive.name} did not finish within {timeout:g} s")


def _error(call_id: Any, kind: str, message: str) -> str:
    return json.dumps({"id": call_id, "ok": False, "error": {"type": kind, "message": message}})
