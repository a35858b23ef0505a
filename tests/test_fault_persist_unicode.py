"""Text with lone surrogates (a non-UTF-8 file name from ``os.listdir``) is stored and read back
unchanged by every persisted store: runtime stores, traces, checkpoints, SelfReference."""

from __future__ import annotations

import json
from pathlib import Path

from simplellmfunc._persist import json_text
from simplellmfunc.builtin.selfref import KeyState, SQLiteStateStore
from simplellmfunc.runtime import Checkpoint, Namespace, SQLiteStore

ODD = "report-\udcff.txt"  # what os.listdir gives for the bytes b"report-\xff.txt"


def test_json_text_is_readable_utf8_unless_it_cannot_be() -> None:
    assert json_text({"city": "Zürich"}) == '{"city": "Zürich"}'
    odd = json_text({"name": ODD})
    odd.encode("utf-8")  # storable
    assert json.loads(odd) == {"name": ODD}  # and lossless


async def test_sqlite_store_round_trips_a_lone_surrogate(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "s.db") as store:
        ns = Namespace("agent")
        await store.set(ns, "files", [ODD, "plain"])
        item = await store.get(ns, "files")
        assert item is not None
        assert item.value == [ODD, "plain"]


def test_selfref_state_store_round_trips_a_lone_surrogate(tmp_path: Path) -> None:
    store = SQLiteStateStore(tmp_path / "m.db")
    try:
        history = ({"role": "user", "content": f"open {ODD}"},)
        store.save("agent", KeyState(messages=history))
        assert store.load("agent").messages == history
    finally:
        store.close()


def test_checkpoint_json_round_trips_a_lone_surrogate() -> None:
    text = Checkpoint(history=({"role": "user", "content": ODD},)).to_json()
    text.encode("utf-8")
    assert json.loads(text)["history"][0]["content"] == ODD
