"""Measuring more where it decides (transfer.judge.rounds): the looks' confidence, which
widths get more seeds, and a straddling grid that more seeds decide, on synthetic curves."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState

from proxies import TransformerFamily
from transfer.core.config import Config, ProxyConf, ValidationConf
from transfer.judge.curves import grid
from transfer.judge.rounds import (
    decide_hint,
    farther_hint,
    look_confidence,
    look_of,
    plan_round,
    seeds_to_decide,
)
from transfer.judge.verdict import INCONCLUSIVE, PASSED, Limits, judge
from transfer.search import Context
from transfer.search.family import ProxyPlan
from transfer.search.progress import makespan
from transfer.verdict import width
from transfer.verdict.width import judge_study, looks_taken

COORD_OK = {"passed": True, "max_abs_slope": 0.1}
XS = grid(-7.0, 7, 0.5)


class Grid:
    """Seed-mean parabolas (1.5× steeper above the optimum) at widths 64 and 256 with a level
    offset per seed and noise per (point, seed); seeds can be added to one width later."""

    def __init__(self, noise: float, seeds: int = 2, rng_seed: int = 0, vertex: float = -7.0):
        self.rng, self.noise, self.vertex = np.random.default_rng(rng_seed), noise, vertex
        self.curves = {w: [(x, []) for x in XS] for w in (64, 256)}
        for w in self.curves:
            self.add(w, seeds)

    def add(self, width: int, seeds: int) -> None:
        offsets = self.rng.normal(0, 0.02, seeds)
        for x, ys in self.curves[width]:
            d = x - self.vertex
            level = 2.6 if width == 64 else 2.45  # the wider model is better, as it is
            base = level + 0.06 * (1.5 if d > 0 else 1.0) * d * d
            ys.extend(base + offsets + self.rng.normal(0, self.noise, seeds))


def test_each_later_look_is_judged_at_a_stricter_confidence():
    assert look_confidence(0.9, 1) == pytest.approx(0.9)
    assert look_confidence(0.9, 2) == pytest.approx(0.95)
    assert look_confidence(0.9, 3) == pytest.approx(1 - 0.1 / 3)
    # an archived verdict's look, read back from the confidence it was judged at
    assert [look_of(0.9, look_confidence(0.9, n)) for n in (1, 2, 3)] == [1, 2, 3]
    assert look_of(0.9, 0.5) == 1  # no look matches


def straddling(rng_seed: int = 10) -> tuple[Grid, object]:
    """A μP grid (the optimum fixed) whose drift interval straddles ±0.5 at 2 seeds."""
    g = Grid(noise=0.07, rng_seed=rng_seed)
    v = judge(g.curves, None, -7.0, Limits(), COORD_OK)
    return g, v


def test_a_straddling_drift_is_the_only_thing_between_the_grid_and_a_verdict():
    g, v = straddling()
    assert v.outcome == INCONCLUSIVE and v.more_data_decides, v.reasons
    assert all("too noisy to tell" in r or "not under" in r for r in v.inconclusive_because)


def test_a_round_is_planned_only_where_it_is_predicted_to_decide_within_the_budget():
    _, v = straddling()
    seeds = {64: 2, 256: 2}
    cost = {64: 60.0, 256: 400.0}
    plan = plan_round(v, base_confidence=0.9, looks=1, seeds=seeds, add=2,
                      seconds_per_seed=cost, left=5000.0)
    assert plan is not None
    widths, n = plan
    assert set(widths) <= {64, 256} and n % 2 == 0 and n * sum(cost[w] for w in widths) <= 5000
    # the cheapest plan that decides: none cheaper is predicted to
    cheaper = plan_round(v, base_confidence=0.9, looks=1, seeds=seeds, add=2,
                         seconds_per_seed=cost, left=n * sum(cost[w] for w in widths) - 1)
    assert cheaper is None
    # nothing fits: no round, rather than a round that cannot decide
    assert plan_round(v, base_confidence=0.9, looks=1, seeds=seeds, add=2,
                      seconds_per_seed=cost, left=50.0) is None
    # a verdict that is not inconclusive on straddling intervals plans nothing
    passed = judge(Grid(noise=0.002).curves, None, -7.0, Limits(), COORD_OK)
    assert passed.outcome == PASSED
    assert plan_round(passed, base_confidence=0.9, looks=1, seeds=seeds, add=2,
                      seconds_per_seed=cost, left=1e9) is None


def test_more_seeds_where_they_decide_reach_a_verdict():
    """The loop the width grid runs: judge, plan a round, train it, judge again at the next
    look's confidence; a μP grid that could not tell at 2 seeds passes within two rounds."""
    g, v = straddling()
    looks = 1
    while v.more_data_decides and looks <= 2:
        seeds = {w: len(g.curves[w][0][1]) for w in g.curves}
        plan = plan_round(v, base_confidence=0.9, looks=looks, seeds=seeds, add=2,
                          seconds_per_seed={64: 60.0, 256: 400.0}, left=5000.0)
        assert plan is not None
        for w in plan[0]:
            g.add(w, plan[1])
        looks += 1
        v = judge(g.curves, None, -7.0, Limits(confidence=look_confidence(0.9, looks)),
                  COORD_OK)
    assert v.outcome == PASSED, v.reasons
    assert looks > 1 and v.confidence == pytest.approx(look_confidence(0.9, looks))
    assert math.isfinite(v.drift_log2) and abs(v.drift_log2) < 0.5


