"""The report's charts are drawn while the session's last test tears down (fixtures/finish.py,
reports.html.draw_ahead): a chart drawn ahead is not drawn again when the report is written, one not
drawn ahead still is, and the last test's teardown starts the drawing in a thread the session's end
waits for (in the controller only: an xdist worker writes no report)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from fixtures import finish
from fixtures.state import RECORDS_KEY
from reports import html


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Each figure matplotlib would draw, in order (the drawing itself replaced by a stand-in)."""
    calls: list[object] = []

    def chart(figure: object) -> str:
        calls.append(figure)
        return f"<svg>{len(calls)}</svg>"

    monkeypatch.setattr(html, "chart", chart)
    monkeypatch.setattr(html, "chart_summary", lambda figure: "what it shows")
    monkeypatch.setattr(html, "_drawn", {})
    return calls


def test_a_chart_drawn_ahead_is_not_drawn_again(drawn: list[object]) -> None:
    ahead, late = object(), object()
    html.draw_ahead(cast(Any, [ahead]))
    assert drawn == [ahead]
    figure = "<figure><svg>1</svg><figcaption>what it shows</figcaption></figure>"
    assert html.figure_html(cast(Any, ahead)) == html.figure_html(cast(Any, ahead)) == figure
    assert html.figure_html(cast(Any, late)) == "<figure><svg>2</svg><figcaption>what it shows</figcaption></figure>"
    assert drawn == [ahead, late]


def config_with(figures: list[object], worker: bool = False) -> Any:
    record = SimpleNamespace(verdict=SimpleNamespace(figures=tuple(figures)))
    config = SimpleNamespace(stash=pytest.Stash(), **({"workerinput": {"workerid": "gw0"}} if worker else {}))
    config.stash[RECORDS_KEY] = {"rule[config]": record}
    return config


def test_the_last_teardown_draws_every_records_charts_in_a_thread(drawn: list[object]) -> None:
    figures = [object(), object()]
    config = config_with(figures)
    finish.pytest_runtest_teardown(cast(Any, SimpleNamespace(config=config)), None)
    config.stash[finish.AHEAD_KEY].join(timeout=60)
    assert drawn == figures
    assert [html.figure_html(cast(Any, f)) for f in figures] and drawn == figures  # not drawn again


def test_no_drawing_before_the_last_test_nor_in_an_xdist_worker(drawn: list[object]) -> None:
    config = config_with([object()])
    finish.pytest_runtest_teardown(cast(Any, SimpleNamespace(config=config)), cast(Any, object()))
    worker = config_with([object()], worker=True)
    finish.pytest_runtest_teardown(cast(Any, SimpleNamespace(config=worker)), None)
    assert finish.AHEAD_KEY not in config.stash and finish.AHEAD_KEY not in worker.stash and drawn == []
