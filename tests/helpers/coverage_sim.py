"""Coverage of ``batch stats``'s 95% intervals, simulated with known truth (issue 41).

Shared by ``bench/coverage.py`` (the full grid, thousands of replicates a setting) and
``tests/unit/stats/test_interval_coverage.py`` (a small grid). Each replicate draws a
population of cases, builds the summary rows a batch would end with and reads the intervals
out of what ``batch.stats.rates.batch_stats`` and ``compare_stats`` return: the same
functions ``batch stats`` runs, without processes or files.

The model of the data (Miller 2024, "Adding Error Bars to Evals"): case *i* has a true pass
probability ``p_i`` drawn from Beta(rate·κ, (1 - rate)·κ), κ = :data:`CONCENTRATION`; each of
its samples passes with ``p_i``; a failed sample scores Uniform(0, 0.5) and a passed one 1.
The target of every figure is its mean over the population of cases, so the truths are

- pass rate = pass@1 = rate; pass@k = 1 - E[(1 - p)^k]; pass^k = E[p^k] (Beta moments);
- score = rate + 0.25 · (1 - rate);
- a paired difference B - A = rate_B - rate_A (score: 0.75 times that).

Batch 1 has models ``A`` and ``B`` at the same rate, their case difficulties correlated
(a Gaussian copula of correlation :data:`PAIR_CORRELATION`: the hard cases are hard for
both), so the true difference is 0, where a t interval of agreeing models collapses. Batch 2
has model ``A`` again, retrained to :func:`shifted` rate, its difficulties correlated
:data:`ACROSS_CORRELATION` with batch 1's ``A``: ``batch stats 1 2``'s paired row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs
import numpy as np
from scipy import stats as scipy_stats

from batch.stats.rates import batch_stats, compare_stats

CONCENTRATION = 4.0
PAIR_CORRELATION = 0.5
ACROSS_CORRELATION = 0.9
FAILED_SCORE_MEAN = 0.25
#: The grid of the issue: rates and their mirrors near 0.
RATES = (0.5, 0.9, 0.97, 0.1, 0.03)


def shifted(rate: float) -> float:
    """Batch 2's rate for batch 1's ``rate``: a nearby rate, on the same side of 0.5."""
    return {0.5: 0.6, 0.9: 0.97, 0.97: 0.9, 0.1: 0.03, 0.03: 0.1}.get(rate, rate)


@attrs.frozen
class Setting:
    cases: int
    rate: float
    samples: int

    def label(self) -> str:
        return f"{self.cases:>3} cases  rate {self.rate:<4}  {self.samples} sample(s)"


def beta_params(rate: float) -> tuple[float, float]:
    return rate * CONCENTRATION, (1 - rate) * CONCENTRATION


def moment(a: float, b: float, k: int) -> float:
    """E[p^k] for p ~ Beta(a, b)."""
    return math.prod((a + j) / (a + b + j) for j in range(k))


def truths(setting: Setting) -> dict[str, float]:
    """The population value of every figure :func:`figures` reads."""
    rate, other = setting.rate, shifted(setting.rate)
    a, b = beta_params(rate)
    truth = {
        "pass_rate": rate,
        "adjusted_pass_rate": rate,
        "score": rate + FAILED_SCORE_MEAN * (1 - rate),
        "paired_pass_rate": 0.0,
        "paired_score": 0.0,
        "across_pass_rate": other - rate,
        "across_score": (other - rate) * (1 - FAILED_SCORE_MEAN),
    }
    if setting.samples > 1:
        for k in range(1, setting.samples + 1):
            truth[f"pass@{k}"] = 1 - moment(b, a, k)
            truth[f"pass^{k}"] = moment(a, b, k)
    return truth


def _difficulties(
    rng: np.random.Generator, cases: int, rates: tuple[float, float], correlation: float
) -> tuple[np.ndarray, np.ndarray]:
    """Two models' per-case pass probabilities, correlated through a Gaussian copula."""
    z = rng.standard_normal((2, cases))
    z[1] = correlation * z[0] + math.sqrt(1 - correlation**2) * z[1]
    u = scipy_stats.norm.cdf(z)
    return tuple(  # type: ignore[return-value]
        scipy_stats.beta.ppf(u[i], *beta_params(rates[i])) for i in range(2)
    )


def _rows(
    rng: np.random.Generator, model: str, p: np.ndarray, samples: int
) -> list[dict[str, Any]]:
    passed = rng.random((len(p), samples)) < p[:, None]
    partial = rng.random((len(p), samples)) * 0.5
    rows = []
    for i in range(len(p)):
        for r in range(samples):
            row: dict[str, Any] = {
                "case": f"c{i}",
                "model": model,
                "status": "passed" if passed[i, r] else "failed",
                "score": 1.0 if passed[i, r] else float(partial[i, r]),
            }
            if samples > 1:
                row["repeat"] = r + 1
            rows.append(row)
    return rows


