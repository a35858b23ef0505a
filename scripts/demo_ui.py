"""`make demo-ui`: both chat front ends against the real local model, with a screenshot of each.

Starts the local model (SmolLM2-135M; `LOCAL_MODEL=gemma3` for Gemma 3 270M) on llama.cpp's
`llama-server` (as `make demo` does), then runs one real turn
with a PyRepl tool through (a) the web chat page in headless Chromium (Playwright pointed at
Debian's `chromium`) and (b) the Textual app under its pilot, and saves the screenshots
`web-chat.png` and `chat-ui.png` (the terminal's SVG screenshot rendered to PNG by the same
Chromium) to `.cache/demo-ui/`, which git ignores; `DEMO_UI_OUT=docs/assets make demo-ui` (or
`--out docs/assets`) refreshes the README's. The model is tiny: it runs the JSON tool protocol
(each step forced to one tool call or the answer) and gets a task it handles, printing a sum.
"""

from __future__ import annotations

import os
import shutil
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from simplellmfunc import EngineOptions, llm_chat
from simplellmfunc.chat_ui import ChatApp
from simplellmfunc.local import (
    MODELS,
    build,
    default_model,
    install_model,
    llama_server,
    server_llm,
)
from simplellmfunc.serving import ServeLimits, running, web_chat_app

ROOT = Path(__file__).resolve().parents[1]
MODEL = MODELS[default_model()].name  # LOCAL_MODEL, as make demo reads it


def _out(argv: list[str]) -> Path:
    """``--out DIR``, else ``$DEMO_UI_OUT``, else ``.cache/demo-ui`` (untracked)."""
    if "--out" in argv:
        return Path(argv[argv.index("--out") + 1]).resolve()
    return Path(os.environ.get("DEMO_UI_OUT") or ROOT / ".cache" / "demo-ui").resolve()


ASSETS = _out(sys.argv[1:])
PROMPT = "Run this Python code: print(21 + 21)"
TIMEOUT_MS = 900_000  # a tiny model on 2 busy cores: a turn of a few steps takes minutes


def make_agent(llm: Any) -> Any:
    options = EngineOptions(tool_protocol="json", max_tool_calls=2)

    @llm_chat(llm, stream=True, enable_event=True, options=options, temperature=0, max_tokens=120)
    async def assistant(message: str, history: list | None = None):  # type: ignore[no-untyped-def]
        """You run Python code with the execute_code tool. First reply
        {"action": "execute_code", "action_input": {"code": "<the user's code>"}}.
        After the result, reply {"action": "final_answer", "answer": "<what it printed>"}."""

    return assistant


async def web_turn(agent: Any, browser: Any) -> None:
    async with running(
        lambda url: web_chat_app(agent, pyrepl=True, limits=ServeLimits(pool_size=1))
    ) as url:
        page = await browser.new_page(viewport={"width": 1000, "height": 700})
        page.set_default_timeout(TIMEOUT_MS)
        await page.goto(url + "/")
        await page.wait_for_selector("body[data-ready=true]", state="attached")
        await page.fill("#message", PROMPT)
        await page.press("#message", "Enter")
        await page.wait_for_selector(".usage")  # the turn's end
        await page.wait_for_selector("#send:enabled")
        await page.screenshot(path=str(ASSETS / "web-chat.png"))
        print(f"web: saved {ASSETS / 'web-chat.png'}")
        await page.close()


async def terminal_turn(agent: Any, browser: Any, tmp: Path) -> None:
    app = ChatApp(agent, pyrepl=True, title=f"{MODEL} · simplellmfunc chat")
    async with app.run_test(size=(110, 34)) as pilot:
        with anyio.fail_after(60):
            while app.query_one("#status").render().plain.startswith("starting"):  # type: ignore[attr-defined]
                await pilot.pause(0.1)
        await pilot.click("#prompt")
        await pilot.press(*PROMPT)
        await pilot.press("enter")
        with anyio.fail_after(TIMEOUT_MS / 1000):
            while app.turns < 1:
                await pilot.pause(0.2)
        await pilot.pause(0.5)
        svg = Path(app.save_screenshot(filename="chat-ui.svg", path=str(tmp)))
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    await page.goto(svg.as_uri())
    await page.locator("svg").screenshot(path=str(ASSETS / "chat-ui.png"))
    print(f"terminal: saved {ASSETS / 'chat-ui.png'}")
    await page.close()


async def main() -> None:
    from playwright.async_api import async_playwright

    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        sys.exit("demo-ui needs Debian's chromium (apt-get install chromium)")
    await anyio.to_thread.run_sync(install_model)
    await anyio.to_thread.run_sync(build)
    ASSETS.mkdir(parents=True, exist_ok=True)
    async with AsyncExitStack() as stack:
        base_url = await stack.enter_async_context(llama_server())
        llm = await stack.enter_async_context(server_llm(base_url))
        print(f"{MODEL} on llama-server at {base_url}; prompt: {PROMPT!r}")
        playwright = await stack.enter_async_context(async_playwright())
        browser = await playwright.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox"]
        )
        stack.push_async_callback(browser.close)
        tmp = Path(stack.enter_context(_tempdir()))
        agent = make_agent(llm)
        await web_turn(agent, browser)
        await terminal_turn(agent, browser, tmp)


def _tempdir() -> Any:
    import tempfile

    return tempfile.TemporaryDirectory(prefix="demo-ui-")


if __name__ == "__main__":
    from simplellmfunc.exceptions import LocalModelError

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        sys.exit("interrupted")
    except LocalModelError as exc:
        sys.exit(f"demo-ui could not start the local model: {exc}")
