"""``llama-server`` with a small local model: for a block of code, or in the background.

It serves OpenAI's chat completions (and embeddings) under ``/v1``, and also the Anthropic
Messages API there. :func:`llama_server` runs it for the length of a block; :func:`start`,
:func:`stop` and :func:`status` (``simplellmfunc local start|stop|status``) keep one running in
the background for the user's own code and print the ``.env`` lines that point at it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import LocalModelError
from ._build import AMX, binary, build, cpu_flags, launch_args, server_dir
from ._models import MODELS, default_model, install_model, model_path
from ._process import exit_message, free_port, serve

if TYPE_CHECKING:
    from ..providers import OpenAICompatible

__all__ = [
    "CAPABILITIES",
    "MAX_TOKENS",
    "env_lines",
    "llama_server",
    "running",
    "server_command",
    "server_env",
    "server_llm",
    "start",
    "status",
    "stop",
]

# What the engine needs to know about llama-server with these models: their chat templates have
# no tool section (no native tool calls), the server honours JSON schemas by grammar (``oneOf``
# included), which the JSON tool protocol uses, and it sends no tool-call deltas while streaming.
CAPABILITIES: Mapping[str, bool] = {
    "native_tools": False,
    "parallel_tool_calls": False,
    "json_schema": True,
    "streaming_with_tools": False,
    "null_assistant_content": False,
}
MAX_TOKENS = 512  # a bound on every reply: a small model may ramble until the context is full


def server_command(
    port: int,
    *,
    model: str | None = None,
    threads: int = 2,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """The ``llama-server`` command line for ``model`` on ``port`` (loopback only: it has no
    authentication)."""
    key = model or default_model()
    return [
        str(binary()),
        *("--model", str(model_path(key)), "--alias", MODELS[key].name),
        *("--host", "127.0.0.1", "--port", str(port), "--ctx-size", "4096"),
        "--jinja",  # the model's own chat template (or ours, where its file has none)
        *_template_args(key),
        *("--threads", str(threads)),
        *launch_args(cpu_flags()),
        *extra_args,
    ]


def _template_args(key: str) -> list[str]:
    template = MODELS[key].chat_template
    if not template:
        return []
    path = server_dir() / f"{key}.jinja"
    if not path.exists() or path.read_text() != template:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(template)
    return ["--chat-template-file", str(path)]


def server_env() -> dict[str, str]:
    """The server's extra environment: no repacked buffers where the CPU advertises AMX."""
    # An older build linked libllama/libggml dynamically next to the binary.
    here = str(server_dir())
    library_path = os.pathsep.join(filter(None, [here, os.environ.get("LD_LIBRARY_PATH")]))
    repack = "false" if cpu_flags() & AMX else "true"
    return {"LD_LIBRARY_PATH": library_path, "LLAMA_ARG_REPACK": repack}


def _missing() -> LocalModelError:
    return LocalModelError(
        f"llama-server is missing ({binary()}): run `simplellmfunc local build` (about 6 "
        "minutes on 2 cores) or `simplellmfunc local start`"
    )


@asynccontextmanager
async def llama_server(
    startup_timeout: float = 120.0,
    extra_args: Sequence[str] = (),
    threads: int = 2,
    model: str | None = None,
) -> AsyncIterator[str]:
    """Start ``llama-server`` with ``model`` (``smollm2`` or ``gemma3``), yield its base URL
    (``http://127.0.0.1:PORT``; the API lives under ``/v1``), stop it.

    ``extra_args`` go on its command line, e.g. ``("--embedding", "--pooling", "mean")`` to
    serve ``/v1/embeddings`` instead of chat; ``threads`` is its ``--threads``. The server
    inherits this process's CPU affinity. Its output goes to
    ``<cache>/llama-server/server-<pid>.log``.

    Raises:
        LocalModelError: If the binary or the model is missing.
        LocalServerExitedError: If it exits during start-up (the message quotes its log).
    """
    if not binary().exists():
        raise _missing()
    port = free_port()
    command = server_command(port, model=model, threads=threads, extra_args=extra_args)
    base_url = f"http://127.0.0.1:{port}"
    log = server_dir() / f"server-{os.getpid()}.log"
    async with serve(command, f"{base_url}/health", startup_timeout, server_env(), log):
        yield base_url


def server_llm(base_url: str, model: str | None = None) -> OpenAICompatible:
    """An ``OpenAICompatible`` for ``llama-server`` at ``base_url`` (without ``/v1``)."""
    from ..providers import Capabilities, OpenAICompatible

    return OpenAICompatible(
        None,
        MODELS[model or default_model()].name,
        f"{base_url}/v1",
        capabilities=Capabilities(**CAPABILITIES),
        provider_name="llama-server",
        timeout=180.0,
        max_tokens=MAX_TOKENS,
    )


