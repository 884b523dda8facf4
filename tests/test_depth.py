"""transfer.verdict.depth: the depth check's grid, its reuse of the width grid, its verdict and record;
the custom builders' depth hook. No training here: the CI-sized runs are in test_sweep.py."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import optuna
import pytest
import torch
from helpers_grid import width_study
from mup import MuReadout
from optuna.trial import TrialState
from torch import nn

from proxies import TransformerFamily
from proxies.custom import CustomFamily
from transfer.core import rules
from transfer.core.config import Config, ProxyConf, ValidationConf
from transfer.judge.curves import grid
from transfer.judge.verdict import REJECTED, judge
from transfer.search import Context
from transfer.search.family import ProxyPlan
from transfer.verdict import axis_grid, checks, depth

V = {"points": 3, "seeds": 2, "step_log2": 1.0, "max_extend": 1, "depth": None}


def ctx(**v) -> Context:
    cfg = Config(validation=ValidationConf(**{**V, **v, "depth_enabled": True}),
                 proxy=ProxyConf(seed=0))
    fam = TransformerFamily(n_layers=2, d_head=8, seq_len=32, base_width=32)
    return Context(cfg=cfg, proxies=ProxyPlan(fam, 32, 128, 32, {}), corpus=None, storage=None,
                   lock=contextlib.nullcontext, run_name="r")


def test_the_depths_double_from_the_stages_depth_to_four_times_it_by_default():
    assert depth.depths(ctx()) == (2, 4, 8)
    assert depth.depths(ctx(depth=16)) == (2, 4, 8, 16)
    assert depth.depths(ctx(depth=6)) == (2, 4, 6)
    assert depth.depths(ctx(depth=4)) == (2, 4)
    assert depth.depths(ctx(depth=32, depth_ratio=4)) == (2, 8, 32)  # measured at 961e65b
    assert depth.depths(ctx(depth=16, depth_ratio=4)) == (2, 8, 16)


def test_at_depth_builds_deeper_with_the_same_base_depth():
    deep = depth.at_depth(ctx(), 8).proxies.family
    assert deep.n_layers == 8 and deep.base_depth == 2
    assert deep.residual_mult == rules.residual_mult(4.0, deep.depth_alpha)


def test_shallow_points_are_copied_from_the_width_grid_and_deep_ones_queued():
    c, xs = ctx(), grid(-6.0, 3, 1.0)
    src = width_study(xs)
    study = optuna.create_study()
    # -3.0: not in the width grid
    axis_grid.queue(c, depth.axis(c), study, src, xs + [-3.0], -6.0)
    trials = study.get_trials(deepcopy=False)
    copied = [t for t in trials if t.state == TrialState.COMPLETE]
    assert {(t.params["log2_lr"], t.params["seed"]) for t in copied} == {
        (x, s) for x in xs for s in (0, 1)}
    assert all(t.params["n_layers"] == 2 and t.user_attrs["seconds"] == 0.0 for t in copied)
    by = {(t.params["log2_lr"], t.params["seed"]): t.value for t in src.get_trials()
          if t.params["width"] == 32}
    assert all(t.value == by[(t.params["log2_lr"], t.params["seed"])] for t in copied)
    waiting = [t for t in trials if t.state == TrialState.WAITING]
    queued = sorted(t.system_attrs["fixed_params"]["n_layers"] for t in waiting)
    assert queued == [2] * 2 + [4] * 8 + [8] * 8  # the shallow -3.0 (two seeds), every deeper point


def test_a_depth_grid_at_its_own_width_trains_every_depth_there():
    """validation.depth_width=16 (the stages' width is 32): nothing is copied from the width
    grid, every depth's points, L0's too, are queued, and they train at width 16."""
    c, xs = ctx(depth_width=16), grid(-6.0, 3, 1.0)
    ax = depth.axis(c)
    assert depth.grid_width(c) == 16 and ax.width == 16 and ax.copied is None
    study = optuna.create_study()
    axis_grid.queue(c, ax, study, width_study(xs), xs, -6.0)
    trials = study.get_trials(deepcopy=False)
    assert all(t.state == TrialState.WAITING for t in trials)
    queued = sorted(t.system_attrs["fixed_params"]["n_layers"] for t in trials)
    assert queued == [2] * 6 + [4] * 6 + [8] * 6


def test_the_depth_grid_has_its_own_seeds_and_trains_the_copied_depths_missing_ones():
    """validation.depth_seeds=3 beside the width grid's 2: at the stages' width L0's first two
    seeds are copied, its third is trained with every deeper point's three."""
    c, xs = ctx(depth_seeds=3), grid(-6.0, 3, 1.0)
    ax = depth.axis(c)
    assert ax.seeds == 3 and depth.axis(ctx()).seeds == 2
    study = optuna.create_study()
    axis_grid.queue(c, ax, study, width_study(xs), xs, -6.0)
    trials = study.get_trials(deepcopy=False)
    copied = [t for t in trials if t.state == TrialState.COMPLETE]
    assert sorted({t.params["seed"] for t in copied}) == [0, 1] and len(copied) == 6
    waiting = [t.system_attrs["fixed_params"] for t in trials if t.state == TrialState.WAITING]
    assert sorted(p["n_layers"] for p in waiting) == [2] * 3 + [4] * 9 + [8] * 9
    assert {p["seed"] for p in waiting if p["n_layers"] == 2} == {2}


def test_a_depth_width_the_family_cannot_build_falls_back_to_the_stages_width():
    c = ctx(depth_width=20)  # not a multiple of d_head 8
    assert depth.grid_width(c) == 32 and depth.axis(c).copied == 2


def test_curves_are_keyed_by_depth():
    c, xs = ctx(), grid(-6.0, 3, 1.0)
    study = optuna.create_study()
    axis_grid.queue(c, depth.axis(c), study, width_study(xs), xs, -6.0)
    out = depth.curves(study, (2, 8))
    assert [x for x, _ in out[2]] == xs and len(out[2][0][1]) == 2
    assert out[8] == []  # queued, not yet trained


def test_deeper_is_worse_is_rejected_in_depth_words_a_move_alone_is_not():
    """The depth check's limits, keyed by depth: the optimum may move (judge_drift off), but a
    deeper proxy whose best loss is clearly worse (width-only μP's sign) is rejected."""
    xs = grid(-7.0, 7, 0.5)
    lim = depth.depth_limits(ctx(), 28)
    assert lim.axis == "depth" and not lim.judge_drift and lim.min_trajectory_widths == 3

    def curves(levels):
        return {d: [(x, [0.06 * (x - v) ** 2 + lvl + o for o in (0.0, 0.05)]) for x in xs]
                for d, v, lvl in zip((2, 4, 8), (-7.0, -7.3, -7.5), levels)}

    coord = {"passed": True, "max_abs_slope": 0.1}
    moved = judge(curves((2.6, 2.55, 2.5)), None, -7.0, lim, coord)
    assert moved.outcome != REJECTED and moved.drift_log2 < -0.4
    v = judge(curves((2.5, 2.6, 2.7)), None, -7.0, lim, coord)
    assert v.outcome == REJECTED and v.widths == [2, 4, 8]
    assert any("deeper is worse" in r for r in v.rejected_because)
    s = depth.summary(v, 0.0)
    assert s["outcome"] == REJECTED and s["depths"] == [2, 4, 8] and s["depth_alpha"] == 0.0
    assert math.isclose(s["drift_log2"], v.drift_log2)
    assert set(s["models"]) == {"converging", "log_linear"}
    assert s["at_target"]["depth"] == 28
    assert depth.lines(v)[0].startswith("   depth check  REJECTED")


def test_summary_of_no_check_is_none():
    assert depth.summary(None, 1.0) is None


# ---- the custom builders' depth hook (proxies/custom.py) ------------------------------------
class DeepLM(nn.Module):
    def __init__(self, width: int, n_layers: int, residual_mult: float):
        super().__init__()
        self.emb = nn.Embedding(256, width)
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(n_layers))
        self.residual_mult = residual_mult
        self.readout = MuReadout(width, 256, readout_zero_init=True)

    def forward(self, tokens):  # (B, T) -> (B, T, V)
        x = self.emb(tokens)
        for layer in self.layers:
            x = x + self.residual_mult * torch.relu(layer(x))
        return self.readout(x)


