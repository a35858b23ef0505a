"""Cases and datasets, what one call of the target produced, and scores."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, ValidationError

from .._usage import Usage
from ..exceptions import UserError

__all__ = ["Case", "Dataset", "Evaluator", "Outcome", "Score", "ToolCallRecord"]


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool call a run made: the tool's name and the parsed arguments."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@runtime_checkable
class Evaluator(Protocol):
    """Scores an attempt: ``await evaluator.evaluate(case, outcome)``; ``name`` labels it."""

    @property
    def name(self) -> str: ...

    async def evaluate(self, case: Case, outcome: Outcome) -> Score:
        """The verdict on ``outcome``, the result of running ``case``."""
        ...


@dataclass(frozen=True, slots=True)
class Case:
    """One case of a dataset.

    Attributes:
        name: Unique within the dataset (reports and comparisons key on it).
        inputs: The target's keyword arguments (an agent's: ``message`` and the others).
        expected: The expected output, for :class:`~simplellmfunc.evals.Equals`.
        trajectory: The expected tool calls, for :class:`~simplellmfunc.evals.ToolTrajectory`.
        metadata: Anything else (tags, difficulty, ...); kept in the report.
        evaluators: Evaluators for this case only, run after the dataset's.
    """

    name: str
    inputs: Mapping[str, Any]
    expected: Any = None
    trajectory: Sequence[ToolCallRecord] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    evaluators: Sequence[Evaluator] = ()


class _CaseModel(BaseModel):
    """A case as a file holds it (JSON / JSONL)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    inputs: dict[str, Any]
    expected: Any = None
    trajectory: list[tuple[str, dict[str, Any]]] | None = None
    metadata: dict[str, Any] = {}


@dataclass(frozen=True, slots=True)
class Dataset:
    """Cases and the evaluators every case is scored with.

    Raises:
        UserError: When two cases share a name, or there is no case.
    """

    cases: Sequence[Case]
    evaluators: Sequence[Evaluator] = ()
    name: str = "dataset"

    def __post_init__(self) -> None:
        if not self.cases:
            raise UserError("a dataset needs at least one case")
        names = [case.name for case in self.cases]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise UserError(f"case names must be unique; repeated: {duplicates}")

    @classmethod
    def from_records(
        cls,
        records: Iterable[Mapping[str, Any]],
        evaluators: Sequence[Evaluator] = (),
        name: str = "dataset",
    ) -> Dataset:
        """A dataset from plain dicts (``name``, ``inputs``, ``expected``, ``trajectory`` as
        ``[[tool, arguments], ...]``, ``metadata``).

        Raises:
            UserError: Naming the record that is invalid and why.
        """
        cases = []
        for index, record in enumerate(records):
            try:
                model = _CaseModel.model_validate(record)
            except ValidationError as exc:
                raise UserError(
                    f"case {index}: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}"
                ) from None
            trajectory = (
                None
                if model.trajectory is None
                else tuple(ToolCallRecord(n, a) for n, a in model.trajectory)
            )
            cases.append(Case(model.name, model.inputs, model.expected, trajectory, model.metadata))
        return cls(tuple(cases), evaluators, name)

    @classmethod
    def from_jsonl(
        cls, path: str | Path, evaluators: Sequence[Evaluator] = (), name: str | None = None
    ) -> Dataset:
        """A dataset from a JSON Lines file, one case per line (see :meth:`from_records`).

        Raises:
            UserError: When the file cannot be read or a line is invalid.
        """
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise UserError(f"cannot read dataset {path}: {exc}") from None
        records = []
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except ValueError as exc:
                    raise UserError(f"{path}:{number}: not JSON: {exc}") from None
        return cls.from_records(records, evaluators, name or path.stem)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one call of the target produced.

    Attributes:
        output: The return value (a parsed value for an ``@llm_function``, the answer text for
            an agent); ``None`` when the call failed.
        tool_calls: The tool calls the run made, in order.
        usage: Tokens over every LLM call of the run (zero when the target reports none).
        duration_s: Wall-clock seconds of the call.
        error: ``"ExceptionType: message"`` when the call raised.
        messages: The final history (chat dicts), when the target gives one.
    """

    output: Any
    tool_calls: tuple[ToolCallRecord, ...] = ()
    usage: Usage = field(default_factory=Usage)
    duration_s: float = 0.0
    error: str | None = None
    messages: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Score:
    """One evaluator's verdict on one attempt: passed or not, a score in [0, 1], and why."""

    evaluator: str
    passed: bool
    score: float
    reason: str = ""
