"""The config's run policies: ``limits``, ``termination``, ``history``, ``trace``,
``checkpoints`` and ``durable``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from ._sections import SECTION, Name, Positive

__all__ = [
    "CheckpointConfig",
    "DurableQueueConfig",
    "DurableSection",
    "HistoryConfig",
    "LimitsConfig",
    "TerminationConfig",
    "TraceConfig",
]


class _Section(BaseModel):
    model_config = SECTION


class LimitsConfig(_Section):
    """Limits of one run.

    Attributes:
        max_steps: Most LLM calls of a run (the last one is asked for a final answer).
        tool_timeout: Default per-tool timeout in seconds (``null``: none).
        run_timeout: Seconds one run (one ``simplellmfunc run``, one REPL turn, one
            ``run_config``) may take; then it is aborted as by Ctrl-C, its history valid, the
            reason saying so (``null``: no limit).
        max_tool_concurrency: Most tools of one batch running at once.
        loop_window: Tool batches in a row that repeat (or alternate) before the model is
            warned and then stopped (``0``: off).
        max_handoffs: Most transfers in one run of a ``handoffs:`` graph (the entry agent's
            value counts); the agent in charge after the last one gets no transfer tools.
        observation_enabled: Show the model its tools' results (seed 001 §3.2 / §10's
            ``react.observation_enabled``); ``false``: it is told each tool ran, not what it
            returned.
    """

    max_steps: Annotated[int, Field(ge=1)] = 10
    tool_timeout: Positive | None = 30.0
    run_timeout: Positive | None = None
    max_tool_concurrency: Annotated[int, Field(ge=1)] | None = None
    loop_window: Annotated[int, Field(ge=0)] = 3
    max_handoffs: Annotated[int, Field(ge=0)] = 5
    observation_enabled: bool = True


class TerminationConfig(_Section):
    """When a run stops besides "no tool calls".

    Attributes:
        signals: Implicit termination phrases (``null``: the built-in list).
        implicit: Use them: ``true`` / ``false``, or ``null`` for "with the text protocol only".
    """

    signals: list[Annotated[str, Field(min_length=1)]] | None = None
    implicit: bool | None = None


class HistoryConfig(_Section):
    """The history window: what of a long conversation is sent."""

    max_tokens: Annotated[int, Field(ge=1)] | None = None
    keep_recent_turns: Annotated[int, Field(ge=1)] = 20
    strategy: Literal["truncate", "summarize"] = "truncate"
    reserve_tokens: Annotated[int, Field(ge=0)] = 4096


class TraceConfig(_Section):
    """The trace of a run.

    Attributes:
        timeline: Print the step timeline after each run (``--trace``).
        file: Also write every record to this file: ``.jsonl`` (JSON lines) or ``.db`` /
            ``.sqlite`` (SQLite).
        max_chars: Longest input / output kept per record.
    """

    timeline: bool = False
    file: str | None = None
    max_chars: Annotated[int, Field(ge=20)] = 500


class CheckpointConfig(_Section):
    """Checkpoints: ``:save`` / ``:load`` in the REPL, and saves every N steps.

    Attributes:
        dir: Where the checkpoint files go (needed for any checkpoint).
        every: Save after every N-th iteration with tool calls (``0``: only on request).
        max: How many checkpoint files to keep.
    """

    dir: str | None = None
    every: Annotated[int, Field(ge=0)] = 0
    max: Annotated[int, Field(ge=1)] = 10


class DurableQueueConfig(_Section):
    """A queue of agent sessions (``simplellmfunc worker CONFIG --queue NAME``).

    Attributes:
        concurrency: Sessions running at once across all workers.
        worker_concurrency: Sessions running at once in one worker.
        rate_limit: Sessions started per ``rate_period`` seconds, across all workers.
        rate_period: The period of ``rate_limit`` in seconds.
        polling_interval: How often a worker looks for sessions, in seconds.
    """

    concurrency: Annotated[int, Field(ge=1)] | None = None
    worker_concurrency: Annotated[int, Field(ge=1)] | None = None
    rate_limit: Annotated[int, Field(ge=1)] | None = None
    rate_period: Positive = 1.0
    polling_interval: Positive = 1.0


class DurableSection(_Section):
    """Durable runs on DBOS (the ``[durable]`` extra): where runs are recorded, the queues.

    Attributes:
        database_url: ``postgresql://...`` for several processes or machines (``null``: a
            SQLite file at ``path``).
        path: The SQLite file.
        executor_id: This process's id for recovery (a worker's default: ``host-pid``).
        app_version: Workers run only sessions recorded under their version.
        resume_note: Tell the model when a run resumed in a new process.
        queues: Queues by name.
        heartbeat: Seconds between a worker's liveness beats.
        dead_after: A worker silent this long is dead: its sessions go to the others.
    """

    database_url: str | None = None
    path: str = ".simplellmfunc/durable.sqlite"
    executor_id: Name | None = None
    app_version: str | None = None
    resume_note: bool = True
    queues: dict[Name, DurableQueueConfig] = {}
    heartbeat: Positive = 5.0
    dead_after: Positive = 30.0
