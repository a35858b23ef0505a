"""HTTPInterface: what every HTTP provider shares (settings, keys, rate limit, lifecycle, usage
estimates, loading from provider.json and the environment). Adapters add the wire format."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Self

import anyio.to_thread
import httpx

from .._usage import Usage
from ._base import Capabilities, LLMInterface, LLMRequest, LLMResponse
from ._http import HTTPSettings, HTTPTransport
from ._keys import APIKeyPool
from ._ratelimit import TokenBucket
from ._redact import fingerprint
from ._retry import RetryPolicy
from ._tokens import count_message_tokens, count_text_tokens

__all__ = ["HTTPInterface"]


class HTTPInterface(LLMInterface):
    """Base of the HTTP providers; one ``httpx.AsyncClient`` per interface.

    Args:
        api_key_pool: An :class:`APIKeyPool`, one key or a list of keys (``None``: no auth).
        model_name: The model to request.
        base_url: The API root (default: the adapter's public endpoint).
        max_retries: Retries after the first attempt (see :class:`RetryPolicy`).
        retry_policy: Full retry settings (overrides ``max_retries``).
        timeout: Overall deadline per call in seconds (retries and streaming included).
        connect_timeout: Seconds to connect.
        read_timeout: Seconds to wait for each chunk.
        max_connections: Connection pool size (HTTP/1.1 keep-alive).
        rate_limit_capacity: Token-bucket capacity (with ``rate_limit_refill_rate``);
            ``None`` disables client-side rate limiting.
        rate_limit_refill_rate: Requests per second refilled.
        rate_limit: A :class:`TokenBucket` to use (overrides the two above).
        capabilities: What the server supports (default: the adapter's).
        context_window: The model's context size in tokens, if known.
        headers: Extra HTTP headers.
        provider_name: Label used in events and errors.
        http_client: An ``httpx.AsyncClient`` to use (not closed by :meth:`aclose`).
        **default_params: Body parameters sent with every call (``temperature`` ...).

    Raises:
        ConfigError: For an empty key list.
    """

    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    default_provider_name: ClassVar[str] = "openai"
    default_capabilities: ClassVar[Capabilities] = Capabilities()
    env_prefix: ClassVar[str] = "OPENAI"

    def __init__(
        self,
        api_key_pool: str | Sequence[str] | APIKeyPool | None,
        model_name: str,
        base_url: str | None = None,
        *,
        max_retries: int = 2,
        retry_policy: RetryPolicy | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        max_connections: int = 100,
        rate_limit_capacity: float | None = None,
        rate_limit_refill_rate: float = 1.0,
        rate_limit: TokenBucket | None = None,
        capabilities: Capabilities | None = None,
        context_window: int | None = None,
        headers: Mapping[str, str] | None = None,
        provider_name: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        **default_params: Any,
    ) -> None:
        self.model_name = model_name
        self.provider_name = provider_name or self.default_provider_name
        self.capabilities = capabilities or self.default_capabilities
        self.context_window = context_window
        self.default_params = dict(default_params)
        if rate_limit is None and rate_limit_capacity is not None:
            rate_limit = TokenBucket(rate_limit_capacity, rate_limit_refill_rate)
        keys = api_key_pool
        if keys is not None and not isinstance(keys, APIKeyPool):
            keys = APIKeyPool(keys, self.provider_name)
        self._http = HTTPTransport(
            base_url=base_url or self.default_base_url,
            keys=keys,
            auth=self._auth_headers,
            provider=self.provider_name,
            retry=retry_policy or RetryPolicy(max_retries=max_retries),
            settings=HTTPSettings(timeout, connect_timeout, read_timeout, max_connections),
            rate_limit=rate_limit,
            headers={**self._fixed_headers(), **(headers or {})},
            client=http_client,
        )

    def _auth_headers(self, key: str) -> Mapping[str, str]:
        """The headers that carry ``key`` (bearer token by default)."""
        return {"authorization": f"Bearer {key}"}

    def _fixed_headers(self) -> Mapping[str, str]:
        """Headers every request carries (e.g. an API version)."""
        return {}

    @property
    def base_url(self) -> str:
        """The API root."""
        return self._http.base_url

    @property
    def key_pool(self) -> APIKeyPool | None:
        """The key pool (never log its keys)."""
        return self._http.keys

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()

    async def _with_estimate(self, request: LLMRequest, response: LLMResponse) -> LLMResponse:
        """Count usage locally (the server reported none), in a worker thread: tiktoken's first
        load is slow."""
        text = response.text + "".join(c.name + c.arguments for c in response.message.tool_calls)

        def count() -> tuple[int, int]:
            return (
                count_message_tokens(request.messages, self.model_name),
                count_text_tokens(text, self.model_name),
            )

        prompt, completion = await anyio.to_thread.run_sync(count)
        usage = Usage(prompt, completion, prompt + completion, calls=1, estimated=True)
        return replace(response, usage=usage)

    def __repr__(self) -> str:
        pool = self._http.keys
        keys = ",".join(fingerprint(k) for k in pool.keys) if pool else "-"
        return (
            f"{type(self).__name__}(model={self.model_name!r}, base_url={self.base_url!r}, "
            f"keys=[{keys}])"
        )

    @classmethod
    def load_from_json_file(cls, path: str | Path) -> dict[str, dict[str, Self]]:
        """Load interfaces from a SimpleLLMFunc ``provider.json``.

        The file maps provider names to lists of ``{"model_name", "api_keys", "base_url", ...}``
        entries (extra keys become constructor arguments); the result maps provider → model
        name → interface.

        Raises:
            ConfigError: For a missing, unreadable or malformed file, naming what is wrong.
        """
        from ._config import load_provider_json

        return load_provider_json(cls, path)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """Build the interface from ``<PREFIX>_API_KEY`` (comma-separated for several keys),
        ``<PREFIX>_MODEL`` and ``<PREFIX>_BASE_URL`` (``OPENAI_*``; ``ANTHROPIC_*`` for
        Anthropic). Values come from ``environ`` (default: the process environment over
        ``./.env``).

        Raises:
            ConfigError: If no model or key is configured.
        """
        from ._config import interface_from_env

        return interface_from_env(cls, environ, cls.env_prefix, cls.default_base_url)
