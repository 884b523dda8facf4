"""The identity of the code that decides a trial's result, for the fingerprint.

A trial's loss is decided by the proxy family, the trainer, the data loader and the μP rules;
reporting, plotting and the verdict only read the trials afterwards. Each part is hashed from
its source files (sha256 over the files' bytes, by path relative to the import root), so a fix
to the trainer makes a new fingerprint — its trials are never reused silently — while an edit
to `report.py` does not invalidate an archive (Bazel's and pytest's cache keys, applied to
ourselves).

A custom family (`proxy=custom`) is hashed by its own `source_hash()` in the plan instead of
the built-in family's files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CODE_PARTS", "changed_parts", "code_hashes", "import_root"]

# Part → the files that decide a trial's result, relative to the import root (the folder that
# holds the `transfer` and `proxies` packages: a checkout or site-packages).
CODE_PARTS: dict[str, tuple[str, ...]] = {
    "family": ("proxies/__init__.py", "proxies/registry.py", "proxies/transformer.py",
               "transfer/search/family.py"),
    "trainer": ("transfer/search/trainer.py", "transfer/search/training.py"),
    "data": ("transfer/core/data.py",),
    "rules": ("transfer/core/rules.py", "transfer/core/params.py",
              "transfer/core/scaling.py"),
}
HASH_CHARS = 16


def import_root() -> Path:
    """The folder this installation imports `transfer` from."""
    return Path(__file__).resolve().parents[2]


def code_hashes(root: Path | None = None, parts: Mapping[str, tuple[str, ...]] = CODE_PARTS
                ) -> dict[str, str]:
    """Part → the first 16 hex chars of the sha256 over its files (path and bytes, in order); a
    missing file hashes as absent, so deleting one changes the part too."""
    root = Path(root) if root is not None else import_root()
    out = {}
    for part, files in parts.items():
        h = hashlib.sha256()
        for rel in files:
            path = root / rel
            h.update(rel.encode() + b"\0")
            h.update(path.read_bytes() if path.is_file() else b"<absent>")
            h.update(b"\0")
        out[part] = h.hexdigest()[:HASH_CHARS]
    return out


def changed_parts(old: Mapping[str, str] | None, new: Mapping[str, str]) -> list[str]:
    """The parts whose hash differs (every part when `old` recorded none)."""
    if not old:
        return sorted(new)
    return sorted(p for p in set(old) | set(new) if old.get(p) != new.get(p))
