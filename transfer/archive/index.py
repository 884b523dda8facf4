"""`index.csv`: one row per run, read and written with pandas, validated on every read.

The index is a cache of the runs' `run.json` files; any problem reading it is an `ArchiveError`
naming the file and the fix (`check --rebuild`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd

from transfer.archive.files import ArchiveError, json_default, short

INDEX_COLUMNS = ("name", "created", "status", "model", "fingerprint", "parametrization",
                 "proxy_widths", "winners", "validated", "drift_log2", "saved_gpu_hours",
                 "code_version", "config_fingerprint", "code", "reused_from")
STATUSES = ("running", "finished", "rejected", "inconclusive", "failed")
FLOAT_COLUMNS = ("drift_log2", "saved_gpu_hours")
JSON_COLUMNS = ("proxy_widths", "winners", "code", "reused_from")
# Columns added after archives existed: an index without them reads as empty cells
LATER_COLUMNS = ("config_fingerprint", "code", "reused_from")  # lists/dicts, stored in the CSV as JSON strings
RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+-]*")


def index_cell(key: str, value: Any) -> Any:
    if key in JSON_COLUMNS and not isinstance(value, str) and value is not None:
        return json.dumps(value, sort_keys=True, default=json_default)
    return value


def parse_index(path: Path) -> pd.DataFrame:
    """Read and validate index.csv; any problem is an ArchiveError naming the file."""
    fix = f"run `python -m transfer.archive --root {path.parent} check --rebuild`"
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise ArchiveError(f"{path}: unreadable index ({short(e)}); {fix}") from None
    for c in LATER_COLUMNS:
        if c not in df.columns:
            df[c] = ""
    missing = [c for c in INDEX_COLUMNS if c not in df.columns]
    if missing:
        raise ArchiveError(f"{path}: index lacks columns {', '.join(missing)}; {fix}")
    bad = [n for n in df["name"] if not RUN_NAME.fullmatch(n)]
    if bad or df["name"].duplicated().any():
        what = f"invalid run name {bad[0]!r}" if bad else "duplicate run names"
        raise ArchiveError(f"{path}: {what}; {fix}")
    return typed(df[list(INDEX_COLUMNS)])


def typed(df: pd.DataFrame) -> pd.DataFrame:
    """Index dtypes: numbers as float64, `validated` as nullable boolean, the rest as text."""
    df = df.copy()
    for c in FLOAT_COLUMNS:
        df[c] = pd.to_numeric(df[c].replace("", None), errors="coerce").astype("float64")
    df["validated"] = df["validated"].map({"True": True, "False": False}).astype("boolean")
    for c in set(INDEX_COLUMNS) - {*FLOAT_COLUMNS, "validated"}:
        df[c] = df[c].astype("str")
    return df


def index_frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame([{c: index_cell(c, r.get(c)) for c in INDEX_COLUMNS} for r in rows],
                      columns=list(INDEX_COLUMNS))
    return df.sort_values("created", kind="stable", na_position="first").reset_index(drop=True)
