"""Checkpoints: an agent's state (transcript, memory, SelfReference, trace) as versioned JSON.

:class:`Checkpoint` captures and restores the state; :class:`CheckpointManager` keeps numbered
files in a directory; :class:`CheckpointHook` saves one every few iterations of a run;
:func:`save_checkpoint` / :func:`load_checkpoint` write and read a single file
(:func:`save_context` / :func:`load_context`: the seed's names, capturing and saving in one).
Files are written through :mod:`simplellmfunc._persist`.
"""

from ..._lazy import publish
from ._checkpoint import Checkpoint, SharedState, serialize_value
from ._hook import CheckpointHook
from ._manager import (
    CheckpointInfo,
    CheckpointManager,
    load_checkpoint,
    load_context,
    save_checkpoint,
    save_context,
)

__all__ = [
    "Checkpoint",
    "CheckpointHook",
    "CheckpointInfo",
    "CheckpointManager",
    "SharedState",
    "load_checkpoint",
    "load_context",
    "save_checkpoint",
    "save_context",
    "serialize_value",
]

publish(__name__, __all__)
