"""transfer.cli.run: a worker process trains exactly the grids the finalizing process trains; below
the job layer the run's Context carries plain `transfer.core.config.Config` dataclasses."""

from __future__ import annotations

import dataclasses

import pytest
from helpers_sweep import TINY, compose_cfg, only_run
from omegaconf import OmegaConf, read_write

from transfer.cli import run
from transfer.cli.sweep import sweep
from transfer.core.compose import as_config
from transfer.core.config import Config, ParamConf, StageConf
from transfer.core.errors import UserError
from transfer.run.planner import make_context, plan_sweep
from transfer.search import default_hparams
from transfer.search.storage import make_storage
from transfer.verdict import checks, depth, horizon

GRIDS = [*TINY, "validation.depth_enabled=true", "validation.horizon_enabled=true"]


@pytest.fixture
def trained(monkeypatch) -> list[str]:
    """The grids started (no training: each grid runner only records its name)."""
    calls: list[str] = []
    monkeypatch.setattr(checks, "run_grid", lambda ctx, hp: calls.append("width") or "study")
    # nothing trained, nothing to judge: the width curves do not reject (checks._skipped)
    monkeypatch.setattr(checks, "width_rejects", lambda ctx, hp, study: None)
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
    monkeypatch.setattr(checks, "_claim", lambda ctx, study: False)  # stop after the grids
    ctx = make_context(plan, make_storage(cfg.storage, run_dir=run_dir))
    assert checks.run_checks(ctx, default_hparams(cfg), coord_plotted=False) is None
    assert worker == trained == ["width", "depth", "horizon"]


def test_no_grid_runs_with_validation_off(tmp_path, trained):
    cfg = compose_cfg([*GRIDS, "validation.enabled=false", f"archive_dir={tmp_path}"])
    plan = plan_sweep(cfg)
    plan.archive.create_run(plan.name, fingerprint=plan.fingerprint)
    run._worker_job(OmegaConf.to_container(cfg, resolve=True), 1)
    assert trained == []


def test_the_context_carries_the_config_as_plain_dataclasses(tmp_path):
    """Only the job layer reads the DictConfig; the Context below it gets the same values."""
    cfg = compose_cfg([*TINY, f"archive_dir={tmp_path}"])
    plan = plan_sweep(cfg)
    run_dir = plan.archive.create_run(plan.name, fingerprint=plan.fingerprint)
    ctx = make_context(plan, make_storage(cfg.storage, run_dir=run_dir))
    assert isinstance(ctx.cfg, Config) and not OmegaConf.is_config(ctx.cfg)
    lr = ctx.cfg.stages.stage["lr"]
    assert isinstance(lr, StageConf) and isinstance(lr.params["lr"], ParamConf)
    assert dataclasses.asdict(ctx.cfg) == OmegaConf.to_container(cfg, resolve=True)


def test_a_worker_gets_the_same_plain_config(tmp_path, trained, monkeypatch):
    """A spawned worker rebuilds its config from a container (no schema): typed all the same."""
    seen: list = []

    def stages(ctx):
        seen.append(ctx.cfg)
        return default_hparams(ctx.cfg)

    monkeypatch.setattr(run, "run_stages", stages)
    cfg = compose_cfg([*GRIDS, f"archive_dir={tmp_path}"])
    plan = plan_sweep(cfg)
    plan.archive.create_run(plan.name, fingerprint=plan.fingerprint)
    run._worker_job(OmegaConf.to_container(cfg, resolve=True), 1)
    assert len(seen) == 1 and isinstance(seen[0], Config) and seen[0] == plan.config


def test_a_value_left_unset_is_a_user_error_naming_it():
    cfg = compose_cfg(TINY)
    with read_write(cfg):
        cfg.hardware.price_per_gpu_hour = "???"  # as a hardware file that leaves it out
    with pytest.raises(UserError, match=r"hardware\.price_per_gpu_hour is not set"):
        as_config(cfg)


def test_a_smoke_sweep_runs_on_the_plain_config(tmp_path, monkeypatch):
    seen: list = []
    real = run.run_stages

    def stages(ctx):
        seen.append(type(ctx.cfg))
        return real(ctx)

    monkeypatch.setattr(run, "run_stages", stages)
    code = sweep(compose_cfg([*TINY, f"archive_dir={tmp_path}", "validation.points=3",
                              "validation.seeds=1", "validation.max_extend=0"]))
    assert code in (3, 4)  # budget=smoke never passes
    assert seen == [Config]
    run_dir = only_run(tmp_path)
    assert all((run_dir / f).is_file() for f in ("target.yaml", "cost.json", "config.yaml"))
