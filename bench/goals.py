"""The speed goals the benchmarks print beside what they measure: the project's figures for a 2-core
machine under TCG (docs/benchmarks.md has what each measured, when, and at what load).

| figure | goal | printed by |
|---|---|---|
| the default suite (13 rules x 2 controllers) on a Debian 12 cloud image, boot included | 150 s | ``bench.phases --test-image``, ``bench.rules --image`` |
| ``tox -e test`` (``CI=true bash .ci/run``) on a fresh clone | 900 s | (the CI run itself) |
| the first queue-depth verdict on the embedded guest, whole process | 10 s | ``bench.time_to_verdict`` |
| the default suite on the embedded guest, warm, the README's command, wall | 90 s | ``bench.phases``, ``bench.rules`` |
| exact tracing's IOPS cost at depth 32, each virtio controller, confidence interval narrower than it | 3 % | ``bench.trace_overhead`` |
"""

from __future__ import annotations

#: The default suite on a Debian 12 cloud image (systemd, cloud-init): boot to the last verdict.
IMAGE_SUITE_GOAL_S = 150.0
#: The project's CI run on a fresh clone.
CI_GOAL_S = 900.0
#: The first queue-depth verdict on the embedded guest, from the process's own start (imports included).
FIRST_VERDICT_GOAL_S = 10.0
#: The default suite on the embedded guest, image cached, wall time of the whole command.
EMBEDDED_SUITE_GOAL_S = 90.0
#: Exact tracing's cost in IOPS at depth 32, and the widest confidence interval that can show it.
TRACE_COST_GOAL_PCT = 3.0


def against(seconds: float, goal_s: float) -> str:
    """``"goal 90 s: met"`` or ``"goal 90 s: MISSED"``."""
    return f"goal {goal_s:.0f} s: {'met' if seconds <= goal_s else 'MISSED'}"


def suite_goal_s(image: bool) -> float:
    """The default suite's wall-time goal on a user's image (``--image``) or on the embedded guest."""
    return IMAGE_SUITE_GOAL_S if image else EMBEDDED_SUITE_GOAL_S
