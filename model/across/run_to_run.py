"""Run-to-run noise of each metric: the spread of whole runs, not of repeats inside one run.

A run's repeats share its guest, its boot and its host's state at that hour; the next night's run
does not. So a comparison between two nights must allow for the spread between whole runs, which
only repeated whole runs show. ``python -m bench.noise`` runs the default suite N times and feeds
each run's metrics here:

- each run contributes one value per metric: the median of its repeats (:func:`run_value`);
- :func:`run_to_run` gives, per metric, the number of runs, their mean, their standard deviation
  and the coefficient of variation (CV = standard deviation / |mean|);
- :func:`min_effect_for` turns a CV into the smallest relative change ``compare`` reports, and
  :attr:`NoiseRow.min_effect` raises it to the widest change seen between two of the healthy runs.

Why ``EFFECT_PER_CV`` = 3 x sqrt 2 (about 4.24): the difference of two independent runs of a
metric with CV c has a standard deviation of sqrt(2) x c (relative to the mean), so a change of
3 x sqrt(2) x c is a 3-sigma move of that difference: with normal noise, two healthy runs exceed
it with probability 0.27 % per metric. A CV estimated from 10 runs is itself uncertain (its
relative standard error is about 1/sqrt(2 x 9) = 24 %), which is why the factor is 3 sigma and not 2.

Why also the widest change: the 3-sigma rule assumes roughly normal noise. Some metrics are not:
under TCG the direct-io latencies of tens of microseconds jump between runs (5 us in one, 40 us in
the next: a +700 % "change" between two healthy runs, with a CV of 89 %). With CV alone, 23 of the
45 pairs of 10 healthy runs measured here would have reported such a move. So a metric's minimum
effect is also at least the largest relative change between any two of the measured healthy runs:
what healthy runs were seen to do is never reported as a move.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from model.across.moves import MetricKey, Series, Spread, relative_effect
from model.judging.spec import Direction

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
    #: the largest relative change from one of the runs to another (inf when one was 0 and another not)
    widest: float = 0.0

    @property
    def cv(self) -> float:
        """Coefficient of variation; 0 for a metric that never moved, inf for a zero mean that did."""
        if self.stdev == 0:
            return 0.0
        return self.stdev / abs(self.mean) if self.mean else math.inf

    @property
    def min_effect(self) -> float:
        """The smallest relative change worth reporting: 3 sigma of a difference, at least the floor
        and at least the widest change seen between two of these (healthy) runs."""
        return max(min_effect_for(self.cv), self.widest)


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
        widest = max(abs(relative_effect(a, b)) for a in values for b in values)
        rows.append(NoiseRow(*key, present[-1].unit, present[-1].direction, len(values),
                             statistics.fmean(values), statistics.stdev(values), widest))
    return rows


def min_effect_for(cv: float) -> float:
    """The smallest relative change worth reporting for a metric with run-to-run CV ``cv``."""
    return max(MIN_EFFECT_FLOOR, EFFECT_PER_CV * cv)


def worst_by_name(rows: Sequence[NoiseRow]) -> dict[str, NoiseRow]:
    """Per metric name, the row with the largest minimum effect over its configurations: the effect
    a comparison needs for that name is set by the noisiest configuration that measures it."""
    out: dict[str, NoiseRow] = {}
    for r in rows:
        if r.name not in out or r.min_effect > out[r.name].min_effect:
            out[r.name] = r
    return out