def deep_lm(width: int, *, n_layers: int = 2, residual_mult: float = 1.0) -> nn.Module:
    return DeepLM(width, n_layers, residual_mult)


def test_a_builder_with_the_hook_is_built_deeper_with_the_rule_multiplier():
    fam = CustomFamily(build_fn=deep_lm, seq_len=8, vocab_size=256, base_width=32, n_layers=2,
                       base_depth=2, depth_alpha=1.0)
    assert fam.depth_keywords == {"n_layers", "residual_mult"}
    model = fam.replace(n_layers=8).build(64)
    assert len(model.layers) == 8 and model.residual_mult == pytest.approx(0.25)
    assert fam.build(64).residual_mult == 1.0  # at base depth


def test_a_builder_without_the_hook_cannot_be_made_deeper():
    def plain(width: int) -> nn.Module:
        return deep_lm(width)

    with pytest.raises(ValueError, match="takes no `n_layers` keyword"):
        CustomFamily(build_fn=plain, seq_len=8, vocab_size=256, base_width=32).replace(
            n_layers=8)


# ---- configuration ----------------------------------------------------------------------------
@pytest.mark.parametrize("override, field", [("proxy.depth_alpha=1.5", "proxy.depth_alpha"),
                                             ("proxy.base_depth=0", "proxy.base_depth"),
                                             ("validation.depth=1", "validation.depth"),
                                             ("validation.depth_ratio=1",
                                              "validation.depth_ratio"),
                                             ("validation.depth_width=0",
                                              "validation.depth_width"),
                                             ("validation.depth_seeds=1",
                                              "validation.depth_seeds")])
