"""transfer.outputs.launch: the launch lr's interval from the transferred lr's draws and the rules'
exponents, drawn jointly; its parts; the fallback without draws; and what target.yaml, report.md
and the summary make of it."""

from __future__ import annotations

import io
import math
from statistics import NormalDist

import numpy as np
import pytest
import yaml

from transfer.core.config import ValidationConf
from transfer.core.exponents import ExponentDistribution, batch_exponent
from transfer.judge.curves import grid
from transfer.outputs import emit, launch, report
from transfer.outputs.summary import lr_line, run_lines
from transfer.verdict import horizon

GRID = [i / 200 for i in range(201)]  # the quantile levels of draw_quantiles_log2


def normal_quantiles(mean: float, sd: float) -> list[float]:
    """201 quantiles of N(mean, sd²) at 0, 0.005, ..., 1: ±inf at the ends, as for draws
    without a vertex."""
    inner = [mean + sd * NormalDist().inv_cdf(p) for p in GRID[1:-1]]
    return [-math.inf, *inner, math.inf]


def point(name: str, value: float) -> ExponentDistribution:
    return ExponentDistribution(name=name, source=f"a point at {value}", central=value,
                                interval=(value, value))


def spread(name: str, central: float, lo: float, hi: float) -> ExponentDistribution:
    return ExponentDistribution(name=name, source=f"{name} spread", central=central,
                                interval=(lo, hi))


def combine(transferred, e_h, e_b, h=20.0, b=10.0, **kw) -> dict:
    return launch.combine(transferred, "test draws", e_h, e_b, confidence=0.9,
                          horizon_doublings=h, batch_doublings=b, **kw)


# ---- drawing from the quantiles -----------------------------------------------------------
def test_inverse_cdf_draws_reproduce_the_quantiles_they_came_from():
    qs = normal_quantiles(-8.0, 0.5)
    x = launch.sample_quantiles(qs, np.random.default_rng(0), 400_000)
    finite = x[np.isfinite(x)]
    assert np.mean(np.isinf(x)) == pytest.approx(0.01, abs=0.002)  # the two end segments
    assert np.quantile(x, [0.05, 0.5, 0.95]) == pytest.approx(
        [-8.0 - 0.5 * 1.6449, -8.0, -8.0 + 0.5 * 1.6449], abs=0.01)
    assert finite.min() >= qs[1] and finite.max() <= qs[-2]
    assert launch.quantile_of(qs, 0.95) == pytest.approx(-8.0 + 0.5 * 1.6449, abs=1e-3)


def test_quantiles_that_are_not_a_quantile_function_are_refused():
    with pytest.raises(ValueError, match="non-decreasing"):
        launch.sample_quantiles([0.0, 1.0, 0.5], np.random.default_rng(0), 10)
    with pytest.raises(ValueError, match="non-decreasing"):
        launch.quantile_of([0.0, math.nan, 1.0], 0.5)


# ---- the launch interval --------------------------------------------------------------------
def test_zero_width_rules_give_back_the_transferred_interval_moved_by_the_rules():
    qs = normal_quantiles(-8.0, 0.5)
    out = combine(qs, point("horizon", -0.32), point("batch", 0.5), h=20.0, b=10.0)
    lo, hi = out["lr_interval_log2"]
    shift = -0.32 * 20.0 + 0.5 * 10.0
    assert lo == pytest.approx(launch.quantile_of(qs, 0.05) + shift, abs=0.01)
    assert hi == pytest.approx(launch.quantile_of(qs, 0.95) + shift, abs=0.01)
    assert out["lr_interval"] == pytest.approx([2.0 ** lo, 2.0 ** hi])
    parts = out["lr_interval_parts"]
    assert parts["width"]["variance_share"] == 1.0 and parts["largest"] == "width"
    assert parts["horizon"]["half_width_octaves"] == 0.0 == parts["batch"]["half_width_octaves"]
    assert out["warning"] is None  # 1.6 octaves wide


def test_a_wide_horizon_rule_dominates_the_parts_and_the_warning_says_what_to_measure():
    out = combine(normal_quantiles(-8.0, 0.5), spread("horizon", -0.32, -0.70, 0.02),
                  point("batch", 0.5), h=24.8, b=13.8)
    parts = out["lr_interval_parts"]
    assert parts["largest"] == "horizon" and parts["horizon"]["variance_share"] > 0.95
    half = (0.02 + 0.70) / 2 * 24.8  # a two-piece normal's 90 % half-width is half its interval
    assert parts["horizon"]["half_width_octaves"] == pytest.approx(half)
    assert sum(parts[k]["variance_share"] for k in ("width", "horizon", "batch")) == (
        pytest.approx(1.0))
    lo, hi = out["lr_interval_log2"]
    assert hi - lo > 2 * half * 0.95  # the launch interval is at least the horizon's
    assert out["warning"].startswith("the launch lr's 90% interval is 2^[")
    assert "largest part is horizon" in out["warning"] and "≥ 16× tokens" in out["warning"]


