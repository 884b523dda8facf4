"""The sweep archive: one folder per run plus `index.csv`, written atomically, read as data.

Each run folder holds a `run.json` with that run's index row, so the index is a cache that
`check(rebuild=True)` can always recreate. Archived files are parsed with `json` and
`yaml.safe_load` only: nothing named in them is imported or instantiated.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from filelock import FileLock

from transfer.archive.files import (
    ArchiveError,
    atomic_copy,
    atomic_write_bytes,
    dumps,
    read_json,
    read_yaml,
    short,
)
from transfer.archive.index import (
    INDEX_COLUMNS,
    JSON_COLUMNS,
    RUN_NAME,
    STATUSES,
    index_frame,
    parse_index,
    typed,
)
from transfer.core.errors import UserError

INDEX = "index.csv"
LOCK = ".index.lock"
RUN_JSON = "run.json"
# Plain-data files of a run; each is parsed by `load_run` and verified by `check`.
DATA_FILES = {"config": "config.yaml", "validation": "validation.json", "cost": "cost.json",
              "target": "target.yaml"}


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def newest_first(df: pd.DataFrame) -> pd.DataFrame:
    """Rows newest first. `created` has one-second resolution and two runs can finish in the
    same second; the index keeps rows in the order they were written, so among equal times the
    later row is the newer one."""
    return df.iloc[::-1].sort_values("created", ascending=False, kind="stable")


class Archive:
    """The archive rooted at `root` (default layout: `sweeps/`). See sweeps/README.md."""

    def __init__(self, root: Path | str = "sweeps"):
        self.root = Path(root)
        self.index_path = self.root / INDEX
        self._lock = FileLock(str(self.root / LOCK))

    # ---- paths -------------------------------------------------------------------------------

    def run_dir(self, name: str) -> Path:
        """The folder of run `name`; the name must be a plain folder name (no paths)."""
        if not isinstance(name, str) or not RUN_NAME.fullmatch(name):
            raise UserError(f"run name {name!r} is not a plain folder name; use letters, digits "
                            "and . _ - = + (not starting with a dot)")
        return self.root / name

    def _path(self, name: str, relpath: str | Path) -> Path:
        rel = Path(relpath)
        if rel.is_absolute() or not rel.parts or ".." in rel.parts:
            raise ValueError(f"relpath must stay inside the run folder, got {str(relpath)!r}")
        return self.run_dir(name) / rel

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with self._lock:
            yield

    # ---- writing -----------------------------------------------------------------------------

    def create_run(self, name: str, *, fingerprint: str, **fields: Any) -> Path:
        """Create (or resume) run `name` with status `running`; refuse a different fingerprint."""
        run = self.run_dir(name)
        with self._locked():
            old = self._run_row(name) if (run / RUN_JSON).exists() else None
            if old is None and run.is_dir() and any(run.iterdir()):
                raise ArchiveError(f"{run} exists but has no {RUN_JSON}; pick another name= or "
                                   "move that folder away")
            if old is not None and old.get("fingerprint") != fingerprint:
                raise UserError(f"run {name!r} already exists in {self.root} with fingerprint "
                                f"{old.get('fingerprint')} (this config: {fingerprint}); pick "
                                f"another name= or delete {run}")
            run.mkdir(parents=True, exist_ok=True)
            self._record({"status": "running", **fields, "name": name,
                          "fingerprint": fingerprint})
        return run

    def write_bytes(self, name: str, relpath: str | Path, data: bytes) -> Path:
        path = self._path(name, relpath)
        atomic_write_bytes(path, data)
        return path

    def write_text(self, name: str, relpath: str | Path, text: str) -> Path:
        return self.write_bytes(name, relpath, text.encode("utf-8"))

    def write_json(self, name: str, relpath: str | Path, obj: Any) -> Path:
        return self.write_text(name, relpath, dumps(obj))

    def write_yaml(self, name: str, relpath: str | Path, obj: Any) -> Path:
        # safe_dump refuses anything that is not plain data, so nothing executable gets in.
        return self.write_text(name, relpath, yaml.safe_dump(obj, sort_keys=False))

    def copy_into(self, name: str, relpath: str | Path, src_path: Path | str) -> Path:
        """Copy a file (study journal, plot, base shapes) into the run, atomically."""
        path = self._path(name, relpath)
        atomic_copy(src_path, path)
        return path

    def record(self, row: dict) -> dict:
        """Upsert one run's index row (fields not given keep their value); returns the full row.

        The row goes first to the run's `run.json` (the source of truth), then to index.csv,
        both under the archive lock so concurrent writers never lose each other's rows.
        """
        with self._locked():
            return self._record(row)

    def _record(self, row: dict) -> dict:
        unknown = sorted(set(row) - set(INDEX_COLUMNS))
        if unknown:
            raise ValueError(f"unknown index columns {unknown}; allowed: {', '.join(INDEX_COLUMNS)}")
        name = row.get("name")
        run = self.run_dir(name)
        if not run.is_dir():
            raise ArchiveError(f"no run folder {run}; call create_run({name!r}, ...) first")
        old = self._run_row(name) if (run / RUN_JSON).exists() else {}
        new = {c: old.get(c) for c in INDEX_COLUMNS} | row
        new["created"] = new.get("created") or _now()
        if new.get("status") not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {new['status']!r}")
        for key in JSON_COLUMNS:  # run.json keeps lists/dicts as such
            if isinstance(new.get(key), str) and new[key]:
                with contextlib.suppress(json.JSONDecodeError):
                    new[key] = json.loads(new[key])
        atomic_write_bytes(run / RUN_JSON, dumps(new).encode())
        try:
            df = self._read_index_or_empty()
        except ArchiveError as e:  # the row is safe in run.json; a rebuild will pick it up
            raise ArchiveError(f"saved {run / RUN_JSON} but did not update the index: {e}") from None
        rows = [r for r in df.to_dict("records") if r["name"] != name] + [new]
        self._write_index(index_frame(rows))
        return new

    def _write_index(self, df: pd.DataFrame) -> None:
        atomic_write_bytes(self.index_path, df.to_csv(index=False).encode("utf-8"))

    # ---- reading -----------------------------------------------------------------------------

    def _read_index_or_empty(self) -> pd.DataFrame:
        if not self.index_path.exists():
            return typed(index_frame([]))
        return parse_index(self.index_path)

    def _run_row(self, name: str) -> dict:
        path = self.run_dir(name) / RUN_JSON
        row = read_json(path)
        if not isinstance(row, dict) or not row.get("fingerprint"):
            raise ArchiveError(f"{path}: not a run record (a JSON object with a fingerprint); "
                               "restore it or delete the run folder")
        return row

    def names(self) -> list[str]:
        """Run folders on disk (those with a run.json), sorted."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir()
                      if p.is_dir() and RUN_NAME.fullmatch(p.name) and (p / RUN_JSON).exists())

    def _unknown(self, name: str) -> ArchiveError:
        have = ", ".join(self.names()) or "none"
        return ArchiveError(f"no run {name!r} in {self.root}; available: {have}")

    def has(self, name: str, relpath: str | Path) -> bool:
        """Whether run `name` holds the file `relpath` (e.g. a plot a resumed run keeps)."""
        return self._path(name, relpath).is_file()

    def runs(self) -> pd.DataFrame:
        """The index, one row per readable run; broken run folders are skipped with a warning."""
        df = self._read_index_or_empty()
        keep = []
        for name in df["name"]:
            try:
                if not (self.run_dir(name) / RUN_JSON).exists():
                    raise ArchiveError(f"{self.run_dir(name)}: indexed run has no {RUN_JSON}")
                self._run_row(name)
                keep.append(True)
            except ArchiveError as e:
                warnings.warn(f"skipping run {name!r}: {e}", stacklevel=2)
                keep.append(False)
        return df[pd.Series(keep, index=df.index, dtype=bool)].reset_index(drop=True)

    def trials(self, names: list[str] | None = None) -> pd.DataFrame:
        """Every run's trials.csv stacked, with a leading `run` column."""
        have = list(self.runs()["name"])
        for n in names or []:
            if n not in have:
                raise self._unknown(n)
        frames = []
        for n in names if names is not None else have:
            path = self.run_dir(n) / "trials.csv"
            if not path.exists():
                continue
            try:
                t = pd.read_csv(path)
            except (OSError, UnicodeDecodeError, pd.errors.ParserError,
                    pd.errors.EmptyDataError) as e:
                warnings.warn(f"skipping {path}: unreadable ({short(e)})", stacklevel=2)
                continue
            t = t.drop(columns=["run"], errors="ignore")
            t.insert(0, "run", n)
            frames.append(t)
        if not frames:
            return pd.DataFrame(columns=["run"])
        return pd.concat(frames, ignore_index=True)

    def find(self, fingerprint: str) -> list[dict]:
        """Index rows with this fingerprint, newest first (`newest_first`), each with
        `finished: bool`."""
        df = newest_first(self.runs()[lambda d: d["fingerprint"] == fingerprint])
        return [{**r, "finished": r["status"] == "finished"} for r in df.to_dict("records")]

    def load_run(self, name: str) -> dict:
        """run.json plus config, validation, cost and target (None if absent), as plain data."""
        if not (self.run_dir(name) / RUN_JSON).exists():
            raise self._unknown(name)
        out: dict[str, Any] = {"run": self._run_row(name)}
        for key, fname in DATA_FILES.items():
            path = self.run_dir(name) / fname
            out[key] = None
            if path.exists():
                out[key] = read_json(path) if fname.endswith(".json") else read_yaml(path)
        return out

    # ---- verification ------------------------------------------------------------------------

    def _folders(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith("."))

    def _folder_problems(self, run: Path, indexed: dict[str, dict] | None) -> list[str]:
        if not RUN_NAME.fullmatch(run.name):
            return [f"{run}: not a valid run name; rename or remove the folder"]
        if not (run / RUN_JSON).exists():
            return [f"{run}: no {RUN_JSON}, so not an archived run; restore it or remove the folder"]
        try:
            row = self._run_row(run.name)
        except ArchiveError as e:
            return [str(e)]
        out = []
        if row.get("name") != run.name:
            out.append(f"{run / RUN_JSON}: name {row.get('name')!r} differs from the folder name")
        for fname in DATA_FILES.values():
            path = run / fname
            try:
                if path.exists():
                    read_json(path) if fname.endswith(".json") else read_yaml(path)
            except ArchiveError as e:
                out.append(str(e))
        if (run / "trials.csv").exists():
            try:
                pd.read_csv(run / "trials.csv")
            except (OSError, UnicodeDecodeError, pd.errors.ParserError,
                    pd.errors.EmptyDataError) as e:
                out.append(f"{run / 'trials.csv'}: unreadable CSV ({short(e)})")
        if indexed is not None:
            got = indexed.get(run.name)
            if got is None:
                out.append(f"{self.index_path}: run {run.name!r} is missing; check --rebuild adds it")
            else:
                differ = [c for c in ("created", "status", "fingerprint", "model")
                          if str(got.get(c) or "") != str(row.get(c) or "")]
                if differ:
                    out.append(f"{self.index_path}: row {run.name!r} differs from its {RUN_JSON} "
                               f"in {', '.join(differ)} (hand-edited?); check --rebuild fixes it")
        return out

    def check(self, rebuild: bool = False) -> list[str]:
        """Problems found in the archive (empty: healthy). `rebuild` then rewrites index.csv from
        the run folders' run.json; unreadable runs are left out and stay listed as problems."""
        problems: list[str] = []
        indexed: dict[str, dict] | None = None
        folders = self._folders()
        if self.index_path.exists():
            try:
                indexed = {r["name"]: r for r in parse_index(self.index_path).to_dict("records")}
            except ArchiveError as e:
                problems.append(str(e))
        elif folders:
            problems.append(f"{self.index_path}: missing; check --rebuild recreates it")
        for run in folders:
            problems += self._folder_problems(run, indexed)
        on_disk = {p.name for p in folders}
        for name in sorted(set(indexed or {}) - on_disk):
            problems.append(f"{self.index_path}: run {name!r} has no folder; check --rebuild "
                            "drops it")
        if rebuild:
            with self._locked():
                self._write_index(index_frame(self._rebuild_rows()))
        return problems

    def _rebuild_rows(self) -> list[dict]:
        rows = []
        for name in self.names():
            try:
                rows.append({**self._run_row(name), "name": name})
            except ArchiveError:
                continue  # reported by check; one broken run must not block the others
        return rows
