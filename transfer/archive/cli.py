"""`python -m transfer.archive [--root sweeps] list | show NAME | diff A B | export | check`.

Exit 0 on success, 2 with one line on stderr for a user error, 1 when `check` finds problems.
Every command reads archived files as data; nothing named in them is imported.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from transfer.archive.store import Archive
from transfer.core.errors import EXIT_OK, EXIT_USER_ERROR, UserError

EXIT_PROBLEMS = 1
FORMATS = ("csv", "parquet")
TABLES = ("runs", "trials")
LIST_COLUMNS = ["name", "created", "status", "model", "fingerprint", "validated", "drift_log2",
                "saved_gpu_hours"]
VERDICT_KEYS = ("status", "fingerprint", "validated", "drift_log2", "saved_gpu_hours",
                "code_version")


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad command line as a one-line UserError instead of usage text."""

    def error(self, message: str):
        raise UserError(f"{message}; see `python -m transfer.archive --help`")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m transfer.archive",
                description="Browse, compare, export and verify the sweep archive.")
    p.add_argument("--root", default="sweeps", help="archive folder (default: sweeps)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("list", help="one line per archived run")
    show = sub.add_parser("show", help="a run's index row, verdict, cost and files")
    show.add_argument("name")
    diff = sub.add_parser("diff", help="config values, winners and verdicts that differ")
    diff.add_argument("a")
    diff.add_argument("b")
    exp = sub.add_parser("export", help="runs or trials across the archive as one table")
    exp.add_argument("--format", choices=FORMATS, default="csv")
    exp.add_argument("--table", choices=TABLES, default="runs")
    exp.add_argument("--out", default=None, help="file to write (default: TABLE.FORMAT; csv: - "
                     "for stdout)")
    chk = sub.add_parser("check", help="verify every run folder and the index")
    chk.add_argument("--rebuild", action="store_true", help="recreate index.csv from run.json files")
    return p


def _flatten(obj: Any, prefix: str) -> dict[str, Any]:
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out |= _flatten(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    return {prefix: obj}


def _scalars(d: dict | None) -> dict:
    return {k: v for k, v in (d or {}).items() if not isinstance(v, (dict, list))}


def cmd_list(archive: Archive, args: argparse.Namespace) -> int:
    df = archive.runs()
    if df.empty:
        print(f"no runs in {archive.root}")
        return EXIT_OK
    print(df[LIST_COLUMNS].to_string(index=False))
    return EXIT_OK


def cmd_show(archive: Archive, args: argparse.Namespace) -> int:
    run = archive.load_run(args.name)
    folder = archive.run_dir(args.name)
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                   if p.is_file() and not p.name.startswith("."))
    summary = {"run": run["run"], "validation": _scalars(run["validation"]),
               "cost": _scalars(run["cost"]), "files": files}
    print(yaml.safe_dump(summary, sort_keys=False, allow_unicode=True).rstrip())
    return EXIT_OK


def _comparable(run: dict) -> dict[str, Any]:
    row = run["run"]
    winners = row.get("winners")
    if isinstance(winners, str):
        winners = json.loads(winners or "null")
    return (_flatten({k: row.get(k) for k in VERDICT_KEYS}, "")
            | _flatten(winners or {}, "winners")
            | _flatten(run["config"] or {}, "config"))


def cmd_diff(archive: Archive, args: argparse.Namespace) -> int:
    a, b = _comparable(archive.load_run(args.a)), _comparable(archive.load_run(args.b))
    absent = "<absent>"
    rows = [(k, a.get(k, absent), b.get(k, absent)) for k in dict.fromkeys([*a, *b])
            if a.get(k, absent) != b.get(k, absent)]
    if not rows:
        print(f"runs {args.a} and {args.b} do not differ in config, winners or verdict")
        return EXIT_OK
    df = pd.DataFrame([(k, str(x), str(y)) for k, x, y in rows], columns=["key", args.a, args.b])
    print(df.to_string(index=False))
    return EXIT_OK


def have_pyarrow() -> bool:
    """pandas' parquet engine, an optional extra; looked up without importing it."""
    return importlib.util.find_spec("pyarrow") is not None


def cmd_export(archive: Archive, args: argparse.Namespace) -> int:
    df = archive.runs() if args.table == "runs" else archive.trials()
    out = args.out or f"{args.table}.{args.format}"
    if args.format == "parquet":
        if not have_pyarrow():
            raise UserError("parquet export needs pyarrow; `pip install transfer[parquet]` or use "
                            "--format csv")
        if out == "-":
            raise UserError("parquet cannot go to stdout; pass --out FILE.parquet")
        df.to_parquet(out, index=False)
    elif out == "-":
        df.to_csv(sys.stdout, index=False)
        return EXIT_OK
    else:
        df.to_csv(out, index=False)
    print(f"wrote {len(df)} {args.table} to {Path(out)}")
    return EXIT_OK


def cmd_check(archive: Archive, args: argparse.Namespace) -> int:
    problems = archive.check(rebuild=args.rebuild)
    for p in problems:
        print(p)
    if args.rebuild:
        print(f"rebuilt {archive.index_path} from {len(archive.names())} run folders")
        return EXIT_OK
    if problems:
        print(f"{len(problems)} problem(s); `python -m transfer.archive --root {archive.root} "
              "check --rebuild` recreates the index from the run folders")
        return EXIT_PROBLEMS
    print(f"archive {archive.root} OK: {len(archive.names())} runs")
    return EXIT_OK


COMMANDS = {"list": cmd_list, "show": cmd_show, "diff": cmd_diff, "export": cmd_export,
            "check": cmd_check}


def main(argv: list[str] | None = None) -> int:
    """Run one archive command; returns the exit code."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            args = _parser().parse_args(argv)
            code = COMMANDS[args.command](Archive(args.root), args)
        except UserError as e:
            code = EXIT_USER_ERROR
            print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
    for w in caught:
        print(f"warning: {' '.join(str(w.message).split())}", file=sys.stderr)
    return code
