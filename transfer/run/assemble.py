"""Once per run, after the checks: the emitted target, its cost, the figures and every result
file (through `transfer.outputs.write`), and the printed summary (`finalize`); a run stopped by
its spending cap keeps what it has (`write_partial`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import os
import platform
import time
from pathlib import Path

import pandas as pd

from transfer.core import cost as costs
from transfer.core.errors import EXIT_OK, EXIT_REJECTED, verdict_exit_code
from transfer.core.hparams import TUNABLE
from transfer.judge.joint import Joint
from transfer.judge.verdict import Verdict
from transfer.outputs import summary
from transfer.outputs.emit import emit_target, interval_spans
from transfer.outputs.plots import run_plots
from transfer.outputs.report import render_report
from transfer.outputs.write import COORD_PLOT, RunFiles, report_plots, write_run
from transfer.run.planner import Plan
from transfer.search import Context, StageSummary, open_study, summarize
from transfer.verdict import depth, horizon
from transfer.verdict.checks import Checks, mark_finalized, run_checks
from transfer.verdict.width import open_validation_study

RECIPE_KEYS = ("schedule", "min_lr_fraction", "grad_clip")  # the target's, the proxies trained so


def trials_frame(ctx: Context) -> pd.DataFrame:
    """One row per trial of every stage and of the validation grids."""
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


def _measured(trials: pd.DataFrame, coord_seconds: float) -> dict:
    is_val = trials.stage.isin(["validation", depth.STAGE, horizon.STAGE])
    sweep, val = trials[~is_val], trials[is_val]
    device = next((d for d in trials.get("device", pd.Series(dtype=str)).dropna()), "cpu")
    return {"device": device, "n_devices": 1,
            "sweep": {"seconds": float(sweep.seconds.fillna(0).sum()),
                      "flops": float(sweep.flops.fillna(0).sum())},
            "validation": {"seconds": float(val.seconds.fillna(0).sum()) + coord_seconds,
                           "flops": float(val.flops.fillna(0).sum())}}


def _cost(plan: Plan, ctx: Context, trials: pd.DataFrame, stages: list[StageSummary], *,
          coord_seconds: float, started: float, **kw) -> dict:
    """cost.json: the target's cost, the tuning's as measured, this launch's wall time, and
    its phases as predicted before training and as measured (`transfer.run.predict`)."""
    cfg = ctx.cfg
    pred = ctx.prediction
    c = costs.cost_report(
        cfg.model, cfg.hardware, cfg.cost,
        measured=_measured(trials, coord_seconds), stages=[s.to_dict() for s in stages],
        predicted_seconds=None if pred is None else pred["seconds"], **kw)
    c["wall_seconds"] = time.time() - started
    c.update(costs.phase_report(dict(ctx.phases), pred, c["wall_seconds"]))
    c["trial_timing"] = trial_timing(trials)
    c["host"] = host()
    return c


def host() -> dict:
    """The machine that measured these seconds: its CPU model (`/proc/cpuinfo`'s first "model
    name" on Linux, else `platform.processor()`, else the architecture), the cores this process
    may use, and the architecture. The same code and seeds give other seconds, and in their last
    digits other losses, on another CPU (benchmarks/RESULTS.md, "A quicker host"), so the ETA's
    history and the evidence say which host measured them."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name") and ":" in line:
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    affinity = getattr(os, "sched_getaffinity", None)
    cores = len(affinity(0)) if affinity else (os.cpu_count() or 1)
    machine = platform.machine()
    return {"cpu": cpu or platform.processor() or machine or "not known", "cores": cores,
            "machine": machine}


def trial_timing(trials: pd.DataFrame) -> dict:
    """Per stage or grid: the trials trained to the end (pruned, diverged and copied ones
    excluded), their seconds summed as measured and as their probes predicted, and measured ÷
    predicted − 1: the probes' own error on what ran, apart from how many trials ran (grid
    extensions, pruning)."""
    out: dict = {}
    if not len(trials):
        return out
    ran = trials[(trials.state == "COMPLETE") & (trials.seconds.fillna(0) > 0)
                 & (trials.predicted_seconds.fillna(0) > 0)]
    for stage, g in ran.groupby("stage", sort=False):
        m, p = float(g.seconds.sum()), float(g.predicted_seconds.sum())
        out[stage] = {"trials": len(g), "measured_seconds": m,
                      "predicted_seconds": p, "error": m / p - 1}
    return out


