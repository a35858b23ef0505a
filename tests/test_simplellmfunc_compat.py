"""SimpleLLMFunc-shaped user code (written here, in the shapes of its examples and README) runs
against the mock server with only the package name changed: module paths, type aliases, event
field names, ``Tool.func``, ``timeout=``, and the names that fail with their replacement."""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import anyio
import psutil
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
from simplellmfunc.hooks.stream import (
    filter_events,
    is_event_yield,
    is_response_yield,
    responses_only,
)
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

    async def replay() -> AsyncIterator[ReactOutput]:
        for output in outputs:
            yield output

    # SimpleLLMFunc's shapes: (response, messages) pairs; event_types= yields the events
    pairs = [(response, messages) async for response, messages in responses_only(replay())]
    assert pairs == [("Sunny, meow.", final.messages)]
    wanted = {ReActEventType.TOOL_CALL_END}
    picked = [e async for e in filter_events(replay(), event_types=wanted)]
    assert picked == ends


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


# --- SimpleLLMFunc compatibility II (issue 31): its public names and behaviours ------------------


def test_simplellmfunc_import_paths_exist() -> None:
    """Every module path and name SimpleLLMFunc's own tests and README import."""
    from simplellmfunc.builtin.file_tools import STALE_FILE_MESSAGE, FileToolset
    from simplellmfunc.hooks import (
        AgentInputRouter,
        EventBus,
        InputRouteResult,
        NoOpEventEmitter,
        ToolInputRequest,
        UserInputEvent,
        with_event_observer,
    )
    from simplellmfunc.interface.llm_interface import DEFAULT_CONTEXT_WINDOW
    from simplellmfunc.llm_decorator.llm_chat_decorator import llm_chat as chat
    from simplellmfunc.logger import log_context, push_error
    from simplellmfunc.runtime.selfref import (
        SELF_REFERENCE_FORK_TASK_TEMPLATE_PARAM,
        SELF_REFERENCE_KEY_OVERRIDE_TEMPLATE_PARAM,
        SelfReferenceMemoryHandle,
        SelfReferenceMemoryProxy,
        build_self_reference_pack,
    )
    from simplellmfunc.self_reference import SelfReference
    from simplellmfunc.tool import TOO_LONG_TO_FILE_MAX_TOKENS, Tool
    from simplellmfunc.tool import tool as tool_decorator
    from simplellmfunc.type.hooks import HookContext, ReActPhase, ToolResult
    from simplellmfunc.type.llm import LLMResponse, LLMStreamChunk, LLMUsage
    from simplellmfunc.type.message import ExtendedMessageParam, ReasoningDetail
    from simplellmfunc.type.multimodal import MultimodalContent, Text
    from simplellmfunc.type.tool_call import AccumulatedToolCall, ToolDefinition

    assert DEFAULT_CONTEXT_WINDOW == 200_000
    assert chat is llm_chat
    assert STALE_FILE_MESSAGE
    assert FileToolset
    assert SelfReference
    assert Tool
    assert TOO_LONG_TO_FILE_MAX_TOKENS > 0
    assert tool_decorator is tool
    assert ReActPhase.TOOL_CALL_START.is_tool_call_phase()
    assert not ReActPhase.REACT_LOOP_START.is_iteration_phase()
    assert Text("x").content == "x"
    assert SELF_REFERENCE_KEY_OVERRIDE_TEMPLATE_PARAM != SELF_REFERENCE_FORK_TASK_TEMPLATE_PARAM
    assert all(
        (HookContext, ToolResult, LLMResponse, LLMStreamChunk, LLMUsage, AccumulatedToolCall)
    )
    assert all((ExtendedMessageParam, ReasoningDetail, MultimodalContent, ToolDefinition))
    assert all((AgentInputRouter, EventBus, InputRouteResult, NoOpEventEmitter, ToolInputRequest))
    assert all((UserInputEvent, with_event_observer, log_context, push_error))
    assert all((SelfReferenceMemoryHandle, SelfReferenceMemoryProxy, build_self_reference_pack))
    # ``simplellmfunc.types`` is still the module of our own types.
    types = importlib.import_module("simplellmfunc.types")
    assert types.Text is Text


def test_simplellmfunc_tool_module_is_callable_as_the_decorator() -> None:
    """``import simplellmfunc.tool`` makes the package attribute the module: it must still work
    as ``@tool`` (``from simplellmfunc import tool``)."""
    import simplellmfunc
    import simplellmfunc.tool

    @simplellmfunc.tool(name="double")
    async def double(x: int) -> int:
        """Double it.

        Args:
            x: A number.
        """
        return 2 * x

    assert double.name == "double"


def test_type_tool_call_helpers_round_trip() -> None:
    from simplellmfunc.type import dict_to_tool_call, tool_call_to_dict

    data = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    call = dict_to_tool_call(data)
    assert (call.id, call.type, call.function.name, call.function.arguments) == (
        "c1",
        "function",
        "f",
        '{"a": 1}',
    )
    assert tool_call_to_dict(call) == data


def test_context_ops_round_trip() -> None:
    from simplellmfunc.runtime.selfref.context_ops import (
        build_context_messages_from_state_data,
        parse_context_compaction_summary,
        parse_context_messages,
        render_context_compaction_summary,
    )

    summary = {
        "goal": "G",
        "instruction": "I",
        "discoveries": ["d"],
        "completed": ["c"],
        "current_status": "S",
        "likely_next_work": ["n"],
        "relevant_files_directories": ["a.py"],
    }
    assert parse_context_compaction_summary(render_context_compaction_summary(summary)) == summary
    messages = [
        {"role": "system", "content": "Rules\n\n<experience>\n- [exp_1] Be brief\n</experience>"},
        {"role": "assistant", "content": render_context_compaction_summary(summary)},
        {"role": "user", "content": "next"},
    ]
    parsed = parse_context_messages(messages)
    assert parsed["base_system_prompt"] == "Rules"
    assert parsed["experiences"] == [{"id": "exp_1", "text": "Be brief"}]
    assert parsed["working_messages"] == [{"role": "user", "content": "next"}]
    assert build_context_messages_from_state_data(parsed) == messages


