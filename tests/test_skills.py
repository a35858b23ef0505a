"""Skills: Agent Skills folders on disk, Python skills, search and discovery, and agents that
load skills on demand, against the mock LLM server at the wire."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.exceptions import SkillError
from simplellmfunc.hooks import ReactEndEvent, ResponseYield
from simplellmfunc.runtime.skills import (
    Skill,
    SkillRegistry,
    Skills,
    find_skill_folders,
    read_skill_folder,
    skill,
    skill_agent,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 30  # seconds: a deadlock guard, never an assertion on speed

PDF_BODY = "# Filling PDF forms\n\nRun `scripts/fields.py FILE` to list the fields."


def write_skill(root: Path, name: str, description: str, body: str, **extra: Any) -> Path:
    """A skill folder in the Agent Skills format under ``root``."""
    folder = root / name
    folder.mkdir(parents=True)
    front = {"name": name, "description": description, **extra}
    lines = [f"{k}: {json.dumps(v)}" for k, v in front.items()]
    (folder / "SKILL.md").write_text("---\n" + "\n".join(lines) + "\n---\n\n" + body + "\n")
    return folder


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    pdf = write_skill(
        root, "pdf-forms", "Fill in PDF forms and list their fields.", PDF_BODY, tags=["pdf"]
    )
    (pdf / "scripts").mkdir()
    (pdf / "scripts" / "fields.py").write_text(
        "import sys\nprint('fields of', sys.argv[1], ': name, date')\n"
    )
    (pdf / "reference.md").write_text("Field names are case sensitive.\nDates are ISO 8601.\n")
    write_skill(
        root,
        "release-notes",
        "Write release notes from a list of merged changes.",
        "Group changes as Added / Fixed / Removed.",
        metadata={"tags": ["writing", "git"]},
    )
    return root


def weather_skill() -> Skill:
    @tool
    def to_fahrenheit(celsius: float) -> float:
        """Convert Celsius to Fahrenheit."""
        return celsius * 9 / 5 + 32

    @skill("weather", "Look up the weather of a city", tags=["weather"], tools=[to_fahrenheit])
    def get_weather(city: str) -> str:
        """Call get_weather, then to_fahrenheit when the user wants Fahrenheit."""
        return f"{city}: 14 C, rain showers"

    return get_weather


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", mock_server.url) as model:
        yield model


async def run(agent: Any, *args: Any, **kwargs: Any) -> list[Any]:
    with anyio.fail_after(GUARD):
        async with aclosing(agent(*args, **kwargs)) as items:
            return [item async for item in items]


def offered(server: MockLLMServer, request: int) -> list[str]:
    return [t["function"]["name"] for t in server.requests[request].json.get("tools", [])]


def system_text(server: MockLLMServer, request: int) -> str:
    first = server.requests[request].json["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


def tool_results(server: MockLLMServer, request: int) -> dict[str, str]:
    messages = server.requests[request].json["messages"]
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


def assert_valid(history: list[dict[str, Any]]) -> None:
    """Every assistant tool call is answered by exactly one tool message."""
    calls = [c["id"] for m in history if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answers = [m["tool_call_id"] for m in history if m["role"] == "tool"]
    assert sorted(calls) == sorted(answers)


# ---- folders -------------------------------------------------------------------------------


def test_a_skill_folder_gives_name_description_tags_and_a_lazy_body(skills_dir: Path) -> None:
    registry = SkillRegistry(dirs=[skills_dir])
    assert [s.name for s in registry] == ["pdf-forms", "release-notes"]
    pdf = registry.get("pdf-forms")
    assert pdf.description == "Fill in PDF forms and list their fields."
    assert pdf.tags == ("pdf",)
    assert pdf.folder == (skills_dir / "pdf-forms").resolve()
    assert pdf.instructions is None  # the body is read when loaded, not at discovery
    assert registry.get("release-notes").tags == ("writing", "git")
    assert registry.get("release-notes").metadata["metadata"] == {"tags": ["writing", "git"]}
    assert registry.stats()["folder_skills"] == 2


def test_discovery_skips_hidden_folders_and_a_skills_own_subfolders(tmp_path: Path) -> None:
    outer = write_skill(tmp_path, "outer", "Outer skill.", "body")
    write_skill(outer / "examples", "inner", "Inner example skill.", "body")
    write_skill(tmp_path / ".cache", "hidden", "Hidden skill.", "body")
    write_skill(tmp_path / "group", "grouped", "A skill one level down.", "body")
    assert [p.name for p in find_skill_folders(tmp_path)] == ["grouped", "outer"]
    assert [p.name for p in find_skill_folders(outer)] == ["outer"]  # a skill folder itself


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no front matter\n", "must start with YAML front matter"),
        ("---\nname: broken\n", "no closing '---'"),
        ("---\n- a list\n---\n", "must be a mapping"),
        ("---\nname: broken\n---\nbody\n", "non-empty 'description'"),
        ("---\nname: Broken_Name\ndescription: x\n---\n", "invalid skill name"),
        ("---\nname: other\ndescription: x\n---\n", "must be the folder's 'broken'"),
        ("---\nname: broken\ndescription: [x\n---\n", "invalid YAML"),
    ],
)
def test_an_invalid_skill_md_is_refused_with_its_path(
    tmp_path: Path, text: str, problem: str
) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "SKILL.md").write_text(text)
    with pytest.raises(SkillError, match=problem) as raised:
        read_skill_folder(folder)
    assert str(folder) in str(raised.value)


def test_names_are_unique_and_unknown_names_list_the_known(skills_dir: Path) -> None:
    registry = SkillRegistry(dirs=[skills_dir])
    with pytest.raises(SkillError, match="two skills are named 'pdf-forms'"):
        registry.add_dir(skills_dir / "pdf-forms")
    with pytest.raises(SkillError, match=r"no skill is named 'nope' \(skills: pdf-forms, rel"):
        registry.get("nope")
    with pytest.raises(SkillError, match="not a directory"):
        registry.add_dir(skills_dir / "missing")


# ---- Python skills and search -----------------------------------------------------------------


async def test_skill_bundles_the_function_its_tools_and_instructions() -> None:
    weather = weather_skill()
    assert [t.name for t in weather.tools] == ["get_weather", "to_fahrenheit"]
    assert weather.instructions == "Call get_weather, then to_fahrenheit when the user wants F" + (
        "ahrenheit."
    )
    assert await weather.tools[0].invoke({"city": "Oslo"}) == "Oslo: 14 C, rain showers"
    registry = SkillRegistry([weather])

    @registry.skill("forecast", "Weather forecast for the week", tags=["weather"])
    def forecast(city: str) -> str:
        return f"{city}: sun all week"

    assert registry.get("forecast") is forecast
    assert forecast.instructions == "Weather forecast for the week"  # no docstring
    with pytest.raises(SkillError, match="tool 'to_fahrenheit' is also a tool of skill 'weather'"):

        @registry.skill("convert", "Unit conversions")
        def to_fahrenheit(celsius: float) -> float:
            return celsius

    assert "convert" not in registry
    with pytest.raises(SkillError, match="invalid skill name"):
        skill("Bad Name", "x")(forecast.tools[0])


async def test_a_python_skill_is_callable_typed_bindable_and_counted() -> None:
    # The seed's own example (§18.5) runs as written, the skill called like its function.
    @skill("summarize", "Summarize text", tags=["writing"], examples=["summarize('a long text')"])
    def summarize(x: str, limit: int = 50) -> str:
        return f"Summary: {x[:limit]}..."

    assert summarize("abcdef", limit=3) == "Summary: abc..."
    assert summarize.signature is not None
    assert summarize.signature.input_type is str
    assert summarize.signature.output_type is str
    assert summarize.signature.parameters == (("x", str), ("limit", int))
    assert summarize.examples == ("summarize('a long text')",)
    short = summarize.bind(limit=2)
    assert short("abcdef") == "Summary: ab..."
    assert [p.name for p in inspect.signature(short.function).parameters.values()] == ["x"]
    assert list(short.tools[0].parameters["properties"]) == ["x"]  # the model sees x only
    assert await short.tools[0].invoke({"x": "wxyz"}) == "Summary: wx..."
    with pytest.raises(SkillError, match="no parameter nope"):
        summarize.bind(nope=1)

    @skill("fetch-page", "Fetch a page")
    async def fetch_page(url: str) -> str:
        if not url:
            raise ValueError("no url")
        return f"<html>{url}</html>"

    assert await fetch_page("x") == "<html>x</html>"
    with pytest.raises(ValueError, match="no url"):
        await fetch_page("")
    assert (fetch_page.stats.calls, fetch_page.stats.failures) == (2, 1)
    assert summarize.stats.calls == 1
    assert summarize.stats.total_seconds > 0
    assert summarize.stats.mean_seconds == summarize.stats.total_seconds  # one call
    assert short.stats.calls == 1  # a bound skill counts its own calls
    registry = SkillRegistry()
    assert registry.register_pack([summarize, fetch_page]) == [summarize, fetch_page]
    route = registry.build_route()
    assert route["summarize"]("abc", limit=1) == "Summary: a..."
    calls = registry.stats()["calls"]
    assert calls["summarize"]["calls"] == 2
    assert calls["fetch-page"]["calls"] == 2
    assert summarize.to_dict()["stats"]["calls"] == 2
    with pytest.raises(SkillError, match="two skills are named 'summarize'"):
        registry.register_pack({"again": short})  # all or none
    other = SkillRegistry()
    with pytest.raises(SkillError):
        other.register_pack([short, summarize])  # clash inside the pack: nothing registered
    assert len(other) == 0


def test_search_ranks_names_tags_and_descriptions_and_filters_by_tags(skills_dir: Path) -> None:
    registry = SkillRegistry([weather_skill()], dirs=[skills_dir])
    assert [s.name for s in registry.search("fill the fields of this form")] == ["pdf-forms"]
    assert next(s.name for s in registry.search("summarize the release changes")) == (
        "release-notes"
    )
    assert [s.name for s in registry.search("what's the weather in Paris?")] == ["weather"]
    assert [s.name for s in registry.search("", tags=["writing"])] == ["release-notes"]
    assert registry.search("pdf", tags=["writing"]) == []
    assert [s.name for s in registry.search("", limit=None)] == [
        "pdf-forms",
        "release-notes",
        "weather",
    ]


async def test_discover_asks_the_model_and_reads_json_or_names(
    mock_server: MockLLMServer, llm: OpenAICompatible, skills_dir: Path
) -> None:
    registry = SkillRegistry([weather_skill()], dirs=[skills_dir])
    mock_server.script(
        Reply.text('{"skills": ["weather", "no-such-skill"]}'),
        Reply.text("I would use release-notes, then pdf-forms."),
    )
    first = await registry.discover("Is it raining in Tokyo?", llm)
    second = await registry.discover("Notes for v2", llm, limit=1)
    assert [s.name for s in first] == ["weather"]
    assert [s.name for s in second] == ["release-notes"]
    body = mock_server.requests[0].json
    enum = body["response_format"]["json_schema"]["schema"]["properties"]["skills"]["items"]
    assert enum["enum"] == ["pdf-forms", "release-notes", "weather"]
    assert "- weather: Look up the weather of a city" in body["messages"][1]["content"]


# ---- agents -------------------------------------------------------------------------------


async def test_the_agent_sees_descriptions_loads_a_body_and_gets_the_skills_tools(
    mock_server: MockLLMServer, llm: OpenAICompatible, skills_dir: Path
) -> None:
    registry = SkillRegistry([weather_skill()], dirs=[skills_dir])
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("load_skill", {"name": "weather"}, id="c1")),
        Reply.tool_calls(ToolCallSpec("get_weather", {"city": "Paris"}, id="c2")),
        Reply.text("Paris: 14 C with rain showers."),
        Reply.tool_calls(ToolCallSpec("to_fahrenheit", {"celsius": 14}, id="c3")),
        Reply.text("57.2 F."),
    )

    @llm_chat(llm, toolkit=[Skills(registry)])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You are a helpful assistant."""

    replies = await run(agent, "Weather in Paris?", history=[])
    text, history = replies[-1]
    assert text == "Paris: 14 C with rain showers."
    system = system_text(mock_server, 0)
    assert "- weather: Look up the weather of a city" in system
    assert "- pdf-forms: Fill in PDF forms and list their fields." in system
    assert "Call get_weather" not in system
    assert "Filling PDF forms" not in system
    assert offered(mock_server, 0) == ["load_skill", "read_skill_file"]
    loaded = tool_results(mock_server, 1)["c1"]
    assert loaded.startswith("# Skill: weather\n\nCall get_weather, then to_fahrenheit")
    assert "Tools you can call now: get_weather, to_fahrenheit" in loaded
    assert offered(mock_server, 1) == [
        "load_skill",
        "read_skill_file",
        "get_weather",
        "to_fahrenheit",
    ]
    assert tool_results(mock_server, 2)["c2"] == "Paris: 14 C, rain showers"
    assert_valid(history)
    # The next turn: the history holds the load_skill call, so the tools are there at once.
    replies = await run(agent, "In Fahrenheit?", history=history)
    assert replies[-1][0] == "57.2 F."
    assert offered(mock_server, 3)[2:] == ["get_weather", "to_fahrenheit"]
    assert tool_results(mock_server, 4)["c3"] == "57.2"


