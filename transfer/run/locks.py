"""One lock shared by every worker of a run, so trial counts stay exact across processes.

Workers decide "is another trial needed?" and take it under this lock. On one machine it is a
file lock beside the journal; with PostgreSQL it is a session advisory lock in the same database,
so workers on different machines serialise on it too.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    with FileLock(str(path)):
        yield


class AdvisoryLock:
    """`pg_advisory_lock` on its own connection of the study storage's engine, keyed by the
    run name (a session lock: a worker that dies releases it with its connection)."""

    def __init__(self, engine, name: str):
        self.key = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
        self.engine = engine

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        from sqlalchemy import text

        with self.engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": self.key})
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})


def run_lock(kind: str, *, run_dir: Path, storage=None, name: str = ""):
    """A zero-argument callable returning the run's lock context."""
    if kind == "postgres":
        return AdvisoryLock(storage.engine, name)
    path = run_dir / ".workers.lock"
    return lambda: file_lock(path)
