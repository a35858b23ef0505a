"""Soak: many concurrent ``@llm_chat`` sessions against the mock LLM server, with faults.

Not a timed test: it proves that under load and hostile input every session ends with an answer
or a typed :class:`~simplellmfunc.exceptions.SimpleLLMFuncError`, every history it returns (and
every ``ReactEndEvent.final_messages``) passes :func:`~simplellmfunc.types.history_from_dicts`,
and nothing is left behind: no asyncio task, file descriptor, TCP connection or child process.

What runs:

- ``--sessions`` (default 1,000) sessions at once, each ``agent("session N: ...", history=[])``
  of one of three ``@llm_chat`` agents sharing one ``OpenAICompatible``: plain, ``stream=True``
  and ``enable_event=True`` (chosen per session), with ``tool_timeout``;
- the model is the loopback :class:`~simplellmfunc.testing.MockLLMServer` answering through a
  scripted callable ``(RecordedRequest) -> Reply`` (:class:`FaultyModel`): per session 0-2 rounds
  of 1-3 calls of the ``work`` tool, then an answer naming the session. On ~5 % of LLM calls it
  injects a fault (:data:`LLM_FAULTS`), and on ~5 % of tool calls it asks the tool to misbehave
  (:data:`TOOL_FAULTS`); every draw comes from a RNG seeded by (seed, session, step, attempt),
  so a run does not depend on the order requests arrive in;
- ~5 % of sessions get an :class:`~simplellmfunc.AbortSignal` fired at a random moment.

The server runs in its own process by default (``--server process``: this script with
``--serve``; the leak counts are then the client's alone) or in this process
(``--server inprocess``, what the bounded test in ``tests/test_soak.py`` uses).

It prints a table of counts and exits non-zero on any untyped error, invalid history, leak,
session that hung or ended without a final item, silent empty answer, answer that is not its
session's, or typed error in a session that saw no fault. For every fault kind it says how many
failing sessions saw it (and saw only it), and prints one example traceback per failure.

The sessions share the interface's default pool of 100 connections, as they would in a real
service; ``--max-connections`` changes it.

Usage::

    python benchmarks/soak.py [--sessions 1000] [--seed 0] [--llm-faults a,b] [--tool-faults a,b]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anyio
import psutil

from simplellmfunc import AbortSignal, EngineOptions, OpenAICompatible, llm_chat, tool
from simplellmfunc.events import EventYield, ReactEndEvent, ResponseYield
from simplellmfunc.exceptions import InvalidHistoryError, SimpleLLMFuncError
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec
from simplellmfunc.types import history_from_dicts

__all__ = [
    "LLM_FAULTS",
    "MODES",
    "TOOL_FAULTS",
    "FaultyModel",
    "SoakConfig",
    "SoakReport",
    "main",
    "print_report",
    "run_soak",
]

#: Faults of an LLM call (the mock server's ``Reply`` options):
LLM_FAULTS: dict[str, str] = {
    "rate_limit": "HTTP 429 with Retry-After",
    "server_error": "HTTP 500",
    "disconnect": "the socket closes mid-stream (mid-body without streaming)",
    "malformed": "an SSE event that is not JSON (half a JSON body without streaming)",
    "surrogate_text": "a lone surrogate in the reply text",
    "surrogate_args": "a lone surrogate in tool-call arguments (a JSON \\ud800 escape)",
    "empty": "a reply with neither text nor tool calls",
}
#: Faults of a tool call (the model asks the ``work`` tool for them):
TOOL_FAULTS: dict[str, str] = {
    "raise": "the tool raises RuntimeError",
    "timeout": "the tool sleeps past tool_timeout",
    "stray_cancel": "the tool awaits a future something else cancelled",
    "big_result": "the tool returns a 10 MB string",
    "surrogate_result": "the tool returns a file name with a lone surrogate (os.listdir)",
}
MODES = ("plain", "stream", "event")
KEY = "sk-soak-0123456789abcdef"
SETTLE_SECONDS = 5.0
_SESSION = re.compile(r"^session (\d+):")


@dataclass(frozen=True, slots=True)
class SoakConfig:
    """One soak run.

    Attributes:
        sessions: Concurrent sessions.
        seed: Seeds every random draw (server and client).
        llm_fault_rate: Share of LLM calls that get a fault.
        tool_fault_rate: Share of tool calls that misbehave.
        abort_rate: Share of sessions aborted at a random moment.
        llm_faults: The LLM fault kinds to draw from (see :data:`LLM_FAULTS`).
        tool_faults: The tool fault kinds to draw from (see :data:`TOOL_FAULTS`).
        big_result_bytes: Size of a ``big_result``.
        tool_timeout: The agents' ``EngineOptions.tool_timeout`` (seconds).
        retry_after: The ``Retry-After`` header of a 429 (seconds).
        read_timeout: The interface's ``read_timeout``: a server gone silent is a typed
            ``ProviderTimeoutError`` after this long.
        call_timeout: The interface's ``timeout``: the deadline of one LLM call, waiting for a
            pooled connection and retries included.
        session_guard: Seconds after which a session counts as hung (and is cancelled): well
            beyond what its few calls may take within ``call_timeout``, so only a session the
            client loses is hung.
        server: ``"process"`` (a child process) or ``"inprocess"``.
        max_connections: The interface's connection pool size (its default, 100: sessions
            queue for connections, as they do in real use; httpcore's pool then spends much of
            the client's CPU matching waiting requests to connections).
    """

    sessions: int = 1000
    seed: int = 0
    llm_fault_rate: float = 0.05
    tool_fault_rate: float = 0.05
    abort_rate: float = 0.05
    llm_faults: tuple[str, ...] = tuple(LLM_FAULTS)
    tool_faults: tuple[str, ...] = tuple(TOOL_FAULTS)
    big_result_bytes: int = 10 * 2**20
    tool_timeout: float = 0.5
    retry_after: str = "1"
    read_timeout: float = 20.0
    call_timeout: float = 120.0
    session_guard: float = 600.0
    server: Literal["process", "inprocess"] = "process"
    max_connections: int = 100

    def __post_init__(self) -> None:
        unknown = sorted(set(self.llm_faults) - set(LLM_FAULTS))
        unknown += sorted(set(self.tool_faults) - set(TOOL_FAULTS))
        if unknown:
            raise ValueError(f"unknown fault kind(s): {', '.join(unknown)}")


# --- the model: a scripted callable with faults ----------------------------------------------


class FaultyModel:
    """The mock server's scripted callable: a short ReAct conversation per session, with faults.

    Attributes:
        calls: LLM calls answered.
        injected: LLM faults injected, by kind.
        by_session: The LLM faults each session got.
    """

    def __init__(
        self,
        *,
        seed: int,
        llm_fault_rate: float,
        tool_fault_rate: float,
        llm_faults: Sequence[str],
        tool_faults: Sequence[str],
        retry_after: str,
    ) -> None:
        self.seed = seed
        self.llm_fault_rate = llm_fault_rate
        self.tool_fault_rate = tool_fault_rate
        self.llm_faults = tuple(llm_faults)
        self.tool_faults = tuple(tool_faults)
        self.retry_after = retry_after
        self.calls = 0
        self.injected: Counter[str] = Counter()
        self.by_session: dict[int, list[str]] = {}
        self._attempts: Counter[tuple[int, int]] = Counter()

    def __call__(self, request: RecordedRequest) -> Reply:
        self.calls += 1
        body = request.json
        messages = body.get("messages") or []
        session = _session_of(messages)
        step = sum(1 for m in messages if m.get("role") == "assistant")
        attempt = self._attempts[(session, step)]
        self._attempts[(session, step)] += 1
        rounds = random.Random(f"{self.seed}:plan:{session}").choice((0, 1, 1, 2))
        rng = random.Random(f"{self.seed}:call:{session}:{step}:{attempt}")
        act = step < rounds and bool(body.get("tools"))
        fault = self._draw(rng, act)
        if fault is not None:
            self.injected[fault] += 1
            self.by_session.setdefault(session, []).append(fault)
        return self._reply(fault, rng, session, step, act, stream=bool(body.get("stream")))

    def _draw(self, rng: random.Random, act: bool) -> str | None:
        if rng.random() >= self.llm_fault_rate:
            return None
        kinds = [k for k in self.llm_faults if act or k != "surrogate_args"]
        return rng.choice(kinds) if kinds else None

    def _reply(
        self,
        fault: str | None,
        rng: random.Random,
        session: int,
        step: int,
        act: bool,
        stream: bool,
    ) -> Reply:
        if fault == "rate_limit":
            return Reply.error(429, "slow down", headers={"retry-after": self.retry_after})
        if fault == "server_error":
            return Reply.error(500, "the mock model fell over")
        if fault == "empty":
            return Reply(content=None)
        options: dict[str, Any] = {"chunks": 3, "ttft": rng.uniform(0.0, 0.01)}
        if fault == "disconnect":
            options["disconnect_after"] = 2 if stream else 40
        elif fault == "malformed":
            options["malformed"] = True
        odd = "\udcff" if fault == "surrogate_text" else ""
        if act:
            calls = [
                self._call(rng, session, step, index, fault == "surrogate_args")
                for index in range(rng.randint(1, 3))
            ]
            return Reply.tool_calls(
                *calls, text=f"Step {step} of session {session}.{odd}", **options
            )
        return Reply.text(f"Answer for session {session}.{odd}", **options)

    def _call(
        self, rng: random.Random, session: int, step: int, index: int, surrogate: bool
    ) -> ToolCallSpec:
        kind = "none"
        if self.tool_faults and rng.random() < self.tool_fault_rate:
            kind = rng.choice(self.tool_faults)
        arguments = {"session": session, "n": step * 10 + index, "fault": kind}
        if not surrogate:
            return ToolCallSpec("work", arguments)
        # What a server sends when it cuts a string inside a character: a JSON escape of half a
        # surrogate pair, which json.loads turns into a lone surrogate.
        raw = json.dumps(arguments)[:-1] + ', "note": "\\ud800"}'
        return ToolCallSpec("work", raw)

    def stats(self) -> dict[str, Any]:
        """The counts, as JSON."""
        return {"calls": self.calls, "injected": dict(self.injected), "by_session": self.by_session}


def _session_of(messages: Sequence[Mapping[str, Any]]) -> int:
    for message in messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            match = _SESSION.match(message["content"])
            if match:
                return int(match.group(1))
    return -1


# --- the client: tools, agents, sessions ------------------------------------------------------


@dataclass(slots=True)
class _ToolTally:
    calls: int = 0
    injected: Counter[str] = field(default_factory=Counter)
    by_session: dict[int, list[str]] = field(default_factory=dict)


def _make_tool(config: SoakConfig, tally: _ToolTally) -> Any:
    line = "0123456789abcdef" * 4 + "\n"
    big = line * (config.big_result_bytes // len(line))

    @tool
    async def work(session: int, n: int, fault: str = "none", note: str = "") -> str:
        """Do one unit of work.

        Args:
            session: The session the work belongs to.
            n: Which unit.
            fault: How to misbehave (``none`` to behave).
            note: Free text, echoed back.
        """
        tally.calls += 1
        if fault != "none":
            tally.injected[fault] += 1
            tally.by_session.setdefault(session, []).append(f"tool:{fault}")
        if fault == "raise":
            raise RuntimeError(f"unit {n} failed on purpose")
        if fault == "timeout":
            await anyio.sleep(3600)
        if fault == "stray_cancel":
            future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            future.cancel()
            return await future  # a CancelledError that is not this task's
        if fault == "big_result":
            return big
        if fault == "surrogate_result":
            return "listing: report_\udcff.txt"
        await anyio.sleep(0.001 * (n % 5))
        return f"unit {n} done{' ' + note if note else ''}"

    return work


def _make_agents(llm: OpenAICompatible, config: SoakConfig, tally: _ToolTally) -> dict[str, Any]:
    work = _make_tool(config, tally)
    options = EngineOptions(tool_timeout=config.tool_timeout)

    @llm_chat(llm, toolkit=[work], options=options)
    async def plain(message: str, history: list[dict[str, Any]]) -> None:
        """You do the work asked, with the work tool."""

    @llm_chat(llm, toolkit=[work], options=options, stream=True)
    async def streamed(message: str, history: list[dict[str, Any]]) -> None:
        """You do the work asked, with the work tool."""

    @llm_chat(llm, toolkit=[work], options=options, enable_event=True)
    async def evented(message: str, history: list[dict[str, Any]]) -> None:
        """You do the work asked, with the work tool."""

    return {"plain": plain, "stream": streamed, "event": evented}


#: How a session ended (the first one that applies).
Ending = Literal[
    "answer", "aborted", "typed", "untyped", "empty_answer", "wrong_answer", "no_final", "hung"
]
FAILED_ENDINGS = frozenset({"untyped", "empty_answer", "wrong_answer", "no_final", "hung"})


@dataclass(slots=True)
class Outcome:
    """How one session ended."""

    session: int
    mode: str
    ending: Ending = "no_final"
    error_type: str = ""
    detail: str = ""  # a traceback, or what was wrong
    invalid: list[str] = field(default_factory=list)  # why returned histories were invalid
    aborted: bool = False
    unexplained: bool = False  # a typed error in a session that saw no fault at all

    @property
    def failed(self) -> bool:
        """Whether this session breaks the soak's promise (or failed for no reason)."""
        return self.ending in FAILED_ENDINGS or bool(self.invalid) or self.unexplained


