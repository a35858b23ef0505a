"""Building llama.cpp's ``llama-server`` once, portably, quietly.

The sources are the llama.cpp tree vendored in the ``llama-cpp-python`` sdist. The build never
compiles for the native CPU (``-march=native`` compiles in whatever the CPU advertises, and some
guests advertise Intel AMX and fault on its first instruction); it builds the server target only,
into one static binary; its output goes to a log behind one progress line.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from ..exceptions import LocalBuildError
from ._models import cache_dir
from ._process import tail

__all__ = [
    "AMX",
    "BUILD_MINUTES",
    "binary",
    "build",
    "cmake_flags",
    "configure_command",
    "cpu_flags",
    "cpu_options",
    "launch_args",
    "server_dir",
]

VERSION = "0.3.36"
SDIST = f"llama_cpp_python-{VERSION}"
BUILD_MINUTES = "4 to 11"  # 225-652 s measured on fresh clones, 2 cores, by CPU and load

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


def server_dir() -> Path:
    """The folder of the sources, the build, the binary and the logs: ``<cache>/llama-server``."""
    return cache_dir() / "llama-server"


def binary() -> Path:
    """Where the built ``llama-server`` is kept."""
    return server_dir() / "llama-server"


def _sources() -> Path:
    """The vendored llama.cpp tree, downloading and extracting the sdist if needed."""
    src = server_dir() / "src"
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
    an older version of this code, may carry them, so a CPU that advertises AMX never gets them.
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
            with (out / ".ninja_log").open() as log:
                done = sum(1 for line in log if not line.startswith("#"))
        except OSError:
            done = 0
        return f"{min(done, total)}/{total} steps"

    return reading


def _run_logged(
    command: Sequence[str], log: Path, label: str, progress: Callable[[], str] | None = None
) -> None:
    """Run ``command`` with its output appended to ``log``, behind one progress line on a
    terminal (``progress()`` says how far it is).

    Raises:
        LocalBuildError: If it fails (the message names the log and quotes its last lines).
    """
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
        message = f"{label} failed (exit {process.returncode}); log {log}:\n{tail(log, 15)}"
        raise LocalBuildError(message)


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    """Hold ``lock`` (an advisory ``flock``) while the block runs: one build per cache at a
    time, whichever process asks (two builds in one tree would delete each other's files)."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"another build of llama-server is running in {lock.parent}; waiting", flush=True)
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build() -> Path:
    """Build ``llama-server`` once (idempotent) and return the binary's path.

    The compiler's output goes to ``<cache>/llama-server/build.log`` behind one progress line.
    A build another process is running in the same cache is waited for, not repeated.

    Raises:
        LocalBuildError: If configuring or compiling fails.
    """
    target = binary()
    if target.exists():
        return target
    with _exclusive(server_dir() / "build.lock"):
        if target.exists():  # built by the process this one waited for
            return target
        _build(target)
    return target


def _build(target: Path) -> None:
    tree = _sources()
    out = server_dir() / "build"
    log = server_dir() / "build.log"
    shutil.rmtree(out, ignore_errors=True)  # a cache from other options would be reused
    about = f"about {BUILD_MINUTES} minutes on 2 cores"
    print(f"building llama-server once ({about}; its output: {log})", flush=True)
    jobs = str(os.cpu_count() or 2)
    started = time.monotonic()
    log.write_text("")
    _run_logged(configure_command(tree, out), log, "configuring llama-server")
    build_command = ["cmake", "--build", str(out), "--target", "llama-server", "-j", jobs]
    steps = _steps(out) if (out / "build.ninja").exists() else None
    _run_logged(build_command, log, "building llama-server", steps)
    built = next(out.rglob("bin/llama-server"))
    partial = target.with_name(target.name + ".partial")
    shutil.copy2(built, partial)
    partial.replace(target)  # whole or absent: a reader never runs half a binary
    print(f"built {target} in {time.monotonic() - started:.0f} s", flush=True)
