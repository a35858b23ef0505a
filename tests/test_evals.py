"""Evaluations against the mock server: datasets, every evaluator, concurrency, pass@k, reports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from simplellmfunc import OpenAICompatible, llm_chat, llm_function, tool
from simplellmfunc.evals import (
    Budget,
    Case,
    Dataset,
    Equals,
    LLMJudge,
    MatchesSchema,
    Predicate,
    Report,
    ToolCallRecord,
    ToolTrajectory,
    compare,
    evaluate,
)
from simplellmfunc.exceptions import UserError
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec

GUARD = 30  # seconds: a deadlock guard, never an assertion on speed
CITIES = [f"City{i:02d}" for i in range(50)]
WRONG = {"City07", "City21", "City33"}  # the model answers these wrongly


def _last(request: RecordedRequest) -> dict[str, Any]:
    message: dict[str, Any] = request.json["messages"][-1]
    return message


def model(request: RecordedRequest) -> Reply:
    """The mock model: looks the city up with the tool, then answers; grades as a judge."""
    system = request.json["messages"][0]["content"]
    if system.startswith("You grade"):
        output = request.json["messages"][-1]["content"].split("output (str):", 1)[1]
        good = "sunny" in output
        return Reply.text(json.dumps({"score": 1.0 if good else 0.0, "reason": "checked"}))
    last = _last(request)
    if last["role"] == "user":
        city = last["content"].split()[-1].rstrip("?")
        return Reply.tool_calls(ToolCallSpec("lookup", {"city": city}), ttft=0.002)
    city = request.json["messages"][-2]["tool_calls"][0]["function"]["arguments"]
    city = json.loads(city)["city"]
    answer = "rainy" if city in WRONG else "sunny"
    return Reply.text(f"{answer} in {city}", usage=(30, 6))


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    mock_server.default = model
    async with OpenAICompatible("sk-evals-0123456789", "mock-model", mock_server.url) as llm:
        yield llm


def weather_dataset() -> Dataset:
    return Dataset(
        [
            Case(
                name=city,
                inputs={"message": f"weather in {city}?"},
                expected=f"sunny in {city}",
                trajectory=[ToolCallRecord("lookup", {"city": city})],
                metadata={"region": "north" if i % 2 else "south"},
            )
            for i, city in enumerate(CITIES)
        ],
        name="weather",
    )


async def test_fifty_cases_eight_at_a_time_with_every_evaluator(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    running = peak = 0

    @tool
    async def lookup(city: str) -> str:
        """Look the weather up."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.01)
        running -= 1
        return f"weather data for {city}"

    @llm_chat(llm, toolkit=[lookup])
    async def forecaster(message: str, history: list[dict[str, Any]]) -> None:
        """You report the weather; always look it up first."""

    evaluators = [
        Equals(),
        ToolTrajectory(),
        Predicate(lambda text: text.endswith(tuple(CITIES)), name="names_the_city"),
        Budget(max_seconds=10, max_tokens=200, max_cost=0.01, input_price=1, output_price=2),
        LLMJudge(llm, rubric="The answer says the weather is sunny."),
    ]
    with anyio.fail_after(GUARD):
        report = await evaluate(forecaster, weather_dataset(), evaluators=evaluators, concurrency=8)
    assert peak == 8  # the limit was reached and held
    assert len(report.cases) == 50
    assert {c.name for c in report.cases if not c.passed} == WRONG
    rates = report.evaluator_pass_rates
    assert rates["equals"] == rates["judge"] == 47 / 50
    assert rates["trajectory"] == rates["names_the_city"] == rates["budget"] == 1.0
    first = report.cases[0].attempts[0]
    assert first.tool_calls == (("lookup", {"city": "City00"}),)
    assert first.prompt_tokens > 0
    failed = next(c for c in report.cases if c.name == "City07").attempts[0]
    assert "expected 'sunny in City07', got 'rainy in City07'" in failed.scores[0].reason
    # 2 model calls per case plus a judge call per case.
    assert len(mock_server.requests) == 150

    table = report.table()
    assert "pass@1" in table
    assert re.search(r"City07\s+FAIL", table)
    assert re.search(r"TOTAL\s+94%", table)
    restored = Report.from_json(json.loads(json.dumps(report.to_json())))
    assert restored.summary() == report.summary()


async def test_repeats_give_pass_at_k_and_comparisons(mock_server: MockLLMServer) -> None:
    calls: dict[str, int] = {}

    def flaky(request: RecordedRequest) -> Reply:
        question = _last(request)["content"]
        calls[question] = calls.get(question, 0) + 1
        a, b = (int(n) for n in re.findall(r"\d+", question)[-2:])
        wrong = b == 3 and calls[question] % 3 != 0  # right 1 time in 3
        return Reply.text(str(a + b + (1 if wrong else 0)))

    mock_server.default = flaky

    class Sum(BaseModel):
        total: int

    async with OpenAICompatible("sk-evals-0123456789", "mock-model", mock_server.url) as llm:

        @llm_function(llm)
        async def add(a: int, b: int) -> int:
            """Add the numbers."""

        dataset = Dataset.from_records(
            [
                {"name": f"{a}+{b}", "inputs": {"a": a, "b": b}, "expected": a + b}
                for a, b in [(1, 2), (2, 3), (4, 3), (5, 5)]
            ],
            evaluators=[Equals(), MatchesSchema(int), MatchesSchema({"type": "integer"})],
            name="sums",
        )
        with anyio.fail_after(GUARD):
            report = await evaluate(add, dataset, repeats=3, concurrency=2)
        assert report.repeats == 3
        assert [len(c.attempts) for c in report.cases] == [3, 3, 3, 3]
        flaky_cases = {"2+3", "4+3"}
        assert {c.name for c in report.cases if not c.passed_every_time} == flaky_cases
        assert report.pass_at_k == 1.0  # each flaky case passed once in three
        assert report.pass_every_k == 0.5
        assert abs(report.pass_rate - 8 / 12) < 1e-9

        # A fixed model: the flaky cases improve, nothing regresses.
        mock_server.default = lambda r: Reply.text(
            str(sum(int(n) for n in re.findall(r"\d+", _last(r)["content"])[-2:]))
        )
        fixed = await evaluate(add, dataset, repeats=3, name="add (fixed)")
        change = compare(report, fixed)
        assert sorted(change.improved) == sorted(flaky_cases)
        assert change.regressed == []
        assert "2 improved, 0 regressed" in change.table()
        schema = await MatchesSchema(Sum).evaluate(dataset.cases[0], fixed_outcome(3))
        assert not schema.passed


