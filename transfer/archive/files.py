"""Archive files: atomic writes (temp file + rename) and plain-data reads (json, yaml.safe_load).

Readers see the old file or the new one, never half of one. Nothing read here is imported or
instantiated: a `_target_` is just a string, and Python YAML tags are refused.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from transfer.core.errors import UserError

TMP_PREFIX = ".tmp-"


class ArchiveError(UserError):
    """A missing, corrupted or hand-edited archive file; the message names the file and the fix."""


def json_default(obj: Any) -> Any:
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalars
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON data: {obj!r}")


def strict(obj: Any) -> Any:
    """NaN and ±inf (a diverged point, an undefined drift) become null: strict JSON for any
    reader, not Python's NaN extension."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    return obj


def dumps(obj: Any) -> str:
    return json.dumps(strict(obj), indent=2, default=json_default, allow_nan=False) + "\n"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write to a temp file beside `path`, fsync, then rename: readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TMP_PREFIX + path.name + ".")
    try:
        os.fchmod(fd, 0o644)  # mkstemp makes 0600; an archive is shared, others must read it
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ArchiveError(f"{path}: unreadable JSON ({short(e)}); restore the file or delete "
                           "the run folder") from None


def read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ArchiveError(f"{path}: unreadable YAML, or YAML that is not plain data "
                           f"({short(e)}); restore the file or delete the run folder") from None


def short(e: BaseException) -> str:
    return " ".join(str(e).split())[:160]


def atomic_copy(src: Path | str, path: Path) -> None:
    """Copy `src` to `path` through a temp file beside it, so `path` is never partial."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TMP_PREFIX + path.name + ".")
    os.fchmod(fd, 0o644)  # mkstemp makes 0600; an archive is shared, others must read it
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
