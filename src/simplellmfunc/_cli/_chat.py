"""``simplellmfunc chat CFG``: the terminal chat front end (Textual) on a configured agent.

``--session NAME`` keeps the conversation in a SQLite store (``--history-db``) and resumes it
on the next start; without it the conversation lives as long as the app.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import anyio

from ..exceptions import SimpleLLMFuncError, UserError
from ..runtime import AgentConfig, ConfiguredAgent, load_agent_config
from ..runtime.stores import SQLiteStore, Store
from ._args import overrides_from
from ._output import EXIT_OK, report_error

__all__ = ["default_history_db", "handle_chat"]


def default_history_db() -> Path:
    """Where ``--session`` histories are kept by default (``$XDG_STATE_HOME`` or
    ``~/.local/state``, under ``simplellmfunc/chat.db``)."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "simplellmfunc" / "chat.db"


def _prices(text: str | None) -> tuple[float, float] | None:
    if not text:
        return None
    try:
        given, taken = (float(part) for part in text.split(","))
    except ValueError as exc:
        raise UserError(f"--price takes IN,OUT (USD per million tokens), got {text!r}") from exc
    return given, taken


async def _chat(args: argparse.Namespace, config: AgentConfig) -> int:
    from ..chat_ui import ChatApp

    store: Store | None = None
    if args.session:
        store = SQLiteStore(args.history_db or default_history_db())
    try:
        async with ConfiguredAgent(config) as agent:
            app = ChatApp(
                agent,
                session=args.session or "default",
                store=store,
                prices=_prices(args.price),
                title=f"{config.name} · simplellmfunc chat",
                agent_name=config.name,
            )
            await app.run_async()
    finally:
        if store is not None:
            await store.aclose()
    return EXIT_OK


def handle_chat(args: argparse.Namespace) -> int:
    """Open the chat on ``args.config``; return the exit status."""
    try:
        import textual  # noqa: F401  (only to say which extra is missing)
    except ImportError as exc:
        return report_error(UserError(f"the chat needs the [tui] extra (textual): {exc}"))
    try:
        config = load_agent_config(args.config, overrides=overrides_from(args))
        _prices(args.price)
        code: int = anyio.run(_chat, args, config)
    except SimpleLLMFuncError as exc:
        return report_error(exc)
    return code
