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
from simplellmfunc.builtin.pyrepl._capture import StreamCapture, fit_stream, split_budget
from simplellmfunc.builtin.pyrepl._env import kernel_environment
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


def test_fit_stream_and_budget_split() -> None:
    text = "".join(f"row {i}\n" for i in range(1000))
    fitted = fit_stream(text, 200, tail_share=0.8, spill_path="/logs/out.txt")
    assert fitted.spill == text
    assert fitted.text.startswith("row 0\n")
    assert fitted.text.endswith("row 999\n")
    assert "/logs/out.txt" in fitted.text
    assert fit_stream("short", 200, tail_share=0.5, spill_path="x").spill is None
    assert split_budget(10, 10, 100) == (10, 10)
    assert split_budget(500, 10, 100) == (90, 10)
    assert split_budget(10, 500, 100) == (10, 90)
    assert split_budget(500, 500, 100) == (50, 50)


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
