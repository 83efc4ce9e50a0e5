"""One measured window from both sides: the guest tools plus the host counters and tracer."""
