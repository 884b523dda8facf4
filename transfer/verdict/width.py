"""The transfer validator's measurements: the lr grid across widths and the coordinate check.

Re-sweeps the learning rate on a log2 grid around the tuned optimum at every grid width
(`proxy.grid_widths`: the proxy width w0 doubling up to the validation width; same grid, same
fresh seeds, the widest queued first), extends the grid on the side where a width's optimum
sits at its edge until each is bracketed (within `validation.max_extend`), and hands plain
curves to the pure verdict (`transfer.judge.verdict.judge`). The grid lives in an Optuna
study, so validation resumes and parallelises like any stage.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import optuna
from optuna.trial import TrialState

from transfer.core.hparams import MODEL_HPARAMS
from transfer.judge.curves import (
    extend_each,
    extend_points,
    extension_odds,
    rounds_left,
)
from transfer.judge.rounds import (
    MAX_MULTIPLE,
    decide_hint,
    farther_hint,
    look_confidence,
    plan_round,
)
from transfer.judge.trajectory import model_for, prior_offset
from transfer.judge.verdict import REJECTED, Limits, Verdict, judge
from transfer.search import Context, n_finished, predict_seconds, queued_trials, run_one, work
from transfer.search.probe import enqueued_params, measured_ratios
from transfer.search.progress import RANGE, Left, Span, makespan
from transfer.verdict.coord import CoordResult, coord_check
from transfer.verdict.plan import CurvePlan, GridPlan, best_point, grid_plan


def limits_from(v, *, target_width: int | None = None, parametrization: str = "mup",
                looks: int = 1) -> Limits:
    """The verdict's limits from the `validation` config group (the one place that reads it);
    the trajectory model is the parametrization's own (`transfer.judge.trajectory.model_for`);
    the `looks`-th look at the grid is judged at `rounds.look_confidence`."""
    return Limits(trajectory_model=model_for(parametrization), tolerance_log2=v.tolerance_log2,
                  max_gap=v.max_gap, min_seeds=v.min_seeds, min_points=v.min_points,
                  fit_window=v.points, min_curvature_snr=v.min_curvature_snr,
                  confidence=look_confidence(v.confidence, looks),
                  coord_max_slope=v.coord_max_slope, can_pass=v.can_pass,
                  target_width=target_width, decide_hint=v.decide_hint)


def validation_seed(proxy_seed: int, index: int) -> int:
    """Seed of the `index`-th validation seed: never a stage trial's seed (the stages train at
    proxy.seed), so the grid's centre does not replay the trial that was selected."""
    return proxy_seed + 1000 * (index + 1)


def lr_bounds(center: float, v) -> tuple[float, float]:
    """The widest the grid may grow: `max_extend` steps beyond its first edges on each side."""
    half = v.step_log2 * ((v.points - 1) / 2 + v.max_extend)
    return round(center - half, 6), round(center + half, 6)


def open_grid_study(ctx: Context, stage: str = "validation") -> optuna.Study:
    """A validation grid's study (`<run>:<stage>`): queued points only, never pruned."""
    return optuna.create_study(study_name=f"{ctx.run_name}:{stage}", storage=ctx.storage,
                               sampler=optuna.samplers.RandomSampler(seed=0),
                               pruner=optuna.pruners.NopPruner(), direction="minimize",
                               load_if_exists=True)


def open_validation_study(ctx: Context) -> optuna.Study:
    return open_grid_study(ctx)


def finished_at_width(study: optuna.Study, width: int) -> dict:
    """(log2 lr, seed index) → the width grid's finished trial at `width`: the points another
    grid copies instead of training again (training is deterministic)."""
    return {(t.params["log2_lr"], t.params["seed"]): t for t in study.get_trials(deepcopy=False)
            if t.state in (TrialState.COMPLETE, TrialState.PRUNED) and t.params["width"] == width}


def _enqueue(study: optuna.Study, widths: list[int], seeds: int, xs: list[float]) -> None:
    for width in widths:
        for s in range(seeds):
            for x in xs:
                study.enqueue_trial({"log2_lr": x, "width": width, "seed": s})


