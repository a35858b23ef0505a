"""Request compilation: invocation config + transcript (+ its applied mutations) → LLMRequest.

A pure function: same inputs, same request. What it adds to the transcript's system message is
compile-time context that is never stored in the history: tool guidance, the protocol's tool
catalogue, experiences and the output contract. Everything that depends on how tools are called
is asked of the run's protocol object (``Invocation.protocol``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import Message, SystemMessage, ToolMessage, UserMessage
from .._transcript import Transcript, render_experiences
from ..providers import LLMRequest, ToolSpec
from ._invocation import Invocation
from ._protocol import StepInfo

__all__ = ["FINAL_ANSWER_INSTRUCTION", "HIDDEN_OBSERVATION", "compile_request", "system_context"]

HIDDEN_OBSERVATION = "[The tool ran; its output is not shown (observations are off).]"

FINAL_ANSWER_INSTRUCTION = (
    "You have reached the limit of tool calls for this request. Do not call any tool. "
    "Answer now with your best final answer, based on everything above."
)


def system_context(
    invocation: Invocation,
    transcript: Transcript,
    base: str,
    step: StepInfo | None = None,
    specs: Sequence[ToolSpec] | None = None,
) -> str:
    """The full system prompt: ``base`` plus tool guidance, the protocol's tool catalogue (with
    ``step``, where the run stands, if the protocol shows it), experiences and output contract.
    ``specs``: the tools' specs when the caller has them already."""
    sections = [base.rstrip()] if base.strip() else []
    guidance = [f"### {t.name}\n{text}" for t in invocation.tools if (text := t.guidance().strip())]
    if guidance:
        sections.append("## Tool guidance\n" + "\n\n".join(guidance))
    if invocation.tools:
        if specs is None:
            specs = [t.spec() for t in invocation.tools]
        catalogue = invocation.protocol.catalogue(specs, step)
        if catalogue:
            sections.append(catalogue)
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
    step: StepInfo | None = None,
) -> LLMRequest:
    """Build the provider request for the next LLM call.

    Args:
        invocation: The call's configuration.
        transcript: The working transcript, mutations applied.
        final_answer: Compile the forced final-answer call (no tools, explicit instruction).
        window: The messages to send instead of the whole transcript (a history window).
        instruction: The instruction of the final-answer call (``""``: none).
        step: Where the run stands (protocols that show it put it in the prompt).
    """
    protocol = invocation.protocol
    sent: Sequence[Message] = transcript.messages if window is None else window
    if not invocation.options.observation_enabled:
        sent = _without_observations(sent)
    messages: list[Message] = list(protocol.to_wire(sent))
    specs = [t.spec() for t in invocation.tools]  # once per call: the catalogue and the request
    if messages and isinstance(messages[0], SystemMessage):
        first = messages[0]
        content = system_context(invocation, transcript, first.content, step, specs)
        if content != first.content:  # else the stored message goes out as it is
            messages[0] = SystemMessage(content, first.extra)
    else:
        content = system_context(invocation, transcript, invocation.system_prompt, step, specs)
        if content:
            messages.insert(0, SystemMessage(content))
    if final_answer and instruction:
        messages.append(UserMessage(instruction))
    tools = protocol.request_tools(specs, final=final_answer)
    response_format = invocation.response_format
    if specs:
        response_format = protocol.response_format(response_format, specs, final=final_answer)
    return LLMRequest(
        messages=tuple(messages),
        tools=tools,
        tool_choice=invocation.tool_choice if tools else None,
        response_format=response_format,
        params=invocation.params,
        timeout=invocation.options.request_timeout,
    )


def _without_observations(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with every tool result's content replaced by a note (seed 001 §3.2:
    ``observation_enabled=False``); the history keeps the results."""
    hidden = HIDDEN_OBSERVATION
    return [
        ToolMessage(m.tool_call_id, hidden, m.extra) if isinstance(m, ToolMessage) else m
        for m in messages
    ]
