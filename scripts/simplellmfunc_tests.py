"""Run SimpleLLMFunc's own test suite against this package, with only the package name changed
(``SimpleLLMFunc`` → ``simplellmfunc``), and print a per-file table.

The tests are read from a local checkout of NiJingzhe/SimpleLLMFunc (nothing is fetched and
nothing is copied into this repository): its ``tests/`` and ``examples/`` folders are copied to a
temporary folder with the package name rewritten, and each test file runs in its own pytest
process with a per-test timeout and a per-file timeout, so one hung file cannot stop the rest.
This module is also the pytest plugin of those runs (``-p simplellmfunc_tests``): it records each
file's collected tests and outcomes as JSON lines as they happen, so a file that times out still
reports what ran. Usage::

    SIMPLELLMFUNC_CHECKOUT=/path/to/SimpleLLMFunc python scripts/simplellmfunc_tests.py \
        [--only tests/test_type ...] [--failures] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHECKOUT_ENV = "SIMPLELLMFUNC_CHECKOUT"
REPORT_ENV = "SLF_TESTS_REPORT"
CHECKOUT_SRC = Path(__file__).resolve().parents[1] / "src"
SCRIPTS = Path(__file__).resolve().parent
COPIED = ("tests", "examples")


# --- the pytest plugin side (runs inside each pytest process) ---------------------------------


def _record(entry: dict[str, Any]) -> None:
    path = os.environ.get(REPORT_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(entry) + "\n")


def _message(report: Any) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message).splitlines()[0][:300] if crash.message else ""
    text = str(report.longrepr or "").strip().splitlines()
    errors = [line for line in text if line.startswith("E ")]
    return (errors[-1] if errors else text[-1] if text else "")[:300]


def pytest_collectreport(report: Any) -> None:
    if report.failed:
        _record({"kind": "collect_error", "nodeid": report.nodeid, "message": _message(report)})


def pytest_collection_finish(session: Any) -> None:
    _record({"kind": "collected", "count": len(session.items)})


def pytest_runtest_logreport(report: Any) -> None:
    if report.when == "call" or report.outcome != "passed":
        outcome = report.outcome
        if report.when != "call" and report.outcome == "failed":
            outcome = "error"
        _record(
            {
                "kind": "test",
                "nodeid": report.nodeid,
                "when": report.when,
                "outcome": outcome,
                "message": "" if outcome == "passed" else _message(report),
            }
        )


# --- the runner side ---------------------------------------------------------------------------


@dataclass
class FileResult:
    """What one test file's pytest process reported."""

    path: str
    collected: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    timed_out: bool = False
    seconds: float = 0.0
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # nodeid, outcome, msg


def prepare(checkout: Path, folder: Path) -> None:
    """Copy the checkout's tests and examples into ``folder``, package name rewritten."""
    for name in COPIED:
        source = checkout / name
        if not source.is_dir():
            continue
        shutil.copytree(source, folder / name, ignore=shutil.ignore_patterns("__pycache__"))
    for path in folder.rglob("*"):
        if path.is_file() and path.suffix in {".py", ".json", ".md", ".txt", ".toml"}:
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            if "SimpleLLMFunc" in text:
                path.write_text(
                    text.replace("SimpleLLMFunc", "simplellmfunc"),
                    encoding="utf-8",
                    errors="surrogateescape",
                )
    # SimpleLLMFunc's pytest settings: none beyond the defaults (strict asyncio mode).
    (folder / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n", encoding="utf-8"
    )


def find_test_files(folder: Path, only: list[str] | None) -> list[str]:
    """The test files to run, relative to ``folder``, sorted."""
    files = sorted(str(path.relative_to(folder)) for path in (folder / "tests").rglob("test_*.py"))
    if only:
        files = [f for f in files if any(f == o or f.startswith(o.rstrip("/") + "/") for o in only)]
    return files


