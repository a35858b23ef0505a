"""An agent from a config file: examples/agents/react.yml (a calculator with a shell tool),
checked offline the way `simplellmfunc validate` does it, then run once by run_config.

    .venv/bin/python examples/config_agent.py
    .venv/bin/simplellmfunc run examples/agents/react.yml "What is 17 * 3?" --trace   # the same

The config names deepseek:deepseek-chat; it runs when DEEPSEEK_API_KEY is set (environment or
.env), or on the model EXAMPLE_MODEL names. Otherwise the config runs unchanged against a mock
server on 127.0.0.1 that plays the model (DEEPSEEK_BASE_URL points the preset at it).
"""

import os
from pathlib import Path

from _model import real_model, run

from simplellmfunc.providers import env_settings
from simplellmfunc.runtime import load_agent_config, run_config
from simplellmfunc.runtime.config import check_config
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec

CONFIG = Path(__file__).resolve().parent / "agents" / "react.yml"
QUESTION = "What is 17 * 3?"


def mock_model(request: RecordedRequest) -> Reply:
    """The mock server's model: one calc call, then the answer from its result."""
    last = request.json["messages"][-1]
    if last["role"] != "tool":
        return Reply.tool_calls(ToolCallSpec("calc", {"a": "17", "op": "*", "b": "3"}))
    return Reply.text(f"Final answer: 17 * 3 = {last['content'].strip()}")


async def main() -> None:
    env = env_settings()
    if env.get("EXAMPLE_MODEL"):
        real_model(env["EXAMPLE_MODEL"])
    elif env.get("DEEPSEEK_API_KEY"):
        real_model("deepseek-chat")
    print(f"checking {CONFIG.name} offline:")
    for finding in await check_config(load_agent_config(CONFIG)):
        print(f"  {finding}")

    if env.get("EXAMPLE_MODEL"):
        result = await run_config(CONFIG, QUESTION, model=env["EXAMPLE_MODEL"])
    elif env.get("DEEPSEEK_API_KEY"):
        result = await run_config(CONFIG, QUESTION)
    else:
        print("(no model configured: a mock server on 127.0.0.1 plays deepseek-chat)")
        async with MockLLMServer(default=mock_model) as server:
            mock = {"DEEPSEEK_API_KEY": "sk-mock", "DEEPSEEK_BASE_URL": server.url}
            result = await run_config(CONFIG, QUESTION, environ={**os.environ, **mock})

    print(f"\n{QUESTION}\n{result.result}\n")
    print(result.timeline())


if __name__ == "__main__":
    run(main)
