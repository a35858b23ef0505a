"""A group chat: a writer and a critic take turns (round-robin) until the critic approves."""

from _model import note_if, pick_model, run

from simplellmfunc import llm_chat
from simplellmfunc.runtime.multiagent import GroupChat

writer_llm = pick_model(
    "Slogan: 'Fresh bread, every hour.'", "Slogan: 'Baked this hour, gone the next.'"
)
critic_llm = pick_model("Too plain; make it urgent.", "Good. APPROVED")


@llm_chat(writer_llm)
async def writer(message: str, history: list | None = None):
    """You write slogans for a bakery. Reply with one slogan."""


@llm_chat(critic_llm)
async def critic(message: str, history: list | None = None):
    """You review slogans. Say APPROVED when one is good, else how to improve it."""


async def main() -> None:
    chat = GroupChat([writer, critic], max_rounds=6, stop_keywords=["APPROVED"])
    result = await chat.run("A slogan for our bakery, please.")
    for message in result.messages:
        print(f"{message.speaker:>6}: {message.text}")
    print(f"({result.rounds} rounds, ended by {result.terminated_by})")
    note_if("APPROVED" not in result.messages[-1].text, "the critic never said APPROVED")


if __name__ == "__main__":
    run(main)