def width_plan(ctx: Context) -> GridPlan:
    """The width grid's plan (`transfer.verdict.plan`): its widths, narrowest first."""
    v = ctx.cfg.validation
    return grid_plan(v, sorted(ctx.proxies.widths()), int(v.seeds))


def centre_of(study: optuna.Study, key: int, centre: float) -> float:
    """Where the curve `key` was centred: its own record (a focused curve's: the best point of
    the curve before it), else the grid's `centre` (the stages' pick)."""
    return float(study.user_attrs.get(f"centre_{key}", centre))


def curve_of(study: optuna.Study | None, plan: GridPlan, key: int) -> CurvePlan:
    """The curve `key`'s design as it was laid out: the plan's, with the step it was spread to
    (`GridPlan.step_after`, kept in the study's user attrs when it was laid out)."""
    step = study.user_attrs.get(f"{STEP}{key}") if study is not None else None
    return plan[key] if step is None else dataclasses.replace(plan[key], step=float(step))


STEP = "step_"  # study user attr prefix: the step a focused curve was laid out at


def enqueue_grid(ctx: Context, study: optuna.Study, center: float) -> None:
    """Queue the grid's first points once, whoever gets here first. Today's design (no
    `validation.focus`): every (width, seed, lr) point, the widest first. Longest first (LPT)
    keeps the workers' last round short (the narrow trials fill the gaps), and the first
    trials to finish are the wide ones that cost the most, side by side as the rest of them
    will run, so the ETA's measured ÷ predicted is of the trials that dominate the time left,
    not of a narrow trial beside another (`queued_trials`). With focus: the narrowest width's
    points; each wider one follows its narrower neighbour (`grow`)."""
    plan = width_plan(ctx)
    with ctx.lock():
        if study.get_trials(deepcopy=False):
            return
        laid = plan.keys[:1] if plan.focus else plan.keys
        for width in sorted(laid, reverse=True):
            _enqueue(study, [width], plan[width].seeds, plan[width].xs(center))


def grow(ctx: Context, study: optuna.Study, plan: GridPlan, center: float,
         curves: Callable[[], dict], queue: Callable[[int, list[float]], None],
         name: str = "width", stop: Callable[[dict, int], bool] | None = None
         ) -> list[float] | str | None:
    """Under the run lock, once the queued points are trained: one more point beyond the
    edge of each laid-out curve whose minimum sits at it (each curve its own step, within its
    own bounds around its own centre), queued by `queue(key, xs)` the most expensive curve
    first; when every laid-out curve is bracketed or capped and the plan focuses, the next
    curve, centred on the best point of the one before it (its centre kept in the study's
    user attrs, so a resumed or second worker agrees), unless `stop(measured curves, next
    key)` ends the grid there (`early_rejection`: kept in the study, so every worker stops).
    Returns the log2 lrs queued (or the line saying which curve was laid out); [] when the
    grid is whole; None while other workers still have points to finish."""
    with ctx.lock():
        if any(t.state in (TrialState.WAITING, TrialState.RUNNING)
               for t in study.get_trials(deepcopy=False)):
            return None
        if EARLY in study.user_attrs:
            return []
        measured = curves()
        laid = [k for k in plan.keys if measured.get(k)]
        new: dict[int, list[float]] = {}
        for k in laid:
            cp = curve_of(study, plan, k)
            bounds = {k: cp.bounds(centre_of(study, k, center), plan.max_extend)}
            new.update(extend_each({k: measured[k]}, step=cp.step, bounds=bounds))
        for k, xs in sorted(new.items(), reverse=True):  # the most expensive first, as the grid
            queue(k, xs)
        if new:
            return sorted({x for xs in new.values() for x in xs})
        rest = [k for k in plan.keys if k not in laid]
        if not plan.focus or not rest:
            return []
        k = rest[0]
        if stop is not None and stop(measured, k):
            return []
        before = plan.before(k)
        found = best_point(measured[before]) if before is not None else None
        c = round(center if found is None else found, 6)
        cp = dataclasses.replace(plan[k], step=plan.step_after(k, measured.get(before)))
        spread = (f" (spread to {name} {before}'s basin)" if cp.step != plan[k].step else "")
        line = (f"{name} {k}: {cp.points} points {cp.step:g} octave apart{spread} × "
                f"{cp.seeds} seeds, centred on {name} {before}'s best point, log2 lr {c:.2f}")
        study.set_user_attr(f"centre_{k}", c)
        study.set_user_attr(f"{STEP}{k}", cp.step)
        study.set_user_attr(f"{LAID}{k}", line)  # for the worker that shows progress
        queue(k, cp.xs(c))
    return line


