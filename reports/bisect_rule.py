"""Which rule a bisect looks for: ``--rule``, or the one a failure names: a reproducer bundle's
(``--bundle DIR``: its ``configuration.json``), a run's (``--from-run DIR``: its results directory or
junit.xml), or a stored run's (``--from-run ID --store URL``). A run whose failures name several rules,
or none, is a usage error that lists them: the bisect looks for one rule at a time."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from model.rules import RULE_MODULES
from reports.store import Store, StoreError, read_results_dir


class RuleUnknown(ValueError):
    """The rule cannot be told from what was given; the message says what to give."""


def rule_name(given: str, option: str = "--rule") -> str:
    """The rule's name (``queue-depth``) from it or its ``-k`` form (``queue_depth``)."""
    names = [m.RULE for m in RULE_MODULES]
    name = given.replace("_", "-")
    if name not in names:
        raise RuleUnknown(f"{option} {given}: no such rule; the rules are {', '.join(names)}")
    return name


def bundle_rule(bundle: Path) -> str:
    """The rule a reproducer bundle replays, from its ``configuration.json``."""
    path = bundle / "configuration.json"
    try:
        rule = json.loads(path.read_text(encoding="utf-8")).get("rule")
    except (OSError, ValueError, AttributeError) as e:
        raise RuleUnknown(f"--bundle {bundle}: its configuration.json cannot be read ({e}); give --rule RULE") from None
    if not isinstance(rule, str):
        raise RuleUnknown(f"--bundle {bundle}: its configuration.json names no rule; give --rule RULE")
    return rule_name(rule, f"--bundle {bundle}: its rule")


def failed_rule(outcomes: Iterable[tuple[str, str]], where: str) -> str:
    """The one rule that failed among ``(rule, outcome)`` pairs, or RuleUnknown naming what did."""
    failed = sorted({rule for rule, outcome in outcomes if outcome == "failed"})
    if not failed:
        raise RuleUnknown(f"--from-run {where}: no rule failed in it: there is nothing to bisect")
    if len(failed) > 1:
        raise RuleUnknown(f"--from-run {where}: {', '.join(failed)} failed in it; give --rule RULE for the one to "
                          "bisect")
    return rule_name(failed[0], f"--from-run {where}: its rule")


def run_rule(run: str, store_url: str | None) -> str:
    """The rule that failed in ``run``: a stored run's id (with ``store_url``), else a results
    directory or its junit.xml."""
    if run.isdigit() and store_url:
        try:
            store = Store(store_url, create=False)
            try:
                verdicts: Mapping[tuple[str, str], str] = store.verdicts(int(run))
            finally:
                store.close()
        except StoreError as e:
            raise RuleUnknown(f"--from-run {run}: {e}") from None
        if not verdicts:
            raise RuleUnknown(f"--from-run {run}: the store has no run {run} (or it judged nothing)")
        return failed_rule(((rule, outcome) for (rule, _), outcome in verdicts.items()), run)
    path = Path(run)
    directory, junit = (path.parent, path) if path.suffix == ".xml" else (path, None)
    try:
        data = read_results_dir(directory, junit)
    except StoreError as e:
        hint = " (a stored run's id needs --store URL)" if run.isdigit() else ""
        raise RuleUnknown(f"--from-run {run}: {e}{hint}") from None
    return failed_rule(((rule, outcome) for (rule, _), (outcome, _) in data.verdicts.items()), run)


def resolve_rule(rule: str | None, bundle: Path | None, from_run: str | None, store_url: str | None) -> str:
    """The rule to bisect: ``--rule``, else the bundle's, else the run's; given both, they must agree."""
    found = [("--rule", rule_name(rule))] if rule is not None else []
    if bundle is not None and (rule is None or (bundle / "configuration.json").is_file()):
        found.append((f"--bundle {bundle}", bundle_rule(bundle)))
    if from_run is not None:
        found.append((f"--from-run {from_run}", run_rule(from_run, store_url)))
    if not found:
        raise RuleUnknown("give the rule to bisect: --rule RULE, --bundle DIR (a reproducer bundle) or --from-run RUN "
                          "(a results directory, or a stored run's id with --store)")
    names = {name for _, name in found}
    if len(names) > 1:
        raise RuleUnknown("the rule is named twice, differently: " + "; ".join(f"{w}: {n}" for w, n in found))
    return found[0][1]
