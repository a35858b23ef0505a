"""Typed events: stream text deltas, tool calls and a tool's custom events as they happen."""

import anyio

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.hooks import (
    CustomEvent,
    LLMChunkArriveEvent,
    ReactEndEvent,
    ToolCallEndEvent,
    is_event_yield,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.tools import ToolEventEmitter


@tool
async def crawl(url: str, event_emitter: ToolEventEmitter | None = None) -> str:
    """Fetch a page (pretend)."""
    for step in ("connect", "download", "parse"):
        if event_emitter is not None:
            await event_emitter.emit("progress", {"step": step})
    return f"<html>{url}</html>"


async def main() -> None:
    async with MockLLMServer() as server, OpenAICompatible("sk-demo", "mock", server.url) as llm:
        server.script(
            Reply.tool_calls(ToolCallSpec("crawl", {"url": "https://example.com"})),
            Reply.text("The page is a placeholder.", chunks=5),
        )

        @llm_chat(llm, toolkit=[crawl], stream=True, enable_event=True)
        async def agent(message: str, history: list | None = None):
            """You summarise web pages."""

        async for item in agent("Summarise example.com"):
            if not is_event_yield(item):
                continue
            match item.event:
                case LLMChunkArriveEvent(text=text) if text:
                    print(text, end="", flush=True)
                case CustomEvent(event_name=name, data=data):
                    print(f"[{item.origin.tool_name}] {name}: {data}")
                case ToolCallEndEvent(tool_name=name, success=ok):
                    print(f"[{name}] done, success={ok}")
                case ReactEndEvent(total_usage=usage):
                    print(f"\n{usage.total_tokens} tokens over {usage.calls} calls")


if __name__ == "__main__":
    anyio.run(main)