LAID = "laid_"  # study user attr prefix: the line saying how a focused curve was laid out
EARLY = "early_rejection"  # study user attr: the widths a grid stopped at, and why


def early_look(v, parametrization: str, curves: dict, center: float) -> Verdict | None:
    """The early look's verdict on `curves` (the widths with points, two or more; None with
    fewer): judged at an extra look, 1 − α/2 (`rounds.look_confidence` at look 2), with no
    target and no coordinate check. What `early_rejection` acts on, and what
    benchmarks/early_look.py replays on archived grids."""
    measured = {w: c for w, c in curves.items() if c}
    if len(measured) < 2:
        return None
    limits = limits_from(v, parametrization=parametrization, looks=2)
    return judge(measured, None, center, limits, None)


def early_rejection(ctx: Context, study: optuna.Study, center: float, measured: dict,
                    next_key: int) -> bool:
    """Under the run lock, before the width grid lays out curve `next_key`: the widths it has
    judged by `early_look`; when that rejects the transfer (a drift or gap interval wholly past
    its limit, with the evidence a rejection needs, or divergence), the grid stops there: the
    widths and reasons are kept in the study (`EARLY`; the verdict is then the measured
    widths', `judge_study`), with the line to print (a `LAID` attr, told by whichever worker
    shows progress), and True. A look that only ever rejects adds at most α/2 to the
    false-rejection rate and nothing to the false-pass rate. Off unless
    `validation.early_reject` and the plan focuses."""
    v = ctx.cfg.validation
    if not v.early_reject:
        return False
    verdict = early_look(v, ctx.cfg.proxy.parametrization,
                         {w: measured.get(w) for w in ctx.proxies.widths()}, center)
    if verdict is None or verdict.outcome != REJECTED:
        return False
    widths = verdict.widths
    study.set_user_attr(EARLY, {"widths": widths, "next": next_key,
                                "confidence": verdict.confidence,
                                "because": verdict.rejected_because})
    study.set_user_attr(f"{LAID}{next_key}", (
        f"validation: rejected on widths {', '.join(map(str, widths))} at "
        f"{verdict.confidence:.0%} before width {next_key} was trained "
        f"({'; '.join(verdict.rejected_because)}); the wider curves are not trained"))
    return True


def theory_rejects_at(ctx: Context) -> int | None:
    """The first grid width whose optimum the parametrization's theory
    (`trajectory.prior_offset`) puts past `validation.tolerance_log2` from the narrowest's,
    where a width verdict is expected to reject (SP: the second); None under μP. Prices time
    only: the ETA and `transfer.run.predict`."""
    ws, tol = ctx.proxies.widths(), float(ctx.cfg.validation.tolerance_log2)
    return next((w for w in ws[1:]
                 if abs(prior_offset(ctx.cfg.proxy.parametrization, w, ws[0])) > tol), None)


def theory_rejects(ctx: Context) -> bool:
    """Whether the theory expects the width grid to reject (`theory_rejects_at`): the depth
    grid, skipped after a width rejection (`transfer.verdict.checks.DEPTH_SKIPPED`), is then
    not priced."""
    return theory_rejects_at(ctx) is not None


def expected_widths(ctx: Context) -> list[int]:
    """The width grid's widths the theory expects to be trained: every one, or with the early
    look (`validation.early_reject`, focused grids: `early_rejection`) those up to the one
    where it is expected to reject (`theory_rejects_at`)."""
    ws, v = ctx.proxies.widths(), ctx.cfg.validation
    if not (v.early_reject and v.focus):
        return ws
    at = theory_rejects_at(ctx)
    return ws if at is None else ws[:ws.index(at) + 1]


def grid_widths(ctx: Context, study: optuna.Study) -> list[int]:
    """The widths the width grid measured: every grid width, or those it stopped at when an
    early look rejected the transfer (`early_rejection`)."""
    early = study.user_attrs.get(EARLY)
    return [int(w) for w in early["widths"]] if early else ctx.proxies.widths()


