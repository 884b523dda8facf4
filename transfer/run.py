"""The end-to-end job behind `python -m transfer.sweep`, as a plain function of the config.

config → proxy family → stage studies → validator → emitted config + cost → archive. Everything
that can be wrong with the input is checked before the archive is touched.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import optuna
import torch
from omegaconf import DictConfig, OmegaConf

from transfer import depth
from transfer.archive import Archive, code_version, fingerprint, library_versions
from transfer.config import check_config
from transfer.data import load_corpus
from transfer.errors import UserError
from transfer.family import ProxyPlan, instantiate_family, plan_proxies
from transfer.finalize import finalize, predict_and_check_cap, reuse_archived, write_partial
from transfer.locks import run_lock
from transfer.progress import Progress
from transfer.search import BudgetStop, Context, run_stages, start_workers
from transfer.storage import make_storage
from transfer.validator import run_grid


@dataclass
class Prepared:
    cfg: DictConfig
    plan: ProxyPlan
    corpus: object
    fingerprint: str
    name: str
    archive: Archive


def prepare(cfg: DictConfig) -> Prepared:
    """Validate everything a user can get wrong; touches nothing on disk."""
    check_config(cfg)
    plan = plan_proxies(cfg)
    corpus = load_corpus(**OmegaConf.to_container(cfg.data, resolve=True))
    plan = instantiate_family(cfg, plan, corpus.vocab_size)
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain["derived"] = plan.derived
    # Fingerprint what the proxies *are*: a value pinned in proxy.* and the same value derived
    # from the target build the same proxies, so they must not tell the runs apart.
    plain["proxy"].update({k: v for k, v in plan.derived.items() if k in plain["proxy"]})
    plain["proxy"].update(validation_width=plan.validation_width, base_width=plan.base_width)
    fp = fingerprint(plain, data_hash=corpus.content_hash, versions=library_versions())
    name = cfg.name or f"{cfg.model.name}-{cfg.proxy.parametrization}-{cfg.budget}-{fp[:8]}"
    archive = Archive(Path(cfg.archive_dir).expanduser())
    archive.run_dir(name)  # a name= that is not a plain folder name is a user error
    _check_writable(archive.root)
    return Prepared(cfg, plan, corpus, fp, name, archive)


def _check_writable(root: Path) -> None:
    probe = root
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"archive_dir={str(root)!r} is not writable; pass archive_dir=<a folder "
                        "you can write>")


def make_context(prep: Prepared, storage, *, worker: int = 0) -> Context:
    cfg = prep.cfg
    run_dir = prep.archive.run_dir(prep.name)
    ctx = Context(cfg=cfg, plan=prep.plan, corpus=prep.corpus, storage=storage,
                  lock=run_lock(cfg.storage.kind, run_dir=run_dir, storage=storage, name=prep.name),
                  run_name=prep.name, device=cfg.device,
                  progress=Progress(cfg.progress if worker == cfg.worker * cfg.workers else "off"),
                  worker=worker)
    started = time.time()
    ctx.spent = lambda: spent(ctx, started)
    return ctx


def spent(ctx: Context, started: float) -> tuple[float, float]:
    """(wall seconds of this launch, device-hours of every trial of this run, all workers)."""
    seconds = 0.0
    for s in optuna.get_all_study_summaries(ctx.storage, include_best_trial=False):
        if s.study_name.startswith(ctx.run_name + ":"):
            study = optuna.load_study(study_name=s.study_name, storage=ctx.storage)
            seconds += sum(t.user_attrs.get("seconds", 0.0) for t in study.get_trials(deepcopy=False))
    return time.time() - started, seconds / 3600


def _worker_job(cfg_container: dict, worker: int) -> None:
    """What a local worker process runs (`start_workers`): the same stages and grids on the
    same studies, no finalisation."""
    cfg = OmegaConf.create(cfg_container)
    prep = prepare(cfg)
    storage = make_storage(cfg.storage, run_dir=prep.archive.run_dir(prep.name))
    ctx = make_context(prep, storage, worker=worker)
    try:
        hp = run_stages(ctx)
        if cfg.validation.enabled:
            study = run_grid(ctx, hp)
            if depth.enabled(cfg):
                depth.run_depth_grid(ctx, hp, study)
    except UserError as e:
        print(f"worker {worker}: {e}", file=sys.stderr)


def run_sweep(cfg: DictConfig) -> int:
    """The whole job; returns the exit code (0 validated, 3 rejected). Raises UserError."""
    started = time.time()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # our progress lines replace its logs
    prep = prepare(cfg)
    storage = None
    if cfg.storage.kind == "postgres":  # connect before creating anything in the archive
        storage = make_storage(cfg.storage, run_dir=prep.archive.run_dir(prep.name))
    predict_and_check_cap(prep)  # refuses to start over the cap, before the archive is touched
    run_dir = prep.archive.create_run(
        prep.name, fingerprint=prep.fingerprint, model=cfg.model.name,
        parametrization=cfg.proxy.parametrization,
        proxy_widths=[prep.plan.width, prep.plan.validation_width], code_version=code_version())
    if storage is None:
        reused = reuse_archived(prep, run_dir) if cfg.reuse == "auto" else None
        storage = make_storage(cfg.storage, run_dir=run_dir)
    else:
        reused = None
    ctx = make_context(prep, storage, worker=cfg.worker * cfg.workers)
    if reused:
        ctx.progress.line(reused)
    procs, threads = start_workers(cfg, _worker_job)
    if threads is not None:  # this process trains too: one share of the cores, like each worker
        torch.set_num_threads(threads)
    try:
        hp = run_stages(ctx)
        code = finalize(prep, ctx, hp, started=started)
    except BudgetStop as e:
        write_partial(prep, ctx, str(e), started=started)
        raise
    finally:
        for p in procs:
            p.join()
    return code
