"""Skills: instructions (and tools, files, scripts) an agent loads when a task needs them.

* :class:`Skill`: one skill; from an Agent Skills folder (``SKILL.md`` with ``name`` and
  ``description`` front matter, a Markdown body, files beside it: :func:`read_skill_folder`) or
  from Python (:func:`skill`, which bundles tools and instructions; a Python skill is callable
  like its function, has a :class:`SkillSignature`, ``examples``, ``bind(**kwargs)`` and
  :class:`SkillStats`).
* :class:`SkillRegistry`: skills by name, found in folders (:meth:`SkillRegistry.add_dir`),
  searched by words and tags, chosen for a task by a model (:meth:`SkillRegistry.discover`).
* :class:`Skills`: a registry as a toolkit item; the model sees names and descriptions only and
  loads a skill with ``load_skill`` (its body, files and tools then become available).
* :func:`skill_agent`: an ``@llm_chat`` agent that discovers and loads skills for each task.
"""

from ..._lazy import publish
from ._agent import DEFAULT_SKILL_AGENT_PROMPT, skill_agent
from ._folder import SKILL_FILE, find_skill_folders, read_skill_folder
from ._registry import SkillRegistry
from ._skill import Skill, SkillSignature, SkillStats, skill
from ._toolkit import LOAD_SKILL, DiscoverMode, Skills, loaded_skills

__all__ = [
    "DEFAULT_SKILL_AGENT_PROMPT",
    "LOAD_SKILL",
    "SKILL_FILE",
    "DiscoverMode",
    "Skill",
    "SkillRegistry",
    "SkillSignature",
    "SkillStats",
    "Skills",
    "find_skill_folders",
    "loaded_skills",
    "read_skill_folder",
    "skill",
    "skill_agent",
]

publish(__name__, __all__)
