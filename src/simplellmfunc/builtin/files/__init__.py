"""``FileToolset``: workspace-scoped file tools (read, image, grep, sed, write) with stale-write
protection.

Modules: ``_toolset`` (the toolset and its five tools), ``_paths`` (resolving user paths inside the
workspace without following symlinks out of it), ``_glob`` (path patterns), ``_grep`` (the search
walk), ``_image`` (image files), ``_text`` (line ranges, sed, limits).
"""

from ..._lazy import publish
from ._grep import GrepLimits
from ._paths import SECRET_PATTERNS
from ._text import ReadLimits
from ._toolset import STALE_FILE_MESSAGE, FileToolset

__all__ = ["SECRET_PATTERNS", "STALE_FILE_MESSAGE", "FileToolset", "GrepLimits", "ReadLimits"]

publish(__name__, __all__)
