"""The Textual chat app: one session of an agent, its turns streamed as the events arrive."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Footer, Header, Static

from ..builtin.pyrepl import submit_kernel_input
from ..decorators import ChatAgent
from ..exceptions import AnswerRefusedError, InputRefusedError, SimpleLLMFuncError
from ..runtime.config import ConfiguredAgent, ServeLimits
from ..runtime.stores import Store
from ..serving import ServedAgent, TurnRequest
from ._view import (
    APPROVAL_HELP,
    Block,
    ReplyBlock,
    ToolCustomEventHook,
    ToolRenderSnapshot,
    TurnView,
    format_usage,
    typed_decision,
)
from ._widgets import PromptArea, ReplyView, ToolCard, load_images

__all__ = ["ChatApp"]

QUIT_COMMANDS = frozenset({"/exit", "/quit", "/q"})
READY = "Ready. Enter sends · Ctrl+J new line · Esc aborts the turn · /exit or Ctrl+Q quits"

_CSS = """
#log { height: 1fr; padding: 0 1; }
.user { background: $primary 20%; padding: 0 1; margin: 1 0 0 0; }
.hint { color: $text-muted; }
.reply { margin: 0; }
.tool { margin: 0 0 0 2; }
#status { height: 1; background: $panel; padding: 0 1; }
#prompt { height: 5; }
"""


class ChatApp(App[None]):
    """A terminal chat with an agent: Markdown replies streamed, a collapsible card per tool
    call, PyRepl output live, ``input()`` answered in the prompt, usage (and cost) per turn,
    Esc to abort, history kept by a :class:`~simplellmfunc.serving.SessionStore`. Each turn
    enters through the serving door (:meth:`~simplellmfunc.serving.ServedAgent.turn`, one
    session, one turn at a time), as every other front's.

    Args:
        agent: An ``@llm_chat`` function with ``enable_event=True``, an open
            ``ConfiguredAgent``, or any async generator function taking the message and
            ``history=`` like one (a :class:`~simplellmfunc.serving.CallableAgent`).
        session: The session id; with a persistent ``store`` its history is resumed.
        store: Where histories are kept (default: in memory, gone at exit).
        pyrepl: Give the session its own PyRepl kernel (``True`` or PyRepl's keyword arguments).
        hooks: Custom event hooks for tool cards (see :class:`ToolRenderSnapshot`).
        prices: USD per million input and output tokens, to show the cost of each turn.
        history: A conversation to start from when the store has none for ``session``.
        title: The window title.
        agent_name: The store namespace of the histories.
        images: Draw PyRepl images in their cards as half-block cells when ``textual-image``
            is installed (the ``tui-images`` extra); otherwise, or with ``False``, a line says
            an image's type and size.
    """

    CSS = _CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "abort", "Abort turn"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(
        self,
        agent: ChatAgent | ConfiguredAgent | Callable[..., Any],
        *,
        session: str = "default",
        store: Store | None = None,
        pyrepl: bool | dict[str, Any] = False,
        hooks: Sequence[ToolCustomEventHook] = (),
        prices: tuple[float, float] | None = None,
        history: Sequence[dict[str, Any]] = (),
        title: str = "simplellmfunc chat",
        agent_name: str = "chat",
        images: bool = True,
    ) -> None:
        super().__init__()
        # Loaded now, before Textual owns the terminal (see load_images).
        self.images = load_images() if images else None
        self.title = title
        self.session_id = session
        self.served = ServedAgent(
            agent,
            name=agent_name,
            limits=ServeLimits(max_sessions=1, idle_timeout=None, max_turns=1, pool_size=0),
            pyrepl=pyrepl,
            store=store,
        )
        self.sessions = self.served.sessions
        self.hooks = tuple(hooks)
        self.prices = prices
        self.initial_history = [dict(m) for m in history]
        self.view: TurnView | None = None
        self.busy = False
        self.turns = 0
        # By the block's id, with the block itself: an id is only unique while its object
        # lives, and a finished turn's blocks are freed (a new block may get an old id).
        self._widgets_of: dict[int, tuple[Block, Widget]] = {}
        self._opened = asyncio.Event()
        self._leaving = asyncio.Event()
        self._holder: asyncio.Task[None] | None = None
        self._open_error: BaseException | None = None

    # -- layout and lifecycle ------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        yield VerticalScroll(id="log")
        yield Static("starting…", id="status")
        yield PromptArea(id="prompt", soft_wrap=True, show_line_numbers=False)
        yield Footer()

    def on_mount(self) -> None:
        # The store is entered and left in one task of its own (anyio needs that).
        self._holder = asyncio.create_task(self._hold_sessions())
        self.query_one(PromptArea).focus()

    async def _on_opened(self) -> None:
        if self._open_error is not None:
            self._set_status(f"could not open the session: {self._open_error}")
            return
        await self._show_history()
        self._set_status(READY)

    async def on_unmount(self) -> None:
        self._leaving.set()
        if self._holder is not None:
            await self._holder

    async def _hold_sessions(self) -> None:
        try:
            async with self.served:
                session = await self.sessions.open_session(self.session_id)
                if not session.history and self.initial_history:
                    session.history = list(self.initial_history)
                self._opened.set()
                self.call_later(self._on_opened)
                await self._leaving.wait()
        except Exception as exc:  # boundary: shown in the status line
            self._open_error = exc
            if not self._opened.is_set():
                self.call_later(self._on_opened)
        finally:
            self._opened.set()

    # -- input -----------------------------------------------------------------------------

    async def on_prompt_area_submitted(self, message: PromptArea.Submitted) -> None:
        text = message.text.strip()
        if not text:
            return
        if text.lower() in QUIT_COMMANDS:
            self.exit()
            return
        pending = self.view.pending_input() if self.view is not None else None
        if pending is not None and self.busy:
            await self._answer(pending, message.text)
            return
        if self.busy:
            self._set_status("a turn is running: Esc aborts it")
            return
        if self._open_error is not None:
            return
        self.busy = True
        await self._mount(Static(text, classes="user", markup=False))
        self.run_worker(self._turn(text), exclusive=True, group="turn")

    async def _answer(self, card: ToolRenderSnapshot, value: str) -> None:
        if card.approval_request is not None:
            await self._decide(card, value)
            return
        assert card.input_request is not None
        request_id = card.input_request[0]
        session = self.sessions.get(self.session_id)
        try:
            if session.repl is not None:
                self.sessions.submit_input(self.session_id, request_id, value)
                taken = True
            else:
                taken = submit_kernel_input(request_id, value)
        except InputRefusedError as exc:
            taken, card.output = False, card.output + f"({exc})\n"
        if taken:
            card.output += f"{card.input_request[1]}{value}\n"
            card.status = "running"
        card.input_request = None
        await self._show(card)

    async def _decide(self, card: ToolRenderSnapshot, text: str) -> None:
        """Answer the card's approval request with what was typed (see ``typed_decision``)."""
        assert card.approval_request is not None
        try:
            self.sessions.answer(self.session_id, card.approval_request[0], typed_decision(text))
        except AnswerRefusedError as exc:
            card.output += f"({exc})\n"
            await self._show(card)

    def action_abort(self) -> None:
        """Abort the running turn (the history stays valid)."""
        if self.busy and self.sessions.abort(self.session_id, "aborted by the user (Esc)"):
            self._set_status("aborting…")

    # -- turns -----------------------------------------------------------------------------

    async def _turn(self, text: str) -> None:
        view = self.view = TurnView(self.hooks)
        self._set_status("thinking… (Esc aborts)")
        try:
            async for item in self.served.turn(TurnRequest(text, self.session_id)):
                block = view.apply(item)
                if block is not None:
                    await self._show(block)
        except SimpleLLMFuncError as exc:
            view.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.busy = False
        self.turns += 1
        self._set_status(self._summary(view))

    def _summary(self, view: TurnView) -> str:
        parts = [f"turn {self.turns}"]
        if view.usage is not None:
            parts.append(format_usage(view.usage, self.prices))
        if view.duration_s is not None:
            parts.append(f"{view.duration_s:.1f} s")
        if view.aborted:
            parts.append("aborted")
        if view.error:
            parts.append(f"error: {view.error}")
        return " · ".join(parts)

    async def _show(self, block: Block) -> None:
        known = self._widgets_of.get(id(block))
        widget = known[1] if known is not None and known[0] is block else None
        if isinstance(block, ReplyBlock):
            if widget is None:
                widget = ReplyView(block)
                self._widgets_of[id(block)] = (block, widget)
                await self._mount(widget)
            assert isinstance(widget, ReplyView)
            await widget.show(block)
        else:
            if widget is None:
                widget = ToolCard(block, self.images)
                self._widgets_of[id(block)] = (block, widget)
                await self._mount(widget)
            assert isinstance(widget, ToolCard)
            widget.show(block)
            if block.input_request is not None:
                self._set_status(f"input() asks: {block.input_request[1]!r}: type the answer")
            elif block.approval_request is not None:
                self._set_status(f"{block.tool_name} needs approval: {APPROVAL_HELP}")
        self.query_one("#log", VerticalScroll).scroll_end(animate=False)

    async def _mount(self, widget: Widget) -> None:
        log = self.query_one("#log", VerticalScroll)
        await log.mount(widget)
        log.scroll_end(animate=False)

    async def _show_history(self) -> None:
        history = self.sessions.get(self.session_id).history
        previous: Any = None
        for message in history:
            role, content = message.get("role"), message.get("content")
            text = content if isinstance(content, str) else ""
            after, previous = previous, role
            if role == "user" and after == "tool":
                previous = "tool"  # a tool result's images, not something the user said
            elif role == "user" and text:
                await self._mount(Static(text, classes="user", markup=False))
            elif role == "assistant":
                if text:
                    await self._mount(ReplyView(ReplyBlock(text=text, done=True)))
                for call in message.get("tool_calls") or ():
                    name = call.get("function", {}).get("name", "?")
                    await self._mount(Static(f"⚙ {name}", classes="hint", markup=False))
        if history:
            await self._mount(Static(f"(resumed: {len(history)} messages)", classes="hint"))

    def _set_status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)
