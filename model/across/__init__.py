"""Arithmetic across runs: what makes two runs comparable and what moved between them.

series (the job a run belongs to), fingerprint (what a run ran on, and what changed between two),
metrics (each measured property's unit and direction), moves (verdict flips, flakiness, the rank test
and the minimum effects: what ``python -m reports.compare`` and ``--baseline`` report), run_to_run (the
run-to-run noise ``python -m bench.noise`` measures).
"""