async def _session(index: int, agents: Mapping[str, Any], config: SoakConfig) -> Outcome:
    rng = random.Random(f"{config.seed}:client:{index}")
    mode = rng.choice(MODES)
    outcome = Outcome(index, mode)
    abort = AbortSignal()
    abort_after = rng.uniform(0.0, 0.5) if rng.random() < config.abort_rate else None
    with anyio.CancelScope(deadline=anyio.current_time() + config.session_guard) as guard:
        async with anyio.create_task_group() as group:
            if abort_after is not None:
                group.start_soon(_abort_later, abort, abort_after)
            try:
                await _drive(agents[mode], outcome, abort)
            finally:
                outcome.aborted = abort.aborted
                group.cancel_scope.cancel()
    if guard.cancelled_caught:
        outcome.ending = "hung"
        outcome.detail = f"no end after {config.session_guard:g} s"
    return outcome


async def _abort_later(abort: AbortSignal, seconds: float) -> None:
    await anyio.sleep(seconds)
    abort.abort("soak abort")


async def _drive(agent: Any, outcome: Outcome, abort: AbortSignal) -> None:
    """Run one session to its end and fill ``outcome``; never raises but for our cancellation."""
    final: list[dict[str, Any]] | None = None
    try:
        call = agent(f"session {outcome.session}: do the work", history=[], _abort_signal=abort)
        async with aclosing(call) as items:
            async for item in items:
                if outcome.mode != "event":
                    final = item[1]
                elif isinstance(item, ResponseYield):
                    final = item.messages
                elif isinstance(item, EventYield) and isinstance(item.event, ReactEndEvent):
                    _validate(list(item.event.final_messages), "ReactEndEvent", outcome)
    except SimpleLLMFuncError as exc:
        outcome.ending, outcome.error_type = "typed", type(exc).__name__
        outcome.detail = str(exc)[:300]
        return
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # ours: the session guard
        _untyped(outcome, exc)
        return
    except Exception as exc:  # boundary: the soak counts whatever escapes
        _untyped(outcome, exc)
        return
    if final is None:
        outcome.detail = "the iterator ended without a final item or an exception"
        return
    _validate(final, "returned history", outcome)
    outcome.ending = _ending(final, outcome, abort)


