"""Durable and distributed runs on DBOS Transact (the ``simplellmfunc[durable]`` extra).

A :class:`DurableAgent` makes each call of a decorated function a DBOS workflow whose LLM calls
and tool calls are recorded steps; a :class:`DurableRuntime` launches DBOS in the process
(resuming unfinished runs) and, in worker processes, consumes queues of agent sessions.
"""

from ..._lazy import publish
from ._agent import DurableAgent
from ._client import DurableClient
from ._config import DEFAULT_DATABASE_PATH, DurableConfig, QueueConfig
from ._result import DurableHandle, DurableResult
from ._runner import RESUME_NOTE, DBOSStepRunner
from ._runtime import DurableRuntime
from ._worker import serve_queue, worker_id
from ._workflow import WORKFLOW_NAME

__all__ = [
    "DEFAULT_DATABASE_PATH",
    "RESUME_NOTE",
    "WORKFLOW_NAME",
    "DBOSStepRunner",
    "DurableAgent",
    "DurableClient",
    "DurableConfig",
    "DurableHandle",
    "DurableResult",
    "DurableRuntime",
    "QueueConfig",
    "serve_queue",
    "worker_id",
]

publish(__name__, __all__)
