"""The web chat page for a PyRepl agent: each browser tab is a session with its own kernel.

Markdown replies, a card per tool call with the kernel's live output and images, input()
prompts, a Stop button; idle sessions are reclaimed. Needs the [web] extra (starlette, uvicorn).

    .venv/bin/python examples/web_chat.py      # the model from .env (OPENAI_MODEL ...)
    # then open http://127.0.0.1:8000/ in two tabs

Bound to loopback the page needs no token; `simplellmfunc web CONFIG --host 0.0.0.0
--allowed-host NAME` serves a config's agent with a token (see docs/security.md).
"""

import uvicorn

from simplellmfunc import LLMInterface, OpenAICompatible, llm_chat
from simplellmfunc.serving import web_chat_app


def make_app(llm: LLMInterface, **options):
    @llm_chat(llm, stream=True, enable_event=True)
    async def assistant(message: str, history: list | None = None):
        """You are a Python assistant. Run code with execute_code; variables persist.
        Show plots with display(); use input() in your code when you need something from
        the user. Answer in Markdown."""

    return web_chat_app(assistant, title="Python assistant", **options)


if __name__ == "__main__":
    uvicorn.run(make_app(OpenAICompatible.from_env()), host="127.0.0.1", port=8000)
