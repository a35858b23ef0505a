"""Checkpoints: an agent's state (transcript, memory, SelfReference, trace) as versioned JSON.

:class:`Checkpoint` captures and restores the state; :class:`CheckpointManager` keeps numbered
files in a directory; :class:`CheckpointHook` saves one every few iterations of a run;
:func:`save_checkpoint` / :func:`load_checkpoint` write and read a single file. Files are
written through :mod:`simplellmfunc._persist`.
"""

from ..._lazy import publish
from ._checkpoint import Checkpoint, serialize_value
from ._hook import CheckpointHook
from ._manager import CheckpointInfo, CheckpointManager, load_checkpoint, save_checkpoint

__all__ = [
    "Checkpoint",
    "CheckpointHook",
    "CheckpointInfo",
    "CheckpointManager",
    "load_checkpoint",
    "save_checkpoint",
    "serialize_value",
]

publish(__name__, __all__)
