"""MCP building blocks without a server: names, configuration, line parsing, result mapping."""

from __future__ import annotations

import json
import re
from pathlib import Path

import mcp.types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError as SDKError
from pydantic import ValidationError

import simplellmfunc.mcp as mcp_pkg
from simplellmfunc._content import ImgUrl, Text
from simplellmfunc.exceptions import ConfigError, ToolDefinitionError
from simplellmfunc.mcp import HttpSpec, MCPResult, StdioSpec, load_config, model_name
from simplellmfunc.mcp._config import child_environment, secret_values, stdio_spec
from simplellmfunc.mcp._errors import describe, translate
from simplellmfunc.mcp._names import NameMap, check_unique
from simplellmfunc.mcp._process import ServerOutput, parse_line
from simplellmfunc.mcp._results import prompt_messages, resource_result, tool_result
from simplellmfunc.mcp._tool import model_schema

VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
PNG = "iVBORw0KGgo="


def test_public_surface_is_sorted_and_importable() -> None:
    assert mcp_pkg.__all__ == sorted(mcp_pkg.__all__)
    for name in mcp_pkg.__all__:
        assert getattr(mcp_pkg, name) is not None


# --- names ------------------------------------------------------------------------------------


def test_valid_names_are_kept_and_prefixed() -> None:
    assert model_name("get_sum") == "get_sum"
    assert model_name("get-sum", "everything") == "everything_get-sum"


def test_invalid_characters_become_underscores() -> None:
    assert model_name("dotted.name") == "dotted_name"
    assert model_name("with space", "srv.1") == "srv_1_with_space"


def test_long_names_keep_a_distinguishing_hash() -> None:
    first, second = model_name("x" * 70 + "_a"), model_name("x" * 70 + "_b")
    assert len(first) == len(second) == 64
    assert first != second


@given(st.text(min_size=1, max_size=200), st.one_of(st.none(), st.text(max_size=30)))
def test_every_mapped_name_is_accepted_by_providers(name: str, prefix: str | None) -> None:
    assert VALID.match(model_name(name, prefix))


def test_name_map_reverses_and_reports_collisions() -> None:
    names = NameMap.build(["a.b", "c"], None, "srv")
    assert names.server_name("a_b") == "a.b"
    assert names.server_name("c") == "c"
    assert names.model_names() == {"a.b": "a_b", "c": "c"}
    with pytest.raises(ToolDefinitionError, match=r"'a\.b' and 'a_b' both map to .*'a_b'"):
        NameMap.build(["a.b", "a_b"], None, "srv")


def test_names_offered_by_two_servers_are_an_error() -> None:
    check_unique({"one": ["x", "y"], "two": ["z"]})
    with pytest.raises(ToolDefinitionError, match="'x' is offered by MCP servers 'one' and 'two'"):
        check_unique({"one": ["x"], "two": ["x"]})


# --- configuration ----------------------------------------------------------------------------


