"""A typed @llm_function: the docstring is the prompt, the return annotation the contract.

Runs offline against the scripted mock server; use `OpenAICompatible.from_env()` for a real model.
"""

import anyio
from pydantic import BaseModel

from simplellmfunc import OpenAICompatible, llm_function
from simplellmfunc.testing import MockLLMServer, Reply


class Review(BaseModel):
    sentiment: str
    score: int


async def main() -> None:
    async with MockLLMServer() as server, OpenAICompatible("sk-demo", "mock", server.url) as llm:
        server.script(Reply.text('{"sentiment": "mixed", "score": 3}'))

        @llm_function(llm)
        async def review(text: str) -> Review:
            """Classify the sentiment of the product review and score it from 1 to 5."""

        result = await review("Great value, but it broke after a week.")
        print(result)
        assert isinstance(result, Review)


if __name__ == "__main__":
    anyio.run(main)