def test_bad_depth_settings_name_the_field(override, field):
    from helpers_sweep import compose_cfg

    from transfer.core.config import check_config
    from transfer.core.errors import UserError

    with pytest.raises(UserError, match=field):
        check_config(compose_cfg(["model=tiny", override]))


def test_the_family_gets_the_depth_settings_from_the_config():
    from helpers_sweep import compose_cfg

    from transfer.search.family import plan_proxies

    plan = plan_proxies(compose_cfg(["model=tiny", "proxy.depth_alpha=0.5"]))
    assert plan.derived["depth_alpha"] == 0.5
    assert plan.derived["base_depth"] == plan.derived["n_layers"]  # m_L = 1 where stages tune


# ---- the depth grid after a width rejection --------------------------------------------------
def moving_width_study(per_doubling: float) -> optuna.Study:
    """A finished width grid at 32, 64, 128 whose optimum moves `per_doubling` octaves per
    doubling of width (SP's is about −1)."""
    study = optuna.create_study()
    xs = grid(-6.0, 9, 0.5)
    d = {"log2_lr": optuna.distributions.FloatDistribution(-12, 0),
         "width": optuna.distributions.CategoricalDistribution([32, 64, 128]),
         "seed": optuna.distributions.CategoricalDistribution([0, 1])}
    rng = np.random.default_rng(0)
    for i, w in enumerate((32, 64, 128)):
        for s in (0, 1):
            for x in xs:
                v = (0.06 * (x - (-6.0 + per_doubling * i)) ** 2 + 2.6 - 0.05 * i + 0.05 * s
                     + rng.normal(0, 0.003))  # wider is better, as under μP
                study.add_trial(optuna.trial.create_trial(
                    params={"log2_lr": x, "width": w, "seed": s}, distributions=d, value=v,
                    user_attrs={"seconds": 5.0}))
    return study


def test_the_depth_grid_is_skipped_once_the_width_curves_reject_the_transfer():
    """SP: the width verdict rejects on its curves alone, so no lr transfers in depth either and
    the depth grid (minutes of CPU) is not trained; a transfer that holds in width keeps it."""
    c, hp = ctx(), {"lr": 2.0 ** -6.0}
    why = checks.width_rejects(c, hp, moving_width_study(-1.0))
    assert why and "moved" in why
    assert checks._skipped(c, hp, checks.DEPTH, moving_width_study(-1.0)).startswith(
        "the depth check did not run: the width verdict rejected")
    assert checks.width_rejects(c, hp, moving_width_study(0.0)) is None
    assert checks._skipped(c, hp, checks.DEPTH, moving_width_study(0.0)) is None
    assert checks._skipped(c, hp, checks.HORIZON, moving_width_study(-1.0)) is None


