"""``PyRepl``: a persistent Jupyter kernel per instance, exposed to agents as a toolset.

How the pieces fit (each module's docstring says more)::

    PyRepl (_repl)   tools (_tools: execute_code, reset_repl, list_variables);
      │              audit log and output files (_audit); result dict (_result, _output, _capture)
      └─ ManagedKernel (_managed): start, configure, replace a lost kernel, circuit breaker
           ├─ KernelSession (_session): one kernel process (_env, _reaper);
           │    KernelPool (_pool) keeps some started
           ├─ CellRun (_exec): one execution — IOPub, input() (_input), timeouts, abort
           └─ BridgeServer (_bridge): host side of ``runtime`` calls into PrimitivePacks (_pack)

    _in_kernel/: what runs inside the kernel process (bootstrap, error details, fd capture,
    background-thread output, the ``runtime`` bridge client), standard library only.

Names are imported on first access: ``PyRepl`` and ``KernelPool`` pull in jupyter_client, which
users of ``PrimitivePack`` or of the tools alone (SelfReference) should not pay for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports, publish

if TYPE_CHECKING:
    from ._approval import code_touches_system
    from ._bridge import CellScope, current_cell
    from ._exec import CellLimits
    from ._input import submit_kernel_input
    from ._managed import KernelSettings
    from ._pack import (
        Primitive,
        PrimitiveCallContext,
        PrimitivePack,
        default_backend,
        register_default_backend,
    )
    from ._pool import KernelPool
    from ._repl import PyRepl
    from ._tools import (
        ExecuteCodeTool,
        ExecutionSummary,
        ListVariablesTool,
        ReplBackend,
        ReplTool,
        ResetReplTool,
        fork_repl_tools,
        render_execution,
    )

__all__ = [
    "CellLimits",
    "CellScope",
    "ExecuteCodeTool",
    "ExecutionSummary",
    "KernelPool",
    "KernelSettings",
    "ListVariablesTool",
    "Primitive",
    "PrimitiveCallContext",
    "PrimitivePack",
    "PyRepl",
    "ReplBackend",
    "ReplTool",
    "ResetReplTool",
    "code_touches_system",
    "current_cell",
    "default_backend",
    "fork_repl_tools",
    "register_default_backend",
    "render_execution",
    "submit_kernel_input",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CellLimits": "._exec",
        "CellScope": "._bridge",
        "ExecuteCodeTool": "._tools",
        "ExecutionSummary": "._tools",
        "KernelPool": "._pool",
        "KernelSettings": "._managed",
        "ListVariablesTool": "._tools",
        "Primitive": "._pack",
        "PrimitiveCallContext": "._pack",
        "PrimitivePack": "._pack",
        "PyRepl": "._repl",
        "ReplBackend": "._tools",
        "ReplTool": "._tools",
        "ResetReplTool": "._tools",
        "code_touches_system": "._approval",
        "current_cell": "._bridge",
        "fork_repl_tools": "._tools",
        "default_backend": "._pack",
        "register_default_backend": "._pack",
        "render_execution": "._tools",
        "submit_kernel_input": "._input",
    },
)

publish(__name__, __all__)
