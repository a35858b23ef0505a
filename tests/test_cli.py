"""The command line (as subprocesses) and ``run_config`` / ``ConfiguredAgent`` (in process):
exit codes, output formats, streams, trace files, precedence end to end, memory, checkpoints."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import anyio
import pytest

from acceptance_support import (
    AGENTS,
    ROOT,
    alive,
    clean_env,
    cli,
    eventually,
    finish,
    read_pid,
    start_cli,
    write,
)
from simplellmfunc import AbortSignal
from simplellmfunc.exceptions import ConfigError
from simplellmfunc.hooks import EventYield, LLMChunkArriveEvent
from simplellmfunc.runtime import (
    ConfiguredAgent,
    RunObserver,
    load_agent_config,
    read_jsonl,
    run_config,
)
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec

GUARD = 30  # seconds: a deadlock guard, never an assertion on speed


def always_a_tool(request: RecordedRequest) -> Reply:
    """Call ``echo_tool`` whenever it is offered (new arguments each time: not a loop the
    engine would stop); answer when it is not (the final call)."""
    if request.json.get("tools"):
        step = len(request.json["messages"])
        return Reply.tool_calls(ToolCallSpec("echo_tool", {"input": f"x{step}"}), text="Working.")
    return Reply.text("done at last", chunks=3)


@pytest.fixture
async def server() -> AsyncIterator[MockLLMServer]:
    async with MockLLMServer(default=Reply.text("Hi there!", chunks=3)) as mock:
        yield mock


@pytest.fixture
def env(server: MockLLMServer) -> dict[str, str]:
    return clean_env({"OPENAI_API_KEY": "sk-test-123456789", "OPENAI_BASE_URL": server.url})


@pytest.fixture
def simple(tmp_path: Path) -> Path:
    return write(
        tmp_path / "simple.yml", "kind: simple\nmodel: openai:mock-model\nsystem: Be brief.\n"
    )


@pytest.fixture
def looping(tmp_path: Path) -> Path:
    return write(
        tmp_path / "loop.yml",
        "model: openai:mock-model\nlimits:\n  max_steps: 5\n"
        "toolkit:\n  shell:\n    - {name: echo_tool, command: 'echo {}'}\n",
    )


# --- exit codes ---------------------------------------------------------------------------


async def test_bad_config_exits_2_with_key_and_line(tmp_path: Path, env: dict[str, str]) -> None:
    bad = write(tmp_path / "bad.yml", "model: openai:m\nlimits:\n  max_stepz: 3\n")
    for command in ("run", "validate", "repl"):
        args = [command, bad, "hi"] if command == "run" else [command, bad]
        done = await cli(*args, env=env, cwd=tmp_path)
        assert done.code == 2, command
        assert f"{bad}:3: limits.max_stepz: unknown key (did you mean 'max_steps'?)" in done.stderr
        assert "Traceback" not in done.stderr


async def test_validate_prints_a_summary(simple: Path, env: dict[str, str], tmp_path: Path) -> None:
    done = await cli("validate", simple, env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert done.stdout.startswith(f"ok: {simple}: agent 'simple'; simple; model openai:mock-model")
    assert "  ok         model key: set (OPENAI_API_KEY)" in done.stdout
    missing_key = await cli("validate", simple, env=clean_env(), cwd=tmp_path)
    assert missing_key.code == 0, missing_key.stderr  # a warning: the key may be set elsewhere
    assert "warning    model key: not set (OPENAI_API_KEY); not checked online" in (
        missing_key.stdout
    )
    assert "not checked offline: the model endpoint and key" in missing_key.stdout


@pytest.mark.parametrize("name", sorted(p.name for p in AGENTS.glob("*.yml")))
async def test_every_example_config_validates_offline_without_a_key(
    name: str, tmp_path: Path
) -> None:
    done = await cli("validate", AGENTS / name, env=clean_env(), cwd=tmp_path)
    assert done.code == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"ok: {AGENTS / name}: ")
    if name == "local.yml":  # the local model's server takes no key
        assert "model key: none needed (LLAMACPP_API_KEY not set)" in done.stdout
    else:
        assert "model key: not set (DEEPSEEK_API_KEY); not checked online" in done.stdout
    assert "problem" not in done.stdout


async def test_validate_finds_what_cannot_work(tmp_path: Path, env: dict[str, str]) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    config = write(
        tmp_path / "broken.yml",
        "model: openai:m\n"
        "toolkit:\n"
        "  files: ./no-such-workspace\n"
        "  shell:\n"
        "    - {name: calc, command: 'no-such-program-xyz {a}'}\n"
        "    - {name: fine, command: 'echo {a}'}\n"
        "  mcpServers:\n"
        "    demo: {command: python, args: [missing_server.py]}\n"
        "    gone: {command: /no/such/node, args: [x.js]}\n"
        "    remote: {url: 'http://127.0.0.1:9/mcp'}\n"
        "memory: {store: sqlite, path: a-file/memory.db}\n"
        "checkpoints: {dir: fresh/checkpoints}\n",
    )
    done = await cli("validate", config, env=env, cwd=tmp_path)
    assert done.code == 2, done.stdout + done.stderr
    out = done.stdout
    assert out.startswith(f"not ok: {config}: ")
    assert f"problem    files workspace: {tmp_path}/no-such-workspace is not an existing" in out
    assert "problem    shell tool calc: 'no-such-program-xyz' is not on PATH" in out
    assert "ok         shell tool fine: a shell command" in out
    assert "problem    mcp server demo: its script missing_server.py does not exist" in out
    assert "problem    mcp server gone: '/no/such/node' is not on PATH" in out
    assert "unchecked  mcp server remote: streamable-http:http://127.0.0.1:9/mcp" in out
    assert f"problem    memory: {tmp_path}/a-file/memory.db cannot be created" in out
    assert "ok         checkpoints: " in out
    assert "error: config error: " in done.stderr
    assert "5 problems found offline" in done.stderr
    assert not (tmp_path / "fresh").exists()  # validate creates nothing


async def test_provider_failure_exits_3(
    server: MockLLMServer, simple: Path, env: dict[str, str], tmp_path: Path
) -> None:
    server.default = Reply.error(401, "invalid key")
    done = await cli("run", simple, "hi", "--trace", env=env, cwd=tmp_path)
    assert done.code == 3
    assert "error: provider failure:" in done.stderr
    assert "invalid key" in done.stderr
    assert "end   error" in done.stderr  # --trace: the partial trace
    as_json = await cli("run", simple, "hi", "--format", "json", env=env, cwd=tmp_path)
    assert as_json.code == 3
    assert json.loads(as_json.stdout)["error"]["kind"] == "provider failure"


async def test_tool_failure_exits_4(tmp_path: Path, env: dict[str, str]) -> None:
    config = write(
        tmp_path / "mcp.yml",
        "model: openai:m\ntoolkit:\n  mcpServers:\n    broken: {command: /nonexistent/server}\n",
    )
    done = await cli("run", config, "hi", env=env, cwd=tmp_path)
    assert done.code == 4, done.stderr
    assert "error: tool failure:" in done.stderr
    assert "Traceback" not in done.stderr


async def test_an_mcp_server_that_exits_at_start_is_explained(
    tmp_path: Path, env: dict[str, str]
) -> None:
    script = Path(__file__).parent / "mcp_servers" / "failing_server.py"
    config = write(
        tmp_path / "mcp.yml",
        "model: openai:m\ntoolkit:\n  mcpServers:\n    broken:\n"
        f"      command: {json.dumps(sys.executable)}\n"
        f"      args: [{json.dumps(str(script))}, exit, '3']\n",
    )
    done = await cli("run", config, "hi", env=env, cwd=tmp_path)
    assert done.code == 4, done.stderr
    assert "error: tool failure: cannot connect to MCP server broken" in done.stderr
    assert "the server exited with code 3" in done.stderr
    assert "fatal: cannot open the database (exit 3)" in done.stderr
    assert "Traceback" not in done.stderr


async def test_unusable_store_fails_loudly(tmp_path: Path, env: dict[str, str]) -> None:
    config = write(
        tmp_path / "redis.yml",
        "model: openai:m\nmemory: {store: redis, url: 'redis://127.0.0.1:1/0'}\n",
    )
    done = await cli("run", config, "hi", env=env, cwd=tmp_path)
    assert done.code == 2
    assert "config error" in done.stderr
    assert "redis" in done.stderr.lower()


async def test_command_line_mistakes_exit_2(
    simple: Path, env: dict[str, str], tmp_path: Path
) -> None:
    done = await cli("run", simple, "hi", "--tool", "no-equals-sign", env=env, cwd=tmp_path)
    assert done.code == 2
    assert "expected NAME=COMMAND" in done.stderr
    done = await cli("run", simple, "hi", "--set", "kind", env=env, cwd=tmp_path)
    assert done.code == 2
    assert "write KEY=VALUE" in done.stderr


# --- output -------------------------------------------------------------------------------


async def test_stdin_input_and_streams(
    server: MockLLMServer, looping: Path, env: dict[str, str], tmp_path: Path
) -> None:
    server.default = always_a_tool
    done = await cli(
        "run", looping, "-", "--max-steps", "2", stdin="the task", env=env, cwd=tmp_path
    )
    assert done.code == 0, done.stderr
    assert done.stdout == "done at last\n"  # only the answer on stdout
    assert "→ echo_tool(" in done.stderr
    assert "← echo_tool" in done.stderr
    assert server.requests[0].json["messages"][-1]["content"] == "the task"
    streamed = await cli(
        "run",
        looping,
        "-",
        "--max-steps",
        "2",
        "--stream",
        "--quiet",
        stdin="the task",
        env=env,
        cwd=tmp_path,
    )
    assert streamed.code == 0
    assert streamed.stdout == "Working.\ndone at last\n"  # every reply's text, as it came
    assert streamed.stderr == ""


async def test_json_format_has_result_trace_stats_history(
    simple: Path, env: dict[str, str], tmp_path: Path
) -> None:
    done = await cli("run", simple, "hi", "--format", "json", env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == "Hi there!"
    assert result["terminated_by"] == "answer"
    assert result["stats"]["llm_calls"] == 1
    assert result["stats"]["total_tokens"] == 15
    assert [r["kind"] for r in result["trace"]] == ["llm", "end"]
    assert [m["role"] for m in result["history"]] == ["system", "user", "assistant"]


async def test_trace_files(simple: Path, env: dict[str, str], tmp_path: Path) -> None:
    done = await cli("run", simple, "hi", "--trace-file", "out/t.jsonl", env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    records = await read_jsonl(tmp_path / "out" / "t.jsonl")
    assert [r.kind for r in records] == ["llm", "end"]
    env = {**env, "SIMPLELLMFUNC_TRACE__FILE": str(tmp_path / "t.db")}
    done = await cli("run", simple, "hi", env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    with closing(sqlite3.connect(tmp_path / "t.db")) as db:
        assert db.execute("select count(*) from trace_records").fetchone() == (2,)


async def test_trace_does_not_print_the_answer_again(
    simple: Path, env: dict[str, str], tmp_path: Path
) -> None:
    done = await cli("run", simple, "hi", "--trace", env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert done.stdout == "Hi there!\n"
    assert "[1] end   answer" in done.stderr  # the timeline is there
    assert "Result:" not in done.stderr  # but not the answer a second time
    assert "(2 steps" in done.stderr


async def test_a_config_error_prints_no_empty_trace(tmp_path: Path, env: dict[str, str]) -> None:
    config = write(
        tmp_path / "redis.yml",
        "model: openai:m\nmemory: {store: redis, url: 'redis://127.0.0.1:1/0'}\n",
    )
    done = await cli("run", config, "hi", "--trace", env=env, cwd=tmp_path)
    assert done.code == 2
    assert "0 steps" not in done.stderr


# --- first contact: the README's agent config, as shipped --------------------------------


def fake_python(directory: Path) -> Path:
    """A directory holding a ``python`` and ``python3`` that are not this interpreter (like a
    system Python without the project's packages): they fail the way such a Python does."""
    directory.mkdir()
    for name in ("python", "python3"):
        write(directory / name, "#!/bin/sh\necho 'No module named mcp' >&2\nexit 1\n")
        (directory / name).chmod(0o755)
    return directory


@pytest.fixture
def shipped_agents(tmp_path: Path) -> Path:
    """The repository's example configs (and the demo MCP server they name), copied so their
    relative paths hold and their files (memory, checkpoints) stay out of the checkout."""
    root = tmp_path / "checkout"
    shutil.copytree(AGENTS, root / "examples" / "agents")
    servers = ROOT / "tests" / "mcp_servers"
    (root / "tests" / "mcp_servers").mkdir(parents=True)
    shutil.copy(servers / "demo_server.py", root / "tests" / "mcp_servers")
    return root / "examples" / "agents"


async def test_the_readme_agent_config_runs_as_shipped(
    server: MockLLMServer, shipped_agents: Path, tmp_path: Path
) -> None:
    def brain(request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        if messages[-1]["role"] == "tool":
            return Reply.text(f"The sum is {messages[-1]['content']}.")
        return Reply.tool_calls(ToolCallSpec("demo_get_sum", {"n": 100}))

    server.default = brain
    path = f"{fake_python(tmp_path / 'bin')}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    env = clean_env(
        {"DEEPSEEK_API_KEY": "sk-test-123456789", "DEEPSEEK_BASE_URL": server.url, "PATH": path}
    )
    config = shipped_agents / "agent-config.yml"
    done = await cli("run", config, "compute 1+2+...+100", env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert "5050" in done.stdout
    # The SQLite memory store made its folder; the next run remembers.
    assert (shipped_agents / ".simplellmfunc" / "memory.db").is_file()


@pytest.mark.parametrize("name", sorted(p.name for p in AGENTS.glob("*.yml")))
async def test_every_example_config_runs_on_the_local_model_unedited(
    name: str, server: MockLLMServer, shipped_agents: Path, tmp_path: Path
) -> None:
    """``SIMPLELLMFUNC_MODEL`` and ``LLAMACPP_BASE_URL`` (the lines ``llama_server.py start``
    prints) move every shipped config to the local server, played here by the mock."""
    server.default = Reply.text("Final answer: 5.")
    path = f"{fake_python(tmp_path / 'bin')}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    model = "SmolLM2-135M-Instruct"
    env = clean_env(
        {"SIMPLELLMFUNC_MODEL": f"llamacpp:{model}", "LLAMACPP_BASE_URL": server.url, "PATH": path}
    )
    done = await cli("run", shipped_agents / name, "What is 2 + 3?", env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert "5" in done.stdout
    sent = [r.json for r in server.requests]
    assert sent
    assert all(r["model"] == model for r in sent)
    assert all(0 < r["max_tokens"] <= 512 for r in sent)  # bounded replies


# --- precedence, end to end ---------------------------------------------------------------


async def test_max_steps_command_line_over_environment_over_file(
    server: MockLLMServer, looping: Path, env: dict[str, str], tmp_path: Path
) -> None:
    server.default = always_a_tool

    async def llm_calls(extra_env: dict[str, str], *options: str) -> int:
        before = len(server.requests)
        done = await cli("run", looping, "go", *options, env={**env, **extra_env}, cwd=tmp_path)
        assert done.code == 0, done.stderr
        return len(server.requests) - before

    three = {"SIMPLELLMFUNC_LIMITS__MAX_STEPS": "3"}
    assert await llm_calls({}) == 5
    assert await llm_calls(three) == 3
    assert await llm_calls(three, "--max-steps", "2") == 2
    assert await llm_calls(three, "--set", "limits.max_steps=4") == 4


async def test_model_from_the_command_line(
    server: MockLLMServer, simple: Path, env: dict[str, str], tmp_path: Path
) -> None:
    done = await cli("run", simple, "hi", "--model", "other-model", env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert server.requests[-1].json["model"] == "other-model"
    env = {**env, "SIMPLELLMFUNC_MODEL": "openai:env-model"}
    await cli("run", simple, "hi", env=env, cwd=tmp_path)
    assert server.requests[-1].json["model"] == "env-model"


# --- the repl -----------------------------------------------------------------------------


async def test_repl_commands(
    server: MockLLMServer, simple: Path, env: dict[str, str], tmp_path: Path
) -> None:
    script = (
        "hi\n:trace 1\n:stats\n:tools\n:memory\n:bogus\n:load\n:help\n"
        ":reload\nhi again\n:trace\n:exit\nnever sent\n"
    )
    done = await cli("repl", simple, stdin=script, env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    out = done.stdout
    assert out.startswith("Hi there!\n[1] end   answer")  # :trace 1 shows the last step only
    assert "[0] llm" not in out.split("total_steps")[0]
    assert "total_steps: 2" in out  # :stats
    assert "(no tools)" in out
    assert "memory is off (memory.store: none)" in out
    assert "unknown command :bogus" in out
    assert "error: config error: no checkpoint in" in done.stderr  # :load before any :save
    assert ":reload" in out  # :help
    assert f"reloaded {simple}" in out
    assert "[2] llm" in out  # the trace goes on after a reload
    contents = [m["content"] for m in server.requests[-1].json["messages"]]
    assert contents == ["Be brief.", "hi", "Hi there!", "hi again"]  # history kept on reload
    assert len(server.requests) == 2  # nothing after :exit


# --- Ctrl-C -------------------------------------------------------------------------------


async def test_ctrl_c_during_a_tool_kills_it_and_exits_130(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    pid_file = tmp_path / "tool.pid"
    config = write(
        tmp_path / "slow.yml",
        "model: openai:m\ntoolkit:\n  shell:\n"
        f"    - {{name: echo_tool, command: 'sleep 60 & echo $! > {pid_file}; wait; echo {{}}',"
        " timeout: 120}\n",
    )
    server.default = always_a_tool
    process = await start_cli("run", config, "go", env=env, cwd=tmp_path)
    assert await eventually(lambda: read_pid(pid_file) is not None)
    process.send_signal(signal.SIGINT)
    done = await finish(process)
    assert done.code == 130, done.stderr
    assert "[1] tool  echo_tool" in done.stderr
    assert "cancelled" in done.stderr
    child = read_pid(pid_file)
    assert child is not None
    assert await eventually(lambda: not alive(child)), "the tool's child survived Ctrl-C"


# --- in process: run_config and ConfiguredAgent --------------------------------------------


def environ(server: MockLLMServer) -> dict[str, str]:
    return {"OPENAI_API_KEY": "sk-test-123456789", "OPENAI_BASE_URL": server.url}


async def test_run_config_returns_result_trace_stats_history(
    server: MockLLMServer, looping: Path
) -> None:
    server.default = always_a_tool
    with anyio.fail_after(GUARD):
        result = await run_config(looping, "go", environ=environ(server), max_steps=2)
    assert result.result == "done at last"
    assert [r.kind for r in result.trace] == ["llm", "tool", "llm", "end"]
    assert result.stats.llm_calls == 2
    assert result.stats.tool_calls == 1
    assert result.history[-1] == {"role": "assistant", "content": "done at last"}
    assert "[1] tool  echo_tool" in result.timeline()
    assert json.loads(json.dumps(result.to_dict()))["terminated_by"] == "max_steps"


async def test_run_config_streams_to_an_observer_and_aborts(
    server: MockLLMServer, simple: Path
) -> None:
    server.default = Reply.text("never ending", drip=0.02)
    abort = AbortSignal()
    seen: list[str] = []

    class Watcher(RunObserver):
        async def event(self, item: EventYield) -> None:
            if isinstance(item.event, LLMChunkArriveEvent):
                seen.append(item.event.text)
                abort.abort("enough")

    with anyio.fail_after(GUARD):
        result = await run_config(
            simple, "hi", abort=abort, observer=Watcher(), environ=environ(server)
        )
    assert seen
    assert result.aborted
    assert result.trace[-1].kind == "end"
    assert result.trace[-1].terminated_by == "aborted"


async def test_memory_persists_across_runs_in_sqlite(server: MockLLMServer, tmp_path: Path) -> None:
    config = write(
        tmp_path / "mem.yml",
        "kind: simple\nmodel: openai:m\nsystem: You remember.\n"
        "memory: {store: sqlite, path: memory.db, session: alice}\n",
    )
    server.default = Reply.text("noted")
    with anyio.fail_after(GUARD):
        await run_config(config, "my name is Alice", environ=environ(server))
        await run_config(config, "who am I?", environ=environ(server))
        await run_config(config, "who am I?", environ=environ(server), session="bob")
    systems = [r.json["messages"][0]["content"] for r in server.requests]
    assert "## Agent Memory" not in systems[0]
    assert "my name is Alice" in systems[1]
    assert "Alice" not in systems[2]  # another session, another namespace


async def test_checkpoints_save_load_and_every_n_steps(
    server: MockLLMServer, tmp_path: Path
) -> None:
    config = load_agent_config(
        write(
            tmp_path / "cp.yml",
            "model: openai:m\nlimits: {max_steps: 3}\nmemory: memory\n"
            "checkpoints: {dir: cps, every: 1, max: 5}\n"
            "toolkit:\n  shell: [{name: echo_tool, command: 'echo {}'}]\n",
        ),
        environ=environ(server),
    )
    server.default = always_a_tool
    with anyio.fail_after(GUARD):
        async with ConfiguredAgent(config, environ=environ(server)) as agent:
            await agent.run("go")
            saved = sorted(p.name for p in (tmp_path / "cps").iterdir() if p.suffix == ".json")
            assert saved == ["cp_001.json", "cp_002.json"]  # after each of the 2 tool batches
            info = await agent.save_checkpoint("by hand")
            assert info.number == 3
            history = list(agent.history)
            agent.history = []
            checkpoint = await agent.load_checkpoint()
            assert checkpoint.description == "by hand"
            assert agent.history == history
            with pytest.raises(ConfigError):
                await agent.load_checkpoint(99)


async def test_tool_names_include_mcp_servers(server: MockLLMServer, tmp_path: Path) -> None:
    demo = Path(__file__).parent / "mcp_servers" / "demo_server.py"
    config = load_agent_config(
        write(
            tmp_path / "tools.yml",
            f"model: openai:m\ntoolkit:\n  files: .\n  mcpServers:\n"
            f"    demo: {{command: {sys.executable}, args: [{demo}]}}\n",
        ),
        environ=environ(server),
    )
    with anyio.fail_after(GUARD):
        async with ConfiguredAgent(config, environ=environ(server)) as agent:
            names = await agent.tool_names()
    assert "read_file" in names
    assert "demo_get_sum" in names


def test_a_reader_that_leaves_early_is_not_an_error(simple: Path, tmp_path: Path) -> None:
    """``simplellmfunc validate agent.yml | head -1``: the pipe closes before the output ends."""
    import subprocess

    from acceptance_support import CLI

    read, write_end = os.pipe()
    os.close(read)  # the reader is gone before the command writes
    with closing(os.fdopen(write_end, "wb")) as stdout:
        done = subprocess.run(
            [*CLI, "validate", str(simple)],
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=clean_env(),
            cwd=tmp_path,
            timeout=GUARD,
            check=False,
        )
    assert done.returncode == 0
    assert b"BrokenPipe" not in done.stderr
    assert b"Traceback" not in done.stderr
