"""Tool definitions: JSON schemas from signatures and docstrings, names, guidance, snapshots."""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import os
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from simplellmfunc._abort import AbortSignal
from simplellmfunc.exceptions import ToolDefinitionError, UserError
from simplellmfunc.tools import Tool, ToolContext, ToolEventEmitter, check_tool_name, tool
from simplellmfunc.tools._docstring import parse_docstring

SNAPSHOTS = Path(__file__).parent / "snapshots"


# --- types used by the tools below ------------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Item(BaseModel):
    sku: str
    quantity: int = 1


class Address(BaseModel):
    street: str
    city: str
    zip_code: str | None = None


class Order(BaseModel):
    items: list[Item]
    ship_to: Address
    note: str = ""


class Opaque:
    """A class pydantic has no schema for."""


@dataclasses.dataclass
class Point:
    x: float
    y: float
    label: str = ""


# --- representative tools (snapshotted) -------------------------------------------------------


@tool
async def search_web(query: str, limit: int = 5, lang: Literal["en", "de", "zh"] = "en") -> str:
    """Search the web and return the top results.

    Results are ranked by relevance.

    Args:
        query: What to search for. Use keywords, not
            whole sentences.
        limit: How many results to return.
        lang: Result language.

    Returns:
        The results as text.
    """
    return query


@tool
async def place_order(order: Order, express: bool = False) -> str:
    """Place an order for the customer.

    Args:
        order: The order to place.
        express: Ship with the express service.
    """
    return "ok"


@tool
def paint(
    color: Color,
    opacity: Annotated[float, Field(description="From 0 (clear) to 1 (solid).", ge=0, le=1)],
    layer: int | None = None,
    target: int | str = "canvas",
) -> str:
    """Paint with a color.

    Args:
        color: The paint color.
        opacity: This docstring text loses to the Field description.
    """
    return "painted"


@tool
def collect(
    tags: list[str],
    weights: dict[str, float],
    span: tuple[int, int],
    unique: set[int] | None = None,
) -> int:
    """Collect containers."""
    return 0


@tool
def plot(points: list[Point], origin: Point | None = None) -> str:
    """Plot points (dataclass parameters)."""
    return "plotted"


class Lookup(Tool):
    """Look a word up in the dictionary."""

    async def run(
        self,
        word: str,
        event_emitter: ToolEventEmitter,
        context: ToolContext,
        abort_signal: AbortSignal | None = None,
    ) -> str:
        """Find the definition.

        Args:
            word: The word to define.
        """
        return word


def representative_tools() -> dict[str, Tool]:
    return {
        "search_web": search_web,
        "place_order": place_order,
        "paint": paint,
        "collect": collect,
        "plot": plot,
        "lookup": Lookup(),
    }


