"""Who may call a served agent: bearer tokens, each naming a principal, and the hosts it answers.

Tokens come from the environment (one token, one principal) or from a token file (several
principals), never from the command line, where the process list would show them. A token
file has one ``PRINCIPAL TOKEN`` pair a line (``#`` starts a comment)::

    # principal   token (16 characters at least)
    alice         3f9c1e0b8a7d6c5b4a39
    bob           0d1e2f3a4b5c6d7e8f90

With a token file every principal's sessions and A2A tasks are its own: a session id ``s1``
of ``alice`` is stored as ``alice.s1``, and nobody else can name it (``bob``'s ``s1`` is
``bob.s1``). With one token or none, ids are used as they are.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import ConfigError, SessionError, UserError
from ._session import check_session_id

__all__ = [
    "ANONYMOUS",
    "LOOPBACK_NAMES",
    "Principal",
    "Principals",
    "allowed_hosts_for",
    "is_loopback",
]

logger = logging.getLogger("simplellmfunc.serve")

#: The names a loopback server answers to (any port).
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
_NAME = re.compile(r"[A-Za-z0-9_-]{1,32}")
_MIN_FILE_TOKEN = 16


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address or name) reaches this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return host in ("", "*")


def allowed_hosts_for(bind: str, names: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` names a server bound to ``bind`` answers to: the loopback names when it is
    bound to loopback, ``names`` (the names clients use) otherwise, or ``{"*"}`` (any) when
    ``names`` says so. A specific address answers to itself too.

    Raises:
        UserError: For a wildcard bind address (``0.0.0.0``, ``::``) without ``names``.
    """
    given = frozenset(n.strip().strip("[]").lower() for n in names if n.strip())
    if "*" in given:
        return frozenset({"*"})
    if is_loopback(bind):
        return LOOPBACK_NAMES | given
    if not given and _wildcard(bind):
        raise UserError(
            f"bound to every interface ({bind!r}): name the hosts clients reach this server "
            "by with --allowed-host (or serve.allowed_hosts; '*' accepts any Host header)"
        )
    return given | ({bind.strip("[]").lower()} if not _wildcard(bind) else set())


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request speaks for (Starlette's ``request.user`` and the A2A SDK's user).

    Attributes:
        name: The principal's name (``""``: the only caller of a server with one token or
            none).
        scoped: Whether its session ids are kept apart from other principals' (a token file).
    """

    name: str
    scoped: bool = False

    @property
    def is_authenticated(self) -> bool:
        """Always true: a request without a valid token never gets a principal."""
        return True

    @property
    def display_name(self) -> str:
        """The name (the A2A SDK's task owner)."""
        return self.name

    def session_id(self, local: str) -> str:
        """The store's id of this principal's session ``local``.

        Raises:
            SessionError: For an invalid id (too long once scoped, too).
        """
        check_session_id(local)
        if not self.scoped:
            return local
        try:
            return check_session_id(f"{self.name}.{local}")
        except SessionError:
            raise SessionError(
                f"invalid session id {local!r}: too long", reason="invalid_id"
            ) from None

    def local_id(self, session_id: str) -> str | None:
        """The principal's own name of the store's session ``session_id``; ``None`` when the
        session is not this principal's."""
        if not self.scoped:
            return session_id
        prefix = f"{self.name}."
        return session_id[len(prefix) :] if session_id.startswith(prefix) else None


#: The principal of a server with one token, or none.
ANONYMOUS = Principal("")


class Principals:
    """The tokens a server accepts, each with its principal (``None``: no auth at all).

    Args:
        tokens: Token -> principal; ``None``: every request is :data:`ANONYMOUS`.

    Raises:
        ConfigError: For an empty mapping or an empty token.
    """

    def __init__(self, tokens: Mapping[str, Principal] | None) -> None:
        if tokens is not None and (not tokens or any(not t for t in tokens)):
            raise ConfigError("a token list needs at least one non-empty token")
        self._tokens = None if tokens is None else [(t.encode(), p) for t, p in tokens.items()]

    @classmethod
    def open(cls) -> Principals:
        """No auth (loopback only)."""
        return cls(None)

    @classmethod
    def single(cls, token: str) -> Principals:
        """One token, one (unscoped) principal."""
        return cls({token: ANONYMOUS})

    @classmethod
    def from_file(cls, path: str | Path) -> Principals:
        """The principals of a token file (see the module docstring).

        Raises:
            ConfigError: For an unreadable file, a bad line, a short token, or a principal or
                token given twice.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
            mode = Path(path).stat().st_mode
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the token file {str(path)!r}: {exc}") from None
        if mode & 0o077:
            logger.warning("the token file %s is readable by other users: chmod 600 it", path)
        tokens: dict[str, Principal] = {}
        names: set[str] = set()
        for number, line in enumerate(text.splitlines(), 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            where = f"{path}:{number}"
            if len(fields) != 2 or _NAME.fullmatch(fields[0]) is None:
                raise ConfigError(
                    f"{where}: expected 'PRINCIPAL TOKEN' (a name of 1-32 letters, digits, _ or -)"
                )
            name, token = fields
            if len(token) < _MIN_FILE_TOKEN:
                raise ConfigError(f"{where}: tokens need {_MIN_FILE_TOKEN} characters at least")
            if name in names or token in tokens:
                raise ConfigError(f"{where}: principal {name!r} or its token is given twice")
            names.add(name)
            tokens[token] = Principal(name, scoped=True)
        if not tokens:
            raise ConfigError(f"the token file {str(path)!r} names no principal")
        return cls(tokens)

    @classmethod
    def resolve(
        cls,
        token_env: str,
        token_file: str | Path | None,
        *,
        no_auth: bool = False,
        host: str = "127.0.0.1",
        environ: Mapping[str, str] | None = None,
    ) -> Principals | None:
        """Who may call a server: a token file's principals, the token in the environment
        variable ``token_env``, or nobody needs a token (``no_auth``, loopback only); ``None``
        when neither a token nor ``no_auth`` is given.

        Raises:
            UserError: For ``no_auth`` off loopback, both a token file and a token (or
                ``no_auth``), or a bad token file.
        """
        token = (environ if environ is not None else os.environ).get(token_env)
        if token_file is not None:
            if no_auth or token:
                given = "--no-auth" if no_auth else token_env
                raise UserError(f"give a token file or {given}, not both")
            return cls.from_file(token_file)
        if no_auth:
            if not is_loopback(host):
                raise UserError(f"--no-auth is allowed on loopback only, not on {host!r}")
            return cls.open()
        return cls.single(token) if token else None

    @property
    def required(self) -> bool:
        """Whether requests need a token."""
        return self._tokens is not None

    @property
    def scoped(self) -> bool:
        """Whether the principals' sessions are kept apart (a token file's principals)."""
        return self._tokens is not None and any(p.scoped for _, p in self._tokens)

    def authenticate(self, token: str | None) -> Principal | None:
        """The principal of ``token`` (:data:`ANONYMOUS` without auth); ``None`` when it is
        missing or unknown. Every token is compared, in constant time."""
        if self._tokens is None:
            return ANONYMOUS
        if not token:
            return None
        given = token.encode()
        found: Principal | None = None
        for expected, principal in self._tokens:
            if secrets.compare_digest(given, expected):
                found = principal
        return found

    def __len__(self) -> int:
        return 0 if self._tokens is None else len(self._tokens)

    def __repr__(self) -> str:  # names only: never a token
        if self._tokens is None:
            return "Principals(open)"
        return f"Principals({sorted(p.name or '<default>' for _, p in self._tokens)})"