def env_lines(base_url: str, model: str | None = None) -> list[str]:
    """The ``.env`` lines that point ``from_env``, ``make_llm("llamacpp:...")``, the examples and
    the agent configs at the server at ``base_url`` (without ``/v1``)."""
    name = MODELS[model or default_model()].name
    caps = ",".join(f"{k}={str(v).lower()}" for k, v in CAPABILITIES.items())
    return [
        f"OPENAI_BASE_URL={base_url}/v1",
        f"OPENAI_MODEL={name}",
        f"OPENAI_CAPABILITIES={caps}",
        f"OPENAI_MAX_TOKENS={MAX_TOKENS}",
        f"EXAMPLE_MODEL=llamacpp:{name}",
        f"LLAMACPP_BASE_URL={base_url}/v1",
        f"SIMPLELLMFUNC_MODEL=llamacpp:{name}",
    ]


# -- start / stop / status: a server that outlives the command, for the user's own code --------


def _state_file() -> Path:
    return server_dir() / "server.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running() -> dict[str, Any] | None:
    """The background server's state (``pid``, ``port``, ``model``) if it runs, else ``None``."""
    try:
        state: dict[str, Any] = json.loads(_state_file().read_text())
        pid = int(state["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return state if _alive(pid) else None


def _wait_healthy(process: subprocess.Popen[bytes], url: str, timeout: float) -> bool | None:
    """``True`` once ``url`` answers 2xx, ``None`` if the process exited, ``False`` on timeout."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return None
        try:
            if httpx.get(url, timeout=2).is_success:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    return False


def start(
    model: str | None = None,
    port: int = 8080,
    timeout: float = 120.0,
    *,
    out: Any = None,
) -> int:
    """Start a background server (installing the model and building the server first if
    needed) and print the ``.env`` lines; return the exit status.

    Raises:
        LocalModelError: If the model cannot be installed or the build fails.
    """
    out = out or sys.stdout
    key = model or default_model()
    state = running()
    if state is not None:
        print(f"llama-server is already running (pid {state['pid']}): stop it first", file=out)
        return 1
    install_model(key)
    build()
    command = server_command(port, model=key)
    log = server_dir() / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, **server_env()},
            start_new_session=True,
        )
    base_url = f"http://127.0.0.1:{port}"
    healthy = _wait_healthy(process, f"{base_url}/health", timeout)
    if healthy is None:
        print(exit_message(command, process.returncode, log), file=sys.stderr)
        return 1
    if not healthy:
        process.terminate()
        process.wait()
        print(f"llama-server did not answer within {timeout:.0f} s; log: {log}", file=sys.stderr)
        return 1
    _state_file().write_text(json.dumps({"pid": process.pid, "port": port, "model": key}))
    print(f"llama-server is running (pid {process.pid}, log {log}) on {base_url}/v1", file=out)
    print(
        "Put these lines in .env (or export them) for your code, the examples and configs:\n",
        file=out,
    )
    print("\n".join(env_lines(base_url, key)), file=out)
    print("\nStop it with: simplellmfunc local stop", file=out)
    return 0


def stop(*, out: Any = None) -> int:
    """Stop the background server started by :func:`start`; return the exit status."""
    out = out or sys.stdout
    state = running()
    if state is None:
        print("llama-server is not running", file=out)
        _state_file().unlink(missing_ok=True)
        return 0
    pid = int(state["pid"])
    os.kill(pid, signal.SIGTERM)
    for _ in range(40):
        if not _alive(pid):
            break
        time.sleep(0.25)
    else:
        os.kill(pid, signal.SIGKILL)
    _state_file().unlink(missing_ok=True)
    print(f"stopped llama-server (pid {pid})", file=out)
    return 0


def status(*, out: Any = None) -> int:
    """Print whether the background server runs (and its ``.env`` lines); 0 if it does, else 1."""
    out = out or sys.stdout
    state = running()
    built = f"built: {binary()}" if binary().exists() else f"not built yet ({binary()})"
    if state is None:
        print(
            f"llama-server is not running ({built}); start it: simplellmfunc local start",
            file=out,
        )
        return 1
    url = f"http://127.0.0.1:{state['port']}"
    print(f"llama-server is running (pid {state['pid']}) with {state['model']}:\n", file=out)
    print("\n".join(env_lines(url, state["model"])), file=out)
    return 0
