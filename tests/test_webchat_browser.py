"""The web chat page end to end in a real headless Chromium (Debian's ``chromium``, driven by
Playwright for Python; never a downloaded browser) against MockLLMServer.

One browser for the module, one server (examples/web_chat.py on loopback, see
``webchat_support``); each test opens its own tabs, so each test is its own session. A
screenshot of the page goes to ``.cache/test-artifacts/web-chat.png``
(``$TEST_ARTIFACTS`` overrides the folder).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from conftest import BROWSER_TIMEOUT
from simplellmfunc.serving import ServeLimits
from webchat_support import Served, serve_in_thread

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright for Python is not installed (pip install -e .[dev])"
)
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium executable (apt-get install chromium; .ci/run installs it)",
)
expect = playwright_api.expect
Page = playwright_api.Page
REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS") or REPO / ".cache" / "test-artifacts")
TIMEOUT = BROWSER_TIMEOUT


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _leaked(before: set[int]) -> dict[int, str]:
    """Children started since ``before`` still running 30 s later (pid: command line), the
    browser's own left out (it starts a renderer per page and ends them in its own time). The
    wait: a sandboxed kernel stopped as the app shuts down may still be on its way out when the
    server thread ends, and under a full test run on two cores that has taken over 10 s."""
    started = []
    for pid in _children() - before:
        try:
            process = psutil.Process(pid)
            if "chrom" not in process.name().lower():
                started.append(process)
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(started, timeout=30)
    left: dict[int, str] = {}
    for process in alive:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                left[process.pid] = " ".join(process.cmdline()[:6])
        except psutil.NoSuchProcess:
            continue
    return left


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    before = _children()
    with serve_in_thread(
        limits=ServeLimits(max_sessions=8, idle_timeout=None, pool_size=2)
    ) as served:
        yield served
    # The sessions' kernels and the warm pool are gone with the app.
    assert not _leaked(before)


def open_tab(context: Any, served: Served) -> Page:
    page = context.new_page()
    page.goto(served.url)
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    return page


def say(page: Page, text: str) -> None:
    page.fill("#message", text)
    page.press("#message", "Enter")


def idle(page: Page) -> None:
    """Wait for the turn to end (the Send button is enabled again)."""
    expect(page.locator("#send")).to_be_enabled()
    expect(page.locator("#abort")).to_be_disabled()


def test_streamed_markdown_reply(context: Any, served: Served) -> None:
    page = open_tab(context, served)
    # Count the reply's redraws: a streamed reply is drawn piece by piece.
    page.evaluate(
        """() => { window.redraws = 0; new MutationObserver(() => window.redraws++)
            .observe(document.getElementById('log'), {childList: true, subtree: true}); }"""
    )
    say(page, "hello")
    reply = page.locator(".msg.assistant").last
    expect(reply.locator("strong")).to_have_text("Hello")
    expect(reply.locator("li")).to_have_text(["one", "two"])
    expect(reply.locator("pre code.language-python")).to_have_text("print(1)")
    expect(reply.locator("p code")).to_have_text("Python")
    idle(page)
    assert page.evaluate("window.redraws") >= 6
    expect(page.locator(".msg.user")).to_have_text(["hello"])
    expect(page.locator(".usage")).to_contain_text("1 step(s)")


def test_tool_card_live_output_and_image(context: Any, served: Served) -> None:
    page = open_tab(context, served)
    say(page, "count")
    card = page.locator("details.tool").first
    expect(card.locator(".tool-name")).to_have_text("execute_code")
    expect(card.locator(".tool-args")).to_contain_text("for i in range(3)")
    # Live: the first line is shown while the cell still runs.
    expect(card.locator(".tool-output .stdout").first).to_have_text("line 0\n")
    image = card.locator("img.kernel-image")
    expect(image).to_have_count(1)
    expect(card).to_have_class("tool ok")
    expect(card.locator(".tool-output")).to_have_text("line 0\nline 1\nline 2\n")
    assert image.evaluate("img => img.naturalWidth") == 48
    expect(card.locator(".tool-state")).to_contain_text("done")
    result = card.locator(".tool-result pre")
    expect(result).to_contain_text("Execution succeeded")
    expect(result).to_contain_text("1 image(s) attached")
    expect(page.locator(".msg.assistant").last).to_contain_text("done:")
    idle(page)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-chat.png"), full_page=True)


def test_answer_input_prompt(context: Any, served: Served) -> None:
    page = open_tab(context, served)
    say(page, "name")
    form = page.locator("form.input-request")
    expect(form.locator("label")).to_contain_text("Name?")
    form.locator("input").fill("Ada")
    form.locator("button").click()
    card = page.locator("details.tool").first
    expect(card.locator(".answered")).to_have_text("Name? Ada")
    expect(card.locator(".tool-output")).to_contain_text("hi Ada")
    expect(card).to_have_class("tool ok")
    idle(page)


def test_abort_mid_cell_keeps_the_session(context: Any, served: Served) -> None:
    page = open_tab(context, served)
    say(page, "loop")
    card = page.locator("details.tool").first
    expect(card.locator(".tool-output")).to_contain_text("tick 2")
    page.click("#abort")
    expect(page.locator(".notice.aborted")).to_have_text("stopped: stopped by the user")
    # The cell's result (what the model reads next turn) has the output printed so far.
    expect(card.locator(".tool-result pre")).to_contain_text("Execution failed")
    expect(card.locator(".tool-result pre")).to_contain_text("tick 2")
    idle(page)
    # The history stayed valid and the kernel kept the aborted cell's variable.
    say(page, "x?")
    second = page.locator("details.tool").nth(1)
    expect(second.locator(".tool-output")).to_have_text("42\n")
    idle(page)


def test_a_cell_that_raised_is_a_failed_card_live_and_after_a_reload(
    context: Any, served: Served
) -> None:
    page = open_tab(context, served)
    expect(page.locator(".empty-hint")).to_contain_text("No messages yet")
    say(page, "len")
    expect(page.locator(".empty-hint")).to_have_count(0)
    card = page.locator("details.tool").first
    expect(card).to_have_class("tool failed")
    failure = "failed: TypeError: object of type 'int' has no len()"
    expect(card.locator(".tool-state")).to_contain_text(failure)
    expect(card.locator(".tool-result summary")).to_have_text(
        re.compile(r"result: Execution failed")
    )
    idle(page)
    page.reload()
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    restored = page.locator("details.tool").first
    expect(restored).to_have_class("tool failed")
    expect(restored.locator(".tool-state")).to_contain_text(failure)
    expect(page.locator(".empty-hint")).to_have_count(0)


def test_two_tabs_are_isolated_and_a_reload_keeps_the_history(context: Any, served: Served) -> None:
    one, two = open_tab(context, served), open_tab(context, served)
    first_id = one.locator("#session").inner_text()
    assert first_id != two.locator("#session").inner_text()
    say(one, "set x")
    say(two, "x?")  # at the same time, in its own kernel
    idle(one)
    idle(two)
    expect(two.locator("details.tool .tool-result pre")).to_contain_text("NameError")
    say(one, "x?")
    expect(one.locator("details.tool").nth(1).locator(".tool-output")).to_have_text("101\n")
    idle(one)
    one.reload()
    expect(one.locator("body[data-ready=true]")).to_have_count(1)
    assert one.locator("#session").inner_text() == first_id
    expect(one.locator(".msg.user")).to_have_text(["set x", "x?"])
    expect(one.locator("details.tool .tool-name")).to_have_text(["execute_code", "execute_code"])
    expect(two.locator(".msg.user")).to_have_text(["x?"])