def _untyped(outcome: Outcome, exc: BaseException) -> None:
    outcome.ending, outcome.error_type = "untyped", type(exc).__name__
    outcome.detail = "".join(traceback.format_exception(exc))


def _validate(history: list[dict[str, Any]], what: str, outcome: Outcome) -> None:
    try:
        history_from_dicts(history)
    except InvalidHistoryError as exc:
        outcome.invalid.append(f"{what}: {exc}")
    except Exception as exc:  # boundary: validation itself crashed: count it as invalid
        outcome.invalid.append(f"{what}: validation raised {type(exc).__name__}: {exc}")


def _ending(history: list[dict[str, Any]], outcome: Outcome, abort: AbortSignal) -> Ending:
    if abort.aborted:
        return "aborted"
    last = history[-1] if history else {}
    content = last.get("content") if last.get("role") == "assistant" else None
    if not content:
        outcome.detail = f"last message: {json.dumps(last, ensure_ascii=True)[:300]}"
        return "empty_answer"
    if f"session {outcome.session}" not in str(content):
        outcome.detail = f"answer {str(content)[:200]!r}"
        return "wrong_answer"
    return "answer"


# --- leaks ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Snapshot:
    tasks: int
    fds: int
    connections: int
    children: frozenset[int]


def _snapshot() -> _Snapshot:
    process = psutil.Process()
    return _Snapshot(
        tasks=len(asyncio.all_tasks()),
        fds=len(os.listdir("/proc/self/fd")),
        connections=len(process.net_connections(kind="tcp")),
        children=frozenset(p.pid for p in process.children(recursive=True) if _alive(p)),
    )


