"""Running tools (threads, injection, coercion, validation) and rendering their results."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import inspect
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image
from pydantic import BaseModel

from simplellmfunc._abort import AbortSignal
from simplellmfunc._content import ImgPath, ImgUrl, Text
from simplellmfunc._events import CustomEvent, EventYield
from simplellmfunc.exceptions import ToolDefinitionError, ToolRetry, UserError
from simplellmfunc.providers._tokens import count_text_tokens
from simplellmfunc.tools import (
    ArgumentsError,
    FunctionTool,
    Tool,
    ToolContext,
    ToolEventEmitter,
    ToolProvider,
    tool,
)
from simplellmfunc.tools._render import (
    ARGUMENTS_HINT,
    RenderedResult,
    default_spill_dir,
    render_error,
    render_result,
    render_result_async,
    render_unknown_tool,
)

PIXEL_URL = "data:image/png;base64,iVBORw0KGgo="


class Mood(enum.Enum):
    HAPPY = "happy"
    SAD = "sad"


class Item(BaseModel):
    sku: str
    quantity: int = 1


@dataclasses.dataclass
class Point:
    x: float
    y: float


@pytest.fixture
def png(tmp_path: Path) -> Path:
    path = tmp_path / "pixel.png"
    Image.new("RGB", (2, 2), "red").save(path)
    return path


def context(sink_events: list[CustomEvent] | None = None) -> ToolContext:
    async def sink(event: CustomEvent) -> None:
        assert sink_events is not None
        sink_events.append(event)

    emitter = ToolEventEmitter(
        tool_name="t", tool_call_id="call_1", sink=sink if sink_events is not None else None
    )
    return ToolContext("call_1", "t", emitter, AbortSignal())


# --- where tools run --------------------------------------------------------------------------


async def test_sync_tools_run_in_a_worker_thread() -> None:
    @tool
    def where() -> int:
        return threading.get_ident()

    assert await where.invoke({}) != threading.get_ident()


async def test_async_tools_run_on_the_loop_thread() -> None:
    @tool
    async def where() -> int:
        return threading.get_ident()

    assert await where.invoke({}) == threading.get_ident()


async def test_decorated_functions_stay_callable_as_before() -> None:
    @tool
    def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    @tool
    async def mul(a: int, b: int) -> int:
        return a * b

    assert isinstance(add, FunctionTool)
    assert isinstance(add, Tool)
    assert add(2, 3) == 5  # positional, sync: the value itself
    assert add(2) == 3
    coroutine = mul(2, 3)
    assert inspect.iscoroutine(coroutine)
    assert await coroutine == 6
    assert (add.__name__, add.__doc__) == ("add", "Add.")
    assert str(inspect.signature(add)) == "(a: 'int', b: 'int' = 1) -> 'int'"


class Counter:
    def __init__(self, start: int) -> None:
        self.value = start

    @tool
    async def bump(self, by: int = 1) -> int:
        """Add to the counter."""
        self.value += by
        return self.value

    @tool
    def peek(self) -> int:
        return self.value


async def test_method_tools_bind_to_their_instance() -> None:
    first, second = Counter(10), Counter(100)
    assert await first.bump(5) == 15  # still a method
    bound = second.bump
    assert isinstance(bound, FunctionTool)
    assert "self" not in bound.parameters["properties"]
    assert bound.schema is Counter.bump.schema  # binding copies no schema
    assert await bound.invoke({"by": "3"}) == 103
    assert await bound(by=1) == 104  # the method, called directly
    assert await first.peek.invoke({}) == 15  # a sync method, in a worker thread
    assert str(inspect.signature(bound)) == "(by: 'int' = 1) -> 'int'"
    assert isinstance(Counter.bump, FunctionTool)


class Greeter(Tool):
    """Greet someone."""

    async def run(self, name: str, times: int = 1) -> str:
        return " ".join([f"hello {name}"] * times)

    def render(self, result: Any) -> Any:
        return result.upper()


async def test_subclass_with_async_run() -> None:
    greeter = Greeter()
    assert await greeter.invoke({"name": "ada", "times": "2"}) == "hello ada hello ada"
    assert await greeter(name="bob") == "hello bob"
    assert greeter.render("hi") == "HI"
    assert repr(greeter) == "<Greeter 'greeter'>"


async def test_subclass_with_sync_run_uses_a_thread() -> None:
    class Blocking(Tool):
        def run(self) -> int:  # type: ignore[override]
            return threading.get_ident()

    assert await Blocking().invoke({}) != threading.get_ident()


async def test_tool_wrapping_a_function_directly() -> None:
    async def double(x: int) -> int:
        return 2 * x

    doubler = Tool(func=double)
    assert doubler.name == "double"
    assert await doubler(x="4") == 8  # Tool.__call__ validates and coerces


def test_a_tool_needs_a_function_or_a_run_method() -> None:
    class Empty(Tool):
        pass

    with pytest.raises(ToolDefinitionError, match="override run"):
        Empty()
    with pytest.raises(ToolDefinitionError, match="override run"):
        Tool(name="nothing")


def test_tool_provider_protocol() -> None:
    class Provider:
        async def list_tools(self) -> list[Tool]:
            return [Greeter()]

    assert isinstance(Provider(), ToolProvider)
    assert not isinstance(Greeter(), ToolProvider)


# --- coercion and validation ------------------------------------------------------------------


@tool
async def typed(
    count: int,
    mood: Mood,
    label: str = "",
    image: ImgPath | None = None,
    item: Item | None = None,
    point: Point | None = None,
) -> dict[str, Any]:
    return {
        "count": count,
        "mood": mood,
        "label": label,
        "image": image,
        "item": item,
        "point": point,
    }


async def test_arguments_are_coerced_by_annotation(png: Path) -> None:
    result = await typed.invoke(
        {
            "count": "7",
            "mood": "sad",
            "label": 42,
            "image": str(png),
            "item": {"sku": "A1"},
            "point": {"x": 1, "y": "2.5"},
        }
    )
    assert result["count"] == 7
    assert result["mood"] is Mood.SAD
    assert result["label"] == "42"
    assert result["image"] == ImgPath(png)
    assert result["item"] == Item(sku="A1", quantity=1)
    assert result["point"] == Point(1.0, 2.5)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"mood": "sad"}, "count"),
        ({"count": "many", "mood": "sad"}, "count"),
        ({"count": 1, "mood": "angry"}, "mood"),
        ({"count": 1, "mood": "sad", "image": "/no/such/file.png"}, "image"),
        ({"count": 1, "mood": "sad", "item": {"quantity": 2}}, "item.sku"),
        ({"count": 1, "mood": "sad", "colour": "red"}, "colour"),
    ],
)
async def test_validation_errors_name_the_field(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(ArgumentsError, match="invalid arguments") as caught:
        await typed.invoke(arguments)
    assert f"{field}:" in str(caught.value)
    assert isinstance(caught.value, UserError)
    assert isinstance(caught.value, ValueError)


async def test_arguments_must_be_an_object() -> None:
    with pytest.raises(ArgumentsError, match="expected a JSON object, got list"):
        await typed.invoke([1, 2])  # type: ignore[arg-type]


async def test_var_kwargs_receive_extra_arguments() -> None:
    @tool
    async def flexible(x: int, **extra: Any) -> dict[str, Any]:
        return {"x": x, **extra}

    assert await flexible.invoke({"x": "1", "y": [2]}) == {"x": 1, "y": [2]}


async def test_reserved_parameter_names_reach_the_function() -> None:
    @tool
    async def clash(json: str, copy: int, _private: int = 0) -> tuple[str, int, int]:
        return json, copy, _private

    assert await clash.invoke({"json": "j", "copy": "2", "_private": 3}) == ("j", 2, 3)


# --- framework injection ----------------------------------------------------------------------


class Progress(Tool):
    """Report progress."""

    async def run(self, steps: int, event_emitter: ToolEventEmitter) -> int:
        for step in range(steps):
            await event_emitter.emit("progress", {"step": step})
        return steps


async def test_emitter_injected_through_invoke_streams_to_the_sink() -> None:
    events: list[CustomEvent] = []
    assert await Progress().invoke({"steps": 2}, context(events)) == 2
    assert events == [
        CustomEvent("progress", {"step": 0}, "t", "call_1"),
        CustomEvent("progress", {"step": 1}, "t", "call_1"),
    ]


async def test_standalone_emitter_through_invoke_collects_events() -> None:
    ctx = context()
    await Progress().invoke({"steps": 1}, ctx)
    [collected] = await ctx.event_emitter.get_events()
    assert isinstance(collected, EventYield)
    assert collected.event == CustomEvent("progress", {"step": 0}, "t", "call_1")
    assert collected.origin.tool_call_id == "call_1"


async def test_emitter_passed_to_a_direct_call() -> None:
    @tool
    async def ping(x: int, event_emitter: ToolEventEmitter | None = None) -> int:
        assert event_emitter is not None
        await event_emitter.emit("ping", x)
        return x

    for instance in (Progress(), ping):
        emitter = ToolEventEmitter()
        arguments = {"steps": 1} if instance is not ping else {"x": 1}
        await instance(**arguments, event_emitter=emitter)
        events = await emitter.get_events()
        assert len(events) == 1
        emitter.clear()
        assert await emitter.get_events() == []


async def test_direct_calls_and_invoke_without_context_get_a_fresh_emitter() -> None:
    assert await Progress()(steps=2) == 2
    assert await Progress().invoke({"steps": 1}) == 1


async def test_context_and_abort_signal_injection() -> None:
    seen: dict[str, Any] = {}

    class Inspect(Tool):
        async def run(self, context: ToolContext, abort_signal: AbortSignal | None) -> str:
            seen.update(context=context, abort_signal=abort_signal)
            return context.tool_call_id

    ctx = context()
    assert await Inspect().invoke({}, ctx) == "call_1"
    assert seen == {"context": ctx, "abort_signal": ctx.abort_signal}
    assert await Inspect()() == "direct"
    assert seen["context"].tool_name == "inspect"
    assert isinstance(seen["abort_signal"], AbortSignal)
    assert not seen["abort_signal"].aborted


async def test_injected_values_are_not_model_arguments() -> None:
    with pytest.raises(ArgumentsError, match="event_emitter"):
        await Progress().invoke({"steps": 1, "event_emitter": "x"})


# --- rendering results ------------------------------------------------------------------------


def test_render_strings_as_is() -> None:
    assert render_result('say "hi"\n') == RenderedResult('say "hi"\n')
    assert render_result("") == RenderedResult("")

    class Tone(str, enum.Enum):  # noqa: UP042  (the mixin's str() is not its value)
        LOUD = "loud"

    assert render_result(Tone.LOUD).text == "loud"
    assert type(render_result(Tone.LOUD).text) is str


def test_render_json_values_compactly() -> None:
    assert render_result({"a": [1, 2.5, True, None], "é": "ü"}).text == (
        '{"a":[1,2.5,true,null],"é":"ü"}'
    )
    assert render_result([1, "two"]).text == '[1,"two"]'
    assert render_result((1, 2)).text == "[1,2]"
    assert render_result(3).text == "3"
    assert render_result(None).text == "null"
    assert render_result(False).text == "false"


def test_render_models_and_dataclasses() -> None:
    item = Item(sku="Ä1", quantity=2)
    assert render_result(item).text == item.model_dump_json() == '{"sku":"Ä1","quantity":2}'
    assert render_result(Point(1, 2)).text == '{"x":1,"y":2}'

    @dataclasses.dataclass
    class Nested:
        point: Point
        path: Path
        items: list[Item]

    nested = Nested(Point(0, 1), Path("/tmp/x"), [item])
    assert render_result(nested).text == (
        '{"point":{"x":0,"y":1},"path":"/tmp/x","items":[{"sku":"Ä1","quantity":2}]}'
    )


def test_render_converts_what_json_cannot_encode() -> None:
    value = {
        "path": Path("/data/f.txt"),
        "when": dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC),
        "day": dt.date(2024, 5, 1),
        "mood": Mood.HAPPY,
        "tags": {"b", "a"},
        "frozen": frozenset({3, 1}),
        "model": Item(sku="x"),
        "raw": b"bytes",
        "text": Text("plain"),
        "duration": dt.timedelta(seconds=90),
    }
    assert render_result(value).text == (
        '{"path":"/data/f.txt","when":"2024-05-01T12:30:00+00:00","day":"2024-05-01",'
        '"mood":"happy","tags":["a","b"],"frozen":[1,3],"model":{"sku":"x","quantity":1},'
        '"raw":"bytes","text":"plain","duration":90.0}'
    )
    assert render_result(Path("/x")).text == "/x"
    assert render_result(Mood.SAD).text == "sad"
    assert render_result(dt.date(2020, 1, 2)).text == "2020-01-02"


def test_render_odd_values_without_failing() -> None:
    class Thing:
        def __str__(self) -> str:
            return "a thing"

    assert render_result(Thing()).text == "a thing"
    assert render_result({"t": Thing()}).text == '{"t":"a thing"}'
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert render_result(cyclic).text == "[[...]]"
    assert render_result({(1, 2): "tuple key"}).text == "{(1, 2): 'tuple key'}"


def test_render_image_url() -> None:
    image = ImgUrl("https://example.com/cat.png")
    assert render_result(image) == RenderedResult("image returned", (image,))


def test_render_image_path_as_data_url(png: Path) -> None:
    rendered = render_result(ImgPath(png, detail="low"))
    [url] = rendered.images
    assert rendered.text == "image returned"
    assert url.detail == "low"
    assert url.url == "data:image/png;base64," + base64.b64encode(png.read_bytes()).decode()


def test_render_text_with_images(png: Path) -> None:
    remote = ImgUrl(PIXEL_URL)
    one = render_result(("a chart", ImgPath(png)))
    assert one.text == "a chart"
    assert one.images[0].url.startswith("data:image/png;base64,")
    several = render_result(("two charts", [remote, ImgPath(png)]))
    assert several.text == "two charts"
    assert len(several.images) == 2
    assert render_result(("no images", [])) == RenderedResult("no images")
    assert render_result(("", remote)).text == "image returned"
    assert render_result(("a", "b")).text == '["a","b"]'


def test_render_list_of_images() -> None:
    images = [ImgUrl(PIXEL_URL), ImgUrl("https://example.com/a.jpg")]
    assert render_result(images) == RenderedResult("2 images returned", tuple(images))
    assert render_result([]).text == "[]"


def test_render_an_image_file_that_vanished(png: Path) -> None:
    image = ImgPath(png)
    png.unlink()
    rendered = render_result(("before", image))
    assert rendered.images == ()
    assert rendered.text == f"before\n[image unavailable: {png}: FileNotFoundError]"


def test_render_under_budget_is_untouched() -> None:
    text = "word " * 1000
    assert render_result(text, budget_tokens=8000) == RenderedResult(text)
    assert render_result(text * 100, budget_tokens=0) == RenderedResult(text * 100)


def numbered_lines(count: int) -> str:
    return "".join(f"line {i:06d} of the output\n" for i in range(count))


def test_huge_result_keeps_head_and_tail(tmp_path: Path) -> None:
    text = numbered_lines(50_000)
    rendered = render_result(text, budget_tokens=500, spill_dir=tmp_path)
    assert rendered.truncated
    assert rendered.spill_path is None
    assert rendered.text.startswith("line 000000 of the output\n")
    assert rendered.text.endswith("line 049999 of the output\n")
    head, _marker, tail = rendered.text.partition("\n…[truncated: ")
    omitted = int(tail.split(" ", 1)[0])
    body = rendered.text.split("…\n", 1)[1]
    assert omitted == len(text) - len(head) - len(body)
    assert text.startswith(head)
    assert text.endswith(body)
    assert count_text_tokens(rendered.text) <= 500
    assert list(tmp_path.iterdir()) == []


def test_huge_result_goes_to_a_file(tmp_path: Path) -> None:
    text = numbered_lines(50_000) + "ünïcode ✓"
    spill = tmp_path / "spill"
    rendered = render_result(
        text, budget_tokens=500, too_long_to_file=True, spill_dir=spill, tool_name="big_tool"
    )
    assert rendered.truncated
    assert rendered.spill_path is not None
    path = Path(rendered.spill_path)
    assert path.parent == spill
    assert path.name.startswith("big_tool-")
    assert path.read_text(encoding="utf-8") == text
    assert f"is in the file {path}]" in rendered.text
    assert f"({len(text)} characters)" in rendered.text
    assert count_text_tokens(rendered.text) <= 500
    assert [p.name for p in spill.iterdir()] == [path.name]  # no temporary file left behind
    second = render_result(text, budget_tokens=500, too_long_to_file=True, spill_dir=spill)
    assert second.spill_path != rendered.spill_path


def test_spill_defaults_to_the_temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert default_spill_dir() == tmp_path / "simplellmfunc-tool-output"
    rendered = render_result("x " * 50_000, budget_tokens=100, too_long_to_file=True)
    assert rendered.spill_path is not None
    assert Path(rendered.spill_path).parent == default_spill_dir()


def test_spill_failure_still_truncates(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    rendered = render_result(
        "y " * 50_000, budget_tokens=100, too_long_to_file=True, spill_dir=not_a_dir
    )
    assert rendered.truncated
    assert rendered.spill_path is None
    assert "could not save the full output: FileExistsError" in rendered.text


def test_a_long_spill_path_still_fits_the_budget(tmp_path: Path) -> None:
    spill = tmp_path / ("deep_directory_name_" * 8)
    rendered = render_result(
        "w " * 50_000, budget_tokens=200, too_long_to_file=True, spill_dir=spill
    )
    assert rendered.spill_path is not None
    assert count_text_tokens(rendered.text) <= 200


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(min_size=1, max_size=6000) | st.text("ab \n汉é", min_size=1, max_size=6000),
    budget=st.integers(min_value=60, max_value=1500),
)
def test_truncation_keeps_a_prefix_and_suffix_within_budget(text: str, budget: int) -> None:
    rendered = render_result(text, budget_tokens=budget)
    assert count_text_tokens(rendered.text) <= budget
    if not rendered.truncated:
        assert rendered.text == text
        return
    head, _, rest = rendered.text.partition("\n…[truncated: ")
    omitted_text, _, tail = rest.partition(" characters omitted]…\n")
    assert text.startswith(head)
    assert text.endswith(tail)
    assert int(omitted_text) == len(text) - len(head) - len(tail) > 0


def test_dense_text_is_cut_to_the_token_budget() -> None:
    text = "汉字测试数据" * 300  # fewer characters than 4 per budget token, more tokens than budget
    assert count_text_tokens(text) > 1000
    rendered = render_result(text, budget_tokens=1000)
    assert rendered.truncated
    assert count_text_tokens(rendered.text) <= 1000


def test_render_text_with_images_is_budgeted_too() -> None:
    rendered = render_result(("z " * 50_000, ImgUrl(PIXEL_URL)), budget_tokens=200)
    assert rendered.truncated
    assert len(rendered.images) == 1


async def test_render_result_async_matches_the_sync_result(png: Path) -> None:
    value = ("chart", ImgPath(png))
    assert await render_result_async(value) == render_result(value)
    text = numbered_lines(10_000)
    assert await render_result_async(text, budget_tokens=300) == render_result(
        text, budget_tokens=300
    )


def test_importing_render_creates_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    code = "import simplellmfunc.tools._render, tempfile; print(tempfile.gettempdir())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(tmp_path)
    assert list(tmp_path.iterdir()) == []


# --- rendering errors -------------------------------------------------------------------------


def test_render_error() -> None:
    assert render_error(ValueError("bad value")) == "Error: ValueError: bad value"
    assert render_error(TimeoutError()) == "Error: TimeoutError"
    assert render_error(KeyError("k")) == "Error: KeyError: 'k'"
    group = ExceptionGroup("two failed", [OSError("disk"), RuntimeError("boom")])
    assert render_error(group) == (
        "Error: ExceptionGroup: two failed (2 sub-exceptions): OSError: disk; RuntimeError: boom"
    )


def test_render_error_has_no_traceback_and_is_bounded() -> None:
    try:
        raise RuntimeError("x" * 10_000)
    except RuntimeError as exc:
        text = render_error(exc)
    assert "Traceback" not in text
    assert len(text) == 4000
    assert text.endswith("…")


async def test_render_arguments_error_with_hint() -> None:
    with pytest.raises(ArgumentsError) as caught:
        await typed.invoke({"mood": "sad"})
    assert render_error(caught.value) == (
        "Error: invalid arguments: count: Field required\n" + ARGUMENTS_HINT
    )
    assert ARGUMENTS_HINT == "Check the tool's parameter schema and call it again."


def test_render_tool_retry_is_its_message() -> None:
    assert render_error(ToolRetry("Use a smaller range.")) == "Use a smaller range."


def test_render_unknown_tool() -> None:
    assert render_unknown_tool("serach", ["search", "read_file", "search"]) == (
        "Error: there is no tool named 'serach'. Did you mean 'search'? "
        "Available tools: search, read_file."
    )
    assert render_unknown_tool("zzz", ["a"]) == (
        "Error: there is no tool named 'zzz'. Available tools: a."
    )
    assert render_unknown_tool("x", []) == (
        "Error: there is no tool named 'x'. No tools are available."
    )
