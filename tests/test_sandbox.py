"""The sandbox (issue 14): policies, the escape suite run for real in a sandboxed PyRepl kernel,
sandboxed tools and shell commands, and the fallback where bubblewrap cannot run."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import psutil
import pytest

from simplellmfunc import AbortSignal, PyRepl
from simplellmfunc.events import CustomEvent
from simplellmfunc.exceptions import (
    ConfigError,
    ResourceLimitExceeded,
    SandboxViolation,
    ToolExecutionError,
)
from simplellmfunc.runtime import ShellTool
from simplellmfunc.sandbox import SandboxPolicy, isolation
from simplellmfunc.tools import SandboxedTool, ToolContext, ToolEventEmitter, sandboxed, tool
from simplellmfunc.tools._workers import WORKERS
from test_sandbox_escapes import record

ISOLATED = isolation().binary is not None
HOME = os.path.expanduser("~")
needs_bwrap = pytest.mark.skipif(
    not ISOLATED, reason=f"bubblewrap cannot run here: {isolation().reason}"
)


@tool(sandbox=SandboxPolicy(timeout_seconds=20))
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@sandboxed(SandboxPolicy(timeout_seconds=20))
def misbehave(what: str, path: str = "") -> str:
    """Do something a sandbox must stop."""
    if what == "value":
        raise ValueError("bad value")
    if what == "decode":  # a built-in whose constructor takes five arguments
        return b"\xff".decode("utf-8")
    if what == "memory":
        return str(len(bytearray(8 * 1024**3)))
    if what == "write":
        Path(path).write_text("x")
    if what == "read":
        return Path(path).read_text()
    if what == "sleep":
        import time

        time.sleep(60)
    return os.getcwd()


CALLS = [0]


@sandboxed(SandboxPolicy(timeout_seconds=20, cpu_seconds=2))
def visit(burn_seconds: float = 0.0, crash: str = "") -> dict[str, object]:
    """Leave traces a later call must not see; burn CPU; or crash."""
    import subprocess
    import time

    CALLS[0] += 1
    found = sorted(os.listdir("."))
    Path("left-behind.txt").write_text("x")
    subprocess.Popen(["sleep", "3002.5"], start_new_session=True)
    end = time.process_time() + burn_seconds
    while time.process_time() < end:
        pass
    if crash == "segv":
        import ctypes

        ctypes.string_at(0)
    if crash == "exit":
        os._exit(3)
    return {"calls": CALLS[0], "files": found, "cpu": round(time.process_time(), 1)}


@sandboxed(SandboxPolicy(timeout_seconds=20))
def meddle(how: str) -> dict[str, list[str]]:
    """Reach for the worker and its spares (the children waiting for the next calls)."""
    import signal

    others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())]
    reached = []
    for pid in others:
        for what in ("fd/0", "fd/1", "fd/3", "fd/4", "fd/5", "mem", "environ"):
            try:
                open(f"/proc/{pid}/{what}", "rb").close()
                reached.append(f"{pid}/{what}")
            except OSError:
                pass
    for pid in others:
        if int(pid) != os.getppid():  # the worker: stopping it only times this call out
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGSTOP if how == "stop" else signal.SIGKILL)
    return {"others": others, "reached": reached}


@pytest.fixture
async def warm_workers() -> AsyncIterator[None]:
    """Close the warm workers the test started (they would outlive it, until exit)."""
    yield
    for sandboxed_tool in (add, misbehave, visit, meddle):
        await sandboxed_tool.aclose()
    assert WORKERS.live_count() == 0


def test_policy_is_frozen_and_round_trips() -> None:
    policy = SandboxPolicy.strict().replace(read_only=["/opt/data"], env=["MY_VAR"])
    assert policy.read_only == ("/opt/data",)
    data = json.loads(json.dumps(policy.to_dict()))
    assert SandboxPolicy.from_dict(data) == policy
    defaults = SandboxPolicy()  # PyRepl's; the presets carry seed §24.3's values
    assert (defaults.network, defaults.memory_mb, defaults.max_processes) == (False, 2048, 256)
    seed = {
        "strict": (5.0, 64, False, False, 4096, 8),
        "default": (30.0, 256, False, False, 65536, 64),
        "permissive": (300.0, 2048, True, True, 1048576, 256),
    }
    for name, values in seed.items():
        p = getattr(SandboxPolicy, name)()
        got = (p.timeout_seconds, p.memory_mb, p.network, p.allow_subprocess,
               p.max_output_bytes, p.max_open_files)  # fmt: skip
        assert got == values, name
    assert SandboxPolicy.of(timeout=10, memory_mb=128).timeout_seconds == 10
    with pytest.raises(ConfigError, match="unknown sandbox policy field"):
        SandboxPolicy.from_dict({"netwrk": True})
    with pytest.raises(ConfigError):
        SandboxPolicy(memory_mb=0)
    with pytest.raises(AttributeError):
        policy.network = True  # type: ignore[misc]


ESCAPES = {
    "read another process's environ": (
        "import os\nfound = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "leaks = [p for p in found if b'{secret}' in open(f'/proc/{{p}}/environ','rb').read()]\n"
        "assert not leaks, leaks\n"
        "open('/proc/{host_pid}/environ').read()"
    ),
    "read ~/.ssh": "open('{home}/.ssh/id_rsa').read()",
    "read .env outside the workspace": "open('{outside}/.env').read()",
    "write outside the workspace": "open('{outside}/planted', 'w').write('x')",
    "write to the system": "open('/usr/planted', 'w').write('x')",
    "symlink out of the workspace": (
        "import os\nos.symlink('{outside}/.env', 'link')\nopen('link').read()"
    ),
    "connect to a host loopback server": (
        "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)"
    ),
    "detach a child that outlives close()": (
        "import subprocess\nsubprocess.Popen(['sleep', '3001.5'], start_new_session=True)"
    ),
    "fork bomb (400 processes)": (
        "import os, time\nkids = []\nfor _ in range(400):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n        time.sleep(300)\n        os._exit(0)\n"
        "    kids.append(pid)"
    ),
    "fill the disk (/tmp)": (
        "chunk = b'x' * (16 * 1024 * 1024)\n"
        "with open('/tmp/fill', 'wb') as f:\n    for _ in range(64):\n        f.write(chunk)"
    ),
    "allocate 8 GB": "block = bytearray(8 * 1024 ** 3)",
    "ptrace the host process": (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "if libc.ptrace(16, {host_pid}, 0, 0) != 0:\n"
        "    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))"
    ),
    "raise rlimits back up": (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))"
    ),
}


def _sleepers(mark: bytes = b"3001.5") -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if mark in handle.read():
                    found.append(int(name))
        except (OSError, ValueError):
            continue
    return found


@needs_bwrap
async def test_escape_suite_under_the_default_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "sk-escape-suite-secret-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / ".env").write_text(f"OPENAI_API_KEY={secret}\n")
    listener = socket.create_server(("127.0.0.1", 0))
    values = {
        "secret": secret,
        "host_pid": os.getpid(),
        "home": HOME,
        "outside": outside,
        "port": listener.getsockname()[1],
    }
    rows = []
    try:
        async with PyRepl(
            log_dir=tmp_path / "logs", execution_timeout_seconds=60, sandbox=True
        ) as repl:
            assert repl.isolated
            for name, code in ESCAPES.items():
                result = await repl.execute(code.format(**values))
                error = (result["error_details"] or {}).get("summary") or result["error"] or ""
                rows.append((name, result["success"], error.splitlines()[0] if error else ""))
    finally:
        listener.close()
    outcome = {name: (ok, error) for name, ok, error in rows}
    for name, ok, error in rows:
        how = "killed with the sandbox at close()" if ok else re.sub(r": '[^']*'$", "", error)
        record(f"PyRepl: {name}", "contained" if ok else "refused", how)
    print("\nescape attempt                          | outcome")
    for name, ok, error in rows:
        print(f"{name:<40}| {'CONTAINED: died with the sandbox' if ok else 'REFUSED: ' + error}")
    assert not (outside / "planted").exists()
    assert _sleepers() == [], "a detached child outlived close()"
    # Refused, or contained: started, but killed with the sandbox at close() (checked above).
    contained = {"detach a child that outlives close()"}
    if os.getuid() == 0:
        contained.add("fork bomb (400 processes)")  # root: RLIMIT_NPROC is not enforced
    for name, (ok, _error) in outcome.items():
        if name in contained:
            continue
        assert not ok, f"{name}: not refused"
    assert "MemoryError" in outcome["allocate 8 GB"][1]
    assert "No space left" in outcome["fill the disk (/tmp)"][1]
    assert "FileNotFoundError" in outcome["read another process's environ"][1]
    assert "ValueError" in outcome["raise rlimits back up"][1]
    with capsys.disabled():
        print(capsys.readouterr().out)


@needs_bwrap
@pytest.mark.usefixtures("warm_workers")
async def test_sandboxed_tool_results_and_typed_errors(tmp_path: Path) -> None:
    assert isinstance(add, SandboxedTool)
    assert await add.invoke({"a": 2, "b": 3}) == 5
    assert await add(2, 3) == 5  # a direct call runs in the sandbox too (awaitable in a loop)
    with pytest.raises(ValueError, match="bad value"):
        await misbehave.invoke({"what": "value"})
    with pytest.raises(ToolExecutionError, match="UnicodeDecodeError"):
        await misbehave.invoke({"what": "decode"})
    with pytest.raises(ResourceLimitExceeded) as hit:
        await misbehave.invoke({"what": "memory"})
    assert hit.value.limit == "memory"
    with pytest.raises(SandboxViolation):
        await misbehave.invoke({"what": "write", "path": "/usr/planted"})
    (tmp_path / "secret").write_text("s3cret")
    with pytest.raises(FileNotFoundError):
        await misbehave.invoke({"what": "read", "path": str(tmp_path / "secret")})
    quick = SandboxedTool(misbehave.func, SandboxPolicy(timeout_seconds=1.5))
    with pytest.raises(ResourceLimitExceeded) as hit:
        await quick.invoke({"what": "sleep"})
    assert hit.value.limit == "wall_time"
    assert not (await misbehave.invoke({"what": "cwd"})).startswith(os.getcwd())


@needs_bwrap
async def test_shell_tool_in_a_sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-shell-secret")
    shell = ShellTool("sh", "sh -c {}", sandbox=SandboxPolicy(), cwd=tmp_path)
    out = await shell.run(input="echo hi > note.txt; cat note.txt; env | grep -c sk- || true")
    assert out.splitlines() == ["hi", "0"]
    assert (tmp_path / "note.txt").read_text() == "hi\n"
    # The workspace's parent inside is the sandbox's own /tmp: the host's stays untouched.
    await shell.run(input=f"echo x > {tmp_path.parent}/planted")
    assert not (tmp_path.parent / "planted").exists()
    with pytest.raises(ToolExecutionError, match=r"Read-only"):
        await shell.run(input="echo x > /usr/planted")
    out = await shell.run(input="ls /proc | grep -c '^[0-9]' ")
    assert int(out.strip()) < 10


@needs_bwrap
@pytest.mark.usefixtures("warm_workers")
async def test_a_warm_worker_serves_each_call_from_a_clean_state() -> None:
    first = await visit.invoke({})
    worker_pid = _worker_pids()
    assert len(worker_pid) == 1
    for _ in range(3):
        # A fresh child per call: module state, workspace files and CPU time start over, and
        # what the previous call left running is gone; the worker itself stays.
        again = await visit.invoke({"burn_seconds": 0.8})
        assert again["calls"] == first["calls"] == 1
        assert again["files"] == []
        assert again["cpu"] < 2
        assert await _none_left(b"3002.5")
    assert _worker_pids() == worker_pid
    with pytest.raises(ResourceLimitExceeded) as hit:
        await visit.invoke({"burn_seconds": 5})
    assert hit.value.limit == "cpu_time"
    with pytest.raises(ToolExecutionError, match="SIGSEGV"):
        await visit.invoke({"crash": "segv"})
    with pytest.raises(ToolExecutionError, match="exit status 3"):
        await visit.invoke({"crash": "exit"})
    assert _worker_pids() == worker_pid  # only the calls' own processes died
    assert (await visit.invoke({}))["calls"] == 1


@needs_bwrap
@pytest.mark.usefixtures("warm_workers")
async def test_a_call_cannot_reach_the_worker_or_the_spares_of_later_calls() -> None:
    for how in ("stop", "kill", "stop"):
        found = await meddle.invoke({"how": how})
        # The worker and a spare waiting for the next call are there, and out of reach: not
        # dumpable, so none of their pipes or files, memory or environment to open (nor
        # ptrace).
        assert len(found["others"]) >= 2
        assert found["reached"] == []
    # What the calls stopped or killed is replaced: the next calls are served, on time.
    with anyio.fail_after(10):
        assert [await add.invoke({"a": n, "b": 1}) for n in range(3)] == [1, 2, 3]


@needs_bwrap
@pytest.mark.usefixtures("warm_workers")
async def test_parallel_calls_use_parallel_workers_and_a_timeout_replaces_one() -> None:
    async with anyio.create_task_group() as group:
        for n in range(3):
            group.start_soon(add.invoke, {"a": n, "b": 1})
    assert 1 <= WORKERS.live_count() <= 3
    await add.aclose()
    assert WORKERS.live_count() == 0
    quick = SandboxedTool(misbehave.func, SandboxPolicy(timeout_seconds=1.5))
    with pytest.raises(ResourceLimitExceeded, match="longer than"):
        await quick.invoke({"what": "sleep"})
    assert WORKERS.live_count() == 0  # killed, not given back
    assert await quick.invoke({"what": "cwd"})
    await quick.aclose()


async def _none_left(mark: bytes, seconds: float = 5.0) -> bool:
    """Whether the processes with ``mark`` in their command line are gone (SIGKILL is async)."""
    with anyio.move_on_after(seconds):
        while True:
            if not _sleepers(mark):
                return True
            await anyio.sleep(0.05)
    return False


def _worker_pids() -> list[int]:
    """The workers' pids (not their spares: the children a worker forks ahead of calls)."""
    return [
        p.pid for p in psutil.Process().children(recursive=True)
        if _is_worker(p) and not _is_worker(p.parent())
    ]  # fmt: skip