def _alive(process: psutil.Process) -> bool:
    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _leaks(before: _Snapshot, after: _Snapshot) -> dict[str, int]:
    return {
        "tasks": max(0, after.tasks - before.tasks),
        "fds": max(0, after.fds - before.fds),
        "tcp connections": max(0, after.connections - before.connections),
        "child processes": len(after.children - before.children),
    }


async def _settled_leaks(before: _Snapshot) -> dict[str, int]:
    """The leaks once closing transports and finishing tasks had a few seconds to finish."""
    with anyio.move_on_after(SETTLE_SECONDS):
        while any(_leaks(before, _snapshot()).values()):  # noqa: ASYNC110 - nothing to await
            await anyio.sleep(0.05)
    return _leaks(before, _snapshot())


# --- the server ---------------------------------------------------------------------------------


class _ServerProcess:
    """This script with ``--serve`` in a child process; its counts come back on shutdown."""

    def __init__(self, config: SoakConfig) -> None:
        settings = {
            "seed": config.seed,
            "llm_fault_rate": config.llm_fault_rate,
            "tool_fault_rate": config.tool_fault_rate,
            "llm_faults": list(config.llm_faults),
            "tool_faults": list(config.tool_faults),
            "retry_after": config.retry_after,
        }
        command = [sys.executable, str(Path(__file__).resolve()), "--serve", json.dumps(settings)]
        # Its stderr (the mock server's own failures) goes to a file shown in the report; the
        # file is closed in stop().
        self.stderr = tempfile.TemporaryFile(  # noqa: SIM115
            mode="w+", encoding="utf-8", errors="replace"
        )
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.stderr, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("READY "):
            self.process.kill()
            self.process.communicate()
            self.stderr.close()
            raise RuntimeError(f"the soak server did not start: {line!r}")
        self.url = line.split(" ", 1)[1].strip()

    def stop(self) -> dict[str, Any]:
        """Stop the server; return its counts."""
        self.process.send_signal(signal.SIGINT)
        try:
            out, _ = self.process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            out, _ = self.process.communicate()
        self.stderr.seek(0)
        errors = self.stderr.read()
        self.stderr.close()
        for line in out.splitlines():
            if line.startswith("STATS "):
                stats: dict[str, Any] = json.loads(line[6:])
                stats["stderr"] = errors
                return stats
        raise RuntimeError(f"the soak server printed no STATS; its stderr: {errors[-2000:]}")