def laid_lines(study: optuna.Study, told: set[str]) -> list[str]:
    """The lines of the curves laid out (by any worker) since `told`, which is updated: the
    worker that shows progress tells what another worker laid out."""
    new = sorted(k for k in study.user_attrs if k.startswith(LAID) and k not in told)
    told.update(new)
    return [str(study.user_attrs[k]) for k in new]


def extend_every_curve(ctx: Context, study: optuna.Study, center: float,
                       curves: Callable[[], dict], queue: Callable[[list[float]], None]
                       ) -> list[float] | None:
    """A second-axis grid's growth (depth, horizon): the lrs one step beyond the edge of every
    curve whose minimum sits at it, within the grid's bounds, queued for every curve by
    `queue`; None while other workers still have points to finish."""
    v = ctx.cfg.validation
    lo, hi = lr_bounds(center, v)
    with ctx.lock():
        if any(t.state in (TrialState.WAITING, TrialState.RUNNING)
               for t in study.get_trials(deepcopy=False)):
            return None
        new = extend_points(curves(), step=v.step_log2, lo=lo, hi=hi)
        queue(new)
    return new


def extend_grid(ctx: Context, study: optuna.Study, center: float) -> list[float] | str | None:
    """The width grid's `grow`: one more point on each side where a width's minimum sits at its
    grid's edge (within `validation.max_extend`), at that width only and every seed (the
    other width's curve is bracketed and needs nothing: `benchmarks/validator_power.py
    --compare` measured the verdict's power unchanged); with focus, then the next width.
    Returns the log2 lrs queued (or the line naming the width laid out); [] when every width
    is bracketed or capped; None while other workers still have grid points to finish
    (decide when the grid is whole)."""
    plan = width_plan(ctx)
    return grow(ctx, study, plan, center, lambda: curves_from(study, plan.keys),
                lambda w, xs: _enqueue(study, [w], plan[w].seeds, xs),
                stop=lambda measured, k: early_rejection(ctx, study, center, measured, k))


def max_seeds(v) -> int:
    """The most seeds a width's grid can reach: its own, and each round's at most."""
    return v.seeds * (1 + MAX_MULTIPLE * v.max_rounds)


def seeds_at(study: optuna.Study, keys, param: str = "width") -> dict[int, int]:
    """Per curve (its `param`: width, or n_layers on the depth grid), how many seeds its points
    have (the configured ones, plus the rounds')."""
    seen: dict[int, set] = {k: set() for k in keys}
    for t in study.get_trials(deepcopy=False):
        p = enqueued_params(t)
        if p.get(param) in seen:
            seen[p[param]].add(int(p["seed"]))
    return {k: len(s) for k, s in seen.items()}


def seed_choices(study: optuna.Study, default: int) -> list[int]:
    """The seed indices a grid trial may take: the study's own where it has a trained trial
    (Optuna fixes a categorical's choices in a study, and a grid made before its seed rounds
    has fewer), else range(`default`)."""
    for t in study.get_trials(deepcopy=False):
        d = t.distributions.get("seed")
        if d is not None:
            return list(d.choices)
    return list(range(default))


def looks_taken(ctx: Context, study: optuna.Study) -> int:
    """The looks at this grid: the first, and one after each seed round."""
    return 1 + sum(k.startswith("seed_round_") for k in study.user_attrs)


def curve_seconds(ctx: Context, study: optuna.Study, param: str, price: Callable[[int], float]
                  ) -> Callable[[int, int], float]:
    """(curve key, trials) → predicted wall seconds of that many more trials of the curve whose
    `param` is that key (width; n_layers on the depth grid) on the workers: `price(key)`, its
    probe, scaled as the curve's finished trials ran (measured ÷ predicted). What a growth round
    and a seed round each cost."""
    ratio, overall = measured_ratios(study.get_trials(deepcopy=False), lambda p: p[param],
                                     lambda p: price(p[param]))
    return lambda k, trials: makespan([price(k) * ratio.get(k, overall)] * trials,
                                      ctx.progress.workers)


