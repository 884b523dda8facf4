"""Wall seconds per phase of a run (startup, probes, stages, grids, coordinate checks,
finalize), measured where each runs and kept in cost.json beside the prediction."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def timed(phases: dict[str, float], name: str) -> Iterator[None]:
    """Add the wall seconds of the `with` body to `phases[name]`."""
    t = time.perf_counter()
    try:
        yield
    finally:
        phases[name] = phases.get(name, 0.0) + time.perf_counter() - t


def process_age() -> float:
    """Seconds since this process first imported `transfer` (`transfer.STARTED`): its imports,
    Hydra and the planning before a run; the interpreter's own start-up before it (tens of ms)
    is not counted. Linux's /proc start time is not used: it is the fork's, and a shell that
    execs the last command of a chain (`( pip install … && python -m transfer.sweep … )`) forks
    once for the whole chain, so it counted the install as startup (~110 s in the fresh clones
    at 477d339 and f0fff51, whose run folders were written ~10 s after the install ended)."""
    import transfer

    return max(0.0, time.time() - transfer.STARTED)
