"""``simplellmfunc serve``: the ASGI app over real HTTP on loopback (uvicorn), driven by the
official ``openai`` client and by our own ``OpenAICompatible``; auth, health, limits, graceful
shutdown; and the command as a subprocess."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx
import openai
import pytest
from anyio.abc import Process
from starlette.applications import Starlette
from starlette.routing import Mount

from acceptance_support import clean_env, finish, start_cli, write
from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc._cli._args import build_parser
from simplellmfunc.exceptions import CapacityError, UserError
from simplellmfunc.runtime.config import ConfiguredAgent, TurnResult, load_agent_config
from simplellmfunc.serving import (
    ServedAgent,
    ServeLimits,
    ServeSettings,
    SessionStore,
    TurnRequest,
    create_app,
    running,
    web_chat_app,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 30.0
KEY = "sk-test-123456789"
TOKEN = "serve-token-abcdef"


def chat_agent(llm: Any, **options: Any) -> Any:
    async def helper(message: str, history: list[dict[str, Any]] | None = None) -> None:
        """You are a helper."""

    return llm_chat(llm, stream=True, **options)(helper)


async def start_serve(
    config: Path, *options: str, env: dict[str, str], cwd: Path
) -> tuple[Process, str]:
    """Start ``simplellmfunc serve config``; the process and the URL it serves at."""
    process = await start_cli("serve", config, *options, env=env, cwd=cwd)
    assert process.stderr is not None
    with anyio.fail_after(GUARD):
        line = b""
        while b"\n" not in line:
            line += await process.stderr.receive(1)
    return process, line.decode().split(" at ")[1].split(" ")[0]


@asynccontextmanager
async def served_config(
    config: Any, environ: dict[str, str]
) -> AsyncIterator[tuple[ConfiguredAgent, openai.AsyncOpenAI]]:
    """A config agent served over ``/v1``, and the official ``openai`` client of it."""
    async with (
        ConfiguredAgent(config, environ=environ) as agent,
        running(lambda url: create_app(ServedAgent(agent), url, token=TOKEN)) as url,
        openai.AsyncOpenAI(api_key=TOKEN, base_url=f"{url}/v1") as client,
    ):
        yield agent, client


def waiting_tool() -> tuple[Any, anyio.Event, anyio.Event]:
    """A tool ``wait`` that sets ``started`` and returns once ``release`` is set."""
    started, release = anyio.Event(), anyio.Event()

    @tool
    async def wait() -> str:
        """Wait for the operator."""
        started.set()
        await release.wait()
        return "released"

    return wait, started, release


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def result_of(served: ServedAgent, request: TurnRequest) -> TurnResult:
    """The last item of a turn through the door: its result."""
    items = [item async for item in served.turn(request)]
    assert isinstance(items[-1], TurnResult)
    return items[-1]


async def test_openai_client_and_our_provider_talk_to_the_agent(
    mock_server: MockLLMServer,
) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 2, "b": 3}, id="c1")),
        Reply.text("It is 5.", usage=(7, 3)),
        Reply.text("Streamed answer.", chunks=3),
        Reply.text("Ours too.", chunks=2),
    )
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
        served = ServedAgent(chat_agent(llm, toolkit=[add]))
        app = lambda url: create_app(served, url, token=TOKEN)  # noqa: E731
        async with running(app) as url:
            client = openai.AsyncOpenAI(api_key=TOKEN, base_url=f"{url}/v1")
            with anyio.fail_after(GUARD):
                reply = await client.chat.completions.create(
                    model="helper",
                    messages=[
                        {"role": "user", "content": "hi"},
                        {"role": "assistant", "content": "hello"},
                        {"role": "user", "content": "what is 2 + 3?"},
                    ],
                )
                stream = await client.chat.completions.create(
                    model="helper", messages=[{"role": "user", "content": "stream"}], stream=True
                )
                chunks = [chunk async for chunk in stream]
                models = await client.models.list()
            await client.close()
            async with OpenAICompatible(TOKEN, "helper", f"{url}/v1") as remote:
                ours = chat_agent(remote)
                with anyio.fail_after(GUARD):
                    texts = [text async for text, _ in ours("via our provider", history=[])]
    assert reply.choices[0].message.content == "It is 5."
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert reply.usage.prompt_tokens >= 7
    # The agent got the client's conversation as its history, under its own system prompt.
    first = mock_server.requests[0].json["messages"]
    assert [m["role"] for m in first] == ["system", "user", "assistant", "user"]
    assert first[0]["content"] == "You are a helper."
    deltas = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(deltas) == 3
    assert "".join(deltas) == "Streamed answer."
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert [m.id for m in models.data] == ["helper"]
    assert "".join(texts) == "Ours too."


async def test_auth_health_card_and_bad_requests(mock_server: MockLLMServer) -> None:
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
        served = ServedAgent(chat_agent(llm))
        async with (
            running(lambda url: create_app(served, url, token=TOKEN)) as url,
            httpx.AsyncClient(base_url=url) as http,
        ):
            body = {"messages": [{"role": "user", "content": "hi"}]}
            refused = await http.post("/v1/chat/completions", json=body)
            wrong = await http.post(
                "/v1/chat/completions", json=body, headers={"Authorization": "Bearer nope"}
            )
            a2a = await http.post("/a2a", json={})
            health = await http.get("/health")
            card = await http.get("/.well-known/agent-card.json")
            bad = await http.post(
                "/v1/chat/completions",
                json={"messages": []},
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
    assert (refused.status_code, wrong.status_code, a2a.status_code) == (401, 401, 401)
    assert refused.headers["www-authenticate"] == "Bearer"
    assert health.json() == {"status": "ok", "agent": "helper", "sessions": 0, "running": 0}
    assert card.status_code == 200
    assert "bearer" in card.json()["securitySchemes"]
    assert bad.status_code == 400
    assert mock_server.requests == []


async def test_limits_and_graceful_close_abort_running_turns(mock_server: MockLLMServer) -> None:
    wait, started, _ = waiting_tool()  # never released: the close aborts it
    mock_server.script(Reply.tool_calls(ToolCallSpec("wait", {}, id="w1")))
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
        served = ServedAgent(
            chat_agent(llm, toolkit=[wait]), limits=ServeLimits(max_sessions=1, max_turns=1)
        )
        async with served, anyio.create_task_group() as group:
            results: list[Any] = []

            async def turn() -> None:
                results.append(await result_of(served, TurnRequest("wait please", "s1")))

            group.start_soon(turn)
            with anyio.fail_after(GUARD):
                await started.wait()
            with pytest.raises(CapacityError) as busy:
                await result_of(served, TurnRequest("another"))
            assert busy.value.limit == "turns"
            served.limits = ServeLimits(max_sessions=1, max_turns=2)
            with pytest.raises(CapacityError) as full:
                await result_of(served, TurnRequest("a new session", "s2"))
            assert full.value.limit == "sessions"
            with anyio.fail_after(GUARD):
                await served.stop()
            with pytest.raises(CapacityError):
                await result_of(served, TurnRequest("after close"))
    assert results[0].aborted
    history = await served.history("s1")
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool"]


async def test_serve_command_serves_until_sigterm(tmp_path: Path) -> None:
    async with MockLLMServer(default=Reply.text("Served!", chunks=2)) as mock:
        config = write(
            tmp_path / "agent.yml",
            "name: greeter\ndescription: Greets.\nkind: react\nmodel: openai:mock-model\n"
            "system: Be brief.\nserve:\n  port: 0\n  max_sessions: 5\n",
        )
        env = clean_env(
            {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": mock.url, "SIMPLELLMFUNC_SERVE_TOKEN": TOKEN}
        )
        process, url = await start_serve(config, "--web", env=env, cwd=tmp_path)
        client = openai.AsyncOpenAI(api_key=TOKEN, base_url=f"{url}/v1")
        with anyio.fail_after(GUARD):
            reply = await client.chat.completions.create(
                model="greeter", messages=[{"role": "user", "content": "hello"}]
            )
            async with httpx.AsyncClient(base_url=url) as http:  # --web: the page too
                page = await http.get("/", params={"token": TOKEN})
                refused = await http.get("/")
        await client.close()
        process.send_signal(signal.SIGTERM)
        done = await finish(process)
    assert reply.choices[0].message.content == "Served!"
    assert (page.status_code, refused.status_code) == (200, 401)
    assert "<title>greeter</title>" in page.text
    assert done.code == 0, done.stderr
    assert "stopped" in done.stderr
    # The page's address names the token's variable; the token itself is never printed.
    assert f"web chat page: {url}/?token=$SIMPLELLMFUNC_SERVE_TOKEN" in done.stderr
    assert TOKEN not in done.stderr


async def test_serve_command_refuses_without_a_token(tmp_path: Path) -> None:
    config = write(tmp_path / "agent.yml", "model: openai:m\n")
    env = clean_env({"OPENAI_API_KEY": KEY})
    done = await finish(await start_cli("serve", config, env=env, cwd=tmp_path))
    assert done.code == 2
    assert "SIMPLELLMFUNC_SERVE_TOKEN" in done.stderr
    public = await finish(
        await start_cli("serve", config, "--no-auth", "--host", "0.0.0.0", env=env, cwd=tmp_path)
    )
    assert public.code == 2
    assert "loopback only" in public.stderr


async def test_config_agent_sessions_get_their_own_kernel_and_history(tmp_path: Path) -> None:
    """`serve` of a react config agent with a PyRepl: ``X-Session-Id`` sessions keep their own
    history and kernel over HTTP; a request without the header stays stateless."""

    def run(code: str, call_id: str) -> Reply:
        return Reply.tool_calls(ToolCallSpec("execute_code", {"code": code}, id=call_id))

    async with MockLLMServer() as mock:
        mock.script(
            run("x = 'alice'", "a1"),
            Reply.text("Set."),
            run("print(x)", "b1"),
            Reply.text("Bob has no x."),
            run("print(x)", "a2"),
            Reply.text("Still alice."),
            Reply.text("Stateless."),
        )
        config = write(
            tmp_path / "agent.yml",
            "name: coder\nkind: react\nmodel: openai:mock-model\nsystem: Run code.\n"
            f"toolkit:\n  pyrepl:\n    working_directory: {tmp_path / 'sessions'}\n"
            "serve:\n  port: 0\n",
        )
        env = clean_env({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": mock.url})
        process, url = await start_serve(config, "--no-auth", env=env, cwd=tmp_path)
        client = openai.AsyncOpenAI(api_key="unused", base_url=f"{url}/v1")

        async def say(text: str, session: str | None) -> Any:
            headers = {"X-Session-Id": session} if session else None
            return await client.chat.completions.with_raw_response.create(
                model="coder", messages=[{"role": "user", "content": text}], extra_headers=headers
            )

        with anyio.fail_after(GUARD * 2):
            first = await say("remember alice", "alice")
            bob = await say("what is x?", "bob")
            again = await say("and now?", "alice")
            stateless = await say("hello", None)
            async with httpx.AsyncClient(base_url=url) as http:
                health = (await http.get("/health")).json()
        await client.close()
        process.send_signal(signal.SIGTERM)
        done = await finish(process)
    assert done.code == 0, done.stderr
    assert first.headers["x-session-id"] == "alice"
    assert [r.parse().choices[0].message.content for r in (first, bob, again, stateless)] == [
        "Set.",
        "Bob has no x.",
        "Still alice.",
        "Stateless.",
    ]
    assert "x-session-id" not in stateless.headers
    requests = [r.json["messages"] for r in mock.requests]
    assert "NameError" in requests[3][-1]["content"]  # bob's kernel never saw alice's x
    assert "alice" in requests[5][-1]["content"]  # alice's kernel kept it
    # Alice's second turn continues her own conversation, without bob's.
    roles = ["system", "user", "assistant", "tool", "assistant", "user"]
    assert [m["role"] for m in requests[4]] == roles
    assert "what is x" not in str(requests[4])
    assert [m["role"] for m in requests[6]] == ["system", "user"]
    assert health["sessions"] == 2  # the stateless request's session is gone
    assert {p.name for p in (tmp_path / "sessions").iterdir()} >= {"alice", "bob"}
    assert (tmp_path / "sessions" / "alice" / "logs").is_dir()  # the kernel's audit log


async def test_session_header_refusals_and_a_disconnected_stream(
    mock_server: MockLLMServer,
) -> None:
    """A second request of a busy session gets 409, an invalid id 400; a stateless stream the
    client leaves ends its turn and forgets its throwaway session."""
    wait, started, release = waiting_tool()
    mock_server.script(Reply.tool_calls(ToolCallSpec("wait", {}, id="w1")), Reply.text("Done."))
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
        served = ServedAgent(chat_agent(llm, toolkit=[wait]))
        body = {"messages": [{"role": "user", "content": "wait"}], "stream": True}
        async with (
            running(lambda url: create_app(served, url, token=None)) as url,
            httpx.AsyncClient(base_url=url, timeout=GUARD) as http,
        ):
            with anyio.fail_after(GUARD):
                async with http.stream(
                    "POST", "/v1/chat/completions", json=body, headers={"X-Session-Id": "s1"}
                ) as first:
                    await started.wait()
                    busy = await http.post(
                        "/v1/chat/completions", json=body, headers={"X-Session-Id": "s1"}
                    )
                    invalid = await http.post(
                        "/v1/chat/completions", json=body, headers={"X-Session-Id": "no good"}
                    )
                    assert served.running == 1
                # The client left: the turn ends like an abort; the session keeps its history.
                await served.sessions.get("s1").wait_idle()
                release.set()
                health = (await http.get("/health")).json()
            history = await served.history("s1")
    assert first.status_code == 200
    assert first.headers["x-session-id"] == "s1"
    assert busy.status_code == 409
    assert "already running a turn" in busy.json()["error"]["message"]
    assert invalid.status_code == 400
    assert (health["sessions"], health["running"]) == (1, 0)
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool"]
    assert len(mock_server.requests) == 1


async def test_web_chat_turns_count_toward_max_turns(mock_server: MockLLMServer) -> None:
    """A turn from the web page holds one of ``max_turns`` while it runs, as API turns do: a
    second turn (page or API) is refused meanwhile, and the slot comes back when it ends."""
    wait, started, release = waiting_tool()
    mock_server.script(Reply.tool_calls(ToolCallSpec("wait", {}, id="w1")), Reply.text("Done."))
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
        served = ServedAgent(chat_agent(llm, toolkit=[wait]), limits=ServeLimits(max_turns=1))
        async with (
            running(lambda url: create_app(served, url, token=None, a2a=False, web=True)) as url,
            httpx.AsyncClient(base_url=url, timeout=GUARD) as http,
        ):
            with anyio.fail_after(GUARD):
                async with http.stream("POST", "/api/chat/s1", json={"message": "wait"}) as first:
                    await started.wait()
                    assert served.running == 1
                    second = await http.post("/api/chat/s2", json={"message": "hello"})
                    with pytest.raises(CapacityError) as api:
                        await result_of(served, TurnRequest("hello", "s3"))
                    release.set()
                    frames = [line async for line in first.aiter_lines() if line]
            assert served.running == 0
    assert first.status_code == 200
    assert second.status_code == 429
    assert api.value.limit == "turns"
    assert '"response":"Done."' in frames[-1]


async def test_a_standalone_web_chat_app_counts_turns_too(mock_server: MockLLMServer) -> None:
    """``web_chat_app(agent)`` serves its tabs through the same door: ``max_turns`` holds."""
    wait, started, release = waiting_tool()
    mock_server.script(Reply.tool_calls(ToolCallSpec("wait", {}, id="w1")), Reply.text("Done."))
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
        agent = chat_agent(llm, toolkit=[wait])
        limits = ServeLimits(max_turns=1)
        async with (
            running(lambda url: web_chat_app(agent, pyrepl=False, limits=limits)) as url,
            httpx.AsyncClient(base_url=url, timeout=GUARD) as http,
        ):
            with anyio.fail_after(GUARD):
                async with http.stream("POST", "/api/chat/s1", json={"message": "wait"}) as first:
                    await started.wait()
                    second = await http.post("/api/chat/s2", json={"message": "hello"})
                    release.set()
                    frames = [line async for line in first.aiter_lines() if line]
    assert first.status_code == 200
    assert second.status_code == 429
    assert '"response":"Done."' in frames[-1]


@pytest.mark.parametrize("mounted", [False, True], ids=["own-app", "mounted"])
async def test_a_page_given_its_sessions_goes_through_the_door(
    mock_server: MockLLMServer, mounted: bool
) -> None:
    """``web_chat_app(agent, sessions=store)`` (the caller opens the store; mounted in another
    app, whose lifespan does not run the page's): the tabs' turns still pass the door, so
    ``max_turns`` and the per-principal cap hold, and a turn is counted while it runs."""
    wait, started, release = waiting_tool()
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("wait", {}, id="w1")), Reply.text("Done."), Reply.text("Hi.")
    )
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
        # (a store calls the function itself: with events, its last item is the answer)
        agent = chat_agent(llm, toolkit=[wait], enable_event=True)
        store = SessionStore(agent, max_sessions=5)
        page = web_chat_app(agent, sessions=store, limits=ServeLimits(max_turns=1))

        def make_app(url: str) -> Any:
            return Starlette(routes=[Mount("/chat", page)]) if mounted else page

        root = "/chat" if mounted else ""
        async with (
            store,
            running(make_app) as url,
            httpx.AsyncClient(base_url=url + root, timeout=GUARD) as http,
        ):
            with anyio.fail_after(GUARD):
                async with http.stream("POST", "/api/chat/s1", json={"message": "wait"}) as first:
                    await started.wait()
                    second = await http.post("/api/chat/s2", json={"message": "hello"})
                    overview = (await http.get("/api/sessions")).json()
                    release.set()
                    frames = [line async for line in first.aiter_lines() if line]
            assert "s2" not in store  # refused before its session was used
            assert not store.get("s1").busy
            # Once the first turn ended, another one is admitted.
            with anyio.fail_after(GUARD):
                async with http.stream("POST", "/api/chat/s2", json={"message": "hi"}) as third:
                    again = [line async for line in third.aiter_lines() if line]
    assert first.status_code == 200
    assert second.status_code == 429
    assert "turns are running" in second.json()["error"]
    assert [s["id"] for s in overview["sessions"]] == ["s1"]
    assert '"response":"Done."' in frames[-1]
    assert third.status_code == 200
    assert '"response":"Hi."' in again[-1]


async def test_a_chain_config_agent_is_served_on_one_pump(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    """A chain's stages run in turn (each answer fills the next prompt); served, its turn
    crosses one event pump (each stage's engine run driven in the store's turn task), and
    the trace has every stage."""
    pumps: list[int] = []

    def stage(text: str) -> Any:
        def reply(request: Any) -> Reply:
            pumps.append(pump_tasks())  # the mock server runs in this event loop
            return Reply.text(text)

        return reply

    mock_server.script(stage("draft"), stage("polished draft"))
    environ = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": mock_server.url}
    config = load_agent_config(
        write(
            tmp_path / "chain.yml",
            "name: writer\nmodel: openai:mock-model\nkind: chain\n"
            "chain: ['Draft: {input}', 'Polish: {input}']\n",
        ),
        environ=environ,
    )
    async with served_config(config, environ) as (agent, client):
        with anyio.fail_after(GUARD):
            reply = await client.chat.completions.create(
                model="writer", messages=[{"role": "user", "content": "a poem"}]
            )
        records = agent.recorder.records
    assert reply.choices[0].message.content == "polished draft"
    prompts = [r.json["messages"][-1]["content"] for r in mock_server.requests]
    assert prompts == ["Draft: a poem", "Polish: draft"]
    assert pumps == [1, 1]
    assert [(r.kind, r.output) for r in records if r.kind == "end"] == [
        ("end", "draft"),
        ("end", "polished draft"),
    ]


async def test_a_team_config_agent_is_served_on_one_pump(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    """A group's members speak in turn over ``/v1`` (streamed); the turn crosses one event
    pump (the team is played in the store's turn task), each member's reply streams once,
    and the trace says who spoke."""
    pumps: list[int] = []

    def by_member(request: Any) -> Reply:
        pumps.append(pump_tasks())
        if request.json["messages"][0]["content"] == "You criticise.":
            return Reply.text("APPROVED, nice.", chunks=2)
        return Reply.text("A draft.", chunks=2)

    mock_server.default = by_member
    environ = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": mock_server.url}
    (tmp_path / "members").mkdir()
    write(tmp_path / "members" / "writer.yml", "model: openai:mock-model\nsystem: You write.\n")
    write(tmp_path / "members" / "critic.yml", "model: openai:mock-model\nsystem: You criticise.\n")
    config = load_agent_config(
        write(
            tmp_path / "group.yml",
            "name: team\nkind: group\nmodel: openai:mock-model\n"
            "agents: [members/writer.yml, members/critic.yml]\n"
            "group: {max_rounds: 3, stop_keywords: [APPROVED]}\n",
        ),
        environ=environ,
    )
    async with served_config(config, environ) as (agent, client):
        with anyio.fail_after(GUARD):
            stream = await client.chat.completions.create(
                model="team", messages=[{"role": "user", "content": "a slogan"}], stream=True
            )
            chunks = [chunk async for chunk in stream]
        records = agent.recorder.records
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert pumps == [1, 1]
    assert [r.agent for r in records if r.kind == "end"] == ["writer", "critic"]


def pump_tasks() -> int:
    """How many engine event pumps are running now (tasks running ``engine/_pump.py``'s body)."""
    body = str(Path("engine", "_pump.py"))
    running = 0
    for task in asyncio.all_tasks():
        awaited: Any = task.get_coro()  # anyio may wrap the task's coroutine: walk down
        while awaited is not None:
            code = getattr(awaited, "cr_code", None)
            if code is not None and code.co_name == "_run" and code.co_filename.endswith(body):
                running += 1
                break
            awaited = getattr(awaited, "cr_await", None)
    return running


async def test_a_configured_agent_is_served_on_one_pump_with_its_whole_trace(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    """A config agent's turn over ``/v1`` crosses one event pump (the session store's; its
    run is driven there, the trace recorder tapped on the run's emitter), streams each chunk
    once, and its trace still has every step, in the recorder and the trace file."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("the answer is 42\n")
    pumps: list[int] = []

    def answer(request: Any) -> Reply:
        pumps.append(pump_tasks())  # the mock server runs in this event loop
        return Reply.text("It is 42.", chunks=3)

    mock_server.script(
        Reply.tool_calls(ToolCallSpec("read_file", {"path": "notes.txt"}, id="c1")), answer
    )
    environ = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": mock_server.url}
    config = load_agent_config(
        write(
            tmp_path / "reader.yml",
            f"name: reader\nmodel: openai:mock-model\ntoolkit:\n  files: {workspace}\n"
            f"trace:\n  file: {tmp_path / 'trace.jsonl'}\n",
        ),
        environ=environ,
    )
    async with served_config(config, environ) as (agent, client):
        with anyio.fail_after(GUARD):
            stream = await client.chat.completions.create(
                model="reader",
                messages=[{"role": "user", "content": "what is in notes?"}],
                stream=True,
            )
            chunks = [chunk async for chunk in stream]
        records = agent.recorder.records
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "It is 42."
    assert pumps == [1]
    assert [(r.kind, r.name) for r in records] == [
        ("llm", "mock-model"),
        ("tool", "read_file"),
        ("llm", "mock-model"),
        ("end", "answer"),
    ]
    assert "the answer is 42" in records[1].output
    assert records[-1].output == "It is 42."
    lines = (tmp_path / "trace.jsonl").read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["llm", "tool", "llm", "end"]


def test_limits_have_one_set_of_defaults(tmp_path: Path) -> None:
    """Code, config files and the ``serve`` / ``web`` flags read the limits' defaults from
    ``ServeLimits``; a flag overrides the config, which overrides the defaults."""
    defaults = ServeLimits()
    config = load_agent_config(write(tmp_path / "a.yml", "name: a\nmodel: openai:m\n"))
    assert config.serve.limits() == defaults
    store = SessionStore(lambda **_: None)
    assert (store.max_sessions, store.idle_timeout) == (
        defaults.max_sessions,
        defaults.idle_timeout,
    )
    env = {"SIMPLELLMFUNC_SERVE_TOKEN": "tok"}
    parser = build_parser()
    for argv, expected in (
        (["serve", "a.yml"], defaults),
        (["web", "a.yml", "--max-turns", "3"], replace(defaults, max_turns=3)),
        (
            ["serve", "a.yml", "--max-sessions", "7", "--idle-timeout", "5"],
            replace(defaults, max_sessions=7, idle_timeout=5.0),
        ),
    ):
        args = parser.parse_args(argv)
        settings = ServeSettings.resolve(
            config,
            environ=env,
            max_sessions=args.max_sessions,
            max_turns=args.max_turns,
            idle_timeout=args.idle_timeout,
            page=args.command == "web",
        )
        assert settings.limits == expected, argv
    served = load_agent_config(
        write(tmp_path / "b.yml", "name: b\nmodel: openai:m\nserve:\n  max_turns: 2\n")
    )
    assert served.serve.limits() == replace(defaults, max_turns=2)
    with pytest.raises(UserError):
        ServeLimits(max_turns=0)


@pytest.mark.parametrize("stream", [True, False])
async def test_a_store_of_an_agent_without_events_gives_the_door_its_answer(
    mock_server: MockLLMServer, stream: bool
) -> None:
    """A store the caller built on an ``@llm_chat`` function without events (its items are
    ``(text, history)`` pairs, streamed deltas or the whole reply): the door's result is the
    answer, not an empty one."""
    mock_server.script(Reply.text("Hello there."))
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:

        @llm_chat(llm, stream=stream)
        async def helper(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """You are a helper."""

        async with SessionStore(helper) as store, ServedAgent.around(store) as served:
            with anyio.fail_after(GUARD):
                items = [item async for item in served.turn(TurnRequest("hi", session_id="s"))]
    result = items[-1]
    assert isinstance(result, TurnResult)
    assert result.text == "Hello there."
    assert result.history[-1] == {"role": "assistant", "content": "Hello there."}
