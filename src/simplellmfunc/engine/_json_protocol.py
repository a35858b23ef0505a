"""The JSON tool protocol: every step's reply forced by a JSON schema to be one call or the answer.

For small local models behind servers without native tool calls but with schema-constrained
decoding (llama.cpp's ``response_format`` JSON schema): the model cannot produce anything but

* ``{"action": "<tool>", "action_input": {<that tool's arguments>}}``, or
* ``{"action": "final_answer", "answer": <the answer>}``

because the request's ``response_format`` is a ``oneOf`` of exactly these shapes, built from the
tools' own argument schemas (``answer`` follows the output type of an ``@llm_function``, else it
is a string). When the answer is due (the step cap, or a repeated call, see below) the schema has
only the ``final_answer`` branch.

Small models tend to repeat a call after seeing its result. With this protocol a batch that
repeats the previous one exactly is not run again: the calls are answered "already done, the
result is above" (so the history stays valid), and the next step is forced to be the final
answer, sent what the model saw before it repeated (measured on SmolLM2-135M: it then answers
from the observation, 3 of 3; with the repetition and a note in view it echoes the note).

In the history, calls are stored exactly like native tool calls; :func:`to_json_transcript` sends
the assistant's calls back as the JSON it wrote and results as ``role: "tool"`` messages (a small
model uses an observation in that role; as a user message it ignores it).

The step's JSON is protocol, never prose: readers see only the answer. While a step streams,
:class:`AnswerStream` passes on the characters of its ``"answer"`` string and nothing else; a
step cut by ``max_tokens`` (``{"action": "final_answer", "answer": "42 ...``) is repaired by
closing what is open, and the run treats it as a truncated answer. :class:`JSONProtocol` is the
strategy object (``._protocol``) the loop uses for this protocol.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._messages import AssistantMessage, Message, ToolCall
from .._mutations import UserMessageMutation
from ..providers import ResponseFormat, ToolSpec
from ._protocol import ReplyContext, ReplyPlan, StepInfo, StreamView, ToolCallProtocol, scan_json

__all__ = [
    "FINAL_ACTION",
    "AnswerStream",
    "JSONProtocol",
    "JSONStep",
    "parse_step",
    "render_json_catalogue",
    "step_format",
    "to_json_transcript",
]

FINAL_ACTION = "final_answer"
#: What the catalogue shows in place of the answer; a small model that copies it has not answered.
ANSWER_PLACEHOLDER = "<your answer to the user, built from the tool results>"
_HALF_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\(?:u[0-9a-fA-F]{0,3})?$")
_STRING: Mapping[str, Any] = {"type": "string"}


def step_format(
    tools: Sequence[ToolSpec], answer: Mapping[str, Any] | None, *, final: bool
) -> ResponseFormat:
    """The ``response_format`` of one step: a call of one of ``tools`` or the final answer
    (only the final answer when ``final``)."""
    branches = [] if final else [_call_branch(spec) for spec in tools]
    branches.append(_object({"action": {"const": FINAL_ACTION}, "answer": dict(answer or _STRING)}))
    schema = branches[0] if len(branches) == 1 else {"oneOf": branches}
    return ResponseFormat("final_answer" if final else "agent_step", schema)


def _call_branch(spec: ToolSpec) -> dict[str, Any]:
    parameters = dict(spec.parameters) or {"type": "object", "properties": {}}
    return _object({"action": {"const": spec.name}, "action_input": parameters})


def _object(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def render_json_catalogue(tools: Sequence[ToolSpec]) -> str:
    """The system-prompt section: each tool with the exact reply that calls it, then the answer.

    Short and concrete on purpose: measured on SmolLM2-135M, one example reply per tool made it
    call the tool for 3 of 3 weather questions; a catalogue of JSON schemas made it answer
    without calling (2 of 3). The answer's placeholder says what goes there: with ``...``,
    Gemma 3 270M answered "What's the weather in Paris?" with "Paris" after the tool returned
    "Paris: 14°C, rain showers"; with the placeholder, it and SmolLM2 both answer from
    the result. The schemas themselves are enforced by ``response_format``.
    """
    lines = ["## Tools"]
    for spec in tools:
        properties = dict(spec.parameters).get("properties") or {}
        arguments = ", ".join(f'"{name}": ...' for name in properties)
        call = f'{{"action": "{spec.name}", "action_input": {{{arguments}}}}}'
        lines.append(f"- {spec.name}: {spec.description.strip()} To use it, reply {call}.")
    answer = f'"{ANSWER_PLACEHOLDER}"'
    lines.append(
        f'When you have the result, reply {{"action": "{FINAL_ACTION}", "answer": {answer}}}.'
    )
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class JSONStep:
    """What a step's reply says: a call (``tool`` and ``arguments`` as JSON text), the answer
    (``answer``, as text), or ``error`` for a reply that is not a valid step; ``repaired``:
    the JSON was cut off and had to be closed to be read."""

    tool: str = ""
    arguments: str = "{}"
    answer: str | None = None
    error: str | None = None
    repaired: bool = False


def parse_step(text: str) -> JSONStep:
    """Read one step's reply (a JSON object, perhaps in a fence or with text around it)."""
    data, repaired = _object_in(text), False
    if data is None:
        data, repaired = _repaired(text), True
    if data is None:
        return JSONStep(
            error=f'Reply with one JSON object: {{"action": ..., ...}}. Got: {text[:80]!r}'
        )
    action = data.get("action")
    if action == FINAL_ACTION or (action is None and "answer" in data):
        answer = data.get("answer", "")
        text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        if repaired and text and "\ud800" <= text[-1] <= "\udbff":
            text = text[:-1]  # cut between the halves of a surrogate pair
        if text.strip() == ANSWER_PLACEHOLDER:
            text = ""  # the catalogue's placeholder copied: an empty answer (nudged, then typed)
        return JSONStep(answer=text, repaired=repaired)
    if not isinstance(action, str) or not action:
        return JSONStep(error='The JSON object needs an "action": a tool name or "final_answer".')
    if repaired:  # a call cut off: its arguments are not what the model meant
        return JSONStep(error=f"Your call of {action} was cut off. Reply with the whole call.")
    arguments = data.get("action_input", data.get("input", {}))
    return JSONStep(tool=action, arguments=json.dumps(arguments, ensure_ascii=False))


