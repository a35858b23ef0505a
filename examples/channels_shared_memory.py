"""A channel between two agents and a shared memory both use (in this process; pass a
RedisStore and use RedisChannel for several processes: the interface is the same)."""

import anyio
from _model import pick_model, run

from simplellmfunc import llm_chat
from simplellmfunc.runtime.multiagent import Channel, SharedMemory
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

memory = SharedMemory(namespace="newsroom")
reporter_llm = pick_model(
    ScriptedLLM.response(
        tool_calls=[
            ToolCallSpec("shared_write", {"key": "story", "value": "Cat rescues firefighter"})
        ]
    ),
    "Filed the story.",
)
editor_llm = pick_model(
    ScriptedLLM.response(tool_calls=[ToolCallSpec("shared_read", {"key": "story"})]),
    "Headline: CAT RESCUES FIREFIGHTER",
)


@llm_chat(reporter_llm, toolkit=list(memory.tools()))
async def reporter(message: str, history: list | None = None):
    """You report news: write each story to shared memory under 'story'."""


@llm_chat(editor_llm, toolkit=list(memory.tools()))
async def editor(message: str, history: list | None = None):
    """You edit: read 'story' from shared memory and write its headline."""


async def main() -> None:
    async with Channel(str, name="desk") as desk:

        async def report() -> None:
            async for text, _ in reporter("Cover the fire station."):
                await desk.send(text, timeout=30)
            await desk.close()

        async with anyio.create_task_group() as group:
            group.start_soon(report)
            async for note in desk:
                print("reporter says:", note)
    async for text, _ in editor("Write today's headline."):
        print("editor:", text)
    print("shared memory:", await memory.snapshot())
    try:
        await Channel(int).receive(timeout=0.1)
    except TimeoutError as exc:
        print("empty channel:", exc)


if __name__ == "__main__":
    run(main)
