"""`python -m transfer.compare`: the metrics on known curves, the table's "cannot be told apart",
and the command end to end on real smoke sweeps (reuse, one more family, bad input)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from transfer.outputs.compare import Family, basin_octaves, compare, leaders, lr_sensitivity
from transfer.outputs.compare_report import markdown

XS = np.arange(-3.0, 3.01, 0.5)  # a log2-lr grid, half-octave steps


def test_the_basin_is_where_the_loss_stays_within_one_percent():
    """1 + 0.04 x²: within 1 % of the best (1.0) where |x| ≤ 0.5, so one octave wide."""
    width, open_ = basin_octaves(XS, 1 + 0.04 * XS ** 2)
    assert width == pytest.approx(1.0) and not open_
    width, _ = basin_octaves(XS, 1 + 0.01 * XS ** 2)  # flatter: within 1 % where |x| ≤ 1
    assert width == pytest.approx(2.0)
    flat = basin_octaves(XS, np.ones_like(XS))  # the whole grid: a lower bound
    assert flat == (pytest.approx(6.0), True)


def test_lr_sensitivity_is_wortsmans_mean_excess_with_divergence_at_the_initial_loss():
    y = np.array([3.5, 3.1, 3.0, 3.2, np.nan])  # the last point diverged
    l0 = math.log(256)
    expected = np.mean([0.5, 0.1, 0.0, 0.2, l0 - 3.0])
    assert lr_sensitivity(y, l0) == pytest.approx(expected)
    assert lr_sensitivity(np.array([3.0, 9.0]), l0) == pytest.approx((0 + l0 - 3.0) / 2)


def _row(model: str, value: float, ci: list[float]) -> dict:
    return {"model": model, "m": {"value": value, "ci": ci}}


def test_overlapping_intervals_cannot_be_told_apart():
    rows = [_row("a", 1.0, [0.9, 1.1]), _row("b", 1.05, [0.95, 1.2]), _row("c", 2.0, [1.9, 2.1])]
    assert leaders(rows, "m", -1) == {"best": None, "tied": ["a", "b"]}
    rows[1] = _row("b", 1.5, [1.4, 1.6])
    assert leaders(rows, "m", -1) == {"best": "a", "tied": []}
    assert leaders(rows, "m", +1) == {"best": "c", "tied": []}
    rows[2] = _row("c", 2.0, [math.nan, math.nan])  # no interval: cannot separate
    assert leaders(rows, "m", +1)["best"] is None


def _family(model: str, opt: float, curvature: float, level: float, seeds: int = 4,
            noise: float = 0.002, diverge_above: float | None = None) -> Family:
    """A family whose widest grid is `level + curvature (x − opt)²` with seed noise."""
    rng = np.random.default_rng(abs(hash(model)) % 2**32)
    xs = opt + XS
    losses = [[float(level + curvature * (x - opt) ** 2 + rng.normal(0, noise))
               for _ in range(seeds)] for x in xs]
    curve = {"log2_lr": xs.tolist(), "losses": losses}
    trials = pd.DataFrame({"stage": "validation", "width": 256, "lr": 2.0 ** xs,
                           "diverged": [diverge_above is not None and x > diverge_above
                                        for x in xs], "flops": 1e12})
    return Family(model=model, run=f"{model}-run", status="passed", curves={64: curve, 256: curve},
                  best_log2_lr={64: opt, 256: opt}, best_log2_lr_ci={256: [opt - 0.2, opt + 0.2]},
                  trials=trials, vocab_size=256, tokens=1e6,
                  cost={"gpu_hours_with_buffer": 1e4, "wall_days_with_buffer": 2.0,
                        "usd_with_buffer": 3e4})


def test_the_comparison_measures_each_family_with_intervals():
    sharp = _family("sharp", -6.0, 0.10, 3.0, diverge_above=-4.2)
    broad = _family("broad", -5.0, 0.01, 3.2)
    out = compare([sharp, broad], n_boot=300)
    rows = {r["model"]: r for r in out["rows"]}
    assert rows["broad"]["basin_octaves"]["value"] > rows["sharp"]["basin_octaves"]["value"]
    assert out["leaders"]["basin_octaves"]["best"] == "broad"
    assert out["leaders"]["loss_equal_tokens"]["best"] == "sharp"
    assert out["leaders"]["lr_sensitivity"]["best"] == "broad"
    # sharp diverged from -4.0 (the first grid point above -4.2): 2 octaves above its optimum
    assert rows["sharp"]["divergence_margin_octaves"]["value"] == pytest.approx(2.0)
    assert rows["broad"]["divergence_margin_octaves"]["bound"] == "lower"
    for r in rows.values():
        lo, hi = r["loss_equal_tokens"]["ci"]
        assert lo <= r["loss_equal_tokens"]["value"] <= hi
    assert rows["sharp"]["lr_transferred"]["spans"] == ""
    broad.spans = "width only: the depth check was inconclusive"
    row = compare([sharp, broad], n_boot=50)["rows"][1]
    assert row["lr_transferred"]["spans"] == "width only"
    text = markdown(out)
    assert "DataDecide" in text and "arXiv 2504.11393" in text and "| sharp (`sharp-run`)" in text
    # an inconclusive family's priced hint (the run's `decide_with`) under "Verdicts not passed"
    broad.status, broad.reasons = "inconclusive", ["width: too flat"]
    broad.decide = ["width: validation.seeds=8: every curve at 4 × its seeds"]
    out = compare([sharp, broad], n_boot=50)
    assert out["rows"][1]["decide_with"] == broad.decide
    assert ("- broad: inconclusive: width: too flat. To decide it: width: validation.seeds=8: "
            "every curve at 4 × its seeds") in markdown(out)
    # an interval target.yaml writes as null (no estimate) reads as NaN, and the table prints
    broad.train = {"lr": 0.02, "lr_interval": [None, None], "lr_transferred": 0.02,
                   "lr_transferred_interval": [None, 0.05]}
    out = compare([sharp, broad], n_boot=50)
    got = out["rows"][1]
    assert all(math.isnan(x) for x in got["lr"]["ci"])
    assert math.isnan(got["lr_transferred"]["ci"][0]) and got["lr_transferred"]["ci"][1] == 0.05
    assert "| broad (`broad-run`)" in markdown(out)


# ---- the command, end to end on smoke sweeps -------------------------------------------------
SMOKE = ["budget=smoke", "validation.seeds=2", "progress=off", "workers=1"]


def _compare(tmp: Path, models: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "transfer.compare", f"model={models}", *SMOKE,
                           *extra, f"archive_dir={tmp / 'sweeps'}"], cwd=tmp, text=True,
                          capture_output=True, check=False, env={
                              **__import__("os").environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.slow  # ~85 s: three sweeps end to end; CI runs the slow tests
def test_compare_runs_reuses_and_adds_one_family(tmp_path):
    first = _compare(tmp_path, "tiny,1b")
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.count("running its sweep") == 2
    out = next((tmp_path / "sweeps").glob("compare-2-*"))
    data = json.loads((out / "compare.json").read_text())
    assert [r["model"] for r in data["rows"]] == ["tiny", "1b"]
    for r in data["rows"]:
        assert r["seeds"] == 2 and len(r["loss_equal_tokens"]["ci"]) == 2
        assert r["gpu_hours"] > 0 and r["verdict"] in ("passed", "rejected", "inconclusive")
    for f in ("compare.md", "plots/lr_curves.png", "plots/trajectories.png"):
        assert (out / f).stat().st_size > 0
    trials = {p: p.stat().st_mtime for p in (tmp_path / "sweeps").glob("*/trials.csv")}
    # the second family's startup is the gap after the first, not the compare process's age
    startup = {p.parent.name.split("-")[0]: json.loads(p.read_text())["phases"]["startup"]
               for p in (tmp_path / "sweeps").glob("*/cost.json")}
    assert startup["1b"] < min(5.0, startup["tiny"]), startup

    started = time.time()
    again = _compare(tmp_path, "tiny,1b")
    assert again.returncode == 0 and again.stdout.count("reusing the finished run") == 2
    assert time.time() - started < 60
    assert {p: p.stat().st_mtime for p in trials} == trials  # nothing re-ran

    more = _compare(tmp_path, "tiny,1b,7b")
    assert more.returncode == 0, more.stderr[-2000:]
    assert more.stdout.count("reusing the finished run") == 2
    assert "7b: running its sweep" in more.stdout
    assert len(list((tmp_path / "sweeps").glob("compare-3-*/compare.md"))) == 1


@pytest.mark.parametrize("models, extra, says", [
    ("tiny", [], "two or more different families"),
    ("tiny,tiny", [], "two or more different families"),
    ("tiny,nope", [], "unknown model 'nope'"),
    ("tiny,hf", [], "conf/model/<name>.yaml"),
    ("tiny,1b", ["model.n_kv_heads=3"], "model.n_kv_heads=3"),
    ("tiny,1b", ["model.d_model=64.5"], "Error merging override model.d_model=64.5"),
])
def test_bad_input_is_exit_2_one_line_nothing_written(models, extra, says, tmp_path):
    done = _compare(tmp_path, models, *extra)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and says in done.stderr, done.stderr
    assert not (tmp_path / "sweeps").exists()


def test_the_report_says_how_coarse_the_fewest_seed_bootstrap_is():
    from transfer.outputs.compare_report import _draws_text

    assert _draws_text([{"seeds": 2}, {"seeds": 3}]) == "a bootstrap over 2 seeds has 3 distinct draws"
    assert _draws_text([{"seeds": 3}]) == "a bootstrap over 3 seeds has 10 distinct draws"
