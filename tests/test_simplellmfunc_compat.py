"""SimpleLLMFunc-shaped user code (written here, in the shapes of its examples and README) runs
against the mock server with only the package name changed: module paths, type aliases, event
field names, ``Tool.func``, ``timeout=``, and the names that fail with their replacement."""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from simplellmfunc import app_log, tool
from simplellmfunc.base.post_process import extract_content_from_stream_response
from simplellmfunc.exceptions import DecoratorError, UnsupportedError
from simplellmfunc.hooks import (
    ABORT_SIGNAL_PARAM,
    EventYield,
    ReActEventType,
    ReactOutput,
    ResponseYield,
    ToolEventEmitter,
)
from simplellmfunc.hooks.abort import AbortSignal
from simplellmfunc.hooks.events import (
    CustomEvent,
    LLMCallEndEvent,
    LLMChunkArriveEvent,
    ReactEndEvent,
    ReactStartEvent,
    ToolCallEndEvent,
    ToolCallsBatchEndEvent,
    ToolCallsBatchStartEvent,
)
from simplellmfunc.hooks.stream import is_event_yield, is_response_yield
from simplellmfunc.interface.llm_interface import LLM_Interface
from simplellmfunc.interface.openai_compatible import OpenAICompatible
from simplellmfunc.llm_decorator import llm_chat, llm_function
from simplellmfunc.observability import flush_all_observations
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.type import HistoryList, ImgPath, MessageList

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed


@pytest.fixture
async def llm(mock_server: MockLLMServer, tmp_path: Path) -> AsyncIterator[OpenAICompatible]:
    provider = {
        "openrouter": [
            {
                "model_name": "minimax/minimax-m2.5",
                "api_keys": ["sk-x"],
                "base_url": mock_server.url,
            }
        ]
    }
    path = tmp_path / "provider.json"
    path.write_text(json.dumps(provider), encoding="utf-8")
    model = OpenAICompatible.load_from_json_file(str(path))["openrouter"]["minimax/minimax-m2.5"]
    assert isinstance(model, LLM_Interface)
    async with model:
        yield model


@tool(name="get_weather", description="Weather of a city")
async def get_weather(city: str) -> dict[str, str]:
    """Weather.

    Args:
        city: The city.
    """
    return {"city": city, "condition": "sunny"}


@tool(name="batch_process", description="Process items")
async def batch_process(items: list[str], event_emitter: ToolEventEmitter | None = None) -> str:
    """Process items, reporting progress.

    Args:
        items: The items.
    """
    for i, item in enumerate(items):
        if event_emitter:
            await event_emitter.emit("batch_progress", {"current": i + 1, "item": item})
    return f"processed {len(items)}"


