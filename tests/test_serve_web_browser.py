"""``simplellmfunc serve --web``'s app in a real headless Chromium (the browser and a
context per test: ``tests/conftest.py``): the page, A2A and /v1 on one app behind a bearer
token, and an agent used as a tool drawn inside its card.

A module of its own: the example app of test_webchat_browser.py is gone (its warm pool's
refills included) before this app starts, so what is left after this one is this one's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from test_webchat_browser import (
    CHROMIUM,
    _children,
    _leaked,
    expect,
    idle,
    say,
)
from webchat_support import Served, serve_in_thread

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium executable")


TOKEN = "serve-web-token-0123"


@pytest.fixture(scope="module")
def served_agent() -> Iterator[Served]:
    """``simplellmfunc serve --web``'s app: the page, A2A and /v1 on one app, behind a token."""
    before = _children()
    with serve_in_thread(served_token=TOKEN) as served:
        yield served
    assert not _leaked(before)


def test_serve_web_page_behind_the_bearer_token(context: Any, served_agent: Served) -> None:
    url = served_agent.url
    page = context.new_page()
    page.goto(url + "?token=" + TOKEN)
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    expect(page.locator("h1")).to_have_text("assistant")
    say(page, "count")
    card = page.locator("details.tool").first
    expect(card.locator(".tool-output .stdout").first).to_have_text("line 0\n")
    expect(card.locator("img.kernel-image")).to_have_count(1)
    expect(card).to_have_class("tool ok")
    expect(page.locator(".msg.assistant").last).to_contain_text("done:")
    idle(page)
    # The token is in the address (a reload keeps it) and in the API calls' header only.
    page.reload()
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    expect(page.locator(".msg.user")).to_have_text(["count"])
    expect(page.locator("details.tool .tool-name")).to_have_text(["execute_code"])
    tab = page.locator("#session").inner_text()

    auth = {"authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=url, timeout=30) as http:
        # Without the token: no page, no API, no endpoint; the page's files carry no secret.
        assert http.get("/").status_code == 401
        assert http.get("/?token=wrong").status_code == 401
        assert http.get(f"/api/history/{tab}").status_code == 401
        assert http.get(f"/api/history/{tab}?token={TOKEN}").status_code == 401
        assert http.get("/v1/models").status_code == 401
        assert http.get("/static/app.js").status_code == 200
        # One session store: the tab is a session of the served agent.
        assert http.get("/health").json()["sessions"] >= 1
        history = http.get(f"/api/history/{tab}", headers=auth).json()["messages"]
        assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
        # The A2A card and the OpenAI-compatible endpoint work on the same app.
        card_json = http.get("/.well-known/agent-card.json").json()
        assert card_json["name"] == "assistant"
        body = {"model": "assistant", "messages": [{"role": "user", "content": "hello"}]}
        reply = http.post("/v1/chat/completions", json=body, headers=auth)
        assert reply.status_code == 200
        assert reply.json()["choices"][0]["message"]["content"].startswith("**Hello**")
        a2a = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"role": "ROLE_USER", "parts": [{"text": "hello"}], "messageId": "m1"}
            },
        }
        answered = http.post("/a2a", json=a2a, headers={**auth, "A2A-Version": "1.0"})
        assert answered.status_code == 200, answered.text
        assert "Hello" in answered.text, answered.text


def test_a_sub_run_is_drawn_inside_the_card_that_started_it(
    context: Any, served_agent: Served
) -> None:
    """An agent used as a tool: its reply and its own tool call are drawn inside the card of
    the call that started it (``origin.parent_tool_call_id``), not as the turn's own."""
    page = context.new_page()
    page.goto(served_agent.url + "?token=" + TOKEN)
    expect(page.locator("body[data-ready=true]")).to_have_count(1)
    say(page, "delegate")
    idle(page)
    outer = page.locator("#log > details.tool")
    expect(outer).to_have_count(1)  # the helper's add is not a card of the turn
    expect(outer.locator(":scope > summary .tool-name")).to_have_text("helper")
    fork = outer.locator(".tool-forks > .fork")
    expect(fork.locator(".fork-label")).to_have_text("⑂ helper")
    inner = fork.locator("details.tool")
    expect(inner.locator(".tool-name")).to_have_text("add")
    expect(inner).to_have_class("tool ok")
    expect(fork.locator(".msg.assistant")).to_have_text("done: 5")
    expect(page.locator("#log > .msg.assistant")).to_have_text(["done: done: 5"])
