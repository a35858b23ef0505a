"""Provider presets and ``make_llm``: base URLs, key variables, capabilities, overrides."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from simplellmfunc.exceptions import ConfigError
from simplellmfunc.providers import Capabilities, LLMRequest, OpenAICompatible
from simplellmfunc.providers._claude_cli import ClaudeCodeCLI
from simplellmfunc.providers._presets import PRESETS, Preset, make_llm
from simplellmfunc.testing import MockLLMServer, Reply
from simplellmfunc.types import UserMessage

KEY = "sk-preset-test-0123456789"
NO_SCHEMA = Capabilities(json_schema=False)
# llama-server: the JSON tool protocol (json_schema on, no native tools), no tool deltas.
LLAMACPP = Capabilities(
    native_tools=False,
    parallel_tool_calls=False,
    streaming_with_tools=False,
    null_assistant_content=False,
    json_schema=True,
)
# Written out independently of the table under test.
EXPECTED: dict[str, tuple[str, str, Capabilities]] = {
    "openai": ("https://api.openai.com/v1", "OPENAI_API_KEY", Capabilities()),
    "deepseek": (
        "https://api.deepseek.com/v1",
        "DEEPSEEK_API_KEY",
        Capabilities(json_schema=False, vision=False),
    ),
    "dashscope": (
        "https://dashscope.aliyuncs.com/compatible-mode/v1",
        "DASHSCOPE_API_KEY",
        NO_SCHEMA,
    ),
    "moonshot": ("https://api.moonshot.cn/v1", "MOONSHOT_API_KEY", NO_SCHEMA),
    "zhipu": ("https://open.bigmodel.cn/api/paas/v4", "ZHIPUAI_API_KEY", NO_SCHEMA),
    "openrouter": ("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", Capabilities()),
    "ollama": ("http://127.0.0.1:11434/v1", "OLLAMA_API_KEY", Capabilities()),
    "llamacpp": ("http://127.0.0.1:8080/v1", "LLAMACPP_API_KEY", LLAMACPP),
}
LOCAL = {"ollama", "llamacpp"}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No key or base URL from the real environment, and no ``.env`` but the test's own."""
    monkeypatch.chdir(tmp_path)
    for preset in PRESETS.values():
        for name in (preset.key_env, preset.base_url_env):
            if name:
                monkeypatch.delenv(name, raising=False)


