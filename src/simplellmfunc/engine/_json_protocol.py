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
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._messages import AssistantMessage, Message
from ..providers import ResponseFormat, ToolSpec

__all__ = [
    "FINAL_ACTION",
    "JSONStep",
    "parse_step",
    "render_json_catalogue",
    "repeat_result",
    "step_format",
    "to_json_transcript",
]

FINAL_ACTION = "final_answer"
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
    without calling (2 of 3). The schemas themselves are enforced by ``response_format``.
    """
    lines = ["## Tools"]
    for spec in tools:
        properties = dict(spec.parameters).get("properties") or {}
        arguments = ", ".join(f'"{name}": ...' for name in properties)
        call = f'{{"action": "{spec.name}", "action_input": {{{arguments}}}}}'
        lines.append(f"- {spec.name}: {spec.description.strip()} To use it, reply {call}.")
    lines.append(f'When you have the result, reply {{"action": "{FINAL_ACTION}", "answer": ...}}.')
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class JSONStep:
    """What a step's reply says: a call (``tool`` and ``arguments`` as JSON text), the answer
    (``answer``, as text), or ``error`` for a reply that is not a valid step."""

    tool: str = ""
    arguments: str = "{}"
    answer: str | None = None
    error: str | None = None


def parse_step(text: str) -> JSONStep:
    """Read one step's reply (a JSON object, perhaps in a fence or with text around it)."""
    data = _object_in(text)
    if data is None:
        return JSONStep(
            error=f'Reply with one JSON object: {{"action": ..., ...}}. Got: {text[:80]!r}'
        )
    action = data.get("action")
    if action == FINAL_ACTION:
        answer = data.get("answer", "")
        return JSONStep(answer=answer if isinstance(answer, str) else json.dumps(answer))
    if not isinstance(action, str) or not action:
        return JSONStep(error='The JSON object needs an "action": a tool name or "final_answer".')
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


def repeat_result(name: str) -> str:
    """What a repeated call is answered with (it is not run again)."""
    return (
        f"Not run again: you already called {name} with these arguments and its result is "
        "above. Give your final answer now."
    )


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
