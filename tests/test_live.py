"""End-to-end against a real local model (SmolLM2-135M on llama.cpp): `make test-live`.

Correct answers are not required from a 135M model; a clean run through the whole stack is.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from simplellmfunc import llm_chat, llm_function, tool
from simplellmfunc.exceptions import OutputParseError
from simplellmfunc.hooks import ReactEndEvent, is_event_yield
from simplellmfunc.runtime.skills import SkillRegistry, skill_agent
from simplellmfunc.types import history_from_dicts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def llm() -> AsyncIterator[object]:
    from local_model import local_llm, local_model

    async with local_model() as base_url:
        interface = local_llm(base_url)
        async with interface:  # type: ignore[attr-defined]
            yield interface


@tool
async def add(a: int, b: int) -> int:
    """Add two integers and return the sum."""
    return a + b


async def test_tool_calling_agent_turn(llm: object) -> None:
    @llm_chat(llm, toolkit=[add], enable_event=True, max_tool_calls=2, tool_choice="auto")  # type: ignore[arg-type]
    async def agent(message: str, history: list[dict[str, object]] | None = None):
        """You are a calculator. Use the add tool for every sum."""

    end = None
    async for item in agent("What is 2 + 3? Use the add tool."):
        if is_event_yield(item) and isinstance(item.event, ReactEndEvent):
            end = item.event
    assert end is not None
    assert end.terminated_by in ("answer", "max_steps")
    history_from_dicts(end.final_messages)  # valid for the next call


class City(BaseModel):
    name: str
    country: str


async def test_typed_llm_function(llm: object) -> None:
    @llm_function(llm, retries=2)  # type: ignore[arg-type]
    async def capital(country: str) -> City:
        """Return the capital city of the country."""

    city: object = None
    try:
        city = await capital("France")
    except OutputParseError as exc:  # a 135M model may fail the contract; the error is typed
        city = exc
    assert isinstance(city, City | OutputParseError)


# ---- skills: discovery and a skill agent (a clean run, not a good choice, is required) ----


def skill_registry(root: Path) -> SkillRegistry:
    folder = root / "weather-report"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        "---\nname: weather-report\ndescription: Report the weather of a city.\n---\n"
        "Call get_weather with the city, then answer with what it returned.\n"
    )
    skills = SkillRegistry(dirs=[root])

    @skills.skill("haiku", "Write a short poem (a haiku) about a topic.")
    def count_syllables(text: str) -> int:
        """Count syllables roughly, to check the 5-7-5 form."""
        return sum(1 for c in text.lower() if c in "aeiouy")

    return skills


async def test_discovery_and_a_skill_agent_run_on_the_local_model(
    llm: object, tmp_path: Path
) -> None:
    skills = skill_registry(tmp_path)
    chosen = await skills.discover("What's the weather in Paris right now?", llm, limit=1)  # type: ignore[arg-type]
    assert all(s.name in skills for s in chosen)
    assert len(chosen) <= 1
    agent = skill_agent(  # type: ignore[call-arg]
        llm,  # type: ignore[arg-type]
        skills,
        discover="llm",
        max_skills=1,
        enable_event=True,
        tool_protocol="json",
        max_tool_calls=2,
    )
    end = None
    async for item in agent("Write a haiku about rain.", history=[]):
        if is_event_yield(item) and isinstance(item.event, ReactEndEvent):
            end = item.event
    assert end is not None
    assert end.terminated_by in ("answer", "max_steps", "loop")
    history_from_dicts(end.final_messages)  # valid for the next call
