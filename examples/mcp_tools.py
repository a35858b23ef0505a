"""MCP: the tools of an MCP server, used by an agent like any other tools.

The server here is `mcp-server-time` (a dev dependency), started over stdio by this Python.
Servers run in their own process group with only an allowlisted environment (your API keys stay
private) and are stopped when the `async with` block ends.

    .venv/bin/python examples/mcp_tools.py

The model comes from .env (see _model.py); without one a scripted model plays its part.
"""

import importlib.util
import json
import sys

from _model import pick_model, run

from simplellmfunc import MCPToolset, llm_chat
from simplellmfunc.events import ToolCallEndEvent, ToolCallStartEvent, is_event_yield
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
SCRIPT = [
    ScriptedLLM.response(
        tool_calls=[
            ToolCallSpec("get_current_time", {"timezone": "Asia/Tokyo"}),
            ToolCallSpec(
                "convert_time",
                {
                    "source_timezone": "Europe/Paris",
                    "time": "09:00",
                    "target_timezone": "Asia/Tokyo",
                },
            ),
        ]
    ),
    lambda request: answer([json.loads(m.text) for m in request.messages if m.role == "tool"]),
]


def answer(results: list[dict]) -> str:
    """The scripted model's answer, read from the two tool results (JSON)."""
    now, converted = results[-2], results[-1]
    there = converted["target"]["datetime"][11:16]
    return f"It is {now['datetime'][11:16]} in Tokyo; 09:00 in Paris is {there} there."


async def main() -> None:
    if importlib.util.find_spec("mcp_server_time") is None:
        sys.exit("this example needs mcp-server-time: `make install` (dev dependencies) has it")
    llm = pick_model(*SCRIPT)
    async with llm, MCPToolset.stdio(SERVER[0], SERVER[1:]) as time_tools:
        print("server tools:", [tool.name for tool in await time_tools.list_tools()])

        @llm_chat(llm, toolkit=[time_tools], enable_event=True)
        async def assistant(message: str, history: list | None = None):
            """You answer questions about time zones with the time tools."""

        question = "What time is it in Tokyo, and what is 09:00 in Paris there?"
        async for item in assistant(question):
            if not is_event_yield(item):
                print(f"assistant: {item.response}")
                continue
            match item.event:
                case ToolCallStartEvent(tool_name=name, arguments=args):
                    print(f"→ {name}({dict(args)})")
                case ToolCallEndEvent(tool_name=name, result=result):
                    print(f"← {name}: {' '.join(result.split())[:120]}")


if __name__ == "__main__":
    run(main)