async def test_chat_events_carry_simplellmfunc_fields(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("get_weather", {"city": "Beijing"}),
            ToolCallSpec("batch_process", {"items": ["a", "b"]}),
        ),
        Reply.text("Sunny, meow.", chunks=3),
    )

    @llm_chat(
        llm_interface=llm,
        toolkit=[get_weather, batch_process],
        stream=True,
        enable_event=True,
        timeout=600,
    )
    async def chat(user_message: str, chat_history: HistoryList | None = None):  # type: ignore[no-untyped-def]
        """You are a helpful assistant."""

    outputs: list[ReactOutput] = []
    with anyio.fail_after(GUARD):
        async for output in chat(user_message="Weather?", chat_history=[]):
            outputs.append(output)
    events = [o.event for o in outputs if isinstance(o, EventYield)]
    for event in events:
        assert isinstance(event.timestamp, datetime)
        assert event.trace_id
        assert event.func_name == "chat"
        assert event.kind in set(ReActEventType)
    start = next(e for e in events if isinstance(e, ReactStartEvent))
    assert start.trace_id[:8]
    assert start.user_task_prompt == "Weather?"
    chunks = [e for e in events if isinstance(e, LLMChunkArriveEvent) and e.text]
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert chunks[-1].accumulated_content == "Sunny, meow."
    streamed = "".join(extract_content_from_stream_response(c.chunk, "chat") for c in chunks)
    assert streamed == "Sunny, meow."
    batch_start = next(e for e in events if isinstance(e, ToolCallsBatchStartEvent))
    assert batch_start.batch_size == 2
    ends = [e for e in events if isinstance(e, ToolCallEndEvent)]
    assert all(e.execution_time == e.duration_s >= 0 for e in ends)
    batch_end = next(e for e in events if isinstance(e, ToolCallsBatchEndEvent))
    assert batch_end.batch_size == 2
    assert batch_end.total_execution_time >= 0
    assert sorted(r["tool_name"] for r in batch_end.tool_results if r["success"]) == [
        "batch_process",
        "get_weather",
    ]
    custom = [e for e in events if isinstance(e, CustomEvent)]
    assert [e.data["item"] for e in custom] == ["a", "b"]
    end = next(e for e in events if isinstance(e, ReactEndEvent))
    assert end.total_llm_calls == 2
    assert end.total_tool_calls == 2
    assert end.total_token_usage.total_tokens == end.total_usage.total_tokens > 0
    assert (end.timestamp - start.timestamp).total_seconds() >= 0
    final = outputs[-1]
    assert isinstance(final, ResponseYield)
    assert final.messages[-1]["content"] == "Sunny, meow."
    # timeout= is the request timeout: never a body field
    assert all("timeout" not in r.json for r in mock_server.requests)


class Review(BaseModel):
    title: str
    rating: float


async def test_function_event_stream_with_pydantic_and_token_usage(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text(json.dumps({"title": "Dune", "rating": 4.5})))

    @llm_function(llm_interface=llm, enable_event=True)
    async def analyze(review_text: str) -> Review:
        """Analyse a review."""
        return Review(title="", rating=0)

    usage, result = 0, None
    with anyio.fail_after(GUARD):
        async for output in analyze(review_text="Great film, 4.5"):
            if is_response_yield(output):
                result = output.response
            elif is_event_yield(output) and isinstance(output.event, LLMCallEndEvent):
                usage += output.event.usage.total_tokens
                assert output.event.execution_time == output.event.duration_s
    assert result == Review(title="Dune", rating=4.5)
    assert usage > 0


async def test_agent_as_tool_and_tool_func(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("planner", {"task": "ship it"})),
        Reply.text("Plan: step 1."),
        Reply.text("Here is the plan: step 1."),
    )

    @tool(name="planner", description="Plan a task")
    @llm_function(llm_interface=llm, temperature=0.3)
    async def planner(task: str) -> str:
        """Plan the task.

        Args:
            task: The task.
        """
        return ""

    @llm_chat(llm_interface=llm, toolkit=[planner])
    async def supervisor(message: str, history: HistoryList | None = None):  # type: ignore[no-untyped-def]
        """Delegate planning."""

    history: MessageList = []
    with anyio.fail_after(GUARD):
        async for _text, updated in supervisor("Plan", history):
            history = updated
    assert history[-1]["content"] == "Here is the plan: step 1."
    assert mock_server.requests[1].json["temperature"] == 0.3
    # Tool.func is the wrapped callable
    assert get_weather.func is get_weather.__wrapped__
    assert await get_weather.func(city="Paris") == {"city": "Paris", "condition": "sunny"}


async def test_multimodal_tool_result(
    mock_server: MockLLMServer, llm: OpenAICompatible, tmp_path: Path
) -> None:
    image = tmp_path / "img.png"
    image.write_bytes(
        bytes.fromhex(
            "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
            "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
        )
    )
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("get_image", {"image_path": str(image)})),
        Reply.text("A dot."),
    )

    @tool(name="get_image", description="Load an image")
    async def get_image(image_path: str) -> tuple[str, ImgPath]:
        """Load.

        Args:
            image_path: The path.
        """
        return "Look at this", ImgPath(image_path, detail="low")

    @llm_function(llm_interface=llm, toolkit=[get_image], timeout=600)
    async def describe(image_path: str) -> str:
        """Describe the image."""
        return ""

    with anyio.fail_after(GUARD):
        assert await describe(str(image)) == "A dot."
    last = json.dumps(mock_server.requests[-1].json)
    assert "image_url" in last
    assert "timeout" not in mock_server.requests[-1].json


