"""SelfReference: agent memory the agent edits itself, from Python in its PyRepl kernel.

The agent remembers a fact (an "experience", shown in its system prompt from then on), adds a
line to its own system prompt, and later compacts the conversation into a summary, so later
calls send the summary instead of every old message. The memory lives in a SQLite file.

    .venv/bin/python examples/self_reference_memory.py

The model comes from .env (see _model.py); without one a scripted model plays its part.
"""

import tempfile
from pathlib import Path

from _model import pick_model, run

from simplellmfunc import PyRepl, SelfReference, llm_chat
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

KEY = "assistant"
REMEMBER = """
runtime.selfref.context.remember("The user's name is Ada; she prefers metric units.")
self_reference.memory["assistant"].append_system_prompt("Answer in one short sentence.")
print(runtime.selfref.context.inspect()["experiences"])
"""
COMPACT = """
out = runtime.selfref.context.compact(
    goal="Help Ada with questions about landmarks",
    instruction="Answer from this summary; metric units",
    discoveries=["The Eiffel Tower is 330 m tall"],
    completed=["Answered the Eiffel Tower question"],
    current_status="Waiting for the next question",
    likely_next_work="More landmark questions",
    relevant_files_directories=[],
    remember=["Ada asked about the Eiffel Tower"],
)
print(out["summary_id"], "replaced", out["replaced_messages"], "messages")
"""


def run_code(code: str) -> object:
    return ScriptedLLM.response(tool_calls=[ToolCallSpec("execute_code", {"code": code})])


SCRIPT = [
    run_code(REMEMBER),
    "Noted, Ada: metric units from now on.",
    "The Eiffel Tower is 330 m tall.",
    run_code(COMPACT),
    # After compact() the model sees the system prompt and the summary, not the old messages.
    lambda request: f"Done: I now see {len(request.messages)} messages: my prompt and a summary.",
    "Your name is Ada, and you asked about the Eiffel Tower (330 m).",
]


async def main() -> None:
    llm = pick_model(*SCRIPT)
    with tempfile.TemporaryDirectory() as work:
        memory = SelfReference(path=Path(work) / "memory.db")  # SelfReference() keeps it in RAM
        async with llm, PyRepl(work, log_dir=f"{work}/logs") as repl:
            repl.attach_self_reference(memory)  # `self_reference` and `runtime.selfref` in code

            @llm_chat(llm, toolkit=repl.toolset, self_reference=memory, self_reference_key=KEY)
            async def assistant(message: str, history: list | None = None):
                """You are a helpful assistant with a memory you manage in Python."""

            history: list = []
            for question in (
                "I'm Ada and I prefer metric units. Remember that.",
                "How tall is the Eiffel Tower?",
                "Please compact our conversation to save context.",
                "What do you know about me?",
            ):
                async for answer, history in assistant(question, history=history):
                    pass
                print(f"user: {question}\nassistant: {answer}  [{len(history)} messages]\n")

        print("experiences:", [e["text"] for e in memory.get_experiences(KEY)])
        print("summaries:", [s["id"] for s in memory.get_summaries(KEY)])
        print("system prompt:", memory.memory[KEY].get_system_prompt().splitlines()[-1])
        memory.close()


if __name__ == "__main__":
    run(main)