def test_the_hint_names_the_seeds_predicted_to_decide_and_their_price():
    """An inconclusive verdict that more seeds decide names the least k such that every curve
    at k × its seeds is predicted to decide it, and prices it from each curve's seconds; a rerun
    of the grid at those seeds then decides it (here: passes)."""
    g, v = straddling()
    seeds = {w: len(g.curves[w][0][1]) for w in g.curves}
    seconds = {64: 400.0, 256: 600.0}
    k = seeds_to_decide(v, seeds=seeds)
    assert k is not None and 2 <= k <= 16
    # k − 1 is not predicted to decide it: the least
    assert k == 2 or seeds_to_decide(v, seeds=seeds, max_multiple=k - 1) is None
    hint = decide_hint(v, seeds=seeds, seconds=seconds,
                       knob=lambda m: f"validation.seeds={2 * m}")
    assert hint.startswith(f"validation.seeds={2 * k}: every curve at {k} × its planned seeds")
    assert f"~{1000 * k:,.0f} trial-seconds for this grid against 1,000" in hint
    assert "about even odds" in hint
    rerun = Grid(noise=0.07, seeds=2 * k, rng_seed=10)
    assert judge(rerun.curves, None, -7.0, Limits(), COORD_OK).outcome != INCONCLUSIVE
    # where not even 16 × is predicted to decide it, the hint says so (no static hint)
    assert seeds_to_decide(v, seeds=seeds, max_multiple=1) is None
    short = decide_hint(v, seeds=seeds, seconds=seconds, knob=str, max_multiple=1)
    assert short.startswith("not even every curve at 1 × its planned seeds")
    # a passed verdict, or one that more seeds do not decide, has no priced hint
    passed = judge(Grid(noise=0.002).curves, None, -7.0, Limits(), COORD_OK)
    assert decide_hint(passed, seeds=seeds, seconds=seconds, knob=str) is None
    one = judge(Grid(noise=0.07, seeds=1).curves, None, -7.0, Limits(), COORD_OK)
    assert not one.more_data_decides
    assert decide_hint(one, seeds={64: 1, 256: 1}, seconds=seconds, knob=str) is None


