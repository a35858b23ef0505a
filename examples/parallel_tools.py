"""One reply, several tool calls: they run concurrently and their results keep the call order."""

import time

import anyio

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec


@tool
async def slow_lookup(key: str) -> str:
    """Look a key up in a slow service."""
    await anyio.sleep(0.5)
    return f"{key}=ok"


async def main() -> None:
    async with MockLLMServer() as server, OpenAICompatible("sk-demo", "mock", server.url) as llm:
        calls = [ToolCallSpec("slow_lookup", {"key": f"k{i}"}, id=f"call_{i}") for i in range(4)]
        server.script(Reply.tool_calls(*calls), Reply.text("all four keys are ok"))

        @llm_chat(llm, toolkit=[slow_lookup])
        async def agent(message: str, history: list | None = None):
            """You look things up."""

        started = time.perf_counter()
        async for text, history in agent("look up k0..k3"):
            print(text)
        print(f"4 tools of 0.5 s each took {time.perf_counter() - started:.2f} s in all")
        print([m["content"] for m in history if m["role"] == "tool"])


if __name__ == "__main__":
    anyio.run(main)
