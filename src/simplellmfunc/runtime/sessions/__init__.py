"""Sessions: one agent serving many users, each with a history, a kernel and a turn.

:class:`SessionStore` keeps a :class:`Session` per id: its history (persisted through a
:mod:`~simplellmfunc.runtime.stores` store), a PyRepl kernel from a warm pool, its SelfReference
key, the abort signal of the running turn and its last use; it reclaims idle sessions, caps their
number and closes everything with :meth:`SessionStore.close_all`. Its front door answers
``input()`` (:meth:`SessionStore.submit_input`) and aborts (:meth:`SessionStore.abort`) by
session id. A turn that waits for a person (an approval, an ``input()``) outlives a consumer that
leaves: :meth:`SessionStore.pending` says what waits, :meth:`SessionStore.follow` takes the rest
of the turn.
"""

from ..._lazy import publish
from ._session import Session, check_session_id
from ._store import OnDisconnect, SessionStore
from ._waits import asked_request_id, pending_request_id, wait_kind

__all__ = [
    "OnDisconnect",
    "Session",
    "SessionStore",
    "asked_request_id",
    "check_session_id",
    "pending_request_id",
    "wait_kind",
]

publish(__name__, __all__)
