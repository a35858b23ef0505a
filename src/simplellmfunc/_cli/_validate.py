"""``simplellmfunc validate CFG``: check a config without running it, offline.

The file is loaded (every problem with its key and line), then :func:`check_config` looks at
what the agent needs that can be seen without the network or starting anything: the model's
preset and key, each tool's command and scripts, the folders of memory, trace and checkpoints.
Every finding is printed; what could not be checked offline is said. The exit status is 0 when
nothing is a problem (warnings, such as a key not set here, are allowed), else 2.
"""

from __future__ import annotations

import argparse

import anyio

from ..exceptions import ConfigError, SimpleLLMFuncError
from ..runtime import AgentConfig, load_agent_config
from ..runtime.config import Finding, check_config
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
    if config.knowledge is not None:
        tools.append(config.knowledge.tool_name)
    if toolkit.mcpServers:
        servers = toolkit.mcpServers
        tools += [f"mcp:{n}" for n in servers] if isinstance(servers, dict) else ["mcp:" + servers]
    parts = [f"agent {config.name!r}", config.kind, f"model {which}"]
    if config.kind == "chain":
        parts.append(f"{len(config.chain)} stages")
    parts.append("tools: " + (", ".join(tools) if tools else "none"))
    parts.append(f"memory: {config.memory.store}")
    return "; ".join(parts)


def handle_validate(args: argparse.Namespace) -> int:
    """Validate ``args.config``; return the exit status."""
    try:
        config = load_agent_config(args.config, overrides=overrides_from(args))
    except SimpleLLMFuncError as exc:
        return report_error(exc)
    findings: list[Finding] = anyio.run(check_config, config)
    problems = [f for f in findings if f.level == "problem"]
    head = "ok" if not problems else "not ok"
    print(f"{head}: {args.config}: {describe_config(config)}")
    for finding in findings:
        print(f"  {finding}")
    if problems:
        lines = "\n".join(f"  {p.subject}: {p.message}" for p in problems)
        count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
        return report_error(ConfigError(f"{args.config}: {count} found offline\n{lines}"))
    return EXIT_OK
