"""Every 95% interval ``batch stats`` prints holds the truth about as often as it says:
a small grid of ``bench/coverage.py``'s simulation (tests/helpers/coverage_sim.py) run
through ``batch_stats`` and ``compare_stats`` with a fixed seed.

The bar is loose enough for a sound method at 150 replicates (its coverage is 93-100 % in
the full simulation; 90 % is more than two standard errors below the worst) and far out of
reach of a broken one: the t intervals of case means this replaced covered 20-60 % at rate
0.97 and gave zero-width intervals in a fifth of the batches.
"""

from __future__ import annotations

import pytest
from helpers.coverage_sim import Setting, simulate

#: Under ``pytest -n`` the module's tests share one worker: the grid is simulated once, not
#: again by each worker that gets one of them.
pytestmark = pytest.mark.xdist_group("interval-coverage")

REPLICATES = 150
SETTINGS = [Setting(10, rate, samples) for rate in (0.5, 0.9, 0.97, 0.03) for samples in (1, 4)]


@pytest.fixture(scope="module")
def coverage() -> dict[Setting, dict]:
    return {setting: simulate(setting, REPLICATES, seed=41) for setting in SETTINGS}


@pytest.mark.parametrize("setting", SETTINGS, ids=Setting.label)
def test_every_interval_holds_the_truth_at_10_cases(setting: Setting, coverage: dict) -> None:
    tallies = coverage[setting]
    low = {name: round(t.coverage, 3) for name, t in tallies.items() if t.coverage < 0.90}
    assert low == {}, f"{setting.label()}: coverage below 90 %"


@pytest.mark.parametrize("setting", SETTINGS, ids=Setting.label)
def test_no_interval_has_zero_width(setting: Setting, coverage: dict) -> None:
    zero = {name: t.zero_width for name, t in coverage[setting].items() if t.zero_width}
    assert zero == {}, f"{setting.label()}: intervals of zero width"


def test_every_figure_holds_94_percent_over_the_grid(coverage: dict) -> None:
    names = {name for tallies in coverage.values() for name in tallies}
    means = {
        name: sum(t[name].coverage for t in coverage.values() if name in t)
        / sum(1 for t in coverage.values() if name in t)
        for name in names
    }
    assert {name: round(m, 3) for name, m in means.items() if m < 0.94} == {}
