"""The conformance table of ``serve``'s OpenAI endpoints: 22 expectations of the official
``openai`` client (23 checks: images are two), each against a fresh mock LLM server and a fresh
served agent on loopback, printed as ``PASS | expectation | why not``.

The same expectations are asserted by ``tests/test_openai_conformance.py``; this script exists
to print the table for an older tree too (``PYTHONPATH=<old>/src``), where one failure must not
hide the next: run one check per process there (``python benchmarks/openai_conformance.py N``,
N = 1..23), as a failing check of old code can leave its server's shutdown waiting.

Usage::

    python benchmarks/openai_conformance.py [N]
"""

import json
import sys

import anyio
import openai
from pydantic import BaseModel

from simplellmfunc import OpenAICompatible, llm_chat
from simplellmfunc.engine import HistoryWindow
from simplellmfunc.providers import Capabilities
from simplellmfunc.serving import ServedAgent, create_app, running
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

KEY, TOKEN = "sk-test-123456789", "tok-abcdef"
W = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "w",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
U = [{"role": "user", "content": "hi"}]


class Weather(BaseModel):
    city: str
    celsius: int


results = []


class _M:
    pass


m = _M()
CHECK = [0]


async def check(name, _unused, body, **kw):
    CHECK[0] += 1
    if len(sys.argv) > 1 and CHECK[0] != int(sys.argv[1]):
        return
    n = len(results)
    try:
        await _check(name, body, **kw)
    except Exception as exc:  # boundary: a failed check is a table row
        if len(results) == n:
            while isinstance(exc, BaseExceptionGroup):
                exc = exc.exceptions[0]
            results.append((name, False, f"{type(exc).__name__}: {str(exc)[:80]}"))


async def _check(name, body, vision=True, served=None, window=None, script=()):
    async with MockLLMServer() as mock:
        m.mock = mock
        mock.script(*script)
        caps = Capabilities(vision=vision)
        try:
            async with OpenAICompatible(KEY, "m", mock.url, capabilities=caps) as llm:

                async def helper(message: str, history: list | None = None) -> None:
                    """You help."""

                opts = {"history_window": window} if window else {}
                agent = llm_chat(llm, stream=True, **opts)(helper)
                try:
                    s = ServedAgent(agent, **(served or {}))
                except TypeError:
                    results.append((name, False, "option unknown"))
                    return
                async with running(lambda url: create_app(s, url, token=TOKEN, a2a=False)) as url:
                    c = openai.AsyncOpenAI(api_key=TOKEN, base_url=f"{url}/v1", max_retries=0)
                    with anyio.fail_after(10):
                        ok = await body(c)
                    await c.close()
            results.append((name, bool(ok), ""))
        except Exception as exc:  # boundary: a failed check is a table row
            while isinstance(exc, BaseExceptionGroup):
                exc = exc.exceptions[0]
            results.append((name, False, f"{type(exc).__name__}: {str(exc)[:90]}"))
        finally:
            m.mock = mock


async def raises(coro, cls, **attrs):
    try:
        await coro
    except cls as e:
        return all(getattr(e, k) == v for k, v in attrs.items())
    return False


