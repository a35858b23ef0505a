"""Run SimpleLLMFunc's own example scripts against our mock server, with only the package name
changed (``SimpleLLMFunc`` → ``simplellmfunc``).

The examples are read at run time from a local clone of NiJingzhe/SimpleLLMFunc with
``git show`` (never copied into this repository). Each runs in its own process, in a temporary
``examples/`` folder beside a ``provider.json`` that points every model at one
:class:`~simplellmfunc.testing.MockLLMServer`. The server plays a model that uses the tools: a
request that offers tools and has no tool result yet gets one call of every tool, with arguments
made from each tool's JSON schema; a request with a JSON schema for the answer gets a JSON value
made from that schema; anything else gets a short text.

An example passes when it exits with status 0 and prints no traceback. The examples built on the
terminal UI (``@tui()``) run in a real terminal instead of behind a pipe: a private tmux server
(:class:`~simplellmfunc.testing.TmuxTerminal`) starts them, a message is typed, the answer is
awaited on the screen (the turn's status line), then ``/exit`` is typed; they pass when the turn
ended without an error and the script exited with status 0. Usage::

    python scripts/simplellmfunc_examples.py [--mirror PATH] [--only NAME ...] [-v]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from simplellmfunc.testing import (
    MockLLMServer,
    RecordedRequest,
    Reply,
    TmuxTerminal,
    ToolCallSpec,
    tmux_available,
)

CHECKOUT_SRC = Path(__file__).resolve().parents[1] / "src"
DEFAULT_MIRROR = "/work/.mirror/NiJingzhe+SimpleLLMFunc/repo"
PROVIDER = "openrouter"
MODELS = ("minimax/minimax-m2.5", "gpt-5.4")
# What a user types into the interactive examples.
STDIN = {
    "event_stream_chatbot.py": "What is 2 + 3, and the weather in Beijing?\nquit\n",
    "multi_modality_toolcall.py": "{image}\n",
}
# What a user types into the terminal UI examples (run under tmux).
TERMINAL = {
    "tui_chat_example.py": "Compute 2 + 3 in Python.",
    "tui_general_agent_example.py": "List the files here.",
    "response_api_example.py": "List the files here.",
}
# A 1x1 PNG for the image example.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node[part]
        return _resolve(node, root)
    for union in ("anyOf", "oneOf"):
        options = schema.get(union)
        if options:
            concrete = [o for o in options if o.get("type") != "null"] or options
            return _resolve(concrete[0], root)
    return schema


def sample(schema: dict[str, Any], root: dict[str, Any], name: str = "", image: str = "") -> Any:
    """A value that satisfies ``schema`` (the subset tool and answer schemas use)."""
    schema = _resolve(schema, root)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {key: sample(sub, root, key, image) for key, sub in props.items()}
    if kind == "array":
        return [sample(schema.get("items", {"type": "string"}), root, name, image) for _ in "ab"]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 1))
        return int(low) if kind == "integer" else float(low)
    if kind == "boolean":
        return True
    if "path" in name and image:
        return image
    return {"city": "北京", "symbol": "AAPL", "expression": "2 + 3", "code": "print(1 + 1)"}.get(
        name, f"sample {name}".strip()
    )


def reply_for(request: RecordedRequest, image: str) -> Reply:
    """The scripted model's reply to one chat completions request."""
    body = request.json or {}
    # Chat Completions sends "messages" (tool results: role "tool"); the Responses API sends
    # "input" items (tool results: type "function_call_output").
    items = body.get("messages") or body.get("input") or []
    answered = any(
        isinstance(m, dict) and (m.get("role") == "tool" or m.get("type") == "function_call_output")
        for m in items
    )
    tools = body.get("tools") or []
    if tools and not answered:
        calls = []
        for tool in tools:
            function = tool.get("function", tool)
            params = function.get("parameters", {})
            calls.append(ToolCallSpec(function["name"], sample(params, params, image=image)))
        return Reply.tool_calls(*calls, text="Let me use the tools.", chunks=2)
    fmt = body.get("response_format") or (body.get("text") or {}).get("format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")
    if schema:
        return Reply.text(json.dumps(sample(schema, schema), ensure_ascii=False), chunks=2)
    return Reply.text("Done: here is the answer.", chunks=3)


