"""The text tool-call protocol, for models and servers without native function calling.

The tool catalogue and the call format go into the system prompt; replies are parsed in this
priority order (seed 001 §4.2):

1. a fenced JSON block (```json ... ```),
2. inline JSON found with a balanced-brace scanner (a JSON array is a batch of calls),
3. ``<action>name</action><input>{...}</input>`` XML tags,
4. a keyword heuristic ("use the X tool ..."; off by default: it guesses),
5. no action: the reply is the final answer.

A call is ``{"action": "<tool>", "input": {...}}`` (``tool``/``name`` and ``arguments``/``args``/
``parameters`` are accepted as synonyms). ``{"action": "terminate", "answer": ...}`` (the form
seed 001 §3.4 tells the model to write; ``"input": {"answer": ...}`` works too) ends the run
explicitly. A reply that calls tools and also announces its final answer ("Final answer: …")
has its tools run first, then ends (seed 001 §3.3, phase 7). In the history, parsed calls are
stored exactly like native tool calls, so events and histories do not depend on the protocol;
:func:`to_text_transcript` renders them back as text for the provider.

:class:`TextProtocol` is the strategy object (``._protocol``) the loop uses for this protocol.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from .._mutations import UserMessageMutation
from ..providers import ToolSpec
from ._protocol import (
    ReplyContext,
    ReplyPlan,
    StepInfo,
    StreamView,
    ToolCallProtocol,
    final_answer_after,
    implicit_stop,
    scan_json,
    tidy,
)

__all__ = [
    "TERMINATE",
    "ParsedReply",
    "TextAction",
    "TextProtocol",
    "parse_reply",
    "render_catalogue",
    "to_text_transcript",
]

TERMINATE = "terminate"
_NAME_KEYS = ("action", "tool", "name", "tool_name", "function")
_INPUT_KEYS = ("input", "arguments", "args", "parameters", "action_input", "params")
_FENCE = re.compile(r"```(?:json|JSON|tool|action)?[ \t]*\n?(.*?)```", re.DOTALL)
_XML = re.compile(
    r"<action>\s*(?P<name>[\w.-]+)\s*</action>\s*(?:<input>(?P<input>.*?)</input>)?", re.DOTALL
)
_KEYWORD = re.compile(r"\b(?:use|call|run|invoke)\s+(?:the\s+)?`?(?P<name>[\w-]+)`?\s+tool\b", re.I)


@dataclass(frozen=True, slots=True)
class TextAction:
    """One parsed call: tool name and arguments (``error`` set when they are unusable)."""

    tool: str
    input: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    raw: str = field(default="", compare=False)

    def arguments(self) -> str:
        """The arguments as JSON text; for an unusable input, the text as the model wrote it
        (so argument validation reports the problem to the model)."""
        if self.error is not None:
            return self.raw or "null"
        return json.dumps(self.input, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class ParsedReply:
    """What a reply asks for: actions, or nothing (a final answer), or a format error.

    Attributes:
        actions: The calls, in order (``terminate`` excluded).
        terminate_answer: Set when the reply called ``terminate``.
        format_error: A message for the model when the reply looked like a call but was
            malformed.
        source: Which rule matched: ``json_block``, ``inline_json``, ``xml``, ``keyword``
            or ``none``.
    """

    actions: tuple[TextAction, ...] = ()
    terminate_answer: str | None = None
    format_error: str | None = None
    source: str = "none"


def render_catalogue(tools: Sequence[ToolSpec]) -> str:
    """The system-prompt section describing the tools and the call format."""
    lines = ["## Tools", "You can call these tools:"]
    for spec in tools:
        schema = json.dumps(dict(spec.parameters), ensure_ascii=False, separators=(",", ":"))
        lines.append(f"- {spec.name}: {spec.description}\n  input schema: {schema}")
    lines.append(
        "\nTo call a tool, reply with exactly one fenced JSON block and nothing after it:\n"
        '```json\n{"action": "<tool name>", "input": {<arguments>}}\n```\n'
        "To call several tools at once, put a JSON array of such objects in the block. "
        "You will receive each result as an observation. When you have the final answer, "
        "reply with the answer and no JSON block, or call "
        '{"action": "terminate", "answer": "<final answer>"}.'
    )
    return "\n".join(lines)


def parse_reply(
    text: str, tool_names: Sequence[str], *, keyword_heuristic: bool = False
) -> ParsedReply:
    """Parse a reply into actions following the priority order of the module docstring."""
    for source, candidates in (
        ("json_block", _fenced(text)),
        ("inline_json", _inline(text)),
    ):
        for candidate in candidates:
            parsed = _from_json(candidate, source)
            if parsed is not None:
                return parsed
    xml = _from_xml(text)
    if xml is not None:
        return xml
    if keyword_heuristic:
        match = _KEYWORD.search(text)
        if match and match.group("name") in tool_names:
            return ParsedReply(
                (TextAction(match.group("name"), {"query": text.strip()}),), None, None, "keyword"
            )
    broken = _looks_like_call(text)
    if broken:
        return ParsedReply(format_error=broken, source="json_block")
    return ParsedReply()


def _fenced(text: str) -> Iterator[str]:
    for match in _FENCE.finditer(text):
        yield match.group(1).strip()


def _inline(text: str) -> Iterator[str]:
    """Balanced ``{...}`` / ``[...]`` spans, skipping braces inside JSON strings."""
    for begin, end in _inline_spans(text):
        yield text[begin:end]


def _inline_spans(text: str) -> Iterator[tuple[int, int]]:
    start = 0
    while True:
        begin = _next_open(text, start)
        if begin < 0:
            return
        end = _balanced_end(text, begin)
        if end < 0:
            start = begin + 1
            continue
        yield begin, end + 1
        start = end + 1


def _next_open(text: str, start: int) -> int:
    positions = [p for p in (text.find("{", start), text.find("[", start)) if p >= 0]
    return min(positions) if positions else -1


def _balanced_end(text: str, begin: int) -> int:
    """The index of the bracket closing the one at ``begin`` (``-1``: it is not closed)."""
    end = scan_json(text, begin).end
    return end - 1 if end >= 0 else -1


def _from_json(candidate: str, source: str) -> ParsedReply | None:
    try:
        value = json.loads(candidate)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(i, dict) and _name_of(i) for i in items):
        return None
    actions: list[TextAction] = []
    for item in items:
        name = _name_of(item) or ""
        arguments = _input_of(item)
        if name == TERMINATE:
            if "answer" in item:  # the seed's form: {"action": "terminate", "answer": ...}
                answer = item["answer"]
            elif isinstance(arguments, dict):
                answer = arguments.get("answer", arguments)
            else:
                answer = arguments
            text = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
            return ParsedReply(tuple(actions), text, None, source)
        if isinstance(arguments, dict):
            actions.append(TextAction(name, arguments))
        else:
            raw = json.dumps(arguments, ensure_ascii=False)
            actions.append(TextAction(name, {}, "the tool input must be a JSON object", raw))
    return ParsedReply(tuple(actions), None, None, source)


def _name_of(item: dict[str, Any]) -> str | None:
    for key in _NAME_KEYS:
        value = item.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            return str(value["name"])
    return None


def _input_of(item: dict[str, Any]) -> Any:
    for key in _INPUT_KEYS:
        if key in item:
            value = item[key]
            if isinstance(value, str):
                try:
                    return json.loads(value) if value.strip() else {}
                except ValueError:
                    return value
            return value
    function = item.get("function")
    if isinstance(function, dict) and "arguments" in function:
        return _input_of(function)
    return {}


def _from_xml(text: str) -> ParsedReply | None:
    actions: list[TextAction] = []
    for match in _XML.finditer(text):
        name, raw = match.group("name"), (match.group("input") or "").strip()
        try:
            arguments = json.loads(raw) if raw else {}
        except ValueError:
            actions.append(TextAction(name, {}, f"<input> is not valid JSON: {raw[:80]!r}", raw))
            continue
        if name == TERMINATE:
            answer = arguments.get("answer") if isinstance(arguments, dict) else arguments
            return ParsedReply(
                tuple(actions), str(answer if answer is not None else raw), None, "xml"
            )
        if isinstance(arguments, dict):
            actions.append(TextAction(name, arguments))
        else:
            actions.append(TextAction(name, {}, "the tool input must be a JSON object", raw))
    return ParsedReply(tuple(actions), None, None, "xml") if actions else None


def _looks_like_call(text: str) -> str | None:
    """A format error for replies that clearly tried to call a tool but are not valid JSON."""
    for block in _fenced(text):
        if re.search(r'"(?:action|tool)"\s*:', block):
            return (
                "Your tool call is not valid JSON. Reply with one fenced block containing "
                '{"action": "<tool name>", "input": {...}} (double quotes, no trailing commas).'
            )
    return None


def to_text_transcript(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Render native-style tool calls and results as plain text turns for the provider."""
    out: list[Message] = []
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            if message.content and _has_calls(message.content):
                out.append(AssistantMessage(message.content))  # written in text mode already
                continue
            calls = [
                {"action": c.name, "input": _loads_or_raw(c.arguments)} for c in message.tool_calls
            ]
            block = json.dumps(calls[0] if len(calls) == 1 else calls, ensure_ascii=False)
            text = f"{message.content or ''}\n```json\n{block}\n```".strip()
            out.append(AssistantMessage(text))
        elif isinstance(message, ToolMessage):
            observation = f"Observation ({message.tool_call_id}): {message.text}"
            previous = out[-1] if out else None
            if (
                isinstance(previous, UserMessage)
                and isinstance(previous.content, str)
                and (previous.content.startswith("Observation ("))
            ):
                out[-1] = UserMessage(f"{previous.content}\n{observation}")
            else:
                out.append(UserMessage(observation))
        else:
            out.append(message)
    return tuple(out)


