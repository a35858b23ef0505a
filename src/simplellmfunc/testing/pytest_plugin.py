"""The pytest plugin (entry point ``simplellmfunc``): cassettes for tests that call models.

Installed with the package and inert until used: it adds the ``--llm-record-mode`` option, the
``llm_cassette`` marker and the ``cassette`` fixture, and patches nothing until a test asks for
a cassette.

Example::

    @pytest.mark.llm_cassette  # or take the `cassette` fixture
    async def test_review(cassette):
        assert (await review("x = 1")).verdict == "ok"

The cassette of a test is ``cassettes/<test module>/<test name>.jsonl`` next to the test file
(``@pytest.mark.llm_cassette("name")`` names it). ``--llm-record-mode`` is ``replay`` by
default (record once, then replay); run with ``record`` to refresh the cassettes and with
``none`` in CI so that a test never reaches the network. Marker keyword arguments go to
:func:`~simplellmfunc.testing.use_cassette` (``match_on=``, ``secrets=``, ``check_prefix=`` …;
a ``mode=`` there wins over the option).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest

__all__ = ["cassette", "pytest_addoption", "pytest_collection_modifyitems", "pytest_configure"]

_OPTION = "--llm-record-mode"


def pytest_addoption(parser: pytest.Parser) -> None:
    from ._cassette import RecordMode

    group = parser.getgroup("simplellmfunc", "simplellmfunc cassettes")
    group.addoption(
        _OPTION,
        action="store",
        default="replay",
        choices=[mode.replace("_", "-") for mode in get_args(RecordMode)],
        help="cassette mode: replay (record once, default), record, new-episodes, none",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "llm_cassette(name=None, **options): record / replay this test's model API calls "
        "(simplellmfunc cassettes)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixturenames = getattr(item, "fixturenames", None)
        if (
            item.get_closest_marker("llm_cassette") is not None
            and fixturenames is not None
            and "cassette" not in fixturenames
        ):
            fixturenames.insert(0, "cassette")


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", name).strip("_") or "cassette"


@pytest.fixture
def cassette(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The test's :class:`~simplellmfunc.testing.Cassette`, in use for the whole test."""
    from ._cassette import use_cassette

    marker = request.node.get_closest_marker("llm_cassette")
    options: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    name = marker.args[0] if marker is not None and marker.args else request.node.name
    mode = str(request.config.getoption(_OPTION)).replace("-", "_")
    options.setdefault("mode", mode)
    test_file = Path(str(request.node.path))
    path = test_file.parent / "cassettes" / test_file.stem / f"{_file_name(name)}.jsonl"
    with use_cassette(path, **options) as active:
        yield active