def winners_for_emit(cfg, hp: dict, verdict: Verdict | None = None,
                     joint: Joint | None = None) -> dict:
    """The tuned values, the recipe the proxies trained under, and the lr at the target
    where the validator's trajectories put it (`emitted_log2_lr`)."""
    w = {k: hp[k] for k in TUNABLE}
    w.update({k: getattr(cfg.scaling, k) for k in RECIPE_KEYS})
    w["weight_decay"] = float(cfg.train.weight_decay)  # the fixed rule's λ (timescale: unused)
    if emitted_log2_lr(verdict, joint) is not None:
        w["lr"] = 2.0 ** emitted_log2_lr(verdict, joint)
    return w


def emitted_log2_lr(verdict: Verdict | None, joint: Joint | None = None) -> float | None:
    """The optimum at the target: at its width and depth where the depth check measured the
    optimum's trajectory across depth (`transfer.judge.joint`), else at its width from the
    trajectory across the proxies' widths; whatever the outcome (the interval and the verdicts
    say what it is worth). None only where nothing was measured (validation off, or no fit),
    and the stages' pick is emitted."""
    if joint is not None and math.isfinite(joint.estimate):
        return float(joint.estimate)
    t = None if verdict is None else verdict.trajectory
    if not t or not math.isfinite(t["estimate"]):
        return None
    return float(t["estimate"])


def _joint_provenance(hp: dict, verdict: Verdict, j: Joint, depth_v: Verdict | None) -> dict:
    """provenance.lr where the emitted lr is the joint width × depth estimate."""
    t = verdict.trajectory
    lo, hi = j.interval
    w, d = j.width, j.depth
    other = next(m for m in t["models"] if m != t["model"])
    outcome = depth_v.outcome if depth_v is not None else "not run"
    return {
        "tuned_by_stages": float(hp["lr"]), "value": 2.0 ** j.estimate, "log2": j.estimate,
        "interval": [2.0 ** lo, 2.0 ** hi], "interval_log2": [lo, hi],
        "confidence": j.confidence, "model": w["model"], "model_form": w["form"],
        "widths": w["widths"], "optima_log2": w["optima_log2"],
        "target_width": j.target_width, "target_depth": j.target_depth,
        "other_model": {"model": other, **t["models"][other]},
        "parts": {"width": {**w, "draw_quantiles_log2": j.width_quantiles},
                  "depth": {**d, "models": j.depth_models,
                            "disagreement": j.depth_disagreement,
                            "draw_quantiles_log2": j.depth_quantiles}},
        "draw_quantiles_log2": j.draw_quantiles,
        "source": f"transferred: the optimum's trajectory over widths {w['widths']} "
                  f"({w['model']}) at width {j.target_width}, plus its move over depths "
                  f"{d['depths']} ({d['model']}, at width {d['at_width']}) from "
                  f"{d['from_depth']} to {j.target_depth} layers, each its verdict's fit"
                  + (", their shared curve's bootstrap noise drawn once for both"
                     if d["shared_points"] else ", drawn independently") +
                  " (transfer.judge.joint); "
                  f"the width verdict was {verdict.outcome}, the depth verdict {outcome}",
        "stages_pick_offset_log2": j.estimate - math.log2(float(hp["lr"])),
    }