def round_seconds(ctx: Context, study: optuna.Study, hp: dict) -> Callable[[int, int], float]:
    """The width grid's `curve_seconds`: (width, trials) → predicted wall seconds."""
    return curve_seconds(ctx, study, "width", lambda w: predict_seconds(ctx, hp, w))


def seed_rounds_on(v) -> bool:
    """Whether a grid may run seed rounds at all (`validation.max_extra_seconds`, `max_rounds`)."""
    return v.max_extra_seconds > 0 and v.max_rounds > 0


def add_seed_round(ctx: Context, study: optuna.Study, center: float, hp: dict
                   ) -> str | list | None:
    """The width grid's seed round (`queue_seed_round`): `validation.seeds` more seeds, or a
    multiple of it, at every point of the cheapest widths predicted to decide the verdict;
    none after an early rejection (`early_rejection`: decided)."""
    v = ctx.cfg.validation
    if EARLY in study.user_attrs:
        return []
    return queue_seed_round(
        ctx, study, stage="validation", param="width", keys=ctx.proxies.widths(),
        center=center, add=v.seeds, max_seeds=max_seeds(v),
        limits=lambda looks: limits_from(v, target_width=ctx.proxies.target_width,
                                         parametrization=ctx.cfg.proxy.parametrization,
                                         looks=looks),
        pricing=lambda: round_seconds(ctx, study, hp))


