"""The report of an evaluation: per case and attempt, aggregates, a table, JSON, comparison."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..exceptions import UserError
from ._case import Outcome, Score

__all__ = ["Attempt", "CaseChange", "CaseResult", "Comparison", "Report", "compare"]


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data (pydantic models dumped, anything else unknown as text)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    try:
        return json.loads(json.dumps(value, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One run of a case and its scores (``passed``: every score passed)."""

    output: Any
    scores: tuple[Score, ...]
    duration_s: float
    prompt_tokens: int
    completion_tokens: int
    tool_calls: tuple[tuple[str, Mapping[str, Any]], ...]
    error: str | None

    @property
    def passed(self) -> bool:
        return self.error is None and all(score.passed for score in self.scores)

    @property
    def score(self) -> float:
        """The mean of the scores (0 for a failed call)."""
        if self.error is not None or not self.scores:
            return 0.0 if self.error is not None else 1.0
        return sum(score.score for score in self.scores) / len(self.scores)

    @classmethod
    def of(cls, outcome: Outcome, scores: Sequence[Score]) -> Attempt:
        return cls(
            jsonable(outcome.output),
            tuple(scores),
            outcome.duration_s,
            outcome.usage.prompt_tokens,
            outcome.usage.completion_tokens,
            tuple((call.name, jsonable(dict(call.arguments))) for call in outcome.tool_calls),
            outcome.error,
        )


@dataclass(frozen=True, slots=True)
class CaseResult:
    """A case and its attempts."""

    name: str
    inputs: Mapping[str, Any]
    expected: Any
    metadata: Mapping[str, Any]
    attempts: tuple[Attempt, ...]

    @property
    def passed(self) -> bool:
        """pass@k: at least one of the k attempts passed."""
        return any(attempt.passed for attempt in self.attempts)

    @property
    def passed_every_time(self) -> bool:
        """pass^k: every attempt passed."""
        return all(attempt.passed for attempt in self.attempts)

    @property
    def pass_rate(self) -> float:
        return sum(a.passed for a in self.attempts) / len(self.attempts)


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@dataclass(frozen=True, slots=True)
class Report:
    """The result of :func:`~simplellmfunc.evals.evaluate`.

    Attributes:
        name: What was evaluated.
        dataset: The dataset's name.
        repeats: Attempts per case (k).
        duration_s: Wall-clock seconds of the whole evaluation.
        cases: One result per case, in dataset order.
    """

    name: str
    dataset: str
    repeats: int
    duration_s: float
    cases: tuple[CaseResult, ...]

    # -- aggregates ----------------------------------------------------------------------------

    @property
    def attempts(self) -> list[Attempt]:
        return [attempt for case in self.cases for attempt in case.attempts]

    @property
    def pass_at_k(self) -> float:
        """The share of cases that passed in at least one of their k attempts."""
        return sum(case.passed for case in self.cases) / len(self.cases)

    @property
    def pass_every_k(self) -> float:
        """The share of cases that passed in all their k attempts (pass^k)."""
        return sum(case.passed_every_time for case in self.cases) / len(self.cases)

    @property
    def pass_rate(self) -> float:
        """The share of attempts that passed."""
        attempts = self.attempts
        return sum(a.passed for a in attempts) / len(attempts)

    @property
    def evaluator_pass_rates(self) -> dict[str, float]:
        """Per evaluator, the share of its scores that passed."""
        seen: dict[str, list[bool]] = {}
        for attempt in self.attempts:
            for score in attempt.scores:
                seen.setdefault(score.evaluator, []).append(score.passed)
        return {name: sum(v) / len(v) for name, v in seen.items()}

    @property
    def latency(self) -> dict[str, float]:
        """Seconds per attempt: mean, p50, p95, max."""
        values = [a.duration_s for a in self.attempts]
        return {
            "mean": statistics.fmean(values),
            "p50": _percentile(values, 0.5),
            "p95": _percentile(values, 0.95),
            "max": max(values),
        }

    @property
    def tokens(self) -> dict[str, int]:
        attempts = self.attempts
        prompt = sum(a.prompt_tokens for a in attempts)
        completion = sum(a.completion_tokens for a in attempts)
        return {"prompt": prompt, "completion": completion, "total": prompt + completion}

    def summary(self) -> dict[str, Any]:
        """The aggregates as one dict."""
        return {
            "cases": len(self.cases),
            "repeats": self.repeats,
            "pass_at_k": self.pass_at_k,
            "pass_every_k": self.pass_every_k,
            "pass_rate": self.pass_rate,
            "evaluators": self.evaluator_pass_rates,
            "latency_s": self.latency,
            "tokens": self.tokens,
            "duration_s": self.duration_s,
            "errors": sum(a.error is not None for a in self.attempts),
        }

    # -- renderings ----------------------------------------------------------------------------

    def table(self, width: int = 100) -> str:
        """A terminal table: one row per case, then the totals."""
        k = self.repeats
        names = list(self.evaluator_pass_rates)
        header = ["case", f"pass@{k}", "rate", *names, "seconds", "tokens"]
        rows = [header]
        for case in self.cases:
            per = {
                name: sum(s.passed for a in case.attempts for s in a.scores if s.evaluator == name)
                for name in names
            }
            rows.append(
                [
                    case.name,
                    "PASS" if case.passed else "FAIL",
                    f"{case.pass_rate:.0%}",
                    *(f"{per[name]}/{len(case.attempts)}" for name in names),
                    f"{statistics.fmean(a.duration_s for a in case.attempts):.3f}",
                    str(sum(a.prompt_tokens + a.completion_tokens for a in case.attempts)),
                ]
            )
        rates = self.evaluator_pass_rates
        rows.append(
            [
                "TOTAL",
                f"{self.pass_at_k:.0%}",
                f"{self.pass_rate:.0%}",
                *(f"{rates[name]:.0%}" for name in names),
                f"{self.latency['mean']:.3f}",
                str(self.tokens["total"]),
            ]
        )
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        widths[0] = min(widths[0], max(8, width - sum(widths[1:]) - 2 * len(widths)))

        def line(row: Sequence[str]) -> str:
            cells = [row[0][: widths[0]].ljust(widths[0])]
            cells += [cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True)]
            return "  ".join(cells)

        rule = "-" * len(line(header))
        title = f"{self.name} on {self.dataset}: {len(self.cases)} cases x {k}"
        body = [line(row) for row in rows[1:-1]]
        return "\n".join([title, line(header), rule, *body, rule, line(rows[-1])])

    def to_json(self) -> dict[str, Any]:
        """The whole report as JSON data (:meth:`from_json` reads it back)."""
        return {
            "report": 1,
            "name": self.name,
            "dataset": self.dataset,
            "repeats": self.repeats,
            "duration_s": self.duration_s,
            "summary": self.summary(),
            "cases": [
                {
                    "name": case.name,
                    "inputs": jsonable(dict(case.inputs)),
                    "expected": jsonable(case.expected),
                    "metadata": jsonable(dict(case.metadata)),
                    "attempts": [
                        {
                            "output": a.output,
                            "passed": a.passed,
                            "duration_s": a.duration_s,
                            "prompt_tokens": a.prompt_tokens,
                            "completion_tokens": a.completion_tokens,
                            "tool_calls": [list(call) for call in a.tool_calls],
                            "error": a.error,
                            "scores": [
                                {
                                    "evaluator": s.evaluator,
                                    "passed": s.passed,
                                    "score": s.score,
                                    "reason": s.reason,
                                }
                                for s in a.scores
                            ],
                        }
                        for a in case.attempts
                    ],
                }
                for case in self.cases
            ],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Report:
        """A report from :meth:`to_json` data.

        Raises:
            UserError: When ``data`` is not a report.
        """
        try:
            cases = tuple(
                CaseResult(
                    case["name"],
                    case["inputs"],
                    case["expected"],
                    case["metadata"],
                    tuple(
                        Attempt(
                            a["output"],
                            tuple(
                                Score(s["evaluator"], s["passed"], s["score"], s["reason"])
                                for s in a["scores"]
                            ),
                            a["duration_s"],
                            a["prompt_tokens"],
                            a["completion_tokens"],
                            tuple((name, args) for name, args in a["tool_calls"]),
                            a["error"],
                        )
                        for a in case["attempts"]
                    ),
                )
                for case in data["cases"]
            )
            return cls(data["name"], data["dataset"], data["repeats"], data["duration_s"], cases)
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"not an evaluation report: {type(exc).__name__}: {exc}") from None

    def write_json(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), indent=1, ensure_ascii=False), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Report:
        """A report from a file :meth:`write_json` wrote.

        Raises:
            UserError: When the file cannot be read or is not a report.
        """
        try:
            return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read report {path}: {exc}") from None

    def to_html(self, baseline: Report | None = None) -> str:
        """A self-contained HTML page (inline CSS and SVG chart, no external assets); with a
        ``baseline``, a comparison section too."""
        from ._html import render

        return render(self, compare(baseline, self) if baseline is not None else None)

    def write_html(self, path: str | Path, baseline: Report | None = None) -> Path:
        path = Path(path)
        path.write_text(self.to_html(baseline), encoding="utf-8")
        return path


