"""Every example runs offline and prints what it shows.

The examples of the builtins pick their model from ``.env`` / the environment, else a scripted
model plays its part (``examples/_model.py``): they run here with no key, no model setting and
no ``.env`` (a temporary working directory), stdin closed, as CI and a fresh clone run them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from simplellmfunc.testing import (
    MockLLMServer,
    Reply,
    TmuxTerminal,
    ToolCallSpec,
    tmux_available,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
OFFLINE = ["typed_function", "chat_with_tools", "streaming_events", "abort", "parallel_tools"]

#: Example → lines its output must contain (what the example is there to show).
BUILTINS: dict[str, list[str]] = {
    "pyrepl_chatbot": [
        "[app answers the kernel's 'What is your name? ' with 'Ada']",
        "│ > Hello, Ada!",
        "│ > 3 ADA",  # turn 2 uses the variable of turn 1
        "The kernel greeted you: Hello, Ada!",
    ],
    "self_reference_memory": [
        "Done: I now see 2 messages: my prompt and a summary.",
        'experiences: ["The user\'s name is Ada; she prefers metric units.", '
        "'Ada asked about the Eiffel Tower']",
        "summaries: ['sum_1']",
        "system prompt: Answer in one short sentence.",
    ],
    "self_reference_fork": [
        "[fork_1] fork ended: completed",
        "[fork_2] fork ended: completed",
        "fork_1 completed {'city': 'Paris', 'millions': 2.1}",
        "fork_2: completed, memory key planner::fork::2",
    ],
    "file_toolset_edit": [
        "→ sed(path='stats.py'",
        "+    return sum(values) / len(values)",
        "mean ok",
    ],
    "mcp_tools": [
        "server tools: ['get_current_time', 'convert_time']",
        " in Tokyo; 09:00 in Paris is ",  # the hour there depends on the date (summer time)
    ],
    "config_agent": [
        "warning    model key: not set (DEEPSEEK_API_KEY); not checked online",
        "Final answer: 17 * 3 = 51",
        "[1] tool  calc",
    ],
    "pyrepl_example": [
        "[stdout] mean ",
        "tools: ['execute_code', 'reset_repl', 'list_variables']",
        "mean: 3.875",
        "SyntaxError at line 1: 'for i in range(2)'",
        "after reset: []",
        "repl2 sees repl1's x: False",
    ],
    "skills_agent": [
        "skills: ['csv-stats', 'unit-convert']",
        "  → load_skill({'name': 'csv-stats'})",
        "  ← rows=3 mean_x=2.333 mean_y=23.333",
        "loaded skills: ['unit-convert']",  # found by search, before the model
        "  ← 70.7",
    ],
    "agent_as_tool": [
        "[writer] calls researcher({'task': 'How tall is the Eiffel Tower?'})",
        "[researcher] (depth 1) done, 1 LLM calls",
        "[writer] (depth 0) done, 3 LLM calls",
    ],
    "handoff": [
        "path: triage -> billing",
        "history roles: ['system', 'user', 'assistant', 'tool', 'user', 'assistant']",
    ],
    "group_chat": ["critic: Too plain; make it urgent.", "(4 rounds, ended by keyword)"],
    "parallel_agents": ["german: Hallo Welt", "klingon: failed: ProviderError: no Klingon"],
    "channels_shared_memory": [
        "reporter says: Filed the story.",
        "shared memory: {'story': 'Cat rescues firefighter'}",
        "empty channel: channel: nothing received within 0.1 s",
    ],
    "self_reference_basic_example": [
        "Always include one actionable next step.",
        "keys: ['agent_1', 'agent_2', 'agent_main']",
        "my_key: ['You are helpful.', 'remember this']",
        "after clear: 1",  # clear() keeps the system prompt, as in SimpleLLMFunc
    ],
}


#: Examples that script the mock server in their code → lines their output must contain.
SCRIPTED: dict[str, list[str]] = {
    "rag_agent": [
        "ingested: 3 files: 3 added, 0 updated, 0 unchanged, 0 deleted, 0 skipped; chunks +4",
        "hit: docs/tuning.md:5-10 § Tuning > Flux capacitor",
        "retrieve said: No passage matches 'hyperdrive'. Rewrite the query",
        "retrieve said: [1] docs/tuning.md:5-10 § Tuning > Flux capacitor",
        "answer: Set warp = 9 in widgets.toml [docs/tuning.md:5-10].",
        "again: 3 files: 0 added, 1 updated, 2 unchanged, 0 deleted, 0 skipped; chunks +1 -0 =2",
    ],
}


def offline_env() -> dict[str, str]:
    """This process's environment without any model setting or key."""
    model_settings = ("EXAMPLE_MODEL", "OPENAI_MODEL")
    return {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(("_API_KEY", "_BASE_URL")) and k not in model_settings
    }


