"""``simplellmfunc validate CFG``: check a config (and that its model can be built) without
running it; print ``ok`` and a summary, or every problem with its key and line."""

from __future__ import annotations

import argparse

import anyio

from ..exceptions import SimpleLLMFuncError
from ..runtime import AgentConfig, load_agent_config
from ..runtime.config import build_llm
from ._args import overrides_from
from ._output import EXIT_OK, report_error

__all__ = ["describe_config", "handle_validate"]


def describe_config(config: AgentConfig) -> str:
    """One line about the agent: name, kind, model, tools, memory."""
    model = config.model
    which = model.preset or f"{model.provider}:{model.model} ({model.provider_file})"
    toolkit = config.toolkit
    tools = [name for name in ("pyrepl", "files") if getattr(toolkit, name) is not None]
    tools += [t.name for t in toolkit.shell] + [t.name for t in toolkit.agents]
    if toolkit.mcpServers:
        servers = toolkit.mcpServers
        tools += [f"mcp:{n}" for n in servers] if isinstance(servers, dict) else ["mcp:" + servers]
    parts = [f"agent {config.name!r}", config.kind, f"model {which}"]
    if config.kind == "chain":
        parts.append(f"{len(config.chain)} stages")
    parts.append("tools: " + (", ".join(tools) if tools else "none"))
    parts.append(f"memory: {config.memory.store}")
    return "; ".join(parts)


async def _check_model(config: AgentConfig) -> None:
    llm = build_llm(config.model)
    await llm.aclose()


def handle_validate(args: argparse.Namespace) -> int:
    """Validate ``args.config``; return the exit status."""
    try:
        config = load_agent_config(args.config, overrides=overrides_from(args))
        anyio.run(_check_model, config)
    except SimpleLLMFuncError as exc:
        return report_error(exc)
    print(f"ok: {args.config}: {describe_config(config)}")
    return EXIT_OK
