"""validator → emitted config + cost → archive: everything written at the end of a sweep.

Done exactly once per run, by the worker that claims it under the run lock; every other worker
exits after the grid. Also the two things that happen before training: the cost prediction that
a spending cap is checked against, and reuse of an archived run with the same fingerprint.
"""

from __future__ import annotations

import datetime as dt
import math
import tempfile
import time
from pathlib import Path

import optuna
import pandas as pd
from omegaconf import OmegaConf

from transfer import cost as costs
from transfer import depth, horizon
from transfer.emit import emit_target
from transfer.errors import EXIT_OK, EXIT_REJECTED, verdict_exit_code
from transfer.hparams import TUNABLE
from transfer.report import render_report
from transfer.search import (
    FINISHED,
    Context,
    default_hparams,
    open_study,
    predict_seconds,
    summarize,
)
from transfer.storage import owner_alive, this_process
from transfer.validator import (
    judge_study,
    open_validation_study,
    plot_transfer,
    run_coord_check,
    run_grid,
)
from transfer.verdict import Verdict

TRAIN_DEFAULT_KEYS = ("weight_decay", "schedule", "min_lr_fraction", "grad_clip")


# ---- before training ----------------------------------------------------------------------
def predict_run(ctx: Context) -> dict:
    """Whole-run seconds and FLOPs from a short probe at each width (the cap is checked on it)."""
    cfg, plan = ctx.cfg, ctx.plan
    hp = default_hparams(cfg)
    t0, t1 = predict_seconds(ctx, hp, plan.width), predict_seconds(ctx, hp, plan.validation_width)
    n_stage = sum(cfg.stages.stage[s].trials for s in cfg.stages.order)
    n_grid = cfg.validation.points * cfg.validation.seeds if cfg.validation.enabled else 0
    tokens = int(cfg.train.tokens)
    fam = plan.family
    flops = tokens * ((n_stage + n_grid) * fam.flops_per_token(plan.width)
                      + n_grid * fam.flops_per_token(plan.validation_width))
    seconds = n_stage * t0 + n_grid * (t0 + t1)
    trial_seconds = {str(plan.width): t0, str(plan.validation_width): t1}
    if n_grid and depth.enabled(cfg):  # the deep proxy's points (the shallow ones are copied)
        deep = depth.at_depth(ctx, depth.depths(ctx)[1])
        t2 = predict_seconds(deep, hp, plan.width)
        seconds += n_grid * t2
        flops += tokens * n_grid * deep.plan.family.flops_per_token(plan.width)
        trial_seconds[f"{plan.width}x{depth.depths(ctx)[1]}L"] = t2
    if n_grid and horizon.enabled(cfg):  # the short runs (the full-budget ones are copied)
        short = horizon.budgets(cfg)[0]
        seconds += n_grid * t0 * short / tokens
        flops += short * n_grid * fam.flops_per_token(plan.width)
    return {"seconds": seconds, "device_hours": seconds / 3600, "flops": flops,
            "trial_seconds": trial_seconds}


def predict_and_check_cap(prep) -> dict | None:
    """Refuse to start (exit 2, prediction and cap printed) when the prediction is over the cap."""
    c = prep.cfg.cost
    if c.max_tuning_gpu_hours is None and c.max_wall_seconds is None:
        return None
    ctx = Context(cfg=prep.cfg, plan=prep.plan, corpus=prep.corpus, storage=None, lock=None,
                  run_name=prep.name, device=prep.cfg.device)
    pred = predict_run(ctx)
    costs.check_cap(pred["device_hours"], pred["seconds"], c)
    return pred


# ---- reuse --------------------------------------------------------------------------------
def _copy_studies(src_storage, src_run: str, dst_storage, dst_run: str) -> int:
    """Copy the finished trials of every study of `src_run` under the new run's names."""
    n = 0
    for s in optuna.get_all_study_summaries(src_storage, include_best_trial=False):
        if not s.study_name.startswith(src_run + ":"):
            continue
        src = optuna.load_study(study_name=s.study_name, storage=src_storage)
        dst = optuna.create_study(study_name=dst_run + s.study_name[len(src_run):],
                                  storage=dst_storage, direction=src.direction,
                                  load_if_exists=True)
        trials = [t for t in src.get_trials(deepcopy=False) if t.state in FINISHED]
        dst.add_trials(trials)
        for k, v in src.user_attrs.items():
            dst.set_user_attr(k, v)
        n += len(trials)
    return n