async def test_resource_files_are_read_through_the_skill_folder_only(
    mock_server: MockLLMServer, llm: OpenAICompatible, skills_dir: Path
) -> None:
    (skills_dir / "secret.txt").write_text("outside every skill\n")
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("load_skill", {"name": "pdf-forms"}, id="c1")),
        Reply.tool_calls(
            ToolCallSpec("read_skill_file", {"skill": "pdf-forms", "path": "reference.md"}, "c2"),
            ToolCallSpec("read_skill_file", {"skill": "pdf-forms", "path": "../secret.txt"}, "c3"),
        ),
        Reply.text("Dates are ISO 8601."),
    )

    @llm_chat(llm, toolkit=[Skills([skills_dir])])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You fill forms."""

    replies = await run(agent, "How do I write dates in the form?", history=[])
    loaded = tool_results(mock_server, 1)["c1"]
    assert loaded.startswith(f"# Skill: pdf-forms\n\n{PDF_BODY}")
    assert f"Skill folder: {(skills_dir / 'pdf-forms').resolve()}" in loaded
    assert "- reference.md\n- scripts/fields.py" in loaded
    results = tool_results(mock_server, 2)
    assert "2 | Dates are ISO 8601." in results["c2"]
    assert "outside" in results["c3"]
    assert "outside every skill" not in results["c3"]
    assert_valid(replies[-1][1])


async def test_scripts_run_in_the_skill_folder_when_allowed(
    mock_server: MockLLMServer, llm: OpenAICompatible, skills_dir: Path
) -> None:
    (skills_dir / "pdf-forms" / "scripts" / "fail.py").write_text(
        "import sys\nsys.exit('no such form')\n"
    )
    run_script = "run_skill_script"
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec(
                run_script,
                {"skill": "pdf-forms", "script": "scripts/fields.py", "args": ["form.pdf"]},
                "c1",
            ),
            ToolCallSpec(run_script, {"skill": "pdf-forms", "script": "scripts/fail.py"}, "c2"),
            ToolCallSpec(run_script, {"skill": "pdf-forms", "script": "../../x.py"}, "c3"),
            ToolCallSpec(run_script, {"skill": "release-notes", "script": "SKILL.md/.."}, "c4"),
        ),
        Reply.text("The form has name and date fields."),
    )

    @llm_chat(llm, toolkit=[Skills(SkillRegistry(dirs=[skills_dir]), scripts=True)])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You fill forms."""

    await run(agent, "Which fields does form.pdf have?", history=[])
    assert offered(mock_server, 0) == ["load_skill", "read_skill_file", "run_skill_script"]
    results = tool_results(mock_server, 1)
    assert results["c1"].strip() == "fields of form.pdf : name, date"
    assert "exited with status 1: no such form" in results["c2"]
    assert "is not a file of skill 'pdf-forms'" in results["c3"]
    assert "is not a file of skill 'release-notes'" in results["c4"]


