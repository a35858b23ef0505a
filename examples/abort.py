"""Abort a streaming run: the history stays valid and the end event says why."""

import anyio

from simplellmfunc import AbortSignal, OpenAICompatible, llm_chat
from simplellmfunc.testing import MockLLMServer, Reply
from simplellmfunc.types import history_from_dicts


async def main() -> None:
    async with MockLLMServer() as server, OpenAICompatible("sk-demo", "mock", server.url) as llm:
        server.script(Reply.text("word " * 200, chunks=200, chunk_delay=0.01))

        @llm_chat(llm, stream=True)
        async def storyteller(message: str, history: list | None = None):
            """You tell long stories."""

        signal = AbortSignal()
        received = 0
        history: list = []
        async for delta, history in storyteller("Tell me a story", _abort_signal=signal):
            received += len(delta)
            if received > 40:
                signal.abort("the user pressed stop")
        print("last message:", history[-1])
        history_from_dicts(history)  # still a valid history
        print("history is valid for the next call")


if __name__ == "__main__":
    anyio.run(main)