def _object_in(text: str) -> dict[str, Any] | None:
    body = text.strip()
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(body[start : end + 1])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _repaired(text: str) -> dict[str, Any] | None:
    """The object of a reply cut off mid-way (``max_tokens``), with what is open closed: an
    open string, a dangling key or comma, open arrays and objects."""
    start = text.find("{")
    if start < 0:
        return None
    scan = scan_json(text, start)
    if scan.end >= 0:
        return None  # a whole object: not a cut one (it did not parse)
    body = text[start:]
    if scan.in_string:  # close it, without the half of an escape the cut left
        body = _HALF_ESCAPE.sub(r"\1", body) + '"'
    body = body.rstrip()
    if body.endswith(":"):
        body += "null"
    body = body.rstrip(",")
    try:
        data = json.loads(body + "".join(reversed(scan.closers)))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


class AnswerStream(StreamView):
    """Passes on only the characters of a streaming step's top-level ``"answer"`` string.

    A character-level reader of the JSON as it arrives: it tracks strings, escapes and depth,
    knows which top-level key a value belongs to, and decodes the answer's escapes (surrogate
    pairs included) even when a delta ends inside one. Everything else (the wrapper, the
    ``action``, a call's arguments, a non-string answer) is not shown.
    """

    __slots__ = ("_depth", "_escape", "_high", "_in_key", "_in_string", "_key", "_keyed", "_on")

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._in_key = False
        self._keyed = False  # at depth 1: the next string is a key (after "{" or ",")
        self._key = ""
        self._on = False  # inside the answer string
        self._escape = ""  # an escape read so far (starts with a backslash)
        self._high = ""  # a high surrogate waiting for its pair

    def feed(self, delta: str) -> str:
        out: list[str] = []
        for char in delta:
            if self._in_string:
                self._string_char(char, out)
            elif char == '"':
                self._in_string = True
                self._in_key = self._depth == 1 and self._keyed
                if self._in_key:
                    self._key = ""
                self._on = self._depth == 1 and not self._keyed and self._key == "answer"
            elif char in "{[":
                self._depth += 1
                self._keyed = char == "{" and self._depth == 1
            elif char in "}]":
                self._depth -= 1
                if self._depth <= 0:
                    self._key = "\0"  # the step is over: nothing after it is the answer
            elif char == "," and self._depth == 1:
                self._keyed = True
            elif char == ":" and self._depth == 1:
                self._keyed = False
        return "".join(out)

    def _string_char(self, char: str, out: list[str]) -> None:
        if self._escape:
            self._escape += char
            if self._escape[1] == "u" and len(self._escape) < 6:
                return
            self._decoded(json.loads(f'"{self._escape}"'), out)
            self._escape = ""
        elif char == "\\":
            self._escape = char
        elif char == '"':
            self._in_string = False
            if self._in_key:
                self._in_key, self._keyed = False, False
            self._on = False
        elif self._in_key:
            self._key += char
        elif self._on:
            out.append(char)

    def _decoded(self, text: str, out: list[str]) -> None:
        if self._in_key:
            self._key += text
        elif not self._on:
            return
        elif self._high:
            pair, self._high = self._high + text, ""
            out.append(pair.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
        elif "\ud800" <= text <= "\udbff":
            self._high = text
        else:
            out.append(text)


def to_json_transcript(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Assistant tool calls as the JSON the model writes; tool results stay ``role: "tool"``."""
    out: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            call = message.tool_calls[0]
            try:
                arguments = json.loads(call.arguments or "{}")
            except ValueError:
                arguments = call.arguments
            step = {"action": call.name, "action_input": arguments}
            out.append(AssistantMessage(json.dumps(step, ensure_ascii=False)))
        else:
            out.append(message)
    return tuple(out)


class JSONProtocol(ToolCallProtocol):
    """Every step forced by a JSON schema to be one call or the answer (small local models)."""

    name = "json"
    answers_repeats = True

    def catalogue(self, tools: Sequence[ToolSpec], step: StepInfo | None) -> str:
        return render_json_catalogue(tools) if tools else ""

    def to_wire(self, messages: Sequence[Message]) -> Sequence[Message]:
        return to_json_transcript(messages)

    def response_format(
        self, base: ResponseFormat | None, tools: Sequence[ToolSpec], *, final: bool
    ) -> ResponseFormat | None:
        return step_format(tools, base.schema if base is not None else None, final=final)

    def read(self, reply: ReplyContext) -> ReplyPlan:
        text, final, iteration = reply.text, reply.final, reply.iteration
        step = parse_step(text)
        if step.answer is not None:
            reason = final or "answer"
            return ReplyPlan(answer=step.answer, terminated_by=reason, truncated=step.repaired)
        if final is not None:  # the schema allowed only an answer: prose is kept, JSON is not
            return ReplyPlan(answer="" if "{" in text else text.strip(), terminated_by=final)
        if step.error is not None:
            return ReplyPlan(feedback=UserMessageMutation({"role": "user", "content": step.error}))
        return ReplyPlan(calls=(ToolCall(f"call_{iteration}_0", step.tool, step.arguments),))

    def stored(self, message: AssistantMessage, plan: ReplyPlan) -> AssistantMessage:
        if plan.feedback is not None:
            return message
        # The step's JSON is protocol, not prose: the history keeps the call or the answer.
        content = "" if plan.calls else plan.answer
        return AssistantMessage(content, (), message.reasoning_details)

    def stream_view(self) -> StreamView:
        return AnswerStream()

    def visible(self, text: str) -> str:
        return parse_step(text).answer or ""

    def rest_of_answer(self, answer: str, shown: str) -> str:
        if answer.startswith(shown):
            return answer[len(shown) :]
        return "" if shown else answer
