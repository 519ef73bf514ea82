"""``stop_when`` simulated with known truth (issue 45): does the interval a sweep stops on
cover, does a compare stop on the right sign, and how many jobs does a stop save against
the fixed plan of every case?

    .venv/bin/python bench/stop_when.py [--sweeps 1000] [--seed 45] [--cases 100 1000 10000]
                                        [--rates 0.5 0.9 0.99] [--targets 0.05 0.03]
                                        [--repeats 1]

**half_width.** Each sweep draws a case set of ``N`` cases from a population at the true
rate (each case its own pass chance, Beta of concentration 4 around the rate; ``--repeats``
samples a case, averaged: one value a case), runs them in a random order and stops at the
first case whose interval (:mod:`batch.stop_when.confidence_sequence`, the hull of the
population and the without-replacement sequences, its bets aimed at the target) is at most
``±target``; a sweep that never
gets there runs all ``N``. Per setting: the share of sweeps whose interval at the stop holds
the population rate (``cov pop``) and the rate over all ``N`` cases, the number a full run
would have printed (``cov set``); the share whose sequence ever missed the population rate
at any n (``ever miss``: the time-uniform promise, at most 5 %); the share that stopped; the
jobs used as a share of the fixed plan's ``N x repeats``; the median stop against
:func:`batch.stop_when.estimate.cases_needed`'s estimate; and the half-width of the fixed
plan's own Wilson interval at ``N`` (what the full run buys).

**compare.** Two models on the same cases (A passes a case when ``u < p_A``, B when ``w <
p_B``, ``w`` = ``u`` for half the cases: hard cases are hard for both), the interval of
B - A, stop when its sign is known or it is within ``±2 pp``. ``wrong`` is the share of
sweeps that stopped on a wrong answer (the sign opposite to the truth, a sign when the truth
is 0, or "within the margin" when the truth is not): at most 5 %.

The sequences are computed in numpy over all sweeps at once; before the tables, three sweeps
are checked against the module's own (plain Python) computation. Exit status 1 when some
setting's coverage at the stop is below 95 %, its ever-miss rate above 5 % or a compare's
wrong stops above 5 %.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from batch.stats.intervals import wilson
from batch.stop_when.confidence_sequence import sequence_bounds
from batch.stop_when.estimate import cases_needed, compare_cases_needed

CONFIDENCE = 0.95
CONCENTRATION = 4.0
MARGIN = 0.02
CHUNK = 200  # sweeps a numpy pass holds: 200 x 10,000 values x 8 bytes per array
COMPARES = [(0.5, 0.8), (0.6, 0.65), (0.9, 0.97), (0.7, 0.7)]


def _lower(x: np.ndarray, alpha: float, population: int | None, target: float | None) -> np.ndarray:
    """confseq's ``predmix_empbern_lower_cs`` (running intersection) along axis 1; with
    ``target``, the bets aimed at it (``h / (s2 + h)``)."""
    n = x.shape[1]
    t = np.arange(1, n + 1, dtype=float)
    s_t = np.cumsum(x, axis=1)
    s_before = np.concatenate([np.zeros((x.shape[0], 1)), s_t[:, :-1]], axis=1)
    mean_before = np.concatenate([np.zeros((x.shape[0], 1)), (s_t / t)[:, :-1]], axis=1)
    mu_hat = np.minimum((0.5 + s_t) / (t + 1), 1)
    sigma2 = (0.25 + np.cumsum((x - mu_hat) ** 2, axis=1)) / (t + 1)
    sigma2_before = np.concatenate([np.full((x.shape[0], 1), 0.25), sigma2[:, :-1]], axis=1)
    if target is None:
        bets = np.sqrt(2 * np.log(1 / alpha) / (t * np.log1p(t) * sigma2_before))
    else:
        bets = target / (sigma2_before + target)
    bets = np.minimum(0.5, bets)
    psi = -np.log1p(-bets) - bets
    if population is None:
        z, w = 0.0, 0.0
    else:
        z, w = s_before / (population - t + 1), (t - 1) / (population - t + 1)
    weights = np.cumsum(bets * (1 + w), axis=1)
    centre = np.cumsum(bets * (x + z), axis=1) / weights
    margin = (np.log(1 / alpha) + np.cumsum((x - mean_before) ** 2 * psi, axis=1)) / weights
    return np.maximum.accumulate(np.maximum(centre - margin, 0), axis=1)


def hull(x: np.ndarray, cases: int, target: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The interval after every value of every sweep (rows), as the module computes it."""
    a = (1 - CONFIDENCE) / 2
    low = np.minimum(_lower(x, a, None, target), _lower(x, a, cases, target))
    high = np.maximum(1 - _lower(1 - x, a, None, target), 1 - _lower(1 - x, a, cases, target))
    return low, np.maximum(low, high)


