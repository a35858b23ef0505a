"""Sessions: one agent serving many users, each with a history, a kernel and a turn.

:class:`SessionStore` keeps a :class:`Session` per id: its history (persisted through a
:mod:`~simplellmfunc.runtime.stores` store), a PyRepl kernel from a warm pool, its SelfReference
key, the abort signal of the running turn and its last use; it reclaims idle sessions, caps their
number and closes everything with :meth:`SessionStore.close_all`. Its front door answers
``input()`` (:meth:`SessionStore.submit_input`) and aborts (:meth:`SessionStore.abort`) by
session id.
"""

from ..._lazy import publish
from ._session import Session, check_session_id
from ._store import OnDisconnect, SessionStore

__all__ = ["OnDisconnect", "Session", "SessionStore", "check_session_id"]

publish(__name__, __all__)
