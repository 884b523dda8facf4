"""The README's SLURM command on a real cluster: array jobs on one PostgreSQL study, a job killed
mid-trial, exact counts read back with Optuna's own API.

A real one-node cluster (`bash .ci/slurm start`; tests/conftest.py's `slurm_cluster` skips
without one, or fails under CI_REQUIRE_SLURM=1) and a real PostgreSQL server (conftest). The
jobs are `python -m transfer.sweep` array tasks submitted by hydra-submitit-launcher through
transfer's launcher (hydra_plugins/transfer_launcher), running as the submitting user.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from optuna.trial import TrialState

from tests.test_postgres_sweep import COUNTS, EXIT_VERDICT, SMALL, _check_counts, _studies
from transfer.archive import Archive
from transfer.search.studies import FINISHED

pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install 'transfer[slurm]'")
# ~95 s each, and the kill test times a job's death against its trial: CI runs them in its slow
# pass, one test at a time (`.ci/run`: `-n 0`); beside another test on the 2 cores, at c70675c, it
# never saw a trial within 0.5 s of its start
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# The README's overrides are the command; these only size it for a 2-core node: the budget
# (SMALL, as the PostgreSQL tests), one process per job, and no GPU, 1 CPU, 1 GB per job.
OVERRIDES = [o for o in SMALL if o not in ("storage=postgres", "workers=1")] + [
    "workers=1", "hydra.launcher.gpus_per_node=null", "hydra.launcher.cpus_per_task=1",
    "hydra.launcher.mem_gb=1"]
LOST = re.compile(r"^job (\d+_\d+) \(#\d+\): ended without a result \((\w+)\)", re.M)
EXITED = re.compile(r"^job (\d+_\d+) \(#\d+\): exit (\d+)$", re.M)


def readme_command() -> list[str]:
    """The README's SLURM line, word for word (`python` is this interpreter)."""
    text = (ROOT / "README.md").read_text()
    line = next(ln for ln in text.splitlines()
                if ln.startswith("python -m transfer.sweep -m hydra/launcher=slurm"))
    words = shlex.split(line)
    assert words[0] == "python" and "name=X" in words and "worker=range(8)" in words, line
    return [sys.executable, *words[1:]]


