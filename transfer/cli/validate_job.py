"""Is my model μP? The job behind `python -m transfer.validate` (`run`, `validate(cfg)`) and
the Python entry point `validate_model(build)`, re-exported by `transfer.cli.validate`.

plan (transfer.run.planner.plan_custom: input checks, audit — shapes only, exit 2 with every finding
— and output probe) → an lr stage at proxy.width (the sweep's, started at train.lr) → the
sweep's validator (transfer.verdict.checks.run_checks: lr grid at two widths, coordinate
check, verdict, and the depth check where asked; figures by transfer.outputs.plots) → run folder (transfer.outputs.write). Exit 0 passes, 3 rejects, 4 cannot
tell (inconclusive), 2 is bad input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import optuna
from omegaconf import DictConfig

from transfer.archive import code_version
from transfer.core.compose import compose
from transfer.core.errors import UserError, exit_code, verdict_exit_code
from transfer.judge.verdict import Verdict
from transfer.outputs.plots import run_plots
from transfer.outputs.report import render_custom_report
from transfer.outputs.write import COORD_PLOT, RunFiles, report_plots, write_run
from transfer.run.assemble import trials_frame
from transfer.run.custom import STAGE
from transfer.run.planner import Plan, make_context, plan_custom
from transfer.search import default_hparams, open_study, run_stages, seed_incumbent, stage_space
from transfer.search.storage import make_storage
from transfer.verdict import depth
from transfer.verdict.checks import mark_finalized, run_checks


# ---- the job -------------------------------------------------------------------------------
def validate(cfg: DictConfig, *, build: Callable | None = None) -> int:
    """The whole check; returns 0 (μP: the lr transfers), 3 (rejected) or 4 (inconclusive).
    Raises UserError (`AuditFailed` lists every finding) for bad input, before any training.
    Optuna's logging is the caller's (`run` and `validate_model` quiet it)."""
    plan = plan_custom(cfg, build=build)
    proxies = plan.proxies
    run_dir = plan.archive.create_run(
        plan.name, fingerprint=plan.fingerprint, model=proxies.derived["builder"],
        parametrization=proxies.derived["parametrization"],
        proxy_widths=[proxies.width, proxies.validation_width], code_version=code_version())
    ctx = make_context(plan, make_storage(plan.config.storage, run_dir=run_dir))
    # train.lr is the lr stage's first trial: with stages.stage.lr.trials=1 it is the centre.
    start = default_hparams(ctx.cfg)
    seed_incumbent(ctx, open_study(ctx, 0, STAGE), stage_space(ctx.cfg, STAGE, start), start)
    hp = run_stages(ctx)
    checks = run_checks(ctx, hp, coord_plotted=plan.archive.has(plan.name, COORD_PLOT))
    if checks is None:
        raise UserError(f"another live process is validating run {plan.name!r}; wait for it, or "
                        "pass name=<another run name>")
    verdict, depth_verdict = checks.verdict, checks.depth
    write_run(plan.archive, plan.name, _files(plan, hp, verdict, depth_verdict,
                                              run_plots(checks), trials_frame(ctx)))
    mark_finalized(checks.study)
    ctx.progress.line(f"\n== {plan.name}  ({run_dir})")
    for line in checks.lines(width=True):
        ctx.progress.line(line)
    for note in plan.proxies.notes[1:]:
        ctx.progress.line(f"   note: {note}")
    outcomes = set(checks.outcomes())
    return verdict_exit_code("rejected" if "rejected" in outcomes else
                             "inconclusive" if "inconclusive" in outcomes else "passed")


def _files(plan: Plan, hp: dict, verdict: Verdict, depth_verdict: Verdict | None,
           plots: dict[str, bytes], trials) -> RunFiles:
    """A custom model's run folder: no target (its multipliers are its own), the audit."""
    proxies, config = plan.proxies, plan.plain
    report = render_custom_report(
        name=plan.name, builder=proxies.derived["builder"], base_width=proxies.base_width,
        delta_width=proxies.derived["delta_width"], lr=float(hp["lr"]), width=proxies.width,
        validation_width=proxies.validation_width, tokens=int(plan.config.train.tokens),
        data=plan.corpus.source, cfg=config, validation=verdict.to_dict(),
        plots=report_plots(plan.archive, plan.name, plots))
    return RunFiles(
        config=config, trials=trials, validation=verdict.to_dict(),
        validation_depth=None if depth_verdict is None else {
            **depth_verdict.to_dict(), "models": depth.models(depth_verdict)},
        audit={"builder": proxies.derived["builder"], "findings": [],
               "base_width": proxies.base_width, "delta_width": proxies.derived["delta_width"]},
        base_shapes=proxies.family.save_base_shapes, plots=plots, report=report,
        row={"name": plan.name, "status": "finished" if verdict.passed else verdict.outcome,
             "validated": verdict.passed, "drift_log2": verdict.drift_log2,
             "winners": {"lr": float(hp["lr"])}})


# ---- entry points --------------------------------------------------------------------------
def compose_config(overrides: Sequence[str] = ()) -> DictConfig:
    """`conf/config.yaml` with `overrides` (and `proxy=custom` unless they pick a proxy), as
    the CLI would see it."""
    if not any(o.startswith("proxy=") for o in overrides):
        overrides = ["proxy=custom", *overrides]
    return compose(overrides)


def validate_model(build: Callable | str, *, width: int | None = None,
                   validation_width: int | None = None, overrides: Sequence[str] = ()) -> int:
    """Python entry point: `validate_model(my_pkg.models.build, overrides=["budget=smoke"])`.

    `build` is the builder itself or its dotted path; `width`/`validation_width` set
    proxy.width/proxy.validation_width. Returns 0, 3 or 4; raises UserError (AuditFailed).
    Optuna's per-trial logs are off while it runs (the progress lines replace them).
    """
    overrides = [*(f"proxy.{k}={v}" for k, v in (("width", width),
                                                 ("validation_width", validation_width))
                   if v is not None), *overrides]
    level = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        if isinstance(build, str):
            return validate(compose_config([f"proxy.builder._target_={build}", *overrides]))
        return validate(compose_config(overrides), build=build)
    finally:
        optuna.logging.set_verbosity(level)  # the caller's logging, as it was


def run(cfg: DictConfig) -> int:
    """`validate`, with bad input as exit code 2: one line, or one line per audit finding."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # our progress lines replace its logs
    return exit_code(validate, cfg)
