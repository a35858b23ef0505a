"""``SelfReference``: durable, agent-editable memory per key — history, experiences, compaction
summaries and forks (child agents) — bound to ``@llm_chat`` turns and reachable from PyRepl
kernels.

How the pieces fit (imports point down; each module's docstring says more)::

    SelfReference (_reference)  = MemoryBank + memory[...] + run_hook() + as_primitive_pack()
      ├─ _primitives   the ``selfref`` PrimitivePack: kernel code → memory, context, forks
      ├─ _hook         SelfReferenceHook: a turn's start, merges of pending edits, end
      ├─ _turn         the running turn (a context variable) and the key primitives act on
      ├─ _forks        ForkManager: spawn, limits, gather, cancel; _child: a child agent on
      │                the engine (the one module that drives it)
      ├─ _instance     the bound agent (bind_agent_instance) and ``instance.fork`` / spawn /
      │                gather: forks made from Python or a kernel cell outside a turn
      ├─ _handle       MemoryHandle / MemoryMap: ``memory["key"]``
      └─ _bank         MemoryBank: cached per-key state, pending edits, experiences, compaction
           ├─ _store   KeyState and the state stores (memory, SQLite)
           ├─ _history validating histories;  _summary  the compaction summary text
"""

from ..._lazy import publish
from ..pyrepl import register_default_backend
from ._bank import MemoryBank
from ._handle import MemoryHandle, MemoryMap
from ._instance import InstanceHandle
from ._reference import SelfReference
from ._store import KeyState, MemoryStateStore, SQLiteStateStore, StateStore
from ._summary import compaction_summary_text

__all__ = [
    "InstanceHandle",
    "KeyState",
    "MemoryBank",
    "MemoryHandle",
    "MemoryMap",
    "MemoryStateStore",
    "SQLiteStateStore",
    "SelfReference",
    "StateStore",
    "compaction_summary_text",
]

publish(__name__, __all__)
# A PyRepl asked for its ``selfref`` backend before one is attached gets a fresh SelfReference.
register_default_backend("selfref", SelfReference)
