"""SelfReference forks: from its Python kernel, an agent spawns child agents ("forks") that work
on sub-tasks in parallel, each with its own kernel and memory key, then gathers their results.
The forks' events stream into the parent's event stream, tagged with their fork id.

    .venv/bin/python examples/self_reference_fork.py

The model comes from .env (see _model.py); without one a scripted model plays every agent's part.
"""

import json
import re
import tempfile

from _model import last_tool_result, pick_model, run

from simplellmfunc import PyRepl, SelfReference, llm_chat
from simplellmfunc.events import CustomEvent, ReactEndEvent, ToolCallStartEvent, is_event_yield
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

SPLIT = """
for city in ("Paris", "Tokyo"):
    runtime.selfref.fork.spawn(f"Population of {city}", "Answer with JSON: city, millions")
for fork_id, report in runtime.selfref.fork.gather_all().items():
    print(fork_id, report["status"], report["result"])
"""
FACTS = {"Paris": 2.1, "Tokyo": 14.0}


def scripted(request) -> object:
    """Plays the parent and both forks: each agent's system prompt names its memory key."""
    key = re.search(r'memory\["([^"]+)"\]', request.messages[0].content).group(1)
    if "::fork::" in key:  # a fork: its task is in its last user message
        city = next(c for c in FACTS if c in request.messages[-1].text)
        return json.dumps({"city": city, "millions": FACTS[city]})
    if request.messages[-1].role != "tool":
        return ScriptedLLM.response(tool_calls=[ToolCallSpec("execute_code", {"code": SPLIT})])
    printed = last_tool_result(request).split("[stdout]\n")[-1]  # what the kernel printed
    return f"Both forks reported back:\n{printed}"


async def main() -> None:
    llm = pick_model(default=scripted)
    memory = SelfReference()
    with tempfile.TemporaryDirectory() as work:
        async with llm, PyRepl(work, log_dir=f"{work}/logs") as repl:
            repl.attach_self_reference(memory)

            @llm_chat(
                llm,
                toolkit=repl.toolset,
                self_reference=memory,
                self_reference_key="planner",
                enable_event=True,
            )
            async def planner(message: str, history: list | None = None):
                """You split research into forks and combine what they find."""

            async for item in planner("Compare the populations of Paris and Tokyo."):
                if not is_event_yield(item):
                    print(f"\nanswer: {item.response}")
                    continue
                who = item.origin.fork_id or "planner"
                match item.event:
                    case ToolCallStartEvent(tool_name=name):
                        print(f"[{who}] calls {name}")
                    case CustomEvent(event_name="selfref_fork_end", data=data):
                        print(f"[{who}] fork ended: {data['status']}")
                    case ReactEndEvent(final_response=text):
                        print(f"[{who}] done: {text.splitlines()[0]}")

    for fork_id, handle in memory.get_forks("planner").items():
        print(f"{fork_id}: {handle['status']}, memory key {handle['memory_key']}")


if __name__ == "__main__":
    run(main)
