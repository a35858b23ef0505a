"""A full agent turn through ``@llm_chat``: the model calls ``execute_code`` twice, with state."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import psutil
from PIL import Image

from process_support import host_process
from simplellmfunc import OpenAICompatible, llm_chat
from simplellmfunc._events import CustomEvent, ToolCallEndEvent, ToolCallErrorEvent
from simplellmfunc.builtin import PyRepl
from simplellmfunc.hooks import is_event_yield
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec


async def test_agent_turn_carries_state_between_tool_calls(tmp_path: Path) -> None:
    async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl, MockLLMServer() as server:
        llm = OpenAICompatible("sk-test-123456789", "mock", server.url)

        @llm_chat(llm, toolkit=repl.toolset, enable_event=True)
        async def analyst(message: str, history: Any = None) -> None:
            """You are a data analysis assistant. Variables persist between calls."""

        server.script(
            Reply.tool_calls(
                ToolCallSpec("execute_code", {"code": "data = [3, 5, 7]\nprint(len(data))"})
            ),
            Reply.tool_calls(
                ToolCallSpec("execute_code", {"code": "print('mean', sum(data) / len(data))"})
            ),
            Reply.text("The mean is 5."),
        )
        outputs = [item async for item in analyst("mean of 3, 5, 7?")]
        await llm.aclose()
        requests = [r.json for r in server.requests]
    streamed = [
        o.event.data["text"]
        for o in outputs
        if is_event_yield(o)
        and isinstance(o.event, CustomEvent)
        and o.event.event_name == "kernel_stdout"
    ]
    assert streamed == ["3\n", "mean 5.0\n"]
    assert len(requests) == 3
    tool_messages = [m for m in requests[2]["messages"] if m["role"] == "tool"]
    assert "3" in tool_messages[0]["content"]
    assert "mean 5.0" in tool_messages[1]["content"]
    assert "succeeded" in tool_messages[1]["content"]
    assert outputs[-1].response == "The mean is 5."


async def test_a_cell_that_raised_is_a_failed_tool_call(tmp_path: Path) -> None:
    """Events say ``success=False`` with the error; the model reads the same summary."""
    async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl, MockLLMServer() as server:
        llm = OpenAICompatible("sk-test-123456789", "mock", server.url)

        @llm_chat(llm, toolkit=repl.toolset, enable_event=True)
        async def analyst(message: str, history: Any = None) -> None:
            """You run Python."""

        server.script(
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": "len(5)"})),
            Reply.text("len needs a sequence."),
        )
        outputs = [item async for item in analyst("len of 5?")]
        await llm.aclose()
        requests = [r.json for r in server.requests]
    events = [o.event for o in outputs if is_event_yield(o)]
    (end,) = [e for e in events if isinstance(e, ToolCallEndEvent)]
    (error,) = [e for e in events if isinstance(e, ToolCallErrorEvent)]
    assert end.success is False
    assert "Execution failed" in end.result
    assert "TypeError: object of type 'int' has no len()" in end.result
    assert error.tool_call_id == end.tool_call_id
    assert "TypeError" in error.error_message
    (tool_message,) = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert tool_message["content"] == end.result  # no "Error: ToolRetry:" in front
    assert outputs[-1].response == "len needs a sequence."


async def test_agent_sees_images_as_multimodal_tool_results(tmp_path: Path) -> None:
    Image.new("RGB", (4, 4), "blue").save(tmp_path / "plot.png")
    code = "from simplellmfunc import ImgPath\nImgPath('plot.png')"
    async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl, MockLLMServer() as server:
        llm = OpenAICompatible("sk-test-123456789", "mock", server.url)

        @llm_chat(llm, toolkit=repl.toolset)
        async def viewer(message: str, history: Any = None) -> None:
            """Look at images."""

        server.script(
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": code})), Reply.text("blue")
        )
        _ = [item async for item in viewer("what colour?")]
        await llm.aclose()
        sent = server.requests[1].json
    assert isinstance(sent, dict)
    parts = str(sent["messages"])
    assert "data:image/png;base64," in parts


async def test_tool_timeout_that_kills_the_kernel_is_noticed_in_the_next_result(
    tmp_path: Path,
) -> None:
    """The engine's ``tool_timeout`` cancels the tool; a cell that ignores the interrupt costs
    the kernel, and the model must read that in its next result, not "Execution succeeded"."""
    ignores = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)"
    async with (
        PyRepl(tmp_path, interrupt_grace_seconds=1, log_dir=tmp_path / "logs") as repl,
        MockLLMServer() as server,
    ):
        llm = OpenAICompatible("sk-test-123456789", "mock", server.url)

        @llm_chat(llm, toolkit=repl.toolset, tool_timeout=5)
        async def analyst(message: str, history: Any = None) -> None:
            """Run code."""

        server.script(
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": "kept = 'yes'"})),
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": ignores})),
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": "'kept' in globals()"})),
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": "1 + 1"})),
            Reply.text("done"),
        )
        _ = [item async for item in analyst("go")]
        await llm.aclose()
        sent = server.requests[-1].json
    assert isinstance(sent, dict)
    tool_messages = [m["content"] for m in sent["messages"] if m["role"] == "tool"]
    assert "timed out" in tool_messages[1]
    assert "fresh Python kernel" in tool_messages[2]
    assert "False" in tool_messages[2]
    assert "fresh Python kernel" not in tool_messages[3]


async def test_exit_in_a_tool_call_keeps_the_kernel_for_the_next_calls(tmp_path: Path) -> None:
    async with (
        PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl,
        MockLLMServer() as server,
    ):
        llm = OpenAICompatible("sk-test-123456789", "mock", server.url)

        @llm_chat(llm, toolkit=repl.toolset, tool_timeout=30)
        async def analyst(message: str, history: Any = None) -> None:
            """Run code."""

        server.script(
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": "x = 41\nexit()\nx = 0"})),
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": "x + 1"})),
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": "x + 2"})),
            Reply.text("done"),
        )
        _ = [item async for item in analyst("go")]
        await llm.aclose()
        sent = server.requests[-1].json
    assert isinstance(sent, dict)
    tool_messages = [m["content"] for m in sent["messages"] if m["role"] == "tool"]
    assert "kernel keeps running" in tool_messages[0]
    assert "succeeded" in tool_messages[0]
    assert "42" in tool_messages[1]
    assert "43" in tool_messages[2]
    assert not any("KernelDiedError" in m or "died" in m for m in tool_messages)


async def test_replaced_stdout_in_one_tool_call_does_not_silence_the_next(tmp_path: Path) -> None:
    async with (
        PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl,
        MockLLMServer() as server,
    ):
        llm = OpenAICompatible("sk-test-123456789", "mock", server.url)

        @llm_chat(llm, toolkit=repl.toolset, tool_timeout=30)
        async def analyst(message: str, history: Any = None) -> None:
            """Run code."""

        swallow = "import io, sys\nsys.stdout = io.StringIO()\nprint('gone')"
        server.script(
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": swallow})),
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": "print('seen again')"})),
            Reply.text("done"),
        )
        _ = [item async for item in analyst("go")]
        await llm.aclose()
        sent = server.requests[-1].json
    assert isinstance(sent, dict)
    tool_messages = [m["content"] for m in sent["messages"] if m["role"] == "tool"]
    assert "gone" not in tool_messages[0]
    assert "[stdout]\nseen again" in tool_messages[1]


async def test_thread_output_from_an_earlier_tool_call_is_labelled(tmp_path: Path) -> None:
    start = (
        "import threading\n"
        "go = threading.Event()\n"
        "def worker():\n"
        "    go.wait()\n"
        "    print('worker done')\n"
        "t = threading.Thread(target=worker, name='worker')\n"
        "t.start()"
    )
    async with (
        PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl,
        MockLLMServer() as server,
    ):
        llm = OpenAICompatible("sk-test-123456789", "mock", server.url)

        @llm_chat(llm, toolkit=repl.toolset, tool_timeout=30)
        async def analyst(message: str, history: Any = None) -> None:
            """Run code."""

        server.script(
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": start})),
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": "go.set(); t.join()"})),
            Reply.text("done"),
        )
        _ = [item async for item in analyst("go")]
        await llm.aclose()
        sent = server.requests[-1].json
    assert isinstance(sent, dict)
    tool_messages = [m["content"] for m in sent["messages"] if m["role"] == "tool"]
    assert "[stdout]\n[thread 'worker' from execution [1]] worker done" in tool_messages[1]


async def test_tool_result_of_huge_output_names_a_file_holding_all_of_it(tmp_path: Path) -> None:
    code = "for i in range(100_000):\n    print(f'line {i:06d}')"
    everything = "".join(f"line {i:06d}\n" for i in range(100_000))
    async with (
        PyRepl(
            tmp_path, log_dir=tmp_path / "logs", max_output_tokens=500, max_capture_chars=100_000
        ) as repl,
        MockLLMServer() as server,
    ):
        llm = OpenAICompatible("sk-test-123456789", "mock", server.url)

        @llm_chat(llm, toolkit=repl.toolset, tool_timeout=60)
        async def analyst(message: str, history: Any = None) -> None:
            """Run code."""

        server.script(
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": code})), Reply.text("done")
        )
        _ = [item async for item in analyst("go")]
        await llm.aclose()
        sent = server.requests[-1].json
    assert isinstance(sent, dict)
    [message] = [m["content"] for m in sent["messages"] if m["role"] == "tool"]
    named = re.search(r" is in (\S+) \.\.\.\]", message)
    assert named is not None
    assert (await anyio.Path(named[1]).read_text()) == everything
    assert f"the full output (1,200,000 characters) is in {named[1]}" in message


async def test_process_detached_in_a_tool_call_dies_with_the_repl(tmp_path: Path) -> None:
    code = "import subprocess\nsubprocess.Popen(['sleep', '60'], start_new_session=True).pid"
    async with MockLLMServer() as server:
        llm = OpenAICompatible("sk-test-123456789", "mock", server.url)
        async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl:

            @llm_chat(llm, toolkit=repl.toolset, tool_timeout=30)
            async def analyst(message: str, history: Any = None) -> None:
                """Run code."""

            server.script(
                Reply.tool_calls(ToolCallSpec("execute_code", {"code": code})), Reply.text("ok")
            )
            _ = [item async for item in analyst("go")]
            sent = server.requests[-1].json
            assert isinstance(sent, dict)
            [message] = [m["content"] for m in sent["messages"] if m["role"] == "tool"]
            detached = host_process(int(message.rsplit("\n", 1)[1]))
            assert detached.is_running()
        await llm.aclose()
    assert await ended(detached)


async def ended(process: psutil.Process, seconds: float = 5.0) -> bool:
    """Whether ``process`` ended (a zombie waiting for its new parent counts as ended)."""
    with anyio.move_on_after(seconds):
        while True:
            try:
                if process.status() == psutil.STATUS_ZOMBIE:
                    return True
            except psutil.NoSuchProcess:
                return True
            await anyio.sleep(0.05)
    return False
