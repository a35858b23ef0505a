"""The web chat example served on loopback for the browser and HTTP tests: a MockLLMServer as
its model, uvicorn in a thread of its own (so a module-wide browser can drive it synchronously).

The model answers by the user's word: it runs the code that word names in the session's
kernel, then summarises the tool result; ``hello`` gets a streamed Markdown reply.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import uvicorn

from conftest import settle
from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.serving import ServedAgent, ServeLimits, create_app
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from web_chat import make_app

HELPER = "You add numbers."
MARKDOWN = "**Hello** there, I run `Python` for you.\n\n- one\n- two\n\n```python\nprint(1)\n```"
PICTURE = (
    "from PIL import Image as Picture\nimport io\nfrom IPython.display import Image, display\n"
    "buffer = io.BytesIO()\nPicture.new('RGB', (48, 24), 'red').save(buffer, 'PNG')\n"
    "display(Image(data=buffer.getvalue()))"
)
CODE = {
    "count": "import time\nfor i in range(3):\n    print('line', i, flush=True)\n"
    f"    time.sleep(0.2)\n{PICTURE}",
    "name": "name = input('Name? ')\nprint('hi', name)",
    "loop": "x = 41\nimport time\nfor i in range(300):\n    print('tick', i, flush=True)\n"
    "    time.sleep(0.1)",
    "x?": "print(x + 1)",
    "set x": "x = 100",
    "len": "len(5)",
    "write": "open('note.txt', 'w').write('hi')\nprint('wrote')",
}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def brain(request: RecordedRequest) -> Reply:
    """The model: run the code the user's word names; then summarise the tool result.
    ``delegate`` hands a task to the helper agent (a tool), which adds with a tool of its own."""
    messages = request.json["messages"]
    helper = HELPER in str(messages[0].get("content"))
    if helper and messages[-1]["role"] == "user":
        return Reply.tool_calls(ToolCallSpec("add", {"a": 2, "b": 3}))
    if messages[-1]["role"] == "user" and messages[-1]["content"] == "delegate":
        return Reply.tool_calls(ToolCallSpec("helper", {"task": "add 2 and 3"}))
    for message in reversed(request.json["messages"]):
        if message["role"] == "tool":  # (an image of the result may follow it as a user part)
            return Reply.text(f"done: {_text(message['content'])[:200]}")
        if message["role"] == "user" and isinstance(message["content"], str):
            break
    word = request.json["messages"][-1]["content"]
    if word in CODE:
        return Reply.tool_calls(ToolCallSpec("execute_code", {"code": CODE[word]}))
    return Reply.text(MARKDOWN, chunks=12, chunk_delay=0.05)


@dataclass
class Served:
    """The running app: its address, and the model's recorded requests."""

    url: str = ""
    mock: MockLLMServer | None = None
    error: BaseException | None = None
    ready: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)


def served_agent_app(llm: Any, token: str) -> Any:
    """``simplellmfunc serve --web``'s app for the example's assistant: a ServedAgent with a
    kernel per session, A2A, the OpenAI-compatible endpoint and the page, behind ``token``."""

    @tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @llm_chat(llm, toolkit=[add], stream=True)
    async def helper(message: str, history: list | None = None):  # type: ignore[no-untyped-def]
        """You add numbers."""

    @llm_chat(llm, toolkit=[helper.as_tool("helper", "Adds numbers.")], stream=True)
    async def assistant(message: str, history: list | None = None):  # type: ignore[no-untyped-def]
        """You are a Python assistant. Run code with execute_code."""

    served = ServedAgent(
        assistant, name="assistant", pyrepl=True, limits=ServeLimits(max_sessions=8, pool_size=1)
    )
    return create_app(served, "http://127.0.0.1", token=token, web=True)


async def _main(served: Served, options: dict[str, Any]) -> None:
    async with MockLLMServer() as mock:
        mock.default = brain
        llm = OpenAICompatible("sk-test-123456789", "mock", mock.url)
        token = options.pop("served_token", None)
        app = served_agent_app(llm, token) if token else make_app(llm, **options)
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        server = uvicorn.Server(config)
        async with llm, anyio.create_task_group() as tasks:
            tasks.start_soon(server.serve)
            assert await settle(lambda: server.started, 30.0)
            port = server.servers[0].sockets[0].getsockname()[1]
            served.url, served.mock = f"http://127.0.0.1:{port}/", mock
            served.ready.set()
            await anyio.to_thread.run_sync(served.stop.wait)
            server.should_exit = True


@contextmanager
def serve_in_thread(**options: Any) -> Iterator[Served]:
    """The example app with ``options`` (``web_chat_app`` keywords), until the block ends;
    with ``served_token=TOKEN``: the serve app with the page (:func:`served_agent_app`)."""
    served = Served()

    def run() -> None:
        try:
            anyio.run(_main, served, options)
        except BaseException as exc:  # reported to the test thread
            served.error = exc
            served.ready.set()

    thread = threading.Thread(target=run, name="webchat-server", daemon=True)
    thread.start()
    try:
        served.ready.wait(60)
        if served.error is not None:
            raise served.error
        assert served.url, "the web chat app did not start within 60 s"
        yield served
    finally:
        served.stop.set()
        thread.join(60)
        assert not thread.is_alive(), "the web chat server did not stop"
        if served.error is not None:
            raise served.error
