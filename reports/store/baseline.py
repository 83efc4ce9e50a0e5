"""``--baseline REF``: a stored run every rule compares its numbers with (model/across/against_baseline.py).

REF is a run id in the results store, a results directory (imported into the store on the way,
once), or ``last``: the newest complete stored run of the run's series (model/across/series.py: ``--series``
or the default derived from the job; whatever QEMU, libvirt, kernel, machine type, image or fio it
ran on) that reached a verdict, and for each rule and configuration the newest such run with a
verdict for it.
A baseline JSON file made by ``--save-baseline`` is the buffered-direct rule's own older form and is
not handled here. Resolved once, before any guest starts; an incomplete run (interrupted), one in
which no rule reached a verdict (every rule an error or a skip: ``--machine none``) or a missing
one is refused with the reason.

A verdict is a pass or a failure. A rule whose own verdict was reached but whose comparison found
no baseline is stored as an error (model.across.against_baseline.BaselineMissing), and its numbers are a
baseline all the same: else a rule new to a pipeline that always passes ``--baseline last`` would
never get one. Any other error or a skip is no verdict: its numbers may be partial.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from model.across.against_baseline import BaselineMissing
from model.across.moves import Key, Series
from reports.store.engine import Store, StoredRun
from reports.store.schema import parse_run_id, verdicts
from reports.store.store_error import StoreError


@dataclass(frozen=True)
class StoredBaseline:
    """A stored run's metric series by (rule, configuration), and how to name it in a verdict."""

    run: StoredRun
    store: str
    series: Mapping[Key, Mapping[str, Series]] = field(default_factory=dict)
    #: ``last``: the older run a (rule, configuration) was taken from, where ``run`` had no verdict for it
    taken_from: Mapping[Key, StoredRun] = field(default_factory=dict)
    #: why a (rule, configuration) has no baseline, for those ``run`` holds without a verdict
    gaps: Mapping[Key, str] = field(default_factory=dict)
    #: ``last``: how many older complete runs of the same series were searched as well
    searched_older: int = 0
    #: The series (model/across/series.py) of the run that compares with it ("": not known)
    own_series: str = ""

    @property
    def source(self) -> str:
        return self._named(self.run)

    def source_for(self, rule: str, config: str) -> str:
        """The run this rule and configuration are compared with: ``run``, or for ``last`` the
        newest older run with a verdict for them."""
        return self._named(self.taken_from.get((rule, config), self.run))

    def _named(self, run: StoredRun) -> str:
        """``run 2 (results/...)``, and, for a run of another series than the one comparing (a run
        id or directory given), ``, of another series (NAME)``: two series are never mixed silently."""
        other = f", of another series ({run.series})" if self.own_series and run.series != self.own_series else ""
        return f"run {run.id}" + (f" ({run.source})" if run.source else "") + other

    def for_rule(self, rule: str, config: str) -> Mapping[str, Series] | None:
        return self.series.get((rule, config))

    def missing(self, rule: str, config: str, why: str = "") -> str:
        """The sentence for a rule with no baseline: "no baseline for queue-depth on <config> in run 2: ..." """
        if not why:
            why = self.gaps.get((rule, config)) or f"it did not run {rule} on {config}"
            if self.searched_older:
                why += f", and none of the {self.searched_older} older complete runs of series {self.run.series} " \
                       "has a verdict for it"
        return f"no baseline for {rule} on {config} in {self.source_for(rule, config)}: {why}"


def resolve_baseline(ref: str, store_url: str | None, series: str) -> StoredBaseline:
    """The baseline run ``ref`` names (``last``: of ``series``), with its metric series; StoreError
    with the reason and the remedy."""
    if store_url is None:
        raise StoreError(f"--baseline {ref} names a stored run, and --store none gives no store to find it in")
    store = Store(store_url)
    older: list[StoredRun] = []
    try:
        if ref == "last":
            runs = [r for r in store.series_runs(series) if verdicts_reached(store, r.id)]  # errors: no baseline
            if not runs:
                raise StoreError(f"--baseline last: {store.shown} has no complete run of series {series} with a "
                                 f"verdict; run the suite once without --baseline first (or give --series the name "
                                 f"of an earlier run's series: python -m reports.store list shows them)")
            run = runs[-1]
            older = runs[:-1]
        elif (run_id := parse_run_id(ref)) is not None:
            run = store.run(run_id)
        elif Path(ref).is_dir():
            run = store.run(store.import_dir(Path(ref))[0])
        else:
            raise StoreError(f"--baseline {ref}: neither a stored run id, a results directory, 'last', nor a baseline "
                             f"file (python -m reports.store --store {store.shown} list shows the runs)")
        if not verdicts_reached(store, run.id):
            raise StoreError(f"--baseline {ref}: no rule reached a verdict in run {run.id} (each is an error, a skip "
                             f"or not run): it is never used as a baseline; give a run that has verdicts")
        if not run.complete:
            raise StoreError(f"--baseline {ref}: run {run.id} is incomplete (interrupted): it is never used as a "
                             f"baseline; give a complete run")
        return _baseline(store, run, older, series)
    finally:
        store.close()


def _reached(outcome: str, message: str) -> bool:
    """Whether a stored outcome is a verdict: a pass or a failure, or an error that only says the
    rule's comparison found no baseline (its own verdict was reached: see the module's docstring)."""
    return outcome in ("passed", "failed") or (outcome == "error"
                                               and message.startswith(f"{BaselineMissing.__name__}: "))


def stored_outcomes(store: Store, run_id: int) -> dict[Key, tuple[str, str]]:
    """Each (rule, configuration)'s stored outcome and message in a run."""
    with store.connect() as conn:
        rows = conn.execute(sa.select(verdicts.c.rule, verdicts.c.config, verdicts.c.outcome, verdicts.c.message)
                            .where(verdicts.c.run_id == run_id))
        return {(r.rule, r.config): (r.outcome, r.message) for r in rows}


def verdicts_reached(store: Store, run_id: int) -> set[Key]:
    """The (rule, configuration)s that reached a verdict in a run."""
    return {k for k, (outcome, message) in stored_outcomes(store, run_id).items() if _reached(outcome, message)}


def _baseline(store: Store, run: StoredRun, older: list[StoredRun], own_series: str) -> StoredBaseline:
    """The series of every (rule, configuration) with a verdict in ``run``; for one without, the
    newest of ``older`` (``last``'s other candidates, oldest first) with a verdict for it. Errors
    and skips are never a baseline: their numbers may be partial."""
    series: dict[Key, dict[str, Series]] = {}
    taken: dict[Key, StoredRun] = {}
    gaps: dict[Key, str] = {}
    for candidate in [run, *reversed(older)]:
        outcomes = stored_outcomes(store, candidate.id)
        wanted = {k for k, (o, m) in outcomes.items() if _reached(o, m) and k not in series}
        if candidate is run:
            for k, (outcome, message) in outcomes.items():
                if k not in wanted:
                    said = message.splitlines()[0][:200] if message else ""
                    gaps[k] = f"its outcome there is {outcome}" + (f" ({said})" if said else "")
        if not wanted:
            continue
        for (rule, config, name), s in store.series(candidate.id).items():
            if (rule, config) in wanted:
                series.setdefault((rule, config), {})[name] = s
        for k in wanted:
            series.setdefault(k, {})
            if candidate is not run:
                taken[k] = candidate
                gaps.pop(k, None)
    return StoredBaseline(run, store.shown, series, taken, gaps, len(older), own_series)