def check_against_module(rng: np.random.Generator) -> None:
    x = rng.binomial(4, 0.8, (3, 300)) / 4
    for target in (None, 0.05):
        low, high = hull(x, 300, target)
        for row in range(3):
            ours = sequence_bounds(list(x[row]), CONFIDENCE, cases=300, target=target)
            assert np.allclose(low[row], [b.low for b in ours], atol=1e-12)
            assert np.allclose(high[row], [b.high for b in ours], atol=1e-12)


def _first(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the index of the first True, or the last index when none."""
    hit = mask.any(axis=1)
    return np.where(hit, mask.argmax(axis=1), mask.shape[1] - 1), hit


def half_width_setting(
    rng: np.random.Generator, rate: float, cases: int, target: float, repeats: int, sweeps: int
) -> dict[str, float]:
    cov_pop = cov_set = ever = stopped = used = 0.0
    stops: list[np.ndarray] = []
    for start in range(0, sweeps, CHUNK):
        k = min(CHUNK, sweeps - start)
        chances = rng.beta(rate * CONCENTRATION, (1 - rate) * CONCENTRATION, (k, cases))
        x = rng.binomial(repeats, chances) / repeats  # the cases in a random order already
        low, high = hull(x, cases, target)
        at, hit = _first((high - low) / 2 <= target)
        rows = np.arange(k)
        l_stop, h_stop = low[rows, at], high[rows, at]
        truth_set = x.mean(axis=1)
        cov_pop += np.sum((l_stop <= rate) & (rate <= h_stop))
        cov_set += np.sum((l_stop <= truth_set) & (truth_set <= h_stop))
        ever += np.sum(((low > rate) | (high < rate)).any(axis=1))
        stopped += hit.sum()
        used += np.sum(at + 1)
        stops.append(at[hit] + 1)
    all_stops = np.concatenate(stops)
    fixed_low, fixed_high = wilson(rate * cases, cases)
    return {
        "cov_pop": cov_pop / sweeps,
        "cov_set": cov_set / sweeps,
        "ever": ever / sweeps,
        "stopped": stopped / sweeps,
        "used": used / sweeps / cases,
        "median": float(np.median(all_stops)) if len(all_stops) else float("nan"),
        "estimate": cases_needed(rate, _unit_variance(rate, repeats), target, CONFIDENCE)
        or float("nan"),
        "fixed_half": (fixed_high - fixed_low) / 2,
    }


def _unit_variance(rate: float, repeats: int) -> float:
    """The variance of a case's mean of ``repeats`` samples under the Beta model."""
    between = rate * (1 - rate) / (CONCENTRATION + 1)
    return between + (rate * (1 - rate) - between) / repeats


def compare_setting(
    rng: np.random.Generator, p_a: float, p_b: float, cases: int, sweeps: int
) -> dict[str, float]:
    truth = p_b - p_a
    cov_pop = wrong = stopped = used = 0.0
    for start in range(0, sweeps, CHUNK):
        k = min(CHUNK, sweeps - start)
        u = rng.random((k, cases))
        w = np.where(rng.random((k, cases)) < 0.5, u, rng.random((k, cases)))
        d = (w < p_b).astype(float) - (u < p_a).astype(float)
        low, high = hull((d + 1) / 2, cases)
        low, high = 2 * low - 1, 2 * high - 1
        b_better, a_better = low > 0, high < 0
        within = (low >= -MARGIN) & (high <= MARGIN)
        at, hit = _first(b_better | a_better | within)
        rows = np.arange(k)
        cov_pop += np.sum((low[rows, at] <= truth) & (truth <= high[rows, at]))
        said_b, said_a, said_within = (
            b_better[rows, at] & hit,
            a_better[rows, at] & hit,
            within[rows, at] & hit & ~b_better[rows, at] & ~a_better[rows, at],
        )
        wrong += np.sum(
            (said_b & (truth <= 0))
            | (said_a & (truth >= 0))
            | (said_within & (abs(truth) > MARGIN))
        )
        stopped += hit.sum()
        used += np.sum(at + 1)
    variance = _pair_variance(p_a, p_b)
    return {
        "cov_pop": cov_pop / sweeps,
        "wrong": wrong / sweeps,
        "stopped": stopped / sweeps,
        "used": used / sweeps / cases,
        "estimate": compare_cases_needed(truth, variance, MARGIN, CONFIDENCE) or float("nan"),
    }


def _pair_variance(p_a: float, p_b: float) -> float:
    """Var(b - a) of the compare's model (half the cases share A's draw)."""
    both = 0.5 * min(p_a, p_b) + 0.5 * p_a * p_b  # P(a = 1 and b = 1)
    mean = p_b - p_a
    return p_a + p_b - 2 * both - mean**2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--cases", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--rates", type=float, nargs="+", default=[0.5, 0.9, 0.99])
    parser.add_argument("--targets", type=float, nargs="+", default=[0.05, 0.03])
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    check_against_module(rng)
    failed = False
    print(
        f"half_width: {args.sweeps} sweeps a setting, {args.repeats} sample(s) a case, "
        f"{CONFIDENCE:.0%} sequences"
    )
    print(
        f"{'rate':>5} {'cases':>6} {'target':>7} {'cov pop':>8} {'cov set':>8} "
        f"{'ever miss':>9} {'stopped':>8} {'jobs used':>9} {'median n':>9} {'estimate':>9} "
        f"{'fixed ±':>8}"
    )
    for rate in args.rates:
        for cases in args.cases:
            for target in args.targets:
                r = half_width_setting(rng, rate, cases, target, args.repeats, args.sweeps)
                failed |= min(r["cov_pop"], r["cov_set"]) < 0.95 or r["ever"] > 0.05
                print(
                    f"{rate:>5.2f} {cases:>6} {target * 100:>5.0f}pp {r['cov_pop']:>8.1%} "
                    f"{r['cov_set']:>8.1%} {r['ever']:>9.1%} {r['stopped']:>8.0%} "
                    f"{r['used']:>9.0%} {r['median']:>9.0f} {r['estimate']:>9.0f} "
                    f"{r['fixed_half'] * 100:>6.1f}pp"
                )
    print()
    print(f"compare: B - A, stop on a known sign or within ±{MARGIN * 100:.0f} pp")
    print(
        f"{'A':>5} {'B':>5} {'cases':>6} {'cov pop':>8} {'wrong':>6} {'stopped':>8} "
        f"{'jobs used':>9} {'estimate':>9}"
    )
    for p_a, p_b in COMPARES:
        for cases in args.cases:
            r = compare_setting(rng, p_a, p_b, cases, args.sweeps)
            failed |= r["cov_pop"] < 0.95 or r["wrong"] > 0.05
            print(
                f"{p_a:>5.2f} {p_b:>5.2f} {cases:>6} {r['cov_pop']:>8.1%} {r['wrong']:>6.1%} "
                f"{r['stopped']:>8.0%} {r['used']:>9.0%} {r['estimate']:>9.0f}"
            )
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
