"""Evaluate the README's `review` function over a small dataset, record it, replay it.

    python examples/evaluate_review.py [--out DIR]

With no model configured, the mock LLM server plays the model (a keyword classifier that gets
one review wrong on purpose). Name a model in `.env` or the environment to evaluate it instead
(`EXAMPLE_MODEL=deepseek:deepseek-chat`, or `OPENAI_MODEL` with `OPENAI_API_KEY` and
`OPENAI_BASE_URL`, e.g. the local llama.cpp server of `make test-live`).

The evaluation runs under a cassette: the first run records every exchange with the model,
the second replays them with no model at all and gets the same report. The report is printed
as a table and written as JSON and as a self-contained HTML page.
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
from pathlib import Path
from typing import Literal

from _model import configured_model, note_if, run
from pydantic import BaseModel

from simplellmfunc import LLMInterface, OpenAICompatible, llm_function
from simplellmfunc.evals import Budget, Case, Dataset, MatchesSchema, Predicate, Report, evaluate
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, use_cassette


class Review(BaseModel):
    sentiment: Literal["positive", "negative", "mixed"]
    score: int


REVIEWS = [
    ("great-value", "Great value, works perfectly, I love it.", "positive", (4, 5)),
    ("broke", "Terrible: it broke after a day and support never answered.", "negative", (1, 2)),
    ("mixed", "Great value, but it broke after a week.", "mixed", (2, 4)),
    ("slow", "Slow delivery, but the product itself is excellent.", "mixed", (3, 4)),
    ("refund", "Awful quality. I want a refund.", "negative", (1, 2)),
    ("gift", "Bought it as a gift, she loves it!", "positive", (4, 5)),
    ("sarcasm", "Oh great, another charger that lasts a whole hour.", "negative", (1, 2)),
    ("fine", "It does the job. Nothing special, nothing wrong.", "mixed", (3, 3)),
]

DATASET = Dataset(
    [
        Case(name, {"text": text}, metadata={"sentiment": sentiment, "scores": scores})
        for name, text, sentiment, scores in REVIEWS
    ],
    evaluators=[
        MatchesSchema(Review),
        Predicate(lambda out, case: out.sentiment == case.metadata["sentiment"], "sentiment"),
        Predicate(
            lambda out, case: case.metadata["scores"][0] <= out.score <= case.metadata["scores"][1],
            "score_in_range",
        ),
        Budget(max_seconds=60, max_tokens=4000),
    ],
    name="reviews",
)


def keyword_model(request: RecordedRequest) -> Reply:
    """The mock model: a keyword classifier (sarcasm fools it)."""
    text = request.json["messages"][-1]["content"].lower()
    good = sum(w in text for w in ("great", "love", "excellent", "perfectly"))
    bad = sum(w in text for w in ("broke", "terrible", "awful", "refund", "slow"))
    if good and bad:
        sentiment, score = "mixed", 3
    elif good:
        sentiment, score = "positive", 5
    elif bad:
        sentiment, score = "negative", 1
    else:
        sentiment, score = "mixed", 3
    return Reply.text(json.dumps({"sentiment": sentiment, "score": score}), usage=(60, 12))


async def run_evaluation(llm: LLMInterface, label: str) -> Report:
    @llm_function(llm)
    async def review(text: str) -> Review:
        """Classify the sentiment of the product review and score it from 1 to 5."""

    return await evaluate(review, DATASET, concurrency=4, name=label)


async def main(out: Path) -> None:
    cassette = out / "review.cassette.jsonl"
    cassette.unlink(missing_ok=True)
    llm = configured_model()
    if llm is None:
        print("(no model configured: the mock LLM server plays it)")
        async with MockLLMServer(default=keyword_model) as server:
            async with OpenAICompatible("sk-example-key-0123456789", "mock", server.url) as mock:
                with use_cassette(cassette, mode="record"):
                    recorded = await run_evaluation(mock, "review (recorded)")
            url = server.url  # the server is gone: the replay must not need it
        print(recorded.table())
        # The same evaluation again, with no model: the cassette answers every call.
        async with OpenAICompatible("sk-example-key-0123456789", "mock", url) as gone:
            with use_cassette(cassette, mode="none") as replay:
                replayed = await run_evaluation(gone, "review (replayed)")
    else:
        async with llm:  # on a real model run()'s budget applies (60 s)
            with use_cassette(cassette, mode="record"):
                recorded = await run_evaluation(llm, "review (recorded)")
            print(recorded.table())
            with use_cassette(cassette, mode="none") as replay:  # the model is not called
                replayed = await run_evaluation(llm, "review (replayed)")
        failed = [case.name for case in recorded.cases if not case.passed]
        note_if(bool(failed), f"{len(failed)} of {len(recorded.cases)} reviews misjudged")
    assert replay.all_played
    same = [c.passed for c in recorded.cases] == [c.passed for c in replayed.cases]
    print(f"replayed offline: {len(replay.interactions)} calls, same verdicts: {same}")

    json_path = replayed.write_json(out / "review.report.json")
    html_path = replayed.write_html(out / "review.report.html")
    print(f"report: {json_path} and {html_path}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for the files")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="evaluate_review-"))
    out.mkdir(parents=True, exist_ok=True)
    run(functools.partial(main, out))  # on a real model: 60 s, then one line saying so
