"""The pytest plugin, from a fresh project: no conftest, only this package installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from simplellmfunc.testing._cassette import _ORIGINAL

PROJECT_TEST = '''
import asyncio
import os
from pathlib import Path

import httpx
import pytest

from simplellmfunc import OpenAICompatible, llm_function
from simplellmfunc.testing import MockLLMServer, Reply

KEY = "sk-fresh-project-key-0123456789"
URL = Path(__file__).with_name("url.txt")


async def ask(url, what):
    async with OpenAICompatible(KEY, "m", url) as llm:

        @llm_function(llm)
        async def capital(country: str) -> str:
            """Name the capital of the {what}."""

        return await capital("France", _template_params={"what": what})


async def main(what="country"):
    if os.environ.get("WITH_SERVER"):
        async with MockLLMServer(default=Reply.text("Paris")) as server:
            URL.write_text(server.url)
            return await ask(server.url, what)
    return await ask(URL.read_text(), what)


@pytest.mark.llm_cassette
def test_marker():
    assert asyncio.run(main()) == "Paris"


@pytest.mark.llm_cassette("shared", match_on=("method", "path"))
def test_named_and_loose():
    assert asyncio.run(main()) == "Paris"


def test_fixture(cassette):
    assert asyncio.run(main()) == "Paris"
    assert cassette.path.name == "test_fixture.jsonl"
    assert cassette.mode == os.environ["EXPECTED_MODE"]


@pytest.mark.llm_cassette
def test_drift():
    from simplellmfunc.exceptions import CassetteMismatchError

    if os.environ.get("WITH_SERVER"):
        assert asyncio.run(main()) == "Paris"
        return
    with pytest.raises(CassetteMismatchError) as caught:  # the prompt changed since recording
        asyncio.run(main("nation"))
    assert '-      "content": "Name the capital of the country.' in caught.value.diff
    assert '+      "content": "Name the capital of the nation.' in caught.value.diff


def test_plain():
    from simplellmfunc.testing._cassette import _ORIGINAL

    assert httpx.AsyncHTTPTransport.handle_async_request is _ORIGINAL
'''


def _pytest(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args],
        cwd=project,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_plugin_records_then_replays_in_a_fresh_project(tmp_path: Path) -> None:
    (tmp_path / "test_capital.py").write_text(PROJECT_TEST)
    first = _pytest(tmp_path, "--llm-record-mode=record", WITH_SERVER="1", EXPECTED_MODE="record")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "5 passed" in first.stdout
    folder = tmp_path / "cassettes" / "test_capital"
    assert sorted(p.name for p in folder.iterdir()) == [
        "shared.jsonl",
        "test_drift.jsonl",
        "test_fixture.jsonl",
        "test_marker.jsonl",
    ]
    for cassette in folder.iterdir():
        text = cassette.read_text()
        assert "sk-fresh-project-key-0123456789" not in text
        assert "Name the capital of the country." in text  # readable

    # No server any more; 'none' never reaches the network; test_drift's prompt drifted.
    second = _pytest(tmp_path, "--llm-record-mode=none", EXPECTED_MODE="none")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "5 passed" in second.stdout


def test_the_plugin_is_inert_in_our_own_run() -> None:
    assert httpx.AsyncHTTPTransport.handle_async_request is _ORIGINAL
