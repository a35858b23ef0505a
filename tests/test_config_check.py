"""``check_config``: what a config needs, checked offline, without creating or starting
anything (the command line's ``validate`` prints these findings)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from simplellmfunc.runtime import load_agent_config
from simplellmfunc.runtime.config import Finding, check_config


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


async def findings_of(tmp_path: Path, text: str, env: dict[str, str]) -> dict[str, Finding]:
    config = load_agent_config(write(tmp_path / "agent.yml", text), environ=env)
    return {f.subject: f for f in await check_config(config, environ=env)}


async def test_a_local_model_needs_no_key(tmp_path: Path) -> None:
    found = await findings_of(tmp_path, "model: llamacpp:smollm2\n", {})
    assert found["model"].level == "ok"
    assert "http://127.0.0.1:8080/v1" in found["model"].message
    assert (found["model key"].level, found["model key"].message) == (
        "ok",
        "none needed (LLAMACPP_API_KEY not set)",
    )
    assert found["not checked offline"].level == "unchecked"


async def test_the_endpoint_named_in_the_environment_is_shown(tmp_path: Path) -> None:
    env = {"DEEPSEEK_BASE_URL": "http://127.0.0.1:1234/v1", "DEEPSEEK_API_KEY": "sk-x"}
    found = await findings_of(tmp_path, "model: deepseek:deepseek-chat\n", env)
    assert found["model"].message == "deepseek:deepseek-chat (http://127.0.0.1:1234/v1)"
    assert found["model key"].message == "set (DEEPSEEK_API_KEY)"


async def test_a_provider_file_entry_is_looked_up(tmp_path: Path) -> None:
    entry = {"model_name": "m1", "api_keys": ["sk-a"], "base_url": "http://127.0.0.1:1/v1"}
    write(tmp_path / "provider.json", json.dumps({"local": [entry]}))
    good = await findings_of(
        tmp_path, "model: {provider_file: provider.json, provider: local, model: m1}\n", {}
    )
    assert good["model"].level == "ok"
    bad = await findings_of(
        tmp_path, "model: {provider_file: provider.json, provider: local, model: m2}\n", {}
    )
    assert bad["model"].level == "problem"
    assert "has no model 'm2'" in bad["model"].message


async def test_fallback_models_are_checked_too(tmp_path: Path) -> None:
    text = "model:\n  preset: openai:gpt-4o-mini\n  fallback:\n    - preset: anthropic:claude\n"
    found = await findings_of(tmp_path, text, {"OPENAI_API_KEY": "sk-a"})
    assert found["model key"].level == "ok"
    assert found["fallback model 1 key"].message == (
        "not set (ANTHROPIC_API_KEY); not checked online"
    )


async def test_a_capabilities_typo_is_a_problem_even_without_a_key(tmp_path: Path) -> None:
    text = "model:\n  preset: openai:gpt-4o\n  capabilities: {json_shema: false}\n"
    found = await findings_of(tmp_path, text, {})
    assert found["model"].level == "problem"
    assert "unknown 'json_shema'" in found["model"].message


async def test_pyrepl_and_existing_files(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "trace.jsonl").write_text("")
    text = (
        "model: ollama:llama3\ntoolkit:\n  pyrepl: {working_directory: work}\n  files: work\n"
        "trace: {file: trace.jsonl}\n"
    )
    found = await findings_of(tmp_path, text, {})
    assert found["pyrepl"].level == "ok"
    assert found["files workspace"].level == "ok"
    assert (found["trace file"].level, found["trace file"].message) == (
        "ok",
        str(tmp_path / "trace.jsonl"),
    )
    assert "the Python kernel starting" in found["not checked offline"].message


async def test_a_durable_section_is_checked(tmp_path: Path) -> None:
    text = "model: openai:gpt-4o-mini\ndurable:\n  path: runs/durable.sqlite\n"
    findings = await check_config(load_agent_config(write(tmp_path / "a.yml", text)))
    (durable,) = [f for f in findings if f.subject == "durable"]
    assert durable.level == ("ok" if importlib.util.find_spec("dbos") else "problem")
    remote = text.replace("path: runs/durable.sqlite", "database_url: postgresql://db/agents")
    findings = await check_config(load_agent_config(write(tmp_path / "b.yml", remote)))
    assert any(f.subject == "durable" and f.level in ("unchecked", "problem") for f in findings)
