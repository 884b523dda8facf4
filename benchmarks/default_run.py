"""The README's main command, timed from a fresh archive: wall time per phase, predicted vs
measured, and the verdict — for this checkout and, side by side in the same invocation, for an
older commit (`--baseline REV`, run from a `git worktree` with this venv's python).

    python benchmarks/default_run.py                               # μP, budget=default, 1 run
    python benchmarks/default_run.py --repeats 2 --also-sp         # + the SP run
    python benchmarks/default_run.py --budget smoke --repeats 3    # the plumbing budget
    python benchmarks/default_run.py --baseline a604fb7            # old vs new, one after the other

Runs are sequential (never two at once: they would share the cores they are timing). Each run
gets its own empty archive under --out. Prints one table; --json writes every number.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("startup", "probes", "stages", "validation", "horizon", "depth", "coord", "finalize")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="3b")
    p.add_argument("--budget", default="default")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--also-sp", action="store_true", help="also run proxy.parametrization=sp")
    p.add_argument("--parametrizations", nargs="+", choices=["mup", "sp"], default=None,
                   help="which to run (default: mup, and sp with --also-sp)")
    p.add_argument("--baseline", help="a git revision to time the same way, before this checkout")
    p.add_argument("--override", action="append", default=[], help="extra Hydra override")
    p.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "default_run")
    p.add_argument("--json", type=Path, help="write every run's numbers here")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats must be >= 1, got {args.repeats=}")
    return args


def worktree(rev: str, out: Path) -> Path:
    path = out / f"code-{rev}"
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
                       check=True, capture_output=True)
    return path


ETA_LINE = re.compile(r"^stage (\S+): \d+/\d+ trials, .*eta (\d+)m(\d+)s"
                      r"(?: \((\d+)m(\d+)s–(\d+)m(\d+)s\))?$")
STAGE_START = re.compile(r"^stage (\S+): \d+/\d+ trials done$")


FLOOR_SECONDS = 5  # a few seconds' stage: its ETA cannot be off by a meaningful fraction


def eta_lines(lines: list[tuple[float, str]], end: float,
              ends: dict[str, float] | None = None
              ) -> dict[str, list[tuple[float, float, float, float]]]:
    """Per stage, every ETA it printed as (ETA, seconds the stage then still took, the range's
    low and high end — the ETA itself where the line shows no range), in order.
    The stage ends when its last trial completed (`ends`: wall-clock seconds, from the run's
    studies, `stage_ends`); without it, where the next stage's line starts (which also counts
    what runs between the two: the after-stages probes, the finalize)."""
    printed, stage_end, current = {}, {}, None
    for t, line in lines:
        start = STAGE_START.match(line)
        if start or line.startswith(("stages done", "\n==", "==")):
            if current and current not in stage_end and (not start or start[1] != current):
                stage_end[current] = t
            current = start[1] if start else current
            continue
        m = ETA_LINE.match(line)
        if m:
            eta = 60 * int(m[2]) + int(m[3])
            low, high = ((60 * int(m[4]) + int(m[5]), 60 * int(m[6]) + int(m[7])) if m[4]
                         else (eta, eta))
            printed.setdefault(m[1], []).append((t, eta, low, high))
    return {stage: [(eta, (ends or {}).get(stage, stage_end.get(stage, end)) - t, low, high)
                    for t, eta, low, high in etas] for stage, etas in printed.items()}


def eta_errors(lines: list[tuple[float, str]], end: float,
               ends: dict[str, float] | None = None) -> dict[str, float]:
    """Per stage: the ETA printed at its first finished trial ÷ the time the stage then still
    took − 1 (`eta_lines`); a stage with under `FLOOR_SECONDS` left then is not judged."""
    return {stage: etas[0][0] / etas[0][1] - 1
            for stage, etas in eta_lines(lines, end, ends).items() if etas[0][1] > FLOOR_SECONDS}


def eta_range_errors(lines: list[tuple[float, str]], end: float,
                     ends: dict[str, float] | None = None) -> dict[str, float]:
    """`eta_errors` for what the first line showed, its range where it showed one: 0 when the
    time the stage then took lies inside it, else the nearer end's error (a line without a
    range: its ETA's)."""
    out = {}
    for stage, etas in eta_lines(lines, end, ends).items():
        _, left, low, high = etas[0]
        if left > FLOOR_SECONDS:
            out[stage] = (low / left - 1 if low > left else high / left - 1 if high < left
                          else 0.0)
    return out


def eta_worst(lines: list[tuple[float, str]], end: float,
              ends: dict[str, float] | None = None) -> dict[str, float]:
    """Per stage: the largest miss, in either direction, of any ETA it printed while more than
    `FLOOR_SECONDS` were left (`eta_lines`)."""
    out = {}
    for stage, etas in eta_lines(lines, end, ends).items():
        errors = [eta / left - 1 for eta, left, *_ in etas if left > FLOOR_SECONDS]
        if errors:
            out[stage] = max(errors, key=abs)
    return out


