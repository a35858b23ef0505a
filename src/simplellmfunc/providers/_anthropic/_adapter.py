"""AnthropicCompatible: the Anthropic Messages API (``/v1/messages``) on httpx, without the SDK."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from ..._messages import Message
from ...exceptions import ProviderError
from .._base import Capabilities, LLMRequest, LLMResponse
from .._http_interface import HTTPInterface
from .._keys import APIKeyPool
from .._reply import malformed_reply
from ._parser import MessagesStreamParser
from ._wire import build_messages_body, error_event, parse_messages_response, wire_messages

__all__ = ["AnthropicCompatible"]

logger = logging.getLogger("simplellmfunc.providers")

DEFAULT_CAPABILITIES: Final = Capabilities(json_schema=False)
_NOT_OFFERED: Final = frozenset({404, 405, 501})  # count_tokens: the server has no such endpoint


class AnthropicCompatible(HTTPInterface):
    """A model behind the Anthropic Messages API (api.anthropic.com or a compatible server).

    Sends ``x-api-key`` and ``anthropic-version``; 429, 5xx and 529 (overloaded) are retried with
    the SDK's backoff. Structured output goes through a prompt contract (``json_schema`` is off).

    Args:
        api_key_pool: An :class:`APIKeyPool`, one key or a list of keys (``None``: no auth).
        model_name: The model to request.
        base_url: The API root, e.g. ``https://api.anthropic.com/v1``.
        max_tokens: The reply budget sent with every call (the API requires one); a
            ``max_tokens`` in the call's params or in ``default_params`` wins.
        anthropic_version: The ``anthropic-version`` header.
        max_retries: Retries after the first attempt (see :class:`RetryPolicy`).
        retry_policy: Full retry settings (overrides ``max_retries``).
        timeout: Overall deadline per call in seconds (retries and streaming included).
        connect_timeout: Seconds to connect.
        read_timeout: Seconds to wait for each chunk.
        max_connections: Connection pool size.
        rate_limit_capacity: Token-bucket capacity (with ``rate_limit_refill_rate``);
            ``None`` disables client-side rate limiting.
        rate_limit_refill_rate: Requests per second refilled.
        rate_limit: A :class:`TokenBucket` to use (overrides the two above).
        capabilities: What the server supports (default: everything but ``json_schema``).
        context_window: The model's context size in tokens, if known.
        headers: Extra HTTP headers (e.g. ``anthropic-beta``).
        provider_name: Label used in events and errors.
        http_client: An ``httpx.AsyncClient`` to borrow (left open by :meth:`aclose`).
        **default_params: Body parameters sent with every call (``temperature``, ``thinking``...).

    Raises:
        ConfigError: For an empty key list.
    """

    default_base_url: ClassVar[str] = "https://api.anthropic.com/v1"
    default_provider_name: ClassVar[str] = "anthropic"
    default_capabilities: ClassVar[Capabilities] = DEFAULT_CAPABILITIES
    env_prefix: ClassVar[str] = "ANTHROPIC"
    endpoint_path: ClassVar[str] = "/messages"
    request_id_headers: ClassVar[tuple[str, ...]] = ("request-id", "x-request-id")

    def __init__(
        self,
        api_key_pool: str | Sequence[str] | APIKeyPool | None,
        model_name: str,
        base_url: str | None = None,
        *,
        max_tokens: int = 4096,
        anthropic_version: str = "2023-06-01",
        **options: Any,
    ) -> None:
        self.max_tokens = max_tokens
        self.anthropic_version = anthropic_version
        self._count_endpoint = True  # until the server says it has no count_tokens
        super().__init__(api_key_pool, model_name, base_url, **options)

    def _auth_headers(self, key: str) -> Mapping[str, str]:
        return {"x-api-key": key}

    def _fixed_headers(self) -> Mapping[str, str]:
        return {"anthropic-version": self.anthropic_version}

    def _body(self, request: LLMRequest, stream: bool) -> dict[str, Any]:
        return build_messages_body(
            request,
            model=self.model_name,
            caps=self.capabilities,
            stream=stream,
            max_tokens=self.max_tokens,
            defaults=self.default_params,
        )

    def _parse_reply(self, data: dict[str, Any], request_id: str | None) -> LLMResponse:
        if data.get("type") == "error":
            raise error_event(self.provider_name, data, request_id)
        response = parse_messages_response(data, self.provider_name, request_id)
        if response is None:
            raise malformed_reply(self.provider_name, "content", data, request_id)
        return response

    def _stream_parser(self, request_id: str | None) -> MessagesStreamParser:
        return MessagesStreamParser(self.provider_name, request_id)

    async def count_tokens(self, messages: Sequence[Message]) -> int:
        """Count prompt tokens with ``POST /messages/count_tokens`` when the server offers it.

        A server without the endpoint (404, 405, 501) is remembered and the local tiktoken
        estimate used from then on; any other failure falls back to the estimate for this call.
        """
        system, turns = wire_messages(messages)
        if self._count_endpoint and turns:
            body: dict[str, Any] = {"model": self.model_name, "messages": turns}
            if system is not None:
                body["system"] = system
            try:
                data = await self._http.post_json(
                    "/messages/count_tokens", body, self._http.deadline(None), _object
                )
            except ProviderError as exc:
                if exc.status in _NOT_OFFERED:
                    self._count_endpoint = False
                logger.info("%s: count_tokens failed (%s); estimating", self.provider_name, exc)
            else:
                count = data.get("input_tokens")
                if isinstance(count, int) and not isinstance(count, bool):
                    return count
        return await super().count_tokens(messages)


def _object(data: dict[str, Any], _headers: object) -> dict[str, Any]:
    return data
