"""The soak, bounded: 60 concurrent ``@llm_chat`` sessions with faults on a quarter of the LLM
and tool calls and random aborts, in every mode (``benchmarks/soak.py`` runs 1,000 at 5 %).

Every session ends with an answer or a typed error, every returned history and end-event history
is valid, and nothing leaks. The fault kinds below are left out while their fixes are in flight
(issue 12, on other branches); each fails the soak on main today. Delete a kind from its list
when its fix lands, so the soak covers it from then on.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))  # soak.py and its _common live there, not in a package

from soak import LLM_FAULTS, TOOL_FAULTS, SoakConfig, print_report, run_soak  # noqa: E402

#: Fault kinds left out of the bounded soak (with why); every kind is on now that issue 12 landed.
PENDING_LLM_FAULTS: dict[str, str] = {}
PENDING_TOOL_FAULTS: dict[str, str] = {}

SESSIONS = 60


@pytest.mark.timeout(90)
async def test_every_session_ends_well_and_nothing_leaks() -> None:
    llm_faults = tuple(k for k in LLM_FAULTS if k not in PENDING_LLM_FAULTS)
    tool_faults = tuple(k for k in TOOL_FAULTS if k not in PENDING_TOOL_FAULTS)
    config = SoakConfig(
        sessions=SESSIONS,
        seed=12,
        llm_fault_rate=0.25,
        tool_fault_rate=0.25,
        abort_rate=0.1,
        llm_faults=llm_faults,
        tool_faults=tool_faults,
        session_guard=30.0,
        server="inprocess",
    )
    report = await run_soak(config)
    print_report(report)  # shown by pytest when the test fails
    assert len(report.outcomes) == SESSIONS
    assert not report.failures, [(o.session, o.ending, o.error_type) for o in report.failures]
    assert not any(report.leaks.values()), report.leaks
    # Every enabled kind was injected at least once, and some sessions were aborted.
    assert {k for k in llm_faults if not report.llm_injected[k]} == set()
    assert {k for k in tool_faults if not report.tool_injected[k]} == set()
    assert report.endings["answer"] > SESSIONS // 2
    assert any(o.aborted for o in report.outcomes)


def test_pending_kinds_are_real_fault_kinds() -> None:
    """A renamed kind must not silently stay disabled."""
    assert set(PENDING_LLM_FAULTS) <= set(LLM_FAULTS)
    assert set(PENDING_TOOL_FAULTS) <= set(TOOL_FAULTS)
