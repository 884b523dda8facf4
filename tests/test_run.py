"""transfer.run: a worker process trains exactly the grids the finalizing process trains."""

from __future__ import annotations

import pytest
from helpers_sweep import TINY, compose_cfg
from omegaconf import OmegaConf

from transfer import depth, finalize, horizon, run
from transfer.plan import make_context, plan_sweep
from transfer.search import default_hparams
from transfer.storage import make_storage

GRIDS = [*TINY, "validation.depth_enabled=true", "validation.horizon_enabled=true"]


@pytest.fixture
def trained(monkeypatch) -> list[str]:
    """The grids started (no training: each grid runner only records its name)."""
    calls: list[str] = []
    monkeypatch.setattr(finalize, "run_grid", lambda ctx, hp: calls.append("width") or "study")
    monkeypatch.setattr(depth, "run_depth_grid", lambda ctx, hp, s: calls.append("depth"))
    monkeypatch.setattr(horizon, "run_horizon_grid", lambda ctx, hp, s: calls.append("horizon"))
    monkeypatch.setattr(run, "run_stages", lambda ctx: default_hparams(ctx.cfg))
    return calls


def test_a_worker_runs_every_grid_the_finalizer_runs(tmp_path, trained, monkeypatch):
    """Workers once skipped the horizon grid the finalizer trained; both call run_grids now."""
    cfg = compose_cfg([*GRIDS, f"archive_dir={tmp_path}"])
    plan = plan_sweep(cfg)
    run_dir = plan.archive.create_run(plan.name, fingerprint=plan.fingerprint)
    run._worker_job(OmegaConf.to_container(cfg, resolve=True), 1)
    worker = list(trained)
    trained.clear()
    monkeypatch.setattr(finalize, "_claim", lambda ctx, study: False)  # stop after the grids
    ctx = make_context(plan, make_storage(cfg.storage, run_dir=run_dir))
    assert finalize.validate_transfer(ctx, default_hparams(cfg), coord_plotted=False) is None
    assert worker == trained == ["width", "depth", "horizon"]


def test_no_grid_runs_with_validation_off(tmp_path, trained):
    cfg = compose_cfg([*GRIDS, "validation.enabled=false", f"archive_dir={tmp_path}"])
    plan = plan_sweep(cfg)
    plan.archive.create_run(plan.name, fingerprint=plan.fingerprint)
    run._worker_job(OmegaConf.to_container(cfg, resolve=True), 1)
    assert trained == []
