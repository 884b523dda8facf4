"""The depth check end to end, CI-sized: width-only μP (proxy.depth_alpha=0) is rejected across
depth, CompleteP (depth_alpha=1) is not, through `transfer.cli.sweep` on the tiny proxies (1 → 4
layers). What rejects α = 0 at this size is the depth coordinate check (the final residual
grows ∝ depth^0.8 under width-only μP, flat under CompleteP); the lr drift needs the longer
runs of benchmarks/transfer_fidelity.py --axis depth (README, Depth)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from helpers_sweep import TINY, compose_cfg, only_run

from transfer.cli.sweep import sweep
from transfer.core.errors import EXIT_REJECTED

# two tiny sweeps end to end (~97 s of fixtures): run with the slow tests, as CI does
pytestmark = pytest.mark.slow

# The lr stage only (one trial each for batch and warmup), then the width grid 32 → 64 and the
# depth grid 1 → 4 layers at width 32: 5 one-octave points × 2 seeds, 40 steps of 16 × 32.
DEPTH = [*TINY, "train.tokens=20480", "stages.stage.lr.trials=3",
         "stages.stage.batch_size.trials=1", "stages.stage.warmup.trials=1",
         "validation.points=5", "validation.seeds=2", "validation.step_log2=1.0",
         "validation.min_points=4", "validation.can_pass=true",
         "validation.coord_widths=[16,32,64]", "validation.coord_steps=4",
         "validation.coord_depths=[1,2,4,8]",
         "validation.depth_enabled=true", "validation.depth=4", "validation.max_extend=1"]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def depth_run(tmp_path_factory, alpha: float) -> tuple[int, Path]:
    archive = tmp_path_factory.mktemp(f"alpha{alpha:g}") / "sweeps"
    code = sweep(compose_cfg([*DEPTH, f"proxy.depth_alpha={alpha}", f"archive_dir={archive}"]))
    return code, only_run(archive)


@pytest.fixture(scope="module")
def mup_run(tmp_path_factory):
    return depth_run(tmp_path_factory, 0.0)


@pytest.fixture(scope="module")
def completep_run(tmp_path_factory):
    return depth_run(tmp_path_factory, 1.0)


def read(run_dir: Path) -> tuple[dict, dict]:
    return (json.loads((run_dir / "validation_depth.json").read_text()),
            yaml.safe_load((run_dir / "target.yaml").read_text()))


def test_width_only_mup_is_rejected_across_depth(mup_run):
    code, run_dir = mup_run
    v, target = read(run_dir)
    assert v["outcome"] == "rejected" and code == EXIT_REJECTED
    assert v["widths"] == [1, 2, 4]  # the verdict's keys: depths here (doubling up to 4)
    assert v["coord_check"]["axis"] == "depth" and not v["coord_check"]["passed"]
    assert v["coord_check"]["slopes"]["final_residual"] > 0.5
    nt = {x["name"]: x for x in target["provenance"]["not_transferred"]}
    assert "rejected" in nt["depth"]["reason"]
    assert target["provenance"]["depth"]["outcome"] == "rejected"
    assert target["mup"]["residual_mult"] == 1.0  # α = 0: no depth rule emitted


def test_completep_is_not_rejected_across_depth(completep_run):
    code, run_dir = completep_run
    v, target = read(run_dir)
    assert v["outcome"] != "rejected", v["reasons"]
    assert v["coord_check"]["passed"], v["coord_check"]
    assert abs(v["coord_check"]["slopes"]["final_residual"]) <= 0.25
    assert target["mup"]["residual_mult"] == pytest.approx(0.5)  # tiny target: 2 layers, m_L 2
    moved = "depth" in {x["name"] for x in target["provenance"]["transferred"]}
    assert moved == (v["outcome"] == "passed")


def test_the_emitted_lr_is_the_joint_width_and_depth_estimate(completep_run):
    """The tiny target has 2 layers, the proxies 1: the emitted lr is the width trajectory at
    the target width plus the depth trajectory's move from 1 to 2 layers, one joint fit."""
    _, run_dir = completep_run
    v, target = read(run_dir)
    lr, j = target["provenance"]["lr"], v["joint"]
    assert lr["target_depth"] == 2 and j["target_depth"] == 2
    assert lr["interval_spans"].startswith("width and depth")
    assert lr["log2"] == pytest.approx(j["estimate"])
    assert lr["parts"]["width"]["estimate"] + lr["parts"]["depth"]["estimate"] == pytest.approx(
        j["estimate"])
    assert target["train"]["lr_transferred"] == pytest.approx(2.0 ** j["estimate"])
    assert target["train"]["lr_trajectory"]["depths"] == [1, 2, 4]
    assert len(lr["draw_quantiles_log2"]) == 201
    assert (run_dir / "plots" / "lr_trajectory_depth.png").is_file()


def test_depth_grid_reuses_the_width_grids_shallow_points(completep_run):
    _, run_dir = completep_run
    import pandas as pd

    trials = pd.read_csv(run_dir / "trials.csv")
    depth = trials[trials.stage == "validation_depth"]
    assert set(depth.n_layers) == {1, 2, 4}
    shallow = depth[depth.n_layers == 1]
    # the grid's shallow points are copied from the width grid, not trained again
    assert (shallow.seconds == 0).sum() >= 5 * 2
    assert (run_dir / "plots" / "lr_transfer_depth.png").is_file()
    assert (run_dir / "plots" / "coord_check_depth.png").is_file()
