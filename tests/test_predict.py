"""The whole-run prediction: every phase from the probes, what a resumed run has left, and
cost.json's predicted-vs-measured record. Timings are injected into the probe cache, so the
arithmetic is checked without timing anything."""

import json
import math
import subprocess
import sys

from helpers_sweep import TINY, compose_cfg, only_run

from transfer.cli.sweep import sweep
from transfer.run import predict
from transfer.run.history import Calibration
from transfer.run.planner import plan_sweep
from transfer.search import Context, default_hparams, stage_space
from transfer.search.stages import expected_trial_seconds, stage_layout

STEP, EVAL, SETUP = 0.01, 0.05, 0.2  # seconds: a step, an evaluation, building a trial


def _ctx(overrides: list[str]) -> Context:
    plan = plan_sweep(compose_cfg([*TINY, *overrides]))
    ctx = Context(cfg=plan.config, proxies=plan.proxies, corpus=plan.corpus, storage=None, lock=None,
                  run_name=plan.name, device="cpu")
    fam = plan.proxies
    for w in (fam.width, fam.validation_width):
        for b in (8, 16, 32, 64):
            ctx.probes[(w, b)] = (STEP * w / fam.width, EVAL, SETUP)  # nothing is trained
    return ctx


def _trial(ctx: Context, width: int, tokens: int | None = None) -> float:
    cfg = ctx.cfg
    steps = (tokens or cfg.train.tokens) // (cfg.train.batch_size * ctx.proxies.family.seq_len)
    return SETUP + steps * STEP * width / ctx.proxies.width + cfg.train.n_evals * EVAL


def test_stages_count_copied_incumbents_and_median_pruning():
    ctx = _ctx(["validation.enabled=false", "stages.stage.lr.trials=6",
                "stages.stage.warmup.trials=3", "stages.order=[lr,warmup]", "pruner.kind=median",
                "train.n_evals=4", "pruner.warmup_evals=1"])
    full = _trial(ctx, ctx.proxies.width)
    keep = 1 - 0.5 * (1 - 2 / 4)  # half the prunable trials stop after 2 of 4 evaluations
    pred = predict.predict_run(ctx)
    assert math.isclose(pred["stages"]["lr"], 2 * full + 4 * full * keep)
    # warmup: its first trial is lr's winner, copied (0 s); the next one is still in start-up
    assert math.isclose(pred["stages"]["warmup"], full + full * keep)
    assert set(pred["phases"]) == {"stages", "finalize"}  # no grids: validation is off


def test_the_batch_stage_prices_the_choices_it_will_queue():
    """Incumbent 32 of [8, 16, 32, 64], 2 trials: the copied incumbent and its nearest
    neighbour, 16 (seed_stage's order), each at its own batch's step count."""
    ctx = _ctx(["validation.enabled=false", "stages.order=[lr,batch_size]",
                "stages.stage.batch_size.trials=2", "train.batch_size=32", "pruner.kind=none"])
    cfg, seq = ctx.cfg, ctx.proxies.family.seq_len
    at_16 = SETUP + cfg.train.tokens // (16 * seq) * STEP + cfg.train.n_evals * EVAL
    assert math.isclose(predict.predict_run(ctx)["stages"]["batch_size"], at_16)


def test_a_first_batch_stage_is_priced_as_seed_stage_lays_it_out():
    """A batch stage first (nothing to copy): seed_stage queues the incumbent's 2 nearest
    other choices, 16 and 64, not the incumbent itself; the price is those two trials."""
    ctx = _ctx(["validation.enabled=false", "stages.order=[batch_size]",
                "stages.stage.batch_size.trials=2", "train.batch_size=32", "pruner.kind=none"])
    cfg, seq = ctx.cfg, ctx.proxies.family.seq_len
    hp = predict.default_hparams(cfg)
    copied, queued = stage_layout(stage_space(cfg, "batch_size", hp), hp, 2, has_previous=False)
    assert copied is None and queued == [{"batch_size": 16}, {"batch_size": 64}]
    at = {b: SETUP + cfg.train.tokens // (b * seq) * STEP + cfg.train.n_evals * EVAL
          for b in (16, 64)}
    assert math.isclose(predict.predict_run(ctx)["stages"]["batch_size"], at[16] + at[64])


def test_the_stage_eta_and_the_prediction_read_one_layout():
    ctx = _ctx(["validation.enabled=false", "stages.order=[lr,batch_size]",
                "stages.stage.batch_size.trials=3", "train.batch_size=32", "pruner.kind=median"])
    hp = predict.default_hparams(ctx.cfg)
    per = expected_trial_seconds(ctx, hp, 1, "batch_size")
    assert per[0] == 0.0 and len(per) == 3  # the copied incumbent, then 16 and 64
    assert math.isclose(predict.predict_run(ctx)["stages"]["batch_size"], sum(per))


