"""Where durable runs are recorded, and the queues that distribute them (frozen values)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...exceptions import ConfigError

__all__ = ["DEFAULT_DATABASE_PATH", "DurableConfig", "QueueConfig", "sqlalchemy_url"]

DEFAULT_DATABASE_PATH = ".simplellmfunc/durable.sqlite"


def sqlalchemy_url(url: str) -> str:
    """``url`` with the driver SQLAlchemy should use (psycopg 3 for Postgres, as DBOS does)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _sqlite_connector(path: str) -> Callable[[], sqlite3.Connection]:
    """Connections to the SQLite system database in WAL mode with ``synchronous=NORMAL``: a
    commit is one append to the log, durable when the process dies (not on power loss, where the
    last commits may be lost), instead of a journal file written, synced and deleted."""

    def connect() -> sqlite3.Connection:
        connection = sqlite3.connect(path, check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        return connection

    return connect


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """A queue of agent sessions consumed by worker processes.

    Attributes:
        name: The queue's name (``simplellmfunc worker CONFIG --queue NAME``).
        concurrency: Sessions running at once across all workers (``None``: no cap).
        worker_concurrency: Sessions running at once in one worker process (``None``: no cap).
        rate_limit: At most this many sessions start per ``rate_period`` seconds, across all
            workers (``None``: no limit).
        rate_period: The period of ``rate_limit``, in seconds.
        polling_interval: How often a worker looks for new sessions, in seconds.
    """

    name: str
    concurrency: int | None = None
    worker_concurrency: int | None = None
    rate_limit: int | None = None
    rate_period: float = 1.0
    polling_interval: float = 1.0

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError("a queue needs a name")
        for field in ("concurrency", "worker_concurrency", "rate_limit"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"queue {self.name!r}: {field} must be a positive int")
        if self.rate_period <= 0 or self.polling_interval <= 0:
            raise ConfigError(f"queue {self.name!r}: periods must be positive")


@dataclass(frozen=True, slots=True)
class DurableConfig:
    """How durable runs are recorded.

    Attributes:
        database_url: The DBOS system database: ``postgresql://...`` for several processes
            or machines, ``sqlite:///file`` for one; ``None``: a SQLite file at ``path``.
        path: The SQLite file used when ``database_url`` is ``None``.
        app_name: The DBOS application name.
        executor_id: This process's identity for recovery: on launch it resumes the unfinished
            runs recorded under the same id (``None``: DBOS's default, ``"local"``). Give
            each worker of a deployment its own.
        app_version: Workers only run sessions recorded under their version (``None``: DBOS
            derives it from the workflow code, the same for every simplellmfunc process that
            registers no DBOS workflows of its own; one that does gets another version, which
            becomes the latest: set the same value everywhere then).
        resume_note: Tell the model, in a user message, that a resumed run lost in-memory
            tool state (a PyRepl kernel is new).
        queues: The queues this process declares.
        heartbeat: Seconds between a worker's liveness beats.
        dead_after: A worker silent this long is dead: its unfinished sessions go back on
            their queue for the others.
    """

    database_url: str | None = None
    path: str = DEFAULT_DATABASE_PATH
    app_name: str = "simplellmfunc"
    executor_id: str | None = None
    app_version: str | None = None
    resume_note: bool = True
    queues: tuple[QueueConfig, ...] = ()
    heartbeat: float = 5.0
    dead_after: float = 30.0

    def url(self) -> str:
        """The system database URL (a SQLite file's folder is made on first use)."""
        if self.database_url:
            return self.database_url
        path = Path(self.path).expanduser().resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path}"

    def queue(self, name: str) -> QueueConfig:
        """The queue called ``name``.

        Raises:
            ConfigError: If no queue has that name.
        """
        for queue in self.queues:
            if queue.name == name:
                return queue
        known = ", ".join(q.name for q in self.queues) or "none"
        raise ConfigError(f"no durable queue named {name!r} (declared: {known})")

    def dbos_config(self) -> dict[str, Any]:
        """The DBOS configuration (no telemetry export: DBOS's own OTLP stays off)."""
        config: dict[str, Any] = {
            "name": self.app_name,
            "system_database_url": self.url(),
            "log_level": "WARNING",
            "enable_otlp": False,
        }
        url = config["system_database_url"]
        if url.startswith("sqlite:///"):
            # No ping before each use of a pooled connection (DBOS's default, for a database
            # server that can drop connections): a SQLite file has no server to lose.
            config["db_engine_kwargs"] = {
                "creator": _sqlite_connector(url[len("sqlite:///") :]),
                "pool_pre_ping": False,
            }
        if self.executor_id:
            config["executor_id"] = self.executor_id
        if self.app_version:
            config["application_version"] = self.app_version
        return config

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> DurableConfig:
        """Build the config from a ``durable:`` section of a config file.

        Raises:
            ConfigError: For an unknown key or a bad value.
        """
        known = {
            "database_url",
            "path",
            "app_name",
            "executor_id",
            "app_version",
            "resume_note",
            "heartbeat",
            "dead_after",
        }
        unknown = sorted(set(values) - known - {"queues"})
        if unknown:
            raise ConfigError(f"durable: unknown key(s) {', '.join(unknown)}")
        queues = values.get("queues") or {}
        if not isinstance(queues, dict):
            raise ConfigError("durable.queues must map queue names to their settings")
        try:
            built = tuple(
                QueueConfig(name=name, **(settings or {})) for name, settings in queues.items()
            )
        except TypeError as exc:
            raise ConfigError(f"durable.queues: {exc}") from None
        return cls(**{k: v for k, v in values.items() if k in known}, queues=built)