@pytest.mark.parametrize("name", OFFLINE)
def test_example_runs(name: str) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip()


async def run_with_provider(name: str, mock_server: MockLLMServer, cwd: Path) -> str:
    """The output of ``examples/<name>.py`` run with ``mock_server`` as the provider the
    environment names (checked to exit 0)."""
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-test-123456789",
        "OPENAI_MODEL": "mock-model",
        "OPENAI_BASE_URL": mock_server.url,
    }
    result = await anyio.run_process(
        [sys.executable, str(EXAMPLES / f"{name}.py")], cwd=cwd, env=env, check=False
    )
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    return result.stdout.decode()


async def test_demo_runs_against_a_provider_from_the_environment(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    """`make demo` with a provider configured: the typed result, then a turn with a tool call."""
    mock_server.script(
        Reply.text('{"sentiment": "positive", "stars": 5}'),
        Reply.tool_calls(ToolCallSpec("get_weather", {"city": "Paris"})),
        Reply.text("It is 14°C with rain showers in Paris."),
    )
    out = await run_with_provider("demo", mock_server, tmp_path)
    assert "Review(sentiment='positive', stars=5)" in out
    assert "→ get_weather({'city': 'Paris'})" in out
    assert "← get_weather: 'Paris: 14°C, rain showers' (ok)" in out
    assert "assistant> It is 14°C with rain showers in Paris." in out
    assert "sk-test-123456789" not in out


async def test_serve_agent_example_against_a_provider(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    """examples/serve_agent.py: the served agent answers our OpenAICompatible (the server keeps
    session "ada") and a second agent's A2A tool; both agents' model is the mock."""
    mock_server.script(
        Reply.text("Bonjour Ada !"),
        Reply.text("Je m'appelle Ada."),
        Reply.tool_calls(ToolCallSpec("translator", {"task": "Good night"})),
        Reply.text("Bonne nuit."),
        Reply.text("In French: Bonne nuit."),
    )
    out = await run_with_provider("serve_agent", mock_server, tmp_path)
    assert "[openai, session ada] My name is Ada. -> Je m'appelle Ada." in out
    assert "[a2a] caller -> translator({'task': 'Good night'})" in out
    assert "[a2a] caller answers: In French: Bonne nuit." in out
    assert "session ada keeps 5 messages on the server" in out
    requests = [r.json["messages"] for r in mock_server.requests]
    # The session's second turn was sent its first one, kept by the server.
    assert [m["role"] for m in requests[1]] == ["system", "user", "assistant", "user"]
    assert requests[1][1]["content"] == "Hello, I am Ada!"
    # Over A2A the served agent got the task in a new context; the caller got its answer.
    assert [m["content"] for m in requests[3][1:]] == ["Good night"]
    assert requests[4][-1] == {
        "role": "tool",
        "tool_call_id": requests[4][-2]["tool_calls"][0]["id"],
        "content": "Bonne nuit.",
    }
    assert "sk-test-123456789" not in out


def run_offline(name: str, cwd: Path) -> str:
    """Run an example with no model setting, in ``cwd``, stdin closed; its stdout."""
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=cwd,
        env=offline_env(),
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    return result.stdout


@pytest.mark.parametrize("name", sorted(SCRIPTED))
def test_scripted_example_shows_what_it_is_for(name: str, tmp_path: Path) -> None:
    out = run_offline(name, tmp_path)
    for line in SCRIPTED[name]:
        assert line in out, f"{line!r} not in:\n{out}"


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_builtin_example_runs_offline(name: str, tmp_path: Path) -> None:
    out = run_offline(name, tmp_path)
    for line in BUILTINS[name]:
        assert line in out, f"{line!r} not in:\n{out}"
    if name != "config_agent":  # that one uses a mock server, not the scripted model
        assert out.startswith("(no model configured: a scripted model plays its part")


#: Examples on the mock server whose output says what they show, by the lines it must contain.
SHOWN: dict[str, list[str]] = {
    "durable_agent": [
        "answer: Order 42 is paid: 30 EUR.",
        "model requests: 2",
        "after a restart: 'Order 42 is paid: 30 EUR.', model requests still 2",
    ],
}


@pytest.mark.parametrize("name", sorted(SHOWN))
def test_example_shows_what_it_says(name: str, tmp_path: Path) -> None:
    if name == "durable_agent":
        pytest.importorskip("dbos", reason="the durable example needs the [durable] extra")
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    for line in SHOWN[name]:
        assert line in result.stdout, f"{line!r} not in:\n{result.stdout}"


def test_every_example_is_tested() -> None:
    scripts = {p.stem for p in EXAMPLES.glob("*.py") if not p.name.startswith("_")}
    # demo: tested above, as `make demo`; serve_agent: against a provider above; web_chatbot:
    # over HTTP in tests/test_web_chatbot.py; web_chat: in a headless Chromium in
    # tests/test_webchat_browser.py; chat_tui: under tmux; approval_chatbot: against the mock
    # server below; evaluate_review: in tests/test_evals.py
    tested = {
        "demo",
        "serve_agent",
        "web_chatbot",
        "web_chat",
        "chat_tui",
        "approval_chatbot",
        "evaluate_review",
    }
    assert scripts == {*tested, *OFFLINE, *SCRIPTED, *BUILTINS, *SHOWN}


@pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")
async def test_chat_tui_in_a_terminal(mock_server: MockLLMServer, tmp_path: Path) -> None:
    """examples/chat_tui.py under tmux against the mock server: a cell asks input(), the answer
    is typed in the prompt, the reply shows what the kernel printed; /exit leaves."""
    pytest.importorskip("textual", reason="the terminal UI needs the [tui] extra (textual)")
    code = "name = input('What is your name? ')\nprint(f'Hello, {name}!')"
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("execute_code", {"code": code})),
        lambda request: Reply.text(f"Kernel: {request.json['messages'][-1]['content'][-30:]}"),
    )
    env = {
        **offline_env(),
        "OPENAI_API_KEY": "sk-test-123456789",
        "OPENAI_MODEL": "mock-model",
        "OPENAI_BASE_URL": mock_server.url,
        "TERM": "xterm-256color",
    }

    def talk(term: TmuxTerminal) -> tuple[str, int]:
        term.wait_for("Ready", 60)
        term.send_line("Greet me.")
        term.wait_for("What is your name?", 60)
        term.send_line("Ada")
        screen = term.wait_for("turn 1", 60)
        term.send_line("/exit")
        return screen, term.wait_exit(60)

    command = [sys.executable, str(EXAMPLES / "chat_tui.py")]
    with TmuxTerminal(command, env=env, cwd=tmp_path, width=100, height=40) as term:
        screen, status = await anyio.to_thread.run_sync(talk, term)
    assert status == 0
    assert "Hello, Ada!" in screen
    assert "execute_code (success)" in screen
    assert "sk-test-123456789" not in screen