def test_timeout_given_twice_is_an_error() -> None:
    with pytest.raises(DecoratorError, match="once"):
        llm_function(llm_interface=None, timeout=1, request_timeout=2)  # type: ignore[arg-type]


def test_module_paths_and_helpers() -> None:
    assert ABORT_SIGNAL_PARAM == "_abort_signal"
    assert AbortSignal().aborted is False
    app_log("compat test")  # standard logging, no configuration needed
    flush_all_observations()
    for path in ("simplellmfunc.interface", "simplellmfunc.logger.app_log"):
        importlib.import_module(path)
    from simplellmfunc.interface import OpenAIResponsesCompatible
    from simplellmfunc.runtime.selfref import SelfReference

    assert OpenAIResponsesCompatible.__name__ == "OpenAIResponsesCompatible"
    assert SelfReference.__module__.startswith("simplellmfunc.builtin")


@pytest.mark.parametrize(
    ("module", "name", "replacement"),
    [
        ("simplellmfunc.observability", "langfuse_client", "TraceRecorder"),
        ("simplellmfunc.runtime.selfref", "register_self_reference_primitives", "attach_self"),
        ("simplellmfunc.logger", "setup_logger", "logging"),
    ],
)
def test_gone_names_name_their_replacement(module: str, name: str, replacement: str) -> None:
    with pytest.raises(UnsupportedError, match=replacement):
        getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError):
        _ = importlib.import_module(module).no_such_name


def test_tui_decorates_an_agent_into_a_launcher() -> None:
    """``@tui()`` resolves the message and history parameters (SimpleLLMFunc's rule) and
    refuses an agent with no message parameter; the app itself is tested in test_chat_ui."""
    pytest.importorskip("textual")
    from simplellmfunc import tui
    from simplellmfunc.runtime.selfref import SELF_REFERENCE_TOOLKIT_OVERRIDE_TEMPLATE_PARAM
    from simplellmfunc.utils.tui import ToolEventRenderUpdate, ToolRenderSnapshot

    async def agent(message: str, history: list | None = None):
        yield message

    assert callable(tui()(agent))
    with pytest.raises(ValueError, match="non-history parameter"):
        tui()(lambda history=None: None)
    assert ToolRenderSnapshot("t", "c", {}).status == "running"
    assert ToolEventRenderUpdate(append_output="x").append_output == "x"
    assert SELF_REFERENCE_TOOLKIT_OVERRIDE_TEMPLATE_PARAM == "__self_reference_toolkit_override"
    assert issubclass(UnsupportedError, NotImplementedError)


RUNTIME_TOUR = """
print("backends:", runtime.list_backends())
print("listed:", "constants.get" in runtime.list_primitives())
specs = runtime.list_primitive_specs(format="dict")
print("described:", [s["description"] for s in specs if s["name"] == "constants.get"])
print("xml:", "<name>constants.get</name>" in runtime.list_primitive_specs(contains="constants."))
print("app_name:", runtime.constants.get("app_name"))
runtime.selfref.context.remember("Answer in bullet points.")
snapshot = runtime.selfref.context.inspect()
print("experiences:", [item["text"] for item in snapshot["experiences"]])
print("messages:", len(snapshot["messages"]))
payload = runtime.selfref.context.compact(
    goal="Demo cleanup",
    instruction="Keep the summary.",
    discoveries=["selfref is there by default"],
    completed=["read a constant"],
    current_status="ready",
    likely_next_work=["next milestone"],
    relevant_files_directories=["examples/"],
)
print("status:", payload["status"])
"""