def test_log_context_adds_its_fields(caplog: pytest.LogCaptureFixture) -> None:
    from simplellmfunc.logger import log_context, push_error

    with caplog.at_level("INFO", logger="simplellmfunc.app"), log_context(trace_id="t-1"):
        push_error("boom", location="here")
    record = caplog.records[-1]
    assert record.levelname == "ERROR"
    assert record.simplellmfunc == {"trace_id": "t-1", "location": "here"}  # type: ignore[attr-defined]


async def test_hooks_input_router_observer_and_bus() -> None:
    from simplellmfunc.hooks import (
        AgentInputRouter,
        EventBus,
        NoOpEventEmitter,
        UserInputEvent,
        with_event_observer,
    )

    answered: dict[str, str] = {}
    router = AgentInputRouter(lambda rid, text: answered.setdefault(rid, text) == text)
    router.register_tool_request("call-1", "req-1", "Name: ")
    routed = router.route_input(UserInputEvent("Alice"))
    assert (routed.route, answered) == ("tool", {"req-1": "Alice"})
    assert router.route_input(UserInputEvent("hello")).chat_text == "hello"
    assert router.route_input(UserInputEvent("  ")).route == "noop"

    seen: list[object] = []

    async def observer(event: object) -> None:
        seen.append(event)

    start = CustomEvent("ping", {"n": 1})

    async def agent() -> AsyncIterator[object]:
        yield EventYield(start)
        yield ResponseYield("done", [])

    outputs = [o async for o in with_event_observer(observer)(agent)()]
    assert seen == [start]
    assert len(outputs) == 2

    bus = EventBus(session_id="s", agent_call_id="a")
    first = await bus.emit_event(start)
    second = await bus.emit_and_get(start)
    assert (first.origin.seq, second.origin.seq, first.origin.session_id) == (1, 2, "s")
    assert (first.origin.event_seq, second.origin.event_seq) == (1, 2)  # SimpleLLMFunc's name
    assert second.origin.parent_agent_call_id is second.origin.parent_call_id
    assert second.origin.as_dict()["event_seq"] == 2
    assert second.origin.as_dict()["agent_call_id"] == "a"
    assert bus.get_nowait() is first
    assert bus.get_nowait() is None
    bus.close()
    collecting = ToolEventEmitter()
    await collecting.emit_batch([("step1", 1), ("step2", 2)])
    assert collecting.has_events()
    assert [o.event.event_name for o in await collecting.get_events()] == ["step1", "step2"]
    assert not collecting.has_events()  # get_events() drains, as SimpleLLMFunc's does
    assert await collecting.get_events() == []
    await collecting.emit("step3")
    assert [o.event.event_name for o in await collecting.get_events()] == ["step3"]
    silent = NoOpEventEmitter()
    await silent.emit("x")
    assert await silent.get_events() == []
    assert not silent.live


def test_memory_clear_keeps_the_system_prompt_and_unbound_keys_raise() -> None:
    from simplellmfunc.builtin import SelfReference
    from simplellmfunc.exceptions import UnboundKeyError, UserError

    ref = SelfReference()
    with pytest.raises(KeyError, match="is not bound") as caught:
        _ = ref.memory["agent_main"]
    assert isinstance(caught.value, UnboundKeyError | UserError)
    ref.bind_history(
        "agent_main",
        [{"role": "system", "content": "Rule A"}, {"role": "user", "content": "hello"}],
    )
    handle = ref.memory["agent_main"]
    assert handle.clear() == 1
    assert handle.all() == [{"role": "system", "content": "Rule A"}]
    ref.close()


