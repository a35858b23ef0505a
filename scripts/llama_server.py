"""llama.cpp's own ``llama-server`` with a small local model (SmolLM2-135M or Gemma 3 270M).

It serves OpenAI's chat completions (and embeddings) under ``/v1``, and also the Anthropic
Messages API there; the examples and the demo use the OpenAI one.

    python scripts/llama_server.py start [--model smollm2|gemma3] [--port 8080]
    python scripts/llama_server.py status | stop | build

``start`` builds the server once (about 6 minutes on 2 idle cores, from the llama.cpp sources
vendored in the ``llama-cpp-python`` sdist, into ``.cache/llama-server/``; its output goes to
``build.log`` there), starts it in the background and prints the ``.env`` lines that point
``OpenAICompatible.from_env()``, ``make_llm("llamacpp:...")``, the examples and the agent configs
at it; ``stop`` stops it. The build is portable: never ``-march=native`` (a CPU may advertise
instructions its guest cannot run, such as Intel AMX), and a CPU that advertises AMX is launched
with ``--no-repack``. In code and tests, ``llama_server()`` runs it for the length of a block::

    async with llama_server() as base_url:  # http://127.0.0.1:PORT (the API lives under /v1)
        llm = server_llm(base_url)
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "llama-server"
VERSION = "0.3.36"
SDIST = f"llama_cpp_python-{VERSION}"
BINARY = CACHE / "llama-server"
LOG = CACHE / "build.log"
BUILD_MINUTES = "6"  # 375 s measured on 2 idle cores (a fresh clone, 2026-12-02)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_model import DEFAULT_MODEL  # noqa: E402  (the folder above is on the path now)


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


AMX = frozenset({"amx_tile", "amx_int8", "amx_bf16"})
# The x86-64 features the build may use when the CPU advertises all of them (x86-64-v3, minus
# MOVBE/LZCNT which ggml does not ask for). AVX-512 and AMX are never compiled in: some guests
# advertise them and fault on the first instruction (issue 28).
X86_BASELINE = ("avx", "avx2", "fma", "f16c", "bmi2")
# Everything llama-server does not need, off: tests, examples, the unified app, the web UI's npm
# build and its download, OpenSSL, BLAS, llamafile's sgemm and the weight-repacking kernels
# (neither helps the small quantized models used here much), warnings.
COMMON_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_BACKEND_DL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DGGML_BLAS=OFF",
    "-DGGML_LLAMAFILE=OFF",
    "-DGGML_CPU_REPACK=OFF",
    "-DLLAMA_ALL_WARNINGS=OFF",
    "-DGGML_ALL_WARNINGS=OFF",
)


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The CPU features the kernel advertises (``/proc/cpuinfo`` ``flags`` or ``Features``)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


def cmake_flags(machine: str, flags: frozenset[str], *, ccache: bool = False) -> list[str]:
    """The ``cmake`` configure options for ``machine`` (``platform.machine()``) and its CPU flags.

    Never ``GGML_NATIVE``: ``-march=native`` compiles in whatever the CPU advertises, AMX
    included, and a guest that advertises AMX without running it crashes at model load. The
    features are picked conservatively instead: on x86-64 AVX2/FMA/F16C/BMI2 when all are
    advertised (else SSE4.2 only), never AVX-512 or AMX; on arm64 ARMv8.2-A with dot product and
    FP16 when advertised, else plain ARMv8-A.
    """
    return [
        *COMMON_FLAGS,
        f"-DGGML_CCACHE={'ON' if ccache else 'OFF'}",
        *cpu_options(machine, flags),
    ]


def cpu_options(machine: str, flags: frozenset[str]) -> list[str]:
    """The CPU-feature part of :func:`cmake_flags` (also given to llama-cpp-python's build)."""
    out = ["-DGGML_NATIVE=OFF"]
    arch = machine.lower()
    if arch in ("x86_64", "amd64"):
        v3 = all(f in flags for f in X86_BASELINE)
        on = "ON" if v3 else "OFF"
        out += [f"-DGGML_{name}={on}" for name in ("AVX", "AVX2", "FMA", "F16C", "BMI2")]
        out += ["-DGGML_SSE42=ON", "-DGGML_AVX_VNNI=OFF"]
        off = ("AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16")
        out += [f"-DGGML_{name}=OFF" for name in (*off, "AMX_TILE", "AMX_INT8", "AMX_BF16")]
    elif arch in ("aarch64", "arm64"):
        fast = {"asimddp", "asimdhp"} <= flags
        out.append(f"-DGGML_CPU_ARM_ARCH={'armv8.2-a+dotprod+fp16' if fast else 'armv8-a'}")
    return out


def launch_args(flags: frozenset[str]) -> list[str]:
    """Extra ``llama-server`` options for this CPU: ``--no-repack`` where AMX is advertised.

    The repacked (extra) buffer types are where AMX kernels run; a binary built elsewhere, or by
    an older version of this script, may carry them, so a CPU that advertises AMX never gets them.
    """
    return ["--no-repack"] if flags & AMX else []


def configure_command(tree: Path, out: Path) -> list[str]:
    """The ``cmake`` configure command for this machine."""
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    flags = cmake_flags(platform.machine(), cpu_flags(), ccache=bool(shutil.which("ccache")))
    return ["cmake", "-S", str(tree), "-B", str(out), *generator, *flags]


def _steps(out: Path) -> Callable[[], str]:
    """A progress reading for a Ninja build in ``out``: steps done of the target's total."""
    listed = subprocess.run(
        ["ninja", "-C", str(out), "-t", "commands", "llama-server"],
        capture_output=True,
        text=True,
        check=False,
    )
    total = len(listed.stdout.splitlines())

    def reading() -> str:
        try:
            done = sum(1 for line in (out / ".ninja_log").open() if not line.startswith("#"))
        except OSError:
            done = 0
        return f"{min(done, total)}/{total} steps"

    return reading


def _run_logged(
    command: list[str], log: Path, label: str, progress: Callable[[], str] | None = None
) -> None:
    """Run ``command`` with its output appended to ``log``, behind one progress line on a
    terminal (``progress()`` says how far it is).

    Raises:
        BuildError: If it fails (the message names the log and quotes its last lines).
    """
    from local_model import tail

    with log.open("a") as sink:
        sink.write(f"$ {' '.join(command)}\n")
        sink.flush()
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    tty = sys.stdout.isatty()
    started = time.monotonic()
    try:
        while process.poll() is None:
            if tty:
                done = f", {progress()}" if progress else ""
                print(f"\r{label}: {time.monotonic() - started:.0f} s{done}   ", end="", flush=True)
            time.sleep(1)
    finally:
        if process.poll() is None:  # interrupted: stop the compiler too
            process.terminate()
            process.wait()
        if tty:
            print("\r" + " " * 70 + "\r", end="", flush=True)
    if process.returncode != 0:
        raise BuildError(f"{label} failed (exit {process.returncode}); log {log}:\n{tail(log)}")


class BuildError(RuntimeError):
    """Building ``llama-server`` failed; the message quotes the log's last lines."""


def build() -> Path:
    """Build ``llama-server`` once (idempotent) and return the binary's path.

    The compiler's output goes to ``.cache/llama-server/build.log`` behind one progress line.

    Raises:
        BuildError: If configuring or compiling fails.
    """
    if BINARY.exists():
        return BINARY
    tree = _sources()
    out = CACHE / "build"
    shutil.rmtree(out, ignore_errors=True)  # a cache from other options would be reused
    about = f"about {BUILD_MINUTES} minutes on 2 cores"
    print(f"building llama-server once ({about}; its output: {LOG})", flush=True)
    jobs = str(os.cpu_count() or 2)
    started = time.monotonic()
    LOG.write_text("")
    _run_logged(configure_command(tree, out), LOG, "configuring llama-server")
    build_command = ["cmake", "--build", str(out), "--target", "llama-server", "-j", jobs]
    steps = _steps(out) if (out / "build.ninja").exists() else None
    _run_logged(build_command, LOG, "building llama-server", steps)
    built = next(out.rglob("bin/llama-server"))
    shutil.copy2(built, BINARY)
    print(f"built {BINARY} in {time.monotonic() - started:.0f} s", flush=True)
    return BINARY


def server_command(
    port: int, *, model: str = DEFAULT_MODEL, threads: int = 2, extra_args: Sequence[str] = ()
) -> list[str]:
    """The ``llama-server`` command line for ``model`` on ``port`` (loopback only)."""
    from local_model import MODELS, model_path

    return [
        str(BINARY),
        *("--model", str(model_path(model)), "--alias", MODELS[model].name),
        *("--host", "127.0.0.1", "--port", str(port), "--ctx-size", "4096"),
        "--jinja",  # the model's own chat template
        *("--threads", str(threads)),
        *launch_args(cpu_flags()),
        *extra_args,
    ]


def _server_env() -> dict[str, str]:
    # An older build of this script linked libllama/libggml dynamically next to the binary.
    library_path = os.pathsep.join(filter(None, [str(CACHE), os.environ.get("LD_LIBRARY_PATH")]))
    return {"LD_LIBRARY_PATH": library_path, "LLAMA_ARG_REPACK": "true"} | (
        {"LLAMA_ARG_REPACK": "false"} if cpu_flags() & AMX else {}
    )


@asynccontextmanager
async def llama_server(
    startup_timeout: float = 120.0,
    extra_args: Sequence[str] = (),
    threads: int = 2,
    model: str = DEFAULT_MODEL,
) -> AsyncIterator[str]:
    """Start ``llama-server`` with ``model`` (``smollm2`` or ``gemma3``), yield its base URL
    (``http://127.0.0.1:PORT``), stop it.

    ``extra_args`` go on its command line, e.g. ``("--embedding", "--pooling", "mean")`` to
    serve ``/v1/embeddings`` instead of chat; ``threads`` is its ``--threads``. The server
    inherits this process's CPU affinity (a benchmark pins it by setting its own first). Its
    output goes to ``.cache/llama-server/server-<pid>.log``.

    Raises:
        RuntimeError: If the binary is missing.
        local_model.ServerExitedError: If it exits during start-up (the message quotes its log).
    """
    from local_model import free_port, serve

    if not BINARY.exists():
        raise RuntimeError("llama-server is missing: run `python scripts/llama_server.py build`")
    port = free_port()
    command = server_command(port, model=model, threads=threads, extra_args=extra_args)
    base_url = f"http://127.0.0.1:{port}"
    log = CACHE / f"server-{os.getpid()}.log"
    async with serve(command, f"{base_url}/health", startup_timeout, _server_env(), log):
        yield base_url


# What the engine needs to know about llama-server with these models: their chat templates have
# no tool section (no native tool calls), the server honours JSON schemas by grammar (``oneOf``
# included), which the JSON tool protocol uses, and it sends no tool-call deltas while streaming.
CAPABILITIES = {
    "native_tools": False,
    "parallel_tool_calls": False,
    "json_schema": True,
    "streaming_with_tools": False,
    "null_assistant_content": False,
}
MAX_TOKENS = 512  # a bound on every reply: a small model may ramble until the context is full


def server_llm(base_url: str, model: str = DEFAULT_MODEL) -> Any:
    """An ``OpenAICompatible`` for ``llama-server`` (the API lives under ``/v1``)."""
    from local_model import MODELS

    from simplellmfunc.providers import Capabilities, OpenAICompatible

    return OpenAICompatible(
        None,
        MODELS[model].name,
        f"{base_url}/v1",
        capabilities=Capabilities(**CAPABILITIES),
        provider_name="llama-server",
        timeout=180.0,
        max_tokens=MAX_TOKENS,
    )


def env_lines(base_url: str, model: str = DEFAULT_MODEL) -> list[str]:
    """The ``.env`` lines that point this project's examples and ``from_env`` at the server."""
    from local_model import MODELS

    name = MODELS[model].name
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

STATE = CACHE / "server.json"
SERVER_LOG = CACHE / "server.log"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _state() -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = json.loads(STATE.read_text())
    except (OSError, ValueError):
        return None
    return state if _alive(int(state["pid"])) else None


def start(model: str = DEFAULT_MODEL, port: int = 8080, timeout: float = 120.0) -> int:
    """Start a background server (building it first if needed); print the ``.env`` lines."""
    import httpx
    from local_model import exit_message, install_model

    running = _state()
    if running is not None:
        print(f"llama-server is already running (pid {running['pid']}): stop it first")
        return 1
    install_model(model)
    build()
    command = server_command(port, model=model)
    with SERVER_LOG.open("wb") as sink:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, **_server_env()},
            start_new_session=True,
        )
    base_url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            print(exit_message(command, process.returncode, SERVER_LOG), file=sys.stderr)
            return 1
        try:
            if httpx.get(f"{base_url}/health", timeout=2).is_success:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    else:
        process.terminate()
        print(f"llama-server did not answer within {timeout:.0f} s; log: {SERVER_LOG}")
        return 1
    STATE.write_text(json.dumps({"pid": process.pid, "port": port, "model": model}))
    print(f"llama-server is running (pid {process.pid}, log {SERVER_LOG}) on {base_url}/v1")
    print("Put these lines in .env (or export them) for your code, the examples and configs:\n")
    print("\n".join(env_lines(base_url, model)))
    print("\nStop it with: python scripts/llama_server.py stop")
    return 0


