"""The worker half of a minimal repro: what the child forked for one cell's minimization
runs (runner.py hands it to a zygote as a `Work`). A module of its own, without torch, so
that the driver names it without importing what the minimizer needs."""

from __future__ import annotations

from harness.repro.job import Job, Summary


def minimized(job: Job) -> Summary:
    from harness.repro.minimize import minimize

    return minimize(job)
