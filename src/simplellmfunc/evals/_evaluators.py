"""Evaluators: each scores one attempt of one case (an :class:`Outcome`)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from ..exceptions import UserError
from ..providers import LLMInterface
from ._case import Case, Outcome, Score, ToolCallRecord

__all__ = [
    "Budget",
    "Equals",
    "JudgeVerdict",
    "LLMJudge",
    "MatchesSchema",
    "Predicate",
    "ToolTrajectory",
]


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


@dataclass(frozen=True, slots=True)
class Equals:
    """The output equals ``expected`` (by default the case's ``expected``); pydantic models
    compare by their JSON dump, text optionally without surrounding space or case."""

    expected: Any = None
    strip: bool = True
    ignore_case: bool = False
    name: str = "equals"

    async def evaluate(self, case: Case, outcome: Outcome) -> Score:
        expected = _plain(self.expected if self.expected is not None else case.expected)
        actual = _plain(outcome.output)
        if isinstance(expected, str) and isinstance(actual, str):
            if self.strip:
                expected, actual = expected.strip(), actual.strip()
            if self.ignore_case:
                expected, actual = expected.casefold(), actual.casefold()
        passed = expected == actual
        reason = "" if passed else f"expected {expected!r}, got {actual!r}"
        return Score(self.name, passed, float(passed), reason[:500])


@dataclass(frozen=True, slots=True)
class MatchesSchema:
    """The output validates against a type (a pydantic model, a ``TypedDict`` ...) or a JSON
    schema dict (checked with pydantic for the type, structurally for ``required``/``type``
    of a schema's top level)."""

    schema: Any
    name: str = "schema"

    async def evaluate(self, case: Case, outcome: Outcome) -> Score:
        value = _plain(outcome.output)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        if isinstance(self.schema, Mapping):
            problem = _schema_problem(self.schema, value)
        else:
            try:
                TypeAdapter(self.schema).validate_python(value)
                problem = ""
            except ValidationError as exc:
                problem = "; ".join(f"{e['loc']}: {e['msg']}" for e in exc.errors()[:3])
        return Score(self.name, not problem, float(not problem), problem)


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _schema_problem(schema: Mapping[str, Any], value: Any, where: str = "$") -> str:
    kind = schema.get("type")
    if (
        isinstance(kind, str)
        and kind in _JSON_TYPES
        and (
            not isinstance(value, _JSON_TYPES[kind])
            or (kind in ("integer", "number") and isinstance(value, bool))
        )
    ):
        return f"{where}: expected {kind}, got {type(value).__name__}"
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                return f"{where}: missing required {key!r}"
        for key, sub in schema.get("properties", {}).items():
            if (
                key in value
                and isinstance(sub, Mapping)
                and (problem := _schema_problem(sub, value[key], f"{where}.{key}"))
            ):
                return problem
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            if problem := _schema_problem(schema["items"], item, f"{where}[{index}]"):
                return problem
    if "enum" in schema and value not in schema["enum"]:
        return f"{where}: {value!r} is not one of {schema['enum']}"
    return ""


@dataclass(frozen=True, slots=True)
class Predicate:
    """A Python check: ``check(output)`` or ``check(output, case)`` (sync or async) returns a
    bool, or a float in [0, 1] that passes at ``threshold``."""

    check: Callable[..., Any]
    name: str = "predicate"
    threshold: float = 1.0

    async def evaluate(self, case: Case, outcome: Outcome) -> Score:
        takes_case = len(inspect.signature(self.check).parameters) >= 2
        value = self.check(outcome.output, case) if takes_case else self.check(outcome.output)
        if inspect.isawaitable(value):
            value = await value
        score = float(value)
        passed = bool(value) if isinstance(value, bool) else score >= self.threshold
        return Score(self.name, passed, score, "" if passed else f"{self.name} returned {value!r}")


@dataclass(frozen=True, slots=True)
class ToolTrajectory:
    """The run called the expected tools (the case's ``trajectory`` unless given).

    Attributes:
        order: ``exact``: these calls and no others, in this order; ``in_order``: these calls
            in this order, others allowed between; ``any_order``: these calls, in any order.
        arguments: ``exact``: equal arguments; ``subset``: the expected ones present with
            these values; ``ignore``: names only.
    """

    expected: Sequence[ToolCallRecord] | None = None
    order: Literal["exact", "in_order", "any_order"] = "exact"
    arguments: Literal["exact", "subset", "ignore"] = "exact"
    name: str = "trajectory"

    def _same(self, want: ToolCallRecord, got: ToolCallRecord) -> bool:
        if want.name != got.name:
            return False
        if self.arguments == "ignore":
            return True
        if self.arguments == "subset":
            return all(got.arguments.get(k) == v for k, v in want.arguments.items())
        return dict(want.arguments) == dict(got.arguments)

    async def evaluate(self, case: Case, outcome: Outcome) -> Score:
        expected = list(self.expected if self.expected is not None else case.trajectory or ())
        actual = list(outcome.tool_calls)
        matched = 0
        if self.order == "any_order":
            pool = list(actual)
            for want in expected:
                hit = next((i for i, got in enumerate(pool) if self._same(want, got)), None)
                if hit is not None:
                    pool.pop(hit)
                    matched += 1
            passed = matched == len(expected)
        else:
            position = 0
            for want in expected:
                while position < len(actual) and not self._same(want, actual[position]):
                    if self.order == "exact":
                        break
                    position += 1
                if position < len(actual) and self._same(want, actual[position]):
                    matched += 1
                    position += 1
                elif self.order == "exact":
                    break
            passed = matched == len(expected)
            if self.order == "exact":
                passed = passed and len(actual) == len(expected)
        score = matched / len(expected) if expected else float(not actual or self.order != "exact")
        reason = (
            ""
            if passed
            else (
                f"expected {[(c.name, dict(c.arguments)) for c in expected]}, "
                f"got {[(c.name, dict(c.arguments)) for c in actual]}"
            )
        )
        return Score(self.name, passed, score, reason[:500])


@dataclass(frozen=True, slots=True)
class Budget:
    """Cost and latency budgets of one attempt; ``None`` leaves a limit out.

    Attributes:
        max_seconds: Wall-clock seconds of the call.
        max_tokens: Total tokens over the run's LLM calls.
        max_cost: Cost, at ``input_price`` / ``output_price`` per million tokens.
    """

    max_seconds: float | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    input_price: float = 0.0
    output_price: float = 0.0
    name: str = "budget"

    def cost(self, outcome: Outcome) -> float:
        """The attempt's cost at this budget's prices."""
        usage = outcome.usage
        return (
            usage.prompt_tokens * self.input_price + usage.completion_tokens * self.output_price
        ) / 1_000_000

    async def evaluate(self, case: Case, outcome: Outcome) -> Score:
        over = []
        if self.max_seconds is not None and outcome.duration_s > self.max_seconds:
            over.append(f"{outcome.duration_s:.3f}s > {self.max_seconds}s")
        if self.max_tokens is not None and outcome.usage.total_tokens > self.max_tokens:
            over.append(f"{outcome.usage.total_tokens} tokens > {self.max_tokens}")
        if self.max_cost is not None and (cost := self.cost(outcome)) > self.max_cost:
            over.append(f"cost {cost:.6f} > {self.max_cost}")
        return Score(self.name, not over, float(not over), "; ".join(over))


class JudgeVerdict(BaseModel):
    """What the judge model answers."""

    score: float = Field(ge=0, le=1, description="How well the answer meets the rubric, 0 to 1")
    reason: str = Field(description="One or two sentences: why this score")


@dataclass(frozen=True, slots=True)
class LLMJudge:
    """A model grades the output against a rubric; passes at ``threshold``.

    The judge sees the case's inputs, its expected output (when there is one), the output and
    the rubric, and answers a :class:`JudgeVerdict`.
    """

    llm: LLMInterface
    rubric: str
    threshold: float = 0.5
    name: str = "judge"
    _judge: list[Callable[..., Awaitable[JudgeVerdict]]] = field(
        default_factory=list, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        if not self.rubric.strip():
            raise UserError("LLMJudge needs a rubric")

    def _function(self) -> Callable[..., Awaitable[JudgeVerdict]]:
        if not self._judge:
            from ..decorators import llm_function

            @llm_function(self.llm)
            async def judge(rubric: str, inputs: str, expected: str, output: str) -> JudgeVerdict:
                """You grade the output of an AI function against a rubric. Read the inputs,
                the expected output (may be empty) and the actual output; score from 0 (fails
                the rubric) to 1 (fully meets it), and say why."""
                raise NotImplementedError  # the model answers; the body never runs

            self._judge.append(judge)
        return self._judge[0]

    async def evaluate(self, case: Case, outcome: Outcome) -> Score:
        verdict = await self._function()(
            rubric=self.rubric,
            inputs=json.dumps(_plain(dict(case.inputs)), default=str, ensure_ascii=False),
            expected=""
            if case.expected is None
            else json.dumps(_plain(case.expected), default=str),
            output=json.dumps(_plain(outcome.output), default=str, ensure_ascii=False),
        )
        passed = verdict.score >= self.threshold
        return Score(self.name, passed, verdict.score, verdict.reason)
