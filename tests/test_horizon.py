"""The horizon check: the lr optimum at two token budgets, the measured exponent of lr* ∝ D^e
with its interval, the tight/loose switch in the emitted lr, and a tiny sweep end to end."""

from __future__ import annotations

import contextlib
import json
import math

import optuna
import pytest
import torch
import yaml
from helpers_grid import width_study
from helpers_sweep import TINY, compose_cfg, only_run
from helpers_target import BASE_WIDTH, MODEL, PROXY, WINNERS
from optuna.trial import TrialState

from proxies import TransformerFamily
from transfer.cli.sweep import sweep
from transfer.core.config import Config, ProxyConf, TrainConf, ValidationConf
from transfer.judge.curves import grid
from transfer.outputs.emit import emit_target
from transfer.search import Context
from transfer.search.family import ProxyPlan
from transfer.verdict import axis_grid, horizon

V = {"points": 3, "seeds": 2, "step_log2": 1.0, "max_extend": 1, "tolerance_log2": 0.5,
     "max_gap": 0.01, "min_seeds": 2, "min_points": 4, "min_curvature_snr": 3.0,
     "confidence": 0.9, "coord_max_slope": 0.25, "can_pass": True, "decide_hint": "x"}


def ctx(**v) -> Context:
    cfg = Config(validation=ValidationConf(**{**V, **v, "horizon_enabled": True}),
                 proxy=ProxyConf(seed=0), train=TrainConf(tokens=4096))
    fam = TransformerFamily(n_layers=2, d_head=8, seq_len=32, base_width=32)
    return Context(cfg=cfg, proxies=ProxyPlan(fam, 32, 128, 32, {}), corpus=None, storage=None,
                   lock=contextlib.nullcontext, run_name="r")


def synthetic(v_short: float, v_full: float, noise: float, ratio: int = 4) -> dict:
    """Two parabolas in log2 lr, vertices at v_short (D/ratio tokens) and v_full (D)."""
    xs = grid(-7.0, 9, 0.5)
    offsets = (0.0, 0.03, -0.02)
    return {t: [(x, [0.05 * (x - v) ** 2 + lvl + o + noise * math.sin(7 * x + 3 * i + t)
                     for i, o in enumerate(offsets)]) for x in xs]
            for t, v, lvl in ((1000, v_short, 3.0), (1000 * ratio, v_full, 2.8))}


def test_budgets_are_a_quarter_apart_by_default():
    assert horizon.budgets(ctx().cfg) == (1024, 4096)
    assert horizon.budgets(ctx(horizon_ratio=8).cfg) == (512, 4096)
    run = ctx()
    short = horizon.at_tokens(run, 1024)
    assert short.cfg.train.tokens == 1024 and short.cfg.validation == run.cfg.validation
    assert run.cfg.train.tokens == 4096  # a copy: the run's own config is not changed


def test_full_budget_points_are_copied_from_the_width_grid_and_short_ones_queued():
    c, xs = ctx(), grid(-6.0, 3, 1.0)
    study = optuna.create_study()
    axis_grid.queue(c, horizon.axis(c), study, width_study(xs), xs + [-3.0], -6.0)
    trials = study.get_trials(deepcopy=False)
    copied = [t for t in trials if t.state == TrialState.COMPLETE]
    assert {(t.params["log2_lr"], t.params["seed"]) for t in copied} == {
        (x, s) for x in xs for s in (0, 1)}
    assert all(t.params["tokens"] == 4096 and t.user_attrs["seconds"] == 0.0 for t in copied)
    queued = sorted(t.system_attrs["fixed_params"]["tokens"] for t in trials
                    if t.state == TrialState.WAITING)
    assert queued == [1024] * 8 + [4096] * 2  # every short point; the full -3.0 (two seeds)
    out = horizon.curves(study, (1024, 4096))
    assert out[1024] == [] and [x for x, _ in out[4096]] == xs


def test_the_exponent_is_the_drift_per_octave_of_tokens():
    """Optimum 1 octave lower at 4× the tokens: e = −1 / 2 = −0.5; clean curves → tight."""
    v = horizon.judge_horizon(synthetic(-6.0, -7.0, 0.001), -6.5, ValidationConf(**V))
    h = horizon.measure(v, rule="bjorck", beta=0.32)
    assert h["tokens"] == [1000, 4000] and h["octaves"] == pytest.approx(2.0)
    assert h["exponent"] == pytest.approx(v.drift_log2 / 2) and h["exponent"] == pytest.approx(
        -0.5, abs=0.05)
    lo, hi = h["exponent_ci"]
    assert lo == pytest.approx(v.drift_ci[0] / 2) and hi == pytest.approx(v.drift_ci[1] / 2)
    assert lo <= h["exponent"] <= hi
    assert h["rule_exponent"] == -0.32 and h["rule_drift_log2"] == pytest.approx(-0.64)
    assert h["tight"] and h["used"] == "measured" and not h["reasons"]
    assert "measured" in horizon.line(h) and "-0.32" in horizon.line(h)


def test_noisy_or_flat_curves_fall_back_to_the_rule():
    v = horizon.judge_horizon(synthetic(-6.0, -7.0, 0.05), -6.5, ValidationConf(**V))
    h = horizon.measure(v, max_ci=0.01)
    assert not h["tight"] and h["used"] == "rule" and h["reasons"]
    assert "the rule" in horizon.line(h)


