"""``python -m simplellmfunc`` and the ``simplellmfunc`` console script (see :mod:`._cli`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    from ._cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
