"""``--baseline REF``: a stored run every rule compares its numbers with (model/rules/baseline.py).

REF is a run id in the results store, a results directory (imported into the store on the way,
once), or ``last``: the newest complete stored run of the same hypervisor and controllers (a set:
``virtio-blk,virtio-scsi`` finds a run of ``virtio-scsi,virtio-blk``). A baseline JSON file made by
``--save-baseline`` is the buffered-direct rule's own older form and is not handled here. Resolved once, before any guest starts; an incomplete run (interrupted) or a
missing one is refused with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from model.compare import Key, Series
from model.fingerprint import same_option
from reports.store import Store, StoredRun, StoreError


@dataclass(frozen=True)
class StoredBaseline:
    """A stored run's metric series by (rule, configuration), and how to name it in a verdict."""

    run: StoredRun
    store: str
    series: Mapping[Key, Mapping[str, Series]] = field(default_factory=dict)

    @property
    def source(self) -> str:
        where = f" ({self.run.source})" if self.run.source else ""
        return f"run {self.run.id}{where}"

    def for_rule(self, rule: str, config: str) -> Mapping[str, Series] | None:
        return self.series.get((rule, config))


def resolve_baseline(ref: str, store_url: str | None, hypervisor: str, controllers: tuple[str, ...]) -> StoredBaseline:
    """The baseline run ``ref`` names, with its series; StoreError with the reason and the remedy."""
    if store_url is None:
        raise StoreError(f"--baseline {ref} names a stored run, and --store none gives no store to find it in")
    store = Store(store_url)
    try:
        if ref == "last":
            runs = [r for r in store.runs() if r.complete and r.options.get("hypervisor") == hypervisor
                    and same_option("controllers", r.options.get("controllers"), ",".join(controllers))]
            if not runs:
                raise StoreError(f"--baseline last: {store.shown} has no complete run of --hypervisor {hypervisor} "
                                 f"--controllers {','.join(controllers)}; run the suite once without --baseline first")
            run = runs[-1]
        elif ref.isdigit():
            run = store.run(int(ref))
        elif Path(ref).is_dir():
            run = store.run(store.import_dir(Path(ref))[0])
        else:
            raise StoreError(f"--baseline {ref}: neither a stored run id, a results directory, 'last', nor a baseline "
                             f"file (python -m reports.store --store {store.shown} list shows the runs)")
        if not run.complete:
            raise StoreError(f"--baseline {ref}: run {run.id} is incomplete (interrupted): it is never used as a "
                             f"baseline; give a complete run")
        by_key: dict[Key, dict[str, Series]] = {}
        for (rule, config, name), s in store.series(run.id).items():
            by_key.setdefault((rule, config), {})[name] = s
        return StoredBaseline(run, store.shown, by_key)
    finally:
        store.close()
