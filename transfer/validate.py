"""`python -m transfer.validate proxy=custom proxy.builder._target_=my_pkg.models.build`: is my
model μP? A thin Hydra CLI over `validate(cfg)`, and `validate_model(build)` for Python.

builder → audit (shapes only; exit 2 with every finding) → output probe → an lr stage at
proxy.width (the sweep's, started at train.lr) → the sweep's validator: lr grid at two widths,
coordinate check, verdict, plots → archive. Exit 0 passes, 3 rejects, 4 cannot tell (inconclusive), 2 is bad input.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import hydra
from omegaconf import DictConfig, OmegaConf

from transfer.audit import AuditFailed, audit, check_signature, probe_output, resolve_builder
from transfer.config import ProxyConf, check_config, register_configs
from transfer.config import validation_width as resolved_validation_width
from transfer.errors import UserError, exit_code, verdict_exit_code
from transfer.family import ProxyPlan
from transfer.hparams import MODEL_HPARAMS
from transfer.search import default_hparams, open_study, run_stages, seed_incumbent, stage_space

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")
# The family wrapping a user's builder. Named, not imported: `transfer` reaches proxy families
# through a `_target_` only.
FAMILY_TARGET = "proxies.custom.CustomFamily"
STAGE = "lr"  # the only stage: the model's own code fixes everything else


# ---- input ---------------------------------------------------------------------------------
def _target(cfg: DictConfig, build: Callable | None) -> str:
    node = cfg.proxy.builder
    if OmegaConf.is_missing(node, "_target_") or not node.get("_target_"):
        if build is not None:
            return f"{build.__module__}.{getattr(build, '__qualname__', 'build')}"
        raise UserError("proxy.builder._target_ is not set; pass proxy=custom "
                        "proxy.builder._target_=my_pkg.models.build (a function "
                        "build(width: int) -> torch.nn.Module)")
    target = str(node["_target_"])
    if target == ProxyConf().builder["_target_"]:
        raise UserError(f"proxy.builder._target_={target!r} is the built-in family, which "
                        "`python -m transfer.sweep` validates; to check your own model pass "
                        "proxy=custom proxy.builder._target_=my_pkg.models.build")
    return target


def _builder(cfg: DictConfig, target: str, build: Callable | None) -> Callable:
    """The user's callable; extra keys under proxy.builder are bound as keyword arguments."""
    fn = build if build is not None else resolve_builder(target)
    kwargs = {k: v for k, v in OmegaConf.to_container(cfg.proxy.builder, resolve=True).items()
              if not k.startswith("_")}
    if kwargs:
        fn = functools.partial(fn, **kwargs)
    check_signature(fn, target)
    return fn


def _check_custom(cfg: DictConfig) -> None:
    """What the sweep may set but a custom model must not: each is the model's own business."""
    if cfg.workers != 1:
        raise UserError(f"workers={cfg.workers}: validation of a custom model runs in one process; "
                        "use workers=1")
    if not cfg.validation.enabled:
        raise UserError("validation.enabled=false leaves nothing to check; drop that override")
    for k in MODEL_HPARAMS:
        if cfg.proxy[k] != getattr(ProxyConf, k):
            raise UserError(f"proxy.{k}={cfg.proxy[k]} has no effect with proxy=custom: the "
                            f"μP multipliers live in your model; drop the override")
    if STAGE not in cfg.stages.stage:
        raise UserError(f"stages.stage has no {STAGE!r} stage, which finds the grid centre; "
                        "use stages=default")
    extra = sorted(set(cfg.stages.stage[STAGE].params) - {"lr"})
    if extra:
        raise UserError(f"stages.stage.{STAGE}.params tunes {', '.join(extra)}; with "
                        "proxy=custom the lr stage tunes lr only")