class ServerThread:
    """A MockLLMServer on its own event loop in a background thread."""

    def __init__(self, image: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.server = MockLLMServer(default=lambda request: reply_for(request, image))
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> MockLLMServer:
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.__aenter__(), self.loop).result(10)
        return self.server

    def __exit__(self, *exc: object) -> None:
        closing = self.server.__aexit__(None, None, None)
        asyncio.run_coroutine_threadsafe(closing, self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def example_names(mirror: Path) -> list[str]:
    """The example scripts of the mirror's HEAD."""
    listing = subprocess.run(
        ["git", "--git-dir", str(mirror), "ls-tree", "--name-only", "HEAD", "examples/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return sorted(Path(p).name for p in listing if p.endswith(".py"))


def source_of(mirror: Path, name: str) -> str:
    """An example's source, with only the package name changed."""
    text = subprocess.run(
        ["git", "--git-dir", str(mirror), "show", f"HEAD:examples/{name}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return text.replace("SimpleLLMFunc", "simplellmfunc")


def example_env(folder: Path) -> dict[str, str]:
    """The environment an example runs in: this checkout first on the path."""
    path = os.pathsep.join(filter(None, [str(CHECKOUT_SRC), os.environ.get("PYTHONPATH")]))
    return {
        **os.environ,
        "PYTHONPATH": path,
        "PYTHONUNBUFFERED": "1",
        "LOG_DIR": str(folder / "logs"),
        "TERM": "xterm-256color",
    }


def run_in_terminal(script: Path, message: str, timeout: float) -> tuple[bool, str]:
    """Run a terminal UI example under tmux: type ``message``, await the answer, ``/exit``."""
    if not tmux_available():
        return False, "tmux is not installed: the terminal UI examples need it"
    command = [sys.executable, str(script)]
    with TmuxTerminal(command, env=example_env(script.parent), cwd=script.parent) as term:
        try:
            term.wait_for(lambda s: "Ready" in s or "Traceback" in s, timeout)
            term.send_line(message)
            # The status line reads "turn 1 · <usage> · <seconds>" once the turn has ended.
            screen = term.wait_for(lambda s: "turn 1" in s or "Traceback" in s, timeout)
            term.send_line("/exit")
            code = term.wait_exit(timeout)
        except TimeoutError as exc:
            return False, f"{term.screen(history=True)}\n[{exc.args[0].splitlines()[0]}]"
        output = f"{screen}\n--- after /exit ---\n{term.screen(history=True)}"
    status = next((line for line in screen.splitlines() if "turn 1" in line), "")
    passed = code == 0 and "error:" not in status and "Traceback" not in output
    return passed, output + f"\n[exit status {code}]"


def run_example(
    mirror: Path, name: str, folder: Path, image: str, timeout: float
) -> tuple[bool, str, float]:
    """Run one example; (passed, combined output, seconds)."""
    script = folder / name
    script.write_text(source_of(mirror, name), encoding="utf-8")
    started = time.perf_counter()
    if name in TERMINAL:
        passed, output = run_in_terminal(script, TERMINAL[name], timeout)
        return passed, output, time.perf_counter() - started
    env = example_env(folder)
    stdin = STDIN.get(name, "").format(image=image)
    try:
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=folder,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return False, f"{out}\n[timed out after {timeout:.0f} s]", time.perf_counter() - started
    output = done.stdout + done.stderr
    passed = done.returncode == 0 and "Traceback (most recent call last)" not in output
    return passed, output, time.perf_counter() - started


def last_error(output: str) -> str:
    """The most telling line of a failed run's output."""
    lines = [line for line in output.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "error" in line or "timed out" in line:
            return line.strip()[:200]
    return lines[-1].strip()[:200] if lines else "(no output)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", default=DEFAULT_MIRROR, help="git dir of a SimpleLLMFunc clone")
    parser.add_argument("--only", nargs="*", default=None, help="example file names to run")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per example")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each run's output")
    args = parser.parse_args(argv)
    mirror = Path(args.mirror)
    names = args.only or example_names(mirror)
    results: list[tuple[str, bool, str, float]] = []
    with tempfile.TemporaryDirectory(prefix="slf-examples-") as tmp:
        folder = Path(tmp) / "examples"
        folder.mkdir()
        image = folder / "image.png"
        image.write_bytes(PNG)
        with ServerThread(str(image)) as server:
            models = [
                {"model_name": model, "api_keys": ["sk-mock"], "base_url": server.url}
                for model in MODELS
            ]
            provider = {PROVIDER: models}
            (folder / "provider.json").write_text(json.dumps(provider), encoding="utf-8")
            for name in names:
                passed, output, seconds = run_example(
                    mirror, name, folder, str(image), args.timeout
                )
                results.append((name, passed, output, seconds))
                mark = "PASS" if passed else "FAIL"
                print(f"{mark} {name} ({seconds:.1f} s)", flush=True)
                if not passed:
                    print(f"     {last_error(output)}", flush=True)
                if args.verbose:
                    print(output)
    passed_count = sum(ok for _, ok, _, _ in results)
    print(
        f"{passed_count} of {len(results)} SimpleLLMFunc examples run "
        "with only the package name changed"
    )
    return 0 if passed_count == len(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
