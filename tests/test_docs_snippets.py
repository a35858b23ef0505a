"""Every fenced ``python`` block of README.md and docs/**/*.md runs as written.

Each block is saved as a script and run by this interpreter in a fresh temporary directory, the
way a reader would run it (``python snippet.py``), with the environment pointing every provider
at a :class:`~simplellmfunc.testing.MockLLMServer`: ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` /
``OPENAI_MODEL``, and ``<PRESET>_BASE_URL`` / ``<PRESET>_API_KEY`` for every ``make_llm``
preset. Anything else that tries the network meets a dead proxy, so a block can never reach a
real API.

The server answers each request with the block's scripted replies, then with a generic one: a
JSON value valid for the request's JSON schema (``@llm_function`` return types), else a short
text. An HTML comment on the line just before a block (invisible on the rendered page) changes
that::

    <!-- snippet: replies=[Reply.tool_calls(ToolCallSpec("add", {"a": 1})), Reply.text("1")] -->
    <!-- snippet: file=server.py -->   written beside each block of the page, not run itself
    <!-- snippet: pytest -->           a test module: run with ``python -m pytest``
    <!-- snippet: skip: <reason> -->   not run (keep these rare: SKIPPED_BLOCKS lists them)

``replies=`` is a Python expression over ``Reply`` and ``ToolCallSpec``; every scripted reply must
be used. ``json`` and ``yaml`` blocks are parsed; other languages (``bash``, ``text``) are not run.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from simplellmfunc.providers import PRESETS
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK_TIMEOUT = 90.0
MOCK_KEY = "sk-docs-snippets"
MOCK_MODEL = "mock-model"
GENERIC_TEXT = "Hello from the mock model."
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port: nothing listens, connections fail at once

# Blocks marked ``<!-- snippet: skip: ... -->``, by page: a new skip must be added here too, so
# that every exception is a reviewed decision.
SKIPPED_BLOCKS: dict[str, int] = {}

# Any indentation: a block inside a list item or an admonition is run too, never skipped silently.
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+)(?P<lang>[\w+-]*)[^\n]*$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*snippet:\s*(?P<body>.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    directive: str  # the text after "snippet:" in the comment before the fence, or ""

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        if not self.directive.startswith("skip"):
            return None
        return self.directive.partition(":")[2].strip()

    @property
    def file_name(self) -> str | None:
        match = re.fullmatch(r"file=(\S+)", self.directive)
        return match.group(1) if match else None

    @property
    def is_pytest(self) -> bool:
        return self.directive == "pytest"

    @property
    def replies(self) -> list[Reply]:
        match = re.fullmatch(r"replies=(.*)", self.directive, re.DOTALL)
        if match is None:
            return []
        value = eval(match.group(1), {"Reply": Reply, "ToolCallSpec": ToolCallSpec})
        return list(value)


def read_blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, with the directive comment just before it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening.group("fence"), opening.group("indent")
        end = index + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        body = [line.removeprefix(indent) for line in lines[index + 1 : end]]
        previous = lines[index - 1] if index else ""
        directive = _DIRECTIVE.match(previous)
        blocks.append(
            Block(
                page,
                index + 1,
                opening.group("lang").lower(),
                "\n".join(body) + "\n",
                directive.group("body") if directive else "",
            )
        )
        index = end + 1
    return blocks


ALL_BLOCKS = [block for page in PAGES for block in read_blocks(page)]
PYTHON_BLOCKS = [b for b in ALL_BLOCKS if b.lang in ("python", "py") and b.file_name is None]
DATA_BLOCKS = [b for b in ALL_BLOCKS if b.lang in ("json", "yaml", "yml")]


# -- generic replies ----------------------------------------------------------------------------


def instance_of(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A small JSON value valid for ``schema`` (the subset pydantic emits)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return instance_of(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if "default" in schema:
        return schema["default"]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return instance_of(schema[key][0], defs)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        properties = schema.get("properties", {})
        required = schema.get("required", list(properties))
        return {name: instance_of(properties[name], defs) for name in required}
    if kind == "array":
        return [instance_of(schema.get("items", {}), defs)] * schema.get("minItems", 0)
    return {"string": "text", "integer": 3, "number": 0.5, "boolean": True, "null": None}[kind]


def schema_of(request: RecordedRequest) -> dict[str, Any] | None:
    """The JSON schema a request asks the answer to follow, if any (every wire format)."""
    body = request.json if isinstance(request.json, dict) else {}
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return response_format["json_schema"]["schema"]
    text_format = (body.get("text") or {}).get("format") or {}
    if text_format.get("type") == "json_schema":
        return text_format["schema"]
    return None


def generic_reply(request: RecordedRequest) -> Reply:
    schema = schema_of(request)
    if schema is not None:
        return Reply.text(json.dumps(instance_of(schema)))
    return Reply.text(GENERIC_TEXT)


# -- running a block ----------------------------------------------------------------------------


def snippet_env(server: MockLLMServer, workdir: Path) -> dict[str, str]:
    # The developer's own provider settings must not leak in: a block sees only the mock.
    drop = ("_API_KEY", "_BASE_URL", "_MODEL")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith(drop) and not k.startswith("SIMPLELLMFUNC_")
    }
    for preset in PRESETS.values():
        if preset.key_env:
            env[preset.key_env] = MOCK_KEY
        if preset.base_url_env:
            env[preset.base_url_env] = server.url
    env.update(
        OPENAI_API_KEY=MOCK_KEY,
        OPENAI_BASE_URL=server.url,
        OPENAI_MODEL=MOCK_MODEL,
        ANTHROPIC_MODEL=MOCK_MODEL,
        LOG_DIR=str(workdir / "logs"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        PYTHONUNBUFFERED="1",
    )
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = DEAD_PROXY
    src = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    return env


def prepare_workdir(block: Block, workdir: Path) -> Path:
    """Write the page's ``file=`` blocks and this block's script; return the script."""
    for other in read_blocks(block.page):
        if other.file_name is not None:
            target = workdir / other.file_name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(other.code, encoding="utf-8")
    script = workdir / ("test_snippet.py" if block.is_pytest else "snippet.py")
    script.write_text(block.code, encoding="utf-8")
    return script


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda b: b.id)
async def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    if block.skip_reason is not None:
        pytest.skip(f"marked not run: {block.skip_reason}")
    replies = block.replies
    async with MockLLMServer(default=generic_reply) as server:
        server.script(*replies)
        script = prepare_workdir(block, tmp_path)
        command = [sys.executable, str(script)]
        if block.is_pytest:
            command[1:1] = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]
        with anyio.fail_after(BLOCK_TIMEOUT):
            result = await anyio.run_process(
                command,
                cwd=tmp_path,
                env=snippet_env(server, tmp_path),
                stdin=None,
                check=False,
            )
        output = (result.stdout + result.stderr).decode(errors="replace")
        print(output)  # shown with -s, or with the failure
        assert result.returncode == 0, f"{block.id} failed:\n{output[-4000:]}"
        assert server.pending == 0, f"{block.id} left {server.pending} scripted replies unused"


@pytest.mark.parametrize("block", DATA_BLOCKS, ids=lambda b: b.id)
def test_data_block_parses(block: Block) -> None:
    if block.lang == "json":
        json.loads(block.code)
    else:
        yaml.safe_load(block.code)


def test_directives_are_known_and_skips_listed() -> None:
    skipped: dict[str, int] = {}
    for block in ALL_BLOCKS:
        if not block.directive:
            continue
        assert block.skip_reason or block.file_name or block.is_pytest or block.replies, (
            f"{block.id}: unknown snippet directive {block.directive!r}"
        )
        if block.skip_reason is not None:
            page = str(block.page.relative_to(ROOT))
            skipped[page] = skipped.get(page, 0) + 1
    assert skipped == SKIPPED_BLOCKS


def test_no_link_leaves_the_repository() -> None:
    """Relative links in README and docs stay inside the repository."""
    link = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s]+)\)")
    for page in PAGES:
        for target in link.findall(page.read_text(encoding="utf-8")):
            resolved = (page.parent / target.partition("#")[0]).resolve()
            assert resolved.is_relative_to(ROOT), f"{page.relative_to(ROOT)} links to {target}"
            assert resolved.exists(), f"{page.relative_to(ROOT)} links to missing {target}"


async def test_blocks_cannot_reach_the_network(tmp_path: Path) -> None:
    """The guard of the module docstring: a block that calls a real API fails at once."""
    script = tmp_path / "snippet.py"
    script.write_text('import httpx\nhttpx.get("https://api.openai.com/v1/models", timeout=5)\n')
    async with MockLLMServer() as server:
        with anyio.fail_after(BLOCK_TIMEOUT):
            result = await anyio.run_process(
                [sys.executable, str(script)],
                cwd=tmp_path,
                env=snippet_env(server, tmp_path),
                check=False,
            )
    assert result.returncode != 0
    assert b"ProxyError" in result.stderr or b"ConnectError" in result.stderr