def lr_provenance(hp: dict, verdict: Verdict | None, joint: Joint | None = None,
                  depth_v: Verdict | None = None) -> dict:
    """Where target.yaml's base lr came from, with the stages' pick beside it."""
    if joint is not None and verdict is not None and verdict.trajectory \
            and math.isfinite(joint.estimate):
        return _joint_provenance(hp, verdict, joint, depth_v)
    x = emitted_log2_lr(verdict)
    d = {"tuned_by_stages": float(hp["lr"])}
    if x is None:
        d.update(value=float(hp["lr"]), source="measured on proxies: the stages' pick at the "
                 "proxy width (no trajectory to the target: validation did not run or found no "
                 "optimum to fit)")
        if verdict is not None:
            d["grid_optima_log2"] = {str(w): v for w, v in verdict.best_log2_lr.items()}
        return d
    t = verdict.trajectory
    lo, hi = t["interval"]
    other = next(m for m in t["models"] if m != t["model"])
    d.update(value=2.0 ** x, log2=x, interval=[2.0 ** lo, 2.0 ** hi], interval_log2=[lo, hi],
             confidence=t["confidence"], model=t["model"], model_form=t["models"][t["model"]]["form"],
             widths=t["widths"], optima_log2=t["vertices"], target_width=t["target_width"],
             other_model={"model": other, **t["models"][other]},
             source=f"transferred: the optimum's trajectory over widths {t['widths']} "
                    f"({t['model']} model) at width {t['target_width']}; the verdict was "
                    f"{verdict.outcome}",
             stages_pick_offset_log2=x - math.log2(float(hp["lr"])))
    return d


def _proxy_block(plan: Plan) -> dict:
    d = plan.proxies.derived
    return {"parametrization": plan.config.proxy.parametrization, "width": plan.proxies.width,
            "validation_width": plan.proxies.validation_width, "n_layers": d["n_layers"],
            "d_head": d["d_head"], "seq_len": d["seq_len"], "vocab_size": d["vocab_size"],
            "kv_group": d["kv_group"], "data": plan.corpus.source,
            "grid_widths": plan.proxies.widths(),
            "weight_decay_rule": plan.config.train.weight_decay_rule,
            # what the emitter classifies the target against (transfer.core.params)
            **{k: d[k] for k in ("ffn_ratio", "depth_alpha", "base_depth", "embedding_scale")
               if k in d},
            "tokens_per_trial": int(plan.config.train.tokens),
            "zero_init_query": plan.proxies.family.zero_init_query,
            "readout_zero_init": plan.proxies.family.readout_zero_init}


def _target(plan: Plan, ctx: Context, hp: dict, checks: Checks | None, cost: dict) -> dict:
    """target.yaml: the emitted config, with where its lr came from and the verdicts."""
    cfg = ctx.cfg
    verdict = None if checks is None else checks.verdict
    joint = None if checks is None else checks.joint
    depth_v = None if checks is None else checks.depth
    lr = lr_provenance(hp, verdict, joint, depth_v)
    depth_summary = depth.summary(depth_v, float(plan.proxies.derived["depth_alpha"]),
                                  depth.grid_width(ctx))
    if checks is not None and "depth" in checks.skipped:
        depth_summary = {"outcome": "not run", "depths": [], "reasons": [checks.skipped["depth"]]}
    if "interval" in lr:
        lr["interval_spans"] = interval_spans(int(plan.proxies.derived["n_layers"]),
                                              int(cfg.model.n_layers), depth_summary,
                                              joint="target_depth" in lr)
    extra = [{"name": "proxy_shape", "value": None, "reason": n} for n in plan.proxies.notes]
    if verdict is None:
        extra.append({"name": "validation", "value": None,
                      "reason": "validation.enabled=false: nothing was checked"})
    target = emit_target(
        dataclasses.asdict(cfg.model), base_width=plan.proxies.base_width,
        winners=winners_for_emit(cfg, hp, verdict, joint), proxy=_proxy_block(plan),
        validated=validated(checks),
        drift_log2=None if verdict is None else verdict.drift_log2,
        fingerprint=plan.fingerprint, budget=costs.budget_summary(cost),
        created=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        not_transferred_extra=extra, n_gpus=int(cfg.cost.n_gpus),
        scaling=dataclasses.asdict(cfg.scaling),
        depth=depth_summary,
        horizon=None if checks is None else checks.horizon_result,
        lr_trajectory=lr if "interval" in lr else None)
    prov = target["provenance"]
    prov["lr"] = lr
    if "target_depth" in lr:
        target["train"]["lr_trajectory"].update(
            target_depth=lr["target_depth"], depths=lr["parts"]["depth"]["depths"],
            depth_optima_log2=lr["parts"]["depth"]["optima_log2"],
            depth_model=lr["parts"]["depth"]["model"],
            depth_model_form=lr["parts"]["depth"]["form"])
    if verdict is not None and verdict.outcome == "inconclusive":
        prov["warning"] = (
            "the validator could not tell whether the optimum transfers (inconclusive: "
            f"{'; '.join(verdict.reasons)}); to decide it: {verdict.decide_with}")
    if verdict is not None:
        prov["verdict"] = {"outcome": verdict.outcome, "reasons": verdict.reasons,
                           "decide_with": verdict.decide_with,
                           "extrapolation": verdict.extrapolation}
    return target


