"""A2A for every client the a2a-sdk speaks to, and where our A2A tool's requests may go.

Server side: our agent (``@llm_chat`` over the loopback ``MockLLMServer``) served with
``a2a_app`` under uvicorn, driven by the SDK's current (1.0) client and by its 0.3 client (the
SDK's compatibility transport, picked from the 0.3 fields of our card), and by a bare JSON-RPC
POST without an ``A2A-Version`` header. Client side: ``A2AAgentTool`` against the SDK's own
server, with a card served by another origin.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3.jsonrpc_transport import CompatJsonRpcTransport
from a2a.helpers import get_artifact_text
from a2a.server.routes import create_agent_card_routes
from a2a.types import AgentCard, GetTaskRequest, TaskState
from starlette.applications import Starlette
from starlette.responses import RedirectResponse
from starlette.routing import Route

from simplellmfunc import OpenAICompatible
from simplellmfunc.exceptions import A2AError
from simplellmfunc.runtime import load_agent_config
from simplellmfunc.runtime.a2a import A2AAgentTool, a2a_tool
from simplellmfunc.runtime.config import ConfiguredAgent
from simplellmfunc.runtime.skills import Skill, Skills
from simplellmfunc.serving import ServedAgent, a2a_app, create_app, running
from simplellmfunc.testing import MockLLMServer, Reply
from test_a2a import CARD_PATH, GUARD, KEY, add, chat_agent, sdk_server, user

LEGACY_CARD_PATH = "/.well-known/agent.json"


async def test_clients_of_both_protocol_versions_and_no_version_header(
    mock_server: MockLLMServer,
) -> None:
    mock_server.script(
        Reply.text("Hello from 1.0."), Reply.text("Hello from 0.3."), Reply.text("Bare.")
    )
    skills = Skills([Skill(name="haiku", description="Write a haiku.", instructions="5-7-5.")])
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
        served = ServedAgent(chat_agent(llm, "poet", toolkit=[add, skills]))
        async with running(lambda url: a2a_app(served, url)) as url, httpx.AsyncClient() as http:
            with anyio.fail_after(GUARD):
                current = (await http.get(url + CARD_PATH)).json()
                legacy = (await http.get(url + LEGACY_CARD_PATH)).json()
                under_rpc = (await http.get(url + "/a2a" + CARD_PATH)).json()
                # The current client (1.0 interface, A2A-Version: 1.0).
                client = ClientFactory(ClientConfig(httpx_client=http)).create(
                    parse_agent_card(dict(current))
                )
                new = [r async for r in client.send_message(user("hi"))]
                task = await client.get_task(GetTaskRequest(id=new[-1].status_update.task_id))
                await client.close()
                # A 0.3 client reads only the 0.3 fields of the card.
                old_card = {k: v for k, v in current.items() if k != "supportedInterfaces"}
                old = ClientFactory(ClientConfig(httpx_client=http)).create(
                    parse_agent_card(old_card)
                )
                assert isinstance(old._transport, CompatJsonRpcTransport)
                answers = [r async for r in old.send_message(user("hi again"))]
                await old.close()
                # No A2A-Version header (a client of its own: the SDK's set one on ``http``).
                async with httpx.AsyncClient() as plain:
                    bare = await plain.post(
                        url + "/a2a",
                        json={
                            "jsonrpc": "2.0",
                            "id": 1,
                            "method": "message/send",
                            "params": {
                                "message": {
                                    "kind": "message",
                                    "messageId": "m-1",
                                    "role": "user",
                                    "parts": [{"kind": "text", "text": "no header"}],
                                }
                            },
                        },
                    )
                    listed = await list_tasks(plain, url)
                    bogus = await list_tasks(plain, url, status="TASK_STATE_BOGUS")
    assert current == legacy == under_rpc
    assert current["protocolVersion"].startswith("0.3")  # the 0.3 card's own fields
    assert current["url"] == f"{url}/a2a"
    versions = {i["protocolVersion"] for i in current["supportedInterfaces"]}
    assert versions == {"1.0", "0.3"}
    assert [(s["id"], s["tags"]) for s in current["skills"]] == [
        ("haiku", ["skill"]),
        ("add", ["tool"]),
    ]
    assert current["skills"][1]["description"] == "Add two numbers."
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [get_artifact_text(a) for a in task.artifacts] == ["Hello from 1.0."]
    last = answers[-1]
    state = (
        last.status_update.status.state
        if last.HasField("status_update")
        else last.task.status.state
    )
    assert state == TaskState.TASK_STATE_COMPLETED
    body = bare.json()
    assert "error" not in body, body
    assert body["result"]["status"]["state"] == "completed"
    assert listed["result"]["pageSize"] == len(listed["result"]["tasks"]) == 3
    assert bogus["error"]["code"] == -32602


async def list_tasks(http: httpx.AsyncClient, url: str, **params: Any) -> dict[str, Any]:
    request = {"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": params}
    response = await http.post(url + "/a2a", json=request, headers={"A2A-Version": "1.0"})
    return dict(response.json())


async def test_a_chat_agent_without_tools_is_one_chat_skill(mock_server: MockLLMServer) -> None:
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
        served = ServedAgent(chat_agent(llm, "plain"))
        async with running(lambda url: a2a_app(served, url)) as url, httpx.AsyncClient() as http:
            with anyio.fail_after(GUARD):
                card = (await http.get(url + CARD_PATH)).json()
    assert [(s["id"], s["tags"]) for s in card["skills"]] == [("plain", ["chat"])]


class Seen:
    """ASGI middleware: the (path, Authorization header) of every request."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[tuple[str, str | None]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization")
            self.requests.append((scope["path"], auth.decode() if auth else None))
        await self.app(scope, receive, send)

    def tokens(self) -> list[str | None]:
        return [auth for _, auth in self.requests]


