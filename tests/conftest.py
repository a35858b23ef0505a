"""Shared fixtures: a running mock LLM server, and a leak check around every async test.

The leak check (autouse) compares, before and after each ``async def`` test, the asyncio tasks
and the process's open file descriptors (sockets included). Closing transports and finishing
tasks can take a few loop turns, so the check waits up to ``LEAK_SETTLE_SECONDS`` for the counts
to come back before failing. Mark a test ``@pytest.mark.allow_leaks`` to skip the check (say why).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import settings

from simplellmfunc.testing import MockLLMServer, postgres_cluster, postgres_missing

LEAK_SETTLE_SECONDS = 2.0
_REPO = Path(__file__).resolve().parent.parent
_TIKTOKEN_CACHE = _REPO / ".cache" / "tiktoken"

# tiktoken reads its encodings from here (``make install`` fills it offline); the library falls
# back to an estimate without them, but token-count tests want the real encodings.
if "TIKTOKEN_CACHE_DIR" not in os.environ and _TIKTOKEN_CACHE.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(_TIKTOKEN_CACHE)


# Property tests check behaviour, not speed: a per-example deadline only measures how loaded the
# machine is (CI shares two cores); pytest's own timeout still ends a test that hangs.
settings.register_profile("simplellmfunc", deadline=None)
settings.load_profile("simplellmfunc")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "allow_leaks: skip the task / file-descriptor leak check for this test"
    )


async def settle(check: Callable[[], bool], seconds: float = LEAK_SETTLE_SECONDS) -> bool:
    """Give closing transports and finishing tasks some loop turns; True once ``check()`` holds."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while not check():
        if loop.time() >= end:
            return False
        await asyncio.sleep(0.005)
    return True


BROWSER_TIMEOUT = 20_000  # ms, a page's waits; a kernel's first cell includes its start


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's headless ``chromium`` for the module, driven by Playwright for Python (never a
    downloaded browser); skipped, saying why, without either."""
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="Playwright for Python is not installed (pip install -e .[dev])",
    )
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        pytest.skip("no chromium executable (apt-get install chromium; .ci/run installs it)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    """A browser context of its own per test (its own tabs, storage and session)."""
    opened = browser.new_context(viewport={"width": 1000, "height": 800})
    opened.set_default_timeout(BROWSER_TIMEOUT)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def postgres() -> Iterator[str]:
    """A private PostgreSQL cluster's URL for the module (skipped, saying why, without one)."""
    missing = postgres_missing()
    if missing is not None:
        pytest.skip(f"{missing}; .ci/run installs postgresql")
    with postgres_cluster() as url:
        yield url


@pytest.fixture
async def mock_server() -> AsyncIterator[MockLLMServer]:
    """A started :class:`MockLLMServer` (closed, and scripted-callable errors re-raised, after)."""
    async with MockLLMServer() as server:
        yield server


def _loop_daemon(task: asyncio.Task[object]) -> bool:
    """sse-starlette's shutdown watcher: one per event loop, started by the first SSE response
    (the A2A SDK streams with it), polling for a uvicorn shutdown; not ours to end."""
    return getattr(task.get_coro(), "__qualname__", "") == "_shutdown_watcher"


@pytest.fixture
async def _async_leak_check() -> AsyncIterator[None]:
    process = psutil.Process()
    fds = process.num_fds()
    tasks = asyncio.all_tasks()
    yield

    def extra_tasks() -> set[asyncio.Task[object]]:
        extra = asyncio.all_tasks() - tasks - {asyncio.current_task()}
        return {task for task in extra if not _loop_daemon(task)}

    assert await settle(lambda: not extra_tasks()), f"leaked tasks: {extra_tasks()}"
    assert await settle(lambda: process.num_fds() <= fds), (
        f"leaked file descriptors: {process.num_fds()} open, {fds} before the test"
    )


@pytest.fixture(autouse=True)
def _leak_check(request: pytest.FixtureRequest) -> None:
    """Run the async leak check around every ``async def`` test (sync tests have no loop)."""
    function = getattr(request.node, "function", None)
    if not inspect.iscoroutinefunction(function):
        return
    if request.node.get_closest_marker("allow_leaks") is not None:
        return
    request.getfixturevalue("_async_leak_check")
