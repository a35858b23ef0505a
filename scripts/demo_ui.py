"""`make demo-ui`: both chat front ends against the real local model, with a screenshot of each.

Starts the local model (SmolLM2-135M; `LOCAL_MODEL=gemma3` for Gemma 3 270M) on llama.cpp's
`llama-server` (as `make demo` does), then runs the demo's agent turn (the weather question,
its `get_weather` tool with a progress event) through (a) the web chat page in headless
Chromium (Playwright pointed at Debian's `chromium`) and (b) the Textual app under its pilot,
and saves the screenshots
`web-chat.png` and `chat-ui.png` (the terminal's SVG screenshot rendered to PNG by the same
Chromium) to `.cache/demo-ui/`, which git ignores; `DEMO_UI_OUT=docs/assets make demo-ui` (or
`--out docs/assets`) refreshes the README's. The model is tiny: it runs the JSON tool protocol
(each step forced to one tool call or the answer) on the task `make demo` checks it handles
(both local models: 5 of 5 runs call the tool and answer from it). Each turn is checked the way
the demo checks its own: it exits 1, keeping the screenshots for a look, unless the tool was
called and the answer uses what it returned (a small model gets it wrong at times: run again).
"""

from __future__ import annotations

import os
import shutil
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from simplellmfunc import EngineOptions, llm_chat, tool
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
from simplellmfunc.tools import ToolEventEmitter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
from demo import get_weather, uses  # noqa: E402  (the demo's tool and its own check)

MODEL = MODELS[default_model()].name  # LOCAL_MODEL, as make demo reads it


def _out(argv: list[str]) -> Path:
    """``--out DIR``, else ``$DEMO_UI_OUT``, else ``.cache/demo-ui`` (untracked)."""
    if "--out" in argv:
        return Path(argv[argv.index("--out") + 1]).resolve()
    return Path(os.environ.get("DEMO_UI_OUT") or ROOT / ".cache" / "demo-ui").resolve()


ASSETS = _out(sys.argv[1:])
PROMPT = "What's the weather in Paris right now?"
TIMEOUT_MS = 900_000  # a tiny model on 2 busy cores: a turn of a few steps takes minutes


def make_agent(llm: Any) -> Any:
    """The demo's agent (``examples/demo.py``), streaming."""
    options = EngineOptions(tool_protocol="json", max_tool_calls=3)

    @llm_chat(
        llm,
        toolkit=[recorded_weather],
        stream=True,
        enable_event=True,
        options=options,
        temperature=0,
    )
    async def assistant(message: str, history: list | None = None):  # type: ignore[no-untyped-def]
        """You answer questions about the weather. Use the get_weather tool."""

    return assistant


RESULTS: list[str] = []  # what get_weather returned in the turn being checked


@tool(name="get_weather")
async def recorded_weather(city: str, event_emitter: ToolEventEmitter | None = None) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. "Paris".
    """
    result = await get_weather.func(city, event_emitter)
    RESULTS.append(result)
    return result


def _check(front: str, answer: str) -> list[str]:
    """The demo's checks on one front's turn: a get_weather call, an answer that uses it."""
    results, RESULTS[:] = list(RESULTS), []
    print(f"{front}: get_weather returned {results}; the answer: {answer!r}")
    if not results:
        return [f"{front}: the agent made no get_weather call"]
    if not uses(answer, results):
        return [f"{front}: the answer does not use what the tool returned"]
    return []


async def web_turn(agent: Any, browser: Any) -> list[str]:
    async with running(lambda url: web_chat_app(agent, limits=ServeLimits(pool_size=1))) as url:
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
        answer = await page.locator(".msg.assistant").last.inner_text()
        await page.close()
    return _check("web", answer)


async def terminal_turn(agent: Any, browser: Any, tmp: Path) -> list[str]:
    app = ChatApp(agent, title=f"{MODEL} · simplellmfunc chat")
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
        answer = app.view.answer if app.view is not None else ""
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    await page.goto(svg.as_uri())
    await page.locator("svg").screenshot(path=str(ASSETS / "chat-ui.png"))
    print(f"terminal: saved {ASSETS / 'chat-ui.png'}")
    await page.close()
    return _check("terminal", answer)


async def main() -> list[str]:
    """Both turns and their screenshots; the checks that failed (empty: both turns were right)."""
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
        return await web_turn(agent, browser) + await terminal_turn(agent, browser, tmp)


def _tempdir() -> Any:
    import tempfile

    return tempfile.TemporaryDirectory(prefix="demo-ui-")


if __name__ == "__main__":
    from simplellmfunc.exceptions import LocalModelError

    try:
        failed = anyio.run(main)
    except KeyboardInterrupt:
        sys.exit("interrupted")
    except LocalModelError as exc:
        sys.exit(f"demo-ui could not start the local model: {exc}")
    if failed:
        sys.exit("the model got this turn wrong (screenshots kept): " + "; ".join(failed))
    print("both turns right: a get_weather call and an answer from what it returned")