async def test_the_token_goes_to_the_cards_origin_only() -> None:
    servers: dict[str, Seen] = {}
    b_card: list[AgentCard] = []

    def b(url: str) -> Seen:
        servers["b"] = Seen(sdk_server(url))
        return servers["b"]

    def a(url: str) -> Seen:
        # A serves a card naming B's endpoint, and redirects its legacy card path to B's card.
        routes: list[Any] = [*create_agent_card_routes(b_card[0])]
        b_url = b_card[0].supported_interfaces[0].url.removesuffix("/rpc")
        routes.append(
            Route(
                "/moved/.well-known/agent-card.json", lambda _: RedirectResponse(b_url + CARD_PATH)
            )
        )
        servers["a"] = Seen(Starlette(routes=routes))
        return servers["a"]

    async with running(b) as b_url:
        async with httpx.AsyncClient() as http:
            b_card.append(parse_agent_card((await http.get(b_url + CARD_PATH)).json()))
        async with running(a) as a_url:
            with anyio.fail_after(GUARD):
                async with await a2a_tool(a_url, token="s3cret") as tool:
                    assert await tool.run("hello") == "HELLO"
                bearer = ["Bearer s3cret"]
                assert set(servers["a"].tokens()) == set(bearer)  # the card's origin: yes
                assert servers["b"].requests  # B was called ...
                assert set(servers["b"].tokens()) == {None}  # ... without the token
                # An explicit allowlist lets B have it.
                trusted = await a2a_tool(a_url, token="s3cret", trusted_origins=[b_url])
                async with trusted:
                    assert await trusted.run("again") == "AGAIN"
                assert servers["b"].tokens()[-1] == bearer[0]
                # A redirect is not followed: the token never crosses it.
                calls = len(servers["b"].requests)
                with pytest.raises(A2AError):
                    await a2a_tool(a_url + "/moved", token="s3cret")
                assert len(servers["b"].requests) == calls


async def test_a_remote_card_may_not_point_at_the_local_network() -> None:
    seen: list[Seen] = []

    def b(url: str) -> Seen:
        seen.append(Seen(sdk_server(url)))
        return seen[0]

    async with running(b) as b_url, httpx.AsyncClient() as http:
        card = parse_agent_card((await http.get(b_url + CARD_PATH)).json())
        # The card claims to come from a public address and names a loopback endpoint.
        remote = A2AAgentTool("http://8.8.8.8", name="remote", token="s3cret", card=card)
        with anyio.fail_after(GUARD), pytest.raises(A2AError, match="private or loopback"):
            await remote.run("probe")
        await remote.aclose()
        # The same card read from loopback itself (a local deployment) may name loopback.
        local = A2AAgentTool(b_url, name="local", card=card)
        async with local:
            with anyio.fail_after(GUARD):
                assert await local.run("ok") == "OK"
    assert [path for path, _ in seen[0].requests] == ["/.well-known/agent-card.json", "/rpc"]


async def test_every_card_path_is_public_behind_a_token(mock_server: MockLLMServer) -> None:
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:
        served = ServedAgent(chat_agent(llm, "guarded", toolkit=[add]))
        app = lambda url: create_app(served, url, token="t0ken-t0ken")  # noqa: E731
        async with running(app) as url, httpx.AsyncClient() as http:
            with anyio.fail_after(GUARD):
                paths = [CARD_PATH, LEGACY_CARD_PATH, "/a2a" + CARD_PATH, "/a2a" + LEGACY_CARD_PATH]
                cards = [(await http.get(url + path)) for path in paths]
                rpc = await http.post(url + "/a2a", json={"jsonrpc": "2.0", "id": 1})
    assert [c.status_code for c in cards] == [200, 200, 200, 200]
    assert cards[0].json()["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == (
        "Bearer"
    )
    assert rpc.status_code == 401


async def test_a_config_agents_card_lists_its_tools(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    environ = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": mock_server.url}
    path = tmp_path / "filer.yml"
    path.write_text(f"name: filer\nmodel: openai:mock-model\ntoolkit:\n  files: {tmp_path}\n")
    config = load_agent_config(path, environ=environ)
    async with (
        ConfiguredAgent(config, environ=environ) as agent,
        running(lambda url: a2a_app(ServedAgent(agent), url)) as url,
        httpx.AsyncClient() as http,
    ):
        with anyio.fail_after(GUARD):
            card = (await http.get(url + CARD_PATH)).json()
        tools = [tool.name for tool in agent.toolkit]
    assert len(tools) > 1
    assert [(s["id"], s["tags"]) for s in card["skills"]] == [(t, ["tool"]) for t in tools]
