"""The kernel → host bridge: primitive packs called from kernel code while a cell runs."""

from __future__ import annotations

import ast
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import psutil
import pytest
import pytest_asyncio

from simplellmfunc.builtin import PrimitivePack, PyRepl
from simplellmfunc.exceptions import UserError

pytestmark = pytest.mark.asyncio(loop_scope="module")


class Counter:
    """A host object behind a pack."""

    def __init__(self) -> None:
        self.value = 0
        self.arrived = 0
        self.all_here = anyio.Event()


def make_pack(counter: Counter) -> PrimitivePack:
    pack = PrimitivePack("demo", description="test primitives", backend=counter, timeout=5)

    @pack.primitive()
    def add(amount: int = 1) -> int:
        """Add to the counter and return it."""
        counter.value += amount
        return counter.value

    @pack.primitive("text.upper")
    async def upper(text: str) -> dict[str, str]:
        """Upper-case a text."""
        await anyio.lowlevel.checkpoint()
        return {"upper": text.upper()}

    @pack.primitive("store[].get")
    def store_get(key: str, default: Any = None) -> Any:
        """Read a key of a fixed store."""
        return {"a": 1}.get(key, default)

    @pack.primitive()
    def fail(kind: str) -> None:
        """Raise the named exception."""
        raise {"key": KeyError, "value": ValueError, "custom": UserError}[kind](f"{kind} failed")

    @pack.primitive(timeout=0.3)
    async def slow() -> str:
        """Sleep past the timeout."""
        await anyio.sleep(10)
        return "never"

    @pack.primitive()
    async def gather(parties: int) -> int:
        """Wait until ``parties`` calls are in flight at once."""
        counter.arrived += 1
        if counter.arrived >= parties:
            counter.all_here.set()
        with anyio.fail_after(4):
            await counter.all_here.wait()
        return counter.arrived

    return pack


class SelfRef:
    """A minimal SelfReference-like object."""

    def __init__(self) -> None:
        self.notes: dict[str, list[str]] = {}

    def as_primitive_pack(self) -> PrimitivePack:
        pack = PrimitivePack("selfref", backend=self)
        pack.add("memory[].count", lambda key: len(self.notes.get(key, [])))
        pack.add("memory[].append", lambda key, note: self.notes.setdefault(key, []).append(note))
        pack.add("context.inspect", lambda: {"keys": sorted(self.notes)})
        return pack


@pytest.fixture(scope="module")
def children_before() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def setup(
    tmp_path_factory: pytest.TempPathFactory, children_before: set[int]
) -> AsyncIterator[tuple[PyRepl, Counter, SelfRef]]:
    counter, selfref = Counter(), SelfRef()
    async with PyRepl(log_dir=tmp_path_factory.mktemp("logs")) as repl:
        repl.install_primitive_pack(make_pack(counter))
        repl.attach_self_reference(selfref)
        await repl.execute("pass")  # opens the bridge socket, which lives as long as the REPL
        yield repl, counter, selfref
    left = {p.pid for p in psutil.Process().children(recursive=True)} - children_before
    assert not left, f"orphan processes: {left}"


async def test_calls_return_json_results(setup: Any) -> None:
    repl, counter, _ = setup
    result = await repl.execute(
        "a = runtime.demo.add(2)\nb = runtime.demo.add(amount=3)\n"
        "(a, b, runtime.demo.text.upper('hi'), runtime.demo.store['a'].get(), "
        "runtime.demo.store['z'].get(default='none'))"
    )
    assert result["success"], result
    assert ast.literal_eval(result["return_value"]) == (2, 5, {"upper": "HI"}, 1, "none")
    assert counter.value == 5
    assert repl.get_runtime_backend("demo") is counter
    assert repl.get_runtime_backend("missing") is None


