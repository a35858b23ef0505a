"""A remote A2A agent as a tool: :class:`A2AAgentTool`, and :func:`a2a_tool` (named from its card).

The model sends a ``task``; the tool sends it to the remote agent as one A2A message (streamed
when the agent can), passes its progress on as custom events — ``a2a_status`` (state, text,
the remote's metadata) and ``a2a_artifact`` (text, append, last_chunk) — and returns the answer
(the text of the remote's artifacts, else of its last message). When the calling run is
aborted, the remote task is cancelled. A remote that cannot be reached raises
:class:`~simplellmfunc.exceptions.A2AConnectionError`; a task that ends failed, rejected or
cancelled raises :class:`~simplellmfunc.exceptions.A2AError`.

A tool reads the remote's card once and keeps one HTTP client (its connections) per event
loop, for every call; a call that fails on the way (not a task the remote ended unsuccessfully)
drops both, so the next one reads the card again. :meth:`A2AAgentTool.aclose` closes the
client (a config agent's tools are closed with the agent).

The token and headers go to the card's own origin and to ``trusted_origins`` only, no redirect
is followed, and an endpoint a remote card names on a private or loopback address is refused
(see :mod:`._origins`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, get_message_text, new_text_message
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import A2AError as SDKError
from anyio.lowlevel import RunVar

from ..._resource import AsyncResource
from ...exceptions import A2AConnectionError, A2AError, UserError
from ...tools import TaskTool, ToolContext
from ._origins import OriginAuth, origin_of, refused_target

__all__ = ["A2AAgentTool", "a2a_tool"]

_FAILED: dict[int, str] = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_CANCELED: "canceled",
}
_CANCEL_SECONDS = 5.0


@dataclass(eq=False)
class _Session:
    """One event loop's HTTP client and SDK client for the remote agent."""

    lock: anyio.Lock = field(default_factory=anyio.Lock)  # one first connection at a time
    http: httpx.AsyncClient | None = None
    client: Any = None  # the SDK's client, over ``http``