def test_a_depth_curve_too_flat_for_its_noise_gets_a_seed_round_and_is_judged_again(monkeypatch):
    """The depth grid whole, bracketed and short only of curvature S/N at 8 layers (the
    synthetic grid of tests/test_rounds.py): one more seed is queued at every point of that
    curve, with its seed number after the grid's, within the grid's own seconds; the round is
    recorded, the next look is judged at its stricter confidence, and with the round trained
    nothing more is queued."""
    from test_rounds import XS, DeepGrid

    from transfer.judge.rounds import look_confidence
    from transfer.verdict.width import looks_taken

    c = ctx(points=7, step_log2=0.5, max_extend=2, depth=8, depth_width=16, depth_seeds=3,
            max_extra_seconds=1000.0)
    ax = depth.axis(c)
    assert ax.limits is not None and ax.max_seeds == 3 * (1 + 4 * 2)
    # the price of a trial, not what is measured here: 10 s a layer
    monkeypatch.setattr(axis_grid, "predict_seconds",
                        lambda cx, hp, w: 10.0 * cx.proxies.family.n_layers)
    g = DeepGrid(28)
    dists = {"log2_lr": optuna.distributions.FloatDistribution(-10.0, -4.0),
             "n_layers": optuna.distributions.CategoricalDistribution(list(ax.values)),
             "seed": optuna.distributions.CategoricalDistribution(list(range(ax.max_seeds)))}

    def grid_study(seeds: dict[int, int], choices: int = ax.max_seeds) -> optuna.Study:
        dists["seed"] = optuna.distributions.CategoricalDistribution(list(range(choices)))
        study = optuna.create_study()
        for d, n in seeds.items():
            for x, ys in g.curves[d]:
                for s in range(n):
                    study.add_trial(optuna.trial.create_trial(
                        params={"log2_lr": x, "n_layers": d, "seed": s}, distributions=dists,
                        value=float(ys[s]), user_attrs={"seconds": 10.0 * d}))
        return study

    hp = {"lr": 2.0 ** -7}
    # a grid made before seed rounds (its seeds' choices the grid's 3: Optuna fixes them in a
    # study) is resumed without one
    assert axis_grid.add_seed_round(c, ax, grid_study({2: 3, 4: 3, 8: 3}, 3), -7.0, hp) == []
    study = grid_study({2: 3, 4: 3, 8: 3})
    # one seed at 8 layers is 7 points × 80 s on one worker: over a budget of 500 s, no round
    tight = ctx(points=7, step_log2=0.5, max_extend=2, depth=8, depth_width=16, depth_seeds=3,
                max_extra_seconds=500.0)
    assert axis_grid.add_seed_round(tight, ax, study, -7.0, hp) == []
    line = axis_grid.add_seed_round(c, ax, study, -7.0, hp)
    assert isinstance(line, str) and "n_layers 8" in line and "snr" in line
    waiting = [t.system_attrs["fixed_params"] for t in study.get_trials(deepcopy=False)
               if t.state == TrialState.WAITING]
    assert sorted((p["n_layers"], p["seed"]) for p in waiting) == [(8, 3)] * len(XS)
    r = study.user_attrs["seed_round_1"]
    assert r["n_layers"] == [8] and r["seeds_added"] == 1 and r["predicted_seconds"] == 560.0
    # the round trained: the same grid with a fourth seed at 8 layers
    g.add(8, 1)
    trained = grid_study({2: 3, 4: 3, 8: 4})
    trained.set_user_attr("seed_round_1", r)
    assert looks_taken(c, trained) == 2
    v = judge(depth.curves(trained, ax.values), None, -7.0, ax.limits(2), None)
    assert v.confidence == pytest.approx(look_confidence(0.9, 2))
    assert v.curvature_snr >= 3 and v.outcome == "passed", v.reasons
    assert axis_grid.add_seed_round(c, ax, trained, -7.0, hp) == []
