"""SimpleLLMFunc's ``builtin.file_tools`` module: :class:`~simplellmfunc.builtin.FileToolset`
and ``STALE_FILE_MESSAGE``, the sentence every stale-write refusal ends with (here a refused
write is a failed tool call whose message names the file and why, then that sentence)."""

from .files import STALE_FILE_MESSAGE, FileToolset

__all__ = ["STALE_FILE_MESSAGE", "FileToolset"]
