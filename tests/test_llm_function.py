"""``@llm_function`` at the wire: return types, output contracts, repairs, prompts, concurrency."""

from __future__ import annotations

import dataclasses
import enum
import json
import re
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any, Literal, Optional

import anyio
import pytest
from PIL import Image
from pydantic import BaseModel

from simplellmfunc import ImgPath, ImgUrl, OpenAICompatible, llm_function, tool
from simplellmfunc.exceptions import DecoratorError, OutputParseError
from simplellmfunc.hooks import EventYield, LLMCallEndEvent, ReactEndEvent, ResponseYield
from simplellmfunc.providers import Capabilities
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed


@pytest.fixture
def server(mock_server: MockLLMServer) -> MockLLMServer:
    return mock_server  # from conftest.py, like the leak check run around every test


@pytest.fixture
async def llm(server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", server.url) as model:
        yield model


@pytest.fixture
async def no_schema_llm(server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    caps = Capabilities(json_schema=False)
    async with OpenAICompatible(
        "sk-test-123456789", "mock-model", server.url, capabilities=caps
    ) as model:
        yield model


class Address(BaseModel):
    city: str
    zip_code: str


class Person(BaseModel):
    name: str
    age: int
    address: Address
    tags: list[str] = []


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


def messages_of(request: RecordedRequest) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = request.json["messages"]
    return messages


# -- return types ------------------------------------------------------------------------------

PERSON = {"name": "Ada", "age": 36, "address": {"city": "London", "zip_code": "01234"}}

RETURN_CASES: list[tuple[Any, str, Any]] = [
    (str, "00123", "00123"),
    (str, '  {"not": "parsed"}  ', '  {"not": "parsed"}  '),
    (int, '{"result": 42}', 42),
    (int, "42", 42),
    (float, '{"result": 2.5}', 2.5),
    (bool, '{"result": false}', False),
    (type(None), "anything at all", None),
    (Person, json.dumps(PERSON), Person.model_validate(PERSON)),
    (Person, "```json\n" + json.dumps(PERSON) + "\n```", Person.model_validate(PERSON)),
    (Point, '{"x": 1, "y": 2}', Point(1, 2)),
    (
        list[Address],
        '{"result": [{"city": "Rome", "zip_code": "00100"}]}',
        [Address(city="Rome", zip_code="00100")],
    ),
    (dict[str, int], '{"result": {"a": 1, "b": 2}}', {"a": 1, "b": 2}),
    (dict[str, int], '{"a": 1}', {"a": 1}),
    (dict[str, int], '{"result": 5}', {"result": 5}),
    (dict[str, dict[str, int]], '{"result": {"result": 5}}', {"result": {"result": 5}}),
    (Optional[int], '{"result": null}', None),  # noqa: UP045 - the spelling users write
    (int | None, '{"result": 7}', 7),
    (Literal["yes", "no"], '{"result": "no"}', "no"),
    (Literal["yes", "no"], "yes", "yes"),
    (Color, '{"result": "green"}', Color.GREEN),
    (
        int | Address,
        '{"result": {"city": "Oslo", "zip_code": "0150"}}',
        Address(city="Oslo", zip_code="0150"),
    ),
    (int | Address, '{"result": 3}', 3),
    (list[str], '{"result": ["00123", "x"]}', ["00123", "x"]),
]


@pytest.mark.parametrize(("annotation", "reply", "expected"), RETURN_CASES)
async def test_return_types(
    server: MockLLMServer, llm: OpenAICompatible, annotation: Any, reply: str, expected: Any
) -> None:
    server.script(Reply.text(reply))

    async def extract(text: str) -> Any:
        """Extract it."""

    extract.__annotations__["return"] = annotation
    function = llm_function(llm)(extract)
    with anyio.fail_after(GUARD):
        value = await function("some text")
    assert value == expected
    assert type(value) is type(expected)


async def test_native_json_schema_when_the_capability_is_on(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.text(json.dumps(PERSON)), Reply.text('{"result": 5}'))

    @llm_function(llm)
    async def person(text: str) -> Person:
        """Extract the person."""

    @llm_function(llm)
    async def count(text: str) -> int:
        """Count."""

    with anyio.fail_after(GUARD):
        await person("Ada")
        await count("x")
    body = server.requests[0].json
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    schema = fmt["json_schema"]["schema"]
    assert schema["properties"]["address"] == {"$ref": "#/$defs/Address"}
    assert "Address" in schema["$defs"]
    assert body["messages"][0] == {"role": "system", "content": "Extract the person."}
    wrapped = server.requests[1].json["response_format"]["json_schema"]["schema"]
    assert wrapped["required"] == ["result"]
    assert wrapped["properties"]["result"]["type"] == "integer"


async def test_prompt_contract_without_the_capability(
    server: MockLLMServer, no_schema_llm: OpenAICompatible
) -> None:
    server.script(Reply.text(json.dumps(PERSON)))

    @llm_function(no_schema_llm)
    async def person(text: str) -> Person:
        """Extract the person."""

    with anyio.fail_after(GUARD):
        assert (await person("Ada")).name == "Ada"
    body = server.requests[0].json
    assert "response_format" not in body
    system = body["messages"][0]["content"]
    assert system.startswith("Extract the person.\n\n## Output format\n")
    assert '"zip_code"' in system


async def test_text_return_sends_no_contract(server: MockLLMServer, llm: OpenAICompatible) -> None:
    server.script(Reply.text("hello"))

    @llm_function(llm)
    async def greet(name: str) -> str:
        """Greet."""

    with anyio.fail_after(GUARD):
        assert await greet("Bo") == "hello"
    body = server.requests[0].json
    assert "response_format" not in body
    assert body["messages"] == [
        {"role": "system", "content": "Greet."},
        {"role": "user", "content": "name (str): Bo\n"},
    ]


# -- repairs -----------------------------------------------------------------------------------


async def test_invalid_reply_is_repaired(server: MockLLMServer, llm: OpenAICompatible) -> None:
    server.script(Reply.text("I think it is 42"), Reply.text('{"result": 42}'))

    @llm_function(llm)
    async def answer(question: str) -> int:
        """Answer with a number."""

    with anyio.fail_after(GUARD):
        assert await answer("life?") == 42
    second = messages_of(server.requests[1])
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"] == "I think it is 42"
    assert "not valid JSON" in second[3]["content"]


async def test_schema_error_is_fed_back_naming_the_field(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    bad = {**PERSON, "age": "old"}
    server.script(Reply.text(json.dumps(bad)), Reply.text(json.dumps(PERSON)))

    @llm_function(llm)
    async def person(text: str) -> Person:
        """Extract the person."""

    with anyio.fail_after(GUARD):
        assert (await person("Ada")).age == 36
    feedback = messages_of(server.requests[1])[-1]["content"]
    assert "age" in feedback
    assert "valid integer" in feedback


async def test_always_invalid_raises_output_parse_error(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.text("no"), Reply.text("still no"), Reply.text("never"))

    @llm_function(llm, retries=2)
    async def answer(question: str) -> int:
        """Answer with a number."""

    with anyio.fail_after(GUARD), pytest.raises(OutputParseError) as caught:
        await answer("life?")
    assert caught.value.raw == "never"
    assert len(caught.value.errors) == 3
    assert len(server.requests) == 3


async def test_repairs_are_one_run_with_cumulative_usage(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.text("nope", usage=(10, 1)), Reply.text("7", usage=(20, 2)))

    @llm_function(llm, enable_event=True)
    async def answer(question: str) -> int:
        """Answer with a number."""

    with anyio.fail_after(GUARD):
        async with aclosing(answer("q")) as stream:
            items = [item async for item in stream]
    events = [i.event for i in items if isinstance(i, EventYield)]
    kinds = [e.kind for e in events]
    assert kinds.count("react_start") == 1
    assert kinds.count("react_end") == 1
    end = events[-1]
    assert isinstance(end, ReactEndEvent)
    calls = [e.usage for e in events if isinstance(e, LLMCallEndEvent)]
    assert end.total_usage == calls[0] + calls[1]
    assert end.iterations == 2
    response = items[-1]
    assert isinstance(response, ResponseYield)
    assert response.response == 7
    assert response.messages[-1] == {"role": "assistant", "content": "7"}


# -- prompts -----------------------------------------------------------------------------------


async def test_template_params_leave_literal_braces_alone(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.text('{"name": "cat"}'))

    @llm_function(llm)
    async def describe(subject: str) -> dict[str, str]:
        """Describe the {animal} in the style of {style}.

        Reply like {"name": "<name>"}; keep {unknown} and {{doubled}} as they are.
        """

    with anyio.fail_after(GUARD):
        value = await describe("x", _template_params={"animal": "cat", "style": "haiku"})
    assert value == {"name": "cat"}
    system = server.requests[0].json["messages"][0]["content"]
    assert system.startswith(
        "Describe the cat in the style of haiku.\n\n"
        'Reply like {"name": "<name>"}; keep {unknown} and {{doubled}} as they are.'
    )


async def test_prompt_templates_and_body_params(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.text("ok"))

    @llm_function(
        llm,
        system_prompt_template="You are {role}. Task: {function_description}",
        user_prompt_template="Inputs:\n{parameters}",
        temperature=0.25,
    )
    async def act(item: Address, count: int = 2) -> str:
        """Do {what}."""

    with anyio.fail_after(GUARD):
        await act(
            Address(city="Rome", zip_code="00100"),
            _template_params={"role": "a clerk", "what": "it"},
        )
    body = server.requests[0].json
    assert body["temperature"] == 0.25
    assert body["messages"][0]["content"] == "You are a clerk. Task: Do it."
    user = body["messages"][1]["content"]
    assert user == ('Inputs:\nitem (Address): {"city":"Rome","zip_code":"00100"}\ncount (int): 2\n')


async def test_multimodal_parameters(
    server: MockLLMServer, llm: OpenAICompatible, tmp_path: Path
) -> None:
    path = tmp_path / "photo.png"
    Image.new("RGB", (4, 4), "green").save(path)
    server.script(Reply.text("green"))

    @llm_function(llm)
    async def color(photo: ImgPath, more: list[ImgUrl], question: str) -> str:
        """Name the color."""

    with anyio.fail_after(GUARD):
        await color(ImgPath(path), [ImgUrl("https://example.com/a.png")], "which?")
    parts = server.requests[0].json["messages"][1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url", "text", "image_url", "text"]
    assert parts[0]["text"] == "photo (ImgPath):\n"
    url = parts[1]["image_url"]["url"]
    assert re.fullmatch(r"data:image/png;base64,[A-Za-z0-9+/=]+", url)
    assert parts[2]["text"] == "\nmore (list[ImgUrl]):\n"
    assert parts[3]["image_url"]["url"] == "https://example.com/a.png"
    assert parts[4]["text"] == "\nquestion (str): which?\n"


# -- tools, events, concurrency ---------------------------------------------------------------


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return {"a": "1", "b": "2"}.get(key, "?")


async def test_tools_then_a_typed_answer(server: MockLLMServer, llm: OpenAICompatible) -> None:
    server.script(
        Reply.tool_calls(
            ToolCallSpec("lookup", {"key": "a"}), ToolCallSpec("lookup", {"key": "b"})
        ),
        Reply.text('{"result": 3}'),
    )

    @llm_function(llm, toolkit=[lookup])
    async def total(keys: list[str]) -> int:
        """Sum the values of the keys."""

    with anyio.fail_after(GUARD):
        assert await total(["a", "b"]) == 3
    first = server.requests[0].json
    assert [t["function"]["name"] for t in first["tools"]] == ["lookup"]
    tools_answers = [m["content"] for m in messages_of(server.requests[1]) if m["role"] == "tool"]
    assert tools_answers == ["1", "2"]


async def test_concurrent_calls_never_mix(server: MockLLMServer, llm: OpenAICompatible) -> None:
    def square(request: RecordedRequest) -> Reply:
        user = messages_of(request)[-1]["content"]
        n = int(user.split(": ")[1])
        return Reply.text(json.dumps({"result": n * n}), ttft=(n % 5) * 0.002)

    server.default = square

    @llm_function(llm)
    async def squared(n: int) -> int:
        """Square it."""

    results: dict[int, int] = {}

    async def one(n: int) -> None:
        results[n] = await squared(n)

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            for n in range(50):
                group.start_soon(one, n)
    assert results == {n: n * n for n in range(50)}


async def test_event_mode_yields_events_then_the_value(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.text('{"x": 3, "y": 4}'))

    @llm_function(llm, enable_event=True)
    async def point(text: str) -> Point:
        """Find the point."""

    with anyio.fail_after(GUARD):
        async with aclosing(point("(3, 4)")) as stream:
            items = [item async for item in stream]
    assert all(isinstance(i, EventYield) for i in items[:-1])
    assert items[0].event.user_input == "text (str): (3, 4)\n"
    last = items[-1]
    assert isinstance(last, ResponseYield)
    assert last.response == Point(3, 4)
    assert last.messages[-1] == {"role": "assistant", "content": '{"x": 3, "y": 4}'}


async def test_sync_functions_are_refused(llm: OpenAICompatible) -> None:
    with pytest.raises(DecoratorError):

        @llm_function(llm)
        def not_async(x: int) -> int:  # type: ignore[empty-body]
            """Nope."""
