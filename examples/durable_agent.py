"""A durable agent: each run is a DBOS workflow, each LLM call and tool call a recorded step.

The run's steps are recorded in a SQLite file; after a "restart" (the runtime shut down and
launched again on the same file) the finished run's result is read back, and nothing is called
again. A process killed mid-run would resume it from its last recorded step on launch (see
docs/durable.md). Needs the [durable] extra.
"""

import tempfile
from pathlib import Path

import anyio

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.runtime.durable import DurableAgent, DurableConfig, DurableRuntime
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec


@tool(idempotent=False)  # a crash during a charge must not charge twice
async def charge(order: str, amount: int) -> str:
    """Charge the customer for an order."""
    return f"charged {amount} EUR for {order}"


async def main() -> None:
    folder = Path(tempfile.mkdtemp())
    config = DurableConfig(path=str(folder / "durable.sqlite"))
    async with MockLLMServer() as server, OpenAICompatible("sk-demo", "mock", server.url) as llm:
        server.script(
            Reply.tool_calls(ToolCallSpec("charge", {"order": "order-42", "amount": 30})),
            Reply.text("Order 42 is paid: 30 EUR."),
        )

        @llm_chat(llm, toolkit=[charge])
        async def cashier(message: str, history: list | None = None):
            """You take payments. Use the tools."""

        agent = DurableAgent(cashier, name="cashier")  # before the runtime launches
        async with DurableRuntime(config):
            result = await agent.run("Charge order 42: 30 EUR.", history=[], workflow_id="order-42")
        print(f"answer: {result.text}")
        print(f"steps run: {result.executed_steps}, replayed: {result.replayed_steps}")
        print(f"model requests: {len(server.requests)}")

        async with DurableRuntime(config) as runtime:  # a new process would do the same
            again = await runtime.result("order-42")
        print(f"after a restart: {again.text!r}, model requests still {len(server.requests)}")


if __name__ == "__main__":
    anyio.run(main)
