"""The public surface of ``simplellmfunc.builtin`` and its sub-packages, and import costs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import simplellmfunc.builtin
import simplellmfunc.builtin.files
import simplellmfunc.builtin.pyrepl
import simplellmfunc.builtin.selfref

SURFACES = {
    simplellmfunc.builtin: {
        "CellLimits",
        "FileToolset",
        "KernelPool",
        "KernelSettings",
        "PrimitivePack",
        "PyRepl",
        "SelfReference",
        "code_touches_system",
    },
    simplellmfunc.builtin.files: {
        "SECRET_PATTERNS",
        "STALE_FILE_MESSAGE",
        "FileToolset",
        "GrepLimits",
        "ReadLimits",
    },
    simplellmfunc.builtin.pyrepl: {
        "CellLimits",
        "CellScope",
        "ExecuteCodeTool",
        "ExecutionSummary",
        "KernelPool",
        "KernelSettings",
        "ListVariablesTool",
        "Primitive",
        "PrimitiveCallContext",
        "PrimitivePack",
        "PyRepl",
        "ReplBackend",
        "ReplTool",
        "ResetReplTool",
        "code_touches_system",
        "current_cell",
        "default_backend",
        "fork_repl_tools",
        "register_default_backend",
        "render_execution",
        "submit_kernel_input",
    },
    simplellmfunc.builtin.selfref: {
        "InstanceHandle",
        "KeyState",
        "MemoryBank",
        "MemoryHandle",
        "MemoryMap",
        "MemoryStateStore",
        "SQLiteStateStore",
        "SelfReference",
        "StateStore",
        "compaction_summary_text",
    },
}


@pytest.mark.parametrize("module", list(SURFACES), ids=lambda m: m.__name__)
def test_surface_is_pinned_sorted_and_resolvable(module: object) -> None:
    names = list(module.__all__)  # type: ignore[attr-defined]
    assert set(names) == SURFACES[module]  # type: ignore[index]
    assert names == sorted(
        names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n)
    )
    for name in names:
        assert getattr(module, name) is not None


def test_one_class_behind_every_path() -> None:
    from simplellmfunc import FileToolset, PyRepl, SelfReference
    from simplellmfunc.builtin import files, pyrepl, selfref

    assert simplellmfunc.builtin.PyRepl is pyrepl.PyRepl is PyRepl
    assert simplellmfunc.builtin.KernelPool is pyrepl.KernelPool
    assert simplellmfunc.builtin.PrimitivePack is pyrepl.PrimitivePack
    assert simplellmfunc.builtin.SelfReference is selfref.SelfReference is SelfReference
    assert simplellmfunc.builtin.FileToolset is files.FileToolset is FileToolset


@pytest.mark.parametrize(
    "code",
    [
        "from simplellmfunc.builtin import SelfReference; SelfReference().run_hook('k')",
        "from simplellmfunc.builtin import FileToolset, PrimitivePack",
        "from simplellmfunc.builtin.pyrepl import fork_repl_tools",
    ],
)
def test_only_pyrepl_pulls_in_jupyter_client(code: str, tmp_path: Path) -> None:
    probe = f"import sys\n{code}\nprint('jupyter_client' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"


def test_pyrepl_never_imports_selfref(tmp_path: Path) -> None:
    """The PyRepl <-> SelfReference circle is a seam: ``selfref`` registers SelfReference as a
    PyRepl's default memory; ``pyrepl`` never imports ``selfref``, not even at run time."""
    probe = (
        "import sys\n"
        "from simplellmfunc.builtin.pyrepl import PyRepl\n"
        "from simplellmfunc.exceptions import UserError\n"
        "repl = PyRepl()\n"
        "try:\n"
        "    repl.get_runtime_backend('selfref')\n"
        "except UserError as exc:\n"
        "    print('refused', 'import simplellmfunc.builtin.selfref' in str(exc))\n"
        "print('simplellmfunc.builtin.selfref' in sys.modules)\n"
        "import simplellmfunc.builtin.selfref as selfref\n"
        "print(type(repl.get_runtime_backend('selfref')) is selfref.SelfReference)\n"
        "from simplellmfunc.builtin import PyRepl as FromFace\n"
        "print(FromFace is PyRepl)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert result.stdout.split("\n")[:4] == ["refused True", "False", "True", "True"]
    # Through the package faces, as SimpleLLMFunc code imports it, the default is there; it
    # loads selfref (and the engine it builds on: about 200 ms) only when first asked for.
    probe = (
        "import sys\n"
        "from simplellmfunc import PyRepl\n"
        "loaded = ('simplellmfunc.builtin.selfref', 'simplellmfunc.engine')\n"
        "print(*(name in sys.modules for name in loaded))\n"
        "from simplellmfunc.builtin import SelfReference\n"
        "print(isinstance(PyRepl().get_runtime_backend('selfref'), SelfReference))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert result.stdout.split("\n")[:2] == ["False False", "True"]
