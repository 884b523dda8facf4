"""Before training: the whole run's predicted seconds per phase, and the spending cap checked
on them (`python -m transfer.sweep` refuses to start over the cap, before the archive is
touched). The prediction is printed before the first trial and kept in cost.json beside what
each phase measured (`transfer.search.phases`).

Every phase is priced from the timing probes (`transfer.search.predict_seconds`: a few steps
of a shape, timed before its first full trial; the run reuses them, so they cost nothing twice):

- **stages**: each stage's trials at the stage width; a later stage's first trial is copied
  from the one before (0 s); the batch-size stage's choices are probed each at its own batch;
  with a pruner, a trial past the pruner's start-up is stopped with probability ½ (a median
  rule) at its first eligible evaluation, and costs that share of a full trial.
- **validation**: points × seeds at both widths; **depth**: the deeper proxies' points (the
  shallow ones are copied from the width grid); **horizon**: the short runs (the full-budget
  ones are copied).
- **coord**: the coordinate checks' few steps per width (and depth), each width's step time
  interpolated in FLOPs per token between the two probed widths.
- **finalize**: the fits, plots and writes: a constant measured on CPU runs here.

Points an edge-hitting width grid adds (`validation.max_extend`) are priced at their expected
number where the parametrization's theory puts the optimum at each width
(`transfer.verdict.width.extension_rounds`: none under μP; SP's optimum falls an octave per
doubling, so its widest curve grows); the ETA conditions them on each curve once measured.
Where the theory expects the width grid to reject (SP: `width.theory_rejects`), the depth grid,
skipped after a width rejection, is not priced; with an early look
(`validation.early_reject`), nor the widths past the one where it is expected to reject
(`width.expected_widths`).

The probes cannot price what the run decides as it goes (growth beyond that, the depth and
horizon grids' included; seed rounds; the stages' batch winner; divergence) nor the work
around the trials. So the printed prediction (`seconds`, `expected_phases`) is the probes'
phases (`phases`, `probe_seconds`) each scaled by its measured ÷ predicted ratio on earlier
runs (`transfer.run.history`: the archive's runs and the budget's prior): an expected value.
`extension_cap_seconds` is the most the extensions can add (every grid extended `max_extend`
steps on both sides at every width) and `seed_round_cap_seconds` the most the seed rounds can
(`validation.max_extra_seconds` of predicted wall seconds for each grid that runs them: the
width grid's and the depth grid's); cost.json's `trial_timing` says afterwards how many trials
each phase ran and how their measured seconds compared with their probes'
(`transfer.run.assemble`), which separates the two kinds of miss.
"""

from __future__ import annotations

import math

from transfer.core import cost as costs
from transfer.run.history import Calibration
from transfer.run.planner import Plan
from transfer.search import Context, default_hparams, n_finished, open_study, predict_seconds
from transfer.search.stages import expected_trial_seconds
from transfer.verdict import depth, horizon, horizon_branched
from transfer.verdict.coord import COORD_BATCH
from transfer.verdict.width import (
    coord_widths,
    expected_widths,
    extension_rounds,
    open_validation_study,
    seed_rounds_on,
    theory_rejects,
    width_plan,
)

FINALIZE_SECONDS = 4.0  # fits, 4-6 PNGs, report, target.yaml, hf/: 2-5 s on 2 CPU cores here


def _stage_seconds(ctx: Context, hp: dict, index: int, name: str) -> float:
    return sum(expected_trial_seconds(ctx, hp, index, name))


def _coord_seconds(ctx: Context, hp: dict, t_step: dict[int, float]) -> float:
    """The coordinate check's steps at each of its widths (`transfer.verdict.width.coord_widths`)
    for each of its seeds: per-step time linear in FLOPs per token through the two probed widths,
    at the check's batch (`COORD_BATCH`)."""
    fam = ctx.proxies.family
    (w0, s0), (w1, s1) = sorted(t_step.items())
    f0, f1 = fam.flops_per_token(w0), fam.flops_per_token(w1)
    slope = (s1 - s0) / (f1 - f0) if f1 != f0 else 0.0
    batch = COORD_BATCH / int(hp["batch_size"])
    v = ctx.cfg.validation
    return sum(int(v.coord_steps) * int(v.coord_seeds) * batch
               * max(0.0, s0 + slope * (fam.flops_per_token(w) - f0)) for w in coord_widths(ctx))