def target(h: dict | None) -> dict:
    return emit_target(MODEL, base_width=BASE_WIDTH, winners=WINNERS, proxy=PROXY,
                       validated=True, drift_log2=0.0, fingerprint="f", budget={},
                       created="2025-01-01T00:00:00+00:00", horizon=h)


def test_a_tight_exponent_replaces_the_rule_and_says_so():
    h = {"used": "measured", "exponent": -0.5, "exponent_ci": [-0.55, -0.45], "tight": True}
    rule, measured = target(None)["train"], target(h)["train"]
    r = MODEL["train_tokens"] / PROXY["tokens_per_trial"]
    assert rule["lr_factor_terms"]["horizon"] == pytest.approx(r ** -0.32)
    assert measured["lr_factor_terms"]["horizon"] == pytest.approx(r ** -0.5)
    assert measured["lr_factor_terms"]["horizon_exponent_source"] == "measured"
    assert measured["lr"] == pytest.approx(rule["lr"] * r ** (-0.5 + 0.32))
    assert measured["provenance"]["lr"].startswith(
        "measured on proxies (horizon check, exponent -0.500 [-0.550, -0.450])")
    assert rule["provenance"]["lr"].startswith("rule: bjorck_horizon")
    assert target(h)["provenance"]["horizon"] == h


def test_a_loose_exponent_keeps_the_rule():
    h = {"used": "rule", "exponent": -0.5, "exponent_ci": [-2.0, 1.0], "tight": False}
    t = target(h)["train"]
    assert t["lr_factor_terms"]["horizon_exponent"] == -0.32
    assert t["provenance"]["lr"].startswith("rule: bjorck_horizon")


@pytest.mark.parametrize("override", ["validation.horizon_ratio=2",
                                      "validation.horizon_max_ci=0"])
def test_bad_horizon_settings_name_the_field(override):
    from transfer.core.config import check_config
    from transfer.core.errors import UserError

    with pytest.raises(UserError, match=override.split("=")[0]):
        check_config(compose_cfg([*TINY, override]))


def test_the_budgets_turn_it_on_except_smoke():
    for budget, on in (("default", True), ("thorough", True), ("smoke", False)):
        cfg = compose_cfg([f"budget={budget}"])
        assert bool(cfg.validation.horizon_enabled) is on, budget
        assert cfg.validation.horizon_ratio >= 4


# ---- a tiny sweep end to end ---------------------------------------------------------------
SWEEP = [*TINY, "train.tokens=10240", "stages.stage.lr.trials=2",
         "stages.stage.batch_size.trials=1", "stages.stage.warmup.trials=1",
         "validation.points=3", "validation.seeds=2", "validation.max_extend=0",
         "validation.coord_widths=[16,32]", "validation.coord_steps=2",
         "validation.horizon_enabled=true"]


@pytest.fixture(scope="module")
def horizon_run(tmp_path_factory):
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        archive = tmp_path_factory.mktemp("horizon") / "sweeps"
        sweep(compose_cfg([*SWEEP, f"archive_dir={archive}"]))
    finally:
        torch.set_num_threads(n)
    return only_run(archive)


def test_a_sweep_with_the_horizon_check_writes_it_and_emits_its_provenance(horizon_run):
    h = json.loads((horizon_run / "horizon.json").read_text())
    t = yaml.safe_load((horizon_run / "target.yaml").read_text())
    assert h["tokens"] == [2560, 10240] and h["used"] in ("measured", "rule")
    assert h["fit"]["widths"] == [2560, 10240]
    assert math.isfinite(h["exponent"]) or h["used"] == "rule"
    p = t["provenance"]["horizon"]
    assert p["used"] == h["used"] and p["rule_exponent"] == pytest.approx(-0.32)
    lr = t["train"]["provenance"]["lr"]
    assert lr.startswith("measured on proxies (horizon check" if h["used"] == "measured"
                         else "rule: bjorck_horizon")
    assert (horizon_run / "plots" / "lr_horizon.png").is_file()
    print(f"horizon exponent {h['exponent']:+.3f} {h['exponent_ci']} used {h['used']}")


def test_an_exponent_is_not_carried_further_than_its_interval_allows():
    """Curves tight over their own 2 octaves of tokens (interval ~0.08 wide), but carried 25
    octaves (a 9T-token target from 4000-token proxies) the interval spans ~2 octaves of lr, so
    the emitted lr keeps the rule and says why."""
    v = horizon.judge_horizon(synthetic(-6.0, -7.0, 0.005), -6.5, ValidationConf(**V))
    near = horizon.measure(v, target_tokens=16000)
    far = horizon.measure(v, target_tokens=4000 * 2.0**25)
    lo, hi = far["exponent_ci"]
    assert near["used"] == "measured" and near["lr_spread_at_target"] == pytest.approx(
        2 * (hi - lo))
    assert far["used"] == "rule" and far["lr_spread_at_target"] == pytest.approx(25 * (hi - lo))
    assert any("octaves of lr" in r for r in far["reasons"]) and "the rule" in horizon.line(far)
