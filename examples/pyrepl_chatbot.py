"""PyRepl in a chatbot: the model runs Python in a kernel that keeps its variables between turns.
The kernel's output streams live as events, and when a cell calls input() the app answers it.

    .venv/bin/python examples/pyrepl_chatbot.py

In a terminal you answer the kernel's input() yourself; otherwise the app answers "Ada".
The model comes from .env (see _model.py); without one a scripted model plays its part.
"""

import sys
import tempfile

import anyio
from _model import last_tool_result, pick_model, run

from simplellmfunc import PyRepl, llm_chat
from simplellmfunc.events import (
    CustomEvent,
    LLMChunkArriveEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    is_event_yield,
)
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec


def run_code(code: str) -> object:
    """A scripted reply: call execute_code with ``code``."""
    return ScriptedLLM.response(tool_calls=[ToolCallSpec("execute_code", {"code": code})])


SCRIPT = [
    # Turn 1: ask the user something from inside the kernel.
    run_code("name = input('What is your name? ')\nprint(f'Hello, {name}!')"),
    lambda request: f"The kernel greeted you: {last_tool_result(request).splitlines()[-1]}",
    # Turn 2: the variable is still there.
    run_code("print(len(name), name.upper())"),
    "Your name, still in the kernel's `name` variable, is shown above.",
]


async def answer_input(repl: PyRepl, request_id: str, prompt: str) -> None:
    """The app's side of input(): ask the person at the terminal, or answer for them."""
    if sys.stdin.isatty():
        value = await anyio.to_thread.run_sync(input, prompt)
    else:
        value = "Ada"
        print(f"\n  [app answers the kernel's {prompt!r} with {value!r}]")
    repl.submit_input(request_id, value)


async def main() -> None:
    llm = pick_model(*SCRIPT)
    with tempfile.TemporaryDirectory() as work:
        async with llm, PyRepl(work, log_dir=f"{work}/logs") as repl:

            @llm_chat(llm, toolkit=repl.toolset, stream=True, enable_event=True)
            async def assistant(message: str, history: list | None = None):
                """You are a Python assistant. Run code with execute_code; variables persist.
                Use input() in your code when you need something from the user."""

            history: list = []
            for question in ("Ask me my name in Python, then greet me.", "How long is my name?"):
                print(f"\nuser: {question}\nassistant: ", end="")
                async for item in assistant(question, history=history):
                    if not is_event_yield(item):
                        history = item.messages  # the ResponseYield ends the turn
                        continue
                    match item.event:
                        case LLMChunkArriveEvent(text=text):
                            print(text, end="", flush=True)
                        case ToolCallStartEvent(tool_name=name, arguments=args):
                            code = "\n  │ ".join(str(args.get("code", "")).splitlines())
                            print(f"\n  ┌ {name}\n  │ {code}")
                        case CustomEvent(event_name="kernel_stdout", data=data):
                            print(f"  │ > {data['text']}", end="")
                        case CustomEvent(event_name="kernel_input_request", data=data):
                            await answer_input(repl, data["request_id"], data["prompt"])
                        case ToolCallEndEvent(success=ok, duration_s=took):
                            print(f"  └ {'ok' if ok else 'failed'} in {took:.2f} s")
                print()


if __name__ == "__main__":
    run(main)
