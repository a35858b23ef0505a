"""What an API client brings to one turn: its own tools, a tool choice and an answer shape.

:class:`ClientTurn` is the typed form of the OpenAI request fields ``tools``, ``tool_choice``
and ``response_format``: the client's tools become :class:`~simplellmfunc.engine.DeferredTool`
s (the agent may call them; the turn then ends ``"deferred"`` with the calls, and the client's
next request carries their results), and the answer shape becomes the run's structured-output
contract: the provider's JSON-schema mode where it has one, the contract in the system prompt,
and a check of the final answer that sends a bad one back to the model once.

It reaches the run as a :class:`ClientHook` (:meth:`ClientTurn.hook`), a run hook passed as
the call's ``_hooks``: no agent needs to know about it. The hook also reports how much of the
client's history the agent's history window leaves out of the model's view, so the endpoint
can say so instead of dropping it silently.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import anyio.to_thread

from .._messages import Message
from .._mutations import ContextMutation
from ..engine import DeferredTool, Invocation, RunHook, RunView, apply_window, split_turns
from ..providers import ResponseFormat, count_message_tokens

__all__ = ["AnswerShape", "ClientHook", "ClientTurn", "answer_problem"]

ToolChoice = Literal["auto", "none", "required"]


@dataclass(frozen=True, slots=True)
class AnswerShape:
    """The shape the final answer must have: a JSON object, matching ``schema`` if given.

    Attributes:
        name: The schema's name (``json_schema.name``).
        schema: The JSON schema (``None``: any JSON object, ``json_object`` mode).
        strict: The client asked for strict schema adherence.
    """

    name: str = "answer"
    schema: Mapping[str, Any] | None = None
    strict: bool = False

    def contract(self) -> str:
        """The output contract for the system prompt."""
        if self.schema is None:
            return "Give your final answer as one JSON object, and nothing else."
        return (
            "Give your final answer as one JSON object, and nothing else, matching this JSON "
            f"schema:\n{json.dumps(dict(self.schema), ensure_ascii=False)}"
        )


def answer_problem(shape: AnswerShape, text: str) -> str | None:
    """What is wrong with ``text`` as an answer of ``shape`` (``None``: nothing)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        return f"Your final answer is not valid JSON ({exc}). Answer with the JSON object only."
    if not isinstance(value, dict):
        return "Your final answer must be a JSON object. Answer with the JSON object only."
    if shape.schema is None:
        return None
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

    try:
        errors = sorted(Draft202012Validator(dict(shape.schema)).iter_errors(value), key=str)
    except SchemaError:
        return None  # checked when the request came in; nothing more to judge by
    if not errors:
        return None
    where = "/".join(str(p) for p in errors[0].absolute_path) or "(root)"
    return (
        f"Your final answer does not match the schema at {where}: {errors[0].message}. "
        "Answer with the corrected JSON object only."
    )


@dataclass(frozen=True, slots=True)
class ClientTurn:
    """What the API client brings to one turn.

    Attributes:
        tools: The client's tools (run by the client: deferred).
        tool_choice: ``"auto"``, ``"none"`` (the client's tools are not offered) or
            ``"required"`` (the first model call must call a tool).
        shape: The shape of the final answer (``response_format``), if any.
    """

    tools: tuple[DeferredTool, ...] = ()
    tool_choice: ToolChoice = "auto"
    shape: AnswerShape | None = None

    def hook(self) -> ClientHook:
        """The run hook that brings this to the run (and reports the history window's drop)."""
        return ClientHook(self)


class ClientHook(RunHook):
    """Before the first model call: adds the client's tools and the answer contract, and
    notes how many messages of the client's history the agent's history window leaves out
    (:attr:`dropped`); before the second: lifts ``tool_choice="required"`` (one forced call,
    not a forced loop).

    Attributes:
        dropped: Messages the history window left out of the first model call (``None``
            before it).
    """

    def __init__(self, turn: ClientTurn) -> None:
        self.turn = turn
        self.dropped: int | None = None
        self._calls = 0

    async def before_llm_call(self, run: RunView) -> Sequence[ContextMutation]:
        context = run.context
        if context is None:
            return ()
        self._calls += 1
        turn = self.turn
        if self._calls == 1:
            self.dropped = await _window_drop(context.invocation, run.transcript.messages)
            if turn.tool_choice != "none":
                context.add_tools(turn.tools)
            changes: dict[str, Any] = {}
            if turn.tool_choice == "required":
                changes["tool_choice"] = "required"
            shape = turn.shape
            if shape is not None:
                if shape.schema is not None:
                    changes["response_format"] = ResponseFormat(
                        shape.name, shape.schema, shape.strict
                    )
                changes["output_contract"] = shape.contract()
                changes["answer_check"] = lambda text: answer_problem(shape, text)
                changes["max_repairs"] = max(context.invocation.max_repairs, 1)
            if changes:
                context.invocation = replace(context.invocation, **changes)
        elif self._calls == 2 and turn.tool_choice == "required":
            context.invocation = replace(context.invocation, tool_choice=None)
        return ()


async def _window_drop(invocation: Invocation, messages: Sequence[Message]) -> int:
    """How many of ``messages`` the invocation's history window leaves out of a call."""
    window = invocation.options.history_window
    if window is None:
        return 0
    _, turns = split_turns(messages)
    budget = window.budget(invocation.llm.context_window)
    if budget is None and len(turns) <= max(window.keep_recent_turns, 1):
        return 0  # nothing to count: every turn is kept

    def count(sent: Sequence[Message]) -> int:
        return count_message_tokens(sent, invocation.llm.model_name)

    def dropped() -> int:
        return len(apply_window(messages, window, count, budget)[1])

    return await anyio.to_thread.run_sync(dropped)
