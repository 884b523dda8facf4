"""The fit weighed by the basin's noise (`shared_curvature.noise_groups`, `Limits.basin_excess`):
the points past the basin on the high-lr side, where the loss climbs towards divergence and the
seeds scatter ~4× more, count by their own noise instead of widening every interval."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from transfer.judge.curves import grid, mean_curve
from transfer.judge.shared_curvature import fit_window, noise_groups, statistics
from transfer.judge.verdict import Limits, judge

XS = grid(-7.0, 7, 0.5)  # -8.5 .. -5.5
PAST = np.asarray(XS) > -6.25  # 0.2 and 0.45 nats above the optimum, over 6 % of 2.0-2.1
COORD_OK = {"passed": True, "max_abs_slope": 0.1}


def curves(rng_seed: int, *, past_ratio: float, sigma: float = 0.02, seeds: int = 2,
           a: float = 0.1, asym: float = 2.0, vertex: float = -7.0) -> dict:
    """Two widths' parabolas (steeper above the optimum), a level offset per seed, noise σ per
    (point, seed), `past_ratio` × σ where the true loss is > 6 % above the optimum's on the
    high side (`PAST`: the two highest lrs)."""
    rng = np.random.default_rng(rng_seed)
    out = {}
    for w, level in ((64, 2.1), (256, 2.0)):
        off = rng.normal(0, 0.02, seeds)
        pts = []
        for x in XS:
            d = x - vertex
            excess = a * (asym if d > 0 else 1.0) * d * d
            s = sigma * (past_ratio if d > 0 and excess > 0.06 * level else 1.0)
            pts.append((x, list(level + excess + off + rng.normal(0, s, seeds))))
        out[w] = pts
    return out


def _table(c: dict) -> tuple[dict, dict]:
    table, win = {}, {}
    for w, pts in c.items():
        xs, ys = mean_curve(pts)
        table[w] = {"log2_lr": xs.tolist(), "loss": ys.tolist(),
                    "losses": [list(p[1]) for p in pts]}
        win[w] = fit_window(xs, ys, 7)
    return table, win


def test_the_points_past_the_basin_get_their_own_noise_and_the_rest_theirs():
    table, win = _table(curves(0, past_ratio=6.0, seeds=4))
    out, rest, dof = noise_groups(table, win, sorted(table), 0.06)
    for w in table:
        rel = np.asarray(out[w]["rel_sd"])
        assert np.all(rel[~PAST] == 1.0) and np.all(rel[PAST] > 2.0)
    assert rest == pytest.approx(0.02, rel=0.35) and dof > 10
    # where the noise is the same everywhere no point is weighed less than about the rest
    table, win = _table(curves(0, past_ratio=1.0, seeds=4))
    out, _, _ = noise_groups(table, win, sorted(table), 0.06)
    assert max(max(out[w]["rel_sd"]) for w in out) < 1.6


def test_weights_of_one_are_the_plain_fit():
    table, win = _table(curves(1, past_ratio=1.0))
    ws = sorted(table)
    plain = statistics(table, win, ws, 0.015, 6, -7.0, confidence=0.9, n_boot=400, boot_seed=0)
    ones = {w: {**table[w], "rel_sd": [1.0] * len(XS)} for w in ws}
    same = statistics(ones, win, ws, 0.015, 6, -7.0, confidence=0.9, n_boot=400, boot_seed=0)
    assert same["v"] == pytest.approx(plain["v"]) and same["a"] == pytest.approx(plain["a"])
    assert same["drift_ci"] == pytest.approx(plain["drift_ci"])


def test_the_weighted_fit_is_nearer_the_truth_where_noisy_edge_points_pull_the_plain_one():
    """Over draws with the points past the basin 5× noisier: the weighted fit's drift is
    nearer the true drift (0), its curvature S/N higher and its interval narrower (on 100
    draws: drift sd 0.071 against 0.088, S/N 14.9 against 12.0; the 90 % interval held the
    truth 87 % of the time against 82 %; with the noise alike everywhere the two agree, 91 % and
    92 %: coverage is measured by `benchmarks/validator_power.py --past-ratio`)."""
    plain, weighted = dataclasses.replace(Limits(), basin_excess=None), Limits()
    assert weighted.basin_excess == 0.06  # the default
    got: dict[str, list] = {"plain": [], "weighted": []}
    for s in range(30):
        c = curves(100 + s, past_ratio=5.0)
        for name, lim in (("plain", plain), ("weighted", weighted)):
            v = judge(c, None, -7.0, lim, COORD_OK)
            lo, hi = v.drift_ci
            got[name].append((v.drift_log2, v.curvature_snr, hi - lo, lo <= 0.0 <= hi))
    p, w = (np.asarray(got[k], dtype=float) for k in ("plain", "weighted"))
    assert np.sqrt(np.mean(w[:, 0] ** 2)) < 0.9 * np.sqrt(np.mean(p[:, 0] ** 2))
    assert np.median(w[:, 1]) > 1.15 * np.median(p[:, 1])
    assert np.median(w[:, 2]) < np.median(p[:, 2])
    assert w[:, 3].mean() >= 0.75
