"""`make demo`: a chat agent with tools that streams its events to the terminal.

It uses the provider configured in `.env` (OPENAI_API_KEY, OPENAI_MODEL, OPENAI_BASE_URL); with none
configured it installs and starts a real local model (SmolLM2-135M on llama.cpp) and stops it after.
"""

from __future__ import annotations

import sys
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.exceptions import ConfigError
from simplellmfunc.hooks import (
    CustomEvent,
    LLMCallEndEvent,
    LLMChunkArriveEvent,
    ReactEndEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    is_event_yield,
)
from simplellmfunc.tools import ToolEventEmitter


@tool
async def get_weather(city: str, event_emitter: ToolEventEmitter | None = None) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. "Paris".
    """
    if event_emitter is not None:
        await event_emitter.emit("progress", {"step": f"looking up {city}"})
    return f"{city}: 21°C, light breeze, clear sky"


@tool
def utc_now() -> str:
    """Return the current UTC time (ISO 8601)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


async def main() -> None:
    async with AsyncExitStack() as stack:
        try:
            llm = OpenAICompatible.from_env()
            print(f"provider from .env: {llm.model_name} at {llm.base_url}")
        except ConfigError:
            from local_model import install, local_llm, local_model

            print("no provider in .env: starting SmolLM2-135M on llama.cpp (local, offline)")
            await anyio.to_thread.run_sync(install)
            base_url = await stack.enter_async_context(local_model())
            llm = local_llm(base_url)  # type: ignore[assignment]
        await stack.enter_async_context(llm)

        @llm_chat(
            llm,
            toolkit=[get_weather, utc_now],
            enable_event=True,
            stream=True,
            max_tool_calls=2,
            temperature=0.2,
        )
        async def assistant(message: str, history: list[dict[str, object]] | None = None):
            """You are a helpful assistant. Use the tools when they help; answer briefly."""

        question = "What's the weather in Paris right now?"
        print(f"\nuser> {question}\n")
        async for item in assistant(question):
            if not is_event_yield(item):
                print(f"\n\n[{len(item.messages)} messages in the history]")
                continue
            match item.event:
                case LLMChunkArriveEvent(text=text) if text:
                    print(text, end="", flush=True)
                case ToolCallStartEvent(tool_name=name, arguments=args):
                    print(f"\n→ {name}({args})")
                case CustomEvent(event_name=name, data=data):
                    print(f"  · {name}: {data}")
                case ToolCallEndEvent(tool_name=name, result=result, success=ok):
                    print(f"← {name}: {result[:80]!r} ({'ok' if ok else 'error'})")
                case LLMCallEndEvent(usage=usage, duration_s=duration):
                    print(f"\n  [llm call: {usage.total_tokens} tokens, {duration:.2f}s]")
                case ReactEndEvent(total_usage=usage, terminated_by=why):
                    print(f"\n[done: {why}; {usage.total_tokens} tokens over {usage.calls} calls]")


if __name__ == "__main__":
    anyio.run(main)