def test_the_table_covers_every_provider() -> None:
    assert set(EXPECTED) | {"anthropic", "claude-code"} == set(PRESETS)
    assert all(isinstance(p, Preset) and p.name == name for name, p in PRESETS.items())


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_preset_builds_the_interface(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    base_url, key_env, caps = EXPECTED[name]
    assert PRESETS[name].key_env == key_env
    monkeypatch.setenv(key_env, KEY)
    async with make_llm(f"{name}:some-model") as llm:
        assert isinstance(llm, OpenAICompatible)
        assert llm.base_url == base_url
        assert llm.key_pool is not None
        assert llm.key_pool.keys == (KEY,)
        assert llm.capabilities == caps
        assert llm.model_name == "some-model"
        assert llm.provider_name == name
        assert KEY not in repr(llm)


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_missing_key(name: str) -> None:
    key_env = EXPECTED[name][1]
    if name in LOCAL:
        async with make_llm(f"{name}:m") as llm:
            assert isinstance(llm, OpenAICompatible)
            assert llm.key_pool is None  # local servers need no key
        return
    with pytest.raises(ConfigError, match=key_env):
        make_llm(f"{name}:m")


async def test_key_from_dotenv_and_several_keys(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(f"DEEPSEEK_API_KEY={KEY}, sk-second-key-0123456789\n")
    async with make_llm("deepseek:deepseek-chat") as llm:
        assert isinstance(llm, OpenAICompatible)
        assert llm.key_pool is not None
        assert llm.key_pool.keys == (KEY, "sk-second-key-0123456789")


async def test_environment_wins_over_dotenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".env").write_text("MOONSHOT_API_KEY=sk-from-dotenv-000000\n")
    monkeypatch.setenv("MOONSHOT_API_KEY", KEY)
    async with make_llm("moonshot:kimi") as llm:
        assert isinstance(llm, OpenAICompatible)
        assert llm.key_pool is not None
        assert llm.key_pool.keys == (KEY,)


async def test_explicit_environ_and_base_url_variable() -> None:
    environ = {"OPENROUTER_API_KEY": KEY, "OPENROUTER_BASE_URL": "http://proxy.local/v1"}
    async with make_llm("openrouter:x/y", environ=environ) as llm:
        assert isinstance(llm, OpenAICompatible)
        assert llm.base_url == "http://proxy.local/v1"


async def test_overrides_win() -> None:
    caps = Capabilities(vision=False)
    llm = make_llm(
        "zhipu:glm-4",
        environ={},
        api_key=KEY,
        base_url="http://zhipu.local/v4",
        capabilities=caps,
        provider_name="glm",
        temperature=0.2,
    )
    async with llm:
        assert isinstance(llm, OpenAICompatible)
        assert llm.base_url == "http://zhipu.local/v4"
        assert llm.capabilities == caps
        assert llm.provider_name == "glm"
        assert llm.default_params == {"temperature": 0.2}
        assert llm.key_pool is not None
        assert llm.key_pool.keys == (KEY,)


async def test_model_names_may_contain_colons() -> None:
    async with make_llm("Ollama:llama3:8b", environ={}) as llm:
        assert llm.model_name == "llama3:8b"


@pytest.mark.parametrize(
    ("spec", "message"),
    [("nowhere:m", "unknown provider 'nowhere'.*deepseek"), ("deepseek", "names no model")],
)
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_llm(spec, environ={"DEEPSEEK_API_KEY": KEY})


async def test_llamacpp_preset_at_the_wire(mock_server: MockLLMServer) -> None:
    """No key and a bounded reply: what a local llama.cpp server gets."""
    mock_server.script(Reply.text("hi there", chunks=2, usage=None))
    request = LLMRequest((UserMessage("hi"),))
    async with make_llm("llamacpp:local", base_url=mock_server.url) as llm:
        events = [event async for event in llm.stream(request)]
    sent = mock_server.requests[-1]
    assert "authorization" not in sent.headers
    assert sent.json["model"] == "local"
    assert sent.json["max_tokens"] == 512
    final: Any = events[-1]
    assert final.response.text == "hi there"
    assert final.response.provider == "llamacpp"
    mock_server.script(Reply.text("again"))
    async with make_llm("llamacpp:local", base_url=mock_server.url, max_tokens=64) as llm:
        await llm.complete(request)
    assert mock_server.requests[-1].json["max_tokens"] == 64  # an override wins


@pytest.mark.skipif(
    importlib.util.find_spec("simplellmfunc.providers._anthropic") is None,
    reason="AnthropicCompatible (providers/_anthropic.py) is not written yet",
)
async def test_anthropic_preset() -> None:
    from simplellmfunc.providers._anthropic import AnthropicCompatible

    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        make_llm("anthropic:claude-sonnet-4-5", environ={})
    environ = {"ANTHROPIC_API_KEY": KEY}
    async with make_llm("anthropic:claude-sonnet-4-5", environ=environ) as llm:
        assert isinstance(llm, AnthropicCompatible)
        assert llm.base_url == "https://api.anthropic.com/v1"
        assert llm.key_pool is not None
        assert llm.key_pool.keys == (KEY,)
        assert llm.provider_name == "anthropic"
        assert not llm.capabilities.json_schema


def test_claude_code_preset(tmp_path: Path) -> None:
    llm = make_llm("claude-code:sonnet", executable=tmp_path / "claude", permission_mode="plan")
    assert isinstance(llm, ClaudeCodeCLI)
    assert (llm.model, llm.permission_mode, llm.provider_name) == ("sonnet", "plan", "claude-code")
    assert llm.capabilities.stateful_session
    bare = make_llm("claude-code")
    assert isinstance(bare, ClaudeCodeCLI)
    assert bare.model is None
