"""SimpleLLMFunc's ``base.tool_call`` package (its ReAct loop's tool-call parsing); see
:mod:`.extraction`."""

__all__: list[str] = []
