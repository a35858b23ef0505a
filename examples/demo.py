"""`make demo`: a typed LLM function and a tool-using agent, their events streamed to the terminal.

It uses the provider configured in `.env` (OPENAI_API_KEY, OPENAI_MODEL, OPENAI_BASE_URL). With none
configured it runs a real local model: SmolLM2-135M (`--model gemma3` or LOCAL_MODEL=gemma3: Gemma 3
270M) on llama.cpp's `llama-server` (built once from source, about 4 to 11 minutes on 2 cores;
started and stopped by the demo). A model that small follows a shape only when decoding is
constrained, so the local run uses the JSON tool protocol: every step's reply is forced by a JSON
schema to be one tool call or the final answer, and a repeated call makes the next step the
answer. It exits 1 unless the typed result validates, the agent calls the tool and its answer uses
what the tool returned.
"""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from typing import Literal

import anyio
from pydantic import BaseModel, Field

from simplellmfunc import (
    EngineOptions,
    LLMInterface,
    OpenAICompatible,
    llm_chat,
    llm_function,
    tool,
)
from simplellmfunc.events import (
    CustomEvent,
    LLMCallEndEvent,
    ReactEndEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    is_event_yield,
)
from simplellmfunc.exceptions import ConfigError, LocalModelError
from simplellmfunc.tools import ToolEventEmitter

WEATHER = {"paris": "14°C, rain showers", "tokyo": "22°C, clear sky", "oslo": "3°C, snow"}


@tool
async def get_weather(city: str, event_emitter: ToolEventEmitter | None = None) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. "Paris".
    """
    if event_emitter is not None:
        await event_emitter.emit("progress", {"step": f"looking up {city}"})
    return f"{city}: {WEATHER.get(city.strip().lower(), '18°C, light breeze')}"


class Review(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]
    stars: int = Field(ge=1, le=5)  # in the JSON schema too: a small model's grammar obeys it


async def open_model(stack: AsyncExitStack, model: str) -> tuple[LLMInterface, EngineOptions]:
    """The provider from `.env`, else the local model on llama-server (built once)."""
    try:
        llm: LLMInterface = OpenAICompatible.from_env()
        print(f"provider from .env: {llm.model_name}")
        return await stack.enter_async_context(llm), EngineOptions(max_tool_calls=3)
    except ConfigError:
        pass
    from simplellmfunc.local import MODELS, build, install_model, llama_server, server_llm

    print(f"no provider in .env: {MODELS[model].name} on llama.cpp's llama-server (local, offline)")
    await anyio.to_thread.run_sync(install_model, model)
    await anyio.to_thread.run_sync(build)
    base_url = await stack.enter_async_context(llama_server(model=model))
    llm = await stack.enter_async_context(server_llm(base_url, model))
    return llm, EngineOptions(tool_protocol="json", max_tool_calls=3)


async def main(model: str) -> list[str]:
    """Run both parts; return the checks that failed (empty: the demo passed)."""
    failed: list[str] = []
    async with AsyncExitStack() as stack:
        llm, options = await open_model(stack, model)

        @llm_function(llm, temperature=0)
        async def review(text: str) -> Review:
            """Classify the sentiment of the product review and rate it from 1 to 5 stars."""

        text = "The kettle is great: it boils fast and it is quiet. I love it."
        print(f"\n== a typed @llm_function\nreview> {text}")
        result = await review(text)
        print(f"result: {result!r}  (validated as {type(result).__name__})")
        if not isinstance(result, Review):
            failed.append("the typed result is not a Review")

        @llm_chat(llm, toolkit=[get_weather], enable_event=True, options=options, temperature=0)
        async def assistant(message: str, history: list[dict[str, object]] | None = None):
            """You answer questions about the weather. Use the get_weather tool."""

        question = "What's the weather in Paris right now?"
        print(f"\n== an agent turn with a tool\nuser> {question}")
        tool_results: list[str] = []
        answer = ""
        async for item in assistant(question):
            if not is_event_yield(item):
                print(f"[{len(item.messages)} messages in the history]")
                continue
            match item.event:
                case ToolCallStartEvent(tool_name=name, arguments=args):
                    print(f"→ {name}({args})")
                case CustomEvent(event_name=name, data=data):
                    print(f"  · {name}: {data}")
                case ToolCallEndEvent(tool_name=name, result=result_text, success=ok):
                    print(f"← {name}: {result_text[:80]!r} ({'ok' if ok else 'error'})")
                    if ok and name == "get_weather":
                        tool_results.append(str(result_text))
                case LLMCallEndEvent(usage=usage, duration_s=duration):
                    print(f"  [llm call: {usage.total_tokens} tokens, {duration:.2f}s]")
                case ReactEndEvent(final_response=final, total_usage=usage, terminated_by=why):
                    answer = str(final or "")
                    print(f"assistant> {answer}")
                    print(f"[done: {why}; {usage.total_tokens} tokens over {usage.calls} calls]")
        if not tool_results:
            failed.append("the agent made no successful get_weather call")
        elif not uses(answer, tool_results):
            failed.append("the answer does not use what the tool returned")
    return failed


def uses(answer: str, tool_results: list[str]) -> bool:
    """Whether ``answer`` repeats a number or a weather word from a tool result."""
    words = {w.strip(".,:;°C").lower() for r in tool_results for w in r.split(":", 1)[-1].split()}
    words = {w for w in words if w and w not in ("light", "sky")}
    text = answer.lower()
    return any(w in text for w in words)


def run(argv: list[str]) -> int:
    """Parse ``[--model smollm2|gemma3]``, run, print the checks; the exit status."""
    from simplellmfunc.local import MODELS, default_model

    model = argv[argv.index("--model") + 1] if "--model" in argv[:-1] else default_model()
    if model not in MODELS:
        print(f"--model: one of {', '.join(sorted(MODELS))}, not {model!r}", file=sys.stderr)
        return 2
    try:
        failed = anyio.run(main, model)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except LocalModelError as exc:
        print(f"\nthe demo could not start the local model: {exc}", file=sys.stderr)
        return 1
    if failed:
        print("\ndemo checks FAILED: " + "; ".join(failed), file=sys.stderr)
        other = "smollm2" if model == "gemma3" else "gemma3"
        print(f"(a model this small gets it wrong at times: try the other one, --model {other})")
        return 1
    print("\ndemo checks passed: a valid typed result, a tool call, an answer from the tool")
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