def test_the_parts_are_independent_so_their_half_widths_add_in_quadrature():
    """Two normal parts: the launch interval's half-width is √(a² + b²) of theirs."""
    qs = normal_quantiles(0.0, 1.0)
    out = combine(qs, spread("horizon", 0.0, -0.1, 0.1), point("batch", 0.0), h=10.0, b=5.0)
    lo, hi = out["lr_interval_log2"]
    a = 1.6449  # width: σ 1
    assert (hi - lo) / 2 == pytest.approx(math.hypot(a, 1.0), rel=0.02)  # horizon: 0.1 × 10
    assert out["lr_interval_parts"]["horizon"]["variance_share"] == pytest.approx(
        1.0 / (1.0 + a * a), rel=1e-3)


def test_width_and_depth_parts_are_shown_apart_when_given():
    parts = {"width": {"draw_quantiles_log2": normal_quantiles(-8.0, 0.3)},
             "depth": {"draw_quantiles_log2": normal_quantiles(0.0, 0.4)}}
    out = combine(normal_quantiles(-8.0, 0.5), point("horizon", -0.32), point("batch", 0.5),
                  parts=parts)["lr_interval_parts"]
    assert out["width"]["half_width_octaves"] == pytest.approx(0.3 * 1.6449, abs=1e-3)
    assert out["depth"]["half_width_octaves"] == pytest.approx(0.4 * 1.6449, abs=1e-3)
    assert out["depth"]["variance_share"] == pytest.approx(16 / 25, rel=1e-3)
    assert "lr_trajectory.parts.depth" in out["depth"]["source"]
    assert [k for k in out if k in launch.PART_ORDER] == ["width", "depth", "horizon", "batch"]


def test_the_same_draws_give_the_same_interval_and_another_seed_a_close_one():
    args = (normal_quantiles(-8.0, 0.5), spread("horizon", -0.32, -0.7, 0.02),
            batch_exponent("adam_sqrt"))
    a, b = combine(*args), combine(*args)
    assert a["lr_interval_log2"] == b["lr_interval_log2"]
    other = combine(*args, seed=1)["lr_interval_log2"]
    assert other != a["lr_interval_log2"]
    assert other == pytest.approx(a["lr_interval_log2"], abs=0.1)


# ---- from the emitter's inputs ---------------------------------------------------------------
TRAJECTORY = {"interval": [2.0 ** -9.0, 2.0 ** -7.5], "interval_log2": [-9.0, -7.5],
              "confidence": 0.9, "model": "converging", "model_form": "x", "widths": [64, 128],
              "optima_log2": [-8.0, -8.1], "target_width": 4096}
SCALING = {"horizon_rule": "bjorck", "horizon_beta": 0.32, "batch_lr_rule": "adam_sqrt"}
NO_RULES = {"horizon": 1.0, "batch": 1.0}  # the proxy's tokens unknown: no factor applied


def test_without_draws_a_two_piece_normal_through_the_interval_stands_in_and_says_so():
    out = launch.launch_interval(estimate_log2=-8.0, trajectory=TRAJECTORY, terms=NO_RULES,
                                 scaling=SCALING)
    assert out["lr_interval_log2"] == pytest.approx([-9.0, -7.5], abs=0.01)
    parts = out["lr_interval_parts"]
    assert parts["transferred_draws"].startswith("fallback: no bootstrap quantiles")
    assert parts["width"]["half_width_octaves"] == pytest.approx(0.75)
    assert "not applied" in parts["horizon"]["source"]
    with_draws = launch.launch_interval(
        estimate_log2=-8.0, trajectory={**TRAJECTORY, "draw_quantiles_log2": normal_quantiles(
            -8.0, 0.2)}, terms=NO_RULES, scaling=SCALING)
    assert with_draws["lr_interval_parts"]["transferred_draws"].startswith("measured on proxies")
    assert with_draws["lr_interval_log2"] == pytest.approx([-8.33, -7.67], abs=0.01)