def test_the_hint_counts_a_seed_round_against_the_planned_seeds():
    """After a round took width 256 from its planned 2 seeds to 4, a rerun at k × the settings
    gives it 2k, not 4k: k is found on the planned seeds, so it is more than the seeds it ended
    with would say (3 against 2 here), and the price scales each curve's seconds by k × planned
    / ended."""
    g, v = straddling()
    ended, planned = {64: 2, 256: 4}, {64: 2, 256: 2}
    k_planned = seeds_to_decide(v, seeds=ended, planned=planned)
    k_ended = seeds_to_decide(v, seeds=ended)
    assert k_planned is not None and k_ended is not None and k_planned > k_ended
    hint = decide_hint(v, seeds=ended, seconds={64: 400.0, 256: 1200.0},
                       knob=lambda m: f"validation.seeds={2 * m}", planned=planned)
    price = 400.0 * k_planned + 1200.0 * k_planned * 2 / 4
    assert hint.startswith(f"validation.seeds={2 * k_planned}: ")
    assert f"~{price:,.0f} trial-seconds for this grid against 1,600" in hint


def drifting(vertices: dict[int, float], noise: float = 0.003) -> dict:
    """Clean curves at widths 64-256 whose optimum moves by `vertices`, the wider one better."""
    rng = np.random.default_rng(0)
    return {w: [(float(x), list(2.6 - 0.05 * math.log2(w / 64) + 0.06 * (x - v) ** 2
                                + rng.normal(0, noise, 2))) for x in grid(v, 7, 0.5)]
            for w, v in vertices.items()}


def test_models_that_disagree_at_the_target_are_priced_as_a_curve_nearer_it():
    """An optimum that moves −0.45 octave from 64 to 256 (inside ±0.5) on clean curves: the
    converging and log-linear models disagree at 3072 by more than 0.5, which more seeds at these
    widths do not settle; the hint names one more width, priced from the widest curve's seconds.
    A verdict held by anything else (a straddling drift alone) has no such hint."""
    v = judge(drifting({64: -6.0, 128: -6.3, 256: -6.45}), None, -6.0,
              Limits(target_width=3072), COORD_OK)
    assert v.outcome == INCONCLUSIVE and v.farther_decides and not v.more_data_decides
    assert [r for r in v.inconclusive_because if "models disagree" in r] == \
        v.inconclusive_because
    seconds = {64: 100.0, 128: 200.0, 256: 600.0}
    assert seeds_to_decide(v, seeds=dict.fromkeys(seconds, 2)) is None
    hint = farther_hint(v, seconds=seconds, knob="proxy.validation_width=512", cost_ratio=4.0)
    assert hint.startswith("proxy.validation_width=512: one more curve nearer the target, "
                           "~2,400 trial-seconds (4 × the width-256 curve's 600)")
    assert f"disagree by {v.trajectory['disagreement']:.2f} octave at 3072" in hint
    _, straddle = straddling()
    assert not straddle.farther_decides
    assert farther_hint(straddle, seconds=seconds, knob="x", cost_ratio=4.0) is None


def test_a_run_prints_the_priced_hint_but_not_on_a_budget_that_cannot_pass():
    """`width.with_hint` on a grid study: the hint is priced from the trials' own seconds; a
    budget that cannot pass (`Limits.can_pass` false, smoke) keeps its own hint."""
    from optuna.distributions import FloatDistribution, IntDistribution

    g, v = straddling()
    study = optuna.create_study()
    dists = {"log2_lr": FloatDistribution(-20, 5), "width": IntDistribution(1, 4096)}
    for w, pts in g.curves.items():
        for x, ys in pts:
            for y in ys:
                study.add_trial(optuna.trial.create_trial(
                    params={"log2_lr": x, "width": w}, distributions=dists, value=float(y),
                    user_attrs={"seconds": 10.0}))
    seconds = 10.0 * sum(len(ys) for pts in g.curves.values() for _, ys in pts)
    hinted = width.with_hint(v, study, g.curves, "width", lambda k: f"validation.seeds={2 * k}",
                             Limits())
    k = seeds_to_decide(v, seeds={64: 2, 256: 2})
    assert hinted.decide_with.startswith(f"validation.seeds={2 * k}: ")
    assert f"~{k * seconds:,.0f} trial-seconds for this grid against {seconds:,.0f}" in \
        hinted.decide_with
    smoke = width.with_hint(v, study, g.curves, "width", str, Limits(can_pass=False))
    assert smoke.decide_with == v.decide_with


