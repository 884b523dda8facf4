"""The checks after the stages: every worker trains its share of the grids (`run_grids`: the
same grids for all, so they cannot diverge); the one that claims the run under the run lock
runs the coordinate checks and judges the width, depth and horizon grids (`run_checks`).

Measurements and verdicts only: the figures are drawn from them by `transfer.outputs.plots`,
the files written by `transfer.outputs.assemble`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import optuna

from transfer.search import Context
from transfer.search.phases import timed
from transfer.search.storage import owner_alive, this_process
from transfer.verdict import depth, horizon
from transfer.verdict.coord import CoordResult
from transfer.verdict.judge import Verdict
from transfer.verdict.width import judge_study, run_coord_check, run_grid

__all__ = ["Checks", "mark_finalized", "run_checks", "run_grids", "validate_transfer"]


@dataclass
class Checks:
    """What the validator found, for the worker that writes the results."""

    study: optuna.Study  # the width grid's (its user attributes hold the coordinate check)
    verdict: Verdict
    coord_seconds: float = 0.0  # spent on the coordinate check in this launch
    depth: Verdict | None = None
    horizon: Verdict | None = None
    horizon_result: dict | None = None  # transfer.verdict.horizon.measure
    # the coordinate checks run in this launch, by axis ("width", "depth"): their figures
    coord: dict[str, CoordResult] = field(default_factory=dict)


def run_grids(ctx: Context, hp: dict) -> optuna.Study | None:
    """This worker's share of every validation grid the config asks for: the width grid, then
    the depth and horizon grids (which copy points from it). None when validation is off.
    Worker processes and the finalizing one both call this: they train the same grids."""
    if not ctx.cfg.validation.enabled:
        return None
    with timed(ctx.phases, "validation"):
        study = run_grid(ctx, hp)
    if depth.enabled(ctx.cfg):
        with timed(ctx.phases, "depth"):
            depth.run_depth_grid(ctx, hp, study)
    if horizon.enabled(ctx.cfg):
        with timed(ctx.phases, "horizon"):
            horizon.run_horizon_grid(ctx, hp, study)
    return study


def _claim(ctx: Context, study: optuna.Study) -> bool:
    """True for exactly one live worker of the run: the one that writes the results."""
    me = this_process()
    with ctx.lock():
        claim = study.user_attrs.get("finalize")
        if claim and claim["owner"] != me and owner_alive(claim["owner"]):
            stale = not claim["done"] and time.time() - claim["time"] > 600
            if not stale:
                return False
        study.set_user_attr("finalize", {"owner": me, "time": time.time(), "done": False})
        return True


def validate_transfer(ctx: Context, hp: dict, *, coord_plotted: bool,
                      target_width: int | None = None) -> Checks | None:
    """The grids (this worker's share); then, for the one worker that claims the run, the
    coordinate check (once: kept in the study; again only when `coord_plotted` is false, its
    plot missing from the run folder) and the width verdict.

    None for every other worker. The sweep and `python -m transfer.validate` both validate
    through here (validation must be enabled).
    """
    study = run_grids(ctx, hp)
    if not _claim(ctx, study):
        return None
    ran, coord_seconds = {}, 0.0
    coord = study.user_attrs.get("coord_check")
    if coord is None or not coord_plotted:
        t = time.perf_counter()
        with timed(ctx.phases, "coord"):
            ran["width"] = run_coord_check(ctx, hp)
        coord_seconds = time.perf_counter() - t
        coord = ran["width"].to_dict()
        study.set_user_attr("coord_check", coord)
    verdict = judge_study(ctx, study, float(hp["lr"]), coord, target_width=target_width)
    return Checks(study, verdict, coord_seconds, coord=ran)


def run_checks(ctx: Context, hp: dict, *, coord_plotted: bool, target_width: int,
               target_depth: int) -> Checks | None:
    """The width check, and the depth and horizon checks where enabled; None for a worker that
    did not claim the run."""
    checks = validate_transfer(ctx, hp, coord_plotted=coord_plotted, target_width=target_width)
    if checks is None:
        return None
    if depth.enabled(ctx.cfg):
        with timed(ctx.phases, "coord"):  # the depth coordinate check (its grid is trained)
            checks.depth, res = depth.validate_depth(ctx, hp, checks.study,
                                                     target_depth=target_depth)
        if res is not None:
            checks.coord["depth"] = res
    if horizon.enabled(ctx.cfg):
        checks.horizon, checks.horizon_result = horizon.validate_horizon(ctx, hp, checks.study)
    return checks


def mark_finalized(study: optuna.Study) -> None:
    """Every result file is written: a later claim by another worker is not stale."""
    study.set_user_attr("finalize", {"owner": this_process(), "time": time.time(), "done": True})