def test_a_known_horizon_exponent_is_carried_to_the_target():
    """A tight measurement (used by the emitted lr) is the horizon part: its interval × the
    doublings; a loose one that disagrees with the rule widens the rule's spread to it."""
    terms = {"from_tokens": 2.0 ** 18, "to_tokens": 2.0 ** 38, "from_batch_tokens": 4096,
             "to_batch_tokens": 4096, "horizon_exponent_source": "measured"}
    tight = {"exponent": -0.5, "exponent_ci": [-0.52, -0.48], "confidence": 0.9, "used": "measured"}
    out = launch.launch_interval(estimate_log2=-8.0, trajectory=TRAJECTORY, terms=terms,
                                 scaling=SCALING, horizon=tight)
    h = out["lr_interval_parts"]["horizon"]
    assert h["doublings"] == 20.0 and h["exponent"]["central"] == -0.5
    assert h["exponent"]["interval"] == pytest.approx([-0.52, -0.48])
    assert h["half_width_octaves"] == pytest.approx(0.02 * 20)
    assert h["source"].startswith("measured on proxies (this run's horizon check, -0.500")
    lo, hi = out["lr_interval_log2"]  # the transferred ±0.75 and the horizon's ±0.4, together
    assert lo < -8.0 - 0.5 * 20 < hi and 0.75 < (hi - lo) / 2 < 0.75 + 0.4
    loose = {"exponent": 0.36, "exponent_ci": [0.18, 0.72], "confidence": 0.9, "used": "rule"}
    out = launch.launch_interval(estimate_log2=-8.0, trajectory=TRAJECTORY,
                                 terms={**terms, "horizon_exponent_source": "rule"},
                                 scaling=SCALING, horizon=loose)["lr_interval_parts"]["horizon"]
    assert out["exponent"]["central"] == -0.32
    assert out["exponent"]["interval"] == pytest.approx([-0.70, 0.72])


def synthetic_horizon(exponent: float, ratio: int = 4) -> dict:
    """Loss curves in log2 lr at D/ratio and D tokens, three seeds, whose optimum moves by
    exponent × log2(ratio) octaves: lr* ∝ D^exponent."""
    xs = grid(-6.5, 13, 0.5)  # -9.5 to -3.5: both optima well inside
    short = -6.0
    full = short + exponent * math.log2(ratio)
    return {t: [(x, [0.05 * (x - v) ** 2 + lvl + o + 0.01 * math.sin(7 * x + 3 * i + t)
                     for i, o in enumerate((0.0, 0.03, -0.02))]) for x in xs]
            for t, v, lvl in ((1000, short, 3.0), (1000 * ratio, full, 2.8))}


def test_a_synthetic_horizon_check_with_a_known_exponent_is_carried_within_its_interval():
    """Curves whose optimum moves as D^−0.5, through the horizon check's fit and the emitter:
    the launch interval's horizon part is that measurement, and holds −0.5."""
    conf = ValidationConf(points=3, seeds=2, step_log2=1.0, tolerance_log2=0.5, max_gap=0.01,
                          min_seeds=2, min_points=4, min_curvature_snr=3.0, confidence=0.9)
    h = horizon.measure(horizon.judge_horizon(synthetic_horizon(-0.5), -6.5, conf))
    assert h["used"] == "measured"  # tight: the emitted lr and the launch interval use it
    t = emit.emit_target(**{**TARGET_ARGS, "horizon": h})["train"]
    assert t["lr_factor_terms"]["horizon_exponent"] == pytest.approx(h["exponent"])
    e = t["lr_interval_parts"]["horizon"]["exponent"]
    assert e["central"] == pytest.approx(h["exponent"])
    assert e["interval"] == pytest.approx(h["exponent_ci"])  # measured at 90 %: unchanged
    assert e["interval"][0] <= -0.5 <= e["interval"][1]
    doublings = t["lr_interval_parts"]["horizon"]["doublings"]
    assert t["lr_interval_parts"]["horizon"]["half_width_octaves"] == pytest.approx(
        (e["interval"][1] - e["interval"][0]) / 2 * doublings)


# ---- target.yaml, report.md, the summary -------------------------------------------------
def _target_args() -> dict:
    from helpers_target import BASE_WIDTH, MODEL, PROXY, WINNERS

    big = {**MODEL, "train_tokens": 1.0e12}  # 2^27 × the proxies' tokens: a wide interval
    return {"model": big, "base_width": BASE_WIDTH, "winners": WINNERS, "proxy": PROXY,
            "validated": True, "drift_log2": 0.0, "fingerprint": "f", "budget": {},
            "created": "2025-01-01T00:00:00+00:00",
            "lr_trajectory": {**TRAJECTORY, "log2": math.log2(WINNERS["lr"]),
                              "interval": [2.0 ** -9.5, 2.0 ** -7.5],
                              "interval_log2": [-9.5, -7.5],
                              "draw_quantiles_log2": normal_quantiles(math.log2(3e-3), 0.3)}}


