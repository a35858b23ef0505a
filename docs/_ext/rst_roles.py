"""A griffe extension for the API reference: reST roles in docstrings become Markdown code.

The docstrings are Google style but name objects with reST roles (``:class:`Run```,
``:func:`~simplellmfunc.runtime.open_store```), which Markdown would print verbatim. Each role
becomes inline code with the name as written (a leading ``~`` keeps the last dotted part), and a
paragraph ending in ``::`` (a reST literal block) ends in ``:``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj|const):`(~?)([^`]+)`")
_LITERAL = re.compile(r"::$", re.MULTILINE)


def _name(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def convert(text: str) -> str:
    """``text`` with reST roles as inline code and ``::`` paragraph ends as ``:``."""
    return _LITERAL.sub(":", _ROLE.sub(_name, text))


class RSTRoles(griffe.Extension):
    """Rewrite the docstring of every loaded object (see the module docstring)."""

    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
