"""Every benchmark runs, on a toy setting: a refactor of the package that breaks one fails here.

The benchmarks are scripts built on the package's own grid, fit and verdict; each is imported
from benchmarks/ and its `main(argv)` run at a size that proves the plumbing only (the numbers
mean nothing). The ones that train are `slow`: CI runs them too (`pytest -m slow`).
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers_sweep import compose_cfg

from transfer.search.family import plan_proxies

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def bench(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_benchmark_has_a_test_here():
    here = Path(__file__).read_text()
    missing = [p.stem for p in BENCH.glob("*.py") if f'bench("{p.stem}")' not in here]
    assert not missing, f"benchmarks without a smoke test: {missing}"


def test_validator_power(capsys):
    bench("validator_power").main(["--budget", "smoke", "--model", "tiny", "--draws", "3"])
    out = capsys.readouterr().out
    assert "| configured | mup |" in out and "| configured | sp |" in out
    assert "interval covers the target's optimum" in out


def test_validator_power_overrides_the_budget():
    """A design measured before it is the default: `--override` reaches the grid's plan."""
    vp = bench("validator_power")
    plain, _ = vp.design_of("default", "3b")
    spread, _ = vp.design_of("default", "3b", overrides=("validation.spread_basins=4",
                                                         "validation.max_step_log2=1.5"))
    assert not plain["plan"].spreads and spread["plan"].spreads


def test_eta_calibration(tmp_path, capsys):
    from transfer.archive.store import Archive

    archive = Archive(tmp_path / "sweeps")
    pred = {"stages": 50.0, "validation": 400.0, "depth": 300.0}
    for name, depth in (("a", 600.0), ("b", 300.0)):
        archive.create_run(name, fingerprint=name, parametrization="mup")
        archive.write_yaml(name, "config.yaml", {"budget": "default",
                                                 "proxy": {"parametrization": "mup"}})
        measured = {**pred, "depth": depth}
        archive.write_json(name, "cost.json", {
            "prediction": {"phases": pred, "spent_before": {"probes": 10.0}},
            "phases": measured, "measured_seconds": 10.0 + sum(measured.values())})
        archive.record({"name": name, "status": "finished"})
    assert bench("eta_calibration").main([str(tmp_path / "sweeps"), "--yaml"]) == 0
    out = capsys.readouterr().out
    # a's wall 1060 s; probes 760 s (−28 %); left out, b's ratios (all 1): −28 %; in sample,
    # depth × 1.5: 910 s (−14 %)
    assert "-28%      -28%       -14%" in out
    assert "eta_prior:\n    mup: {stages: 1.00, validation: 1.00, depth: 1.50}" in out
    assert bench("eta_calibration").main([str(tmp_path / "none")]) == 2


def test_early_look(tmp_path, capsys):
    import json

    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    run = tmp_path / "sp-run"
    run.mkdir()
    (run / "config.yaml").write_text("budget: default\nproxy:\n  parametrization: sp\n")
    (run / "run.json").write_text(json.dumps({"winners": {"lr": 2.0 ** -6}}))
    storage = JournalStorage(JournalFileBackend(str(run / "study.journal")))
    study = optuna.create_study(study_name="sp-run:validation", storage=storage)
    dist = {"log2_lr": FloatDistribution(-12, 0), "width": CategoricalDistribution([64, 128, 256]),
            "seed": CategoricalDistribution([0, 1])}
    vertex = {64: -6.0, 128: -7.0, 256: -8.0}  # an octave lower per doubling, as SP's
    for w, c in vertex.items():
        for x in (c - 1.5, c - 0.75, c, c + 0.75, c + 1.5):
            for seed in (0, 1):
                study.add_trial(optuna.trial.create_trial(
                    params={"log2_lr": x, "width": w, "seed": seed}, distributions=dist,
                    value=3 + (x - c) ** 2 / 10 + (8 - c) / 20 + seed / 100))
    assert bench("early_look").main([str(run)]) == 0
    out = capsys.readouterr().out
    assert "| sp-run | sp | 64 → 128 at 95% | rejected: drift -1.00" in out
    assert "| sp-run | sp | 64 → 128 → 256 at 90% | rejected: drift -2.00" in out
    assert bench("early_look").main([str(tmp_path)]) == 2  # not a run folder


def test_startup(capsys):
    bench("startup").main(["--repeats", "1"])
    assert "| sweep --help |" in capsys.readouterr().out


