"""Provider presets and the one-line factory: ``make_llm("deepseek:deepseek-chat")``.

A preset names where a provider's API lives, which environment variable holds its key and what
its servers support, so the common case needs no configuration beyond the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from ..exceptions import ConfigError
from ._base import Capabilities, LLMInterface
from ._config import env_settings

__all__ = ["PRESETS", "Preset", "make_llm"]

InterfaceKind = Literal["openai", "anthropic", "claude-cli"]


@dataclass(frozen=True, slots=True)
class Preset:
    """A known provider.

    Attributes:
        name: The provider name used in ``make_llm`` specs (also the interface's
            ``provider_name``).
        base_url: The API root.
        key_env: The environment variable holding the key (several keys: comma-separated).
        interface: Which adapter speaks the API: ``"openai"`` (chat completions),
            ``"anthropic"`` (Messages API) or ``"claude-cli"`` (the ``claude`` executable).
        capabilities: What the servers support (``None``: the adapter's defaults).
        key_required: Whether a call without a key is refused (local servers need none).
        base_url_env: An environment variable that overrides ``base_url`` when set.
        params: Default body parameters (e.g. ``max_tokens``); overrides win.
    """

    name: str
    base_url: str
    key_env: str | None
    interface: InterfaceKind = "openai"
    capabilities: Capabilities | None = None
    key_required: bool = True
    base_url_env: str | None = None
    params: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))


# Most OpenAI-compatible vendors accept ``response_format={"type": "json_object"}`` but not a
# JSON schema; the engine then puts the output contract in the prompt.
_NO_SCHEMA: Final = Capabilities(json_schema=False)
# The reply bound of the local-server preset (also ``from_env``'s for a loopback server).
LOCAL_MAX_TOKENS: Final = 512


def _preset(
    name: str,
    base_url: str,
    prefix: str,
    *,
    interface: InterfaceKind = "openai",
    capabilities: Capabilities | None = None,
    key_required: bool = True,
    params: Mapping[str, Any] | None = None,
) -> Preset:
    return Preset(
        name,
        base_url,
        f"{prefix}_API_KEY",
        interface,
        capabilities,
        key_required,
        f"{prefix}_BASE_URL",
        MappingProxyType(dict(params or {})),
    )


PRESETS: Final[Mapping[str, Preset]] = MappingProxyType(
    {
        p.name: p
        for p in (
            _preset("openai", "https://api.openai.com/v1", "OPENAI"),
            _preset(
                "anthropic",
                "https://api.anthropic.com/v1",
                "ANTHROPIC",
                interface="anthropic",
            ),
            _preset(
                "deepseek",
                "https://api.deepseek.com/v1",
                "DEEPSEEK",
                capabilities=Capabilities(json_schema=False, vision=False),
            ),
            _preset(
                "dashscope",
                "https://dashscope.aliyuncs.com/compatible-mode/v1",
                "DASHSCOPE",
                capabilities=_NO_SCHEMA,
            ),
            _preset("moonshot", "https://api.moonshot.cn/v1", "MOONSHOT", capabilities=_NO_SCHEMA),
            _preset(
                "zhipu", "https://open.bigmodel.cn/api/paas/v4", "ZHIPUAI", capabilities=_NO_SCHEMA
            ),
            _preset("openrouter", "https://openrouter.ai/api/v1", "OPENROUTER"),
            _preset("ollama", "http://127.0.0.1:11434/v1", "OLLAMA", key_required=False),
            _preset(
                "llamacpp",
                "http://127.0.0.1:8080/v1",
                "LLAMACPP",
                key_required=False,
                # llama-server: no tool-call deltas while streaming, no null assistant content;
                # it honours JSON schemas by grammar (``oneOf`` included), which the JSON tool
                # protocol needs. Native tool calls only with ``--jinja`` and a chat template that
                # has a tool section (the small local models' have none), so they are off: the
                # JSON protocol works with every model. Replies are bounded: a small model may
                # otherwise ramble until its context is full.
                capabilities=Capabilities(
                    native_tools=False,
                    parallel_tool_calls=False,
                    streaming_with_tools=False,
                    null_assistant_content=False,
                    json_schema=True,
                ),
                params={"max_tokens": LOCAL_MAX_TOKENS},
            ),
            Preset("claude-code", "", None, "claude-cli", key_required=False),
        )
    }
)


def make_llm(
    spec: str, *, environ: Mapping[str, str] | None = None, **overrides: Any
) -> LLMInterface:
    """Build an interface from ``"<provider>:<model>"``, e.g. ``"deepseek:deepseek-chat"``.

    The key comes from the preset's environment variable (the process environment over
    ``./.env``; comma-separated for several keys), the base URL from ``<PREFIX>_BASE_URL`` when
    set, else the preset. ``overrides`` go to the interface's constructor and win over the
    preset: ``api_key`` (or ``api_key_pool``), ``base_url``, ``capabilities``, ``timeout``,
    body parameters such as ``temperature`` ... ``"claude-code[:model]"`` builds a
    :class:`ClaudeCodeCLI` (its options are the overrides). Everything after the first colon is
    the model, so ``"ollama:llama3:8b"`` asks for ``llama3:8b``.

    Args:
        spec: Provider name and model.
        environ: Variables to read instead of the environment and ``.env``.
        **overrides: Constructor arguments of the interface.

    Raises:
        ConfigError: For an unknown provider, a missing model, or a missing key (naming the
            variable to set).
    """
    name, _, model = spec.partition(":")
    preset = PRESETS.get(name.strip().lower())
    if preset is None:
        known = ", ".join(sorted(PRESETS))
        raise ConfigError(f"unknown provider {name!r} in {spec!r}; known providers: {known}")
    model = model.strip()
    if preset.interface == "claude-cli":
        from ._claude_cli import ClaudeCodeCLI

        return ClaudeCodeCLI(model=model or None, **overrides)
    if not model:
        raise ConfigError(f"{spec!r} names no model; write '{preset.name}:<model>'")
    env = env_settings(environ)
    keys = _keys(preset, env, overrides)
    base_url = overrides.pop("base_url", None) or _env(env, preset.base_url_env) or preset.base_url
    overrides.setdefault("provider_name", preset.name)
    if preset.capabilities is not None:
        overrides.setdefault("capabilities", preset.capabilities)
    for param, value in preset.params.items():
        overrides.setdefault(param, value)
    if preset.interface == "anthropic":
        # Imported here: presets must not pull every adapter in on import.
        from ._anthropic import AnthropicCompatible

        return AnthropicCompatible(keys, model, base_url, **overrides)
    from ._openai import OpenAICompatible

    return OpenAICompatible(keys, model, base_url, **overrides)


def _keys(preset: Preset, env: Mapping[str, str], overrides: dict[str, Any]) -> Any:
    """The key(s) to use: an override, else the environment; ``None`` for no auth."""
    pool, key = overrides.pop("api_key_pool", None), overrides.pop("api_key", None)
    if pool is not None or key is not None:
        return pool if pool is not None else key
    raw = _env(env, preset.key_env)
    keys = [k.strip() for k in raw.split(",") if k.strip()]
    if keys:
        return keys
    if preset.key_required:
        raise ConfigError(
            f"{preset.name}: no API key; set {preset.key_env} (in the environment or .env) "
            "or pass api_key="
        )
    return None


def _env(env: Mapping[str, str], name: str | None) -> str:
    return env.get(name, "").strip() if name else ""