def prepare(cfg: DictConfig, *, build: Callable | None = None):
    """Every input check, the audit and the output probe; touches nothing on disk.

    Returns the sweep's `Prepared` (config with the lr stage only, plan, corpus, fingerprint,
    run name, archive). Raises `AuditFailed` or another `UserError`.
    """
    from hydra.utils import get_class

    from proxies.registry import size as proxy_size
    from transfer.archive import Archive, fingerprint, library_versions
    from transfer.data import load_corpus
    from transfer.run import Prepared, _check_writable

    cfg = copy.deepcopy(cfg)
    cfg.stages.order = [STAGE]
    check_config(cfg)
    _check_custom(cfg)
    target = _target(cfg, build)
    fn = _builder(cfg, target, build)
    p = cfg.proxy
    width, validation_width = p.width, resolved_validation_width(p)
    base_width = p.base_width or width
    try:
        seq_len = p.seq_len or proxy_size(p.size)["seq_len"]
    except ValueError as e:
        raise UserError(f"proxy.size: {e}") from None
    data = OmegaConf.to_container(cfg.data, resolve=True)
    corpus = load_corpus(**data)
    family = get_class(FAMILY_TARGET)(
        build_fn=fn, seq_len=seq_len, vocab_size=corpus.vocab_size, base_width=base_width,
        target=target, fixed={k: float(p[k]) for k in MODEL_HPARAMS})
    if "n_layers" in family.depth_keywords:  # the depth hook (proxies/custom.py)
        n = p.n_layers or proxy_size(p.size)["n_layers"]
        family = dataclasses.replace(family, n_layers=n, base_depth=p.base_depth or n,
                                     depth_alpha=float(p.depth_alpha), _cache={})
    elif cfg.validation.depth_enabled:
        raise UserError(f"validation.depth_enabled=true but {target} takes no `n_layers` "
                        "keyword; add `n_layers` and `residual_mult` keywords to the builder "
                        "(see proxies/custom.py) or drop the override")
    for name, w in (("proxy.base_width", base_width), ("proxy.width", width),
                    ("proxy.validation_width", validation_width)):
        try:
            family.check_width(w, field=name)
        except ValueError as e:
            raise UserError(str(e)) from None
    findings = audit(fn, base_width=base_width, delta_width=family.delta,
                     vocab_size=corpus.vocab_size, target=target)
    if findings:
        raise AuditFailed(target, findings)
    probe_output(family.build(base_width), seq_len=seq_len, vocab_size=corpus.vocab_size,
                 target=target)
    derived = {"builder": target, "seq_len": seq_len, "vocab_size": corpus.vocab_size,
               "base_width": base_width, "delta_width": family.delta,
               "parametrization": family.parametrization,
               "base_shapes": {n: s.base_shape() for n, s in family.base_shapes().items()},
               "source_sha256": family.source_hash(),
               "n_params": {str(w): family.n_params(w) for w in (width, validation_width)}}
    plan = ProxyPlan(family, width, validation_width, base_width, derived,
                     [f"custom model {target}: depth, context and multipliers are its own"])
    plain = OmegaConf.to_container(cfg, resolve=True)
    plain["derived"] = derived
    # Fingerprint what the proxies are, as the sweep does: resolved widths and context.
    plain["proxy"].update(validation_width=validation_width, base_width=base_width,
                          seq_len=seq_len)
    fp = fingerprint(plain, data_hash=corpus.content_hash, versions=library_versions())
    name = cfg.name or re.sub(r"[^A-Za-z0-9._=+-]", "_", f"validate-{target}-{cfg.budget}-{fp[:8]}")
    archive = Archive(Path(cfg.archive_dir).expanduser())
    archive.run_dir(name)  # a name= that is not a plain folder name is a user error
    _check_writable(archive.root)
    return Prepared(cfg, plan, corpus, fp, name, archive)


# ---- the job -------------------------------------------------------------------------------
def validate(cfg: DictConfig, *, build: Callable | None = None) -> int:
    """The whole check; returns 0 (μP: the lr transfers), 3 (rejected) or 4 (inconclusive).
    Raises UserError (`AuditFailed` lists every finding) for bad input, before any training."""
    import optuna

    from transfer import depth
    from transfer.archive import code_version
    from transfer.finalize import mark_finalized, trials_frame, validate_transfer, verdict_lines
    from transfer.run import make_context
    from transfer.storage import make_storage

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # our progress lines replace its logs
    prep = prepare(cfg, build=build)
    cfg, plan = prep.cfg, prep.plan
    run_dir = prep.archive.create_run(
        prep.name, fingerprint=prep.fingerprint, model=plan.derived["builder"],
        parametrization=plan.derived["parametrization"],
        proxy_widths=[plan.width, plan.validation_width], code_version=code_version())
    ctx = make_context(prep, make_storage(cfg.storage, run_dir=run_dir))
    # train.lr is the lr stage's first trial: with stages.stage.lr.trials=1 it is the centre.
    start = default_hparams(cfg)
    seed_incumbent(ctx, open_study(ctx, 0, STAGE), stage_space(cfg, STAGE, start), start)
    hp = run_stages(ctx)
    study, verdict, _ = validate_transfer(ctx, hp, run_dir / "plots")
    if verdict is None:
        raise UserError(f"another live process is validating run {prep.name!r}; wait for it, or "
                        "pass name=<another run name>")
    _write(prep, hp, verdict, trials_frame(ctx))
    depth_verdict = None
    if depth.enabled(cfg):
        depth_verdict = depth.validate_depth(ctx, hp, study, run_dir / "plots")
        prep.archive.write_json(prep.name, "validation_depth.json", depth_verdict.to_dict())
    status = "finished" if verdict.passed else verdict.outcome
    prep.archive.record({"name": prep.name, "status": status, "validated": verdict.passed,
                         "drift_log2": verdict.drift_log2, "winners": {"lr": float(hp["lr"])}})
    mark_finalized(study)
    ctx.progress.line(f"\n== {prep.name}  ({run_dir})")
    for line in verdict_lines(verdict) + (depth.lines(depth_verdict) if depth_verdict else []):
        ctx.progress.line(line)
    outcomes = {verdict.outcome, depth_verdict.outcome if depth_verdict else verdict.outcome}
    return verdict_exit_code("rejected" if "rejected" in outcomes else
                             "inconclusive" if "inconclusive" in outcomes else "passed")


