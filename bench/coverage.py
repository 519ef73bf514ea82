"""Coverage of ``batch stats``'s 95% intervals, simulated with known truth (issue 41).

    .venv/bin/python bench/coverage.py [--replicates 2000] [--seed 41] [--cases 10 40]
                                       [--rates 0.5 0.9 0.97 0.1 0.03] [--samples 1 4]

For every setting of the grid (cases, true rate, samples per case), draws ``--replicates``
populations of cases of Beta-distributed difficulty (concentration 4), builds the summary
rows a batch would end with and reads every interval out of ``batch_stats`` and
``compare_stats`` — the functions ``batch stats`` runs, in this process, no subprocesses.
Prints, per setting and figure, the share of intervals that hold the truth (the population
mean, Miller 2024), with ``zN`` after it when N % of them had zero width; then each figure's
mean and minimum over the grid. The model of the data is ``tests/helpers/coverage_sim.py``.

Exit status 1 when some figure's mean coverage is below 94 % or some setting below 92.5 %,
or some interval had zero width (issue 41's bar).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.coverage_sim import RATES, grid, simulate, table

MEAN_BAR = 0.94
SETTING_BAR = 0.925


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=41)
    parser.add_argument("--cases", type=int, nargs="+", default=[10, 40])
    parser.add_argument("--rates", type=float, nargs="+", default=list(RATES))
    parser.add_argument("--samples", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    started = time.monotonic()
    results = {}
    for setting in grid(args.cases, args.rates, args.samples):
        results[setting] = simulate(setting, args.replicates, args.seed)
        print(f"  {setting.label()}  done", file=sys.stderr, flush=True)
    print(
        f"95% interval coverage, {args.replicates} replicates a setting, seed {args.seed} "
        f"({time.monotonic() - started:.0f} s); zN: N % of intervals of zero width"
    )
    print(table(results))
    failing = []
    names = {name for tallies in results.values() for name in tallies}
    for name in sorted(names):
        values = [t[name] for t in results.values() if name in t]
        mean = sum(t.coverage for t in values) / len(values)
        worst = min(t.coverage for t in values)
        zero = sum(t.zero_width for t in values)
        if mean < MEAN_BAR or worst < SETTING_BAR or zero:
            failing.append(f"{name} (mean {mean:.1%}, min {worst:.1%}, zero-width {zero})")
    if failing:
        print("below the bar (mean >= 94 %, every setting >= 92.5 %, no zero width):")
        print("\n".join(f"  {line}" for line in failing))
        return 1
    print("every figure: mean >= 94 %, every setting >= 92.5 %, no zero-width interval")
    return 0


if __name__ == "__main__":
    sys.exit(main())
