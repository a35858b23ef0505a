"""Memory of a live session (issue 34, item 6): what one waiting 3-step session holds.

``scale.py``'s sweep gives RSS per live session (peak RSS over the run / sessions); this shows
where it goes. N sessions (``scale.py``'s clients: ``engine``, ``floor``, ``floor-limited``)
start at once against the loopback mock server, which holds every reply for ``--ttft``
seconds; once they all wait in their first LLM call:

- tracemalloc bytes per waiting session, by source line (the top ``--top``);
- the await chain of one session's task: every coroutine / async-generator frame from the
  task's coroutine down to the future it waits on (``cr_await`` / ``ag_await``, the generator
  behind an ``async_generator_asend`` through ``gc.get_referents``), and how many are ours;
- the bytes of the last reply's ``LLMResponse.raw`` (the decoded JSON, kept by
  ``RunState.last_response`` for ``RunResult.last_response``) not shared with the message: what
  a session holds between its LLM calls on top of what it holds in the first one.

Usage::

    python benchmarks/bench_session_memory.py [--impl engine] [--sessions 100] [--ttft 4]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tracemalloc
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import scale
from _common import MockServerProcess


def await_chain(obj: object) -> list[tuple[str, str]]:
    """``(kind, qualified name)`` of every link from a coroutine to what it waits on."""
    chain: list[tuple[str, str]] = []
    while obj is not None and len(chain) < 200:
        if isinstance(obj, types.CoroutineType):
            chain.append(
                ("coro", f"{obj.cr_code.co_qualname} ({Path(obj.cr_code.co_filename).name})")
            )
            obj = obj.cr_await
        elif isinstance(obj, types.AsyncGeneratorType):
            chain.append(
                ("agen", f"{obj.ag_code.co_qualname} ({Path(obj.ag_code.co_filename).name})")
            )
            obj = obj.ag_await
        elif isinstance(obj, types.GeneratorType):
            chain.append(
                ("gen", f"{obj.gi_code.co_qualname} ({Path(obj.gi_code.co_filename).name})")
            )
            obj = obj.gi_yieldfrom
        else:
            chain.append(("wait", type(obj).__name__))
            # An asend/athrow awaitable: the async generator it drives is among its referents.
            obj = next(
                (r for r in gc.get_referents(obj) if isinstance(r, types.AsyncGeneratorType)), None
            )
    return chain


def deep_size(obj: object, skip: set[int]) -> int:
    """Bytes of a JSON value, not counting objects whose id is in ``skip`` (or seen before)."""
    if id(obj) in skip:
        return 0
    skip.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(deep_size(k, skip) + deep_size(v, skip) for k, v in obj.items())
    elif isinstance(obj, list | tuple):
        size += sum(deep_size(v, skip) for v in obj)
    return size


async def _raw_share(url: str) -> int:
    from simplellmfunc import OpenAICompatible
    from simplellmfunc._messages import UserMessage
    from simplellmfunc.providers import LLMRequest

    llm = OpenAICompatible(scale.KEY, "bench", url, max_retries=0)
    try:
        response = await llm.complete(LLMRequest(messages=(UserMessage(scale.USER),)))
    finally:
        await llm.aclose()
    message = response.message
    shared = {id(message.content), id(response.finish_reason), id(response.model)}
    shared |= {id(v) for c in message.tool_calls for v in (c.id, c.name, c.arguments)}
    return deep_size(response.raw, shared)


async def _measure(impl: str, url: str, sessions: int, ttft: float, top: int) -> None:
    client = scale._client(impl, url)
    call = client.react()
    try:
        tracemalloc.start(1)
        before = tracemalloc.take_snapshot()
        tasks = [asyncio.ensure_future(call()) for _ in range(sessions)]
        await asyncio.sleep(ttft / 2)  # every session has sent its first request by now
        gc.collect()
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        chain = await_chain(tasks[0].get_coro())
        stats = after.compare_to(before, "lineno")
        total = sum(s.size_diff for s in stats)
        print(f"{impl}: {sessions} sessions waiting in their first LLM call")
        print(f"  tracemalloc: {total / sessions / 1024:.2f} KB per waiting session")
        for s in stats[:top]:
            frame = s.traceback[0]
            where = frame.filename.split("site-packages/")[-1].split("src/")[-1]
            print(
                f"    {s.size_diff / sessions:7.0f} B {s.count_diff / sessions:5.1f} blocks"
                f"  {where}:{frame.lineno}"
            )
        frames = [name for kind, name in chain if kind != "wait"]
        print(f"  await chain: {len(frames)} frames")
        for kind, name in chain:
            print(f"    {kind:4} {name}")
        await asyncio.gather(*tasks)
    finally:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--impl",
        nargs="*",
        default=["engine", "floor"],
        choices=("engine", "floor", "floor-limited"),
    )
    parser.add_argument(
        "--sessions", type=int, default=100, help="concurrent sessions (<= 100: all in flight)"
    )
    parser.add_argument(
        "--ttft", type=float, default=4.0, help="seconds the server holds each reply"
    )
    parser.add_argument("--top", type=int, default=20, help="source lines shown")
    args = parser.parse_args()
    flags = ["--react-steps", "3", "--tool-name", "noop"]
    with MockServerProcess(flags) as server:
        raw = asyncio.run(_raw_share(server.url))
        print(f"LLMResponse.raw of a tool-call reply, not shared with its message: {raw} B")
    with MockServerProcess([*flags, "--ttft", str(args.ttft)]) as server:
        for impl in args.impl:
            asyncio.run(_measure(impl, server.url, args.sessions, args.ttft, args.top))


if __name__ == "__main__":
    main()