async def _serve(settings: dict[str, Any]) -> None:
    model = FaultyModel(**settings)
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with MockLLMServer(default=model, max_records=0) as server:
            print(f"READY {server.url}", flush=True)
            async for _ in signals:
                break
    print("STATS " + json.dumps(model.stats()), flush=True)


# --- the run ------------------------------------------------------------------------------------


@dataclass(slots=True)
class SoakReport:
    """What a soak run found."""

    config: SoakConfig
    outcomes: list[Outcome]
    llm_calls: int
    tool_calls: int
    llm_injected: Counter[str]
    tool_injected: Counter[str]
    faults_by_session: dict[int, list[str]]
    leaks: dict[str, int]
    wall: float
    server_stderr: str = ""  # what a server process wrote to stderr (its own failures)

    @property
    def endings(self) -> Counter[str]:
        """Sessions by how they ended."""
        return Counter(o.ending for o in self.outcomes)

    @property
    def typed_errors(self) -> Counter[str]:
        """Typed errors by type."""
        return Counter(o.error_type for o in self.outcomes if o.ending == "typed")

    @property
    def untyped_errors(self) -> Counter[str]:
        """Untyped errors by type."""
        return Counter(o.error_type for o in self.outcomes if o.ending == "untyped")

    @property
    def invalid_histories(self) -> int:
        """Returned histories and end-event histories that failed validation."""
        return sum(len(o.invalid) for o in self.outcomes)

    @property
    def failures(self) -> list[Outcome]:
        """The sessions that break the promise."""
        return [o for o in self.outcomes if o.failed]

    @property
    def ok(self) -> bool:
        """No failing session and no leak."""
        return not self.failures and not any(self.leaks.values())

    def faults_of(self, outcome: Outcome) -> list[str]:
        """The faults one session saw (LLM kinds, ``tool:`` kinds, ``abort``)."""
        faults = list(self.faults_by_session.get(outcome.session, []))
        return [*faults, "abort"] if outcome.aborted else faults