def _has_calls(text: str) -> bool:
    return bool(parse_reply(text, ()).actions)


def _loads_or_raw(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def prose_of(text: str) -> str:
    """``text`` without the blocks that parse as calls (fenced, inline JSON, XML tags): what a
    reader is shown of a text-protocol reply."""
    cuts: list[tuple[int, int]] = []
    for match in _FENCE.finditer(text):
        if _from_json(match.group(1).strip(), "json_block") is not None:
            cuts.append(match.span())
    for begin, end in _inline_spans(text):
        inside = any(a <= begin < b for a, b in cuts)
        if not inside and _from_json(text[begin:end], "inline_json") is not None:
            cuts.append((begin, end))
    cuts.extend(match.span() for match in _XML.finditer(text))
    if not cuts:
        return text
    kept, at = [], 0
    for begin, end in sorted(cuts):
        if begin >= at:
            kept.append(text[at:begin])
            at = end
    kept.append(text[at:])
    return tidy("".join(kept))


_CALL_STARTS = ("```json", "```tool", "```action", '{"action"', '{"tool"', '[{"action"', "<action>")


class HeldCalls(StreamView):
    """Shows a text-protocol reply as it streams up to where a call may begin (a fenced JSON
    block, ``{"action"``, ``<action>``); from there on the text is held, and what of it is
    prose or answer is shown once the reply is read (:meth:`TextProtocol.rest_of_answer`)."""

    __slots__ = ("_held", "_pending")

    def __init__(self) -> None:
        self._pending = ""
        self._held = False

    def feed(self, delta: str) -> str:
        if self._held:
            return ""
        text = self._pending + delta
        starts = [at for start in _CALL_STARTS if (at := text.find(start)) >= 0]
        if starts:
            self._held, self._pending = True, ""
            return text[: min(starts)]
        keep = _partial_start(text)
        self._pending = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]