def finalize(plan: Plan, ctx: Context, hp: dict, *, started: float) -> int:
    """Validate (this worker's share), then — once per run — write every result file."""
    cfg, archive, name = plan.config, plan.archive, plan.name
    checks = None
    if cfg.validation.enabled:
        checks = run_checks(ctx, hp, coord_plotted=plan.archive.has(plan.name, COORD_PLOT),
                            targets={"width": int(cfg.model.d_model),
                                     "depth": int(cfg.model.n_layers)})
        if checks is None:
            ctx.progress.line("validation done; another worker writes the results (or wrote them)")
            return EXIT_OK
    v = None if checks is None else checks.verdict
    depth_v = None if checks is None else checks.depth
    stages, trials = summarize(ctx), trials_frame(ctx)
    ok = validated(checks)
    c = _cost(plan, ctx, trials, stages,
              coord_seconds=0.0 if checks is None else checks.coord_seconds,
              started=started, validated=ok)
    target = _target(plan, ctx, hp, checks, c)
    config = plan.plain
    plots = {} if checks is None else run_plots(checks)
    notes = write_run(archive, name, RunFiles(
        config=config, trials=trials, cost=c, target=target, plots=plots,
        validation=None if v is None else v.to_dict(),
        validation_depth=None if depth_v is None else {
            **depth_v.to_dict(), "joint": None if checks.joint is None else checks.joint.to_dict()},
        horizon=None if checks is None or checks.horizon is None
        else {**checks.horizon_result, "fit": checks.horizon.to_dict()},
        base_shapes=plan.proxies.family.save_base_shapes
        if cfg.proxy.parametrization == "mup" else None,
        report=render_report(name=name, cfg=config, stages=[s.to_dict() for s in stages],
                             validation=None if v is None else v.to_dict(), target=target,
                             cost=c, plots=report_plots(archive, name, plots)),
        row={"name": name, "status": "finished" if v is None or ok else _status(checks),
             "winners": winners_for_emit(ctx.cfg, hp),  # the stages'; the emitted lr: target.yaml
             "validated": ok,
             "drift_log2": None if v is None else v.drift_log2,
             "saved_gpu_hours": c["saved_gpu_hours"]}))
    for note in notes:
        print(note)
    lines = summary.run_lines(name=name, run_dir=archive.run_dir(name), stages=stages,
                              verdict=v, cost=c, target=target)
    if checks is not None:
        lines += checks.lines()  # depth, horizon
    for line in lines:
        ctx.progress.line(line)
    if checks is not None:
        mark_finalized(checks.study)
    # an opt-in depth check counts: a rejection anywhere is exit 3, else the less certain one
    codes = {verdict_exit_code(x) for x in (checks.outcomes() if checks else [None])}
    return EXIT_REJECTED if EXIT_REJECTED in codes else max(codes)


def validated(checks: Checks | None) -> bool:
    """The transfer is validated: the width verdict passed, and the depth one where it ran."""
    return bool(checks is not None and all(o == "passed" for o in checks.outcomes()))


def _status(checks: Checks) -> str:
    """The archive row's status of a run not validated: rejected if any verdict rejected, else
    inconclusive."""
    outcomes = checks.outcomes()
    return "rejected" if "rejected" in outcomes else "inconclusive"


def write_partial(plan: Plan, ctx: Context, reason: str, *, started: float) -> None:
    """A run stopped by its spending cap: keep the trials and the cost so far, and say why."""
    stages = summarize(ctx)
    trials = trials_frame(ctx)
    c = _cost(plan, ctx, trials, stages, coord_seconds=0.0, started=started, stopped_by_cap=True,
              cap_note=reason)
    write_run(plan.archive, plan.name, RunFiles(
        config=plan.plain, trials=trials, cost=c,
        row={"name": plan.name, "status": "failed", "validated": False}))