def stage_ends(run_dir: Path) -> dict[str, float]:
    """Progress label → wall-clock time its last trial completed, from the run's journal: each
    trial records its stage (`run_one`: the stage's name, or the grid's `validation[_axis]`),
    which is the label the progress lines print. Copied trials (the incumbent, the grids'
    shared points) trained nothing here and do not count."""
    import optuna

    from transfer.core.config import StorageConf
    from transfer.search.storage import make_storage

    storage = make_storage(StorageConf(), run_dir=run_dir)
    out: dict[str, float] = {}
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        for t in study.get_trials(deepcopy=False):
            stage = t.user_attrs.get("stage")
            if stage and t.datetime_complete and "copied_from_trial" not in t.user_attrs:
                out[stage] = max(out.get(stage, 0.0), t.datetime_complete.timestamp())
    return out


def one_run(code: Path, label: str, overrides: list[str], archive: Path) -> dict:
    """The README command in a subprocess; wall time from outside, phases from cost.json, and
    the ETA's error per stage from the progress lines as they were printed."""
    cmd = [sys.executable, "-m", "transfer.sweep", *overrides, f"archive_dir={archive}",
           "progress=lines"]
    env = dict(os.environ, PYTHONPATH=str(code))
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = [(time.time(), line.rstrip("\n")) for line in proc.stdout]  # wall clock: the
    proc.wait()                                                  # journal's times are too
    wall = time.perf_counter() - t
    output = "\n".join(line for _, line in lines)
    runs = [d for d in archive.iterdir() if d.is_dir() and (d / "cost.json").exists()]
    row = {"label": label, "code": str(code), "overrides": overrides, "exit": proc.returncode,
           "wall_seconds": wall, "lines": lines}
    if not runs:
        row["eta_error"] = eta_errors(lines, time.time())
        row["eta_worst"] = eta_worst(lines, time.time())
        row["eta_range_error"] = eta_range_errors(lines, time.time())
        row["error"] = output.strip().splitlines()[-1:] or ["no run folder"]
        return row
    run = runs[0]
    ends = stage_ends(run)
    row.update(eta_error=eta_errors(lines, time.time(), ends),
               eta_worst=eta_worst(lines, time.time(), ends),
               eta_range_error=eta_range_errors(lines, time.time(), ends),
               eta_error_to_next_line=eta_errors(lines, time.time()))
    cost = json.loads((run / "cost.json").read_text())
    pred = cost.get("prediction") or {}
    row.update(measured_phases=cost.get("phases", {}), predicted_phases=pred.get("phases", {}),
               predicted_seconds=pred.get("total_seconds", cost.get("cap", {}).get(
                   "predicted_seconds")), inside_seconds=cost.get("wall_seconds"),
               after_stages_error=cost.get("prediction_error_after_stages"))
    val = run / "validation.json"
    if val.exists():
        v = json.loads(val.read_text())
        row.update(outcome=v.get("outcome"), drift=v.get("drift_log2"), drift_ci=v.get("drift_ci"))
    return row


def fmt(row: dict) -> str:
    if "error" in row:
        return f"| {row['label']} | exit {row['exit']}: {row['error'][0]} |"
    pred = row.get("predicted_seconds")
    err = "—" if not pred else f"{pred / row['wall_seconds'] - 1:+.0%}"
    ph = row["measured_phases"]
    pp = row["predicted_phases"]
    cells = " | ".join(
        f"{ph.get(k, 0):.0f}" + (f" / {pp[k]:.0f}" if k in pp else "") for k in PHASES)
    ci = row.get("drift_ci") or [None, None]
    drift = "" if row.get("drift") is None else f"{row['drift']:+.2f}" + (
        "" if None in ci else f" [{ci[0]:+.2f}, {ci[1]:+.2f}]")
    after = row.get("after_stages_error")
    etas, ranges, worst = (", ".join(f"{k} {v:+.0%}" for k, v in (row.get(key) or {}).items()) or "—"
                   for key in ("eta_error", "eta_range_error", "eta_worst"))
    return (f"| {row['label']} | {row['exit']} | {row.get('outcome', '—')} {drift} | "
            f"{row['wall_seconds']:.0f} | {'—' if not pred else f'{pred:.0f}'} | {err} | "
            f"{'—' if after is None else f'{after:+.0%}'} | {etas} | {ranges} | {worst} | {cells} |")


def main(argv=None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    base = [f"model={args.model}", f"budget={args.budget}", *args.override]
    which = args.parametrizations or (["mup", "sp"] if args.also_sp else ["mup"])
    variants = [(p, [*base, f"proxy.parametrization={p}"]) for p in which]
    codes = ([(f"{args.baseline}", worktree(args.baseline, args.out))] if args.baseline else [])
    codes.append(("this checkout", ROOT))
    rows = []
    for rep in range(args.repeats):
        for code_label, code in codes:
            for name, ovr in variants:
                archive = args.out / f"archive-{len(rows)}"
                shutil.rmtree(archive, ignore_errors=True)
                label = f"{code_label}, {name}, run {rep + 1}"
                print(f"running {label} ...", file=sys.stderr, flush=True)
                rows.append(one_run(code, label, ovr, archive))
                print(fmt(rows[-1]), file=sys.stderr, flush=True)
    head = ("| run | exit | verdict, drift [90 % CI] | wall s | predicted s | error | "
            "error after the stages | ETA at each stage's first trial | "
            "the same, its range where the line shows one | "
            f"ETA's worst miss per stage (over {FLOOR_SECONDS} s left) | "
            + " | ".join(f"{k} s (measured / predicted)" for k in PHASES) + " |")
    print(head)
    print("|" + "---|" * (10 + len(PHASES)))
    for r in rows:
        print(fmt(r))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
