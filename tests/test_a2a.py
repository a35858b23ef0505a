"""A2A on the official ``a2a-sdk``, both directions, over real HTTP on loopback.

Our agents (``@llm_chat`` over the loopback ``MockLLMServer``) are served with ``a2a_app``
under uvicorn and driven by the SDK's own client; remote agents served by the SDK's own server
(``DefaultRequestHandler`` with a plain ``AgentExecutor``) are called through ``A2AAgentTool``.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, new_text_message
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc._messages import history_from_dicts, validate_history
from simplellmfunc._serve._uvicorn import running
from simplellmfunc.runtime.serving import ServedAgent, a2a_app
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
    history = served.history(context_id)
    assert history[-1]["content"] == "You asked about 2 and 3."
    validate_history(history_from_dicts(history))
