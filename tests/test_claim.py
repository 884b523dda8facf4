"""Which worker writes a run's results (verdict.checks._claim): one per launch.

A SLURM array with more tasks than slots starts jobs after the run was written; they leave it,
while a later launch (a rerun of the command) writes it again.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from types import SimpleNamespace

import optuna
import pytest

from transfer.search.storage import FINALIZE_CLAIM, this_launch
from transfer.verdict import checks


def test_this_launch_is_the_slurm_array_then_the_job():
    assert this_launch({"SLURM_ARRAY_JOB_ID": "7", "SLURM_JOB_ID": "9"}) == "slurm:7"
    assert this_launch({"SLURM_JOB_ID": "9"}) == "slurm:9"
    assert this_launch({}) is None


@pytest.fixture
def finished_by_dead_job(monkeypatch):
    """A study whose results a job of array 7 wrote, that job's process since gone."""
    study = optuna.create_study()
    ctx = SimpleNamespace(lock=contextlib.nullcontext)
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "7")
    assert checks._claim(ctx, study)
    checks.mark_finalized(study)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    claim = study.user_attrs[FINALIZE_CLAIM]
    host = claim["owner"].rpartition(":")[0]
    study.set_user_attr(FINALIZE_CLAIM, dict(claim, owner=f"{host}:{dead}"))
    return ctx, study


def test_a_later_job_of_the_same_array_leaves_written_results(finished_by_dead_job):
    ctx, study = finished_by_dead_job
    assert not checks._claim(ctx, study)


def test_another_launch_writes_them_again(finished_by_dead_job, monkeypatch):
    ctx, study = finished_by_dead_job
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "8")
    assert checks._claim(ctx, study)


def test_a_rerun_outside_slurm_writes_them_again(finished_by_dead_job, monkeypatch):
    ctx, study = finished_by_dead_job
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID")
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert checks._claim(ctx, study)
