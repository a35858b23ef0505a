"""A user's file, checked with ``mypy --strict`` (``make typecheck``, and
``tests/test_agent_values.py``): the agent API needs no cast and no ignore."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from simplellmfunc import OpenAICompatible, llm_chat, llm_function
from simplellmfunc.decorators import AgentTool, ChatAgent, LLMFunction
from simplellmfunc.engine import Run, RunResult

llm = OpenAICompatible("sk-not-a-key", "some-model", "http://127.0.0.1:9/v1")


class Person(BaseModel):
    name: str
    tags: list[str] = []


@llm_chat(llm, stream=True)
async def helper(message: str, history: list[dict[str, Any]] | None = None) -> None:
    """Help the user."""


@llm_function(llm)
async def extract(text: str) -> Person:
    """Extract the person from the text."""
    raise NotImplementedError


async def resume_a_paused_turn(history: list[dict[str, Any]]) -> str:
    agent: ChatAgent = helper
    text = ""
    async for delta, _history in agent.resume(history):
        text += str(delta)
    return text


def as_a_tool() -> AgentTool:
    tool: AgentTool = helper.as_tool("helper", "Helps.")
    return tool


async def events_and_result() -> RunResult | None:
    run: Run = await helper.run("hi", history=[])
    async for item in run:
        if isinstance(item, RunResult):
            return item
    return None


async def partial_people() -> list[str]:
    function: LLMFunction[[str], Person] = extract
    names: list[str] = []
    async for person in function.stream("Ada wrote poetry"):
        names.append(person.name)  # a Person, typed: no cast
    return names
