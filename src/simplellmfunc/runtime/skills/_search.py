"""Finding skills for a task: word search over names, tags and descriptions, and a discovery
call that lets a model choose among the candidates."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from ...providers import LLMInterface, LLMRequest, LLMResponse, ResponseFormat
from ...types import SystemMessage, UserMessage
from ._skill import Skill

__all__ = ["DISCOVERY_PROMPT", "choose_skills", "discovery_request", "rank"]

_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = (
    "a an and are as at be by can do for from how i in is it me my of on or please the this to "
    "use using what when with you your"
)
_STOP = frozenset(_STOP_WORDS.split())
_PREFIX = 5

DISCOVERY_PROMPT = (
    "You choose skills for a task. Each skill has a name and a description of when to use it. "
    'Reply with JSON only: {"skills": [<names>]}, at most {limit} names, best first, only '
    'skills whose description fits the task; {"skills": []} when none does.'
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def _matches(word: str, words: set[str]) -> bool:
    """``word`` or a word sharing its first five letters (``summarize`` ~ ``summary``)."""
    if word in words:
        return True
    return len(word) >= _PREFIX and any(w[:_PREFIX] == word[:_PREFIX] for w in words)


def score(skill: Skill, query: set[str]) -> int:
    """How well ``skill`` matches the query words: name 3, tag 2, description 1 per word."""
    name = set(skill.name.split("-"))
    tags = {w for t in skill.tags for w in _words(t)}
    description = _words(skill.description)
    total = 0
    for word in query:
        if _matches(word, name):
            total += 3
        if _matches(word, tags):
            total += 2
        if _matches(word, description):
            total += 1
    return total


def rank(
    skills: Iterable[Skill], query: str, tags: Sequence[str] = (), limit: int | None = None
) -> list[Skill]:
    """The skills that match ``query`` and carry every tag of ``tags``, best first.

    An empty query matches every skill (sorted by name).
    """
    wanted = {t.lower() for t in tags}
    pool = [s for s in skills if wanted <= {t.lower() for t in s.tags}]
    words = _words(query)
    if not words:
        found = sorted(pool, key=lambda s: s.name)
    else:
        scored = [(score(s, words), s) for s in pool]
        found = [s for n, s in sorted(scored, key=lambda p: (-p[0], p[1].name)) if n > 0]
    return found if limit is None else found[:limit]


def discovery_request(
    llm: LLMInterface, task: str, candidates: Sequence[Skill], limit: int
) -> LLMRequest:
    """The request that asks a model to choose up to ``limit`` of ``candidates`` for ``task``."""
    catalogue = "\n".join(f"- {s.name}: {s.description}" for s in candidates)
    names = [s.name for s in candidates]
    schema = {
        "type": "object",
        "properties": {
            "skills": {"type": "array", "items": {"type": "string", "enum": names}},
        },
        "required": ["skills"],
        "additionalProperties": False,
    }
    form = ResponseFormat("skill_choice", schema) if llm.capabilities.json_schema else None
    return LLMRequest(
        (
            SystemMessage(DISCOVERY_PROMPT.replace("{limit}", str(limit))),
            UserMessage(f"Skills:\n{catalogue}\n\nTask:\n{task}"),
        ),
        response_format=form,
    )


def choose_skills(response: LLMResponse, candidates: Sequence[Skill], limit: int) -> list[Skill]:
    """The candidates the reply names: its JSON ``skills`` list, else the names in its text."""
    by_name = {s.name: s for s in candidates}
    text = response.text.strip()
    named: list[str] = []
    try:
        data = json.loads(text[text.find("{") : text.rfind("}") + 1]) if "{" in text else None
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("skills"), list):
        named = [n for n in data["skills"] if isinstance(n, str)]
    else:
        positions = {n: m.start() for n in by_name if (m := re.search(rf"\b{n}\b", text))}
        named = sorted(positions, key=positions.__getitem__)
    chosen = list(dict.fromkeys(n for n in named if n in by_name))
    return [by_name[n] for n in chosen[:limit]]