class DeepGrid:
    """The depth grid's shape: a curve per depth (2, 4, 8), each fitted alone, 3 seeds, a
    curvature near the noise (the default run's width-32 grid: S/N 3-5); seeds can be added to
    one curve later."""

    def __init__(self, rng_seed: int, noise: float = 0.03, seeds: int = 3):
        self.rng, self.noise = np.random.default_rng(rng_seed), noise
        self.curves = {L: [(x, []) for x in XS] for L in (2, 4, 8)}
        for L in self.curves:
            self.add(L, seeds)

    def add(self, depth: int, seeds: int) -> None:
        offsets = self.rng.normal(0, 0.02, seeds)
        for x, ys in self.curves[depth]:
            d = x + 7.0
            base = 2.2 - 0.03 * math.log2(depth) + 0.03 * (1.5 if d > 0 else 1.0) * d * d
            ys.extend(base + offsets + self.rng.normal(0, self.noise, seeds))

    def seeds(self) -> dict[int, int]:
        return {L: len(c[0][1]) for L, c in self.curves.items()}


def depth_limits(looks: int = 1, target: int | None = None) -> Limits:
    return Limits(axis="depth", judge_drift=False, shared_shape=False, min_trajectory_widths=3,
                  confidence=look_confidence(0.9, looks), target_width=target)


DEEP_COST = {2: 10.0, 4: 20.0, 8: 40.0}


def test_a_curvature_snr_under_its_limit_is_what_more_seeds_decide():
    """Only the 8-layer curve's S/N (2.6) is short: the verdict says more data decides, and
    the cheapest round that is predicted to lift it (S/N ∝ √seeds) is one seed there."""
    g = DeepGrid(28)
    v = judge(g.curves, None, -7.0, depth_limits(), COORD_OK)
    assert v.outcome == INCONCLUSIVE and v.straddling == ["snr"] and v.more_data_decides
    assert set(v.curvature_snr_by) == {2, 4, 8}
    assert v.curvature_snr == pytest.approx(min(v.curvature_snr_by.values()))
    assert min(v.curvature_snr_by, key=v.curvature_snr_by.get) == 8 and v.curvature_snr < 3
    plan = plan_round(v, base_confidence=0.9, looks=1, seeds=g.seeds(), add=1,
                      seconds_per_seed=DEEP_COST, left=1e4, max_multiple=12)
    assert plan == ((8,), 1)
    # a budget under one seed at 8 layers plans nothing
    assert plan_round(v, base_confidence=0.9, looks=1, seeds=g.seeds(), add=1,
                      seconds_per_seed=DEEP_COST, left=39.0, max_multiple=12) is None


def test_seeds_added_to_one_curve_narrow_that_curves_noise_alone():
    """Each depth's curve is fitted alone with its seed mean's σ from its own seeds: seeds at
    8 layers lift its S/N about as √seeds predicts, and leave the others' near where they
    were (only the pooled per-seed noise is re-estimated)."""
    g = DeepGrid(28)
    before = judge(g.curves, None, -7.0, depth_limits(), COORD_OK).curvature_snr_by
    g.add(8, 9)
    after = judge(g.curves, None, -7.0, depth_limits(), COORD_OK).curvature_snr_by
    assert after[8] > 1.5 * before[8]
    assert all(abs(after[L] / before[L] - 1) < 0.15 for L in (2, 4))


