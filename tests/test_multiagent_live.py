"""Multi-agent patterns against the real local model (SmolLM2-135M on llama.cpp): `make
test-live`. A 135M model need not answer well; every pattern must run cleanly end to end with
valid histories and attributed results."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from simplellmfunc import llm_chat
from simplellmfunc.events import EventYield, ReactEndEvent
from simplellmfunc.runtime.multiagent import Channel, GroupChat, Handoff, Parallel, SharedMemory
from simplellmfunc.types import history_from_dicts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def llm() -> AsyncIterator[Any]:
    from local_model import local_llm, local_model

    async with local_model() as base_url:
        interface = local_llm(base_url)
        async with interface:
            yield interface


def agent(llm: Any, name: str, doc: str, **options: Any) -> Any:
    async def fn(message: str, history: list[dict[str, Any]] | None = None) -> None:
        pass

    fn.__name__, fn.__doc__ = name, doc
    return llm_chat(llm, max_tool_calls=2, tool_protocol="json", **options)(fn)


async def test_agent_as_tool_live(llm: Any) -> None:
    helper = agent(llm, "capitals", "You name the capital city of a country in one word.")
    boss = agent(
        llm,
        "boss",
        "Use the capitals tool to answer.",
        toolkit=[helper.as_tool()],
        enable_event=True,
    )
    ends = [
        item
        async for item in boss("What is the capital of France?")
        if isinstance(item, EventYield) and isinstance(item.event, ReactEndEvent)
    ]
    assert ends[-1].origin.agent is None
    history_from_dicts(ends[-1].event.final_messages)


async def test_handoff_live(llm: Any) -> None:
    triage = agent(llm, "triage", "Send every billing question to billing.")
    billing = agent(llm, "billing", "You answer billing questions in one sentence.")
    result = await Handoff(triage, {triage: [billing]}, max_handoffs=1).run("Why was I charged?")
    assert result.agent in ("triage", "billing")
    assert result.path[0] == "triage"
    history_from_dicts(result.history)


async def test_group_chat_live(llm: Any) -> None:
    poet = agent(llm, "poet", "You write one short line of poetry.")
    critic = agent(llm, "critic", "You comment on the poem in one sentence.")
    result = await GroupChat([poet, critic], max_rounds=4).run("A poem about the sea.")
    speakers = [m.speaker for m in result.messages]
    assert speakers[:3] == ["user", "poet", "critic"]
    assert result.terminated_by in ("max_rounds", "keyword")


async def test_parallel_live(llm: Any) -> None:
    one = agent(llm, "one", "Answer in one word.")
    two = agent(llm, "two", "Answer in one word.")
    result = await Parallel([one, two], limit=2).run("Name a colour.")
    assert [o.agent for o in result.outcomes] == ["one", "two"]
    assert not result.failed


async def test_channel_and_shared_memory_live(llm: Any) -> None:
    memory = SharedMemory(namespace="live")
    writer = agent(llm, "writer", "Answer in one sentence.")
    async with Channel(str, capacity=1) as channel:
        answer = (await Parallel([writer]).run("Say hello.")).texts[0]
        await channel.send(answer, timeout=1)
        await memory.set("answer", await channel.receive(timeout=1))
    assert await memory.get("answer") == answer