def queue_seed_round(ctx: Context, study: optuna.Study, *, stage: str, param: str, keys,
                     center: float, limits: Callable[[int], Limits], add: int,
                     max_seeds: int, pricing: Callable[[], Callable[[int, int], float]],
                     max_multiple: int = MAX_MULTIPLE) -> str | list | None:
    """Under the run lock, once a grid (the width grid's, the depth grid's: curves keyed by
    `param`) is whole and bracketed: when only what more seeds decide keeps it from a verdict
    (`Verdict.more_data_decides`: intervals straddling their limits, a curvature S/N under its
    limit; judged at `limits(looks)`), queue `add` more seeds, or a multiple of it up to
    `max_multiple` ×, at every point of the cheapest curves predicted to decide it
    (`rounds.plan_round`), within `validation.max_extra_seconds` (this grid's own) and
    `max_rounds`, and within the study's seed choices (`seed_choices`, `max_seeds` for a new
    one). `pricing()` gives (key, trials) → predicted wall seconds, asked only when a round is
    planned. Returns the line to print; [] when there is nothing to add; None while other
    workers still train."""
    v = ctx.cfg.validation
    if not seed_rounds_on(v):
        return []
    with ctx.lock():
        trials = study.get_trials(deepcopy=False)
        if any(t.state in (TrialState.WAITING, TrialState.RUNNING) for t in trials):
            return None
        done = [k for k in study.user_attrs if k.startswith("seed_round_")]
        if len(done) >= v.max_rounds:
            return []
        looks = looks_taken(ctx, study)
        curves = curves_from(study, keys, axis=param)
        verdict = judge(curves, None, center, limits(looks), None)
        if not verdict.more_data_decides:
            return []
        seeds = seeds_at(study, keys, param)
        room = len(seed_choices(study, max_seeds)) - max(seeds.values(), default=0)
        if room < add:  # a grid made before its seed rounds: no seed index left to add
            return []
        cost = pricing()
        per_seed = {k: cost(k, len(curves[k])) for k in keys}
        spent = sum(r["predicted_seconds"] for k, r in study.user_attrs.items()
                    if k.startswith("seed_round_"))
        plan = plan_round(verdict, base_confidence=v.confidence, looks=looks, seeds=seeds,
                          add=add, seconds_per_seed=per_seed, left=v.max_extra_seconds - spent,
                          max_multiple=min(max_multiple, room // add))
        if plan is None:
            return []
        chosen, n = plan
        for k in chosen:
            for s in range(seeds[k], seeds[k] + n):
                for x, _ in curves[k]:
                    study.enqueue_trial({"log2_lr": x, param: k, "seed": s})
        seconds = n * sum(per_seed[k] for k in chosen)
        study.set_user_attr(f"seed_round_{len(done) + 1}", {
            param: list(chosen), "seeds_added": n, "predicted_seconds": seconds,
            "because": verdict.inconclusive_because,
            "next_look_confidence": look_confidence(v.confidence, looks + 1)})
    where = ", ".join(str(k) for k in chosen)
    return (f"{stage}: only what more seeds decide stands between the grid and a verdict "
            f"({'; '.join(verdict.straddling)}); {n} more seed{'s' if n > 1 else ''} at "
            f"{param} {where} (~{seconds:.0f} s), judged again at "
            f"{look_confidence(v.confidence, looks + 1):.1%}")


def extension_rounds(ctx: Context, study: optuna.Study | None, center: float
                     ) -> dict[int, list[float]]:
    """Per grid width, the probability of each growth round still to be queued (a round: one
    more point beyond an edge, at every seed): the odds a grid has of growing when the optimum
    sits where the parametrization's theory puts it (`curves.extension_odds` at
    `trajectory.prior_offset`: none under μP, an octave lower per doubling under SP), given
    what the width's curve has measured so far (`curves.rounds_left`). Prices time only (the
    ETA and `transfer.run.predict`); the verdict never reads it. Each width by its own plan
    (`width_plan`): a focused width's offset is from the width before it, where it is centred."""
    widths = ctx.proxies.widths()
    plan = width_plan(ctx)
    trials = study.get_trials(deepcopy=False) if study is not None else []
    curves = curves_from(study, widths) if trials else {}
    out = {}
    for w in widths:
        cp = curve_of(study, plan, w)
        centre = centre_of(study, w, center) if study is not None else center
        first = set(cp.xs(centre))
        ref = (plan.before(w) if plan.focus else None) or widths[0]
        odds = extension_odds(prior_offset(ctx.cfg.proxy.parametrization, w, ref),
                              points=cp.points, step=cp.step, max_extend=plan.max_extend)
        mine = [t for t in trials if enqueued_params(t).get("width") == w]
        done = len({round(float(enqueued_params(t)["log2_lr"]), 6) for t in mine} - first)
        whole = bool(mine) and not any(t.state in (TrialState.WAITING, TrialState.RUNNING)
                                       for t in mine)
        bounds = {w: cp.bounds(centre, plan.max_extend)}
        at_edge = (bool(extend_each({w: curves[w]}, step=cp.step, bounds=bounds))
                   if whole else None)
        out[w] = rounds_left(odds, done, at_edge)
    return out


def extension_seconds(ctx: Context, study: optuna.Study, center: float, hp: dict) -> Span:
    """The seconds of the growth rounds still to be queued (`extension_rounds`), after the
    queued grid: each round's seeds on the workers, at its width's probe scaled as the queued
    points are (measured ÷ predicted of that width's finished trials). Expected, and the range
    from the rounds each width grows by at odds ≥ 95 % to those at odds > 5 % (`RANGE`). With
    focus, the widths not laid out yet are in it too: their planned points, certain, or in
    the range only past the width where the early look is expected to reject
    (`expected_widths`); nothing once it has."""
    if EARLY in study.user_attrs:  # the grid stopped: nothing more is queued
        return Span.certain(0.0)
    cost = round_seconds(ctx, study, hp)
    plan = width_plan(ctx)
    low, high = RANGE
    total = Span.certain(0.0)
    laid = seeds_at(study, plan.keys)
    expected = expected_widths(ctx)
    for w, rounds in extension_rounds(ctx, study, center).items():
        if not laid[w]:
            whole = cost(w, plan[w].trials)
            if w not in expected:  # the early look is expected to stop the grid before it
                total += Span(0.0, 0.0, whole)
                continue
            total += Span.certain(whole)
        s = cost(w, plan[w].seeds)
        total += Span(s * sum(rounds), s * sum(p >= high for p in rounds),
                      s * sum(p > low for p in rounds))
    return total


def train_grid(ctx: Context, study: optuna.Study, stage: str,
               run: Callable[[optuna.Trial], None], extend: Callable[[], list[float] | None],
               left: Callable[[], Left], after: Callable[[], float | Span] = float) -> None:
    """This worker's share of a grid study (the width grid's, the depth and horizon grids'):
    `run` trains one taken trial; then `extend` queues points at an edge-hitting side (None:
    other workers still have points; []: bracketed or capped, done). For the ETA (not asked
    where nothing is shown: a worker's): `left`, the queued points' predicted seconds
    (`queued_trials`); `after`, the seconds of the points still to be queued, which run once
    the queued ones are done (`extension_seconds`; none by default)."""
    # nothing shown (a worker): no ETA, so no probe of a shape this worker may never train
    remaining, then = (left, after) if ctx.progress.shown else (list, float)
    told = {k for k in study.user_attrs if k.startswith(LAID)}  # a resumed run's, told before

    def tell() -> None:
        if ctx.progress.shown:
            for line in laid_lines(study, told):
                ctx.progress.line(line)

    ctx.progress.stage_start(stage, n_finished(study), len(study.get_trials(deepcopy=False)),
                             remaining(), calibrated=True, then=then())
    while True:
        for trial in work(ctx, study, None):
            run(trial)
            tell()
            ctx.progress.update(n_finished(study), None, remaining_seconds=remaining(),
                                then=then(), total=len(study.get_trials(deepcopy=False)))
        new = extend()
        if new is None:
            continue  # others' points first: `work` runs or waits for them
        if not new:
            tell()  # a grid stopped early says so (`early_rejection`)
            break
        tell()
        if not isinstance(new, str):  # a laid-out curve's line: `tell`, whoever laid it
            ctx.progress.line(f"{stage}: optimum at the grid's edge; extending to log2 lr "
                              f"{', '.join(f'{x:.2f}' for x in new)}")
        ctx.progress.stage_start(stage, n_finished(study), len(study.get_trials(deepcopy=False)),
                                 remaining(), calibrated=True, then=then())
    ctx.progress.stage_end()


def run_grid(ctx: Context, hp: dict) -> optuna.Study:
    """Train every queued grid point (this worker's share of them), extending the grid on the
    side where an optimum sits at its edge until both widths are bracketed or the cap is hit."""
    v = ctx.cfg.validation
    center = round(math.log2(hp["lr"]), 6)
    lo, hi = width_plan(ctx).span(center)
    widths = ctx.proxies.widths()
    study = open_validation_study(ctx)
    enqueue_grid(ctx, study, center)

    def run(trial: optuna.Trial) -> None:
        x = trial.suggest_float("log2_lr", lo, hi)
        width = trial.suggest_categorical("width", widths)
        seed = trial.suggest_categorical("seed", list(range(max_seeds(v))))
        run_one(ctx, study, trial, dict(hp, lr=2.0 ** x), width=width,
                seed=validation_seed(ctx.cfg.proxy.seed, seed), stage="validation", prune=False)

    def extend() -> list[float] | str | None:
        new = extend_grid(ctx, study, center)
        return new if new is None or new else add_seed_round(ctx, study, center, hp)

    train_grid(ctx, study, "validation", run, extend,
               lambda: queued_trials(study, lambda p: predict_seconds(ctx, hp, p["width"]),
                                     key=lambda p: p["width"]),
               lambda: extension_seconds(ctx, study, center, hp))
    return study


def curves_from(study: optuna.Study, keys, axis: str = "width") -> dict:
    """The grid as plain curves: key (the `axis` parameter: width, n_layers or tokens) ->
    [(log2 lr, [loss per seed, in seed order; nan if diverged])]. The seed order is the
    column the verdict's two-way layout (point × seed) reads as one seed's level offset, so it
    must not follow the trials' numbers: a trial re-queued after its worker died (or a second
    machine's) is numbered after the other seeds of its point."""
    by: dict = {}
    for t in study.get_trials(deepcopy=False):
        if t.state not in (TrialState.COMPLETE, TrialState.PRUNED):
            continue
        loss = t.value if t.state == TrialState.COMPLETE else math.nan
        by.setdefault(t.params[axis], {}).setdefault(t.params["log2_lr"], []).append(
            (t.params.get("seed", 0), loss))
    return {k: sorted((x, [y for _, y in sorted(ys, key=lambda p: p[0])])
                      for x, ys in by.get(k, {}).items()) for k in keys}


def judge_study(ctx: Context, study: optuna.Study, tuned_lr: float, coord: dict,
                target_width: int | None = None) -> Verdict:
    """The pure verdict on this run's grid (the widths it measured: `grid_widths`)."""
    curves = curves_from(study, grid_widths(ctx, study))
    limits = limits_from(ctx.cfg.validation, target_width=target_width,
                         parametrization=ctx.cfg.proxy.parametrization,
                         looks=looks_taken(ctx, study))
    verdict = judge(curves, None, round(math.log2(tuned_lr), 6), limits, coord)
    seeds = ctx.cfg.validation.seeds
    widest = max(curves)
    return with_hint(verdict, study, curves, "width",
                     lambda k: f"validation.seeds={k * int(seeds)}", limits, width_plan(ctx),
                     farther=(f"proxy.validation_width={2 * widest}", WIDER_COST))


# a curve at twice the widest width, in trial-seconds per the widest curve's: a training step of
# the 3B's proxies at 512 × 2 took 3.28-3.29 × one at 256 × 2 (batch 8, 1 thread, two runs of
# `benchmarks/step_speed.py --shapes 256x2 512x2`, 2026-12-07); by FLOPs per token it would be
# under 4 × (the d_model² terms 4 ×, the embedding's and attention's 2 ×)
WIDER_COST = 3.3


def with_hint(verdict: Verdict, study: optuna.Study, curves: dict, axis: str,
              knob: Callable[[int], str], limits: Limits, plan: GridPlan | None = None,
              farther: tuple[str, float] | None = None) -> Verdict:
    """`verdict` whose `decide_with` prices what would decide it: where more seeds are what
    stands in the way (`rounds.decide_hint`), from the seeds each of its `curves` has, the seeds
    `plan` gave it (what `knob(k)` multiplies by k; None: the seeds it has) and the seconds each
    curve trained (the trials' own); where the trajectory models' disagreement at the target
    does (`rounds.farther_hint`), `farther`'s (knob, cost ratio): one more curve nearer the
    target. Else as it is (and always on a budget that cannot pass, `Limits.can_pass` false:
    its own hint names the budget that can)."""
    if verdict.outcome != "inconclusive" or not limits.can_pass:
        return verdict
    seeds = {k: min((len(ys) for _, ys in pts), default=0) for k, pts in curves.items()}
    if not all(seeds.values()):
        return verdict
    planned = {k: plan[k].seeds if plan is not None and k in plan.keys else n
               for k, n in seeds.items()}
    seconds = dict.fromkeys(curves, 0.0)
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.COMPLETE and t.params.get(axis) in seconds:
            seconds[t.params[axis]] += t.user_attrs.get("seconds", 0.0)
    hint = decide_hint(verdict, seeds=seeds, seconds=seconds, knob=knob, planned=planned)
    if hint is None and farther is not None:
        hint = farther_hint(verdict, seconds=seconds, knob=farther[0], cost_ratio=farther[1])
    return verdict if hint is None else dataclasses.replace(verdict, decide_with=hint)


def buildable_widths(family, widths) -> tuple[list[int], str]:
    """The `widths` the family can build (`check_width`, where it has one), and why the first it
    cannot was refused ("" when it builds them all)."""
    check = getattr(family, "check_width", None)
    built, why = [], ""
    for w in widths:
        try:
            if check is not None:
                check(w)
            built.append(w)
        except ValueError as e:
            why = why or str(e)
    return built, why


def coord_widths(ctx: Context) -> list[int]:
    """The widths the coordinate check trains: `validation.coord_widths` that the family can
    build (`transfer.run.predict` prices the same list; `transfer.run.planner` refuses a list
    with fewer than two)."""
    return buildable_widths(ctx.proxies.family, ctx.cfg.validation.coord_widths)[0]


def run_coord_check(ctx: Context, hp: dict) -> CoordResult:
    """The coordinate check across `coord_widths`, with the tuned multipliers and lr."""
    v = ctx.cfg.validation
    family = ctx.proxies.family.replace(**{k: float(hp[k]) for k in MODEL_HPARAMS})
    return coord_check(family, widths=coord_widths(ctx), corpus=ctx.corpus, steps=v.coord_steps,
                       lr=float(hp["lr"]), seed=ctx.cfg.proxy.seed, seeds=v.coord_seeds,
                       max_slope=v.coord_max_slope, confidence=v.confidence)
