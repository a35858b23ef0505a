"""Token usage, added up across calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one or more LLM calls.

    ``estimated`` is true when any part was counted locally instead of reported by the provider.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    calls: int = 0
    estimated: bool = False

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.cached_tokens + other.cached_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.calls + other.calls,
            self.estimated or other.estimated,
        )

    @classmethod
    def from_openai(cls, data: dict[str, Any]) -> Usage:
        """Read an OpenAI ``usage`` object (chat completions or responses shape)."""
        prompt = int(data.get("prompt_tokens", data.get("input_tokens", 0)) or 0)
        completion = int(data.get("completion_tokens", data.get("output_tokens", 0)) or 0)
        details = data.get("prompt_tokens_details") or data.get("input_tokens_details") or {}
        out_details = (
            data.get("completion_tokens_details") or data.get("output_tokens_details") or {}
        )
        return cls(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=int(data.get("total_tokens") or prompt + completion),
            cached_tokens=int(details.get("cached_tokens") or 0),
            reasoning_tokens=int(out_details.get("reasoning_tokens") or 0),
            calls=1,
        )

    def to_dict(self) -> dict[str, int | bool]:
        """Return the counts as a plain dict."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "cached_tokens": self.cached_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "calls": self.calls,
            "estimated": self.estimated,
        }
