"""Run-to-run noise of each metric: the spread of whole runs, not of repeats inside one run.

A run's repeats share its guest, its boot and its host's state at that hour; the next night's run
does not. So a comparison between two nights must allow for the spread between whole runs, which
only repeated whole runs show. ``python -m bench.noise`` runs the default suite N times and feeds
each run's metrics here:

- each run contributes one value per metric: the median of its repeats (:func:`run_value`);
- :func:`run_to_run` gives, per metric, the number of runs, their mean, their standard deviation
  and the coefficient of variation (CV = standard deviation / |mean|);
- :func:`min_effect_for` turns a CV into the smallest relative change ``compare`` reports.

Why ``EFFECT_PER_CV`` = 3 x sqrt 2 (about 4.24): the difference of two independent runs of a
metric with CV c has a standard deviation of sqrt(2) x c (relative to the mean), so a change of
3 x sqrt(2) x c is a 3-sigma move of that difference: with normal noise, two healthy runs exceed
it with probability 0.27 % per metric. A CV estimated from 10 runs is itself uncertain (its
relative standard error is about 1/sqrt(2 x 9) = 24 %), which is why the factor is 3 sigma and not 2.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.compare import MetricKey, Series, Spread
from model.metrics import Direction

#: Smallest change reported, in run-to-run standard deviations of one run's value: 3 sigma of the
#: difference of two runs, sqrt 2 x 3 (see the module docstring).
EFFECT_PER_CV = 3 * math.sqrt(2)
#: A metric that did not move at all over the measured runs (CV 0: a depth that is always 32)
#: still gets this floor, so that one changed sample in a whole run is not a "move" of infinite size.
MIN_EFFECT_FLOOR = 0.02


@dataclass(frozen=True)
class NoiseRow:
    """One metric's run-to-run spread over ``runs`` whole runs."""

    rule: str
    config: str
    name: str
    unit: str
    direction: Direction
    runs: int
    mean: float
    stdev: float

    @property
    def cv(self) -> float:
        """Coefficient of variation; 0 for a metric that never moved, inf for a zero mean that did."""
        if self.stdev == 0:
            return 0.0
        return self.stdev / abs(self.mean) if self.mean else math.inf


def run_value(series: Series) -> float:
    """One run's value of a metric: the median of its repeats."""
    return Spread.of(series.values).median


def run_to_run(runs: Sequence[Mapping[MetricKey, Series]], min_runs: int = 2) -> list[NoiseRow]:
    """Each metric measured by at least ``min_runs`` of ``runs``, with its spread across them, sorted by key."""
    keys = sorted({k for run in runs for k in run})
    rows = []
    for key in keys:
        present = [run[key] for run in runs if key in run and run[key].values]
        if len(present) < max(min_runs, 2):
            continue
        values = [run_value(s) for s in present]
        rows.append(NoiseRow(*key, present[-1].unit, present[-1].direction, len(values),
                             statistics.fmean(values), statistics.stdev(values)))
    return rows


def min_effect_for(cv: float) -> float:
    """The smallest relative change worth reporting for a metric with run-to-run CV ``cv``."""
    return max(MIN_EFFECT_FLOOR, EFFECT_PER_CV * cv)


def worst_by_name(rows: Sequence[NoiseRow]) -> dict[str, NoiseRow]:
    """Per metric name, the row with the largest CV over its configurations: the effect a
    comparison needs for that name is set by the noisiest configuration that measures it."""
    out: dict[str, NoiseRow] = {}
    for r in rows:
        if r.name not in out or r.cv > out[r.name].cv:
            out[r.name] = r
    return out
