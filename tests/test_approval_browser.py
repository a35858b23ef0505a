"""The web page's approval card in a real headless Chromium (see test_webchat_browser.py for
the setup): a cell that writes a file waits for Approve / Deny / Edit, clicked on the page; the
answer goes through ``/api/answer`` and the session store. A screenshot of a waiting card goes
to ``.cache/test-artifacts/web-approval.png``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from simplellmfunc.builtin import code_touches_system
from simplellmfunc.serving import ServeLimits
from test_webchat_browser import (
    ARTIFACTS,
    CHROMIUM,
    TIMEOUT,
    _children,
    _leaked,
    expect,
    idle,
    open_tab,
    playwright_api,
    say,
)
from webchat_support import Served, serve_in_thread

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium executable")


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    before = _children()
    options = {"requires_approval": code_touches_system}
    with serve_in_thread(
        pyrepl=options, limits=ServeLimits(idle_timeout=None, pool_size=1)
    ) as served:
        yield served
    assert not _leaked(before)


@pytest.fixture(scope="module")
def context() -> Iterator[Any]:
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        context = browser.new_context(viewport={"width": 1000, "height": 800})
        context.set_default_timeout(TIMEOUT)
        yield context
        context.close()
        browser.close()


def test_approve_deny_and_edit_on_the_card(context: Any, served: Served) -> None:
    page = open_tab(context, served)
    say(page, "write")
    card = page.locator("details.tool").last
    form = card.locator("form.approval")
    expect(form.locator(".approval-reason")).to_have_text("the cell opens a file for writing")
    expect(card.locator(".tool-args")).to_contain_text("open('note.txt', 'w')")
    expect(card).to_have_class("tool running waiting")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-approval.png"))
    form.locator("input[name=reason]").fill("no files today")
    form.locator("button.deny").click()
    expect(card.locator(".approval-outcome")).to_have_text("denied: no files today")
    expect(card).to_have_class("tool failed")
    expect(page.locator(".msg.assistant").last).to_contain_text("The user denied this call")
    idle(page)

    say(page, "write")
    card = page.locator("details.tool").last
    form = card.locator("form.approval")
    form.locator("button.edit").click()
    form.locator("textarea.approval-edit").fill('{"code": "print(\'edited\')"}')
    form.locator("button.approve").click()
    expect(card.locator(".approval-outcome")).to_have_text("approved with edited arguments")
    expect(card.locator(".tool-output")).to_have_text("edited\n")
    expect(card).to_have_class("tool ok")
    idle(page)

    say(page, "write")
    card = page.locator("details.tool").last
    card.locator("form.approval button.approve").click()
    expect(card.locator(".tool-output")).to_have_text("wrote\n")
    expect(card.locator(".approval-outcome")).to_have_text("approved")
    idle(page)


def test_reload_redraws_the_waiting_card(context: Any, served: Served) -> None:
    """A reload while a call waits does not abort the turn: the page asks the session what
    waits (``/api/history``'s ``pending``), redraws the card, follows the rest of the turn
    (``/api/follow``); the Approve click on the redrawn card runs the cell."""
    page = open_tab(context, served)
    say(page, "write")
    expect(page.locator("details.tool form.approval")).to_have_count(1)
    page.reload()
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    card = page.locator("details.tool").last
    form = card.locator("form.approval")
    expect(form.locator(".approval-reason")).to_have_text("the cell opens a file for writing")
    expect(card.locator(".tool-args")).to_contain_text("open('note.txt', 'w')")
    expect(page.locator(".notice.waiting")).to_have_text("the running turn waits for you")
    expect(page.locator(".msg.user").last).to_have_text("write")  # the waiting turn's message
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-approval-reloaded.png"))
    form.locator("button.approve").click()
    expect(card.locator(".approval-outcome")).to_have_text("approved")
    expect(card.locator(".tool-output")).to_have_text("wrote\n")
    expect(card).to_have_class("tool ok")
    idle(page)
    page.reload()  # the turn ended: its whole history is drawn, nothing waits
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    expect(page.locator("details.tool form.approval")).to_have_count(0)
    expect(page.locator(".msg.user").last).to_have_text("write")


def test_answer_route_refuses_bad_answers(served: Served) -> None:
    with httpx.Client(base_url=served.url, timeout=10) as client:
        bad = client.post("api/answer/s-x", json={"decision": "approve"})
        assert bad.status_code == 400
        assert "request_id" in bad.json()["error"]
        late = client.post("api/answer/s-x", json={"request_id": "c1", "decision": "approve"})
        assert late.status_code in (404, 409)
        assert late.json()["ok"] is False
