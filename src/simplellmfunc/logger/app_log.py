"""SimpleLLMFunc's ``logger.app_log`` path: :func:`simplellmfunc.logger.app_log`."""

from . import app_log

__all__ = ["app_log"]
