"""Skills: an agent that sees only the names and descriptions of its skills, and loads one
(instructions, files, scripts, tools) when a task needs it.

A skill is a folder with a `SKILL.md` (YAML front matter with `name` and `description`, then
Markdown instructions) and any scripts or files beside it — the Agent Skills format — or a Python
function decorated with `@skill`, which bundles tools and instructions. Here the agent answers
two questions: one with a folder skill (it reads the skill's reference file and runs its script),
one with a Python skill that a `skill_agent` finds by itself before answering.

    .venv/bin/python examples/skills_agent.py

The model comes from .env (see _model.py); without one a scripted model plays its part.
"""

import json
import tempfile
from pathlib import Path

from _model import pick_model, run

from simplellmfunc import llm_chat
from simplellmfunc.events import ToolCallEndEvent, ToolCallStartEvent, is_event_yield
from simplellmfunc.runtime.skills import SkillRegistry, Skills, skill, skill_agent
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

SKILL_MD = """---
name: csv-stats
description: Summarize a CSV file (row count, column means). Use for questions about CSV data.
tags: [data, csv]
---

# CSV statistics

1. Read `notes.md` for the conventions of this team.
2. Run `scripts/stats.py FILE` on the CSV file; it prints the row count and the column means.
3. Answer with the numbers, rounded as `notes.md` says.
"""
STATS_PY = """import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
means = {k: statistics.mean(float(r[k]) for r in rows) for k in rows[0]}
print(f"rows={len(rows)} " + " ".join(f"mean_{k}={v:.3f}" for k, v in means.items()))
"""
NOTES = "Round means to one decimal.\n"
DATA = "x,y\n1,10\n2,20\n4,40\n"


@skill("unit-convert", "Convert temperatures between Celsius and Fahrenheit", tags=["units"])
def celsius_to_fahrenheit(celsius: float) -> float:
    """Convert with celsius_to_fahrenheit and give the answer to one decimal."""
    return celsius * 9 / 5 + 32


def call(tool_name: str, **arguments: object) -> object:
    return ScriptedLLM.response(tool_calls=[ToolCallSpec(tool_name, arguments)])


def make_skills(root: Path) -> SkillRegistry:
    folder = root / "skills" / "csv-stats"
    (folder / "scripts").mkdir(parents=True)
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "scripts" / "stats.py").write_text(STATS_PY)
    (folder / "notes.md").write_text(NOTES)
    (root / "data.csv").write_text(DATA)
    return SkillRegistry([celsius_to_fahrenheit], dirs=[root / "skills"])


async def show(agent: object, question: str) -> None:
    print(f"user> {question}")
    async for item in agent(question, history=[]):  # type: ignore[operator]
        if not is_event_yield(item):
            loads = [
                json.loads(call["function"]["arguments"]).get("name")
                for message in item.messages
                for call in message.get("tool_calls", [])
                if call["function"]["name"] == "load_skill"
            ]
            print(f"loaded skills: {loads}")
            print(f"assistant> {item.response}")
        elif isinstance(item.event, ToolCallStartEvent):
            print(f"  → {item.event.tool_name}({item.event.arguments})")
        elif isinstance(item.event, ToolCallEndEvent):
            print(f"  ← {item.event.result.splitlines()[0][:70]}")


async def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        registry = make_skills(root)
        data = str(root / "data.csv")
        llm = pick_model(
            call("load_skill", name="csv-stats"),
            call("read_skill_file", skill="csv-stats", path="notes.md"),
            call("run_skill_script", skill="csv-stats", script="scripts/stats.py", args=[data]),
            "data.csv has 3 rows; mean x = 2.3, mean y = 23.3.",
            # the second agent: search found unit-convert before the first call
            call("celsius_to_fahrenheit", celsius=21.5),
            "21.5 °C is 70.7 °F.",
        )
        print("skills:", [s.name for s in registry])

        @llm_chat(llm, toolkit=[Skills(registry, scripts=True)], enable_event=True)
        async def analyst(question: str, history: list[dict[str, str]]) -> None:
            """You answer questions about data. Use your skills."""

        await show(analyst, f"How many rows does {data} have, and what are the column means?")
        finder = skill_agent(llm, registry, discover="search", enable_event=True)
        await show(finder, "Convert the temperature 21.5 Celsius to Fahrenheit.")


if __name__ == "__main__":
    run(main)
