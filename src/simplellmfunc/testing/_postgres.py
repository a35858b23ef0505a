"""``postgres_cluster``: a private, throwaway Postgres for tests and benchmarks of durable runs.

``initdb`` in a temporary folder, ``pg_ctl start`` on a free port of 127.0.0.1 (trust auth, no
fsync), a database created, the URL yielded; the cluster is stopped and its folder removed on
the way out. As root (where ``initdb`` refuses to run) the cluster runs as the ``postgres`` user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..exceptions import ConfigError

__all__ = ["postgres_cluster", "postgres_missing"]


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True)
    return str(candidates[0]) if candidates else None


def _as_cluster_user() -> list[str]:
    """The command prefix that runs the cluster's programs as a non-root user.

    Raises:
        ConfigError: As root without a ``postgres`` user or ``runuser``.
    """
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        runuser = None
    if runuser is None:
        raise ConfigError("running as root without a 'postgres' user and runuser for initdb")
    return [runuser, "-u", "postgres", "--"]


def postgres_missing() -> str | None:
    """Why :func:`postgres_cluster` cannot run here (``None``: it can)."""
    if _binary("initdb") is None or _binary("pg_ctl") is None:
        return "Postgres is not installed (initdb / pg_ctl; apt install postgresql)"
    try:
        _as_cluster_user()
    except ConfigError as exc:
        return str(exc)
    return None


@contextmanager
def postgres_cluster(database: str = "simplellmfunc") -> Iterator[str]:
    """A running private cluster: yields ``postgresql://postgres@127.0.0.1:PORT/<database>``.

    Raises:
        ConfigError: If Postgres is not installed or cannot be run here
            (:func:`postgres_missing` says why beforehand).
    """
    missing = postgres_missing()
    if missing is not None:
        raise ConfigError(missing)
    initdb, pg_ctl = _binary("initdb") or "initdb", _binary("pg_ctl") or "pg_ctl"
    prefix = _as_cluster_user()
    folder = Path(tempfile.mkdtemp(prefix="simplellmfunc-pg-"))  # reachable by the cluster user
    try:
        if prefix:
            account = pwd.getpwnam("postgres")
            os.chown(folder, account.pw_uid, account.pw_gid)
        data = str(folder / "data")
        init = [initdb, "-D", data, "-U", "postgres", "--auth=trust", "--no-sync"]
        subprocess.run([*prefix, *init], check=True, capture_output=True)
        port = _free_port()
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        control = [*prefix, pg_ctl, "-D", data]
        start = [*control, "-o", options, "-l", str(folder / "log"), "-w", "start"]
        subprocess.run(start, check=True, capture_output=True)
        try:
            _create_database(port, database)
            yield f"postgresql://postgres@127.0.0.1:{port}/{database}"
        finally:
            subprocess.run([*control, "-m", "immediate", "stop"], capture_output=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _create_database(port: int, name: str) -> None:
    import psycopg  # a dependency of the [durable] extra (dbos)

    with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres") as admin:
        admin.autocommit = True
        admin.execute(f'CREATE DATABASE "{name}"')


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
