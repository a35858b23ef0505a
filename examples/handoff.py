"""Handoff: the triage agent transfers the conversation to billing, which answers with a valid
history (its own system prompt first); the result says who answered."""

from _model import note_if, pick_model, run

from simplellmfunc import llm_chat
from simplellmfunc.runtime.multiagent import Handoff
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec

triage_llm = pick_model(
    ScriptedLLM.response(
        tool_calls=[ToolCallSpec("transfer_to_billing", {"reason": "a double charge"})]
    )
)
billing_llm = pick_model("I have refunded the second charge; it shows within 3 days.")


@llm_chat(triage_llm)
async def triage(message: str, history: list | None = None):
    """You route customers: billing questions go to billing."""


@llm_chat(billing_llm)
async def billing(message: str, history: list | None = None):
    """You handle billing: refunds, invoices, charges."""


async def main() -> None:
    team = Handoff(triage, {triage: [billing], billing: [triage]}, max_handoffs=3)
    result = await team.run("I was charged twice this month.")
    print("path:", " -> ".join(result.path))
    print(f"{result.agent} answered: {result.text}")
    print("history roles:", [m["role"] for m in result.history])
    note_if(result.agent != "billing", "triage answered itself instead of handing off to billing")


if __name__ == "__main__":
    run(main)