def reuse_archived(prep, run_dir: Path) -> str | None:
    """Warm-start a new run from an archived run with the same fingerprint (data only).

    Archived trials are added to the new studies: a finished match re-emits only, a partial one
    continues where it stopped. Nothing named in the archived files is imported or executed.
    """
    from transfer.storage import JOURNAL_FILE, make_storage

    if (run_dir / JOURNAL_FILE).exists():
        return None  # resuming this very run
    for row in prep.archive.find(prep.fingerprint):
        src_dir = prep.archive.run_dir(row["name"])
        if row["name"] == prep.name or not (src_dir / JOURNAL_FILE).exists():
            continue
        with tempfile.TemporaryDirectory() as tmp:  # read a copy: the archive stays untouched
            Path(tmp, JOURNAL_FILE).write_bytes((src_dir / JOURNAL_FILE).read_bytes())
            src = make_storage({"kind": "journal"}, run_dir=Path(tmp))
            dst = make_storage({"kind": "journal"}, run_dir=run_dir)
            n = _copy_studies(src, row["name"], dst, prep.name)
        coord_plot = src_dir / "plots" / "coord_check.png"  # its numbers came with the studies
        if coord_plot.is_file():
            prep.archive.copy_into(prep.name, "plots/coord_check.png", coord_plot)
        return f"reuse: {n} finished trials from archived run {row['name']!r} (same fingerprint)"
    return None


# ---- after the stages ---------------------------------------------------------------------
def _claim(ctx: Context, study: optuna.Study) -> bool:
    """True for exactly one live worker of the run: the one that writes the results."""
    me = this_process()
    with ctx.lock():
        claim = study.user_attrs.get("finalize")
        if claim and claim["owner"] != me and owner_alive(claim["owner"]):
            stale = not claim["done"] and time.time() - claim["time"] > 600
            if not stale:
                return False
        study.set_user_attr("finalize", {"owner": me, "time": time.time(), "done": False})
        return True


def validate_transfer(ctx: Context, hp: dict, plots: Path, *, target_width: int | None = None
                      ) -> tuple[optuna.Study, Verdict | None, float]:
    """The validator grid (this worker's share); then, for the one worker that claims the run,
    the coordinate check (once: kept in the study), the verdict and the μTransfer plot.

    Returns (grid study, verdict or None for every other worker, coordinate-check seconds).
    The sweep and `python -m transfer.validate` both validate through here.
    """
    study = run_grid(ctx, hp)
    if depth.enabled(ctx.cfg):  # every worker shares the depth grid too; judged in finalize
        depth.run_depth_grid(ctx, hp, study)
    if horizon.enabled(ctx.cfg):  # and the horizon grid; measured in finalize
        horizon.run_horizon_grid(ctx, hp, study)
    if not _claim(ctx, study):
        return study, None, 0.0
    coord_seconds = 0.0
    coord = study.user_attrs.get("coord_check")
    if coord is None or not (plots / "coord_check.png").exists():
        t = time.perf_counter()
        coord = run_coord_check(ctx, hp, plots)
        coord_seconds = time.perf_counter() - t
        study.set_user_attr("coord_check", coord)
    verdict = judge_study(ctx, study, float(hp["lr"]), coord, target_width=target_width)
    plot_transfer(verdict, plots / "lr_transfer.png")
    return study, verdict, coord_seconds


def mark_finalized(study: optuna.Study) -> None:
    """Every result file is written: a later claim by another worker is not stale."""
    study.set_user_attr("finalize", {"owner": this_process(), "time": time.time(), "done": True})


def trials_frame(ctx: Context) -> pd.DataFrame:
    """One row per trial of every stage and of the validation grid."""
    rows = []
    studies = [(name, open_study(ctx, i, name)) for i, name in enumerate(ctx.cfg.stages.order)]
    if ctx.cfg.validation.enabled:
        studies.append(("validation", open_validation_study(ctx)))
        if depth.enabled(ctx.cfg):
            studies.append((depth.STAGE, depth.open_depth_study(ctx)))
        if horizon.enabled(ctx.cfg):
            studies.append((horizon.STAGE, horizon.open_horizon_study(ctx)))
    for stage, study in studies:
        for t in study.get_trials(deepcopy=False):
            a = t.user_attrs
            rows.append({"stage": stage, "number": t.number, "width": a.get("width"),
                         "state": t.state.name, "value": t.value,
                         **{k: v for k, v in (a.get("hparams") or t.params).items()},
                         "seconds": a.get("seconds"), "predicted_seconds":
                             a.get("predicted_seconds"), "tokens": a.get("tokens"),
                         "flops": a.get("flops"), "diverged": a.get("diverged"),
                         "seed": a.get("seed"), "device": a.get("device")})
    return pd.DataFrame(rows)


