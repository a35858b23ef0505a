"""The PyRepl user guide of SimpleLLMFunc, as one script: the same calls with the package name
changed (`SimpleLLMFunc` -> `simplellmfunc`). Comments marked "differs:" say where ours differs.

    .venv/bin/python examples/pyrepl_example.py

The model comes from .env (see _model.py); without one a scripted model plays its part.
"""

import sys

from _model import pick_model, run

from simplellmfunc import llm_chat
from simplellmfunc.builtin import PyRepl
from simplellmfunc.hooks import CustomEvent, is_event_yield
from simplellmfunc.hooks.event_emitter import ToolEventEmitter
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

STATS = """
import random, statistics
numbers = [random.randint(1, 100) for _ in range(100)]
print(f"mean {statistics.mean(numbers):.1f}, stdev {statistics.stdev(numbers):.1f}")
"""
SCRIPT = [
    ScriptedLLM.response(tool_calls=[ToolCallSpec("execute_code", {"code": STATS})]),
    "Done: the mean and standard deviation are printed above.",
]


async def data_helper_demo(llm) -> None:
    """A data analysis assistant whose kernel output streams as events."""
    repl = PyRepl()

    @llm_chat(llm_interface=llm, toolkit=repl.toolset, enable_event=True)
    async def data_helper(message: str, history=None):
        """You are a data analysis assistant. Solve tasks with Python code, a small piece
        at a time, printing the results."""

    async for output in data_helper("Make a list of 100 random numbers; give mean and stdev."):
        if is_event_yield(output):
            event = output.event
            if isinstance(event, CustomEvent):
                if event.event_name == "kernel_stdout":
                    print(f"[stdout] {event.data['text']}", end="")
                elif event.event_name == "kernel_stderr":
                    print(f"[stderr] {event.data['text']}", end="", file=sys.stderr)
                # kernel_input_request: answer with repl.submit_input(request_id, value)
        else:
            print(f"assistant: {output.response}")
    await repl.close()  # differs: a kernel is a process; close it (or use `async with`)


async def continuous_context_demo() -> None:
    """Variables persist between executions; the tools can be called directly."""
    repl = PyRepl(execution_timeout_seconds=180, input_idle_timeout_seconds=300)
    execute = next(t for t in repl.toolset if t.name == "execute_code")
    # differs: three tools (execute_code, reset_repl, list_variables), as seed 000 lists them.
    print("tools:", [t.name for t in repl.toolset])

    result1 = await execute(code="data = [3, 1, 4, 1, 5, 9, 2, 6]\nprint(len(data), 'numbers')")
    result2 = await execute(code="mean = sum(data) / len(data)\nprint(f'mean: {mean}')")
    print(result1["stdout"], result2["stdout"], sep="", end="")

    result = await execute(code="for i in range(2)\n    print(i)")  # a syntax error
    if not result["success"]:
        details = result["error_details"]  # line, column, snippet, pointer, summary ...
        print(f"{details['error_type']} at line {details['line']}: {details['snippet']!r}")

    emitter = ToolEventEmitter()  # collects the events of direct calls
    await execute(code="for i in range(3): print(i)", event_emitter=emitter)
    print("events:", [e.event.data["text"] for e in await emitter.get_events()])

    print("variables:", await repl.list_variables())
    print(await repl.reset())  # differs: English text, as every string we ship
    print("after reset:", await repl.list_variables())
    print("audit log:", repl.audit_log_file)  # $LOG_DIR/pyrepl/<instance_id>/executions.jsonl
    await repl.close()


async def isolation_demo() -> None:
    """Two PyRepl instances are two kernels: nothing is shared."""
    async with PyRepl() as repl1, PyRepl() as repl2:
        await repl1.execute("x = 'only in repl1'")
        seen = await repl2.execute("print('x' in globals())")
        print("repl2 sees repl1's x:", seen["stdout"].strip())


async def main() -> None:
    llm = pick_model(*SCRIPT)
    async with llm:
        await data_helper_demo(llm)
    await continuous_context_demo()
    await isolation_demo()


if __name__ == "__main__":
    run(main)
