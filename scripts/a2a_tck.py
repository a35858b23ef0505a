"""Run the official A2A TCK (``a2aproject/a2a-tck``) against our A2A server, locally.

The system under test is an ``@llm_chat`` agent (one tool) on our loopback mock LLM server
(every model call answers a short text after a second, about what a real model takes to its
first token), served with ``a2a_app`` under uvicorn, bound to ``127.0.0.1`` and advertised as
``localhost`` (the TCK's card check flags ``127.0.0.1`` as an internal address and allows
``localhost``). Nothing is fetched: the TCK is a checkout you give, with its own virtualenv.

    A2A_TCK_DIR=/work/tck .venv/bin/python scripts/a2a_tck.py [categories ...]

* ``A2A_TCK_DIR``: the TCK checkout (its ``.venv/bin/python`` runs it; install its
  dependencies there first: ``python -m venv .venv && .venv/bin/pip install -e .``).
* categories: TCK categories (default: ``mandatory capabilities quality features``).
* ``--serve``: only serve the agent (prints its URL) until interrupted, to run the TCK by hand.

The TCK is given ``A2A-Version: 1.0`` on every request (``A2A_AUTH_HEADERS``, the header setting
of its ``.env``) and ``--sut-url`` pointing at the JSON-RPC endpoint. Each category's JSON
report is written to ``$A2A_TCK_DIR/reports/<category>.json`` and a summary line per category
(passed / failed / skipped) is printed at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.serving import ServedAgent, ServeLimits, a2a_app, running
from simplellmfunc.testing import MockLLMServer, Reply

#: The TCK's categories as its ``run_tck.py`` runs them: test folder, marker expression.
CATEGORIES: dict[str, tuple[str, str | None]] = {
    "mandatory": ("tests/mandatory/", "mandatory or mandatory_protocol or mandatory_jsonrpc"),
    "capabilities": ("tests/optional/capabilities/", None),
    "quality": ("tests/optional/quality/", None),
    "features": ("tests/optional/features/", None),
}


@tool
async def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


def _agent(llm: Any) -> Any:
    @llm_chat(llm, toolkit=[word_count], stream=True)
    async def helper(message: str, history: list[dict[str, Any]] | None = None) -> None:
        """You answer every message briefly."""

    return helper


def _run_tck(tck: Path, url: str, categories: list[str]) -> dict[str, dict[str, int]]:
    env = {
        **os.environ,
        "A2A_AUTH_HEADERS": json.dumps({"A2A-Version": "1.0"}),
        "TCK_STREAMING_TIMEOUT": "5.0",
    }
    python = tck / ".venv" / "bin" / "python"
    results: dict[str, dict[str, int]] = {}
    (tck / "reports").mkdir(exist_ok=True)
    for category in categories:
        folder, markers = CATEGORIES[category]
        path = tck / "reports" / f"{category}.json"
        command = [str(python), "-m", "pytest", folder, f"--sut-url={url}/a2a"]
        command += ["--test-scope=all", "--tb=short", "-q", "-p", "no:cacheprovider"]
        command += ["--json-report", f"--json-report-file={path}"]
        command += ["--transports", "jsonrpc", *(["-m", markers] if markers else [])]
        subprocess.run(command, cwd=tck, env=env, check=False)
        summary = json.loads(path.read_text())["summary"] if path.exists() else {}
        results[category] = {k: int(summary.get(k, 0)) for k in ("passed", "failed", "skipped")}
    return results


async def main(argv: list[str]) -> int:
    serve_only = "--serve" in argv
    categories = [a for a in argv if not a.startswith("--")] or list(CATEGORIES)
    unknown = sorted(set(categories) - set(CATEGORIES))
    if unknown:
        print(f"unknown categories {unknown}: pick from {list(CATEGORIES)}", file=sys.stderr)
        return 2
    tck_dir = os.environ.get("A2A_TCK_DIR")
    if not serve_only and not tck_dir:
        print("set A2A_TCK_DIR to a checkout of a2aproject/a2a-tck", file=sys.stderr)
        return 2
    port = int(os.environ.get("A2A_TCK_PORT", "0"))
    default = Reply.text("Hello from a simplellmfunc agent.", chunks=3, ttft=1.0)
    async with (
        MockLLMServer(default=default, max_records=100) as model,
        OpenAICompatible("sk-tck-000000000", "mock-model", model.url) as llm,
    ):
        served = ServedAgent(_agent(llm), limits=ServeLimits(max_turns=64))
        advertised = lambda url: url.replace("127.0.0.1", "localhost")  # noqa: E731
        async with running(lambda url: a2a_app(served, advertised(url)), port=port) as bound:
            url = advertised(bound)
            print(f"serving the TCK agent at {url}/a2a", flush=True)
            if serve_only:
                await anyio.sleep_forever()
            assert tck_dir is not None
            results = await anyio.to_thread.run_sync(_run_tck, Path(tck_dir), url, categories)
    for category, counts in results.items():
        print(
            f"{category:>13}: {counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['skipped']} skipped"
        )
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main, sys.argv[1:]))
