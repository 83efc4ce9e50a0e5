"""What the report draws for a verdict: typed figures each rule's judge builds from its own inputs.

The report reads these fields, never the JUnit property names, so renaming a property cannot
break a picture. Two kinds:

- :class:`DepthFigure`, the queue-depth picture: for each offered depth, what the workload
  offered, what the guest's block layer held (aqu-sz) and what the host saw in flight;
- :class:`PairFigure`, the other rules' picture: labelled pairs a reader compares, the
  expected or guest side against the host side (or two like figures, such as two queues).

Example::

    PairFigure((Pair("request size: expected / host", 1024.0, 64.0, "KiB"),))
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DepthGroup:
    """One offered depth's three figures."""

    offered: int
    guest_aqu_sz: float
    host_depth: float


@dataclass(frozen=True)
class DepthFigure:
    """Grouped bars, one group per offered depth, in increasing order of depth."""

    groups: tuple[DepthGroup, ...]


@dataclass(frozen=True)
class Pair:
    """Two figures side by side: ``first`` is the expected or guest side (or the first of two
    like figures), ``second`` the host side (or the second); both in ``unit``."""

    label: str
    first: float
    second: float
    unit: str = ""


@dataclass(frozen=True)
class PairFigure:
    pairs: tuple[Pair, ...]


Figure = DepthFigure | PairFigure


def pair_figure(*pairs: Pair) -> tuple[Figure, ...]:
    """A verdict's figures for these pairs: one figure, or none when there is no pair to draw."""
    return (PairFigure(pairs),) if pairs else ()