def test_a_history_bound_inside_a_tool_call_stores_its_settled_part() -> None:
    """SimpleLLMFunc binds the history of a turn caught inside ``execute_code`` (the assistant
    tool call has no result yet) before a fork: it is accepted, and what is stored (what forks
    and ``snapshot_history`` see) is the valid history before the call in flight."""
    from simplellmfunc.builtin import SelfReference
    from simplellmfunc.exceptions import InvalidHistoryError

    def call(call_id: str) -> dict[str, object]:
        return {"id": call_id, "type": "function", "function": {"name": "f", "arguments": "{}"}}

    seed = [{"role": "system", "content": "S"}, {"role": "user", "content": "seed"}]
    in_flight = {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b")]}
    ref = SelfReference()
    ref.bind_history("agent_main", [*seed, in_flight])
    assert ref.snapshot_history("agent_main") == seed
    partly = [*seed, in_flight, {"role": "tool", "tool_call_id": "a", "content": "1"}]
    ref.bind_history("agent_main", partly)
    assert ref.snapshot_history("agent_main") == seed
    answered = [*partly, {"role": "tool", "tool_call_id": "b", "content": "2"}]
    ref.bind_history("agent_main", answered)
    assert ref.snapshot_history("agent_main") == answered  # a settled turn is kept whole
    with pytest.raises(InvalidHistoryError, match="has no result"):
        ref.bind_history("k", [*seed, in_flight, {"role": "user", "content": "next"}])
    with pytest.raises(InvalidHistoryError):
        ref.bind_history("k", [{"role": "robot"}, in_flight])
    ref.close()


def test_primitive_packs_install_by_name(tmp_path: Path) -> None:
    from simplellmfunc.builtin import PyRepl, SelfReference
    from simplellmfunc.exceptions import UnknownPackError, UserError

    repl = PyRepl(tmp_path)
    for name in ("unknown_pack", "self_reference"):  # self_reference: SimpleLLMFunc's old name
        with pytest.raises(KeyError, match="primitive pack") as caught:
            repl.install_primitive_pack(name)
        assert isinstance(caught.value, UnknownPackError | UserError)
    with pytest.raises(ValueError, match="PrimitivePack"):
        repl.install_primitive_pack(42)  # type: ignore[arg-type]
    memory = SelfReference()
    repl.install_primitive_pack("selfref", backend=memory)
    assert repl.get_runtime_backend("selfref") is memory
    assert repl.list_runtime_backends() == ["selfref"]
    repl.close()


def test_a_bad_file_workspace_is_a_value_error(tmp_path: Path) -> None:
    from simplellmfunc.builtin.file_tools import FileToolset

    (tmp_path / "file.txt").write_text("x")
    for bad in (tmp_path / "missing", tmp_path / "file.txt"):
        with pytest.raises(ValueError, match="workspace is not an existing directory"):
            FileToolset(bad)


def test_pyrepl_bad_arguments_are_value_errors(tmp_path: Path) -> None:
    from simplellmfunc.builtin import PyRepl
    from simplellmfunc.exceptions import ArgumentValueError, UserError

    assert issubclass(ArgumentValueError, UserError)
    assert issubclass(ArgumentValueError, ValueError)
    with pytest.raises(ValueError, match="execution_timeout_seconds"):
        PyRepl(execution_timeout_seconds=0)
    with pytest.raises(ValueError, match="input_idle_timeout_seconds"):
        PyRepl(input_idle_timeout_seconds=0)
    (tmp_path / "file.txt").write_text("x")
    for bad in (tmp_path / "file.txt", tmp_path / "missing", 123):
        with pytest.raises(ValueError, match="working_directory"):
            PyRepl(working_directory=bad)  # type: ignore[arg-type]
    repl = PyRepl(tmp_path, execution_timeout_seconds=7)
    assert repl.execution_timeout_seconds == 7
    assert repl.input_idle_timeout_seconds == PyRepl.DEFAULT_INPUT_IDLE_TIMEOUT_SECONDS


def test_pyrepl_option_bags_and_flat_names_are_one_shape(tmp_path: Path) -> None:
    """``PyRepl(limits=..., kernel=...)`` (the public bags) and SimpleLLMFunc's flat keywords
    build the same REPL; a flat keyword given overrides its field; the defaults are the bags'
    (sandboxed); ``fork()`` keeps both bags; a wrong bag is a ``ValueError``."""
    from simplellmfunc.builtin import CellLimits, KernelSettings, PyRepl
    from simplellmfunc.sandbox import SandboxPolicy

    flat = PyRepl(tmp_path, 7, 9, max_output_tokens=500, startup_timeout_seconds=30)
    bags = PyRepl(
        limits=CellLimits(execution_timeout=7, input_idle_timeout=9, max_output_tokens=500),
        kernel=KernelSettings(cwd=str(tmp_path), startup_timeout=30),
    )
    for repl in (flat, bags):
        assert (repl.execution_timeout_seconds, repl.input_idle_timeout_seconds) == (7, 9)
        assert repl.working_directory == tmp_path
        assert isinstance(repl.sandbox, SandboxPolicy)  # secure by default, either way
        assert repl._kernel.settings == bags._kernel.settings
        assert repl._limits == bags._limits
    override = PyRepl(limits=CellLimits(execution_timeout=7), execution_timeout_seconds=3)
    assert override.execution_timeout_seconds == 3
    unsandboxed = PyRepl(kernel=KernelSettings(sandbox=SandboxPolicy()), sandbox=False)
    assert unsandboxed.sandbox is None
    assert unsandboxed.working_directory == Path.cwd()  # no sandbox: the current directory
    clone = bags.fork()
    assert (clone._limits, clone._kernel.settings) == (bags._limits, bags._kernel.settings)
    with pytest.raises(ValueError, match=r"CellLimits\.execution_timeout"):
        CellLimits(execution_timeout=0)
    with pytest.raises(ValueError, match=r"KernelSettings\.max_deaths"):
        KernelSettings(max_deaths=0)
    with pytest.raises(ValueError, match="limits must be a CellLimits"):
        PyRepl(limits={"execution_timeout": 5})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="working_directory"):
        PyRepl(kernel=KernelSettings(cwd=str(tmp_path / "missing")))
    for repl in (flat, bags, override, unsandboxed, clone):
        repl.close()


def test_provider_json_accepts_a_zero_retry_delay(tmp_path: Path) -> None:
    entry = {"model_name": "m", "api_keys": ["sk-x"], "base_url": "http://127.0.0.1:9"}
    path = tmp_path / "provider.json"
    path.write_text(json.dumps({"p": [{**entry, "retry_delay": 0.0}]}), encoding="utf-8")
    model = OpenAICompatible.load_from_json_file(str(path))["p"]["m"]
    assert model.model_name == "m"


async def _input_request(emitter: ToolEventEmitter, seen: set[str]) -> tuple[str, str]:
    with anyio.fail_after(GUARD):
        while True:
            for output in await emitter.get_events():
                event = output.event
                if (
                    isinstance(event, CustomEvent)
                    and event.event_name == "kernel_input_request"
                    and event.data["request_id"] not in seen
                ):
                    seen.add(event.data["request_id"])
                    return event.data["request_id"], event.data["prompt"]
            await anyio.sleep(0.02)


SELF_DESCRIPTION = """\
specs = runtime.list_primitive_specs(format='dict')
names = [item['name'] for item in specs]
one = runtime.get_primitive_spec('selfref.context.remember', format='dict')
params = [(p['name'], p['kind'], p['required']) for p in one['parameters']]
print(params[0] == ('text', 'positional_or_keyword', True))
print({'runtime.list_primitives', 'runtime.get_primitive_spec'} <= set(names))
print('selfref.context.inspect' in names)
picked = runtime.list_primitive_specs(names=['selfref.context.inspect'], format='dict')
print([item['name'] for item in picked] == ['selfref.context.inspect'])
prefixed = runtime.list_primitive_specs(prefix='runtime.', format='dict')
print(len(prefixed) >= 3 and all(i['name'].startswith('runtime.') for i in prefixed))
xml = runtime.get_primitive_spec('runtime.list_primitives')
print(xml.startswith('<primitive_spec>') and '<name>runtime.list_primitives</name>' in xml)
print('<primitive_specs>' in runtime.list_primitive_specs(names=['selfref.context.inspect']))
print(runtime.selfref.context.inspect()['active_key'] == 'agent_main')
try:
    runtime.get_primitive_spec('nope.nothing')
except KeyError:
    print(True)
"""


