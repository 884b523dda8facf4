"""config → proxy family for a user's own model (`proxy=custom`): what `python -m
transfer.cli.validate` checks before anything trains.

builder → input checks → audit (shapes only; `AuditFailed` lists every finding) → output probe
→ the `ProxyPlan` of `proxies.custom.CustomFamily` wrapping the builder. The sweep's
counterpart is `transfer.search.family` (`plan_proxies` + `instantiate_family`); `transfer.run.planner`
turns either into a run's `Plan`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable

from proxies.registry import size as proxy_size
from transfer.core.audit import (
    AuditFailed,
    audit,
    check_signature,
    probe_output,
    resolve_builder,
)
from transfer.core.compose import locate_object
from transfer.core.config import Config, ProxyConf, check_config
from transfer.core.config import validation_width as resolved_validation_width
from transfer.core.data import Corpus, load_corpus
from transfer.core.errors import UserError
from transfer.core.hparams import MODEL_HPARAMS
from transfer.search.family import ProxyPlan

# The family wrapping a user's builder. Named, not imported: `transfer` reaches proxy families
# through a `_target_` only.
FAMILY_TARGET = "proxies.custom.CustomFamily"
STAGE = "lr"  # the only stage: the model's own code fixes everything else


def _target(cfg: Config, build: Callable | None) -> str:
    node = cfg.proxy.builder
    if node.get("_target_") in (None, "", "???"):
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


def _builder(cfg: Config, target: str, build: Callable | None) -> Callable:
    """The user's callable; extra keys under proxy.builder are bound as keyword arguments."""
    fn = build if build is not None else resolve_builder(target)
    kwargs = {k: v for k, v in cfg.proxy.builder.items() if not k.startswith("_")}
    if kwargs:
        fn = functools.partial(fn, **kwargs)
    check_signature(fn, target)
    return fn


def _check_custom(cfg: Config) -> None:
    """What the sweep may set but a custom model must not: each is the model's own business."""
    if cfg.workers != 1:
        raise UserError(f"workers={cfg.workers}: validation of a custom model runs in one process; "
                        "use workers=1")
    if not cfg.validation.enabled:
        raise UserError("validation.enabled=false leaves nothing to check; drop that override")
    for k in MODEL_HPARAMS:
        if getattr(cfg.proxy, k) != getattr(ProxyConf, k):
            raise UserError(f"proxy.{k}={getattr(cfg.proxy, k)} has no effect with proxy=custom: the "
                            f"μP multipliers live in your model; drop the override")
    if STAGE not in cfg.stages.stage:
        raise UserError(f"stages.stage has no {STAGE!r} stage, which finds the grid centre; "
                        "use stages=default")
    extra = sorted(set(cfg.stages.stage[STAGE].params) - {"lr"})
    if extra:
        raise UserError(f"stages.stage.{STAGE}.params tunes {', '.join(extra)}; with "
                        "proxy=custom the lr stage tunes lr only")


def custom_proxies(cfg: Config, *, build: Callable | None = None
                   ) -> tuple[Config, ProxyPlan, Corpus]:
    """Every input check, the audit and the output probe; touches nothing on disk.

    Returns the config with the lr stage only, the proxy plan (its `derived` holds the builder,
    context, base shapes and source hash) and the corpus. Raises `AuditFailed` or another
    `UserError`.
    """
    cfg = copy.deepcopy(cfg)
    cfg.stages.order = [STAGE]
    if cfg.workers == "auto":  # a custom model is validated in one process
        cfg.workers = 1
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
    corpus = load_corpus(**dataclasses.asdict(cfg.data))
    family = locate_object(FAMILY_TARGET)(
        build_fn=fn, seq_len=seq_len, vocab_size=corpus.vocab_size, base_width=base_width,
        target=target, fixed={k: float(getattr(p, k)) for k in MODEL_HPARAMS})
    notes = []
    if "n_layers" in family.depth_keywords:  # the depth hook (proxies/custom.py)
        n = p.n_layers or proxy_size(p.size)["n_layers"]
        family = dataclasses.replace(family, n_layers=n, base_depth=p.base_depth or n,
                                     depth_alpha=float(p.depth_alpha), _cache={})
    elif cfg.validation.depth_enabled:
        # budget=default checks depth; a builder that cannot be deepened is validated in width
        # alone, and the run says so (its notes)
        cfg.validation.depth_enabled = False
        notes.append(f"the depth check did not run: {target} takes no `n_layers` keyword (add "
                     "`n_layers` and `residual_mult` keywords to the builder to check it: "
                     "proxies/custom.py)")
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
                     [f"custom model {target}: depth, context and multipliers are its own",
                      *notes])
    return cfg, plan, corpus
