"""The local model's build and launch path (``simplellmfunc.local``, ``simplellmfunc local``).

A CPU may advertise instructions its guest cannot run (this project's machines advertise Intel
AMX and fault on the first AMX instruction), so the build never compiles for the native CPU and
the launch turns the repacked buffers (where AMX kernels run) off where AMX is advertised. A
server that dies during start-up is reported with the tail of its output and one hint.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from simplellmfunc._cli import main as cli
from simplellmfunc.exceptions import LocalModelError, LocalServerExitedError
from simplellmfunc.local import (
    HINT,
    binary,
    build,
    cache_dir,
    cmake_flags,
    cpu_flags,
    env_lines,
    free_port,
    launch_args,
    llama_server,
    serve,
)

ROOT = Path(__file__).resolve().parents[1]

# The flags line of this project's usual machine (a Sapphire Rapids guest), shortened.
AMX_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 avx f16c fma bmi1 bmi2 avx2 avx512f avx512dq \
avx512cd avx512bw avx512vl avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8
"""
OLD_X86 = frozenset({"sse", "sse2", "ssse3", "sse4_1", "sse4_2", "avx"})  # no AVX2
ARM_FEATURES = "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp asimddp"


def _options(flags: list[str]) -> dict[str, str]:
    return dict(f.removeprefix("-D").split("=", 1) for f in flags)


def test_an_amx_cpu_gets_a_portable_build_and_no_repacked_buffers() -> None:
    flags = cpu_flags(AMX_CPUINFO)
    assert {"amx_tile", "avx512f", "avx2"} <= flags
    options = _options(cmake_flags("x86_64", flags))
    assert options["GGML_NATIVE"] == "OFF"  # -march=native would compile AMX in
    for name in ("AMX_TILE", "AMX_INT8", "AMX_BF16", "AVX512", "AVX512_VNNI", "AVX512_BF16"):
        assert options[f"GGML_{name}"] == "OFF", name
    assert all(options[f"GGML_{n}"] == "ON" for n in ("AVX", "AVX2", "FMA", "F16C", "BMI2"))
    assert launch_args(flags) == ["--no-repack"]


def test_the_build_holds_only_what_the_server_needs() -> None:
    options = _options(cmake_flags("x86_64", cpu_flags(AMX_CPUINFO), ccache=True))
    for name in ("LLAMA_BUILD_TESTS", "LLAMA_BUILD_EXAMPLES", "LLAMA_BUILD_APP", "LLAMA_OPENSSL"):
        assert options[name] == "OFF", name
    assert options["LLAMA_USE_PREBUILT_UI"] == "OFF"  # no download at build time
    assert options["BUILD_SHARED_LIBS"] == "OFF"  # one self-contained binary
    assert options["GGML_CCACHE"] == "ON"


def test_other_cpus() -> None:
    old = _options(cmake_flags("x86_64", OLD_X86))
    assert (old["GGML_NATIVE"], old["GGML_AVX2"], old["GGML_FMA"]) == ("OFF", "OFF", "OFF")
    assert launch_args(OLD_X86) == []
    arm = _options(cmake_flags("aarch64", cpu_flags(ARM_FEATURES)))
    assert arm["GGML_NATIVE"] == "OFF"
    assert arm["GGML_CPU_ARM_ARCH"] == "armv8.2-a+dotprod+fp16"
    assert _options(cmake_flags("arm64", frozenset({"asimd"})))["GGML_CPU_ARM_ARCH"] == "armv8-a"
    assert not any("AVX" in f for f in cmake_flags("aarch64", frozenset()))


async def test_a_server_that_dies_at_start_up_shows_its_output_and_a_hint(tmp_path: Path) -> None:
    script = "echo 'loading model'; echo 'illegal instruction in ggml' >&2; exit 4"
    command = ["/bin/sh", "-c", script]
    log = tmp_path / "server.log"
    url = f"http://127.0.0.1:{free_port()}/health"
    with pytest.raises(LocalServerExitedError) as caught:
        async with serve(command, url, 30.0, log=log):
            pytest.fail("the server never answered")
    message = str(caught.value)
    assert "exited (4) during start-up" in message
    assert "illegal instruction in ggml" in message
    assert "loading model" in message
    assert HINT in message
    assert caught.value.__context__ is None  # no second traceback chained to it


def test_the_printed_env_lines_configure_from_env_and_the_preset() -> None:
    """What ``simplellmfunc local start`` prints works as ``.env`` for both ways of naming a
    model."""
    from simplellmfunc import OpenAICompatible, make_llm

    environ = dict(line.split("=", 1) for line in env_lines("http://127.0.0.1:8080", "gemma3"))
    llm = OpenAICompatible.from_env(environ)
    assert (llm.model_name, llm.base_url) == ("gemma-3-270m-it", "http://127.0.0.1:8080/v1")
    assert llm.capabilities.json_schema
    assert not llm.capabilities.native_tools
    assert llm.default_params["max_tokens"] == 512
    preset = make_llm(environ["EXAMPLE_MODEL"], environ=environ)
    assert preset.base_url == llm.base_url
    assert preset.capabilities.json_schema
    assert not preset.capabilities.native_tools
    assert preset.default_params["max_tokens"] == 512
    assert environ["SIMPLELLMFUNC_MODEL"] == environ["EXAMPLE_MODEL"]