def test_config_reads_stdio_http_and_sse_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TEST_TOKEN", "secret-token")
    path = tmp_path / "mcp.json"
    config = {
        "mcpServers": {
            "local": {"command": "python", "args": ["-m", "x"], "env": {"K": "${MCP_TEST_TOKEN}"}},
            "remote": {
                "url": "http://127.0.0.1:1/mcp",
                "headers": {"A": "Bearer ${MCP_TEST_TOKEN}"},
            },
            "old": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
            "off": {"command": "nope", "disabled": True},
            "default": {"command": "echo", "args": ["${UNSET_VAR_FOR_TEST:-fallback}"]},
        }
    }
    path.write_text(json.dumps(config))
    specs = load_config(path)
    assert set(specs) == {"local", "remote", "old", "default"}
    assert specs["local"] == StdioSpec("python", ("-m", "x"), {"K": "secret-token"})
    assert specs["remote"] == HttpSpec("http://127.0.0.1:1/mcp", {"A": "Bearer secret-token"})
    assert isinstance(specs["old"], HttpSpec)
    assert specs["old"].transport == "sse"
    assert isinstance(specs["default"], StdioSpec)
    assert specs["default"].args == ("fallback",)
    assert "secret-token" not in repr(specs)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"servers": {}}, "mcpServers"),
        ({"mcpServers": {"x": {"args": []}}}, "either 'command'"),
        ({"mcpServers": {"x": {"command": "${NOT_SET_ANYWHERE_42}"}}}, "NOT_SET_ANYWHERE_42"),
    ],
)
def test_bad_configs_are_config_errors(config: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(config)


def test_unreadable_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(tmp_path / "bad.json")


def test_child_environment_is_an_allowlist(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    monkeypatch.setenv("MY_SETTING", "on")
    monkeypatch.setenv("BASH_FUNC_x%%", "() { echo; }")
    env = child_environment(stdio_spec("srv", env={"GIVEN": "1"}, inherit_env=["MY_SETTING"]))
    assert "OPENAI_API_KEY" not in env
    assert "BASH_FUNC_x%%" not in env
    assert env["GIVEN"] == "1"
    assert env["MY_SETTING"] == "on"
    assert env["PATH"]


def test_specs_hide_secrets_in_labels_and_reprs() -> None:
    spec = HttpSpec("https://user:pw@example.com/mcp?token=abc", {"Authorization": "Bearer t"})
    assert spec.label == "streamable-http:https://example.com/mcp"
    assert "pw" not in repr(spec)
    assert "Bearer" not in repr(spec)
    stdio = stdio_spec("/usr/bin/server", ["--api-key", "k"], env={"TOKEN": "t"})
    assert stdio.label == "stdio:server"
    assert "--api-key" not in repr(stdio)
    assert "TOKEN" not in repr(stdio)


# --- lines from a stdio server ----------------------------------------------------------------


def test_a_valid_line_is_a_message() -> None:
    parsed = parse_line(b'{"jsonrpc": "2.0", "id": 3, "result": {}}')
    assert not isinstance(parsed, Exception)
    assert isinstance(parsed.message, types.JSONRPCResponse)


@pytest.mark.parametrize(
    ("line", "request_id"),
    [
        (b'{"jsonrpc": "2.0", "id": 7, "result": "not an object"}', 7),
        (b'{"jsonrpc": "2.0", "id": "8", "result": {', "8"),
        (b'{"jsonrpc": "2.0", "id": 9, "error": "bad"}', 9),
    ],
)
def test_a_malformed_response_fails_its_request(line: bytes, request_id: int | str) -> None:
    parsed = parse_line(line)
    assert not isinstance(parsed, Exception)
    error = parsed.message
    assert isinstance(error, types.JSONRPCError)
    assert error.id == request_id
    assert error.error.code == types.PARSE_ERROR
    assert "malformed response" in error.error.message


@pytest.mark.parametrize(
    "line",
    [b"Starting server...", b'{"jsonrpc": "2.0", "method": 5}', b'{"id": true, "result": 1}'],
)
def test_other_bad_lines_are_reported_as_exceptions(line: bytes) -> None:
    assert isinstance(parse_line(line), Exception)


# --- results ----------------------------------------------------------------------------------


def test_tool_results_keep_order_and_describe_what_models_cannot_see() -> None:
    result = types.CallToolResult(
        content=[
            types.TextContent(text="intro"),
            types.ImageContent(data=PNG, mime_type="image/png"),
            types.ImageContent(data=PNG, mime_type="image/tiff"),
            types.AudioContent(data="AAAA", mime_type="audio/wav"),
            types.ResourceLink(name="doc", uri="file:///doc.txt", mime_type="text/plain"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(uri="mem://a", text="resource text")
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(uri="mem://b", blob=PNG, mime_type="image/png")
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(uri="mem://c", blob="AAAA", mime_type="x/bin")
            ),
        ],
        structured_content={"n": 1},
    )
    converted = tool_result(result)
    assert converted.structured == {"n": 1}
    assert converted.images == (ImgUrl(f"data:image/png;base64,{PNG}"),) * 2
    text = converted.text
    assert text.startswith("intro\n")
    assert "image/tiff" in text
    assert "[audio (audio/wav, 3 bytes) not shown]" in text
    assert "[resource link] doc: file:///doc.txt (text/plain)" in text
    assert "[resource mem://a]\nresource text" in text
    assert "[resource mem://c: x/bin, 3 bytes of binary data]" in text
    rendered = converted.for_model()
    assert isinstance(rendered, tuple)
    assert rendered[0] == text
    assert len(rendered[1]) == 2


def test_structured_only_results_read_as_json() -> None:
    result = MCPResult(structured={"sum": 5050})
    assert result.text == '{"sum": 5050}'
    assert result.for_model() == '{"sum": 5050}'


def test_resources_and_prompts_convert() -> None:
    read = types.ReadResourceResult(
        contents=[types.TextResourceContents(uri="mem://a", text="hello")]
    )
    assert resource_result(read).content == (Text("hello"),)
    prompt = types.GetPromptResult(
        messages=[
            types.PromptMessage(role="user", content=types.TextContent(text="hi")),
            types.PromptMessage(
                role="assistant", content=types.ImageContent(data=PNG, mime_type="image/png")
            ),
        ]
    )
    messages = prompt_messages(prompt)
    assert messages[0] == {"role": "user", "content": "hi"}
    assert messages[1]["content"][0]["type"] == "image_url"


def test_input_schemas_pass_through_as_object_schemas() -> None:
    schema = {"$schema": "x", "type": "object", "properties": {"a": {"type": "number"}}}
    assert model_schema(schema) == {"type": "object", "properties": {"a": {"type": "number"}}}
    assert model_schema({}) == {"type": "object", "properties": {}}


# --- failures ---------------------------------------------------------------------------------


def sdk_error(code: int, message: str) -> SDKError:
    return SDKError(code=code, message=message)


@pytest.mark.parametrize(
    ("exc", "text", "lost", "unsent"),
    [
        (
            sdk_error(types.CONNECTION_CLOSED, "Connection closed"),
            "disconnected during",
            True,
            False,
        ),
        (
            sdk_error(types.REQUEST_TIMEOUT, "Request 'tools/call' timed out"),
            "timed out",
            False,
            False,
        ),
        (sdk_error(-32001, "Tool busy"), "failed on MCP server s: Tool busy", False, False),
        (sdk_error(-32000, "Out of quota"), "failed on MCP server s: Out of quota", False, False),
        (sdk_error(types.INVALID_REQUEST, "Session terminated"), "no longer knows", True, True),
        (sdk_error(-32001, "Session not found"), "no longer knows", True, True),
        (sdk_error(-32000, "Bad Request: No valid session ID provided"), "no longer", True, True),
        (
            sdk_error(types.INVALID_PARAMS, "Unknown tool: x"),
            "failed on MCP server s: Unknown",
            False,
            False,
        ),
        (ConnectionResetError("reset"), "cannot reach MCP server s", True, False),
        (RuntimeError("Invalid structured content"), "Invalid structured content", False, False),
    ],
)
def test_failures_say_what_broke_and_what_it_means(
    exc: Exception, text: str, lost: bool, unsent: bool
) -> None:
    failure = translate(exc, "tool 'x'", "s")
    assert text in str(failure.error)
    assert (failure.lost, failure.unsent) == (lost, unsent)


def test_a_rejected_session_makes_any_error_retryable() -> None:
    failure = translate(
        sdk_error(types.INTERNAL_ERROR, "Server returned an error response"), "x", "s", True
    )
    assert (failure.lost, failure.unsent) == (True, True)


def test_malformed_results_are_reported_with_the_field() -> None:
    try:
        types.CallToolResult.model_validate({"content": "nope"})
    except ValidationError as exc:
        failure = translate(exc, "tool 'x'", "s")
    assert "malformed result for tool 'x': content:" in str(failure.error)
    assert not failure.lost


def test_describe_looks_inside_groups() -> None:
    group = ExceptionGroup("outer", [FileNotFoundError(2, "No such file", "/bin/nope")])
    assert describe(group) == "command not found: /bin/nope"
    assert describe(TimeoutError()) == "no answer in time"


def test_secret_values_skip_flags_and_path_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOST_TOKEN", "host-token-value")
    spec = stdio_spec(
        "server",
        env={"API_TOKEN": "abcdef123456", "DEBUG": "1", "PYTHONPATH": "/opt/a:/opt/b"},
        inherit_env=["HOST_TOKEN", "NOT_SET_ANYWHERE"],
    )
    assert sorted(secret_values(spec)) == ["abcdef123456", "host-token-value"]


def test_the_stderr_tail_is_redacted_then_bounded_to_whole_lines() -> None:
    output = ServerOutput(["secret-token", "secret-token-long"])
    output.add("key=secret-token-long and secret-token")
    assert output.stderr_tail == "key=*** and ***"
    for number in range(30):
        output.add(f"{number:02d} " + "y" * 400)
    lines = output.stderr_tail.splitlines()
    assert len(output.stderr_tail) <= 4096
    assert lines[0].startswith("20 ")
    assert len(lines[0]) == 403  # never half a line
    assert lines[-1].startswith("29 ")