@dataclass(frozen=True, slots=True)
class CaseChange:
    """A case in two reports: its pass rate in each (``None``: not in that report)."""

    name: str
    before: float | None
    after: float | None

    @property
    def status(self) -> str:
        """``improved``, ``regressed``, ``unchanged``, ``added`` or ``removed``."""
        if self.before is None:
            return "added"
        if self.after is None:
            return "removed"
        if self.after > self.before:
            return "improved"
        if self.after < self.before:
            return "regressed"
        return "unchanged"


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two reports side by side: which cases got better or worse."""

    before: Report
    after: Report
    changes: tuple[CaseChange, ...]

    def of(self, status: str) -> list[str]:
        """The names of the cases with ``status`` (see :attr:`CaseChange.status`)."""
        return [change.name for change in self.changes if change.status == status]

    @property
    def improved(self) -> list[str]:
        return self.of("improved")

    @property
    def regressed(self) -> list[str]:
        return self.of("regressed")

    def table(self) -> str:
        """A terminal table of the cases that changed, then the totals."""
        lines = [f"{self.before.name} -> {self.after.name}"]
        for change in self.changes:
            if change.status != "unchanged":
                before = "-" if change.before is None else f"{change.before:.0%}"
                after = "-" if change.after is None else f"{change.after:.0%}"
                lines.append(f"  {change.status:<10} {change.name}: {before} -> {after}")
        lines.append(
            f"pass@k {self.before.pass_at_k:.0%} -> {self.after.pass_at_k:.0%}; "
            f"{len(self.improved)} improved, {len(self.regressed)} regressed"
        )
        return "\n".join(lines)


def compare(before: Report, after: Report) -> Comparison:
    """How ``after`` differs from ``before``, case by case (cases matched by name)."""
    old = {case.name: case.pass_rate for case in before.cases}
    new = {case.name: case.pass_rate for case in after.cases}
    names = [*old, *(name for name in new if name not in old)]
    return Comparison(before, after, tuple(CaseChange(n, old.get(n), new.get(n)) for n in names))
