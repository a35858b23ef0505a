"""Errors of the OpenAI-compatible routes, in OpenAI's shape and with OpenAI's status codes.

Every refusal is ``{"error": {"message", "type", "param", "code"}}``. A turn that fails reaches
the client as a typed code and a message of ours; the provider's details (status, request id,
the redacted body excerpt) go to the server log only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from starlette.responses import JSONResponse, Response

from ..exceptions import (
    CapacityError,
    InvalidHistoryError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    SessionError,
    SimpleLLMFuncError,
    UserError,
)

__all__ = ["ApiError", "error_body", "error_response", "failure"]

logger = logging.getLogger("simplellmfunc.serve")


@dataclass(frozen=True, slots=True)
class ApiError(Exception):
    """A request refused with an OpenAI error (raise it while reading a request)."""

    status: int
    message: str
    kind: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None

    def body(self) -> dict[str, object]:
        """The error object (``{"error": {...}}``)."""
        return error_body(self.message, self.kind, self.param, self.code)

    def response(self) -> Response:
        """The error as a JSON response."""
        return JSONResponse(self.body(), status_code=self.status)


def error_body(
    message: str, kind: str, param: str | None = None, code: str | None = None
) -> dict[str, object]:
    """``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_response(
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> Response:
    """An error in the OpenAI shape."""
    return ApiError(status, message, kind, param, code).response()


def failure(exc: SimpleLLMFuncError) -> ApiError:
    """The OpenAI error of a refused or failed turn; a provider's details are logged, never
    sent."""
    if isinstance(exc, CapacityError):
        status = 503 if exc.limit == "closing" else 429
        return ApiError(status, str(exc), "rate_limit_error", None, f"capacity_{exc.limit}")
    if isinstance(exc, SessionError):
        return ApiError(409, str(exc), "invalid_request_error", None, f"session_{exc.reason}")
    if isinstance(exc, InvalidHistoryError):
        return ApiError(400, str(exc), "invalid_request_error", "messages", "invalid_history")
    if isinstance(exc, ProviderError):
        logger.warning("the model provider failed: %s", exc)  # the body excerpt is redacted
        if isinstance(exc, ProviderTimeoutError):
            message = "the model provider timed out"
            return ApiError(504, message, "server_error", None, "upstream_timeout")
        if isinstance(exc, ProviderConnectionError):
            message = "the model provider could not be reached"
            return ApiError(502, message, "server_error", None, "upstream_unavailable")
        if exc.status == 429:
            message = "the model provider is rate limiting this server; try again later"
            return ApiError(429, message, "rate_limit_error", None, "upstream_rate_limited")
        upstream = f" (HTTP {exc.status})" if exc.status is not None else ""
        return ApiError(
            502, f"the model provider failed{upstream}", "server_error", None, "upstream_error"
        )
    logger.warning("a turn failed: %s: %s", type(exc).__name__, exc)
    if isinstance(exc, UserError):
        return ApiError(400, str(exc), "invalid_request_error", None, "invalid_request")
    return ApiError(500, f"the turn failed ({type(exc).__name__})", "server_error", None, None)