def _write(prep, hp: dict, verdict, trials) -> None:
    from transfer.report import _plots, _verdict

    a, name, plan = prep.archive, prep.name, prep.plan
    plain = OmegaConf.to_container(prep.cfg, resolve=True)
    plain["derived"] = plan.derived
    a.write_yaml(name, "config.yaml", plain)
    a.write_text(name, "trials.csv", trials.to_csv(index=False))
    a.write_json(name, "validation.json", verdict.to_dict())
    a.write_json(name, "audit.json", {"builder": plan.derived["builder"], "findings": [],
                                      "base_width": plan.base_width,
                                      "delta_width": plan.derived["delta_width"]})
    with tempfile.TemporaryDirectory() as tmp:
        plan.family.save_base_shapes(Path(tmp) / "base_shapes.bsh")
        a.copy_into(name, "base_shapes.bsh", Path(tmp) / "base_shapes.bsh")
    plots = [p for p in ("plots/lr_transfer.png", "plots/coord_check.png")
             if (a.run_dir(name) / p).exists()]
    head = [f"# Is `{plan.derived['builder']}` μP? — {name}", "",
            (f"Audit: clean (base shapes from widths {plan.base_width} and "
             f"{plan.derived['delta_width']}). Grid centre: lr {float(hp['lr']):.4g} from the lr "
             f"stage at width {plan.width}; validation at width {plan.validation_width}; "
             f"{prep.cfg.train.tokens:,} tokens per trial on `{prep.corpus.source}`."), ""]
    a.write_text(name, "report.md", "\n".join(head + [_verdict(verdict.to_dict(), plain), "",
                                                     _plots(plots), ""]))


# ---- entry points --------------------------------------------------------------------------
def compose_config(overrides: Sequence[str] = ()) -> DictConfig:
    """`conf/config.yaml` with `overrides` (and `proxy=custom` unless they pick a proxy), as
    the CLI would see it."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_configs()
    if not any(o.startswith("proxy=") for o in overrides):
        overrides = ["proxy=custom", *overrides]
    if GlobalHydra.instance().is_initialized():  # inside a Hydra app: compose there
        return compose("config", overrides=overrides)
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose("config", overrides=overrides)


def validate_model(build: Callable | str, *, width: int | None = None,
                   validation_width: int | None = None, overrides: Sequence[str] = ()) -> int:
    """Python entry point: `validate_model(my_pkg.models.build, overrides=["budget=smoke"])`.

    `build` is the builder itself or its dotted path; `width`/`validation_width` set
    proxy.width/proxy.validation_width. Returns 0, 3 or 4; raises UserError (AuditFailed).
    """
    overrides = [*(f"proxy.{k}={v}" for k, v in (("width", width),
                                                 ("validation_width", validation_width))
                   if v is not None), *overrides]
    if isinstance(build, str):
        return validate(compose_config([f"proxy.builder._target_={build}", *overrides]))
    return validate(compose_config(overrides), build=build)


def run(cfg: DictConfig) -> int:
    """`validate`, with bad input as exit code 2: one line, or one line per audit finding."""
    return exit_code(validate, cfg)


register_configs()


@hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    sys.exit(run(cfg))


if __name__ == "__main__":
    main()