def _is_worker(process: psutil.Process) -> bool:
    """Whether ``process`` is a sandbox worker (not its bwrap); a child that is gone or a
    zombie (another test's, in this xdist worker) is not."""
    try:
        command = " ".join(process.cmdline())
        return "simplellmfunc.sandbox._worker" in command and process.name() != "bwrap"
    except psutil.Error:
        return False


@pytest.mark.usefixtures("warm_workers")
async def test_fallback_fails_closed_as_root_and_warns_at_every_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SIMPLELLMFUNC_BWRAP", "off")
    assert isolation().binary is None
    caplog.set_level(logging.WARNING, logger="simplellmfunc.sandbox")
    if os.geteuid() == 0:  # as root the default policy refuses the fallback
        with pytest.raises(SandboxViolation, match="requires isolation"):
            await PyRepl(log_dir=tmp_path / "logs", sandbox=True).start()
    with pytest.raises(SandboxViolation, match="requires isolation"):  # strict: always
        await SandboxedTool(add.func, SandboxPolicy.strict()).invoke({"a": 1, "b": 1})
    accept = SandboxPolicy(require_isolation=False)
    emitter = ToolEventEmitter()
    async with PyRepl(log_dir=tmp_path / "logs", sandbox=accept) as repl:
        assert not repl.isolated
        result = await repl.execute(
            "import os, resource\n(os.getcwd(), resource.getrlimit(resource.RLIMIT_AS)[0])",
            event_emitter=emitter,
        )
        cwd, limit = eval(result["return_value"])
        assert cwd != os.getcwd()
        assert limit == 2048 * 1024**2
        await repl.execute("1", event_emitter=emitter)
    loose = SandboxedTool(add.func, accept.replace(timeout_seconds=20), name="loose_add")
    context = ToolContext("c1", "loose_add", emitter, AbortSignal())
    for _ in range(2):
        assert await loose.invoke({"a": 1, "b": 1}, context) == 2
    await loose.aclose()
    events = [e.event for e in await emitter.get_events()]
    warned = [e for e in events if isinstance(e, CustomEvent) and e.event_name == "sandbox_warning"]
    assert len(warned) == 3  # the kernel's start (once), each tool call
    assert all("no bubblewrap isolation" in e.data["missing"][0] for e in warned)
    logged = [r for r in caplog.records if "weaker isolation" in r.getMessage()]
    assert len(logged) >= 3  # every start says so, not one line per process


_STOPPED_SPARE = """
import json, os, signal, time
from simplellmfunc.sandbox._worker import _Spare
spare = _Spare(None, ())
os.kill(spare.pid, signal.SIGSTOP)  # sent before the request, as a previous call's code would
while open(f"/proc/{spare.pid}/stat").read().split(") ")[1][0] != "T":
    time.sleep(0.01)
status = spare.run(json.dumps({"module": "os", "qualname": "getpid", "arguments": {}}).encode())
print(json.dumps({"stopped": os.WIFSTOPPED(status), "started": spare.started()}))
spare.close()
spare.reap(wait=True)
"""


def test_a_spare_stopped_before_its_request_is_known_not_to_have_run_it() -> None:
    # The worker hands a call on to another spare exactly when its spare never read the
    # request: a stopped spare's wait status alone looks like a call that replied and stopped.
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _STOPPED_SPARE], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"stopped": True, "started": False}
