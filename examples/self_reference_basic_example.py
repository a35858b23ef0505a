"""SelfReference, as SimpleLLMFunc documents it: memory an agent edits from its PyRepl kernel,
with one isolated memory per key. The same calls with the package name changed
(`SimpleLLMFunc` -> `simplellmfunc`); comments marked "differs:" say where ours differs.

    .venv/bin/python examples/self_reference_basic_example.py

The model comes from .env (see _model.py); without one a scripted model plays its part.
"""

from _model import last_tool_result, pick_model, run

from simplellmfunc import SelfReference, llm_chat
from simplellmfunc.builtin import PyRepl
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

# What the agent runs inside execute_code: the controlled memory proxy of its own key.
PREFERENCES = """
mem = self_reference.memory["agent_main"]
print(mem.count(), "messages; the first is", mem.get(0)["role"])
mem.append_system_prompt("User preference: answer in concise bullet points.")
mem.append_system_prompt("Always include one actionable next step.")
print(mem.get_system_prompt())
"""
SCRIPT = [
    ScriptedLLM.response(tool_calls=[ToolCallSpec("execute_code", {"code": PREFERENCES})]),
    lambda request: (
        "Saved. My system prompt now ends with:\n"
        + "\n".join(last_tool_result(request).splitlines()[-2:])
    ),
    "- agent_1 here: I only see my own memory.",
    "- agent_2 here: so do I.",
]


async def main() -> None:
    llm = pick_model(*SCRIPT)
    self_reference = SelfReference()  # SelfReference(path="memory.db") keeps it in SQLite
    repl = PyRepl()
    repl.attach_self_reference(self_reference)

    @llm_chat(
        llm_interface=llm,
        toolkit=repl.toolset,
        self_reference=self_reference,
        self_reference_key="agent_main",
    )
    async def agent(message: str, history=None):
        """You are a helpful assistant."""

    # Several agents can share one REPL and one SelfReference, each with its own key.
    @llm_chat(llm_interface=llm, self_reference=self_reference, self_reference_key="agent_1")
    async def agent_1(message: str, history=None):
        """You are agent one."""

    @llm_chat(llm_interface=llm, self_reference=self_reference, self_reference_key="agent_2")
    async def agent_2(message: str, history=None):
        """You are agent two."""

    async with llm:
        turns = [(agent, "Keep answers short, please."), (agent_1, "hi"), (agent_2, "hi")]
        for chat, message in turns:
            async for text, _history in chat(message):
                print(f"{text}\n")
    await repl.close()  # differs: a kernel is a process; close it (or use `async with`)

    # The host side: the same memory API, outside the kernel.
    print("keys:", self_reference.keys())
    print("agent_1 history:", [m["role"] for m in self_reference.get_history("agent_1")])
    mem = self_reference.memory["agent_main"]
    print("agent_main:", mem.count(), "messages; prompt:", mem.get_system_prompt().splitlines())

    self_reference.bind_history("my_key", [{"role": "system", "content": "You are helpful."}])
    notes = self_reference.memory["my_key"]
    notes.append({"role": "user", "content": "remember this"})
    notes.insert(1, {"role": "assistant", "content": "inserted"})
    notes.update(1, {"role": "assistant", "content": "updated"})
    notes.delete(1)
    print("my_key:", [m["content"] for m in self_reference.get_history("my_key")])
    self_reference.remember("my_key", "The user likes tea.")  # runtime.selfref.context.remember
    print("experiences:", self_reference.get_experiences("my_key"))
    notes.clear()  # forgetting is deleting messages; reset_repl only clears Python variables
    print("after clear:", notes.count())


if __name__ == "__main__":
    run(main)