async def test_pyrepl_behaves_as_simplellmfuncs(tmp_path: Path) -> None:
    """One kernel, SimpleLLMFunc's behaviours: per-call timeout, the text summary of
    execute_code, one kernel_stdout event per print, input() through a hand-made emitter
    answered with ``PyRepl.submit_input`` on the class (waiting not counted in the timeout),
    the idle timeout message, ``remember(text=...)``, the kernel's self-description
    (``runtime.get_primitive_spec``, ``names=`` / ``prefix=``, parameter kinds, XML, the
    "Parameter requirements" hint of a bad call, ``inspect()["active_key"]``), and a
    synchronous ``close()``."""
    from simplellmfunc.builtin import CellLimits, PyRepl

    # The idle timeout comes from the option bag (the flat name is the same field).
    repl = PyRepl(tmp_path, limits=CellLimits(input_idle_timeout=1.5), log_dir=tmp_path / "logs")
    try:
        timed = await repl.execute("import time\ntime.sleep(2)", timeout_seconds=0.3)
        assert timed["success"] is False
        assert "0.3 seconds" in timed["error"]
        with pytest.raises(ValueError, match="timeout_seconds"):
            await repl.execute("1", timeout_seconds=0)

        execute = next(t for t in repl.toolset if t.name == "execute_code")
        summary = await execute.run("print('hello')")
        assert isinstance(summary, str)
        assert "Execution succeeded" in summary
        assert "hello" in summary
        assert summary["success"] is True  # the result dict is there too

        emitter = ToolEventEmitter()
        await repl.execute("for i in range(3):\n    print(f'line {i}')", event_emitter=emitter)
        stdout = [
            o.event.data["text"]
            for o in await emitter.get_events()
            if isinstance(o.event, CustomEvent) and o.event.event_name == "kernel_stdout"
        ]
        assert stdout == ["line 0\n", "line 1\n", "line 2\n"]

        emitter = ToolEventEmitter()
        seen: set[str] = set()
        async with anyio.create_task_group() as tg:
            results: list[dict[str, object]] = []

            async def run() -> None:
                code = "name = input('Name: ')\nprint(f'Hello, {name}!')"
                results.append(await repl.execute(code, event_emitter=emitter, timeout_seconds=0.5))

            tg.start_soon(run)
            request_id, prompt = await _input_request(emitter, seen)
            assert prompt == "Name: "
            await anyio.sleep(0.8)  # longer than the execution timeout: waiting is not counted
            assert PyRepl.submit_input(request_id, "Alice") is True
        assert results[0]["success"] is True
        assert "Hello, Alice!" in str(results[0]["stdout"])

        idle = await repl.execute("input('Value: ')", event_emitter=ToolEventEmitter())
        assert idle["error"] == "Input request timed out after 1.5 seconds"
        assert "Input request timed out after 1.5 seconds" in idle["stderr"]

        memory = repl.get_runtime_backend("selfref")
        memory.bind_history("agent_main", [{"role": "user", "content": "seed"}])
        remembered = await repl.execute(
            "runtime.selfref.context.remember(text='Rule B')\n"
            "print(runtime.selfref.context.inspect()['experiences'][0]['text'])"
        )
        assert remembered["stdout"].strip() == "Rule B", remembered

        described = await repl.execute(SELF_DESCRIPTION)
        assert described["success"] is True, described
        assert described["stdout"].split() == ["True"] * 9, described["stdout"]
        for code, needs in (
            ("runtime.get_primitive_spec()", "name(str, required)"),
            ("runtime.selfref.context.remember()", "text(str, required)"),
            ("import runtime", "'runtime' cannot be imported"),
        ):
            refused = await repl.execute(code)
            assert refused["success"] is False
            assert needs in str(refused["error"]), refused
            if "import" not in code:
                assert "Parameter requirements:" in str(refused["error"])
        pid = repl._kernel.session.pid  # type: ignore[union-attr]
    finally:
        closing = repl.close()  # synchronous: the kernel is gone when it returns
    assert not repl.is_running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    await closing  # ``await repl.close()`` keeps working


