"""One lifecycle for async resources: ``async with`` opens (``open``), leaving awaits
``aclose()``; a failing close never masks the block's error."""

from __future__ import annotations

from pathlib import Path

import pytest

from simplellmfunc._resource import AsyncResource
from simplellmfunc.mcp import MCPServerGroup, MCPToolset
from simplellmfunc.providers import LLMInterface, OpenAICompatible
from simplellmfunc.runtime.config import ConfiguredAgent
from simplellmfunc.runtime.stores import SQLiteStore, Store
from simplellmfunc.runtime.trace import TraceRecorder


def test_the_resources_share_the_lifecycle() -> None:
    for cls in (LLMInterface, Store, TraceRecorder, MCPToolset, MCPServerGroup, ConfiguredAgent):
        assert issubclass(cls, AsyncResource), cls
        assert cls.__aenter__ is AsyncResource.__aenter__, cls  # no copy of its own
        assert cls.__aexit__ is AsyncResource.__aexit__, cls


async def test_enter_opens_and_exit_closes(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "items.db")
    async with store as opened:
        assert opened is store
        await store.scope("a").set("k", {"v": 1})
    # closed: a new store over the same file sees the item, the old one is released
    async with SQLiteStore(tmp_path / "items.db") as again:
        item = await again.scope("a").get("k")
        assert item is not None
        assert item.value == {"v": 1}
    async with OpenAICompatible("sk-test-123456789", "m", "http://127.0.0.1:9/v1") as llm:
        assert isinstance(llm, OpenAICompatible)


class _Flaky(AsyncResource):
    def __init__(self) -> None:
        self.events: list[str] = []

    async def open(self) -> None:
        self.events.append("open")

    async def aclose(self) -> None:
        self.events.append("aclose")
        raise OSError("disk gone")


async def test_a_failing_close_never_masks_the_error_of_the_block() -> None:
    resource = _Flaky()
    with pytest.raises(ValueError, match="the block's own") as caught:
        async with resource:
            raise ValueError("the block's own error")
    assert resource.events == ["open", "aclose"]
    assert any("aclose() also failed: OSError: disk gone" in n for n in caught.value.__notes__)
    with pytest.raises(OSError, match="disk gone"):  # with no error leaving, it is raised
        async with _Flaky():
            pass
