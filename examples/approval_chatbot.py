"""A PyRepl chatbot that asks before it runs cells touching the file system (or processes).

Cells that only compute run at once; a cell that writes a file, removes one, imports subprocess,
or runs a shell command waits for your answer: approve, deny (the model reads your reason) or
edit the code first. The run waits inside that one tool call; an abort or the timeout ends the
wait, and the history stays valid whatever the answer.

    .venv/bin/python examples/approval_chatbot.py

In a terminal you answer yourself ([a]pprove / [d]eny / [e]dit); otherwise the app denies the
first request and approves the second. The model comes from .env (see _model.py); without one
a scripted model plays its part.
"""

import sys
import tempfile

import anyio
from _model import last_tool_result, pick_model, run

from simplellmfunc import ApprovalDecision, PyRepl, llm_chat
from simplellmfunc.builtin import code_touches_system
from simplellmfunc.engine import answer_request
from simplellmfunc.events import (
    ApprovalRequestEvent,
    ApprovalResolvedEvent,
    LLMChunkArriveEvent,
    ToolCallEndEvent,
    is_event_yield,
)
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

SESSION = "demo"
SAVE = "with open('result.txt', 'w') as f:\n    f.write(str(2 ** 10))\nprint('saved')"


def run_code(code: str) -> object:
    """A scripted reply: call execute_code with ``code``."""
    return ScriptedLLM.response(tool_calls=[ToolCallSpec("execute_code", {"code": code})])


SCRIPT = [
    run_code("print(2 ** 10)"),  # computes only: runs without asking
    lambda request: f"2**10 is {last_tool_result(request).splitlines()[-1].strip('> ')}.",
    run_code(SAVE),  # writes a file: asks
    lambda request: "I did not save it: " + last_tool_result(request),
    run_code(SAVE),
    lambda request: "Saved: " + last_tool_result(request).splitlines()[-1],
]
TURNS = ["What is 2**10?", "Save it to result.txt", "Please, save it now"]
SCRIPTED_ANSWERS = [ApprovalDecision.deny("not before I say please"), ApprovalDecision.approve()]


async def decide(request: ApprovalRequestEvent) -> ApprovalDecision:
    """Ask the person at the terminal; without one, answer from SCRIPTED_ANSWERS."""
    print(f"\n  ⚠ {request.tool_name} wants to run ({request.reason}):")
    for line in str(request.arguments.get("code", request.arguments)).splitlines():
        print(f"  │ {line}")
    if not sys.stdin.isatty():
        answer = SCRIPTED_ANSWERS.pop(0)
        why = f": {answer.reason}" if answer.reason else ""
        print(f"  [app answers: {answer.decision}{why}]")
        return answer
    choice = await anyio.to_thread.run_sync(input, "  [a]pprove / [d]eny / [e]dit? ")
    if choice.startswith("d"):
        reason = await anyio.to_thread.run_sync(input, "  reason: ")
        return ApprovalDecision.deny(reason)
    if choice.startswith("e"):
        code = await anyio.to_thread.run_sync(input, "  new code (one line): ")
        return ApprovalDecision.edit({"code": code})
    return ApprovalDecision.approve()


async def main() -> None:
    llm = pick_model(*SCRIPT)
    with tempfile.TemporaryDirectory() as work:
        repl = PyRepl(work, log_dir=f"{work}/logs", requires_approval=code_touches_system)
        async with llm, repl:

            @llm_chat(llm, toolkit=repl.toolset, stream=True, enable_event=True)
            async def assistant(message: str, history: list | None = None):
                """You are a Python assistant. Run code with execute_code. When a call is
                denied, say so and do not try another way around it."""

            history: list = []
            for message in TURNS:
                print(f"\nuser> {message}\nassistant> ", end="", flush=True)
                async for item in assistant(message, history=history, _session_id=SESSION):
                    if not is_event_yield(item):
                        history = item.messages
                        continue
                    event = item.event
                    if isinstance(event, ApprovalRequestEvent):
                        answer = await decide(event)
                        answer_request(event.tool_call_id, answer, session_id=SESSION)
                    elif isinstance(event, ApprovalResolvedEvent):
                        print(f"  [{event.outcome}]")
                    elif isinstance(event, ToolCallEndEvent):
                        print(f"  ← {event.tool_name}: {'ok' if event.success else 'not run'}")
                    elif isinstance(event, LLMChunkArriveEvent):
                        print(event.text, end="", flush=True)
                print()
            saved = (await repl.execute("open('result.txt').read()"))["return_value"]
            print(f"\nresult.txt holds {saved}")


if __name__ == "__main__":
    run(main)
