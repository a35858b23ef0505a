"""Sandboxes on bubblewrap: :class:`SandboxPolicy` and the command lines that enforce it.

PyRepl kernels run under a policy by default; ``@sandboxed`` / ``tool(..., sandbox=policy)``
(in :mod:`simplellmfunc.tools`) run a Python tool in a sandboxed worker; ``ShellTool`` and
``CLIAgentTool`` take ``sandbox=policy``. See ``docs/sandbox.md`` for the threat model.
"""

from __future__ import annotations

from .._lazy import publish
from ._bwrap import (
    Isolation,
    import_paths,
    isolation,
    known_isolation,
    sandbox_argv,
    usable,
    warning_event,
)
from ._env import ALLOWED_ENV, clean_environment
from ._policy import LIMIT_NAMES, SEED_NAMES, SandboxPolicy, as_policy
from ._procs import kill_spawned, marker_entry

__all__ = [
    "ALLOWED_ENV",
    "LIMIT_NAMES",
    "SEED_NAMES",
    "Isolation",
    "SandboxPolicy",
    "as_policy",
    "clean_environment",
    "import_paths",
    "isolation",
    "kill_spawned",
    "known_isolation",
    "marker_entry",
    "sandbox_argv",
    "usable",
    "warning_event",
]

publish(__name__, __all__)
