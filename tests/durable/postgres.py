"""A private Postgres cluster for the distributed durable tests: initdb in a temporary folder,
started on a free port with pg_ctl, stopped and removed after (or a skip with the reason)."""

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

import pytest


def _binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for candidate in sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"), reverse=True):
        return str(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def postgres_cluster() -> Iterator[str]:
    """A running cluster's URL (``postgresql://postgres@127.0.0.1:PORT/simplellmfunc``)."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("Postgres is not installed (initdb / pg_ctl); .ci/run installs postgresql")
    # Directly under /tmp: the cluster's user must be able to reach its folder.
    folder = Path(tempfile.mkdtemp(prefix="simplellmfunc-pg-"))
    try:
        with _cluster(folder, initdb, pg_ctl) as url:
            yield url
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def _cluster(folder: Path, initdb: str, pg_ctl: str) -> Iterator[str]:
    prefix: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root: run the cluster as 'postgres'
        try:
            account = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root without a 'postgres' user to own the cluster")
        runuser = shutil.which("runuser")
        if runuser is None:
            pytest.skip("running as root without runuser to start the cluster as 'postgres'")
        os.chown(folder, account.pw_uid, account.pw_gid)
        prefix = [runuser, "-u", "postgres", "--"]
    data = folder / "data"
    subprocess.run(
        [*prefix, initdb, "-D", str(data), "-U", "postgres", "--auth=trust", "--no-sync"],
        check=True,
        capture_output=True,
    )
    port = _free_port()
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    start = [*prefix, pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w"]
    subprocess.run([*start, "start"], check=True, capture_output=True)
    try:
        import psycopg  # a dependency of dbos

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres") as admin:
            admin.autocommit = True
            admin.execute("CREATE DATABASE simplellmfunc")
        yield f"postgresql://postgres@127.0.0.1:{port}/simplellmfunc"
    finally:
        subprocess.run(
            [*prefix, pg_ctl, "-D", str(data), "-m", "immediate", "stop"], capture_output=True
        )