def _measured(ctx: Context, trials: pd.DataFrame, coord_seconds: float) -> dict:
    is_val = trials.stage.isin(["validation", depth.STAGE, horizon.STAGE])
    sweep, val = trials[~is_val], trials[is_val]
    device = next((d for d in trials.get("device", pd.Series(dtype=str)).dropna()), "cpu")
    return {"device": device, "n_devices": 1,
            "sweep": {"seconds": float(sweep.seconds.fillna(0).sum()),
                      "flops": float(sweep.flops.fillna(0).sum())},
            "validation": {"seconds": float(val.seconds.fillna(0).sum()) + coord_seconds,
                           "flops": float(val.flops.fillna(0).sum())}}


def winners_for_emit(cfg, hp: dict, verdict: Verdict | None = None) -> dict:
    w = {k: hp[k] for k in TUNABLE}
    w.update({k: cfg.train[k] for k in TRAIN_DEFAULT_KEYS})
    if emitted_log2_lr(verdict) is not None:
        w["lr"] = 2.0 ** emitted_log2_lr(verdict)
    return w


def emitted_log2_lr(verdict: Verdict | None) -> float | None:
    """The grid's measured optimum (mean of both widths' vertices) when the verdict passed;
    None (the stages' pick is emitted) otherwise: a rejected or inconclusive fit is no optimum
    to stand on."""
    if verdict is None or not verdict.passed:
        return None
    x = verdict.optimum_log2_lr
    return float(x) if math.isfinite(x) else None


def lr_provenance(hp: dict, verdict: Verdict | None) -> dict:
    """Where target.yaml's base lr came from, with the stages' pick beside it."""
    x = emitted_log2_lr(verdict)
    d = {"tuned_by_stages": float(hp["lr"])}
    if x is None:
        d.update(value=float(hp["lr"]), source="stages' pick (the verdict did not pass, or "
                 "validation did not run)")
        if verdict is not None:
            d["grid_optima_log2"] = {str(w): v for w, v in verdict.best_log2_lr.items()}
        return d
    lo, hi = verdict.optimum_ci
    d.update(value=2.0 ** x, log2=x, ci=[2.0 ** lo, 2.0 ** hi], confidence=verdict.confidence,
             source="validation fit: mean of the shared-curvature vertices at widths "
                    f"{verdict.widths[0]} and {verdict.widths[1]}",
             stages_pick_offset_log2=x - math.log2(float(hp["lr"])))
    return d