def test_no_pruner_prices_every_trial_in_full():
    ctx = _ctx(["validation.enabled=false", "stages.order=[lr]", "stages.stage.lr.trials=5",
                "pruner.kind=none"])
    assert math.isclose(predict.predict_run(ctx)["phases"]["stages"],
                        5 * _trial(ctx, ctx.proxies.width))


def test_grids_price_each_width_and_the_short_horizon():
    ctx = _ctx(["validation.points=3", "validation.seeds=2", "validation.horizon_enabled=true",
                "validation.horizon_ratio=4"])
    pred = predict.predict_run(ctx)
    w0, w1 = ctx.proxies.width, ctx.proxies.validation_width
    assert math.isclose(pred["phases"]["validation"], 6 * (_trial(ctx, w0) + _trial(ctx, w1)))
    short = int(ctx.cfg.train.tokens) // 4
    assert math.isclose(pred["phases"]["horizon"], 6 * _trial(ctx, w0, short))
    assert pred["phases"]["coord"] > 0 and pred["phases"]["finalize"] == predict.FINALIZE_SECONDS
    assert math.isclose(pred["seconds"], sum(pred["phases"].values()))
    # max_extend steps on both sides, every seed, at both widths and at the short horizon
    ext = 2 * int(ctx.cfg.validation.max_extend) * 2
    assert math.isclose(pred["extension_cap_seconds"],
                        ext * (_trial(ctx, w0) + _trial(ctx, w1) + _trial(ctx, w0, short)))


def test_seed_rounds_are_priced_at_their_cap_beside_the_prediction_not_in_it():
    """Whether a seed round runs depends on the verdict: the prediction holds none, and the
    printed line names the most they can add, max_extra_seconds for each grid that runs them."""
    base = ["validation.points=3", "validation.seeds=2", "validation.max_extra_seconds=300"]
    pred = predict.predict_run(_ctx(base))
    assert pred["seed_round_cap_seconds"] == 300.0  # the width grid only
    assert "seed rounds at most 5m00s" in predict.line(pred, {"startup": 1.0})
    without = predict.predict_run(_ctx([*base[:2], "validation.max_extra_seconds=0"]))
    assert without["seed_round_cap_seconds"] == 0.0
    assert math.isclose(without["seconds"], pred["seconds"])
    assert "seed rounds" not in predict.line(without, {"startup": 1.0})
    no_rounds = predict.predict_run(_ctx([*base, "validation.max_rounds=0"]))
    assert no_rounds["seed_round_cap_seconds"] == 0.0


def test_cost_json_records_prediction_and_phases(tmp_path):
    code = sweep(compose_cfg([*TINY, f"archive_dir={tmp_path}/sweeps", "validation.points=3",
                              "validation.seeds=1", "validation.max_extend=0"]))
    assert code in (3, 4)
    c = json.loads((only_run(tmp_path / "sweeps") / "cost.json").read_text())
    for phase in ("stages", "validation", "coord", "finalize"):
        assert phase in c["phases"] and phase in c["prediction"]["phases"], phase
    assert {"startup", "probes"} <= set(c["prediction"]["spent_before"])
    total = c["prediction"]["total_seconds"]
    assert math.isclose(c["prediction_error"], total / c["measured_seconds"] - 1)
    assert math.isclose(sum(c["phases"].values()), c["measured_seconds"], rel_tol=1e-3)
    assert c["prediction"]["extension_cap_seconds"] == 0  # validation.max_extend=0
    # the tiny budget runs no seed rounds (validation.max_extra_seconds=0)
    assert c["prediction"]["seed_round_cap_seconds"] == 0
    after = c["prediction"]["after_stages"]  # the grids priced again at the stages' winners
    assert set(after["phases"]) >= {"validation", "coord", "finalize"}
    assert 0 < after["elapsed_seconds"] < c["measured_seconds"]
    assert math.isclose(after["total_seconds"], after["elapsed_seconds"] + after["seconds"])
    assert math.isclose(c["prediction_error_after_stages"],
                        after["total_seconds"] / c["measured_seconds"] - 1)
    grid = c["trial_timing"]["validation"]  # 3 points × 1 seed × 2 widths, all trained
    assert grid["trials"] == 6 and grid["measured_seconds"] > 0
    assert math.isclose(grid["error"], grid["measured_seconds"] / grid["predicted_seconds"] - 1,
                        rel_tol=1e-3)


def test_printed_minutes_do_not_round_up():
    assert predict._fmt(90) == "1m30s" and predict._fmt(59) == "59s" and predict._fmt(3599) == "59m59s"
    assert predict._fmt(539.6) == "8m59s" and predict._fmt(59.7) == "59s"


