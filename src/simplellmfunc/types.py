"""Content parts, messages and context mutations: the types user code handles."""

from ._content import ContentPart, ImgPath, ImgUrl, Text
from ._lazy import publish
from ._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    history_from_dicts,
    history_to_dicts,
    message_from_dict,
    message_to_dict,
    validate_history,
)
from ._mutations import (
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
)
from ._transcript import Experience, Transcript
from ._usage import Usage

__all__ = [
    "AssistantMessage",
    "AssistantMessageMutation",
    "AssistantTruncatedMutation",
    "ContentPart",
    "ContextMutation",
    "ContextReplaceMutation",
    "ContextSummaryMutation",
    "Experience",
    "ExperienceForgetMutation",
    "ExperienceRememberMutation",
    "ImgPath",
    "ImgUrl",
    "Message",
    "MultimodalToolResultMutation",
    "SystemMessage",
    "Text",
    "ToolCall",
    "ToolCancelledMutation",
    "ToolMessage",
    "ToolResultMutation",
    "Transcript",
    "Usage",
    "UserMessage",
    "UserMessageMutation",
    "history_from_dicts",
    "history_to_dicts",
    "message_from_dict",
    "message_to_dict",
    "validate_history",
]

publish(
    __name__,
    __all__,
    claims=(
        "simplellmfunc._content",
        "simplellmfunc._messages",
        "simplellmfunc._mutations",
        "simplellmfunc._transcript",
        "simplellmfunc._usage",
    ),
)