def _finished(ctx: Context, opener) -> int:
    """Finished trials of a study this run already has (a resumed or reused run); 0 before the
    run's storage exists (the cap check)."""
    if ctx.storage is None:
        return 0
    return n_finished(opener())


def _left(expected: int, finished: int) -> float:
    return 0.0 if expected <= 0 else max(0.0, 1.0 - finished / expected)


def predict_run(ctx: Context, calibration: Calibration | None = None) -> dict:
    """Whole-run seconds per phase (and FLOPs) from the probes, for what is left to train (all
    of it in a fresh run; nothing, and no probe, in a finished one); see the module docstring.
    `phases` are the probes' own; `expected_phases` and `seconds` are them scaled by
    `calibration` (`transfer.run.history`: what the run decides as it goes and the work
    around the trials, from earlier runs), the probes' total kept as `probe_seconds`."""
    cfg, plan = ctx.cfg, ctx.proxies
    hp = default_hparams(cfg)
    tokens = int(cfg.train.tokens)
    phases = {"stages": 0.0}
    stage_seconds, flops = {}, 0.0
    for i, name in enumerate(cfg.stages.order):
        n = int(cfg.stages.stage[name].trials)
        left = _left(n, _finished(ctx, lambda i=i, name=name: open_study(ctx, i, name)))
        stage_seconds[name] = left and left * _stage_seconds(ctx, hp, i, name)
        phases["stages"] += stage_seconds[name]
        flops += left * tokens * n * plan.family.flops_per_token(plan.width)
    phases["stages"] /= _workers(cfg)
    grids = _grids(ctx, hp)
    phases.update(grids["phases"])
    cal = calibration or Calibration()
    expected = cal.apply(phases)
    seconds = sum(expected.values())
    return {"seconds": seconds, "device_hours": seconds / 3600, "flops": flops + grids["flops"],
            "phases": phases, "expected_phases": expected,
            "probe_seconds": sum(phases.values()), "calibration": cal.to_dict(),
            "calibration_line": cal.describe(),
            "stages": stage_seconds, "trial_seconds": grids["trial_seconds"],
            "extension_cap_seconds": grids["extension_cap_seconds"],
            "extension_expected_seconds": grids["extension_expected_seconds"],
            "seed_round_cap_seconds": grids["seed_round_cap_seconds"],
            "not_predicted": "by the probes (their phases; `expected_phases` scale them by "
                             "earlier runs, `calibration`): grid points added at an edge beyond "
                             "the parametrization's expected optimum (validation.max_extend; at "
                             "most extension_cap_seconds), seed rounds (at most "
                             "seed_round_cap_seconds), divergence, the stages' batch-size winner "
                             "(the grids are priced at train.batch_size until `after_stages`)"}


def after_stages(ctx: Context, hp: dict, elapsed: float,
                 calibration: Calibration | None = None) -> dict:
    """The rest of the run predicted again once the stages have picked `hp` (the grids train at
    the winners: a smaller batch means more steps), `elapsed` seconds into the launch: the
    probes of the winners' shapes are the ones the grids' first trials would take anyway;
    scaled by `calibration` as the first prediction is."""
    grids = _grids(ctx, hp)
    expected = (calibration or Calibration()).apply(grids["phases"], after_stages=True)
    rest = sum(expected.values())
    return {"phases": grids["phases"], "expected_phases": expected,
            "trial_seconds": grids["trial_seconds"],
            "extension_cap_seconds": grids["extension_cap_seconds"],
            "extension_expected_seconds": grids["extension_expected_seconds"],
            "seed_round_cap_seconds": grids["seed_round_cap_seconds"], "seconds": rest,
            "elapsed_seconds": elapsed, "total_seconds": elapsed + rest,
            "batch_size": int(hp["batch_size"])}


