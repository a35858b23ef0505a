"""Request compilation: invocation config + transcript (+ its applied mutations) → LLMRequest.

A pure function: same inputs, same request. What it adds to the transcript's system message is
compile-time context that is never stored in the history: tool guidance, experiences and the
output contract.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import Message, SystemMessage, UserMessage
from .._transcript import Transcript, render_experiences
from ..providers import LLMRequest
from ._invocation import Invocation
from ._json_protocol import render_json_catalogue, step_format, to_json_transcript
from ._text_protocol import render_catalogue, to_text_transcript

__all__ = ["FINAL_ANSWER_INSTRUCTION", "compile_request", "system_context"]

FINAL_ANSWER_INSTRUCTION = (
    "You have reached the limit of tool calls for this request. Do not call any tool. "
    "Answer now with your best final answer, based on everything above."
)


def system_context(invocation: Invocation, transcript: Transcript, base: str) -> str:
    """The full system prompt: ``base`` plus tool guidance, experiences and output contract."""
    sections = [base.rstrip()] if base.strip() else []
    guidance = [f"### {t.name}\n{text}" for t in invocation.tools if (text := t.guidance().strip())]
    if guidance:
        sections.append("## Tool guidance\n" + "\n\n".join(guidance))
    if invocation.json_protocol:
        sections.append(render_json_catalogue([t.spec() for t in invocation.tools]))
    elif invocation.text_protocol and invocation.tools:
        sections.append(render_catalogue([t.spec() for t in invocation.tools]))
    experiences = render_experiences(transcript.experiences)
    if experiences:
        sections.append(experiences)
    if invocation.output_contract:
        sections.append(invocation.output_contract)
    return "\n\n".join(sections)


def compile_request(
    invocation: Invocation,
    transcript: Transcript,
    *,
    final_answer: bool = False,
    window: Sequence[Message] | None = None,
    instruction: str = FINAL_ANSWER_INSTRUCTION,
) -> LLMRequest:
    """Build the provider request for the next LLM call.

    Args:
        invocation: The call's configuration.
        transcript: The working transcript, mutations applied.
        final_answer: Compile the forced final-answer call (no tools, explicit instruction).
        window: The messages to send instead of the whole transcript (a history window).
        instruction: The instruction of the final-answer call (``""``: none).
    """
    messages: list[Message] = list(transcript.messages if window is None else window)
    if invocation.json_protocol:
        messages = list(to_json_transcript(messages))
    elif invocation.text_protocol:
        messages = list(to_text_transcript(messages))
    if messages and isinstance(messages[0], SystemMessage):
        first = messages[0]
        content = system_context(invocation, transcript, first.content)
        if content != first.content:  # else the stored message goes out as it is
            messages[0] = SystemMessage(content, first.extra)
    else:
        content = system_context(invocation, transcript, invocation.system_prompt)
        if content:
            messages.insert(0, SystemMessage(content))
    if final_answer and instruction:
        messages.append(UserMessage(instruction))
    native = not (invocation.text_protocol or invocation.json_protocol)
    use_tools = bool(invocation.tools) and not final_answer and native
    tools = tuple(t.spec() for t in invocation.tools) if use_tools else ()
    response_format = invocation.response_format
    if invocation.json_protocol:
        answer = response_format.schema if response_format is not None else None
        specs = [t.spec() for t in invocation.tools]
        response_format = step_format(specs, answer, final=final_answer)
    return LLMRequest(
        messages=tuple(messages),
        tools=tools,
        tool_choice=invocation.tool_choice if tools else None,
        response_format=response_format,
        params=invocation.params,
        timeout=invocation.options.request_timeout,
    )
