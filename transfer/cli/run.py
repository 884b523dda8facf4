"""The end-to-end job behind `python -m transfer.sweep`, as a plain function of the config.

config → plan (transfer.run.planner) → predicted cost against the cap (transfer.run.predict) → archived run
reused (transfer.run.reuse) → stage studies (transfer.search) → grids, verdicts, emitted config and
cost → run folder (transfer.verdict.checks, transfer.run.assemble). Everything that can be wrong with the
input is checked before the archive is touched.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

import optuna
import torch

from transfer.archive import code_version
from transfer.core.compose import as_config
from transfer.core.config import Config
from transfer.core.errors import UserError
from transfer.run import history, predict
from transfer.run.assemble import finalize, write_partial
from transfer.run.planner import make_context, plan_sweep
from transfer.run.reuse import reuse_archived
from transfer.run.workers import resolve_workers, start_workers, threads_per_process, visible_gpus
from transfer.search import BudgetStop, run_stages
from transfer.search.phases import process_age, timed
from transfer.search.storage import make_storage
from transfer.verdict.checks import run_grids


def _worker_job(cfg_container: dict, worker: int) -> None:
    """What a local worker process runs (`start_workers`): the same stages and the same grids
    (`run_grids`, as the finalizing process) on the same studies, no finalisation."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # spawned: the CLI's setting is not
    plan = plan_sweep(as_config(cfg_container))           # inherited; progress lines only
    storage = make_storage(plan.config.storage, run_dir=plan.archive.run_dir(plan.name))
    ctx = make_context(plan, storage, worker=worker)
    try:
        run_grids(ctx, run_stages(ctx))
    except UserError as e:
        print(f"worker {worker}: {e}", file=sys.stderr)


def run_sweep(cfg, *, startup: float | None = None) -> int:
    """The whole job for `cfg` (a composed config or a `Config`); returns the exit code (0
    validated, 3 rejected, 4 inconclusive). Raises UserError. Optuna's logging is the caller's
    (the CLI quiets it: `transfer.cli.sweep`). `startup`: the seconds spent before this call on
    this run's behalf; by default the process's age (interpreter, imports, Hydra), which is
    wrong for a process that ran other sweeps first (`transfer.compare`)."""
    started = time.time()
    phases = {"startup": process_age() if startup is None else float(startup)}
    cfg: Config = as_config(cfg)
    gpus = visible_gpus(str(cfg.device), os.environ.get("CUDA_VISIBLE_DEVICES"),
                        torch.cuda.device_count())
    if cfg.workers == "auto":  # a number from here on (workers and the fingerprint alike)
        cfg = dataclasses.replace(cfg, workers=resolve_workers(cfg.workers, str(cfg.device),
                                                               gpus=len(gpus)))
    plan = plan_sweep(cfg)
    if cfg.workers > 1:  # this process trains one share of the cores, like each worker; the
        torch.set_num_threads(threads_per_process(cfg.workers))  # probes time that share
    storage = None
    if cfg.storage.kind == "postgres":  # connect before creating anything in the archive
        storage = make_storage(plan.config.storage, run_dir=plan.archive.run_dir(plan.name))
    calibration = history.calibration(plan.archive, cfg)  # the ETA's, from earlier runs
    early = predict.before_archive(plan)  # with a cap: refuse to start over it, before the
    if early is not None:                   # archive is touched
        with timed(phases, "probes"):
            pred = predict.predict_and_check_cap(early, calibration)
    run_dir = plan.archive.create_run(
        plan.name, fingerprint=plan.fingerprint, model=cfg.model.name,
        parametrization=cfg.proxy.parametrization,
        proxy_widths=plan.proxies.widths(), code_version=code_version(),
        config_fingerprint=plan.config_fingerprint, code=plan.code)
    if storage is None:
        reused = reuse_archived(plan, run_dir, force=cfg.reuse == "force") if cfg.reuse in (
            "auto", "force") else None
        storage = make_storage(plan.config.storage, run_dir=run_dir)
    else:
        reused = None
    ctx = make_context(plan, storage, worker=cfg.worker * cfg.workers)
    if reused:
        ctx.progress.line(reused)
    if early is None:  # no cap: predicted here, for what is left (a re-emit probes nothing)
        with timed(phases, "probes"):
            pred = predict.predict_run(ctx, calibration)
    else:
        ctx.probes.update(early.probes)  # the probes are not paid twice
    ctx.phases.update(phases)
    ctx.prediction = pred
    ctx.progress.line(predict.line(pred, phases))
    # after the probes: they time an idle machine
    procs, _ = start_workers(dataclasses.asdict(cfg), _worker_job, gpus=gpus)
    try:
        with timed(ctx.phases, "stages"):
            hp = run_stages(ctx)
        # the grids train at the stages' winners: the rest is priced again at them
        after = predict.after_stages(ctx, hp, ctx.phases["startup"] + time.time() - started,
                                     calibration)
        pred["after_stages"] = after
        ctx.progress.line(predict.after_line(after))
        code = finalize(plan, ctx, hp, started=started)
    except BudgetStop as e:
        write_partial(plan, ctx, str(e), started=started)
        raise
    finally:
        for p in procs:
            p.join()
    return code
