"""Cassettes: record the provider exchanges of a run to a JSONL file, replay them offline.

A cassette sits at the httpx transport level, under every provider (OpenAI chat, Responses,
Anthropic, embeddings; any other client built on ``httpx``): in recording it forwards a request
to the real transport and keeps the request and the response, a streamed one chunk by chunk
with the time each chunk arrived; in replay it answers from the file and never opens a socket.

The file is JSON Lines: a header line, then one interaction per line::

    {"cassette": 1, "created": "2026-12-02T01:00:00+00:00"}
    {"request": {...}, "response": {"status": 200, "headers": {...}, "chunks": [[0.01, "..."]]}}

Secrets are redacted when a line is written: credential headers become fingerprints, and every
credential seen (and every secret given) is replaced wherever else it occurs, along with anything
that looks like an API key (``providers._redact``). Nothing secret reaches the disk.
"""

from __future__ import annotations

import base64
import difflib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, get_args

import anyio
import httpx

from ..exceptions import CassetteError, CassetteMismatchError
from ..providers import fingerprint, redact
from ._prefix import PrefixDrift, compare_prefixes, prefix_drifts

__all__ = [
    "MATCH_FIELDS",
    "STRICT",
    "Cassette",
    "CassetteTransport",
    "Interaction",
    "MatchField",
    "RecordMode",
    "request_fields",
    "use_cassette",
]

RecordMode: TypeAlias = Literal["record", "replay", "new_episodes", "none"]
"""``record``: call the API and (re)write the cassette. ``replay``: answer from the cassette,
recording it first when the file does not exist yet (VCR's "once"). ``new_episodes``: answer
what the cassette has, call the API for the rest and append it. ``none``: answer from the
cassette only; a missing file or an unknown request is an error, the network is never used."""

MatchField: TypeAlias = Literal[
    "method", "path", "model", "messages", "tools", "response_format", "stream", "body"
]
MATCH_FIELDS: Final[tuple[MatchField, ...]] = get_args(MatchField)
#: The default matcher: everything that decides what the model sees and how it answers.
STRICT: Final[tuple[MatchField, ...]] = (
    "method",
    "path",
    "model",
    "messages",
    "tools",
    "response_format",
)
#: Paths whose requests a patched run records (the model APIs); others pass through.
LLM_PATHS: Final = ("/chat/completions", "/responses", "/messages", "/embeddings", "/count_tokens")
_CREDENTIAL_HEADERS: Final = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key"})
_DROPPED_HEADERS: Final = frozenset(
    {"content-length", "transfer-encoding", "content-encoding", "connection", "set-cookie", "host"}
)
_KEPT_REQUEST_HEADERS: Final = frozenset(
    {"content-type", "accept", "anthropic-version", "anthropic-beta", "openai-beta"}
)
_VERSION: Final = 1

Send: TypeAlias = Callable[[httpx.Request], Awaitable[httpx.Response]]


def _json_or_text(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _encode_chunk(data: bytes) -> str | dict[str, str]:
    """A chunk as readable text, or ``{"b64": ...}`` when it is not valid UTF-8 on its own."""
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(data).decode()}


def _decode_chunk(data: str | dict[str, str]) -> bytes:
    if isinstance(data, str):
        return data.encode()
    return base64.b64decode(data["b64"])


def request_fields(method: str, path: str, body: Any) -> dict[str, Any]:
    """The fields a request is matched on (see :data:`MatchField`), from its parts.

    ``messages`` gathers what the model reads, whatever the API calls it (``messages``,
    ``input``, ``system``, ``instructions``); ``response_format`` gathers the output format
    (``response_format``, Responses' ``text``, Anthropic's ``output_format``).
    """
    data = body if isinstance(body, dict) else {}
    messages = {
        name: data[name] for name in ("system", "instructions", "messages", "input") if name in data
    }
    formats = {
        name: data[name]
        for name in ("response_format", "text", "output_format", "tool_choice")
        if name in data
    }
    return {
        "method": method.upper(),
        "path": path,
        "model": data.get("model"),
        "messages": messages,
        "tools": data.get("tools"),
        "response_format": formats,
        "stream": bool(data.get("stream", False)),
        "body": body,
    }


