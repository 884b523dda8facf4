"""What a finished run prints: the stages' winners, the verdict, the cost, what μP did not carry.

Plain lines from plain values (stage summaries, the verdict, cost.json and target.yaml
contents); the job prints them through its progress stream.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from transfer.judge.verdict import Verdict, verdict_lines

if TYPE_CHECKING:  # a type only: the summary needs no Optuna
    from transfer.search import StageSummary


def run_lines(*, name: str, run_dir: Path, stages: Sequence[StageSummary],
              verdict: Verdict | None, cost: Mapping, target: Mapping) -> list[str]:
    """The sweep's closing summary: one line per stage, the verdict, the target's cost and the
    tuning's share of it, then the names of what μP did not transfer."""
    lines = [f"\n== {name}  ({run_dir})"]
    for s in stages:
        best = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in s.best_params.items())
        lines.append(f"   {s.name:<12} {s.complete}/{s.trials} complete, {s.pruned} pruned  "
                     f"best {s.best_value if s.best_value is None else round(s.best_value, 4)}"
                     f"  {best}")
    if verdict is not None:
        lines += verdict_lines(verdict)
    lines.append(lr_line(target))
    if (target.get("provenance") or {}).get("launch_warning"):
        lines.append(f"   WARNING      {target['provenance']['launch_warning']}")
    lines.append(
        f"   target run   {cost['target']['gpu_hours']:.3g} GPU-h on {cost['target']['hardware']}"
        f"; tuning {cost['tuning']['gpu_hours']:.3g} GPU-h-equivalent "
        f"({cost['tuning_fraction']:.2e} of it); saved {saved_text(cost)}")
    lines.append(not_transferred_line(target))
    return lines


def saved_text(cost: Mapping) -> str:
    """The saving claimed against fitting one's own laws: none when not validated, and said
    so when it is negative (a target small enough that its own laws cost less than the tuning)."""
    saved = cost["saved_gpu_hours"]
    if saved is None:
        return "nothing claimed (not validated)"
    return f"{saved:.3g} GPU-h vs fitting own laws" + (
        " (negative: the tuning cost more than that baseline would)" if saved < 0 else "")


def is_mup(target: Mapping) -> bool:
    """Whether target.yaml's proxies were μP (SP runs emit too, as a baseline that transfers
    nothing): what the summary and the report may say was μP-transferred."""
    return (target.get("mup") or {}).get("parametrization", "mup") == "mup"


def not_transferred_line(target: Mapping) -> str:
    """target.yaml's `provenance.not_transferred`, by name: each item's reason is there, and the
    named rule that set each value (transfer.core.scaling) is in `train.provenance`."""
    items = (target.get("provenance") or {}).get("not_transferred") or []
    names = list(dict.fromkeys(i["name"] for i in items))  # in order, each once
    head = "not transferred by μP" if is_mup(target) else "not transferred (SP proxies: no value is μP-transferred)"
    return (f"   {head}: {', '.join(names) or 'nothing listed'} (reasons: "
            "target.yaml provenance.not_transferred; the rules that set them: train.provenance)")


def lr_line(target: Mapping) -> str:
    """The emitted lr: at the target width with its interval, or the stages' pick; then the
    launch lr with its interval and that interval's largest parts."""
    lr = (target.get("provenance") or {}).get("lr") or {}
    train = target.get("train") or {}
    if "interval" not in lr:
        return f"   emitted lr   {lr.get('value', math.nan):.3g} ({lr.get('source', '')})"
    lo, hi = lr["interval"]
    if "target_depth" in lr:  # the joint width × depth estimate (transfer.judge.joint)
        d = lr["parts"]["depth"]
        where = (f"at width {lr['target_width']} × {lr['target_depth']} layers [{lo:.3g}, "
                 f"{hi:.3g}] ({lr['confidence']:.0%}, {lr['model']} over widths {lr['widths']} "
                 f"+ {d['model']} over depths {d['depths']}: depth moves it "
                 f"{d['estimate']:+.2f} octave, log_linear says "
                 f"{d['models']['log_linear']['estimate']:+.2f})")
    else:
        where = (f"at width {lr['target_width']} [{lo:.3g}, {hi:.3g}] ({lr['confidence']:.0%}, "
                 f"{lr['model']} over widths {lr['widths']}; {lr['other_model']['model']} "
                 f"says {2.0 ** lr['other_model']['estimate']:.3g})")
    return (f"   emitted lr   {lr['value']:.3g} {where}; " + launch_text(train)
            + ("; the interval spans width only (the target's depth is not in it: target.yaml "
               "provenance.lr.interval_spans)"
               if str(lr.get("interval_spans", "")).startswith("width only") else ""))


def launch_text(train: Mapping, *, largest: int = 2) -> str:
    """`launch lr X, 90 % 2^[a, b] (w octaves; horizon ±h (s %), batch ±b (s %), ...)`: the
    launch lr, its interval in octaves and its `largest` parts by share of the variance."""
    lr = train.get("lr", math.nan)
    parts = train.get("lr_interval_parts")
    if not parts:
        launch = train.get("lr_interval") or [math.nan, math.nan]
        return f"launch lr {lr:.3g} [{launch[0]:.3g}, {launch[1]:.3g}]"
    a, b = train["lr_interval_log2"]
    named = sorted(((k, v) for k, v in parts.items() if isinstance(v, Mapping)),
                   key=lambda kv: -kv[1]["variance_share"])
    shown = ", ".join(f"{k} ±{v['half_width_octaves']:.2g} oct ({v['variance_share']:.0%})"
                      for k, v in named[:largest])
    return (f"launch lr {lr:.3g}, {parts['confidence']:.0%} 2^[{a:.1f}, {b:.1f}] "
            f"({b - a:.1f} octaves; largest parts: {shown})")
