"""An agent as a tool of another: `researcher.as_tool()`; its events stream into the caller's,
tagged with its name and depth, and its tokens count in the caller's total."""

from _model import pick_model, run

from simplellmfunc import llm_chat
from simplellmfunc.events import EventYield, ReactEndEvent, ToolCallStartEvent
from simplellmfunc.hooks import ResponseYield
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

researcher_llm = pick_model("The Eiffel Tower is 330 m tall.")
writer_llm = pick_model(
    ScriptedLLM.response(
        tool_calls=[ToolCallSpec("researcher", {"task": "How tall is the Eiffel Tower?"})]
    ),
    "Fun fact: the Eiffel Tower stands 330 m tall.",
)


@llm_chat(researcher_llm)
async def researcher(message: str, history: list | None = None):
    """You find facts. Answer in one sentence."""


@llm_chat(writer_llm, toolkit=[researcher.as_tool()], enable_event=True)
async def writer(message: str, history: list | None = None):
    """You write fun facts. Ask the researcher for the facts you need."""


async def main() -> None:
    async for item in writer("Write a fun fact about the Eiffel Tower."):
        if isinstance(item, EventYield):
            who = item.origin.agent or "writer"
            if isinstance(item.event, ToolCallStartEvent):
                print(f"[{who}] calls {item.event.tool_name}({item.event.arguments})")
            if isinstance(item.event, ReactEndEvent):
                usage = item.event.total_usage
                print(f"[{who}] (depth {item.origin.fork_depth}) done, {usage.calls} LLM calls")
        elif isinstance(item, ResponseYield):
            print("answer:", item.response)


if __name__ == "__main__":
    run(main)