@dataclass(slots=True)
class Interaction:
    """One recorded exchange: the request, and the response or the transport error.

    Attributes:
        request: ``method``, ``path``, ``headers`` (redacted) and ``body`` (JSON, or text).
        response: ``status``, ``headers``, ``chunks`` (``[seconds_since_request, data]``) and,
            when the stream broke after some chunks, ``error``; ``None`` when no response came.
        error: ``{"type": ..., "message": ...}`` of the httpx error raised instead of a response.
        used: Whether the replay already answered with it (each answers once).
    """

    request: dict[str, Any]
    response: dict[str, Any] | None = None
    error: dict[str, str] | None = None
    used: bool = field(default=False, compare=False)
    _fields: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def fields(self) -> dict[str, Any]:
        """The request's :func:`request_fields` (computed once)."""
        if self._fields is None:
            request = self.request
            self._fields = request_fields(request["method"], request["path"], request.get("body"))
        return self._fields

    def to_json(self) -> dict[str, Any]:
        line: dict[str, Any] = {"request": self.request}
        if self.response is not None:
            line["response"] = self.response
        if self.error is not None:
            line["error"] = self.error
        return line

    @property
    def text(self) -> str:
        """The response body as text (the chunks joined)."""
        if self.response is None:
            return ""
        return b"".join(_decode_chunk(c[1]) for c in self.response["chunks"]).decode(
            errors="replace"
        )


def _pretty(value: Any) -> list[str]:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False).splitlines()


def mismatch_diff(recorded: dict[str, Any], actual: dict[str, Any], match_on: Sequence[str]) -> str:
    """A unified diff of the fields of two requests that take part in matching and differ."""
    lines: list[str] = []
    for name in match_on:
        if recorded.get(name) == actual.get(name):
            continue
        diff = difflib.unified_diff(
            _pretty(recorded.get(name)),
            _pretty(actual.get(name)),
            f"recorded {name}",
            f"actual {name}",
            lineterm="",
            n=2,
        )
        lines.extend(diff)
    return "\n".join(lines)


class _RecordingStream(httpx.AsyncByteStream):
    """The body of a live response, passed on while each chunk is written down."""

    def __init__(self, response: httpx.Response, start: float, entry: Interaction) -> None:
        self._response = response
        self._start = start
        self._entry = entry

    async def __aiter__(self) -> AsyncIterator[bytes]:
        assert self._entry.response is not None
        chunks: list[Any] = self._entry.response["chunks"]
        try:
            async for chunk in self._response.aiter_bytes():
                chunks.append([round(time.perf_counter() - self._start, 4), _encode_chunk(chunk)])
                yield chunk
        except httpx.HTTPError as exc:
            self._entry.response["error"] = {"type": type(exc).__name__, "message": str(exc)}
            raise

    async def aclose(self) -> None:
        # A body left unread (the reader stopped early) is kept as far as it was read.
        await self._response.aclose()


class _ReplayStream(httpx.AsyncByteStream):
    def __init__(self, entry: Interaction, speed: float | None) -> None:
        self._entry = entry
        self._speed = speed

    async def __aiter__(self) -> AsyncIterator[bytes]:
        response = self._entry.response
        assert response is not None
        last = 0.0
        for at, data in response["chunks"]:
            if self._speed:
                await anyio.sleep(max(0.0, at - last) / self._speed)
                last = at
            yield _decode_chunk(data)
        if "error" in response:
            raise _http_error(response["error"])


def _http_error(error: dict[str, str]) -> httpx.HTTPError:
    kind = getattr(httpx, error.get("type", ""), None)
    if not (isinstance(kind, type) and issubclass(kind, httpx.TransportError)):
        kind = httpx.RemoteProtocolError
    return kind(error.get("message", "recorded transport error"))


