"""What every config section shares: the constrained field types, and the pydantic
configuration of a section (unknown keys are errors, values are frozen).

Each schema module derives its sections from a local ``_Section(BaseModel)`` with
``model_config = SECTION``: a linter sees a pydantic model (whose mutable defaults are copied
per instance) only when the base class is in the same file.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field

__all__ = ["SECTION", "Count", "Name", "Positive", "ToolName"]

SECTION = ConfigDict(extra="forbid", frozen=True)
Positive = Annotated[float, Field(gt=0)]
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
ToolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]
Count = Annotated[int, Field(ge=1)]