@pytest.mark.slow
def test_throughput(capsys):
    assert bench("throughput").main(["--width", "32", "--steps", "3", "--repeats", "1",
                                     "--seq-len", "32", "--d-head", "8", "--threads", "1"]) == 0


@pytest.mark.slow
def test_default_run(tmp_path, capsys):
    bench("default_run").main(["--budget", "smoke", "--model", "tiny", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "| this checkout, mup, run 1 |" in out and "ETA at each stage's first trial" in out


@pytest.mark.slow
def test_workers(capsys):
    assert bench("workers").main(["--widths", "32", "--trials", "2", "--tokens", "2048",
                                  "--repeats", "1", "--model", "tiny"]) == 0


def test_target_check_s_distance_interval_holds_both_sides_noise(capsys):
    """A held-out optimum outside the emitted interval can still be consistent with it once its
    own interval is counted; a far one is not; an unbounded one cannot tell. And the committed
    summaries' table is printed with nothing trained."""
    tc = bench("target_check")
    r = {"emitted_log2": -6.0, "emitted_interval_log2": [-6.3, -5.8],
         "target_optimum_log2": -6.4, "target_optimum_ci": [-6.7, -6.0]}
    lo, hi = tc.distance_interval(r)
    assert lo == pytest.approx(0.4 - math.hypot(0.3, 0.4)) and hi == pytest.approx(
        0.4 + math.hypot(0.2, 0.3))
    assert not r["emitted_interval_log2"][0] <= -6.4 and tc.consistent(lo, hi) == "yes"
    far = {**r, "target_optimum_log2": -7.5, "target_optimum_ci": [-7.6, -7.4]}
    assert tc.consistent(*tc.distance_interval(far)) == "no"
    flat = {**r, "target_optimum_ci": [-math.inf, math.inf]}
    assert tc.consistent(*tc.distance_interval(flat)).startswith("cannot tell")
    summary = Path(__file__).parents[1] / "benchmarks/points/summaries/held_out_a4474ff_mup.json"
    assert tc.main(["--out", "/nonexistent", "--from", str(summary)]) == 0
    out = capsys.readouterr().out
    assert "| target_depth | 64×28 |" in out and "consistent" in out


def test_target_check_fits_a_basin_wider_than_its_seven_points_whole(tmp_path, capsys,
                                                                     monkeypatch):
    """A basin wider than 7 half-octave points (loss within 6 % of the best over most of 13) is
    fitted over all of it, so its walls place the vertex: decided where 7 points see a floor
    flat for its noise. A narrow basin keeps the 7 points around its minimum, so the committed
    Llama targets refit to the digit; `--refit` writes what it printed."""
    tc = bench("target_check")
    rng = np.random.default_rng(3)
    xs = -6.0 + 0.5 * np.arange(13)
    wide = [[2.13 + 0.012 * (x + 3.0) ** 2 + rng.normal(0, 0.04) for _ in range(8)] for x in xs]
    means = np.mean(wide, axis=1)
    assert np.sum(means <= means.min() * 1.06) > 7
    assert len(tc.basin_window(xs, means)) == np.sum(means <= means.min() * 1.06)
    narrow = 2.0 + 0.2 * (xs + 3.0) ** 2
    assert tc.basin_window(xs, narrow) == list(range(3, 10))  # 7 around the minimum at -3
    fit = tc.fit_curve(list(zip(xs.tolist(), wide)), 8, -3.0, 64)
    lo, hi = fit["optimum_ci"]
    assert math.isfinite(lo) and math.isfinite(hi) and lo < -3.0 < hi
    assert fit["curvature_snr"] > 3
    with monkeypatch.context() as m:  # the fixed 7 points it replaced: flat for its noise
        m.setattr(tc, "basin_window", lambda x, y: [int(i) for i in tc.fit_window(x, y, 7)])
        assert tc.fit_curve(list(zip(xs.tolist(), wide)), 8, -3.0, 64)["curvature_snr"] < 3

    summary = Path(__file__).parents[1] / "benchmarks/points/summaries/held_out_a4474ff_mup.json"
    stored = json.loads(summary.read_text())
    assert tc.main(["--out", str(tmp_path), "--from", str(summary), "--refit"]) == 0
    printed = capsys.readouterr().out
    refitted = json.loads((tmp_path / "summary.json").read_text())
    for old, new in zip(stored, refitted):
        assert new["target_optimum_log2"] == pytest.approx(old["target_optimum_log2"], abs=1e-9)
        assert f"| {new['target']} |" in printed


@pytest.mark.slow
def test_target_check(tmp_path, capsys):
    args = ["--out", str(tmp_path), "--smoke", "--parametrizations", "mup", "--threads", "1"]
    assert bench("target_check").main(args) == 0
    out = capsys.readouterr().out
    assert "| width | 128×1 | mup" in out
    assert list((tmp_path / "points").glob("*.json"))
    fig = tmp_path / "held_out.png"
    assert bench("target_check").main(args + ["--figure", str(fig)]) == 0  # cached: nothing retrained
    assert "log2 lr" not in capsys.readouterr().out.split("SMOKE")[0].split("sweep exit")[-1]
    assert fig.read_bytes()[:4] == b"\x89PNG"
    points = tmp_path / "elsewhere"
    assert bench("target_check").main(args + ["--emit-only", "--points", str(points)]) == 0
    assert "width 128x1 [mup]: emitted log2 lr" in capsys.readouterr().out
    assert (tmp_path / "emitted.json").exists() and not points.exists()  # nothing trained
    emitted = json.loads((tmp_path / "emitted.json").read_text())[0]
    if all(math.isfinite(v) for v in emitted["emitted_interval_log2"]):  # what it accounts for
        assert emitted["interval_spans"].startswith("width")


@pytest.mark.slow
def test_search_efficiency(capsys):
    assert bench("search_efficiency").main(["--seeds", "1", "--tokens", "2048", "--trials",
                                            "lr=2,batch_size=1,warmup=1", "--lr-step-log2",
                                            "2", "--linear-points", "2", "--pruners", "none",
                                            "--no-write"]) == 0


@pytest.mark.slow
def test_transfer_fidelity(tmp_path, capsys):
    assert bench("transfer_fidelity").main(["--out", str(tmp_path), "--widths", "32", "64",
                                            "--steps", "4", "--points", "3", "--seeds", "2",
                                            "--max-extend", "0", "--d-head", "8",
                                            "--seq-len", "32", "--base-width", "32",
                                            "--window", "3"]) == 0


def test_default_run_judges_the_first_eta_and_the_worst_one():
    dr = bench("default_run")
    lines = [(0.0, "stage lr: 0/8 trials done"),
             (10.0, "stage lr: 1/8 trials, best 2.0, eta 0m40s"),  # 20 s left: +100 %
             (20.0, "stage lr: 3/8 trials, best 2.0, eta 0m05s"),  # 10 s left: −50 %
             (27.0, "stage lr: 6/8 trials, best 2.0, eta 0m01s"),  # 3 s left: under the floor
             (30.0, "stage warmup: 1/4 trials done"),
             (31.0, "stage warmup: 2/4 trials, best 2.0, eta 0m03s")]  # 4 s left: not judged
    ends = {"lr": 30.0, "warmup": 35.0}
    assert dr.eta_errors(lines, 40.0, ends) == {"lr": 1.0}
    assert dr.eta_worst(lines, 40.0, ends) == {"lr": 1.0}
    lines[1] = (10.0, "stage lr: 1/8 trials, best 2.0, eta 0m18s")  # −10 %: now the −50 % is worst
    assert dr.eta_worst(lines, 40.0, ends) == {"lr": -0.5}
    assert dr.eta_lines(lines, 40.0, ends)["lr"] == [(18, 20.0, 18, 18), (5, 10.0, 5, 5),
                                                     (1, 3.0, 1, 1)]
    assert dr.eta_range_errors(lines, 40.0, ends) == pytest.approx({"lr": -0.1})  # the point's


def test_default_run_judges_a_shown_range_by_its_nearer_end():
    dr = bench("default_run")
    lines = [(0.0, "stage warmup: 0/4 trials done"),
             (10.0, "stage warmup: 1/4 trials, best 2.0, eta 0m06s (0m04s–0m08s)")]
    assert dr.eta_lines(lines, 40.0, {"warmup": 18.0})["warmup"] == [(6, 8.0, 4, 8)]
    assert dr.eta_errors(lines, 40.0, {"warmup": 18.0}) == {"warmup": -0.25}
    assert dr.eta_range_errors(lines, 40.0, {"warmup": 18.0}) == {"warmup": 0.0}  # inside
    assert dr.eta_range_errors(lines, 40.0, {"warmup": 20.0}) == pytest.approx({"warmup": -0.2})
    assert dr.eta_range_errors(lines, 40.0, {"warmup": 12.0}) == {}  # 2 s left: under the floor
    lines[1] = (10.0, "stage warmup: 1/4 trials, best 2.0, eta 0m30s (0m24s–0m36s)")
    assert dr.eta_range_errors(lines, 40.0, {"warmup": 22.0}) == {"warmup": 1.0}  # 24 of 12 s


def test_horizon_law(tmp_path, capsys):
    out = tmp_path / "law.json"
    assert bench("horizon_law").main([
        "--model", "tiny", "--budget", "smoke", "--width", "32", "--points", "3", "--seeds", "2",
        "--multiples", "0.5", "1", "2", "4", "8", "--tokens", "5000", "--max-extend", "0",
        "--workers", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Bjorck et al. -0.32" in text and "Step Law (fixed batch)" in text
    data = json.loads(out.read_text())
    assert data["horizons"] == [2500, 5000, 10000, 20000, 40000]  # not whole steps of 512
    assert set(data["result"]["optima_log2"]) == {str(t) for t in data["horizons"]}
    assert all(len(c) == 3 and all(math.isfinite(y) for _, ys in c for y in ys)
               for c in data["curves"].values())


def test_batch_law(tmp_path, capsys):
    out = tmp_path / "law.json"
    target = tmp_path / "target.yaml"
    target.write_text("train:\n  lr_factor_terms:\n    from_batch_tokens: 256\n"
                      "    to_batch_tokens: 4096\n")
    assert bench("batch_law").main([
        "--model", "tiny", "--budget", "smoke", "--width", "16", "--points", "3", "--seeds", "2",
        "--batches", "2", "4", "8", "--max-extend", "0", "--workers", "1", "--out", str(out),
        "--target-yaml", str(target)]) == 0
    text = capsys.readouterr().out
    assert "√ rule +0.5" in text and "linear rule +1.0" in text
    data = json.loads(out.read_text())
    assert data["batches"] == [2, 4, 8] and data["target_doublings"] == 4.0
    assert set(data["result"]["optima_log2"]) == {"2", "4", "8"}
    e, (lo, hi) = data["result"]["exponent"], data["result"]["exponent_ci"]
    assert lo <= e <= hi and data["lr_spread_at_target"] == (hi - lo) * 4.0
    # equal tokens: twice the batch, half the steps
    assert data["steps"][0] == 2 * data["steps"][1] == 4 * data["steps"][2]


def test_batch_law_needs_three_batches_spanning_four_times():
    with pytest.raises(SystemExit):
        bench("batch_law").parse_args(["--batches", "8", "16", "24"])


def test_capped_attention(capsys):
    bench("capped_attention").main(["--repeats", "2", "--shape", "1", "2", "16", "8"])
    out = capsys.readouterr().out
    assert "definition: median" in out and "speed-up" in out


def test_coord_seeds(capsys, tmp_path):
    out_json = tmp_path / "coord.json"
    bench("coord_seeds").main(["--models", "llama3.2-3b", "--sp", "llama3.2-3b", "--group", "2",
                               "--blocks", "1", "--out", str(out_json)])
    out = capsys.readouterr().out
    assert "llama3.2-3b mup width seeds 0-1" in out and "llama3.2-3b mup depth" in out
    rows = json.loads(out_json.read_text())
    sp = next(r for r in rows if r["kind"] == "sp")
    assert sp["status"]["0.25"] == "rejected" and sp["ci"][0] > 0.25  # SP: far above


def test_design_replay(tmp_path, capsys):
    """Every design replayed on a real (smoke) run folder: a row each, priced against today's."""
    from helpers_sweep import TINY, only_run

    from transfer.cli.sweep import sweep

    archive = tmp_path / "sweeps"
    sweep(compose_cfg([*TINY, "validation.seeds=2", f"archive_dir={archive}"]))
    out_json = tmp_path / "replay.json"
    bench("design_replay").main(["--runs", str(only_run(archive)), "--draws", "2",
                                 "--out", str(out_json)])
    rows = json.loads(out_json.read_text())
    assert [r["design"] for r in rows] == list(bench("design_replay").DESIGNS)
    assert rows[0]["ratio"] == 1.0 and all(0 <= r["coverage"] <= 1 for r in rows)
    assert all(r["seconds"] > 0 for r in rows)
    capsys.readouterr()
    bench("design_replay").main(["--table", str(out_json)])  # design × run, priced by spread-5
    table = capsys.readouterr().out
    assert table.startswith("width grid") and "| spread-5 | 1.00 / " in table
    assert table.count("\n| ") == len(rows) + 1  # the header, then one row per design
    with pytest.raises(SystemExit):
        bench("design_replay").main(["--runs", str(tmp_path)])  # not a run folder
    with pytest.raises(SystemExit):
        bench("design_replay").main([])  # neither --runs nor --table


def test_coord_seeds_refuses_one_seed():
    with pytest.raises(SystemExit):
        bench("coord_seeds").main(["--group", "1"])


@pytest.mark.parametrize("model", ["3b", "qwen2.5-3b", "qwen3-4b", "gemma3-4b"])
def test_target_check_pins_the_shape_the_family_derives(model):
    """target_check's pinned proxy fields are what `model=<name>` derives, so its emitting
    sweeps share the main run's fingerprint and reuse its archived trials (a stale kv_group
    re-ran a whole sweep)."""
    shape = bench("target_check").MODEL_SHAPES[model]
    derived = plan_proxies(compose_cfg([f"model={model}", f"budget={shape['budget']}"])).derived
    for key in ("kv_group", "ffn_ratio", "d_head", "seq_len"):
        assert derived[key] == pytest.approx(shape[key]), key


def test_step_speed(capsys):
    """The eager step against bf16 autocast on the tiny preset's proxy (compile is the slow
    test's: its first step compiles)."""
    assert bench("step_speed").main(["--model", "tiny", "--shapes", "32x2", "--steps", "2",
                                     "--repeats", "1", "--variants", "eager", "bf16"]) == 0
    out = capsys.readouterr().out
    assert "| 32x2 | eager |" in out and "| 1.00 | +0.00e+00 |" in out and "| 32x2 | bf16 |" in out


@pytest.mark.slow
def test_step_speed_compiled(capsys):
    assert bench("step_speed").main(["--model", "tiny", "--shapes", "32x2", "--steps", "2",
                                     "--repeats", "1", "--variants", "eager", "compile"]) == 0
    row = next(r for r in capsys.readouterr().out.splitlines() if "| compile |" in r)
    assert row.split("|")[-2].strip() not in ("—", "")  # its payback, in trials or "never"


def test_step_speed_stacked_trains_what_eager_trains(capsys):
    """The stacked step's model 0 has eager's lr, seed and batches: after 3 steps its loss is
    eager's to float32 noise (the stacked AdamW, clipping and groups are the trainer's)."""
    assert bench("step_speed").main(["--model", "tiny", "--shapes", "32x2", "--steps", "3",
                                     "--repeats", "1", "--variants", "eager", "stacked",
                                     "--stack", "2"]) == 0
    row = next(r for r in capsys.readouterr().out.splitlines() if "| stacked |" in r)
    assert abs(float(row.split("|")[5])) < 1e-4


def _synthetic_run(run: Path, *, intermediate: bool = True) -> None:
    """A finished default-budget run folder whose grids are parabolas in log2 lr (vertex −6 at
    every width and depth, 0.03 nats per octave², seeds 0.005 apart with a little scatter),
    journalled as the pipeline journals them: width grid 64, 128, 256 and depth grid 2-16
    layers at width 32, each trial with its losses at 25, 50 and 75 % of its steps."""
    import numpy as np
    import optuna
    from omegaconf import OmegaConf
    from optuna.distributions import CategoricalDistribution, FloatDistribution
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from transfer.archive.files import dumps
    from transfer.core.compose import as_config
    from transfer.judge.verdict import judge
    from transfer.verdict.depth import depth_limits_from
    from transfer.verdict.width import limits_from

    run.mkdir(parents=True)
    cfg = compose_cfg(["model=3b", "budget=default"])
    saved = OmegaConf.to_container(cfg)
    for newer in ("depth_interpolate", "depth_spread_basins"):  # archived before these existed
        del saved["validation"][newer]
    (run / "config.yaml").write_text(OmegaConf.to_yaml(saved))
    v = as_config(cfg).validation
    rng = np.random.default_rng(0)
    storage = JournalStorage(JournalFileBackend(str(run / "study.journal")))
    trials = []
    for stage, axis, keys, target, grid in (
            ("validation", "width", (64, 128, 256), 3072, "validation.json"),
            ("validation-depth", "n_layers", (2, 4, 8, 16), 28, "validation_depth.json")):
        study = optuna.create_study(study_name=f"{run.name}:{stage}", storage=storage)
        dist = {"log2_lr": FloatDistribution(-12, 0), axis: CategoricalDistribution(list(keys)),
                "seed": CategoricalDistribution([0, 1])}
        curves = {}
        for k in keys:
            xs = [-7.5, -6.75, -6.0, -5.25, -4.5]
            losses = []
            for x in xs:
                seeds = []
                for seed in (0, 1):
                    final = 2 + 0.03 * (x + 6) ** 2 + 0.005 * seed + rng.normal(0, 0.002)
                    early = ({i: final + (0.5 - 0.15 * i) * (1 + (x > -5)) for i in range(3)}
                             if intermediate else {})
                    study.add_trial(optuna.trial.create_trial(
                        params={"log2_lr": x, axis: k, "seed": seed}, distributions=dist,
                        value=final, intermediate_values=early))
                    trials.append({"stage": stage.replace("-", "_"),
                                   "number": len(study.trials) - 1, "width": k if axis ==
                                   "width" else 32, "n_layers": k if axis == "n_layers" else
                                   None, "seconds": 10.0 * k / keys[0]})
                    seeds.append(final)
                losses.append(seeds)
            curves[str(k)] = {"log2_lr": xs, "loss": [float(np.mean(s)) for s in losses],
                              "losses": losses}
        limits = (limits_from(v, target_width=target) if axis == "width"
                  else depth_limits_from(v, target))
        verdict = judge({k: [(x, ls) for x, ls in zip(c["log2_lr"], c["losses"])]
                         for k, c in ((int(k), c) for k, c in curves.items())}, None, -6.0,
                        limits, {"status": "passed", "passed": True, "max_abs_slope": 0.05})
        (run / grid).write_text(dumps(verdict.to_dict()))  # as the run writes it
    import pandas as pd
    pd.DataFrame(trials).to_csv(run / "trials.csv", index=False)


def test_early_stop(tmp_path, capsys):
    """Stopping replayed on a journalled run: the highest-lr point looks worse at every early
    evaluation than it ends, so a rule with τ 10 % stops it (never a curve's first point), and
    the verdict is re-judged without it."""
    es = bench("early_stop")
    run = tmp_path / "3b-mup-default-x"
    _synthetic_run(run)
    grids = es.grid_trials(run)
    rows = grids["validation"]
    assert len(rows) == 3 * 5 * 2 and all(sorted(r["early"]) == [0, 1, 2] for r in rows)
    first = {min(r["number"] for r in rows if (r["key"], r["seed"]) == g)
             for g in {(r["key"], r["seed"]) for r in rows}}
    drop = es.stopped(rows, 1, 0.10)
    assert drop and not drop & first
    assert all(next(r for r in rows if r["number"] == t)["x"] > -5 for t in drop)
    assert es.stopped(rows, 1, 10.0) == set()  # nothing is that far above
    assert es.prediction(rows, 2)["same_best"] == 1.0
    assert es.verdict(es.setting(run, "validation"), rows, set()).outcome == "passed"
    assert es.main(["--summary", str(run)]) == 0
    out = capsys.readouterr().out
    # the highest-lr point of each of 6 curves × seeds, half its trial unrun: 10 % of the
    # grid's seconds; it ends 3.4 % above the lowest, inside the basin: what the rule costs
    assert "| width | 50% | 10% | 6 / 30 | 6 | 10.0% (10.0%) | 0 / 1 |" in out
    assert es.main([str(tmp_path)]) == 2  # not a run folder


def test_design_replay_on_a_depth_grid_archived_before_its_newer_fields(tmp_path):
    """`--axis depth` on a run whose config.yaml predates `validation.depth_interpolate`: the
    missing fields run as their defaults, as the run did."""
    run = tmp_path / "3b-mup-default-x"
    _synthetic_run(run, intermediate=False)
    out = tmp_path / "replay.json"
    bench("design_replay").main(["--axis", "depth", "--runs", str(run), "--draws", "2",
                                 "--designs", "spread-5-seeds", "spread-basin-4-seeds",
                                 "--out", str(out)])
    rows = json.loads(out.read_text())
    assert [r["design"] for r in rows] == ["spread-5-seeds", "spread-basin-4-seeds"]
    assert all(r["seconds"] > 0 and 0 <= r["coverage"] <= 1 for r in rows)


def test_width_sets(tmp_path, capsys):
    """Each set of widths judged on a run's grids: with the same vertex everywhere, every
    set's drift is ~0, and the depth grid's base curve stands in as width 32."""
    ws = bench("width_sets")
    run = tmp_path / "3b-mup-default-x"
    _synthetic_run(run, intermediate=False)
    assert ws.main([str(run)]) == 0
    rows = [r for r in capsys.readouterr().out.splitlines() if r.startswith("| 3b-")]
    assert len(rows) == len(ws.SETS)
    assert "| own (64, 128, 256) | passed |" in rows[0]
    assert "(32, 64, 128)" in rows[1] and "(32, 64, 128, 256)" in rows[2]
    assert all(abs(float(r.split("|")[4].split()[0])) < 0.3 for r in rows)
    (run / "validation_depth.json").unlink()
    assert ws.main([str(run)]) == 2


def test_design_replay_names_why_a_draw_was_rejected(tmp_path):
    """`--reasons`: a draw of a truth whose optimum falls an octave per width doubling (SP-like)
    is rejected and carries the verdict's reasons; a draw of the μP truth carries none."""
    import dataclasses

    import numpy as np

    dr = bench("design_replay")
    run = tmp_path / "3b-mup-default-x"
    _synthetic_run(run)
    truth = dr.read_truth(run, "width")
    drifting = dataclasses.replace(truth, vertex={w: truth.vertex[w] - i
                                                  for i, w in enumerate(truth.widths)})
    limits = dr.limits_for(run, truth)
    rng = np.random.default_rng(0)
    sp = [dr.replay(drifting, dr.DESIGNS["spread-5"], limits, rng) for _ in range(2)]
    assert all(g["outcome"] == "rejected" and g["reasons"] for g in sp)
    assert any("drift" in r for g in sp for r in g["reasons"])
    mup = [dr.replay(truth, dr.DESIGNS["spread-5"], limits, rng) for _ in range(2)]
    assert all(g["outcome"] != "rejected" and g["reasons"] == [] for g in mup)


def test_design_replay_leaves_a_depth_out_and_prices_the_rest_as_before(tmp_path):
    """`skip-4`: the depth grid's default without its 4-layer curve costs exactly that curve's
    trials less (each remaining depth keeps its seeds), drawn from the same generator."""
    import numpy as np

    dr = bench("design_replay")
    run = tmp_path / "3b-mup-default-x"
    _synthetic_run(run, intermediate=False)
    truth = dr.read_truth(run, "depth")
    assert 4 in truth.widths
    limits = dr.limits_for(run, truth)
    def priced(design):
        return dr.replay(truth, dr.DESIGNS[design], limits, np.random.default_rng(0))["seconds"]

    full, skip = priced("spread-basin-4-first-2x"), priced("skip-4")
    assert 0 < skip < full
    # the 4-layer curve's price: its points × its seeds × its median trial seconds
    assert full - skip >= 5 * truth.price[4]


def test_basin_noise_test(tmp_path, capsys):
    """Points past the basin that scatter 6 × the rest give a small p-value; equal scatter does
    not; a grid without such points says so."""
    rng = np.random.default_rng(0)
    xs = [-9.0 + 0.5 * i for i in range(7)]

    def curve(past_sd: float, vertex: float = -8.0) -> dict:
        losses = []
        for x in xs:
            d = x - vertex
            sd = past_sd if d > 0.9 else 0.01
            losses.append([3.0 + 0.5 * d * d + float(e) for e in rng.normal(0, sd, 4)])
        return {"log2_lr": xs, "loss": [float(np.mean(v)) for v in losses], "losses": losses}

    for name, past_sd in (("noisy", 0.06), ("equal", 0.01)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "validation.json").write_text(json.dumps(
            {"curves": {"64": curve(past_sd), "128": curve(past_sd)}}))
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "validation.json").write_text(json.dumps(
        {"curves": {"64": curve(0.01, vertex=0.0)}}))  # every point below the vertex
    bench("basin_noise_test").main([str(tmp_path / n) for n in ("noisy", "equal", "flat")])
    out = capsys.readouterr().out.splitlines()
    p = {line.split()[0]: float(line.rsplit("p ", 1)[1]) for line in out if " p " in line}
    assert p["noisy"] < 0.01 and p["equal"] > 0.05, out
    assert any(line.startswith("flat") and "no points past the basin" in line for line in out)