async def run_soak(config: SoakConfig) -> SoakReport:
    """Run the soak; return what it found (it never raises for a failing session)."""
    tally = _ToolTally()
    before = _snapshot()
    started = time.perf_counter()
    server_process = _ServerProcess(config) if config.server == "process" else None
    model: FaultyModel | None = None
    mock: MockLLMServer | None = None
    if server_process is None:
        model = FaultyModel(
            seed=config.seed,
            llm_fault_rate=config.llm_fault_rate,
            tool_fault_rate=config.tool_fault_rate,
            llm_faults=config.llm_faults,
            tool_faults=config.tool_faults,
            retry_after=config.retry_after,
        )
        mock = await MockLLMServer(default=model, max_records=0).start()
    url = server_process.url if server_process is not None else (mock.url if mock else "")
    outcomes: list[Outcome] = []
    try:
        llm = OpenAICompatible(
            KEY,
            "soak-model",
            url,
            max_retries=2,
            read_timeout=config.read_timeout,
            timeout=config.call_timeout,
            max_connections=config.max_connections,
        )
        async with llm:
            agents = _make_agents(llm, config, tally)

            async def one(index: int) -> None:
                outcomes.append(await _session(index, agents, config))

            async with anyio.create_task_group() as group:
                for index in range(config.sessions):
                    group.start_soon(one, index)
    finally:
        if mock is not None:
            await mock.aclose()
        stats = (
            await anyio.to_thread.run_sync(server_process.stop)
            if server_process is not None
            else (model.stats() if model is not None else {})
        )
    wall = time.perf_counter() - started
    leaks = await _settled_leaks(before)
    by_session: dict[int, list[str]] = {}
    for session, kinds in stats.get("by_session", {}).items():
        by_session.setdefault(int(session), []).extend(kinds)
    for session, kinds in tally.by_session.items():
        by_session.setdefault(session, []).extend(kinds)
    for outcome in outcomes:
        # A typed error is the promise kept, but a session that saw no fault should answer.
        clean = not by_session.get(outcome.session) and not outcome.aborted
        outcome.unexplained = outcome.ending == "typed" and clean
    return SoakReport(
        config=config,
        outcomes=sorted(outcomes, key=lambda o: o.session),
        llm_calls=int(stats.get("calls", 0)),
        tool_calls=tally.calls,
        llm_injected=Counter(stats.get("injected", {})),
        tool_injected=tally.injected,
        faults_by_session=by_session,
        leaks=leaks,
        wall=wall,
        server_stderr=str(stats.get("stderr", "")),
    )


# --- the report ---------------------------------------------------------------------------------