def test_more_seeds_where_the_curvature_is_short_reach_a_verdict():
    """The depth grid's loop on curves too flat for their noise at 3 seeds: each round adds
    seeds to the cheapest curves predicted to reach S/N 3, judged again at the next look;
    two short curves get seeds together, and both grids pass."""
    for rng_seed, first in ((28, (8,)), (8, (2, 8))):
        g, looks = DeepGrid(rng_seed), 1
        v = judge(g.curves, None, -7.0, depth_limits(), COORD_OK)
        assert v.straddling == ["snr"]
        plans = []
        while v.more_data_decides and looks <= 2:
            plan = plan_round(v, base_confidence=0.9, looks=looks, seeds=g.seeds(), add=1,
                              seconds_per_seed=DEEP_COST, left=1e4, max_multiple=12)
            assert plan is not None
            plans.append(plan)
            for L in plan[0]:
                g.add(L, plan[1])
            looks += 1
            v = judge(g.curves, None, -7.0, depth_limits(looks), COORD_OK)
        assert plans[0][0] == first
        assert v.outcome == PASSED, v.reasons
        assert v.confidence == pytest.approx(look_confidence(0.9, looks))


def test_an_interval_unbounded_by_a_flat_curve_is_what_more_seeds_decide():
    """A curve too flat for its noise leaves the optimum at the target depth with no finite
    interval (some bootstrap fits have no minimum). That follows from the short S/N, so the
    seeds that lift the S/N bound it: a round is planned, where before the unbounded interval
    stopped every round (Qwen2.5 3B's depth grid at 1ad67d3, S/N 2.0-2.4), and the grid
    passes."""
    for rng_seed in (4, 14):
        g, looks = DeepGrid(rng_seed, noise=0.045), 1
        v = judge(g.curves, None, -7.0, depth_limits(target=28), COORD_OK)
        assert v.straddling == ["snr", "flat"] and v.more_data_decides
        assert not all(map(math.isfinite, v.trajectory["interval"]))
        while v.more_data_decides and looks <= 4:  # seed 14: 4 rounds, its interval ±0.51
            plan = plan_round(v, base_confidence=0.9, looks=looks, seeds=g.seeds(), add=1,
                              seconds_per_seed=DEEP_COST, left=1e4, max_multiple=12)
            assert plan is not None
            for L in plan[0]:
                g.add(L, plan[1])
            looks += 1
            v = judge(g.curves, None, -7.0, depth_limits(looks, target=28), COORD_OK)
        assert v.outcome == PASSED, v.reasons
        assert all(map(math.isfinite, v.trajectory["interval"]))


def test_a_curvature_too_short_for_the_most_seeds_plans_nothing():
    """S/N 1.3 needs (3 / 1.3)² ≈ 5× the seeds; 12 more than 3 give √5: no round, inconclusive
    it stays."""
    g = DeepGrid(23)
    v = judge(g.curves, None, -7.0, depth_limits(), COORD_OK)
    assert v.curvature_snr < 1.35 and v.more_data_decides
    assert plan_round(v, base_confidence=0.9, looks=1, seeds=g.seeds(), add=1,
                      seconds_per_seed=DEEP_COST, left=1e9, max_multiple=12) is None


def test_a_shared_curvature_grows_only_as_its_fewest_seeds_do():
    """Across width the curvature is shared and its σ is the seed mean's at the fewest seeds:
    a short S/N (2.2) is lifted only by seeds at every width, though one width is cheaper."""
    g = Grid(noise=0.09, rng_seed=8)
    v = judge(g.curves, None, -7.0, Limits(), COORD_OK)
    assert v.curvature_snr_by == {} and v.straddling == ["snr"] and v.curvature_snr < 3
    plan = plan_round(v, base_confidence=0.9, looks=1, seeds={64: 2, 256: 2}, add=2,
                      seconds_per_seed={64: 60.0, 256: 400.0}, left=1e6)
    assert plan == ((64, 256), 2)