class A2AAgentTool(TaskTool, AsyncResource):
    """A remote A2A agent as a tool of a local one.

    The tool keeps its HTTP connections between calls: close it when done (``await
    tool.aclose()`` or ``async with tool:``); a config agent's tools are closed with the agent.

    Args:
        url: The remote agent's base URL (its card is at ``/.well-known/agent-card.json``).
        name: The tool name.
        description: What the remote agent does, for the calling model.
        token: A bearer token, sent to the card's origin (``url``'s) and ``trusted_origins``.
        timeout: Seconds before the call is given up (default: the run's tool timeout).
        headers: More HTTP headers, sent where the token is.
        trusted_origins: Other origins (``https://host:port``) the card may name whose calls
            get the token and headers too (default: none).
        card: The remote's card when you have it already (it is not read from ``url`` then;
            ``url`` stays the card's origin for the rules above).

    Raises:
        UserError: If ``url`` or a trusted origin is not an http(s) URL.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str,
        description: str | None = None,
        token: str | None = None,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        trusted_origins: Iterable[str] = (),
        card: AgentCard | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise UserError(f"an A2A agent URL must start with http:// or https://: {url!r}")
        self.url = url.rstrip("/")
        self._headers = dict(headers or {})
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        try:
            self._origins = frozenset(
                [origin_of(self.url), *(origin_of(o) for o in trusted_origins)]
            )
        except ValueError as exc:
            raise UserError(f"A2A tool {name!r}: {exc}") from None
        self._card: AgentCard | None = card  # read once, again after a failed call
        self._sessions: RunVar[_Session] = RunVar(f"a2a_session_{id(self)}")
        super().__init__(
            name, description or f"Ask the remote agent at {self.url}.", timeout=timeout
        )

    async def answer(self, task: str, context: ToolContext | None) -> str:
        """Send ``task`` to the remote agent and return its answer.

        Raises:
            A2AConnectionError: If the remote agent cannot be reached.
            A2AError: If it answers with an error or its task does not complete.
        """
        call = _Call(self, context)
        try:
            with self._errors():
                return await call.send(await self._client(), task)
        except A2AError as exc:
            if exc.state is None:  # not the remote's answer: its card or address may be stale
                await self._forget()
            raise

    def _session(self) -> _Session:
        try:
            return self._sessions.get()
        except LookupError:
            session = _Session()
            self._sessions.set(session)
            return session

    async def _client(self) -> Any:
        """This event loop's SDK client (made, and the card read, on first use)."""
        session = self._session()
        async with session.lock:
            if session.client is None:
                http = self._http(None)
                try:
                    if self._card is None:
                        self._card = await A2ACardResolver(http, self.url).get_agent_card()
                    config = ClientConfig(httpx_client=http)
                    session.client = ClientFactory(config).create(await self._checked(self._card))
                except BaseException:  # boundary: cleanup, re-raised: the HTTP client is closed
                    await http.aclose()
                    raise
                session.http = http
            return session.client

    def _http(self, timeout: float | None) -> httpx.AsyncClient:
        """A client that sends the credentials to the trusted origins only and follows no
        redirect."""
        auth = OriginAuth(self._headers, self._origins)
        return httpx.AsyncClient(auth=auth, timeout=timeout, follow_redirects=False)

    async def _checked(self, card: AgentCard) -> AgentCard:
        """``card`` without the endpoints it may not send us to.

        Raises:
            A2AError: If it names no endpoint we may call.
        """
        kept = AgentCard()
        kept.CopyFrom(card)
        del kept.supported_interfaces[:]
        reasons: list[str] = []
        for interface in card.supported_interfaces:
            reason = await refused_target(self.url, interface.url)
            if reason is None:
                kept.supported_interfaces.append(interface)
            else:
                reasons.append(reason)
        if not kept.supported_interfaces:
            why = "; ".join(reasons) or "it names no endpoint"
            raise A2AError(f"the A2A agent at {self.url} cannot be called: {why}", url=self.url)
        return kept

    async def _forget(self) -> None:
        """Drop the card and close this loop's clients: the next call starts afresh."""
        self._card = None
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client of the current event loop (a later call opens a new one)."""
        session = self._session()
        client, http = session.client, session.http
        session.client = session.http = None
        with anyio.CancelScope(shield=True):
            if client is not None:
                await client.close()
            if http is not None:
                await http.aclose()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """SDK and network errors → our typed errors."""
        try:
            yield
        except (SDKError, httpx.HTTPError) as exc:
            cause: BaseException | None = exc
            while cause is not None:
                unreachable = isinstance(cause, httpx.TransportError)
                if unreachable:
                    raise A2AConnectionError(
                        f"the A2A agent at {self.url} cannot be reached: {cause!r}", url=self.url
                    ) from exc
                cause = cause.__cause__
            raise A2AError(f"the A2A agent at {self.url} failed: {exc}", url=self.url) from exc


class _Call:
    """One message to the remote agent: its progress, its answer, its cancellation."""

    def __init__(self, tool: A2AAgentTool, context: ToolContext | None) -> None:
        self._tool = tool
        self._context = context
        self._task_id = ""
        self._artifacts: dict[str, str] = {}
        self._message = ""
        self._state: int = TaskState.TASK_STATE_UNSPECIFIED

    async def send(self, client: Any, task: str) -> str:
        request = SendMessageRequest(message=new_text_message(task, role=Role.ROLE_USER))
        try:
            async for response in client.send_message(request):
                await self._take(response)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_SECONDS):
                await self._cancel(client)
            raise
        state = _FAILED.get(self._state)
        if state is not None:
            text = self._message or self._answer()
            raise A2AError(
                f"the A2A agent at {self._tool.url} ended its task {state}: {text}",
                url=self._tool.url,
                state=state,
            )
        return self._answer() or self._message

    def _answer(self) -> str:
        return "\n".join(text for text in self._artifacts.values() if text)

    async def _cancel(self, client: Any) -> None:
        if not self._task_id:
            return
        try:
            await client.cancel_task(CancelTaskRequest(id=self._task_id))
        except (SDKError, httpx.HTTPError):
            return  # the remote is gone or the task ended: nothing left to cancel

    async def _take(self, response: StreamResponse) -> None:
        if response.HasField("task"):
            task = response.task
            self._task_id, self._state = task.id, task.status.state
            for artifact in task.artifacts:
                self._artifacts[artifact.artifact_id] = get_artifact_text(artifact, "")
            if task.status.HasField("message"):
                self._message = get_message_text(task.status.message, "")
        elif response.HasField("message"):
            self._message = get_message_text(response.message, "")
        elif response.HasField("status_update"):
            await self._status(response)
        elif response.HasField("artifact_update"):
            await self._artifact(response)

    async def _status(self, response: StreamResponse) -> None:
        update = response.status_update
        self._task_id, self._state = update.task_id, update.status.state
        text = ""
        if update.status.HasField("message"):
            text = self._message = get_message_text(update.status.message, "")
        metadata = _plain(update.metadata) if update.HasField("metadata") else {}
        await self._emit(
            "a2a_status",
            {"state": TaskState.Name(update.status.state), "text": text, "metadata": metadata},
        )

    async def _artifact(self, response: StreamResponse) -> None:
        update = response.artifact_update
        self._task_id = update.task_id
        key, text = update.artifact.artifact_id, get_artifact_text(update.artifact, "")
        self._artifacts[key] = self._artifacts.get(key, "") + text if update.append else text
        await self._emit(
            "a2a_artifact",
            {
                "artifact_id": key,
                "text": text,
                "append": update.append,
                "last_chunk": update.last_chunk,
            },
        )

    async def _emit(self, name: str, data: dict[str, Any]) -> None:
        if self._context is not None:
            await self._context.event_emitter.emit(name, {"url": self._tool.url, **data})


def _plain(struct: Any) -> dict[str, Any]:
    """A protobuf ``Struct`` as a plain dict."""
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]

    return dict(MessageToDict(struct))


async def a2a_tool(
    url: str,
    *,
    name: str | None = None,
    description: str | None = None,
    token: str | None = None,
    timeout: float | None = None,
    **options: Any,
) -> A2AAgentTool:
    """An :class:`A2AAgentTool` named and described from the remote agent's card.

    ``options``: further :class:`A2AAgentTool` arguments (``headers``, ``trusted_origins``).

    Raises:
        A2AConnectionError: If the remote agent cannot be reached.
        A2AError: If its card cannot be read.
    """
    probe = A2AAgentTool(url, name=name or "a2a_agent", token=token, **options)
    async with probe._http(30.0) as http:
        with probe._errors():
            card: AgentCard = await A2ACardResolver(http, probe.url).get_agent_card()
    return A2AAgentTool(  # its first call does not read the card again
        url,
        name=name or _tool_name(card.name),
        description=description or card.description or None,
        token=token,
        timeout=timeout,
        card=card,
        **options,
    )


def _tool_name(text: str) -> str:
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in text).strip("_")
    return (name or "a2a_agent")[:64]
