"""``simplellmfunc worker CFG --queue NAME``: run the agent's sessions from a durable queue.

The config's ``durable:`` section says where runs are recorded (Postgres for several worker
processes) and declares the queue with its limits. The worker opens the agent once, registers
it as a durable agent under the config's ``name`` (what clients enqueue sessions for), and runs
sessions until SIGTERM or Ctrl-C; on a clean stop the others take its unfinished sessions at
once, after a crash when its heartbeat is ``dead_after`` seconds old.
"""

from __future__ import annotations

import argparse
import signal
import sys

import anyio

from ..exceptions import ConfigError, SimpleLLMFuncError
from ..runtime import AgentConfig, ConfiguredAgent, load_agent_config
from ._args import overrides_from
from ._output import EXIT_OK, report_error

__all__ = ["handle_worker"]


def handle_worker(args: argparse.Namespace) -> int:
    """Serve ``args.queue`` for the agent of ``args.config``; return the exit status."""
    try:
        import dbos  # noqa: F401  (only to say which extra is missing)
    except ImportError as exc:
        message = (
            f"the worker needs the [durable] extra (pip install 'simplellmfunc[durable]'): {exc}"
        )
        return report_error(ConfigError(message))
    try:
        config = load_agent_config(args.config, overrides=overrides_from(args))
        if config.durable is None:
            raise ConfigError(f"{args.config}: a worker needs a 'durable:' section")
        if config.kind == "chain":
            raise ConfigError(f"{args.config}: a chain agent cannot be a durable worker")
        anyio.run(_serve, config, args)
    except SimpleLLMFuncError as exc:
        return report_error(exc)
    return EXIT_OK


async def _serve(config: AgentConfig, args: argparse.Namespace) -> None:
    from ..runtime.durable import DurableAgent, DurableConfig, serve_queue

    section = config.durable
    assert section is not None
    values = section.model_dump()
    values["queues"] = {name: queue.model_dump() for name, queue in section.queues.items()}
    if args.executor_id:
        values["executor_id"] = args.executor_id
    durable = DurableConfig.from_mapping(values)

    def ready() -> None:
        if not args.quiet:
            print(f"worker ready: agent {config.name!r}, queue {args.queue!r}", file=sys.stderr)

    async with ConfiguredAgent(config) as agent, anyio.create_task_group() as tasks:
        DurableAgent(agent.chat_function, name=config.name)
        tasks.start_soon(_stop_on_signal, tasks.cancel_scope)
        await serve_queue(durable, args.queue, ready=ready)


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            scope.cancel()
            return
