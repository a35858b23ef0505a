"""Keep secrets out of logs, reprs, errors and events."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["fingerprint", "redact"]

_KEYLIKE = re.compile(r"\b(sk|pk|key|rk)-[A-Za-z0-9_\-]{8,}|\bBearer\s+[A-Za-z0-9_\-.]{8,}")


def fingerprint(secret: str) -> str:
    """A short, non-reversible label for a secret: ``…`` plus its last four characters."""
    if len(secret) <= 8:
        return "…" + "*" * 4
    return f"…{secret[-4:]}"


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Replace known secrets and anything that looks like an API key in ``text``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, fingerprint(secret))
    return _KEYLIKE.sub(lambda m: fingerprint(m.group(0)), text)