def report_rows(report: SoakReport) -> list[tuple[str, int | float | str]]:
    """The table of counts, as (what, count) rows."""
    endings = report.endings
    rows: list[tuple[str, int | float | str]] = [
        ("sessions", len(report.outcomes)),
        ("  answers", endings["answer"]),
        ("  aborted (valid history, no error)", endings["aborted"]),
        ("  typed errors", endings["typed"]),
    ]
    rows += [(f"    {name}", count) for name, count in sorted(report.typed_errors.items())]
    unexplained = sum(1 for o in report.outcomes if o.unexplained)
    rows.append(("    of them in sessions that saw no fault", unexplained))
    rows.append(("  untyped errors", endings["untyped"]))
    rows += [(f"    {name}", count) for name, count in sorted(report.untyped_errors.items())]
    rows += [
        ("  silent empty answers", endings["empty_answer"]),
        ("  answers of another session", endings["wrong_answer"]),
        ("  ended without a final item", endings["no_final"]),
        ("  hung", endings["hung"]),
        ("invalid histories", report.invalid_histories),
    ]
    rows += [(f"leaked {what}", count) for what, count in report.leaks.items()]
    rows += [
        ("wall time (s)", round(report.wall, 1)),
        ("LLM calls", report.llm_calls),
        ("tool calls", report.tool_calls),
        ("aborts fired", sum(1 for o in report.outcomes if o.aborted)),
        ("mock server failures (its stderr)", report.server_stderr.count("Traceback")),
    ]
    rows += [(f"LLM fault {k}", report.llm_injected[k]) for k in report.config.llm_faults]
    rows += [(f"tool fault {k}", report.tool_injected[k]) for k in report.config.tool_faults]
    return rows


def _what_failed(outcome: Outcome) -> list[str]:
    failed = []
    if outcome.ending == "untyped":
        failed.append(f"untyped {outcome.error_type}")
    elif outcome.ending in FAILED_ENDINGS:
        failed.append(outcome.ending.replace("_", " "))
    elif outcome.unexplained:
        failed.append(f"{outcome.error_type} with no fault")
    if outcome.invalid:
        failed.append("invalid history")
    return failed


ATTRIBUTION_HEADERS = ["fault", "sessions", "untyped", "invalid", "other", "failing, only this"]


def fault_attribution(report: SoakReport) -> list[tuple[str, int, int, int, int, int]]:
    """Per fault kind, the sessions that saw it: all of them, those that ended in an untyped
    error, with an invalid history, or another failure (empty answer, no final item, hung, a
    typed error with no fault to explain it, ...),
    and the failing ones that saw no other fault."""
    seen: Counter[str] = Counter()
    untyped: Counter[str] = Counter()
    invalid: Counter[str] = Counter()
    other: Counter[str] = Counter()
    alone: Counter[str] = Counter()
    for outcome in report.outcomes:
        kinds = set(report.faults_of(outcome)) or {"(no fault)"}
        seen.update(kinds)
        if not outcome.failed:
            continue
        if outcome.ending == "untyped":
            untyped.update(kinds)
        elif outcome.ending in FAILED_ENDINGS or outcome.unexplained:
            other.update(kinds)
        if outcome.invalid:
            invalid.update(kinds)
        if len(kinds) == 1:
            alone.update(kinds)
    return [
        (kind, seen[kind], untyped[kind], invalid[kind], other[kind], alone[kind])
        for kind in sorted(seen)
        if kind != "(no fault)" or untyped[kind] + invalid[kind] + other[kind]
    ]


def examples(report: SoakReport) -> dict[str, Outcome]:
    """One failing session per fault kind that fails on its own (the first such session), then
    one per set of faults of a failing session that none of those kinds explains."""
    alone = {row[0] for row in fault_attribution(report) if row[-1]}
    found: dict[str, Outcome] = {}
    for outcome in sorted(report.failures, key=lambda o: (len(report.faults_of(o)), o.session)):
        kinds = sorted(set(report.faults_of(outcome))) or ["(no fault)"]
        what = " + ".join(_what_failed(outcome))
        explained = [kind for kind in kinds if kind in alone]
        if explained:
            for kind in explained:
                found.setdefault(f"{kind}: {what}", outcome)
        else:
            found.setdefault(f"{' + '.join(kinds)} (together): {what}", outcome)
    return found


