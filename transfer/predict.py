"""Before training: the whole run's predicted seconds and FLOPs, and the spending cap checked on
them (`python -m transfer.sweep` refuses to start over the cap, before the archive is touched).

A short timing probe at each width (`transfer.search.predict_seconds`) times the number of
trials the config asks for: the stages at the proxy width, the width grid at both widths, and
the depth and horizon grids' points that are trained (the ones they copy cost nothing).
"""

from __future__ import annotations

from transfer import cost as costs
from transfer import depth, horizon
from transfer.plan import Plan
from transfer.search import Context, default_hparams, predict_seconds


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


def predict_and_check_cap(plan: Plan) -> dict | None:
    """Refuse to start (exit 2, prediction and cap printed) when the prediction is over the cap.
    None when no cap is set (nothing is probed then)."""
    c = plan.cfg.cost
    if c.max_tuning_gpu_hours is None and c.max_wall_seconds is None:
        return None
    ctx = Context(cfg=plan.cfg, plan=plan.proxies, corpus=plan.corpus, storage=None, lock=None,
                  run_name=plan.name, device=plan.cfg.device)
    pred = predict_run(ctx)
    costs.check_cap(pred["device_hours"], pred["seconds"], c)
    return pred
