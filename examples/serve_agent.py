"""Serve an agent over HTTP, then talk to it two ways: with our `OpenAICompatible` provider (an
`X-Session-Id` header makes the server keep the conversation), and as an A2A tool of a second
agent. Needs the [serve] and [a2a] extras. `simplellmfunc serve agent.yml` serves a config-file
agent the same way (see docs/serving.md).
"""

from _model import pick_model, run

from simplellmfunc import OpenAICompatible, llm_chat
from simplellmfunc.events import EventYield, ToolCallStartEvent
from simplellmfunc.hooks import ResponseYield
from simplellmfunc.runtime.a2a import a2a_tool
from simplellmfunc.serving import ServedAgent, create_app, running
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

TOKEN = "example-token-123"  # a real server reads it from SIMPLELLMFUNC_SERVE_TOKEN

served_llm = pick_model(
    "Bonjour Ada !",
    "Je m'appelle Ada.",
    "Bonne nuit.",
)
caller_llm = pick_model(
    ScriptedLLM.response(tool_calls=[ToolCallSpec("translator", {"task": "Good night"})]),
    "In French, 'Good night' is 'Bonne nuit.'",
)


@llm_chat(served_llm, stream=True)
async def translator(message: str, history: list | None = None):
    """You translate English into French. Answer with the translation only."""


async def over_openai(url: str) -> None:
    """Our own provider, pointed at the served agent; the server keeps session 'ada'."""
    headers = {"X-Session-Id": "ada"}
    async with OpenAICompatible(TOKEN, "translator", f"{url}/v1", headers=headers) as remote:

        @llm_chat(remote)
        async def client(message: str, history: list | None = None):
            """(the served agent answers with its own system prompt)"""

        for text in ("Hello, I am Ada!", "My name is Ada."):
            reply = "".join([chunk async for chunk, _ in client(text, history=[])])
            print(f"[openai, session ada] {text} -> {reply}")


async def over_a2a(url: str) -> None:
    """A second agent calls the served one as an A2A tool (named after its agent card)."""
    tool = await a2a_tool(url, token=TOKEN)
    print(f"[a2a] tool {tool.name!r}: {tool.description}")

    @llm_chat(caller_llm, toolkit=[tool], enable_event=True)
    async def caller(message: str, history: list | None = None):
        """You help travellers. Ask the translator for translations."""

    async with tool:  # it keeps its connection between calls: closed here
        async for item in caller("How do I say 'Good night' in French?"):
            if isinstance(item, EventYield) and isinstance(item.event, ToolCallStartEvent):
                print(f"[a2a] caller -> {item.event.tool_name}({item.event.arguments})")
            elif isinstance(item, ResponseYield):
                print(f"[a2a] caller answers: {item.response}")


async def main() -> None:
    served = ServedAgent(translator)
    async with running(lambda url: create_app(served, url, token=TOKEN)) as url:
        await over_openai(url)
        await over_a2a(url)
        print(f"session ada keeps {len(await served.history('ada'))} messages on the server")


if __name__ == "__main__":
    run(main)
