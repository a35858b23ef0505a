"""Parallel agents: three translators at once, at most two running; a failing one is reported,
the others still answer."""

from _model import pick_model, run

from simplellmfunc import llm_chat
from simplellmfunc.exceptions import ProviderError
from simplellmfunc.runtime.multiagent import Parallel


def translator(name: str, reply: object):
    @llm_chat(pick_model(reply))
    async def agent(message: str, history: list | None = None):
        """You translate the user's text. Reply with the translation only."""

    agent.__name__ = name
    return agent


async def main() -> None:
    team = Parallel(
        [
            translator("french", "Bonjour le monde"),
            translator("german", "Hallo Welt"),
            translator("klingon", ProviderError("no Klingon model today")),
        ],
        limit=2,
        timeout=60,
    )
    result = await team.run("Hello world")
    for outcome in result.outcomes:
        print(f"{outcome.agent}: {outcome.text if outcome.ok else 'failed: ' + str(outcome.error)}")


if __name__ == "__main__":
    run(main)