def fixed_outcome(value: Any) -> Any:
    from simplellmfunc.evals import Outcome

    return Outcome(value)


async def test_bad_datasets_and_failing_targets_are_clear(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="unique"):
        Dataset([Case("a", {}), Case("a", {})])
    with pytest.raises(UserError, match="at least one case"):
        Dataset([])
    with pytest.raises(UserError, match="case 0"):
        Dataset.from_records([{"name": "x"}])
    path = tmp_path / "cases.jsonl"
    path.write_text('{"name": "ok", "inputs": {"x": 1}, "expected": 2}\n{oops\n')
    with pytest.raises(UserError, match=r"cases\.jsonl:2: not JSON"):
        Dataset.from_jsonl(path)
    with pytest.raises(UserError, match="concurrency"):
        await evaluate(lambda **_: None, Dataset([Case("a", {})]), concurrency=0)
    with pytest.raises(UserError, match="not an evaluation report"):
        Report.from_json({"cases": 3})

    async def broken(x: int) -> int:
        if x == 2:
            raise ValueError("no twos")
        await anyio.sleep(0.5 if x == 3 else 0)
        return x * 2

    dataset = Dataset(
        [Case(str(x), {"x": x}, expected=x * 2) for x in (1, 2, 3)],
        [Equals(), Predicate(lambda v, case: 1 / 0, name="crashes")],
    )
    report = await evaluate(broken, dataset, timeout=0.2)
    one, two, three = report.cases
    assert one.attempts[0].scores[0].passed
    assert "ZeroDivisionError" in one.attempts[0].scores[1].reason  # a broken evaluator fails
    assert two.attempts[0].error == "ValueError: no twos"
    assert three.attempts[0].error is not None
    assert "TimeoutError" in three.attempts[0].error
    assert report.pass_rate == 0.0


# -- the HTML page in a real browser -----------------------------------------------------------

CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium executable")
def test_the_html_report_in_headless_chromium(tmp_path: Path) -> None:
    playwright_api = pytest.importorskip("playwright.sync_api")

    async def two_reports() -> tuple[Report, Report]:
        async with MockLLMServer() as server:
            server.default = lambda r: Reply.text(_last(r)["content"].split()[-1].upper())
            async with OpenAICompatible("sk-evals-0123456789", "m", server.url) as llm:

                @llm_function(llm)
                async def shout(text: str) -> str:
                    """Repeat the text in capitals."""

                dataset = Dataset(
                    [Case(f"<case {i}>", {"text": f"w{i}"}, expected=f"W{i}") for i in range(10)],
                    [Equals(), Budget(max_seconds=5)],
                )
                before = await evaluate(shout, dataset, name="before")
                server.default = lambda r: Reply.text("W1")
                after = await evaluate(shout, dataset, name="after")
        return before, after

    before, after = anyio.run(two_reports)
    page_file = after.write_html(tmp_path / "report.html", baseline=before)
    html = page_file.read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<case 0>" not in html  # names are escaped

    requested: list[str] = []
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            page = browser.new_page()
            page.on("request", lambda request: requested.append(request.url))
            page.goto(page_file.as_uri())
            assert page.title() == "after on dataset"
            assert page.locator("#cases tr.case").count() == 10
            assert page.locator("#cases tr.case[data-passed=false]").count() == 9
            bars = page.locator("svg rect.bar")
            assert bars.count() >= 3 + 10  # pass@1, equals, budget; the latency bars
            box = bars.first.bounding_box()
            assert box is not None
            assert box["width"] > 0
            assert page.locator("#changes tr").count() == 1 + 9  # 9 cases regressed
            page.locator("#cases summary", has_text="<case 3>").click()
            assert page.locator("#cases details[open] pre").first.is_visible()
            summary = json.loads(page.locator("#summary").text_content() or "{}")
            assert summary["cases"] == 10
        finally:
            browser.close()
    assert requested == [page_file.as_uri()]  # self-contained: nothing else was fetched


def test_the_example_evaluates_records_and_replays(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "evaluate_review.py"
    env = {k: v for k, v in os.environ.items() if k not in ("EXAMPLE_MODEL", "OPENAI_MODEL")}
    result = subprocess.run(
        [sys.executable, str(example), "--out", str(tmp_path)],
        cwd=tmp_path,  # no .env here: the mock server plays the model
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert re.search(r"sarcasm\s+FAIL", result.stdout)
    assert "replayed offline: 8 calls, same verdicts: True" in result.stdout
    report = Report.load(tmp_path / "review.report.json")
    assert report.pass_at_k == 7 / 8
    assert "sk-example-key-0123456789" not in (tmp_path / "review.cassette.jsonl").read_text()
