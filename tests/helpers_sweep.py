"""Shared by tests/test_config.py and tests/test_sweep.py: compose a config, read a run back."""

from __future__ import annotations

import hashlib
from pathlib import Path

import optuna
from omegaconf import DictConfig
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from transfer.archive import Archive
from transfer.core.compose import compose

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)

# Smaller than budget=smoke: 10 steps at batch 16 on the tiny proxy, 1-3 s a trial on 2 cores.
TINY = ["model=tiny", "budget=smoke", "hardware=cpu", "train.tokens=5120", "progress=lines",
        "workers=1"]  # one process: a test run's sampler sequence is reproducible


def compose_cfg(overrides: list[str]) -> DictConfig:
    """`conf/config.yaml` with `overrides`, composed the way `python -m transfer.sweep` does."""
    return compose(overrides)


def journal(run_dir: Path) -> JournalStorage:
    """The run's journal, opened the documented way (a fresh reader each call)."""
    return JournalStorage(JournalFileBackend(str(run_dir / "study.journal")))


def only_run(archive_dir: Path) -> Path:
    """The single run folder of an archive (one sweep ran in it)."""
    names = Archive(archive_dir).names()
    assert len(names) == 1, f"expected one run in {archive_dir}, found {names}"
    return archive_dir / names[0]


def stage_trials(run_dir: Path, order: list[str]) -> dict[str, list[FrozenTrial]]:
    """Every stage's trials by stage name, each from its own study `<run>:<idx>-<stage>`."""
    storage = journal(run_dir)
    return {stage: optuna.load_study(study_name=f"{run_dir.name}:{i:02d}-{stage}",
                                     storage=storage).get_trials(deepcopy=False)
            for i, stage in enumerate(order)}


def n_finished(trials: list[FrozenTrial]) -> int:
    return sum(t.state in FINISHED for t in trials)


def add_archived_run(archive_dir: Path, name: str = "earlier-run") -> None:
    """A finished run already in the archive, as another sweep would have left it."""
    a = Archive(archive_dir)
    a.create_run(name, fingerprint="feedfacefeedface", model="tiny", parametrization="mup",
                 proxy_widths=[32, 64])
    a.write_yaml(name, "config.yaml", {"model": {"name": "tiny"}})
    a.write_json(name, "cost.json", {"saved_gpu_hours": 1.0})
    a.write_text(name, "trials.csv", "stage,number,state,value,lr\nlr,0,COMPLETE,3.0,0.01\n")
    a.record({"name": name, "status": "finished", "validated": True, "winners": {"lr": 0.01}})


def snapshot(root: Path) -> dict[str, tuple]:
    """Every path under `root` (hidden ones too) with its content hash and mtime."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
        out[str(p.relative_to(root))] = (p.is_dir(), digest, st.st_mtime_ns, st.st_mode)
    return out
