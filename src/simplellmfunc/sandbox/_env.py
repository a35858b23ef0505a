"""The environment sandboxed code starts with: an allowlist of the host's variables, no secrets."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

__all__ = ["ALLOWED_ENV", "absolute_path_list", "clean_environment"]

#: Host variables sandboxed code (and PyRepl kernels) inherit, plus every ``LC_*``.
ALLOWED_ENV = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CONDA_DEFAULT_ENV",
        "LD_LIBRARY_PATH",
        "DYLD_LIBRARY_PATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "MPLCONFIGDIR",
        # Windows needs these to start processes at all.
        "SYSTEMROOT",
        "SYSTEMDRIVE",
        "WINDIR",
        "COMSPEC",
        "PATHEXT",
        "APPDATA",
        "LOCALAPPDATA",
        "USERPROFILE",
    }
)


def clean_environment(
    also: Iterable[str] = (), host_env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The host variables in :data:`ALLOWED_ENV` (and ``LC_*``, and the names in ``also``).

    ``PYTHONPATH`` entries are made absolute: sandboxed code starts in another directory.
    """
    source = os.environ if host_env is None else host_env
    extra = set(also)
    env = {k: v for k, v in source.items() if k in ALLOWED_ENV or k in extra or k.startswith("LC_")}
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = absolute_path_list(env["PYTHONPATH"])
    return env


def absolute_path_list(value: str) -> str:
    """An ``os.pathsep``-separated path list with each entry made absolute (empty ones dropped)."""
    return os.pathsep.join(os.path.abspath(p) for p in value.split(os.pathsep) if p)