class Cassette:
    """A recorded run: load, match, answer, record and save provider exchanges.

    Args:
        path: The JSONL file.
        mode: See :data:`RecordMode`.
        match_on: The fields a request must equal to be answered by a recorded one
            (:data:`STRICT` by default; e.g. ``("method", "path", "model")`` is loose).
        matcher: Instead of ``match_on``: ``(recorded, actual) -> bool`` over
            :func:`request_fields` dicts.
        secrets: More strings to redact from the file (credential headers always are).
        speed: Replay timing: ``None`` answers at once; ``1.0`` waits as the recording did
            between chunks (``2.0`` twice as fast).
        paths: Paths ending with one of these are recorded when the cassette patches httpx.

    Raises:
        CassetteError: On a malformed file, or a ``none``-mode cassette that does not exist.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        mode: RecordMode = "replay",
        match_on: Sequence[MatchField] = STRICT,
        matcher: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
        secrets: Iterable[str] = (),
        speed: float | None = None,
        paths: Sequence[str] = LLM_PATHS,
    ) -> None:
        if mode not in get_args(RecordMode):
            raise CassetteError(f"unknown record mode {mode!r}; use one of {get_args(RecordMode)}")
        unknown = set(match_on) - set(MATCH_FIELDS)
        if unknown:
            raise CassetteError(f"unknown match fields {sorted(unknown)}; use {MATCH_FIELDS}")
        self.path = Path(path)
        self.match_on = tuple(match_on)
        self._matcher = matcher
        self._secrets = {s for s in secrets if s}
        self.speed = speed
        self.paths = tuple(paths)
        self.interactions: list[Interaction] = []
        #: Every request this run sent through the cassette, as :func:`request_fields`.
        self.requests: list[dict[str, Any]] = []
        self._replayed: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self._dirty = False
        exists = self.path.exists()
        if mode == "replay" and not exists:
            mode = "record"  # "once": record the first time
        if mode == "none" and not exists:
            raise CassetteError(f"cassette {self.path} does not exist (record mode 'none')")
        self.mode: RecordMode = mode
        if exists and mode != "record":
            self.interactions = self._load()
        elif mode == "record":
            self._dirty = True  # a new recording replaces the file even when nothing is sent

    # -- file ----------------------------------------------------------------------------------

    def _load(self) -> list[Interaction]:
        entries: list[Interaction] = []
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise CassetteError(f"cannot read cassette {self.path}: {exc}") from exc
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise CassetteError(f"{self.path}:{number}: not JSON: {exc}") from None
            if not isinstance(data, dict):
                raise CassetteError(f"{self.path}:{number}: expected a JSON object")
            if "cassette" in data:
                if data["cassette"] != _VERSION:
                    raise CassetteError(f"{self.path}: unknown version {data['cassette']!r}")
                continue
            request = data.get("request")
            if not isinstance(request, dict) or not {"method", "path"} <= request.keys():
                raise CassetteError(f"{self.path}:{number}: an interaction needs a request")
            entries.append(Interaction(request, data.get("response"), data.get("error")))
        return entries

    def redact(self, text: str) -> str:
        """``text`` with every secret this cassette knows of replaced by its fingerprint."""
        return redact(text, sorted(self._secrets, key=len, reverse=True))

    def save(self) -> None:
        """Write the file (only when something was recorded); secrets are redacted here."""
        if not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = {"cassette": _VERSION, "created": datetime.now(UTC).isoformat(timespec="seconds")}
        lines = [json.dumps(header)]
        lines.extend(
            self.redact(json.dumps(entry.to_json(), ensure_ascii=False))
            for entry in self.interactions
        )
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tmp.replace(self.path)
        self._dirty = False

    # -- matching ------------------------------------------------------------------------------

    def _matches(self, recorded: dict[str, Any], actual: dict[str, Any]) -> bool:
        if self._matcher is not None:
            return self._matcher(recorded, actual)
        return all(recorded.get(name) == actual.get(name) for name in self.match_on)

    def find(self, actual: dict[str, Any]) -> Interaction | None:
        """The first unused recorded interaction that matches ``actual`` (request fields)."""
        for entry in self.interactions:
            if entry.used or (entry.response is None and entry.error is None):
                continue
            if self._matches(entry.fields, actual):
                return entry
        return None

    def _mismatch(self, actual: dict[str, Any]) -> CassetteMismatchError:
        unused = [e for e in self.interactions if not e.used]
        where = f"{actual['method']} {actual['path']}"
        if not unused:
            return CassetteMismatchError(
                f"cassette {self.path}: no recorded interaction left for {where} "
                f"(all {len(self.interactions)} were used)"
            )
        fields = self.match_on if self._matcher is None else MATCH_FIELDS

        def distance(entry: Interaction) -> float:
            recorded = entry.fields
            same: int = sum(recorded.get(name) == actual.get(name) for name in fields)
            ratio = difflib.SequenceMatcher(
                None, json.dumps(recorded["body"]), json.dumps(actual["body"])
            ).quick_ratio()
            return -(same + float(ratio))

        nearest = min(unused, key=distance)
        diff = mismatch_diff(nearest.fields, actual, fields)
        drift = compare_prefixes([actual], [nearest.fields])
        index = self.interactions.index(nearest)
        where_drift = f"; {drift[0]}".replace("request 0 vs 0: ", "") if drift else ""
        return CassetteMismatchError(
            f"cassette {self.path}: {where} matches no recorded request "
            f"(nearest: interaction {index + 1}; matching on {', '.join(fields)}){where_drift}",
            diff,
        )

    def prefix_drifts(self) -> list[PrefixDrift]:
        """Prompt-prefix drifts of this run: between its own requests
        (:func:`~._prefix.prefix_drifts`), and of each replayed request against the recorded one
        that answered it (which a loose matcher lets differ)."""
        drifts = prefix_drifts(self.requests)
        for actual, recorded in self._replayed:
            drifts += compare_prefixes([actual], [recorded])
        return drifts

    # -- the transport -------------------------------------------------------------------------

    def intercepts(self, request: httpx.Request) -> bool:
        """Whether ``request`` is one the cassette records (a model API path)."""
        return request.url.path.endswith(self.paths)

    def _request_record(self, request: httpx.Request, body: bytes) -> dict[str, Any]:
        headers: dict[str, str] = {}
        for name, value in request.headers.items():
            name = name.lower()
            if name in _CREDENTIAL_HEADERS:
                secret = value.removeprefix("Bearer ").strip()
                if secret:
                    self._secrets.add(secret)
                headers[name] = fingerprint(secret)
            elif name in _KEPT_REQUEST_HEADERS:
                headers[name] = value
        for value in request.url.params.values():  # ?key=... (Gemini-style credentials)
            if len(value) >= 16:
                self._secrets.add(value)
        return {
            "method": request.method,
            "path": request.url.path,
            "headers": headers,
            "body": _json_or_text(body),
        }

    async def handle(self, request: httpx.Request, send: Send) -> httpx.Response:
        """Answer ``request`` from the cassette or through ``send`` (the real transport)."""
        body = await request.aread()
        record = self._request_record(request, body)
        # Matched as the file has it: redacted, so a secret in a prompt still matches.
        redacted = json.loads(self.redact(json.dumps(record)))
        actual = request_fields(redacted["method"], redacted["path"], redacted["body"])
        self.requests.append(actual)
        if self.mode != "record":
            entry = self.find(actual)
            if entry is not None:
                entry.used = True
                self._replayed.append((actual, entry.fields))
                return self._replay(entry, request)
            if self.mode in ("replay", "none"):
                raise self._mismatch(actual)
        return await self._record(request, record, send)

    def _replay(self, entry: Interaction, request: httpx.Request) -> httpx.Response:
        if entry.error is not None:
            raise _http_error(entry.error)
        response = entry.response
        assert response is not None
        return httpx.Response(
            response["status"],
            headers=response.get("headers", {}),
            stream=_ReplayStream(entry, self.speed),
            request=request,
        )

    async def _record(
        self, request: httpx.Request, record: dict[str, Any], send: Send
    ) -> httpx.Response:
        entry = Interaction(record)
        self.interactions.append(entry)
        entry.used = True
        self._dirty = True
        start = time.perf_counter()
        try:
            live = await send(request)
        except httpx.HTTPError as exc:
            entry.error = {"type": type(exc).__name__, "message": str(exc)}
            raise
        headers = {
            name.lower(): value
            for name, value in live.headers.items()
            if name.lower() not in _DROPPED_HEADERS
        }
        entry.response = {"status": live.status_code, "headers": headers, "chunks": []}
        return httpx.Response(
            live.status_code,
            headers=headers,
            stream=_RecordingStream(live, start, entry),
            request=request,
        )

    def transport(self, inner: httpx.AsyncBaseTransport | None = None) -> CassetteTransport:
        """An httpx transport over this cassette, for ``httpx.AsyncClient(transport=...)``
        (then pass the client as a provider's ``http_client``); ``inner`` is the real
        transport used for recording (a new ``httpx.AsyncHTTPTransport`` by default)."""
        return CassetteTransport(self, inner)

    @property
    def unused(self) -> list[Interaction]:
        """Recorded interactions the run has not asked for (yet)."""
        return [entry for entry in self.interactions if not entry.used]

    @property
    def all_played(self) -> bool:
        """Whether every recorded interaction was answered."""
        return not self.unused


class CassetteTransport(httpx.AsyncBaseTransport):
    """An httpx transport that answers model API requests from a :class:`Cassette`."""

    def __init__(self, cassette: Cassette, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.cassette = cassette
        self._inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if not self.cassette.intercepts(request):
            return await self._inner.handle_async_request(request)
        return await self.cassette.handle(request, self._inner.handle_async_request)

    async def aclose(self) -> None:
        await self._inner.aclose()
        self.cassette.save()


_active: list[Cassette] = []
_ORIGINAL: Final = httpx.AsyncHTTPTransport.handle_async_request


async def _patched(self: httpx.AsyncHTTPTransport, request: httpx.Request) -> httpx.Response:
    if not _active or not _active[-1].intercepts(request):
        return await _ORIGINAL(self, request)

    async def send(req: httpx.Request) -> httpx.Response:
        return await _ORIGINAL(self, req)

    return await _active[-1].handle(request, send)


@contextmanager
def use_cassette(
    path: str | Path,
    *,
    mode: RecordMode = "replay",
    match_on: Sequence[MatchField] = STRICT,
    matcher: Callable[[dict[str, Any], dict[str, Any]], bool] | None = None,
    secrets: Iterable[str] = (),
    speed: float | None = None,
    paths: Sequence[str] = LLM_PATHS,
    check_prefix: bool = False,
) -> Iterator[Cassette]:
    """Record or replay every model API request of the block, from any async ``httpx`` client
    in the process (our providers and anything else on httpx): ``httpx.AsyncHTTPTransport`` is
    patched for the block and put back after, and the file is written when the block ends.

    Example:
        >>> with use_cassette("tests/cassettes/review.jsonl") as cassette:  # doctest: +SKIP
        ...     verdict = await review(code)

    With ``check_prefix``, a block that ends normally fails when :meth:`Cassette.prefix_drifts`
    finds a drift of the prompt prefix.

    Raises:
        CassetteError: See :class:`Cassette`; also when a cassette is already in use.
        CassetteMismatchError: (from a request in the block) when replay has no answer.
        AssertionError: With ``check_prefix``, listing the drifts.
    """
    cassette = Cassette(
        path,
        mode=mode,
        match_on=match_on,
        matcher=matcher,
        secrets=secrets,
        speed=speed,
        paths=paths,
    )
    if _active:
        raise CassetteError(f"cassette {_active[-1].path} is already in use; they do not nest")
    _active.append(cassette)
    httpx.AsyncHTTPTransport.handle_async_request = _patched  # type: ignore[method-assign]
    try:
        yield cassette
    finally:
        httpx.AsyncHTTPTransport.handle_async_request = _ORIGINAL  # type: ignore[method-assign]
        _active.clear()
        cassette.save()
    if check_prefix and (drifts := cassette.prefix_drifts()):
        raise AssertionError("unstable prompt prefix:\n" + "\n".join(map(str, drifts)))
