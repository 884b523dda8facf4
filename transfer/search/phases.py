"""Wall seconds per phase of a run (startup, probes, stages, grids, coordinate checks,
finalize), measured where each runs and kept in cost.json beside the prediction."""

from __future__ import annotations

import os
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
    """Seconds since this process started (interpreter start-up and imports included): Linux's
    /proc; 0 where that is not available."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0
