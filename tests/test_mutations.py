"""ContextMutation types and the Transcript that applies them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simplellmfunc._content import ImgUrl, Text
from simplellmfunc._messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    history_from_dicts,
    validate_history,
)
from simplellmfunc._mutations import (
    PHASE_ORDER,
    AssistantMessageMutation,
    AssistantTruncatedMutation,
    ContextMutation,
    ContextReplaceMutation,
    ContextSummaryMutation,
    ExperienceForgetMutation,
    ExperienceRememberMutation,
    MultimodalToolResultMutation,
    ToolCancelledMutation,
    ToolResultMutation,
    UserMessageMutation,
    phase_of,
)
from simplellmfunc._transcript import (
    Experience,
    Transcript,
    TranscriptSnapshot,
    render_experiences,
)
from simplellmfunc.exceptions import InvalidHistoryError

PNG = "data:image/png;base64,iVBORw0KGgo="
SYSTEM = SystemMessage("You are helpful.")
HI = UserMessage("hi")


def call(call_id: str, name: str = "look", arguments: str = "{}") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def image_user(label: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": f"result of {label}"},
            {"type": "image_url", "image_url": {"url": PNG, "detail": "auto"}},
        ],
    }


def multimodal(call_id: str, name: str = "look") -> MultimodalToolResultMutation:
    return MultimodalToolResultMutation(call_id, name, "{}", [image_user(call_id)])


def with_calls(*ids: str) -> Transcript:
    t = Transcript([SYSTEM, HI])
    t.apply(AssistantMessageMutation(content=None, tool_calls=[call(i) for i in ids]))
    return t


def assert_valid(t: Transcript) -> None:
    validate_history(t.messages)
    assert history_from_dicts(t.to_dicts()) == t.messages
    for message in t.messages:
        if not isinstance(message, UserMessage):
            content = getattr(message, "content", None)
            assert content is None or isinstance(content, str), "images only in user messages"


# -- the mutation types ------------------------------------------------------------------------


def test_mutations_construct_like_the_seed() -> None:
    a = AssistantMessageMutation()
    assert (a.role, a.content, a.tool_calls, a.reasoning_details) == ("assistant", None, (), ())
    assert [f.name for f in dataclasses.fields(AssistantMessageMutation)] == [
        "role",
        "content",
        "tool_calls",
        "reasoning_details",
    ]
    r = ToolResultMutation(tool_call_id="c1", content="x")
    assert r.role == "tool"
    s = ContextSummaryMutation(summary_message={"role": "user", "content": "s"})
    assert s.remember == ()
    s = ContextSummaryMutation(summary_message={"role": "user"}, remember=[{"text": "t"}])
    assert s.remember == ({"text": "t"},)
    assert AssistantTruncatedMutation("part").abort_reason == ""
    assert ToolCancelledMutation("c1", "look").abort_reason == ""
    assert ContextReplaceMutation(messages=[]).messages == ()
    assert UserMessageMutation(message={"role": "user", "content": "x"}).message["content"] == "x"
    assert ExperienceRememberMutation(text="t").text == "t"
    assert ExperienceForgetMutation(experience_id="exp_1").experience_id == "exp_1"
    assert multimodal("c1").user_messages == (image_user("c1"),)


def test_mutations_are_frozen_and_lists_become_tuples() -> None:
    a = AssistantMessageMutation(tool_calls=[call("c1")])
    assert a == AssistantMessageMutation(tool_calls=(call("c1"),))
    assert AssistantMessageMutation(tool_calls=[]) == AssistantMessageMutation()
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.content = "x"  # type: ignore[misc]
    assert not hasattr(a, "__dict__")


def test_phase_of_every_mutation() -> None:
    cases: list[tuple[ContextMutation, str]] = [
        (UserMessageMutation({"role": "user", "content": "x"}), "hook"),
        (ContextReplaceMutation([]), "hook"),
        (ContextSummaryMutation({"role": "user", "content": "x"}), "hook"),
        (AssistantMessageMutation(), "llm"),
        (ToolResultMutation("c", "x"), "tool"),
        (multimodal("c"), "tool"),
        (ExperienceRememberMutation("t"), "tool"),
        (ExperienceForgetMutation("exp_1"), "tool"),
        (AssistantTruncatedMutation(""), "abort"),
        (ToolCancelledMutation("c", "n"), "abort"),
    ]
    for mutation, phase in cases:
        assert phase_of(mutation) == phase
    assert PHASE_ORDER == ("hook", "llm", "tool", "abort")
    with pytest.raises(InvalidHistoryError):
        phase_of("not a mutation")  # type: ignore[arg-type]


# -- applying each mutation -------------------------------------------------------------------


def test_assistant_message_with_calls_and_reasoning() -> None:
    t = Transcript([HI])
    reasoning = [{"type": "reasoning.text", "text": "think"}]
    t.apply(
        AssistantMessageMutation(content="ok", tool_calls=[call("c1")], reasoning_details=reasoning)
    )
    last = t.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.tool_calls == (ToolCall("c1", "look", "{}"),)
    assert last.reasoning_details == ({"type": "reasoning.text", "text": "think"},)
    assert t.pending_tool_calls == (ToolCall("c1", "look", "{}"),)
    assert t.apply(ToolResultMutation("c1", "done")) is True
    assert t.messages[-1] == ToolMessage("c1", "done")
    assert not t.pending_tool_calls
    assert_valid(t)


def test_user_message_mutation_defaults_role_to_user() -> None:
    t = Transcript([SYSTEM])
    t.apply(UserMessageMutation({"content": "typed later"}))
    t.apply(UserMessageMutation(image_user("photo")))
    assert t.messages[1] == UserMessage("typed later")
    assert t.messages[2].content == (Text("result of photo"), ImgUrl(PNG))
    assert_valid(t)


def test_context_replace() -> None:
    t = with_calls("c1")
    t.apply(ToolResultMutation("c1", "x"))
    t.apply(
        ContextReplaceMutation(
            [{"role": "system", "content": "new"}, {"role": "user", "content": "u"}]
        )
    )
    assert t.messages == (SystemMessage("new"), UserMessage("u"))
    # Ids of the discarded transcript may be used again.
    t.apply(AssistantMessageMutation(tool_calls=[call("c1")]))
    t.apply(ToolResultMutation("c1", "y"))
    assert_valid(t)


def test_context_replace_drops_an_open_batch() -> None:
    t = with_calls("a", "b")
    t.apply(multimodal("a"))
    t.apply(ContextReplaceMutation([{"role": "user", "content": "fresh"}]))
    assert t.messages == (UserMessage("fresh"),)
    assert t.pending_tool_calls == ()


def test_summary_keeps_the_system_prompt() -> None:
    t = with_calls("c1")
    t.apply(ToolResultMutation("c1", "x"))
    t.apply(
        ContextSummaryMutation(
            summary_message={"role": "assistant", "content": "Summary: we looked."},
            remember=[{"text": "keep this"}],
        )
    )
    assert t.messages == (SYSTEM, AssistantMessage("Summary: we looked."))
    assert t.experiences == (Experience("exp_1", "keep this"),)
    assert_valid(t)


def test_summary_without_system_prompt_accepts_a_user_message() -> None:
    t = Transcript([HI, AssistantMessage("hello")])
    t.apply(ContextSummaryMutation({"role": "user", "content": "Summary so far."}))
    assert t.messages == (UserMessage("Summary so far."),)


def test_truncated_assistant_message() -> None:
    t = Transcript([HI])
    t.apply(AssistantTruncatedMutation("Hel", abort_reason="user stop"))
    last = t.messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.content == "Hel"
    assert dict(last.extra) == {"truncated": True, "abort_reason": "user stop"}
    t.apply(UserMessageMutation({"role": "user", "content": "again"}))
    t.apply(AssistantTruncatedMutation(""))
    assert t.messages[-1].content == ""
    assert_valid(t)


def test_abort_mutations_make_pending_calls_valid() -> None:
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call("a"), call("b", "run")]},
        {"role": "tool", "tool_call_id": "a", "content": "ok"},
    ]
    t = Transcript.from_dicts(history)
    with pytest.raises(InvalidHistoryError):
        validate_history(t.messages)
    assert [c.id for c in t.pending_tool_calls] == ["b"]
    t.apply(ToolCancelledMutation("b", "run", abort_reason="timeout"))
    assert_valid(t)
    last = t.messages[-1]
    assert isinstance(last, ToolMessage)
    assert last.content == "Tool `run` was cancelled before it finished: timeout"
    assert dict(last.extra) == {"cancelled": True, "abort_reason": "timeout"}
    t2 = with_calls("x")
    t2.apply(ToolCancelledMutation("x", "look"))
    assert t2.messages[-1].content == "Tool `look` was cancelled before it finished."


# -- multimodal restructuring -----------------------------------------------------------------


def test_two_multimodal_results_and_a_plain_one_in_one_batch() -> None:
    t = with_calls("a", "b", "c")
    t.apply(multimodal("a", "screenshot"))
    mid = t.messages
    # Mid-batch the held-back image message is visible at the end, never between results.
    assert isinstance(mid[-1], UserMessage)
    validate_history(mid, allow_pending_calls=True)
    t.apply(ToolResultMutation("b", "plain"))
    t.apply(multimodal("c", "camera"))
    kinds = [(m.role, getattr(m, "tool_call_id", None)) for m in t.messages]
    assert kinds == [
        ("system", None),
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("tool", "b"),
        ("tool", "c"),
        ("user", None),
        ("user", None),
    ]
    assert t.messages[3].content == (
        "Tool `screenshot` returned multimodal content (images); "
        "it is attached in the next user message."
    )
    assert [m.text for m in t.messages[6:] if isinstance(m, UserMessage)] == [
        "result of a",
        "result of c",
    ]
    assert_valid(t)
    t.apply(AssistantMessageMutation(content="I see two images."))
    assert_valid(t)


def test_a_cancelled_call_completes_a_multimodal_batch() -> None:
    t = with_calls("a", "b")
    t.apply(multimodal("a"))
    t.apply(ToolCancelledMutation("b", "look", "stop"))
    assert [m.role for m in t.messages[-3:]] == ["tool", "tool", "user"]
    assert_valid(t)


def test_multimodal_result_from_a_lone_call_is_followed_by_its_images() -> None:
    t = with_calls("a")
    t.apply(multimodal("a"))
    assert [m.role for m in t.messages[-2:]] == ["tool", "user"]
    assert_valid(t)


# -- experiences ------------------------------------------------------------------------------


def test_remember_and_forget() -> None:
    t = Transcript()
    assert t.apply(ExperienceRememberMutation("one")) is True
    assert t.apply(ExperienceRememberMutation("two")) is True
    assert t.apply(ExperienceForgetMutation("exp_1")) is True
    assert t.experiences == (Experience("exp_2", "two"),)
    assert t.apply(ExperienceForgetMutation("exp_1")) is False
    assert t.apply(ExperienceForgetMutation("nope")) is False
    assert t.experiences == (Experience("exp_2", "two"),)


def test_remember_then_forget_in_one_batch() -> None:
    t = Transcript()
    t.apply(ExperienceRememberMutation("brief"))
    assert t.apply(ExperienceForgetMutation("exp_1")) is True
    assert t.experiences == ()


def test_experiences_commit_before_the_next_non_experience_mutation() -> None:
    t = Transcript([SYSTEM, HI])
    t.apply(ExperienceRememberMutation("before summary"))
    assert t.next_experience_id == "exp_2"
    t.apply(
        ContextSummaryMutation(
            {"role": "assistant", "content": "sum"}, remember=[{"text": "from summary"}]
        )
    )
    assert t.experiences == (
        Experience("exp_1", "before summary"),
        Experience("exp_2", "from summary"),
    )


def test_experience_edits_interleave_with_tool_results() -> None:
    t = with_calls("a", "b")
    t.apply(ToolResultMutation("a", "x"))
    t.apply(ExperienceRememberMutation("learned"))
    t.apply(ToolResultMutation("b", "y"))
    t.apply(ExperienceForgetMutation("exp_1"))
    t.apply(ExperienceRememberMutation("kept"))
    assert_valid(t)
    assert t.experiences == (Experience("exp_2", "kept"),)


def test_a_failed_mutation_keeps_queued_experiences_queued() -> None:
    t = Transcript([HI])
    t.apply(ExperienceRememberMutation("fact"))
    with pytest.raises(InvalidHistoryError):
        t.apply(ToolResultMutation("ghost", "x"))
    assert t.experiences == (Experience("exp_1", "fact"),)


def test_experience_ids_never_collide_after_rebinding() -> None:
    persisted = [
        {"id": "exp_3", "text": "a"},
        {"id": "exp_10", "text": "b"},
        {"id": "note", "text": "c"},
    ]
    t = Transcript(experiences=persisted)
    assert t.next_experience_id == "exp_11"
    t.apply(ExperienceRememberMutation("d"))
    t.apply(ExperienceForgetMutation("exp_11"))
    t.apply(ExperienceRememberMutation("e"))
    assert [e.id for e in t.experiences] == ["exp_3", "exp_10", "note", "exp_12"]
    rebound = Transcript(t.messages, t.experiences)
    rebound.apply(ExperienceRememberMutation("f"))
    ids = [e.id for e in rebound.experiences]
    assert ids[-1] == "exp_13"
    assert len(set(ids)) == len(ids)
    assert rebound.experiences[0].to_dict() == {"id": "exp_3", "text": "a"}


def test_duplicate_or_malformed_persisted_experiences_are_rejected() -> None:
    with pytest.raises(InvalidHistoryError, match="duplicate"):
        Transcript(experiences=[Experience("exp_1", "a"), {"id": "exp_1", "text": "b"}])
    with pytest.raises(InvalidHistoryError):
        Transcript(experiences=[{"id": 1, "text": "a"}])


def test_render_experiences() -> None:
    assert render_experiences(()) == ""
    rendered = render_experiences(
        [Experience("exp_1", "metric units"), Experience("exp_2", "a\nb")]
    )
    assert rendered == "## Experiences\n- [exp_1] metric units\n- [exp_2] a\n  b"


# -- rejection leaves the transcript unchanged ------------------------------------------------

INVALID_WHILE_PENDING: list[ContextMutation] = [
    ToolResultMutation("ghost", "x"),
    ToolCancelledMutation("ghost", "look"),
    multimodal("ghost"),
    AssistantMessageMutation(content="too early"),
    AssistantTruncatedMutation("part"),
    UserMessageMutation({"role": "user", "content": "between results"}),
    MultimodalToolResultMutation("b", "look", "{}", []),
    MultimodalToolResultMutation("b", "look", "{}", [{"role": "assistant", "content": "x"}]),
    ToolResultMutation("b", 3),  # type: ignore[arg-type]
    ContextReplaceMutation([{"role": "assistant", "tool_calls": [call("z")]}]),
    ContextSummaryMutation({"role": "tool", "tool_call_id": "b", "content": "x"}),
    ContextSummaryMutation({"role": "assistant", "tool_calls": [call("z")]}),
    ContextSummaryMutation({"role": "user", "content": "s"}, remember=[{"text": 1}]),  # type: ignore[dict-item]
    ExperienceRememberMutation(42),  # type: ignore[arg-type]
]


@pytest.mark.parametrize("mutation", INVALID_WHILE_PENDING, ids=lambda m: type(m).__name__)
def test_invalid_mutations_are_rejected_and_change_nothing(mutation: ContextMutation) -> None:
    t = with_calls("a", "b")
    t.apply(multimodal("a"))
    t.apply(ExperienceRememberMutation("queued"))
    before = (t.messages, t.to_dicts(), t.pending_tool_calls, t.next_experience_id)
    with pytest.raises(InvalidHistoryError):
        t.apply(mutation)
    assert (t.messages, t.to_dicts(), t.pending_tool_calls, t.next_experience_id) == before
    t.apply(ToolResultMutation("b", "fine"))
    assert_valid(t)


def test_duplicate_results_and_reused_call_ids_are_rejected() -> None:
    t = with_calls("a")
    t.apply(ToolResultMutation("a", "x"))
    before = t.messages
    with pytest.raises(InvalidHistoryError, match="already has a result"):
        t.apply(ToolResultMutation("a", "again"))
    with pytest.raises(InvalidHistoryError, match="already used"):
        t.apply(AssistantMessageMutation(tool_calls=[call("a")]))
    with pytest.raises(InvalidHistoryError, match="repeats"):
        t.apply(AssistantMessageMutation(tool_calls=[call("z"), call("z")]))
    with pytest.raises(InvalidHistoryError):
        t.apply(AssistantMessageMutation(tool_calls=[{"id": "q"}]))
    with pytest.raises(InvalidHistoryError):
        t.apply(AssistantMessageMutation(role="user"))  # type: ignore[arg-type]
    with pytest.raises(InvalidHistoryError, match="not a ContextMutation"):
        t.apply("append this")  # type: ignore[arg-type]
    assert t.messages is before


def test_append_reply_is_applying_the_assistant_mutation() -> None:
    # The engine's path for the model's reply: the same message and the same refusals as an
    # AssistantMessageMutation of it, without the chat-dict round trip.
    reasoning = ({"type": "reasoning.text", "text": "think"},)
    reply = AssistantMessage("ok", (ToolCall("c1", "look", "{}"),), reasoning, {"x": 1})
    direct, applied = Transcript([HI]), Transcript([HI])
    direct.append_reply(reply)
    applied.apply(
        AssistantMessageMutation(content="ok", tool_calls=[call("c1")], reasoning_details=reasoning)
    )
    assert direct.messages == applied.messages
    assert direct.messages[-1].extra == {}  # as the mutation carries none
    assert direct.pending_tool_calls == applied.pending_tool_calls
    before = direct.messages
    with pytest.raises(InvalidHistoryError, match="has no result"):
        direct.append_reply(AssistantMessage("again"))
    direct.apply(ToolResultMutation("c1", "done"))
    with pytest.raises(InvalidHistoryError, match="already used"):
        direct.append_reply(AssistantMessage(None, (ToolCall("c1", "look", "{}"),)))
    twice = (ToolCall("z", "look", "{}"), ToolCall("z", "look", "{}"))
    with pytest.raises(InvalidHistoryError, match="repeats"):
        direct.append_reply(AssistantMessage(None, twice))
    assert direct.messages[:-1] == before
    assert_valid(direct)


def test_starting_history_must_be_valid() -> None:
    with pytest.raises(InvalidHistoryError, match="has no result"):
        Transcript([HI, AssistantMessage(None, (ToolCall("a", "f"),)), UserMessage("next")])
    with pytest.raises(InvalidHistoryError, match=r"history\[1\]"):
        Transcript.from_dicts([{"role": "user", "content": "x"}, {"role": "robot"}])
    with pytest.raises(InvalidHistoryError):
        Transcript([HI, ToolMessage("a", "orphan")])


def test_apply_all_applies_in_order() -> None:
    t = Transcript([HI])
    results = t.apply_all(
        [
            AssistantMessageMutation(tool_calls=[call("a")]),
            ToolResultMutation("a", "x"),
            ExperienceForgetMutation("exp_9"),
            AssistantMessageMutation(content="done"),
        ]
    )
    assert results == (True, True, False, True)
    assert_valid(t)


# -- views, snapshots, caching ----------------------------------------------------------------


def test_snapshot_is_immutable_and_views_are_cached() -> None:
    t = with_calls("a")
    t.apply(ExperienceRememberMutation("x"))
    snap = t.snapshot()
    assert isinstance(snap, TranscriptSnapshot)
    assert t.messages is t.messages
    assert t.experiences is t.experiences
    t.apply(ToolResultMutation("a", "y"))
    t.apply(ExperienceRememberMutation("z"))
    assert len(snap.messages) == 3
    assert snap.experiences == (Experience("exp_1", "x"),)
    assert snap.to_dicts()[-1]["tool_calls"] == [call("a")]
    assert len(t.messages) == 4
    assert "experiences=2" in repr(t)


def test_round_trip_through_dicts_keeps_metadata() -> None:
    t = with_calls("a", "b")
    t.apply(multimodal("a"))
    t.apply(ToolCancelledMutation("b", "look", "stop"))
    t.apply(AssistantTruncatedMutation("partial", "stop"))
    again = Transcript.from_dicts(t.to_dicts(), t.experiences)
    assert again.messages == t.messages
    assert again.to_dicts() == t.to_dicts()


# -- property: any order of results keeps the history valid -----------------------------------

RESULT_KINDS = st.sampled_from(["plain", "multimodal", "cancelled"])


@given(
    batches=st.lists(
        st.lists(RESULT_KINDS, min_size=0, max_size=4).flatmap(
            lambda kinds: st.permutations(list(enumerate(kinds)))
        ),
        min_size=1,
        max_size=4,
    )
)
def test_any_batch_of_results_keeps_the_transcript_valid(
    batches: list[list[tuple[int, str]]],
) -> None:
    t = Transcript([SYSTEM, HI])
    for turn, batch in enumerate(batches):
        ids = [f"t{turn}c{i}" for i in range(len(batch))]
        t.apply(AssistantMessageMutation(content=f"turn {turn}", tool_calls=[call(i) for i in ids]))
        for index, kind in batch:
            call_id = ids[index]
            if kind == "plain":
                t.apply(ToolResultMutation(call_id, "ok"))
            elif kind == "multimodal":
                t.apply(multimodal(call_id))
            else:
                t.apply(ToolCancelledMutation(call_id, "look"))
            validate_history(t.messages, allow_pending_calls=True)
        assert t.pending_tool_calls == ()
        assert_valid(t)
        images = sum(kind == "multimodal" for _, kind in batch)
        tail = t.messages[len(t.messages) - images :] if images else ()
        assert all(isinstance(m, UserMessage) for m in tail)