async def test_errors_come_back_typed(setup: Any) -> None:
    repl, _, _ = setup
    code = (
        "out = []\n"
        "for kind in ('key', 'value', 'custom'):\n"
        "    try:\n"
        "        runtime.demo.fail(kind)\n"
        "    except runtime.BridgeError as exc:\n"
        "        flags = isinstance(exc, KeyError), isinstance(exc, ValueError)\n"
        "        out.append((exc.error_type, *flags))\n"
        "try:\n"
        "    runtime.demo.nope()\n"
        "except AttributeError as exc:\n"
        "    out.append(('missing', 'runtime.demo.nope' in str(exc), False))\n"
        "out"
    )
    result = await repl.execute(code)
    assert result["success"], result
    assert ast.literal_eval(result["return_value"]) == [
        ("KeyError", True, False),
        ("ValueError", False, True),
        ("UserError", False, False),
        ("missing", True, False),
    ]


async def test_unhandled_bridge_error_points_at_the_call(setup: Any) -> None:
    repl, _, _ = setup
    result = await repl.execute("x = 1\nruntime.demo.fail('value')")
    details = result["error_details"]
    assert details["line"] == 2
    assert "value failed" in details["message"]


async def test_timeout_and_json_only(setup: Any) -> None:
    repl, _, _ = setup
    result = await repl.execute("runtime.demo.slow()")
    assert result["error_details"]["message"].startswith("TimeoutError: slow did not finish")
    result = await repl.execute("runtime.demo.add(object())")
    assert result["error_details"]["error_type"] == "TypeError"
    assert "JSON" in result["error_details"]["message"]


async def test_concurrent_calls_from_kernel_threads(setup: Any) -> None:
    repl, counter, _ = setup
    code = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "with ThreadPoolExecutor(4) as pool:\n"
        "    answers = sorted(pool.map(lambda _: runtime.demo.gather(4), range(4)))\n"
        "answers"
    )
    result = await repl.execute(code)
    assert result["success"], result
    assert ast.literal_eval(result["return_value"]) == [4, 4, 4, 4]
    assert counter.all_here.is_set()


async def test_listing_shows_contracts(setup: Any) -> None:
    repl, _, _ = setup
    result = await repl.execute("import json\nprint(json.dumps(runtime.list_primitives('demo')))")
    listing = {p["name"]: p["contract"] for p in json.loads(result["stdout"])}
    assert listing["demo.add"] == "add(amount: int = 1) -> int: Add to the counter and return it."
    assert "demo.text.upper" in listing
    assert "demo.store[].get" in listing
    result = await repl.execute("runtime.help()\nsorted(dir(runtime.demo))")
    assert "runtime.selfref.context.inspect" in result["stdout"]
    assert ast.literal_eval(result["return_value"]) == [
        "add", "fail", "gather", "slow", "store", "text",
    ]  # fmt: skip


async def test_self_reference_survives_reset_and_is_hidden(setup: Any) -> None:
    repl, _, selfref = setup
    await repl.execute("self_reference.memory['main'].append('first note')\nuser_var = 1")
    assert selfref.notes == {"main": ["first note"]}
    assert repl.self_reference is selfref
    names = [v["name"] for v in await repl.list_variables()]
    assert "user_var" in names
    assert "self_reference" not in names
    assert "runtime" not in names
    await repl.reset()
    result = await repl.execute(
        "(self_reference.memory['main'].count(), runtime.selfref.context.inspect())"
    )
    assert ast.literal_eval(result["return_value"]) == (1, {"keys": ["main"]})
    assert await repl.list_variables() == []


async def test_bad_token_is_refused(setup: Any) -> None:
    repl, _, _ = setup
    path = ast.literal_eval((await repl.execute("runtime._config['address']"))["return_value"])

    def forged_call() -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(path)
            sock.sendall(b'{"token": "forged", "id": 1, "target": "demo.add"}\n')
            with sock.makefile() as reader:
                return dict(json.loads(reader.readline()))

    async with anyio.create_task_group() as tg:
        # The bridge answers while a cell runs.
        tg.start_soon(repl.execute, "import time\ntime.sleep(0.5)")
        reply = await anyio.to_thread.run_sync(forged_call)
    assert reply["ok"] is False
    assert reply["error"]["type"] == "PermissionError"