def replicate(rng: np.random.Generator, setting: Setting) -> tuple[dict, dict]:
    """One simulated pair of batches' summaries (see the module's docstring)."""
    rate = setting.rate
    p_a, p_b = _difficulties(rng, setting.cases, (rate, rate), PAIR_CORRELATION)
    # Batch 2's A: batch 1's A retrained, its difficulties correlated with batch 1's A.
    z = scipy_stats.norm.ppf(scipy_stats.beta.cdf(p_a, *beta_params(rate)))
    z2 = ACROSS_CORRELATION * z + math.sqrt(1 - ACROSS_CORRELATION**2) * rng.standard_normal(
        setting.cases
    )
    p_c = scipy_stats.beta.ppf(scipy_stats.norm.cdf(z2), *beta_params(shifted(rate)))
    first = _rows(rng, "A", p_a, setting.samples) + _rows(rng, "B", p_b, setting.samples)
    second = _rows(rng, "A", p_c, setting.samples)
    return {"jobs": first}, {"jobs": second}


Interval = tuple[float | None, float | None]


def _figure(value: Mapping[str, Any] | None) -> Interval:
    return (None, None) if not value else (value["low"], value["high"])


def figures(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Interval]:
    """Every interval ``batch stats`` gives for the two summaries, by figure name."""
    document = batch_stats(first, batch_dir="sim")
    model = document["models"][0]
    found: dict[str, Interval] = {
        name: (model[f"{name}_low"], model[f"{name}_high"])
        for name in ("pass_rate", "adjusted_pass_rate")
    }
    repeated = (model.get("samples_per_case") or {}).get("max", 1) > 1
    for key, label in (("pass_at_k", "pass@"), ("pass_hat_k", "pass^")):
        if repeated:
            for k, value in model[key].items():
                found[f"{label}{k}"] = _figure(value)
    found["score"] = _figure(model.get("score"))
    pair = document["paired"][0]
    found["paired_pass_rate"] = _figure(pair.get("pass_rate_diff"))
    found["paired_score"] = _figure(pair.get("score_diff"))
    across = compare_stats(first, second)["models"][0]["paired"]
    found["across_pass_rate"] = _figure(across.get("pass_rate_diff"))
    found["across_score"] = _figure(across.get("score_diff"))
    return found


@attrs.define
class Tally:
    covered: int = 0
    zero_width: int = 0
    total: int = 0

    @property
    def coverage(self) -> float:
        return self.covered / self.total if self.total else math.nan


def simulate(
    setting: Setting, replicates: int, seed: int, progress: Callable[[], None] | None = None
) -> dict[str, Tally]:
    """Coverage of every figure's interval over ``replicates`` simulated batches."""
    rng = np.random.default_rng([seed, setting.cases, int(setting.rate * 1000), setting.samples])
    truth = truths(setting)
    tallies = {name: Tally() for name in truth}
    for _ in range(replicates):
        found = figures(*replicate(rng, setting))
        for name, tally in tallies.items():
            low, high = found.get(name, (None, None))
            tally.total += 1
            if low is None or high is None:
                continue
            tally.covered += low - 1e-9 <= truth[name] <= high + 1e-9
            tally.zero_width += high - low < 1e-9
        if progress:
            progress()
    return tallies


FIGURE_ORDER = (
    "pass_rate",
    "adjusted_pass_rate",
    "pass@1",
    "pass@2",
    "pass@4",
    "pass^2",
    "pass^4",
    "score",
    "paired_pass_rate",
    "paired_score",
    "across_pass_rate",
    "across_score",
)


def grid(cases: Iterable[int], rates: Iterable[float], samples: Iterable[int]) -> list[Setting]:
    return [Setting(c, r, s) for c in cases for r in rates for s in samples]


def table(results: Mapping[Setting, Mapping[str, Tally]]) -> str:
    """The coverage table: a row per setting, a column per figure (%; `z` marks a setting
    with zero-width intervals, their share after it), then each figure's mean and minimum."""
    names = [n for n in FIGURE_ORDER if any(n in r for r in results.values())]
    short = {
        "adjusted_pass_rate": "adj",
        "pass_rate": "rate",
        "paired_pass_rate": "pair",
        "paired_score": "pairS",
        "across_pass_rate": "xbatch",
        "across_score": "xbatchS",
    }
    heads = [short.get(n, n) for n in names]
    width = 12
    lines = ["setting".ljust(32) + "".join(h.rjust(width) for h in heads)]
    for setting, tallies in results.items():
        cells = []
        for name in names:
            tally = tallies.get(name)
            if tally is None:
                cells.append("".rjust(width))
                continue
            text = f"{tally.coverage * 100:.1f}"
            if tally.zero_width:
                text += f" z{tally.zero_width * 100 // tally.total}"
            cells.append(text.rjust(width))
        lines.append(setting.label().ljust(32) + "".join(cells))
    for what, pick in (("mean", np.mean), ("min", np.min)):
        cells = []
        for name in names:
            values = [t[name].coverage for t in results.values() if name in t]
            cells.append(f"{pick(values) * 100:.1f}".rjust(width))
        lines.append(what.ljust(32) + "".join(cells))
    return "\n".join(lines)
