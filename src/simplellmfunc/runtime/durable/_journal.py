"""The steps a durable run recorded before this attempt, read once if the attempt resumes.

A workflow executed again (resumed after a crash, taken over from a dead worker, forked) gets
each recorded step's result back from DBOS when it runs that step again; what the runner needs
besides is *which* steps were recorded: which step was the last one (the resume note goes
before the first LLM call after it). The runner reads it when the attempt's first step was
replayed (a fresh run never reads it): one query through DBOS's
public ``DBOS.list_workflow_steps``, run where DBOS sees no workflow context (so that the query
is not itself recorded as a step of the run).
"""

from __future__ import annotations

import asyncio

from dbos import DBOS

__all__ = ["recorded_steps"]


async def recorded_steps(workflow_id: str) -> dict[int, str]:
    """The recorded steps of ``workflow_id``: their step ids and names."""

    def read() -> dict[int, str]:
        steps = DBOS.list_workflow_steps(workflow_id, load_output=False)
        return {int(step["function_id"]): str(step["function_name"]) for step in steps}

    # run_in_executor does not copy context variables: DBOS sees no workflow there.
    return await asyncio.get_running_loop().run_in_executor(None, read)
