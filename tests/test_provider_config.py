"""provider.json and environment settings: good files work at the wire, bad ones fail clearly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from simplellmfunc._messages import UserMessage
from simplellmfunc.exceptions import ConfigError, ProviderError
from simplellmfunc.providers import LLMRequest, OpenAICompatible
from simplellmfunc.testing import MockLLMServer, Reply, key_fingerprint

KEY = "sk-test-config-key-0000000001"
KEY_2 = "sk-test-config-key-0000000002"
REQUEST = LLMRequest((UserMessage("hi"),))


def write(tmp_path: Path, content: Any) -> Path:
    path = tmp_path / "provider.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
    return path


def entry(**fields: Any) -> dict[str, Any]:
    base = {"model_name": "gpt-4o-mini", "api_keys": [KEY], "base_url": "http://127.0.0.1:9/v1"}
    return {**base, **fields}


def config_error(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        OpenAICompatible.load_from_json_file(path)
    message = str(caught.value)
    assert KEY not in message
    return message


# -- good files ----------------------------------------------------------------------------------


def test_provider_json_builds_every_interface(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        {
            "openai": [entry(), entry(model_name="gpt-4o", api_keys=[KEY, KEY_2])],
            "local": [entry(model_name="llama", base_url="http://localhost:8080/v1")],
        },
    )
    loaded = OpenAICompatible.load_from_json_file(path)
    assert {p: sorted(m) for p, m in loaded.items()} == {
        "openai": ["gpt-4o", "gpt-4o-mini"],
        "local": ["llama"],
    }
    gpt4o = loaded["openai"]["gpt-4o"]
    assert gpt4o.model_name == "gpt-4o"
    assert gpt4o.provider_name == "openai"
    assert gpt4o.key_pool is not None
    assert gpt4o.key_pool.keys == (KEY, KEY_2)
    assert loaded["local"]["llama"].base_url == "http://localhost:8080/v1"
    # Two interfaces never share a pool, even with the same keys.
    assert loaded["openai"]["gpt-4o-mini"].key_pool is not gpt4o.key_pool


async def test_loaded_interface_talks_to_the_server(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    path = write(
        tmp_path,
        {
            "mock": [
                entry(
                    base_url=mock_server.url,
                    api_keys=[KEY_2],
                    max_retries=0,
                    timeout=30,
                    context_window=128000,
                    temperature=0.2,  # unknown fields are body parameters of every call
                )
            ]
        },
    )
    loaded = OpenAICompatible.load_from_json_file(str(path))  # str paths work too
    mock_server.script(Reply.text("hello"), Reply.error(503))
    async with loaded["mock"]["gpt-4o-mini"] as llm:
        assert llm.context_window == 128000
        assert (await llm.complete(REQUEST)).text == "hello"
        with pytest.raises(ProviderError):
            await llm.complete(REQUEST)  # max_retries=0: no retry
    assert len(mock_server.requests) == 2
    first = mock_server.requests[0]
    assert first.json["temperature"] == 0.2
    assert first.headers["authorization"] == f"Bearer {key_fingerprint(KEY_2)}"


async def test_retry_delay_and_rate_limit_fields_are_used(
    tmp_path: Path, mock_server: MockLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", "simplellmfunc")
    path = write(
        tmp_path,
        {
            "mock": [
                entry(
                    base_url=mock_server.url,
                    max_retries=1,
                    retry_delay=0.02,
                    rate_limit_capacity=5,
                    rate_limit_refill_rate=100,
                )
            ]
        },
    )
    llm = OpenAICompatible.load_from_json_file(path)["mock"]["gpt-4o-mini"]
    mock_server.script(Reply.error(500), Reply.text("ok"))
    async with llm:
        assert (await llm.complete(REQUEST)).text == "ok"
    (message,) = [r.getMessage() for r in caplog.records if "retry 1/1" in r.getMessage()]
    delay = float(message.rsplit(" in ", 1)[1].rstrip("s"))
    assert 0.015 <= delay <= 0.02  # retry_delay is the first backoff (with jitter)


# -- bad files -----------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    message = config_error(tmp_path / "nope.json")
    assert "nope.json" in message
    assert "cannot read" in message


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "openai": [\n    {"model_name": "m",,}\n  ]\n}\n')
    message = config_error(path)
    assert f"{path}:3:24: invalid JSON" in message


@pytest.mark.parametrize(
    ("content", "location"),
    [
        ({"openai": [{"model_name": "m", "base_url": "http://x"}]}, "openai[0].api_keys"),
        ({"openai": [entry(), entry(api_keys=KEY)]}, "openai[1].api_keys"),  # a string, not a list
        ({"openai": [entry(api_keys=[])]}, "openai[0].api_keys"),
        ({"openai": [entry(api_keys=[KEY, ""])]}, "openai[0].api_keys[1]"),
        ({"openai": [entry(api_keys=[KEY, 42])]}, "openai[0].api_keys[1]"),
        ({"openai": [entry(max_retries="many")]}, "openai[0].max_retries"),
        ({"openai": [entry(max_retries=-1)]}, "openai[0].max_retries"),
        ({"openai": [entry(timeout=0)]}, "openai[0].timeout"),
        ({"openai": [entry(model_name="")]}, "openai[0].model_name"),
        ({"openai": [entry(base_url=None)]}, "openai[0].base_url"),
        ({"openai": entry()}, "openai: "),  # an object, not a list of entries
        ({"openai": ["gpt-4o"]}, "openai[0]: "),
        ([entry()], ": Input should be a valid dictionary"),
        ({"openai": [entry(), entry()]}, "openai[1].model_name: duplicate"),
    ],
)
def test_bad_entries_name_their_location(tmp_path: Path, content: Any, location: str) -> None:
    path = write(tmp_path, content)
    message = config_error(path)
    assert str(path) in message
    assert location in message


def test_every_problem_of_a_file_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, {"a": [{"model_name": "m"}], "b": [entry(timeout="soon")]})
    message = config_error(path)
    for location in ("a[0].api_keys", "a[0].base_url", "b[0].timeout"):
        assert location in message


# -- environment ---------------------------------------------------------------------------------


def test_from_env_mapping() -> None:
    llm = OpenAICompatible.from_env(
        {
            "OPENAI_API_KEY": f" {KEY} , {KEY_2} ",
            "OPENAI_MODEL": "gpt-4o-mini",
            "OPENAI_BASE_URL": "http://127.0.0.1:9/v1/",
        }
    )
    assert llm.model_name == "gpt-4o-mini"
    assert llm.base_url == "http://127.0.0.1:9/v1"
    assert llm.key_pool is not None
    assert llm.key_pool.keys == (KEY, KEY_2)


def test_from_env_defaults_to_openai() -> None:
    llm = OpenAICompatible.from_env({"OPENAI_API_KEY": KEY, "OPENAI_MODEL": "gpt-4o"})
    assert llm.base_url == "https://api.openai.com/v1"


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OPENAI_API_KEY": KEY},
        {"OPENAI_MODEL": "m"},
        {"OPENAI_MODEL": "m", "OPENAI_API_KEY": " , "},
    ],
)
def test_from_env_without_model_or_key(environ: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="OPENAI_MODEL and OPENAI_API_KEY") as caught:
        OpenAICompatible.from_env(environ)
    assert KEY not in str(caught.value)


def test_from_env_reads_dotenv_and_the_environment_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".env").write_text(
        f"OPENAI_API_KEY={KEY}\nOPENAI_MODEL=from-dotenv\nOPENAI_BASE_URL=http://dotenv/v1\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_MODEL", "from-environment")
    llm = OpenAICompatible.from_env()
    assert llm.model_name == "from-environment"
    assert llm.base_url == "http://dotenv/v1"
    assert llm.key_pool is not None
    assert llm.key_pool.keys == (KEY,)
    assert KEY not in repr(llm)


def test_from_env_for_a_local_server_needs_no_key_and_takes_capabilities() -> None:
    llm = OpenAICompatible.from_env(
        {
            "OPENAI_MODEL": "SmolLM2-135M-Instruct",
            "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1",
            "OPENAI_CAPABILITIES": "native_tools=false, json_schema=true, stream_usage=0",
        }
    )
    assert llm.key_pool is None
    caps = llm.capabilities
    assert (caps.native_tools, caps.json_schema, caps.stream_usage) == (False, True, False)
    assert caps.streaming  # fields left out keep their defaults


async def test_from_env_bounds_replies_with_max_tokens(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("hello"))
    environ = {"OPENAI_MODEL": "m", "OPENAI_BASE_URL": mock_server.url, "OPENAI_MAX_TOKENS": "96"}
    async with OpenAICompatible.from_env(environ) as llm:
        await llm.complete(LLMRequest((UserMessage("hi"),)))
    assert mock_server.requests[0].json["max_tokens"] == 96
    with pytest.raises(ConfigError, match="OPENAI_MAX_TOKENS must be a positive integer"):
        OpenAICompatible.from_env({**environ, "OPENAI_MAX_TOKENS": "lots"})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("native_tool=false", "unknown capability 'native_tool'"),
        ("json_schema=maybe", "true or false"),
    ],
)
def test_from_env_refuses_capabilities_that_do_not_parse(value: str, message: str) -> None:
    environ = {"OPENAI_MODEL": "m", "OPENAI_BASE_URL": "http://localhost:1/v1"}
    with pytest.raises(ConfigError, match=message):
        OpenAICompatible.from_env({**environ, "OPENAI_CAPABILITIES": value})


async def test_from_env_talks_to_a_local_server_without_a_key(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("hello"))
    environ = {"OPENAI_MODEL": "m", "OPENAI_BASE_URL": mock_server.url}
    async with OpenAICompatible.from_env(environ) as llm:
        response = await llm.complete(LLMRequest((UserMessage("hi"),)))
    assert response.text == "hello"
    assert "authorization" not in mock_server.requests[0].headers