def _workers(cfg) -> int:
    return max(1, int(cfg.workers))  # trials of one study are shared by the local workers


def _grids(ctx: Context, hp: dict) -> dict:
    """Validation, depth, horizon and coordinate-check seconds left to train at `hp`, and
    finalize; the grids' trials shared by the workers."""
    cfg, plan = ctx.cfg, ctx.proxies
    ws = plan.widths()
    w0 = ws[0]
    tokens = int(cfg.train.tokens)
    fam = plan.family
    phases: dict[str, float] = {}
    flops = 0.0
    trial_seconds = {}
    v = cfg.validation
    n_grid = v.points * v.seeds if v.enabled else 0  # the first curve's (the horizon grid's)
    n_ext = 2 * int(v.max_extend) * v.seeds if v.enabled else 0  # extra points per curve, at most
    extension = expected = 0.0
    wplan = width_plan(ctx)  # each width's points and seeds, as the grid lays them out
    trained = expected_widths(ctx)  # the widths an early rejection is not expected to spare
    n_width = {w: wplan[w].trials for w in trained}
    left = _left(sum(n_width.values()), _finished(ctx, lambda: open_validation_study(ctx)))
    if n_grid and left:
        ts = {w: predict_seconds(ctx, hp, w) for w in ws}  # every width: coord reads the widest
        trial_seconds.update({str(w): t for w, t in ts.items()})
        # the rounds a grid centred on hp's lr is expected to grow by at each width (none
        # measured yet: the theory's odds alone)
        rounds = extension_rounds(ctx, None, round(math.log2(float(hp["lr"])), 6))
        expected = left * sum(wplan[w].seeds * ts[w] * sum(rounds[w]) for w in trained)
        phases["validation"] = left * sum(n_width[w] * ts[w] for w in trained) + expected
        extension += 2 * int(v.max_extend) * sum(wplan[w].seeds * ts[w] for w in trained)
        flops += left * tokens * sum((n_width[w] + wplan[w].seeds * sum(rounds[w]))
                                     * fam.flops_per_token(w) for w in trained)
        steps = {w: ctx.probes[(w, int(hp["batch_size"]))][0] for w in (w0, ws[-1])}
        phases["coord"] = _coord_seconds(ctx, hp, steps)
    if n_grid and depth.enabled(cfg) and not theory_rejects(ctx):
        # the depths' points (L0's copied at the stages' width)
        ds, wd = depth.depths(ctx), depth.grid_width(ctx)
        dplan = depth.depth_plan(ctx)
        n_depth = {d: dplan[d].trials for d in ds}
        left = _left(sum(n_depth.values()), _finished(ctx, lambda: depth.open_depth_study(ctx)))
        if left:
            trained = ds[1:] if wd == plan.width else ds
            deeper = {d: depth.at_depth(ctx, d) for d in trained}
            td = {d: predict_seconds(c, hp, wd) for d, c in deeper.items()}
            phases["depth"] = left * sum(n_depth[d] * t for d, t in td.items())
            extension += 2 * int(v.max_extend) * sum(dplan[d].seeds * t for d, t in td.items())
            flops += left * tokens * sum(n_depth[d] * c.proxies.family.flops_per_token(wd)
                                         for d, c in deeper.items())
            trial_seconds.update({f"{wd}x{d}L": t for d, t in td.items()})
            # the depth coordinate check: a few steps at each of its depths, step time ∝ depth
            deep_layers = ds[-1]
            step_deep = deeper[deep_layers].probes[(wd, int(hp["batch_size"]))][0]
            phases["coord"] = phases.get("coord", 0.0) + (
                int(v.coord_steps) * int(v.coord_seeds) * COORD_BATCH / int(hp["batch_size"])
                * sum(step_deep * d / deep_layers for d in depth.coord_depths(ctx)))
    if n_grid and horizon.enabled(cfg) and horizon_branched.enabled(cfg):
        # one branched wsd run per (lr, seed): the trunk and every horizon's cooldown
        left = _left(n_grid, _finished(ctx, lambda: horizon.open_horizon_study(ctx)))
        if left:
            cost = horizon_branched.cost_context(ctx, hp)
            ts = predict_seconds(cost, hp, w0)
            phases["horizon"] = left * n_grid * ts
            extension += n_ext * ts
            flops += left * cost.cfg.train.tokens * n_grid * fam.flops_per_token(w0)
            trial_seconds[f"{w0}@branched"] = ts
    elif n_grid and horizon.enabled(cfg):  # the short runs (the full-budget ones are copied)
        left = _left(2 * n_grid, _finished(ctx, lambda: horizon.open_horizon_study(ctx)))
        if left:
            short = horizon.budgets(cfg)[0]
            ts = predict_seconds(horizon.at_tokens(ctx, short), hp, w0)
            phases["horizon"] = left * n_grid * ts
            extension += n_ext * ts
            flops += left * short * n_grid * fam.flops_per_token(w0)
            trial_seconds[f"{w0}@{short}"] = ts
    for k in ("validation", "depth", "horizon"):
        if k in phases:
            phases[k] /= _workers(cfg)
    phases["finalize"] = FINALIZE_SECONDS
    # each grid that runs seed rounds may add up to its own max_extra_seconds (wall seconds:
    # `width.queue_seed_round` prices a round on the workers)
    round_grids = [k for k in ("validation", "depth") if k in phases]
    rounds_cap = float(v.max_extra_seconds) * len(round_grids) if seed_rounds_on(v) else 0.0
    return {"phases": phases, "trial_seconds": trial_seconds, "flops": flops,
            "seed_round_cap_seconds": rounds_cap,
            "extension_cap_seconds": extension / _workers(cfg),
            "extension_expected_seconds": expected / _workers(cfg)}


