"""Evaluations: run an ``@llm_function`` or an ``@llm_chat`` agent over a dataset of cases and
score every attempt.

Example:
    >>> from simplellmfunc.evals import Case, Dataset, Equals, evaluate
    >>> dataset = Dataset([Case("two", {"question": "1 + 1?"}, expected="2")], [Equals()])
    >>> report = await evaluate(answer, dataset, concurrency=8, repeats=3)  # doctest: +SKIP
    >>> print(report.table())  # doctest: +SKIP

Evaluators: :class:`Equals`, :class:`MatchesSchema`, :class:`Predicate`,
:class:`ToolTrajectory`, :class:`Budget` (cost, tokens, latency) and :class:`LLMJudge` (a
rubric); a :class:`Report` renders as a terminal table, JSON and a self-contained HTML page,
and :func:`compare` says which cases got better or worse between two reports. Record the
evaluation with a cassette (``simplellmfunc.testing.use_cassette``) to make it reproducible.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports, publish

if TYPE_CHECKING:
    from ._case import Case, Dataset, Evaluator, Outcome, Score, ToolCallRecord
    from ._evaluators import (
        Budget,
        Equals,
        JudgeVerdict,
        LLMJudge,
        MatchesSchema,
        Predicate,
        ToolTrajectory,
    )
    from ._report import Attempt, CaseChange, CaseResult, Comparison, Report, compare
    from ._runner import call_target, evaluate

__all__ = [
    "Attempt",
    "Budget",
    "Case",
    "CaseChange",
    "CaseResult",
    "Comparison",
    "Dataset",
    "Equals",
    "Evaluator",
    "JudgeVerdict",
    "LLMJudge",
    "MatchesSchema",
    "Outcome",
    "Predicate",
    "Report",
    "Score",
    "ToolCallRecord",
    "ToolTrajectory",
    "call_target",
    "compare",
    "evaluate",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Attempt": "._report",
        "Budget": "._evaluators",
        "Case": "._case",
        "CaseChange": "._report",
        "CaseResult": "._report",
        "Comparison": "._report",
        "Dataset": "._case",
        "Equals": "._evaluators",
        "Evaluator": "._case",
        "JudgeVerdict": "._evaluators",
        "LLMJudge": "._evaluators",
        "MatchesSchema": "._evaluators",
        "Outcome": "._case",
        "Predicate": "._evaluators",
        "Report": "._report",
        "Score": "._case",
        "ToolCallRecord": "._case",
        "ToolTrajectory": "._evaluators",
        "call_target": "._runner",
        "compare": "._report",
        "evaluate": "._runner",
    },
)

publish(__name__, __all__)
