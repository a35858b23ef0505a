"""SimpleLLMFunc's ``base`` package; only ``base.post_process`` has a counterpart here (the
ReAct loop is :mod:`simplellmfunc.engine`)."""

__all__: list[str] = []
