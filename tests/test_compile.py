"""Request compilation: a pure function of the invocation config and the transcript."""

from __future__ import annotations

from typing import Any

from simplellmfunc import Tool, tool
from simplellmfunc.engine import FINAL_ANSWER_INSTRUCTION, Invocation, compile_request
from simplellmfunc.providers import ResponseFormat
from simplellmfunc.testing._scripted import ScriptedLLM
from simplellmfunc.types import (
    AssistantMessageMutation,
    ExperienceForgetMutation,
    ExperienceRememberMutation,
    SystemMessage,
    ToolResultMutation,
    Transcript,
    UserMessage,
    message_to_dict,
)

LLM = ScriptedLLM()


@tool(best_practices=["Prefer metric units.", "Say which city."])
async def weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


@tool(prompt_injection_builder=lambda t: f"Call {t.name} at most twice.")
async def search(query: str) -> str:
    """Search the web."""
    return "results"


@tool
async def plain(x: int) -> int:
    """No guidance."""
    return x


def dicts(request: Any) -> list[dict[str, Any]]:
    return [message_to_dict(m) for m in request.messages]


def test_same_inputs_same_request_and_nothing_mutated() -> None:
    transcript = Transcript([SystemMessage("Be kind."), UserMessage("hi")])
    invocation = Invocation(llm=LLM, system_prompt="Be kind.", tools=(weather,))
    before = transcript.messages
    first = compile_request(invocation, transcript)
    second = compile_request(invocation, transcript)
    assert first == second
    assert transcript.messages is before  # compilation never touches the transcript


def test_system_context_holds_guidance_experiences_and_contract() -> None:
    transcript = Transcript([SystemMessage("You help."), UserMessage("hi")])
    transcript.apply(ExperienceRememberMutation("The user is in Oslo."))
    invocation = Invocation(
        llm=LLM,
        system_prompt="You help.",
        tools=(weather, search, plain),
        output_contract="## Output format\nReply with JSON.",
    )
    system = dicts(compile_request(invocation, transcript))[0]
    assert system == {
        "role": "system",
        "content": (
            "You help.\n\n"
            "## Tool guidance\n"
            "### weather\n- Prefer metric units.\n- Say which city.\n\n"
            "### search\nCall search at most twice.\n\n"
            "## Experiences\n- [exp_1] The user is in Oslo.\n\n"
            "## Output format\nReply with JSON."
        ),
    }
    assert transcript.messages[0] == SystemMessage("You help.")  # stored prompt unchanged


def test_system_prompt_is_inserted_when_the_transcript_has_none() -> None:
    transcript = Transcript([UserMessage("hi")])
    request = compile_request(Invocation(llm=LLM, system_prompt="Be brief."), transcript)
    assert dicts(request) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    bare = compile_request(Invocation(llm=LLM), transcript)
    assert dicts(bare) == [{"role": "user", "content": "hi"}]


def test_transcript_system_message_wins_over_the_invocation_prompt() -> None:
    transcript = Transcript([SystemMessage("Stored prompt.", {"name": "x"}), UserMessage("hi")])
    request = compile_request(Invocation(llm=LLM, system_prompt="Docstring."), transcript)
    assert request.messages[0] == SystemMessage("Stored prompt.", {"name": "x"})


def test_tools_tool_choice_and_params() -> None:
    transcript = Transcript([UserMessage("hi")])
    invocation = Invocation(
        llm=LLM,
        tools=(weather, plain),
        tool_choice="auto",
        params={"temperature": 0.1},
        response_format=ResponseFormat("result", {"type": "object"}),
    )
    request = compile_request(invocation, transcript)
    assert [t.name for t in request.tools] == ["weather", "plain"]
    assert request.tools[0].parameters["properties"] == {"city": {"type": "string"}}
    assert request.tool_choice == "auto"
    assert request.params == {"temperature": 0.1}
    assert request.response_format == ResponseFormat("result", {"type": "object"})
    no_tools = compile_request(Invocation(llm=LLM, tool_choice="auto"), transcript)
    assert (no_tools.tools, no_tools.tool_choice) == ((), None)


def test_final_answer_call_has_no_tools_and_the_instruction() -> None:
    transcript = Transcript([SystemMessage("S"), UserMessage("hi")])
    transcript.apply(
        AssistantMessageMutation(
            tool_calls=[
                {"id": "c1", "type": "function", "function": {"name": "plain", "arguments": "{}"}}
            ]
        )
    )
    transcript.apply(ToolResultMutation("c1", "1"))
    invocation = Invocation(llm=LLM, system_prompt="S", tools=(plain,), tool_choice="auto")
    request = compile_request(invocation, transcript, final_answer=True)
    assert (request.tools, request.tool_choice) == ((), None)
    assert dicts(request)[-1] == {"role": "user", "content": FINAL_ANSWER_INSTRUCTION}
    assert len(request.messages) == len(transcript.messages) + 1


def test_forgotten_experiences_leave_the_context() -> None:
    transcript = Transcript([UserMessage("hi")], experiences=[{"id": "exp_4", "text": "old"}])
    invocation = Invocation(llm=LLM, system_prompt="S")
    assert "[exp_4] old" in dicts(compile_request(invocation, transcript))[0]["content"]
    transcript.apply(ExperienceForgetMutation("exp_4"))
    assert dicts(compile_request(invocation, transcript))[0] == {"role": "system", "content": "S"}


def test_a_tool_object_without_guidance_adds_no_section() -> None:
    class Echo(Tool):
        async def run(self, text: str) -> str:
            """Echo the text."""
            return text

    request = compile_request(
        Invocation(llm=LLM, system_prompt="S", tools=(Echo(),)), Transcript([UserMessage("x")])
    )
    assert dicts(request)[0] == {"role": "system", "content": "S"}
    assert request.tools[0].name == "echo"
