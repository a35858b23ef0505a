"""Command lines as tools: :class:`ShellTool`, and :class:`CLIAgentTool` for agents
calling agents.

* ``ShellTool(name, command, timeout)``: the model's arguments fill the command's placeholders,
  each one shell-quoted (``shlex.quote``), so an argument is always exactly one word to the shell
  whatever it contains. ``{}`` is the placeholder of the single parameter ``input``; with
  ``parameters=("pattern", "path")`` the placeholders are ``{pattern}`` and ``{path}``. Other
  braces (``awk '{print $1}'``, ``${HOME}``) are left alone.
* ``CLIAgentTool(command)``: the model's ``input`` goes to the command's stdin; its stdout is the
  result, as text or as JSON (``--format json`` of ``simplellmfunc run`` prints
  ``{"result": ...}``). ``simplellmfunc run worker.yml --quiet -`` is such a command.

Both run through :func:`~._process.run_command`: ``/bin/sh -c`` in a process group of its own,
killed as a whole on the wall-clock ``timeout`` or a cancellation (an abort), output capped at
``max_output_chars``. A non-zero exit status is a tool error the model sees, with the end of
stderr.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from ...exceptions import ToolExecutionError, UserError
from ...sandbox import SandboxPolicy
from ...tools import (
    ApprovalFlag,
    ArgumentsError,
    Tool,
    ToolContext,
    check_approval_flag,
    check_tool_name,
)
from ._process import CommandOutput, check_output, run_command, with_note

__all__ = ["CLIAgentTool", "ShellTool"]


def _object_schema(properties: Mapping[str, str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            name: {"type": "string", "description": text} for name, text in properties.items()
        },
        "required": list(properties),
        "additionalProperties": False,
    }


def _string_arguments(arguments: Mapping[str, Any], names: Sequence[str]) -> dict[str, str]:
    """The arguments as strings (numbers and booleans are accepted and written out).

    Raises:
        ArgumentsError: For a missing, unknown or non-scalar argument.
    """
    if not isinstance(arguments, Mapping):
        raise ArgumentsError("invalid arguments: expected a JSON object")
    problems = [f"{name}: missing" for name in names if name not in arguments]
    problems += [f"{name}: unknown argument" for name in arguments if name not in names]
    values: dict[str, str] = {}
    for name in names:
        value = arguments.get(name)
        if isinstance(value, bool):
            values[name] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            values[name] = str(value)
        elif name in arguments:
            problems.append(f"{name}: expected a string")
    if problems:
        raise ArgumentsError("invalid arguments: " + "; ".join(problems))
    return values


class _CommandTool(Tool):
    """What both tools share: the command, the limits and the process options."""

    def __init__(
        self,
        name: str,
        description: str,
        command: str,
        timeout: float | None,
        *,
        cwd: str | os.PathLike[str] | None,
        env: Mapping[str, str] | None,
        max_output_chars: int,
        kill_grace: float,
        sandbox: SandboxPolicy | None,
    ) -> None:
        if not command.strip():
            raise UserError(f"tool {name!r}: the command is empty")
        if timeout is not None and timeout <= 0:
            raise UserError(f"tool {name!r}: timeout must be positive, got {timeout}")
        if max_output_chars < 1:
            raise UserError(f"tool {name!r}: max_output_chars must be at least 1")
        self.command = command
        self.cwd = str(Path(cwd).absolute()) if cwd is not None else None
        self.env = dict(env) if env else None
        self.max_output_chars = max_output_chars
        self.kill_grace = kill_grace
        self.sandbox = sandbox
        self.command_timeout = timeout
        # The run's own per-tool deadline is a backstop after ours, so ours reports first.
        backstop = None if timeout is None else timeout + kill_grace + 5.0
        super().__init__(name=check_tool_name(name), description=description, timeout=backstop)

    async def _run(self, command: str, stdin: str | None) -> CommandOutput:
        output = await run_command(
            command,
            stdin=stdin,
            timeout=self.command_timeout,
            max_output_chars=self.max_output_chars,
            cwd=self.cwd,
            env=self.env,
            kill_grace=self.kill_grace,
            sandbox=self.sandbox,
        )
        check_output(output, self.command_timeout)
        return output

    async def run(self, **kwargs: Any) -> str:
        """Run the command with ``kwargs`` as its arguments."""
        return str(await self.invoke(kwargs))

    async def __call__(self, **kwargs: Any) -> str:
        """Call the tool directly.

        Raises:
            ArgumentsError: For wrong arguments.
            ToolExecutionError: When the command fails or times out.
        """
        return str(await self.invoke(kwargs))


class ShellTool(_CommandTool):
    """A shell command as a tool; the model's arguments fill its placeholders, quoted.

    Args:
        name: The tool name the model sees.
        command: The command line, e.g. ``"wc -w {}"`` or ``"grep -rn {pattern} {path}"``.
        timeout: Wall-clock seconds before the command's process group is killed.
        description: What the tool does (default: says which command it runs).
        parameters: Names of the placeholders (default: ``("input",)`` written ``{}`` when the
            command has ``{}``, else none).
        cwd: Working directory of the command.
        env: Extra environment variables.
        max_output_chars: Bytes kept of stdout and of stderr.
        kill_grace: Seconds between SIGTERM and SIGKILL.
        sandbox: Run the command in a sandbox under this policy (``cwd``, or a fresh private
            directory per call, is its workspace; see ``docs/sandbox.md``).
        requires_approval: Each call waits for a person's approval before it runs: ``True``,
            or a callable over the call's arguments (see ``docs/human-in-the-loop.md``).

    Raises:
        UserError: For an empty command, a bad timeout or a bad parameter name.
    """

    def __init__(
        self,
        name: str,
        command: str,
        timeout: float | None = 30.0,
        *,
        description: str | None = None,
        parameters: Sequence[str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        max_output_chars: int = 20_000,
        kill_grace: float = 2.0,
        sandbox: SandboxPolicy | None = None,
        requires_approval: ApprovalFlag = False,
    ) -> None:
        if parameters is None:
            parameters = ("input",) if "{}" in command else ()
        for parameter in parameters:
            if not parameter.isidentifier():
                raise UserError(f"tool {name!r}: parameter {parameter!r} is not an identifier")
        self.parameter_names = tuple(parameters)
        names = "|".join(re.escape(p) for p in self.parameter_names)
        self._placeholder = re.compile(r"\{\}" + (rf"|\{{({names})\}}" if names else ""))
        text = description or f"Run the shell command `{command}` and return its output."
        super().__init__(
            name,
            text,
            command,
            timeout,
            cwd=cwd,
            env=env,
            max_output_chars=max_output_chars,
            kill_grace=kill_grace,
            sandbox=sandbox,
        )
        self.requires_approval = check_approval_flag(requires_approval)

    @property
    def parameters(self) -> dict[str, Any]:
        """One required string per placeholder."""
        return _object_schema(
            {
                p: f"Value for {{{p}}} in the command (passed as one word)."
                for p in self.parameter_names
            }
        )

    def command_line(self, arguments: Mapping[str, Any]) -> str:
        """The command with every placeholder replaced by its quoted argument.

        Raises:
            ArgumentsError: For missing, unknown or non-scalar arguments.
        """
        values = _string_arguments(arguments, self.parameter_names)
        first = self.parameter_names[0] if self.parameter_names else None

        def fill(match: re.Match[str]) -> str:
            key = match.group(1) if match.lastindex else first
            return shlex.quote(values[key]) if key is not None else match.group(0)

        return self._placeholder.sub(fill, self.command)

    async def invoke(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> str:
        """Run the command; the result is stdout (and stderr, when there is some).

        Raises:
            ArgumentsError: For wrong arguments.
            ToolExecutionError: When the command fails or times out.
        """
        output = await self._run(self.command_line(arguments), None)
        text = output.stdout_text()
        if output.stderr.strip():
            text += "\n[stderr]\n" + with_note(output.stderr, output.stderr_dropped)
        return text


class CLIAgentTool(_CommandTool):
    """Another agent (any command) as a tool: the model's ``input`` on stdin, stdout back.

    Args:
        command: The command line, e.g. ``"simplellmfunc run worker.yml --quiet -"``.
        name: The tool name the model sees.
        description: What the agent does (default: a generic delegation text).
        timeout: Wall-clock seconds before the command's process group is killed.
        output: ``"text"`` (stdout, stripped) or ``"json"`` (stdout parsed; the value of
            ``result_key`` when it is an object holding it, else the JSON text).
        result_key: The key of the answer in JSON output.
        cwd: Working directory of the command.
        env: Extra environment variables.
        max_output_chars: Bytes kept of stdout and of stderr.
        kill_grace: Seconds between SIGTERM and SIGKILL.
        sandbox: Run the command in a sandbox under this policy (``cwd``, or a fresh private
            directory per call, is its workspace; see ``docs/sandbox.md``).

    Raises:
        UserError: For an empty command, a bad timeout or an unknown output kind.
    """

    def __init__(
        self,
        command: str,
        *,
        name: str = "agent",
        description: str | None = None,
        timeout: float | None = 300.0,
        output: Literal["text", "json"] = "text",
        result_key: str = "result",
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        max_output_chars: int = 50_000,
        kill_grace: float = 2.0,
        sandbox: SandboxPolicy | None = None,
    ) -> None:
        if output not in ("text", "json"):
            raise UserError(f"tool {name!r}: output must be 'text' or 'json', got {output!r}")
        self.output = output
        self.result_key = result_key
        text = description or (
            f"Delegate a task to the agent {name!r}: send it the task as text and get its answer."
        )
        super().__init__(
            name,
            text,
            command,
            timeout,
            cwd=cwd,
            env=env,
            max_output_chars=max_output_chars,
            kill_grace=kill_grace,
            sandbox=sandbox,
        )

    @property
    def parameters(self) -> dict[str, Any]:
        """One required string: the task."""
        return _object_schema({"input": "The task or question for the agent, in full."})

    async def invoke(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> str:
        """Send ``input`` to the agent and return its answer.

        Raises:
            ArgumentsError: For wrong arguments.
            ToolExecutionError: When the agent fails, times out or prints invalid JSON.
        """
        values = _string_arguments(arguments, ("input",))
        output = await self._run(self.command, values["input"])
        if self.output == "text":
            return with_note(output.stdout.strip(), output.stdout_dropped)
        return self._from_json(output.stdout)

    def _from_json(self, text: str) -> str:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ToolExecutionError(f"the agent printed invalid JSON: {exc}") from None
        if isinstance(data, dict) and self.result_key in data:
            value = data[self.result_key]
            return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        return json.dumps(data, ensure_ascii=False)