async def test_approval_chatbot_against_the_mock_server(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    """examples/approval_chatbot.py: a computing cell runs, a file-writing cell is denied (the
    model reads the reason), then approved; the kernel holds the file afterwards."""
    save = "with open('result.txt', 'w') as f:\n    f.write(str(2 ** 10))\nprint('saved')"
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("execute_code", {"code": "print(2 ** 10)"})),
        Reply.text("1024."),
        Reply.tool_calls(ToolCallSpec("execute_code", {"code": save})),
        Reply.text("Not saved."),
        Reply.tool_calls(ToolCallSpec("execute_code", {"code": save})),
        Reply.text("Saved."),
    )
    out = await run_with_provider("approval_chatbot", mock_server, tmp_path)
    assert out.count("⚠ execute_code wants to run (the cell opens a file for writing):") == 2
    assert "[app answers: deny: not before I say please]" in out
    assert "[denied]" in out
    assert "[approved]" in out
    assert "result.txt holds '1024'" in out
    denied = mock_server.requests[3].json["messages"][-1]
    assert "The user denied this call of execute_code: not before I say please" in denied["content"]


#: A run on a "real" model whose main is stuck where a cancellation cannot reach: a worker
#: thread that does not give up on cancel (as a blocking client call in a thread does).
_STUCK = """
import sys, time, anyio
sys.path.insert(0, {examples!r})
import _model
_model.GRACE_S = 0.5
_model._REAL.append("a real model")
async def main():
    await anyio.to_thread.run_sync(time.sleep, 30)
_model.run(main, budget=1)
"""


def test_the_example_budget_stops_a_run_its_cancellation_cannot_reach(tmp_path: Path) -> None:
    script = tmp_path / "stuck.py"
    script.write_text(_STUCK.format(examples=str(EXAMPLES)))
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=25, check=False
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert "the small model did not finish in 1 s" in result.stderr
    assert elapsed < 10, f"the 1 s budget ended the run after {elapsed:.1f} s"


#: The usual example: the model is picked inside main, after run() started.
_PICKED_LATE = """
import sys, anyio
sys.path.insert(0, {examples!r})
import _model
_model.GRACE_S = 30
async def main():
    _model.pick_model()
    await anyio.sleep(30)
_model.run(main, budget=1)
"""


def test_the_budget_counts_when_the_model_is_picked_inside_main(tmp_path: Path) -> None:
    script = tmp_path / "late.py"
    script.write_text(_PICKED_LATE.format(examples=str(EXAMPLES)))
    env = {**os.environ, "EXAMPLE_MODEL": "llamacpp:SmolLM2-135M-Instruct"}
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True, text=True, timeout=40, check=False, cwd=tmp_path, env=env,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert "the small model did not finish in 1 s" in result.stderr
    assert elapsed < 10, f"the 1 s budget ended the run after {elapsed:.1f} s"
