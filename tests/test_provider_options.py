"""The HTTP providers take their connection settings as one public value (``HTTPSettings``, as
httpx takes ``Timeout`` / ``Limits``), or the flat keywords SimpleLLMFunc code uses."""

from __future__ import annotations

from typing import Any

import pytest

from simplellmfunc.exceptions import ProviderTimeoutError, UserError
from simplellmfunc.providers import (
    AnthropicCompatible,
    HTTPSettings,
    LLMRequest,
    OpenAICompatible,
    RetryPolicy,
)
from simplellmfunc.testing import MockLLMServer, Reply
from simplellmfunc.types import UserMessage

REQUEST = LLMRequest((UserMessage("hi"),))


@pytest.mark.parametrize(
    "options",
    [{"http": HTTPSettings(timeout=0.3)}, {"timeout": 0.3}],
    ids=["option-bag", "flat-keyword"],
)
async def test_the_bag_and_the_flat_keywords_set_the_same_deadline(
    mock_server: MockLLMServer, options: dict[str, Any]
) -> None:
    mock_server.script(Reply.text("late", ttft=30))
    llm = OpenAICompatible(
        "sk-test-123456789",
        "mock-model",
        mock_server.url,
        retry_policy=RetryPolicy(max_retries=0),
        **options,
    )
    async with llm:
        with pytest.raises(ProviderTimeoutError):
            await llm.complete(REQUEST)
    assert len(mock_server.requests) == 1


def test_the_bag_and_a_flat_keyword_together_are_refused() -> None:
    with pytest.raises(UserError, match=r"http=HTTPSettings\(\.\.\.\) or read_timeout"):
        AnthropicCompatible("sk-x", "m", http=HTTPSettings(), read_timeout=5)
