"""A stored run the run's verdict was compared with (``--baseline RUN``), as the bundle carries it
(``stored_baseline`` in configuration.json, fixtures/reproducer_baseline.py): the replay's verdict is
compared with the same series by model/across/against_baseline.py, as the run's was. A rule's replay
that judges against it calls :func:`against_stored` on its own verdict.
"""

from __future__ import annotations

from collections.abc import Mapping

from model.across.against_baseline import against_baseline
from model.across.moves import Series
from model.judging.spec import DIRECTIONS
from model.judging.verdict import RuleVerdict
from replay.qemu import CannotTest


def _series(name: object, s: object) -> Series:
    if not isinstance(s, dict) or s.get("direction") not in DIRECTIONS or not isinstance(s.get("values"), list):
        raise TypeError(f"{name}: {s!r} is not a series (unit, direction, values)")
    direction = next(d for d in DIRECTIONS if d == s["direction"])
    return Series(str(s.get("unit", "")), direction, tuple(float(v) for v in s["values"]))


def stored_series(config: Mapping[str, object]) -> tuple[dict[str, Series] | None, str, str] | None:
    """(series by metric or None, the run as the verdict names it, why it has none) of the bundle's
    ``stored_baseline``; None where the run compared with no stored run."""
    stored = config.get("stored_baseline")
    if stored is None:
        return None
    try:
        if not isinstance(stored, dict) or not isinstance(stored.get("series"), (dict, type(None))):
            raise TypeError(f"{stored!r} is not a baseline (source, series, missing)")
        raw = stored["series"]
        series = None if raw is None else {str(name): _series(name, s) for name, s in raw.items()}
        return series, str(stored["source"]), str(stored.get("missing") or "")
    except (KeyError, TypeError, ValueError) as e:
        raise CannotTest(f"the bundle's stored_baseline could not be read ({type(e).__name__}: {e}): the run's "
                         "comparison with its baseline cannot be made again") from e


def against_stored(verdict: RuleVerdict, config: Mapping[str, object]) -> RuleVerdict:
    """``verdict`` compared with the run's stored baseline as the run compared it (unchanged where the
    run had none). The run's verdict was a pass with no comparison made only as an ERROR, which has no
    bundle; a replay that passes where the baseline held nothing to compare cannot test."""
    stored = stored_series(config)
    if stored is None:
        return verdict
    series, source, missing = stored
    compared = against_baseline(verdict, verdict.properties, series, source, missing)
    if compared.passed and (series is None or compared.properties.get("baseline_metrics_judged") == 0):
        raise CannotTest(f"the replay passed, but no metric could be judged against the run's baseline {source}"
                         f"{': ' + missing if missing else ''}: the run would have ended in an ERROR")
    return compared
