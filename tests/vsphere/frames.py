"""What ``pytest -l`` could print of an exception raised by the project's code: the locals of its frames."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def shown_locals(exc: BaseException, under: Path = ROOT / "hypervisors") -> str:
    """The reprs of every local of every frame under ``under`` in the tracebacks pytest would show:
    the exception's own, and those of the causes and unsuppressed contexts it chains to."""
    texts: list[str] = []
    shown: BaseException | None = exc
    while shown is not None:
        tb = shown.__traceback__
        while tb is not None:
            if Path(tb.tb_frame.f_code.co_filename).is_relative_to(under):
                texts.append(repr(tb.tb_frame.f_locals))
            tb = tb.tb_next
        shown = shown.__cause__ or (None if shown.__suppress_context__ else shown.__context__)
    return "\n".join(texts)
