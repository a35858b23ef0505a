#!/usr/bin/env python3
"""A fake ``claude`` CLI for tests: records each invocation and answers like
``claude -p ... --output-format json``.

Standard library only. Behaviour comes from the environment:

- ``FAKE_CLAUDE_LOG``: a JSON-lines file; each invocation appends ``{"argv", "stdin", "cwd",
  "pid", "pgid", "children", "env"}`` (``env``: the ``FAKE_CLAUDE_*`` / ``CLAUDE_*`` variables).
- ``FAKE_CLAUDE_MODE``:
  ``ok`` (default) a result with usage; ``no_usage`` the same without usage;
  ``rotate`` a new session id on every call, even when resuming;
  ``fail`` exit 1 with an error (and a key-like secret) on stderr and nothing on stdout;
  ``is_error`` exit 1 with an ``is_error`` result naming an overloaded API;
  ``garbage`` exit 0 printing text that is not JSON;
  ``sleep`` start a sleeping child, log both pids, then sleep (for timeout / cancel tests);
  ``background`` start a sleeping child that holds stdout open, answer, exit at once;
  ``cut`` the reply text ends with half a UTF-16 pair (a ``\\ud83d`` escape in the JSON), as a
  string cut inside an emoji.

The reply text is ``reply to: <prompt>`` (the prompt from the argument, else from stdin).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="claude", add_help=False)
    parser.add_argument("-p", "--print", action="store_true")
    parser.add_argument("prompt", nargs="?")
    parser.add_argument("--output-format", default="text")
    parser.add_argument("--system-prompt")
    parser.add_argument("--resume", "-r")
    parser.add_argument("--model")
    parser.add_argument("--permission-mode")
    parser.add_argument("--allowedTools")
    options, _unknown = parser.parse_known_args(argv)
    return options


def log(record: dict[str, object]) -> None:
    path = os.environ.get("FAKE_CLAUDE_LOG")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as file:
        file.write(json.dumps(record) + "\n")


def main() -> int:
    mode = os.environ.get("FAKE_CLAUDE_MODE", "ok")
    options = parse(sys.argv[1:])
    stdin = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    children: list[int] = []
    if mode == "sleep":
        children.append(subprocess.Popen(SLEEPER, stdin=subprocess.DEVNULL).pid)
    if mode == "background":
        children.append(subprocess.Popen(SLEEPER, stdin=subprocess.DEVNULL, stdout=sys.stdout).pid)
    log(
        {
            "argv": sys.argv[1:],
            "stdin": stdin,
            "cwd": os.getcwd(),
            "pid": os.getpid(),
            "pgid": os.getpgid(0),
            "children": children,
            "env": {k: v for k, v in os.environ.items() if k.startswith(("FAKE_", "CLAUDE_"))},
        }
    )
    if mode == "sleep":
        time.sleep(120)
        return 0
    if mode == "fail":
        print("Error: invalid API key sk-ant-api03-abcdefghijklmnopqrstuvwxyz", file=sys.stderr)
        return 1
    if mode == "garbage":
        print("this is not json")
        return 0
    prompt = options.prompt if options.prompt is not None else stdin
    session = options.resume
    if not session or mode == "rotate":
        session = f"sess-{uuid.uuid4().hex[:12]}"
    result: dict[str, object] = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": f"reply to: {prompt}",
        "session_id": session,
        "num_turns": 1,
        "total_cost_usd": 0.001,
        "modelUsage": {options.model or "claude-fake-1": {"inputTokens": 3, "outputTokens": 5}},
    }
    if mode != "no_usage":
        result["usage"] = {
            "input_tokens": 3,
            "cache_creation_input_tokens": 100,
            "cache_read_input_tokens": 1000,
            "output_tokens": 5,
        }
    if mode == "cut":
        result["result"] = f"{result['result']} \ud83d"
    if mode == "is_error":
        result.update(subtype="error_during_execution", is_error=True)
        result["result"] = "API Error: 529 overloaded"
        print(json.dumps(result))
        return 1
    print(json.dumps(result))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