def finalize(prep, ctx: Context, hp: dict, *, started: float) -> int:
    """Validate (this worker's share), then — once per run — write every result file."""
    cfg, archive, name = prep.cfg, prep.archive, prep.name
    verdict = depth_verdict = horizon_verdict = horizon_result = None
    coord_seconds = 0.0
    if cfg.validation.enabled:
        study, verdict, coord_seconds = validate_transfer(ctx, hp, archive.run_dir(name) / "plots",
                                                          target_width=int(cfg.model.d_model))
        if verdict is None:
            ctx.progress.line("validation done; another worker writes the results")
            return EXIT_OK
        if depth.enabled(cfg):
            depth_verdict = depth.validate_depth(ctx, hp, study, archive.run_dir(name) / "plots",
                                                 target_depth=int(cfg.model.n_layers))
        if horizon.enabled(cfg):
            horizon_verdict, horizon_result = horizon.validate_horizon(
                ctx, hp, study, archive.run_dir(name) / "plots")
    summaries = summarize(ctx)
    trials = trials_frame(ctx)
    validated = bool(verdict and verdict.passed)
    winners = winners_for_emit(cfg, hp, verdict)
    c = costs.cost_report(
        OmegaConf.to_container(cfg.model, resolve=True),
        OmegaConf.to_container(cfg.hardware, resolve=True),
        OmegaConf.to_container(cfg.cost, resolve=True),
        measured=_measured(ctx, trials, coord_seconds),
        stages=[s.to_dict() for s in summaries], validated=validated)
    c["wall_seconds"] = time.time() - started
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    extra = [{"name": "proxy_shape", "value": None, "reason": n} for n in prep.plan.notes]
    if verdict is None:
        extra.append({"name": "validation", "value": None,
                      "reason": "validation.enabled=false: nothing was checked"})
    target = emit_target(
        OmegaConf.to_container(cfg.model, resolve=True), base_width=prep.plan.base_width,
        winners=winners, proxy=_proxy_block(prep),
        validated=validated, drift_log2=None if verdict is None else verdict.drift_log2,
        fingerprint=prep.fingerprint, budget=costs.budget_summary(c), created=created,
        not_transferred_extra=extra, n_gpus=int(cfg.cost.n_gpus),
        scaling=OmegaConf.to_container(cfg.scaling, resolve=True) if "scaling" in cfg else None,
        depth=depth.summary(depth_verdict, float(prep.plan.derived.get("depth_alpha", 0.0))),
        horizon=horizon_result)
    target["provenance"]["lr"] = lr_provenance(hp, verdict)
    if verdict is not None and verdict.outcome == "inconclusive":
        target["provenance"]["warning"] = (
            "the validator could not tell whether the optimum transfers (inconclusive: "
            f"{'; '.join(verdict.reasons)}); decide it with {verdict.decide_with}")
    if verdict is not None:
        target["provenance"]["verdict"] = {
            "outcome": verdict.outcome, "reasons": verdict.reasons,
            "decide_with": verdict.decide_with, "extrapolation": verdict.extrapolation}
    _write_all(prep, trials, verdict, c, target, summaries)
    if depth_verdict is not None:
        archive.write_json(name, "validation_depth.json", depth_verdict.to_dict())
    if horizon_verdict is not None:
        archive.write_json(name, "horizon.json", {**horizon_result,
                                                  "fit": horizon_verdict.to_dict()})
    status = "finished" if verdict is None or validated else verdict.outcome
    archive.record({"name": name, "status": status, "winners": winners,
                    "validated": validated, "drift_log2": None if verdict is None
                    else verdict.drift_log2, "saved_gpu_hours": c["saved_gpu_hours"]})
    _summary(ctx, prep, summaries, verdict, c)
    if depth_verdict is not None:
        for line in depth.lines(depth_verdict):
            ctx.progress.line(line)
    if horizon_result is not None:
        ctx.progress.line(horizon.line(horizon_result))
    if cfg.validation.enabled:
        mark_finalized(study)
    # an opt-in depth check counts: a rejection anywhere is exit 3, else the less certain one
    codes = {verdict_exit_code(None if v is None else v.outcome) for v in (verdict, depth_verdict)}
    return EXIT_REJECTED if EXIT_REJECTED in codes else max(codes)


def write_partial(prep, ctx: Context, reason: str, *, started: float) -> None:
    """A run stopped by its spending cap: keep the trials and the cost so far, and say why."""
    summaries = summarize(ctx)
    trials = trials_frame(ctx)
    c = costs.cost_report(
        OmegaConf.to_container(prep.cfg.model, resolve=True),
        OmegaConf.to_container(prep.cfg.hardware, resolve=True),
        OmegaConf.to_container(prep.cfg.cost, resolve=True),
        measured=_measured(ctx, trials, 0.0), stages=[s.to_dict() for s in summaries],
        stopped_by_cap=True, cap_note=reason)
    c["wall_seconds"] = time.time() - started
    a, name = prep.archive, prep.name
    plain = OmegaConf.to_container(prep.cfg, resolve=True)
    plain["derived"] = prep.plan.derived
    a.write_yaml(name, "config.yaml", plain)
    a.write_text(name, "trials.csv", trials.to_csv(index=False))
    a.write_json(name, "cost.json", c)
    a.record({"name": name, "status": "failed", "validated": False})


def _proxy_block(prep) -> dict:
    d = prep.plan.derived
    return {"parametrization": prep.cfg.proxy.parametrization, "width": prep.plan.width,
            "validation_width": prep.plan.validation_width, "n_layers": d["n_layers"],
            "d_head": d["d_head"], "seq_len": d["seq_len"], "vocab_size": d["vocab_size"],
            "kv_group": d["kv_group"], "data": prep.corpus.source,
            # what the emitter classifies the target against (transfer.params)
            **{k: d[k] for k in ("ffn_ratio", "depth_alpha", "base_depth") if k in d},
            "tokens_per_trial": int(prep.cfg.train.tokens),
            "zero_init_query": prep.plan.family.zero_init_query,
            "readout_zero_init": prep.plan.family.readout_zero_init}


