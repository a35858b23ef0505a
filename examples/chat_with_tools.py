"""A chat agent with tools: yields (text, history); the history is valid for the next turn."""

import anyio

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def main() -> None:
    async with MockLLMServer() as server, OpenAICompatible("sk-demo", "mock", server.url) as llm:
        server.script(
            Reply.tool_calls(ToolCallSpec("add", {"a": 17, "b": 25})),
            Reply.text("17 + 25 = 42"),
            Reply.text("You asked about 17 + 25."),
        )

        @llm_chat(llm, toolkit=[add])
        async def calculator(message: str, history: list | None = None):
            """You are a careful calculator. Use the tools."""

        history: list = []
        for question in ("What is 17 + 25?", "What did I ask?"):
            async for text, history in calculator(question, history=history):
                print(f"assistant: {text}")
        print(f"{len(history)} messages in the history")


if __name__ == "__main__":
    anyio.run(main)
