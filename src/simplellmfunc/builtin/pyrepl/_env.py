"""The environment a kernel starts with: an allowlist of the host's variables plus the user's.

Kernels run code a model wrote, so they must not inherit the host's secrets (API keys, tokens,
cloud credentials). Only variables needed to find programs, libraries and the locale pass through;
anything else must be handed over explicitly with ``PyRepl(env=...)``. One variable is added: the
marker that ties the kernel and whatever it spawns to it (see ``_procs``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ...sandbox import ALLOWED_ENV, clean_environment, marker_entry

__all__ = ["ALLOWED_ENV", "kernel_environment"]


def kernel_environment(
    private_dir: str,
    user_env: Mapping[str, str] | None = None,
    host_env: Mapping[str, str] | None = None,
    *,
    home: bool = False,
) -> dict[str, str]:
    """Return the environment for a kernel process.

    Args:
        private_dir: The kernel's private directory; temp files and IPython's profile go there.
            Its name is the kernel's marker token.
        user_env: Variables the user passes on purpose (they win over everything).
        host_env: The host environment (default: ``os.environ``).
        home: Point ``HOME`` at the private temp dir (in a sandbox, the host's home is absent).
    """
    env = clean_environment((), host_env)
    tmp = os.path.join(private_dir, "tmp")
    env.update(
        {
            "TMPDIR": tmp,
            "TEMP": tmp,
            "TMP": tmp,
            # A private IPython directory: no user profile surprises, no shared history database.
            "IPYTHONDIR": os.path.join(private_dir, "ipython"),
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        }
    )
    if home:
        env["HOME"] = tmp
    env.update({str(k): str(v) for k, v in (user_env or {}).items()})
    env.update(marker_entry(os.path.basename(private_dir)))
    return env
