"""llama.cpp's own ``llama-server`` with a small local model (SmolLM2-135M or Gemma 3 270M).

A thin wrapper over ``simplellmfunc local`` (the code lives in ``simplellmfunc.local``)::

    python scripts/llama_server.py start [--model smollm2|gemma3] [--port 8080]
    python scripts/llama_server.py status | stop | build

is ``simplellmfunc local start ...``. ``start`` builds the server once (4 to 11 minutes on 2
cores, from the llama.cpp sources vendored in the ``llama-cpp-python`` sdist, into
``.cache/llama-server/``; its output goes to ``build.log`` there), starts it in the background and
prints the ``.env`` lines; ``stop`` stops it. In code and tests, ``llama_server()`` runs it for
the length of a block::

    async with llama_server() as base_url:  # http://127.0.0.1:PORT (the API lives under /v1)
        llm = server_llm(base_url)
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from simplellmfunc.exceptions import LocalBuildError as BuildError
from simplellmfunc.local import (
    CAPABILITIES,
    MAX_TOKENS,
    binary,
    build,
    cmake_flags,
    cpu_flags,
    cpu_options,
    env_lines,
    launch_args,
    llama_server,
    server_command,
    server_llm,
)

__all__ = [
    "CAPABILITIES",
    "MAX_TOKENS",
    "BuildError",
    "binary",
    "build",
    "cmake_flags",
    "cpu_flags",
    "cpu_options",
    "env_lines",
    "launch_args",
    "llama_server",
    "server_command",
    "server_llm",
]


def main(argv: Sequence[str] | None = None) -> int:
    """``simplellmfunc local ARGV``."""
    from simplellmfunc._cli import main as cli

    return cli(["local", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