def run_file(folder: Path, rel: str, test_timeout: float, file_timeout: float) -> FileResult:
    """Run one test file in its own pytest process."""
    result = FileResult(rel)
    report = folder / ".reports" / (rel.replace("/", "__") + ".jsonl")
    report.parent.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(CHECKOUT_SRC), str(SCRIPTS), os.environ.get("PYTHONPATH")])
        ),
        REPORT_ENV: str(report),
        "LOG_DIR": str(folder / "logs"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "simplellmfunc_tests",
        f"--timeout={test_timeout:.0f}",
        "--rootdir",
        str(folder),
        "-c",
        str(folder / "pytest.ini"),
        rel,
    ]
    started = time.perf_counter()
    log = report.with_suffix(".log")
    with log.open("wb") as output:
        process = subprocess.Popen(
            command,
            cwd=folder,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            process.wait(file_timeout)
        except subprocess.TimeoutExpired:
            result.timed_out = True
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    result.seconds = time.perf_counter() - started
    _read_report(report, result, log.read_text(encoding="utf-8", errors="replace"))
    return result


def _read_report(report: Path, result: FileResult, output: str) -> None:
    if not report.exists():
        # pytest stopped before collecting (a conftest that fails at import): its output says why.
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        why = [line for line in lines if line.startswith("E ") or "Error" in line]
        result.errors += 1
        result.problems.append(
            (result.path, "error", (why[-1] if why else lines[-1] if lines else "no output")[:300])
        )
        return
    for line in report.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        kind = entry["kind"]
        if kind == "collected":
            result.collected = entry["count"]
        elif kind == "collect_error":
            result.errors += 1
            result.problems.append((entry["nodeid"], "collect error", entry["message"]))
        elif kind == "test":
            outcome = entry["outcome"]
            if outcome == "passed":
                result.passed += 1
            elif outcome == "skipped":
                result.skipped += 1
            elif outcome == "error":
                if entry["when"] == "teardown" and any(
                    p[0] == entry["nodeid"] for p in result.problems
                ):
                    continue
                result.errors += 1
                result.problems.append((entry["nodeid"], "error", entry["message"]))
            else:
                result.failed += 1
                result.problems.append((entry["nodeid"], "failed", entry["message"]))


def table(results: list[FileResult]) -> str:
    """A Markdown table of the results, with a total row."""
    lines = [
        "| file | collected | passed | failed | errors |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results:
        note = " (timed out)" if r.timed_out else ""
        name = r.path.removeprefix("tests/")
        lines.append(f"| `{name}`{note} | {r.collected} | {r.passed} | {r.failed} | {r.errors} |")
    total = [sum(getattr(r, k) for r in results) for k in ("collected", "passed", "failed")]
    errors = sum(r.errors for r in results)
    lines.append(f"| **total** | {total[0]} | {total[1]} | {total[2]} | {errors} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="test files or folders to run")
    parser.add_argument("--test-timeout", type=float, default=60.0, help="seconds per test")
    parser.add_argument("--file-timeout", type=float, default=600.0, help="seconds per file")
    parser.add_argument("--failures", action="store_true", help="list every failing test")
    parser.add_argument("--json", default=None, help="write the results to this JSON file")
    args = parser.parse_args(argv)
    checkout = os.environ.get(CHECKOUT_ENV)
    if not checkout or not (Path(checkout) / "tests").is_dir():
        parser.error(f"set {CHECKOUT_ENV} to a SimpleLLMFunc checkout (a folder with tests/)")
    results: list[FileResult] = []
    with tempfile.TemporaryDirectory(prefix="slf-tests-") as tmp:
        folder = Path(tmp)
        prepare(Path(checkout), folder)
        for rel in find_test_files(folder, args.only):
            result = run_file(folder, rel, args.test_timeout, args.file_timeout)
            results.append(result)
            print(
                f"{rel}: {result.collected} collected, {result.passed} passed, "
                f"{result.failed} failed, {result.errors} errors"
                + (" (timed out)" if result.timed_out else "")
                + f" [{result.seconds:.1f} s]",
                flush=True,
            )
    print()
    print(table(results))
    if args.failures:
        print()
        for r in results:
            for nodeid, outcome, message in r.problems:
                print(f"{outcome.upper()} {nodeid}: {message}")
    if args.json:
        payload = [r.__dict__ for r in results]
        Path(args.json).write_text(json.dumps(payload, indent=1), encoding="utf-8")
    return 0 if all(not r.failed and not r.errors and not r.timed_out for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
