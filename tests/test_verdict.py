"""The pure verdict on synthetic curves: one test per pass, per rejection, per "cannot tell".

Curves are built with numbers (a parabola in log2 lr per width, seed offsets, point noise from a
fixed generator), so each test trips exactly the rule it names.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from transfer.judge.curves import bracket, extend_each, extend_points, grid
from transfer.judge.shared_curvature import joint_fit
from transfer.judge.verdict import INCONCLUSIVE, PASSED, REJECTED, Limits, judge

XS = grid(-7.0, 7, 0.5)
COORD_OK = {"passed": True, "max_abs_slope": 0.1}


def curves(v0: float = -7.0, v1: float = -7.0, *, a: float = 0.06, point_noise: float = 0.004,
           seed_offset: float = 0.07, seeds: int = 2, xs=XS, levels=(2.6, 2.45), rng_seed=0,
           diverge_above: dict | None = None, asym: float = 1.0) -> dict:
    """Seed-mean parabolas (`asym` times as curved above the optimum as below) with a level
    offset per seed (shared by every point, as with common seeds) and independent noise per
    (point, seed)."""
    rng = np.random.default_rng(rng_seed)
    out = {}
    for (w, v), level in zip(((64, v0), (256, v1)), levels):
        offsets = rng.normal(0, seed_offset, seeds)
        pts = []
        for x in xs:
            if diverge_above and w in diverge_above and x > diverge_above[w]:
                pts.append((x, [math.nan] * seeds))
                continue
            curv = a * (asym if x > v else 1.0)
            pts.append((x, [curv * (x - v) ** 2 + level + offsets[s] + rng.normal(0, point_noise)
                            for s in range(seeds)]))
        out[w] = pts
    return out


DEFAULT = Limits()


def verdict(c, limits=DEFAULT, coord=COORD_OK, tuned=-7.0):
    return judge(c, None, tuned, limits, coord)


# ---- pass -----------------------------------------------------------------------------------
def test_a_fixed_optimum_passes_with_intervals_inside_the_limits():
    v = verdict(curves())
    assert v.outcome == PASSED and v.reasons == []
    assert -0.5 <= v.drift_ci[0] <= v.drift_log2 <= v.drift_ci[1] <= 0.5
    assert v.loss_gap_ci[1] <= 0.01
    assert v.optimum_log2_lr == pytest.approx(-7.0, abs=0.15)


def test_seed_offsets_cancel_in_the_vertex():
    """A large level offset per seed (common to every point) does not widen the drift interval:
    the noise that moves a vertex is the scatter about the parabola."""
    quiet = verdict(curves(seed_offset=0.0))
    loud = verdict(curves(seed_offset=0.3))
    assert loud.outcome == PASSED
    width = lambda v: v.drift_ci[1] - v.drift_ci[0]
    assert width(loud) == pytest.approx(width(quiet), rel=0.05)


def test_the_verdict_is_reproducible():
    a, b = verdict(curves()), verdict(curves())
    assert a.drift_ci == b.drift_ci and a.loss_gap_ci == b.loss_gap_ci


# ---- rejections -------------------------------------------------------------------------------
def test_a_drift_wholly_outside_the_tolerance_rejects():
    v = verdict(curves(v1=-8.0))
    assert v.outcome == REJECTED
    assert [r for r in v.rejected_because if r.startswith("the optimum moved")]
    assert v.drift_ci[1] < -0.5


def test_an_optimum_beyond_the_grid_edge_rejects_with_a_bound():
    v = verdict(curves(v1=-10.0))
    assert v.outcome == REJECTED
    assert any("lowest lr of the grid" in r and "drift" in r for r in v.rejected_because)
    assert v.bracketed == {64: True, 256: False}


def test_a_costly_gap_rejects_even_when_the_drift_is_inside_the_tolerance():
    """Sharp curve: a 0.45-octave drift (inside ±0.5) costs 2 % at the wide width."""
    v = verdict(curves(v1=-7.45, a=0.25, point_noise=0.001), Limits(tolerance_log2=0.5))
    assert any("costs" in r for r in v.rejected_because)
    assert not any(r.startswith("the optimum moved") for r in v.rejected_because)


def test_wider_is_worse_rejects():
    v = verdict(curves(levels=(2.45, 2.60)))
    assert v.outcome == REJECTED
    assert [r for r in v.rejected_because if r.startswith("wider is worse")]
    assert v.wider_minus_narrow_ci[0] > 0


def test_an_asymmetric_curve_puts_the_vertex_where_it_is():
    """Curves twice as steep above the optimum as below: the two-sided fit finds each optimum
    to a hundredth of an octave, where a symmetric parabola puts it ~0.1 octave low (the bias
    the intervals did not hold, issue 35), and its interval covers it."""
    c = curves(v0=-7.0, v1=-7.25, asym=2.0, point_noise=0.0005, seed_offset=0.0)
    v = verdict(c)
    assert v.best_log2_lr[64] == pytest.approx(-7.0, abs=0.01)
    assert v.best_log2_lr[256] == pytest.approx(-7.25, abs=0.01)
    assert v.drift_ci[0] <= -0.25 <= v.drift_ci[1]
    plain = joint_fit({w: {"log2_lr": [p[0] for p in pts], "loss": [np.mean(p[1]) for p in pts]}
                       for w, pts in c.items()}, [64, 256], ratios=(1.0,))
    assert plain.vertex(64) < -7.05  # the symmetric parabola's bias, for contrast


def test_a_wide_model_that_diverges_where_the_narrow_one_trains_rejects():
    v = verdict(curves(diverge_above={256: -7.6}))
    assert v.outcome == REJECTED
    assert any("width 256: fewer than 3 grid points" in r for r in v.rejected_because)


def test_a_failed_coordinate_check_rejects_a_perfect_curve():
    v = verdict(curves(), coord={"passed": False, "max_abs_slope": 1.1})
    assert v.outcome == REJECTED
    assert v.rejected_because == [v.rejected_because[0]]
    assert v.rejected_because[0].startswith("coordinate check failed")


# ---- cannot tell ------------------------------------------------------------------------------
def test_a_flat_curve_is_inconclusive_never_passed():
    v = verdict(curves(a=0.0, point_noise=0.01))
    assert v.outcome == INCONCLUSIVE
    assert any("too flat" in r for r in v.inconclusive_because)


def test_no_rejection_below_the_evidence_floor():
    """The smoke budget's case (issue 35): one seed, and the narrow optimum beyond the grid's
    high edge, far enough to bound the drift past the tolerance. With two seeds that rejects;
    with one it cannot, and the reason names what is missing."""
    far = dict(v0=-4.5, v1=-7.0, a=0.06)
    assert verdict(curves(**far)).outcome == REJECTED
    v = verdict(curves(**far, seeds=1))
    assert v.outcome == INCONCLUSIVE and v.rejected_because == []
    floor = [r for r in v.inconclusive_because if r.startswith("not rejected on this evidence")]
    assert floor and "1 seed(s), fewer than 2" in floor[0] and "highest lr" in floor[0]


def test_divergence_on_one_seed_is_not_a_rejection():
    v = verdict(curves(diverge_above={256: -7.6}, seeds=1))
    assert v.outcome == INCONCLUSIVE
    assert any(r.startswith("not rejected on 1 seed(s)") and "diverges" in r
               for r in v.inconclusive_because)


def test_one_seed_is_inconclusive():
    v = verdict(curves(seeds=1))
    assert v.outcome == INCONCLUSIVE
    assert any("1 seed(s)" in r for r in v.inconclusive_because)


def test_too_few_finite_points_is_inconclusive():
    v = verdict(curves(diverge_above={64: -7.1, 256: -7.1}))  # 3 finite points each
    assert v.outcome == INCONCLUSIVE
    assert any("finite points to fit" in r for r in v.inconclusive_because)


def test_an_optimum_at_the_edge_at_both_widths_is_inconclusive_not_rejected():
    """The parallel-block case of issue 13: loss falls to the top of the grid at both widths,
    the curves run parallel. That is "cannot tell yet", not "no"."""
    v = verdict(curves(v0=-4.0, v1=-4.2))
    assert v.outcome == INCONCLUSIVE
    assert v.bracketed == {64: False, 256: False}
    assert all("highest lr of the grid" in r for r in v.inconclusive_because)


def test_a_noisy_drift_straddling_the_tolerance_is_inconclusive():
    v = verdict(curves(v1=-7.5, a=0.03, point_noise=0.02, seed_offset=0.0, rng_seed=3))
    lo, hi = v.drift_ci
    assert lo < -0.5 < hi
    assert v.outcome == INCONCLUSIVE
    assert any("too noisy to tell" in r for r in v.inconclusive_because)


def test_a_budget_that_cannot_pass_turns_a_pass_into_inconclusive():
    v = verdict(curves(), Limits(can_pass=False, decide_hint="budget=default"))
    assert v.outcome == INCONCLUSIVE and v.decide_with == "budget=default"
    assert any("never validates" in r for r in v.inconclusive_because)


# ---- reporting --------------------------------------------------------------------------------
def test_extrapolation_to_the_target_width_is_reported():
    v = verdict(curves(v1=-7.2), Limits(target_width=4096))
    ex = v.extrapolation
    assert ex["measured_octaves"] == 2.0
    assert ex["extrapolated_octaves"] == pytest.approx(4.0)
    # the estimate at the target is the trajectory's (its models), not a restated straight line
    assert "implied_target_drift" not in ex and v.trajectory["target_width"] == ex["target_width"]


def test_to_dict_is_plain_and_complete():
    d = verdict(curves()).to_dict()
    assert d["outcome"] == "passed" and d["passed"] is True and d["reasons"] == []
    assert set(d["curves"]) == {"64", "256"}
    for key in ("drift_ci", "loss_gap_ci", "curvature_snr", "noise", "extrapolation"):
        assert key in d


# ---- the grid ---------------------------------------------------------------------------------
def test_bracket_sees_the_edges_and_counts_a_diverged_neighbour_as_higher():
    xs = np.array([0.0, 1.0, 2.0])
    assert bracket(xs, np.array([1.0, 2.0, 3.0])) == (True, False)
    assert bracket(xs, np.array([3.0, 2.0, 1.0])) == (False, True)
    assert bracket(xs, np.array([3.0, 1.0, math.nan])) == (False, False)


def test_extend_points_adds_one_step_on_the_needed_side_within_the_cap():
    c = curves(v0=-4.0, v1=-4.0)  # minimum at the top of the grid at both widths
    assert extend_points(c, step=0.5, lo=-9.0, hi=-4.0) == [-5.0]  # the grid tops at -5.5
    assert extend_points(c, step=0.5, lo=-9.0, hi=-5.5) == []  # at the cap
    assert extend_points(curves(), step=0.5, lo=-9.0, hi=-5.0) == []  # bracketed


def test_extend_each_adds_points_only_to_the_curve_at_its_edge():
    c = curves(v0=-7.0, v1=-4.0)  # narrow bracketed, wide minimum at the grid's top (-5.5)
    b = {64: (-9.0, -4.0), 256: (-9.0, -4.0)}
    assert extend_each(c, step=0.5, bounds=b) == {256: [-5.0]}
    assert extend_each(c, step=0.5, bounds={**b, 256: (-9.0, -5.5)}) == {}  # capped
    assert extend_each(curves(), step=0.5, bounds=b) == {}  # both bracketed


def test_joint_fit_recovers_exact_vertices():
    xs = grid(-7.0, 7, 0.5)
    c = {w: {"log2_lr": xs, "loss": [0.05 * (x - v) ** 2 + 2.5 for x in xs]}
         for w, v in ((64, -7.0), (256, -6.6))}
    fit = joint_fit(c, [64, 256])
    assert fit.vertex(256) - fit.vertex(64) == pytest.approx(0.4, abs=1e-9)
    assert fit.a == pytest.approx(0.05)


def test_joint_fit_refuses_a_concave_curve():
    assert joint_fit({64: {"log2_lr": [0.0, 1.0, 2.0], "loss": [1.0, 2.0, 1.0]}}, [64]) is None
