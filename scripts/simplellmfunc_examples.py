"""Run SimpleLLMFunc's own example scripts against our mock server, with only the package name
changed (``SimpleLLMFunc`` → ``simplellmfunc``).

The examples are read at run time from a local clone of NiJingzhe/SimpleLLMFunc with
``git show`` (never copied into this repository). Each runs in its own process, in a temporary
``examples/`` folder beside a ``provider.json`` that points every model at one
:class:`~simplellmfunc.testing.MockLLMServer`. The server plays a model that uses the tools: a
request that offers tools and has no tool result yet gets one call of every tool, with arguments
made from each tool's JSON schema; a request with a JSON schema for the answer gets a JSON value
made from that schema; anything else gets a short text.

An example passes when it exits with status 0 and prints no traceback. Usage::

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

from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec

CHECKOUT_SRC = Path(__file__).resolve().parents[1] / "src"
DEFAULT_MIRROR = "/work/.mirror/NiJingzhe+SimpleLLMFunc/repo"
PROVIDER = "openrouter"
MODEL = "minimax/minimax-m2.5"
# What a user types into the interactive examples.
STDIN = {
    "event_stream_chatbot.py": "What is 2 + 3, and the weather in Beijing?\nquit\n",
    "multi_modality_toolcall.py": "{image}\n",
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
    messages = body.get("messages", [])
    answered = any(m.get("role") == "tool" for m in messages)
    tools = body.get("tools") or []
    if tools and not answered:
        calls = []
        for tool in tools:
            function = tool.get("function", tool)
            params = function.get("parameters", {})
            calls.append(ToolCallSpec(function["name"], sample(params, params, image=image)))
        return Reply.tool_calls(*calls, text="Let me use the tools.", chunks=2)
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema")
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


def run_example(
    mirror: Path, name: str, folder: Path, image: str, timeout: float
) -> tuple[bool, str, float]:
    """Run one example; (passed, combined output, seconds)."""
    script = folder / name
    script.write_text(source_of(mirror, name), encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(CHECKOUT_SRC), os.environ.get("PYTHONPATH")]))
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "PYTHONUNBUFFERED": "1",
        "LOG_DIR": str(folder / "logs"),
    }
    stdin = STDIN.get(name, "").format(image=image)
    started = time.perf_counter()
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
            provider = {
                PROVIDER: [{"model_name": MODEL, "api_keys": ["sk-mock"], "base_url": server.url}]
            }
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
