"""The model an example talks to: yours when `.env` or the environment names one, else a
scripted stand-in, so every example also runs offline (that is how CI runs them).

Name a model in `.env` (or export the variables):

    EXAMPLE_MODEL=deepseek:deepseek-chat    # any make_llm preset; its key from DEEPSEEK_API_KEY
    # or OPENAI_MODEL=gpt-4o-mini with OPENAI_API_KEY (and OPENAI_BASE_URL for another server)

With neither, a ScriptedLLM plays the model: it answers with the replies the example wrote down
(a callable reply may look at the request, e.g. at the last tool result). A real model decides for
itself, so with one the run may take another path than the script.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import gc
import os
import sys
import threading
from collections.abc import Awaitable, Callable

import anyio
import psutil

from simplellmfunc import LLMInterface, OpenAICompatible, make_llm
from simplellmfunc.exceptions import (
    IncompleteAnswerError,
    OutputParseError,
    RunError,
    TeamMemberError,
)
from simplellmfunc.providers import env_settings
from simplellmfunc.testing import Canned, ScriptedLLM


def configured_model() -> LLMInterface | None:
    """The model `.env` / the environment names (None: none), noted as a real model: it
    prints which one and starts run()'s budget."""
    env = env_settings()  # the environment over ./.env
    if env.get("EXAMPLE_MODEL"):
        llm: LLMInterface = make_llm(env["EXAMPLE_MODEL"])
    elif env.get("OPENAI_MODEL"):
        llm = OpenAICompatible.from_env()
    else:
        return None
    print(f"(model: {llm.provider_name}:{llm.model_name})")
    real_model(llm.model_name)
    return llm


def pick_model(*script: Canned, default: Canned | None = None) -> LLMInterface:
    """The configured model, or a ScriptedLLM answering with ``script``, then ``default``."""
    llm = configured_model()
    if llm is None:
        print("(no model configured: a scripted model plays its part; see examples/_model.py)")
        return ScriptedLLM(script, default=default)
    return llm


def real_model(name: str) -> None:
    """Note that a real model runs the example: run()'s budget applies from now on."""
    _REAL.append(name)
    for scope, deadline in _BUDGETS:  # picked inside main: its budget starts to count now
        scope.deadline = deadline


_REAL: list[str] = []  # the real models picked so far (none: every part is scripted)
BUDGET_S = 60.0
GRACE_S = 10.0  # after the budget, this long for the clean-up (an MCP server's takes ~6 s)


_BUDGETS: list[tuple[anyio.CancelScope, float]] = []  # run()'s scope, deadline if a real model
_LOOPS: list[asyncio.AbstractEventLoop] = []  # for EXAMPLE_DEBUG's dump of the stuck tasks


def _print_awaits(awaitable: object) -> None:
    """The chain of frames a task is suspended in, through coroutines and async generators."""
    while awaitable is not None:
        frame = getattr(awaitable, "cr_frame", None) or getattr(awaitable, "ag_frame", None)
        if frame is not None:
            code = frame.f_code
            print(f"  {code.co_filename}:{frame.f_lineno} {code.co_name}", file=sys.stderr)
        follow = getattr(awaitable, "cr_await", None) or getattr(awaitable, "ag_await", None)
        if follow is None and type(awaitable).__name__ == "async_generator_asend":
            follow = next(iter(gc.get_referents(awaitable)), None)  # the generator itself
        awaitable = follow


def _stopped(budget: float) -> str:
    return (
        f"\n(stopped: the small model did not finish in {budget:.0f} s; a small local model "
        "often loops on a tool or never gives its answer; try a larger one)"
    )


def _hard_stop(budget: float, finished: threading.Event, said: threading.Event) -> None:
    """The watchdog's last resort: the cancellation did not end the run within the grace (a
    blocking call in a thread, a shielded clean-up, an exit waiting on a thread): stop the
    children and this process."""
    if finished.is_set() or not _REAL:
        return
    if os.environ.get("EXAMPLE_DEBUG"):  # where it is stuck: the threads and the tasks
        faulthandler.dump_traceback(all_threads=True, file=sys.stderr)
        for loop in _LOOPS:
            for task in asyncio.all_tasks(loop):
                print(f"task {task.get_name()}:", file=sys.stderr)
                _print_awaits(task.get_coro())
    if not said.is_set():
        print(_stopped(budget), file=sys.stderr, flush=True)
    children = psutil.Process().children(recursive=True)  # kernels, MCP servers, forks
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.kill()
    psutil.wait_procs(children, timeout=2)
    sys.stdout.flush()
    os._exit(1)


def run(main: Callable[[], Awaitable[object]], budget: float = BUDGET_S) -> None:
    """``anyio.run(main)`` for an example: Ctrl-C ends it with one line instead of a traceback,
    and on a real model it gets ``budget`` seconds, then says the model did not finish rather
    than look hung (a small local model may call a tool in a loop or never give its answer).

    The budget cancels ``main``; should that not end the run (a blocking call in a worker
    thread, a long clean-up), a watchdog ends the process ``GRACE_S`` later with the same line.
    """
    finished, said = threading.Event(), threading.Event()
    watchdog = threading.Timer(budget + GRACE_S, _hard_stop, (budget, finished, said))
    watchdog.daemon = True

    async def bounded() -> bool:
        _LOOPS.append(asyncio.get_running_loop())
        # The deadline is set when a real model is picked (before run() or inside main): a
        # scripted run has none.
        with anyio.CancelScope() as scope:
            deadline = anyio.current_time() + budget
            _BUDGETS.append((scope, deadline))
            if _REAL:
                scope.deadline = deadline
            await main()
        return not scope.cancelled_caught

    watchdog.start()
    try:
        completed = anyio.run(bounded)
    except KeyboardInterrupt:
        finished.set()
        sys.exit("\ninterrupted")
    except (RunError, BaseExceptionGroup) as exc:
        error = _run_error(exc)
        if error is None or not _REAL:  # on the scripted model a failure is a bug: show it
            raise
        finished.set()
        watchdog.cancel()
        sys.exit(_failed(error))
    if completed:
        finished.set()
        watchdog.cancel()
        return
    said.set()  # the watchdog stays armed: the exit itself may wait on a thread or a child
    sys.exit(_stopped(budget))


#: What a (small) model's own mistake ends a run with: an answer cut off or empty after the
#: retry, a reply that does not parse, a team member failing on one of these.
_MISTAKES = (IncompleteAnswerError, OutputParseError, TeamMemberError)


def _run_error(exc: BaseException) -> RunError | None:
    """The RunError that ended a run, through exception groups (None: another failure)."""
    if isinstance(exc, RunError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            if (found := _run_error(inner)) is not None:
                return found
    return None


def _failed(error: RunError) -> str:
    """One line for a run a real model ended with ``error``, instead of a traceback."""
    what = f"{type(error).__name__}: {error}"
    if isinstance(error, _MISTAKES):
        return f"\n(stopped: the model got this wrong: {what}; small local models often do)"
    return f"\n(stopped: {what})"


def note_if(wrong: bool, what: str) -> None:
    """On a real model, say that it got the example's task wrong (``what`` it did instead)."""
    if wrong and _REAL:
        print(f"(the model got this wrong: {what}; small local models often do)")


def last_tool_result(request: object) -> str:
    """The text of the newest tool result in a request (for scripted replies)."""
    for message in reversed(request.messages):  # type: ignore[attr-defined]
        if message.role == "tool":
            return str(message.text)
    return ""