def test_a_build_running_in_the_same_cache_is_waited_for_not_repeated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two processes building into one cache (a test and ``make demo`` sharing
    ``SIMPLELLMFUNC_CACHE``) deleted each other's build tree. A second ``build()`` now waits for
    the build lock and returns the binary the first one made, without building again (here the
    first is another process holding the lock; no sources exist, so building would fail)."""
    monkeypatch.setenv("SIMPLELLMFUNC_CACHE", str(tmp_path))
    target = binary()
    target.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time, pathlib\n"
            "lock = open(sys.argv[1], 'a'); fcntl.flock(lock, fcntl.LOCK_EX)\n"
            "print('held', flush=True); time.sleep(1.5)\n"
            "pathlib.Path(sys.argv[2]).write_text('#!/bin/sh\\n')\n",
            str(target.parent / "build.lock"),
            str(target),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        assert build() == target
        assert target.read_text() == "#!/bin/sh\n"
        assert "another build of llama-server is running" in capsys.readouterr().out
    finally:
        holder.wait(timeout=10)
        assert holder.stdout is not None
        holder.stdout.close()
    assert not (target.parent / "build").exists()  # nothing was built or deleted


def test_the_local_command_without_a_built_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``simplellmfunc local``: its actions parse, ``status`` says nothing runs and where the
    binary would be, a bad port is a usage error, and running the server without a build is a
    typed error that says how to build it."""
    monkeypatch.setenv("SIMPLELLMFUNC_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path
    assert binary() == tmp_path / "llama-server" / "llama-server"
    assert cli(["local", "status"]) == 1
    out = capsys.readouterr().out
    assert "not running" in out
    assert "not built yet" in out
    assert str(binary()) in out
    assert cli(["local", "stop"]) == 0
    assert "not running" in capsys.readouterr().out
    assert cli(["local", "start", "--port", "0"]) == 2
    assert "--port must be 1-65535" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        cli(["local", "start", "--model", "llama-70b"])
    assert usage.value.code == 2
    assert "invalid choice" in capsys.readouterr().err

    async def run() -> None:
        async with llama_server():
            pytest.fail("started without a binary")

    import anyio

    with pytest.raises(LocalModelError, match="simplellmfunc local build"):
        anyio.run(run)


@pytest.mark.live
def test_local_start_serves_the_model_for_the_users_code(tmp_path: Path) -> None:
    """``simplellmfunc local start`` in the background, the printed ``.env`` lines used by
    ``from_env`` for a real call, ``status``, ``stop`` (the checkout's build is used)."""
    from simplellmfunc import OpenAICompatible, llm_function

    if not binary().exists():
        pytest.skip("llama-server not built: simplellmfunc local build")
    port = free_port()
    command = [sys.executable, "-m", "simplellmfunc", "local"]
    started = subprocess.run(
        [*command, "start", "--port", str(port)], capture_output=True, text=True, timeout=600
    )
    try:
        assert started.returncode == 0, started.stderr
        lines = [line for line in started.stdout.splitlines() if "=" in line and " " not in line]
        assert lines == env_lines(f"http://127.0.0.1:{port}")
        environ = dict(line.split("=", 1) for line in lines)
        state = json.loads((cache_dir() / "llama-server" / "server.json").read_text())
        assert state["port"] == port

        async def call() -> str:
            async with OpenAICompatible.from_env(environ) as llm:
                # The plumbing is under test, not the model: a greeting Gemma 3 270M runs
                # past max_tokens is a flagged (truncated) answer, still a real reply.
                @llm_function(llm, temperature=0, max_tokens=16, incomplete_answer="flag")
                async def greet(name: str) -> str:
                    """Greet the person by name in one short sentence."""

                return await greet("Ada")

        import anyio

        assert anyio.run(call).strip()
        shown = subprocess.run([*command, "status"], capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0
        assert f"OPENAI_BASE_URL=http://127.0.0.1:{port}/v1" in shown.stdout
    finally:
        stopped = subprocess.run([*command, "stop"], capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 0
    assert "stopped llama-server" in stopped.stdout
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)


def test_gemma_gets_its_own_turn_format_with_tool_results_as_user_turns() -> None:
    """The Gemma 3 GGUF on PyPI has no chat template (llama-server would fall back to ChatML,
    which Gemma was not trained on): ours puts the system prompt in the first user turn, a tool
    result in a user turn of its own, and keeps the turns alternating."""
    jinja2 = pytest.importorskip("jinja2")
    from simplellmfunc.local import MODELS

    assert MODELS["smollm2"].chat_template == ""  # its file's own template is used
    template = jinja2.Environment().from_string(MODELS["gemma3"].chat_template)
    messages = [
        {"role": "system", "content": "Use get_weather."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": '{"action": "get_weather"}'},
        {"role": "tool", "content": [{"type": "text", "text": "Paris: 14°C"}]},
    ]
    prompt = template.render(messages=messages, add_generation_prompt=True)
    assert prompt == (
        "<start_of_turn>user\nUse get_weather.\n\nWeather in Paris?<end_of_turn>\n"
        '<start_of_turn>model\n{"action": "get_weather"}<end_of_turn>\n'
        "<start_of_turn>user\nThe tool returned: Paris: 14°C<end_of_turn>\n"
        "<start_of_turn>model\n"
    )