async def test_runtime_primitives_the_simplellmfunc_way(tmp_path: Path) -> None:
    from simplellmfunc.builtin import PyRepl, SelfReference
    from simplellmfunc.builtin.pyrepl import PrimitiveCallContext
    from simplellmfunc.exceptions import UserError

    async with PyRepl(working_directory=tmp_path, log_dir=tmp_path / "logs") as repl:
        self_reference = repl.get_runtime_backend("selfref")
        assert isinstance(self_reference, SelfReference)
        assert repl.get_runtime_backend("selfref") is self_reference
        self_reference.bind_history(
            "agent_main",
            [
                {"role": "system", "content": "You are a helpful coding assistant."},
                {"role": "user", "content": "hello"},
            ],
        )
        constants = repl.pack("constants", backend={"app_name": "demo"})
        seen: list[PrimitiveCallContext] = []

        @constants.primitive("get", description="Read one constant.")
        def constants_get(ctx: PrimitiveCallContext, key: str) -> str | None:
            seen.append(ctx)
            return ctx.backend.get(key)  # type: ignore[no-any-return]

        repl.install_pack(constants)
        with pytest.raises(UserError, match="already installed"):
            repl.install_pack(constants)
        with pytest.raises(UnsupportedError, match="namespace"):
            repl.pack("other", backend={}, backend_name="elsewhere")
        assert repl.list_runtime_backends() == ["constants", "selfref"]
        with anyio.fail_after(GUARD * 3):
            result = await repl.execute(RUNTIME_TOUR)
    assert result["error"] is None, result
    out = result["stdout"]
    assert "backends: ['constants', 'selfref']" in out
    assert "listed: True" in out
    assert "xml: True" in out
    assert "described: ['Read one constant.']" in out
    assert "app_name: demo" in out
    assert "experiences: ['Answer in bullet points.']" in out
    assert "messages: 2" in out
    assert "status: applied" in out
    ctx = seen[0]
    assert (ctx.primitive_name, ctx.backend_name) == ("constants.get", "constants")
    assert ctx.get_backend("selfref") is self_reference
    contract = constants.get("get").contract  # type: ignore[union-attr]
    assert contract.startswith("get(key: ")  # ctx is not part of the model's contract
    assert contract.endswith(": Read one constant.")
    assert self_reference.commit_pending_compaction("agent_main") is None
    history = self_reference.snapshot_history("agent_main")
    assert [m["role"] for m in history] == ["system", "assistant"]
    assert "## Likely next work\n- next milestone" in history[1]["content"]


async def test_self_reference_key_alone_binds_the_toolkit_pyrepl(
    mock_server: MockLLMServer, llm: OpenAICompatible, tmp_path: Path
) -> None:
    from simplellmfunc.builtin import PyRepl, SelfReference

    code = (
        'runtime.selfref.context.remember("The user likes tea.")\n'
        'print("key:", runtime.selfref.context.inspect()["key"])'
    )
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("execute_code", {"code": code})),
        Reply.text("Noted."),
    )
    async with PyRepl(working_directory=tmp_path, log_dir=tmp_path / "logs") as repl:

        @llm_chat(llm_interface=llm, toolkit=repl.toolset, self_reference_key="agent_main")
        async def agent(message: str, history: HistoryList | None = None):  # type: ignore[no-untyped-def]
            """You are an agent with a Python REPL."""

        with anyio.fail_after(GUARD * 3):
            replies = [text async for text, _ in agent("Remember that I like tea.", [])]
        self_reference = repl.get_runtime_backend("selfref")
    assert replies[-1] == "Noted."
    assert isinstance(self_reference, SelfReference)
    assert [e["text"] for e in self_reference.get_experiences("agent_main")] == [
        "The user likes tea."
    ]
    stored = self_reference.get_history("agent_main")
    assert stored[-1] == {"role": "assistant", "content": "Noted."}
    tool_results = [
        m["content"] for m in mock_server.requests[-1].json["messages"] if m["role"] == "tool"
    ]
    assert "key: agent_main" in tool_results[0]
