"""The terminal chat front end over a decorated agent with a PyRepl: replies stream as Markdown,
each tool call gets a card with the cell's code and live output, the kernel's input() is answered
in the prompt, and the status line shows tokens and time per turn. Needs the [tui] extra.

    pip install 'simplellmfunc[tui]'
    .venv/bin/python examples/chat_tui.py

Enter sends, Ctrl+J starts a new line, Esc aborts the running turn, /exit or Ctrl+Q quits.
The model comes from .env (see _model.py); without one a scripted model plays its part.
"""

import tempfile

from _model import last_tool_result, pick_model, run

from simplellmfunc import PyRepl, llm_chat
from simplellmfunc.chat_ui import chat_app
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

GREET = "name = input('What is your name? ')\nprint(f'Hello, {name}!')"
SCRIPT = [
    ScriptedLLM.response(tool_calls=[ToolCallSpec("execute_code", {"code": GREET})]),
    lambda request: f"The kernel says: **{last_tool_result(request).splitlines()[-1]}**",
]


async def main() -> None:
    llm = pick_model(*SCRIPT, default="(the scripted model has nothing more to say)")
    with tempfile.TemporaryDirectory() as work:
        async with llm, PyRepl(work, log_dir=f"{work}/logs") as repl:

            @llm_chat(llm, toolkit=repl.toolset, stream=True, enable_event=True)
            async def assistant(message: str, history: list | None = None):
                """You are a Python assistant. Run code with execute_code; variables persist.
                Use input() in your code when you need something from the user."""

            await chat_app(assistant, title="PyRepl chat").run_async()


if __name__ == "__main__":
    run(main, budget=float("inf"))  # an interactive session: no time limit
