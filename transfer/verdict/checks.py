"""The checks after the stages, one `Check` per axis: width (always, when validation is on),
depth and horizon (where the config asks for them).

Every worker trains its share of every enabled check's grid (`run_grids`: the same grids for
all, so they cannot diverge; the width grid first, since the others copy its points). The one
worker that claims the run under the run lock then judges each check (`run_checks`): the
coordinate checks, the verdicts, the horizon's measured exponent.

Measurements and verdicts only: the figures are drawn from them by `transfer.outputs.plots`,
the files written by `transfer.run.assemble`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna

from transfer.judge.joint import Joint
from transfer.judge.joint import lines as joint_lines
from transfer.judge.verdict import Verdict, verdict_lines
from transfer.search import Context
from transfer.search.phases import timed
from transfer.search.storage import FINALIZE_CLAIM, owner_alive, this_launch, this_process
from transfer.verdict import depth, horizon
from transfer.verdict.coord import CoordResult
from transfer.verdict.width import judge_study, run_coord_check, run_grid

__all__ = ["CHECKS", "Check", "Checks", "enabled_checks", "mark_finalized", "run_checks",
           "run_grids"]


@dataclass(frozen=True)
class Check:
    """One validation axis: whether the config asks for it, its grid (this worker's share),
    its verdict (with what else it measured) and its printed lines."""

    name: str  # "width", "depth" or "horizon": the key of its result
    phase: str  # the grid's phase in cost.json's measured seconds
    enabled: Callable[[Any], bool]  # of the config
    # (ctx, hp, the width grid's study or None for the width check itself) → its grid's study
    grid: Callable[[Context, dict, optuna.Study | None], optuna.Study]
    # (ctx, hp, width study, target along the axis or None, coord_plotted) → (verdict, extra):
    # extra is the coordinate check run now (width, depth) or the measured exponent (horizon)
    judge: Callable[[Context, dict, optuna.Study, int | None, bool], tuple[Verdict, Any]]
    lines: Callable[[Verdict, Any], list[str]]  # what the run prints of it


def _width_judge(ctx: Context, hp: dict, study: optuna.Study, target: int | None,
                 coord_plotted: bool) -> tuple[Verdict, CoordResult | None]:
    """The coordinate check (once: kept in the study; again only when its plot is missing from
    the run folder) and the width verdict, with the trajectory to `target` (the target width)."""
    ran = None
    coord = study.user_attrs.get("coord_check")
    if coord is None or not coord_plotted:
        with timed(ctx.phases, "coord"):
            ran = run_coord_check(ctx, hp)
        coord = ran.to_dict()
        study.set_user_attr("coord_check", coord)
    return judge_study(ctx, study, float(hp["lr"]), coord, target_width=target), ran


def _depth_judge(ctx, hp, study, target, coord_plotted):
    with timed(ctx.phases, "coord"):  # the depth coordinate check (its grid is trained)
        return depth.validate_depth(ctx, hp, study, target_depth=target)


def _horizon_judge(ctx, hp, study, target, coord_plotted):
    return horizon.validate_horizon(ctx, hp, study)


def _width_lines(verdict: Verdict, extra) -> list[str]:
    return verdict_lines(verdict)


WIDTH = Check("width", "validation", lambda cfg: bool(cfg.validation.enabled),
              lambda ctx, hp, _: run_grid(ctx, hp), _width_judge, _width_lines)
DEPTH = Check("depth", "depth",
              lambda cfg: bool(cfg.validation.enabled) and depth.enabled(cfg),
              lambda ctx, hp, study: depth.run_depth_grid(ctx, hp, study), _depth_judge,
              lambda verdict, extra: depth.lines(verdict))
HORIZON = Check("horizon", "horizon", horizon.enabled,
                lambda ctx, hp, study: horizon.run_horizon_grid(ctx, hp, study),
                _horizon_judge, lambda verdict, extra: [horizon.line(extra)])
CHECKS: tuple[Check, ...] = (WIDTH, DEPTH, HORIZON)  # the width grid first: the others copy it


def enabled_checks(cfg) -> list[Check]:
    """The checks `cfg` asks for, in order; none when validation is off."""
    return [c for c in CHECKS if WIDTH.enabled(cfg) and c.enabled(cfg)]


@dataclass
class Checks:
    """What the validator found, for the worker that writes the results."""

    study: optuna.Study  # the width grid's (its user attributes hold the coordinate check)
    # check name → (verdict, extra), in CHECKS order, the enabled ones only
    results: dict[str, tuple[Verdict, Any]] = field(default_factory=dict)
    coord_seconds: float = 0.0  # spent on the coordinate checks (width, depth) in this launch
    # the lr at the target's width and depth (transfer.judge.joint), where depth was checked
    joint: Joint | None = None
    skipped: dict[str, str] = field(default_factory=dict)  # check name → why it did not run

    @property
    def verdict(self) -> Verdict:
        return self.results["width"][0]

    @property
    def depth(self) -> Verdict | None:
        return self.results.get("depth", (None, None))[0]

    @property
    def horizon(self) -> Verdict | None:
        return self.results.get("horizon", (None, None))[0]

    @property
    def horizon_result(self) -> dict | None:
        """The measured exponent (`transfer.verdict.horizon.measure`)."""
        return self.results.get("horizon", (None, None))[1]

    @property
    def coord(self) -> dict[str, CoordResult]:
        """The coordinate checks run in this launch, by axis ("width", "depth"): their figures."""
        return {name: extra for name, (_, extra) in self.results.items()
                if isinstance(extra, CoordResult)}

    def lines(self, *, width: bool = False) -> list[str]:
        """Every check's printed lines, the width check's only with `width` (the sweep's run
        summary prints those among its own)."""
        by = {c.name: c for c in CHECKS}
        out = [line for name, (v, extra) in self.results.items() if width or name != "width"
               for line in by[name].lines(v, extra)]
        out += [f"   {name} check  NOT RUN: {why}" for name, why in self.skipped.items()]
        return out + (joint_lines(self.joint) if self.joint is not None else [])

    def outcomes(self) -> list[str]:
        """The verdicts' outcomes that decide the exit code: width and depth (the horizon
        check measures an exponent; its transfer outcome is not used)."""
        return [v.outcome for name, (v, _) in self.results.items() if name != "horizon"]


def width_rejects(ctx: Context, hp: dict, study: optuna.Study) -> str | None:
    """The width verdict on the finished width grid's curves alone (no coordinate check, no
    target): the reasons when it rejects the transfer, else None. Every worker reads the same
    finished grid, so all of them skip the depth grid together (`DEPTH_SKIPPED`)."""
    v = judge_study(ctx, study, float(hp["lr"]), {})
    return "; ".join(v.rejected_because) if v.outcome == "rejected" else None


DEPTH_SKIPPED = ("the depth check did not run: the width verdict rejected the transfer on its "
                 "lr curves ({}), so no lr transfers to the target's depth either")


def _skipped(ctx: Context, hp: dict, check: Check, study: optuna.Study | None) -> str | None:
    """Why `check` does not run on this grid: the depth check after a width rejection."""
    if check is DEPTH and study is not None:
        why = width_rejects(ctx, hp, study)
        return DEPTH_SKIPPED.format(why) if why else None
    return None


def run_grids(ctx: Context, hp: dict) -> optuna.Study | None:
    """This worker's share of every enabled check's grid, the width grid first (the others
    copy points from it). None when validation is off. Worker processes and the finalizing
    one both call this: they train the same grids."""
    study = None
    for check in enabled_checks(ctx.cfg):
        if _skipped(ctx, hp, check, study):
            continue
        with timed(ctx.phases, check.phase):
            grid = check.grid(ctx, hp, study)
        study = study or grid
    return study


def _claim(ctx: Context, study: optuna.Study) -> bool:
    """True for exactly one live worker of the run: the one that writes the results. A job
    that starts after another job of its launch wrote them (a SLURM array with more tasks than
    slots) leaves them: a launch emits once; a later launch (a rerun) writes them again."""
    me = this_process()
    with ctx.lock():
        claim = study.user_attrs.get(FINALIZE_CLAIM)
        if claim and claim["done"] and claim.get("launch") is not None \
                and claim.get("launch") == this_launch():
            return False
        if claim and claim["owner"] != me and owner_alive(claim["owner"]):
            stale = not claim["done"] and time.time() - claim["time"] > 600
            if not stale:
                return False
        study.set_user_attr(FINALIZE_CLAIM, {"owner": me, "time": time.time(), "done": False})
        return True


def run_checks(ctx: Context, hp: dict, *, coord_plotted: bool,
               targets: Mapping[str, int | None] | None = None) -> Checks | None:
    """The grids (this worker's share); then, for the one worker that claims the run, every
    enabled check's verdict, `targets` giving each axis's target (the target width, depth).
    None for every other worker. The sweep and `python -m transfer.validate` both validate
    through here (validation must be enabled)."""
    study = run_grids(ctx, hp)
    if not _claim(ctx, study):
        return None
    checks = Checks(study)
    before = ctx.phases.get("coord", 0.0)
    for check in enabled_checks(ctx.cfg):
        why = _skipped(ctx, hp, check, study)
        if why:
            checks.skipped[check.name] = why
            continue
        checks.results[check.name] = check.judge(ctx, hp, study, (targets or {}).get(check.name),
                                                 coord_plotted)
    checks.coord_seconds = ctx.phases.get("coord", 0.0) - before
    t = targets or {}
    if checks.depth is not None and t.get("width") and t.get("depth"):
        checks.joint = depth.joint_estimate(ctx, checks.verdict, checks.depth,
                                            target_width=int(t["width"]),
                                            target_depth=int(t["depth"]))
    return checks


def mark_finalized(study: optuna.Study) -> None:
    """Every result file is written: a later claim by another worker is not stale."""
    study.set_user_attr(FINALIZE_CLAIM, {"owner": this_process(), "time": time.time(),
                                         "done": True, "launch": this_launch()})
