"""FileToolset: an agent reads, searches and edits the files of one workspace folder.

Every path is resolved inside the workspace (`..` and symlinks out of it are refused), and a
file must be read before it is edited: if it changed on disk since, the edit is refused and the
model is told to read it again. Here the agent fixes a bug in a small project in a temp folder.

    .venv/bin/python examples/file_toolset_edit.py

The model comes from .env (see _model.py); without one a scripted model plays its part.
"""

import difflib
import sys
import tempfile
from pathlib import Path

import anyio
from _model import note_if, pick_model, run

from simplellmfunc import FileToolset, llm_chat
from simplellmfunc.events import ToolCallEndEvent, ToolCallStartEvent, is_event_yield
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

STATS = '''"""Small statistics helpers."""


def mean(values):
    return sum(values) / (len(values) + 1)


def spread(values):
    return max(values) - min(values)
'''
BUG = r"\(len\(values\) \+ 1\)"  # a regular expression
CHECK = "from stats import mean; print(mean([1, 2, 3]))"  # run on the file as the agent left it


def call(name: str, **arguments: object) -> object:
    return ScriptedLLM.response(tool_calls=[ToolCallSpec(name, arguments)])


SCRIPT = [
    call("grep", pattern=r"def mean", path_pattern="*.py"),
    call("read_file", path="stats.py"),
    call(
        "sed",
        path="stats.py",
        start_line=5,
        end_line=5,
        pattern_to_be_replaced=BUG,
        new_string="len(values)",
    ),
    "Fixed: mean() divided by len(values) + 1; it now divides by len(values).",
]


async def main() -> None:
    llm = pick_model(*SCRIPT)
    with tempfile.TemporaryDirectory() as work:
        project = Path(work)
        (project / "stats.py").write_text(STATS)
        files = FileToolset(project)  # read_file, read_image, grep, sed, echo_into

        @llm_chat(llm, toolkit=files.toolset, enable_event=True)
        async def fixer(message: str, history: list | None = None):
            """You fix bugs in the project's files. Find the code, read it, then edit it."""

        async with llm:
            async for item in fixer("mean([1, 2, 3]) should be 2. Fix stats.py."):
                if not is_event_yield(item):
                    print(f"\nassistant: {item.response}")
                    continue
                match item.event:
                    case ToolCallStartEvent(tool_name=name, arguments=args):
                        print(f"→ {name}({', '.join(f'{k}={v!r}' for k, v in args.items())})")
                    case ToolCallEndEvent(result=result):
                        print("  " + "\n  ".join(result.splitlines()[:6]))

        after = (project / "stats.py").read_text()
        diff = difflib.unified_diff(STATS.splitlines(), after.splitlines(), "before", "after")
        print("\n".join(line.rstrip() for line in diff))
        check = await anyio.run_process([sys.executable, "-c", CHECK], cwd=project, check=False)
        output = check.stdout.decode().strip() or check.stderr.decode().strip()
        value = output.splitlines()[-1] if output else "nothing"
        fixed = value == "2.0"
        print("mean ok: mean([1, 2, 3]) == 2" if fixed else f"not fixed: mean([1, 2, 3]) = {value}")
        note_if(not fixed, "stats.py is still wrong")


if __name__ == "__main__":
    run(main)
