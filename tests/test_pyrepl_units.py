"""PyRepl building blocks that need no kernel: output caps, environment, log dir, packs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simplellmfunc.builtin import PrimitivePack, PyRepl
from simplellmfunc.builtin.pyrepl import render_execution
from simplellmfunc.builtin.pyrepl._audit import resolve_log_dir
from simplellmfunc.builtin.pyrepl._capture import Spool, StreamCapture
from simplellmfunc.builtin.pyrepl._env import kernel_environment
from simplellmfunc.builtin.pyrepl._output import cut_stream, present_streams, split_budget
from simplellmfunc.exceptions import UserError


@given(st.lists(st.text(max_size=40), max_size=60), st.integers(min_value=2, max_value=200))
def test_stream_capture_keeps_head_and_tail(chunks: list[str], limit: int) -> None:
    capture = StreamCapture(limit)
    for chunk in chunks:
        capture.write(chunk)
    full = "".join(chunks)
    assert capture.total_chars == len(full)
    if len(full) <= limit:
        assert capture.text() == full
        assert capture.dropped_chars == 0
    else:
        text = capture.text()
        head, _, tail = text.partition("\n[... ")
        tail = tail.split(" ...]\n", 1)[1]
        assert full.startswith(head)
        assert full.endswith(tail)
        assert len(head) + len(tail) + capture.dropped_chars == len(full)
        assert len(head) + len(tail) <= limit


def capture_of(text: str, max_chars: int = 1_000_000, spool: Spool | None = None) -> StreamCapture:
    capture = StreamCapture(max_chars, spool)
    for start in range(0, len(text), 97):
        capture.write(text[start : start + 97])
    return capture


def test_cut_stream_and_budget_split() -> None:
    text = "".join(f"row {i}\n" for i in range(1000))
    cut = cut_stream(capture_of(text), 200, tail_share=0.8)
    assert cut is not None
    head, tail = cut
    assert head.startswith("row 0\n")
    assert tail.endswith("row 999\n")
    assert len(head) + len(tail) <= 200
    assert cut_stream(capture_of("short"), 200, tail_share=0.5) is None
    # Past memory, head and tail come from what memory kept, never from its marker.
    head, tail = cut_stream(capture_of(text, max_chars=1000), 5000, tail_share=0.5) or ("", "")
    assert text.startswith(head)
    assert text.endswith(tail)
    assert "not kept" not in head + tail
    assert split_budget(10, 10, 100) == (10, 10)
    assert split_budget(500, 10, 100) == (90, 10)
    assert split_budget(10, 500, 100) == (10, 90)
    assert split_budget(500, 500, 100) == (50, 50)


async def saved_views(
    text: str, tmp_path: Path, *, max_chars: int, file_chars: int
) -> tuple[str, Path]:
    path = tmp_path / "out" / "00001-stdout.txt"
    capture = capture_of(text, max_chars, Spool(str(path), file_chars))
    await capture.flush()

    async def never(path: str, text: str) -> bool:
        raise AssertionError("a spooled stream is not written again")

    views = await present_streams(
        {"stdout": capture, "stderr": StreamCapture(100)}, 400, {"stdout": str(path)}, never
    )
    return views["stdout"].text, path


async def test_spooled_output_is_whole_on_disk(tmp_path: Path) -> None:
    text = "".join(f"row {i}\n" for i in range(100_000))
    shown, path = await saved_views(text, tmp_path, max_chars=10_000, file_chars=10**9)
    assert path.read_text() == text
    assert f"the full output ({len(text):,} characters) is in {path}" in shown
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


async def test_spool_cap_and_failure_are_stated(tmp_path: Path) -> None:
    text = "x" * 50_000
    shown, path = await saved_views(text, tmp_path, max_chars=1_000, file_chars=20_000)
    assert path.read_text() == text[:20_000]
    assert f"the first 20,000 of its 50,000 characters are in {path}" in shown
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the output directory should be")
    shown, path = await saved_views(text, blocked, max_chars=1_000, file_chars=20_000)
    assert "the output could not be saved to a file" in shown
    assert str(path) not in shown


async def test_spool_discard_removes_what_was_written_and_nothing_else(tmp_path: Path) -> None:
    unused = Spool(str(tmp_path / "out" / "00001-stdout.txt"), 1_000)
    await unused.discard()  # never opened: nothing to remove, and no directory made
    assert not (tmp_path / "out").exists()
    used = Spool(str(tmp_path / "out" / "00002-stdout.txt"), 1_000)
    used.append("x" * 500)
    await used.flush()
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["00002-stdout.txt.part"]
    await used.discard()
    assert list((tmp_path / "out").iterdir()) == []


def test_kernel_environment_is_an_allowlist() -> None:
    host = {
        "PATH": "/bin",
        "HOME": "/home/u",
        "LC_ALL": "C.UTF-8",
        "OPENAI_API_KEY": "sk-secret",
        "GITHUB_TOKEN": "ghp_secret",
        "PYTEST_CURRENT_TEST": "x",
    }
    env = kernel_environment("/private", {"MY_KEY": "given"}, host)
    assert env["PATH"] == "/bin"
    assert env["LC_ALL"] == "C.UTF-8"
    assert env["MY_KEY"] == "given"
    assert "OPENAI_API_KEY" not in env
    assert "GITHUB_TOKEN" not in env
    assert "PYTEST_CURRENT_TEST" not in env  # it would switch ipykernel's fd capture off
    assert env["TMPDIR"] == "/private/tmp"
    assert env["IPYTHONDIR"] == "/private/ipython"
    # What the kernel spawns inherits the marker that lets close() find it.
    assert (
        kernel_environment("/tmp/slf-kernel-x", {"SIMPLELLMFUNC_KERNEL": "forged"}, host)[
            "SIMPLELLMFUNC_KERNEL"
        ]
        == "slf-kernel-x"
    )


def test_log_dir_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOG_DIR", raising=False)
    assert resolve_log_dir() == tmp_path / "logs"
    (tmp_path / ".env").write_text("LOG_DIR=from-dotenv\n")
    assert resolve_log_dir() == tmp_path / "from-dotenv"
    monkeypatch.setenv("LOG_DIR", str(tmp_path / "from-env"))
    assert resolve_log_dir() == tmp_path / "from-env"
    repl = PyRepl(log_dir=tmp_path / "explicit")
    assert repl.audit_log_dir == tmp_path / "explicit" / "pyrepl" / repl.instance_id
    assert repl.audit_log_file.name == "executions.jsonl"
    assert not (tmp_path / "explicit").exists()


def test_primitive_pack_validation_and_contracts() -> None:
    pack = PrimitivePack("tools", {"echo": lambda text: text})
    assert pack.get("echo") is not None
    assert pack.get("missing") is None
    assert pack.get("echo").contract == "echo(text)"  # type: ignore[union-attr]
    with pytest.raises(UserError):
        PrimitivePack("bad-name")
    with pytest.raises(UserError):
        pack.add("no spaces", print)
    with pytest.raises(UserError):
        pack.add("fine", "not callable")  # type: ignore[arg-type]
    pack.add("memory[].count", len, contract="count() -> int")
    assert [p.name for p in pack.primitives] == ["echo", "memory[].count"]


def test_constructor_validates_and_never_starts() -> None:
    with pytest.raises(UserError):
        PyRepl(execution_timeout_seconds=0)
    repl = PyRepl()
    assert not repl.is_running
    assert "not started" in repr(repl)


def test_render_without_images_is_text() -> None:
    result = {
        "success": False,
        "stdout": "partial\n",
        "stderr": "",
        "return_value": None,
        "error": "NameError: name 'x' is not defined\n  at line 1, column 1:\n    x\n    ^",
        "error_details": {"user_traceback": "Traceback...\n  line 1\n    x"},
        "execution_time_ms": 3.2,
        "artifacts": [{"type": "image", "path": "/does/not/exist.png", "source": "result"}],
        "notice": "fresh kernel",
    }
    text = render_execution(result)
    assert isinstance(text, str)
    assert text.startswith("Note: fresh kernel\nExecution failed (3 ms).")
    assert "[stdout]\npartial" in text
    assert "[error]\nNameError" in text
    assert "[image not attached] image file not found" in text


def test_sweep_removes_private_dirs_of_dead_owners(tmp_path: Path) -> None:
    import subprocess
    import sys

    from simplellmfunc.builtin.pyrepl import _reaper

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    for name, owner in (
        ("slf-kernel-dead", dead.stdout.strip()),
        ("slf-kernel-live", str(os.getpid())),
        ("slf-bridge-dead", dead.stdout.strip()),
    ):
        (tmp_path / name).mkdir()
        (tmp_path / name / "owner.pid").write_text(owner)
    (tmp_path / "slf-kernel-no-owner").mkdir()
    (tmp_path / "unrelated").mkdir()
    _reaper._sweep_stale(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "slf-kernel-live",
        "slf-kernel-no-owner",
        "unrelated",
    ]