def _write_all(prep, trials, verdict, cost, target, summaries) -> None:
    from transfer.emit import dump_yaml

    a, name, cfg = prep.archive, prep.name, prep.cfg
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain["derived"] = prep.plan.derived
    a.write_yaml(name, "config.yaml", plain)
    a.write_text(name, "trials.csv", trials.to_csv(index=False))
    if verdict is not None:
        a.write_json(name, "validation.json", verdict.to_dict())
    a.write_json(name, "cost.json", cost)
    with tempfile.TemporaryDirectory() as tmp:
        dump_yaml(target, Path(tmp) / "target.yaml")
        a.copy_into(name, "target.yaml", Path(tmp) / "target.yaml")
        if cfg.proxy.parametrization == "mup":
            prep.plan.family.save_base_shapes(Path(tmp) / "base_shapes.bsh")
            a.copy_into(name, "base_shapes.bsh", Path(tmp) / "base_shapes.bsh")
    plots = [p for p in ("plots/lr_transfer.png", "plots/coord_check.png")
             if (a.run_dir(name) / p).exists()]
    report = render_report(name=name, cfg=plain, stages=[s.to_dict() for s in summaries],
                           validation=None if verdict is None else verdict.to_dict(),
                           target=target, cost=cost, plots=plots)
    a.write_text(name, "report.md", report)
    from transfer.hf import write_config  # hf/config.json: a GraniteConfig for the target
    if (note := write_config(a, name, target)) is not None:
        print(note)


def _summary(ctx, prep, summaries, verdict, cost) -> None:
    out = ctx.progress.line
    out(f"\n== {prep.name}  ({prep.archive.run_dir(prep.name)})")
    for s in summaries:
        best = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in s.best_params.items())
        out(f"   {s.name:<12} {s.complete}/{s.trials} complete, {s.pruned} pruned  "
            f"best {s.best_value if s.best_value is None else round(s.best_value, 4)}  {best}")
    if verdict is not None:
        for line in verdict_lines(verdict):
            out(line)
    out(f"   target run   {cost['target']['gpu_hours']:.3g} GPU-h on {cost['target']['hardware']}"
        f"; tuning {cost['tuning']['gpu_hours']:.3g} GPU-h-equivalent "
        f"({cost['tuning_fraction']:.2e} of it); saved "
        + ("nothing claimed (not validated)" if cost["saved_gpu_hours"] is None
           else f"{cost['saved_gpu_hours']:.3g} GPU-h vs fitting own laws"))
    out("   not transferred by μP: regularisation; batch size, warmup and token horizon only "
        "empirically; see target.yaml provenance")


def verdict_lines(verdict: Verdict) -> list[str]:
    """The verdict in a few printed lines: drift and gap with their intervals, curvature,
    coordinate slope, how far it is extrapolated, then every reason."""
    w0, w1 = verdict.widths
    (lo, hi), (glo, ghi) = verdict.drift_ci, verdict.loss_gap_ci
    ex = verdict.extrapolation
    lines = [f"   validation   {verdict.outcome.upper()}: drift {verdict.drift_log2:+.2f} "
             f"[{lo:+.2f}, {hi:+.2f}] log2(lr) ({w0}→{w1}, tol ±{verdict.tolerance_log2}), "
             f"gap {verdict.loss_gap:.2%} [{glo:.2%}, {ghi:.2%}] "
             f"({verdict.confidence:.0%} intervals), curvature S/N "
             f"{verdict.curvature_snr:.1f}, coord slope "
             f"{verdict.coord_check.get('max_abs_slope', math.nan):.2f}"]
    if "target_width" in ex:
        tlo, thi = ex["implied_target_drift_ci"]
        lines.append(f"     measured over {ex['measured_octaves']:.1f} octaves of width, "
                     f"extrapolated {ex['extrapolated_octaves']:.1f} more to width "
                     f"{ex['target_width']}: drift there {ex['implied_target_drift']:+.2f} "
                     f"[{tlo:+.2f}, {thi:+.2f}] if it grows linearly in log2 width")
    lines += [f"     - {r}" for r in verdict.reasons]
    if verdict.decide_with:
        lines.append(f"     to decide it: {verdict.decide_with}")
    return lines