def test_an_unclosed_pyrepl_never_hangs_the_interpreter(tmp_path: Path) -> None:
    """A PyRepl left open (garbage-collected, then the interpreter exits) kills its kernel and
    exits at once: no zmq context termination waits for the gone kernel."""
    import subprocess
    import sys

    script = (
        "import anyio, gc, os, sys\n"
        "from simplellmfunc.builtin import PyRepl\n"
        "async def main():\n"
        "    kept = PyRepl(sys.argv[1], sandbox=False)\n"
        "    dropped = PyRepl(sys.argv[1], sandbox=False)\n"
        "    await kept.execute('x = 1')\n"
        "    await dropped.execute('y = 2')\n"
        "    print(kept._kernel.session.pid, dropped._kernel.session.pid, flush=True)\n"
        "    del dropped\n"
        "    gc.collect()\n"
        "    return kept\n"
        "repl = anyio.run(main)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    for pid in map(int, done.stdout.split()):
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


async def test_langfuse_receives_the_spans_of_a_run(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    """The ``[langfuse]`` extra: the langfuse client sends our GenAI spans (one run: agent,
    chat and tool spans) to its OTLP endpoint, here a local receiver on loopback."""
    pytest.importorskip("langfuse")
    import gzip
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from simplellmfunc.observability import (
        LangfuseConfig,
        flush_all_observations,
        langfuse_tracing,
        shutdown_langfuse,
    )

    received: list[tuple[str, str | None, bytes]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            received.append((self.path, self.headers.get("authorization"), body))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("get_weather", {"city": "Paris"})),
        Reply.text("Sunny."),
    )

    @llm_chat(llm_interface=llm, toolkit=[get_weather])
    async def assistant(message: str, history: HistoryList | None = None):  # type: ignore[no-untyped-def]
        """You are helpful."""

    base = f"http://127.0.0.1:{server.server_port}"
    try:
        tracing = langfuse_tracing(LangfuseConfig("pk-lf-test", "sk-lf-test", base, True))
        with anyio.fail_after(GUARD), tracing.agent_run("assistant"):
            async for _ in assistant("Weather in Paris?"):
                pass
        await anyio.to_thread.run_sync(flush_all_observations)
    finally:
        await anyio.to_thread.run_sync(shutdown_langfuse)
        server.shutdown()
        server.server_close()
        thread.join(GUARD)
    names = []
    for path, authorization, body in received:
        assert path == "/api/public/otel/v1/traces"
        assert authorization
        assert authorization.startswith("Basic ")
        request = ExportTraceServiceRequest()
        request.ParseFromString(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)
        names += [s.name for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
    assert "invoke_agent assistant" in names
    assert "execute_tool get_weather" in names
    assert any(name.startswith("chat ") for name in names)


# --- SimpleLLMFunc compatibility III: forks of a bound agent instance ----------------------------


async def test_a_bound_agent_instance_forks_from_python() -> None:
    """``bind_agent_instance`` + ``instance.fork`` / ``fork_spawn`` / ``fork_gather_all``: the
    fork starts from the source key's history on a key of its own (the source is untouched), a
    fork made inside the agent call starts from the fork's key, a failure is raised (with its
    lifecycle events), an invalid returned history fails the fork and is never stored."""
    from simplellmfunc.builtin import SelfReference
    from simplellmfunc.exceptions import InvalidHistoryError, UnboundAgentError

    ref = SelfReference()
    with pytest.raises(RuntimeError, match="No agent instance") as unbound:
        await ref.instance.fork("task")
    assert isinstance(unbound.value, UnboundAgentError)
    seed = [{"role": "user", "content": "seed"}]
    ref.bind_history("agent_main", seed)
    seen: list[tuple[str, list[dict[str, object]]]] = []

    keys: list[str] = []

    async def agent(message: str, history: list[dict[str, object]] | None = None):  # type: ignore[no-untyped-def]
        seen.append((message, list(history or [])))
        keys.append(ref.resolve_history_key())  # the running fork's key
        if message == "boom":
            raise LookupError("boom")
        if message == "nest":
            inner = await ref.instance.fork("leaf")
            yield inner, list(history or [])
            return
        if message == "bad":
            yield "x", [{"role": "tool", "tool_call_id": "nope", "content": "1"}]
            return
        yield f"done:{message}", [*(history or []), {"role": "assistant", "content": message}]

    ref.bind_agent_instance(agent, default_memory_key="agent_main")
    with anyio.fail_after(GUARD):
        one = await ref.instance.fork("a", include_history=True)
        assert (one["status"], one["response"], one["result"]) == ("completed", "done:a", "done:a")
        assert one["source_memory_key"] == "agent_main"
        assert one["memory_key"].startswith("agent_main::fork::")
        assert one["history"] == [*seed, {"role": "assistant", "content": "a"}]
        assert one["history_count"] == 2
        assert one["history_included"] is True
        assert seen[0] == ("a", seed)
        assert keys[0] == one["memory_key"]
        assert ref.snapshot_history("agent_main") == seed

        outer = await ref.instance.fork("nest")
        inner = outer["response"]
        assert inner["source_memory_key"] == outer["memory_key"]
        assert inner["parent_fork_id"] == outer["fork_id"]
        assert inner["depth"] == 2
        assert inner["memory_key"].startswith(outer["memory_key"] + "::fork::")

        emitter = ToolEventEmitter()
        with pytest.raises(LookupError, match="boom"):
            await ref.instance.fork("boom", _event_emitter=emitter)
        names = [e.event.event_name for e in await emitter.get_events()]
        assert names == ["selfref_fork_start", "selfref_fork_error", "selfref_fork_end"]

        with pytest.raises(InvalidHistoryError):
            await ref.instance.fork("bad")
        bad = next(h for h in ref.get_forks("agent_main").values() if h["task"] == "bad")
        assert bad["status"] == "failed"
        assert ref.get_history(bad["memory_key"]) == seed  # the inherited, valid history stays

        # Plain host code has no task group: spawned forks start when gathered.
        first = await ref.instance.fork_spawn("s1")
        second = await ref.instance.fork_spawn("s2")
        assert first["status"] == "queued"
        assert ref.instance.has_pending_fork_tasks()
        both = await ref.instance.fork_gather_all([first, second["fork_id"]])
    assert [both[f["fork_id"]]["response"] for f in (first, second)] == ["done:s1", "done:s2"]
    assert not ref.instance.has_pending_fork_tasks()
    with pytest.raises(KeyError):
        await ref.instance.fork_gather_all("fork_99")
    with pytest.raises(ValueError):
        ref.bind_agent_instance("not callable")  # type: ignore[arg-type]
    assert ref.resolve_history_key() == "agent_main"  # the bound default key
    with pytest.raises(KeyError):
        ref.resolve_history_key("nowhere")
    with pytest.raises(ValueError, match="without preceding assistant tool_calls"):
        ref.memory["agent_main"].replace([{"role": "tool", "tool_call_id": "x", "content": "{}"}])
    alone = SelfReference()
    alone.bind_history("k1", [])
    assert alone.resolve_history_key() == "k1"
    alone.bind_history("k2", [])
    with pytest.raises(ValueError, match="history key is required"):
        alone.resolve_history_key()
    ref.close()


async def test_a_bound_chat_agent_forks_on_its_own_key_with_a_fresh_kernel(
    mock_server: MockLLMServer, llm: OpenAICompatible, tmp_path: Path
) -> None:
    """An ``@llm_chat`` agent bound as the instance runs on the engine: its memory hook moves to
    the fork's key (the agent's own key is not written), it gets a fresh PyRepl that is closed
    when the fork ends, and the fork's stored history is the valid transcript."""
    from simplellmfunc.builtin import PyRepl, SelfReference

    mock_server.script(
        Reply.tool_calls(ToolCallSpec("execute_code", {"code": "print(6 * 7)"})),
        Reply.text("forty-two"),
    )
    me = psutil.Process()
    async with PyRepl(working_directory=tmp_path, log_dir=tmp_path / "logs") as repl:
        ref = repl.get_runtime_backend("selfref")
        assert isinstance(ref, SelfReference)

        @llm_chat(llm_interface=llm, toolkit=repl.toolset, self_reference=ref,
                  self_reference_key="agent_main")  # fmt: skip
        async def agent(message: str, history: HistoryList | None = None):  # type: ignore[no-untyped-def]
            """You are an agent with a Python REPL."""

        ref.bind_history("agent_main", [{"role": "user", "content": "earlier"}])
        assert ref.get_agent_instance() is agent  # @llm_chat(self_reference=ref) binds it
        await repl.execute("pass")  # the agent's own kernel, to tell it from the fork's
        before = {p.pid for p in me.children(recursive=True)}
        with anyio.fail_after(GUARD * 3):
            report = await ref.instance.fork("compute 6*7", include_history=True)
        assert {p.pid for p in me.children(recursive=True)} <= before  # the fork's is gone
    assert (report["status"], report["response"]) == ("completed", "forty-two")
    assert ref.get_history("agent_main") == [{"role": "user", "content": "earlier"}]
    stored = ref.get_history(report["memory_key"])
    assert stored[-1] == {"role": "assistant", "content": "forty-two"}
    assert [m["role"] for m in stored[1:]] == ["user", "user", "assistant", "tool", "assistant"]
    tool_result = next(m for m in stored if m["role"] == "tool")
    assert "42" in str(tool_result["content"])


async def test_kernel_forks_outside_a_turn_call_the_bound_agent(tmp_path: Path) -> None:
    """``runtime.selfref.fork.spawn`` in a cell outside an ``@llm_chat`` turn calls the bound
    agent (SimpleLLMFunc's code-act forks): handles/ids/lists gather, ``include_history`` is a
    gather option only, lifecycle events reach the cell's emitter, and a fork the cell did not
    gather is cancelled when the cell ends."""
    from simplellmfunc.builtin import PyRepl, SelfReference

    async def agent(message: str, history: list[dict[str, object]] | None = None):  # type: ignore[no-untyped-def]
        if message == "slow":
            await anyio.sleep(30)
        return {"task": message}, [*(history or []), {"role": "assistant", "content": message}]

    async with PyRepl(working_directory=tmp_path, log_dir=tmp_path / "logs") as repl:
        ref = repl.get_runtime_backend("selfref")
        assert isinstance(ref, SelfReference)
        ref.bind_history("agent_main", [{"role": "user", "content": "seed"}])
        ref.bind_agent_instance(agent, default_memory_key="agent_main")
        emitter = ToolEventEmitter()
        with anyio.fail_after(GUARD * 3):
            out = await repl.execute(
                "hs = [runtime.selfref.fork.spawn('a'), runtime.selfref.fork.spawn('b')]\n"
                "print([h['status'] for h in hs])\n"
                "r = runtime.selfref.fork.gather_all(hs, include_history=True)\n"
                "print(sorted(v['response']['task'] for v in r.values()))\n"
                "print([v['history_count'] for v in r.values()])\n"
                "slow = runtime.selfref.fork.spawn('slow')\n",
                event_emitter=emitter,
            )
            assert out["success"] is True, out
            assert out["stdout"].splitlines() == [
                "['running', 'running']",
                "['a', 'b']",
                "[2, 2]",
            ]
            refused = await repl.execute("runtime.selfref.fork.spawn('c', include_history=True)")
            assert "does not accept include_history" in str(refused["error"])
            later = await repl.execute(
                "print(runtime.selfref.fork.gather_all('fork_3')['fork_3']['status'])"
            )
        assert later["stdout"].strip() == "cancelled"
    names = [e.event.event_name for e in await emitter.get_events()]
    assert names.count("selfref_fork_spawned") == 3
    assert names.count("selfref_fork_end") == 3


# --- SimpleLLMFunc compatibility IV: the module paths its own tests import ----------------------


async def test_simplellmfunc_module_paths_are_our_objects(caplog: pytest.LogCaptureFixture) -> None:
    """``tool.tool``, ``llm_chat_decorator.DEFAULT_MAX_TOOL_CALLS``, ``llm_decorator.utils.tools``,
    ``logger.context_manager``, ``APIKeyPool(api_keys=...)``; ``base.tool_call.extraction``
    names the replacement."""
    import simplellmfunc
    from simplellmfunc import APIKeyPool, tools
    from simplellmfunc.exceptions import ConfigError

    tool_module = importlib.import_module("simplellmfunc.tool.tool")
    from simplellmfunc.tool import TOO_LONG_TO_FILE_MAX_TOKENS, Tool
    from simplellmfunc.tool import tool as tool_decorator

    # importing the submodule left the package's ``tool`` the decorator
    assert tool_decorator is tools.tool
    assert simplellmfunc.tool.tool is tools.tool
    assert (tool_module.Tool, tool_module.tool) == (Tool, tools.tool)
    assert tool_module.TOO_LONG_TO_FILE_MAX_TOKENS == TOO_LONG_TO_FILE_MAX_TOKENS

    from simplellmfunc.llm_decorator.llm_chat_decorator import DEFAULT_MAX_TOOL_CALLS
    from simplellmfunc.llm_decorator.utils.tools import process_tools

    assert DEFAULT_MAX_TOOL_CALLS is None

    def shout(text: str) -> str:
        """Shout.

        Args:
            text: What to shout.
        """
        return text.upper()

    entries, runs = process_tools([get_weather, shout], "supervisor")
    assert entries is not None
    assert [e["function"]["name"] for e in entries] == ["get_weather", "shout"]
    assert entries[1]["function"]["parameters"]["properties"]["text"]["type"] == "string"
    assert await runs["shout"](text="hi") == "HI"
    assert process_tools(None, "x") == (None, {})

    from simplellmfunc.logger import app_log, log_context
    from simplellmfunc.logger.context_manager import (
        get_current_context_attribute,
        get_current_trace_id,
        set_current_context_attribute,
    )

    with caplog.at_level("INFO", logger="simplellmfunc.app"), log_context(trace_id="t-2"):
        assert get_current_trace_id() == "t-2"
        set_current_context_attribute("user_id", "u-1")
        assert get_current_context_attribute("user_id") == "u-1"
        app_log("hello")
    assert caplog.records[-1].simplellmfunc == {"trace_id": "t-2", "user_id": "u-1"}
    assert get_current_context_attribute("user_id") is None

    assert APIKeyPool(api_keys=["k-1", "k-2"], provider_id="p").keys == ("k-1", "k-2")
    with pytest.raises(ConfigError, match="not both"):
        APIKeyPool(["k"], api_keys=["k"])
    with pytest.raises(ConfigError, match="at least one"):
        APIKeyPool()

    with pytest.raises(UnsupportedError, match="accumulate_tool_calls_from_chunks"):
        from simplellmfunc.base.tool_call.extraction import (  # noqa: F401
            accumulate_tool_calls_from_chunks,
        )


def test_a_langfuse_trace_context_is_joined_by_traced_runs() -> None:
    """``observability.langfuse_client.set_langfuse_trace_context``: a run traced by
    ``langfuse_tracing`` outside any span joins that trace, under that parent span."""
    pytest.importorskip("langfuse")
    from simplellmfunc.exceptions import ArgumentValueError
    from simplellmfunc.observability import LangfuseConfig, langfuse_tracing, shutdown_langfuse
    from simplellmfunc.observability.langfuse_client import (
        get_langfuse_trace_context,
        reset_langfuse_trace_context,
        set_langfuse_trace_context,
    )

    trace_id, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    try:
        tracing = langfuse_tracing(LangfuseConfig())
        assert get_langfuse_trace_context() is None
        token = set_langfuse_trace_context({"trace_id": trace_id, "parent_span_id": parent})
        assert get_langfuse_trace_context() == {"trace_id": trace_id, "parent_span_id": parent}
        with tracing.agent_run("assistant"):
            inside = get_langfuse_trace_context()
        assert inside is not None
        assert inside["trace_id"] == trace_id
        assert inside["parent_span_id"] != parent  # the run's own span
        reset_langfuse_trace_context(token)
        reset_langfuse_trace_context(token)  # used twice: ignored, as in SimpleLLMFunc
        assert get_langfuse_trace_context() is None
        with tracing.agent_run("assistant"):
            fresh = get_langfuse_trace_context()
        assert fresh is not None
        assert fresh["trace_id"] != trace_id
        with pytest.raises(ArgumentValueError, match="32 hex digits"):
            set_langfuse_trace_context({"trace_id": "trace-root"})
    finally:
        shutdown_langfuse()


async def test_llm_chat_strict_signature_checks_the_canonical_shape(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    """``strict_signature=True`` is SimpleLLMFunc's decorator option, not an LLM body parameter:
    a non-canonical signature fails at decoration with a TypeError naming what is wrong."""
    for match, signature in [
        ("first parameter", "message: str, history=None"),
        ("second parameter to be annotated", "history, message"),
        ("second parameter name", "history, user_message: str"),
        ("only allows", "history, message: str, extra: int = 0"),
        ("requires", "history, *args"),
    ]:
        namespace: dict[str, object] = {}
        exec(f"async def agent({signature}):\n    'Agent.'", namespace)
        with pytest.raises(DecoratorError, match=match) as caught:
            llm_chat(llm_interface=llm, strict_signature=True)(namespace["agent"])  # type: ignore[arg-type]
        assert isinstance(caught.value, TypeError)

    @llm_chat(llm_interface=llm, strict_signature=True)
    async def good(
        history: HistoryList, message: str, _template_params: dict[str, str] | None = None
    ):  # type: ignore[no-untyped-def]
        """Agent."""

    mock_server.script(Reply.text("Hi."))
    with anyio.fail_after(GUARD):
        async for _ in good([], "hello"):
            pass
    assert "strict_signature" not in mock_server.requests[-1].json


def test_tool_serialises_the_simplellmfunc_way() -> None:
    """``to_openai_tool``, ``Tool.serialize_tools``, ``tool_spec`` and
    ``build_system_prompt_injection``: SimpleLLMFunc's names for a tool's wire entry, its prompt
    metadata and its injected system-prompt text."""
    from simplellmfunc.exceptions import ToolDefinitionError
    from simplellmfunc.tool import Tool

    @tool(
        name="lookup",
        best_practices=["Ask for one key at a time."],
        prompt_injection_builder=lambda t: f"  {t.name} reads the settings table.\n",
    )
    async def lookup(key: str, default: str = "") -> str:
        """Read one setting.

        Args:
            key: The setting's name.
            default: Returned when it is missing.
        """
        return default

    entry = lookup.to_openai_tool()
    assert entry["type"] == "function"
    function = entry["function"]
    assert (function["name"], function["description"]) == ("lookup", "Read one setting.")
    assert function["parameters"]["required"] == ["key"]
    assert function["parameters"]["properties"]["key"]["description"] == "The setting's name."
    assert Tool.serialize_tools([lookup, get_weather]) == [entry, get_weather.to_openai_tool()]
    with pytest.raises(ToolDefinitionError, match="serialize_tools takes tools"):
        Tool.serialize_tools([len])  # type: ignore[list-item]

    assert lookup.tool_spec == {
        "name": "lookup",
        "description": "Read one setting.",
        "best_practices": ["Ask for one key at a time."],
    }
    assert lookup.build_system_prompt_injection() == "lookup reads the settings table."
    assert lookup.build_system_prompt_injection({"any": "context"}) == (
        "lookup reads the settings table."
    )
    assert lookup.guidance() == "- Ask for one key at a time.\nlookup reads the settings table."
    assert get_weather.build_system_prompt_injection() is None  # no builder
    blank = tool(name="blank", prompt_injection_builder=lambda t: "  \n")(get_weather.func)
    assert blank.build_system_prompt_injection() is None
    assert blank.guidance() == ""


async def test_pyrepl_prompt_names_its_installed_packs_and_no_host_path(
    mock_server: MockLLMServer, llm: OpenAICompatible, tmp_path: Path
) -> None:
    """``execute_code``'s system-prompt text lists the installed primitive packs (none: no
    text) and reaches the system prompt a run sends; the host's working directory is never in
    it. ``list_installed_packs`` and ``list_primitives`` are the host-side listings."""
    from simplellmfunc.builtin import PyRepl

    repl = PyRepl(working_directory=tmp_path)
    execute = next(t for t in repl.toolset if t.name == "execute_code")
    assert execute.build_system_prompt_injection() is None
    assert repl.list_installed_packs() == []
    assert repl.list_primitives() == []

    pack = repl.pack("units", backend={"km": 1000}, guidance="units = unit conversions.")

    @pack.primitive("to_metres")
    def to_metres(ctx: object, value: float, unit: str) -> float:
        """Convert to metres."""
        return value * ctx.backend[unit]  # type: ignore[attr-defined]

    repl.install_pack(pack)
    prompt = execute.build_system_prompt_injection()
    assert prompt is not None
    assert "runtime.<namespace>.<name>(...)" in prompt
    assert "Installed primitive packs:\n- units: units = unit conversions." in prompt
    assert str(tmp_path) not in prompt
    assert tmp_path.name not in prompt
    mock_server.script(Reply.text("Noted."))

    @llm_chat(llm_interface=llm, toolkit=repl.toolset)
    async def helper(message: str, history: HistoryList | None = None):  # type: ignore[no-untyped-def]
        """You are a helper."""

    with anyio.fail_after(GUARD):
        async for _ in helper("Hi", []):
            pass
    system = mock_server.requests[-1].json["messages"][0]
    assert system["role"] == "system"
    assert f"### execute_code\n{prompt}" in system["content"]
    assert str(tmp_path) not in system["content"]
    assert repl.list_installed_packs() == ["units"]
    assert repl.list_primitives() == ["units.to_metres"]
    repl.get_runtime_backend("selfref")  # attaches the SelfReference pack
    assert repl.list_installed_packs() == ["selfref", "units"]
    assert "selfref.fork.spawn" in repl.list_primitives()
    assert "\n- selfref: " in (execute.build_system_prompt_injection() or "")
    repl.close()


async def test_execute_code_takes_a_timeout_capped_by_the_repl(tmp_path: Path) -> None:
    """``execute_code(code, timeout_seconds=...)``: the model may shorten one run's limit, never
    lengthen it past the REPL's own (a longer value is cut to it, and the model is told); a
    non-positive one is a failed call the model reads."""
    from simplellmfunc.builtin import PyRepl
    from simplellmfunc.exceptions import ToolRetry

    repl = PyRepl(tmp_path, execution_timeout_seconds=2, log_dir=tmp_path / "logs")
    execute = next(t for t in repl.toolset if t.name == "execute_code")
    parameters = execute.to_openai_tool()["function"]["parameters"]
    assert parameters["properties"]["timeout_seconds"]["type"] == "number"
    assert "timeout_seconds" not in parameters["required"]
    assert "limit of 2 seconds" in execute.description
    try:
        with anyio.fail_after(GUARD * 6):
            shorter = await execute.invoke(
                {"code": "import time\ntime.sleep(30)", "timeout_seconds": 0.5}
            )
            assert shorter["success"] is False
            assert "0.5 seconds" in shorter["error"]
            longer = await execute.invoke(
                {"code": "import time\ntime.sleep(30)", "timeout_seconds": 600}
            )
            assert longer["success"] is False
            assert "2 seconds" in longer["error"]
            assert "timeout_seconds=600 is above this REPL's limit; 2 was used." in longer
            quick = await execute.invoke({"code": "print('done')", "timeout_seconds": 600})
            assert quick["success"] is True
            assert "above this REPL's limit" in quick
            with pytest.raises(ToolRetry, match="timeout_seconds must be greater than 0"):
                await execute.invoke({"code": "1", "timeout_seconds": 0})
    finally:
        await repl.aclose()


async def test_pyrepl_primitives_registered_on_the_repl(tmp_path: Path) -> None:
    """SimpleLLMFunc's ``repl.register_runtime_backend`` + ``@repl.primitive("ns.name")`` +
    ``repl.get_primitive_contract``: handlers get ``ctx`` with the namespace's backend, kernel
    code calls them, and their contract is the one kernel code lists."""
    from simplellmfunc.builtin import PyRepl, SelfReference
    from simplellmfunc.exceptions import UserError

    repl = PyRepl(tmp_path, log_dir=tmp_path / "logs")
    repl.register_runtime_backend("settings", {"theme": "dark"})
    with pytest.raises(ValueError, match="already registered"):
        repl.register_runtime_backend("settings", {})
    repl.register_runtime_backend("settings", {"theme": "light", "font": "mono"}, replace=True)

    @repl.primitive("settings.read", backend="settings", description="Read one setting.")
    def read(ctx: object, key: str) -> str:
        return ctx.backend[key]  # type: ignore[attr-defined]

    @repl.primitive("settings.read_via_lookup")
    def read_via_lookup(ctx: object, key: str) -> str:
        return ctx.get_backend("settings")[key]  # type: ignore[attr-defined]

    with pytest.raises(UserError, match="already registered"):
        repl.primitive("settings.read")(read)
    with pytest.raises(UnsupportedError, match="register_runtime_backend"):
        repl.primitive("settings.other", backend="elsewhere")
    contract = repl.get_primitive_contract("settings.read")
    assert contract["name"] == "settings.read"
    assert contract["description"] == "Read one setting."
    assert [p["name"] for p in contract["parameters"]] == ["key"]  # no ctx
    with pytest.raises(KeyError, match=r"settings\.missing"):
        repl.get_primitive_contract("settings.missing")
    memory = SelfReference()
    repl.register_runtime_backend("selfref", memory)
    assert repl.get_runtime_backend("selfref") is memory
    try:
        with anyio.fail_after(GUARD * 6):
            result = await repl.execute(
                "print(runtime.settings.read('theme'))\n"
                "print(runtime.settings.read_via_lookup('font'))\n"
                "print(runtime.get_primitive_spec('settings.read', format='dict')['contract'])"
            )
        assert result["success"] is True, result
        lines = result["stdout"].splitlines()
        assert lines[:2] == ["light", "mono"]
        assert lines[2] == contract["contract"]
    finally:
        await repl.aclose()


async def test_llm_chat_binds_itself_to_its_self_reference(llm: OpenAICompatible) -> None:
    """``@llm_chat(self_reference=ref)`` binds the agent as the one ``ref``'s forks call, on
    the agent's memory key (``agent_main`` when none is given); the last agent decorated wins."""
    from simplellmfunc.builtin import SelfReference

    ref = SelfReference()

    @llm_chat(llm_interface=llm, self_reference=ref)
    async def first(message: str, history: HistoryList | None = None):  # type: ignore[no-untyped-def]
        """You are the first agent."""

    assert ref.get_agent_instance() is first
    assert ref.resolve_history_key() == "agent_main"

    @llm_chat(llm_interface=llm, self_reference=ref, self_reference_key="second")
    async def second(message: str, history: HistoryList | None = None):  # type: ignore[no-untyped-def]
        """You are the second agent."""

    assert ref.get_agent_instance() is second
    assert ref.resolve_history_key() == "second"
    ref.close()
