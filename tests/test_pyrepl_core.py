"""PyRepl with a real kernel: execution, streaming, errors, images, output budget, audit log.

One kernel serves the whole module (state does not matter between these tests); the module's
teardown checks that no child process outlives it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
import pytest_asyncio

from simplellmfunc import ImgPath, ImgUrl
from simplellmfunc.builtin import PyRepl
from simplellmfunc.exceptions import ToolRetry
from simplellmfunc.tools import ToolEventEmitter

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def children_before() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def repl(
    tmp_path_factory: pytest.TempPathFactory, children_before: set[int]
) -> AsyncIterator[PyRepl]:
    workdir = tmp_path_factory.mktemp("work")
    logs = tmp_path_factory.mktemp("logs")
    async with PyRepl(workdir, log_dir=logs, max_output_tokens=500) as shared:
        yield shared
    left = {p.pid for p in psutil.Process().children(recursive=True)} - children_before
    assert not left, f"orphan processes: {left}"


def execute_tool(repl: PyRepl) -> Any:
    return next(t for t in repl.toolset if t.name == "execute_code")


def events(collected: list[Any]) -> list[tuple[str, Any]]:
    return [(e.event.event_name, e.event.data) for e in collected]


async def test_seed_direct_use_keeps_state(repl: PyRepl) -> None:
    execute = execute_tool(repl)
    first = await execute(code="import random\ndata = [random.randint(1, 100) for _ in range(10)]")
    assert first["success"] is True
    second = await execute(code="mean = sum(data) / len(data)\nprint(f'mean: {mean}')")
    assert second["success"] is True
    assert second["stdout"].startswith("mean: ")
    assert set(second.keys()) >= {
        "success", "stdout", "stderr", "return_value", "error", "error_details",
        "execution_time_ms", "artifacts",
    }  # fmt: skip
    third = await repl.execute("len(data), mean == sum(data) / 10")
    assert third["return_value"] == "(10, True)"


async def test_top_level_await_and_magics(repl: PyRepl) -> None:
    result = await repl.execute("import asyncio\nawait asyncio.sleep(0.01)\n'slept'")
    assert result["return_value"] == "'slept'"
    result = await repl.execute("%time z = 6 * 7\n!echo from-shell\nz")
    assert result["success"], result
    assert "Wall time" in result["stdout"]
    assert "from-shell" in result["stdout"]
    assert result["return_value"] == "42"


async def test_fd_level_output_in_order(repl: PyRepl) -> None:
    emitter = ToolEventEmitter()
    code = (
        "import os, sys\n"
        "print('a')\n"
        "os.system('echo b')\n"
        "os.write(1, b'c\\n')\n"
        "print('d')\n"
        "os.write(2, b'e\\n')\n"
        "print('f', file=sys.stderr)\n"
    )
    for _ in range(5):
        result = await repl.execute(code, event_emitter=emitter)
        assert result["stdout"] == "a\nb\nc\nd\n"
        assert result["stderr"] == "e\nf\n"


async def test_events_stream_in_order_across_streams(repl: PyRepl) -> None:
    emitter = ToolEventEmitter()
    code = (
        "import sys, time\n"
        "print('one')\n"
        "print('two', file=sys.stderr)\n"
        "time.sleep(0.05)\n"
        "print('three')\n"
    )
    result = await execute_tool(repl)(code=code, event_emitter=emitter)
    assert result["success"]
    streamed = events(await emitter.get_events())
    names = [name for name, _ in streamed]
    assert set(names) == {"kernel_stdout", "kernel_stderr"}
    text = [(name, data["text"]) for name, data in streamed]
    assert text == [
        ("kernel_stdout", "one\n"),
        ("kernel_stderr", "two\n"),
        ("kernel_stdout", "three\n"),
    ]


async def test_syntax_error_points_at_line_and_column(repl: PyRepl) -> None:
    result = await execute_tool(repl)(code="x = 1\nfor i in range(2)\n    print(i)")
    assert result["success"] is False
    details = result["error_details"]
    assert details["error_type"] == "SyntaxError"
    assert details["message"] == "expected ':'"
    assert (details["line"], details["column"]) == (2, 18)
    assert details["snippet"] == "for i in range(2)"
    assert details["pointer"] == " " * 17 + "^"
    assert "line 2, column 18" in result["error"]
    assert "ipykernel" not in result["error"]


async def test_runtime_error_in_nested_user_function(repl: PyRepl) -> None:
    code = (
        "def outer(v):\n"
        "    return inner(v)\n"
        "\n"
        "def inner(v):\n"
        "    total = v + 1\n"
        "    return total / (v - v)\n"
        "\n"
        "outer(3)\n"
    )
    result = await repl.execute(code)
    details = result["error_details"]
    assert details["error_type"] == "ZeroDivisionError"
    assert (details["line"], details["column"]) == (6, 12)
    assert details["snippet"] == "    return total / (v - v)"
    assert details["pointer"] == " " * 11 + "^" * 15
    assert details["function"] == "inner"
    trace = details["user_traceback"]
    assert trace.index("outer(3)") < trace.index("return inner(v)") < trace.index("total /")
    assert "interactiveshell" not in trace
    assert "ipykernel" not in trace


async def test_error_in_library_shows_calling_line_and_tail(repl: PyRepl) -> None:
    result = await repl.execute("import json\n\nparsed = json.loads('{bad')")
    details = result["error_details"]
    assert details["error_type"] == "json.decoder.JSONDecodeError"
    assert details["line"] == 3
    assert details["snippet"] == "parsed = json.loads('{bad')"
    assert "called from line 3" in result["error"]
    assert "json/decoder.py" in details["user_traceback"]


async def test_error_in_function_from_earlier_execution(repl: PyRepl) -> None:
    await repl.execute("def explode():\n    raise ValueError('boom')")
    result = await repl.execute("explode()")
    details = result["error_details"]
    assert (details["error_type"], details["message"], details["line"]) == ("ValueError", "boom", 2)
    assert "of the code run in execution" in result["error"]


async def test_error_on_a_magic_line_shows_the_line_as_written(repl: PyRepl) -> None:
    result = await repl.execute("x = 1\n%no_such_magic")
    details = result["error_details"]
    assert details["line"] == 2
    assert details["snippet"] == "%no_such_magic"
    assert details["pointer"] is None


async def test_return_value_and_display_text(repl: PyRepl) -> None:
    result = await repl.execute("display('shown'); {'k': [1, 2]}")
    assert result["return_value"] == "{'k': [1, 2]}"
    assert "'shown'" in result["stdout"]
    assert (await repl.execute("None"))["return_value"] is None


async def test_images_become_artifacts_and_multimodal_results(repl: PyRepl) -> None:
    execute = execute_tool(repl)
    code = (
        "from PIL import Image\n"
        "img = Image.new('RGB', (8, 8), 'red')\n"
        "display(img)\n"
        "img.save('dot.png')\n"
        "img\n"
    )
    result = await execute(code=code)
    assert result["success"], result
    kinds = [(a["source"], a["mime_type"]) for a in result["artifacts"]]
    assert kinds == [("display", "image/png"), ("result", "image/png")]
    text, images = execute.render(result)
    assert "2 image(s) attached" in text
    assert all(isinstance(i, ImgUrl) and i.url.startswith("data:image/png") for i in images)
    result = await execute(code="from simplellmfunc import ImgPath\nImgPath('dot.png')")
    assert result["artifacts"][0]["path"] == str(repl.working_directory / "dot.png")
    text, images = execute.render(result)
    assert isinstance(images[0], ImgPath)
    result = await execute(
        code="from simplellmfunc import ImgUrl\ndisplay(ImgUrl('https://example.com/a.png'))"
    )
    assert result["artifacts"] == [
        {"type": "image", "source": "display", "url": "https://example.com/a.png", "detail": "auto"}
    ]
    assert execute.render(result)[1] == [ImgUrl("https://example.com/a.png")]


async def test_render_is_concise_text(repl: PyRepl) -> None:
    execute = execute_tool(repl)
    text = execute.render(await execute(code="print('hello')\n41 + 1"))
    assert isinstance(text, str)
    assert "succeeded" in text
    assert "hello" in text
    assert "42" in text
    failed = await execute(code="1/0")
    with pytest.raises(ToolRetry) as caught:  # a failed cell is a failed call
        execute.render(failed)
    text = str(caught.value)
    assert "failed" in text
    assert "ZeroDivisionError" in text
    assert "line 1" in text


async def test_huge_output_is_cut_and_spilled(repl: PyRepl) -> None:
    code = (
        "for i in range(20000):\n"
        "    print(f'line {i}')\n"
        "import sys\n"
        "print('last err', file=sys.stderr)"
    )
    result = await repl.execute(code)
    assert result["success"]
    assert result["stdout"].startswith("line 0\n")
    assert result["stdout"].rstrip().endswith("line 19999")
    assert len(result["stdout"]) < 2500
    path = Path(result["output_files"]["stdout"])
    assert str(path) in result["stdout"]
    assert (await anyio.Path(path).read_text()).count("\n") == 20000
    assert result["stderr"] == "last err\n"


def split_marker(shown: str) -> tuple[str, str, str]:
    """(head, marker, tail) of a stream the model reads cut."""
    head, _, rest = shown.partition("\n[... output truncated: ")
    marker, _, tail = rest.partition(" ...]\n")
    return head, marker, tail


NUMBERED_LINES = "for i in range(100_000):\n    print(f'line {i:06d}')"
ALL_LINES = "".join(f"line {i:06d}\n" for i in range(100_000))  # 1,200,000 characters


async def test_output_beyond_memory_is_saved_in_full_while_it_streams(tmp_path: Path) -> None:
    async with PyRepl(
        tmp_path, log_dir=tmp_path / "logs", max_output_tokens=500, max_capture_chars=100_000
    ) as small:
        result = await small.execute(NUMBERED_LINES)
    shown = result["stdout"]
    head, marker, tail = split_marker(shown)
    assert head.startswith("line 000000\n")
    assert tail.endswith("line 099999\n")
    path = Path(result["output_files"]["stdout"])
    assert (await anyio.Path(path).read_text()) == ALL_LINES
    omitted = int(marker.split(" characters omitted")[0].replace(",", ""))
    assert len(head) + len(tail) + omitted == len(ALL_LINES)
    assert marker.endswith(f"the full output (1,200,000 characters) is in {path}")
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no partial file left


async def test_output_file_cap_is_stated(tmp_path: Path) -> None:
    async with PyRepl(
        tmp_path,
        log_dir=tmp_path / "logs",
        max_output_tokens=500,
        max_capture_chars=100_000,
        max_output_file_chars=300_000,
    ) as small:
        result = await small.execute(NUMBERED_LINES)
    _, marker, tail = split_marker(result["stdout"])
    path = Path(result["output_files"]["stdout"])
    assert marker.endswith(f"the first 300,000 of its 1,200,000 characters are in {path}")
    assert (await anyio.Path(path).read_text()) == ALL_LINES[:300_000]
    assert tail.endswith("line 099999\n")


async def test_error_and_stderr_tail_survive_the_budget(repl: PyRepl) -> None:
    code = (
        "import sys\n"
        "print('x' * 50000)\n"
        "print('noise\\n' * 5000, file=sys.stderr)\n"
        "print('FINAL WORDS', file=sys.stderr)\n"
        "raise RuntimeError('the end')"
    )
    result = await repl.execute(code)
    assert result["stderr"].rstrip().endswith("FINAL WORDS")
    assert result["error"].startswith("RuntimeError: the end")
    assert set(result["output_files"]) == {"stdout", "stderr"}


async def test_audit_log_records_each_execution(repl: PyRepl) -> None:
    await repl.execute("audit_marker = 'present'\nraise KeyError('k')")
    lines = repl.audit_log_file.read_text().splitlines()
    assert repl.audit_log_file == repl.audit_log_dir / "executions.jsonl"
    assert repl.audit_log_dir.name == repl.instance_id
    record = json.loads(lines[-1])
    assert record["instance_id"] == repl.instance_id
    assert record["code"].startswith("audit_marker")
    assert record["result"]["success"] is False
    assert record["result"]["error_details"]["error_type"] == "KeyError"
    assert record["settings"]["execution_timeout_seconds"] == 120.0
    assert record["settings"]["input_idle_timeout_seconds"] == 300.0
    assert "time" in record


async def test_toolset_schema_and_descriptions(repl: PyRepl) -> None:
    tools = {t.name: t for t in repl.toolset}
    assert list(tools) == ["execute_code", "reset_repl", "list_variables"]
    execute = tools["execute_code"]
    assert list(execute.parameters["properties"]) == ["code", "timeout_seconds"]
    assert execute.parameters["required"] == ["code"]
    assert 'if __name__ == "__main__":' in execute.description
    assert "input()" in execute.description
    assert "self_reference" in tools["reset_repl"].description
    assert "self_reference" in tools["list_variables"].description


async def test_an_execution_parses_no_message_dates(
    repl: PyRepl, monkeypatch: pytest.MonkeyPatch
) -> None:
    """jupyter_client's ``deserialize`` runs a regular expression over every header string and
    dateutil over the dates (a fifth of the host's CPU per execution, for dates nothing reads):
    the messages of an execution, alone or beside its helpers, are decoded without it."""
    import jupyter_client.session

    from simplellmfunc import AbortSignal

    parsed: list[Any] = []
    extract = jupyter_client.session.extract_dates

    def counting(obj: Any) -> Any:
        parsed.append(obj)
        return extract(obj)

    monkeypatch.setattr(jupyter_client.session, "extract_dates", counting)
    alone = await repl.execute("print('a'); 40 + 2")
    beside = await repl.execute("print('b'); 41 + 2", abort_signal=AbortSignal())
    assert (alone["stdout"], alone["return_value"]) == ("a\n", "42")
    assert (beside["stdout"], beside["return_value"]) == ("b\n", "43")
    assert isinstance(alone["execution_count"], int)
    assert parsed == []


async def test_a_replayed_or_forged_message_is_refused(repl: PyRepl) -> None:
    """The decoding without dates checks the signature as ``deserialize`` does."""
    from simplellmfunc.builtin.pyrepl._session import _decode

    session = repl._kernel.session
    assert session is not None
    signer = session.client.session

    def frames(content: dict[str, Any]) -> list[bytes]:
        return list(signer.serialize(signer.msg("status", content=content)))

    message = frames({"execution_state": "idle"})
    decoded = _decode(signer, message)
    assert decoded["content"] == {"execution_state": "idle"}
    assert decoded["msg_type"] == "status"
    assert isinstance(decoded["header"]["date"], str)
    with pytest.raises(ValueError, match="Duplicate Signature"):
        _decode(signer, message)
    forged = frames({"execution_state": "busy"})
    forged[-1] = json.dumps({"execution_state": "idle"}).encode()
    with pytest.raises(ValueError, match="Invalid Signature"):
        _decode(signer, forged)
    # A full replay history is culled by ``deserialize`` itself (no private method of ours).
    signer.digest_history_size = len(signer.digest_history)
    fresh = _decode(signer, frames({"execution_state": "busy"}))
    assert fresh["content"] == {"execution_state": "busy"}
    assert len(signer.digest_history) < signer.digest_history_size