@pytest.mark.parametrize("name", sorted(representative_tools()))
def test_schema_snapshot(name: str) -> None:
    spec = representative_tools()[name].spec().to_openai()
    path = SNAPSHOTS / f"tool_{name}.json"
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(json.dumps(spec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if not path.exists():
        pytest.fail(f"missing snapshot {path.name}: run with UPDATE_SNAPSHOTS=1 to write it")
    assert spec == json.loads(path.read_text(encoding="utf-8"))


# --- schema content ---------------------------------------------------------------------------


def test_docstring_summary_and_multiline_args() -> None:
    params = search_web.parameters
    assert search_web.description == (
        "Search the web and return the top results.\n\nResults are ranked by relevance."
    )
    assert params["properties"]["query"]["description"] == (
        "What to search for. Use keywords, not whole sentences."
    )
    assert params["properties"]["limit"] == {
        "type": "integer",
        "default": 5,
        "description": "How many results to return.",
    }
    assert params["required"] == ["query"]
    assert params["type"] == "object"
    assert "title" not in params
    assert "additionalProperties" not in params


def test_literal_becomes_enum() -> None:
    lang = search_web.parameters["properties"]["lang"]
    assert lang["enum"] == ["en", "de", "zh"]
    assert lang["default"] == "en"


def test_nested_models_keep_defs_and_required() -> None:
    params = place_order.parameters
    assert params["required"] == ["order"]
    assert params["properties"]["order"]["$ref"] == "#/$defs/Order"
    defs = params["$defs"]
    assert set(defs) == {"Order", "Item", "Address"}
    assert defs["Order"]["required"] == ["items", "ship_to"]
    assert defs["Order"]["properties"]["items"]["items"] == {"$ref": "#/$defs/Item"}
    assert defs["Item"]["required"] == ["sku"]
    assert defs["Address"]["required"] == ["street", "city"]


def test_enum_optional_union_and_annotated_field() -> None:
    props = paint.parameters["properties"]
    assert paint.parameters["$defs"]["Color"]["enum"] == ["red", "green"]
    assert props["color"]["$ref"] == "#/$defs/Color"
    assert props["opacity"]["description"] == "From 0 (clear) to 1 (solid)."
    assert (props["opacity"]["minimum"], props["opacity"]["maximum"]) == (0, 1)
    assert props["layer"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert props["layer"]["default"] is None
    assert props["target"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert paint.parameters["required"] == ["color", "opacity"]


def test_containers() -> None:
    props = collect.parameters["properties"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["weights"] == {"type": "object", "additionalProperties": {"type": "number"}}
    assert props["span"]["prefixItems"] == [{"type": "integer"}, {"type": "integer"}]
    assert props["unique"]["anyOf"][0] == {
        "type": "array",
        "items": {"type": "integer"},
        "uniqueItems": True,
    }


def test_dataclass_parameter_types() -> None:
    params = plot.parameters
    assert params["properties"]["points"]["items"] == {"$ref": "#/$defs/Point"}
    assert params["$defs"]["Point"]["required"] == ["x", "y"]
    assert params["$defs"]["Point"]["properties"]["label"]["default"] == ""


def test_injected_parameters_are_not_in_the_schema() -> None:
    lookup = Lookup()
    assert list(lookup.parameters["properties"]) == ["word"]
    assert lookup.schema.injected == {
        "event_emitter": "event_emitter",
        "context": "context",
        "abort_signal": "abort_signal",
    }

    @tool
    async def untyped(x: int, event_emitter=None, _abort_signal=None, context=None):  # type: ignore[no-untyped-def]
        return x

    assert list(untyped.parameters["properties"]) == ["x"]
    assert set(untyped.schema.injected) == {"event_emitter", "_abort_signal", "context"}


def test_injection_by_type_under_any_name() -> None:
    @tool
    async def typed(
        x: int, em: ToolEventEmitter | None = None, sig: AbortSignal | None = None, ctx: Any = None
    ) -> int:
        return x

    assert set(typed.parameters["properties"]) == {"x", "ctx"}
    assert typed.schema.injected == {"em": "event_emitter", "sig": "abort_signal"}


def test_a_typed_context_parameter_belongs_to_the_model() -> None:
    @tool
    async def summarize(context: str, style: str = "short") -> str:
        """Summarize.

        Args:
            context: The text to summarize.
        """
        return context

    assert summarize.parameters["required"] == ["context"]
    assert summarize.schema.injected == {}


def test_parameter_names_that_clash_with_pydantic_are_fine() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        @tool
        async def clash(json: str, copy: bool, model_config: int, schema: str, _private: int = 0):  # type: ignore[no-untyped-def]
            return json

    assert list(clash.parameters["properties"]) == [
        "json",
        "copy",
        "model_config",
        "schema",
        "_private",
    ]
    assert clash.parameters["required"] == ["json", "copy", "model_config", "schema"]


def test_field_alias_and_field_default_are_honoured() -> None:
    @tool
    async def aliased(
        user_id: Annotated[int, Field(alias="userId")],
        page: int = Field(1, ge=1),
    ) -> int:
        """Aliases.

        Args:
            page: Page number.
        """
        return user_id

    props = aliased.parameters["properties"]
    assert set(props) == {"userId", "page"}
    assert props["page"] == {
        "type": "integer",
        "default": 1,
        "minimum": 1,
        "description": "Page number.",
    }


def test_var_kwargs_is_allowed() -> None:
    @tool
    async def flexible(x: int, **extra: Any) -> int:
        return x

    assert flexible.schema.accepts_var_kwargs
    assert list(flexible.parameters["properties"]) == ["x"]


def test_var_args_and_positional_only_are_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match="args"):

        @tool
        def star(*args: int) -> int:
            return 0

    with pytest.raises(ToolDefinitionError, match="'x'"):

        @tool
        def positional(x: int, /) -> int:
            return x


def test_unresolvable_or_unsupported_annotations_are_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match="annotations"):

        @tool
        def broken(x: NoSuchType) -> int:  # type: ignore[name-defined]  # noqa: F821
            return 0

    with pytest.raises(ToolDefinitionError, match="unsupported parameter type"):

        @tool
        def opaque(x: Opaque) -> int:
            return 0


@pytest.mark.parametrize("bad", ["", "has space", "a" * 65, "name\n", "ünïcode", "dot.name"])
def test_invalid_names_are_rejected(bad: str) -> None:
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        check_tool_name(bad)
    with pytest.raises(ToolDefinitionError):
        tool(name=bad)(lambda: None)
    assert issubclass(ToolDefinitionError, UserError)


def test_lambda_name_is_rejected_at_definition() -> None:
    with pytest.raises(ToolDefinitionError, match="<lambda>"):
        tool(lambda: None)


def test_valid_names() -> None:
    assert check_tool_name("a") == "a"
    assert check_tool_name("Get-Weather_2") == "Get-Weather_2"
    assert check_tool_name("x" * 64) == "x" * 64


def test_name_and_description_overrides() -> None:
    @tool(name="renamed", description="Overridden.")
    async def original(x: int) -> int:
        """Original description."""
        return x

    assert (original.name, original.description) == ("renamed", "Overridden.")
    assert original.spec().to_openai()["function"]["name"] == "renamed"
    assert original.__name__ == "original"


def test_guidance_from_best_practices_and_builder() -> None:
    @tool(
        best_practices=["Prefer exact names.", "Call once per item."],
        prompt_injection_builder=lambda t: f"{t.name} returns JSON.",
    )
    async def fetch(x: int) -> int:
        return x

    assert fetch.guidance() == "- Prefer exact names.\n- Call once per item.\nfetch returns JSON."
    assert search_web.guidance() == ""


def test_tool_options_are_kept() -> None:
    @tool(too_long_to_file=True, timeout=2.5)
    async def slow(x: int) -> int:
        return x

    assert slow.too_long_to_file
    assert slow.timeout == 2.5
    assert not search_web.too_long_to_file
    assert search_web.timeout is None


def test_subclass_defaults_name_and_docs() -> None:
    lookup = Lookup()
    assert lookup.name == "lookup"
    assert lookup.description == "Find the definition."
    assert lookup.parameters["properties"]["word"]["description"] == "The word to define."

    class WebSearchTool(Tool):
        """Search the web.

        Args:
            q: The query.
        """

        async def run(self, q: str) -> str:
            return q

    searcher = WebSearchTool()
    assert searcher.name == "web_search_tool"
    assert searcher.description == "Search the web."
    assert searcher.parameters["properties"]["q"]["description"] == "The query."


def test_subclass_class_attributes_and_no_inherited_docs() -> None:
    class Named(Tool):
        name = "named"
        description = "From the class attribute."

        async def run(self, x: int) -> int:
            return x

    class Undocumented(Tool):
        async def run(self, x: int) -> int:
            return x

    assert (Named().name, Named().description) == ("named", "From the class attribute.")
    assert Undocumented().description == ""  # not Tool's or Tool.run's docstring


def test_partial_and_callable_objects_as_functions() -> None:
    def scale(factor: int, value: float) -> float:
        """Scale a value."""
        return factor * value

    class Doubler:
        def __call__(self, value: float) -> float:
            return 2 * value

    half = Tool(name="triple", func=functools.partial(scale, 3))
    assert list(half.parameters["properties"]) == ["value"]
    doubler = Tool(name="doubler", func=Doubler())
    assert doubler.parameters["properties"]["value"] == {"type": "number"}


# --- the docstring parser ---------------------------------------------------------------------


def test_parse_docstring_sections() -> None:
    parsed = parse_docstring(
        """Do a thing.

        More detail.

        Args:
            a (int): First
                and more.
            *rest: Ignored star.
            b: Second: with a colon.

        Keyword Args:
            c: Third.

        Returns:
            x: not an argument.

        Warning:
            Careful.
        """
    )
    assert parsed.description == "Do a thing.\n\nMore detail."
    assert parsed.args == {
        "a": "First and more.",
        "rest": "Ignored star.",
        "b": "Second: with a colon.",
        "c": "Third.",
    }


def test_parse_docstring_empty_and_description_only() -> None:
    assert parse_docstring(None).description == ""
    assert parse_docstring("").args == {}
    assert parse_docstring("Only text.").description == "Only text."
    argument_on_next_line = parse_docstring("S.\n\nArgs:\n    a:\n        Long text.\n")
    assert argument_on_next_line.args == {"a": "Long text."}
