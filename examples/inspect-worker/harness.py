"""A real inspect_ai task run one sample at a time: as a warm worker, or one process per job.

    python harness.py --worker              # serve requests on stdin (sweep-worker.yaml)
    python harness.py CASE MODEL RUN_DIR    # one sample, one process (sweep-process.yaml)

Both run the same task (``addition``: "What is A+B?", scored by ``match()``) on the same
sample, against inspect's offline ``mockllm`` provider, which here answers the sum (wrong
when A is a multiple of 7, so some samples fail as a model would). The inspect log of each
sample is written into the job's run dir. What costs the time is inspect's own start (its
imports, ~1.3 s of CPU here): a worker pays it once per slot, a process per job every time.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# The example lives in the batch-ledger repo; a harness elsewhere copies run_support/worker.py
# (standard library only) into its own tree instead.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate

SAMPLES = 200


def addition() -> Task:
    dataset = [
        Sample(id=f"add-{a}", input=f"What is {a}+{a * 3 % 11}?", target=str(a + a * 3 % 11))
        for a in range(1, SAMPLES + 1)
    ]
    return Task(dataset=dataset, solver=generate(), scorer=match())


def mock_answer(messages, tools, tool_choice, config) -> ModelOutput:  # type: ignore[no-untyped-def]
    """The offline model: the sum, off by one when A is a multiple of 7."""
    a, b = map(int, re.findall(r"\d+", messages[-1].text)[:2])
    guess = a + b + (1 if a % 7 == 0 else 0)
    output = ModelOutput.from_content(model="mockllm/model", content=str(guess))
    output.usage = ModelUsage(input_tokens=8, output_tokens=2, total_tokens=10)
    return output


def run_sample(case: str, model: str, run_dir: str) -> tuple[str, dict[str, object]]:
    """(outcome, result fields) of ``case``, its inspect log in ``run_dir``."""
    mock = get_model(model, custom_outputs=mock_answer)
    (log,) = inspect_eval(
        addition(), model=mock, sample_id=case, log_dir=run_dir, display="none", log_samples=True
    )
    if log.status != "success" or not log.samples:
        return "error", {"failure_category": "infra_failure", "reason": str(log.error)[:300]}
    sample = log.samples[0]
    score = next(iter(sample.scores.values())) if sample.scores else None
    correct = score is not None and score.value == "C"
    fields: dict[str, object] = {
        "score": 1.0 if correct else 0.0,
        "answer": sample.output.completion,
    }
    usage = log.stats.model_usage.get(model) if log.stats else None
    if usage is not None:
        fields["usage"] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    if not correct:
        fields["reason"] = f"answered {sample.output.completion!r}, expected {sample.target!r}"
    return ("passed" if correct else "failed"), fields


def serve() -> None:
    from run_support.worker import answer, requests

    for request in requests():
        outcome, fields = run_sample(request["case"], request["model"], request["run_dir"])
        answer(request, outcome, **fields)


def one_job(case: str, model: str, run_dir: str) -> int:
    from run_support.results import write_result

    outcome, fields = run_sample(case, model, run_dir)
    write_result(run_dir, outcome, **fields)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        serve()
    else:
        sys.exit(one_job(*sys.argv[1:4]))
