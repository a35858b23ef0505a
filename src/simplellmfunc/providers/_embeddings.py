"""OpenAIEmbeddings: text → vectors from any OpenAI-compatible ``/embeddings`` endpoint.

OpenAI, llama.cpp's server started with ``--embedding``, vLLM, Ollama's ``/v1`` and our
``MockLLMServer`` all answer ``POST /embeddings`` with ``{"data": [{"index", "embedding"}]}``.
Requests go through the same transport as the chat adapters (keys, retries, deadline, errors that
name the server but never the key).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from .._resource import AsyncResource
from ..exceptions import ConfigError, ProviderError
from ._http import HTTPSettings, HTTPTransport
from ._keys import APIKeyPool
from ._retry import RetryPolicy

__all__ = ["OpenAIEmbeddings"]


class OpenAIEmbeddings(AsyncResource):
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint.

    Args:
        model: The embedding model's name (llama.cpp accepts any).
        base_url: The API root, e.g. ``http://127.0.0.1:8080/v1``.
        api_key: A key, several keys, or ``None`` for a server that needs none (local ones).
        dimensions: Ask the server for vectors of this size (OpenAI's ``dimensions``); ``None``:
            the model's own.
        batch_size: Texts per request.
        timeout: Deadline per request in seconds, retries included.
        max_retries: Retries of a failed request (connection errors, 429, 5xx).
        http_client: An ``httpx.AsyncClient`` to use (not closed by :meth:`aclose`).

    Raises:
        ConfigError: For an empty key list or a batch size below 1.
    """

    def __init__(
        self,
        model: str,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | Sequence[str] | None = None,
        *,
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout: float = 120.0,
        max_retries: int = 2,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"OpenAIEmbeddings: batch_size must be at least 1, got {batch_size}")
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        keys = APIKeyPool(api_key, "embeddings") if api_key is not None else None
        self._http = HTTPTransport(
            base_url=base_url,
            keys=keys,
            auth=lambda key: {"authorization": f"Bearer {key}"},
            provider="embeddings",
            retry=RetryPolicy(max_retries=max_retries),
            settings=HTTPSettings(timeout=timeout),
            client=http_client,
        )

    @property
    def base_url(self) -> str:
        """The API root."""
        return self._http.base_url

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order (``batch_size`` texts per request).

        Raises:
            ProviderError: (a subclass) when the server fails or answers something that is not
                one vector per text.
        """
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors += await self._batch(list(texts[start : start + self.batch_size]))
        return vectors

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        deadline = self._http.deadline(None)
        return await self._http.post_json(
            "/embeddings", body, deadline, lambda data, _: self._vectors(data, len(texts))
        )

    def _vectors(self, data: Mapping[str, object], count: int) -> list[list[float]]:
        items = data.get("data")
        if not isinstance(items, list) or len(items) != count:
            got = len(items) if isinstance(items, list) else "no"
            raise ProviderError(
                f"embeddings ({self._http.target}): expected {count} vectors, got {got}"
            )
        ordered = sorted(items, key=lambda item: int(item.get("index", 0)))
        vectors = [item.get("embedding") for item in ordered]
        if not all(isinstance(v, list) and v for v in vectors):
            raise ProviderError(f"embeddings ({self._http.target}): a reply item has no vector")
        return [[float(x) for x in v] for v in vectors]

    async def aclose(self) -> None:
        """Close the HTTP client (when this object created it)."""
        await self._http.aclose()

    def __repr__(self) -> str:
        return f"OpenAIEmbeddings(model={self.model!r}, base_url={self.base_url!r})"