@pytest.mark.parametrize("mode", ["search", "llm"])
async def test_skill_agent_discovers_and_enables_skills_before_answering(
    mock_server: MockLLMServer, llm: OpenAICompatible, skills_dir: Path, mode: str
) -> None:
    registry = SkillRegistry([weather_skill()], dirs=[skills_dir])
    choice = [Reply.text('{"skills": ["weather"]}')] if mode == "llm" else []
    mock_server.script(
        *choice,
        Reply.tool_calls(ToolCallSpec("get_weather", {"city": "Tokyo"}, id="c1")),
        Reply.text("Yes, rain showers in Tokyo."),
    )
    agent = skill_agent(llm, registry, discover=mode, max_skills=1)  # type: ignore[arg-type]
    replies = await run(agent, "Is there any rain in Tokyo? Check the weather.", history=[])
    text, history = replies[-1]
    assert text == "Yes, rain showers in Tokyo."
    first = len(choice)
    assert offered(mock_server, first)[-2:] == ["get_weather", "to_fahrenheit"]
    sent = mock_server.requests[first].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"]
    call = sent[2]["tool_calls"][0]["function"]
    assert call == {"name": "load_skill", "arguments": '{"name": "weather"}'}
    assert sent[3]["content"].startswith("# Skill: weather")
    assert_valid(history)
    assert [m["role"] for m in history] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