def _submit(url: str, tmp: Path, name: str, jobs: int, extra=()) -> subprocess.Popen:
    """The README's command with the run's name and number of jobs, from `tmp`."""
    words = [{"name=X": f"name={name}", "worker=range(8)": f"worker=range({jobs})"}.get(w, w)
             for w in readme_command()]
    args = [*words, *OVERRIDES, *extra, f"archive_dir={tmp / 'sweeps'}",
            f"hydra.sweep.dir={tmp / 'multirun'}"]
    env = dict(os.environ, TRANSFER_STORAGE_URL=url, OMP_NUM_THREADS="1")
    return subprocess.Popen(args, cwd=tmp, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _files(run_dir: Path) -> set[str]:
    return {str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()}


def _all(studies: dict) -> list:
    return [t for trials in studies.values() for t in trials]


def test_readme_command_array_jobs_one_study(slurm_cluster, make_postgres_db, tmp_path):
    """Three array jobs: exact counts, one job emits, the others exit 0, the files and counts
    of a one-process run."""
    url = make_postgres_db("slurm_readme")
    launcher = _submit(url, tmp_path, "cluster", 3)
    out = launcher.communicate(timeout=400)[0]
    codes = [int(c) for _, c in EXITED.findall(out)]
    assert len(codes) == 3 and not LOST.findall(out), out
    # exactly one job wrote the results and returned the verdict; the launcher exits with it
    assert sorted(codes)[:2] == [0, 0] and codes.count(0) == 2, out
    assert max(codes) in EXIT_VERDICT and launcher.returncode == max(codes), out
    studies = _studies(url, "cluster")
    _check_counts(studies)
    assert not [t for t in _all(studies) if t.state != TrialState.COMPLETE
                and t.state != TrialState.PRUNED], "a trial left unfinished"
    logs = "".join(p.read_text() for p in (tmp_path / "multirun").rglob("*_log.err"))
    assert logs.count("another worker writes the results") == 2
    owners = {t.user_attrs["owner"] for t in _all(studies)}
    assert len(owners) >= 2  # the jobs shared the trials

    # the same config in one process (no SLURM): the same files, the same counts
    alone = subprocess.run(
        [sys.executable, "-m", "transfer.sweep", *SMALL, f"archive_dir={tmp_path / 'sweeps'}",
         "name=alone"], cwd=tmp_path, env=dict(os.environ, TRANSFER_STORAGE_URL=url,
                                               OMP_NUM_THREADS="1"),
        capture_output=True, text=True, timeout=300)
    assert alone.returncode in EXIT_VERDICT, alone.stderr
    sweeps = tmp_path / "sweeps"
    assert _files(sweeps / "cluster") == _files(sweeps / "alone")
    one = _studies(url, "alone")
    assert {k: len(v) for k, v in studies.items() if k != "validation"} == \
        {k: len(v) for k, v in one.items() if k != "validation"} == COUNTS
    assert sorted(Archive(sweeps).runs()["name"]) == ["alone", "cluster"]
    assert not (tmp_path / "multirun" / "0").exists() or not any(
        (tmp_path / "multirun" / "0").iterdir())  # Hydra's job folders stay empty


def _victim(url: str, name: str, deadline: float) -> tuple[str, str, int]:
    """Wait for a validation-grid trial (the longest) that started in the last 0.5 s, with its
    parameters; return its job's `<array>_<task>` id (read from the owning process's
    environment), the trial's stage and number."""
    while time.time() < deadline:
        for stage, trial in ((k, t) for k, v in _studies(url, name).items() for t in v):
            if stage != "validation" or trial.state != TrialState.RUNNING or not trial.params \
                    or time.time() - trial.datetime_start.timestamp() > 0.5:
                continue
            host, _, pid = trial.user_attrs["owner"].rpartition(":")
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            env = dict(e.decode().split("=", 1) for e in env if b"=" in e)
            job = f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
            return job, stage, trial.number
        time.sleep(0.2)
    raise AssertionError("no job was seen inside a trial")


def test_killed_job_trial_is_rerun(slurm_cluster, make_postgres_db, tmp_path):
    """scancel of one array task while it trains: its trial is failed and re-run by another job
    with the same parameters; exact counts, nothing RUNNING or WAITING left, a finished run."""
    url = make_postgres_db("slurm_kill")
    # scancel sends SIGTERM, which submitit logs and ignores, then SIGKILL: the job's python
    # was measured to die 2.3-3.5 s after scancel on this node (KillWait=1). A trial seen within
    # 0.5 s of its start must outlast that on an idle machine too: at 262144 tokens one ended
    # first in CI (a COMPLETE victim); at 1048576 the test passed twice idle, 94-96 s.
    launcher = _submit(url, tmp_path, "kill", 3, extra=["train.tokens=1048576"])
    job, stage, number = _victim(url, "kill", time.time() + 240)
    subprocess.run(["scancel", job], check=True)
    out = launcher.communicate(timeout=400)[0]
    assert [j for j, _ in LOST.findall(out)] == [job], out
    codes = [int(c) for _, c in EXITED.findall(out)]
    assert sorted(codes)[0] == 0 and max(codes) in EXIT_VERDICT, out
    assert launcher.returncode == max(codes), out

    studies = _studies(url, "kill")
    _check_counts(studies)
    trials = _all(studies)
    assert [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)] == []
    failed = [t for t in trials if t.state == TrialState.FAIL]
    # the killed job's trials, and only those: the one it was training, and at most one more it
    # took in the KillWait second after SIGTERM (submitit logs and ignores SIGTERM)
    killed = next(t for t in studies[stage] if t.number == number)
    assert killed.state == TrialState.FAIL
    victim_pid = killed.user_attrs["owner"]
    assert failed and {t.user_attrs.get("owner") for t in failed} == {victim_pid}
    for dead in failed:  # each re-run once, with its parameters, by a job that lived
        stage = next(k for k, v in studies.items() if dead in v)
        reruns = [t for t in studies[stage] if t.state != TrialState.FAIL and t.params
                  and all(t.params.get(k) == v for k, v in dead.params.items())
                  and (t.user_attrs.get("retry_of") == dead.number
                       or t.system_attrs.get("failed_trial") == dead.number)]
        assert len(reruns) == 1 and reruns[0].user_attrs["owner"] != victim_pid, dead.number
    assert (tmp_path / "sweeps" / "kill" / "target.yaml").exists()
    assert list(Archive(tmp_path / "sweeps").runs()["name"]) == ["kill"]
    how = {"retry_of": "owner process gone", "failed_trial": "heartbeat"}
    print(f"killed {job} in {stage} trial {number}; failed {[t.number for t in failed]}; "
          f"finished per study {({k: sum(t.state in FINISHED for t in v) for k, v in studies.items()})}; "
          f"recovered by {sorted({how[a] for t in trials for a in how if a in {**t.user_attrs, **t.system_attrs}})}")
