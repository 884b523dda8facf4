"""sha256 over the source files that define some objects: a family's `source_hash`."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Iterable
from pathlib import Path


def sources_sha256(objs: Iterable[object]) -> str:
    """sha256 over the digests of the files defining `objs` (functions, classes), sorted: the
    same code installed elsewhere hashes the same. Builtins without a source file are skipped."""
    files = set()
    for obj in objs:
        try:
            files.add(inspect.getsourcefile(obj))
        except TypeError:  # builtins have no source file
            continue
    digests = sorted(hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in files if f)
    return hashlib.sha256("".join(digests).encode()).hexdigest()
