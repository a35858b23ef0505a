"""A2A on the official ``a2a-sdk``, both directions, over real HTTP on loopback.

Our agents (``@llm_chat`` over the loopback ``MockLLMServer``) are served with ``a2a_app``
under uvicorn and driven by the SDK's own client; remote agents served by the SDK's own server
(``DefaultRequestHandler`` with a plain ``AgentExecutor``) are called through ``A2AAgentTool``.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc._messages import history_from_dicts, validate_history
from simplellmfunc.events import CustomEvent, EventYield, ReactEndEvent
from simplellmfunc.exceptions import A2AConnectionError, A2AError
from simplellmfunc.runtime import load_agent_config
from simplellmfunc.runtime.a2a import A2AAgentTool, a2a_tool
from simplellmfunc.runtime.config._build import build_toolkit
from simplellmfunc.serving import ServedAgent, a2a_app, running
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 20.0
KEY = "sk-test-123456789"


def chat_agent(llm: Any, name: str, **options: Any) -> Any:
    async def agent(message: str, history: list[dict[str, Any]] | None = None) -> None:
        pass

    agent.__name__ = agent.__qualname__ = name
    agent.__doc__ = f"You are {name}, a helpful agent."
    return llm_chat(llm, stream=True, **options)(agent)


async def sdk_client(http: httpx.AsyncClient, url: str) -> Any:
    """The SDK's own client for the agent at ``url`` (card resolved at the well-known path)."""
    card = await A2ACardResolver(http, url).get_agent_card()
    return ClientFactory(ClientConfig(httpx_client=http)).create(card)


def user(text: str, context_id: str = "") -> SendMessageRequest:
    message = new_text_message(text, role=Role.ROLE_USER, context_id=context_id or None)
    return SendMessageRequest(message=message)


