"""transfer's submitit launchers (transfer/cli/launcher.py): the run's exit code from its jobs',
and a real multirun through the local executor (no cluster needed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from transfer.cli.launcher import run_code


def test_the_run_exits_with_the_verdict_of_the_job_that_wrote_it():
    assert run_code([0, 3, 0]) == 3
    assert run_code([4, 0]) == 4
    assert run_code([0, 0]) == 0  # validated (the writer's 0) or nothing else to say


def test_a_lost_job_does_not_hide_the_verdict_and_no_job_is_1():
    assert run_code([None, 3, 0]) == 3  # killed: its trial was re-run by the others
    assert run_code([None, None]) == 1


def test_bad_input_in_any_job_wins():
    assert run_code([4, 2, 0]) == 2


def test_local_workers_multirun_collects_every_job_code(tmp_path):
    """Each job of a multirun returns its code (no sys.exit ending the sweep): two jobs that
    both meet bad input (storage=postgres without a database) each report exit 2."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher",
                        reason="pip install -e '.[slurm]'")
    env = {k: v for k, v in os.environ.items() if k != "TRANSFER_STORAGE_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "transfer.sweep", "-m", "hydra/launcher=local_workers",
         "storage=postgres", "name=x", "worker=range(2)", "model=tiny", "budget=smoke",
         f"archive_dir={tmp_path / 'sweeps'}", f"hydra.sweep.dir={tmp_path / 'multirun'}"],
        cwd=tmp_path, env=dict(env, OMP_NUM_THREADS="1"), capture_output=True, text=True,
        timeout=300)
    lines = re.findall(r"^job \S+ \(#(\d)\): (.*)$", done.stdout, re.M)
    assert sorted(lines) == [("0", "exit 2"), ("1", "exit 2")], done.stdout + done.stderr
    assert done.returncode == 2
    logs = "".join(p.read_text() for p in (tmp_path / "multirun").rglob("*_log.err"))
    assert logs.count("storage=postgres needs a database") == 2  # each job's one line
    assert not (tmp_path / "sweeps" / "x").exists()  # nothing written before the check
