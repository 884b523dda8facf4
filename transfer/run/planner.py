"""config → plan: what a run is before anything trains, for both CLIs.

A `Plan` is the config, the proxies (family and widths), the corpus, and the run's fingerprint,
name and archive. `plan_sweep` plans the built-in family's run (`python -m transfer.sweep`),
`plan_custom` a user's builder's (`python -m transfer.validate`, checks in `transfer.run.custom`);
both end in the same tail (fingerprint, name, archive, writable check). Everything a user can
get wrong is raised here, as a `UserError`, before anything is written. `make_context` then
gives the plan's stages and grids their `Context`, which carries the config as plain `Config`
dataclasses (`Plan.config`). Both planners take a `Config` (or a composed config, which
`transfer.core.compose.as_config` turns into one first): Hydra's DictConfig stays in
`transfer.cli` and `transfer.core.compose`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import optuna

from transfer.archive import Archive, code_hashes, fingerprint, library_versions
from transfer.core.compose import as_config
from transfer.core.config import Config, check_config
from transfer.core.data import Corpus, load_corpus
from transfer.core.errors import UserError
from transfer.run.custom import custom_proxies
from transfer.run.locks import run_lock
from transfer.search import Context
from transfer.search.family import ProxyPlan, instantiate_family, plan_proxies
from transfer.search.progress import Progress
from transfer.verdict.width import buildable_widths


@dataclass(frozen=True)
class Plan:
    """A run, planned: every value below is known before the archive is touched."""

    plain: dict  # the resolved config as plain data, `derived` added: config.yaml's content
    proxies: ProxyPlan  # the family, its widths and everything derived from the target
    corpus: Corpus
    fingerprint: str  # what the proxies' results depend on (transfer.archive.fingerprint)
    name: str  # the run folder's name
    archive: Archive
    config: Config  # the config as plain dataclasses: the Context's
    # the code that decides a trial's result, part → hash (transfer.archive.code): in
    # `fingerprint`, not in `config_fingerprint` (the same config under other code)
    code: dict = field(default_factory=dict)
    config_fingerprint: str = ""


def plain_config(cfg: Config, derived: dict) -> dict:
    """The config as plain data with `derived` (what was derived from the target) added:
    config.yaml's content, and the fingerprint's starting point."""
    plain = dataclasses.asdict(cfg)
    plain["derived"] = derived
    return plain


def plan_sweep(cfg) -> Plan:
    """The sweep's plan for `cfg` (a `Config`, or a composed config): validate everything a
    user can get wrong; touches nothing on disk."""
    cfg = as_config(cfg)
    check_config(cfg)
    proxies = plan_proxies(cfg)
    corpus = load_corpus(**dataclasses.asdict(cfg.data))
    proxies = instantiate_family(cfg, proxies, corpus.vocab_size)
    payload = plain_config(cfg, proxies.derived)
    # Fingerprint what the proxies *are*: a value pinned in proxy.* and the same value derived
    # from the target build the same proxies, so they must not tell the runs apart.
    payload["proxy"].update({k: v for k, v in proxies.derived.items() if k in payload["proxy"]})
    payload["proxy"].update(validation_width=proxies.validation_width,
                            base_width=proxies.base_width)
    return _planned(cfg, proxies, corpus, payload, lambda fp: (
        f"{cfg.model.name}-{cfg.proxy.parametrization}-{cfg.budget}-{fp[:8]}"))


def plan_custom(cfg, *, build: Callable | None = None) -> Plan:
    """A custom model's plan for `cfg` (a `Config`, or a composed config): every input check,
    the audit and the output probe (`transfer.run.custom`); touches nothing on disk. Raises
    `AuditFailed` or another UserError."""
    cfg, proxies, corpus = custom_proxies(as_config(cfg), build=build)
    payload = plain_config(cfg, proxies.derived)
    # Fingerprint what the proxies are, as the sweep does: resolved widths and context.
    payload["proxy"].update(validation_width=proxies.validation_width,
                            base_width=proxies.base_width, seq_len=proxies.derived["seq_len"])
    target = proxies.derived["builder"]
    return _planned(cfg, proxies, corpus, payload, lambda fp: re.sub(
        r"[^A-Za-z0-9._=+-]", "_", f"validate-{target}-{cfg.budget}-{fp[:8]}"))


def _planned(cfg: Config, proxies: ProxyPlan, corpus: Corpus, payload: dict,
             default_name: Callable[[str], str]) -> Plan:
    """Both plans' tail: the fingerprint of `payload`, the run name (name= or
    `default_name(fingerprint)`), and an archive the run can be written to."""
    versions = library_versions()
    code = code_hashes()
    config_fp = fingerprint(payload, data_hash=corpus.content_hash, versions=versions)
    fp = fingerprint({**payload, "code": code}, data_hash=corpus.content_hash, versions=versions)
    name = cfg.name or default_name(fp)
    if cfg.validation.enabled:
        _check_coord_widths(cfg, proxies)
    archive = Archive(Path(cfg.archive_dir).expanduser())
    archive.run_dir(name)  # a name= that is not a plain folder name is a user error
    _check_writable(archive.root)
    return Plan(plain_config(cfg, proxies.derived), proxies, corpus, fp, name, archive,
                cfg, code, config_fp)


def _check_coord_widths(cfg: Config, proxies: ProxyPlan) -> None:
    """The coordinate check needs two widths the family can build (`validation.coord_widths`,
    those it cannot left out: `transfer.verdict.width.buildable_widths`); a UserError before
    anything is written otherwise (it failed after the grids, a traceback)."""
    built, why = buildable_widths(proxies.family, cfg.validation.coord_widths)
    if len(set(built)) < 2:
        raise UserError(f"validation.coord_widths={list(cfg.validation.coord_widths)}: this "
                        f"family builds {built or 'none'} of them ({why}); list two or more it "
                        "can build")


def _check_writable(root: Path) -> None:
    probe = root
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise UserError(f"archive_dir={str(root)!r} is not writable; pass archive_dir=<a folder "
                        "you can write>")


def make_context(plan: Plan, storage, *, worker: int = 0) -> Context:
    """The Context the plan's stages and grids run in, on `storage`; progress is shown by the
    launching process only (worker `worker * workers`). Its `cfg` is `plan.config`."""
    cfg = plan.config
    run_dir = plan.archive.run_dir(plan.name)
    ctx = Context(cfg=cfg, proxies=plan.proxies, corpus=plan.corpus, storage=storage,
                  lock=run_lock(cfg.storage.kind, run_dir=run_dir, storage=storage, name=plan.name),
                  run_name=plan.name, device=cfg.device,
                  progress=Progress(cfg.progress if worker == cfg.worker * cfg.workers else "off",
                                    workers=cfg.workers),
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
