"""Two runs compared: verdict flips (exact) and metrics that moved beyond the noise (tested).

Verdicts are exact. A configuration whose rule passed and now fails is a **regression**, one
that failed and now passes a **fix**; neither is ever explained away as noise. A harness error
(the rule could not be judged) is not a conformance failure: a verdict that became ``error`` is
reported as an **error**, and other changes (skipped, not run, absent) as **changed**. A
configuration whose pass/fail verdict went back and forth across the last N runs is **flaky**
(:func:`flaky`).

A metric **moved** when all of these hold (:func:`metric_moved`):

1. each run's median lies outside the other run's spread (a run's spread is its samples'
   min..max), on the side it moved to;
2. the medians differ by at least the metric's minimum relative effect (:data:`MIN_EFFECTS`:
   measured run-to-run noise, which each rule module declares for the metrics it records;
   :data:`MIN_EFFECT` for a metric with no entry, or one bar for every metric that the caller gives);
3. where the repeats let it decide, an exact two-sided Mann-Whitney U (Wilcoxon rank-sum) test
   over them gives p <= :data:`ALPHA`. Condition 1 alone lets tails overlap (1, 2, 3, 8, 9 against
   5, 6, 10, 11, 12: medians 3 and 10, spreads 1..9 and 5..12); the rank test then decides (here
   p = 24/252 = 0.095: no move).

**Which way decided** (:attr:`Moved.decided_by`). With few repeats the rank test cannot reach
ALPHA at all (1 against 1: p is 1; 3 against 3: the smallest possible p is 2/20 = 0.1; it needs
:func:`repeats_needed` = 4 in each run), and the suite measures most rules once per run by default
(a nightly job adds ``--repeats 3``). There the metric's **measured minimum effect** decides alone:
it is the run-to-run noise of whole runs, each run's median against another's (model/across/
run_to_run.py), which is what one sample per run is, so a change beyond it is a move. A bar the
caller gives for every metric (``compare --min-effect``) decides the same way. A metric with
neither (:data:`MIN_EFFECT` stands in for a noise nobody measured) is reported **undecided**: a
guess is no regression. A move in the worse direction that was decided is a **regression**
(:attr:`Moved.regression`), unless it is **not judged**: a number that follows the host CPU when
either run's vCPUs waited for the host beyond the bound (model/across/contention.py), or one of a
rule that ended in ERROR (the caller says so, :func:`moved_metrics`' ``not_judged``).

The U test is exact and handles ties: the p-value counts, over all C(n1+n2, n1) ways to split
the pooled mid-ranks into two groups of the runs' sizes, those whose rank sum lies at least
as far from its mean as the observed one (dynamic programming over the rank sums, doubled to
stay integral). It is written here rather than taken from scipy because scipy's "exact" method
assumes no ties, and measured values repeat (depths, request sizes). It is a pure function
and checked against hand-counted distributions in tests/model/test_model_compare.py.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from model.across.contention import HOST_CPU_BOUND, WAIT_PROPERTY, busy_host
from model.across.metrics import HOST_EVIDENCE
from model.judging.spec import Direction
from model.rules import RULE_MODULES

#: (rule, configuration id): one JUnit case.
Key = tuple[str, str]
FlipKind = Literal["regression", "fix", "error", "changed"]

#: Significance level of the rank test. The conventional 5 %: no measurement of this suite's
#: false-alarm rate exists yet (issue 13's noise table, bench/, is to give one); a parameter.
ALPHA = 0.05
#: Smallest relative change of a median that is reported for a metric :data:`MIN_EFFECTS` has no
#: entry for (vSphere counters, controllers and rules outside the default suite): 10 %, a
#: parameter (``--min-effect``). The measured minimum effects are the default for the others.
MIN_EFFECT = 0.10
#: The minimum effect of a metric two rules record alike (model/across/metrics.py's SHARED_METRICS), in the
#: form of a rule module's MIN_EFFECTS: a request count moves with the IOPS of its window (io-size's;
#: alignment counts a fixed number of writes).
SHARED_MIN_EFFECTS: Mapping[str, float] = {
    "host_requests": 0.065,  # CV 1.53 % / 0.89 %, widest 4.3 % / 2.5 % (virtio-blk / virtio-blk)
}
#: Per metric name, the smallest relative change of a median that ``compare`` reports: what each rule
#: module declares beside the metrics it records (its MIN_EFFECTS; model/rules/__init__.py lists the
#: modules), and :data:`SHARED_MIN_EFFECTS`. Every entry is derived from the run-to-run noise of whole
#: runs of the default suite (every rule on virtio-scsi and virtio-blk, every rule passed in every run),
#: measured twice on a 2-core TCG host: ``python -m bench.noise --runs 10`` with 3 s windows and 3
#: buffered-direct copies (runs of about 120 s), and the 11 healthy runs of ``python -m bench.rules
#: --repeats 10`` with 2 s windows and 2 copies (runs of 85 s). Each measurement gives model/across/run_to_run.py's
#: NoiseRow.min_effect: 3 x sqrt 2 x the CV of the noisier of the two configurations (so two healthy
#: runs exceed it with about 0.27 % probability per metric if the noise were normal), at least the
#: widest change seen between two of the runs (the TCG latencies are not normal: they jump by up to
#: 9x), and at least 2 % where the metric never moved (exact request sizes and depths); the entry is
#: the larger of the two. Each entry's comment gives both CVs and widest changes (3 s / 2 s windows);
#: docs/benchmarks.md has the measurements. Parameters that are counts of what happened (``python -m
#: bench.noise --all`` lists them) have entries; settings (block sizes, queue depths, max_sectors_kb)
#: never moved, and any change of theirs is reported at :data:`MIN_EFFECT`.
MIN_EFFECTS: Mapping[str, float] = {name: effect for table in (*(rule.MIN_EFFECTS for rule in RULE_MODULES),
                                                               SHARED_MIN_EFFECTS)
                                    for name, effect in table.items()}
#: pass/fail transitions across the last N runs that make a configuration flaky. One flip is a
#: change (a regression or a fix); two or more is going back and forth, by definition.
FLAKY_MIN_FLIPS = 2
#: Runs looked at for flakiness when not told otherwise (a week of nightly runs).
FLAKY_WINDOW = 7


@dataclass(frozen=True)
class Flip:
    rule: str
    config: str
    before: str  # an outcome, or "absent"
    after: str
    kind: FlipKind


def _kind(before: str, after: str) -> FlipKind:
    if before == "passed" and after == "failed":
        return "regression"
    if before == "failed" and after == "passed":
        return "fix"
    if after == "error":
        return "error"
    return "changed"


def verdict_flips(a: Mapping[Key, str], b: Mapping[Key, str]) -> list[Flip]:
    """Every (rule, configuration) whose outcome differs from run ``a`` to run ``b``, sorted."""
    flips = []
    for key in sorted(set(a) | set(b)):
        before, after = a.get(key, "absent"), b.get(key, "absent")
        if before != after:
            flips.append(Flip(key[0], key[1], before, after, _kind(before, after)))
    return flips


def flaky(history: Sequence[Mapping[Key, str]], min_flips: int = FLAKY_MIN_FLIPS) -> dict[Key, int]:
    """Configurations whose pass/fail verdict flipped at least ``min_flips`` times across
    ``history`` (runs oldest first), with their flip counts. Skips, errors and absences
    neither count as a flip nor break a sequence: ``passed, error, failed`` is one flip."""
    out: dict[Key, int] = {}
    for key in sorted({k for run in history for k in run}):
        seq = [run[key] for run in history if run.get(key) in ("passed", "failed")]
        n = sum(1 for x, y in itertools.pairwise(seq) if x != y)
        if n >= min_flips:
            out[key] = n
    return out


# --- the rank test ---------------------------------------------------------------------------

def _midranks(values: Sequence[float]) -> list[float]:
    """Ranks 1..n of ``values`` in their order, ties sharing the mean of their ranks."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(U of ``a``, exact two-sided p) of the Mann-Whitney U test; ties handled exactly.

    U of ``a`` counts the pairs (x in a, y in b) with x > y, a tie counting one half.

    p = share of the C(n1+n2, n1) splits of the pooled mid-ranks whose rank sum of the first
    group is at least as far from its mean n1(n1+n2+1)/2 as the observed one. ValueError if
    either sample is empty.
    """
    n1, n2 = len(a), len(b)  # the table below has n1 x n1(n1+n2+1) cells: fine for repeats, not for 1000s
    if not n1 or not n2:
        raise ValueError("the rank test needs at least one sample in each run")
    ranks = _midranks([*a, *b])
    doubled = [round(2 * r) for r in ranks]  # mid-ranks are multiples of 1/2
    observed = sum(doubled[:n1])
    mean2 = n1 * (n1 + n2 + 1)  # twice the mean rank sum
    # ways[k][s]: subsets of k of the pooled ranks seen so far with doubled rank sum s
    top = sum(doubled)
    ways = [[0] * (top + 1) for _ in range(n1 + 1)]
    ways[0][0] = 1
    for seen, r in enumerate(doubled):
        for k in range(min(seen + 1, n1), 0, -1):
            row, prev = ways[k], ways[k - 1]
            for s in range(top, r - 1, -1):
                if prev[s - r]:
                    row[s] += prev[s - r]
    total = math.comb(n1 + n2, n1)
    far = abs(observed - mean2)
    extreme = sum(c for s, c in enumerate(ways[n1]) if c and abs(s - mean2) >= far)
    u = observed / 2 - n1 * (n1 + 1) / 2
    return u, min(1.0, extreme / total)


def smallest_p(n1: int, n2: int) -> float:
    """The smallest two-sided p the exact U test can give for samples of n1 and n2 (no ties)."""
    return min(1.0, 2 / math.comb(n1 + n2, n1))


def repeats_needed(alpha: float = ALPHA) -> int:
    """Repeats per run (the same in both) for which the U test can reach ``alpha`` at all."""
    n = 1
    while smallest_p(n, n) > alpha:
        n += 1
    return n


# --- metrics ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Spread:
    """A run's samples of one metric: count, median, min, max."""

    n: int
    median: float
    lo: float
    hi: float

    @staticmethod
    def of(values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("spread of no samples")
        s = sorted(values)
        n = len(s)
        median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
        return Spread(n, median, s[0], s[-1])


Judgement = Literal["better", "worse", "changed"]
#: What the minimum effect a caller gives :func:`metric_moved` is: the metric's measured run-to-run
#: noise, one bar the user set for every metric, or :data:`MIN_EFFECT` standing in for noise nobody measured.
Bar = Literal["measured", "given", "guessed"]
#: Which way decided that a metric moved (the module docstring, "Which way decided").
Decider = Literal["rank test", "measured minimum effect", "given minimum effect", "undecided"]
_DECIDER: Mapping[Bar, Decider] = {"measured": "measured minimum effect", "given": "given minimum effect",
                                   "guessed": "undecided"}


@dataclass(frozen=True)
class Moved:
    """A metric that moved beyond the noise (see the module docstring)."""

    rule: str
    config: str
    name: str
    unit: str
    direction: Direction
    a: Spread
    b: Spread
    effect: float  # (median b - median a) / |median a|; inf when a's median is 0
    p: float
    tested: bool  # False: too few repeats for the rank test to reach ALPHA (p is then its floor)
    judgement: Judgement
    min_effect: float = MIN_EFFECT  # the bar the change was held to
    decided_by: Decider = "rank test"
    not_judged: str = ""  # why a move is not judged at all ("": it is): a busy host, a rule in ERROR

    @property
    def regression(self) -> bool:
        """Worse beyond the noise, decided by the rank test or a minimum effect, and judged."""
        return self.judgement == "worse" and self.decided_by != "undecided" and not self.not_judged


@dataclass(frozen=True)
class Series:
    """One metric of one run: its unit, direction and every sample (by repeat)."""

    unit: str
    direction: Direction
    values: tuple[float, ...]


MetricKey = tuple[str, str, str]  # rule, configuration, metric name


def relative_effect(a: float, b: float) -> float:
    """(b - a) / |a|; 0 when both are 0, +-inf when only a is."""
    if a == 0:
        return 0.0 if b == 0 else math.copysign(math.inf, b)
    return (b - a) / abs(a)


def metric_moved(key: MetricKey, a: Series, b: Series, min_effect: float = MIN_EFFECT,
                 alpha: float = ALPHA, bar: Bar = "given") -> Moved | None:
    """``key``'s move from run a to run b if it is beyond the noise, else None. ``bar`` says what
    ``min_effect`` is, and so whether it decides where the rank test cannot (``guessed``: it does not)."""
    if not a.values or not b.values:
        return None
    sa, sb = Spread.of(a.values), Spread.of(b.values)
    if not (sa.median < sb.lo and sa.hi < sb.median) and not (sb.median < sa.lo and sb.hi < sa.median):
        return None  # a median lies within the other run's spread
    effect = relative_effect(sa.median, sb.median)
    if abs(effect) < min_effect:
        return None
    floor = smallest_p(sa.n, sb.n)
    tested = floor <= alpha
    p = mann_whitney(a.values, b.values)[1] if tested else floor
    if tested and p > alpha:
        return None
    up = sb.median > sa.median
    judgement: Judgement = ("changed" if b.direction == "parameter"
                            else "better" if up == (b.direction == "higher-better") else "worse")
    return Moved(*key, b.unit, b.direction, sa, sb, effect, p, tested, judgement, min_effect,
                 "rank test" if tested else _DECIDER[bar])


def _waits(run: Mapping[MetricKey, Series], rc: Key, label: str) -> tuple[str, tuple[float, ...]]:
    """How long a run's vCPUs waited for a host CPU around a rule (``rc``: rule, configuration), named
    for the sentence: its own figure; for a rule that records none (buffered-direct, stall-tolerance)
    the figures of the run's other rules on the same configuration, which ran in the same guest minutes
    before or after it."""
    own = run.get((*rc, WAIT_PROPERTY))
    if own is not None and own.values:
        return label, own.values
    others = tuple(v for (_, config, name), s in run.items() if config == rc[1] and name == WAIT_PROPERTY
                   for v in s.values)
    return f"{label}'s other rules on {rc[1]}", others


def moved_metrics(a: Mapping[MetricKey, Series], b: Mapping[MetricKey, Series], min_effect: float | None = None,
                  min_effects: Mapping[str, float] = MIN_EFFECTS, alpha: float = ALPHA,
                  labels: tuple[str, str] = ("run A", "run B"),
                  not_judged: Mapping[Key, str] | None = None) -> list[Moved]:
    """Every metric both runs measured that moved beyond the noise, sorted by key.

    ``min_effect`` None: each metric's ``min_effects`` entry (the measured table by default), else
    :data:`MIN_EFFECT` as a guess; a number: that bar for every metric. The host's evidence
    (``HOST_EVIDENCE``: how busy the host was) is no metric of the guest and never moves; it
    decides whether the numbers that follow the host CPU are judged (model/across/contention.py;
    ``labels`` name the runs in its sentence; a rule that records no wait of its own takes the
    run's other rules' on its configuration). ``not_judged``: per rule and configuration, why its
    moves are not judged (a rule that ended in ERROR in either run)."""
    out = []
    busy: dict[Key, str] = {}
    for key in sorted(set(a) & set(b)):
        if key[2] in HOST_EVIDENCE:
            continue
        measured = min_effects.get(key[2])
        bar: Bar = "given" if min_effect is not None else "measured" if measured is not None else "guessed"
        effect = min_effect if min_effect is not None else measured if measured is not None else MIN_EFFECT
        m = metric_moved(key, a[key], b[key], effect, alpha, bar)
        if m is None:
            continue
        rc = key[:2]
        if rc not in busy:
            busy[rc] = busy_host(dict(_waits(run, rc, label) for label, run in zip(labels, (a, b), strict=True)))
        why = (not_judged or {}).get(rc, "")
        if not why and busy[rc] and m.direction != "parameter" and HOST_CPU_BOUND.fullmatch(m.name):
            why = busy[rc]
        out.append(replace(m, not_judged=why) if why else m)
    return out