def ours(response: StreamResponse) -> dict[str, Any] | None:
    """The event a status update carries in its ``simplellmfunc`` metadata, if any."""
    if not response.HasField("status_update"):
        return None
    metadata = MessageToDict(response.status_update.metadata)
    value = metadata.get("simplellmfunc")
    return value if isinstance(value, dict) else None


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_sdk_client_streams_our_agent_and_continues_its_context(
    mock_server: MockLLMServer,
) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 2, "b": 3}, id="c1")),
        Reply.text("The sum is 5.", chunks=3),
        Reply.text("You asked about 2 and 3."),
    )
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
        served = ServedAgent(chat_agent(llm, "calculator", toolkit=[add]))
        async with (
            running(lambda url: a2a_app(served, url)) as url,
            httpx.AsyncClient() as http,
        ):
            client = await sdk_client(http, url)
            with anyio.fail_after(GUARD):
                card = await A2ACardResolver(http, url).get_agent_card()
                responses = [r async for r in client.send_message(user("What is 2 + 3?"))]
                task_id = responses[-1].status_update.task_id
                task = await client.get_task(GetTaskRequest(id=task_id))
                context_id = task.context_id
                again = [r async for r in client.send_message(user("And before?", context_id))]
            await client.close()
    assert (card.name, card.capabilities.streaming) == ("calculator", True)
    assert card.supported_interfaces[0].url == f"{url}/a2a"
    states = [r.status_update.status.state for r in responses if r.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    tools = [event for r in responses if (event := ours(r)) is not None]
    assert [(e["kind"], e["tool_name"]) for e in tools] == [
        ("tool_call_start", "add"),
        ("tool_call_end", "add"),
    ]
    assert tools[0]["arguments"] == {"a": 2, "b": 3}
    # The metadata is the event's to_wire form: its origin names the A2A context's session.
    assert {e["origin"]["session_id"] for e in tools} == {context_id}
    assert tools[0]["type"] == "event"
    assert tools[1]["result"] == "5"
    chunks = [r.artifact_update for r in responses if r.HasField("artifact_update")]
    assert len(chunks) == 4  # three deltas, then the whole answer as the last chunk
    assert [c.append for c in chunks] == [False, True, True, False]
    assert "".join(get_artifact_text(c.artifact, "") for c in chunks[:3]) == "The sum is 5."
    assert chunks[-1].last_chunk
    assert get_artifact_text(chunks[-1].artifact) == "The sum is 5."
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [get_artifact_text(a) for a in task.artifacts] == ["The sum is 5."]
    assert again[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    # The context's second turn was sent the first one's whole conversation.
    roles = [m["role"] for m in mock_server.requests[-1].json["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    history = await served.history(context_id)
    assert history[-1]["content"] == "You asked about 2 and 3."
    validate_history(history_from_dicts(history))


async def test_cancel_aborts_the_turn_and_keeps_a_valid_history(
    mock_server: MockLLMServer,
) -> None:
    started = anyio.Event()

    @tool
    async def slow() -> str:
        """Take a long time."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    mock_server.script(Reply.tool_calls(ToolCallSpec("slow", {}, id="s1")))
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
        served = ServedAgent(chat_agent(llm, "sleeper", toolkit=[slow]))
        async with (
            running(lambda url: a2a_app(served, url)) as url,
            httpx.AsyncClient() as http,
        ):
            client = await sdk_client(http, url)
            with anyio.fail_after(GUARD):
                stream = client.send_message(user("go slow"))
                first = await anext(stream)
                await started.wait()
                canceled = await client.cancel_task(CancelTaskRequest(id=first.task.id))
                await stream.aclose()
                task = await client.get_task(GetTaskRequest(id=first.task.id))
            await client.close()
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert task.status.state == TaskState.TASK_STATE_CANCELED
    history = await served.history(task.context_id)
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool"]
    validate_history(history_from_dicts(history))


class EchoExecutor(AgentExecutor):
    """A remote agent on the SDK's own server: a working update, then the text upper-cased."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        assert context.message is not None
        await event_queue.enqueue_event(
            new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message])
        )
        updater = TaskUpdater(event_queue, task_id, context_id)
        text = context.get_user_input()
        await updater.start_work(updater.new_agent_message([new_text_part("thinking")]))
        if text == "fail":
            await updater.failed(updater.new_agent_message([new_text_part("cannot do that")]))
            return
        await updater.add_artifact([new_text_part(text.upper())], name="answer", last_chunk=True)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        return None


def sdk_server(url: str) -> Starlette:
    card = AgentCard(
        name="Echo agent",
        description="Shouts your text back.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=f"{url}/rpc",
                protocol_binding=TransportProtocol.JSONRPC,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/rpc")]
    return Starlette(routes=routes)


async def test_our_agent_calls_a_remote_sdk_agent_as_a_tool(mock_server: MockLLMServer) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("Echo_agent", {"task": "hello there"}, id="e1")),
        Reply.text("The echo said HELLO THERE."),
    )
    async with running(sdk_server) as url:
        remote = await a2a_tool(url)
        async with remote, OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
            agent = chat_agent(llm, "caller", toolkit=[remote], enable_event=True)
            events: list[EventYield] = []
            with anyio.fail_after(GUARD):
                async for item in agent("ask the echo", history=[]):
                    if isinstance(item, EventYield):
                        events.append(item)
        async with A2AAgentTool(url, name="echo") as failing:
            with anyio.fail_after(GUARD), pytest.raises(A2AError) as failed:
                await failing.run("fail")
    assert (remote.name, remote.description) == ("Echo_agent", "Shouts your text back.")
    ends = [e.event for e in events if isinstance(e.event, ReactEndEvent)]
    assert ends[-1].final_response == "The echo said HELLO THERE."
    custom = [e.event for e in events if isinstance(e.event, CustomEvent)]
    names = [c.event_name for c in custom]
    assert "a2a_status" in names
    assert "a2a_artifact" in names
    artifact = next(c for c in custom if c.event_name == "a2a_artifact")
    assert artifact.data["text"] == "HELLO THERE"
    assert artifact.data["url"] == url
    tool_message = mock_server.requests[1].json["messages"][-1]
    assert (tool_message["role"], tool_message["content"]) == ("tool", "HELLO THERE")
    assert failed.value.state == "failed"
    assert "cannot do that" in str(failed.value)


CARD_PATH = "/.well-known/agent-card.json"


class Recorder:
    """ASGI middleware: records each request's path and client port; answers the next RPC
    with a 500 when ``fail_next`` is set."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[tuple[str, int]] = []
        self.fail_next = False

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append((scope["path"], scope["client"][1]))
            if self.fail_next and scope["path"] == "/rpc":
                self.fail_next = False
                await send({"type": "http.response.start", "status": 500, "headers": []})
                await send({"type": "http.response.body", "body": b"boom"})
                return
        await self.app(scope, receive, send)

    def paths(self, path: str) -> list[int]:
        """The client ports of the requests to ``path``."""
        return [port for seen, port in self.seen if seen == path]


async def test_a_tool_reads_the_card_once_and_again_after_a_failure() -> None:
    recorders: list[Recorder] = []

    def app(url: str) -> Recorder:
        recorders.append(Recorder(sdk_server(url)))
        return recorders[-1]

    async with running(app) as url:
        server = recorders[0]
        async with await a2a_tool(url) as remote:
            with anyio.fail_after(GUARD):
                assert await remote.run("one") == "ONE"
                assert await remote.run("two") == "TWO"
                assert len(server.paths(CARD_PATH)) == 1  # a2a_tool's read serves the calls
                assert len(set(server.paths("/rpc"))) == 1  # one connection, kept open
                server.fail_next = True
                with pytest.raises(A2AError) as failed:
                    await remote.run("three")
                assert failed.value.state is None  # not the remote task's end: the call's
                assert await remote.run("four") == "FOUR"
                assert len(server.paths(CARD_PATH)) == 2  # read again after the failure
                with pytest.raises(A2AError, match="ended its task failed"):
                    await remote.run("fail")  # the remote's answer: card and client are kept
        assert len(server.paths(CARD_PATH)) == 2


async def test_a_config_agents_a2a_tool_is_closed_with_it(tmp_path: Path) -> None:
    recorders: list[Recorder] = []

    def app(url: str) -> Recorder:
        recorders.append(Recorder(sdk_server(url)))
        return recorders[-1]

    async with running(app) as url:
        path = tmp_path / "agent.yml"
        path.write_text(
            f"model: ollama:llama3\ntoolkit:\n  a2a:\n    - {{url: {url}, name: echo}}\n"
        )
        config = load_agent_config(path, environ={})
        async with AsyncExitStack() as stack:
            (echo,) = await build_toolkit(config, stack, environ={})
            with anyio.fail_after(GUARD):
                assert await echo.run("one") == "ONE"
                assert await echo.run("two") == "TWO"
        assert len(recorders[0].paths(CARD_PATH)) == 1
        assert len(set(recorders[0].paths("/rpc"))) == 1  # one connection for both calls
        # The stack closed the tool's client: a later call has to open a new connection.
        async with echo:
            with anyio.fail_after(GUARD):
                assert await echo.run("three") == "THREE"
        assert len(set(recorders[0].paths("/rpc"))) == 2


async def test_a_remote_that_is_down_is_a_typed_error() -> None:
    down = A2AAgentTool("http://127.0.0.1:9", name="gone")
    with anyio.fail_after(GUARD), pytest.raises(A2AConnectionError) as error:
        await down.run("anyone there?")
    assert error.value.url == "http://127.0.0.1:9"
    assert "cannot be reached" in str(error.value)
    with anyio.fail_after(GUARD), pytest.raises(A2AConnectionError):
        await a2a_tool("http://127.0.0.1:9")