def _partial_start(text: str) -> int:
    """The length of the longest tail of ``text`` that may grow into a call's start."""
    for size in range(min(len(text), max(map(len, _CALL_STARTS)) - 1), 0, -1):
        tail = text[-size:]
        if any(start.startswith(tail) for start in _CALL_STARTS):
            return size
    return 0


class TextProtocol(ToolCallProtocol):
    """Tools described in the system prompt, calls parsed from the reply's text; each step's
    prompt says where the run stands (``[Step k/N, remaining: r]``, seed 001 §3.4)."""

    name = "text"
    implicit_signals = True

    def catalogue(self, tools: Sequence[ToolSpec], step: StepInfo | None) -> str:
        if not tools:
            return ""
        section = render_catalogue(tools)
        return section if step is None else f"{section}\n\n{step.render()}"

    def to_wire(self, messages: Sequence[Message]) -> Sequence[Message]:
        return to_text_transcript(messages)

    def read(self, reply: ReplyContext) -> ReplyPlan:
        text, final, iteration, options = reply.text, reply.final, reply.iteration, reply.options
        parsed = parse_reply(text, reply.tools, keyword_heuristic=options.keyword_heuristic)
        if final is not None:
            answer = parsed.terminate_answer
            answer = prose_of(text) if answer is None else answer
            return ReplyPlan(answer=answer, terminated_by=final)
        implicit = implicit_stop(options, text, self.implicit_signals)
        if parsed.actions:
            calls = tuple(
                ToolCall(f"call_{iteration}_{n}", action.tool, action.arguments())
                for n, action in enumerate(parsed.actions)
            )
            if parsed.terminate_answer is not None:
                return ReplyPlan(calls, parsed.terminate_answer, "terminate", stop_after=True)
            if implicit:
                answer = final_answer_after(prose_of(text), options.termination.signals)
                return ReplyPlan(calls, answer, "implicit", stop_after=True)
            return ReplyPlan(calls=calls)
        if parsed.terminate_answer is not None:
            return ReplyPlan(answer=parsed.terminate_answer, terminated_by="terminate")
        if implicit:
            return ReplyPlan(answer=text, terminated_by="implicit")
        if parsed.format_error is not None:
            feedback = UserMessageMutation({"role": "user", "content": parsed.format_error})
            return ReplyPlan(feedback=feedback)
        return ReplyPlan(answer=text)

    def stored(self, message: AssistantMessage, plan: ReplyPlan) -> AssistantMessage:
        if plan.terminated_by == "terminate" and not plan.calls:
            # The terminate action is protocol: the history keeps its answer.
            return AssistantMessage(plan.answer, (), message.reasoning_details)
        return message

    def stream_view(self) -> StreamView:
        return HeldCalls()

    def visible(self, text: str) -> str:
        return prose_of(text)

    def rest_of_answer(self, answer: str, shown: str) -> str:
        for prefix in (shown, shown.rstrip()):
            if prefix and answer.startswith(prefix):
                return answer[len(prefix) :]
        return "" if answer.strip() in shown else answer
