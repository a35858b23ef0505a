"""A user's file, checked with ``mypy --strict`` (``make typecheck``): ``@sandboxed`` in its
three forms gives a ``SandboxedTool``, not ``Any``."""

from __future__ import annotations

from typing import assert_type

from simplellmfunc.sandbox import SandboxPolicy
from simplellmfunc.tools import SandboxedTool, sandboxed


@sandboxed
def double(x: int) -> int:
    return 2 * x


@sandboxed(SandboxPolicy.default())
def triple(x: int) -> int:
    return 3 * x


@sandboxed(timeout=10)
def square(x: int) -> int:
    return x * x


assert_type(double, SandboxedTool)
assert_type(triple, SandboxedTool)
assert_type(square, SandboxedTool)