TARGET_ARGS = _target_args()


@pytest.fixture(scope="module")
def wide() -> dict:
    return emit.emit_target(**TARGET_ARGS)


def test_target_yaml_holds_the_launch_interval_its_parts_and_one_warning_line(wide):
    tr, prov = wide["train"], wide["provenance"]
    lo, hi = tr["lr_interval_log2"]
    assert lo < math.log2(tr["lr"]) < hi and tr["lr_interval"] == pytest.approx(
        [2.0 ** lo, 2.0 ** hi])
    parts = tr["lr_interval_parts"]
    assert parts["largest"] == "horizon" and "depth" not in parts
    assert all(parts[k]["source"] for k in ("width", "horizon", "batch"))
    assert {"lr_interval", "lr_interval_log2", "lr_interval_parts"} <= set(tr["provenance"])
    assert "drawn jointly" in tr["provenance"]["lr_interval"]
    assert prov["launch_warning"].startswith("the launch lr's 90% interval is")
    out = io.StringIO()
    emit.dump_yaml(wide, out)
    header = [ln for ln in out.getvalue().splitlines() if ln.startswith("# WARNING")]
    assert header == [f"# WARNING: {prov['launch_warning']} (provenance.launch_warning, "
                      "train.lr_interval_parts)"]
    assert yaml.safe_load(out.getvalue())["train"]["lr_interval_parts"]["largest"] == "horizon"


def test_a_narrow_launch_interval_has_no_warning():
    t = emit.emit_target(**{**TARGET_ARGS, "proxy": {**TARGET_ARGS["proxy"],
                                                     "tokens_per_trial": None}})
    assert t["provenance"]["launch_warning"] is None
    assert t["train"]["lr_interval_parts"]["largest"] == "width"


def test_report_rows_carry_their_source_and_intervals_read_as_powers_of_two(wide):
    md = report._emitted(wide)
    rows = {ln.split(" | ")[0][2:]: ln for ln in md.splitlines() if ln.startswith("| ")}
    lo, hi = wide["train"]["lr_interval_log2"]
    assert rows["lr"].endswith(f"interval 2^[{lo:+.2f}, {hi:+.2f}] | "
                               f"{wide['train']['provenance']['lr']} |")
    assert "2^[-9.50, -7.50]" in rows["lr_transferred"]
    assert "provenance" not in rows  # no dict of every source in one cell
    assert max(len(ln) for ln in md.splitlines() if ln.startswith("| lr")) < 800
    assert "| part | ± octaves | share | doublings carried | exponent | source |" in md
    assert rows["horizon"].split(" | ")[4] == "-0.320, 90 % [-0.700, +0.022]"
    assert "> **The launch interval is wide**: the launch lr's 90% interval" in md


def test_the_summary_names_the_launch_interval_and_its_largest_parts(wide):
    lr = {"value": 3e-3, "interval": [2.0 ** -9.5, 2.0 ** -7.5], "target_width": 4096,
          "confidence": 0.9, "model": "converging", "widths": [64, 128],
          "other_model": {"model": "log_linear", "estimate": -8.2}}
    target = {**wide, "provenance": {**wide["provenance"], "lr": lr}}
    line = lr_line(target)
    lo, hi = wide["train"]["lr_interval_log2"]
    assert f"90% 2^[{lo:.1f}, {hi:.1f}]" in line
    assert "largest parts: horizon ±" in line and "batch ±" in line
    cost = {"target": {"gpu_hours": 1.0, "hardware": "h100"}, "tuning": {"gpu_hours": 0.1},
            "tuning_fraction": 0.1, "saved_gpu_hours": None}
    lines = run_lines(name="n", run_dir="d", stages=[], verdict=None, cost=cost, target=target)
    assert sum(ln.startswith("   WARNING      the launch lr's 90% interval") for ln in lines) == 1


def test_draws_without_a_vertex_past_the_tail_make_the_interval_unbounded_and_say_so():
    qs = normal_quantiles(-8.0, 0.5)
    qs[:21] = [-math.inf] * 21  # 10 % of the draws found no vertex
    out = combine(qs, spread("horizon", -0.32, -0.4, -0.3), point("batch", 0.5))
    assert out["lr_interval_log2"][0] == -math.inf and math.isfinite(out["lr_interval_log2"][1])
    parts = out["lr_interval_parts"]
    assert parts["width"]["variance_share"] == 1.0 and parts["horizon"]["variance_share"] == 0.0
    assert "unbounded (draws without a vertex)" in out["warning"]
    assert "largest part is width" in out["warning"]
