"""SimpleLLMFunc's ``utils`` package; only ``utils.tui`` has a (placeholder) counterpart."""

__all__: list[str] = []