def test_the_width_grid_queues_its_seed_round_records_it_and_is_judged_again(monkeypatch):
    """The width grid whole (`width.add_seed_round` on a real study): a straddling μP grid at
    2 seeds gets `validation.seeds` more seeds, or a multiple, at every point of the widths the
    plan chose, numbered after the grid's; the round is recorded under `width`, the next look
    is judged at its stricter confidence, and with `max_rounds` reached nothing more is queued."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    def make_ctx(**v) -> Context:
        cfg = Config(validation=ValidationConf(**{"points": 7, "step_log2": 0.5, "seeds": 2,
                                                  "max_extra_seconds": 20000.0, **v}),
                     proxy=ProxyConf(seed=0))
        fam = TransformerFamily(n_layers=2, d_head=8, seq_len=32, base_width=32)
        return Context(cfg=cfg, proxies=ProxyPlan(fam, 64, 256, 32, {}, grid_widths=(64, 256)),
                       corpus=None, storage=None, lock=contextlib.nullcontext, run_name="r")

    # the price of a trial, not what is measured here: 60 s at width 64, 400 s at 256
    monkeypatch.setattr(width, "predict_seconds", lambda cx, hp, w: {64: 60.0, 256: 400.0}[w])
    g, v = straddling()
    dist = {"log2_lr": optuna.distributions.FloatDistribution(-10.0, -4.0),
            "width": optuna.distributions.CategoricalDistribution([64, 256])}

    def grid_study(record: dict | None = None) -> optuna.Study:
        dist["seed"] = optuna.distributions.CategoricalDistribution(
            list(range(width.max_seeds(make_ctx().cfg.validation))))
        study = optuna.create_study()
        for w, curve in g.curves.items():
            for x, ys in curve:
                for s, y in enumerate(ys):
                    study.add_trial(optuna.trial.create_trial(
                        params={"log2_lr": x, "width": w, "seed": s}, distributions=dist,
                        value=float(y), user_attrs={"seconds": {64: 60.0, 256: 400.0}[w]}))
        if record is not None:
            study.set_user_attr("seed_round_1", record)
        return study

    c, hp = make_ctx(), {"lr": 2.0 ** -7}
    study = grid_study()
    assert judge_study(c, study, 2.0 ** -7, COORD_OK).more_data_decides
    # nothing fits a budget under one seed's price at the cheapest width: no round
    assert width.add_seed_round(make_ctx(max_extra_seconds=50.0), study, -7.0, hp) == []
    line = width.add_seed_round(c, study, -7.0, hp)
    assert isinstance(line, str) and "drift" in line and "judged again at 95.0%" in line
    r = study.user_attrs["seed_round_1"]
    chosen, n = r["width"], r["seeds_added"]
    assert set(chosen) <= {64, 256} and n >= 2 and n % 2 == 0
    waiting = [t.system_attrs["fixed_params"] for t in study.get_trials(deepcopy=False)
               if t.state == TrialState.WAITING]
    assert sorted((p["width"], p["seed"], p["log2_lr"]) for p in waiting) == sorted(
        (w, s, x) for w in chosen for s in range(2, 2 + n) for x in XS)
    # its price: n seeds × 7 points at each chosen width, on the run's workers
    per_point = {64: 60.0, 256: 400.0}
    assert r["predicted_seconds"] == pytest.approx(n * sum(
        makespan([per_point[w]] * 7, c.progress.workers) for w in chosen))
    assert r["predicted_seconds"] <= c.cfg.validation.max_extra_seconds
    # while they train, nothing is judged and nothing more is queued
    assert width.add_seed_round(c, study, -7.0, hp) is None
    # the round trained: the next look passes at 95 %, and the last round allowed is spent
    for w in chosen:
        g.add(w, n)
    trained = grid_study(r)
    assert looks_taken(c, trained) == 2
    again = judge_study(c, trained, 2.0 ** -7, COORD_OK)
    assert again.confidence == pytest.approx(look_confidence(0.9, 2))
    assert again.outcome == PASSED, again.reasons
    assert width.add_seed_round(make_ctx(max_rounds=1), trained, -7.0, hp) == []