async def main():
    if True:

        async def plain(c):
            r = await c.chat.completions.create(model="helper", messages=U)
            return r.choices[0].message.content == "ok" and r.choices[0].finish_reason == "stop"

        await check(
            "1 chat create: content, finish_reason stop", m, plain, script=[Reply.text("ok")]
        )

        async def usage(c):
            r = await c.chat.completions.create(model="helper", messages=U)
            return r.usage.prompt_tokens == 7

        await check("2 chat usage", m, usage, script=[Reply.text("ok", usage=(7, 3))])

        async def stream(c):
            ch = [
                x
                async for x in await c.chat.completions.create(
                    model="helper", messages=U, stream=True
                )
            ]
            return (
                "".join(x.choices[0].delta.content or "" for x in ch if x.choices) == "a b c"
                and ch[-1].choices[0].finish_reason == "stop"
            )

        await check(
            "3 stream: deltas and finish chunk", m, stream, script=[Reply.text("a b c", chunks=3)]
        )

        async def inc(c):
            ch = [
                x
                async for x in await c.chat.completions.create(
                    model="helper", messages=U, stream=True, stream_options={"include_usage": True}
                )
            ]
            return ch[-1].choices == [] and ch[-1].usage is not None and ch[-2].usage is None

        await check(
            "4 include_usage: last chunk choices [] with usage",
            m,
            inc,
            script=[Reply.text("x", usage=(3, 1))],
        )

        async def noinc(c):
            ch = [
                x
                async for x in await c.chat.completions.create(
                    model="helper", messages=U, stream=True
                )
            ]
            return all(x.usage is None for x in ch)

        await check("5 no include_usage: no usage in chunks", m, noinc, script=[Reply.text("x")])

        async def tc(c):
            r = await c.chat.completions.create(model="helper", messages=U, tools=[W])
            return (
                r.choices[0].finish_reason == "tool_calls"
                and r.choices[0].message.tool_calls[0].function.name == "get_weather"
            )

        await check(
            "6 client tools: tool_calls, finish_reason tool_calls",
            m,
            tc,
            script=[Reply.tool_calls(ToolCallSpec("get_weather", {"city": "P"}, id="c1"))],
        )

        async def tcs(c):
            ch = [
                x
                async for x in await c.chat.completions.create(
                    model="helper", messages=U, tools=[W], stream=True
                )
            ]
            calls = [
                d
                for x in ch
                if x.choices and x.choices[0].delta.tool_calls
                for d in x.choices[0].delta.tool_calls
            ]
            return bool(calls) and ch[-1].choices[0].finish_reason == "tool_calls"

        await check(
            "7 client tools streamed",
            m,
            tcs,
            script=[Reply.tool_calls(ToolCallSpec("get_weather", {"city": "P"}, id="c1"))],
        )

        async def rt(c):
            msgs = [
                *U,
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            ]
            r = await c.chat.completions.create(model="helper", messages=msgs, tools=[W])
            return (
                r.choices[0].message.content == "Sunny."
                and m.mock.requests[-1].json["messages"][-1]["content"] == "sunny"
            )

        await check("8 role tool results continue the run", m, rt, script=[Reply.text("Sunny.")])

        async def ch(c):
            await c.chat.completions.create(
                model="helper", messages=U, tools=[W], tool_choice="required"
            )
            return m.mock.requests[-1].json.get("tool_choice") == "required"

        await check("9 tool_choice honoured", m, ch, script=[Reply.text("x")])

        async def refuse(c):
            return await raises(
                c.chat.completions.create(model="helper", messages=U, tools=[W]),
                openai.BadRequestError,
            )

        await check(
            "10 agent refusing client tools: 400",
            m,
            refuse,
            served={"client_tools": False},
            script=[Reply.text("x")],
        )

        async def parse(c):
            r = await c.chat.completions.parse(model="helper", messages=U, response_format=Weather)
            return r.choices[0].message.parsed == Weather(city="P", celsius=2)

        await check(
            "11 .parse() with a json_schema",
            m,
            parse,
            script=[Reply.text("Sure"), Reply.text('{"city":"P","celsius":2}')],
        )

        async def jo(c):
            r = await c.chat.completions.create(
                model="helper", messages=U, response_format={"type": "json_object"}
            )
            return isinstance(json.loads(r.choices[0].message.content), dict)

        await check(
            "12 json_object answer is a JSON object",
            m,
            jo,
            script=[Reply.text("Here you go"), Reply.text('{"a":1}')],
        )

        async def n(c):
            return await raises(
                c.chat.completions.create(model="helper", messages=U, n=2), openai.BadRequestError
            )

        await check("13 n=2: 400 (not silently one choice)", m, n, script=[Reply.text("x")])

        async def bad(c):
            return await raises(
                c.chat.completions.create(model="nope", messages=U),
                openai.NotFoundError,
                code="model_not_found",
            )

        await check("14 unknown model: 404 model_not_found", m, bad, script=[Reply.text("x")])

        async def lst(c):
            return [x.id for x in (await c.models.list()).data] == ["helper"]

        await check("15 GET /v1/models lists the agent", m, lst)

        async def ret(c):
            return (await c.models.retrieve("helper")).id == "helper" and await raises(
                c.models.retrieve("nope"), openai.NotFoundError
            )

        await check("16 GET /v1/models/{id}", m, ret)

        async def auth(c):
            return await raises(
                c.with_options(api_key="wrong").chat.completions.create(model="helper", messages=U),
                openai.AuthenticationError,
                code="invalid_api_key",
            )

        await check("17 no auth: 401 in OpenAI shape", m, auth)
        img = [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "?"},
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
                    },
                ],
            }
        ]

        async def imgs(c):
            await c.chat.completions.create(model="helper", messages=img)
            parts = m.mock.requests[-1].json["messages"][-1]["content"]
            return isinstance(parts, list) and parts[-1]["type"] == "image_url"

        async def noimg(c):
            return await raises(
                c.chat.completions.create(model="helper", messages=img), openai.BadRequestError
            )

        await check("18a image_url passed on (vision model)", m, imgs, script=[Reply.text("png")])
        await check(
            "18b image_url refused (no vision): 400",
            m,
            noimg,
            vision=False,
            script=[Reply.text("png")],
        )
        long = [
            {"role": r, "content": f"{r} {i}"} for i in range(250) for r in ("user", "assistant")
        ][:-1]

        async def lh(c):
            raw = await c.chat.completions.with_raw_response.create(model="helper", messages=long)
            return (
                "x-history-dropped" in raw.headers
                or len(m.mock.requests[-1].json["messages"]) >= 500
            )

        await check(
            "19 long history: kept or the drop reported",
            m,
            lh,
            window=HistoryWindow(keep_recent_turns=5),
            script=[Reply.text("x")],
        )

        async def shape(c):
            try:
                await c.chat.completions.create(
                    model="helper", messages=[{"role": "assistant", "content": "x"}]
                )
            except openai.BadRequestError as e:
                return isinstance(e.body, dict) and set(e.body) == {
                    "message",
                    "type",
                    "param",
                    "code",
                }
            return False

        await check("20 errors in OpenAI shape (message/type/param/code)", m, shape)

        async def up(c):
            try:
                await c.chat.completions.create(model="helper", messages=U)
            except openai.APIStatusError as e:
                return "secret-77" not in e.response.text and e.code is not None
            return False

        await check(
            "21 upstream error: typed code, no upstream body",
            m,
            up,
            script=[Reply.error(400, "secret-77", body="secret-77")],
        )

        async def resp(c):
            r1 = await c.responses.create(model="helper", input="hi")
            ev = [
                e
                async for e in await c.responses.create(
                    model="helper", input="again", previous_response_id=r1.id, stream=True
                )
            ]
            return (
                r1.output_text == "r1"
                and ev[-1].type == "response.completed"
                and len(m.mock.requests[-1].json["messages"]) == 4
            )

        await check(
            "22 /v1/responses create, stream, previous_response_id",
            m,
            resp,
            script=[Reply.text("r1"), Reply.text("r2", chunks=2)],
        )
    for name, ok, why in results:
        print(f"{'PASS' if ok else 'FAIL'} | {name} | {why}")
    print(sum(ok for _, ok, _ in results), "of", len(results))


anyio.run(main)