def test_sp_prices_the_growth_its_drifting_optimum_is_expected_to_need():
    over = ["validation.points=4", "validation.seeds=2", "validation.max_extend=3"]
    mup, sp = (_ctx([*over, f"proxy.parametrization={p}"]) for p in ("mup", "sp"))
    w0, w1 = sp.proxies.widths()
    assert w1 == 2 * w0  # SP's optimum an octave lower at w1: ½ octave inside the 1.5 half-width
    a, b = predict.predict_run(mup), predict.predict_run(sp)
    assert a["extension_expected_seconds"] == 0.0  # μP: the optimum stays, nothing grows
    # one round (a point at each of 2 seeds) at w1 with odds ½, on 1 worker
    assert math.isclose(b["extension_expected_seconds"], 0.5 * 2 * _trial(sp, w1))
    assert math.isclose(b["phases"]["validation"],
                        a["phases"]["validation"] + b["extension_expected_seconds"])


def test_the_printed_prediction_is_the_probes_scaled_by_earlier_runs():
    """Each phase scaled by its measured ÷ predicted ratio (`transfer.run.history`); the probes'
    own phases are kept (the next run's calibration reads them), and the line says how."""
    ctx = _ctx(["validation.points=3", "validation.seeds=2"])
    raw = predict.predict_run(ctx)
    cal = Calibration(ratios={"validation": 1.5, "finalize": 3.0},
                      after={"validation": 1.25}, runs=["a", "b"])
    pred = predict.predict_run(ctx, cal)
    assert pred["phases"] == raw["phases"] and math.isclose(pred["probe_seconds"], raw["seconds"])
    assert math.isclose(pred["expected_phases"]["validation"], 1.5 * raw["phases"]["validation"])
    assert pred["expected_phases"]["coord"] == raw["phases"]["coord"]  # no ratio: as probed
    extra = 0.5 * raw["phases"]["validation"] + 2 * raw["phases"]["finalize"]
    assert math.isclose(pred["seconds"], raw["seconds"] + extra)
    assert "scaled as in 2 archived runs" in predict.line(pred, {"startup": 1.0})
    assert "the probes alone" in predict.line(raw, {"startup": 1.0})
    after = predict.after_stages(ctx, {**default_hparams(ctx.cfg)}, 10.0, cal)
    assert math.isclose(after["seconds"], sum(after["expected_phases"].values()))
    assert math.isclose(after["expected_phases"]["validation"],  # the re-prediction's ratio
                        1.25 * after["phases"]["validation"])


def test_sp_does_not_price_the_depth_grid_its_width_rejection_skips():
    over = ["validation.points=3", "validation.seeds=2", "validation.depth_enabled=true",
            "validation.depth=4"]
    mup, sp = (_ctx([*over, f"proxy.parametrization={p}"]) for p in ("mup", "sp"))
    assert not predict.theory_rejects(mup) and predict.theory_rejects(sp)
    assert "depth" in predict.predict_run(mup)["phases"]
    assert "depth" not in predict.predict_run(sp)["phases"]


def test_an_early_look_spares_sp_the_widths_past_its_expected_rejection():
    over = ["validation.points=3", "validation.seeds=2", "validation.focus=true",
            "proxy.validation_width=128"]
    ctxs = {(p, e): _ctx([*over, f"proxy.parametrization={p}", f"validation.early_reject={e}"])
            for p in ("mup", "sp") for e in ("true", "false")}
    for c in ctxs.values():  # the middle width's probe, injected as the others are
        c.probes.update({(64, b): (STEP * 2, EVAL, SETUP) for b in (8, 16, 32, 64)})
    assert ctxs["mup", "true"].proxies.widths() == [32, 64, 128]
    assert predict.expected_widths(ctxs["mup", "true"]) == [32, 64, 128]
    assert predict.expected_widths(ctxs["sp", "true"]) == [32, 64]  # an octave lower: past ±0.5
    assert predict.expected_widths(ctxs["sp", "false"]) == [32, 64, 128]
    pred = {k: predict.predict_run(c)["phases"]["validation"] for k, c in ctxs.items()}
    assert pred["sp", "true"] < pred["sp", "false"]
    assert pred["mup", "true"] == pred["mup", "false"]


def test_startup_is_counted_from_this_process_s_first_import_of_transfer(tmp_path):
    """A shell that execs the last command of a chain (`( sleep … && python -m transfer.sweep )`,
    as the README's install line does) forks once for the whole chain, so /proc's start time
    would count the chain's earlier commands as the run's startup (the install, ~110 s, in the
    fresh clones at 477d339 and f0fff51). Counted from `import transfer`, the startup is this
    process's own."""
    code = ("import time; t0 = time.time(); import transfer; "
            "from transfer.search.phases import process_age; "
            "print(process_age(), time.time() - t0)")
    done = subprocess.run(["bash", "-c", f"sleep 3 && exec {sys.executable} -c '{code}'"],
                          capture_output=True, text=True, check=True, cwd=tmp_path)
    age, own = map(float, done.stdout.split())
    assert age <= own + 0.05, (age, own)  # /proc: the 3 s of sleep as well