def print_report(report: SoakReport, *, tracebacks: bool = True) -> None:
    """Print the counts, the per-fault attribution and one example per failure."""
    from _common import print_table  # benchmarks/ is on sys.path when run as a script

    config = report.config
    llm_rate = f"{config.llm_fault_rate:.0%}" if config.llm_faults else "none"
    tool_rate = f"{config.tool_fault_rate:.0%}" if config.tool_faults else "none"
    title = (
        f"soak: {config.sessions} sessions, seed {config.seed}, LLM faults {llm_rate}, tool "
        f"faults {tool_rate}, aborts {config.abort_rate:.0%}, server {config.server}, "
        f"{config.max_connections} connections"
    )
    print_table(["what", "count"], report_rows(report), title=title)
    print()
    print_table(
        ATTRIBUTION_HEADERS,
        fault_attribution(report),
        title="sessions by the faults they saw (a session may see several)",
    )
    for key, outcome in examples(report).items():
        faults = ", ".join(report.faults_of(outcome)) or "none"
        print(f"\n=== example, {key} — session {outcome.session}, {outcome.mode} mode")
        print(f"faults it saw: {faults}")
        for reason in outcome.invalid:
            print(f"invalid: {reason}")
        if outcome.detail and (tracebacks or outcome.ending != "untyped"):
            print(outcome.detail.rstrip())
    typed: dict[str, Outcome] = {}
    for outcome in report.outcomes:
        if outcome.ending == "typed":
            typed.setdefault(outcome.error_type, outcome)
    if typed:
        print("\ntyped errors, one example each (session: faults it saw: message)")
        for name, outcome in sorted(typed.items()):
            faults = ", ".join(report.faults_of(outcome)) or "none"
            print(f"  {name}: session {outcome.session}: {faults}: {outcome.detail}")
    if report.server_stderr:
        print("\n=== the mock server's first failure (its stderr)")
        print(_first_failure(report.server_stderr))
    print("\nRESULT:", "ok" if report.ok else "FAILED")


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_.]*(Error|Exception|Exit|Interrupt)\b.*")


def _first_failure(stderr: str) -> str:
    """The first traceback in a server's stderr, with the lines before it."""
    lines = stderr.splitlines()
    end = next((i for i, line in enumerate(lines) if _EXCEPTION_LINE.match(line)), len(lines) - 1)
    return "\n".join(lines[: end + 1])[-4000:]


def _kinds(text: str, known: Mapping[str, str]) -> tuple[str, ...]:
    if text in ("", "none"):
        return ()
    kinds = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in kinds if k not in known]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown: {', '.join(unknown)}; known: {', '.join(known)}"
        )
    return kinds


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--llm-fault-rate", type=float, default=0.05)
    parser.add_argument("--tool-fault-rate", type=float, default=0.05)
    parser.add_argument("--abort-rate", type=float, default=0.05)
    parser.add_argument(
        "--llm-faults",
        type=lambda t: _kinds(t, LLM_FAULTS),
        default=tuple(LLM_FAULTS),
        help=f"comma-separated, or 'none' (default: all of {', '.join(LLM_FAULTS)})",
    )
    parser.add_argument(
        "--tool-faults",
        type=lambda t: _kinds(t, TOOL_FAULTS),
        default=tuple(TOOL_FAULTS),
        help=f"comma-separated, or 'none' (default: all of {', '.join(TOOL_FAULTS)})",
    )
    parser.add_argument("--server", choices=("process", "inprocess"), default="process")
    parser.add_argument(
        "--max-connections", type=int, default=100, help="the interface's pool size"
    )
    parser.add_argument("--no-tracebacks", action="store_true", help="examples without tracebacks")
    parser.add_argument("--serve", metavar="JSON", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the soak and print its report; 0 when it held, 1 when it did not."""
    args = parse_args(argv)
    if args.serve:
        anyio.run(_serve, json.loads(args.serve), backend="asyncio")
        return 0
    config = SoakConfig(
        sessions=args.sessions,
        seed=args.seed,
        llm_fault_rate=args.llm_fault_rate,
        tool_fault_rate=args.tool_fault_rate,
        abort_rate=args.abort_rate,
        llm_faults=args.llm_faults,
        tool_faults=args.tool_faults,
        server=args.server,
        max_connections=args.max_connections,
    )
    report = anyio.run(run_soak, config, backend="asyncio")
    print_report(report, tracebacks=not args.no_tracebacks)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