def stop() -> int:
    """Stop the background server started by :func:`start`."""
    running = _state()
    if running is None:
        print("llama-server is not running")
        STATE.unlink(missing_ok=True)
        return 0
    pid = int(running["pid"])
    os.kill(pid, signal.SIGTERM)
    for _ in range(40):
        if not _alive(pid):
            break
        time.sleep(0.25)
    else:
        os.kill(pid, signal.SIGKILL)
    STATE.unlink(missing_ok=True)
    print(f"stopped llama-server (pid {pid})")
    return 0


def status() -> int:
    """Print whether the background server runs, and the ``.env`` lines if it does."""
    running = _state()
    if running is None:
        print("llama-server is not running (start it: python scripts/llama_server.py start)")
        return 1
    print(f"llama-server is running (pid {running['pid']}) with {running['model']}:\n")
    print("\n".join(env_lines(f"http://127.0.0.1:{running['port']}", running["model"])))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``build`` | ``start [--model smollm2|gemma3] [--port 8080]`` | ``stop`` | ``status``."""
    import argparse

    from local_model import MODELS

    parser = argparse.ArgumentParser(
        prog="python scripts/llama_server.py", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build llama-server once into .cache/llama-server")
    starting = sub.add_parser("start", help="start it in the background; print the .env lines")
    starting.add_argument("--model", choices=sorted(MODELS), default=DEFAULT_MODEL)
    starting.add_argument("--port", type=int, default=8080)
    sub.add_parser("stop", help="stop the background server")
    sub.add_parser("status", help="say whether it runs, with the .env lines")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            print(build())
            return 0
        if args.command == "start":
            return start(args.model, args.port)
        return stop() if args.command == "stop" else status()
    except (BuildError, RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