async def test_preload_and_usage_of_discovery_add_up(
    mock_server: MockLLMServer, llm: OpenAICompatible, skills_dir: Path
) -> None:
    mock_server.script(
        Reply.text('{"skills": []}', usage=(100, 7)), Reply.text("Done.", usage=(300, 2))
    )
    skills = Skills([skills_dir], discover="llm", preload=["release-notes"])

    @llm_chat(llm, toolkit=[skills], enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You write notes."""

    items = await run(agent, "v2 notes", history=[])
    end = next(i.event for i in items if isinstance(getattr(i, "event", None), ReactEndEvent))
    assert (end.total_usage.prompt_tokens, end.total_usage.completion_tokens) == (400, 9)
    assert isinstance(items[-1], ResponseYield)
    sent = mock_server.requests[1].json["messages"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == '{"name": "release-notes"}'
    assert "Group changes as Added / Fixed / Removed." in sent[3]["content"]
    with pytest.raises(SkillError, match="no skill is named 'x'"):
        Skills([skills_dir], preload=["x"])


async def test_a_skill_tool_that_clashes_with_an_agent_tool_fails_the_run(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    @tool
    def get_weather(city: str) -> str:
        """Someone else's weather tool."""
        return city

    mock_server.script(Reply.tool_calls(ToolCallSpec("load_skill", {"name": "weather"})))

    @llm_chat(llm, toolkit=[get_weather, Skills([weather_skill()])])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """x"""

    with pytest.raises(Exception, match="two tools are named 'get_weather'"):
        await run(agent, "weather?", history=[])


def test_python_interpreter_for_scripts_is_this_one() -> None:
    from simplellmfunc.runtime.skills import _toolkit

    assert _toolkit._INTERPRETERS[".py"] == sys.executable


# ---- config files ---------------------------------------------------------------------------


async def test_a_config_file_gives_an_agent_its_skill_folders(
    mock_server: MockLLMServer, skills_dir: Path, tmp_path: Path
) -> None:
    from simplellmfunc.runtime.config import check_config, load_agent_config, run_config

    config = tmp_path / "agent.yml"
    config.write_text(
        "model: openai:mock-model\nsystem: You fill forms.\n"
        f"skills:\n  paths: [{json.dumps(str(skills_dir))}]\n  scripts: true\n"
        "  discover: search\n  max_skills: 1\n"
    )
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec(
                "run_skill_script",
                {"skill": "pdf-forms", "script": "scripts/fields.py", "args": ["a.pdf"]},
                "c1",
            )
        ),
        Reply.text("name and date"),
    )
    env = {"OPENAI_API_KEY": "sk-test-123456789", "OPENAI_BASE_URL": mock_server.url}
    with anyio.fail_after(GUARD):
        result = await run_config(config, "List the fields of the PDF form a.pdf", environ=env)
    assert result.result == "name and date"
    assert "run_skill_script" in offered(mock_server, 0)
    sent = mock_server.requests[0].json["messages"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == '{"name": "pdf-forms"}'
    assert tool_results(mock_server, 1)["c1"].strip() == "fields of a.pdf : name, date"
    assert [r.kind for r in result.trace] == ["llm", "tool", "llm", "end"]
    # the short form, and what `simplellmfunc validate` says about it
    config.write_text(f"model: openai:mock-model\nskills: [{json.dumps(str(skills_dir))}]\n")
    findings = await check_config(load_agent_config(config, environ=env), environ=env)
    assert any(
        f.subject == f"skills {skills_dir}" and f.message == "pdf-forms, release-notes"
        for f in findings
    )
    (skills_dir / "pdf-forms" / "SKILL.md").write_text("---\nname: pdf-forms\n---\n")
    findings = await check_config(load_agent_config(config, environ=env), environ=env)
    assert any(f.level == "problem" and "description" in f.message for f in findings)


async def test_a_per_call_toolkit_override_drops_the_replaced_skills_hooks(
    mock_server: MockLLMServer, llm: OpenAICompatible, skills_dir: Path
) -> None:
    """The SimpleLLMFunc toolkit override replaces the decorator's toolkit for one call: the
    replaced ``Skills`` neither preloads a skill nor offers its tools; the next call has both."""
    from simplellmfunc.runtime.selfref import SELF_REFERENCE_TOOLKIT_OVERRIDE_TEMPLATE_PARAM

    @tool
    def lookup(word: str) -> str:
        """Look a word up."""
        return word

    skills = Skills([skills_dir], preload=["release-notes"])

    @llm_chat(llm, toolkit=[skills])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You write notes."""

    mock_server.script(Reply.text("Done."), Reply.text("Done again."))
    override = {SELF_REFERENCE_TOOLKIT_OVERRIDE_TEMPLATE_PARAM: [lookup]}
    text, history = (await run(agent, "v2", history=[], _template_params=override))[-1]
    assert (text, [m["role"] for m in history]) == ("Done.", ["system", "user", "assistant"])
    assert [m["role"] for m in mock_server.requests[0].json["messages"]] == ["system", "user"]
    assert offered(mock_server, 0) == ["lookup"]
    await run(agent, "v2", history=[])
    sent = mock_server.requests[1].json["messages"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == '{"name": "release-notes"}'
    assert offered(mock_server, 1)[0] == "load_skill"
