"""Many workers, one PostgreSQL study: exact counts, one result, a killed worker's trial retried.

Real server (tests/conftest.py starts one), real `python -m transfer.sweep` processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
from optuna.trial import TrialState

from transfer.archive import Archive

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["model=tiny", "budget=smoke", "proxy.width=16", "proxy.validation_width=32",
         "train.tokens=6144", "train.n_evals=2", "stages.stage.lr.trials=4",
         "stages.stage.batch_size.trials=2", "stages.stage.warmup.trials=2",
         "validation.coord_widths=[16,32]", "validation.coord_steps=2", "progress=lines",
         "storage=postgres", "storage.heartbeat_interval=1", "storage.grace_period=4",
         "workers=1"]
COUNTS = {"00-lr": 4, "01-batch_size": 2, "02-warmup": 2}
# The validation grid: 3 points × 2 widths × 1 seed, plus one point per width on each side the
# optimum sat at the grid's edge at that width (budget=smoke: validation.max_extend=1), each
# exactly once.
GRID = set(range(6, 11))
EXIT_VERDICT = (3, 4)  # budget=smoke never passes: rejected or inconclusive


def _check_exits(procs, outs) -> None:
    """The worker that writes the results exits with the verdict; the others with 0."""
    codes = [p.returncode for p in procs]
    assert all(c in (0, *EXIT_VERDICT) for c in codes) and set(codes) & set(EXIT_VERDICT), outs


def _check_counts(studies: dict) -> None:
    assert {k: _finished(v) for k, v in studies.items() if k != "validation"} == COUNTS
    grid = [t for t in studies["validation"] if t.state in (TrialState.COMPLETE,
                                                            TrialState.PRUNED)]
    assert len(grid) in GRID, len(grid)
    points = [tuple(sorted(t.params.items())) for t in grid]
    assert len(set(points)) == len(points)  # no grid point trained twice


def _launch(url: str, archive: Path, name: str, worker: int) -> subprocess.Popen:
    env = dict(os.environ, TRANSFER_STORAGE_URL=url, OMP_NUM_THREADS="1")
    args = [sys.executable, "-m", "transfer.cli.sweep", *SMALL, f"archive_dir={archive}",
            f"name={name}", f"worker={worker}"]
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _studies(url: str, name: str) -> dict[str, list]:
    storage = optuna.storages.RDBStorage(url.replace("postgresql://", "postgresql+psycopg2://"))
    out = {}
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        if s.study_name.startswith(name + ":"):
            trials = optuna.load_study(study_name=s.study_name, storage=storage).get_trials()
            out[s.study_name[len(name) + 1:]] = trials
    return out


def _finished(trials) -> int:
    return sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)


def test_three_workers_exact_counts_one_result(make_postgres_db, tmp_path):
    url = make_postgres_db("three_workers")
    procs = [_launch(url, tmp_path, "shared", i) for i in range(3)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    _check_exits(procs, outs)
    studies = _studies(url, "shared")
    _check_counts(studies)
    owners = {t.user_attrs.get("owner", "").split(":")[-1] for v in studies.values() for t in v}
    assert len(owners - {""}) >= 2  # the work really was shared
    assert sum("another worker writes the results" in o for o in outs) == 2
    assert (tmp_path / "shared" / "target.yaml").exists()
    assert list(Archive(tmp_path).runs()["name"]) == ["shared"]


def test_killed_worker_trial_is_retried(make_postgres_db, tmp_path):
    url = make_postgres_db("killed_worker")
    running = []
    for _ in range(3):  # a trial seen RUNNING may finish before the kill lands: try again
        victim = _launch(url, tmp_path, "kill", 0)
        deadline = time.time() + 300
        while time.time() < deadline:  # wait until the victim is inside a trial: RUNNING
            # with its parameters suggested (killed between `ask` and `suggest`, the trial's
            # params are empty and its retry's would be the queued ones: not comparable)
            if any(t.state == TrialState.RUNNING and t.params
                   for v in _studies(url, "kill").values() for t in v):
                break
            time.sleep(0.5)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        # the trial it died in: RUNNING now that no process is alive to finish it
        running = [t for v in _studies(url, "kill").values() for t in v
                   if t.state == TrialState.RUNNING]
        if running:
            break
    assert running, "the worker was never killed inside a trial"
    survivors = [_launch(url, tmp_path, "kill", i) for i in (1, 2)]
    outs = [p.communicate(timeout=600)[0] for p in survivors]
    _check_exits(survivors, outs)
    studies = _studies(url, "kill")
    _check_counts(studies)
    failed = [t for v in studies.values() for t in v if t.state == TrialState.FAIL]
    assert [t.number for t in failed] == [running[0].number]
    stage = next(k for k, v in studies.items() if any(t.state == TrialState.FAIL for t in v))
    # every parameter the dead trial had been given, carried by its retry (a kill between a
    # grid trial's suggests leaves some unsuggested: its retry suggests those afresh)
    given = failed[0].params
    retried = [t for t in studies[stage] if t.state != TrialState.FAIL and t.params
               and all(t.params.get(k) == v for k, v in given.items())]
    assert retried, "the killed trial was not re-run with its parameters"