def predict_and_check_cap(ctx: Context, calibration: Calibration | None = None) -> dict:
    """The prediction, made in `ctx` (whose probes the run then reuses); refuses to start
    (exit 2, prediction and cap printed) when its expected seconds are over the cap."""
    pred = predict_run(ctx, calibration)
    costs.check_cap(pred["device_hours"], pred["seconds"], ctx.cfg.cost)
    return pred


def before_archive(plan: Plan) -> Context | None:
    """With a cap set, the context the cap is checked in before the archive is touched (no
    storage yet: the whole run is predicted); None without a cap (predicted in the run's own
    context, for what is left of it)."""
    cfg = plan.config  # plain dataclasses, as in every Context
    if cfg.cost.max_tuning_gpu_hours is None and cfg.cost.max_wall_seconds is None:
        return None
    return Context(cfg=cfg, proxies=plan.proxies, corpus=plan.corpus, storage=None, lock=None,
                   run_name=plan.name, device=cfg.device)


def _fmt(s: float) -> str:
    s = int(s)  # whole seconds, never rounded up (539.6 s is 8m59s, not 8m60s)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def line(pred: dict, spent: dict[str, float]) -> str:
    """The printed prediction: total, then each phase (expected), and what scaled the probes."""
    parts = ", ".join(f"{k} {_fmt(s)}" for k, s in pred["expected_phases"].items())
    done = ", ".join(f"{k} {_fmt(s)}" for k, s in spent.items())
    ext = pred.get("extension_cap_seconds") or 0.0
    more = f"; up to {_fmt(ext)} more if the grids extend to their cap" if ext else ""
    more += _rounds_part(pred)
    how = f"; {pred['calibration_line']}, {_fmt(pred['probe_seconds'])} unscaled"
    return (f"predicted {_fmt(pred['seconds'])} from here ({parts}{more}{how}); "
            f"spent so far: {done}")


def _rounds_part(pred: dict) -> str:
    cap = pred.get("seed_round_cap_seconds") or 0.0
    return f"; seed rounds at most {_fmt(cap)}" if cap else ""


def after_line(after: dict) -> str:
    """The printed re-prediction once the stages are done."""
    parts = ", ".join(f"{k} {_fmt(s)}" for k, s in after["expected_phases"].items())
    return (f"stages done (batch {after['batch_size']}): predicted {_fmt(after['seconds'])} "
            f"more ({parts}{_rounds_part(after)}), {_fmt(after['total_seconds'])} in all")
